"""Data generators, plain-Python / NumPy baselines and output checks for bench_pack.py and bench_pad.py.

Nothing here imports fastaxo: the baselines are written independently of it, the way a
competent Python user would write them, and must reproduce its documented output exactly:

* bin assignment (`py_pack_bins`): BFD / FFD sort by length descending, ties by index
  ascending; BFD puts a row into the open bin with the smallest remaining space >= its length,
  ties -> the bin that most recently reached that remaining space (LIFO; `fifo=True` gives
  TRL's rule, the bin that reached it first); FFD / FF the earliest-created bin that fits; NF
  only the newest bin; a bin holding `max_rows_per_bin` rows is full; bins in creation order,
  rows in insertion order; with `group_size`, consecutive groups are packed independently.
* materialisation (`py_pack_build`, `numpy_pack_build`): padded rows of `capacity` tokens:
  input_ids (pad_id tail), labels (-100 tail), position_ids (0.. per sequence, the pad tail
  counts 0, 1, 2, ... as a segment of its own), attention_mask (segment ids 1..k, 0 on the
  tail), cu_seqlens (int32 boundaries over the flattened rows, the tail a segment).
* padding (`py_pad`, `numpy_pad`): right padding to the longest row (or `pad_to`),
  input_ids / attention_mask (1/0) / labels.

Data: `Shape.lengths(n)` draws all n lengths from a fixed seed (cheap even at 10M);
`Shape.rows(lengths, start, stop)` generates the token rows [start, stop) in fixed blocks of
65,536 rows, each from its own seed, so any row range is the same data whatever else is
generated, and 10M-row inputs can be produced group by group.

Harness (shared by both scripts): `run_grouped` runs a case group of rows by group: each
implementation once (warm-up, and SHA-256 of its output arrays for the identity checks: values
as int64, chunk-invariant, plus every row's width), then all of them interleaved, times summed
over groups per round; `touch_memory` / `interleaved_prefault` give every timed call the same
memory state (see touch_memory); `memcpy_rates` is the bandwidth reference.
"""

from __future__ import annotations

import hashlib
import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

# the padding and packing baselines live in fastaxo._bench.baselines (the matrix measures the same
# code); bench_pack.py and bench_pad.py reach them through this module
from fastaxo._bench.baselines import numpy_pad, py_pack_build, py_pad, py_pad_lists, torch_pad  # noqa: F401
from fastaxo._bench.spec import LABEL_PAD_ID, PAD_ID

VOCAB = 32000
PROMPT_FRACTION = 0.3  # labels: the first floor(0.3 * len) tokens of each row are -100
BLOCK_ROWS = 65536
SEED = 20261121


# --------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True)
class Shape:
    name: str
    capacity: int  # bin capacity (packing) / max length
    kind: str  # "uniform" or "lognormal"
    lo: int = 1
    hi: int = 1
    mean: float = 0.0
    sigma: float = 0.0
    index: int = 0  # seeds differ per shape

    def describe(self) -> str:
        if self.kind == "uniform":
            return f"{self.name}: uniform {self.lo}-{self.hi} tokens, capacity {self.capacity}"
        return (f"{self.name}: lognormal mean ~{self.mean:.0f} (sigma {self.sigma}) clipped to "
                f"[{self.lo}, {self.hi}], capacity {self.capacity}")

    def lengths(self, n: int) -> np.ndarray:
        """n sequence lengths (int64), from a fixed seed."""
        rng = np.random.default_rng([SEED, self.index, 0])
        if self.kind == "uniform":
            return rng.integers(self.lo, self.hi + 1, n, dtype=np.int64)
        mu = math.log(self.mean) - self.sigma**2 / 2
        return np.clip(rng.lognormal(mu, self.sigma, n), self.lo, self.hi).astype(np.int64)

    def rows(self, lengths: np.ndarray, start: int = 0, stop: int | None = None) -> Rows:
        """Token rows [start, stop) of the data set whose lengths are `lengths`."""
        stop = len(lengths) if stop is None else stop
        lens = np.ascontiguousarray(lengths[start:stop], dtype=np.int64)
        offsets = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        values = np.empty(int(offsets[-1]), dtype=np.int32)
        labels = np.empty_like(values)
        b0, b1 = start // BLOCK_ROWS, (stop - 1) // BLOCK_ROWS if stop > start else start // BLOCK_ROWS - 1
        for b in range(b0, b1 + 1):
            r0, r1 = b * BLOCK_ROWS, min((b + 1) * BLOCK_ROWS, len(lengths))
            blens = lengths[r0:r1]
            rng = np.random.default_rng([SEED, self.index, 1, b])
            bvals = rng.integers(0, VOCAB, int(blens.sum()), dtype=np.int32)
            boffs = np.zeros(len(blens) + 1, dtype=np.int64)
            np.cumsum(blens, out=boffs[1:])
            # the rows of this block inside [start, stop)
            s, e = max(r0, start), min(r1, stop)
            src = bvals[boffs[s - r0]: boffs[e - r0]]
            dst0 = offsets[s - start]
            values[dst0: dst0 + len(src)] = src
            lab = src.copy()
            sl = blens[s - r0: e - r0]
            so = boffs[s - r0: e - r0] - boffs[s - r0]
            prompt = (sl * 3) // 10
            pos = np.arange(len(src), dtype=np.int64) - np.repeat(so, sl)
            lab[pos < np.repeat(prompt, sl)] = LABEL_PAD_ID
            labels[dst0: dst0 + len(src)] = lab
        return Rows(values, labels, offsets, lens)


