"""`fastaxo bench`: the benchmark matrix (kernels x implementations x sizes), from an installed wheel.

Every cell (kernel, implementation, rows) runs in a fresh interpreter
(``python -m fastaxo._bench.matrix --cell JSON``) that loads its input (untimed), prepares the
input form the implementation takes (untimed: lists for the plain-Python baselines and the peer),
records its RSS, resets VmHWM (/proc/self/clear_refs), runs once (the check run: its peak RSS over
that baseline is the cell's peak; its output is digested afterwards), then ``reps`` timed runs
whose median is the cell's time. The parent watches each child's RSS (killed above the memory
budget) and compares the output digests of fastaxo and each baseline (identical arrays, or the
stated equivalence of the kernel's group).

Cells are skipped, with the reason recorded, when their estimated peak exceeds the memory budget
(half of MemAvailable by default), when the estimate from the previous size says one run would
take longer than ``--max-cell-seconds``, or when the data would not fit on the temp disk.
Data: seeded, generated under a temporary directory once per size, removed after that size.

Nothing here is imported by ``import fastaxo``; matplotlib (charts) is optional.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import hashlib
import importlib.util
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fastaxo._core.proc import mem_available_bytes, reset_peak, status_kib

SCHEMA = "fastaxo-bench/1"
SEED = 20260611
CHUNK_ROWS = 65_536
PAD_ID, LABEL_PAD_ID, EOS_ID = 0, -100, 2
VOCAB = 32_000
PROMPT_FRACTION_NUM, PROMPT_FRACTION_DEN = 3, 10  # labels: the first 30% of each row is -100
DUP_FRACTION = 0.1
AX_GROUP, AX_BIN_SIZE = 100_000, 200  # Axolotl's pack_parallel defaults (group_size, bin_size)
DEFAULT_SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (10_000, 100_000)
MiB = 2**20
GiB = 2**30
INTERPRETER_BYTES = 150 * MiB  # python + numpy + pyarrow + fastaxo, what every child starts with
PREFAULT_MAX = 4 * GiB  # the most memory touched before a timed run (the check run's peak, capped)


# ============================================================================ data shapes


@dataclass(frozen=True)
class Shape:
    name: str
    capacity: int  # packed row length (bin capacity)
    kind: str  # "uniform" | "lognormal"
    lo: int
    hi: int
    mean: float
    sigma: float
    text_bytes: int  # mean length of the text rows
    index: int

    @property
    def mean_tokens(self) -> float:
        return (self.lo + self.hi) / 2 if self.kind == "uniform" else self.mean

    def describe(self) -> str:
        if self.kind == "uniform":
            toks = f"input_ids: uniform {self.lo}-{self.hi} tokens per row"
        else:
            toks = (f"input_ids: lognormal mean ~{self.mean:.0f} tokens (sigma {self.sigma}), clipped to "
                    f"[{self.lo}, {self.hi}]")
        return (f"shape `{self.name}`: {toks} (int32 ids in [3, {VOCAB})), packed into rows of {self.capacity} "
                f"tokens; labels = input_ids with the first 30% of each row set to -100; text: random printable "
                f"ASCII, lognormal around {self.text_bytes} B; {DUP_FRACTION:.0%} of the rows are exact copies of "
                f"an earlier row (text and input_ids); columns id, text, input_ids")

    def lengths(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "uniform":
            return rng.integers(self.lo, self.hi + 1, n, dtype=np.int64)
        mu = math.log(self.mean) - self.sigma**2 / 2
        return np.clip(rng.lognormal(mu, self.sigma, n), self.lo, self.hi).astype(np.int64)


SHAPES = {
    # fast-axolotl's own packing benchmark: short sequences into 512-token rows
    "peer": Shape("peer", 512, "uniform", 10, 100, 0.0, 0.0, 256, 1),
    # chat-shaped rows (bench/bench_read.py's files); hi = capacity - 2 so fast-axolotl's
    # pack_sequences (seq + [eos, pad]) accepts every row
    "chat": Shape("chat", 4096, "lognormal", 1, 4094, 300.0, 0.8, 1200, 2),
}


# ============================================================================ the matrix


@dataclass(frozen=True)
class Est:
    """What a cell's memory estimate is made of (bytes / counts)."""

    n: int  # rows
    tokens: float  # total tokens
    text: float  # total text bytes
    file: float  # the file's bytes (reader kernels)
    cap: int


@dataclass(frozen=True)
class Impl:
    key: str
    label: str
    role: str  # "fastaxo" | "baseline"
    group: str  # outputs compared within a group
    what: str  # what is called, in one sentence
    mem: Callable[[Est], float]  # estimated peak bytes of the child above the interpreter
    counterpart: str | None = None  # baselines: the fastaxo impl the speed-up is computed against
    requires: tuple[str, ...] = ()  # "fast_axolotl", "datasets", "axolotl"
    keys: tuple[str, ...] = ()  # output digests this impl produces
    oracle: bool = False  # the reference of its group: a fastaxo mismatch with it is a failure
    bounded: bool = False  # streams in bounded memory: its measured peak is not scaled with the rows


@dataclass(frozen=True)
class Kernel:
    name: str
    title: str
    unit: str  # "MB/s" (text or file bytes) or "tokens/s"
    data: str  # "text" | "lengths" | "tokens" | "parquet" | "jsonl" | "arrow"
    about: str
    groups: dict[str, str]  # group -> the equivalence that is checked
    impls: tuple[Impl, ...]

    def impl(self, key: str) -> Impl:
        for im in self.impls:
            if im.key == key:
                return im
        raise KeyError(key)


_LIST_STR = lambda e: e.text + 57 * e.n  # noqa: E731  list[str]: str objects (49 B + data) + pointers
_LISTS = lambda e: 36 * e.tokens + 64 * e.n  # noqa: E731  list of lists of Python ints (28 B + 8 B pointer)
_ARROW_TEXT = lambda e: e.text + 16 * e.n  # noqa: E731
_ARROW_TOKENS = lambda e: 8 * e.tokens + 16 * e.n  # noqa: E731  input_ids + labels, int32
HASH_KEYS = ("digests",)
PACK_KEYS = ("input_ids", "labels", "position_ids", "attention_mask", "cu_seqlens")
PAD_KEYS = ("input_ids", "attention_mask", "labels")
READ_KEYS = ("rows", "id", "text.lengths", "text", "input_ids.lengths", "input_ids")


def _read_impls(fmt: str) -> tuple[Impl, ...]:
    py_label, py_what = {
        "parquet": ("pyarrow ParquetFile.iter_batches", "pq.ParquetFile(path).iter_batches() (defaults: pre_buffer=True)"),
        "jsonl": ("pyarrow.json.open_json", "pyarrow.json.open_json(path), iterated (pyarrow's streaming JSON reader)"),
        "arrow": ("pyarrow ipc.open_file", "pa.ipc.open_file(pa.OSFile(path)).get_batch(i) for every batch (read into memory)"),
    }[fmt]
    hf_builder = {"parquet": "parquet", "jsonl": "json", "arrow": "arrow"}[fmt]
    fa_type = {"parquet": "parquet", "jsonl": "jsonl", "arrow": "arrow"}[fmt]
    return (
        Impl("fastaxo", "fastaxo.iter_batches", "fastaxo", "rows",
             "fastaxo.iter_batches(path) with its defaults (8192-row RecordBatches, prefetch thread)",
             lambda e: min(2 * e.file, 700 * MiB), keys=READ_KEYS, bounded=True),
        Impl("pyarrow", py_label, "baseline", "rows", py_what,
             lambda e: min(2 * e.file, 1.5 * e.file * CHUNK_ROWS / max(e.n, 1) + 300 * MiB),
             counterpart="fastaxo", keys=READ_KEYS, oracle=True, bounded=True),
        Impl("hf_streaming", "HF datasets streaming", "baseline", "rows",
             f"datasets.load_dataset({hf_builder!r}, data_files=path, split='train', streaming=True)"
             ".with_format('arrow').iter(batch_size=1000)",
             lambda e: 400 * MiB + min(2 * e.file, 300 * MiB), counterpart="fastaxo", requires=("datasets",),
             keys=READ_KEYS, bounded=True),
        Impl("fast_axolotl", "fast-axolotl streaming_dataset_reader", "baseline", "rows",
             f"fast_axolotl.streaming_dataset_reader(path, {fa_type!r}, batch_size=1000) (dicts of Python lists)",
             lambda e: e.file + e.text + 36 * e.tokens + 350 * e.n, counterpart="fastaxo",
             requires=("fast_axolotl",), keys=READ_KEYS),
    )


