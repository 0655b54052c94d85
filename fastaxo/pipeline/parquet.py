"""A Parquet writer for tables whose columns are all lists of integers without nulls: the
packed output of ``prepare``. Its pages are made from the offsets in C and compressed on the
writer's threads; the file reads back as the table pyarrow's own writer would have written.

Why not pyarrow's writer: on list columns it makes a repetition and a definition level per
value, then encodes them, on one thread (its column-parallel option is not exposed in
Python). For lists without nulls both level streams are a few runs per row, known from the
offsets (csrc/fx_parquet.h). The file has what pyarrow's has for such a table with
``use_dictionary=False, write_statistics=False``: DATA_PAGE (v1) pages of ~1 MiB of values,
PLAIN values, RLE levels, zstd, the Arrow schema in ``ARROW:schema`` and the schema's metadata
as key-value pairs. The footer is Thrift's compact protocol, written here (`_struct`).

int8 and int16 lists are Parquet INT32 values with an integer annotation, as pyarrow writes
them: their pages are the same bytes as int32's. So a column's type can be narrowed when the
file is closed (``close(schema=...)``), once every value is known; the page maker returns
each page's bounds from its copy, and a type that does not hold them is refused."""

from __future__ import annotations

import base64
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow, backend
from fastaxo._core.threads import forked_child
from fastaxo._reference import parquet as reference
from fastaxo._version import __version__

__all__ = ["ListTableWriter", "int_holds"]

MAGIC = b"PAR1"
PAGE_VALUE_BYTES = 1 << 20  # pyarrow's default data page size
MAX_PAGE_BYTES = (1 << 31) - 1  # a page header's sizes are int32
# Parquet's enums (parquet.thrift).
_INT32, _INT64 = 1, 2
_REQUIRED, _OPTIONAL, _REPEATED = 0, 1, 2
_CONVERTED_LIST = 3
_PLAIN, _RLE = 0, 3
_ZSTD = 6
_DATA_PAGE = 0
_CONVERTED_INT = {8: 15, 16: 16}  # INT_8, INT_16 (int32 and int64 need no annotation)
# value type -> (physical type, bytes per value in a page, bits of the type)
_PHYSICAL = {pa.int8(): (_INT32, 4, 8), pa.int16(): (_INT32, 4, 16),
             pa.int32(): (_INT32, 4, 32), pa.int64(): (_INT64, 8, 64)}

# Thrift compact protocol: field types.
_BOOL_TRUE, _BYTE, _I16, _I32, _I64, _BINARY, _LIST, _STRUCT = 1, 3, 4, 5, 6, 8, 9, 12


def _varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def _value(out: bytearray, kind: int, v: Any) -> None:
    if kind == _BYTE:
        out.append(v & 0xFF)
    elif kind in (_I16, _I32, _I64):
        _varint(out, _zigzag(v))
    elif kind == _BINARY:
        data = v.encode() if isinstance(v, str) else bytes(v)
        _varint(out, len(data))
        out += data
    elif kind == _STRUCT:  # fields, or a struct already encoded
        out += v if isinstance(v, bytes) else _struct(v)
    else:  # a list: (element kind, items)
        ekind, items = v
        if len(items) < 15:
            out.append((len(items) << 4) | ekind)
        else:
            out.append(0xF0 | ekind)
            _varint(out, len(items))
        for item in items:
            _value(out, ekind, item)


def _struct(fields: list[tuple[int, int, Any]]) -> bytes:
    """A Thrift struct in the compact protocol: (field id, kind, value) in increasing id order;
    a value None is left out; booleans here are only ever true (kind _BOOL_TRUE)."""
    out = bytearray()
    last = 0
    for fid, kind, v in fields:
        if v is None:
            continue
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | kind)
        else:
            out.append(kind)
            _varint(out, _zigzag(fid))
        last = fid
        if kind != _BOOL_TRUE:
            _value(out, kind, v)
    out.append(0)
    return bytes(out)


