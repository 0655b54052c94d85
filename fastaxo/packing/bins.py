"""Bin assignment: which sequences share a packed row (:func:`pack_bins`, :class:`Bins`,
:class:`PackStats`), and the first-fit entry points of the Axolotl integration's packer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fastaxo._core import backend
from fastaxo._core.checks import choice, mistake_hint, positive_int
from fastaxo._core.choices import OVERFLOW_MODES, STRATEGIES
from fastaxo._core.outputs import check_output_bytes
from fastaxo._core.ragged import (
    ArrayRows,
    Ragged,
    as_ragged,
)
from fastaxo._core.status import check_status
from fastaxo._core.threads import resolve_num_threads
from fastaxo._reference import packing as reference
from fastaxo.errors import FastaxoError, InvalidInputError, InvalidTypeError, SequenceTooLongError

__all__ = ["BFD_MAX_CAPACITY", "OVERFLOW_MODES", "STRATEGIES", "Bins", "PackStats", "assign_bins",
           "ff_in_order", "pack_bins", "randperm_max_n", "replay_randperm"]

# csrc/fx_pack.h's FX_PACK_BFD_MAX_CAPACITY, checked without the extension too (the limit is
# the contract of every build; tests/test_constants.py checks the copy)
BFD_MAX_CAPACITY = 1 << 26


@dataclass(frozen=True)
class PackStats:
    """What a bin assignment did. ``efficiency`` = tokens / (bins x max_length) (0 when there are
    no bins); no packing can use fewer than ``lower_bound`` = ceil(tokens / max_length) bins.
    Overflow counters count input rows longer than ``max_length`` and what happened to them."""

    strategy: str
    max_length: int
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
        s = (
            f"{self.sequences:,} sequences -> {self.bins:,} bins of {self.max_length:,} "
            f"({self.strategy}); "
            f"{self.tokens:,} tokens, efficiency {self.efficiency:.4%}, lower bound "
            f"{self.lower_bound:,} bins"
        )
        if self.overlong:
            s += (
                f"; {self.overlong:,} over-long rows ({self.overflow}: truncated "
                f"{self.truncated:,} "
                f"[-{self.truncated_tokens:,} tokens], split {self.split:,} into "
                f"{self.split_pieces:,}, "
                f"dropped {self.dropped:,} [-{self.dropped_tokens:,} tokens], isolated "
                f"{self.isolated:,})"
            )
        return s


class Bins:
    """Bins as ragged row indices: bin ``b`` holds entries ``offsets[b]:offsets[b+1]``; entry
    ``e`` is tokens ``starts[e] : starts[e] + lengths[e]`` of input row ``indices[e]``.

    ``starts`` is all zeros unless sequences were split; ``lengths`` equal the row lengths
    unless they were truncated. ``stats`` describes the whole assignment (None for a slice
    made with ``bins[a:b]`` or :meth:`chunks`).
    """

    __slots__ = ("indices", "offsets", "lengths", "_starts", "max_length", "stats")

    def __init__(self, indices: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                 starts: np.ndarray | None, max_length: int, stats: PackStats | None):
        self.indices, self.offsets, self.lengths, self._starts = indices, offsets, lengths, starts
        self.max_length, self.stats = max_length, stats

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
                raise InvalidInputError(
                    f"bins[...]: only contiguous slices (step 1), got step {step}"
                )
            b = max(a, b)
            lo, hi = int(self.offsets[a]), int(self.offsets[b])
            return Bins(self.indices[lo:hi], self.offsets[a : b + 1] - lo, self.lengths[lo:hi],
                        None if self._starts is None else self._starts[lo:hi], self.max_length,
                        None)
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
        return (f"<fastaxo.Bins: {len(self):,} bins, {len(self.indices):,} entries, "
                f"max_length {self.max_length:,}>")


def _lengths_of(lengths: Any) -> np.ndarray:
    """A 1-D int64 array of lengths, from lengths or from ragged rows."""
    if isinstance(lengths, (Ragged, ArrayRows)):
        return lengths.lengths
    if isinstance(lengths, np.ndarray) and lengths.ndim == 1 and lengths.dtype.kind in "iu":
        arr = lengths
    else:
        try:
            import pyarrow as pa

            if isinstance(lengths, (pa.Array, pa.ChunkedArray)) and pa.types.is_integer(
                lengths.type
            ):
                if lengths.null_count:
                    raise InvalidInputError("lengths: contains nulls")
                chunks = lengths.chunks if isinstance(lengths, pa.ChunkedArray) else [lengths]
                from fastaxo._core.arrow import fixed_view

                arr = (
                    np.concatenate([fixed_view(c) for c in chunks])
                    if chunks
                    else np.zeros(0, np.int64)
                )
            elif _looks_ragged(lengths):
                return as_ragged(lengths, "lengths").lengths
            else:
                arr = np.asarray(lengths)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, FastaxoError):
                raise
            raise InvalidTypeError(
                f"lengths: expected a 1-D array of integer lengths, got {type(lengths).__name__}"
                + mistake_hint(lengths)
            ) from None
        if arr.ndim != 1 or (arr.dtype.kind not in "iu" and not (arr.size == 0)):
            raise InvalidTypeError(
                f"lengths: expected a 1-D array of integer lengths (or ragged rows), got "
                f"{arr.ndim}-D of dtype {arr.dtype}" + mistake_hint(lengths)
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
# What a SequenceTooLongError from packing tells the caller to do.
FIX_OVERLONG = ("Pass overflow='truncate', 'split' or 'drop' to handle such rows (each is "
                "counted in the stats), or filter them out first")


def _items(lengths: np.ndarray, max_length: int, overflow: str, what: str):
    """Items to pack from rows: (item_len, item_row or None, item_start or None, counters)."""
    n = len(lengths)
    over = lengths > max_length
    n_over = int(np.count_nonzero(over)) if n else 0
    c = {"overlong": n_over}
    if n_over == 0 or overflow == "isolate":
        c["isolated"] = n_over if overflow == "isolate" else 0
        return lengths, None, None, c
    first = int(np.flatnonzero(over)[0])
    if overflow == "error":
        raise SequenceTooLongError.of(f"{what} row {first}", first, int(lengths[first]),
                                      max_length, longer=n_over, fix=FIX_OVERLONG)
    excess = int((lengths[over] - max_length).sum())
    if overflow == "truncate":
        c.update(truncated=n_over, truncated_tokens=excess)
        return np.minimum(lengths, max_length), None, None, c
    if overflow == "drop":
        keep = np.flatnonzero(~over)
        c.update(dropped=n_over, dropped_tokens=int(lengths[over].sum()))
        return lengths[keep], keep, None, c
    # split: a row of L > max_length becomes ceil(L / max_length) pieces, in place
    pieces = np.where(over, -(-lengths // max_length), 1)
    # the pieces' arrays (about 48 bytes a piece, here and in the bins) sized before they are
    # made: one 2**34-token row split by 8 once made 16 GiB arrays and the OOM killer came
    # (the float sum cannot wrap; past 2**53 it need not be exact to be refused)
    n_pieces = float(pieces.sum(dtype=np.float64))
    check_output_bytes(int(min(n_pieces, 2.0**62)) * 48,
                       f"overflow='split': {what} rows longer than max_length={max_length:,} make "
                       f"{n_pieces:,.0f} pieces")
    rows = np.repeat(np.arange(n, dtype=np.int64), pieces)
    first_item = np.zeros(n, np.int64)
    np.cumsum(pieces[:-1], out=first_item[1:])
    j = np.arange(len(rows), dtype=np.int64) - first_item[rows]
    starts = j * max_length
    item_len = np.minimum(max_length, lengths[rows] - starts)
    c.update(split=n_over, split_pieces=int(pieces[over].sum()))
    return item_len, rows, starts, c


def _assign(
    item_len: np.ndarray,
    max_length: int,
    max_items: int,
    strategy: str,
    allow_overlong: bool,
    groups: np.ndarray,
    nt: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, bin offsets, entry lengths = item_len[order])."""
    ext = backend.pack_ext
    if ext is None:
        order, offsets = reference.assign_groups(
            item_len, max_length, max_items, strategy, allow_overlong, groups
        )
        return order, offsets, item_len[order]
    status, bad, order, offsets, entry_len = ext.assign(
        item_len, max_length, max_items, ext.STRATEGIES[strategy], allow_overlong, groups, nt
    )
    check_status(ext, status, kernel="pack_bins", what=f"packing {len(item_len):,} sequences",
                 item=bad)
    return order, offsets, entry_len


