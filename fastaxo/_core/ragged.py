"""Ragged token columns for the packing and padding kernels.

Every accepted input becomes a :class:`Ragged`: one or more Arrow-layout chunks
``(values, offsets)`` that stay where they are (no copy for Arrow and NumPy input), the
per-row lengths (int64), and optionally a row map (``index``: logical row i is physical row
``index[i]``, for a ``datasets.Dataset`` with an indices mapping). The kernels read tokens
through per-entry addresses (``source_ptrs``), so chunks, slices and the row map cost nothing
per token. Lists of lists are converted once (the slow path, documented as such).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow, backend
from fastaxo._core.checks import mistake_hint, require_offsets
from fastaxo.errors import ColumnNotFoundError, InvalidInputError, InvalidTypeError, KernelError

_INT64 = np.dtype(np.int64)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


class Ragged:
    """Rows of tokens: ``chunks`` of ``(values, offsets)`` (offsets absolute into values),
    ``bases`` (first global row of each chunk, plus the total), ``lengths`` per logical row,
    and an optional row map ``index``."""

    __slots__ = ("name", "chunks", "bases", "lengths", "dtype", "index")

    def __init__(self, name: str, chunks: list[tuple[np.ndarray, np.ndarray]], dtype: np.dtype,
                 index: np.ndarray | None = None, lengths: np.ndarray | None = None):
        """``lengths`` may be given only for offsets built here from those lengths (trusted).
        Other offsets are the caller's: they are copied, then checked. The kernels find every
        row through them, possibly long after this call (an :func:`~fastaxo.iter_pack` chunk),
        and the caller may reuse its buffer meanwhile (a NumPy array, or the memory an Arrow
        array was built on without a copy); the copy (8 bytes a row) keeps what was checked
        what is read. The values are read in place: their length cannot change."""
        self.name = name
        self.dtype = np.dtype(dtype)
        if lengths is None:
            chunks = [(values, _snapshot(offsets)) for values, offsets in chunks]
        self.chunks = chunks
        if len(chunks) == 1:
            self.bases = np.array([0, len(chunks[0][1]) - 1], dtype=np.int64)
        else:
            self.bases = np.zeros(len(chunks) + 1, dtype=np.int64)
            np.cumsum([len(o) - 1 for _, o in chunks], out=self.bases[1:])
        if lengths is None:
            for (values, offsets), base in zip(chunks, self.bases):
                # (even with no rows: a negative first offset is corrupt)
                require_offsets(offsets, len(values), name, int(base))
            if chunks:
                lengths = np.concatenate(
                    [np.diff(o).astype(np.int64, copy=False) for _, o in chunks]
                )
            else:
                lengths = _EMPTY_I64
        if index is not None:
            index = np.ascontiguousarray(index, dtype=np.int64)
            if len(index) and (index.min() < 0 or index.max() >= len(lengths)):
                raise InvalidInputError(
                    f"{name}: row map points outside the {len(lengths)} stored rows"
                )
            lengths = lengths[index]
        self.index = index
        self.lengths = lengths

    def __len__(self) -> int:
        return len(self.lengths)

    def physical(self, rows: np.ndarray) -> np.ndarray:
        """Physical row numbers of logical rows."""
        return rows if self.index is None else self.index[rows]

    def entry_ptrs(
        self, rows: np.ndarray | None, starts: np.ndarray | None, lens: np.ndarray, nt: int
    ) -> np.ndarray:
        """Address of the first token of each entry ``e``: logical row ``rows[e]`` (``e`` when
        None) plus ``starts[e]`` tokens, its ``lens[e]`` tokens inside the values (checked
        again in C as the offsets are read)."""
        from fastaxo._core.backend import pack_ext

        assert pack_ext is not None  # the kernels that read addresses need the extension
        phys = self.index if rows is None else self.physical(rows)
        try:
            return pack_ext.source_ptrs(phys, len(lens), starts, lens, *self.source(),
                                        self.dtype.itemsize, nt)
        except ValueError as e:  # (the offsets are fastaxo's own copy: a bug if ever seen)
            raise KernelError(f"{self.name}: {e}") from None

    def source(self) -> tuple[list, np.ndarray]:
        """(chunks, chunk_base) as the kernels' ``source_ptrs`` takes them."""
        if self.chunks:
            return self.chunks, self.bases
        return [(np.zeros(0, self.dtype), np.zeros(1, np.int64))], np.zeros(2, dtype=np.int64)

    def row(self, i: int) -> np.ndarray:
        """Row ``i`` as a NumPy view (tests and the reference implementation)."""
        p = int(i if self.index is None else self.index[i])
        c = int(np.searchsorted(self.bases, p, side="right")) - 1
        values, offsets = self.chunks[c]
        local = p - int(self.bases[c])
        return values[int(offsets[local]) : int(offsets[local + 1])]

    def value_range(self) -> tuple[int, int] | None:
        """(min, max) over the tokens of all rows (None when there are none)."""
        lo = hi = None
        for values, offsets in self.chunks:
            if len(offsets) < 2:
                continue
            part = values[int(offsets[0]) : int(offsets[-1])]
            if len(part):
                a, b = int(part.min()), int(part.max())
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
        return None if lo is None or hi is None else (lo, hi)


