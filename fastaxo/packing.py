"""Sample packing: which sequences share a packed row (:func:`pack_bins`), and the packed rows
themselves (:func:`pack`, :func:`iter_pack`).

Sequences arrive as whole ragged arrays (Arrow list arrays, ``(values, offsets)`` NumPy pairs,
lists of arrays; lists of lists are converted once, the slow path) and leave as rectangular
NumPy arrays, zero-copy to torch with ``torch.from_numpy``. Bin assignment runs in C with the
GIL released (independent groups in parallel); materialisation copies every token exactly once,
in parallel over bins.

Losslessness: every token of every input row is in exactly one bin, in order within its
sequence, with its labels beside it. The only exceptions are the explicit ``overflow`` options
for sequences longer than the capacity, and each one is counted in :class:`PackStats`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fastaxo._core import backend
from fastaxo._core.checks import choice, int_arg, positive_int
from fastaxo._core.outputs import ArrayMap, check_fits, out_dtype
from fastaxo._core.ragged import (
    ArrayRows,
    Ragged,
    Rows,
    as_ragged,
    check_aligned,
    column_names,
    get_column,
    is_table_like,
)
from fastaxo._core.status import check_pack_status
from fastaxo._core.threads import resolve_num_threads
from fastaxo._reference import packing as reference
from fastaxo.errors import FastaxoError, InvalidInputError, InvalidTypeError, SequenceTooLongError

__all__ = ["pack_bins", "pack", "iter_pack", "Bins", "PackStats", "Packed", "PackIterator",
           "STRATEGIES", "OVERFLOW_MODES"]

STRATEGIES = ("bfd", "ffd", "ff", "nf")
OVERFLOW_MODES = ("error", "truncate", "split", "drop", "isolate")
BFD_MAX_CAPACITY = 1 << 26
_STRATEGY_CODES = {"bfd": 0, "ffd": 1, "ff": 2, "nf": 3}


@dataclass(frozen=True)
class PackStats:
    """What a bin assignment did. ``efficiency`` = tokens / (bins x capacity) (0 when there are
    no bins); no packing can use fewer than ``lower_bound`` = ceil(tokens / capacity) bins.
    Overflow counters count input rows longer than the capacity and what happened to them."""

    strategy: str
    capacity: int
    sequences: int
    entries: int
    bins: int
    tokens: int
    lower_bound: int
    efficiency: float
    overflow: str
    overlong: int = 0
    truncated: int = 0
    truncated_tokens: int = 0
    split: int = 0
    split_pieces: int = 0
    dropped: int = 0
    dropped_tokens: int = 0
    isolated: int = 0
    max_rows_per_bin: int | None = None
    group_size: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        s = (f"{self.sequences:,} sequences -> {self.bins:,} bins of {self.capacity:,} ({self.strategy}); "
             f"{self.tokens:,} tokens, efficiency {self.efficiency:.4%}, lower bound {self.lower_bound:,} bins")
        if self.overlong:
            s += (f"; {self.overlong:,} over-long rows ({self.overflow}: truncated {self.truncated:,} "
                  f"[-{self.truncated_tokens:,} tokens], split {self.split:,} into {self.split_pieces:,}, "
                  f"dropped {self.dropped:,} [-{self.dropped_tokens:,} tokens], isolated {self.isolated:,})")
        return s


class Bins:
    """Bins as ragged row indices: bin ``b`` holds entries ``offsets[b]:offsets[b+1]``; entry
    ``e`` is tokens ``starts[e] : starts[e] + lengths[e]`` of input row ``indices[e]``.

    ``starts`` is all zeros unless sequences were split; ``lengths`` equal the row lengths
    unless they were truncated. ``stats`` describes the whole assignment (None for a slice
    made with ``bins[a:b]`` or :meth:`chunks`).
    """

    __slots__ = ("indices", "offsets", "lengths", "_starts", "capacity", "stats")

    def __init__(self, indices: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                 starts: np.ndarray | None, capacity: int, stats: PackStats | None):
        self.indices, self.offsets, self.lengths, self._starts = indices, offsets, lengths, starts
        self.capacity, self.stats = capacity, stats

    @property
    def starts(self) -> np.ndarray:
        return np.zeros(len(self.indices), np.int64) if self._starts is None else self._starts

    @property
    def has_starts(self) -> bool:
        return self._starts is not None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            a, b, step = key.indices(len(self))
            if step != 1:
                raise InvalidInputError(f"bins[...]: only contiguous slices (step 1), got step {step}")
            b = max(a, b)
            lo, hi = int(self.offsets[a]), int(self.offsets[b])
            return Bins(self.indices[lo:hi], self.offsets[a : b + 1] - lo, self.lengths[lo:hi],
                        None if self._starts is None else self._starts[lo:hi], self.capacity, None)
        b = int(key)
        if b < 0:
            b += len(self)
        if not 0 <= b < len(self):
            raise IndexError(f"bin {key} out of range for {len(self)} bins")
        return self.indices[int(self.offsets[b]) : int(self.offsets[b + 1])]

    def __iter__(self) -> Iterator[np.ndarray]:
        for b in range(len(self)):
            yield self[b]

    def to_list(self) -> list[list[int]]:
        """Python lists of row indices per bin (Axolotl's ``pack_parallel`` format)."""
        flat = self.indices.tolist()
        offs = self.offsets.tolist()
        return [flat[offs[b] : offs[b + 1]] for b in range(len(self))]

    def token_counts(self) -> np.ndarray:
        """Tokens per bin (int64)."""
        cs = np.zeros(len(self.lengths) + 1, np.int64)
        np.cumsum(self.lengths, out=cs[1:])
        return cs[self.offsets[1:]] - cs[self.offsets[:-1]]

    def chunks(self, bins_per_chunk: int) -> Iterator[Bins]:
        """Consecutive slices of at most ``bins_per_chunk`` bins."""
        positive_int(bins_per_chunk, "bins_per_chunk")
        for a in range(0, len(self), bins_per_chunk):
            yield self[a : a + bins_per_chunk]

    def __repr__(self) -> str:
        return f"<fastaxo.Bins: {len(self):,} bins, {len(self.indices):,} entries, capacity {self.capacity:,}>"


def _lengths_of(lengths: Any) -> np.ndarray:
    """A 1-D int64 array of lengths, from lengths or from ragged rows."""
    if isinstance(lengths, (Ragged, ArrayRows)):
        return lengths.lengths
    if isinstance(lengths, np.ndarray) and lengths.ndim == 1 and lengths.dtype.kind in "iu":
        arr = lengths
    else:
        try:
            import pyarrow as pa

            if isinstance(lengths, (pa.Array, pa.ChunkedArray)) and pa.types.is_integer(lengths.type):
                if lengths.null_count:
                    raise InvalidInputError("lengths: contains nulls")
                chunks = lengths.chunks if isinstance(lengths, pa.ChunkedArray) else [lengths]
                from fastaxo._core.arrow import fixed_view

                arr = np.concatenate([fixed_view(c) for c in chunks]) if chunks else np.zeros(0, np.int64)
            elif _looks_ragged(lengths):
                return as_ragged(lengths, "lengths").lengths
            else:
                arr = np.asarray(lengths)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, FastaxoError):
                raise
            raise InvalidTypeError(f"lengths: expected a 1-D array of integer lengths, got {type(lengths).__name__}") from None
        if arr.ndim != 1 or (arr.dtype.kind not in "iu" and not (arr.size == 0)):
            raise InvalidTypeError(
                f"lengths: expected a 1-D array of integer lengths (or ragged rows), got "
                f"{arr.ndim}-D of dtype {arr.dtype}"
            )
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise InvalidInputError("lengths: values exceed int64")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size and arr.min() < 0:
        neg = np.flatnonzero(arr < 0)
        if len(neg):
            i = int(neg[0])
            raise InvalidInputError(f"lengths[{i}] is {int(arr[i])}; lengths must be >= 0")
    return arr


