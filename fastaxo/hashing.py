"""SHA-256 of rows and exact, first-occurrence dedupe.

The fast path is columnar input: a pyarrow Array/ChunkedArray, Table, RecordBatch or an
HF ``datasets.Dataset`` (hashed straight from its Arrow buffers), or a NumPy array. Lists
of ``str``/``bytes`` work too: pointers to their bytes are gathered once, then hashed
without the GIL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo._core.backend import ext
from fastaxo._core.threads import resolve_num_threads
from fastaxo._reference import hashing as reference
from fastaxo.errors import (
    ColumnNotFoundError,
    InvalidInputError,
    InvalidTypeError,
)

__all__ = ["hash_rows", "dedupe", "DedupeResult", "Seen", "RowSet", "ROW_ENCODING_VERSION"]

#: Version of the canonical table-row encoding (csrc/fx_rows.c). Digests of table rows are
#: stable across releases while this number is unchanged.
ROW_ENCODING_VERSION = 1

_BLOCK = 1 << 16  # rows per block where a block buffer bounds memory (dedupe, copies)


# --------------------------------------------------------------------------- row sources
class _Rows:
    """A validated input: ``n`` rows, an ``encoding`` tag, and a way to hash a range."""

    n: int
    encoding: str

    def hash_into(self, start: int, stop: int, out: np.ndarray, nt: int) -> None:
        raise NotImplementedError

    def reference(self, start: int, stop: int) -> np.ndarray:
        raise NotImplementedError


class _ChunkedRows(_Rows):
    """Rows spread over chunks (pyarrow chunks, record batches): hash a range chunk by chunk."""

    def __init__(self, chunks: list[Any], encoding: str):
        self.chunks = [c for c in chunks if len(c)]
        self.starts = np.cumsum([0] + [len(c) for c in self.chunks], dtype=np.int64)
        self.n = int(self.starts[-1])
        self.encoding = encoding

    def _pieces(self, start: int, stop: int):
        """(chunk index, first row, end row, global position) of each chunk overlapping the range."""
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
        values, offsets = self.views[k]
        ext.hash_offsets(values.view(np.uint8), offsets[a : b + 1], values.itemsize, out, nt)


class _FixedArrowRows(_ChunkedRows):
    """Numeric Arrow arrays: row i is the value's little-endian bytes."""

    def __init__(self, chunks: list[pa.Array], what: str):
        chunks = [c for c in chunks if len(c)]
        self.views = [arrow.number_view(c, what, base) for c, base in zip(chunks, _chunk_bases(chunks))]
        t = chunks[0].type if chunks else pa.int64()
        super().__init__(chunks, f"values:{t}")

    def _hash_chunk(self, k: int, a: int, b: int, out: np.ndarray, nt: int) -> None:
        v = self.views[k]
        ext.hash_fixed(v[a:b].view(np.uint8), v.itemsize, out, nt)


class _TableRows(_ChunkedRows):
    """Tables and record batches: the canonical encoding of the selected columns."""

    def __init__(self, batches: list[pa.RecordBatch], names: list[str], types: list[pa.DataType]):
        self.names = names
        super().__init__(batches, f"table:v{ROW_ENCODING_VERSION}:{arrow.type_signature(types)}")

    def _hash_chunk(self, k: int, a: int, b: int, out: np.ndarray, nt: int) -> None:
        batch = self.chunks[k]
        part = batch.slice(a, b - a) if (a, b) != (0, batch.num_rows) else batch
        keep: list[Any] = []
        specs = [arrow.column_spec(part.column(j), keep, name) for j, name in enumerate(self.names)]
        bad = ext.hash_table(specs, b - a, out, nt)
        if bad is not None:
            row, status = bad
            what = "offsets out of order or out of range" if status == 1 else "a dictionary index out of range"
            raise InvalidInputError(f"data row {int(self.starts[k]) + a + row} has {what}: the Arrow data is corrupt")

    def _reference_chunk(self, k: int, a: int, b: int) -> np.ndarray:
        return reference.hash_rows(self.chunks[k].slice(a, b - a), self.names)


