"""The inputs hash_rows and dedupe take, as row sources: each validated once, then hashed range
by range by the compiled kernels (or the reference), without copying the input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo._core.backend import ext
from fastaxo._core.checks import mistake_hint
from fastaxo._core.ragged import is_hf_dataset
from fastaxo._reference import hashing as reference
from fastaxo.errors import ColumnNotFoundError, InvalidInputError, InvalidTypeError

__all__ = ["BLOCK", "ROW_ENCODING_VERSION", "RowSource", "as_rows", "corrupt_row", "hash_range",
           "select_columns", "to_hex"]

#: Version of the canonical table-row encoding (csrc/fx_rows.c). Digests of table rows are
#: stable across releases while this number is unchanged.
ROW_ENCODING_VERSION = 1

BLOCK = 1 << 16  # rows per block where a block buffer bounds memory (dedupe, copies)


# --------------------------------------------------------------------------- row sources
class RowSource:
    """A validated input: ``n`` rows, an ``encoding`` tag, and a way to hash a range."""

    n: int
    encoding: str

    def hash_into(self, start: int, stop: int, out: np.ndarray, nt: int) -> None:
        raise NotImplementedError

    def reference(self, start: int, stop: int) -> np.ndarray:
        raise NotImplementedError


class _ChunkedRows(RowSource):
    """Rows spread over chunks (pyarrow chunks, record batches): hash a range chunk by chunk."""

    def __init__(self, chunks: list[Any], encoding: str):
        self.chunks = [c for c in chunks if len(c)]
        self.starts = np.cumsum([0] + [len(c) for c in self.chunks], dtype=np.int64)
        self.n = int(self.starts[-1])
        self.encoding = encoding

    def _pieces(self, start: int, stop: int):
        """(chunk index, first row, end row, global position) of each chunk overlapping the
        range."""
        k = int(np.searchsorted(self.starts, start, side="right")) - 1
        while start < stop:
            c0, c1 = int(self.starts[k]), int(self.starts[k + 1])
            a, b = start - c0, min(stop, c1) - c0
            yield k, a, b, start
            start = c0 + b
            k += 1

    def hash_into(self, start: int, stop: int, out: np.ndarray, nt: int) -> None:
        for k, a, b, pos in self._pieces(start, stop):
            self._hash_chunk(k, a, b, out[pos - start : pos - start + (b - a)], nt)

    def reference(self, start: int, stop: int) -> np.ndarray:
        parts = [self._reference_chunk(k, a, b) for k, a, b, _ in self._pieces(start, stop)]
        return np.concatenate(parts) if parts else np.zeros((0, 32), np.uint8)

    def _hash_chunk(self, k: int, a: int, b: int, out: np.ndarray, nt: int) -> None:
        raise NotImplementedError

    def _reference_chunk(self, k: int, a: int, b: int) -> np.ndarray:
        return reference.hash_rows(self.chunks[k].slice(a, b - a))


def corrupt_row(row: int, status: int) -> InvalidInputError:
    """The error of a row the row encoding refused (its FX_ROW_* status, from the extension)."""
    assert ext is not None  # (only the extension reports a status)
    what = ("offsets out of order or out of range" if status == ext.ROW_BAD_OFFSETS
            else "a dictionary index out of range" if status == ext.ROW_BAD_DICT_INDEX
            else f"status {status}")
    return InvalidInputError(f"data row {row} has {what}: the Arrow data is corrupt")


def _chunk_bases(chunks: list[Any]) -> list[int]:
    """Global index of each chunk's first row (error messages name global rows)."""
    return np.cumsum([0] + [len(c) for c in chunks[:-1]]).tolist() if chunks else []


