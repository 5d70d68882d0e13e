"""A Flink SQL query rewritten into Spark SQL, with a map back to the user's text.

Six rewrites of pieces of the original text, each found in the statement's tree (its nodes
know their offsets) and spliced in by character offsets; the text between them is copied
verbatim, comments and layout kept:

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
  -> ``STRING``, ``BYTES`` -> ``BINARY``, ``... WITH LOCAL TIME ZONE`` -> ``TIMESTAMP_LTZ``;
- each ``SUM(x)`` and ``AVG(x)`` of a SELECT that aggregates a window (a window TVF in its
  FROM, or a legacy group window) becomes Flink's SUM or AVG at Flink's type
  (``kit.aggregate_types``: the SUM of an INT an INT, wrapped around; the AVG of an INT
  truncated), written once the types of its FROM are known (``Resolver.schema`` of
  ``SELECT x, ... FROM <the rewritten FROM>``); under ``semantics="standard"`` they stay.

Every piece of the output remembers where it came from, so a Spark error at an offset of
the rewritten text points back at the user's line and column. Leading and trailing comments
and trailing semicolons are left out (``Statement.extent``).
"""

from __future__ import annotations

import re

from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.tokens import TokenType

from ..aggregate_types import avg_sql, sum_sql
from .dialect import WINDOW_TVFS, MatchRecognize, span
from .errors import error_at
from .interval import find_interval_joins
from .rewritten import Rewritten
from .match_recognize import SpecReader
from .statement import Statement
from .temporal import find_temporal_joins
from .windows import find_group_window, find_windows, groups_by_window

__all__ = ["Resolver", "Rewritten", "clauses", "rewrite"]

# Flink type spellings Spark does not take, by the normalised name ``Statement.cast_type`` reads
_SPARK_TYPES = {"VARCHAR": "STRING", "BYTES": "BINARY", "DOUBLE PRECISION": "DOUBLE",
                "TIMESTAMP WITH LOCAL TIME ZONE": "TIMESTAMP_LTZ",
                "TIMESTAMP WITHOUT TIME ZONE": "TIMESTAMP"}


class Resolver:
    """What the rewrite asks of its caller (``kit.sql`` runs them on Spark)."""

    def view(self, name: str) -> str | None:
        """The internal view of registered table ``name``, or None."""
        raise NotImplementedError

    def match(self, source, spec, at: int, inner=None) -> str:
        """Run ``spec`` on ``source`` (a table name, or a ``Rewritten`` subquery) that starts at
        offset ``at``; return the view that holds the result. ``inner``: the subquery as the
        user wrote it (a ``Statement``; None for a table)."""
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

    def schema(self, query: Rewritten):
        """The output schema (a Spark ``StructType``) of ``query``, analysed without a job."""
        raise NotImplementedError


def clauses(query: Statement | str, aggregates=()) -> list:
    """Every MATCH_RECOGNIZE clause of ``query`` as a ``MatchRecognize``, in text order."""
    found = find_match_recognize(Statement.of(query), aggregates)
    return [found[r][2] for r in sorted(found, key=lambda r: found[r][0])]


def rewrite(query: Statement | str, resolver: Resolver, aggregates=()) -> Rewritten:
    """``query`` as Spark SQL (see the module doc); MATCH_RECOGNIZE clauses run on the way."""
    statement = Statement.of(query)
    statement.tokens       # the kit's checks of the text: nesting depth, characters (a SqlError at the place)
    if statement.tree is None and _holds_flink_only(statement):
        raise statement.parse_error   # Spark would name a place in a construct it cannot read
    fold = getattr(resolver, "semantics", None) == "standard"   # standard SQL's unquoted names
    renderer = _Renderer(statement, find_match_recognize(statement, aggregates, fold), resolver)
    return renderer.render(*statement.extent)


def _holds_flink_only(statement: Statement) -> bool:
    """Whether the text holds a construct Spark's parser lacks: a window TVF (``TABLE(TUMBLE``...),
    MATCH_RECOGNIZE or ``FOR SYSTEM_TIME``."""
    raw = statement.read()
    if any(tok.token_type == TokenType.MATCH_RECOGNIZE or tok.text.upper() == "SYSTEM_TIME" for tok in raw):
        return True
    return any(table.token_type == TokenType.TABLE and paren.token_type == TokenType.L_PAREN
               and call.text.upper() in WINDOW_TVFS for table, paren, call in zip(raw, raw[1:], raw[2:]))