def _looks_ragged(x: Any) -> bool:
    import pyarrow as pa

    if isinstance(x, (pa.Array, pa.ChunkedArray)):
        return True
    if isinstance(x, tuple) and len(x) == 2 and all(isinstance(a, np.ndarray) for a in x):
        return True
    if isinstance(x, (list, tuple)) and x and not isinstance(x[0], (int, np.integer)):
        return True
    return isinstance(x, np.ndarray) and (x.ndim == 2 or x.dtype == object)


# ---------------------------------------------------------------- bin assignment
def _items(lengths: np.ndarray, capacity: int, overflow: str, what: str):
    """Items to pack from rows: (item_len, item_row or None, item_start or None, counters)."""
    n = len(lengths)
    over = lengths > capacity
    n_over = int(np.count_nonzero(over)) if n else 0
    c = {"overlong": n_over}
    if n_over == 0 or overflow == "isolate":
        c["isolated"] = n_over if overflow == "isolate" else 0
        return lengths, None, None, c
    first = int(np.flatnonzero(over)[0])
    if overflow == "error":
        raise SequenceTooLongError(
            f"{what} row {first} has {int(lengths[first]):,} tokens; the capacity (max_len) is {capacity:,}. "
            f"{n_over:,} row(s) are longer. Pass overflow='truncate', 'split' or 'drop' to handle them "
            "(each is counted in the stats), or filter them out first",
            first, int(lengths[first]), capacity,
        )
    excess = int((lengths[over] - capacity).sum())
    if overflow == "truncate":
        c.update(truncated=n_over, truncated_tokens=excess)
        return np.minimum(lengths, capacity), None, None, c
    if overflow == "drop":
        keep = np.flatnonzero(~over)
        c.update(dropped=n_over, dropped_tokens=int(lengths[over].sum()))
        return lengths[keep], keep, None, c
    # split: a row of L > capacity becomes ceil(L / capacity) pieces, in place
    pieces = np.where(over, -(-lengths // capacity), 1)
    rows = np.repeat(np.arange(n, dtype=np.int64), pieces)
    first_item = np.zeros(n, np.int64)
    np.cumsum(pieces[:-1], out=first_item[1:])
    j = np.arange(len(rows), dtype=np.int64) - first_item[rows]
    starts = j * capacity
    item_len = np.minimum(capacity, lengths[rows] - starts)
    c.update(split=n_over, split_pieces=int(pieces[over].sum()))
    return item_len, rows, starts, c


def _assign(item_len: np.ndarray, capacity: int, max_items: int, strategy: str, allow_overlong: bool,
            groups: np.ndarray, nt: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, bin offsets, entry lengths = item_len[order])."""
    ext = backend.pack_ext
    if ext is None:
        order, offsets = reference.assign_groups(item_len, capacity, max_items, strategy, allow_overlong, groups)
        return order, offsets, item_len[order]
    status, bad, order, offsets, entry_len = ext.assign(item_len, capacity, max_items, _STRATEGY_CODES[strategy],
                                                        allow_overlong, groups, nt)
    check_pack_status(ext, status, kernel="pack_bins", items=len(item_len), item=bad)
    return order, offsets, entry_len


def pack_bins(lengths: Any, capacity: int, *, strategy: str = "bfd", max_rows_per_bin: int | None = None,
              group_size: int | None = None, overflow: str = "error", num_threads: int | None = None,
              order: Any = None) -> Bins:
    """Assign sequences to bins of ``capacity`` tokens (bin assignment only).

    Parameters
    ----------
    lengths : array-like of int, or ragged rows
        Token count per sequence (1-D integers), or the sequences themselves (anything
        :func:`pack` accepts), whose lengths are used.
    capacity : int
        Tokens per bin (the packed row length).
    strategy : {"bfd", "ffd", "ff", "nf"}
        ``"bfd"`` best-fit decreasing (default; tightest), ``"ffd"`` first-fit decreasing,
        ``"ff"`` first-fit in the given order (Axolotl's ``pack_parallel``, bin for bin),
        ``"nf"`` next-fit in the given order (keeps the order: curriculum, streaming).
        Decreasing strategies sort by length descending, ties by row index. BFD picks the bin
        with the least room that fits (ties: the bin that most recently reached that room).
    max_rows_per_bin : int, optional
        At most this many sequences per bin (Axolotl's ``bin_size``).
    group_size : int, optional
        Pack consecutive groups of this many rows independently (Axolotl packs groups of
        100,000); groups run in parallel and their bins are concatenated in group order.
    overflow : {"error", "truncate", "split", "drop", "isolate"}
        Sequences longer than ``capacity``: raise :class:`~fastaxo.errors.SequenceTooLongError`
        naming the row (default); keep the first ``capacity`` tokens; cut into pieces of at
        most ``capacity`` tokens, each packed as its own sequence; leave the row out; or give
        it a bin of its own that nothing else joins (Axolotl's behaviour; such bins exceed the
        capacity, so :func:`pack` refuses this mode). Every case is counted in ``stats``.
    num_threads : int, optional
        Threads for parallel groups (default: :func:`fastaxo.default_num_threads`).
    order : 1-D array of int, optional
        Pack the rows in this order: entry k of the packing is row ``order[k]`` (a shuffled
        dataset's permutation, a sampler's draws; a row may appear more than once, and each
        appearance is packed once). The bins are those of ``pack_bins(lengths[order], ...)``,
        with ``indices`` naming rows of ``lengths`` (``order[i]``) and groups counted in
        entries of ``order``. With ``strategy="ff"`` the lengths are read in place through
        the order (no gathered copy). Row ids must be in ``[0, len(lengths))``.

    Returns
    -------
    Bins
        Ragged row indices per bin (``indices``, ``offsets``, ``lengths``, ``starts``) and
        ``stats`` (:class:`PackStats`). Bins are in creation order; rows in a bin in the order
        they were added. Every row (every piece, when split) appears exactly once (with
        ``order``: every entry of ``order``).
    """
    capacity = positive_int(capacity, "capacity")
    strategy = choice(strategy, "strategy", STRATEGIES)
    overflow = choice(overflow, "overflow", OVERFLOW_MODES)
    max_rows = positive_int(max_rows_per_bin, "max_rows_per_bin", allow_none=True)
    group_size = positive_int(group_size, "group_size", allow_none=True)
    nt = resolve_num_threads(num_threads)
    if strategy == "bfd" and capacity > BFD_MAX_CAPACITY:
        raise InvalidInputError(
            f"capacity is {capacity:,}; strategy 'bfd' supports capacities up to {BFD_MAX_CAPACITY:,} "
            "tokens (use 'ffd', nearly as tight, for larger bins)"
        )
    lengths = _lengths_of(lengths)
    if order is not None:
        return _pack_bins_ordered(lengths, _order_of(order, len(lengths)), capacity, strategy, max_rows,
                                  group_size, overflow, nt)
    return _pack_bins(lengths, capacity, strategy, max_rows, group_size, overflow, nt, "lengths")


def _order_of(order: Any, n: int) -> np.ndarray:
    """``order`` as a 1-D int64 array of row ids in [0, n)."""
    arr = order if isinstance(order, np.ndarray) else np.asarray(order)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InvalidTypeError(f"order: expected a 1-D array of integer row ids, got {arr.ndim}-D of dtype {arr.dtype}")
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= n:
            bad = int(np.flatnonzero((arr < 0) | (arr >= n))[0])
            raise InvalidInputError(f"order[{bad}] is {int(arr[bad])}; row ids must be in [0, {n}) "
                                    f"(lengths has {n:,} rows)")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _pack_bins_ordered(lengths: np.ndarray, order: np.ndarray, capacity: int, strategy: str,
                       max_rows: int | None, group_size: int | None, overflow: str, nt: int) -> Bins:
    """pack_bins(lengths[order], ...) with indices mapped to rows of ``lengths``."""
    ext = backend.pack_ext
    n = len(order)
    if (strategy != "ff" or overflow not in ("error", "isolate") or ext is None or n == 0
            or (len(lengths) and int(lengths.max()) >= 2**31)):
        bins = _pack_bins(lengths[order], capacity, strategy, max_rows, group_size, overflow, nt, "lengths[order]")
        return Bins(order[bins.indices], bins.offsets, bins.lengths, bins._starts, capacity, bins.stats)
    gs = group_size if group_size is not None else n
    max_items = max_rows if max_rows is not None else n
    len32 = lengths.astype(np.int32)
    groups = -(-n // gs)
    hint = int(len32.sum(dtype=np.int64) * n / max(len(len32), 1) / capacity / groups * 1.125) + 8
    status, bad, ids, offsets = ext.ff_in_order(len32, order, 0, 0, capacity, max_items, overflow == "isolate",
                                                gs, hint, nt)
    if status == ext.EOVERLONG:
        row = int(order[bad])
        n_over = int(np.count_nonzero(lengths[order] > capacity))
        raise SequenceTooLongError(
            f"lengths row {row} (order[{bad}]) has {int(lengths[row]):,} tokens; the capacity (max_len) is "
            f"{capacity:,}. {n_over:,} entries of order are longer. Pass overflow='truncate', 'split' or 'drop' "
            "to handle them (each is counted in the stats), or filter them out first",
            row, int(lengths[row]), capacity,
        )
    check_pack_status(ext, status, kernel="pack_bins", items=n, item=bad)
    entry_len = lengths[ids]
    n_over = int(np.count_nonzero(entry_len > capacity))
    tokens = int(entry_len.sum())
    nb = len(offsets) - 1
    stats = PackStats(
        strategy=strategy, capacity=capacity, sequences=n, entries=n, bins=nb, tokens=tokens,
        lower_bound=-(-tokens // capacity), efficiency=(tokens / (nb * capacity)) if nb else 0.0,
        overflow=overflow, max_rows_per_bin=max_rows, group_size=group_size, overlong=n_over,
        isolated=n_over if overflow == "isolate" else 0,
    )
    return Bins(ids, offsets, entry_len, None, capacity, stats)


def _pack_bins(lengths: np.ndarray, capacity: int, strategy: str, max_rows: int | None,
               group_size: int | None, overflow: str, nt: int, what: str) -> Bins:
    n = len(lengths)
    item_len, rows, starts, counters = _items(lengths, capacity, overflow, what)
    n_items = len(item_len)
    if group_size is None or n == 0:
        groups = np.array([0, n_items], np.int64)
    else:
        row_bounds = np.append(np.arange(0, n, group_size, dtype=np.int64), n)
        groups = row_bounds if rows is None else np.searchsorted(rows, row_bounds).astype(np.int64)
        groups = np.unique(groups)
        if groups[0] != 0:
            groups = np.insert(groups, 0, 0)
    item_len = np.ascontiguousarray(item_len, dtype=np.int64)
    max_items = max_rows if max_rows is not None else max(n_items, 1)
    order, offsets, entry_len = _assign(item_len, capacity, max_items, strategy, overflow == "isolate", groups, nt)
    indices = order if rows is None else rows[order]
    entry_starts = None if starts is None else starts[order]
    tokens = int(entry_len.sum()) if n_items else 0
    nb = len(offsets) - 1
    stats = PackStats(
        strategy=strategy, capacity=capacity, sequences=n, entries=n_items, bins=nb, tokens=tokens,
        lower_bound=-(-tokens // capacity), efficiency=(tokens / (nb * capacity)) if nb else 0.0,
        overflow=overflow, max_rows_per_bin=max_rows, group_size=group_size, **counters,
    )
    return Bins(indices, offsets, entry_len, entry_starts, capacity, stats)


# ---------------------------------------------------------------- materialisation
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


def _resolve_columns(data: Any, labels: Any, columns: Any) -> tuple[Rows, Rows | None, dict[str, Rows]]:
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
                    "columns: with ragged input_ids (not a table) pass a mapping of name -> ragged rows"
                )
            extra = {k: as_ragged(v, k, integer=False) for k, v in columns.items()}
    lab = None
    if labels is not None and labels is not False:
        lab = as_ragged(labels, "labels")
        check_aligned(ids, lab)
    for name, col in extra.items():
        if name in ("input_ids", "labels", "position_ids", "attention_mask", "cu_seqlens", "bin_offsets"):
            raise InvalidInputError(f"columns: {name!r} is produced by pack itself; pass it as data/labels")
        check_aligned(ids, col)
    return ids, lab, extra


def _check_bins(bins: Any, ids: Rows, width: int, layout: str) -> Bins:
    if not isinstance(bins, Bins):
        raise InvalidTypeError(f"bins must be a fastaxo.Bins (from pack_bins), got {type(bins).__name__}")
    if len(bins.indices):
        lo, hi = int(bins.indices.min()), int(bins.indices.max())
        if lo < 0 or hi >= len(ids):
            raise InvalidInputError(f"bins refer to row {hi if hi >= len(ids) else lo}; the data has {len(ids):,} rows")
        row_len = ids.lengths[bins.indices]
        end = bins.starts + bins.lengths
        bad = np.flatnonzero((bins.lengths < 0) | (bins.starts < 0) | (end > row_len))
        if len(bad):
            e = int(bad[0])
            raise InvalidInputError(
                f"bins entry {e} takes tokens {int(bins.starts[e])}:{int(end[e])} of row {int(bins.indices[e])}, "
                f"which has {int(row_len[e])} tokens (were the bins made for other data?)"
            )
    if layout == "padded" and len(bins):
        used = bins.token_counts()
        over = np.flatnonzero(used > width)
        if len(over):
            b = int(over[0])
            raise InvalidInputError(
                f"bin {b} holds {int(used[b]):,} tokens; packed rows are {width:,} wide (bins made with "
                "overflow='isolate' or a larger capacity cannot be materialised)"
            )
    return bins


def _buffer(pool: dict[str, np.ndarray] | None, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A fresh array, or a view of the pooled one when it is big enough (no first-touch cost)."""
    size = math.prod(shape)
    if pool is not None:
        buf = pool.get(name)
        if buf is None or buf.dtype != dtype or buf.size < size:
            buf = pool[name] = np.empty(size, dtype)
        return buf[:size].reshape(shape)
    return np.empty(shape, dtype)


def _materialise(ids: Rows, lab: Rows | None, extra: dict[str, Rows], bins: Bins, width: int,
                 layout: str, attention: str | None, position_ids: bool, pad_id: int, label_pad_id: int,
                 pad_values: Mapping[str, Any], dt: np.dtype, nt: int,
                 pool: dict[str, np.ndarray] | None = None) -> Packed:
    ext = backend.pack_ext
    if ext is None:
        arrays = reference.materialise(ids, lab, extra, bins, width, layout, attention, position_ids,
                                             pad_id, label_pad_id, pad_values, dt)
        if pool is not None:
            for name, arr in list(arrays.items()):
                if name not in ("cu_seqlens", "bin_offsets"):
                    buf = _buffer(pool, name, arr.shape, arr.dtype)
                    buf[...] = arr
                    arrays[name] = buf
        return Packed(arrays, bins, layout)
    nb = len(bins)
    offsets = np.ascontiguousarray(bins.offsets, np.int64)
    lens = np.ascontiguousarray(bins.lengths, np.int64)
    starts = bins._starts
    code = ext.TYPE_CODES[dt]
    if layout == "padded":
        shape: tuple[int, ...] = (nb, width)
        flat_base = None
        w = width
    else:
        per_bin = bins.token_counts()
        flat_base = np.zeros(nb + 1, np.int64)
        np.cumsum(per_bin, out=flat_base[1:])
        shape = (int(flat_base[-1]),)
        w = 0
    out: dict[str, np.ndarray] = {}

    def column(name: str, col: Rows, out_dt: np.dtype, pad: Any) -> np.ndarray:
        arr = _buffer(pool, name, shape, out_dt)
        src = col.entry_ptrs(bins.indices, len(lens), starts, nt)
        ext.fill_bins(arr.reshape(-1).view(np.uint8), ext.TYPE_CODES[out_dt], w, flat_base, offsets, src, lens,
                      ext.TYPE_CODES[col.dtype], ext.KIND_COPY, np.array(pad, out_dt).tobytes(), nt)
        return arr

    def generated(name: str, kind: int) -> np.ndarray:
        arr = _buffer(pool, name, shape, dt)
        ext.fill_bins(arr.reshape(-1).view(np.uint8), code, w, flat_base, offsets, None, lens, code, kind, b"", nt)
        return arr

    out["input_ids"] = column("input_ids", ids, dt, pad_id)
    if lab is not None:
        out["labels"] = column("labels", lab, dt, label_pad_id)
    if position_ids:
        out["position_ids"] = generated("position_ids", ext.KIND_POS)
    if attention is not None:
        out["attention_mask"] = generated("attention_mask", ext.KIND_SEG if attention == "segments" else ext.KIND_ONE)
    for name, col in extra.items():
        out[name] = column(name, col, col.dtype, pad_values.get(name, 0))
    if layout == "padded":
        total = nb * width
        cu_dt = np.int32 if total <= np.iinfo(np.int32).max else np.int64
        out["cu_seqlens"] = ext.padded_cu_seqlens(offsets, lens, width, cu_dt)
    else:
        cu = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=cu[1:])
        cu_dt = np.int32 if cu[-1] <= np.iinfo(np.int32).max else np.int64
        out["cu_seqlens"] = cu.astype(cu_dt, copy=False)
        out["bin_offsets"] = flat_base
    return Packed(out, bins, layout)


def _pack_options(max_len: Any, strategy: str, layout: str, attention: Any, overflow: str, dtype: Any,
                  pad_id: Any, label_pad_id: Any, pad_to_multiple_of: Any, max_rows_per_bin: Any,
                  group_size: Any, num_threads: Any) -> dict[str, Any]:
    max_len = positive_int(max_len, "max_len")
    mult = positive_int(pad_to_multiple_of, "pad_to_multiple_of", allow_none=True)
    opts = {
        "max_len": max_len,
        "width": max_len if mult is None else -(-max_len // mult) * mult,
        "strategy": choice(strategy, "strategy", STRATEGIES),
        "layout": choice(layout, "layout", ("padded", "flat")),
        "attention": None if attention is None else choice(attention, "attention", ("segments", "binary")),
        "overflow": choice(overflow, "overflow", OVERFLOW_MODES[:4]) if overflow != "isolate" else None,
        "dt": out_dtype(dtype),
        "pad_id": int_arg(pad_id, "pad_id"),
        "label_pad_id": int_arg(label_pad_id, "label_pad_id"),
        "max_rows": positive_int(max_rows_per_bin, "max_rows_per_bin", allow_none=True),
        "group_size": positive_int(group_size, "group_size", allow_none=True),
        "nt": resolve_num_threads(num_threads),
    }
    if opts["overflow"] is None:
        raise InvalidInputError(
            "overflow='isolate' makes bins longer than max_len, which packed rows cannot hold; "
            "use 'error', 'truncate', 'split' or 'drop' with pack (isolate is for pack_bins)"
        )
    if opts["strategy"] == "bfd" and max_len > BFD_MAX_CAPACITY:
        raise InvalidInputError(f"max_len is {max_len:,}; strategy 'bfd' supports up to {BFD_MAX_CAPACITY:,}")
    return opts


def _prepare(data: Any, labels: Any, columns: Any, pad_values: Any, bins: Any, o: dict[str, Any]):
    ids, lab, extra = _resolve_columns(data, labels, columns)
    pv = {} if pad_values is None else dict(pad_values)
    check_fits(ids, o["dt"], o["pad_id"], "pad_id")
    if lab is not None:
        check_fits(lab, o["dt"], o["label_pad_id"], "label_pad_id")
    if bins is None:
        bins = _pack_bins(ids.lengths, o["max_len"], o["strategy"], o["max_rows"], o["group_size"],
                          o["overflow"], o["nt"], "input_ids")
    else:
        bins = _check_bins(bins, ids, o["width"], o["layout"])
    return ids, lab, extra, pv, bins


def pack(data: Any, max_len: int, *, labels: Any = None, columns: Any = None, pad_values: Mapping[str, Any] | None = None,
         strategy: str = "bfd", layout: str = "padded", attention: str | None = "segments", position_ids: bool = True,
         pad_id: int = 0, label_pad_id: int = -100, dtype: Any = np.int64, overflow: str = "error",
         max_rows_per_bin: int | None = None, group_size: int | None = None, pad_to_multiple_of: int | None = None,
         bins: Bins | None = None, num_threads: int | None = None) -> Packed:
    """Pack sequences into rows of ``max_len`` tokens: bin assignment plus the packed arrays.

    Parameters
    ----------
    data : ragged rows or a table
        ``input_ids`` as a pyarrow ListArray / LargeListArray / ChunkedArray (zero-copy, slices
        respected), a ``(values, offsets)`` tuple of NumPy arrays, a list of NumPy arrays, a
        2-D array, or a list of lists (converted once: the slow path). Or a pyarrow Table /
        RecordBatch, a ``datasets.Dataset`` or a mapping with an ``input_ids`` column (and
        ``labels``, used when present).
    max_len : int
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
        ``"padded"``: ``[n_bins, width]`` arrays (``width`` = ``max_len`` rounded up to
        ``pad_to_multiple_of``). ``"flat"``: 1-D arrays with no padding, plus ``cu_seqlens``
        and ``bin_offsets``, for variable-length (flash-attention varlen) kernels.
    attention : {"segments", "binary", None}
        ``attention_mask`` as segment ids 1..k per bin with 0 for padding (Axolotl's V2
        collator layout), as 1/0, or left out (None).
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
    """
    o = _pack_options(max_len, strategy, layout, attention, overflow, dtype, pad_id, label_pad_id,
                      pad_to_multiple_of, max_rows_per_bin, group_size, num_threads)
    ids, lab, extra, pv, bins = _prepare(data, labels, columns, pad_values, bins, o)
    return _materialise(ids, lab, extra, bins, o["width"], o["layout"], o["attention"], bool(position_ids),
                        o["pad_id"], o["label_pad_id"], pv, o["dt"], o["nt"])


class PackIterator:
    """Packed rows in chunks of bins (``iter_pack``): iterate for :class:`Packed` chunks;
    ``bins`` and ``stats`` describe the whole assignment, known before the first chunk."""

    def __init__(self, gen_args: tuple, bins: Bins, chunk_bins: int, reuse_buffers: bool):
        self._args = gen_args
        self.bins = bins
        self.stats = bins.stats
        self.chunk_bins = chunk_bins
        self.reuse_buffers = reuse_buffers

    def __len__(self) -> int:
        return (len(self.bins) + self.chunk_bins - 1) // self.chunk_bins

    def __iter__(self) -> Iterator[Packed]:
        ids, lab, extra, pv, o, position_ids = self._args
        pool: dict[str, np.ndarray] | None = {} if self.reuse_buffers else None
        for chunk in self.bins.chunks(self.chunk_bins):
            yield _materialise(ids, lab, extra, chunk, o["width"], o["layout"], o["attention"], position_ids,
                               o["pad_id"], o["label_pad_id"], pv, o["dt"], o["nt"], pool)


def iter_pack(data: Any, max_len: int, *, chunk_bins: int = 65536, labels: Any = None, columns: Any = None,
              pad_values: Mapping[str, Any] | None = None, strategy: str = "bfd", layout: str = "padded",
              attention: str | None = "segments", position_ids: bool = True, pad_id: int = 0,
              label_pad_id: int = -100, dtype: Any = np.int64, overflow: str = "error",
              max_rows_per_bin: int | None = None, group_size: int | None = None,
              pad_to_multiple_of: int | None = None, bins: Bins | None = None,
              reuse_buffers: bool = False, num_threads: int | None = None) -> PackIterator:
    """Like :func:`pack`, but materialises ``chunk_bins`` bins at a time: memory holds one
    chunk of output, whatever the dataset size. Assignment happens once, up front.

    With ``reuse_buffers=True`` every chunk is written into the same arrays (the previous
    chunk's arrays are overwritten: consume or copy each chunk before asking for the next).
    That saves the allocation and first touch of fresh memory per chunk, which on virtual
    machines costs more than the writing itself."""
    chunk_bins = positive_int(chunk_bins, "chunk_bins")
    o = _pack_options(max_len, strategy, layout, attention, overflow, dtype, pad_id, label_pad_id,
                      pad_to_multiple_of, max_rows_per_bin, group_size, num_threads)
    ids, lab, extra, pv, bins = _prepare(data, labels, columns, pad_values, bins, o)
    return PackIterator((ids, lab, extra, pv, o, bool(position_ids)), bins, chunk_bins, bool(reuse_buffers))