def _snapshot(offsets: np.ndarray) -> np.ndarray:
    """A private, C-contiguous, native-order copy of int32/int64 offsets."""
    return np.array(offsets, dtype=offsets.dtype.newbyteorder("="), order="C", copy=True)


class ArrayRows:
    """A list of 1-D C-contiguous NumPy arrays of one native dtype, read in place (no
    concatenation): the shape a collator's micro-batch arrives in."""

    __slots__ = ("name", "rows", "ptrs", "lengths", "dtype", "index")

    def __init__(
        self, name: str, rows: Sequence[Any] | np.ndarray, ptrs: np.ndarray, lengths: np.ndarray,
        dtype: np.dtype,
    ):
        self.name, self.rows, self.ptrs, self.lengths, self.dtype = name, rows, ptrs, lengths, dtype
        self.index = None

    def __len__(self) -> int:
        return len(self.lengths)

    def entry_ptrs(
        self, rows: np.ndarray | None, starts: np.ndarray | None, lens: np.ndarray, nt: int
    ) -> np.ndarray:
        # (the rows are held, unresizable, by this object; their lengths were read with them)
        p = self.ptrs if rows is None else self.ptrs[rows]
        if starts is not None:
            p = p + starts.astype(np.uintp) * np.uintp(self.dtype.itemsize)
        return p

    def row(self, i: int) -> np.ndarray:
        return self.rows[i]

    def value_range(self) -> tuple[int, int] | None:
        parts = [r for r in self.rows if len(r)]
        if not parts:
            return None
        return min(int(r.min()) for r in parts), max(int(r.max()) for r in parts)


Rows = Ragged | ArrayRows  # what the kernels read a ragged column from


def _check_value_dtype(name: str, dtype: np.dtype, integer: bool) -> np.dtype:
    """The dtype the kernels read the values as: native byte order (other orders are
    converted by _native, a copy)."""
    dtype = np.dtype(dtype)
    ok = dtype.kind in "iu" or (not integer and dtype.kind == "f")
    if not ok or dtype.itemsize > 8:
        want = "integers" if integer else "numbers (integers or floats)"
        raise InvalidTypeError(f"{name}: expected rows of {want}, got values of dtype {dtype}")
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def _native(a: np.ndarray) -> np.ndarray:
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return np.ascontiguousarray(a)


def _from_arrow(data: pa.Array | pa.ChunkedArray, name: str, integer: bool) -> Ragged:
    if pa.types.is_fixed_size_list(data.type):  # (rows of one length: HF's Sequence(length=N))
        data = (pa.chunked_array([arrow.fixed_as_list(c) for c in data.chunks])
                if isinstance(data, pa.ChunkedArray) else arrow.fixed_as_list(data))
    t = data.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not arrow.is_raw_value_type(
        t.value_type
    ):
        raise InvalidTypeError(
            f"{name}: expected an Arrow list or large_list of numbers, got an Arrow array of type "
            f"{t}"
        )
    dtype = _check_value_dtype(name, arrow.numpy_dtype(t.value_type), integer)
    if isinstance(data, pa.ChunkedArray):
        arrays = [c for c in data.chunks if len(c)]
    else:
        arrays = [data]
    chunks = []
    base = 0
    for arr in arrays:
        values, offsets = arrow.list_view(arr, name, base)
        chunks.append((values, offsets))
        base += len(arr)
    return Ragged(name, chunks, dtype)


def lists_to_values(rows: list[Any]) -> tuple[Any, ...] | None:
    """A list of lists of Python ints in one C pass (~2 ns a token against np.fromiter's ~14):
    ``(int64 values, int64 lengths)``, or ``(what, row, position, value)`` naming the first item
    it does not take (the caller then takes its general path), or None without the extension.
    OverflowError for an int beyond int64."""
    ext = backend.pack_ext
    return None if ext is None else ext.lists_to_values(rows)


