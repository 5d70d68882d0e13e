"""A Flink SQL query rewritten into Spark SQL, with a map back to the user's text.

Six rewrites, all on tokens of the original text (comments and layout are kept):

- each ``<table_ref> MATCH_RECOGNIZE ( ... )`` (``table_ref`` a name or a parenthesised
  subquery) becomes the name of a view holding the clause's result (``[AS] alias`` stays);
- a registered table named in a FROM list or JOIN becomes its internal view, aliased to the
  name the user wrote (``FROM Ticker`` -> ``FROM __kit_v1 AS `Ticker```) so ``Ticker.price``
  still resolves;
- each window TVF ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), ...))`` becomes the name of a view
  of ``t`` with its windows (``windows.py``); so does the table of a legacy group window
  (``GROUP BY TUMBLE(c, ...)``, whose ``TUMBLE_START(...)`` etc. become column names);
- the two tables of a temporal or interval join become views of the rows the join kept,
  linked row to row (``temporal.py``, ``interval.py``), and its condition gains the link;
  the key equalities of a temporal join become ``TRUE``: the link implies them (a NULL key
  too, as Flink keys its state by them), and Spark joins on the one link column;
- Flink type spellings Spark lacks, in CAST: ``TIMESTAMP(3)`` -> ``TIMESTAMP``, ``VARCHAR``
  -> ``STRING``, ``BYTES`` -> ``BINARY``, ``... WITH LOCAL TIME ZONE`` -> ``TIMESTAMP_LTZ``.

Every piece of the output remembers where it came from, so a Spark error at an offset of
the rewritten text points back at the user's line and column.
"""

from __future__ import annotations

import bisect
import re

from .dialect import MatchRecognize
from .errors import SqlError, error_at
from .expressions import ExpressionParser
from .interval import find_interval_joins
from .lexer import Token
from .rewritten import Rewritten
from .match_recognize import SpecReader
from .statement import Statement
from .temporal import find_temporal_joins
from .windows import find_group_window, find_windows, groups_by_window

__all__ = ["Resolver", "Rewritten", "clauses", "rewrite"]

_CLAUSE_WORDS = ("SELECT", "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION",
                 "EXCEPT", "INTERSECT")
_JOIN_WORDS = ("LEFT", "RIGHT", "FULL", "INNER", "CROSS", "OUTER", "NATURAL", "LATERAL",
               "SEMI", "ANTI", "WINDOW", "TABLESAMPLE")
# Flink type spellings Spark does not take, by the normalised name ExpressionParser reads
_SPARK_TYPES = {"VARCHAR": "STRING", "BYTES": "BINARY", "DOUBLE PRECISION": "DOUBLE",
                "TIMESTAMP WITH LOCAL TIME ZONE": "TIMESTAMP_LTZ",
                "TIMESTAMP WITHOUT TIME ZONE": "TIMESTAMP"}


class Resolver:
    """What the rewrite asks of its caller (``kit.sql`` runs them on Spark)."""

    def view(self, name: str) -> str | None:
        """The internal view of registered table ``name``, or None."""
        raise NotImplementedError

    def match(self, source, spec, at: Token) -> str:
        """Run ``spec`` on ``source`` (a table name, or a ``Rewritten`` subquery) whose first
        token is ``at``; return the view that holds the result."""
        raise NotImplementedError

    def window(self, call, drop_late: bool) -> str:
        """The view of a window TVF ``call`` (``windows.WindowCall``); ``drop_late``: the
        query aggregates per window, so rows late for their window are dropped."""
        raise NotImplementedError

    def temporal(self, call) -> tuple[str, str, str]:
        """Run the temporal join ``call`` (``temporal.TemporalCall``): the views of its left
        and right rows, each with ``__kit_v``, and the left side's qualifier."""
        raise NotImplementedError

    def stream(self, name: str):
        """The ``kit.Stream`` registered as ``name``, or None (interval joins need two)."""
        return None

    def interval(self, call) -> tuple[str, str]:
        """Run the interval join ``call`` (``interval.IntervalCall``): the views of its left
        and right rows, linked pair by pair with ``__kit_l``/``__kit_r``."""
        raise NotImplementedError


