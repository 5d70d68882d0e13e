"""The MATCH_RECOGNIZE clause's spec (``kit.match_recognize.spec.MatchRecognize``), built from
sqlglot's tree of the query.

The kit's Flink dialect (``dialect.Flink``) reads the clause, once, with the rest of the query:
a ``MatchRecognize`` node whose PARTITION BY, ORDER BY, MEASURES, DEFINE, WITHIN, SUBSET and
AFTER MATCH SKIP are sqlglot nodes that know where they stand in the text (``node.meta``).
``SpecReader`` makes the spec of that node: an expression node per spec node, a check per
thing the spec needs, each error at the user's line and column. Why sqlglot's nodes rather
than the kit's own parser of the clause: one tree, read once, serves every reader -- the
planner replaces this very node with a placeholder, the spec is built from it, and no reader
parses the tokens a second time (``statement``'s module doc). The dialect reads the clause
strictly and says what the kit's parser said (``expected 'AS' but found 'p'``); what sqlglot
reads otherwise (calls by name, Flink's precedence, FIRST/LAST offsets, INTERVALs whole) it
was taught to keep.

Grammar::

    MATCH_RECOGNIZE (
        [PARTITION BY column, ...]
        [ORDER BY column [ASC | DESC], ...]
        [MEASURES expr AS alias, ...]
        [ONE ROW PER MATCH
         | ALL ROWS PER MATCH [SHOW EMPTY MATCHES | OMIT EMPTY MATCHES | WITH UNMATCHED ROWS]]
        [AFTER MATCH SKIP (PAST LAST ROW | TO NEXT ROW | TO FIRST v | TO LAST v | TO v)]
        PATTERN ( pattern ) [WITHIN INTERVAL 'n' unit]
        [SUBSET u = (v, ...), ...]
        [DEFINE v AS expr, ...]
    )

    pattern     := concat ('|' concat)*
    concat      := quantified+
    quantified  := primary [('*' | '+' | '?' | '{' n '}' | '{' n ',' [m] '}' | '{' ',' m '}') ['?']]
    primary     := variable | '(' [pattern] ')' | PERMUTE '(' pattern, ... ')'
                 | '{-' pattern '-}' | '^' | '$'

sqlglot keeps the PATTERN as its text; its grammar is read here from the sqlglot tokens it
spans (no text is read again). Expressions: ``OR`` < ``AND`` < ``NOT`` < comparison,
``IS [NOT] NULL``, ``[NOT] BETWEEN``, ``[NOT] IN``, ``[NOT] LIKE`` < ``||`` < ``+ -`` <
``* / %`` < unary ``-``; one may be ``MAX_DEPTH`` nodes deep.

Under semantics="standard" (``fold``) an unquoted pattern variable or subset name is its
upper-case form, as standard SQL folds names; a delimited one (``"x"``, which ``kit.sql``
back-quotes first) keeps its case. An uncorrelated subquery in DEFINE or MEASURES is a
``Subquery`` node; ``resolve_subqueries`` puts its answer in its place.

The clause is checked: DEFINE, SUBSET and SKIP TO name pattern variables, measure aliases are
unique (ignoring case, as Spark columns are), qualifiers ``v.col`` name a pattern variable or
a subset.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal

from sqlglot import exp
from sqlglot.tokens import TokenType

from ..match_recognize import spec as S
from ..match_recognize.budget import MAX_THREADS, STEP_BUDGET
from ..match_recognize.errors import MatchRecognizeError
from ..match_recognize.expressions import walk
from ..match_recognize.spec import STANDARD_AGGREGATES
from .dialect import Flink, MatchRecognize, Semantics, first_token, is_name, type_spelling
from .errors import SqlError, error_at, position
from .intervals import interval_ms
from .statement import Statement

__all__ = ["AGGREGATES", "MAX_DEPTH", "NAV_OFFSETS", "SpecReader", "depth", "expression_of", "number_literal",
           "parse_match_recognize", "match_options", "subqueries_of", "resolve_subqueries"]


def match_options(config: dict) -> tuple:
    """``kit.sql``'s ``config`` split into ``match_recognize``'s keywords (from the keys
    ``kit.match-recognize.step-budget`` and ``kit.match-recognize.max-threads``) and the rest."""
    names = {STEP_BUDGET: "step_budget", MAX_THREADS: "max_threads"}
    return ({names[key]: value for key, value in config.items() if key in names},
            {key: value for key, value in config.items() if key not in names})


#: Built-in aggregate functions; callers add user aggregates by name.
AGGREGATES = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX"})

#: How deep an expression may be: the walks over it, the kit's and pickle's as Spark sends it to
#: the workers, recurse once per level (``a + b + c`` is three: a chain of operators nests to the left).
MAX_DEPTH = 200

#: The navigation functions and their default offsets.
NAV_OFFSETS = {"FIRST": 0, "LAST": 0, "PREV": 1, "NEXT": 1}
_INT_MAX, _BIGINT_MAX = 2**31 - 1, 2**63 - 1
_BINARY = {exp.Or: "OR", exp.And: "AND", exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=",
           exp.GT: ">", exp.GTE: ">=", exp.DPipe: "||", exp.Add: "+", exp.Sub: "-", exp.Mul: "*",
           exp.Div: "/", exp.Mod: "%"}
_AT_MOST = {"CLASSIFIER": 1, "MATCH_NUMBER": 0, "MATCH_PROCTIME": 0, "MATCH_ROWTIME": 1}   # arguments
_QUANTIFIERS = {"*": (0, None), "+": (1, None), "?": (0, 1), "??": (0, 1)}


def parse_match_recognize(text: str, aggregates=()) -> S.MatchRecognize:
    """The clause ``MATCH_RECOGNIZE ( ... )`` that is all of ``text``; ``aggregates`` names user
    aggregate functions.

    >>> parse_match_recognize("MATCH_RECOGNIZE (PATTERN (A B+) DEFINE B AS B.x > PREV(B.x))").pattern
    Concat(items=(Label(name='A'), Quantified(node=Label(name='B'), min=1, max=None, greedy=True)))
    """
    statement = Statement(text)
    tree = statement.tree
    if not isinstance(tree, MatchRecognize):
        raise statement.parse_error or SqlError("expected 'MATCH_RECOGNIZE'", 1, 1, text)
    return SpecReader(statement, aggregates).clause(tree)


def expression_of(text: str, aggregates=()):
    """The MEASURES or DEFINE expression that is all of ``text`` as a spec node.

    >>> expression_of("LAST(B.price, 1) IS NULL OR B.price > 2 * LAST(B.price, 2)")
    Binary(op='OR', left=IsNull(arg=Nav(kind='LAST', arg=Column(name='price', var='B'), offset=1), \
negated=False), right=Binary(op='>', left=Column(name='price', var='B'), right=Binary(op='*', \
left=Literal(value=2, type='INT'), right=Nav(kind='LAST', arg=Column(name='price', var='B'), \
offset=2))))
    """
    statement = Statement(text)
    raw, _ = statement.scanned
    if raw is None:                       # sqlglot cannot read it: the kit's lexer says where,
        statement.tokens                  # (a SqlError) or else sqlglot's tokenizer does
        raise statement.parse_error
    node = Flink().parser().parse_match_expression(raw, text)
    return SpecReader(statement, aggregates).whole(node)


def number_literal(text: str, pos=None) -> S.Literal:
    """A number as written: INT or BIGINT by size, ``1.5`` DECIMAL, ``1e3`` DOUBLE.

    >>> number_literal("2147483648")
    Literal(value=2147483648, type='BIGINT')
    """
    if "e" in text.lower():
        return S.Literal(float(text), "DOUBLE", pos=pos)
    if "." in text:
        return S.Literal(decimal.Decimal(text), "DECIMAL", pos=pos)
    value = int(text)
    kind = "INT" if value <= _INT_MAX else "BIGINT" if value <= _BIGINT_MAX else "DECIMAL"
    return S.Literal(value if kind != "DECIMAL" else decimal.Decimal(value), kind, pos=pos)


class SpecReader:
    """Builds ``kit.match_recognize.spec`` nodes from sqlglot's nodes of ``statement``'s tree,
    checking what the spec needs; ``aggregates`` names user aggregates, ``fold`` upper-cases
    unquoted pattern variable names (semantics="standard").

    >>> s = Statement("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (a) DEFINE a AS x > 1)")
    >>> SpecReader(s, fold=True).clause(s.tree.find(MatchRecognize)).define
    (('A', Binary(op='>', left=Column(name='x', var=None), right=Literal(value=1, type='INT'))),)
    """

    def __init__(self, statement: Statement, aggregates=(), fold: bool = False):
        self.text = statement.text
        self.raw, _ = statement.scanned
        self.index = {tok.start: i for i, tok in enumerate(self.raw)}
        self.last = {tok.end: i for i, tok in enumerate(self.raw)}
        self.aggregates = AGGREGATES | STANDARD_AGGREGATES | {a.upper() for a in aggregates}
        self.fold = fold

    # -- places

    def pos(self, offset: int) -> tuple:
        return position(self.text, offset)

    def at(self, node) -> tuple:
        """The (line, column) where ``node``, a node the parser placed, starts."""
        return self.pos(node.meta["start"])

    def start(self, node) -> int:
        return first_token(node)[0]

    def token(self, offset: int):
        """The sqlglot token that starts at ``offset``."""
        return self.raw[self.index[offset]]

    def error(self, message: str, offset: int, found: bool = False) -> SqlError:
        """A SqlError at the token that starts at ``offset``; ``found`` says what it is."""
        end = self.token(offset).end if found and offset in self.index else None
        return error_at(self.text, message, offset, end)

    def before(self, node) -> int:
        """The offset of the token just before ``node``'s first: a binary operator's."""
        return self.raw[self.index[self.start(node)] - 1].start

    def name(self, text: str, quoted: bool) -> str:
        """A pattern variable's or subset's name: upper case when ``fold`` and unquoted."""
        return text.upper() if self.fold and not quoted else text

    def var(self, ident: exp.Identifier) -> str:
        return self.name(ident.name, ident.args.get("quoted"))

    # -- the clause

    def clause(self, node: MatchRecognize) -> S.MatchRecognize:
        """The spec of ``node``, checked (module doc); its parts read in the clause's order, so
        the first error is the first in the text."""
        order = node.args.get("order")
        measures = tuple(S.Measure(self.whole(m.this.this), m.this.alias, pos=self.at(m))
                         for m in node.args.get("measures") or ())
        pattern, labels = self.pattern(node.args["pattern"])
        within = node.args.get("within")
        within_ms = None if within is None else interval_ms(within, self.text)
        if within_ms is not None and within_ms <= 0:
            raise self.error("WITHIN needs a positive interval", within.meta["start"])
        define = tuple((self.var(d.args["alias"]), self.whole(d.this)) for d in node.args.get("define") or ())
        clause = S.MatchRecognize(
            pattern, tuple(c.name for c in node.args.get("partition_by") or ()),
            tuple(S.OrderItem(o.this.name, not o.args.get("desc"), pos=self.at(o.this.this))
                  for o in (order.expressions if order else ())),
            measures, self.rows(node.args.get("rows")), self.after(node.args.get("after")), within_ms,
            tuple((self.var(s.this), tuple(self.var(m) for m in s.expression.expressions))
                  for s in node.args.get("subset") or ()),
            define, pos=self.pos(node.meta.get("clause", node.meta["start"])))
        self.check(node, clause, labels)
        return clause

    @staticmethod
    def rows(var) -> str:
        """ONE ROW PER MATCH (the default) or ALL ROWS PER MATCH with its option (SHOW EMPTY
        MATCHES the default): the words the dialect kept."""
        if var is None:
            return S.ONE_ROW
        return S.ALL_ROWS_SHOW if var.name == "ALL ROWS PER MATCH" else var.name

    def after(self, var):
        """``AFTER MATCH SKIP ...``: its words are its tokens (a variable the last)."""
        if var is None:
            return None
        tokens = self.raw[self.index[var.meta["start"]]:self.last[var.meta["end"]] + 1]
        words = [tok.text.upper() for tok in tokens[3:]]
        pos = self.pos(var.meta["start"])
        if words in (["PAST", "LAST", "ROW"], ["TO", "NEXT", "ROW"]):
            return S.AfterMatch(" ".join(words), pos=pos)
        name = self.name(tokens[-1].text, tokens[-1].token_type == TokenType.IDENTIFIER)
        return S.AfterMatch("TO " + (words[1] if len(words) == 3 else "LAST"), name, pos=pos)

    def check(self, node, clause, labels):
        """Names that must refer to something: variables, subsets, measure aliases."""
        variables = {name for name, _ in labels}
        subsets = set()
        for subset in node.args.get("subset") or ():
            name = self.var(subset.this)
            if name in variables or name in subsets:
                raise self.error(f"subset {name} is already a pattern variable or subset", subset.this.meta["start"])
            for member in subset.expression.expressions:
                if self.var(member) not in variables:
                    raise self.error(f"subset {name} lists {self.var(member)}, which is not a variable of the "
                                     "PATTERN", member.meta["start"])
            subsets.add(name)
        seen = set()
        for definition in node.args.get("define") or ():
            ident = definition.args["alias"]
            name = self.var(ident)
            if name not in variables:
                raise self.error(f"DEFINE of {name}, which is not a variable of the PATTERN", ident.meta["start"])
            if name in seen:
                raise self.error(f"{name} is defined twice", ident.meta["start"])
            seen.add(name)
        skip = clause.after_match
        if skip is not None and skip.var is not None and skip.var not in variables | subsets:
            raise self.error(f"AFTER MATCH SKIP to {skip.var}, which is not a variable of the PATTERN",
                             self.raw[self.last[node.args["after"].meta["end"]]].start)
        aliases = set()
        for measure in node.args.get("measures") or ():
            alias = measure.this.args["alias"]
            if alias.name.lower() in aliases:
                raise self.error(f"duplicate measure alias {alias.name}", alias.meta["start"])
            aliases.add(alias.name.lower())
        known = variables | subsets

        def qualified(column):
            if isinstance(column, S.Column) and column.var is not None and column.var not in known:
                raise SqlError(f"{column.var}.{column.name}: {column.var} is not a pattern "
                               "variable or subset", *column.pos, self.text)
        walk([m.expr for m in clause.measures] + [e for _, e in clause.define], qualified)

    # -- the pattern, from its tokens

    def pattern(self, var) -> tuple:
        """(the spec of the PATTERN ``var`` places, [(variable, token), ...]), read from the
        tokens it spans (the dialect keeps it as text)."""
        reader = _PatternReader(self, self.index[var.meta["start"]], self.last[var.meta["end"]] + 1)
        node = reader.alternation()
        if reader.i < reader.stop:
            raise reader.fail("expected ')'")
        return node, reader.labels

    # -- expressions

    def whole(self, node):
        """The spec of the whole expression ``node``, at most ``MAX_DEPTH`` deep."""
        try:
            spec = self.expr(node)
        except RecursionError:
            raise self.error("this expression nests too deeply for the kit: split it, or compute part of it "
                             "as a column of the input", self.start(node)) from None
        levels = depth(spec)
        if levels > MAX_DEPTH:
            raise self.error(f"this expression is {levels} nodes deep (a chain of operators nests one per operator), "
                             f"more than the {MAX_DEPTH} the kit takes: split the chain, or compute part of it as "
                             "a column of the input", self.start(node))
        return spec

    def expr(self, node):
        """The spec of ``node`` (one method per kind of node)."""
        if isinstance(node, exp.Star):                     # f(*) but COUNT's
            raise self.error("expected an expression", node.meta["start"], True)
        for kind in type(node).__mro__:
            method = _READERS.get(kind)
            if method is not None:
                return method(self, node)
        raise self.error(f"the kit does not take {node.sql(dialect=Flink)[:40]} in MATCH_RECOGNIZE", self.start(node))

    def binary(self, node):
        right = node.expression
        return S.Binary(_BINARY[type(node)], self.expr(node.this), self.expr(right), pos=self.pos(self.before(right)))

    def negated(self, node):
        """``NOT x`` (a prefix NOT) or the NOT of ``x NOT IN``, ``NOT BETWEEN``, ``IS NOT NULL``."""
        at = node.meta.get("start")
        if at is not None and self.token(at).token_type == TokenType.NOT:
            return S.Unary("NOT", self.expr(node.this), pos=self.pos(at))
        inner = node.this
        if isinstance(inner, exp.Is):
            return self.is_null(inner, negated=True, at=at)
        return self.predicate(inner, negated=True)

    def is_null(self, node, negated=False, at=None):
        negated = negated or bool(node.args.get("negate"))
        if not isinstance(node.expression, exp.Null):
            raise self.error("expected 'NULL'", node.expression.meta.get("start", self.start(node.expression)), True)
        return S.IsNull(self.expr(node.this), negated, pos=self.pos(at if at is not None else node.meta["start"]))

    def predicate(self, node, negated=False):
        """``[NOT] IN``, ``[NOT] BETWEEN``, ``[NOT] LIKE``, placed at their first word."""
        at = node.meta["start"]
        if negated or node.args.get("negate"):
            at = self.raw[self.index[at] - 1].start
        pos, arg = self.pos(at), self.expr(node.this)
        if isinstance(node, exp.Between):
            return S.Between(arg, self.expr(node.args["low"]), self.expr(node.args["high"]), negated, pos=pos)
        if isinstance(node, exp.In):
            query = node.args.get("query")
            items = (self.subquery(query.this),) if query else tuple(self.expr(e) for e in node.expressions)
            if not items:                                   # x IN ()
                raise self.error("expected an expression", self.raw[self.index[node.meta["start"]] + 2].start, True)
            return S.InList(arg, items, negated, pos=pos)
        like = S.Call("LIKE", (arg, self.expr(node.expression)), pos=pos)
        return S.Unary("NOT", like, pos=pos) if node.args.get("negate") else like

    def literal(self, node):
        if node.is_string:
            return S.Literal(node.this, "STRING", pos=self.at(node))
        return number_literal(node.this, self.at(node))

    def cast(self, node):
        """``CAST(x AS type)``, or a typed literal ``TIMESTAMP '...'`` / ``DATE '...'`` (a cast
        that does not start with CAST)."""
        at = node.meta["start"]
        first = self.token(at)
        if first.text.upper() != "CAST":
            if first.text.upper() not in ("TIMESTAMP", "DATE") or not node.this.is_string:
                raise self.error(f"the kit does not take {node.sql(dialect=Flink)[:40]} in MATCH_RECOGNIZE", at)
            return self.typed_literal(first, node.this)
        return S.Cast(self.expr(node.this), self.type_name(at), pos=self.pos(at))

    def type_name(self, at: int) -> str:
        """The type of the CAST at offset ``at`` as Flink spells it, from its tokens, upper-cased:
        ``DOUBLE``, ``DECIMAL(10, 2)``, ``TIMESTAMP(3) WITH LOCAL TIME ZONE``."""
        i, level, words = self.index[at] + 2, 1, None       # past CAST (
        while True:
            tok = self.raw[i]
            i += 1
            level += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tok.token_type, 0)
            if level == 0:
                return None if words is None else type_spelling(words)
            if words is None:
                words = [] if level == 1 and tok.token_type == TokenType.ALIAS else None
            else:
                words.append(tok)

    def typed_literal(self, first, literal):
        kind = first.text.upper()
        try:
            value = (datetime.date if kind == "DATE" else datetime.datetime).fromisoformat(literal.name)
        except ValueError:
            raise self.error(f"invalid {kind} literal '{literal.name}'", literal.meta["start"]) from None
        return S.Literal(value, kind, pos=self.pos(first.start))

    def column(self, node):
        pos = self.pos(self.start(node))
        table = node.args.get("table")
        if node.args.get("db"):
            raise self.error("expected a column", self.start(node))
        return S.Column(node.name, self.var(table) if table is not None else None, pos=pos)

    def call(self, node):
        """``name(args)``: navigation, aggregate, MATCH_RECOGNIZE function or scalar call."""
        name, args, at = node.name.upper(), node.expressions, node.meta["start"]
        pos = self.pos(at)
        if name in NAV_OFFSETS:
            return self.navigation(name, args, at)
        if name in self.aggregates:
            return self.aggregate(name, args, pos)
        if name in _AT_MOST:
            self.at_most(args, _AT_MOST[name])
        if name == "CLASSIFIER":
            if args and not (isinstance(args[0], exp.Column) and len(args[0].parts) == 1):
                raise self.error("expected a pattern variable or subset", self.start(args[0]), True)
            return S.Classifier(self.var(args[0].this) if args else None, pos=pos)
        if name in ("MATCH_NUMBER", "MATCH_PROCTIME"):
            return (S.MatchNumber if name == "MATCH_NUMBER" else S.MatchProctime)(pos=pos)
        if name == "MATCH_ROWTIME":
            return S.MatchRowtime(self.expr(args[0]) if args else None, pos=pos)
        return S.Call(name, tuple(self.expr(a) for a in args), pos=pos)

    def at_most(self, args, count: int):
        """``args`` are at most ``count``: else the kit's error at what follows the last."""
        if len(args) > count:
            raise self.error("expected ')'", self.before(args[count]) if count else self.start(args[0]), True)

    def navigation(self, name, args, at):
        """``FIRST/LAST(expr[, n])`` (default 0) and ``PREV/NEXT(expr[, n])`` (default 1)."""
        if not args:
            raise self.error("expected an expression", self.raw[self.index[at] + 2].start, True)
        offset = NAV_OFFSETS[name]
        if len(args) > 1:
            literal = args[1]
            if not (isinstance(literal, exp.Literal) and not literal.is_string and literal.this.isdigit()):
                raise self.error("expected a non-negative integer offset", self.start(literal), True)
            offset = int(literal.this)
        self.at_most(args, 2)
        return S.Nav(name, self.expr(args[0]), offset, pos=self.pos(at))

    def aggregate(self, name, args, pos):
        """``COUNT(*)``, ``SUM([DISTINCT] expr)``, or a user aggregate, whose several arguments
        make a tuple: ``WAVG(A.price, A.tax)``."""
        distinct = len(args) == 1 and isinstance(args[0], exp.Distinct)
        if distinct:
            args = args[0].expressions
        if name == "COUNT" and not distinct and (not args or isinstance(args[0], exp.Star)):
            return S.Aggregate(name, None, False, pos=pos)                  # COUNT(*), COUNT()
        if name == "COUNT" and not distinct and isinstance(args[0], exp.Column) and args[0].is_star:
            return S.Aggregate(name, S.Column("*", self.var(args[0].args["table"]), pos=self.pos(self.start(args[0]))),
                               False, pos=pos)                             # COUNT(A.*)
        if name in AGGREGATES:
            self.at_most(args, 1)
        specs = tuple(self.expr(a) for a in args)
        return S.Aggregate(name, specs[0] if len(specs) == 1 else specs, distinct, pos=pos)

    def case(self, node):
        whens = tuple((self.expr(w.this), self.expr(w.args["true"])) for w in node.args["ifs"])
        operand, default = node.this, node.args.get("default")
        return S.Case(operand and self.expr(operand), whens, default and self.expr(default),
                      pos=self.at(node))

    def subquery(self, select):
        """A query left unread: a ``Subquery`` of its text, placed at its first word."""
        start, end = select.meta["start"], select.meta["end"]
        return S.Subquery(self.text[start:end + 1], pos=self.pos(start))


