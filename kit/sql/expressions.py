"""Expressions of DEFINE and MEASURES, parsed into ``kit.match_recognize.spec`` nodes.

Precedence, loosest first: ``OR`` < ``AND`` < ``NOT`` < comparison, ``IS [NOT] NULL``,
``[NOT] BETWEEN``, ``[NOT] IN``, ``[NOT] LIKE`` < ``||`` < ``+ -`` < ``* / %`` < unary ``-``.

An expression may be ``MAX_DEPTH`` nodes deep (``a + b + c`` is three: a chain of operators
nests to the left): the walks over it, the kit's and pickle's as Spark sends it to the
workers, recurse once per level and would hit Python's recursion limit.

>>> ExpressionParser.parse("LAST(B.price, 1) IS NULL OR B.price > 2 * LAST(B.price, 2)")
Binary(op='OR', left=IsNull(arg=Nav(kind='LAST', arg=Column(name='price', var='B'), offset=1), \
negated=False), right=Binary(op='>', left=Column(name='price', var='B'), right=Binary(op='*', \
left=Literal(value=2, type='INT'), right=Nav(kind='LAST', arg=Column(name='price', var='B'), \
offset=2))))
"""

from __future__ import annotations

import datetime
import decimal

from ..match_recognize import spec as S
from .cursor import Cursor
from ..match_recognize.spec import INTERVAL_UNITS, STANDARD_AGGREGATES
from .intervals import LEADING_DIGITS, fields_ms
from .lexer import tokenize

__all__ = ["AGGREGATES", "STANDARD_AGGREGATES", "INTERVAL_UNITS", "MAX_DEPTH", "ExpressionParser", "depth"]

#: Built-in aggregate functions; callers add user aggregates by name.
AGGREGATES = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX"})


_NAV = {"FIRST": 0, "LAST": 0, "PREV": 1, "NEXT": 1}
_COMPARE = ("=", "<>", "!=", "<", "<=", ">", ">=")
_POSTFIX = ("BETWEEN", "IN", "LIKE")
_INT_MAX, _BIGINT_MAX = 2**31 - 1, 2**63 - 1
MAX_DEPTH = 200