def find_match_recognize(statement: Statement, aggregates, fold=False) -> dict:
    """{offset of the table ref: (offset of the word MATCH_RECOGNIZE, end of the clause, spec)},
    in text order: each clause's spec built from its node of the statement's tree
    (``SpecReader``), parsed only when the text holds the word."""
    if not any(tok.token_type == TokenType.MATCH_RECOGNIZE for tok in statement.read()):
        return {}
    tree = statement.tree
    if tree is None:
        raise statement.parse_error
    reader = SpecReader(statement, aggregates, fold)
    found = {}
    for node in sorted(tree.find_all(MatchRecognize), key=lambda n: n.meta.get("clause", n.meta["start"])):
        if "clause" not in node.meta:
            raise error_at(statement.text, "MATCH_RECOGNIZE needs a table or a parenthesised subquery before it",
                           node.meta["start"])
        found[node.meta["start"]] = (node.meta["clause"], node.meta["end"] + 1, reader.clause(node))
    return found


class _Renderer:
    """Copies the text between the pieces it replaces verbatim: each piece, found in the tree,
    is an edit ``(start, end, make)`` of the text, ``make()`` its replacement (None: the text
    stays), run in text order."""

    def __init__(self, statement, found, resolver):
        self.statement, self.query, self.resolver = statement, statement.text, resolver
        self.edits = []                           # (start, order, end, make): order 0 closes a condition
        tree = statement.tree
        self.ctes = _ctes(statement)
        self.per_window = groups_by_window(statement)
        for start, (end, call) in find_windows(statement).items():
            self._edit(start, end, lambda call=call: self._window(call))
        group_window = find_group_window(statement)
        self.group_window = group_window and group_window[0]
        for start, (end, text) in (group_window[1].items() if group_window else ()):
            self._edit(start, end, lambda text=text: text)
        temporal = find_temporal_joins(statement).values()
        interval = find_interval_joins(statement, resolver.stream).values()
        self.sides = {c.left_at: lambda c=c: self.resolver.temporal(c)[0] for c in temporal if c.left_at is not None}
        for c in interval:
            self.sides[c.left_at] = lambda c=c: self.resolver.interval(c)[0]
            self.sides[c.right_at] = lambda c=c: self.resolver.interval(c)[1]
        for c in temporal:
            self._edit(c.start, c.end, lambda c=c: f"{self.resolver.temporal(c)[1]} AS `{c.alias}`")
            for *_, (start, end) in c.equalities:    # a key equality the link implies (once planned)
                self._edit(start, end, lambda c=c, start=start: "TRUE" if start in c.implied else None)
            if c.cond:                                # ON / WHERE: the version each left row met
                self._insert(c.cond_at, lambda c=c: f" `{self.resolver.temporal(c)[2]}`.__kit_v = "
                                                    f"`{c.alias}`.__kit_v AND (")
        for c in interval:                            # ON / WHERE: the pair link
            self._insert(c.cond_at, c.link)
        for c in [*temporal, *interval]:
            if c.cond:                                # close the condition opened at ON / WHERE
                self.edits.append((c.cond[1], 0, c.cond[1], lambda: ")"))
        for start, (clause, end, spec) in found.items():
            self._edit(start, end, lambda start=start, clause=clause, spec=spec: self._match(start, clause, spec))
        for table in tree.find_all(exp.Table) if tree is not None else ():
            if isinstance(table.parent, (exp.From, exp.Join)) and isinstance(table.this, exp.Identifier) \
                    and not table.args.get("db") and "start" in table.this.meta:
                name = table.this
                self._edit(name.meta["start"], name.meta["end"] + 1, lambda table=table: self._table(table))
        for cast in tree.find_all(exp.Cast) if tree is not None else ():
            found_type = statement.cast_type(cast)
            if found_type is not None and _spark_type(found_type[0]) != found_type[0]:
                self._edit(*found_type[1:], lambda flink=found_type[0]: _spark_type(flink))
        self.arg_types = {}                       # id(SELECT) -> the types of its windowed aggregates' arguments
        if getattr(resolver, "semantics", None) != "standard":
            for select, calls in _window_aggregates(statement, self.group_window):
                for call in calls:
                    self._edit(*span(call), _Deferred(lambda s=select, c=call, cs=calls: self._flink_aggregate(s, c, cs)))
        self.edits.sort(key=lambda edit: edit[:2])

    def _edit(self, start: int, end: int, make):
        """Replace the text from ``start`` to ``end`` by ``make()``, made once however often
        the range is rendered (a view is made once)."""
        self.edits.append((start, 1, end, make if isinstance(make, _Deferred) else _once(make)))

    def _insert(self, word: int, make):
        """``make()`` inserted after the word (ON, WHERE) at offset ``word``."""
        end = self.statement.token(word).end + 1
        self.edits.append((end, 1, end, _once(make)))

    def render(self, lo: int, hi: int) -> Rewritten:
        """The text from offset ``lo`` to ``hi``, edited; a ``_Deferred`` edit is made after
        the others (it reads the views they make)."""
        done, made = lo, []
        for start, _, end, make in self.edits:
            if start < done or start > hi or (start == hi and end > start):
                continue                              # inside an edit made, or outside the range
            text = make if isinstance(make, _Deferred) else make()
            if text is not None:                      # None: not replaced after all
                made.append((done, start, text))
                done = end
        out = Rewritten(self.query)
        for copied, start, text in made:
            out.copy(copied, start)
            out.replace(text() if isinstance(text, _Deferred) else text, start)
        out.copy(done, hi)
        return out

    def _flink_aggregate(self, select: exp.Select, call, calls: list) -> str:
        """Flink's ``SUM``/``AVG`` ``call`` of windowed ``select`` (whose SUM and AVG are ``calls``),
        over the types of the arguments, which one analysis of them over the rewritten FROM
        (and JOINs, after the WITH queries before it) gives."""
        args = [self.render(*span(_argument(c))) for c in calls]
        if id(select) not in self.arg_types:
            at = span(select.expressions[0])[0]   # (the SELECT's own span holds its WITH queries)
            before = [end for end in self.ctes.values() if end <= at]   # WITH queries its FROM may name
            probe = self.render(self.statement.extent[0], max(before)) if before else Rewritten(self.query)
            probe.replace(" SELECT ", at)
            for k, arg in enumerate(args):
                probe.extend(arg)
                probe.replace(f" AS `__kit_a{k}`" + (", " if k + 1 < len(args) else " FROM "), at)
            start, end = span(select.args["from_"])
            probe.extend(self.render(start, max([end] + [span(j)[1] for j in select.args.get("joins") or ()])))
            self.arg_types[id(select)] = [f.dataType for f in self.resolver.schema(probe).fields]
        k = next(i for i, c in enumerate(calls) if c is call)
        dtype, arg, distinct = self.arg_types[id(select)][k], f"({args[k].text})", isinstance(call.this, exp.Distinct)
        if not isinstance(dtype, T.NumericType):     # Spark's own answer (or its error)
            return f"{'sum' if isinstance(call, exp.Sum) else 'avg'}({'DISTINCT ' if distinct else ''}{arg})"
        return (sum_sql if isinstance(call, exp.Sum) else avg_sql)(arg, dtype, distinct)

    def _match(self, start: int, clause: int, spec) -> str:
        """The view of the MATCH_RECOGNIZE whose table ref starts at ``start`` and whose word is
        at ``clause``: its input a (subquery), a WITH query's name, or a table's."""
        token = self.statement.token
        inner = None
        if self.query[start] == "(":              # (subquery) MATCH_RECOGNIZE: inside its parentheses
            first, last = token(start, 1).start, token(clause, -2).end + 1
            source, inner = self.render(first, last), Statement(self.query[first:last])
        else:
            name = self.query[start:token(clause, -1).end + 1]
            key = token(start).text.lower()
            source = self._cte(key, start) if token(start, 1).start == clause and key in self.ctes else name
        view = self.resolver.match(source, spec, start, inner)
        call = self.group_window
        if call and not call.table and hasattr(self.resolver, "register_query"):
            # GROUP BY TUMBLE(MATCH_ROWTIME() ...) over the matches (Flink's
            # testWindowedGroupingAppliedToMatchRecognize): the matches are the window's table
            matches = Rewritten(self.query)
            matches.replace(f"SELECT * FROM {view}", start)
            call.table, call.table_at = f"__kit_matches_{start}", start
            self.resolver.register_query(call.table, matches)
            return self.resolver.window(call, True)
        return view

    def _cte(self, key: str, at: int) -> Rewritten:
        """``WITH ... SELECT * FROM name``: the WITH query ``key`` (its name in lower case),
        named at offset ``at``, as a query of its own."""
        source = self.render(self.statement.extent[0], self.ctes[key])
        source.replace(" SELECT * FROM ", at)
        source.copy(at, self.statement.token(at).end + 1)
        return source

    def _window(self, call) -> str:
        """The view of a window TVF ``call``; its table may be a WITH query."""
        self._cte_table(call.table, call.table_at)
        return self.resolver.window(call, self.per_window)

    def _table(self, table) -> str | None:
        """The view of a table named in FROM or JOIN, aliased to the name written unless it has
        an alias; None: none (it stays)."""
        name, at = table.name, table.this.meta["start"]
        call = self.group_window
        if call and not call.table:
            self._cte_table(name, at)             # a group window over a WITH query
        view = self.sides[at]() if at in self.sides else self.resolver.view(name)
        if view is not None and call and not call.table:   # the group window's table: the first
            call.table, call.table_at = name, at
            view = self.resolver.window(call, True)
        if view is None or table.args.get("alias"):
            return view
        return f"{view} AS `{name.replace('`', '``')}`"

    def _cte_table(self, name, at):
        """A WITH query named where a window needs a table (``TABLE name`` of a window TVF, the
        table of a group window): run once, as ``WITH ... SELECT * FROM name``, and registered
        under its name -- so a window can read a MATCH_RECOGNIZE's output, its
        ``MATCH_ROWTIME()`` as the time."""
        if name.lower() not in self.ctes or not hasattr(self.resolver, "register_query") \
                or self.resolver.view(name) is not None:
            return
        self.resolver.register_query(name, self._cte(name.lower(), at))


