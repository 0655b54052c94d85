"""fastaxo as an Axolotl plugin.

One line in the Axolotl YAML::

    plugins:
      - fastaxo.integrations.axolotl.FastaxoPlugin

turns on, with Axolotl's results kept exactly:

- ``fastaxo_dedupe`` (default on): ``dataset_exact_deduplication`` compares rows by value in
  their Arrow buffers (:class:`fastaxo.RowSet`: sampled keys, byte comparison of candidates)
  instead of ``sha256(str(row))`` per row. Same kept rows, same order, same train -> eval
  ``seen_hashes`` hand-over. It never turns dedupe on by itself.
- ``fastaxo_packing`` (default on): sample packing's bin assignment (``pack_parallel``) runs
  fastaxo's first-fit kernel, bin for bin what Axolotl's numba packer returns, and
  ``MultipackBatchSampler.generate_batches`` keeps the sampler order and the bins as arrays
  (:class:`PackedBatches`): the same batches, the same random draws.
- ``fastaxo_collator`` (default on): packed micro-batches are collated by
  :class:`FastaxoCollator` (Axolotl's V2 layout, tensor for tensor).
- ``fastaxo_loader_health`` (default on): a trainer callback logs, per logging step, the stall
  fraction, tokens/s, RSS/VmPeak and disk bytes read, a summary table at the end, and MFU
  when ``fastaxo_peak_flops`` is set.
- ``fastaxo_streaming`` (default off): local pre-tokenized Parquet/Arrow/JSONL/CSV datasets are
  read through fastaxo's bounded-memory reader, so a dataset larger than the process's memory
  is prepared (rows identical to Axolotl's, in Axolotl's order).

Anything a switch cannot honour for a given config is said once in the log and left to
Axolotl's own code. This module imports axolotl (and through it torch and transformers);
``import fastaxo`` does not import it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

try:
    import axolotl as _axolotl
    from axolotl.integrations.base import BasePlugin
except ImportError as exc:  # pragma: no cover - exercised by users without axolotl
    raise ImportError(
        "fastaxo.integrations.axolotl needs axolotl (0.19 to 0.21) installed in this environment: "
        f"pip install 'fastaxo[axolotl]' ({exc})"
    ) from exc

from pydantic import BaseModel, Field

import fastaxo
from fastaxo._core import arrow
from fastaxo._core.status import check_pack_status
from fastaxo._core.threads import resolve_num_threads

LOG = logging.getLogger("fastaxo.axolotl")

PLUGIN_NAME = "fastaxo.integrations.axolotl.FastaxoPlugin"
SUPPORTED = ((0, 19), (0, 21))  # inclusive minor range
_DEFAULT_ON = ("fastaxo_dedupe", "fastaxo_packing", "fastaxo_collator", "fastaxo_loader_health")


class FastaxoArgs(BaseModel):
    """The plugin's config keys, mixed into Axolotl's schema by ``get_input_args``."""

    fastaxo_dedupe: bool | None = Field(default=None, json_schema_extra={"description": (
        "Run dataset_exact_deduplication on fastaxo.RowSet (rows compared by value in their Arrow "
        "buffers; the same kept rows in the same order). Default on.")})
    fastaxo_packing: bool | None = Field(default=None, json_schema_extra={"description": (
        "Sample-packing bin assignment (pack_parallel) on fastaxo's kernel, bin for bin. Default on.")})
    fastaxo_collator: bool | None = Field(default=None, json_schema_extra={"description": (
        "Collate packed micro-batches with fastaxo (Axolotl's V2 layout). Default on.")})
    fastaxo_streaming: bool | None = Field(default=None, json_schema_extra={"description": (
        "Prepare local pre-tokenized files through fastaxo's bounded-memory reader. Default off.")})
    fastaxo_batch_rows: int | None = Field(default=None, ge=1, json_schema_extra={"description": (
        "Rows per batch of the streaming loader (default 8192, fewer for rows over 2 KiB: ~16 MiB).")})
    fastaxo_prefetch_bytes: int | None = Field(default=None, ge=0, json_schema_extra={"description": (
        "Read-ahead budget of the streaming loader in bytes (default 64 MiB).")})
    fastaxo_threads: int | None = Field(default=None, ge=1, json_schema_extra={"description": (
        "Threads for fastaxo's kernels (default: FASTAXO_NUM_THREADS, OMP_NUM_THREADS or the CPUs).")})
    fastaxo_loader_health: bool | None = Field(default=None, json_schema_extra={"description": (
        "Log stall fraction, tokens/s, RSS, disk reads per logging step and a summary. Default on.")})
    fastaxo_peak_flops: float | None = Field(default=None, gt=0, json_schema_extra={"description": (
        "Peak FLOP/s of the hardware (all devices of this process); adds MFU to loader health.")})
    fastaxo_report: str | None = Field(default=None, json_schema_extra={"description": (
        "Append one JSON line per fastaxo action (dedupe, pack, collate, stream, health) to this file.")})


# ---------------------------------------------------------------------------------------------
# settings, logging once, the JSON report

@dataclass(frozen=True)
class Settings:
    dedupe: bool = True
    packing: bool = True
    collator: bool = True
    streaming: bool = False
    loader_health: bool = True
    batch_rows: int = 8192
    prefetch_bytes: int = 64 << 20
    threads: int | None = None
    peak_flops: float | None = None
    report: str | None = None

    @classmethod
    def from_cfg(cls, cfg: Any) -> Settings:
        get = cfg.get if hasattr(cfg, "get") else (lambda k, d=None: getattr(cfg, k, d))

        def flag(key: str, default: bool) -> bool:
            v = get(key)
            return default if v is None else bool(v)

        return cls(
            dedupe=flag("fastaxo_dedupe", True),
            packing=flag("fastaxo_packing", True),
            collator=flag("fastaxo_collator", True),
            streaming=flag("fastaxo_streaming", False),
            loader_health=flag("fastaxo_loader_health", True),
            batch_rows=int(get("fastaxo_batch_rows") or 8192),
            prefetch_bytes=int(get("fastaxo_prefetch_bytes") if get("fastaxo_prefetch_bytes") is not None
                               else 64 << 20),
            threads=get("fastaxo_threads"),
            peak_flops=get("fastaxo_peak_flops"),
            report=get("fastaxo_report"),
        )


_settings = Settings()
_said: set[str] = set()
_report_lock = threading.Lock()


def _say_once(key: str, msg: str, level: int = logging.WARNING) -> None:
    if key not in _said:
        _said.add(key)
        LOG.log(level, "fastaxo: %s", msg)


def report(event: str, path: str | None = None, **fields: Any) -> None:
    """Append ``{"event": event, **fields}`` to ``path`` (default: the ``fastaxo_report`` file),
    if one is set."""
    path = path or _settings.report or os.environ.get("FASTAXO_AXOLOTL_REPORT")
    if not path:
        return
    rec = {"event": event, "pid": os.getpid(), "time": time.time(), **fields}
    line = json.dumps(rec, default=_jsonable) + "\n"
    with _report_lock, open(path, "a") as fh:  # O_APPEND: whole lines from any process
        fh.write(line)


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _axolotl_version() -> tuple[int, int]:
    parts = str(getattr(_axolotl, "__version__", "0.0")).split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        return (0, 0)


def check_axolotl_version() -> None:
    """Raise a clear error outside the supported axolotl versions (0.19 to 0.21).

    ``FASTAXO_AXOLOTL_VERSION_CHECK=0`` turns the error into a warning (at your own risk: each
    replacement still checks the function it replaces and leaves Axolotl's own in place if
    that has changed)."""
    v = _axolotl_version()
    if SUPPORTED[0] <= v <= SUPPORTED[1]:
        return
    msg = (f"fastaxo's Axolotl plugin supports axolotl 0.19 to 0.21; this is axolotl "
           f"{getattr(_axolotl, '__version__', '?')}. Install a supported axolotl, or upgrade fastaxo.")
    if os.environ.get("FASTAXO_AXOLOTL_VERSION_CHECK", "1") == "0":
        _say_once("version", msg + " (FASTAXO_AXOLOTL_VERSION_CHECK=0: going on anyway)")
        return
    raise RuntimeError(msg)


# ---------------------------------------------------------------------------------------------
# exact dedupe: axolotl.utils.data.utils._deduplicate_dataset

class SeenHashes:
    """What the replaced ``_deduplicate_dataset`` returns as ``seen_hashes``: the rows kept so
    far, as a :class:`fastaxo.RowSet` (references to the datasets' Arrow rows, compared by
    value; about 50 bytes per row in C, not a Python set of hex strings).

    Axolotl only passes it back into the next call (train -> eval); ``len`` works, and
    iteration yields nothing comparable to Axolotl's ``sha256(str(row))`` hex strings, so it is
    not offered: handing it to Axolotl's own ``_deduplicate_dataset`` raises a clear error."""

    def __init__(self, rows: fastaxo.RowSet | None = None):
        self.rows = rows if rows is not None else fastaxo.RowSet()

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return True

    def __contains__(self, item: object) -> bool:
        raise TypeError("fastaxo's SeenHashes holds rows, not Axolotl's sha256(str(row)) hex strings; "
                        "only fastaxo's _deduplicate_dataset can use it")

    def add(self, item: object) -> None:
        self.__contains__(item)

    def __repr__(self) -> str:
        return f"SeenHashes({len(self)} rows)"