_READERS = {
    exp.Paren: lambda r, n: r.expr(n.this),
    exp.Column: SpecReader.column,
    exp.Literal: SpecReader.literal,
    exp.Boolean: lambda r, n: S.Literal(n.this, "BOOLEAN", pos=r.at(n)),
    exp.Null: lambda r, n: S.Literal(None, "NULL", pos=r.at(n)),
    exp.Interval: lambda r, n: S.Literal(interval_ms(n, r.text), "INTERVAL", pos=r.at(n)),
    exp.Cast: SpecReader.cast,
    exp.Case: SpecReader.case,
    exp.Neg: lambda r, n: S.Unary("-", r.expr(n.this), pos=r.at(n)),
    exp.Not: SpecReader.negated,
    exp.Is: SpecReader.is_null,
    exp.In: SpecReader.predicate,
    exp.Between: SpecReader.predicate,
    exp.Like: SpecReader.predicate,
    exp.Anonymous: SpecReader.call,
    exp.If: lambda r, n: S.Call("IF", tuple(r.expr(a) for a in (n.this, n.args["true"], n.args.get("false")) if a),
                                pos=r.at(n)),
    exp.Exists: lambda r, n: S.Call("EXISTS", (r.subquery(n.this),), pos=r.at(n)),
    exp.Subquery: lambda r, n: r.subquery(n.this),
    exp.Array: lambda r, n: S.Call("ARRAY", tuple(r.expr(e) for e in n.expressions), pos=r.at(n)),
    Semantics: lambda r, n: S.Semantics(n.args["kind"], r.expr(n.this), pos=r.at(n)),
    **{kind: SpecReader.binary for kind in _BINARY},
}