def _kernels() -> dict[str, Kernel]:
    ks = [
        Kernel(
            "hash_rows", "hash_rows: SHA-256 of each text row", "MB/s", "text",
            "SHA-256 of every row of the `text` column (string bytes, as `hashlib.sha256(s.encode())`). "
            "MB/s counts the text bytes.",
            {"digests": "the n x 32-byte digests, identical (fast-axolotl's hex strings decoded)"},
            (
                Impl("fastaxo", "fastaxo.hash_rows (Arrow)", "fastaxo", "digests",
                     "fastaxo.hash_rows(text column as a pyarrow ChunkedArray): hashed in place",
                     lambda e: _ARROW_TEXT(e) + 32 * e.n, keys=HASH_KEYS),
                Impl("fastaxo_list", "fastaxo.hash_rows (list[str])", "fastaxo", "digests",
                     "fastaxo.hash_rows(list of str): the same input the list-based baselines get",
                     lambda e: _ARROW_TEXT(e) + _LIST_STR(e) + 40 * e.n, keys=HASH_KEYS),
                Impl("hashlib", "hashlib loop (list[str])", "baseline", "digests",
                     "[hashlib.sha256(s.encode()).digest() for s in rows]",
                     lambda e: _ARROW_TEXT(e) + _LIST_STR(e) + 80 * e.n, counterpart="fastaxo_list",
                     keys=HASH_KEYS, oracle=True),
                Impl("fast_axolotl", "fast-axolotl parallel_hash_rows (list[str])", "baseline", "digests",
                     "fast_axolotl.parallel_hash_rows(rows, 0) -> list of hex str",
                     lambda e: _ARROW_TEXT(e) + 2 * _LIST_STR(e) + 130 * e.n, counterpart="fastaxo_list",
                     requires=("fast_axolotl",), keys=HASH_KEYS),
            ),
        ),
        Kernel(
            "dedupe", "dedupe: exact dedupe of text rows (first occurrence kept)", "MB/s", "text",
            f"Indices of the first occurrence of each distinct `text` row ({DUP_FRACTION:.0%} of the rows are "
            "copies). MB/s counts the text bytes.",
            {"keep": "the kept row indices, identical"},
            (
                Impl("fastaxo", "fastaxo.dedupe (Arrow)", "fastaxo", "keep",
                     "fastaxo.dedupe(text column as a pyarrow ChunkedArray).keep",
                     lambda e: _ARROW_TEXT(e) + 56 * e.n, keys=("keep",)),
                Impl("fastaxo_list", "fastaxo.dedupe (list[str])", "fastaxo", "keep",
                     "fastaxo.dedupe(list of str).keep",
                     lambda e: _ARROW_TEXT(e) + _LIST_STR(e) + 64 * e.n, keys=("keep",)),
                Impl("hashlib", "hashlib + set loop (list[str])", "baseline", "keep",
                     "a loop: d = hashlib.sha256(s.encode()).digest(); keep i if d not in a set (then add it)",
                     lambda e: _ARROW_TEXT(e) + _LIST_STR(e) + 200 * e.n, counterpart="fastaxo_list",
                     keys=("keep",), oracle=True),
                Impl("fast_axolotl", "fast-axolotl deduplicate_indices (list[str])", "baseline", "keep",
                     "fast_axolotl.deduplicate_indices(rows)[0]",
                     lambda e: _ARROW_TEXT(e) + 2 * _LIST_STR(e) + 250 * e.n, counterpart="fastaxo_list",
                     requires=("fast_axolotl",), keys=("keep",)),
            ),
        ),
        Kernel(
            "pack_bins", "pack_bins: bin assignment (sequence lengths -> bins)", "tokens/s", "lengths",
            "Assign the rows' lengths (int64 NumPy array) to bins of the shape's capacity. tokens/s counts the "
            "tokens of the assigned rows.",
            {"bfd": "bin for bin: the same row indices in the same bins, in the same order",
             "ff": "bin for bin (fastaxo strategy='ff', group_size=100000, max_rows_per_bin=200 reproduces "
                   "Axolotl's pack_parallel(group_size=100000, bin_size=200))"},
            (
                Impl("fastaxo", "fastaxo.pack_bins (bfd)", "fastaxo", "bfd",
                     "fastaxo.pack_bins(lengths, capacity) (best-fit decreasing)",
                     lambda e: 64 * e.n, keys=("indices", "offsets")),
                Impl("python", "Python reference BFD", "baseline", "bfd",
                     "fastaxo._reference.packing.assign(lengths, capacity, ..., 'bfd'): plain Python, bisect over "
                     "the sorted remaining spaces",
                     lambda e: 200 * e.n, counterpart="fastaxo", keys=("indices", "offsets"), oracle=True),
                Impl("fastaxo_ff", "fastaxo.pack_bins (ff, Axolotl's groups)", "fastaxo", "ff",
                     f"fastaxo.pack_bins(lengths, capacity, strategy='ff', group_size={AX_GROUP}, "
                     f"max_rows_per_bin={AX_BIN_SIZE})",
                     lambda e: 64 * e.n, requires=("axolotl",), keys=("indices", "offsets")),
                Impl("axolotl", "Axolotl pack_parallel (numba)", "baseline", "ff",
                     f"axolotl.utils.samplers.multipack.pack_parallel(lengths, capacity, group_size={AX_GROUP}, "
                     f"bin_size={AX_BIN_SIZE}) (numba, compiled before timing; Axolotl forks worker processes "
                     "when there are several groups: their memory is not in this process's peak)",
                     lambda e: 900 * MiB + 200 * e.n, counterpart="fastaxo_ff", requires=("axolotl",),
                     keys=("indices", "offsets"), oracle=True),
            ),
        ),
        Kernel(
            "pack", "pack: sample packing (bins + packed arrays)", "tokens/s", "tokens",
            "Pack input_ids + labels into padded rows of the shape's capacity: input_ids, labels, position_ids "
            "(restarting per sequence), attention_mask (segment ids) and cu_seqlens, int64. tokens/s counts the "
            "input tokens.",
            {"bfd": "every output array identical (input_ids, labels, position_ids, attention_mask, cu_seqlens)",
             "nf": "fast-axolotl's format: greedy next-fit in input order, each sequence appended as "
                   "seq + [eos, pad], labels = the sequence and eos with -100 on the pads, no position_ids. "
                   "Checked against fastaxo.pack(strategy='nf') run on the same sequences with [eos, pad] "
                   "appended (labels: seq, eos, -100): input_ids and labels identical, and fast-axolotl's "
                   "attention_mask equal to fastaxo's labels != -100"},
            (
                Impl("fastaxo", "fastaxo.pack (bfd)", "fastaxo", "bfd",
                     "fastaxo.pack(input_ids, capacity, labels=labels) on Arrow ListArrays (bfd, padded, int64)",
                     lambda e: _ARROW_TOKENS(e) + 34 * e.tokens + 16 * e.n, keys=PACK_KEYS),
                Impl("python", "plain Python packer (bfd, lists)", "baseline", "bfd",
                     "the reference BFD assignment, then Python list concatenation per bin (tokens, labels, "
                     "position ids, segment ids), then np.array(..., int64)",
                     lambda e: _ARROW_TOKENS(e) + 2 * _LISTS(e) + 100 * e.tokens + 200 * e.n,
                     counterpart="fastaxo", keys=PACK_KEYS, oracle=True),
                Impl("fastaxo_nf", "fastaxo.pack (nf, fast-axolotl's format)", "fastaxo", "nf",
                     "fastaxo.pack(ids + [eos, pad], capacity, labels=..., strategy='nf', attention='binary', "
                     "position_ids=False)",
                     lambda e: 2 * _ARROW_TOKENS(e) + 30 * e.tokens + 100 * e.n,
                     requires=("fast_axolotl",), keys=("rows", "input_ids", "labels", "attention_mask")),
                Impl("fast_axolotl", "fast-axolotl pack_sequences (nf)", "baseline", "nf",
                     f"fast_axolotl.pack_sequences(rows, capacity, pad_token_id={PAD_ID}, eos_token_id={EOS_ID}) "
                     "(list of lists in, dict of lists out)",
                     lambda e: _ARROW_TOKENS(e) + _LISTS(e) + 130 * e.tokens + 200 * e.n,
                     counterpart="fastaxo_nf", requires=("fast_axolotl",),
                     keys=("rows", "input_ids", "labels", "attention_mask")),
            ),
        ),
        Kernel(
            "pad", "pad: collator padding (batches of rows)", "tokens/s", "tokens",
            "Pad the rows in consecutive collator batches (--pad-batch rows, each batch to its own longest row, "
            "right side): input_ids (pad 0), attention_mask (1/0), labels (pad -100), int64. One call per batch; "
            "tokens/s counts the input tokens.",
            {"pad": "every batch's arrays identical (fast-axolotl: input_ids and labels; it makes no attention_mask)"},
            (
                Impl("fastaxo", "fastaxo.pad (NumPy rows)", "fastaxo", "pad",
                     "fastaxo.pad(batch of NumPy int32 rows, labels=...) per batch",
                     lambda e: _ARROW_TOKENS(e) + 250 * e.n, keys=PAD_KEYS),
                Impl("python", "Python list pad", "baseline", "pad",
                     "r + [pad] * (width - len(r)) per row of lists, then np.array(..., int64), per batch",
                     lambda e: _ARROW_TOKENS(e) + 2 * _LISTS(e), counterpart="fastaxo", keys=PAD_KEYS, oracle=True),
                Impl("numpy", "NumPy per-row copy", "baseline", "pad",
                     "np.full((rows, width), pad) then out[i, :len(r)] = r per row, per batch",
                     lambda e: _ARROW_TOKENS(e) + 250 * e.n, counterpart="fastaxo", keys=PAD_KEYS),
                Impl("fast_axolotl", "fast-axolotl pad_sequences", "baseline", "pad",
                     "fast_axolotl.pad_sequences(ids, pad_value=0) and (labels, pad_value=-100) per batch "
                     "(lists in, lists out; no mask)",
                     lambda e: _ARROW_TOKENS(e) + 2 * _LISTS(e), counterpart="fastaxo",
                     requires=("fast_axolotl",), keys=("input_ids", "labels")),
            ),
        ),
    ]
    for fmt, desc in (("parquet", "Parquet (snappy, row groups of 65,536 rows)"),
                      ("jsonl", "JSON Lines"),
                      ("arrow", "Arrow IPC file (record batches of 65,536 rows)")):
        ks.append(Kernel(
            f"read_{fmt}", f"read_{fmt}: streaming reader, {desc}", "MB/s", fmt,
            f"Read the whole {desc} file (columns id, text, input_ids) batch by batch, from open to the last "
            "batch. MB/s counts the file's bytes; the page cache is warm (the file was just written).",
            {"rows": "the same rows and values in order (per column: id; text lengths and bytes; input_ids "
                     "lengths and values as int64), whatever the batch sizes"},
            _read_impls(fmt),
        ))
    return {k.name: k for k in ks}


KERNELS = _kernels()
KERNEL_ALIASES = {"read": [k for k in KERNELS if k.startswith("read_")], "all": list(KERNELS)}


# ============================================================================ small helpers




def release_memory() -> None:
    """Give freed memory back (gc, glibc malloc_trim, pyarrow pools) so a peak measured from the
    current RSS is not hidden by memory freed earlier and reused."""
    gc.collect()
    try:
        import pyarrow as pa

        for pool in (pa.default_memory_pool(), getattr(pa, "jemalloc_memory_pool", None),
                     getattr(pa, "mimalloc_memory_pool", None), pa.system_memory_pool()):
            try:
                (pool() if callable(pool) else pool).release_unused()
            except Exception:
                pass
    except ImportError:
        pass
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def prefault(nbytes: int) -> None:
    """Touch and free nbytes of fresh memory (untimed), so the timed run that follows does not pay
    for the first touch of pages the hypervisor took back (memory freed for about a second goes
    back on these VMs, and faulting it in again runs at 0.3-2 GB/s): every implementation's timed
    run starts from the same memory state."""
    if nbytes <= 0:
        return
    a = np.empty(nbytes, dtype=np.uint8)
    a[::4096] = 1
    del a



def fmt_n(n: float) -> str:
    n = int(n)
    for div, suf in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suf}"
    return f"{n:,}"


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:,.2f}{suf}"
    return f"{x:,.1f}"


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:,.0f} us"
    if s < 10:
        return f"{s * 1e3:,.1f} ms"
    return f"{s:,.1f} s"