def _dedupe_columns_ok(dataset: Any) -> bool:
    try:
        fastaxo.hashing.as_rows(dataset.select(range(min(1, len(dataset)))), None)
        return True
    except (fastaxo.InvalidTypeError, fastaxo.InvalidInputError):
        return False


def select_rows(dataset: Any, keep: np.ndarray) -> Any:
    """``dataset.select(keep)`` for increasing ``keep`` with the same rows, order, format and
    type of result (a Dataset with an indices mapping), built in one step: datasets' own
    select hashes the index list for a fingerprint and writes it in 1,000-row batches
    (~13 ms for 90k rows, more than the dedupe itself). The fingerprint is derived from the
    parent's and the indices, so it is deterministic like datasets' own."""
    if len(keep) == len(dataset):
        return dataset  # nothing dropped (keep is 0..n-1): datasets would slice, the same rows
    from datasets import Dataset
    from datasets.table import InMemoryTable

    idx = np.asarray(keep, dtype=np.int64)
    if dataset._indices is not None:
        col = dataset._indices.column(0)
        phys = fastaxo._core.arrow.fixed_view(col.combine_chunks() if col.num_chunks != 1 else col.chunk(0))
        idx = phys[idx]
    # uint64 and int64 indices (< 2**63) have the same little-endian bytes: hash and keep them
    # as they are (every copy of 8 bytes a row is fresh memory, which faults in page by page)
    idx = np.ascontiguousarray(idx.view(np.uint64) if idx.dtype == np.int64 else idx.astype(np.uint64))
    if idx.dtype.byteorder == ">":  # pragma: no cover - big-endian hosts
        idx = idx.astype("<u8")
    h = hashlib.sha256(b"fastaxo-dedupe-select\0" + str(dataset._fingerprint).encode() + b"\0")
    h.update(memoryview(idx))
    fp = h.hexdigest()[:16]
    indices = InMemoryTable(pa.table({"indices": arrow.from_numpy(idx)}))
    out = Dataset(dataset._data, info=dataset.info.copy(), split=dataset.split, indices_table=indices,
                  fingerprint=fp)
    fmt = dataset.format
    out.set_format(type=fmt["type"], columns=fmt["columns"], output_all_columns=fmt["output_all_columns"],
                   **(fmt.get("format_kwargs") or {}))
    return out