class _FlatArrowRows(_ChunkedRows):
    """string/binary arrays (row = value bytes) and list<number> arrays (row = values' bytes)."""

    def __init__(self, chunks: list[pa.Array], what: str):
        chunks = [c for c in chunks if len(c)]
        t = chunks[0].type if chunks else pa.binary()
        view = arrow.binary_view if arrow.is_binary_like(t) else arrow.list_view
        self.views = [view(c, what, base) for c, base in zip(chunks, _chunk_bases(chunks))]
        super().__init__(chunks, "bytes" if arrow.is_binary_like(t) else f"values:{t.value_type}")

    def _hash_chunk(self, k: int, a: int, b: int, out: np.ndarray, nt: int) -> None:
        assert ext is not None  # these rows are hashed by the extension
        values, offsets = self.views[k]
        ext.hash_offsets(values.view(np.uint8), offsets[a : b + 1], values.itemsize, out, nt)


class _FixedArrowRows(_ChunkedRows):
    """Numeric Arrow arrays: row i is the value's little-endian bytes."""

    def __init__(self, chunks: list[pa.Array], what: str):
        chunks = [c for c in chunks if len(c)]
        self.views = [
            arrow.number_view(c, what, base) for c, base in zip(chunks, _chunk_bases(chunks))
        ]
        t = chunks[0].type if chunks else pa.int64()
        super().__init__(chunks, f"values:{t}")

    def _hash_chunk(self, k: int, a: int, b: int, out: np.ndarray, nt: int) -> None:
        assert ext is not None  # these rows are hashed by the extension
        v = self.views[k]
        ext.hash_fixed(v[a:b].view(np.uint8), v.itemsize, out, nt)


class _TableRows(_ChunkedRows):
    """Tables and record batches: the canonical encoding of the selected columns."""

    def __init__(self, batches: list[pa.RecordBatch], names: list[str], types: list[pa.DataType]):
        self.names = names
        super().__init__(batches, f"table:v{ROW_ENCODING_VERSION}:{arrow.type_signature(types)}")

    def _hash_chunk(self, k: int, a: int, b: int, out: np.ndarray, nt: int) -> None:
        assert ext is not None  # these rows are hashed by the extension
        batch = self.chunks[k]
        part = batch.slice(a, b - a) if (a, b) != (0, batch.num_rows) else batch
        keep: list[Any] = []
        specs = [arrow.column_spec(part.column(j), keep, name) for j, name in enumerate(self.names)]
        bad = ext.hash_table(specs, b - a, out, nt)
        if bad is not None:
            row, status = bad
            raise corrupt_row(int(self.starts[k]) + a + row, status)

    def _reference_chunk(self, k: int, a: int, b: int) -> np.ndarray:
        return reference.hash_rows(self.chunks[k].slice(a, b - a), self.names)


class _DatasetRows(RowSource):
    """An HF datasets.Dataset with an indices mapping: read blocks of rows as Arrow tables."""

    def __init__(self, ds: Any, names: list[str], types: list[pa.DataType]):
        self.fmt = ds.select_columns(names).with_format("arrow")
        table = ds.data.table if hasattr(ds.data, "table") else ds.data
        self.table = table.select(names)
        self.indices = ds._indices.column(0)
        self.names = names
        self.n = len(ds)
        self.encoding = f"table:v{ROW_ENCODING_VERSION}:{arrow.type_signature(types)}"

        self._physical: np.ndarray | None = None

    def _table(self, a: int, b: int) -> _TableRows:
        # One vectorised take per block (datasets' own slicing gathers row by row: ~40x slower).
        tbl = self.table.take(self.indices.slice(a, b - a))
        return _TableRows(tbl.to_batches(), self.names, [c.type for c in tbl.columns])

    def hash_into(self, start: int, stop: int, out: np.ndarray, nt: int) -> None:
        if 2 * self.n >= self.table.num_rows:
            # The mapping covers most of the table (a shuffle, a dedupe's select): hash the
            # table in place, once (32 bytes per row), and gather digests, not rows.
            if self._physical is None:
                phys = np.empty((self.table.num_rows, 32), dtype=np.uint8)
                _TableRows(self.table.to_batches(), self.names, self.table.schema.types).hash_into(
                    0, self.table.num_rows, phys, nt)
                self._physical = phys
            idx = arrow.fixed_view(self.indices.slice(start, stop - start).combine_chunks())
            if idx.dtype == np.uint64:  # (NumPy 1.x's take refuses uint64 indices)
                idx = idx.view(np.int64)
            if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= self.table.num_rows):
                raise InvalidInputError(
                    "data: the dataset's indices mapping points outside its "
                    f"{self.table.num_rows:,} rows")
            np.take(self._physical, idx, axis=0, out=out[: stop - start])
            return
        for a in range(start, stop, BLOCK):
            b = min(stop, a + BLOCK)
            self._table(a, b).hash_into(0, b - a, out[a - start : b - start], nt)

    def reference(self, start: int, stop: int) -> np.ndarray:
        return reference.hash_rows(self.fmt[start:stop], self.names)


