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
- ``MATCH_RECOGNIZE`` (Spark's tokenizer has no such word): sqlglot's ``MatchRecognize`` as
  its other dialects read it, plus ``WITHIN INTERVAL ...`` and ``SUBSET u = (a, b)``
  (``MatchRecognize`` here, a subclass with the two arguments). sqlglot keeps the
  ``PATTERN`` as its text; like every argument of the clause it is attached to the SELECT
  (``select.args["match"]``) whose FROM holds the table it reads;
- ``FOR SYSTEM_TIME AS OF expr`` on a joined table: Spark's parser reads it already, into
  the table's ``version`` (``exp.Version``, kind ``AS OF``);
- Flink's type names in CAST: ``BYTES``, ``TIMESTAMP(p) WITH LOCAL TIME ZONE``.

Legacy group windows (``GROUP BY TUMBLE(c, INTERVAL '1' HOUR)``, ``TUMBLE_START(...)``) and
``LATERAL TABLE (f(t))`` read as Spark reads them: functions.

Positions. sqlglot's tokens know their line, column and offsets; the parser copies them to
identifiers (``node.meta``: ``line``, ``col``, ``start``, ``end``). This parser also gives
them to each node it adds and to each table source (``Table``, ``TableFromRows``, a
``MatchRecognize``: ``meta["start"]`` the offset of its first character), so a reader can
name the user's line and column (``position``) and find a node by where it starts
(``at``).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import Token, TokenType

from .errors import position as position_of

__all__ = ["Flink", "MatchRecognize", "Semantics", "TableArgument", "WINDOW_TVFS", "at", "first_token",
           "position", "span"]

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


def _named(var, name):
    """``var`` with the position of ``name``, the identifier it was read from."""
    var.meta.update({k: v for k, v in name.meta.items() if k in ("start", "end")})
    return var


def position(node: exp.Expression) -> tuple[int, int] | None:
    """(line, column), 1-based, where ``node`` starts in the text (None: not known)."""
    meta = node.meta if node is not None else {}
    return (meta["line"], meta["col"]) if "line" in meta and "col" in meta else None


def first_token(node: exp.Expression) -> tuple[int, int] | None:
    """(start, end) offsets of the first token of ``node`` that the parser placed (its own, or
    its earliest positioned descendant's: a ``Column``'s first identifier), or None.

    >>> from kit.sql.statement import Statement
    >>> first_token(Statement("SELECT B.price FROM t").tree.selects[0])
    (7, 7)
    """
    placed = [n for n in node.walk() if "start" in n.meta]
    if not placed:
        return None
    first = min(placed, key=lambda n: n.meta["start"])
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
            """``RUNNING`` / ``FINAL`` before a function call: a ``Semantics``."""
            curr, nxt = self._curr, self._next
            after = self._tokens[self._index + 2] if self._index + 2 < len(self._tokens) else None
            if curr and curr.text.upper() in ("RUNNING", "FINAL") and nxt and after \
                    and nxt.token_type in (TokenType.VAR, *self.FUNC_TOKENS) and after.token_type == TokenType.L_PAREN:
                self._advance()
                return self.expression(Semantics(this=self._parse_unary(), kind=curr.text.upper()))
            return super()._parse_unary()

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
            if curr is None:
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

        def _parse_function_call(self, *args, **kwargs):
            """A function call; ``meta["close"]``: where its closing parenthesis is."""
            node = super()._parse_function_call(*args, **kwargs)
            if isinstance(node, exp.Func) and self._prev.token_type == TokenType.R_PAREN:
                node.meta["close"] = self._prev.start
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
            if not self._curr or self._curr.token_type != TokenType.MATCH_RECOGNIZE:
                return None
            first = self._curr
            return _mark(self._parse_match_recognize_body(), self.sql, first, self._prev)

        def _parse_match_recognize_body(self):
            """The clause as sqlglot reads it, with WITHIN after PATTERN and SUBSET before DEFINE."""
            self._match(TokenType.MATCH_RECOGNIZE)
            self._match_l_paren()
            partition = self._parse_partition_by()
            order = self._parse_order()
            measures = (self._parse_csv(self._parse_match_recognize_measure)
                        if self._match_text_seq("MEASURES") else None)
            rows = None
            if self._match_text_seq("ONE", "ROW", "PER", "MATCH"):
                rows = exp.var("ONE ROW PER MATCH")
            elif self._match_text_seq("ALL", "ROWS", "PER", "MATCH"):
                text = "ALL ROWS PER MATCH"
                for words in (("SHOW", "EMPTY", "MATCHES"), ("OMIT", "EMPTY", "MATCHES"), ("WITH", "UNMATCHED", "ROWS")):
                    if self._match_text_seq(*words):
                        text += " " + " ".join(words)
                        break
                rows = exp.var(text)
            after = None
            if self._match_text_seq("AFTER", "MATCH", "SKIP"):
                text = "AFTER MATCH SKIP"
                if self._match_text_seq("PAST", "LAST", "ROW"):
                    text += " PAST LAST ROW"
                elif self._match_text_seq("TO", "NEXT", "ROW"):
                    text += " TO NEXT ROW"
                elif self._match_text_seq("TO"):
                    direction = self._prev.text.upper()
                    if self._match_texts(("FIRST", "LAST")):
                        direction = f"TO {self._prev.text.upper()}"
                    var = self._advance_any()
                    if not var:
                        self.raise_error("Expecting a pattern variable after AFTER MATCH SKIP TO")
                    text += f" {direction} {var.text}"
                after = exp.var(text)
            pattern = within = subset = None
            if self._match_text_seq("PATTERN"):
                self._match_l_paren()
                depth, start, end = 1, self._curr, None
                while self._curr and depth > 0:
                    if self._curr.token_type == TokenType.L_PAREN:
                        depth += 1
                    elif self._curr.token_type == TokenType.R_PAREN:
                        depth -= 1
                    end = self._prev
                    self._advance()
                if depth > 0:
                    self.raise_error("Expecting )", self._curr)
                pattern = _mark(exp.var(self._find_sql(start, end)), self.sql, start, end)
                if self._match_text_seq("WITHIN"):
                    within = self._parse_interval()
            if self._match_text_seq("SUBSET"):
                subset = self._parse_csv(self._parse_subset)
            define = self._parse_csv(self._parse_name_as_expression) if self._match_text_seq("DEFINE") else None
            self._match_r_paren()
            return self.expression(MatchRecognize(
                partition_by=partition, order=order, measures=measures, rows=rows, after=after,
                pattern=pattern, within=within, subset=subset, define=define,
                alias=self._parse_table_alias()))

        def _parse_subset(self):
            """``u = (a, b)`` of SUBSET."""
            name = self._parse_id_var()
            self._match(TokenType.EQ)
            return self.expression(exp.Kwarg(this=name, expression=self.expression(
                exp.Tuple(expressions=self._parse_wrapped_csv(self._parse_id_var)))))

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
