"""The MATCH_RECOGNIZE clause, parsed into a ``kit.match_recognize.spec.MatchRecognize``.

Grammar (one method per rule, in clause order)::

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

Under semantics="standard" (``clause(fold=True)``) an unquoted pattern variable or subset
name is its upper-case form, as standard SQL folds names; a delimited one (``"x"``, which
``kit.sql`` back-quotes first) keeps its case. An uncorrelated subquery in DEFINE or
MEASURES is read as a ``Subquery`` node; ``resolve_subqueries`` puts its answer in its place.

The clause is checked as it is read: DEFINE, SUBSET and SKIP TO name pattern variables,
measure aliases are unique (ignoring case, as Spark columns are), qualifiers ``v.col``
name a pattern variable or a subset.
"""

from __future__ import annotations

import dataclasses

from ..match_recognize import spec as S
from ..match_recognize.budget import MAX_THREADS, STEP_BUDGET
from ..match_recognize.errors import MatchRecognizeError, NotSupportedByFlink
from ..match_recognize.expressions import walk
from .errors import SqlError
from .expressions import ExpressionParser
from .lexer import tokenize

__all__ = ["MatchRecognizeParser", "parse_match_recognize", "match_options", "subqueries_of",
           "resolve_subqueries"]

_ROWS_PER_MATCH = {"SHOW": S.ALL_ROWS_SHOW, "OMIT": S.ALL_ROWS_OMIT,
                   "WITH": S.ALL_ROWS_WITH_UNMATCHED}


def parse_match_recognize(text: str, aggregates=()) -> S.MatchRecognize:
    """The clause ``MATCH_RECOGNIZE ( ... )`` that is all of ``text``; ``aggregates`` names user
    aggregate functions."""
    parser = MatchRecognizeParser(text, tokenize(text), aggregates=aggregates)
    clause = parser.clause()
    if parser.peek().kind != "EOF":
        raise parser.error("expected end of input")
    return clause


def match_options(config: dict) -> tuple:
    """``kit.sql``'s ``config`` split into ``match_recognize``'s keywords (from the keys
    ``kit.match-recognize.step-budget`` and ``kit.match-recognize.max-threads``) and the rest."""
    names = {STEP_BUDGET: "step_budget", MAX_THREADS: "max_threads"}
    return ({names[key]: value for key, value in config.items() if key in names},
            {key: value for key, value in config.items() if key not in names})