def _from_rows(data: list | tuple | np.ndarray, name: str, integer: bool) -> Rows:
    n = len(data)
    if n and type(data[0]) is np.ndarray:
        # fast path (a collator's micro-batch): 1-D contiguous arrays of one native dtype, in place
        dt0 = data[0].dtype
        if dt0.kind in "iu" or (not integer and dt0.kind == "f"):
            from fastaxo._core.backend import pack_ext

            if pack_ext is not None:
                # a snapshot: the kernels read these rows with the GIL released, and the
                # caller's list may be changed meanwhile by another thread
                held = tuple(data)
                got = pack_ext.row_ptrs(list(held), dt0)
                if got is not None:
                    return ArrayRows(name, held, got[0], got[1], dt0)
    if n and all(isinstance(r, np.ndarray) for r in data):
        bad = next((i for i, r in enumerate(data) if r.ndim != 1), None)
        if bad is not None:
            raise InvalidInputError(
                f"{name} row {bad}: expected a 1-D array, got {data[bad].ndim} dimensions"
            )
        # an empty row's dtype says nothing (np.array([]) is float64): type from non-empty rows
        dtypes = {r.dtype for r in data if len(r)} or {
            data[0].dtype if data[0].dtype.kind in "iu" else np.dtype(np.int64)
        }
        dtype = np.result_type(*dtypes)
        if dtype.kind == "f" and all(d.kind in "iu" for d in dtypes):
            # signed rows mixed with uint64 ones promote to float64 in NumPy: int64 when the
            # values fit
            big = next((i for i, r in enumerate(data)
                        if r.dtype.kind == "u" and len(r) and int(r.max()) > 2**63 - 1), None)
            if big is not None:
                raise InvalidInputError(
                    f"{name} row {big}: a uint64 token id ({int(data[big].max())}) does not fit "
                    "in int64, and other rows are signed"
                )
            dtype = np.dtype(np.int64)
        _check_value_dtype(name, dtype, integer)
        lengths = np.fromiter((len(r) for r in data), dtype=np.int64, count=n)
        values = np.concatenate([r for r in data if len(r)] or [np.zeros(0, dtype)], dtype=dtype)
        values = _native(values)
    else:
        try:
            got = lists_to_values(data) if type(data) is list else None
        except OverflowError:
            raise InvalidInputError(f"{name}: a token id does not fit in int64") from None
        if got is not None:
            if len(got) == 2:
                values, lengths = got
                offsets = np.zeros(n + 1, dtype=np.int64)
                np.cumsum(lengths, out=offsets[1:])
                return Ragged(name, [(values, offsets)], values.dtype, lengths=lengths)
            what, i, j, value = got
            if what == "type" and isinstance(value, (float, np.floating)) and integer:
                raise InvalidTypeError(
                    f"{name}: expected integer token ids, got a {type(value).__name__} "
                    f"({value!r:.40}) "
                    f"at row {i}, position {j}"
                )
            if what == "type" and not isinstance(value, (np.integer, float, np.floating)):
                raise InvalidTypeError(
                    f"{name} row {i}, position {j}: expected an int token id, got "
                    f"{type(value).__name__} {value!r:.40}"
                )
            # other shapes (NumPy scalars, rows that are arrays, floats for float columns):
            # general path
        rows = []
        for i, r in enumerate(data):
            if isinstance(r, (str, bytes)) or not hasattr(r, "__len__"):
                raise InvalidTypeError(
                    f"{name} row {i}: expected a sequence of token ids, got {type(r).__name__}"
                )
            rows.append(r)
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
        total = int(lengths.sum()) if n else 0
        try:
            values = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=total)
        except (TypeError, ValueError, OverflowError) as exc:
            if integer:
                _refuse_value(name, rows)
                raise InvalidTypeError(
                    f"{name}: expected rows of integer token ids ({exc})"
                ) from None
            values = np.fromiter(chain.from_iterable(rows), dtype=np.float64, count=total)
        if integer and total:
            _refuse_value(name, rows)  # np.fromiter(int64) silently truncates floats
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return Ragged(name, [(values, offsets)], values.dtype, lengths=lengths)


def _refuse_value(name: str, rows: list[Any]) -> None:
    """Raise for the first value of ``rows`` that is not an int64 token id, with the message
    the extension's conversion (lists_to_values) gives; return when every value is one."""
    for i, r in enumerate(rows):
        for j, x in enumerate(r):
            if isinstance(x, (float, np.floating)):
                raise InvalidTypeError(
                    f"{name}: expected integer token ids, got a {type(x).__name__} "
                    f"({x!r:.40}) at row {i}, position {j}")
            if not isinstance(x, (int, np.integer)):
                raise InvalidTypeError(
                    f"{name} row {i}, position {j}: expected an int token id, got "
                    f"{type(x).__name__} {x!r:.40}")
            if isinstance(x, int) and not -2**63 <= x < 2**63:
                raise InvalidInputError(f"{name}: a token id does not fit in int64")


