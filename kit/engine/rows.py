"""One row, byte by byte: Spark's UnsafeRow next to Flink's BinaryRow (seed 004, 3.1).

Both keep a row as one run of bytes, read a field at a fixed offset without decoding the
others, and compare and hash rows on their bytes. Both lay it out the same way -- a null
bit set, one 8-byte slot per field, a variable-length region -- and differ in the details:

=====================  ==========================================  ==========================================
                       Spark ``UnsafeRow``                         Flink ``BinaryRowData``
=====================  ==========================================  ==========================================
header                 none                                        1 byte: the row kind (+I 0, -U 1, +U 2, -D 3)
null bits              ``8 * ceil(n / 64)`` bytes, bit ``i``       ``8 * ceil((n + 8) / 64)`` bytes (header
                                                                   included), bit ``i + 8``
fixed part             8 bytes per field: a primitive, or          the same; a string or bytes of at most 7
                       ``offset << 32 | size`` of a string         bytes sits in the slot itself (7 data bytes,
                                                                   the last byte ``0x80 | length``)
variable part          the strings' bytes, each padded to 8        the same, for values of 8 bytes or more
=====================  ==========================================  ==========================================

Offsets count from the row's first byte; numbers are little-endian (both write in the
machine's order; the kit's machines are x86 or ARM, little-endian).

``unsafe_row(df)`` reads the first row of a DataFrame as Spark stores it (through py4j:
the bytes of the ``UnsafeRow`` Spark's plan returns, its ``getSizeInBytes``) and lays out
its regions from the documented format, checking the computed size against Spark's.
``binary_row(values, types)`` lays out the same values as Flink's ``BinaryRowWriter``
writes them, computed from its format (the kit runs no Flink JVM):

    >>> row = binary_row((7, 3, "name-7"), ("BIGINT", "BIGINT", "STRING"), names=("id", "value", "name"))
    >>> for region in row.regions:
    ...     print(region.field, region.offset, region.bytes, region.content, sep=" | ")
    header | 0 | 1 | row kind +I
    nulls | 1 | 7 | no null fields
    id | 8 | 8 | 7
    value | 16 | 8 | 3
    name | 24 | 8 | 'name-7' inline (6 bytes, last byte 0x86)
    >>> row.size        # Spark's UnsafeRow of the same values: 40 (the name goes to a data region)
    32
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pandas

from ..errors import KitError
from ..jvm import bridge

__all__ = ["RowLayout", "Region", "binary_row", "unsafe_row", "compare", "ROW_KINDS"]

ROW_KINDS = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}
_FIXED = {"BIGINT": ("<q", 8), "INT": ("<i", 4), "SMALLINT": ("<h", 2), "TINYINT": ("<b", 1),
          "DOUBLE": ("<d", 8), "FLOAT": ("<f", 4), "BOOLEAN": ("<?", 1), "DATE": ("<i", 4)}
_VARIABLE = ("STRING", "BYTES")
_SPARK_TYPES = {"LongType": "BIGINT", "IntegerType": "INT", "ShortType": "SMALLINT", "ByteType": "TINYINT",
                "DoubleType": "DOUBLE", "FloatType": "FLOAT", "BooleanType": "BOOLEAN", "DateType": "DATE",
                "StringType": "STRING", "BinaryType": "BYTES"}


@dataclass(frozen=True)
class Region:
    """A run of a row's bytes: what it holds (``field``), where, how long, and what it says."""

    field: str
    offset: int
    bytes: int
    content: str


@dataclass(frozen=True)
class RowLayout:
    """One row in one format: its bytes, its regions in order, its size (and Spark's own
    ``getSizeInBytes`` for an UnsafeRow, which ``size`` must equal)."""

    format: str
    data: bytes
    regions: tuple
    measured: int | None = None

    @property
    def size(self) -> int:
        return len(self.data)

    def table(self) -> pandas.DataFrame:
        """(field, offset, bytes, content), one row per region."""
        return pandas.DataFrame([(r.field, r.offset, r.bytes, r.content) for r in self.regions],
                                columns=["field", "offset", "bytes", "content"])

    def hex(self) -> str:
        """The bytes, 8 to a line, each line with its offset."""
        return "\n".join(f"{i:4d}  " + self.data[i:i + 8].hex(" ") for i in range(0, len(self.data), 8))


def _pad8(n: int) -> int:
    return (n + 7) // 8 * 8


def _check_types(values, types):
    types = tuple(t.upper() for t in types)
    if len(values) != len(types):
        raise KitError(f"{len(values)} values for {len(types)} types")
    for t in types:
        if t not in _FIXED and t not in _VARIABLE:
            raise KitError(f"type {t} is not laid out here; one of {', '.join(list(_FIXED) + list(_VARIABLE))}")
    return types


def _encode(value, kind) -> bytes:
    return value.encode("utf-8") if kind == "STRING" else bytes(value)