class _PatternReader:
    """The pattern grammar (module doc) over tokens ``first`` to ``stop`` (excluded) of the
    statement's sqlglot tokens: one method per rule."""

    def __init__(self, reader: SpecReader, first: int, stop: int):
        self.reader, self.raw, self.i, self.stop = reader, reader.raw, first, stop
        self.labels = []

    def peek(self):
        """The current token; past the pattern, the parenthesis that closes it."""
        return self.raw[min(self.i, self.stop)]

    def op(self, *texts):
        """The current token, consumed, when it is one of the operators ``texts``."""
        tok = self.peek()
        if self.i < self.stop and tok.token_type not in (TokenType.IDENTIFIER, TokenType.STRING) and tok.text in texts:
            self.i += 1
            return tok
        return None

    def fail(self, message, tok=None, found=True):
        tok = tok or self.peek()
        return error_at(self.reader.text, message, tok.start, tok.end if found else None)

    def pos(self, tok):
        return self.reader.pos(tok.start)

    def alternation(self):
        """Alternatives separated by ``|``; the first is preferred."""
        start = self.peek()
        items = [self.concat()]
        while self.op("|"):
            items.append(self.concat())
        return items[0] if len(items) == 1 else S.Alternation(tuple(items), pos=self.pos(start))

    def concat(self):
        start = self.peek()
        items = [self.quantified()]
        while self.i < self.stop and (is_name(self.peek()) or self.peek().text in ("(", "{-", "^", "$")):
            items.append(self.quantified())
        return items[0] if len(items) == 1 else S.Concat(tuple(items), pos=self.pos(start))

    def quantified(self):
        start = self.peek()
        node = self.primary()
        tok = self.op("*", "+", "?", "??")
        if tok is not None:
            low, high = _QUANTIFIERS[tok.text]
            greedy = tok.text != "??" and not self.op("?")
        elif (brace := self.op("{")) is not None:
            low, high = self.bounds(brace)
            greedy = not self.op("?", "??")
        else:
            return node
        return S.Quantified(node, low, high, greedy, pos=self.pos(start))

    def bounds(self, brace) -> tuple:
        """(min, max) of ``{n} {n,} {n,m} {,m}``, after the brace."""
        low = 0 if self.peek().text == "," else self.integer()
        high = low
        if self.op(","):
            high = None if self.peek().text == "}" else self.integer()
        if not self.op("}"):
            raise self.fail("expected '}'")
        if high is not None and high < low:
            raise self.fail(f"quantifier {{{low},{high}}}: the minimum is larger than the maximum", brace, found=False)
        return low, high

    def integer(self) -> int:
        tok = self.peek()
        if self.i >= self.stop or tok.token_type != TokenType.NUMBER or not tok.text.isdigit():
            raise self.fail("expected a number")
        self.i += 1
        return int(tok.text)

    def primary(self):
        tok = self.peek()
        name = self.i < self.stop and is_name(tok)
        if name and tok.text.upper() == "PERMUTE" and self.i + 1 < self.stop and self.raw[self.i + 1].text == "(":
            self.i += 2
            items = [self.alternation()]
            while self.op(","):
                items.append(self.alternation())
            self.close(")")
            return S.Permute(tuple(items), pos=self.pos(tok))
        if name:
            self.i += 1
            label = self.reader.name(tok.text, tok.token_type == TokenType.IDENTIFIER)
            self.labels.append((label, tok))
            return S.Label(label, pos=self.pos(tok))
        if self.op("("):
            if self.op(")"):
                return S.Empty(pos=self.pos(tok))
            inner = self.alternation()
            self.close(")")
            return inner
        if self.op("{-"):
            inner = self.alternation()
            self.close("-}")
            return S.Exclusion(inner, pos=self.pos(tok))
        if self.op("^", "$"):
            return S.Anchor(tok.text, pos=self.pos(tok))
        raise self.fail("expected a pattern variable")

    def close(self, text):
        if not self.op(text):
            raise self.fail(f"expected '{text}'")


