"""Packed rows: the bins' sequences materialised side by side (:func:`pack`, :func:`iter_pack`,
:class:`Packed`, :class:`PackIterator`), every token copied once, in parallel over bins."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import backend
from fastaxo._core.arrow import list_array
from fastaxo._core.checks import (
    choice,
    fill_value,
    int_arg,
    integer,
    offsets_problem,
    positive_int,
)
from fastaxo._core.choices import ATTENTION
from fastaxo._core.outputs import ArrayMap, check_fits, check_output_bytes, out_dtype
from fastaxo._core.ragged import (
    Rows,
    as_ragged,
    check_aligned,
    column_names,
    get_column,
    is_table_like,
)
from fastaxo._core.threads import resolve_num_threads
from fastaxo._reference import packing as reference
from fastaxo.errors import InvalidInputError, InvalidTypeError
from fastaxo.packing.bins import BFD_MAX_CAPACITY, OVERFLOW_MODES, STRATEGIES, Bins, assign_bins

__all__ = ["ATTENTION", "PackIterator", "Packed", "PackedRows", "iter_pack", "pack"]


class Packed(ArrayMap):
    """Packed rows: a mapping of NumPy arrays plus ``bins`` and ``stats``.

    Padded layout: ``input_ids``, ``labels`` (when given), ``position_ids`` and
    ``attention_mask`` are ``[n_bins, width]``; ``cu_seqlens`` holds sequence boundaries over
    the flattened rows (each non-empty pad tail counts as one segment). Flat layout: 1-D arrays
    of the packed tokens without padding, ``cu_seqlens`` per sequence and ``bin_offsets``
    (token offset of each bin).
    """

    def __init__(self, arrays: dict[str, np.ndarray], bins: Bins, layout: str):
        self._arrays = arrays
        self.bins = bins
        self.stats = bins.stats
        self.layout = layout

    def __repr__(self) -> str:
        return f"<fastaxo.Packed ({self.layout}) {self.shapes()}>"

    def _row_columns(self) -> list[str]:
        own = [k for k in _PACK_COLUMNS[:4] if k in self._arrays]
        return own + [k for k in self._arrays if k not in _PACK_COLUMNS]

    def to_arrow(self) -> pa.Table:
        """One row per bin, a list column per packed column (``cu_seqlens`` and
        ``bin_offsets`` are the boundaries, not columns). The values are the arrays' own
        memory (zero-copy; the table keeps them alive)."""
        ids = self._arrays["input_ids"]
        if self.layout == "flat":
            lengths = np.diff(self._arrays["bin_offsets"])
        else:  # every packed column is [n_bins, width]
            lengths = np.full(len(self.bins), ids.shape[1], np.int64)
        return pa.table({k: list_array(np.ascontiguousarray(self._arrays[k]).reshape(-1), lengths)
                         for k in self._row_columns()})

    def to_dataset(self) -> Any:
        """The packed rows as a Hugging Face ``datasets.Dataset`` (one row per bin), on the
        Arrow table of :meth:`to_arrow` (zero-copy; nothing written to disk)."""
        try:
            import datasets
            from datasets.fingerprint import generate_random_fingerprint
        except ImportError as e:
            raise ImportError("Packed.to_dataset needs Hugging Face datasets (pip install "
                              f"datasets): {e}") from None

        # a random fingerprint: the default one would hash every value
        return datasets.Dataset(self.to_arrow(), fingerprint=generate_random_fingerprint())

    def to_torch_dataset(self) -> PackedRows:
        """A map-style dataset of the packed rows for ``torch.utils.data.DataLoader``: item
        ``i`` is bin ``i`` as a dict of torch tensors sharing this object's memory."""
        return PackedRows(self, torch=True)


#: the columns pack makes itself (the first four per token, then the boundaries)
_PACK_COLUMNS = ("input_ids", "labels", "position_ids", "attention_mask", "cu_seqlens",
                 "bin_offsets")


