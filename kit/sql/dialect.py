"""Flink SQL as a sqlglot dialect: ``Flink``, Spark's dialect plus what Flink SQL adds.

``kit.sql`` reads each query once with it (``statement.Statement.tree``): one tree holds the
whole query, the constructs Spark lacks included, so no reader splices a placeholder into
the text and parses it again. What it adds to Spark's parser:

- window table-valued functions: ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL '1' HOUR))``,
  ``HOP``, ``CUMULATE``, ``SESSION(TABLE t PARTITION BY k, ...)``, arguments by position or
  by name (``DATA => TABLE t``, ``TIMECOL => DESCRIPTOR(c)``, ``SIZE => ...``). ``TABLE(...)``
  is sqlglot's ``TableFromRows`` (a FROM source, with its alias), its call an ``Anonymous``
  function whose table argument is a ``TableArgument`` and whose ``DESCRIPTOR(c)`` an
  ``Anonymous`` function too;
- ``MATCH_RECOGNIZE`` (Spark's tokenizer has no such word) as a table ref's postfix, or alone
  (``parse_match_recognize``): sqlglot's ``MatchRecognize`` as its other dialects read it,
  plus ``WITHIN INTERVAL ...`` and ``SUBSET u = (a, b)`` (``MatchRecognize`` here, a subclass
  with the two arguments, whose ``this`` is the table ref). The kit builds the clause's spec
  from this node (``kit.sql.match_recognize``), so the parser reads it as strictly as Flink
  does, with the kit's errors (``expected 'AS' but found 'p'``: a ``SqlError``), and keeps
  what sqlglot would lose: in MEASURES and DEFINE a call is an ``Anonymous`` of the name
  written with its arguments as written (sqlglot's ``LAST(x, 1)`` drops the offset),
  comparisons and IN/BETWEEN/LIKE/IS share one level, read left to right, as in Flink. The
  ``PATTERN`` stays text (a ``Var`` placed on its tokens, whose grammar the kit reads);
- ``FOR SYSTEM_TIME AS OF expr`` on a joined table: Spark's parser reads it already, into
  the table's ``version`` (``exp.Version``, kind ``AS OF``);
- Flink's type names in CAST: ``BYTES``, ``TIMESTAMP(p) WITH LOCAL TIME ZONE``; a type is
  placed (the rewrite to Spark SQL respells it: ``type_spelling``).

Legacy group windows (``GROUP BY TUMBLE(c, INTERVAL '1' HOUR)``, ``TUMBLE_START(...)``) and
``LATERAL TABLE (f(t))`` read as Spark reads them: functions.

- ``INTERVAL [-] 'value' unit [TO unit]`` whole (``kit.sql.intervals``), its value and units placed.

Positions. sqlglot's tokens know their line, column and offsets; the parser copies them to
identifiers and literals (``node.meta``: ``line``, ``col``, ``start``, ``end``). This parser
also gives them to each node it adds, to each table source (``Table``, ``TableFromRows``, a
``MatchRecognize``: ``meta["start"]`` the offset of its first character), to each operand,
query and postfix predicate (from its first token to its last), so a reader can name the
user's line and column (``position``, ``first_token``) and find a node by where it starts
(``at``); a binary operator's token is the one before its right operand's first.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

from ..match_recognize.spec import RESERVED
from .errors import SqlError, error_at
from .errors import position as position_of

__all__ = ["Flink", "MatchRecognize", "Semantics", "TableArgument", "WINDOW_TVFS", "at", "first_token",
           "is_name", "position", "span", "type_spelling"]

WINDOW_TVFS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")


class TableArgument(exp.Expression):
    """``TABLE t [PARTITION BY k, ...]``, a table passed to a table-valued function."""
    arg_types = {"this": True, "partition_by": False}


class Semantics(exp.Expression):
    """``RUNNING f(...)`` or ``FINAL f(...)`` inside a MATCH_RECOGNIZE expression
    (``PREV(RUNNING LAST(x))``); ``kind`` is the word. (A measure's leading one is sqlglot's
    ``MatchRecognizeMeasure.window_frame``.)"""
    arg_types = {"this": True, "kind": True}


class MatchRecognize(exp.MatchRecognize):
    """``this MATCH_RECOGNIZE (...) [AS alias]``: sqlglot's ``MatchRecognize`` with the table
    ref it reads (``this``: a ``Table`` or a ``Subquery``), Flink's ``WITHIN`` (an
    ``Interval``) and ``SUBSET`` (``Kwarg``s: name = ``Tuple`` of variables). ``meta["start"]``
    is where its table ref starts, ``meta["clause"]`` where the word MATCH_RECOGNIZE does."""
    arg_types = {"this": False, **exp.MatchRecognize.arg_types, "within": False, "subset": False}


def _mark(node, text: str, first: Token, last: Token | None = None):
    """``node`` with the positions of the tokens it spans in ``text`` (``meta``: line, col,
    start, end; sqlglot's own ``col`` is its token's last column, this its first)."""
    if node is not None:
        line, col = position_of(text, first.start)
        node.meta.update(line=line, col=col, start=first.start, end=(last or first).end)
    return node


def is_name(token: Token) -> bool:
    """``token`` names something: back-quoted, or a word that is not a reserved one (``RESERVED``)."""
    text = token.text
    return token.token_type == TokenType.IDENTIFIER or (
        text[:1].isalpha() or text[:1] == "_") and text.replace("_", "").isalnum() and text.upper() not in RESERVED


def _named(var, name):
    """``var`` with the position of ``name``, the identifier it was read from."""
    var.meta.update({k: v for k, v in name.meta.items() if k in ("start", "end")})
    return var


def position(node: exp.Expression) -> tuple[int, int] | None:
    """(line, column), 1-based, where ``node`` starts in the text (None: not known)."""
    meta = node.meta if node is not None else {}
    return (meta["line"], meta["col"]) if "line" in meta and "col" in meta else None


def type_spelling(tokens: list[Token]) -> str:
    """A type's ``tokens`` as Flink spells it, upper-cased.

    >>> type_spelling(Flink().tokenize("decimal (10,2)"))
    'DECIMAL(10, 2)'
    """
    out = ""
    for tok in tokens:
        if tok.text in ("(", ")"):
            out += tok.text
        elif tok.text == ",":
            out += ", "
        else:
            out += (" " if out and out[-1] not in "( " else "") + tok.text.upper()
    return out


def first_token(node: exp.Expression) -> tuple[int, int] | None:
    """(start, end) offsets of the first token of ``node`` as the parser placed it: of the
    shortest placed node (``node`` or a descendant) that starts first, or None.

    >>> from kit.sql.statement import Statement
    >>> first_token(Statement("SELECT B.price FROM t").tree.selects[0])
    (7, 7)
    """
    placed = [n for n in node.walk() if "start" in n.meta]
    if not placed:
        return None
    first = min(placed, key=lambda n: (n.meta["start"], n.meta["end"]))
    return first.meta["start"], first.meta["end"]


def span(node: exp.Expression) -> tuple[int, int] | None:
    """(start, end) offsets of the text ``node`` was read from (end excluded), from the
    positions it and its parts know (None: none knows one).

    >>> from kit.sql.statement import Statement
    >>> span(Statement("SELECT o.t + 1 FROM o").tree.expressions[0])
    (7, 14)
    """
    known = [n.meta for n in node.walk() if "start" in n.meta]
    if not known:
        return None
    return min(m["start"] for m in known), max(max(m["end"], m.get("close", 0)) for m in known) + 1


def at(tree: exp.Expression, kind, start: int):
    """The node of type ``kind`` in ``tree`` that starts at character offset ``start``, or None."""
    for node in tree.find_all(kind):
        if node.meta.get("start") == start:
            return node
    return None


#: The reserved words an expression may start with.
_STARTS_EXPRESSIONS = {"NOT", "NULL", "TRUE", "FALSE", "CASE", "CAST", "INTERVAL", "SELECT"}


def _placed(parse):
    """A parser of ``RANGE_PARSERS`` (``x IN ...``, ``BETWEEN``, ``LIKE``, ``IS``) whose node is
    placed at its word."""
    def parse_placed(self, this):
        word = self._prev
        node = parse(self, this)
        if node is not None and "start" not in node.meta:
            _mark(node, self.sql, word, self._prev)
        return node
    return parse_placed


class Flink(Spark):
    """Flink SQL: Spark's dialect plus window TVFs, MATCH_RECOGNIZE and Flink's type names
    (module doc)."""

    class Tokenizer(Spark.Tokenizer):
        QUOTES = ["'"]                       # Flink's strings: single quotes, '' for a quote inside
        STRING_ESCAPES = ["'"]               # (Spark's also take "..." and backslash escapes)
        KEYWORDS = {
            **Spark.Tokenizer.KEYWORDS,
            "MATCH_RECOGNIZE": TokenType.MATCH_RECOGNIZE,
            "BYTES": TokenType.VARBINARY,
            "{-": TokenType.L_BRACE,             # a PATTERN's exclusion, {- A -}: one token each, as
            "-}": TokenType.R_BRACE,             # the kit's lexer reads them ({--} is no comment)
        }
        KEYWORDS.pop("SESSION")              # a window TVF's name in Flink, not Spark's SET SESSION

    class Parser(Spark.Parser):
        STATEMENT_PARSERS = {
            **Spark.Parser.STATEMENT_PARSERS,
            TokenType.MATCH_RECOGNIZE: lambda self: self._match_recognize_alone(),
        }
        RANGE_PARSERS = {kind: _placed(parse) for kind, parse in Spark.Parser.RANGE_PARSERS.items()}
        _matching = False                    # reading an expression of MEASURES or DEFINE

        LAMBDAS = {
            **Spark.Parser.LAMBDAS,
            TokenType.FARROW: lambda self, expressions: self.expression(exp.Kwarg(
                this=_named(exp.var(expressions[0].name), expressions[0]),
                expression=self._parse_table_argument() or self._parse_disjunction() or self._parse_select())),
        }

        def _parse_lambda(self, alias: bool = False):
            """A function's argument; ``meta["comma"]``: where the comma before it is."""
            before = self._prev
            node = self._parse_table_argument() or super()._parse_lambda(alias=alias)
            if node is not None and before is not None and before.token_type == TokenType.COMMA:
                node.meta["comma"] = before.start
            return node

        def _parse_unary(self):
            """An operand, placed from its first token to its last (unless sqlglot placed it:
            a literal, a call at its name); ``RUNNING`` / ``FINAL`` before a function call: a
            ``Semantics``."""
            curr, nxt = self._curr, self._next
            after = self._tokens[self._index + 2] if self._index + 2 < len(self._tokens) else None
            if curr and curr.text.upper() in ("RUNNING", "FINAL") and nxt and (
                    self._matching and is_name(nxt) or after and nxt.token_type in (TokenType.VAR, *self.FUNC_TOKENS)
                    and after.token_type == TokenType.L_PAREN):
                self._advance()
                node = self.expression(Semantics(this=self._parse_unary(), kind=curr.text.upper()))
                return _mark(node, self.sql, curr, self._prev)
            return self._placed(super()._parse_unary)

        def _parse_interval(self, require_interval: bool = True, parse_function_unit: bool = True):
            """Flink's ``INTERVAL [-] 'value' unit [TO unit]`` as one ``Interval``, with the
            positions of it, its value and units (sqlglot's own splits ``'1 hour'`` into value and
            unit and makes ``INTERVAL '1' HOUR + 1`` a sum of intervals). A missing unit is an
            empty ``Var`` placed at the token where it should be; any other form reads as Spark's."""
            first, index = self._curr, self._index
            if not (require_interval and first and first.token_type == TokenType.INTERVAL):
                return super()._parse_interval(require_interval, parse_function_unit)
            self._advance()
            sign = self._prev if self._match(TokenType.DASH) else None
            if not (self._curr and self._curr.token_type in (TokenType.STRING, TokenType.NUMBER)):
                self._retreat(index)
                return _mark(super()._parse_interval(require_interval, parse_function_unit), self.sql, first, self._prev)
            self._advance()
            value = self.expression(exp.Literal.string(self._prev.text), self._prev)
            if sign:
                value = _mark(self.expression(exp.Neg(this=value)), self.sql, sign, self._prev)
            unit = self._parse_interval_unit()
            if unit.name and self._match_text_seq("TO"):
                unit = self.expression(exp.IntervalSpan(this=unit, expression=self._parse_interval_unit()))
            interval = self.expression(exp.Interval(this=value))
            interval.set("unit", unit)          # as written: Interval() would rename it ("D" -> DAY), unplaced
            return _mark(interval, self.sql, first, self._prev)

        def _parse_interval_unit(self):
            """An interval's unit word as a ``Var`` (upper case), or an empty one placed at the
            token that stands where the unit should (the end of the text: past it)."""
            curr = self._curr
            if curr and (curr.token_type == TokenType.VAR or curr.text.upper() in self.dialect.VALID_INTERVAL_UNITS):
                self._advance()
                return self.expression(exp.var(curr.text.upper()), curr)
            unit = exp.Var(this="")
            if not curr:                     # sqlglot's end of input (None, or its falsy sentinel)
                unit.meta.update(start=len(self.sql), end=len(self.sql))
                return unit
            return _mark(unit, self.sql, curr)

        def _parse_table_argument(self):
            """``TABLE name [PARTITION BY col, ...]`` as a function's argument, or None."""
            if not (self._curr and self._curr.token_type == TokenType.TABLE and self._next
                    and self._next.token_type != TokenType.L_PAREN):
                return None
            first = self._curr
            self._advance()
            table = self._parse_table_parts()
            partition = None
            if self._match(TokenType.PARTITION_BY):
                at_partition = self._prev.start
                partition = []
                while (column := self._parse_partition_column()) is not None:
                    partition.append(column)
                    if not self._match(TokenType.COMMA):
                        break
                    if self._curr.text.upper() == "DESCRIPTOR" or (self._next and self._next.token_type == TokenType.FARROW):
                        self._retreat(self._index - 1)   # the comma ends the list: the next argument follows
                        break
            node = _mark(self.expression(TableArgument(this=table, partition_by=partition)), self.sql, first,
                         self._prev)
            if partition is not None:
                node.meta["partition"] = at_partition        # where PARTITION BY starts
            return node

        def _parse_partition_column(self):
            """A column of ``PARTITION BY`` in a table argument; the list ends at a comma
            followed by the next argument (``DESCRIPTOR(...)``, ``NAME => ...``)."""
            return self._parse_column()

        def _parse_table(self, *args, **kwargs):
            first = self._curr
            node = super()._parse_table(*args, **kwargs)
            if isinstance(node, (exp.Table, exp.Subquery)) and first is not None:
                _mark(node, self.sql, first, self._prev)
            if node is not None and self._curr and self._curr.token_type == TokenType.MATCH_RECOGNIZE:
                match = self._parse_match_recognize()       # a table ref's postfix, as Flink reads it
                match.set("this", node)
                match.meta.update(start=node.meta.get("start", match.meta["start"]),
                                  clause=match.meta["start"])
                node = match
            return node

        def _parse_lateral(self):
            first = self._curr
            return _mark(super()._parse_lateral(), self.sql, first, self._prev)

        def _parse_where(self, *args, **kwargs):
            """WHERE and its condition; ``meta["condition"]``: where the condition starts."""
            index = self._index
            where = super()._parse_where(*args, **kwargs)
            if where is not None and self._tokens[index].token_type == TokenType.WHERE:
                _mark(where, self.sql, self._tokens[index], self._prev)
                where.meta["condition"] = self._tokens[index + 1].start
            return where

        def _parse_join(self, *args, **kwargs):
            """A join from its first token (a comma, or JOIN or its kind) to its condition's
            end; ``meta["on"]``: where its ON is (the last ON outside parentheses),
            ``meta["condition"]`` where the condition after it starts, ``meta["next"]`` the
            (start, last character) of the token after the join."""
            index = self._index
            join = super()._parse_join(*args, **kwargs)
            if join is None:
                return None
            _mark(join, self.sql, self._tokens[index], self._prev)
            join.meta["next"] = (self._curr.start, self._curr.end) if self._curr else (len(self.sql), len(self.sql))
            depth = 0
            for k in range(index, self._index - 1):
                token = self._tokens[k]
                depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
                if depth == 0 and token.token_type == TokenType.ON:
                    join.meta.update(on=token.start, condition=self._tokens[k + 1].start)
            return join

        def _parse_match_recognize(self):
            """The clause, read as strictly as Flink reads it, its errors the kit's (a SqlError
            naming what it expected and what it found); ``meta`` from the word MATCH_RECOGNIZE
            to its closing parenthesis (the alias after it is not the clause's)."""
            if not self._curr or self._curr.token_type != TokenType.MATCH_RECOGNIZE:
                return None
            first = self._advance_any()
            self._expect_op(TokenType.L_PAREN, "(")
            partition = self._match_columns(self._column_name) if self._expect_pair("PARTITION", "BY") else None
            order = self._match_columns(self._order_item) if self._expect_pair("ORDER", "BY") else None
            measures = self._match_columns(self._measure) if self._word("MEASURES") else None
            rows = self._rows_per_match()
            after = self._after_match()
            if not self._word("PATTERN"):
                raise self._fail("expected 'PATTERN'")
            pattern = self._pattern_span()
            within = None
            if self._word("WITHIN"):
                if not (self._curr and self._curr.token_type == TokenType.INTERVAL):
                    raise self._fail("expected 'INTERVAL'")
                within = self._parse_interval()
            subset = self._match_columns(self._subset) if self._word("SUBSET") else None
            define = self._match_columns(self._definition) if self._word("DEFINE") else None
            close = self._expect_op(TokenType.R_PAREN, ")")
            node = _mark(self.expression(MatchRecognize(
                partition_by=partition, order=order and self.expression(exp.Order(expressions=order)),
                measures=measures, rows=rows, after=after, pattern=pattern, within=within, subset=subset,
                define=define)), self.sql, first, close)
            node.set("alias", self._parse_table_alias())
            return node

        def parse_match_expression(self, raw_tokens: list, sql: str) -> exp.Expression:
            """The MEASURES or DEFINE expression that is all of ``raw_tokens`` (of ``sql``)."""
            return self._parse(Flink.Parser._match_expression_alone, raw_tokens, sql)[0]

        def _match_expression_alone(self):
            node = self._match_expression()
            if self._curr:
                raise self._fail("expected end of expression")
            return node

        def _match_recognize_alone(self):
            """A clause that is all of the text (``parse_match_recognize``), read from its word."""
            self._retreat(self._index - 1)
            node = self._parse_match_recognize()
            if self._curr:
                raise self._fail("expected end of input")
            return node

        # -- the clause's parts, each as sqlglot's MatchRecognize holds it

        def _match_columns(self, item) -> list:
            """``item, item, ...``."""
            items = [item()]
            while self._match(TokenType.COMMA):
                items.append(item())
            return items

        def _column_name(self):
            """A column, optionally qualified (``t.symbol``)."""
            name = self._name("a column")
            if self._match(TokenType.DOT):
                return exp.Column(this=self._name("a column name"), table=name)
            return exp.Column(this=name)

        def _order_item(self):
            return self._parse_ordered(self._column_name)

        def _measure(self):
            """``expr AS alias``, placed where ``expr`` starts."""
            first = self._curr
            expression = self._match_expression()
            self._expect("AS")
            alias = self._name("an alias")
            return _mark(self.expression(exp.MatchRecognizeMeasure(
                this=exp.Alias(this=expression, alias=alias))), self.sql, first, self._prev)

        def _rows_per_match(self):
            if self._word("ONE"):
                self._expect("ROW", "PER", "MATCH")
                return exp.var("ONE ROW PER MATCH")
            if not self._word("ALL"):
                return None
            self._expect("ROWS", "PER", "MATCH")
            text = "ALL ROWS PER MATCH"
            for words in (("SHOW", "EMPTY", "MATCHES"), ("OMIT", "EMPTY", "MATCHES"), ("WITH", "UNMATCHED", "ROWS")):
                if self._word(words[0]):
                    self._expect(*words[1:])
                    return exp.var(f"{text} {' '.join(words)}")
            return exp.var(text)

        def _after_match(self):
            """``AFTER MATCH SKIP ...`` as a ``Var`` of its words, placed from AFTER to its last
            token (a variable's, when it names one)."""
            first = self._word("AFTER")
            if first is None:
                return None
            self._expect("MATCH", "SKIP")
            if self._word("PAST"):
                self._expect("LAST", "ROW")
                text = "PAST LAST ROW"
            else:
                self._expect("TO")
                if self._curr and self._curr.text.upper() == "NEXT" and self._next and self._next.text.upper() == "ROW":
                    self._advance(2)
                    text = "TO NEXT ROW"
                elif self._word("FIRST", "LAST"):
                    text = f"TO {self._prev.text.upper()} {self._name('a pattern variable').name}"
                else:
                    text = f"TO {self._name('a pattern variable, FIRST, LAST or NEXT ROW').name}"
            return _mark(exp.var(f"AFTER MATCH SKIP {text}"), self.sql, first, self._prev)

        def _pattern_span(self):
            """``( pattern )``: the pattern as a ``Var`` of its text, placed on its tokens (the
            kit reads its grammar from them: ``kit.sql.match_recognize``). It ends at the
            parenthesis that closes it, or at a reserved word, which no pattern holds."""
            self._expect_op(TokenType.L_PAREN, "(")
            first, depth = self._curr, 0
            while self._curr and not (depth == 0 and self._curr.token_type == TokenType.R_PAREN):
                if self._curr.token_type != TokenType.IDENTIFIER and self._curr.text.upper() in RESERVED:
                    break
                depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(self._curr.token_type, 0)
                self._advance()
            if self._curr is first:
                raise self._fail("expected a pattern variable")
            last = self._prev
            self._expect_op(TokenType.R_PAREN, ")")
            return _mark(exp.var(self._find_sql(first, last)), self.sql, first, last)

        def _subset(self):
            """``u = (a, b)`` of SUBSET."""
            name = self._name("a subset name")
            self._expect_op(TokenType.EQ, "=")
            self._expect_op(TokenType.L_PAREN, "(")
            members = self._match_columns(lambda: self._name("a pattern variable"))
            self._expect_op(TokenType.R_PAREN, ")")
            return exp.Kwarg(this=name, expression=exp.Tuple(expressions=members))

        def _definition(self):
            """``v AS condition`` of DEFINE."""
            name = self._name("a pattern variable")
            self._expect("AS")
            return exp.Alias(alias=name, this=self._match_expression())

        def _match_expression(self):
            """An expression of MEASURES or DEFINE: its calls by the name written (``Anonymous``,
            their arguments as written: sqlglot's own ``LAST(x, 1)`` drops the offset), CAST and
            the like as sqlglot reads them."""
            curr = self._curr
            if curr and curr.token_type != TokenType.IDENTIFIER and curr.text.upper() in RESERVED \
                    and curr.text.upper() not in _STARTS_EXPRESSIONS:
                raise self._fail("expected an expression")
            matching, self._matching = self._matching, True
            try:
                node = self._parse_disjunction()
            except ParseError as error:         # what sqlglot missed, at the token it stopped on
                said = error.errors[0].get("description") or "" if error.errors else ""
                expected = said[10:] if said.startswith("Expecting ") else "END" if "END after CASE" in said else None
                raise self._fail(f"expected '{expected}'" if expected else "expected an expression") from None
            finally:
                self._matching = matching
            if node is None:
                raise self._fail("expected an expression")
            return node

        def _parse_equality(self, parse_is: bool = True):
            """In MEASURES and DEFINE, Flink's precedence: comparisons and the postfix predicates
            (IS, IN, BETWEEN, LIKE) one level, read left to right (sqlglot's binds IN tighter than
            ``<`` and ``<`` tighter than ``=``)."""
            if not self._matching:
                return super()._parse_equality(parse_is)
            compare = {**self.EQUALITY, **self.COMPARISON}
            this = self._parse_bitwise()
            while this is not None:
                if self._match_set(compare):
                    kind = compare[self._prev.token_type]
                    this = self.expression(kind(this=this, expression=self._parse_bitwise()))
                    continue
                index = self._index
                this = self._parse_range(this, parse_is=True)
                if self._index == index:
                    break
            return this

        def _parse_function_call(self, functions=None, anonymous=False, optional_parens=True, any_token=False):
            """A function call; ``meta["close"]``: where its closing parenthesis is. In MEASURES
            and DEFINE, by the name written (``Anonymous``) but CAST."""
            if self._matching and self._curr and self._curr.text.upper() != "CAST":
                anonymous = True
            node = super()._parse_function_call(functions, anonymous, optional_parens, any_token)
            if isinstance(node, exp.Func) and self._prev.token_type == TokenType.R_PAREN:
                node.meta["close"] = self._prev.start
            return node

        def _parse_case(self):
            if self._matching and self._curr and self._curr.text.upper() == "END":
                raise self._fail("expected 'WHEN'")
            return super()._parse_case()

        def _parse_select(self, *args, **kwargs):
            """A query, placed; one inside a MEASURES or DEFINE expression reads as any query."""
            matching, self._matching = self._matching, False
            try:
                return self._placed(super()._parse_select, *args, **kwargs)
            finally:
                self._matching = matching

        def _parse_primary(self):
            return self._placed(super()._parse_primary)

        def _parse_types(self, *args, **kwargs):
            """A type, placed (a CAST's: the rewrite to Spark SQL respells it)."""
            return self._placed(super()._parse_types, *args, **kwargs)

        def _parse_atom(self):
            return self._placed(super()._parse_atom)

        def _placed(self, parse, *args, **kwargs):
            """What ``parse`` reads, placed on its tokens unless sqlglot placed it."""
            first = self._curr
            node = parse(*args, **kwargs)
            if node is not None and first and "start" not in node.meta:
                _mark(node, self.sql, first, self._prev)
            return node

        # -- reading words as the kit's errors name them

        def _fail(self, message: str, token: Token | None = None) -> SqlError:
            """A SqlError at ``token`` (the current one; past the end: end of input) saying what is there."""
            token = token or self._curr
            start, end = (token.start, token.end) if token else (len(self.sql), len(self.sql))
            return error_at(self.sql, message, start, end)

        def _word(self, *words: str) -> Token | None:
            """The current token, consumed, when it is one of ``words`` (unquoted, any case)."""
            curr = self._curr
            if curr and curr.token_type != TokenType.IDENTIFIER and curr.text.upper() in words:
                self._advance()
                return curr
            return None

        def _expect(self, *words: str) -> None:
            """Each of ``words`` in turn, or the kit's error at what stands there."""
            for word in words:
                if not self._word(word):
                    raise self._fail(f"expected '{word}'")

        def _expect_pair(self, first: str, second: str) -> bool:
            """``first second`` (sqlglot reads ``PARTITION BY`` as one token): False when
            ``first`` is not there; the kit's error when ``second`` is not."""
            if self._word(f"{first} {second}"):
                return True
            if not self._word(first):
                return False
            self._expect(second)
            return True

        def _expect_op(self, kind: TokenType, text: str) -> Token:
            if not self._match(kind):
                raise self._fail(f"expected '{text}'")
            return self._prev

        def _name(self, what: str) -> exp.Identifier:
            """A name (plain or back-quoted, not a reserved word) as a placed ``Identifier``."""
            curr = self._curr
            if not (curr and is_name(curr)):
                raise self._fail(f"expected {what}")
            self._advance()
            return _mark(exp.Identifier(this=curr.text, quoted=curr.token_type == TokenType.IDENTIFIER),
                         self.sql, curr)

    class Generator(Spark.Generator):
        """Renders a Flink tree as Flink SQL (what Spark runs is rendered with ``dialect="spark"``
        once the planner has replaced the nodes Spark lacks)."""
        TRANSFORMS = {
            **Spark.Generator.TRANSFORMS,
            TableArgument: lambda self, e: "TABLE " + self.sql(e, "this") + (
                " PARTITION BY " + self.expressions(e, key="partition_by", flat=True)
                if e.args.get("partition_by") else ""),
            MatchRecognize: lambda self, e: self.match_recognize_flink_sql(e),
            Semantics: lambda self, e: f"{e.args['kind']} {self.sql(e, 'this')}",
            exp.Version: lambda self, e: (f"FOR SYSTEM_TIME AS OF {self.sql(e, 'expression')}"
                                          if e.args.get("kind") == "AS OF" and e.name == "TIMESTAMP"
                                          else Spark.Generator.version_sql(self, e)),
        }

        def match_recognize_flink_sql(self, e) -> str:
            text = self.matchrecognize_sql(e).lstrip()
            if e.args.get("this"):
                text = f"{self.sql(e, 'this')} {text}"
            extra = ""
            if e.args.get("within"):
                extra += f" WITHIN {self.sql(e, 'within')}"
            if e.args.get("subset"):
                extra += " SUBSET " + ", ".join(f"{self.sql(k, 'this')} = {self.sql(k, 'expression')}"
                                                for k in e.args["subset"])
            if extra:
                pattern = f"PATTERN ({self.sql(e, 'pattern')})"
                text = text.replace(pattern, pattern + extra, 1)
            return text