def _secs(x: float) -> str:
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"


def fmt_mib(x: float | None) -> str:
    return "-" if x is None else (f"{x:,.1f}" if x < 100 else f"{x:,.0f}")


def parse_size(text: str) -> int:
    t = text.strip().lower().replace("_", "").replace(",", "")
    mult = 1
    if t.endswith("k"):
        mult, t = 1_000, t[:-1]
    elif t.endswith("m"):
        mult, t = 1_000_000, t[:-1]
    try:
        v = float(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a row count such as 10000, 100k or 1M, got {text!r}") from None
    if v < 1 or v != int(v):
        raise argparse.ArgumentTypeError(f"expected a whole row count >= 1, got {text!r}")
    return int(v)


def parse_sizes(text: str) -> list[int]:
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("expected comma-separated row counts, e.g. 10000,100k,1M")
    return sorted({parse_size(p) for p in parts})


def parse_kernels(text: str) -> list[str]:
    out: list[str] = []
    for p in (p.strip() for p in text.split(",")):
        if not p:
            continue
        names = KERNEL_ALIASES.get(p, [p])
        for name in names:
            if name not in KERNELS:
                raise argparse.ArgumentTypeError(
                    f"unknown kernel {p!r}; choose from {', '.join(KERNELS)} (or 'read', 'all')")
            if name not in out:
                out.append(name)
    if not out:
        raise argparse.ArgumentTypeError("expected at least one kernel")
    return [k for k in KERNELS if k in out]  # matrix order


# ============================================================================ digests (checks)


class Digest:
    """SHA-256 per output key, fed array by array (values as little-endian int64 for integers)."""

    def __init__(self) -> None:
        self._h: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def _hasher(self, key: str):
        h = self._h.get(key)
        if h is None:
            h = self._h[key] = hashlib.sha256()
        return h

    def array(self, key: str, a: Any, with_shape: bool = True) -> None:
        a = np.asarray(a)
        if a.dtype.kind in "iub":
            a = a.astype("<i8", copy=False)
        a = np.ascontiguousarray(a)
        h = self._hasher(key)
        if with_shape:
            h.update(repr(a.shape).encode())
        h.update(a.data if a.size else b"")

    def raw(self, key: str, b: Any) -> None:
        self._hasher(key).update(b)

    def count(self, key: str, k: int) -> None:
        self.counts[key] = self.counts.get(key, 0) + int(k)

    def result(self) -> dict[str, str]:
        out = {k: h.hexdigest() for k, h in self._h.items()}
        out.update({k: str(v) for k, v in self.counts.items()})
        return out


def compare_outputs(a: dict[str, str], b: dict[str, str], keys: Iterable[str]) -> tuple[bool, str]:
    """(identical, detail) over ``keys`` present in both digests."""
    keys = [k for k in keys if k in a and k in b]
    if not keys:
        return False, "no output in common to compare"
    diff = [k for k in keys if a[k] != b[k]]
    if diff:
        return False, "differs in " + ", ".join(diff)
    return True, "identical " + ", ".join(keys)


# ============================================================================ child: inputs


def _load_column(path: str, name: str):
    """One column of an Arrow IPC file, read into memory (not memory-mapped: mapped pages would be
    counted in the RSS of whatever touches them first)."""
    import pyarrow as pa

    with pa.OSFile(path) as f:
        idx = pa.ipc.open_file(f).schema.get_field_index(name)
    with pa.OSFile(path) as f:
        r = pa.ipc.open_file(f, options=pa.ipc.IpcReadOptions(included_fields=[idx]))
        return r.read_all().column(0)


def _flat(arr) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets from 0) of a list array chunk, slices respected."""
    offs = arr.offsets.to_numpy().astype(np.int64)
    vals = arr.flatten().to_numpy()
    return vals, offs - offs[0]


def _labels_chunk(arr):
    """labels for a chunk of input_ids: the first 30% of each row is -100."""
    import pyarrow as pa

    vals, offs = _flat(arr)
    lens = np.diff(offs)
    pos = np.arange(len(vals), dtype=np.int64) - np.repeat(offs[:-1], lens)
    lab = vals.astype(np.int32, copy=True)
    lab[pos < np.repeat(lens * PROMPT_FRACTION_NUM // PROMPT_FRACTION_DEN, lens)] = LABEL_PAD_ID
    return pa.ListArray.from_arrays(pa.array(offs.astype(np.int32)), pa.array(lab))


def _tokens(path: str):
    """(input_ids, labels) as ChunkedArrays of list<int32>."""
    import pyarrow as pa

    ids = _load_column(path, "input_ids")
    labels = pa.chunked_array([_labels_chunk(c) for c in ids.chunks], type=pa.list_(pa.int32()))
    return ids, labels


def _np_rows(col) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for c in col.chunks:
        vals, offs = _flat(c)
        o = offs.tolist()
        out.extend(vals[o[i]: o[i + 1]] for i in range(len(o) - 1))
    return out


def _list_rows(col) -> list[list[int]]:
    out: list[list[int]] = []
    for c in col.chunks:
        vals, offs = _flat(c)
        v = vals.tolist()
        o = offs.tolist()
        out.extend(v[o[i]: o[i + 1]] for i in range(len(o) - 1))
        del v
    return out


def _with_eos_pad(col, pad_value: int):
    """Rows + [eos, pad_value] (fast-axolotl's packing format), as a ListArray."""
    import pyarrow as pa

    parts = []
    for c in col.chunks:
        vals, offs = _flat(c)
        lens = np.diff(offs)
        n = len(lens)
        new_offs = offs + 2 * np.arange(n + 1, dtype=np.int64)
        out = np.empty(int(new_offs[-1]), dtype=np.int32)
        mask = np.ones(len(out), dtype=bool)
        mask[new_offs[1:] - 2] = False
        mask[new_offs[1:] - 1] = False
        out[mask] = vals
        out[new_offs[1:] - 2] = EOS_ID
        out[new_offs[1:] - 1] = pad_value
        parts.append(pa.ListArray.from_arrays(pa.array(new_offs.astype(np.int32)), pa.array(out)))
    return pa.chunked_array(parts, type=pa.list_(pa.int32()))


# ============================================================================ child: baselines in plain Python


def py_pack_build(ids: list[list[int]], labels: list[list[int]], bins: list[list[int]], capacity: int) -> dict:
    """Plain Python materialisation: list concatenation per bin, then np.array (int64; cu_seqlens int32)."""
    out_ids, out_lab, out_pos, out_seg = [], [], [], []
    cu = [0]
    end = 0
    for b in bins:
        row: list[int] = []
        lab: list[int] = []
        pos: list[int] = []
        seg: list[int] = []
        for k, i in enumerate(b, 1):
            r = ids[i]
            n = len(r)
            row += r
            lab += labels[i]
            pos += range(n)
            seg += [k] * n
            end += n
            cu.append(end)
        t = capacity - len(row)
        if t > 0:
            row += [PAD_ID] * t
            lab += [LABEL_PAD_ID] * t
            pos += range(t)
            seg += [0] * t
            end += t
            cu.append(end)
        out_ids.append(row)
        out_lab.append(lab)
        out_pos.append(pos)
        out_seg.append(seg)
    return {"input_ids": np.array(out_ids, dtype=np.int64).reshape(-1, capacity),
            "labels": np.array(out_lab, dtype=np.int64).reshape(-1, capacity),
            "position_ids": np.array(out_pos, dtype=np.int64).reshape(-1, capacity),
            "attention_mask": np.array(out_seg, dtype=np.int64).reshape(-1, capacity),
            "cu_seqlens": np.array(cu, dtype=np.int32)}


def py_pad(ids: list[list[int]], labels: list[list[int]]) -> dict:
    width = max(map(len, ids), default=0)
    n = len(ids)
    return {"input_ids": np.array([r + [PAD_ID] * (width - len(r)) for r in ids], dtype=np.int64).reshape(n, width),
            "attention_mask": np.array([[1] * len(r) + [0] * (width - len(r)) for r in ids],
                                       dtype=np.int64).reshape(n, width),
            "labels": np.array([r + [LABEL_PAD_ID] * (width - len(r)) for r in labels],
                               dtype=np.int64).reshape(n, width)}


def numpy_pad(ids: list[np.ndarray], labels: list[np.ndarray]) -> dict:
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    width = int(lens.max(initial=0))
    out_ids = np.full((len(ids), width), PAD_ID, dtype=np.int64)
    out_lab = np.full((len(ids), width), LABEL_PAD_ID, dtype=np.int64)
    for i, (a, b) in enumerate(zip(ids, labels)):
        out_ids[i, : len(a)] = a
        out_lab[i, : len(b)] = b
    mask = (np.arange(width) < lens[:, None]).astype(np.int64)
    return {"input_ids": out_ids, "attention_mask": mask, "labels": out_lab}


def _bins_digest(d: Digest, indices: Any, offsets: Any) -> None:
    d.array("indices", np.asarray(indices, dtype=np.int64))
    d.array("offsets", np.asarray(offsets, dtype=np.int64))
    d.count("bins", len(offsets) - 1)


def _lists_to_bins(bins: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.fromiter((len(b) for b in bins), dtype=np.int64, count=len(bins))
    offsets = np.zeros(len(bins) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    idx = np.fromiter((i for b in bins for i in b), dtype=np.int64, count=int(offsets[-1]))
    return idx, offsets


# ============================================================================ child: runners


@dataclass
class Runner:
    """run(check) -> output; digest(output, check) fills the Digest after the peak was read."""

    run: Callable[[Digest | None], Any]
    digest: Callable[[Any, Digest], None]
    notes: dict[str, Any] = field(default_factory=dict)


def _digest_arrays(keys: Iterable[str]) -> Callable[[Any, Digest], None]:
    def dig(out: Any, d: Digest) -> None:
        for k in keys:
            if k in out:
                d.array(k, np.asarray(out[k]))
    return dig


def _runner_hash(impl: str, spec: dict, dedupe: bool) -> Runner:
    import fastaxo

    nt = spec.get("threads")
    if impl == "fastaxo":
        col = _load_column(spec["paths"]["arrow"], "text")
        if dedupe:
            return Runner(lambda c: fastaxo.dedupe(col, num_threads=nt).keep, lambda o, d: d.array("keep", o))
        return Runner(lambda c: fastaxo.hash_rows(col, num_threads=nt), lambda o, d: d.raw("digests", o.data))
    rows = _load_column(spec["paths"]["arrow"], "text").to_pylist()  # the Arrow column is freed
    if impl == "fastaxo_list":
        if dedupe:
            return Runner(lambda c: fastaxo.dedupe(rows, num_threads=nt).keep, lambda o, d: d.array("keep", o))
        return Runner(lambda c: fastaxo.hash_rows(rows, num_threads=nt), lambda o, d: d.raw("digests", o.data))
    if impl == "hashlib":
        sha = hashlib.sha256
        if dedupe:
            def loop(c):
                seen: set[bytes] = set()
                keep = []
                for i, s in enumerate(rows):
                    h = sha(s.encode()).digest()
                    if h not in seen:
                        seen.add(h)
                        keep.append(i)
                return keep
            return Runner(loop, lambda o, d: d.array("keep", np.asarray(o, dtype=np.int64)))

        def dig_list(o, d):
            for i in range(0, len(o), CHUNK_ROWS):
                d.raw("digests", b"".join(o[i: i + CHUNK_ROWS]))
        return Runner(lambda c: [sha(s.encode()).digest() for s in rows], dig_list)
    if impl == "fast_axolotl":
        import fast_axolotl as fa

        if dedupe:
            return Runner(lambda c: fa.deduplicate_indices(rows)[0],
                          lambda o, d: d.array("keep", np.asarray(o, dtype=np.int64)))

        def dig_hex(o, d):
            for i in range(0, len(o), CHUNK_ROWS):
                d.raw("digests", bytes.fromhex("".join(o[i: i + CHUNK_ROWS])))
        return Runner(lambda c: fa.parallel_hash_rows(rows, 0), dig_hex)
    raise KeyError(impl)


def _runner_pack_bins(impl: str, spec: dict) -> Runner:
    import fastaxo

    nt = spec.get("threads")
    cap = SHAPES[spec["shape"]].capacity
    lengths = np.load(spec["paths"]["lengths"])
    if impl == "fastaxo":
        return Runner(lambda c: fastaxo.pack_bins(lengths, cap, num_threads=nt),
                      lambda o, d: _bins_digest(d, o.indices, o.offsets))
    if impl == "fastaxo_ff":
        return Runner(lambda c: fastaxo.pack_bins(lengths, cap, strategy="ff", group_size=AX_GROUP,
                                                  max_rows_per_bin=AX_BIN_SIZE, num_threads=nt),
                      lambda o, d: _bins_digest(d, o.indices, o.offsets))
    if impl == "python":
        from fastaxo._reference import packing as reference

        ll = lengths.tolist()
        return Runner(lambda c: reference.assign(ll, cap, 2**62, "bfd", False),
                      lambda o, d: _bins_digest(d, o[0], o[1]))
    if impl == "axolotl":
        from axolotl.utils.samplers.multipack import pack_parallel  # type: ignore

        t0 = time.perf_counter()
        pack_parallel(lengths[: min(len(lengths), 2000)].copy(), cap, group_size=AX_GROUP, bin_size=AX_BIN_SIZE)
        compile_s = time.perf_counter() - t0
        return Runner(lambda c: pack_parallel(lengths, cap, group_size=AX_GROUP, bin_size=AX_BIN_SIZE),
                      lambda o, d: _bins_digest(d, *_lists_to_bins(o)), {"numba_compile_s": compile_s})
    raise KeyError(impl)


def _runner_pack(impl: str, spec: dict) -> Runner:
    import fastaxo

    nt = spec.get("threads")
    cap = SHAPES[spec["shape"]].capacity
    ids, labels = _tokens(spec["paths"]["arrow"])
    if impl == "fastaxo":
        return Runner(lambda c: fastaxo.pack(ids, cap, labels=labels, num_threads=nt), _digest_arrays(PACK_KEYS))
    if impl == "fastaxo_nf":
        ids2 = _with_eos_pad(ids, PAD_ID)
        lab2 = _with_eos_pad(ids, LABEL_PAD_ID)
        del ids, labels

        def dig_nf(o, d):
            # rows of `cap` tokens, hashed without a shape (fast-axolotl's rows are hashed in chunks)
            d.array("input_ids", o["input_ids"], with_shape=False)
            d.array("labels", o["labels"], with_shape=False)
            # fast-axolotl's mask is 0 on the pad after each eos: fastaxo's labels != -100
            d.array("attention_mask", (np.asarray(o["labels"]) != LABEL_PAD_ID), with_shape=False)
            d.count("rows", len(o["input_ids"]))
        return Runner(lambda c: fastaxo.pack(ids2, cap, labels=lab2, strategy="nf", attention="binary",
                                             position_ids=False, num_threads=nt), dig_nf)
    if impl == "python":
        from fastaxo._reference import packing as reference

        lens = np.concatenate([np.diff(_flat(c)[1]) for c in ids.chunks]).tolist()
        ids_l, lab_l = _list_rows(ids), _list_rows(labels)
        del ids, labels

        def py(c):
            order, offsets = reference.assign(lens, cap, 2**62, "bfd", False)
            bins = [order[offsets[b]: offsets[b + 1]] for b in range(len(offsets) - 1)]
            return py_pack_build(ids_l, lab_l, bins, cap)
        return Runner(py, _digest_arrays(PACK_KEYS))
    if impl == "fast_axolotl":
        import fast_axolotl as fa

        ids_l = _list_rows(ids)
        del ids, labels

        def dig_fa(o, d):
            for k in ("input_ids", "labels", "attention_mask"):
                for i in range(0, len(o[k]), CHUNK_ROWS):
                    d.array(k, np.array(o[k][i: i + CHUNK_ROWS], dtype=np.int64).reshape(-1, cap), with_shape=False)
            d.count("rows", len(o["input_ids"]))
        return Runner(lambda c: fa.pack_sequences(ids_l, cap, PAD_ID, EOS_ID), dig_fa)
    raise KeyError(impl)


def _runner_pad(impl: str, spec: dict) -> Runner:
    import fastaxo

    bs = int(spec["pad_batch"])
    ids, labels = _tokens(spec["paths"]["arrow"])
    if impl in ("fastaxo", "numpy"):
        ids_r, lab_r = _np_rows(ids), _np_rows(labels)
    else:
        ids_r, lab_r = _list_rows(ids), _list_rows(labels)
    del ids, labels
    batches = [(ids_r[i: i + bs], lab_r[i: i + bs]) for i in range(0, len(ids_r), bs)]
    del ids_r, lab_r
    nt = spec.get("threads")

    def per_batch(fn: Callable[[Any, Any], Any], keys: tuple[str, ...]) -> Callable[[Digest | None], Any]:
        def run(chk: Digest | None) -> int:
            for a, b in batches:
                out = fn(a, b)
                if chk is not None:
                    for k in keys:
                        chk.array(k, np.asarray(out[k]))
            return len(batches)
        return run

    if impl == "fastaxo":
        fn = lambda a, b: fastaxo.pad(a, labels=b, num_threads=nt)  # noqa: E731
        keys = PAD_KEYS
    elif impl == "numpy":
        fn, keys = numpy_pad, PAD_KEYS
    elif impl == "python":
        fn, keys = py_pad, PAD_KEYS
    elif impl == "fast_axolotl":
        import fast_axolotl as fa

        def fn(a, b):
            return {"input_ids": fa.pad_sequences(a, pad_value=PAD_ID),
                    "labels": fa.pad_sequences(b, pad_value=LABEL_PAD_ID)}
        keys = ("input_ids", "labels")
    else:
        raise KeyError(impl)
    return Runner(per_batch(fn, keys), lambda o, d: d.count("batches", o))


def _digest_table(d: Digest, t: Any) -> None:
    """Feed one batch of rows (pa.Table / RecordBatch / dict of lists) into the reader digest."""
    import pyarrow as pa

    if isinstance(t, dict):
        t = pa.table(t)
    d.count("rows", t.num_rows)
    for name in ("id", "text", "input_ids"):
        col = t.column(name)
        for c in (col.chunks if isinstance(col, pa.ChunkedArray) else [col]):
            if c.null_count:
                d.count(f"{name}.nulls", c.null_count)
            if name == "id":
                d.array("id", c.cast(pa.int64()).to_numpy(zero_copy_only=False), with_shape=False)
            elif name == "text":
                c = c.cast(pa.large_string())
                offs = np.frombuffer(c.buffers()[1], dtype=np.int64)[c.offset: c.offset + len(c) + 1]
                d.array("text.lengths", np.diff(offs), with_shape=False)
                if len(c) and offs[-1] > offs[0]:
                    d.raw("text", memoryview(c.buffers()[2])[int(offs[0]): int(offs[-1])])
            else:
                c = c.cast(pa.large_list(pa.int64()))
                offs = c.offsets.to_numpy()
                d.array("input_ids.lengths", np.diff(offs), with_shape=False)
                d.array("input_ids", c.flatten().to_numpy(), with_shape=False)


def _runner_read(impl: str, spec: dict, fmt: str) -> Runner:
    path = spec["paths"][fmt]

    def drain(it: Iterable[Any], rows_of: Callable[[Any], int], chk: Digest | None) -> int:
        n = 0
        for b in it:
            n += rows_of(b)
            if chk is not None:
                _digest_table(chk, b)
        return n

    nrows = lambda b: b.num_rows  # noqa: E731
    if impl == "fastaxo":
        import fastaxo

        def run(chk):
            with fastaxo.iter_batches(path, format="arrow" if fmt == "arrow" else fmt) as r:
                return drain(r, nrows, chk)
        return Runner(run, lambda o, d: None)
    if impl == "pyarrow":
        import pyarrow as pa

        if fmt == "parquet":
            import pyarrow.parquet as pq

            return Runner(lambda chk: drain(pq.ParquetFile(path).iter_batches(), nrows, chk), lambda o, d: None)
        if fmt == "jsonl":
            import pyarrow.json as pjson

            return Runner(lambda chk: drain(pjson.open_json(path), nrows, chk), lambda o, d: None)

        def ipc(chk):
            with pa.OSFile(path) as f:
                r = pa.ipc.open_file(f)
                return drain((r.get_batch(i) for i in range(r.num_record_batches)), nrows, chk)
        return Runner(ipc, lambda o, d: None)
    if impl == "hf_streaming":
        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
        builder = {"parquet": "parquet", "jsonl": "json", "arrow": "arrow"}[fmt]

        def hf(chk):
            ds = datasets.load_dataset(builder, data_files=path, split="train", streaming=True)
            return drain(ds.with_format("arrow").iter(batch_size=1000), nrows, chk)
        return Runner(hf, lambda o, d: None)
    if impl == "fast_axolotl":
        import fast_axolotl as fa

        def rows_of(b: dict) -> int:
            return len(next(iter(b.values()))) if b else 0

        return Runner(lambda chk: drain(fa.streaming_dataset_reader(path, fmt, batch_size=1000), rows_of, chk),
                      lambda o, d: None)
    raise KeyError(impl)


def make_runner(spec: dict) -> Runner:
    k, impl = spec["kernel"], spec["impl"]
    if k in ("hash_rows", "dedupe"):
        return _runner_hash(impl, spec, k == "dedupe")
    if k == "pack_bins":
        return _runner_pack_bins(impl, spec)
    if k == "pack":
        return _runner_pack(impl, spec)
    if k == "pad":
        return _runner_pad(impl, spec)
    if k.startswith("read_"):
        return _runner_read(impl, spec, k[len("read_"):])
    raise KeyError(k)


def run_cell(spec: dict) -> dict:
    """One cell in this (fresh) process: load + prepare (untimed), the check run (peak), timed reps."""
    start_kib = status_kib("VmRSS")
    t0 = time.perf_counter()
    runner = make_runner(spec)
    prep_s = time.perf_counter() - t0
    release_memory()
    prep_hwm = status_kib("VmHWM")
    base = status_kib("VmRSS")
    hwm_ok = reset_peak()
    chk = Digest()
    t0 = time.perf_counter()
    out = runner.run(chk)
    first_s = time.perf_counter() - t0
    hwm = status_kib("VmHWM")
    runner.digest(out, chk)
    del out
    release_memory()
    times = []
    touch = int(min(max(hwm - base, 0) * 1024, PREFAULT_MAX)) if (hwm_ok and hwm and base) else 0
    for _ in range(int(spec["reps"])):
        prefault(touch)
        t0 = time.perf_counter()
        out = runner.run(None)
        times.append(time.perf_counter() - t0)
        del out
    peak = (hwm - base) / 1024 if (hwm_ok and hwm is not None and base is not None) else None
    total = max(x for x in (prep_hwm, hwm, base) if x is not None) / 1024 if base is not None else None
    return {"times_s": times, "first_s": first_s, "prep_s": prep_s,
            "peak_mib": peak, "baseline_rss_mib": None if base is None else base / 1024,
            "start_rss_mib": None if start_kib is None else start_kib / 1024, "total_peak_mib": total,
            "digests": chk.result(), "notes": runner.notes}


def _child_main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    res = run_cell(spec)
    sys.stdout.write("\n" + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


# ============================================================================ parent: environment


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = None
    try:
        with open("/proc/meminfo") as f:
            ram = int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    os_name = f"{platform.system()} {platform.release()}"
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = f"{line.split('=', 1)[1].strip().strip(chr(34))} ({os_name})"
                    break
    except OSError:
        pass
    avail = mem_available_bytes()
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": None if ram is None else round(ram / GiB, 1),
            "mem_available_gib": None if avail is None else round(avail / GiB, 1), "os": os_name,
            "machine": platform.machine(), "python": f"{platform.python_implementation()} {platform.python_version()}"}


def machine_short(m: dict[str, Any]) -> str:
    ram = f", {m['ram_gib']:.0f} GiB RAM" if m.get("ram_gib") else ""
    return f"{m['cpu']}, {m['cores']} cores{ram}"


def versions_info(avail: dict[str, bool]) -> dict[str, str | None]:
    import importlib.metadata as md

    import fastaxo

    out: dict[str, str | None] = {"fastaxo": fastaxo.__version__}
    for dist in ("numpy", "pyarrow", "fast-axolotl", "datasets", "axolotl", "torch", "numba", "matplotlib"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def git_commit() -> str | None:
    """The commit of the source tree fastaxo was imported from, else the commit the installed
    build was made from (setup.py records it; None for a build from an sdist)."""
    import fastaxo

    root = os.path.dirname(os.path.dirname(os.path.abspath(fastaxo.__file__)))
    if not os.path.exists(os.path.join(root, ".git")):
        try:
            from fastaxo import _build_info
        except ImportError:
            return None
        c = getattr(_build_info, "GIT_COMMIT", None)
        return f"{c} (the installed build's)" if c else None
    try:
        sha = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha + ("-dirty" if dirty else "")) if sha else None


def _child_env(tmp: str) -> dict[str, str]:
    import fastaxo

    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(fastaxo.__file__)))
    if "site-packages" not in root and "dist-packages" not in root:
        # a source checkout (PYTHONPATH or in-place build): the children import the same fastaxo
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("HF_DATASETS_CACHE", os.path.join(tmp, "hf-cache"))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def detect_baselines(kernels: list[str], env: dict[str, str], cwd: str) -> tuple[dict[str, bool], dict[str, str]]:
    """Which optional baselines can run: {requirement: available}, {requirement: why not}."""
    need = {r for k in kernels for im in KERNELS[k].impls for r in im.requires}
    avail: dict[str, bool] = {}
    why: dict[str, str] = {}
    hints = {"fast_axolotl": "pip install fast-axolotl==0.2.0", "datasets": "pip install datasets",
             "axolotl": "pip install axolotl (with torch and numba)"}
    for req in sorted(need):
        ok = importlib.util.find_spec(req) is not None
        reason = f"not installed ({hints[req]})"
        if ok and req == "axolotl":
            # Heavy (torch, numba): imported only in the cells that use it; checked once here.
            try:
                r = subprocess.run([sys.executable, "-c", "import axolotl.utils.samplers.multipack"], env=env,
                                   cwd=cwd, capture_output=True, text=True, timeout=300)
                ok = r.returncode == 0
                tail = (r.stderr.strip().splitlines() or ["?"])[-1]
                reason = f"`import axolotl.utils.samplers.multipack` failed: {tail[:300]}"
            except subprocess.TimeoutExpired:
                ok, reason = False, "`import axolotl.utils.samplers.multipack` took over 300 s"
        avail[req] = ok
        if not ok:
            why[req] = reason
    return avail, why


# ============================================================================ parent: data


def _text_chunk(rng: np.random.Generator, n: int, mean_bytes: int):
    import pyarrow as pa

    lengths = np.clip(rng.lognormal(np.log(mean_bytes) - 0.045, 0.3, n), 1, 16 * mean_bytes).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = rng.integers(32, 127, int(offsets[-1]), dtype=np.uint8)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _chunks(n: int, shape: Shape):
    """Tables of <= CHUNK_ROWS rows: id, text, input_ids; 10% of each chunk's rows copy an earlier row of it."""
    import pyarrow as pa

    for k, start in enumerate(range(0, n, CHUNK_ROWS)):
        m = min(CHUNK_ROWS, n - start)
        rng = np.random.default_rng([SEED, shape.index, k])
        lens = shape.lengths(rng, m)
        offs = np.zeros(m + 1, dtype=np.int32)
        np.cumsum(lens, out=offs[1:])
        ids = pa.ListArray.from_arrays(pa.array(offs), pa.array(rng.integers(3, VOCAB, int(offs[-1]), dtype=np.int32)))
        text = _text_chunk(rng, m, shape.text_bytes)
        order = np.arange(m)
        n_dup = int(round(m * DUP_FRACTION))
        if n_dup and m > 1:
            at = np.sort(rng.choice(np.arange(1, m), n_dup, replace=False))
            order[at] = (rng.random(n_dup) * at).astype(np.int64)  # a copy of an earlier row
            take = pa.array(order)
            ids, text = ids.take(take), text.take(take)
        yield pa.table({"id": pa.array(np.arange(start, start + m, dtype=np.int64)), "text": text, "input_ids": ids})


def estimate_data(n: int, shape: Shape) -> dict[str, float]:
    """Expected totals and file sizes (bytes) of the data of n rows."""
    t = n * shape.mean_tokens
    x = n * shape.text_bytes
    return {"tokens": t, "text": x, "arrow": x + 4 * t + 24 * n, "parquet": x + 4 * t + 24 * n,
            "jsonl": 1.06 * x + 6.2 * t + 45 * n, "lengths": 8 * n}


def generate_data(d: str, n: int, shape: Shape, formats: set[str]) -> dict[str, Any]:
    """Write data.arrow (+ the reader formats asked for) and lengths.npy; return paths and totals."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(d, exist_ok=True)
    paths = {"arrow": os.path.join(d, "data.arrow"), "lengths": os.path.join(d, "lengths.npy")}
    pw = jf = None
    if "parquet" in formats:
        paths["parquet"] = os.path.join(d, "data.parquet")
    if "jsonl" in formats:
        paths["jsonl"] = os.path.join(d, "data.jsonl")
    lengths = []
    tokens = text_bytes = 0
    writer = None
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    try:
        for t in _chunks(n, shape):
            if writer is None:
                writer = pa.ipc.new_file(paths["arrow"], t.schema)
                if "parquet" in paths:
                    pw = pq.ParquetWriter(paths["parquet"], t.schema)
                if "jsonl" in paths:
                    jf = open(paths["jsonl"], "w", encoding="utf-8")
            writer.write_table(t)
            ids = t.column("input_ids").chunk(0)
            lens = np.diff(ids.offsets.to_numpy())
            lengths.append(lens.astype(np.int64))
            tokens += int(lens.sum())
            txt = t.column("text").chunk(0)
            toffs = np.frombuffer(txt.buffers()[1], dtype=np.int32)[txt.offset: txt.offset + len(txt) + 1]
            text_bytes += int(toffs[-1] - toffs[0])
            if pw is not None:
                pw.write_table(t, row_group_size=CHUNK_ROWS)
            if jf is not None:
                jf.write("".join(dumps({"id": i, "text": s, "input_ids": r}) + "\n"
                                 for i, s, r in zip(t.column("id").to_pylist(), t.column("text").to_pylist(),
                                                    t.column("input_ids").to_pylist())))
    finally:
        if writer is not None:
            writer.close()
        if pw is not None:
            pw.close()
        if jf is not None:
            jf.close()
    np.save(paths["lengths"], np.concatenate(lengths) if lengths else np.zeros(0, np.int64))
    sizes = {k: os.path.getsize(p) for k, p in paths.items()}
    return {"paths": paths, "tokens": tokens, "text_bytes": text_bytes, "file_bytes": sizes}


# ============================================================================ parent: running cells



def spawn_cell(spec: dict, env: dict[str, str], cwd: str, mem_limit: float | None, timeout: float) -> dict[str, Any]:
    """Run one cell in a fresh interpreter, killed above mem_limit bytes of RSS or after timeout s."""
    from fastaxo._core.backend import child_argv, child_env

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(child_argv("fastaxo._bench.matrix", "--cell", json.dumps(spec)),
                             stdout=out, stderr=err, env=child_env(env), cwd=cwd)
        killed_at = None
        timed_out = False
        max_rss = 0
        try:
            while p.poll() is None:
                rss = status_kib("VmRSS", p.pid)
                if rss is not None:
                    max_rss = max(max_rss, rss)
                    if mem_limit is not None and rss * 1024 > mem_limit:
                        killed_at = rss * 1024
                        p.kill()
                        break
                if time.perf_counter() - t0 > timeout:
                    timed_out = True
                    p.kill()
                    break
                time.sleep(0.02)
        except BaseException:
            p.kill()
            p.wait()
            raise
        p.wait()
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if killed_at is not None:
        return {"status": "error", "error_kind": "killed", "wall_s": wall,
                "reason": f"killed: RSS reached {killed_at / GiB:.2f} GiB, over the memory budget "
                          f"{mem_limit / GiB:.2f} GiB"}
    if timed_out:
        return {"status": "error", "error_kind": "timeout", "wall_s": wall,
                "reason": f"killed after the cell timeout of {timeout:.0f} s"}
    lines = [ln for ln in stdout.strip().splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = " | ".join(stderr.strip().splitlines()[-6:])[-1200:]
        return {"status": "error", "error_kind": "exception", "wall_s": wall,
                "reason": f"exit {p.returncode}: {tail or stdout[-500:]}"}
    res = json.loads(lines[-1])
    res.update(status="ok", wall_s=wall, watch_max_rss_mib=max_rss / 1024)
    return res


def estimate_seconds(prev: list[tuple[int, float]], n: int) -> float | None:
    """One run's time at n rows, from the measured medians at smaller sizes (power law from the last
    two, exponent clamped to [1, 2]; linear from one)."""
    if not prev:
        return None
    (n2, t2) = prev[-1]
    slope = 1.0
    if len(prev) >= 2:
        (n1, t1) = prev[-2]
        if t1 > 0 and t2 > 0 and n2 > n1:
            slope = min(2.0, max(1.0, math.log(t2 / t1) / math.log(n2 / n1)))
    return t2 * (n / n2) ** slope


@dataclass
class Options:
    sizes: list[int]
    kernels: list[str]
    reps: int
    quick: bool
    out: str
    shape: str = "peer"
    threads: int | None = None
    pad_batch: int = 16
    max_cell_seconds: float = 60.0
    memory_budget: float | None = None  # bytes
    cell_timeout: float = 1800.0
    markdown_doc: str | None = None
    command: str = "fastaxo bench"
    tmp_dir: str | None = None


def _cell_record(kernel: Kernel, im: Impl, n: int) -> dict[str, Any]:
    return {"kernel": kernel.name, "impl": im.key, "label": im.label, "role": im.role, "group": im.group,
            "rows": n, "status": None, "reason": None, "median_s": None, "times_s": None, "rows_per_s": None,
            "tokens_per_s": None, "mb_per_s": None, "peak_mib": None, "check": None}


def _apply_checks(kernel: Kernel, cells: list[dict]) -> None:
    """Compare outputs within each group at one size; set every cell's check."""
    ok = {c["impl"]: c for c in cells if c["status"] == "ok"}
    comps: dict[str, list[dict]] = {c["impl"]: [] for c in cells}
    for f in kernel.impls:
        if f.role != "fastaxo" or f.key not in ok:
            continue
        for b in kernel.impls:
            if b.role != "baseline" or b.group != f.group or b.key not in ok:
                continue
            same, detail = compare_outputs(ok[f.key]["digests"], ok[b.key]["digests"], set(f.keys) & set(b.keys))
            comps[f.key].append({"against": b.key, "pass": same, "detail": detail, "oracle": b.oracle})
            comps[b.key].append({"against": f.key, "pass": same, "detail": detail, "oracle": False})
    for c in cells:
        if c["status"] != "ok":
            continue
        cs = comps[c["impl"]]
        if not cs:
            c["check"] = {"status": "unchecked", "detail": "no other implementation of its group ran at this size",
                          "comparisons": []}
            continue
        failed = [x for x in cs if not x["pass"]]
        status = "pass" if not failed else "fail"
        if failed and c["role"] == "fastaxo":
            oracle = [x for x in cs if x["oracle"]]
            if oracle and all(x["pass"] for x in oracle):
                status = "pass"  # fastaxo matches the reference; the other baseline differs (its own cell says so)
        elif failed and c["role"] == "baseline":
            f_cell = ok.get(cs[0]["against"])
            f_oracle = [x for x in comps.get(cs[0]["against"], []) if x["oracle"]] if f_cell else []
            if f_oracle and all(x["pass"] for x in f_oracle) and not kernel.impl(c["impl"]).oracle:
                status = "baseline differs"  # its output differs from fastaxo AND from the reference
        c["check"] = {"status": status, "comparisons": cs,
                      "detail": "; ".join(f"{'=' if x['pass'] else '!='} {x['against']}: {x['detail']}" for x in cs)}