def make_deduplicate_dataset(original):
    """The replacement for Axolotl's ``_deduplicate_dataset(dataset, seen_hashes=None)``."""

    @functools.wraps(original)
    def _deduplicate_dataset(dataset, seen_hashes=None):
        if seen_hashes is not None and not isinstance(seen_hashes, SeenHashes) and len(seen_hashes):
            _say_once("dedupe-foreign-seen", "dedupe: seen_hashes came from Axolotl's own dedupe; "
                      "using Axolotl's dedupe for this call")
            return original(dataset, seen_hashes)
        seen = seen_hashes if isinstance(seen_hashes, SeenHashes) else SeenHashes()
        t0 = time.perf_counter()
        try:
            res = fastaxo.dedupe(dataset, seen=seen.rows, num_threads=_settings.threads)
        except fastaxo.InvalidTypeError as exc:  # raised before any row is inserted
            if isinstance(seen_hashes, SeenHashes):
                raise
            _say_once("dedupe-types", f"dedupe: {exc}; using Axolotl's dedupe")
            return original(dataset, seen_hashes)
        t1 = time.perf_counter()
        out = select_rows(dataset, res.keep)
        t2 = time.perf_counter()
        LOG.info("fastaxo: dedupe kept %d of %d rows (compare %.3f s, select %.3f s)",
                 len(res.keep), res.n_rows, t1 - t0, t2 - t1)
        report("dedupe", rows_in=res.n_rows, rows_kept=len(res.keep), seconds=t2 - t0,
               cross=seen_hashes is not None, **seen.rows.stats)
        return out, seen

    _deduplicate_dataset.__fastaxo__ = True
    return _deduplicate_dataset


