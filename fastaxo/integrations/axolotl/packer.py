"""Sample packing for Axolotl: ``pack_parallel`` and ``MultipackBatchSampler.generate_batches``
on fastaxo's first-fit kernel (the sampler's order replayed, not materialised), bin for bin
and draw for draw what Axolotl computes, with the bins kept as arrays (:class:`PackedBatches`)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

import fastaxo
from fastaxo._core import backend
from fastaxo._core.threads import resolve_num_threads
from fastaxo.integrations.axolotl.settings import LOG, current, report, say_once
from fastaxo.packing.bins import ff_in_order, randperm_max_n, replay_randperm

__all__ = ["PackedBatches", "make_generate_batches", "make_pack_parallel"]


def make_pack_parallel(original):
    """The replacement for Axolotl's ``pack_parallel``: same signature and contract (indices
    local to the array passed, every index exactly once, capacity and ``bin_size`` respected,
    groups of ``group_size`` packed independently, over-long sequences in a bin of their own)."""

    @functools.wraps(original)
    def pack_parallel(sequence_lengths, bin_capacity, group_size, bin_size, num_processes=None,
                      safe_mode=True, mp_start_method="fork"):
        lengths = np.asarray(sequence_lengths)
        if lengths.ndim != 1 or (lengths.size and lengths.dtype.kind not in "iu"):
            say_once("pack-dtype", f"pack_parallel: lengths of dtype {lengths.dtype}, shape "
                      f"{lengths.shape}; using Axolotl's packer")
            return original(sequence_lengths, bin_capacity, group_size, bin_size, num_processes,
                            safe_mode, mp_start_method)
        t0 = time.perf_counter()
        bins = fastaxo.pack_bins(lengths, int(bin_capacity), strategy="ff",
                                 group_size=int(group_size),
                                 max_rows_per_bin=int(bin_size), overflow="isolate",
                                 num_threads=current().threads)
        out = bins.to_list()
        dt = time.perf_counter() - t0
        LOG.debug("fastaxo: packed %d sequences into %d bins in %.4f s", len(lengths), len(out), dt)
        _report_pack("pack_parallel", lengths, bins.indices, bins.offsets, bin_capacity,
                     group_size, bin_size, dt)
        return out

    pack_parallel.__fastaxo__ = True  # type: ignore[attr-defined]
    return pack_parallel


def _report_pack(via: str, lengths: np.ndarray, ids: np.ndarray, offsets: np.ndarray, capacity: int,
                 group_size: int, bin_size: int, seconds: float) -> None:
    """A "pack" report event with the contract checks (only when a report file is set): bins
    ``ids[offsets[b]:offsets[b+1]]`` of rows of ``lengths``. Every row is expected once when
    as many were packed as there are rows (a permutation); otherwise that check is None."""
    if not (current().report or os.environ.get("FASTAXO_AXOLOTL_REPORT")):
        return
    nbins = len(offsets) - 1
    counts = np.bincount(ids, minlength=len(lengths)) if len(ids) else np.zeros(0)
    per_bin = (np.add.reduceat(lengths[ids].astype(np.int64), offsets[:-1]) if nbins
               else np.zeros(0, dtype=np.int64))
    sizes = np.diff(offsets)
    over = per_bin > capacity
    report("pack", via=via, sequences=len(ids), bins=nbins,
           tokens=int(lengths[ids].sum(dtype=np.int64)),
           capacity=int(capacity), group_size=int(group_size), bin_size=int(bin_size),
           every_index_once=(bool((counts == 1).all()) if len(ids) == len(lengths) else None),
           within_capacity=bool(((~over) | (sizes == 1)).all()),
           max_rows_per_bin=int(sizes.max()) if sizes.size else 0, seconds=seconds)


class PackedBatches(Sequence):
    """The batches of ``MultipackBatchSampler.generate_batches`` (a list of batches, each a list
    of bins, each a list of dataset indices), held as two arrays: dataset indices in bin order
    and bin offsets. A batch becomes Python lists only when it is read (the DataLoader reads
    one per step; ``len(sampler)`` reads none), so a train start does not build 90k+ ints
    four times over for counts. Equal to the list of lists it stands for (``==``)."""

    __slots__ = ("_ids", "_offsets", "_bs", "_start", "_stop")
    _BLOCK = 1024  # batches turned into lists at a time by iteration

    def __init__(self, ids: np.ndarray, offsets: np.ndarray, batch_size: int, start: int,
                 stop: int):
        self._ids, self._offsets, self._bs = ids, offsets, batch_size
        self._start, self._stop = start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    def _batches(self, b0: int, b1: int) -> list[list[list[int]]]:
        """Batches [b0, b1) as lists: one tolist() for all their indices, then slices."""
        nbins = len(self._offsets) - 1
        first, last = b0 * self._bs, min(b1 * self._bs, nbins)
        o = self._offsets[first:last + 1].tolist()
        flat = self._ids[o[0]:o[-1]].tolist()
        base = o[0]
        bins = [flat[o[k] - base:o[k + 1] - base] for k in range(len(o) - 1)]
        return [bins[i:i + self._bs] for i in range(0, len(bins), self._bs)]

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            a, b, step = i.indices(n)
            if step == 1:
                return PackedBatches(self._ids, self._offsets, self._bs, self._start + a,
                                     self._start + max(a, b))
            return [self[k] for k in range(a, b, step)]
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"batch {i} out of range for {n} batches")
        return self._batches(self._start + i, self._start + i + 1)[0]

    def __iter__(self):
        # a small first block: a train start reads one batch, an epoch reads them all
        b0, step = self._start, 8
        while b0 < self._stop:
            b1 = min(b0 + step, self._stop)
            yield from self._batches(b0, b1)
            b0, step = b1, self._BLOCK

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, PackedBatches)):
            return len(self) == len(other) and all(x == y for x, y in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"PackedBatches({len(self)} batches of up to {self._bs} bins)"


_SAMPLER_CHECK: list[bool] = []


def _random_sampler_draws(sampler: Any) -> tuple[np.ndarray | None, int]:
    """What ``list(RandomSampler(...))`` (replacement=False) yields, drawing the same random
    numbers from the same generator (torch's RandomSampler.__iter__): ``(indices, 0)`` as an
    int64 array, or ``(None, seed)`` when the indices are the permutations of a fresh
    generator seeded with ``seed``, to be replayed in C (csrc/fx_perm.h: MT19937 and torch's
    Fisher-Yates, 2.5x faster than torch.randperm; its trailing draws, which nothing can
    observe, are skipped). Without a generator of its own the sampler seeds a fresh one from
    the global generator; that one draw is made here, with torch."""
    import torch

    n = len(sampler.data_source)
    k = sampler.num_samples
    if sampler.generator is None:
        seed = int(torch.empty((), dtype=torch.int64).random_().item())
        if 1 <= n < randperm_max_n() and _SAMPLER_CHECK and _SAMPLER_CHECK[0]:
            return None, seed
        gen = torch.Generator()
        gen.manual_seed(seed)
        local = True
    else:
        gen = sampler.generator
        local = False
    parts = [torch.randperm(n, generator=gen) for _ in range(k // n)]
    if k % n or not local:  # a shared generator must advance as torch's iterator advances it
        parts.append(torch.randperm(n, generator=gen)[: k % n])
    out = parts[0] if len(parts) == 1 else torch.cat(parts)
    return out.numpy().astype(np.int64, copy=False), 0


def _random_sampler_indices(sampler: Any) -> np.ndarray:
    """``list(RandomSampler(...))`` (replacement=False) as an int64 array (see
    _random_sampler_draws)."""
    indices, seed = _random_sampler_draws(sampler)
    if indices is None:
        return replay_randperm(seed, len(sampler.data_source), sampler.num_samples)
    return indices


def _check_sampler_replay() -> bool:
    """Once per process: the replayed draws equal torch's own RandomSampler, with a generator
    and without one (global generator: its state is restored afterwards)."""
    import torch
    from torch.utils.data import RandomSampler

    mk = lambda g: RandomSampler(range(1000), num_samples=2500, generator=g)  # noqa: E731
    ok = _random_sampler_indices(mk(torch.Generator().manual_seed(1234))).tolist() == \
        list(mk(torch.Generator().manual_seed(1234)))
    state = torch.get_rng_state()
    try:
        for n, k in ((1000, 2500), (977, 977)):
            torch.manual_seed(4321 + n)
            mine = _random_sampler_indices(RandomSampler(range(n), num_samples=k))
            torch.manual_seed(4321 + n)
            ok = ok and mine.tolist() == list(RandomSampler(range(n), num_samples=k))
    finally:
        torch.set_rng_state(state)
    return ok


def _sampler_draws(sampler: Any) -> tuple[np.ndarray | None, int]:
    """``list(sampler)`` as ``(int64 array, 0)``, or ``(None, seed)`` for a RandomSampler whose
    order is a fresh generator's permutations (see _random_sampler_draws); RandomSampler and
    SequentialSampler without the Python list (checked once per process against torch's own
    iterator)."""
    from torch.utils.data import RandomSampler, SequentialSampler

    if type(sampler) is SequentialSampler:
        return np.arange(len(sampler.data_source), dtype=np.int64), 0
    if type(sampler) is RandomSampler and not sampler.replacement:
        if not _SAMPLER_CHECK:
            _SAMPLER_CHECK.append(True)  # the check itself runs the replay paths
            _SAMPLER_CHECK[0] = _check_sampler_replay()
            if not _SAMPLER_CHECK[0]:
                say_once("sampler-check", "packing: torch's RandomSampler draws differently from "
                         "what fastaxo "
                          "replicates; reading the sampler as a list instead")
        if _SAMPLER_CHECK[0]:
            return _random_sampler_draws(sampler)
    return np.fromiter(iter(sampler), dtype=np.int64), 0


def _sampler_indices(sampler: Any) -> np.ndarray:
    """``list(sampler)`` as an int64 array."""
    indices, seed = _sampler_draws(sampler)
    if indices is None:
        return replay_randperm(seed, len(sampler.data_source), sampler.num_samples)
    return indices


# Scratch buffers of _pack_in_sampler_order, kept between calls: a train start packs ~11 times,
# and memory freed and taken again faults in every page anew (~1 ms per MiB on these VMs).
# A list of work lists; a call takes one (or makes one) and puts it back.
_PACK_WORK: list[list[Any]] = []


def _pack_in_sampler_order(sampler: Any, lengths: np.ndarray, cap: int, group_size: int,
                           bin_size: int, nt: int) -> tuple[np.ndarray, np.ndarray, Any]:
    """Axolotl's bins for ``lengths[list(sampler)]`` (pack_parallel: first fit, groups, bin_size,
    over-long rows alone) as ``(ids, bin_offsets, total_tokens)``: dataset indices in bin order.

    The fast path reads the lengths in place through the sampler's order (no gathered copy);
    for a RandomSampler replayed from a seed, the shuffle runs on one core while the first fit
    packs behind it on the other (csrc/fx_sync.h). ``total_tokens`` is ``lengths[indices].sum()``
    as Axolotl computes it (a NumPy integer)."""
    indices, seed = _sampler_draws(sampler)
    # (a seed only comes from a RandomSampler)
    n_src = len(sampler.data_source) if indices is None else 0
    count = len(indices) if indices is not None else int(sampler.num_samples)
    fast = (backend.pack_ext is not None and lengths.dtype == np.int32 and lengths.ndim == 1
            and lengths.flags.c_contiguous
            and count > 0 and int(lengths.min()) >= 0)
    if fast and indices is None:
        fast = n_src <= len(lengths)
    elif fast and indices is not None:
        fast = int(indices.min()) >= 0 and int(indices.max()) < len(lengths)
    if not fast:  # numpy, or any input the C path does not take: Axolotl's own indexing and errors
        if indices is None:
            indices = replay_randperm(seed, n_src, count)
        sel = lengths[indices]
        bins = fastaxo.pack_bins(sel, cap, strategy="ff", group_size=group_size,
                                 max_rows_per_bin=bin_size,
                                 overflow="isolate", num_threads=nt)
        return indices[bins.indices], bins.offsets, sel.sum()
    full = indices is None and count == n_src == len(lengths)
    total = lengths.sum() if full else None
    if total is not None:
        est = int(total)
    else:
        est = int(lengths.sum(dtype=np.int64)) * count // max(len(lengths), 1)
    groups = -(-count // group_size)
    hint = est // cap // groups + est // cap // groups // 8 + 8
    work = _PACK_WORK.pop() if _PACK_WORK else []
    try:
        ids, offsets = ff_in_order(lengths, indices, seed, count, cap, bin_size,
                                   group_size=group_size, bins_hint=hint, num_threads=nt,
                                   work=work)
    finally:
        _PACK_WORK.append(work)
    if total is None:
        total = lengths[ids].sum()
    return ids, offsets, total


def make_generate_batches(original):
    """The replacement for ``MultipackBatchSampler.generate_batches``: the same batches (bins of
    dataset indices, grouped by batch_size, last one dropped when incomplete and drop_last), the
    same efficiency statistics and the same random draws, computed on arrays: the sampler's
    order as an array, fastaxo's packer (what ``pack_parallel`` does, bin for bin), and the
    bins kept as arrays (:class:`PackedBatches`). Axolotl's ``gc.collect()`` after packing is
    not repeated: this path leaves no garbage cycles. Label balancing and sequential packing
    stay Axolotl's."""

    @functools.wraps(original)
    def generate_batches(self, set_stats: bool = False):
        if (self._batches is not None or self.sequential
                or getattr(self, "label_counts", None) is not None):
            return original(self, set_stats)
        t0 = time.perf_counter()
        # label metrics: Axolotl 0.21's (0.19's sampler has none)
        metrics = hasattr(self, "_log_label_metrics")
        if metrics:
            self.label_metrics = None
            self._label_metrics_logged = False
        cap = int(self.batch_max_len)
        bin_size = int(self.bin_size or self.batch_max_len)
        group_size = int(self.group_size)
        nt = resolve_num_threads(current().threads)
        ids, offsets, total_used = _pack_in_sampler_order(self.sampler, self.lengths, cap,
                                                          group_size, bin_size, nt)
        nbins = len(offsets) - 1
        total_slots = nbins * self.batch_max_len
        bs = int(self.batch_size)
        nb = -(-nbins // bs)
        if self.drop_last and nb and nbins % bs:
            nb -= 1
            dropped = ids[offsets[nb * bs]:]
            total_slots -= (nbins - nb * bs) * self.batch_max_len
            total_used -= self.lengths[dropped].sum(dtype=np.int64)
        batches = PackedBatches(ids, offsets, bs, 0, nb)
        if set_stats:
            self.total_tokens_used += total_used
            self.total_token_slots += total_slots
            if metrics:
                self._log_label_metrics()
        self._batches = batches
        dt = time.perf_counter() - t0
        LOG.debug("fastaxo: %d sequences -> %d bins -> %d batches in %.4f s", len(ids), nbins,
                  nb, dt)
        _report_pack("generate_batches", self.lengths, ids, offsets, cap, group_size, bin_size, dt)
        return batches

    generate_batches.__fastaxo__ = True  # type: ignore[attr-defined]
    return generate_batches
