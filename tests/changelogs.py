"""A collected changelog applied in Python: the table after an arrival, for property tests
that compare many snapshots of one changelog (one Spark job, not one per snapshot)."""


def table_at(columns, rows: list, at: int, kind: str = "_op") -> list:
    """The sorted rows of the table after arrival ``at``: the collected changelog ``rows``
    (each with ``seq``, the row kind in ``kind`` and ``columns``) applied in order; a
    retraction of a row not in the table fails (ValueError)."""
    table = []
    for r in rows:
        if r["seq"] <= at:
            values = tuple(r[c] for c in columns)
            table.append(values) if r[kind] in ("+I", "+U") else table.remove(values)
    return sorted(table, key=repr)