class _NumpyRows(RowSource):
    """Numeric NumPy arrays: row i is arr[i] (a scalar for 1-D), as little-endian bytes."""

    def __init__(self, arr: np.ndarray):
        self.arr = arr
        self.n = arr.shape[0]
        self.row_bytes = int(arr.itemsize * (int(np.prod(arr.shape[1:])) if arr.ndim > 1 else 1))
        le = arr.dtype.newbyteorder("<") if arr.dtype.byteorder not in ("|",) else arr.dtype
        self.le_dtype = le
        self.direct = arr.flags.c_contiguous and (
            arr.dtype.byteorder in ("<", "|", "=") and np.little_endian
        )
        self.encoding = (
            f"values:{arr.dtype.kind}{arr.itemsize}x{self.row_bytes // max(arr.itemsize, 1)}"
        )

    def hash_into(self, start: int, stop: int, out: np.ndarray, nt: int) -> None:
        assert ext is not None  # these rows are hashed by the extension
        if self.direct:
            flat = self.arr.reshape(-1).view(np.uint8) if self.arr.size else np.zeros(0, np.uint8)
            ext.hash_fixed(
                flat[start * self.row_bytes : stop * self.row_bytes], self.row_bytes, out, nt
            )
            return
        # Non-contiguous or byte-swapped: convert one bounded block at a time.
        for a in range(start, stop, BLOCK):
            b = min(stop, a + BLOCK)
            block = np.ascontiguousarray(self.arr[a:b], dtype=self.le_dtype)
            ext.hash_fixed(
                block.reshape(-1).view(np.uint8), self.row_bytes, out[a - start : b - start], nt
            )

    def reference(self, start: int, stop: int) -> np.ndarray:
        return reference.hash_rows(self.arr[start:stop])


class _ObjectRows(RowSource):
    """A list of str (hashed as UTF-8) or bytes."""

    def __init__(self, rows: Sequence[Any], what: str):
        # a list of our own (8 bytes a row): dedupe hashes it block by block, and the caller's
        # list may be changed by another thread between two blocks
        rows = list(rows)
        self.rows, self.n, self.encoding, self.what = rows, len(rows), "bytes", what

    def _bad(self, i: int) -> InvalidTypeError:
        r = self.rows[i]
        return InvalidTypeError(
            f"{self.what}[{i}] is {type(r).__name__} {r!r:.60}; expected str or bytes"
        )

    def hash_into(self, start: int, stop: int, out: np.ndarray, nt: int) -> None:
        assert ext is not None  # these rows are hashed by the extension
        for a in range(start, stop, BLOCK):
            b = min(stop, a + BLOCK)
            bad = ext.hash_objects(self.rows, a, b, out[a - start : b - start], nt)
            if bad >= 0:
                raise self._bad(bad)

    def reference(self, start: int, stop: int) -> np.ndarray:
        for i in range(start, stop):
            if not isinstance(self.rows[i], (str, bytes)):
                raise self._bad(i)
        return reference.hash_rows(self.rows[start:stop])