class _DatasetRows(_Rows):
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
            np.take(self._physical, idx, axis=0, out=out[: stop - start])
            return
        for a in range(start, stop, _BLOCK):
            b = min(stop, a + _BLOCK)
            self._table(a, b).hash_into(0, b - a, out[a - start : b - start], nt)

    def reference(self, start: int, stop: int) -> np.ndarray:
        return reference.hash_rows(self.fmt[start:stop], self.names)


class _NumpyRows(_Rows):
    """Numeric NumPy arrays: row i is arr[i] (a scalar for 1-D), as little-endian bytes."""

    def __init__(self, arr: np.ndarray):
        self.arr = arr
        self.n = arr.shape[0]
        self.row_bytes = int(arr.itemsize * (int(np.prod(arr.shape[1:])) if arr.ndim > 1 else 1))
        le = arr.dtype.newbyteorder("<") if arr.dtype.byteorder not in ("|",) else arr.dtype
        self.le_dtype = le
        self.direct = arr.flags.c_contiguous and (arr.dtype.byteorder in ("<", "|", "=") and np.little_endian)
        self.encoding = f"values:{arr.dtype.kind}{arr.itemsize}x{self.row_bytes // max(arr.itemsize, 1)}"

    def hash_into(self, start: int, stop: int, out: np.ndarray, nt: int) -> None:
        if self.direct:
            flat = self.arr.reshape(-1).view(np.uint8) if self.arr.size else np.zeros(0, np.uint8)
            ext.hash_fixed(flat[start * self.row_bytes : stop * self.row_bytes], self.row_bytes, out, nt)
            return
        # Non-contiguous or byte-swapped: convert one bounded block at a time.
        for a in range(start, stop, _BLOCK):
            b = min(stop, a + _BLOCK)
            block = np.ascontiguousarray(self.arr[a:b], dtype=self.le_dtype)
            ext.hash_fixed(block.reshape(-1).view(np.uint8), self.row_bytes, out[a - start : b - start], nt)

    def reference(self, start: int, stop: int) -> np.ndarray:
        return reference.hash_rows(self.arr[start:stop])


class _ObjectRows(_Rows):
    """A list of str (hashed as UTF-8) or bytes."""

    def __init__(self, rows: list[Any], what: str):
        self.rows, self.n, self.encoding, self.what = rows, len(rows), "bytes", what

    def _bad(self, i: int) -> InvalidTypeError:
        r = self.rows[i]
        return InvalidTypeError(f"{self.what}[{i}] is {type(r).__name__} {r!r:.60}; expected str or bytes")

    def hash_into(self, start: int, stop: int, out: np.ndarray, nt: int) -> None:
        for a in range(start, stop, _BLOCK):
            b = min(stop, a + _BLOCK)
            bad = ext.hash_objects(self.rows, a, b, out[a - start : b - start], nt)
            if bad >= 0:
                raise self._bad(bad)

    def reference(self, start: int, stop: int) -> np.ndarray:
        for i in range(start, stop):
            if not isinstance(self.rows[i], (str, bytes)):
                raise self._bad(i)
        return reference.hash_rows(self.rows[start:stop])


# --------------------------------------------------------------------------- coercion
def _is_hf_dataset(data: Any) -> bool:
    mod = type(data).__module__ or ""
    return mod.startswith("datasets.") and hasattr(data, "with_format") and hasattr(data, "_indices")


def _select_columns(available: Sequence[str], columns: Any) -> list[str]:
    if columns is None:
        return list(available)
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
        raise InvalidTypeError(f"columns must be a list of column names (str) or None, got {columns!r:.80}")
    if not columns:
        raise InvalidInputError("columns must name at least one column, got an empty list")
    if len(set(columns)) != len(columns):
        raise InvalidInputError(f"columns names a column twice: {list(columns)}")
    missing = [c for c in columns if c not in available]
    if missing:
        raise ColumnNotFoundError(f"columns {missing} are not in the data; its columns are {list(available)}")
    return list(columns)