def int_holds(bits: int, lo: int, hi: int) -> bool:
    """Whether a signed integer of ``bits`` bits holds every value in [lo, hi]."""
    return -(1 << (bits - 1)) <= lo and hi < (1 << (bits - 1))


class _Column:
    """One list column's place in the Parquet schema."""

    def __init__(self, field: pa.Field):
        self.name = field.name
        self.physical, self.width, self.bits = _PHYSICAL[field.type.value_type]
        self.list_optional = field.nullable
        self.item_optional = field.type.value_field.nullable
        # An empty list defines the optional list (if optional) and stops at the repeated
        # group; a value defines every level below.
        self.empty_def = int(self.list_optional)
        self.max_def = self.empty_def + 1 + int(self.item_optional)

    def schema_elements(self) -> list[list[tuple[int, int, Any]]]:
        return [
            [(3, _I32, _OPTIONAL if self.list_optional else _REQUIRED), (4, _BINARY, self.name),
             (5, _I32, 1), (6, _I32, _CONVERTED_LIST), (10, _STRUCT, [(3, _STRUCT, [])])],
            [(3, _I32, _REPEATED), (4, _BINARY, "list"), (5, _I32, 1)],
            [(1, _I32, self.physical),
             (3, _I32, _OPTIONAL if self.item_optional else _REQUIRED),
             (4, _BINARY, "element"), (6, _I32, _CONVERTED_INT.get(self.bits)),
             # LogicalType.INTEGER (field 10 of the union): bit width, signed
             (10, _STRUCT, [(10, _STRUCT, [(1, _BYTE, self.bits), (2, _BOOL_TRUE, True)])]
              if self.bits in _CONVERTED_INT else None)],
        ]

    def holds(self, lo: int | None, hi: int | None) -> bool:
        """Whether this column's type holds every value in [lo, hi] (None: no value)."""
        return lo is None or hi is None or int_holds(self.bits, lo, hi)


def _list_chunks(column: pa.Array | pa.ChunkedArray, name: str) -> list[pa.ListArray]:
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for c in chunks:
        if c.null_count:
            raise ValueError(f"column {name!r} holds {c.null_count} null rows; this writer "
                             "writes lists without nulls")
        if c.values.null_count and len(c):
            raise ValueError(f"column {name!r} holds null values; this writer writes lists "
                             "without nulls")
    return [c for c in chunks if len(c)]