def _apply_speedups(kernel: Kernel, cells: list[dict]) -> None:
    ok = {c["impl"]: c for c in cells if c["status"] == "ok"}
    for c in cells:
        im = kernel.impl(c["impl"])
        if c["status"] == "ok" and im.role == "baseline" and im.counterpart in ok:
            x = c["median_s"] / ok[im.counterpart]["median_s"]
            c["fastaxo_speedup"] = x
            c["speedup_vs"] = im.counterpart
            ok[im.counterpart].setdefault("speedups", {})[im.key] = x


def run_matrix(o: Options, log: Callable[[str], None] = print) -> dict[str, Any]:
    import fastaxo

    t_start = time.perf_counter()
    shape = SHAPES[o.shape]
    avail_bytes = mem_available_bytes()
    budget = o.memory_budget if o.memory_budget is not None else (avail_bytes / 2 if avail_bytes else None)
    tmp = tempfile.mkdtemp(prefix="fastaxo-bench-", dir=o.tmp_dir)
    env = _child_env(tmp)
    machine = machine_info()
    try:
        avail, why = detect_baselines(o.kernels, env, tmp)
        versions = versions_info(avail)
        cfg = fastaxo.config()
        log(f"fastaxo bench: {', '.join(o.kernels)} at {', '.join(fmt_n(s) for s in o.sizes)} rows, "
            f"{o.reps} timed rep(s) per cell (+1 check run), shape {o.shape}")
        log(f"  machine: {machine_short(machine)}, {machine['os']}, {machine['python']}")
        log(f"  fastaxo {fastaxo.__version__} (extension {'loaded' if cfg.get('extension') else 'MISSING'}, "
            f"openmp {cfg.get('openmp')}, {o.threads or cfg.get('default_threads')} threads, "
            f"sha256 {cfg.get('sha256')}); memory budget "
            f"{'none' if budget is None else f'{budget / GiB:.1f} GiB'}; cells over "
            f"{o.max_cell_seconds:g} s per run (estimated) are skipped")
        unavailable = []
        for k in o.kernels:
            for im in KERNELS[k].impls:
                missing = [r for r in im.requires if not avail.get(r, False)]
                if missing:
                    unavailable.append({"kernel": k, "impl": im.key, "label": im.label,
                                        "reason": "; ".join(f"{r}: {why.get(r, 'not available')}" for r in missing)})
        for u in unavailable:
            log(f"  not run: {u['kernel']} / {u['label']}: {u['reason']}")
        cells: list[dict] = []
        history: dict[tuple[str, str], list[tuple[int, float]]] = {}
        mem_hist: dict[tuple[str, str], tuple[int, float, float]] = {}
        time_skipped: set[tuple[str, str]] = set()
        runnable = [(KERNELS[k], im) for k in o.kernels for im in KERNELS[k].impls
                    if all(avail.get(r, False) for r in im.requires)]
        total_cells = len(runnable) * len(o.sizes)
        done = 0
        data_stats: dict[int, dict[str, Any]] = {}
        for n in o.sizes:
            est_d = estimate_data(n, shape)
            # --- decide the skips of this size before generating anything
            plan: list[tuple[Kernel, Impl, dict]] = []
            for kernel, im in runnable:
                rec = _cell_record(kernel, im, n)
                fmt = kernel.data if kernel.data in ("parquet", "jsonl", "arrow") else "arrow"
                e = Est(n, est_d["tokens"], est_d["text"], est_d[fmt], shape.capacity)
                est_mem = INTERPRETER_BYTES + im.mem(e)
                mh = None if im.bounded else mem_hist.get((kernel.name, im.key))
                if mh is not None:  # the measured total at the previous size, scaled
                    n0, start, total = mh
                    est_mem = max(est_mem, start * MiB + (total - start) * MiB * n / n0)
                rec["est_peak_gib"] = round(est_mem / GiB, 3)
                est_s = estimate_seconds(history.get((kernel.name, im.key), []), n)
                rec["est_s"] = est_s
                if budget is not None and est_mem > budget:
                    rec.update(status="skipped", reason=f"memory: estimated peak {est_mem / GiB:.2f} GiB > budget "
                                                        f"{budget / GiB:.2f} GiB")
                elif (kernel.name, im.key) in time_skipped:
                    rec.update(status="skipped", reason="time: skipped at a smaller size")
                elif est_s is not None and est_s > o.max_cell_seconds:
                    prev = history[(kernel.name, im.key)][-1]
                    rec.update(status="skipped", reason=f"time: estimated {_secs(est_s)} s per run (from "
                                                        f"{prev[1]:.2f} s at {fmt_n(prev[0])} rows) > "
                                                        f"{o.max_cell_seconds:g} s")
                    time_skipped.add((kernel.name, im.key))
                plan.append((kernel, im, rec))
            formats = {k.data for k, _im, r in plan if r["status"] is None and k.data in ("parquet", "jsonl")}
            need_data = any(r["status"] is None for _k, _im, r in plan)
            ddir = os.path.join(tmp, f"data-{n}")
            stats = None
            if need_data:
                need = est_d["arrow"] + est_d["lengths"] + sum(est_d[f] for f in formats)
                free = shutil.disk_usage(tmp).free
                if need > 0.9 * free:
                    for _k, _im, r in plan:
                        if r["status"] is None:
                            r.update(status="skipped", reason=f"disk: the data would take {need / GiB:.1f} GiB, "
                                                              f"{free / GiB:.1f} GiB free in {tmp}")
                else:
                    t0 = time.perf_counter()
                    stats = generate_data(ddir, n, shape, formats)
                    data_stats[n] = {k: v for k, v in stats.items() if k != "paths"}
                    log(f"[data] {fmt_n(n)} rows: {stats['tokens']:,} tokens, {stats['text_bytes'] / MiB:,.1f} MiB "
                        f"of text; files {', '.join(f'{k} {v / MiB:,.1f} MiB' for k, v in stats['file_bytes'].items())}"
                        f" ({time.perf_counter() - t0:.1f} s, untimed)")
            by_kernel: dict[str, list[dict]] = {}
            for kernel, im, rec in plan:
                done += 1
                by_kernel.setdefault(kernel.name, []).append(rec)
                tag = f"[{done}/{total_cells}] {kernel.name:<12} {fmt_n(n):>5}  {im.label:<44}"
                if rec["status"] == "skipped":
                    log(f"{tag} skipped: {rec['reason']}")
                    cells.append(rec)
                    continue
                spec = {"kernel": kernel.name, "impl": im.key, "rows": n, "reps": o.reps, "shape": o.shape,
                        "threads": o.threads, "pad_batch": o.pad_batch, "paths": stats["paths"]}
                res = spawn_cell(spec, env, tmp, budget, o.cell_timeout)
                rec["status"] = res["status"]
                if res["status"] != "ok":
                    rec.update(reason=res["reason"], error_kind=res.get("error_kind"))
                    if res.get("error_kind") == "timeout":
                        time_skipped.add((kernel.name, im.key))
                    log(f"{tag} ERROR: {res['reason']}")
                    cells.append(rec)
                    continue
                med = statistics.median(res["times_s"])
                rec.update(median_s=med, times_s=res["times_s"], first_s=res["first_s"], prep_s=res["prep_s"],
                           peak_mib=res["peak_mib"], baseline_rss_mib=res["baseline_rss_mib"],
                           total_peak_mib=res["total_peak_mib"], digests=res["digests"], notes=res["notes"],
                           rows_per_s=n / med if med > 0 else None)
                if kernel.unit == "tokens/s":
                    rec["tokens_per_s"] = stats["tokens"] / med if med > 0 else None
                elif kernel.data == "text":
                    rec["mb_per_s"] = stats["text_bytes"] / med / 1e6 if med > 0 else None
                else:
                    rec["mb_per_s"] = stats["file_bytes"][kernel.data] / med / 1e6 if med > 0 else None
                history.setdefault((kernel.name, im.key), []).append((n, med))
                if res.get("start_rss_mib") and res.get("total_peak_mib"):
                    mem_hist[(kernel.name, im.key)] = (n, res["start_rss_mib"], res["total_peak_mib"])
                cells.append(rec)
                unit = (f"{fmt_rate(rec['tokens_per_s'])} tokens/s" if rec["tokens_per_s"] is not None
                        else f"{rec['mb_per_s']:,.1f} MB/s")
                log(f"{tag} {fmt_time(med):>10}  {fmt_rate(rec['rows_per_s']):>7} rows/s  {unit:>16}  "
                    f"peak {fmt_mib(rec['peak_mib'])} MiB")
            for kname, kcells in by_kernel.items():
                _apply_checks(KERNELS[kname], kcells)
                _apply_speedups(KERNELS[kname], kcells)
                for c in kcells:
                    if c["check"] is not None and c["check"]["status"] != "pass":
                        log(f"  check {kname} {fmt_n(n)} {c['label']}: {c['check']['status'].upper()} "
                            f"({c['check']['detail']})")
            shutil.rmtree(ddir, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = {
        "schema": SCHEMA, "command": o.command,
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": time.perf_counter() - t_start,
        "machine": machine, "versions": versions, "git_commit": git_commit(),
        "fastaxo_config": {k: v for k, v in cfg.items() if isinstance(v, (str, int, float, bool, type(None)))},
        "settings": {"sizes": o.sizes, "kernels": o.kernels, "reps": o.reps, "quick": o.quick, "shape": o.shape,
                     "shape_description": shape.describe(), "capacity": shape.capacity,
                     "threads": o.threads or cfg.get("default_threads"), "pad_batch": o.pad_batch,
                     "max_cell_seconds": o.max_cell_seconds,
                     "memory_budget_gib": None if budget is None else round(budget / GiB, 2),
                     "mem_available_gib": None if avail_bytes is None else round(avail_bytes / GiB, 2)},
        "data": {str(k): v for k, v in data_stats.items()},
        "kernels": {k: kernel_meta(KERNELS[k]) for k in o.kernels},
        "unavailable": unavailable,
        "cells": cells,
    }
    results["summary"] = summarize(results)
    return results


def kernel_meta(k: Kernel) -> dict[str, Any]:
    return {"title": k.title, "about": k.about, "unit": k.unit, "groups": k.groups,
            "impls": {im.key: {"label": im.label, "role": im.role, "group": im.group, "what": im.what,
                               "counterpart": im.counterpart, "oracle": im.oracle, "requires": list(im.requires)}
                      for im in k.impls}}


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    cells = results["cells"]
    failed = [c for c in cells if (c.get("check") or {}).get("status") == "fail"]
    fx_errors = [c for c in cells if c["status"] == "error" and c["role"] == "fastaxo"
                 and c.get("error_kind") == "exception"]
    return {"cells": len(cells), "ok": sum(c["status"] == "ok" for c in cells),
            "skipped": sum(c["status"] == "skipped" for c in cells),
            "errors": sum(c["status"] == "error" for c in cells),
            "checks_passed": sum((c.get("check") or {}).get("status") == "pass" for c in cells),
            "checks_failed": len(failed),
            "baselines_differing": sum((c.get("check") or {}).get("status") == "baseline differs" for c in cells),
            "fastaxo_errors": len(fx_errors), "ok_overall": not failed and not fx_errors}


def exit_code(results: dict[str, Any]) -> int:
    """0 when every check passed and no fastaxo cell raised; 1 otherwise."""
    return 0 if summarize(results)["ok_overall"] else 1


# ============================================================================ reports


def _speedup_text(c: dict) -> str:
    x = c.get("fastaxo_speedup")
    return "-" if x is None else (f"{x:,.1f}x" if x < 100 else f"{x:,.0f}x")


def _check_text(c: dict) -> str:
    ch = c.get("check")
    if not ch:
        return "-"
    if ch["status"] == "pass":
        return "pass (= " + ", ".join(x["against"] for x in ch["comparisons"] if x["pass"]) + ")"
    return f"{ch['status'].upper()}: {ch['detail']}"


def kernel_table(results: dict[str, Any], kname: str) -> str:
    meta = results["kernels"][kname]
    unit = meta["unit"]
    cells = [c for c in results["cells"] if c["kernel"] == kname]
    lines = [f"| rows | implementation | median | rows/s | {unit} | fastaxo speed-up | peak MiB | check |",
             "|---:|---|---:|---:|---:|---:|---:|---|"]
    for c in sorted(cells, key=lambda c: (c["rows"], list(meta["impls"]).index(c["impl"]))):
        label = f"**{c['label']}**" if c["role"] == "fastaxo" else c["label"]
        if c["status"] != "ok":
            lines.append(f"| {fmt_n(c['rows'])} | {label} | {c['status']}: {c['reason']} | | | | | |")
            continue
        tput = fmt_rate(c["tokens_per_s"]) if unit == "tokens/s" else (
            "-" if c["mb_per_s"] is None else f"{c['mb_per_s']:,.1f}")
        lines.append(f"| {fmt_n(c['rows'])} | {label} | {fmt_time(c['median_s'])} | {fmt_rate(c['rows_per_s'])} | "
                     f"{tput} | {_speedup_text(c)} | {fmt_mib(c['peak_mib'])} | {_check_text(c)} |")
    return "\n".join(lines)


def kernel_notes(results: dict[str, Any], kname: str) -> str:
    meta = results["kernels"][kname]
    out = [meta["about"], ""]
    for key, im in meta["impls"].items():
        vs = ""
        if im["counterpart"]:
            vs = f" Speed-up: this baseline's median / {meta['impls'][im['counterpart']]['label']}'s."
        out.append(f"- **{im['label']}** (`{key}`, {im['role']}): {im['what']}.{vs}")
    out.append("")
    for g, eq in meta["groups"].items():
        members = [im["label"] for im in meta["impls"].values() if im["group"] == g]
        if len(members) > 1:
            out.append(f"- Check ({', '.join(members)}): {eq}.")
    return "\n".join(out)


def render_markdown(results: dict[str, Any], images: dict[str, list[tuple[str, str]]] | None,
                    image_prefix: str = "", title: str = "fastaxo bench results", doc: bool = False) -> str:
    s = results["settings"]
    m = results["machine"]
    v = results["versions"]
    out = [f"# {title}", ""]
    if doc:
        out += [f"Made by `fastaxo bench` on {results['started'][:10]}; regenerate with the command below "
                "(`--markdown-doc BENCHMARKS.md` writes this file and its charts under `docs/bench/`).", ""]
    out += ["## Command", "", "```", results["command"], "```", "",
            f"Wall time {results['wall_s']:,.0f} s; fastaxo git commit: {results.get('git_commit') or 'n/a (installed package)'}.",
            "", "## Machine", "",
            f"- CPU: {m['cpu']} ({m['cores']} cores, {m['machine']})",
            f"- RAM: {m['ram_gib']} GiB ({m['mem_available_gib']} GiB available at the start)",
            f"- OS: {m['os']}",
            f"- Python: {m['python']}", "", "## Versions", ""]
    out += [f"- {k}: {val}" for k, val in v.items() if val is not None]
    missing = [k for k, val in v.items() if val is None]
    if images and v.get("matplotlib") is None:
        # the run had no matplotlib; the charts were drawn from results.json afterwards
        try:
            import matplotlib

            missing = [k for k in missing if k != "matplotlib"]
            out.append(f"- matplotlib: {matplotlib.__version__} (the charts, drawn afterwards from results.json "
                       "with `fastaxo bench --from-json`; the run itself had none)")
        except ImportError:
            pass
    if missing:
        out.append(f"- not installed: {', '.join(missing)}")
    cfg = results.get("fastaxo_config", {})
    ext = {True: "loaded", False: "MISSING (pure-Python fallback)"}.get(cfg.get("extension"), cfg.get("extension"))
    out += [f"- fastaxo build: extension {ext}, OpenMP {cfg.get('openmp')}, SHA-256 path "
            f"{cfg.get('sha256')}, threads used {s['threads']}", "",
            "## Method", "",
            f"- Sizes: {', '.join(fmt_n(x) for x in s['sizes'])} rows; {s['reps']} timed run(s) per cell, the median "
            "is reported. Data: " + s["shape_description"] + "; generated (seeded) under a temporary directory.",
            "- Each cell (kernel, implementation, rows) runs in a fresh Python process: it loads the data and "
            "builds the input form the implementation takes (lists of Python objects for the plain-Python "
            "baselines and fast-axolotl: not timed), then runs once for the check and the peak memory, then "
            "the timed runs; before each timed run it touches (untimed) as much fresh memory as the first run's "
            "peak, so no implementation pays for pages the VM took back after the previous run.",
            f"- Threads: fastaxo {s['threads']}; fast-axolotl num_threads=0 (its own choice) where it takes "
            "one; pyarrow and HF datasets their defaults; the Python baselines one.",
            "- peak MiB: the process's VmHWM during that first run minus its RSS just before it (the loaded "
            "input excluded).",
            "- Checks: fastaxo's output is compared with each baseline of its group (SHA-256 of every output "
            "array); `baseline differs` marks a baseline whose output differs from both fastaxo and the "
            "reference implementation of the group.",
            f"- Skips: a cell is skipped when its estimated peak exceeds the memory budget "
            f"({s['memory_budget_gib']} GiB: half of MemAvailable unless `--memory-budget-gib`), when one run "
            f"is estimated (from the smaller sizes) to take over {s['max_cell_seconds']:g} s, or when the data "
            "would not fit on the temp disk. Every skip is listed with its reason.",
            "- fastaxo speed-up: the baseline's median time / the median time of the fastaxo implementation "
            "named in the notes of each kernel (same input, same output or the stated equivalence).", ""]
    if results["unavailable"]:
        out += ["### Baselines not run", ""]
        out += [f"- {u['kernel']} / {u['label']}: {u['reason']}" for u in results["unavailable"]]
        out.append("")
    sm = results["summary"]
    out += ["## Summary", "",
            f"{sm['cells']} cells: {sm['ok']} ran, {sm['skipped']} skipped, {sm['errors']} errors; checks: "
            f"{sm['checks_passed']} passed, {sm['checks_failed']} failed, {sm['baselines_differing']} baselines "
            f"differing from the reference.", ""]
    for kname in results["kernels"]:
        meta = results["kernels"][kname]
        out += [f"## {meta['title']}", "", kernel_notes(results, kname), "", kernel_table(results, kname), ""]
        for alt, fname in (images or {}).get(kname, []):
            out += [f"![{alt}]({image_prefix}{fname})", ""]
        if images is not None and not images.get(kname):
            out += ["_No chart: no cell of this kernel ran._", ""]
    if images is None:
        out += ["_Charts were not drawn: matplotlib is not installed (`pip install 'fastaxo[bench]'` or "
                "`pip install matplotlib`)._", ""]
    return "\n".join(out)


def summary_text(results: dict[str, Any]) -> str:
    rows = []
    for c in results["cells"]:
        if c["status"] == "ok":
            rows.append([c["kernel"], fmt_n(c["rows"]), c["label"], fmt_time(c["median_s"]), fmt_rate(c["rows_per_s"]),
                         _speedup_text(c), fmt_mib(c["peak_mib"]), (c.get("check") or {}).get("status", "-")])
        else:
            rows.append([c["kernel"], fmt_n(c["rows"]), c["label"], c["status"], "", "", "", (c["reason"] or "")[:60]])
    headers = ["kernel", "rows", "implementation", "median", "rows/s", "fastaxo x", "peak MiB", "check / reason"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    fmt = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(headers), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def write_outputs(results: dict[str, Any], out_dir: str, markdown_doc: str | None,
                  log: Callable[[str], None] = print) -> dict[str, Any]:
    """results.json, results.md, the charts (when matplotlib is there) and optionally BENCHMARKS.md."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    images: dict[str, list[tuple[str, str]]] | None
    try:
        from fastaxo._bench import charts

        images = charts.write_charts(results, out_dir)
    except ImportError as exc:
        images = None
        log(f"charts skipped: matplotlib is not installed ({exc}); install it with "
            "`pip install 'fastaxo[bench]'` (or `pip install matplotlib`) and re-render with "
            f"`fastaxo bench --from-json {os.path.join(out_dir, 'results.json')} --out {out_dir}`")
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(render_markdown(results, images))
    written = {"json": os.path.join(out_dir, "results.json"), "md": os.path.join(out_dir, "results.md"),
               "charts": [os.path.join(out_dir, fn) for v in (images or {}).values() for _a, fn in v]}
    if markdown_doc:
        doc_dir = os.path.dirname(os.path.abspath(markdown_doc))
        rel = "docs/bench/"
        img_dir = os.path.join(doc_dir, rel)
        os.makedirs(doc_dir, exist_ok=True)
        if images:
            os.makedirs(img_dir, exist_ok=True)
            for v in images.values():
                for _a, fn in v:
                    shutil.copyfile(os.path.join(out_dir, fn), os.path.join(img_dir, fn))
        with open(markdown_doc, "w") as f:
            f.write(render_markdown(results, images, rel, title="fastaxo benchmarks", doc=True))
        written["doc"] = markdown_doc
    return written


# ============================================================================ entry points


def add_arguments(p: argparse.ArgumentParser) -> None:
    def positive_int(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {v}")
        return v

    def positive_float(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not v > 0 or math.isinf(v):
            raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
        return v

    p.add_argument("--quick", action="store_true",
                   help="sizes 10k and 100k, 1 timed run per cell (under two minutes on 2 cores)")
    p.add_argument("--out", default="fastaxo-bench", metavar="DIR",
                   help="where results.json, results.md and the PNG charts go (default ./fastaxo-bench)")
    p.add_argument("--sizes", type=parse_sizes, metavar="N,N,...",
                   help="row counts (default 10k,100k,1M,10M; --quick: 10k,100k); k/M suffixes accepted")
    p.add_argument("--kernels", type=parse_kernels, metavar="K,K,...",
                   help=f"kernels to run (default all): {', '.join(KERNELS)}; 'read' = the three readers")
    p.add_argument("--reps", type=positive_int, metavar="N", help="timed runs per cell, median reported (default 3; --quick: 1)")
    p.add_argument("--shape", choices=sorted(SHAPES), default="peer",
                   help="data shape: peer = uniform 10-100 tokens into 512-token bins, ~256 B text (default); "
                        "chat = lognormal ~300 tokens into 4096-token bins, ~1.2 kB text")
    p.add_argument("--threads", type=positive_int, metavar="T", help="fastaxo threads (default: its default)")
    p.add_argument("--pad-batch", type=positive_int, default=16, metavar="N", help="rows per collator batch in `pad` (default 16)")
    p.add_argument("--max-cell-seconds", type=positive_float, default=60.0, metavar="S",
                   help="skip a cell whose run is estimated (from the smaller sizes) to take longer (default 60)")
    p.add_argument("--memory-budget-gib", type=positive_float, metavar="GIB",
                   help="skip cells estimated to peak above this, kill those that reach it "
                        "(default: half of MemAvailable)")
    p.add_argument("--cell-timeout", type=positive_float, default=1800.0, metavar="S",
                   help="kill a cell after this many seconds (default 1800)")
    p.add_argument("--markdown-doc", metavar="FILE",
                   help="also write FILE (e.g. BENCHMARKS.md): command, machine, versions, tables, with the "
                        "charts copied to docs/bench/ next to it")
    p.add_argument("--from-json", metavar="FILE",
                   help="do not run anything: re-render results.md, the charts and --markdown-doc from a "
                        "results.json")
    p.add_argument("--tmp-dir", metavar="DIR", help="where to make the temporary data directory (default: the system's)")


def cmd_bench(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    command = "fastaxo bench" + ("" if not argv else " " + shlex.join(argv))
    # Checked before anything runs: a full matrix takes a while.
    bad = None
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        bad = f"--out {args.out} exists and is not a directory"
    elif args.markdown_doc and os.path.isdir(args.markdown_doc):
        bad = f"--markdown-doc {args.markdown_doc} is a directory; give a file name such as BENCHMARKS.md"
    if bad:
        print(f"fastaxo bench: error: {bad}", file=sys.stderr)
        return 2
    if args.from_json:
        try:
            with open(args.from_json) as f:
                results = json.load(f)
        except (OSError, ValueError) as exc:
            print(f"fastaxo bench: error: --from-json {args.from_json}: {exc}", file=sys.stderr)
            return 2
        if not isinstance(results, dict) or results.get("schema") != SCHEMA:
            print(f"fastaxo bench: error: {args.from_json} is not a {SCHEMA} results file", file=sys.stderr)
            return 2
        results["summary"] = summarize(results)
    else:
        sizes = args.sizes or list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
        reps = args.reps or (1 if args.quick else 3)
        o = Options(sizes=sizes, kernels=args.kernels or list(KERNELS), reps=reps, quick=args.quick,
                    out=args.out, shape=args.shape, threads=args.threads, pad_batch=args.pad_batch,
                    max_cell_seconds=args.max_cell_seconds,
                    memory_budget=None if args.memory_budget_gib is None else args.memory_budget_gib * GiB,
                    cell_timeout=args.cell_timeout, markdown_doc=args.markdown_doc, command=command,
                    tmp_dir=args.tmp_dir)
        try:
            results = run_matrix(o)
        except KeyboardInterrupt:
            print("fastaxo bench: interrupted; nothing written", file=sys.stderr)
            return 130
    written = write_outputs(results, args.out, args.markdown_doc)
    print()
    print(summary_text(results))
    sm = results["summary"]
    print()
    print(f"{sm['cells']} cells: {sm['ok']} ran, {sm['skipped']} skipped, {sm['errors']} errors; checks: "
          f"{sm['checks_passed']} passed, {sm['checks_failed']} FAILED, {sm['baselines_differing']} baselines "
          f"differing from the reference; {results['wall_s']:,.0f} s")
    print(f"wrote {written['json']}, {written['md']}"
          + (f", {len(written['charts'])} charts in {args.out}" if written["charts"] else ", no charts")
          + (f", {written['doc']}" if written.get("doc") else ""))
    code = exit_code(results)
    if code:
        print("fastaxo bench: a check failed or a fastaxo cell raised (see above)", file=sys.stderr)
    return code


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--cell":
        sys.exit(_child_main(sys.argv[2:]))
    ap = argparse.ArgumentParser(prog="python -m fastaxo._bench.matrix")
    add_arguments(ap)
    ns = ap.parse_args()
    sys.exit(cmd_bench(ns, sys.argv[1:]))