def clauses(query: Statement | str, aggregates=()) -> list:
    """Every MATCH_RECOGNIZE clause of ``query`` as a ``MatchRecognize``, in text order."""
    found = find_match_recognize(Statement.of(query), aggregates)
    return [found[r][2] for r in sorted(found, key=lambda r: found[r][0])]


def rewrite(query: Statement | str, resolver: Resolver, aggregates=()) -> Rewritten:
    """``query`` as Spark SQL (see the module doc); MATCH_RECOGNIZE clauses run on the way."""
    statement = Statement.of(query)
    tokens = statement.tokens
    hi = len(tokens) - 1                          # the EOF token
    while hi > 0 and tokens[hi - 1].kind == "OP" and tokens[hi - 1].value == ";":
        hi -= 1
    fold = getattr(resolver, "semantics", None) == "standard"   # standard SQL's unquoted names
    return _Renderer(statement, find_match_recognize(statement, aggregates, fold), resolver).render(0, hi)


def find_match_recognize(statement: Statement, aggregates, fold=False) -> dict:
    """{index of the table ref's first token: (MATCH_RECOGNIZE index, end index, spec)}, in text
    order: each clause's spec built from its node of the statement's tree (``SpecReader``),
    parsed only when the text holds the word."""
    tokens = statement.tokens
    if not any(tok.is_word("MATCH_RECOGNIZE") for tok in tokens):
        return {}
    tree = statement.tree
    if tree is None:
        raise statement.parse_error
    index = {tok.start: i for i, tok in enumerate(tokens)}
    reader = SpecReader(statement, aggregates, fold)
    found = {}
    for node in sorted(tree.find_all(MatchRecognize), key=lambda n: n.meta.get("clause", n.meta["start"])):
        if "clause" not in node.meta:
            raise error_at(statement.text, "MATCH_RECOGNIZE needs a table or a parenthesised subquery before it",
                           node.meta["start"])
        found[index[node.meta["start"]]] = (index[node.meta["clause"]], index[node.meta["end"]] + 1,
                                            reader.clause(node))
    return found


def _ctes(tokens) -> dict:
    """The queries of a leading ``WITH name [(columns)] AS (query), ...``: name (lower case)
    -> the index of the token after its closing parenthesis (``WITH`` is token 0)."""
    def opens(i):
        return tokens[i].kind == "OP" and tokens[i].value == "("

    def after_parens(i):
        depth = 0
        while True:
            if tokens[i].kind == "OP" and tokens[i].value in ("(", ")"):
                depth += 1 if tokens[i].value == "(" else -1
            i += 1
            if depth == 0 or tokens[i].kind == "EOF":
                return i

    found, i = {}, 1
    if not tokens[0].is_word("WITH"):
        return found
    while tokens[i].kind == "IDENT":
        name, i = tokens[i].value.lower(), i + 1
        if opens(i):                              # a column list
            i = after_parens(i)
        if not (tokens[i].is_word("AS") and opens(i + 1)):
            break
        i = found[name] = after_parens(i + 1)
        if not (tokens[i].kind == "OP" and tokens[i].value == ","):
            break
        i += 1
    return found