SHAPES = {
    "peer": Shape("peer", 512, "uniform", lo=10, hi=100, index=1),
    "chat": Shape("chat", 4096, "lognormal", lo=1, hi=4096, mean=300.0, sigma=0.8, index=2),
}


@dataclass
class Rows:
    """A ragged int32 token column (+ labels) as flat values and int64 offsets (starting at 0)."""

    values: np.ndarray
    labels: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def tokens(self) -> int:
        return int(self.offsets[-1])

    def slice(self, start: int, stop: int) -> Rows:
        o = self.offsets
        a, b = int(o[start]), int(o[stop])
        return Rows(self.values[a:b], self.labels[a:b], o[start: stop + 1] - a, self.lengths[start:stop])

    def arrow(self, which: str = "input_ids"):
        import pyarrow as pa

        vals = self.values if which == "input_ids" else self.labels
        if self.tokens < 2**31:
            return pa.ListArray.from_arrays(pa.array(self.offsets.astype(np.int32)), pa.array(vals))
        return pa.LargeListArray.from_arrays(pa.array(self.offsets), pa.array(vals))

    def table(self):
        import pyarrow as pa

        return pa.table({"input_ids": self.arrow("input_ids"), "labels": self.arrow("labels")})

    def arrays(self, which: str = "input_ids") -> list[np.ndarray]:
        """One NumPy view per row (no copy)."""
        vals = self.values if which == "input_ids" else self.labels
        o = self.offsets.tolist()
        return [vals[o[i]: o[i + 1]] for i in range(len(o) - 1)]

    def lists(self, which: str = "input_ids") -> list[list[int]]:
        vals = (self.values if which == "input_ids" else self.labels).tolist()
        o = self.offsets.tolist()
        return [vals[o[i]: o[i + 1]] for i in range(len(o) - 1)]


def plan_groups(lengths: np.ndarray, max_tokens: int) -> list[tuple[int, int]]:
    """Split rows into consecutive groups of at most max_tokens tokens (at least one row each)."""
    csum = np.cumsum(lengths)
    groups, start, base = [], 0, 0
    n = len(lengths)
    while start < n:
        stop = int(np.searchsorted(csum, base + max_tokens, side="right"))
        stop = max(stop, start + 1)
        groups.append((start, stop))
        base = int(csum[stop - 1])
        start = stop
    return groups


# --------------------------------------------------------------------------------------------
# Bin assignment, plain Python