def depth(expr) -> int:
    """How many nodes deep ``expr`` is (a leaf is 1; tuples of nodes add no level), found
    without recursion."""
    deepest, stack = 0, [(expr, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (tuple, list)):
            stack.extend((item, level) for item in node)
            continue
        deepest = max(deepest, level)
        for name in getattr(node, "__dataclass_fields__", ()):
            child = getattr(node, name)
            if name != "pos" and (hasattr(child, "__dataclass_fields__") or isinstance(child, (tuple, list))):
                stack.append((child, level + 1))
    return deepest


# ---------------------------------------------------------------- subqueries

#: Flink SQL type names of Spark's result types, for the literal that replaces a subquery.
_LITERAL_TYPES = {"bigint": "BIGINT", "int": "INT", "smallint": "SMALLINT", "tinyint": "TINYINT",
                  "double": "DOUBLE", "float": "FLOAT", "string": "STRING", "boolean": "BOOLEAN",
                  "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP", "date": "DATE"}


def subqueries_of(clause: S.MatchRecognize) -> list:
    """The ``Subquery`` nodes of DEFINE and MEASURES, in order."""
    found = []
    walk([e for _, e in clause.define] + [m.expr for m in clause.measures],
         lambda node: found.append(node) if isinstance(node, S.Subquery) else None)
    return found


def resolve_subqueries(clause: S.MatchRecognize, answer) -> S.MatchRecognize:
    """``clause`` with each uncorrelated subquery replaced by its answer: ``answer(subquery)``
    runs it and returns (rows, Spark schema). A scalar subquery gives one column and at most
    one row (none: NULL); ``x IN (SELECT ...)`` a list of the column's values; ``EXISTS`` TRUE
    when there is a row. Each is run once per query, as its answer cannot depend on the row."""
    def literal(value, dtype, pos):
        kind = "DECIMAL" if dtype.typeName() == "decimal" else _LITERAL_TYPES.get(dtype.simpleString())
        if kind is None:
            raise MatchRecognizeError("MATCH_RECOGNIZE", f"a subquery gives {dtype.simpleString()} values; the "
                                      "kit takes numbers, strings, booleans, dates and timestamps", pos)
        return S.Literal(value, kind, pos=pos)

    def one_column(node):
        rows, schema = answer(node)
        if len(schema.fields) != 1:
            raise MatchRecognizeError("MATCH_RECOGNIZE", f"the subquery ({node.text}) gives "
                                      f"{len(schema.fields)} columns; it must give one", node.pos)
        return [r[0] for r in rows], schema.fields[0].dataType

    def replace(node):
        if isinstance(node, S.InList) and len(node.items) == 1 and isinstance(node.items[0], S.Subquery):
            values, dtype = one_column(node.items[0])
            return S.InList(node.arg, tuple(literal(v, dtype, node.pos) for v in values), node.negated, pos=node.pos)
        if isinstance(node, S.Call) and node.func == "EXISTS" and len(node.args) == 1 \
                and isinstance(node.args[0], S.Subquery):
            rows, _ = answer(node.args[0])
            return S.Literal(bool(rows), "BOOLEAN", pos=node.pos)
        if isinstance(node, S.Subquery):
            values, dtype = one_column(node)
            if len(values) > 1:
                raise MatchRecognizeError("MATCH_RECOGNIZE", f"the scalar subquery ({node.text}) gives "
                                          f"{len(values)} rows; it must give at most one", node.pos)
            return literal(values[0] if values else None, dtype, node.pos)
        return node

    define = tuple((var, _map(e, replace)) for var, e in clause.define)
    measures = tuple(dataclasses.replace(m, expr=_map(m.expr, replace)) for m in clause.measures)
    return dataclasses.replace(clause, define=define, measures=measures)


def _map(node, fn):
    """``node`` rebuilt bottom-up with ``fn`` applied to every expression node (the children
    of an IN list and an EXISTS first see ``fn`` through their parent)."""
    if isinstance(node, (list, tuple)):
        return type(node)(_map(n, fn) for n in node)
    if not hasattr(node, "__dataclass_fields__"):
        return node
    if isinstance(node, S.InList) and any(isinstance(i, S.Subquery) for i in node.items) or \
            isinstance(node, S.Call) and node.func == "EXISTS":
        return fn(dataclasses.replace(node, arg=_map(node.arg, fn)) if isinstance(node, S.InList) else node)
    changes = {f: _map(getattr(node, f), fn) for f in node.__dataclass_fields__ if f != "pos"}
    return fn(dataclasses.replace(node, **changes))