class _Renderer:
    """Walks tokens once, copying the text between rewrites verbatim."""

    def __init__(self, statement, found, resolver):
        query, tokens = statement.text, statement.tokens
        self.query, self.tokens, self.found, self.resolver = query, tokens, found, resolver
        self.types = _cast_types(query, tokens)
        self.index = {tok.start: i for i, tok in enumerate(tokens)}      # a token's index by its offset
        self.windows = {self.index[start]: (self._after(end), call)
                        for start, (end, call) in find_windows(statement).items()}
        self.per_window = groups_by_window(statement)
        group_window = find_group_window(statement)
        self.group_window = group_window and (group_window[0], {self.index[start]: (self._after(end), text)
                                                                for start, (end, text) in group_window[1].items()})
        self.ctes = _ctes(tokens)
        index, after = self.index, self._after
        self.temporal = {index[start]: call for start, call in find_temporal_joins(statement).items()}
        self.temporal_left = {index[c.left_at]: c for c in self.temporal.values() if c.left_at is not None}
        self.temporal_cond = {index[c.cond_at]: c for c in self.temporal.values() if c.cond}
        self.temporal_end = {after(c.cond[1]): c for c in self.temporal.values() if c.cond}
        self.interval = {index[at]: c                                         # by ON / WHERE
                         for at, c in find_interval_joins(statement, resolver.stream).items()}
        self.interval_tables = {index[at]: (c, k) for c in self.interval.values()
                                for k, at in enumerate((c.left_at, c.right_at))}
        self.temporal_end.update({after(c.cond[1]): c for c in self.interval.values()})   # closes it too

    def render(self, lo: int, hi: int) -> Rewritten:
        toks = self.tokens
        out = Rewritten(self.query)
        if lo >= hi:
            return out
        done = toks[lo].start                     # source text emitted so far
        context = [None]                          # clause keyword per parenthesis depth
        i = lo
        while i < hi:
            tok = toks[i]
            if i in self.temporal_end:            # close the condition opened at ON / WHERE
                out.copy(done, toks[i - 1].end)
                out.replace(")", toks[i - 1].end)
                done = toks[i - 1].end
            if i in self.temporal:                # the right side: its view
                call = self.temporal[i]
                _, right, _ = self.resolver.temporal(call)
                out.copy(done, tok.start)
                out.replace(f"{right} AS `{call.alias}`", tok.start)
                done, i = call.end, self._after(call.end)
                continue
            if i in self.temporal_cond:           # ON / WHERE: the version each left row met
                call = self.temporal_cond[i]
                _, _, lq = self.resolver.temporal(call)
                out.copy(done, tok.end)
                out.replace(f" `{lq}`.__kit_v = `{call.alias}`.__kit_v AND (", tok.end)
                done, i = tok.end, i + 1
                continue
            end = next((c.implied[tok.start] for c in self.temporal.values() if tok.start in c.implied), None)
            if end is not None:                   # a key equality: the link implies it
                out.copy(done, tok.start)
                out.replace("TRUE", tok.start)
                done, i = end, self._after(end)
                continue
            if i in self.interval:                # ON / WHERE: the pair link
                if tok.is_word("WHERE"):
                    context[-1] = "WHERE"
                out.copy(done, tok.end)
                out.replace(self.interval[i].link(), tok.end)
                done, i = tok.end, i + 1
                continue
            if i in self.found:
                m, end, spec = self.found[i]
                if tok.kind == "OP":              # (subquery) MATCH_RECOGNIZE
                    source = self.render(i + 1, m - 1)
                elif m == i + 1 and tok.value.lower() in self.ctes:   # a WITH query's name
                    source = self.render(0, self.ctes[tok.value.lower()])
                    source.replace(" SELECT * FROM ", tok.start)
                    source.copy(tok.start, tok.end)
                else:
                    source = self.query[tok.start:toks[m - 1].end]
                view = self.resolver.match(source, spec, tok)
                out.copy(done, tok.start)
                out.replace(view, tok.start)
                done, i = toks[end - 1].end, end
                continue
            if self.group_window and i in self.group_window[1]:   # GROUP BY TUMBLE(...), TUMBLE_START(...)
                end, text = self.group_window[1][i]
                out.copy(done, tok.start)
                out.replace(text, tok.start)
                done, i = toks[end - 1].end, end
                continue
            if i in self.windows:                # TABLE(TUMBLE(...)) and friends
                end, call = self.windows[i]
                self._cte_table(call.table, toks[self.index[call.table_at]])
                out.copy(done, tok.start)
                out.replace(self.resolver.window(call, self.per_window), tok.start)
                done, i = toks[end - 1].end, end
                continue
            if tok.kind == "OP" and tok.value == "(":
                context.append(None)
            elif tok.kind == "OP" and tok.value == ")":
                if len(context) > 1:
                    context.pop()
            elif tok.kind == "KEYWORD" and tok.value in _CLAUSE_WORDS:
                context[-1] = tok.value
            elif self._is_table(i, context[-1]):
                if self.group_window and not self.group_window[0].table:
                    self._cte_table(tok.value, tok)   # a group window over a WITH query
                view = (self.resolver.temporal(self.temporal_left[i])[0] if i in self.temporal_left
                        else self.resolver.interval(self.interval_tables[i][0])[self.interval_tables[i][1]]
                        if i in self.interval_tables else self.resolver.view(tok.value))
                if view is not None and self.group_window and not self.group_window[0].table:   # its table: the first
                    call = self.group_window[0]
                    call.table, call.table_at = tok.value, tok.start
                    view = self.resolver.window(call, True)
                if view is not None:
                    nxt = toks[i + 1]
                    aliased = nxt.is_word("AS") or (nxt.kind == "IDENT" and not nxt.is_word(*_JOIN_WORDS))
                    text = view if aliased else f"{view} AS `{tok.value.replace('`', '``')}`"
                    out.copy(done, tok.start)
                    out.replace(text, tok.start)
                    done = tok.end
            elif i in self.types:
                end, spark_type = self.types[i]
                out.copy(done, tok.start)
                out.replace(spark_type, tok.start)
                done, i = toks[end - 1].end, end
                continue
            i += 1
        out.copy(done, toks[hi - 1].end)
        if hi in self.temporal_end:
            out.replace(")", toks[hi - 1].end)
        return out

    def _after(self, end: int) -> int:
        """The index of the first token at or after offset ``end``."""
        return bisect.bisect_left(self.tokens, end, key=lambda tok: tok.start)

    def _cte_table(self, name, tok):
        """A WITH query named where a window needs a table (``TABLE name`` of a window TVF, the
        table of a group window): run once, as ``WITH ... SELECT * FROM name``, and registered
        under its name -- so a window can read a MATCH_RECOGNIZE's output, its
        ``MATCH_ROWTIME()`` as the time."""
        key = name.lower()
        if key not in self.ctes or not hasattr(self.resolver, "register_query") or self.resolver.view(name) is not None:
            return
        source = self.render(0, self.ctes[key])
        source.replace(" SELECT * FROM ", tok.start)
        source.copy(tok.start, tok.end)
        self.resolver.register_query(name, source)

    def _is_table(self, i, clause) -> bool:
        """A single-part name right after FROM, JOIN, or a comma of a FROM list."""
        toks = self.tokens
        tok = toks[i]
        if tok.kind != "IDENT" or i == 0:
            return False
        prev, nxt = toks[i - 1], toks[i + 1]
        if nxt.kind == "OP" and nxt.value in (".", "("):
            return False
        return prev.is_word("FROM", "JOIN") or (prev.kind == "OP" and prev.value == ","
                                                and clause == "FROM")