# --------------------------------------------------------------------------- coercion
def select_columns(available: Sequence[str], columns: Any) -> list[str]:
    if columns is None:
        return list(available)
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
        raise InvalidTypeError(
            f"columns must be a list of column names (str) or None, got {columns!r:.80}"
        )
    if not columns:
        raise InvalidInputError("columns must name at least one column, got an empty list")
    if len(set(columns)) != len(columns):
        raise InvalidInputError(f"columns names a column twice: {list(columns)}")
    missing = [c for c in columns if c not in available]
    if missing:
        raise ColumnNotFoundError(
            f"columns {missing} are not in the data; its columns are {list(available)}"
        )
    return list(columns)


def as_rows(data: Any, columns: Any) -> RowSource:
    what = "data"
    if isinstance(data, (pa.Array, pa.ChunkedArray)):
        if columns is not None:
            raise InvalidInputError(
                "columns applies to tables (Table, RecordBatch, Dataset); data is an Arrow array"
            )
        chunks = list(data.chunks) if isinstance(data, pa.ChunkedArray) else [data]
        t = data.type
        if pa.types.is_dictionary(t) and (
            arrow.is_binary_like(t.value_type) or arrow.is_raw_list(t.value_type)
        ):
            chunks, t = [c.dictionary_decode() for c in chunks], t.value_type
        if arrow.has_type('is_string_view', t) or arrow.has_type('is_binary_view', t):
            t = pa.large_string() if arrow.has_type('is_string_view', t) else pa.large_binary()
            chunks = [c.cast(t) for c in chunks]
        if arrow.is_binary_like(t) or arrow.is_raw_list(t):
            return _FlatArrowRows(chunks, what)
        if arrow.is_raw_value_type(t):
            return _FixedArrowRows(chunks, what)
        return _TableRows([pa.record_batch([c], names=["_"]) for c in chunks], ["_"], [t])
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        names = select_columns(data.column_names, columns)
        sub = data.select(names)
        batches = sub.to_batches() if isinstance(sub, pa.Table) else [sub]
        return _TableRows(batches, names, [f.type for f in sub.schema])
    if is_hf_dataset(data):
        names = select_columns(data.column_names, columns)
        table = data.data.table if hasattr(data.data, "table") else data.data
        types = [table.schema.field(c).type for c in names]
        if data._indices is None:
            return _TableRows(table.select(names).to_batches(), names, types)
        return _DatasetRows(data, names, types)
    if columns is not None:
        raise InvalidInputError(
            "columns applies to tables (Table, RecordBatch, Dataset); data is "
            f"{type(data).__name__}"
        )
    if isinstance(data, np.ndarray):
        if data.dtype.kind in "biuf" or data.dtype.kind == "c":
            if data.ndim == 0:
                raise InvalidInputError("data is a 0-d NumPy array; expected rows along axis 0")
            return _NumpyRows(data)
        if data.dtype.kind in "USO" and data.ndim == 1:
            return _ObjectRows(data.tolist(), what)
        raise InvalidTypeError(
            f"data is a NumPy array of dtype {data.dtype} and {data.ndim} dimensions; expected "
            "numbers "
            "(rows along axis 0) or a 1-D array of str/bytes"
        )
    if isinstance(data, (list, tuple)):
        return _ObjectRows(data, what)
    raise InvalidTypeError(
        f"data is {type(data).__module__}.{type(data).__qualname__}; expected a pyarrow Array, "
        "ChunkedArray, Table or RecordBatch, a datasets.Dataset, a NumPy array, or a list of "
        "str/bytes" + mistake_hint(data)
    )


def hash_range(rows: RowSource, start: int, stop: int, out: np.ndarray, nt: int) -> None:
    if stop <= start:
        return
    if ext is None:
        out[:] = rows.reference(start, stop)
    else:
        rows.hash_into(start, stop, out, nt)


def to_hex(digests: np.ndarray) -> list[str]:
    h = digests.tobytes().hex()
    return [h[64 * i : 64 * (i + 1)] for i in range(digests.shape[0])]