class PackedRows:
    """The bins of a :class:`Packed` as a sequence of rows (``len``, ``[i]``): what a
    ``torch.utils.data.DataLoader`` takes as a map-style dataset. A row is a dict of 1-D
    views (NumPy arrays, or torch tensors with ``torch=True``)."""

    def __init__(self, packed: Packed, *, torch: bool = False):
        self._cols = {k: packed[k] for k in packed._row_columns()}
        self._flat = packed.layout == "flat"
        self._bounds = packed["bin_offsets"] if self._flat else None
        self._n = len(packed.bins)
        self._torch = bool(torch)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = integer(i, "index")  # (any size: out of range is an IndexError)
        if not -self._n <= i < self._n:
            raise IndexError(f"index {i} is out of range for {self._n:,} packed rows")
        i %= self._n
        if self._flat:
            assert self._bounds is not None
            a, z = int(self._bounds[i]), int(self._bounds[i + 1])
            row = {k: v[a:z] for k, v in self._cols.items()}
        else:
            row = {k: v[i] for k, v in self._cols.items()}
        if self._torch:
            import torch

            return {k: torch.from_numpy(v) for k, v in row.items()}
        return row


def _resolve_columns(
    data: Any, labels: Any, columns: Any
) -> tuple[Rows, Rows | None, dict[str, Rows]]:
    """input_ids, labels and extra per-token columns, all aligned row by row."""
    extra: dict[str, Rows] = {}
    if is_table_like(data):
        ids = get_column(data, "input_ids", "data")
        if labels is None and "labels" in column_names(data):
            labels = get_column(data, "labels", "data")
        if columns is not None:
            names = [columns] if isinstance(columns, str) else columns
            if isinstance(names, Mapping):
                extra = {k: as_ragged(v, k, integer=False) for k, v in names.items()}
            else:
                extra = {k: get_column(data, k, "columns", integer=False) for k in names}
    else:
        ids = as_ragged(data, "input_ids")
        if columns is not None:
            if not isinstance(columns, Mapping):
                raise InvalidTypeError(
                    "columns: with ragged input_ids (not a table) pass a mapping of name -> ragged "
                    "rows"
                )
            extra = {k: as_ragged(v, k, integer=False) for k, v in columns.items()}
    lab = None
    if labels is not None and labels is not False:
        lab = as_ragged(labels, "labels")
        check_aligned(ids, lab)
    for name, col in extra.items():
        if name in _PACK_COLUMNS:
            raise InvalidInputError(
                f"columns: {name!r} is produced by pack itself; pass it as data/labels"
            )
        check_aligned(ids, col)
    return ids, lab, extra


def _check_bins_arrays(bins: Bins) -> int:
    """The number of entries of ``bins``, after checking its arrays: 1-D integer arrays, one
    length (and start) per index, n_bins + 1 offsets."""
    arrays = {"indices": bins.indices, "offsets": bins.offsets, "lengths": bins.lengths}
    if bins.has_starts:
        arrays["starts"] = bins.starts
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype.kind not in "iu":
            got = f"{a.ndim}-D {a.dtype}" if isinstance(a, np.ndarray) else type(a).__name__
            raise InvalidTypeError(f"bins.{name} must be a 1-D integer NumPy array, got {got}")
    n = len(bins.indices)
    for name in ("lengths", "starts"):
        if name in arrays and len(arrays[name]) != n:
            raise InvalidInputError(
                f"bins.{name} has {len(arrays[name]):,} entries; bins.indices has {n:,}")
    if len(bins.offsets) < 1:
        raise InvalidInputError("bins.offsets is empty; it holds n_bins + 1 boundaries")
    return n