def binary_row(values, types, kind: str = "+I", names=None) -> RowLayout:
    """``values`` (one per field, None for NULL) of Flink ``types`` (``BIGINT``, ``INT``,
    ``STRING``...) as Flink's ``BinaryRowData`` of row kind ``kind`` (+I, -U, +U, -D)."""
    types = _check_types(values, types)
    if kind not in ROW_KINDS:
        raise KitError(f"row kind {kind!r} is not one of {list(ROW_KINDS)}")
    names = list(names or [f"f{i}" for i in range(len(values))])
    n = len(values)
    null_bytes = (n + 63 + 8) // 64 * 8
    fixed = null_bytes + 8 * n
    row = bytearray(fixed)
    row[0] = ROW_KINDS[kind]
    regions = [Region("header", 0, 1, f"row kind {kind}")]
    nulls = [names[i] for i, v in enumerate(values) if v is None]
    for i, v in enumerate(values):
        if v is None:
            bit = i + 8
            row[bit // 8] |= 1 << (bit % 8)
    regions.append(Region("nulls", 1, null_bytes - 1, "null: " + ", ".join(nulls) if nulls else "no null fields"))
    tail = []
    for i, (v, t) in enumerate(zip(values, types)):
        slot = null_bytes + 8 * i
        if v is None:
            regions.append(Region(names[i], slot, 8, "NULL"))
        elif t in _FIXED:
            code, width = _FIXED[t]
            struct.pack_into(code, row, slot, v)
            regions.append(Region(names[i], slot, 8, repr(v) if t != "BIGINT" and t != "INT" else str(v)))
        else:
            data = _encode(v, t)
            if len(data) <= 7:          # inline: 7 data bytes, then 0x80 | length
                row[slot:slot + len(data)] = data
                row[slot + 7] = 0x80 | len(data)
                regions.append(Region(names[i], slot, 8, f"{v!r} inline ({len(data)} bytes, last byte "
                                                         f"{0x80 | len(data):#x})"))
            else:
                offset = len(row)
                struct.pack_into("<q", row, slot, offset << 32 | len(data))
                row += data + bytes(_pad8(len(data)) - len(data))
                regions.append(Region(names[i], slot, 8, f"offset {offset}, size {len(data)}"))
                tail.append(Region(f"{names[i]} data", offset, _pad8(len(data)), repr(v)))
    return RowLayout("Flink BinaryRowData", bytes(row), tuple(regions + tail))


def unsafe_row(frame) -> RowLayout:
    """The first row of Spark DataFrame ``frame`` as Spark's ``UnsafeRow``: its bytes and
    size from Spark, its regions from the format (module doc), checked against them."""
    bridge.require(frame.sparkSession, "an UnsafeRow's bytes")
    rows = bridge.dataset(frame).queryExecution().executedPlan().executeTake(1)
    if len(rows) == 0:
        raise KitError("the DataFrame has no rows to lay out")
    jrow = rows[0]
    if jrow.getClass().getSimpleName() != "UnsafeRow":
        raise KitError(f"Spark returned a {jrow.getClass().getSimpleName()}, not an UnsafeRow")
    data, measured = bytes(jrow.getBytes()), int(jrow.getSizeInBytes())
    fields = frame.schema.fields
    types = []
    for f in fields:
        name = type(f.dataType).__name__
        if name not in _SPARK_TYPES:
            raise KitError(f"column {f.name}: type {f.dataType.simpleString()} is not laid out here")
        types.append(_SPARK_TYPES[name])
    n = len(fields)
    null_bytes = (n + 63) // 64 * 8
    null_bits = int.from_bytes(data[:null_bytes], "little")
    nulls = [f.name for i, f in enumerate(fields) if null_bits >> i & 1]
    regions = [Region("nulls", 0, null_bytes, "null: " + ", ".join(nulls) if nulls else "no null fields")]
    tail = []
    for i, (f, t) in enumerate(zip(fields, types)):
        slot = null_bytes + 8 * i
        if null_bits >> i & 1:
            regions.append(Region(f.name, slot, 8, "NULL"))
        elif t in _FIXED:
            code, _ = _FIXED[t]
            value = struct.unpack_from(code, data, slot)[0]
            regions.append(Region(f.name, slot, 8, str(value) if t in ("BIGINT", "INT") else repr(value)))
        else:
            word = struct.unpack_from("<q", data, slot)[0]
            offset, size = word >> 32, word & 0xFFFFFFFF
            raw = data[offset:offset + size]
            value = raw.decode("utf-8") if t == "STRING" else raw
            regions.append(Region(f.name, slot, 8, f"offset {offset}, size {size}"))
            tail.append(Region(f"{f.name} data", offset, _pad8(size), repr(value)))
    computed = null_bytes + 8 * n + sum(r.bytes for r in tail)
    if computed != measured or len(data) != measured:
        raise KitError(f"UnsafeRow layout: computed {computed} bytes, Spark says {measured} ({len(data)} read)")
    return RowLayout("Spark UnsafeRow", data, tuple(regions + tail), measured)


def compare(frame, kind: str = "+I") -> pandas.DataFrame:
    """The first row of ``frame`` in both formats: (format, field, offset, bytes, content),
    Spark's regions then Flink's; ``.attrs["sizes"]`` has both rows' sizes in bytes."""
    spark_row = unsafe_row(frame)
    values = list(frame.limit(1).collect()[0])
    types = [_SPARK_TYPES[type(f.dataType).__name__] for f in frame.schema.fields]
    flink_row = binary_row(values, types, kind, names=frame.columns)
    both = pandas.concat([layout.table().assign(format=layout.format) for layout in (spark_row, flink_row)],
                         ignore_index=True)[["format", "field", "offset", "bytes", "content"]]
    both.attrs["sizes"] = {spark_row.format: spark_row.size, flink_row.format: flink_row.size}
    return both