def _bfd(order: Iterable[int], lengths: list[int], capacity: int, max_rows: int | None,
         fifo: bool) -> list[list[int]]:
    keys: list[int] = []  # sorted distinct remaining spaces that have an open bin
    stacks: dict[int, Any] = {}  # remaining space -> bins that have it (stack, or queue for fifo)
    bins: list[list[int]] = []
    new_stack = deque if fifo else list
    for i in order:
        n = lengths[i]
        p = bisect_left(keys, n)
        if p < len(keys):
            r = keys[p]
            st = stacks[r]
            b = st.popleft() if fifo else st.pop()
            if not st:
                del keys[p]
                del stacks[r]
            rows = bins[b]
            rows.append(i)
            r -= n
        else:
            if n > capacity:
                raise ValueError(f"row {i} has {n} tokens > capacity {capacity}")
            b = len(bins)
            rows = [i]
            bins.append(rows)
            r = capacity - n
        if max_rows is None or len(rows) < max_rows:
            st = stacks.get(r)
            if st is None:
                stacks[r] = new_stack([b])
                insort(keys, r)
            else:
                st.append(b)
    return bins


def _first_fit(order: Iterable[int], n_items: int, lengths: list[int], capacity: int,
               max_rows: int | None) -> list[list[int]]:
    """First fit with a max segment tree over bins (remaining space; -1 = unused or full)."""
    size = 1
    while size < max(n_items, 1):
        size <<= 1
    tree = [-1] * (2 * size)
    bins: list[list[int]] = []
    for i in order:
        n = lengths[i]
        if tree[1] >= n:
            j = 1
            while j < size:
                j <<= 1
                if tree[j] < n:
                    j += 1
            rows = bins[j - size]
            rows.append(i)
            r = tree[j] - n
        else:
            if n > capacity:
                raise ValueError(f"row {i} has {n} tokens > capacity {capacity}")
            j = len(bins) + size
            rows = [i]
            bins.append(rows)
            r = capacity - n
        if max_rows is not None and len(rows) >= max_rows:
            r = -1
        tree[j] = r
        while j > 1:
            j >>= 1
            a, c = tree[2 * j], tree[2 * j + 1]
            m = a if a >= c else c
            if tree[j] == m:
                break
            tree[j] = m
    return bins


def _next_fit(order: Iterable[int], lengths: list[int], capacity: int, max_rows: int | None) -> list[list[int]]:
    bins: list[list[int]] = []
    rows: list[int] = []
    r = -1
    for i in order:
        n = lengths[i]
        if bins and n <= r and (max_rows is None or len(rows) < max_rows):
            rows.append(i)
            r -= n
        else:
            if n > capacity:
                raise ValueError(f"row {i} has {n} tokens > capacity {capacity}")
            rows = [i]
            bins.append(rows)
            r = capacity - n
    return bins


def py_pack_bins(lengths: list[int], capacity: int, strategy: str = "bfd", max_rows_per_bin: int | None = None,
                 group_size: int | None = None, fifo: bool = False) -> list[list[int]]:
    """Plain-Python bin assignment over a list of ints -> list of bins (lists of row indices)."""
    n = len(lengths)
    step = group_size or max(n, 1)
    out: list[list[int]] = []
    for g0 in range(0, n, step):
        g1 = min(n, g0 + step)
        rng = range(g0, g1)
        if strategy in ("bfd", "ffd"):
            order: Iterable[int] = sorted(rng, key=lengths.__getitem__, reverse=True)  # stable: ties by index
        else:
            order = rng
        if strategy == "bfd":
            out += _bfd(order, lengths, capacity, max_rows_per_bin, fifo)
        elif strategy in ("ffd", "ff"):
            out += _first_fit(order, g1 - g0, lengths, capacity, max_rows_per_bin)
        elif strategy == "nf":
            out += _next_fit(order, lengths, capacity, max_rows_per_bin)
        else:
            raise ValueError(strategy)
    return out