def _own_bins(bins: Bins) -> Bins:
    """A copy of ``bins`` whose arrays nobody else holds (C-contiguous int64)."""
    def own(a: np.ndarray) -> np.ndarray:
        return np.array(a, dtype=np.int64, order="C", copy=True)

    return Bins(own(bins.indices), own(bins.offsets), own(bins.lengths),
                None if bins._starts is None else own(bins._starts), bins.max_length, bins.stats)


def _check_bins(bins: Any, ids: Rows, width: int, layout: str) -> Bins:
    """A checked copy of the caller's ``bins``: copied first, so that what was checked is what
    the kernels read, whatever the caller does with its arrays meanwhile."""
    if not isinstance(bins, Bins):
        raise InvalidTypeError(
            f"bins must be a fastaxo.Bins (from pack_bins), got {type(bins).__name__}"
        )
    _check_bins_arrays(bins)
    bins = _own_bins(bins)  # (a uint64 past int64 turns negative here, refused below)
    n_entries = len(bins.indices)
    bad_off = offsets_problem(bins.offsets, n_entries)
    if bad_off is not None or int(bins.offsets[0]) != 0 or int(bins.offsets[-1]) != n_entries:
        why = bad_off[1] if bad_off is not None else (
            f"they run from {int(bins.offsets[0])} to {int(bins.offsets[-1])}, not from 0 to the "
            f"{n_entries:,} entries")
        raise InvalidInputError(f"bins.offsets are corrupt: {why}")
    if len(bins.indices):
        lo, hi = int(bins.indices.min()), int(bins.indices.max())
        if lo < 0 or hi >= len(ids):
            raise InvalidInputError(
                f"bins refer to row {hi if hi >= len(ids) else lo}; the data has {len(ids):,} rows"
            )
        row_len = ids.lengths[bins.indices]
        starts, lens = bins.starts, bins.lengths
        # compared, never added: starts + lengths can wrap
        bad = np.flatnonzero((lens < 0) | (starts < 0) | (starts > row_len)
                             | (lens > row_len - np.minimum(starts, row_len)))
        if len(bad):
            e = int(bad[0])
            raise InvalidInputError(
                f"bins entry {e} takes tokens {int(starts[e])}:{int(starts[e]) + int(lens[e])} "
                f"of row {int(bins.indices[e])}, "
                f"which has {int(row_len[e])} tokens (were the bins made for other data?)"
            )
    if layout == "padded" and len(bins):
        used = bins.token_counts()
        over = np.flatnonzero(used > width)
        if len(over):
            b = int(over[0])
            raise InvalidInputError(
                f"bin {b} holds {int(used[b]):,} tokens; packed rows are {width:,} wide (bins made "
                "with "
                "overflow='isolate' or a larger capacity cannot be materialised)"
            )
    return bins


def _buffer(
    pool: dict[str, np.ndarray] | None, name: str, shape: tuple[int, ...], dtype: np.dtype
) -> np.ndarray:
    """A fresh array, or a view of the pooled one when it is big enough (no first-touch cost)."""
    size = math.prod(shape)
    if pool is not None:
        buf = pool.get(name)
        if buf is None or buf.dtype != dtype or buf.size < size:
            buf = pool[name] = np.empty(size, dtype)
        return buf[:size].reshape(shape)
    return np.empty(shape, dtype)


@dataclass(frozen=True)
class _PackOptions:
    """pack's and iter_pack's options, checked once (:func:`_pack_options`)."""

    max_length: int
    width: int  # max_length rounded up to pad_to_multiple_of
    strategy: str
    layout: str  # "padded" or "flat"
    attention: str | None  # None, "segments" or "ones"
    overflow: str
    dt: np.dtype
    pad_id: int
    label_pad_id: int
    max_rows: int | None
    group_size: int | None
    nt: int
    position_ids: bool = True
    pad_values: Mapping[str, Any] = field(default_factory=dict)  # per extra column