class MatchRecognizeParser(ExpressionParser):
    """Reads one MATCH_RECOGNIZE clause from the current token (the keyword itself)."""

    def clause(self, fold: bool = False) -> S.MatchRecognize:
        """``fold``: unquoted pattern variable names in upper case (semantics="standard")."""
        self.fold = fold
        start = self.expect("MATCH_RECOGNIZE")
        self.expect_op("(")
        self.names = {}      # variable or alias -> token, for the checks at the end
        partition_by = self.partition_by()
        order_by = self.order_by()
        measures = self.measures()
        rows_per_match = self.rows_per_match()
        after_match = self.after_match()
        if not self.at("PATTERN"):
            raise self.error("expected 'PATTERN'")
        pattern, within_ms = self.pattern_clause()
        subsets = self.subsets()
        define = self.define()
        self.expect_op(")")
        clause = S.MatchRecognize(pattern, partition_by, order_by, measures, rows_per_match,
                                  after_match, within_ms, subsets, define, pos=start.pos)
        self.check(clause)
        return clause

    # ------------------------------------------------------------ clauses

    def partition_by(self) -> tuple:
        if not self.accept("PARTITION"):
            return ()
        self.expect("BY")
        return tuple(tok.value for tok in self.column_list())

    def order_by(self) -> tuple:
        if not self.accept("ORDER"):
            return ()
        self.expect("BY")
        items = []
        while True:
            tok = self.column_name()
            ascending = not self.accept("DESC")
            if ascending:
                self.accept("ASC")
            items.append(S.OrderItem(tok.value, ascending, pos=tok.pos))
            if not self.accept_op(","):
                return tuple(items)

    def column_list(self) -> list:
        items = [self.column_name()]
        while self.accept_op(","):
            items.append(self.column_name())
        return items

    def column_name(self):
        """A column, optionally qualified (``t.symbol``); returns the name's token."""
        tok = self.identifier("a column")
        if self.accept_op("."):
            tok = self.identifier("a column name")
        return tok

    def measures(self) -> tuple:
        if not self.accept("MEASURES"):
            return ()
        items = []
        while True:
            start = self.peek()
            expr = self.expression()
            self.expect("AS")
            alias = self.identifier("an alias")
            items.append(S.Measure(expr, alias.value, pos=start.pos))
            self.names.setdefault("measures", []).append(alias)
            if not self.accept_op(","):
                return tuple(items)

    def rows_per_match(self) -> str:
        if self.accept("ONE"):
            self.expect_words("ROW", "PER", "MATCH")
            return S.ONE_ROW
        if not self.accept("ALL"):
            return S.ONE_ROW
        self.expect_words("ROWS", "PER", "MATCH")
        if self.accept("SHOW"):
            self.expect_words("EMPTY", "MATCHES")
        elif self.accept("OMIT"):
            self.expect_words("EMPTY", "MATCHES")
            return S.ALL_ROWS_OMIT
        elif self.accept("WITH"):
            self.expect_words("UNMATCHED", "ROWS")
            return S.ALL_ROWS_WITH_UNMATCHED
        return S.ALL_ROWS_SHOW

    def after_match(self):
        if not self.at("AFTER"):
            return None
        start = self.next()
        self.expect_words("MATCH", "SKIP")
        if self.accept("PAST"):
            self.expect_words("LAST", "ROW")
            return S.AfterMatch("PAST LAST ROW", pos=start.pos)
        self.expect("TO")
        if self.at("NEXT") and self.peek(1).is_word("ROW"):
            self.next(), self.next()
            return S.AfterMatch("TO NEXT ROW", pos=start.pos)
        kind = "TO LAST"
        if self.at("FIRST", "LAST"):
            kind = "TO " + self.next().value.upper()
            var = self.identifier("a pattern variable")
        else:
            var = self.identifier("a pattern variable, FIRST, LAST or NEXT ROW")
        self.names["skip"] = var
        return S.AfterMatch(kind, self.var_name(var), pos=start.pos)

    def pattern_clause(self) -> tuple:
        """``PATTERN ( pattern ) [WITHIN INTERVAL ...]`` as (pattern, within_ms)."""
        self.expect("PATTERN")
        self.expect_op("(")
        pattern = self.pattern()
        self.expect_op(")")
        within_ms = None
        if self.accept("WITHIN"):
            within_ms, tok = self.interval()
            if within_ms <= 0:
                raise self.error("WITHIN needs a positive interval", tok, found=False)
        return pattern, within_ms

    def subsets(self) -> tuple:
        if not self.accept("SUBSET"):
            return ()
        items = []
        while True:
            name = self.identifier("a subset name")
            self.expect_op("=")
            self.expect_op("(")
            members = [self.identifier("a pattern variable")]
            while self.accept_op(","):
                members.append(self.identifier("a pattern variable"))
            self.expect_op(")")
            self.names.setdefault("subsets", []).append((name, members))
            items.append((self.var_name(name), tuple(self.var_name(m) for m in members)))
            if not self.accept_op(","):
                return tuple(items)

    def define(self) -> tuple:
        if not self.accept("DEFINE"):
            return ()
        items = []
        while True:
            var = self.identifier("a pattern variable")
            self.expect("AS")
            items.append((self.var_name(var), self.expression()))
            self.names.setdefault("define", []).append(var)
            if not self.accept_op(","):
                return tuple(items)

    # ------------------------------------------------------------ pattern

    def pattern(self):
        """Alternatives separated by ``|``; the first is preferred."""
        start = self.peek()
        items = [self.concat()]
        while self.accept_op("|"):
            items.append(self.concat())
        return items[0] if len(items) == 1 else S.Alternation(tuple(items), pos=start.pos)

    def concat(self):
        start = self.peek()
        items = [self.quantified()]
        while self.peek().kind == "IDENT" or self.at_op("(", "{-", "^", "$"):
            items.append(self.quantified())
        return items[0] if len(items) == 1 else S.Concat(tuple(items), pos=start.pos)

    def quantified(self):
        start = self.peek()
        node = self.pattern_primary()
        bounds = self.quantifier()
        if bounds is None:
            return node
        greedy = not self.accept_op("?")
        return S.Quantified(node, bounds[0], bounds[1], greedy, pos=start.pos)

    def quantifier(self):
        """(min, max) of ``* + ? {n} {n,} {n,m} {,m}``, or None when there is none."""
        if (tok := self.accept_op("*", "+", "?")):
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[tok.value]
        if not (brace := self.accept_op("{")):
            return None
        low = 0 if self.at_op(",") else self.integer("a number")
        high = low
        if self.accept_op(","):
            high = None if self.at_op("}") else self.integer("a number")
        self.expect_op("}")
        if high is not None and high < low:
            raise self.error(f"quantifier {{{low},{high}}}: the minimum is larger than the maximum",
                             brace, found=False)
        return low, high

    def pattern_primary(self):
        tok = self.peek()
        if tok.kind == "IDENT" and tok.is_word("PERMUTE") and self.peek(1).kind == "OP" \
                and self.peek(1).value == "(":
            self.next(), self.next()
            items = [self.pattern()]
            while self.accept_op(","):
                items.append(self.pattern())
            self.expect_op(")")
            return S.Permute(tuple(items), pos=tok.pos)
        if tok.kind == "IDENT":
            self.next()
            self.names.setdefault("labels", []).append(tok)
            return S.Label(self.var_name(tok), pos=tok.pos)
        if self.accept_op("("):
            if self.accept_op(")"):
                return S.Empty(pos=tok.pos)
            inner = self.pattern()
            self.expect_op(")")
            return inner
        if self.accept_op("{-"):
            inner = self.pattern()
            self.expect_op("-}")
            return S.Exclusion(inner, pos=tok.pos)
        if self.accept_op("^", "$"):
            return S.Anchor(tok.value, pos=tok.pos)
        raise self.error("expected a pattern variable")

    # ------------------------------------------------------------ checks

    def check(self, clause):
        """Names that must refer to something: variables, subsets, measure aliases."""
        name = self.var_name
        variables = {name(tok) for tok in self.names.get("labels", [])}
        subsets = {}
        for subset, members in self.names.get("subsets", []):
            if name(subset) in variables or name(subset) in subsets:
                raise self.error(f"subset {name(subset)} is already a pattern variable or subset",
                                 subset, found=False)
            for member in members:
                if name(member) not in variables:
                    raise self.error(f"subset {name(subset)} lists {name(member)}, which is not a "
                                     "variable of the PATTERN", member, found=False)
            subsets[name(subset)] = members
        seen = set()
        for var in self.names.get("define", []):
            if name(var) not in variables:
                raise self.error(f"DEFINE of {name(var)}, which is not a variable of the PATTERN",
                                 var, found=False)
            if name(var) in seen:
                raise self.error(f"{name(var)} is defined twice", var, found=False)
            seen.add(name(var))
        skip = self.names.get("skip")
        if skip is not None and name(skip) not in variables and name(skip) not in subsets:
            raise self.error(f"AFTER MATCH SKIP to {name(skip)}, which is not a variable of the "
                             "PATTERN", skip, found=False)
        aliases = {}
        for alias in self.names.get("measures", []):
            if alias.value.lower() in aliases:
                raise self.error(f"duplicate measure alias {alias.value}", alias, found=False)
            aliases[alias.value.lower()] = alias
        known = variables | set(subsets)
        exprs = [m.expr for m in clause.measures] + [e for _, e in clause.define]
        for column in _columns(exprs):
            if column.var is not None and column.var not in known:
                raise SqlError(f"{column.var}.{column.name}: {column.var} is not a pattern "
                               "variable or subset", *column.pos, self.text)


def _columns(nodes):
    """Every Column node under ``nodes`` (expressions, tuples of them)."""
    for node in nodes:
        if isinstance(node, S.Column):
            yield node
        elif isinstance(node, tuple):
            yield from _columns(node)
        elif hasattr(node, "__dataclass_fields__"):
            yield from _columns(getattr(node, f) for f in node.__dataclass_fields__ if f != "pos")


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