def pack_bins(
    lengths: Any,
    max_length: int,
    *,
    strategy: str = "bfd",
    max_rows_per_bin: int | None = None,
    group_size: int | None = None,
    overflow: str = "error",
    num_threads: int | None = None,
    order: Any = None,
) -> Bins:
    """Assign sequences to bins of ``max_length`` tokens (bin assignment only).

    Parameters
    ----------
    lengths : array-like of int, or ragged rows
        Token count per sequence (1-D integers), or the sequences themselves (anything
        :func:`pack` accepts), whose lengths are used.
    max_length : int
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
        Sequences longer than ``max_length``: raise :class:`~fastaxo.errors.SequenceTooLongError`
        naming the row (default); keep the first ``max_length`` tokens; cut into pieces of at
        most ``max_length`` tokens, each packed as its own sequence; leave the row out; or give
        it a bin of its own that nothing else joins (Axolotl's behaviour; such bins exceed
        ``max_length``, so :func:`pack` refuses this mode). Every case is counted in ``stats``.
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

    Examples
    --------
    >>> b = fastaxo.pack_bins([5, 3, 7], max_length=8)
    >>> b.to_list(), b.stats.bins, b.stats.efficiency
    ([[2], [0, 1]], 2, 0.9375)
    """
    max_length = positive_int(max_length, "max_length")
    strategy = choice(strategy, "strategy", STRATEGIES)
    overflow = choice(overflow, "overflow", OVERFLOW_MODES)
    max_rows = positive_int(max_rows_per_bin, "max_rows_per_bin", allow_none=True)
    group_size = positive_int(group_size, "group_size", allow_none=True)
    nt = resolve_num_threads(num_threads)
    if strategy == "bfd" and max_length > BFD_MAX_CAPACITY:
        raise InvalidInputError(
            f"max_length is {max_length:,}; strategy 'bfd' supports bins of up to "
            f"{BFD_MAX_CAPACITY:,} "
            "tokens (use 'ffd', nearly as tight, for larger bins)"
        )
    lengths = _lengths_of(lengths)
    if order is not None:
        return _pack_bins_ordered(
            lengths,
            _order_of(order, len(lengths)),
            max_length,
            strategy,
            max_rows,
            group_size,
            overflow,
            nt,
        )
    return assign_bins(lengths, max_length, strategy, max_rows, group_size, overflow, nt, "lengths")