def _materialise(ids: Rows, lab: Rows | None, extra: dict[str, Rows], bins: Bins,
                 o: _PackOptions, pool: dict[str, np.ndarray] | None = None) -> Packed:
    # the output's size in Python ints, before any int64 arithmetic on it (no wrap)
    # (max(.., 1): NumPy refuses a (0, huge) shape as well)
    elems = max(len(bins), 1) * int(o.width) if o.layout == "padded" else int(bins.lengths.sum())
    check_output_bytes(elems * max(o.dt.itemsize, 8),
                       f"the packed output ({elems:,} tokens per column: {len(bins):,} bins"
                       + (f" x {int(o.width):,})" if o.layout == "padded" else ")"))
    if backend.pack_ext is None:
        return _materialise_reference(ids, lab, extra, bins, o, pool)
    ext = backend.pack_ext
    nb = len(bins)
    offsets = np.ascontiguousarray(bins.offsets, np.int64)
    lens = np.ascontiguousarray(bins.lengths, np.int64)
    starts = bins._starts
    code = ext.TYPE_CODES[o.dt]
    if o.layout == "padded":
        shape: tuple[int, ...] = (nb, o.width)
        flat_base = None
        w = o.width
    else:
        per_bin = bins.token_counts()
        flat_base = np.zeros(nb + 1, np.int64)
        np.cumsum(per_bin, out=flat_base[1:])
        shape = (int(flat_base[-1]),)
        w = 0

    def column(name: str, col: Rows, out_dt: np.dtype, pad: Any) -> np.ndarray:
        arr = _buffer(pool, name, shape, out_dt)
        src = col.entry_ptrs(bins.indices, starts, lens, o.nt)
        ext.fill_bins(arr.reshape(-1).view(np.uint8), ext.TYPE_CODES[out_dt], w, flat_base,
                      offsets, src, lens, ext.TYPE_CODES[col.dtype], ext.KIND_COPY,
                      np.array(pad, out_dt).tobytes(), o.nt)
        return arr

    def generated(name: str, kind: int) -> np.ndarray:
        arr = _buffer(pool, name, shape, o.dt)
        ext.fill_bins(arr.reshape(-1).view(np.uint8), code, w, flat_base, offsets, None, lens,
                      code, kind, b"", o.nt)
        return arr

    out: dict[str, np.ndarray] = {"input_ids": column("input_ids", ids, o.dt, o.pad_id)}
    if lab is not None:
        out["labels"] = column("labels", lab, o.dt, o.label_pad_id)
    if o.position_ids:
        out["position_ids"] = generated("position_ids", ext.KIND_POS)
    if o.attention is not None:
        out["attention_mask"] = generated(
            "attention_mask", ext.KIND_SEG if o.attention == "segments" else ext.KIND_ONE)
    for name, col in extra.items():
        out[name] = column(name, col, col.dtype, o.pad_values.get(name, 0))
    if o.layout == "padded":
        total = nb * o.width
        cu_dt = np.int32 if total <= np.iinfo(np.int32).max else np.int64
        out["cu_seqlens"] = ext.padded_cu_seqlens(offsets, lens, o.width, cu_dt)
    else:
        cu = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=cu[1:])
        cu_dt = np.int32 if cu[-1] <= np.iinfo(np.int32).max else np.int64
        out["cu_seqlens"] = cu.astype(cu_dt, copy=False)
        assert flat_base is not None  # the flat layout's token offsets of the bins
        out["bin_offsets"] = flat_base
    return Packed(out, bins, o.layout)


def _materialise_reference(ids: Rows, lab: Rows | None, extra: dict[str, Rows], bins: Bins,
                           o: _PackOptions, pool: dict[str, np.ndarray] | None) -> Packed:
    """:func:`_materialise` without the extension: the reference's arrays (in ``pool``'s
    buffers when given)."""
    arrays = reference.materialise(
        ids, lab, extra, bins, width=o.width, layout=o.layout, attention=o.attention,
        position_ids=o.position_ids, pad_id=o.pad_id, label_pad_id=o.label_pad_id,
        pad_values=o.pad_values, dt=o.dt)
    if pool is not None:
        for name, arr in list(arrays.items()):
            if name not in ("cu_seqlens", "bin_offsets"):
                buf = _buffer(pool, name, arr.shape, arr.dtype)
                buf[...] = arr
                arrays[name] = buf
    return Packed(arrays, bins, o.layout)