def as_rows(data: Any, columns: Any) -> _Rows:
    what = "data"
    if isinstance(data, (pa.Array, pa.ChunkedArray)):
        if columns is not None:
            raise InvalidInputError("columns applies to tables (Table, RecordBatch, Dataset); data is an Arrow array")
        chunks = list(data.chunks) if isinstance(data, pa.ChunkedArray) else [data]
        t = data.type
        if pa.types.is_dictionary(t) and (arrow.is_binary_like(t.value_type) or arrow.is_raw_list(t.value_type)):
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
        names = _select_columns(data.column_names, columns)
        sub = data.select(names)
        batches = sub.to_batches() if isinstance(sub, pa.Table) else [sub]
        return _TableRows(batches, names, [f.type for f in sub.schema])
    if _is_hf_dataset(data):
        names = _select_columns(data.column_names, columns)
        table = data.data.table if hasattr(data.data, "table") else data.data
        types = [table.schema.field(c).type for c in names]
        if data._indices is None:
            return _TableRows(table.select(names).to_batches(), names, types)
        return _DatasetRows(data, names, types)
    if columns is not None:
        raise InvalidInputError(
            f"columns applies to tables (Table, RecordBatch, Dataset); data is {type(data).__name__}"
        )
    if isinstance(data, np.ndarray):
        if data.dtype.kind in "biuf" or data.dtype.kind == "c":
            if data.ndim == 0:
                raise InvalidInputError("data is a 0-d NumPy array; expected rows along axis 0")
            return _NumpyRows(data)
        if data.dtype.kind in "USO" and data.ndim == 1:
            return _ObjectRows(data.tolist(), what)
        raise InvalidTypeError(
            f"data is a NumPy array of dtype {data.dtype} and {data.ndim} dimensions; expected numbers "
            "(rows along axis 0) or a 1-D array of str/bytes"
        )
    if isinstance(data, (list, tuple)):
        return _ObjectRows(list(data) if isinstance(data, tuple) else data, what)
    raise InvalidTypeError(
        f"data is {type(data).__module__}.{type(data).__qualname__}; expected a pyarrow Array, "
        "ChunkedArray, Table or RecordBatch, a datasets.Dataset, a NumPy array, or a list of str/bytes"
    )


def _hash_range(rows: _Rows, start: int, stop: int, out: np.ndarray, nt: int) -> None:
    if stop <= start:
        return
    if ext is None:
        out[:] = rows.reference(start, stop)
    else:
        rows.hash_into(start, stop, out, nt)


def _to_hex(digests: np.ndarray) -> list[str]:
    h = digests.tobytes().hex()
    return [h[64 * i : 64 * (i + 1)] for i in range(digests.shape[0])]


# --------------------------------------------------------------------------- public API
@overload
def hash_rows(data: Any, *, columns: Sequence[str] | str | None = ..., num_threads: int | None = ...,
              hex: Literal[False] = ...) -> np.ndarray: ...
@overload
def hash_rows(data: Any, *, columns: Sequence[str] | str | None = ..., num_threads: int | None = ...,
              hex: Literal[True]) -> list[str]: ...