def _cast_types(query, tokens) -> dict:
    """{index of the type in ``CAST(x AS type)``: (end index, Spark's spelling)} for the
    types Spark spells differently: ``TIMESTAMP(3)`` -> ``TIMESTAMP``, ``VARCHAR`` ->
    ``STRING``, ``BYTES`` -> ``BINARY``, ``TIMESTAMP(3) WITH LOCAL TIME ZONE`` ->
    ``TIMESTAMP_LTZ``..."""
    types = {}
    for k, tok in enumerate(tokens[:-1]):
        if not (tok.is_word("CAST") and tokens[k + 1].kind == "OP" and tokens[k + 1].value == "("):
            continue
        depth, j = 0, k + 1
        while tokens[j].kind != "EOF":
            if tokens[j].kind == "OP" and tokens[j].value in ("(", ")"):
                depth += 1 if tokens[j].value == "(" else -1
                if depth == 0:
                    break
            elif depth == 1 and tokens[j].is_word("AS"):
                parser = ExpressionParser(query, tokens, j + 1)
                try:
                    flink = parser.type_name()
                except SqlError:
                    break                               # Spark reports it
                spark = _spark_type(flink)
                if parser.i == _close(tokens, j) and spark != flink:
                    types[j + 1] = (parser.i, spark)
                break
            j += 1
    return types


def _close(tokens, j) -> int:
    """Index of the ``)`` that closes the parenthesis ``tokens[j]`` is inside."""
    depth = 0
    while tokens[j].kind != "EOF":
        if tokens[j].kind == "OP" and tokens[j].value in ("(", ")"):
            depth += 1 if tokens[j].value == "(" else -1
            if depth < 0:
                return j
        j += 1
    return j


def _spark_type(flink: str) -> str:
    """Spark's spelling of a Flink type name as ``ExpressionParser.type_name`` reads it."""
    plain = re.sub(r"\(\d+\)", "", flink)                 # without lengths and precisions
    if plain in _SPARK_TYPES:
        return _SPARK_TYPES[plain]
    if plain in ("TIMESTAMP", "TIMESTAMP_LTZ"):             # Spark's take no precision
        return plain
    return flink