def bins_to_arrays(bins: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """list of bins -> (indices int64, offsets int64 n_bins+1)."""
    sizes = np.fromiter((len(b) for b in bins), dtype=np.int64, count=len(bins))
    offsets = np.zeros(len(bins) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    idx = np.fromiter((i for b in bins for i in b), dtype=np.int64, count=int(offsets[-1]))
    return idx, offsets


def bins_equal(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return bool(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))


def bin_stats(lengths: np.ndarray, n_bins: int, capacity: int, tokens: int | None = None) -> dict[str, Any]:
    tokens = int(lengths.sum()) if tokens is None else tokens
    return {"bins": int(n_bins), "tokens": tokens, "lower_bound": -(-tokens // capacity),
            "efficiency": tokens / (n_bins * capacity) if n_bins else 0.0}


# --------------------------------------------------------------------------------------------
# Materialisation


def numpy_pack_build(rows: Rows, idx: np.ndarray, boff: np.ndarray, capacity: int, b0: int = 0, b1: int | None = None,
                     pad_id: int = PAD_ID, label_pad_id: int = LABEL_PAD_ID) -> dict[str, np.ndarray]:
    """NumPy per-bin copies of bins [b0, b1): np.concatenate of the row slices into preallocated
    rows; position / segment ids with np.repeat per bin. cu_seqlens relative to bin b0."""
    b1 = len(boff) - 1 if b1 is None else b1
    nb = b1 - b0
    vals, labs, offs, lens_all = rows.values, rows.labels, rows.offsets, rows.lengths
    ids = np.full((nb, capacity), pad_id, dtype=np.int64)
    lab = np.full((nb, capacity), label_pad_id, dtype=np.int64)
    pos = np.empty((nb, capacity), dtype=np.int64)
    seg = np.zeros((nb, capacity), dtype=np.int64)
    ar = np.arange(capacity, dtype=np.int64)
    cu_parts = [np.zeros(1, dtype=np.int64)]
    for r, b in enumerate(range(b0, b1)):
        sel = idx[boff[b]: boff[b + 1]].tolist()
        lens = lens_all[sel]
        k = int(lens.sum())
        ids[r, :k] = np.concatenate([vals[offs[i]: offs[i + 1]] for i in sel])
        lab[r, :k] = np.concatenate([labs[offs[i]: offs[i + 1]] for i in sel])
        ends = np.cumsum(lens)
        pos[r, :k] = ar[:k] - np.repeat(ends - lens, lens)
        pos[r, k:] = ar[: capacity - k]
        seg[r, :k] = np.repeat(np.arange(1, len(sel) + 1), lens)
        ends += r * capacity
        cu_parts.append(ends if k == capacity else np.append(ends, (r + 1) * capacity))
    return {"input_ids": ids, "labels": lab, "position_ids": pos, "attention_mask": seg,
            "cu_seqlens": np.concatenate(cu_parts).astype(np.int32)}


# --------------------------------------------------------------------------------------------
# Padding


def local_tokenizer():
    """A tokenizer built locally (no hub download): only pad / unk matter to the collator."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"<pad>": PAD_ID, "<unk>": 1}, unk_token="<unk>"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>")


# --------------------------------------------------------------------------------------------
# Output checks


def _as_np(a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "numpy"):  # torch
        return a.numpy()
    return np.asarray(a)


class Digest:
    """SHA-256 of each array of a (possibly chunked) output, values normalised to int64.

    Chunks of rows are fed in order; cu_seqlens of later chunks are made global (shifted by the
    rows already seen when a chunk's own cu_seqlens starts at 0; its leading boundary dropped)."""

    def __init__(self, keys: Iterable[str]):
        self.keys = list(keys)
        self.h = {k: hashlib.sha256() for k in self.keys}
        self.widths = hashlib.sha256()  # the width of every row of the 2-D arrays, in order
        self.rows = 0
        self.width: int | None = None
        self.bytes = 0

    def update(self, chunk: dict[str, Any]) -> None:
        first = self.rows == 0
        n_rows = None
        for k in self.keys:
            a = _as_np(chunk[k])
            self.bytes += a.nbytes
            if k == "cu_seqlens":
                a = a.astype(np.int64)
                if not first:
                    if len(a) and a[0] == 0:
                        a = a + self.rows * (self.width or 0)
                    a = a[1:]
            else:
                if n_rows is None and a.ndim == 2:
                    self.widths.update(np.full(a.shape[0], a.shape[1], dtype=np.int64).data)
                n_rows = a.shape[0]
                if a.ndim == 2:
                    self.width = a.shape[1]
            step = max(1, (1 << 24) // max(1, a.size // max(1, len(a))))
            for s in range(0, len(a), step):
                self.h[k].update(np.ascontiguousarray(a[s: s + step], dtype=np.int64).data)
        self.rows += n_rows or 0

    def result(self) -> dict[str, str]:
        return ({k: v.hexdigest()[:16] for k, v in self.h.items()}
                | {"rows": str(self.rows), "widths": self.widths.hexdigest()[:16]})


def nbytes_of(chunk: dict[str, Any], keys: Iterable[str] | None = None) -> int:
    keys = chunk.keys() if keys is None else keys
    return sum(_as_np(chunk[k]).nbytes for k in keys)


# --------------------------------------------------------------------------------------------
# Small helpers


def iter_row_chunks(n: int, rows_per_chunk: int) -> Iterator[tuple[int, int]]:
    for s in range(0, n, max(1, rows_per_chunk)):
        yield s, min(n, s + rows_per_chunk)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    import time

    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# --------------------------------------------------------------------------------------------
# A case run group by group: warm-up = check run (digests), then interleaved timing per group


@dataclass
class Impl:
    produce: Callable[[], Iterator[dict]]  # -> output chunks (dicts of arrays, tensors or lists)
    keys: list[str]  # arrays hashed for the checks ([] = not comparable)
    ref: str | None = None  # the fastaxo implementation its time is compared with
    check_ref: str | None = None  # the implementation whose output it must equal (on `keys`)


@dataclass
class GroupedRun:
    per_rep: dict[str, list[float]]
    digests: dict[str, dict[str, str]]
    impls: dict[str, Impl]
    out_bytes: dict[str, int]
    out_rows: dict[str, int]
    rows: int
    tokens: int

    def median(self, name: str) -> float:
        import statistics

        return statistics.median(self.per_rep[name])

    def same(self, name: str) -> bool | None:
        im = self.impls[name]
        if im.check_ref not in self.digests or not im.keys:
            return None
        mine, theirs = self.digests[name], self.digests[im.check_ref]
        return all(mine[k] == theirs[k] for k in im.keys) and all(mine[k] == theirs[k] for k in ("rows", "widths"))


def _chunk_bytes_rows(chunk: dict[str, Any], keys: list[str]) -> tuple[int, int]:
    first = next(iter(chunk.values()))
    n_rows = len(first)
    if keys:
        return nbytes_of(chunk, keys), n_rows
    total = 0
    for v in chunk.values():  # lists of lists: counted as the int64 arrays they stand for
        total += 8 * (sum(len(r) for r in v) if len(v) and isinstance(v[0], list) else _as_np(v).size)
    return total, n_rows


def touch_memory(nbytes: int) -> None:
    """Allocate, write and free nbytes: the next allocations get pages the VM has just backed.

    On the VMs these benchmarks run on, memory freed for more than about a second is handed back
    to the hypervisor, and touching it again runs at 0.3-2 GB/s instead of 4-7 GB/s: without this,
    an implementation's "fresh memory" cost depends on how long the one before it ran."""
    if nbytes >= 8:
        a = np.ones(nbytes // 8, dtype=np.int64)
        del a


def interleaved_prefault(fns: dict[str, Callable[[], Any]], reps: int,
                         prefault_bytes: int = 0) -> dict[str, list[float]]:
    """Like _common.interleaved (round-robin, `reps` rounds), with touch_memory(prefault_bytes),
    untimed, before every call."""
    import time

    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            touch_memory(prefault_bytes)
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def run_grouped(groups: list[tuple[int, int]], make_impls: Callable[[int, int], tuple[dict[str, Impl], int]], reps: int,
                prefault_max: int = 0) -> GroupedRun:
    """For each group of rows: build the implementations, run each once (warm-up; SHA-256 of its
    arrays for the checks), then time them interleaved; times are summed over groups per round.
    make_impls(g0, g1) -> (implementations over rows [g0, g1), tokens in those rows). Before each
    timed call, up to prefault_max bytes (the largest output chunk) are touched (untimed)."""
    import gc

    per_rep: dict[str, list[float]] = {}
    digests: dict[str, Digest] = {}
    impls_seen: dict[str, Impl] = {}
    out_bytes: dict[str, int] = {}
    out_rows: dict[str, int] = {}
    tokens = 0
    for g0, g1 in groups:
        impls, n_tok = make_impls(g0, g1)
        tokens += n_tok
        largest_chunk = 0  # the most output alive at once (chunks are freed one by one)
        for name, im in impls.items():
            impls_seen[name] = im
            d = digests.setdefault(name, Digest(im.keys))
            for chunk in im.produce():
                chunk_bytes = 0
                for part in ([chunk] if isinstance(chunk, Mapping) else chunk):
                    if im.keys:
                        d.update(part)
                    b, r = _chunk_bytes_rows(part, im.keys)
                    chunk_bytes += b
                    out_bytes[name] = out_bytes.get(name, 0) + b
                    out_rows[name] = out_rows.get(name, 0) + r
                largest_chunk = max(largest_chunk, chunk_bytes)
                del chunk
            gc.collect()
        fns = {name: (lambda p=im.produce: [None for _ in p()]) for name, im in impls.items()}
        times = interleaved_prefault(fns, reps, min(largest_chunk, prefault_max))
        for name, ts in times.items():
            acc = per_rep.setdefault(name, [0.0] * reps)
            for i, t in enumerate(ts):
                acc[i] += t
        del impls, fns
        gc.collect()
    return GroupedRun(per_rep, {k: d.result() for k, d in digests.items()}, impls_seen, out_bytes, out_rows,
                      groups[-1][1] - groups[0][0] if groups else 0, tokens)


def memcpy_rates(nbytes: int, reps: int, prefault_max: int = 0) -> dict[str, float]:
    """Bytes per second of np.copyto of an int64 buffer of `nbytes`, into fresh and into reused memory
    (with the same untimed touch_memory before each call as the implementations get)."""
    import gc
    import statistics

    n = max(1, nbytes // 8)
    src = np.ones(n, dtype=np.int64)
    dst = np.empty_like(src)
    np.copyto(dst, src)

    def fresh():
        d = np.empty_like(src)
        np.copyto(d, src)

    mt = interleaved_prefault({"memcpy into fresh memory": fresh,
                               "memcpy into reused memory": lambda: np.copyto(dst, src)},
                              max(reps, 5), min(n * 8, prefault_max))
    del src, dst
    gc.collect()
    return {k: n * 8 / statistics.median(v) for k, v in mt.items()}


# --------------------------------------------------------------------------------------------
# Loading the implementations (shared by bench_pack.py and bench_pad.py)


def import_fastaxo(skip: bool, names: tuple[str, ...], note: Callable[[str], None]) -> Any:
    """fastaxo when it has every name in `names`, else None (with a note saying why)."""
    if skip:
        note("--no-fastaxo: only the baselines run")
        return None
    try:
        import fastaxo as fx
    except ImportError as exc:
        note(f"fastaxo not importable ({exc!r}): only the baselines run")
        return None
    if all(hasattr(fx, n) for n in names):
        return fx
    note(f"fastaxo {fx.__version__} has no {' / '.join(names)} yet: only the baselines run")
    return None


def import_fast_axolotl(note: Callable[[str], None]) -> Any:
    """fast-axolotl, or None. Import axolotl before calling this: its import shim hides the
    real axolotl package otherwise."""
    try:
        import fast_axolotl as fa
    except ImportError:  # pragma: no cover
        note("fast-axolotl not installed: its rows are skipped")
        return None
    return fa


# --------------------------------------------------------------------------------------------
# Report helpers


def fmt_n(n: int) -> str:
    for div, suf in ((1_000_000, "M"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suf}"
    return f"{n:,}"


def rate(x: float) -> str:
    if x >= 1e9:
        return f"{x / 1e9:,.2f}G"
    if x >= 1e6:
        return f"{x / 1e6:,.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:,.1f}k"
    return f"{x:,.1f}"


def ms(s: float) -> str:
    return f"{s * 1e3:,.1f}" if s < 10 else f"{s * 1e3:,.0f}"


def yesno(x: bool | None) -> str:
    return "-" if x is None else ("yes" if x else "NO")


class Table:
    """Rows of one printed table, plus the check lines printed under it."""

    def __init__(self, headers: list[str]):
        self.headers = headers
        self.rows: list[list[str]] = []
        self.checks: list[str] = []

    def text(self) -> str:
        from _common import fmt_table

        body = fmt_table(self.headers, self.rows) if self.rows else "(nothing ran)"
        if self.checks:
            body += "\n\nChecks:\n" + "\n".join(f"- {c}" for c in self.checks)
        return body


def versions(mods: Iterable[str]) -> str:
    import importlib.metadata as md

    out = []
    for mod in mods:
        try:
            out.append(f"{mod}={md.version(mod)}")
        except Exception:
            out.append(f"{mod}=-")
    return " ".join(out)