def hash_rows(data, *, columns=None, num_threads=None, hex=False):
    """SHA-256 of each row.

    Parameters
    ----------
    data
        * pyarrow ``Array``/``ChunkedArray`` of string, binary, large_string or
          large_binary: the digest of each value's bytes (``hashlib.sha256(value)``).
        * pyarrow list/large_list of integers or floats (token ids): the digest of the
          row's values as little-endian bytes (``hashlib.sha256(np_row.tobytes())``).
        * pyarrow ``Table``/``RecordBatch``, HF ``datasets.Dataset``, or an Arrow array of
          any other type: the digest of the canonical encoding of the selected columns of
          the row (see :data:`ROW_ENCODING_VERSION` and ARCHITECTURE.md). Every value is
          length- or width-delimited and nulls are encoded, so distinct rows never share a
          byte string: ``("ab", "c")`` and ``("a", "bc")`` differ.
        * a numeric NumPy array: row ``i`` is ``arr[i]`` as little-endian bytes (a 1-D
          array's rows are single values); any strides and byte order are accepted.
        * a list (or 1-D NumPy array) of ``str`` (hashed as UTF-8) or ``bytes``.

        Arrow and NumPy inputs are hashed in place, with no copy (the fast path).
    columns
        For tables: the columns to hash, in this order. Default: all, in table order.
    num_threads
        Threads to use; default ``FASTAXO_NUM_THREADS``, else ``OMP_NUM_THREADS``, else
        the CPU count. Results are identical for every thread count.
    hex
        Return a list of 64-character lowercase hex strings instead of bytes.

    Returns
    -------
    numpy.ndarray
        ``uint8[n, 32]`` digests (or ``list[str]`` with ``hex=True``).

    Raises
    ------
    InvalidTypeError
        ``data`` (or one of its rows) has an unsupported type (also a ``TypeError``).
    NullValueError
        A null in an array whose digest is of raw bytes (also a ``ValueError``).
    ColumnNotFoundError
        ``columns`` names a column the table lacks (also a ``KeyError``).
    """
    nt = resolve_num_threads(num_threads)
    rows = as_rows(data, columns)
    out = np.empty((rows.n, 32), dtype=np.uint8)
    _hash_range(rows, 0, rows.n, out, nt)
    return _to_hex(out) if hex else out


class Seen:
    """The distinct rows seen so far, as their 32-byte SHA-256 digests.

    Pass it to the next :func:`dedupe` call (train then eval, or chunk after chunk of a
    stream). It holds about 32 bytes per distinct row (plus a hash table of 5-11 bytes per
    row) and never the rows themselves. It remembers the row encoding that produced it, so
    that rows hashed differently (other column types) are refused instead of never
    matching. Picklable; safe to share between threads.
    """

    def __init__(self) -> None:
        self._set = ext.SeenSet() if ext is not None else reference.PySeenSet()
        self.encoding: str | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._set)

    def __repr__(self) -> str:
        return f"<fastaxo.Seen: {len(self)} distinct rows, {self.nbytes / 2**20:.1f} MiB, encoding={self.encoding!r}>"

    @property
    def nbytes(self) -> int:
        """Bytes held by the set (digests, table and bookkeeping)."""
        return int(self._set.nbytes)

    def _bind(self, encoding: str) -> None:
        if self.encoding is None:
            self.encoding = encoding
        elif self.encoding != encoding:
            raise InvalidInputError(
                f"seen holds digests of rows encoded as {self.encoding!r}, but these rows are encoded as "
                f"{encoding!r}; their digests can never match. Use the same columns and types, or a new Seen"
            )

    def add(self, digests: np.ndarray) -> np.ndarray:
        """Insert ``uint8[n, 32]`` digests in order; returns a bool mask of the new ones."""
        d = _check_digests(digests, "digests")
        is_new = np.empty(d.shape[0], dtype=np.uint8)
        with self._lock:
            self._set.insert(d, is_new)
        return is_new.view(bool)

    def __contains__(self, digest: object) -> bool:
        return bool(self.contains(np.frombuffer(_one_digest(digest), dtype=np.uint8).reshape(1, 32))[0])

    def contains(self, digests: np.ndarray) -> np.ndarray:
        """Bool mask: which of ``uint8[n, 32]`` digests are in the set."""
        d = _check_digests(digests, "digests")
        found = np.zeros(d.shape[0], dtype=np.uint8)
        with self._lock:
            self._set.contains(d, found)
        return found.view(bool)

    def digests(self) -> np.ndarray:
        """Every digest in insertion order, as ``uint8[len, 32]`` (a copy)."""
        with self._lock:
            out = np.empty((len(self._set), 32), dtype=np.uint8)
            self._set.export(out)
        return out

    def to_hex(self) -> list[str]:
        """Every digest as lowercase hex, in insertion order."""
        return _to_hex(self.digests())

    def copy(self) -> Seen:
        new = Seen()
        new.encoding = self.encoding
        new.add(self.digests())
        return new

    def __reduce__(self):
        return (_seen_from_state, (self.encoding, self.digests().tobytes()))