class ListTableWriter:
    """Writes row groups of a table whose every column is ``list<int32>`` or ``list<int64>``
    without nulls to ``path``; ``close`` writes the footer. ``num_threads`` compress pages at
    once (one in a forked child). Use :meth:`takes` to see whether a schema fits."""

    def __init__(self, path: str, schema: pa.Schema, num_threads: int = 1,
                 compression_level: int = 1):
        if not self.takes(schema):
            raise ValueError("ListTableWriter writes lists of int8, int16, int32 or int64, got "
                             f"{schema}")
        self.schema = schema
        self._cols = [_Column(f) for f in schema]
        # every value written, per column: [smallest, largest] (None before the first)
        self._bounds: list[list[int | None]] = [[None, None] for _ in self._cols]
        self._codec = pa.Codec("zstd", compression_level=compression_level)
        self._threads = max(1, num_threads)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._local = threading.local()
        self._row_groups: list[bytes] = []
        self._rows = 0
        self._f = open(path, "xb")  # noqa: SIM115 - closed by close() or abort()
        self._f.write(MAGIC)
        self._pos = len(MAGIC)

    @staticmethod
    def takes(schema: pa.Schema) -> bool:
        """True when every column is a list of int8, int16, int32 or int64 (and there is
        one), on a little-endian machine (PLAIN values are little-endian; pages copy them as
        they are)."""
        return sys.byteorder == "little" and len(schema) > 0 and all(
            pa.types.is_list(f.type) and f.type.value_type in _PHYSICAL for f in schema)

    def _buffer(self, size: int) -> np.ndarray:
        buf = getattr(self._local, "buf", None)
        if buf is None or len(buf) < size:
            buf = self._local.buf = np.empty(max(size, 1 << 21), dtype=np.uint8)
        return buf

    def _page(self, task: tuple[np.ndarray, np.ndarray, _Column]
              ) -> tuple[bytes, Any, int, int, int | None, int | None]:
        """(page header, compressed body (a pa.Buffer, written as it is), its size before
        compression, its levels, its smallest and largest value)."""
        offsets, values, col = task
        body: Any
        if backend.pack_ext is not None:
            rows = len(offsets) - 1
            nbytes = (int(offsets[-1]) - int(offsets[0])) * col.width
            buf = self._buffer(backend.pack_ext.parquet_page_bound(rows, nbytes))
            n, levels, lo, hi = backend.pack_ext.parquet_list_page(
                offsets, values, col.width, col.max_def, col.empty_def, buf)
            body = buf[:n]
        else:
            body, levels, lo, hi = reference.list_page(offsets, values, col.width, col.max_def,
                                                       col.empty_def)
            n = len(body)
        if n > MAX_PAGE_BYTES:  # (pages hold whole rows: one row that long)
            raise ValueError(
                f"column {col.name!r}: {len(offsets) - 1:,} row(s) of "
                f"{int(offsets[-1] - offsets[0]):,} values make a page of {n:,} bytes, more "
                f"than Parquet's page sizes hold ({MAX_PAGE_BYTES:,})")
        packed = self._codec.compress(body)
        header = _struct([
            (1, _I32, _DATA_PAGE), (2, _I32, n), (3, _I32, packed.size),
            (5, _STRUCT, [(1, _I32, levels), (2, _I32, _PLAIN), (3, _I32, _RLE),
                          (4, _I32, _RLE)]),
        ])
        return header, packed, len(header) + n, levels, lo, hi

    def _tasks(self, chunk: pa.ListArray, col: _Column):
        """One page's (offsets, values, column) per ~PAGE_VALUE_BYTES of values, whole rows."""
        offsets = arrow.offsets_of(chunk, False)
        values = arrow.fixed_view(chunk.values).view(np.uint8)
        per_page = max(1, PAGE_VALUE_BYTES // col.width)
        lo = 0
        rows = len(chunk)
        while lo < rows:
            hi = int(np.searchsorted(offsets, offsets[lo] + per_page, side="right")) - 1
            hi = min(max(hi, lo + 1), rows)
            yield offsets[lo:hi + 1], values, col
            lo = hi

    def _map(self, tasks: list[Any]) -> Any:
        if self._threads == 1 or forked_child() or len(tasks) < 2:
            return map(self._page, tasks)
        if self._pool is None or self._pool_pid != os.getpid():
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="fastaxo-pq")
            self._pool_pid = os.getpid()
        return self._pool.map(self._page, tasks)

    def write(self, columns: list[pa.Array | pa.ChunkedArray]) -> None:
        """Writes one row group of the columns (one per schema field, equal lengths)."""
        if len(columns) != len(self._cols):
            raise ValueError(f"columns must hold {len(self._cols)} arrays, got {len(columns)}")
        rows = len(columns[0])
        chunks_of = []
        for col, arr in zip(self._cols, columns):
            if len(arr) != rows:
                raise ValueError(f"column {col.name!r} holds {len(arr)} rows, not {rows}")
            vt = arr.type.value_type if pa.types.is_list(arr.type) else None
            if vt is None or not pa.types.is_integer(vt) or vt.bit_width != col.width * 8:
                raise ValueError(
                    f"column {col.name!r}: values must be int{col.width * 8} (the Parquet type "
                    f"of {self.schema.field(col.name).type.value_type} values), got {arr.type}")
            chunks_of.append(_list_chunks(arr, col.name))
        meta = []
        total = 0
        first = self._pos
        for col, chunks, bounds in zip(self._cols, chunks_of, self._bounds):
            tasks = [t for c in chunks for t in self._tasks(c, col)]
            start = self._pos
            raw = levels = 0
            # (no rows: one empty page keeps the chunk readable)
            pages = self._map(tasks) if tasks else [self._page(
                (np.zeros(1, np.int32), np.zeros(0, np.uint8), col))]
            for header, body, size, n, lo, hi in pages:
                self._f.write(header)
                self._f.write(memoryview(body))  # (no copy of the compressed bytes)
                self._pos += len(header) + body.size
                raw += size
                levels += n
                if lo is not None and hi is not None:
                    a, b = bounds
                    bounds[0] = lo if a is None else min(a, lo)
                    bounds[1] = hi if b is None else max(b, hi)
            total += raw
            meta.append([
                (2, _I64, start),
                (3, _STRUCT, [
                    (1, _I32, col.physical), (2, _LIST, (_I32, [_RLE, _PLAIN])),
                    (3, _LIST, (_BINARY, [col.name, "list", "element"])), (4, _I32, _ZSTD),
                    (5, _I64, levels), (6, _I64, raw), (7, _I64, self._pos - start),
                    (9, _I64, start),
                ]),
            ])
        self._row_groups.append(_struct([
            (1, _LIST, (_STRUCT, meta)), (2, _I64, total), (3, _I64, rows),
            (5, _I64, first), (6, _I64, self._pos - first), (7, _I16, len(self._row_groups)),
        ]))
        self._rows += rows

    def _final_columns(self, schema: pa.Schema | None) -> list[_Column]:
        """The columns the footer describes: ``schema``'s (same names, same Parquet types:
        only the integer width of a 32-bit column may change), each checked to hold every
        value written."""
        if schema is None:
            schema = self.schema
        elif not self.takes(schema) or schema.names != self.schema.names:
            raise ValueError(f"close(schema=): expected the columns {self.schema.names} as "
                             f"lists of integers, got {schema}")
        cols = [_Column(f) for f in schema]
        for old, new, (lo, hi) in zip(self._cols, cols, self._bounds):
            if (old.physical, old.width) != (new.physical, new.width):
                raise ValueError(f"close(schema=): column {new.name!r} was written as "
                                 f"{old.width * 8}-bit values; its type must stay "
                                 f"{old.width * 8}-bit or narrower in the same Parquet type")
            if not new.holds(lo, hi):
                raise ValueError(f"column {new.name!r} holds values in [{lo}, {hi}], outside "
                                 f"int{new.bits}; its type cannot be int{new.bits}")
        self.schema = schema
        return cols

    def close(self, schema: pa.Schema | None = None) -> None:
        """Writes the footer and closes the file. ``schema``: the file's final schema, when
        a column's integer type is decided at the end (int8 / int16 / int32 for a column
        written as int32); refused, before anything is written, when a value written does not
        fit."""
        if self._f.closed:
            return
        try:
            cols = self._final_columns(schema)
            schema_el = [[(4, _BINARY, "schema"), (5, _I32, len(cols))]]
            for col in cols:
                schema_el += col.schema_elements()
            kv = [(k, v) for k, v in (self.schema.metadata or {}).items()]
            kv.insert(0, (b"ARROW:schema",
                          base64.b64encode(self.schema.serialize().to_pybytes())))
            footer = _struct([
                (1, _I32, 2), (2, _LIST, (_STRUCT, schema_el)), (3, _I64, self._rows),
                (4, _LIST, (_STRUCT, self._row_groups)),
                (5, _LIST, (_STRUCT, [[(1, _BINARY, k), (2, _BINARY, v)] for k, v in kv])),
                (6, _BINARY, f"fastaxo version {__version__}"),
                (7, _LIST, (_STRUCT, [[(1, _STRUCT, [])] for _ in self._cols])),
            ])
            self._f.write(footer)
            self._f.write(len(footer).to_bytes(4, "little") + MAGIC)
        finally:
            self._f.close()
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None

    def abort(self) -> None:
        """Closes the file without a footer (the caller removes it)."""
        if not self._f.closed:
            self._f.close()
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