def _pack_options(*, max_length: Any, strategy: str, layout: str, attention: Any, overflow: str,
                  dtype: Any, pad_id: Any, label_pad_id: Any, pad_to_multiple_of: Any,
                  max_rows_per_bin: Any, group_size: Any, num_threads: Any,
                  position_ids: Any) -> _PackOptions:
    max_length = positive_int(max_length, "max_length")
    mult = positive_int(pad_to_multiple_of, "pad_to_multiple_of", allow_none=True)
    opts = _PackOptions(
        max_length=max_length,
        width=max_length if mult is None else -(-max_length // mult) * mult,
        strategy=choice(strategy, "strategy", STRATEGIES),
        layout=choice(layout, "layout", ("padded", "flat")),
        attention=None if attention is None or attention == "none"
        else choice(attention, "attention", ATTENTION),
        overflow=choice(overflow, "overflow", OVERFLOW_MODES[:4]) if overflow != "isolate"
        else "isolate",
        dt=out_dtype(dtype),
        pad_id=int_arg(pad_id, "pad_id"),
        label_pad_id=int_arg(label_pad_id, "label_pad_id"),
        max_rows=positive_int(max_rows_per_bin, "max_rows_per_bin", allow_none=True),
        group_size=positive_int(group_size, "group_size", allow_none=True),
        nt=resolve_num_threads(num_threads),
        position_ids=bool(position_ids),
    )
    if opts.overflow == "isolate":
        raise InvalidInputError(
            "overflow='isolate' makes bins longer than max_length, which packed rows cannot hold; "
            "use 'error', 'truncate', 'split' or 'drop' with pack (isolate is for pack_bins)"
        )
    if opts.strategy == "bfd" and max_length > BFD_MAX_CAPACITY:
        raise InvalidInputError(
            f"max_length is {max_length:,}; strategy 'bfd' supports up to {BFD_MAX_CAPACITY:,}"
        )
    return opts


def _prepare(data: Any, labels: Any, columns: Any, pad_values: Any, bins: Any, o: _PackOptions
             ) -> tuple[Rows, Rows | None, dict[str, Rows], Bins, _PackOptions]:
    """The columns, the bins (assigned, or ``bins`` checked) and the options with the extra
    columns' pad values."""
    ids, lab, extra = _resolve_columns(data, labels, columns)
    pv = _pad_values(pad_values, extra)
    check_fits(ids, o.dt, o.pad_id, "pad_id")
    if lab is not None:
        check_fits(lab, o.dt, o.label_pad_id, "label_pad_id")
    if bins is None:
        bins = assign_bins(ids.lengths, o.max_length, o.strategy, o.max_rows, o.group_size,
                           o.overflow, o.nt, "input_ids")
    else:
        bins = _check_bins(bins, ids, o.width, o.layout)
    return ids, lab, extra, bins, replace(o, pad_values=pv)


def _pad_values(pad_values: Any, extra: dict[str, Rows]) -> dict[str, Any]:
    """``pad_values`` checked: one value per extra column that its dtype holds."""
    if pad_values is None:
        return {}
    if not isinstance(pad_values, Mapping):
        raise InvalidTypeError(f"pad_values must be a mapping of column name -> pad value, got "
                               f"{type(pad_values).__name__}")
    unknown = [k for k in pad_values if k not in extra]
    if unknown:
        raise InvalidInputError(
            f"pad_values: {unknown[0]!r} is not a column packed through columns= "
            f"({list(extra)}); input_ids and labels pad with pad_id and label_pad_id")
    return {k: fill_value(v, f"pad_values[{k!r}]", extra[k].dtype) for k, v in pad_values.items()}


def pack(
    data: Any,
    max_length: int,
    *,
    labels: Any = None,
    columns: Any = None,
    pad_values: Mapping[str, Any] | None = None,
    strategy: str = "bfd",
    layout: str = "padded",
    attention: str | None = "segments",
    position_ids: bool = True,
    pad_id: int = 0,
    label_pad_id: int = -100,
    dtype: Any = np.int64,
    overflow: str = "error",
    max_rows_per_bin: int | None = None,
    group_size: int | None = None,
    pad_to_multiple_of: int | None = None,
    bins: Bins | None = None,
    num_threads: int | None = None,
) -> Packed:
    """Pack sequences into rows of ``max_length`` tokens: bin assignment plus the packed arrays.

    Parameters
    ----------
    data : ragged rows or a table
        ``input_ids`` as a pyarrow ListArray / LargeListArray / ChunkedArray (tokens read in
        place, slices respected; the offsets, 8 bytes a row, are copied and checked), a
        ``(values, offsets)`` tuple of NumPy arrays, a list of NumPy arrays, a
        2-D array, or a list of lists (converted once: the slow path). Or a pyarrow Table /
        RecordBatch, a ``datasets.Dataset`` or a mapping with an ``input_ids`` column (and
        ``labels``, used when present).
    max_length : int
        Tokens per packed row (the bin capacity).
    labels : ragged rows, optional
        Per-token labels aligned with ``input_ids`` (same length row by row); ``False`` ignores
        a table's ``labels`` column.
    columns : list of str or mapping, optional
        More per-token columns to pack alongside: names of table columns, or a mapping of
        name -> ragged rows. They keep their dtype and pad with ``pad_values[name]`` (0).
    strategy, max_rows_per_bin, group_size, overflow
        As in :func:`pack_bins` (``overflow='isolate'`` is not available here).
    layout : {"padded", "flat"}
        ``"padded"``: ``[n_bins, width]`` arrays (``width`` = ``max_length`` rounded up to
        ``pad_to_multiple_of``). ``"flat"``: 1-D arrays with no padding, plus ``cu_seqlens``
        and ``bin_offsets``, for variable-length (flash-attention varlen) kernels.
    attention : {"segments", "ones", None}
        ``attention_mask`` as segment ids 1..k per bin with 0 for padding (Axolotl's V2
        collator layout), as 1 for tokens and 0 for padding, or left out (None or "none").
        Either layout is for Axolotl's attention; a stock transformers model needs
        :class:`fastaxo.integrations.transformers.PackedCollator` to keep sequences apart.
    position_ids : bool
        Emit ``position_ids``, restarting at 0 for every sequence; the pad tail continues
        0, 1, 2, ... as Axolotl's collator does.
    pad_id, label_pad_id : int
        Fill of ``input_ids`` / ``labels`` in the pad tail.
    dtype : np.int32 or np.int64
        Output dtype of the token and generated columns (int64 default, like torch).
    bins : Bins, optional
        A previous assignment (or a slice of one) to materialise instead of assigning anew.
    num_threads : int, optional
        Threads for materialisation and parallel groups.

    Returns
    -------
    Packed
        A mapping of NumPy arrays with ``.bins`` and ``.stats``.

    Examples
    --------
    >>> p = fastaxo.pack([[1, 2, 3], [4, 5], [6]], max_length=4)
    >>> p["input_ids"].tolist()
    [[1, 2, 3, 6], [4, 5, 0, 0]]
    >>> p["attention_mask"].tolist()  # segment ids 1..k per row
    [[1, 1, 1, 2], [1, 1, 0, 0]]
    """
    o = _pack_options(max_length=max_length, strategy=strategy, layout=layout,
                      attention=attention, overflow=overflow, dtype=dtype, pad_id=pad_id,
                      label_pad_id=label_pad_id, pad_to_multiple_of=pad_to_multiple_of,
                      max_rows_per_bin=max_rows_per_bin, group_size=group_size,
                      num_threads=num_threads, position_ids=position_ids)
    ids, lab, extra, bins, o = _prepare(data, labels, columns, pad_values, bins, o)
    return _materialise(ids, lab, extra, bins, o)


class PackIterator:
    """Packed rows in chunks of bins (``iter_pack``): iterate for :class:`Packed` chunks;
    ``bins`` and ``stats`` describe the whole assignment, known before the first chunk."""

    def __init__(self, gen_args: tuple, bins: Bins, chunk_bins: int, reuse_buffers: bool):
        self._args = gen_args
        self.bins = bins
        # the chunks are made from a copy nobody else holds: between two chunks the caller may
        # change anything it can reach, ``bins`` included
        self._bins = _own_bins(bins)
        self.stats = bins.stats
        self.chunk_bins = chunk_bins
        self.reuse_buffers = reuse_buffers

    def __len__(self) -> int:
        return (len(self._bins) + self.chunk_bins - 1) // self.chunk_bins

    def __iter__(self) -> Iterator[Packed]:
        ids, lab, extra, o = self._args
        pool: dict[str, np.ndarray] | None = {} if self.reuse_buffers else None
        for chunk in self._bins.chunks(self.chunk_bins):
            yield _materialise(ids, lab, extra, chunk, o, pool)


def iter_pack(
    data: Any,
    max_length: int,
    *,
    chunk_bins: int = 65536,
    labels: Any = None,
    columns: Any = None,
    pad_values: Mapping[str, Any] | None = None,
    strategy: str = "bfd",
    layout: str = "padded",
    attention: str | None = "segments",
    position_ids: bool = True,
    pad_id: int = 0,
    label_pad_id: int = -100,
    dtype: Any = np.int64,
    overflow: str = "error",
    max_rows_per_bin: int | None = None,
    group_size: int | None = None,
    pad_to_multiple_of: int | None = None,
    bins: Bins | None = None,
    reuse_buffers: bool = False,
    num_threads: int | None = None,
) -> PackIterator:
    """Like :func:`pack`, but materialises ``chunk_bins`` bins at a time: memory holds one
    chunk of output, whatever the dataset size. Assignment happens once, up front.

    With ``reuse_buffers=True`` every chunk is written into the same arrays (the previous
    chunk's arrays are overwritten: consume or copy each chunk before asking for the next).
    That saves the allocation and first touch of fresh memory per chunk, which on virtual
    machines costs more than the writing itself.

    Between chunks the caller may reuse or change its arrays: the offsets and ``bins`` the
    chunks are made from are copies taken at this call (``.bins`` included). Tokens are read
    in place when each chunk is made: tokens changed meanwhile are the tokens packed.

    Examples
    --------
    >>> chunks = fastaxo.iter_pack([[1, 2, 3], [4, 5], [6]], max_length=4, chunk_bins=1)
    >>> [c["input_ids"].tolist() for c in chunks]
    [[[1, 2, 3, 6]], [[4, 5, 0, 0]]]
    """
    chunk_bins = positive_int(chunk_bins, "chunk_bins")
    o = _pack_options(max_length=max_length, strategy=strategy, layout=layout,
                      attention=attention, overflow=overflow, dtype=dtype, pad_id=pad_id,
                      label_pad_id=label_pad_id, pad_to_multiple_of=pad_to_multiple_of,
                      max_rows_per_bin=max_rows_per_bin, group_size=group_size,
                      num_threads=num_threads, position_ids=position_ids)
    ids, lab, extra, bins, o = _prepare(data, labels, columns, pad_values, bins, o)
    return PackIterator((ids, lab, extra, o), bins, chunk_bins, bool(reuse_buffers))