def _seen_from_state(encoding: str | None, raw: bytes) -> Seen:
    s = Seen()
    s.encoding = encoding
    if raw:
        s.add(np.frombuffer(raw, dtype=np.uint8).reshape(-1, 32).copy())
    return s


def _one_digest(digest: object) -> bytes:
    if isinstance(digest, str):
        try:
            raw = bytes.fromhex(digest)
        except ValueError:
            raw = b""
    elif isinstance(digest, (bytes, bytearray, memoryview)):
        raw = bytes(digest)
    elif isinstance(digest, np.ndarray):
        raw = digest.astype(np.uint8, copy=False).tobytes()
    else:
        raise InvalidTypeError(f"digest must be 32 bytes or 64 hex characters, got {type(digest).__name__}")
    if len(raw) != 32:
        raise InvalidInputError(f"digest must be 32 bytes or 64 hex characters, got {digest!r:.80}")
    return raw


def _check_digests(digests: Any, what: str) -> np.ndarray:
    d = np.asarray(digests)
    if d.ndim != 2 or d.shape[1] != 32 or d.dtype != np.uint8:
        raise InvalidInputError(f"{what} must be a uint8 array of shape (n, 32), got {d.dtype}{list(d.shape)}")
    return np.ascontiguousarray(d)


class RowSet:
    """An exact, insertion-ordered set of table rows, compared by value, for :func:`dedupe`.

    Where :class:`Seen` keeps a SHA-256 digest of every row (so it needs every byte of every
    row hashed, and can be pickled and carried across processes), a RowSet keeps *references*
    to the rows: each row gets a cheap key (the length of its canonical encoding and 8 sampled
    16-byte windows of it), and only a row whose key was seen before is compared, byte for
    byte, with the earlier row(s) of that key. Unique rows cost a few cache lines each, a
    duplicate one comparison; the result is exact (no digest collisions are possible) and
    equal to :class:`Seen`'s. Keys shared by many distinct rows (templated data) switch to
    a digest table, so no input makes it quadratic.

    The rows stay where they are: a RowSet holds the Arrow data of every table added to it
    (a memory-mapped datasets table costs address space, not RAM) and about 50 bytes per
    distinct row. Accepts what :func:`hash_rows` accepts as tables: pyarrow Table,
    RecordBatch, Array, ChunkedArray, or a ``datasets.Dataset`` (its indices mapping is
    followed, nothing is gathered). Not picklable; use :class:`Seen` to carry a set across
    processes or to bound memory on a stream. Safe to share between threads.
    """

    def __init__(self) -> None:
        self._core = ext.RowSetCore() if ext is not None else None
        self._py: dict[bytes, None] = {}
        self.encoding: str | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._core) if self._core is not None else len(self._py)

    def __repr__(self) -> str:
        return f"<fastaxo.RowSet: {len(self)} distinct rows, encoding={self.encoding!r}>"

    @property
    def nbytes(self) -> int:
        """Bytes held by the set itself (entries and tables; not the rows it points into)."""
        return int(self._core.nbytes) if self._core is not None else len(self._py) * 120

    @property
    def stats(self) -> dict[str, int]:
        """Row comparisons made beyond the first per duplicate, hot keys, sources held."""
        return dict(self._core.stats) if self._core is not None else {"compares": 0, "hot_keys": 0,
                                                                      "sources": 0}

    def _bind(self, encoding: str) -> None:
        if self.encoding is None:
            self.encoding = encoding
        elif self.encoding != encoding:
            raise InvalidInputError(
                f"this RowSet holds rows encoded as {self.encoding!r}, but these rows are encoded as "
                f"{encoding!r}; they can never be equal. Use the same columns and types, or a new RowSet"
            )

    def add(self, data: Any, *, columns: Sequence[str] | str | None = None,
            num_threads: int | None = None) -> np.ndarray:
        """Insert the rows of ``data`` in order; returns a bool mask of the rows that were new
        (not equal to an earlier row of this call or of an earlier call)."""
        nt = resolve_num_threads(num_threads)
        table, rows, encoding = _rowset_source(data, columns)
        n = len(rows) if rows is not None else table.num_rows
        with self._lock:
            if n:
                self._bind(encoding)
            is_new = np.zeros(n, dtype=np.uint8)
            if n == 0:
                return is_new.view(bool)
            if self._core is None:
                msgs = reference.row_messages(table if rows is None else table.take(pa.array(rows)))
                for i, m in enumerate(msgs):
                    if m not in self._py:
                        self._py[m] = None
                        is_new[i] = 1
                return is_new.view(bool)
            keep: list[Any] = [table]
            tab = ext.TabDesc.from_arrow(table, keep) if hasattr(table, "__arrow_c_stream__") else None
            if tab is None:  # a type the C path leaves to column_spec (strings, dictionaries, ...)
                batches = [b for b in table.to_batches() if b.num_rows]
                specs = [[arrow.column_spec(b.column(j), keep, name) for j, name in enumerate(table.column_names)]
                         for b in batches]
                tab = ext.TabDesc(specs, [b.num_rows for b in batches], table.num_columns, keep)
            src = self._core.add_source(tab)
            bad = self._core.insert(src, rows, 0, is_new, nt)
            if bad is not None:
                row, status = bad
                what = "offsets out of order or out of range" if status == 1 else "a dictionary index out of range"
                raise InvalidInputError(f"data row {row} has {what}: the Arrow data is corrupt")
        return is_new.view(bool)