# ---------------------------------------------------------------------------------------------
# bin assignment: axolotl.utils.samplers.multipack.pack_parallel

def make_pack_parallel(original):
    """The replacement for Axolotl's ``pack_parallel``: same signature and contract (indices
    local to the array passed, every index exactly once, capacity and ``bin_size`` respected,
    groups of ``group_size`` packed independently, over-long sequences in a bin of their own)."""

    @functools.wraps(original)
    def pack_parallel(sequence_lengths, bin_capacity, group_size, bin_size, num_processes=None,
                      safe_mode=True, mp_start_method="fork"):
        lengths = np.asarray(sequence_lengths)
        if lengths.ndim != 1 or (lengths.size and lengths.dtype.kind not in "iu"):
            _say_once("pack-dtype", f"pack_parallel: lengths of dtype {lengths.dtype}, shape "
                      f"{lengths.shape}; using Axolotl's packer")
            return original(sequence_lengths, bin_capacity, group_size, bin_size, num_processes,
                            safe_mode, mp_start_method)
        t0 = time.perf_counter()
        bins = fastaxo.pack_bins(lengths, int(bin_capacity), strategy="ff", group_size=int(group_size),
                                 max_rows_per_bin=int(bin_size), overflow="isolate",
                                 num_threads=_settings.threads)
        out = bins.to_list()
        dt = time.perf_counter() - t0
        LOG.debug("fastaxo: packed %d sequences into %d bins in %.4f s", len(lengths), len(out), dt)
        _report_pack("pack_parallel", lengths, bins.indices, bins.offsets, bin_capacity, group_size, bin_size, dt)
        return out

    pack_parallel.__fastaxo__ = True
    return pack_parallel