def _order_of(order: Any, n: int) -> np.ndarray:
    """``order`` as a 1-D int64 array of row ids in [0, n)."""
    arr = order if isinstance(order, np.ndarray) else np.asarray(order)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InvalidTypeError(
            f"order: expected a 1-D array of integer row ids, got {arr.ndim}-D of dtype {arr.dtype}"
        )
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= n:
            bad = int(np.flatnonzero((arr < 0) | (arr >= n))[0])
            raise InvalidInputError(f"order[{bad}] is {int(arr[bad])}; row ids must be in [0, {n}) "
                                    f"(lengths has {n:,} rows)")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _raise_overlong(lengths: np.ndarray, order: np.ndarray, bad: int, max_length: int,
                    n_over: int) -> None:
    """SequenceTooLongError for entry ``bad`` of ``order``, named by its row of ``lengths``."""
    row = int(order[bad])
    raise SequenceTooLongError.of(f"lengths row {row} (order[{bad}])", row, int(lengths[row]),
                                  max_length, longer=n_over, fix=FIX_OVERLONG)


def _pack_bins_ordered(
    lengths: np.ndarray,
    order: np.ndarray,
    max_length: int,
    strategy: str,
    max_rows: int | None,
    group_size: int | None,
    overflow: str,
    nt: int,
) -> Bins:
    """pack_bins(lengths[order], ...) with indices mapped to rows of ``lengths``."""
    ext = backend.pack_ext
    n = len(order)
    if (strategy != "ff" or overflow not in ("error", "isolate") or ext is None or n == 0
            or (len(lengths) and int(lengths.max()) >= 2**31)):
        gathered = lengths[order]
        if overflow == "error":  # named by the row of ``lengths``, as the kernel's path does
            over = np.flatnonzero(gathered > max_length)
            if len(over):
                _raise_overlong(lengths, order, int(over[0]), max_length, len(over))
        bins = assign_bins(
            gathered, max_length, strategy, max_rows, group_size, overflow, nt, "lengths[order]"
        )
        return Bins(
            order[bins.indices], bins.offsets, bins.lengths, bins._starts, max_length, bins.stats
        )
    gs = group_size if group_size is not None else n
    max_items = max_rows if max_rows is not None else n
    len32 = lengths.astype(np.int32)
    groups = -(-n // gs)
    hint = int(len32.sum(dtype=np.int64) * n / max(len(len32), 1) / max_length / groups * 1.125) + 8
    status, bad, ids, offsets = ext.ff_in_order(
        len32, order, 0, 0, max_length, max_items, overflow == "isolate", gs, hint, nt
    )
    if status == ext.EOVERLONG:
        _raise_overlong(lengths, order, bad, max_length,
                        int(np.count_nonzero(lengths[order] > max_length)))
    check_status(ext, status, kernel="pack_bins", what=f"packing {n:,} sequences", item=bad)
    entry_len = lengths[ids]
    n_over = int(np.count_nonzero(entry_len > max_length))
    tokens = int(entry_len.sum())
    nb = len(offsets) - 1
    stats = PackStats(
        strategy=strategy, max_length=max_length, sequences=n, entries=n, bins=nb, tokens=tokens,
        lower_bound=-(-tokens // max_length),
        efficiency=(tokens / (nb * max_length)) if nb else 0.0,
        overflow=overflow, max_rows_per_bin=max_rows, group_size=group_size, overlong=n_over,
        isolated=n_over if overflow == "isolate" else 0,
    )
    return Bins(ids, offsets, entry_len, None, max_length, stats)


def assign_bins(lengths: np.ndarray, max_length: int, strategy: str, max_rows: int | None,
               group_size: int | None, overflow: str, nt: int, what: str) -> Bins:
    n = len(lengths)
    item_len, rows, starts, counters = _items(lengths, max_length, overflow, what)
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
    order, offsets, entry_len = _assign(
        item_len, max_length, max_items, strategy, overflow == "isolate", groups, nt
    )
    indices = order if rows is None else rows[order]
    entry_starts = None if starts is None else starts[order]
    tokens = int(entry_len.sum()) if n_items else 0
    nb = len(offsets) - 1
    stats = PackStats(
        strategy=strategy, max_length=max_length, sequences=n, entries=n_items, bins=nb,
        tokens=tokens, lower_bound=-(-tokens // max_length),
        efficiency=(tokens / (nb * max_length)) if nb else 0.0,
        overflow=overflow, max_rows_per_bin=max_rows, group_size=group_size, **counters,
    )
    return Bins(indices, offsets, entry_len, entry_starts, max_length, stats)


# ---------------------------------------------------------------- package-internal entry points
# For the Axolotl integration's packer (fastaxo.integrations.axolotl.packer): the kernels it
# calls, with their status checks, so that no integration calls the extension directly.

def randperm_max_n() -> int:
    """The largest ``n`` :func:`replay_randperm` takes (0 without the compiled extension)."""
    ext = backend.pack_ext
    return 0 if ext is None else int(ext.RANDPERM_MAX_N)


def replay_randperm(seed: int, n: int, count: int) -> np.ndarray:
    """The order of torch's ``RandomSampler(range(n), num_samples=count)`` over a fresh
    generator seeded with ``seed``, replayed in C (csrc/fx_perm.h: MT19937 and torch's
    Fisher-Yates), as int64. Needs the extension and ``1 <= n < randperm_max_n()``."""
    ext = backend.pack_ext
    assert ext is not None, "replay_randperm needs the compiled extension"
    return ext.randperm_mt19937(seed, n, count)


def ff_in_order(lengths: np.ndarray, order: np.ndarray | None, seed: int, count: int,
                max_length: int, max_items: int, *, group_size: int, bins_hint: int,
                num_threads: int, work: list[Any] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Axolotl's first fit (over-long rows in a bin of their own) over int32 ``lengths`` read
    through an order: ``order`` (int64 row ids), or with ``order=None`` the replayed
    RandomSampler order of ``seed`` (``count`` rows), shuffled on one core while the packer
    runs behind it on the other. Groups of ``group_size`` items are packed independently, at
    most ``max_items`` rows a bin. Returns ``(row ids in bin order, bin offsets)``. ``work``
    holds scratch buffers kept between calls. Needs the extension; the caller checked the
    lengths (non-negative) and the order (in range)."""
    ext = backend.pack_ext
    assert ext is not None, "ff_in_order needs the compiled extension"
    status, bad, ids, offsets = ext.ff_in_order(lengths, order, seed, count, max_length, max_items,
                                                True, group_size, bins_hint, num_threads, work)
    check_status(ext, status, kernel="fastaxo packing", what=f"packing {count:,} sequences",
                 item=bad)
    return ids, offsets