def _rowset_source(data: Any, columns: Any) -> tuple[pa.Table, np.ndarray | None, str]:
    """(table of the selected columns, physical row order or None for all rows, encoding)."""
    if isinstance(data, (pa.Array, pa.ChunkedArray)):
        if columns is not None:
            raise InvalidInputError("columns applies to tables (Table, RecordBatch, Dataset); data is an Arrow array")
        table = pa.table({"_": data})
    elif isinstance(data, (pa.Table, pa.RecordBatch)):
        names = _select_columns(data.column_names, columns)
        table = data.select(names)
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
    elif _is_hf_dataset(data):
        names = _select_columns(data.column_names, columns)
        full = data.data.table if hasattr(data.data, "table") else data.data
        table = full.select(names)
        if data._indices is not None:
            idx = data._indices.column(0)
            rows = np.ascontiguousarray(arrow.fixed_view(idx.combine_chunks()) if idx.num_chunks != 1
                                        else arrow.fixed_view(idx.chunk(0)))
            # uint64 indices as int64 without a copy (a fresh 8 bytes a row faults in): a value
            # >= 2**63 reads negative, which insert refuses as out of range
            rows = rows.view(np.int64) if rows.dtype == np.uint64 else rows.astype(np.int64, copy=False)
            return table, rows, f"table:v{ROW_ENCODING_VERSION}:{arrow.type_signature(table.schema.types)}"
    else:
        raise InvalidTypeError(
            f"data is {type(data).__module__}.{type(data).__qualname__}; a RowSet takes a pyarrow Table, "
            "RecordBatch, Array or ChunkedArray, or a datasets.Dataset"
        )
    return table, None, f"table:v{ROW_ENCODING_VERSION}:{arrow.type_signature(table.schema.types)}"