def as_ragged(data: Any, name: str, *, integer: bool = True) -> Rows:
    """Coerce one ragged column (see the module docstring for the accepted forms)."""
    if isinstance(data, (Ragged, ArrayRows)):
        return data
    if isinstance(data, (pa.Array, pa.ChunkedArray)):
        return _from_arrow(data, name, integer)
    if isinstance(data, tuple) and len(data) == 2 and all(isinstance(a, np.ndarray) for a in data):
        values, offsets = data
        if values.ndim != 1 or offsets.ndim != 1:
            raise InvalidInputError(
                f"{name}: a (values, offsets) pair must hold two 1-D arrays, got {values.ndim}-D "
                f"and {offsets.ndim}-D"
            )
        if offsets.dtype.kind not in "iu" or len(offsets) < 1:
            raise InvalidInputError(
                f"{name}: offsets must be a non-empty integer array (n+1 entries), got dtype "
                f"{offsets.dtype} "
                f"with {len(offsets)} entries"
            )
        dtype = _check_value_dtype(name, values.dtype, integer)
        if offsets.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            if (
                offsets.dtype.kind == "u"
                and len(offsets)
                and offsets.max() > np.iinfo(np.int64).max
            ):
                raise InvalidInputError(f"{name}: offsets exceed int64")
            offsets = offsets.astype(np.int64)
        return Ragged(name, [(_native(values), offsets)], dtype)  # (offsets: copied there)
    if isinstance(data, np.ndarray):
        if data.ndim == 2 and data.dtype.kind in "iuf":
            dtype = _check_value_dtype(name, data.dtype, integer)
            n, w = data.shape
            offsets = np.arange(n + 1, dtype=np.int64) * w
            return Ragged(name, [(_native(data).reshape(-1), offsets)], dtype,
                          lengths=np.full(n, w, np.int64))
        if data.ndim == 1 and data.dtype == object:
            return _from_rows(list(data), name, integer)
        raise InvalidInputError(
            f"{name}: expected ragged rows; a NumPy array must be 2-D (rectangular rows) or 1-D of "
            f"dtype object (one array per row), got {data.ndim}-D of dtype {data.dtype}"
        )
    if isinstance(data, (list, tuple)):
        return _from_rows(data, name, integer)
    raise InvalidTypeError(
        f"{name}: expected a pyarrow ListArray/LargeListArray/ChunkedArray, a (values, offsets) "
        "tuple of "
        f"NumPy arrays, a list of NumPy arrays or a list of lists; got {type(data).__module__}."
        f"{type(data).__qualname__}" + mistake_hint(data)
    )


def is_hf_dataset(data: Any) -> bool:
    mod = type(data).__module__ or ""
    return (
        mod.startswith("datasets.") and hasattr(data, "with_format") and hasattr(data, "_indices")
    )


def is_table_like(data: Any) -> bool:
    return isinstance(data, (pa.Table, pa.RecordBatch, Mapping)) or is_hf_dataset(data)


def column_names(data: Any) -> list[str]:
    if isinstance(data, (pa.Table, pa.RecordBatch)) or is_hf_dataset(data):
        return list(data.column_names)
    return list(data.keys())


def get_column(data: Any, name: str, what: str, *, integer: bool = True) -> Rows:
    """Column ``name`` of a Table / RecordBatch / mapping / datasets.Dataset as a Ragged."""
    hint = mistake_hint(data)  # a DatasetDict is a Mapping of splits, not of columns
    if hint:
        raise InvalidTypeError(f"{what}: expected a table of columns{hint}")
    names = column_names(data)
    if name not in names:
        raise ColumnNotFoundError(f"{what}: no column {name!r}; the columns are {names}")
    if is_hf_dataset(data):
        table = data.data.table if hasattr(data.data, "table") else data.data
        col = table.column(name)
        index = None
        if data._indices is not None:
            idx = data._indices.column(0)
            index = (
                np.concatenate([arrow.fixed_view(c) for c in idx.chunks])
                if idx.num_chunks
                else _EMPTY_I64
            )
        r = _from_arrow(col, name, integer)
        if index is not None:
            r = Ragged(name, r.chunks, r.dtype, index=index, lengths=r.lengths)  # (checked)
        return r
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return _from_arrow(data.column(name), name, integer)
    return as_ragged(data[name], name, integer=integer)


def check_aligned(ref: Rows, other: Rows) -> None:
    """Per-token columns must have the same length as ``ref`` row by row."""
    if len(other) != len(ref):
        raise InvalidInputError(f"{other.name} has {len(other)} rows; {ref.name} has {len(ref)}")
    diff = np.flatnonzero(other.lengths != ref.lengths)
    if len(diff):
        i = int(diff[0])
        raise InvalidInputError(
            f"{other.name} row {i} has {int(other.lengths[i])} values; {ref.name} row {i} has "
            f"{int(ref.lengths[i])} (per-token columns must match row by row)"
        )