class _Deferred:
    """An edit made after the others: ``make()`` gives its text."""

    def __init__(self, make):
        self.make = make

    def __call__(self) -> str:
        return self.make()


def _once(make):
    """``make``, called once: its answer is kept."""
    kept = []

    def made():
        if not kept:
            kept.append(make())
        return kept[0]
    return made


def _argument(call: exp.AggFunc) -> exp.Expression:
    """The argument of ``SUM([DISTINCT] x)``: ``x``."""
    arg = call.this
    return arg.expressions[0] if isinstance(arg, exp.Distinct) else arg


def _window_aggregates(statement: Statement, group_window) -> list:
    """``[(SELECT that aggregates a window, its SUM and AVG calls)]``: a SELECT whose FROM is a
    window TVF, or that groups by a legacy group window; its calls are those of its own
    list, HAVING and ORDER BY (not of a subquery, not under OVER)."""
    tree, found = statement.tree, []
    if tree is None:
        return found
    tvfs = {id(call.node) for _, call in find_windows(statement).values()}
    for select in tree.find_all(exp.Select):
        source, group = select.args.get("from_"), select.args.get("group")
        legacy = group_window is not None and group is not None and any(
            isinstance(e, exp.Anonymous) and e.name.upper() == group_window.kind for e in group.expressions)
        if source is None or not (id(source.this) in tvfs or legacy):
            continue
        calls = [c for c in select.find_all(exp.Sum, exp.Avg) if c.find_ancestor(exp.Select) is select
                 and c.find_ancestor(exp.Window) is None and span(c) and _argument(c) is not None
                 and not isinstance(_argument(c), exp.Star)]
        if calls:
            found.append((select, sorted(calls, key=lambda c: span(c)[0])))
    return found


def _ctes(statement) -> dict:
    """The queries of a leading ``WITH name [(columns)] AS (query), ...``: name (lower case) ->
    the offset just past its closing parenthesis."""
    tree = statement.tree
    found = {}
    for cte in tree.ctes if isinstance(tree, exp.Query) else ():
        found[cte.alias.lower()] = statement.token(span(cte.this)[1]).end + 1   # its ")"
    return found


def _spark_type(flink: str) -> str:
    """Spark's spelling of a Flink type name as ``Statement.cast_type`` reads it.

    >>> _spark_type("TIMESTAMP(3) WITH LOCAL TIME ZONE"), _spark_type("DECIMAL(10, 2)")
    ('TIMESTAMP_LTZ', 'DECIMAL(10, 2)')
    """
    plain = re.sub(r"\(\d+\)", "", flink)                 # without lengths and precisions
    if plain in _SPARK_TYPES:
        return _SPARK_TYPES[plain]
    if plain in ("TIMESTAMP", "TIMESTAMP_LTZ"):             # Spark's take no precision
        return plain
    return flink