@dataclass(frozen=True)
class DedupeResult:
    """What :func:`dedupe` found.

    Attributes
    ----------
    keep : numpy.ndarray
        int64 indices of the rows kept (first occurrences), increasing.
    n_rows : int
        Rows in the input.
    n_duplicates : int
        Rows dropped: duplicates within the input or of rows already in ``seen``.
    seen : Seen or RowSet
        The updated set; pass it to the next call.
    """

    keep: np.ndarray
    n_rows: int
    n_duplicates: int
    seen: Seen | RowSet

    @property
    def keep_mask(self) -> np.ndarray:
        """Bool mask over the input rows: True where a row is kept."""
        mask = np.zeros(self.n_rows, dtype=bool)
        mask[self.keep] = True
        return mask

    def apply(self, data: Any) -> Any:
        """The kept rows of ``data`` (the input of the call), in input order."""
        if isinstance(data, (pa.Table, pa.RecordBatch, pa.Array, pa.ChunkedArray)):
            return data.take(pa.array(self.keep))
        if _is_hf_dataset(data):
            return data.select(self.keep)
        if isinstance(data, np.ndarray):
            return data[self.keep]
        if isinstance(data, list):
            return [data[i] for i in self.keep.tolist()]
        raise InvalidTypeError(f"apply: data is {type(data).__name__}; expected what dedupe was called on")


def dedupe(data: Any, *, columns: Sequence[str] | str | None = None, seen: Seen | RowSet | None = None,
           num_threads: int | None = None) -> DedupeResult:
    """Keep the first occurrence of each distinct row, in input order.

    Rows are compared by the SHA-256 of their bytes as :func:`hash_rows` defines them
    (for tables: every selected column, nulls included). Rows whose digest is already in
    ``seen`` are dropped too, so a train set's ``seen`` removes the eval rows it contains,
    and a stream deduplicates chunk after chunk. Memory: the ``keep`` indices, ``seen``
    (about 32 bytes per distinct row) and one block of 65,536 digests; never the rows.

    Parameters
    ----------
    data, columns, num_threads
        As for :func:`hash_rows`.
    seen
        Rows seen earlier; updated in place and returned. Default: a new :class:`Seen`
        (digests: picklable, bounded memory on a stream). A :class:`RowSet` instead compares
        rows by value without hashing every byte (several times faster on long rows, the same
        result); it keeps references to the tables it was given.

    Returns
    -------
    DedupeResult
        ``keep`` (int64 indices), ``n_rows``, ``n_duplicates`` and ``seen``.
    """
    nt = resolve_num_threads(num_threads)
    if isinstance(seen, RowSet):
        is_new = seen.add(data, columns=columns, num_threads=nt)
        keep = np.flatnonzero(is_new).astype(np.int64, copy=False)
        return DedupeResult(keep=keep, n_rows=len(is_new), n_duplicates=len(is_new) - len(keep), seen=seen)
    if seen is None:
        seen = Seen()
    elif not isinstance(seen, Seen):
        raise InvalidTypeError(f"seen must be a fastaxo.Seen, a fastaxo.RowSet or None, got {type(seen).__name__}")
    rows = as_rows(data, columns)
    if rows.n:
        seen._bind(rows.encoding)
    buf = np.empty((min(rows.n, _BLOCK), 32), dtype=np.uint8)
    keeps: list[np.ndarray] = []
    for a in range(0, rows.n, _BLOCK):
        b = min(rows.n, a + _BLOCK)
        block = buf[: b - a]
        _hash_range(rows, a, b, block, nt)
        keeps.append(np.flatnonzero(seen.add(block)) + a)
    keep = np.concatenate(keeps).astype(np.int64, copy=False) if keeps else np.zeros(0, dtype=np.int64)
    return DedupeResult(keep=keep, n_rows=rows.n, n_duplicates=rows.n - len(keep), seen=seen)


def iter_dedupe(chunks: Iterable[Any], *, columns: Sequence[str] | str | None = None,
                seen: Seen | None = None, num_threads: int | None = None):
    """Dedupe a stream chunk after chunk: yields ``(chunk, DedupeResult)`` for each chunk."""
    seen = Seen() if seen is None else seen
    for chunk in chunks:
        res = dedupe(chunk, columns=columns, seen=seen, num_threads=num_threads)
        yield chunk, res