def _report_pack(via: str, lengths: np.ndarray, ids: np.ndarray, offsets: np.ndarray, capacity: int,
                 group_size: int, bin_size: int, seconds: float) -> None:
    """A "pack" report event with the contract checks (only when a report file is set): bins
    ``ids[offsets[b]:offsets[b+1]]`` of rows of ``lengths``. Every row is expected once when
    as many were packed as there are rows (a permutation); otherwise that check is None."""
    if not (_settings.report or os.environ.get("FASTAXO_AXOLOTL_REPORT")):
        return
    nbins = len(offsets) - 1
    counts = np.bincount(ids, minlength=len(lengths)) if len(ids) else np.zeros(0)
    per_bin = np.add.reduceat(lengths[ids].astype(np.int64), offsets[:-1]) if nbins else np.zeros(0, dtype=np.int64)
    sizes = np.diff(offsets)
    over = per_bin > capacity
    report("pack", via=via, sequences=len(ids), bins=nbins, tokens=int(lengths[ids].sum(dtype=np.int64)),
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

    def __init__(self, ids: np.ndarray, offsets: np.ndarray, batch_size: int, start: int, stop: int):
        self._ids, self._offsets, self._bs, self._start, self._stop = ids, offsets, batch_size, start, stop

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
                return PackedBatches(self._ids, self._offsets, self._bs, self._start + a, self._start + max(a, b))
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
        pk = fastaxo._core.backend.pack_ext
        if pk is not None and 1 <= n < pk.RANDPERM_MAX_N and _SAMPLER_CHECK and _SAMPLER_CHECK[0]:
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
    """``list(RandomSampler(...))`` (replacement=False) as an int64 array (see _random_sampler_draws)."""
    indices, seed = _random_sampler_draws(sampler)
    if indices is None:
        return fastaxo._core.backend.pack_ext.randperm_mt19937(seed, len(sampler.data_source), sampler.num_samples)
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
                _say_once("sampler-check", "packing: torch's RandomSampler draws differently from what fastaxo "
                          "replicates; reading the sampler as a list instead")
        if _SAMPLER_CHECK[0]:
            return _random_sampler_draws(sampler)
    return np.fromiter(iter(sampler), dtype=np.int64), 0


def _sampler_indices(sampler: Any) -> np.ndarray:
    """``list(sampler)`` as an int64 array."""
    indices, seed = _sampler_draws(sampler)
    if indices is None:
        return fastaxo._core.backend.pack_ext.randperm_mt19937(seed, len(sampler.data_source), sampler.num_samples)
    return indices


# Scratch buffers of _pack_in_sampler_order, kept between calls: a train start packs ~11 times,
# and memory freed and taken again faults in every page anew (~1 ms per MiB on these VMs).
# A list of work lists; a call takes one (or makes one) and puts it back.
_PACK_WORK: list[list[Any]] = []


def _pack_in_sampler_order(sampler: Any, lengths: np.ndarray, cap: int, group_size: int, bin_size: int,
                           nt: int) -> tuple[np.ndarray, np.ndarray, Any]:
    """Axolotl's bins for ``lengths[list(sampler)]`` (pack_parallel: first fit, groups, bin_size,
    over-long rows alone) as ``(ids, bin_offsets, total_tokens)``: dataset indices in bin order.

    The fast path reads the lengths in place through the sampler's order (no gathered copy);
    for a RandomSampler replayed from a seed, the shuffle runs on one core while the first fit
    packs behind it on the other (csrc/fx_sync.h). ``total_tokens`` is ``lengths[indices].sum()``
    as Axolotl computes it (a NumPy integer)."""
    pk = fastaxo._core.backend.pack_ext
    indices, seed = _sampler_draws(sampler)
    n_src = len(sampler.data_source) if indices is None else 0  # (a seed only comes from a RandomSampler)
    count = len(indices) if indices is not None else int(sampler.num_samples)
    fast = (pk is not None and lengths.dtype == np.int32 and lengths.ndim == 1 and lengths.flags.c_contiguous
            and count > 0 and int(lengths.min()) >= 0)
    if fast and indices is None:
        fast = n_src <= len(lengths)
    elif fast:
        fast = int(indices.min()) >= 0 and int(indices.max()) < len(lengths)
    if not fast:  # numpy, or any input the C path does not take: Axolotl's own indexing and errors
        if indices is None:
            indices = pk.randperm_mt19937(seed, n_src, count)
        sel = lengths[indices]
        bins = fastaxo.pack_bins(sel, cap, strategy="ff", group_size=group_size, max_rows_per_bin=bin_size,
                                 overflow="isolate", num_threads=nt)
        return indices[bins.indices], bins.offsets, sel.sum()
    full = indices is None and count == n_src == len(lengths)
    total = lengths.sum() if full else None
    est = int(total) if total is not None else int(lengths.sum(dtype=np.int64)) * count // max(len(lengths), 1)
    groups = -(-count // group_size)
    hint = est // cap // groups + est // cap // groups // 8 + 8
    work = _PACK_WORK.pop() if _PACK_WORK else []
    try:
        status, bad, ids, offsets = pk.ff_in_order(lengths, indices, seed, count, cap, bin_size, True, group_size,
                                                   hint, nt, work)
    finally:
        _PACK_WORK.append(work)
    check_pack_status(pk, status, kernel="fastaxo packing", items=count, item=bad)
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
        if self._batches is not None or self.sequential or getattr(self, "label_counts", None) is not None:
            return original(self, set_stats)
        t0 = time.perf_counter()
        self.label_metrics = None
        self._label_metrics_logged = False
        cap = int(self.batch_max_len)
        bin_size = int(self.bin_size or self.batch_max_len)
        group_size = int(self.group_size)
        nt = resolve_num_threads(_settings.threads)
        ids, offsets, total_used = _pack_in_sampler_order(self.sampler, self.lengths, cap, group_size, bin_size, nt)
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
            self._log_label_metrics()
        self._batches = batches
        dt = time.perf_counter() - t0
        LOG.debug("fastaxo: %d sequences -> %d bins -> %d batches in %.4f s", len(ids), nbins, nb, dt)
        _report_pack("generate_batches", self.lengths, ids, offsets, cap, group_size, bin_size, dt)
        return batches

    generate_batches.__fastaxo__ = True
    return generate_batches


# ---------------------------------------------------------------------------------------------
# patching Axolotl's module attributes (callers look them up at call time)

_TARGETS = {
    "dedupe": [("axolotl.utils.data.utils", "_deduplicate_dataset", make_deduplicate_dataset,
                ("dataset", "seen_hashes"))],
    "packing": [("axolotl.utils.samplers.multipack", "pack_parallel", make_pack_parallel,
                 ("sequence_lengths", "bin_capacity", "group_size", "bin_size")),
                ("axolotl.utils.samplers.multipack", "MultipackBatchSampler.generate_batches",
                 make_generate_batches, ("self", "set_stats"))],
}
_originals: dict[tuple[str, str], tuple[Any, str, Any]] = {}


def patch_axolotl(parts=("dedupe", "packing")) -> list[str]:
    """Replace Axolotl's functions for ``parts``; returns the parts replaced. A function whose
    signature is not the one fastaxo was built against is left alone (said once in the log)."""
    import importlib
    import inspect

    done = []
    for part in parts:
        ok = False
        for modname, attr, factory, params in _TARGETS[part]:
            if (part, attr) in _originals:
                ok = True
                continue
            try:
                owner = importlib.import_module(modname)
                *path, name = attr.split(".")
                for p in path:
                    owner = getattr(owner, p)
                fn = getattr(owner, name)
                names = list(inspect.signature(fn).parameters)
            except (ImportError, AttributeError, TypeError, ValueError) as exc:
                _say_once(f"missing-{attr}", f"{part}: {modname}.{attr} not found ({exc}); Axolotl's own code stays")
                continue
            if names[: len(params)] != list(params):
                _say_once(f"sig-{attr}", f"{part}: {modname}.{attr}{inspect.signature(fn)} is not the "
                          "signature fastaxo replaces; Axolotl's own code stays")
                continue
            _originals[(part, attr)] = (owner, name, fn)
            setattr(owner, name, factory(fn))
            ok = True
        if ok:
            done.append(part)
    return done


def unpatch_axolotl() -> None:
    """Put Axolotl's own functions back."""
    while _originals:
        _, (mod, attr, fn) = _originals.popitem()
        setattr(mod, attr, fn)


@contextlib.contextmanager
def patched(parts=("dedupe", "packing"), **settings: Any):
    """``with patched(): ...`` runs Axolotl with fastaxo's dedupe and packer (tests, benchmarks)."""
    global _settings
    old = _settings
    _settings = Settings(**settings) if settings else old
    patch_axolotl(parts)
    try:
        yield
    finally:
        unpatch_axolotl()
        _settings = old


# ---------------------------------------------------------------------------------------------
# the plugin

def _is_listed(cfg: Any) -> bool:
    plugins = (cfg.get("plugins") if hasattr(cfg, "get") else None) or []
    return any(str(p).strip() == PLUGIN_NAME for p in plugins)


def _any_key(cfg: Any) -> bool:
    return any(str(k).startswith("fastaxo_") and v is not None for k, v in dict(cfg).items())


class FastaxoPlugin(BasePlugin):
    """Axolotl plugin: fastaxo's dedupe, packer, collator, streaming loader and loader health.

    Listed under ``plugins:`` it turns on dedupe, packing, collator and loader health (each
    ``fastaxo_*: false`` switches one off); ``fastaxo_streaming: true`` adds the streaming
    loader. If it is loaded without being listed (an ``axolotl.plugins`` entry point), every
    hook does nothing unless a ``fastaxo_*`` key is set.
    """

    def __init__(self):
        super().__init__()
        self.active = False
        self.settings = Settings()

    # -- config ---------------------------------------------------------------------------
    def get_input_args(self) -> str:
        return "fastaxo.integrations.axolotl.FastaxoArgs"

    def register(self, cfg: dict):
        global _settings
        self.active = _is_listed(cfg) or _any_key(cfg)
        if not self.active:
            return
        check_axolotl_version()
        self.settings = _settings = Settings.from_cfg(cfg)
        parts = [p for p in ("dedupe", "packing") if getattr(self.settings, p)]
        done = patch_axolotl(parts)
        LOG.info("fastaxo %s: plugin active (%s)", fastaxo.__version__, ", ".join(
            [f"{p}={'on' if p in done else 'off'}" for p in ("dedupe", "packing")]
            + [f"collator={'on' if self.settings.collator else 'off'}",
               f"streaming={'on' if self.settings.streaming else 'off'}",
               f"loader_health={'on' if self.settings.loader_health else 'off'}"]))
        report("register", axolotl=getattr(_axolotl, "__version__", None), fastaxo=fastaxo.__version__,
               patched=done, settings=self.settings.__dict__)

    def on_config_validation_error(self, cfg: dict):
        unpatch_axolotl()
        self.active = False

    def post_train_unload(self, cfg):
        if self.active:
            unpatch_axolotl()
        return None

    # -- data -----------------------------------------------------------------------------
    def load_datasets(self, cfg, preprocess: bool = False):
        if not (self.active and self.settings.streaming):
            return None
        from fastaxo.integrations._axolotl_stream import load_datasets_streaming

        return load_datasets_streaming(cfg, preprocess, self.settings, say_once=_say_once, report=report)

    def get_collator_cls_and_kwargs(self, cfg, is_eval: bool = False):
        if not (self.active and self.settings.collator):
            return None
        from fastaxo.integrations._axolotl_collator import collator_for

        return collator_for(cfg, is_eval, self.settings, say_once=_say_once)

    # -- training -------------------------------------------------------------------------
    def add_callbacks_post_trainer(self, cfg, trainer):
        if not (self.active and self.settings.loader_health):
            return []
        from fastaxo.integrations._axolotl_health import LoaderHealthCallback

        cb = LoaderHealthCallback(trainer, cfg, self.settings, report=report)
        return [cb]


__all__ = ["FastaxoPlugin", "FastaxoArgs", "SeenHashes", "patch_axolotl", "unpatch_axolotl", "patched",
           "check_axolotl_version", "report", "FastaxoCollator"]


def __getattr__(name: str):
    if name == "FastaxoCollator":
        from fastaxo.integrations._axolotl_collator import FastaxoCollator

        return FastaxoCollator
    if name == "LoaderHealthCallback":
        from fastaxo.integrations._axolotl_health import LoaderHealthCallback

        return LoaderHealthCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
