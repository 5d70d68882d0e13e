"""Temporal joins in Flink SQL: where they are in the query, and what they ask.

Two forms, as Flink writes them:

- ``FROM orders AS o [LEFT] JOIN rates FOR SYSTEM_TIME AS OF o.order_time [AS] r ON o.currency =
  r.currency [AND ...]``: the temporal table join (event time), or the lookup join when
  ``rates`` is a lookup table and the time is the left side's processing time;
- ``FROM orders AS o, LATERAL TABLE (Rates(o.proctime)) [AS r] WHERE o.currency = r.currency``
  (or ``JOIN LATERAL TABLE (...) ON ...``): the temporal table function join.

The versioned table is a ``kit.stream`` with a primary key, or a versioned view by
deduplication named in the query's ``WITH`` (Flink's ``CREATE VIEW``)::

    WITH versioned_rates AS (
      SELECT currency, rate, update_time FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY update_time DESC) AS rownum
        FROM rates)
      WHERE rownum = 1)

whose primary key is the ``PARTITION BY`` columns and whose time the ``ORDER BY`` column,
which must be the stream's event time.

``find_temporal_joins`` reads them from the tokens; ``kit.sql`` runs each join and the
rewrite (``query.py``) puts the result in place: the left table becomes a view of its rows
with ``__kit_v``, the arrival of the version each one met, the right table a view of its
rows with their own ``__kit_v``, and the condition gains ``o.__kit_v = r.__kit_v AND
(...)``. Spark then applies the rest of the condition, the LEFT padding and the
projection, exactly as Flink applies them to the version met.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .cursor import Cursor
from .errors import SqlError
from .lexer import Token
from .options import DYNAMIC_OPTIONS, duration_option
from .statement import Statement

__all__ = ["TemporalCall", "VersionedView", "find_temporal_joins", "versioned_view"]

_ENDS = ("WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION", "EXCEPT", "INTERSECT", "WINDOW",
         "JOIN", "LEFT", "RIGHT", "FULL", "INNER", "CROSS", "NATURAL", "QUALIFY")
_KINDS = ("LEFT", "RIGHT", "FULL", "INNER", "CROSS", "OUTER", "NATURAL")


@dataclass
class TemporalCall:
    """One temporal join of the query. Indexes are into the token list."""
    how: str                          # "inner" | "left" | "right" | "full" | "cross"
    how_token: Token
    table: str                        # the right table (or temporal table function) as written
    table_token: Token
    start: int                        # first token replaced by the right view (the table name)
    end: int                          # token after the alias
    alias: str                        # how the query names the right side
    time_qualifier: str | None
    time_column: str
    time_token: Token
    lateral: bool = False             # LATERAL TABLE (Fn(time))
    cond: tuple | None = None         # (first, end) token indexes of the ON / WHERE condition
    cond_word: int | None = None      # index of ON or WHERE
    cond_token: Token | None = None
    equalities: list = field(default_factory=list)   # ((qualifier, column, token), (...), (first, end) tokens)
    implied: dict = field(default_factory=dict)      # the key equalities' {first token: end} (plan sets them)
    left: str | None = None           # the left table as written, and where
    left_index: int | None = None


def find_temporal_joins(statement: Statement) -> dict:
    """{index of the right table's first token: TemporalCall} for each temporal join."""
    query, tokens = statement.text, statement.tokens
    found = {}
    for i, tok in enumerate(tokens):
        if tok.is_word("SYSTEM_TIME") and i >= 2 and tokens[i - 1].is_word("FOR"):
            call = _for_system_time(query, tokens, i - 2)
        elif tok.is_word("LATERAL") and tokens[i + 1].is_word("TABLE"):
            call = _lateral(query, tokens, i)
        else:
            continue
        _left_table(tokens, call)
        found[call.start] = call
    return found


def join_kind(tokens, j) -> tuple[str, Token]:
    """The join type of the ``JOIN`` at ``j`` (or of a comma), and its first token."""
    if tokens[j].kind == "OP":
        return "inner", tokens[j]
    k, words = j - 1, []
    while k >= 0 and tokens[k].is_word(*_KINDS):
        words.insert(0, tokens[k].value.upper())
        k -= 1
    how = next((w.lower() for w in words if w not in ("OUTER", "NATURAL")), "inner")
    return how, tokens[k + 1]


def _time(cur: Cursor):
    """``[qualifier .] column`` of ``AS OF`` or a temporal table function's argument."""
    first = cur.identifier("the left table's time attribute (o.order_time)")
    if cur.accept_op("."):
        return first.value, cur.identifier("a column").value, first
    return None, first.value, first


def table_alias(cur: Cursor, default: str) -> str:
    if cur.accept("AS"):
        return cur.identifier("an alias").value
    if cur.peek().kind == "IDENT" and not cur.peek().is_word(*_ENDS, "ON"):
        return cur.next().value
    return default


def _for_system_time(query, tokens, table_index) -> TemporalCall:
    """``JOIN name FOR SYSTEM_TIME AS OF [q.]col [[AS] alias] ON cond``; ``table_index`` is the name."""
    cur = Cursor(query, tokens, table_index)
    name = cur.identifier("a table")
    if not tokens[table_index - 1].is_word("JOIN"):
        raise cur.error("FOR SYSTEM_TIME AS OF belongs to a table joined with JOIN", name, found=False)
    how, how_token = join_kind(tokens, table_index - 1)
    cur.expect_words("FOR", "SYSTEM_TIME", "AS", "OF")
    qualifier, column, time_token = _time(cur)
    alias = table_alias(cur, name.value)
    call = TemporalCall(how, how_token, name.value, name, table_index, cur.i, alias, qualifier, column, time_token)
    if not cur.at("ON"):
        raise cur.error("a temporal join needs ON with the key equality (ON o.currency = r.currency)")
    call.equalities = join_condition(tokens, call, cur.i)
    return call


def _lateral(query, tokens, i) -> TemporalCall:
    """``, LATERAL TABLE (Fn([q.]col)) [[AS] alias]`` (condition in WHERE) or ``JOIN LATERAL ... ON``."""
    cur = Cursor(query, tokens, i + 2)
    joined = tokens[i - 1].is_word("JOIN")
    how, how_token = join_kind(tokens, i - 1) if joined else ("inner", tokens[i - 1])
    cur.expect_op("(")
    name = cur.identifier("a temporal table function")
    cur.expect_op("(")
    qualifier, column, time_token = _time(cur)
    cur.expect_op(")")
    cur.expect_op(")")
    alias = table_alias(cur, name.value)
    call = TemporalCall(how, how_token, name.value, name, i, cur.i, alias, qualifier, column, time_token,
                        lateral=True)
    word = cur.i if joined else where_of(tokens, cur.i)
    if word is not None:
        call.equalities = join_condition(tokens, call, word)
    return call


def where_of(tokens, i) -> int | None:
    """Index of the WHERE of the query level that holds token ``i``, if any."""
    depth = 0
    for k in range(i, len(tokens)):
        t = tokens[k]
        if t.kind == "OP" and t.value in "()":
            depth += 1 if t.value == "(" else -1
            if depth < 0:
                return None
        elif depth == 0 and t.is_word("WHERE"):
            return k
        elif depth == 0 and t.is_word("GROUP", "HAVING", "ORDER", "LIMIT", "UNION", "EXCEPT", "INTERSECT"):
            return None
    return None


def join_condition(tokens, call, word: int) -> list:
    """The condition after ``tokens[word]`` (ON or WHERE) up to its clause's end (set on
    ``call``); returns its top-level ``a.x = b.y`` conjuncts (``TemporalCall.equalities``)."""
    depth, k = 0, word + 1
    while tokens[k].kind != "EOF":
        t = tokens[k]
        if t.kind == "OP" and t.value in ("(", ")"):
            depth += 1 if t.value == "(" else -1
            if depth < 0:
                break
        elif depth == 0 and (t.kind == "OP" and t.value in (",", ";")):
            break
        elif depth == 0 and t.is_word(*_ENDS) and not (tokens[k + 1].kind == "OP" and tokens[k + 1].value == "("):
            break
        k += 1
    call.cond_word, call.cond, call.cond_token = word, (word + 1, k), tokens[word]
    parts, start, depth = [], word + 1, 0
    for j in range(word + 1, k + 1):
        t = tokens[j]
        if t.kind == "OP" and t.value in ("(", ")") and j < k:
            depth += 1 if t.value == "(" else -1
        if j == k or (depth == 0 and t.is_word("AND")):
            parts.append((start, tokens[start:j]))
            start = j + 1
    found = []
    for first, part in parts:
        sides = _equality(part)
        if sides:
            found.append((*sides, (first, first + len(part))))
    return found


def _equality(part) -> tuple | None:
    """``[q.]a = [q.]b`` as ``((q, a, token), (q, b, token))``."""
    def ref(ts):
        if len(ts) == 1 and ts[0].kind == "IDENT":
            return None, ts[0].value, ts[0]
        if len(ts) == 3 and ts[0].kind == "IDENT" and ts[1].value == "." and ts[2].kind == "IDENT":
            return ts[0].value, ts[2].value, ts[0]
        return None

    eq = [j for j, t in enumerate(part) if t.kind == "OP" and t.value == "="]
    if len(eq) != 1:
        return None
    a, b = ref(part[:eq[0]]), ref(part[eq[0] + 1:])
    return (a, b) if a and b else None


@dataclass
class VersionedView:
    """A ``WITH`` query that deduplicates a table into a versioned view: ``SELECT outer FROM
    (SELECT inner, ROW_NUMBER() OVER (PARTITION BY partition ORDER BY order [DESC]) AS rownum
    FROM source) WHERE rownum = 1``; the select lists hold column names and ``*``."""
    source: Token
    partition: list
    order: Token
    keep: str                          # "last" (DESC) or "first" (ASC)
    inner: list
    rownum: str
    outer: list

    def columns(self, source_columns: list) -> list:
        """The view's columns, given its source's."""
        inner = [c for x in self.inner for c in (source_columns if x == "*" else [x])] + [self.rownum]
        return [c for x in self.outer for c in (inner if x == "*" else [x])]


_SHAPE = ("a versioned view is a deduplication: SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY "
          "key ORDER BY time DESC) AS rownum FROM t) WHERE rownum = 1")


def versioned_view(statement: Statement, name: str) -> VersionedView | None:
    """The ``WITH`` query named ``name`` as a ``VersionedView``; None when the query has no
    such ``WITH`` query; a ``SqlError`` when it is not a deduplication."""
    query, tokens = statement.text, statement.tokens
    if not tokens[0].is_word("WITH"):
        return None
    cur = Cursor(query, tokens, 1)
    while cur.peek().kind == "IDENT":
        found = cur.next().value.lower() == name.lower()
        if cur.at_op("("):                                 # a column list
            _skip_parens(cur)
        cur.expect("AS")
        if found:
            cur.expect_op("(")
            return _deduplication(cur)
        _skip_parens(cur)
        if not cur.accept_op(","):
            break
    return None


def _skip_parens(cur: Cursor):
    """Past the parenthesis that opens at the cursor."""
    depth = 0
    while cur.peek().kind != "EOF":
        tok = cur.next()
        if tok.kind == "OP" and tok.value in "()":
            depth += 1 if tok.value == "(" else -1
            if depth == 0:
                return


def _deduplication(cur: Cursor) -> VersionedView:
    """``SELECT outer FROM (SELECT inner, ROW_NUMBER() OVER (...) [AS] rn FROM t [[AS] a]) [[AS] b]
    WHERE rn = 1 | rn <= 1 | rn < 2)``, the cursor after the ``WITH`` query's ``(``."""
    def fail(tok=None):
        return cur.error(_SHAPE, tok, found=False)

    def select_list(before_row_number=False):
        items = []
        while not (before_row_number and cur.at("ROW_NUMBER")):
            items.append("*" if cur.accept_op("*") else _column(cur, fail))
            if not cur.accept_op(","):
                break
        return items

    def alias():
        if cur.accept("AS") or cur.peek().kind == "IDENT":
            cur.identifier("an alias")

    cur.expect("SELECT")
    outer = select_list()
    cur.expect("FROM")
    cur.expect_op("(")
    cur.expect("SELECT")
    inner = select_list(before_row_number=True)
    if not inner or not cur.at("ROW_NUMBER"):
        raise fail()
    cur.next()
    cur.expect_op("(")
    cur.expect_op(")")
    cur.expect("OVER")
    cur.expect_op("(")
    cur.expect_words("PARTITION", "BY")
    partition = [_column(cur, fail)]
    while cur.accept_op(","):
        partition.append(_column(cur, fail))
    cur.expect_words("ORDER", "BY")
    order = cur.identifier("the versioned view's time attribute")
    if cur.accept_op("."):
        order = cur.identifier("a column")
    keep = "last" if cur.accept("DESC") else "first"
    if keep == "first":
        cur.accept("ASC")
    cur.expect_op(")")
    cur.accept("AS")
    rownum = cur.identifier("the row number's alias (AS rownum)").value
    cur.expect("FROM")
    source = cur.identifier("the table the view deduplicates")
    alias()
    cur.expect_op(")")
    alias()
    cur.expect("WHERE")
    if _column(cur, fail).lower() != rownum.lower():
        raise fail()
    op, bound = cur.next(), cur.next()
    if (op.value, bound.value) not in (("=", "1"), ("<=", "1"), ("<", "2")) or not cur.at_op(")"):
        raise fail(op)
    return VersionedView(source, partition, order, keep, inner, rownum, outer)


def _column(cur: Cursor, fail) -> str:
    """A column, maybe qualified (``r.rate``): its name."""
    if cur.peek().kind != "IDENT":
        raise fail()
    tok = cur.next()
    if cur.accept_op("."):
        tok = cur.identifier("a column")
    return tok.value


def _left_table(tokens, call: TemporalCall):
    """The table ref before the join that the time attribute's qualifier names (the nearest
    one without a qualifier)."""
    best = None
    for j in range(call.start - 1, 0, -1):
        t, prev = tokens[j], tokens[j - 1]
        if t.kind != "IDENT" or not (prev.is_word("FROM", "JOIN") or (prev.kind == "OP" and prev.value == ",")):
            continue
        nxt = tokens[j + 1]
        if nxt.kind == "OP" and nxt.value in (".", "("):
            continue
        alias = tokens[j + 2].value if nxt.is_word("AS") else \
            nxt.value if nxt.kind == "IDENT" and not nxt.is_word(*_ENDS, "ON", "FOR") else t.value
        if call.time_qualifier is None or call.time_qualifier.lower() == alias.lower():
            best = (j, t.value)
            break
    if best:
        call.left_index, call.left = best


def plan(call: TemporalCall, tables: dict, statement: Statement, interleave=None, clock=None, retention=None):
    """The join ``call`` asks for, checked as Flink checks it: ``(TemporalJoin, left
    qualifier, the right side's columns)``; ``tables`` maps lower-case names to what
    ``kit.sql`` was given; the options come from ``join_options``."""
    from ..joins.lookup import LookupJoin, LookupTable
    from ..joins.versioned import TemporalJoin, TemporalTableFunction, time_kind
    from ..stream import Stream
    from .errors import SqlError

    def error(message, tok):
        return SqlError(message, tok.line, tok.column, statement.text)

    what = "Temporal table function join" if call.lateral else "Temporal table join"
    allowed = ("inner",) if call.lateral else ("inner", "left")
    if call.how not in allowed:
        raise error(f"{what} currently only supports " + (" and ".join(h.upper() for h in allowed))
                    + f" JOIN, not {call.how.upper()} JOIN", call.how_token)
    if call.left is None:
        raise error(f"cannot tell which table {call.time_qualifier} is: name it in FROM before the join",
                    call.time_token)
    left = tables.get(call.left.lower())
    right = tables.get(call.table.lower())
    view = versioned_view(statement, call.table) if right is None and not call.lateral else None
    if view is not None:
        right = _deduplicated(view, tables, error)
    if not isinstance(left, Stream) and not isinstance(right, Stream) and not call.lateral:
        raise error("a temporal join runs on streams: on batch tables Flink 2.3 fails with \"TableException: "
                    "unexpected correlate variable $cor0 in the plan\"; pass "
                    f"{call.left} as kit.stream(df, time={call.time_column!r}, watermark=...) and {call.table} as "
                    "kit.stream(df, time=..., watermark=..., primary_key=...)", call.time_token)
    if not isinstance(left, Stream):
        raise error("Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's time "
                    f"attribute field: pass {call.left} as kit.stream(df, time={call.time_column!r}, ...) "
                    "(or with proctime=)", call.time_token)
    time = time_kind(left, call.time_column)
    if time is None:
        raise error("Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's time "
                    f"attribute field; {call.time_column} is neither {call.left}'s event time ({left.time}) nor "
                    "its processing time", call.time_token)
    if call.lateral:
        if not isinstance(right, TemporalTableFunction):
            raise error(f"{call.table} is not a temporal table function: pass {call.table}="
                        "kit.joins.TemporalTableFunction(stream, time_attribute, primary_key)", call.table_token)
        if right.time != time:
            raise error(f"{call.table} is a {right.time}-time temporal table function but {call.time_column} is "
                        f"{call.left}'s {time} time: both sides need the same kind of time", call.time_token)
        stream, key = right.stream, right.primary_key
    elif isinstance(right, LookupTable):
        if time != "processing":
            raise error("Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's "
                        f"proctime field when joining the lookup table {call.table}", call.time_token)
        pairs = _keys(call, left.source.columns, right.columns)
        if not pairs:
            raise error(f"a lookup join needs an equality between a column of {call.left} and one of "
                        f"{call.table} in ON", call.cond_token or call.time_token)
        return LookupJoin(left, right, tuple(pairs), call.how), call.time_qualifier or call.left, None
    else:
        if time == "processing" and isinstance(right, Stream):
            raise error("Processing-time temporal join is not supported yet. (FLINK-19830: the left rows would "
                        "not wait for a complete snapshot of the versioned table.) Join by event time, use a "
                        "temporal table function (LATERAL TABLE (Rates(o.proctime))) or a lookup table",
                        call.time_token)
        if not isinstance(right, Stream):
            raise error(f"{call.table} is not a versioned table: pass it as kit.stream(df, time=..., "
                        "watermark=..., primary_key=...)", call.table_token)
        if not right.primary_key:
            raise error("Temporal Table Join requires primary key in versioned table, but no primary key can be "
                        f"found: pass {call.table} with kit.stream(..., primary_key=...)", call.table_token)
        stream, key = right, right.primary_key
    pairs = _keys(call, left.source.columns, stream.source.columns)
    missing = [c for c in key if c.lower() not in [r.lower() for _, r in pairs]]
    if missing:
        raise error(f"Join key must be the same as temporal table's primary key in {time.capitalize()}-time "
                    f"temporal table join: the condition needs {', '.join(f'{call.alias}.{c}' for c in missing)} "
                    f"= a column of {call.left}", call.cond_token or call.time_token)
    join = TemporalJoin(left, stream, tuple(pairs), call.how, time,
                        interleave or ("proctime" if time == "processing" else "event_time"), clock, retention,
                        deduplicate=view and view.keep)
    return join, call.time_qualifier or call.left, view and view.columns(stream.source.columns)


def _deduplicated(view: VersionedView, tables: dict, error):
    """The stream a versioned view deduplicates, its primary key the ``PARTITION BY`` columns."""
    from ..stream import Stream

    source = tables.get(view.source.value.lower())
    if not isinstance(source, Stream):
        raise error(f"{view.source.value} is not a stream: pass it as kit.stream(df, time=..., watermark=...)",
                    view.source)
    columns = {c.lower(): c for c in source.source.columns}
    if view.order.value.lower() != source.time.lower():
        raise error("Event-Time Temporal Table Join requires both primary key and row time attribute in "
                    f"versioned table, but no row time attribute can be found: the view orders by "
                    f"{view.order.value}, not {view.source.value}'s event time {source.time}", view.order)
    for name in view.partition + [c for c in view.inner if c != "*"]:
        if name.lower() not in columns:
            raise error(f"{name} is not a column of {view.source.value}; columns are {source.source.columns}",
                        view.source)
    inner = [c.lower() for c in replace(view, outer=["*"]).columns(source.source.columns)]
    for name in view.outer:
        if name != "*" and name.lower() not in inner:
            raise error(f"{name} is not a column of the view's subquery; it has {inner}", view.source)
    missing = [c for c in view.partition + [source.time] if c.lower() not in
               [x.lower() for x in view.columns(source.source.columns)]]
    if missing:
        raise error(f"the versioned view must keep its primary key and time attribute; it drops {missing}",
                    view.source)
    return replace(source, primary_key=tuple(columns[c.lower()] for c in view.partition))


def _keys(call: TemporalCall, left: list, right: list) -> list:
    """``(left column, right column)`` for each ``left = right`` conjunct of the condition;
    ``left``, ``right``: the two sides' columns. The link to the version met implies them
    (Flink keys the operator's state by them, and a NULL key meets a NULL key), so the
    rewrite puts ``TRUE`` in their place (``implied``): Spark then joins on the link alone."""
    lq, rq = (call.time_qualifier or call.left).lower(), call.alias.lower()
    lcols = {c.lower(): c for c in left}
    rcols = {c.lower(): c for c in right}

    def side(ref):
        q, c, _ = ref
        if q is not None:
            return ("L" if q.lower() == lq else "R" if q.lower() == rq else None), c
        if c.lower() in lcols and c.lower() not in rcols:
            return "L", c
        if c.lower() in rcols and c.lower() not in lcols:
            return "R", c
        return None, c

    pairs = []
    for a, b, (first, end) in call.equalities:
        (sa, ca), (sb, cb) = side(a), side(b)
        if {sa, sb} == {"L", "R"}:
            l, r = (ca, cb) if sa == "L" else (cb, ca)
            if l.lower() in lcols and r.lower() in rcols:
                pairs.append((lcols[l.lower()], rcols[r.lower()]))
                call.implied[first] = end
    return pairs


def join_options(config: dict) -> dict:
    """``kit.sql``'s ``config`` as the temporal joins' options (``plan``'s keywords)."""
    from ..replay.interleave import INTERLEAVINGS
    from ..joins.temporal import StateRetention
    from ..time import Clock
    from ..errors import KitError

    from ..match_recognize.budget import MAX_THREADS, STEP_BUDGET

    known = ("table.exec.state.ttl", "kit.join.interleave", "kit.join.clock", STEP_BUDGET, MAX_THREADS)
    unknown = [k for k in config if k not in known]   # (match_options and dynamic_options took theirs out)
    if unknown:
        raise KitError(f"unknown config key(s) {unknown}; known: {list(known) + list(DYNAMIC_OPTIONS)}")
    options = {}
    if "table.exec.state.ttl" in config:
        options["retention"] = StateRetention(duration_option(config["table.exec.state.ttl"], "table.exec.state.ttl"))
    if "kit.join.interleave" in config:
        if config["kit.join.interleave"] not in INTERLEAVINGS:
            raise KitError(f"kit.join.interleave={config['kit.join.interleave']!r} is not one of {list(INTERLEAVINGS)}")
        options["interleave"] = config["kit.join.interleave"]
    if "kit.join.clock" in config:
        if not isinstance(config["kit.join.clock"], Clock):
            raise KitError(f"kit.join.clock must be a Clock; got {config['kit.join.clock']!r}")
        options["clock"] = config["kit.join.clock"]
    return options