class ExpressionParser(Cursor):
    """Recursive descent over the expression grammar; one method per rule.

    ``aggregates`` names user aggregate functions (upper case) that parse as ``Aggregate``.
    """

    def __init__(self, text, tokens, i=0, aggregates=()):
        super().__init__(text, tokens, i)
        self.aggregates = AGGREGATES | STANDARD_AGGREGATES | {a.upper() for a in aggregates}
        self.inside = False       # parsing an expression: a nested one is checked with it
        self.fold = False         # standard SQL: unquoted pattern variable names in upper case

    def var_name(self, tok) -> str:
        """A pattern variable's (or subset's) name: as written when quoted (or in Flink SQL,
        whose names keep their case), upper-cased when ``fold`` (standard SQL's rule for a
        name that is not a delimited identifier)."""
        return tok.value.upper() if self.fold and not tok.quoted else tok.value

    @classmethod
    def parse(cls, text: str, aggregates=()):
        """The expression that is all of ``text``."""
        parser = cls(text, tokenize(text), aggregates=aggregates)
        expr = parser.expression()
        if parser.peek().kind != "EOF":
            raise parser.error("expected end of expression")
        return expr

    # ------------------------------------------------------------ boolean layers

    def expression(self):
        """An expression; a whole one (not inside another) at most ``MAX_DEPTH`` deep."""
        if self.inside:
            return self.or_expr()
        start, self.inside = self.peek(), True
        try:
            expr = self.or_expr()
        finally:
            self.inside = False
        levels = depth(expr)
        if levels > MAX_DEPTH:
            raise self.error(f"this expression is {levels} nodes deep (a chain of operators nests one per operator), "
                             f"more than the {MAX_DEPTH} the kit takes: split the chain, or compute part of it as "
                             "a column of the input", start, found=False)
        return expr

    def or_expr(self):
        left = self.and_expr()
        while (tok := self.accept("OR")):
            left = S.Binary("OR", left, self.and_expr(), pos=tok.pos)
        return left

    def and_expr(self):
        left = self.not_expr()
        while (tok := self.accept("AND")):
            left = S.Binary("AND", left, self.not_expr(), pos=tok.pos)
        return left

    def not_expr(self):
        if (tok := self.accept("NOT")):
            return S.Unary("NOT", self.not_expr(), pos=tok.pos)
        return self.predicate()

    def predicate(self):
        """Comparisons and the postfix predicates IS NULL, BETWEEN, IN, LIKE."""
        left = self.concat_expr()
        while True:
            tok = self.peek()
            if self.at_op(*_COMPARE):
                op = self.next().value
                left = S.Binary("<>" if op == "!=" else op, left, self.concat_expr(), pos=tok.pos)
            elif self.accept("IS"):
                negated = bool(self.accept("NOT"))
                self.expect("NULL")
                left = S.IsNull(left, negated, pos=tok.pos)
            elif self.at(*_POSTFIX) or (self.at("NOT") and self.peek(1).is_word(*_POSTFIX)):
                negated = bool(self.accept("NOT"))
                left = self.postfix(left, negated, tok)
            else:
                return left

    def postfix(self, left, negated, tok):
        """``BETWEEN low AND high``, ``IN (items)`` or ``LIKE pattern`` after ``left``."""
        if self.accept("BETWEEN"):
            low = self.concat_expr()
            self.expect("AND")
            return S.Between(left, low, self.concat_expr(), negated, pos=tok.pos)
        if self.accept("IN"):
            self.expect_op("(")
            items = (self.subquery(),) if self.at("SELECT", "WITH") else self.expression_list()
            self.expect_op(")")
            return S.InList(left, items, negated, pos=tok.pos)
        self.expect("LIKE")
        like = S.Call("LIKE", (left, self.concat_expr()), pos=tok.pos)
        return S.Unary("NOT", like, pos=tok.pos) if negated else like

    def expression_list(self) -> tuple:
        items = [self.expression()]
        while self.accept_op(","):
            items.append(self.expression())
        return tuple(items)

    # ------------------------------------------------------------ arithmetic layers

    def concat_expr(self):
        left = self.additive()
        while (tok := self.accept_op("||")):
            left = S.Binary("||", left, self.additive(), pos=tok.pos)
        return left

    def additive(self):
        left = self.multiplicative()
        while (tok := self.accept_op("+", "-")):
            left = S.Binary(tok.value, left, self.multiplicative(), pos=tok.pos)
        return left

    def multiplicative(self):
        left = self.unary()
        while (tok := self.accept_op("*", "/", "%")):
            left = S.Binary(tok.value, left, self.unary(), pos=tok.pos)
        return left

    def unary(self):
        if (tok := self.accept_op("-")):
            return S.Unary("-", self.unary(), pos=tok.pos)
        if self.accept_op("+"):
            return self.unary()
        return self.primary()

    # ------------------------------------------------------------ primaries

    def primary(self):
        tok = self.peek()
        if tok.kind == "NUMBER":
            return self.number()
        if tok.kind == "STRING":
            self.next()
            return S.Literal(tok.value, "STRING", pos=tok.pos)
        if self.at("TRUE", "FALSE"):
            self.next()
            return S.Literal(tok.value.upper() == "TRUE", "BOOLEAN", pos=tok.pos)
        if self.accept("NULL"):
            return S.Literal(None, "NULL", pos=tok.pos)
        if self.at("INTERVAL"):
            ms, _ = self.interval()
            return S.Literal(ms, "INTERVAL", pos=tok.pos)
        if self.at("CASE"):
            return self.case()
        if self.at("CAST"):
            return self.cast()
        if self.accept_op("("):
            inner = self.subquery() if self.at("SELECT", "WITH") else self.expression()
            self.expect_op(")")
            return inner
        if tok.kind == "IDENT":
            return self.word()
        raise self.error("expected an expression")

    def number(self):
        """Integers are INT or BIGINT by size, ``1.5`` is DECIMAL, ``1e3`` is DOUBLE."""
        tok = self.next()
        text = tok.value
        if "e" in text.lower():
            return S.Literal(float(text), "DOUBLE", pos=tok.pos)
        if "." in text:
            return S.Literal(decimal.Decimal(text), "DECIMAL", pos=tok.pos)
        value = int(text)
        kind = "INT" if value <= _INT_MAX else "BIGINT" if value <= _BIGINT_MAX else "DECIMAL"
        return S.Literal(value if kind != "DECIMAL" else decimal.Decimal(value), kind, pos=tok.pos)

    def integer(self, what: str) -> int:
        """A non-negative integer literal (offsets, quantifier bounds)."""
        if self.peek().kind != "NUMBER" or not self.peek().value.isdigit():
            raise self.error(f"expected {what}")
        return int(self.next().value)

    def word(self):
        """An identifier: a typed literal, a RUNNING/FINAL prefix, a call or a column."""
        tok = self.peek()
        nxt = self.peek(1)
        if not tok.quoted:
            name = tok.value.upper()
            if name in ("TIMESTAMP", "DATE") and nxt.kind == "STRING":
                return self.typed_literal()
            if name in ("RUNNING", "FINAL") and nxt.kind == "IDENT":
                self.next()
                return S.Semantics(name, self.primary(), pos=tok.pos)
            if nxt.kind == "OP" and nxt.value == "(":
                return self.call()
            if name == "ARRAY" and nxt.kind == "OP" and nxt.value == "[":
                self.next(), self.next()   # ARRAY[a, b, ...]: a Call of ARRAY
                args = () if self.at_op("]") else self.expression_list()
                self.expect_op("]")
                return S.Call("ARRAY", tuple(args), pos=tok.pos)
        return self.column()

    def typed_literal(self):
        """``TIMESTAMP '2011-04-01 10:00:00'`` or ``DATE '2011-04-01'``."""
        tok = self.next()
        lit = self.next()
        kind = tok.value.upper()
        try:
            if kind == "DATE":
                value = datetime.date.fromisoformat(lit.value)
            else:
                value = datetime.datetime.fromisoformat(lit.value)
        except ValueError:
            raise self.error(f"invalid {kind} literal '{lit.value}'", lit, found=False) from None
        return S.Literal(value, kind, pos=tok.pos)

    def column(self):
        """``price``, ``A.price`` or back-quoted parts."""
        first = self.identifier("a column")
        if self.accept_op("."):
            second = self.identifier("a column name")
            return S.Column(second.value, self.var_name(first), pos=first.pos)
        return S.Column(first.value, None, pos=first.pos)

    def call(self):
        """``name(args)``: navigation, aggregate, MATCH_RECOGNIZE function or scalar call."""
        tok = self.next()
        name = tok.value.upper()
        self.expect_op("(")
        if name in _NAV:
            node = self.navigation(name, tok)
        elif name in self.aggregates:
            node = self.aggregate(name, tok)
        elif name == "CLASSIFIER":
            var = None if self.at_op(")") else self.var_name(self.identifier("a pattern variable or subset"))
            node = S.Classifier(var, pos=tok.pos)
        elif name in ("MATCH_NUMBER", "MATCH_PROCTIME"):
            node = {"CLASSIFIER": S.Classifier, "MATCH_NUMBER": S.MatchNumber,
                    "MATCH_PROCTIME": S.MatchProctime}[name](pos=tok.pos)
        elif name == "MATCH_ROWTIME":
            arg = None if self.at_op(")") else self.expression()
            node = S.MatchRowtime(arg, pos=tok.pos)
        elif name == "EXISTS" and self.at("SELECT", "WITH"):
            node = S.Call(name, (self.subquery(),), pos=tok.pos)
        else:
            args = () if self.at_op(")") else self.expression_list()
            node = S.Call(name, args, pos=tok.pos)
        self.expect_op(")")
        return node

    def subquery(self):
        """The query from the current token (SELECT or WITH) to the parenthesis that closes
        it, left unread: a ``Subquery`` of its text."""
        start, depth = self.peek(), 0
        while True:
            tok = self.peek()
            if tok.kind == "EOF":
                raise self.error("expected ')' to close the subquery")
            if tok.kind == "OP" and tok.value in ("(", ")"):
                if tok.value == ")" and depth == 0:
                    return S.Subquery(self.text[start.start:tok.start].strip(), pos=start.pos)
                depth += 1 if tok.value == "(" else -1
            self.next()

    def navigation(self, name, tok):
        """``FIRST/LAST(expr[, n])`` (default 0) and ``PREV/NEXT(expr[, n])`` (default 1)."""
        arg = self.expression()
        offset = _NAV[name]
        if self.accept_op(","):
            offset = self.integer("a non-negative integer offset")
        return S.Nav(name, arg, offset, pos=tok.pos)

    def aggregate(self, name, tok):
        """``COUNT(*)``, ``SUM([DISTINCT|ALL] expr)``, or a user aggregate, whose several
        arguments make a tuple: ``WAVG(A.price, A.tax)``."""
        distinct = bool(self.accept("DISTINCT"))
        if not distinct:
            self.accept("ALL")
        if name == "COUNT" and not distinct and (self.accept_op("*") or self.at_op(")")):
            return S.Aggregate(name, None, False, pos=tok.pos)   # COUNT(*), COUNT()
        if name == "COUNT" and not distinct and self.peek().kind == "IDENT" and self.peek(1).kind == "OP" \
                and self.peek(1).value == "." and self.peek(2).kind == "OP" and self.peek(2).value == "*":
            var = self.next()
            self.next(), self.next()
            return S.Aggregate(name, S.Column("*", self.var_name(var), pos=var.pos), False, pos=tok.pos)   # COUNT(A.*)
        if name in AGGREGATES:
            return S.Aggregate(name, self.expression(), distinct, pos=tok.pos)
        args = self.expression_list()
        return S.Aggregate(name, args[0] if len(args) == 1 else args, distinct, pos=tok.pos)

    def case(self):
        """``CASE [operand] WHEN w THEN t ... [ELSE e] END``."""
        tok = self.expect("CASE")
        operand = None if self.at("WHEN", "END") else self.expression()
        whens = []
        while self.accept("WHEN"):
            when = self.expression()
            self.expect("THEN")
            whens.append((when, self.expression()))
        if not whens:
            raise self.error("expected 'WHEN'")
        else_ = self.expression() if self.accept("ELSE") else None
        self.expect("END")
        return S.Case(operand, tuple(whens), else_, pos=tok.pos)

    def cast(self):
        """``CAST(expr AS type)``."""
        tok = self.expect("CAST")
        self.expect_op("(")
        arg = self.expression()
        self.expect("AS")
        type_ = self.type_name()
        self.expect_op(")")
        return S.Cast(arg, type_, pos=tok.pos)

    def type_name(self) -> str:
        """A type as Flink spells it, upper-cased: ``DOUBLE``, ``DECIMAL(10, 2)``,
        ``TIMESTAMP(3) WITH LOCAL TIME ZONE``."""
        words = []
        while self.peek().kind in ("IDENT", "KEYWORD") and not self.peek().quoted:
            word = self.next().value.upper()
            if self.accept_op("("):
                params = [str(self.integer("a type parameter"))]
                while self.accept_op(","):
                    params.append(str(self.integer("a type parameter")))
                self.expect_op(")")
                word += "(" + ", ".join(params) + ")"
            words.append(word)
        if not words:
            raise self.error("expected a type name")
        return " ".join(words)

    def interval(self) -> tuple:
        """``INTERVAL '1' HOUR`` or ``INTERVAL '1:30' HOUR TO MINUTE`` as (milliseconds,
        token of the literal)."""
        tok = self.expect("INTERVAL")
        negative = bool(self.accept_op("-"))
        lit = self.peek()
        if lit.kind not in ("STRING", "NUMBER"):
            raise self.error("expected an interval literal such as '1'")
        self.next()
        first = self.interval_unit()
        last = first
        if self.accept("TO"):
            last = self.interval_unit()
        ms = fields_ms(lit.value, first, last)
        if ms is None:
            raise self.error(f"invalid interval '{lit.value}' for {first}" + (f" TO {last}" if last != first else "")
                             + f": give its fields as numbers (at most {LEADING_DIGITS} digits in the first), "
                             "e.g. '1' HOUR or '1:30' HOUR TO MINUTE", lit, found=False)
        return (-ms if negative else ms), tok

    def interval_unit(self) -> str:
        tok = self.peek()
        unit = tok.value.upper() if tok.kind == "IDENT" and not tok.quoted else ""
        if unit.endswith("S") and unit[:-1] in INTERVAL_UNITS:
            unit = unit[:-1]
        if unit not in INTERVAL_UNITS:
            raise self.error("expected an interval unit (" + ", ".join(INTERVAL_UNITS) + ")")
        self.next()
        return unit


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
