"""The benchmark matrix's declarations: data shapes, kernels and their implementations
(what each calls, its memory estimate, its output keys), the constants every cell shares."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

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
            toks = (
                f"input_ids: lognormal mean ~{self.mean:.0f} tokens (sigma {self.sigma}), clipped "
                "to "
                f"[{self.lo}, {self.hi}]"
            )
        return (
            f"shape `{self.name}`: {toks} (int32 ids in [3, {VOCAB})), packed into rows of "
            f"{self.capacity} "
            "tokens; labels = input_ids with the first 30% of each row set to -100; text: random "
            "printable "
            f"ASCII, lognormal around {self.text_bytes} B; {DUP_FRACTION:.0%} of the rows are "
            "exact copies of "
            f"an earlier row (text and input_ids); columns id, text, input_ids"
        )

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
    bounded: bool = (
        False  # streams in bounded memory: its measured peak is not scaled with the rows
    )


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


# list[str]: str objects (49 B + data) + pointers
_LIST_STR = lambda e: e.text + 57 * e.n  # noqa: E731
# list of lists of Python ints (28 B + 8 B pointer)
_LISTS = lambda e: 36 * e.tokens + 64 * e.n  # noqa: E731
_ARROW_TEXT = lambda e: e.text + 16 * e.n  # noqa: E731
_ARROW_TOKENS = lambda e: 8 * e.tokens + 16 * e.n  # noqa: E731  input_ids + labels, int32
HASH_KEYS = ("digests",)
PACK_KEYS = ("input_ids", "labels", "position_ids", "attention_mask", "cu_seqlens")
PAD_KEYS = ("input_ids", "attention_mask", "labels")
READ_KEYS = ("rows", "id", "text.lengths", "text", "input_ids.lengths", "input_ids")


def _read_impls(fmt: str) -> tuple[Impl, ...]:
    py_label, py_what = {
        "parquet": (
            "pyarrow ParquetFile.iter_batches",
            "pq.ParquetFile(path).iter_batches() (defaults: pre_buffer=True)",
        ),
        "jsonl": (
            "pyarrow.json.open_json",
            "pyarrow.json.open_json(path), iterated (pyarrow's streaming JSON reader)",
        ),
        "arrow": (
            "pyarrow ipc.open_file",
            "pa.ipc.open_file(pa.OSFile(path)).get_batch(i) for every batch (read into memory)",
        ),
    }[fmt]
    hf_builder = {"parquet": "parquet", "jsonl": "json", "arrow": "arrow"}[fmt]
    fa_type = {"parquet": "parquet", "jsonl": "jsonl", "arrow": "arrow"}[fmt]
    return (
        Impl(
            "fastaxo",
            "fastaxo.iter_batches",
            "fastaxo",
            "rows",
            "fastaxo.iter_batches(path) with its defaults (8192-row RecordBatches, prefetch "
            "thread)",
            lambda e: min(2 * e.file, 700 * MiB),
            keys=READ_KEYS,
            bounded=True,
        ),
        Impl(
            "pyarrow",
            py_label,
            "baseline",
            "rows",
            py_what,
            lambda e: min(2 * e.file, 1.5 * e.file * CHUNK_ROWS / max(e.n, 1) + 300 * MiB),
            counterpart="fastaxo",
            keys=READ_KEYS,
            oracle=True,
            bounded=True,
        ),
        Impl(
            "hf_streaming",
            "HF datasets streaming",
            "baseline",
            "rows",
            f"datasets.load_dataset({hf_builder!r}, data_files=path, split='train', streaming=True)"
            ".with_format('arrow').iter(batch_size=1000)",
            lambda e: 400 * MiB + min(2 * e.file, 300 * MiB),
            counterpart="fastaxo",
            requires=("datasets",),
            keys=READ_KEYS,
            bounded=True,
        ),
        Impl(
            "fast_axolotl",
            "fast-axolotl streaming_dataset_reader",
            "baseline",
            "rows",
            f"fast_axolotl.streaming_dataset_reader(path, {fa_type!r}, batch_size=1000) (dicts of "
            "Python lists)",
            lambda e: e.file + e.text + 36 * e.tokens + 350 * e.n,
            counterpart="fastaxo",
            requires=("fast_axolotl",),
            keys=READ_KEYS,
        ),
    )


def _kernels() -> dict[str, Kernel]:
    ks = [
        Kernel(
            "hash_rows",
            "hash_rows: SHA-256 of each text row",
            "MB/s",
            "text",
            "SHA-256 of every row of the `text` column (string bytes, as "
            "`hashlib.sha256(s.encode())`). "
            "MB/s counts the text bytes.",
            {"digests": "the n x 32-byte digests, identical (fast-axolotl's hex strings decoded)"},
            (
                Impl(
                    "fastaxo",
                    "fastaxo.hash_rows (Arrow)",
                    "fastaxo",
                    "digests",
                    "fastaxo.hash_rows(text column as a pyarrow ChunkedArray): hashed in place",
                    lambda e: _ARROW_TEXT(e) + 32 * e.n,
                    keys=HASH_KEYS,
                ),
                Impl(
                    "fastaxo_list",
                    "fastaxo.hash_rows (list[str])",
                    "fastaxo",
                    "digests",
                    "fastaxo.hash_rows(list of str): the same input the list-based baselines get",
                    lambda e: _ARROW_TEXT(e) + _LIST_STR(e) + 40 * e.n,
                    keys=HASH_KEYS,
                ),
                Impl(
                    "hashlib",
                    "hashlib loop (list[str])",
                    "baseline",
                    "digests",
                    "[hashlib.sha256(s.encode()).digest() for s in rows]",
                    lambda e: _ARROW_TEXT(e) + _LIST_STR(e) + 80 * e.n,
                    counterpart="fastaxo_list",
                    keys=HASH_KEYS,
                    oracle=True,
                ),
                Impl(
                    "fast_axolotl",
                    "fast-axolotl parallel_hash_rows (list[str])",
                    "baseline",
                    "digests",
                    "fast_axolotl.parallel_hash_rows(rows, 0) -> list of hex str",
                    lambda e: _ARROW_TEXT(e) + 2 * _LIST_STR(e) + 130 * e.n,
                    counterpart="fastaxo_list",
                    requires=("fast_axolotl",),
                    keys=HASH_KEYS,
                ),
            ),
        ),
        Kernel(
            "dedupe",
            "dedupe: exact dedupe of text rows (first occurrence kept)",
            "MB/s",
            "text",
            f"Indices of the first occurrence of each distinct `text` row ({DUP_FRACTION:.0%} of "
            "the rows are "
            "copies). MB/s counts the text bytes.",
            {"keep": "the kept row indices, identical"},
            (
                Impl(
                    "fastaxo",
                    "fastaxo.dedupe (Arrow)",
                    "fastaxo",
                    "keep",
                    "fastaxo.dedupe(text column as a pyarrow ChunkedArray).keep",
                    lambda e: _ARROW_TEXT(e) + 56 * e.n,
                    keys=("keep",),
                ),
                Impl(
                    "fastaxo_list",
                    "fastaxo.dedupe (list[str])",
                    "fastaxo",
                    "keep",
                    "fastaxo.dedupe(list of str).keep",
                    lambda e: _ARROW_TEXT(e) + _LIST_STR(e) + 64 * e.n,
                    keys=("keep",),
                ),
                Impl(
                    "hashlib",
                    "hashlib + set loop (list[str])",
                    "baseline",
                    "keep",
                    "a loop: d = hashlib.sha256(s.encode()).digest(); keep i if d not in a set "
                    "(then add it)",
                    lambda e: _ARROW_TEXT(e) + _LIST_STR(e) + 200 * e.n,
                    counterpart="fastaxo_list",
                    keys=("keep",),
                    oracle=True,
                ),
                Impl(
                    "fast_axolotl",
                    "fast-axolotl deduplicate_indices (list[str])",
                    "baseline",
                    "keep",
                    "fast_axolotl.deduplicate_indices(rows)[0]",
                    lambda e: _ARROW_TEXT(e) + 2 * _LIST_STR(e) + 250 * e.n,
                    counterpart="fastaxo_list",
                    requires=("fast_axolotl",),
                    keys=("keep",),
                ),
            ),
        ),
        Kernel(
            "pack_bins",
            "pack_bins: bin assignment (sequence lengths -> bins)",
            "tokens/s",
            "lengths",
            "Assign the rows' lengths (int64 NumPy array) to bins of the shape's capacity. "
            "tokens/s counts the "
            "tokens of the assigned rows.",
            {
                "bfd": "bin for bin: the same row indices in the same bins, in the same order",
                "ff": "bin for bin (fastaxo strategy='ff', group_size=100000, max_rows_per_bin=200 "
                "reproduces Axolotl's pack_parallel(group_size=100000, bin_size=200))",
            },
            (
                Impl(
                    "fastaxo",
                    "fastaxo.pack_bins (bfd)",
                    "fastaxo",
                    "bfd",
                    "fastaxo.pack_bins(lengths, capacity) (best-fit decreasing)",
                    lambda e: 64 * e.n,
                    keys=("indices", "offsets"),
                ),
                Impl(
                    "python",
                    "Python reference BFD",
                    "baseline",
                    "bfd",
                    "fastaxo._reference.packing.assign(lengths, capacity, ..., 'bfd'): plain "
                    "Python, bisect over "
                    "the sorted remaining spaces",
                    lambda e: 200 * e.n,
                    counterpart="fastaxo",
                    keys=("indices", "offsets"),
                    oracle=True,
                ),
                Impl(
                    "fastaxo_ff",
                    "fastaxo.pack_bins (ff, Axolotl's groups)",
                    "fastaxo",
                    "ff",
                    f"fastaxo.pack_bins(lengths, capacity, strategy='ff', group_size={AX_GROUP}, "
                    f"max_rows_per_bin={AX_BIN_SIZE})",
                    lambda e: 64 * e.n,
                    requires=("axolotl",),
                    keys=("indices", "offsets"),
                ),
                Impl(
                    "axolotl",
                    "Axolotl pack_parallel (numba)",
                    "baseline",
                    "ff",
                    "axolotl.utils.samplers.multipack.pack_parallel(lengths, capacity, "
                    f"group_size={AX_GROUP}, "
                    f"bin_size={AX_BIN_SIZE}) (numba, compiled before timing; Axolotl forks worker "
                    "processes "
                    "when there are several groups: their memory is not in this process's peak)",
                    lambda e: 900 * MiB + 200 * e.n,
                    counterpart="fastaxo_ff",
                    requires=("axolotl",),
                    keys=("indices", "offsets"),
                    oracle=True,
                ),
            ),
        ),
        Kernel(
            "pack",
            "pack: sample packing (bins + packed arrays)",
            "tokens/s",
            "tokens",
            "Pack input_ids + labels into padded rows of the shape's capacity: input_ids, labels, "
            "position_ids "
            "(restarting per sequence), attention_mask (segment ids) and cu_seqlens, int64. "
            "tokens/s counts the "
            "input tokens.",
            {
                "bfd": "every output array identical (input_ids, labels, position_ids, "
                "attention_mask, cu_seqlens)",
                "nf": "fast-axolotl's format: greedy next-fit in input order, each sequence "
                "appended as seq + [eos, pad], labels = the sequence and eos with -100 on the "
                "pads, no position_ids. "
                "Checked against fastaxo.pack(strategy='nf') run on the same sequences with [eos, "
                "pad] "
                "appended (labels: seq, eos, -100): input_ids and labels identical, and "
                "fast-axolotl's "
                "attention_mask equal to fastaxo's labels != -100",
            },
            (
                Impl(
                    "fastaxo",
                    "fastaxo.pack (bfd)",
                    "fastaxo",
                    "bfd",
                    "fastaxo.pack(input_ids, capacity, labels=labels) on Arrow ListArrays (bfd, "
                    "padded, int64)",
                    lambda e: _ARROW_TOKENS(e) + 34 * e.tokens + 16 * e.n,
                    keys=PACK_KEYS,
                ),
                Impl(
                    "python",
                    "plain Python packer (bfd, lists)",
                    "baseline",
                    "bfd",
                    "the reference BFD assignment, then Python list concatenation per bin (tokens, "
                    "labels, "
                    "position ids, segment ids), then np.array(..., int64)",
                    lambda e: _ARROW_TOKENS(e) + 2 * _LISTS(e) + 100 * e.tokens + 200 * e.n,
                    counterpart="fastaxo",
                    keys=PACK_KEYS,
                    oracle=True,
                ),
                Impl(
                    "fastaxo_nf",
                    "fastaxo.pack (nf, fast-axolotl's format)",
                    "fastaxo",
                    "nf",
                    "fastaxo.pack(ids + [eos, pad], capacity, labels=..., strategy='nf', "
                    "attention='ones', "
                    "position_ids=False)",
                    lambda e: 2 * _ARROW_TOKENS(e) + 30 * e.tokens + 100 * e.n,
                    requires=("fast_axolotl",),
                    keys=("rows", "input_ids", "labels", "attention_mask"),
                ),
                Impl(
                    "fast_axolotl",
                    "fast-axolotl pack_sequences (nf)",
                    "baseline",
                    "nf",
                    f"fast_axolotl.pack_sequences(rows, capacity, pad_token_id={PAD_ID}, "
                    f"eos_token_id={EOS_ID}) "
                    "(list of lists in, dict of lists out)",
                    lambda e: _ARROW_TOKENS(e) + _LISTS(e) + 130 * e.tokens + 200 * e.n,
                    counterpart="fastaxo_nf",
                    requires=("fast_axolotl",),
                    keys=("rows", "input_ids", "labels", "attention_mask"),
                ),
            ),
        ),
        Kernel(
            "pad",
            "pad: collator padding (batches of rows)",
            "tokens/s",
            "tokens",
            "Pad the rows in consecutive collator batches (--pad-batch rows, each batch to its own "
            "longest row, "
            "right side): input_ids (pad 0), attention_mask (1/0), labels (pad -100), int64. One "
            "call per batch; "
            "tokens/s counts the input tokens.",
            {
                "pad": "every batch's arrays identical (fast-axolotl: input_ids and labels; it "
                "makes no attention_mask)"
            },
            (
                Impl(
                    "fastaxo",
                    "fastaxo.pad (NumPy rows)",
                    "fastaxo",
                    "pad",
                    "fastaxo.pad(batch of NumPy int32 rows, labels=...) per batch",
                    lambda e: _ARROW_TOKENS(e) + 250 * e.n,
                    keys=PAD_KEYS,
                ),
                Impl(
                    "python",
                    "Python list pad",
                    "baseline",
                    "pad",
                    "r + [pad] * (width - len(r)) per row of lists, then np.array(..., int64), per "
                    "batch",
                    lambda e: _ARROW_TOKENS(e) + 2 * _LISTS(e),
                    counterpart="fastaxo",
                    keys=PAD_KEYS,
                    oracle=True,
                ),
                Impl(
                    "numpy",
                    "NumPy per-row copy",
                    "baseline",
                    "pad",
                    "np.full((rows, width), pad) then out[i, :len(r)] = r per row, per batch",
                    lambda e: _ARROW_TOKENS(e) + 250 * e.n,
                    counterpart="fastaxo",
                    keys=PAD_KEYS,
                ),
                Impl(
                    "fast_axolotl",
                    "fast-axolotl pad_sequences",
                    "baseline",
                    "pad",
                    "fast_axolotl.pad_sequences(ids, pad_value=0) and (labels, pad_value=-100) per "
                    "batch "
                    "(lists in, lists out; no mask)",
                    lambda e: _ARROW_TOKENS(e) + 2 * _LISTS(e),
                    counterpart="fastaxo",
                    requires=("fast_axolotl",),
                    keys=("input_ids", "labels"),
                ),
            ),
        ),
    ]
    for fmt, desc in (("parquet", "Parquet (snappy, row groups of 65,536 rows)"),
                      ("jsonl", "JSON Lines"),
                      ("arrow", "Arrow IPC file (record batches of 65,536 rows)")):
        ks.append(
            Kernel(
                f"read_{fmt}",
                f"read_{fmt}: streaming reader, {desc}",
                "MB/s",
                fmt,
                f"Read the whole {desc} file (columns id, text, input_ids) batch by batch, from "
                "open to the last "
                "batch. MB/s counts the file's bytes; the page cache is warm (the file was just "
                "written).",
                {
                    "rows": "the same rows and values in order (per column: id; text lengths and "
                    "bytes; input_ids lengths and values as int64), whatever the batch sizes"
                },
                _read_impls(fmt),
            )
        )
    return {k.name: k for k in ks}


KERNELS = _kernels()
KERNEL_ALIASES = {"read": [k for k in KERNELS if k.startswith("read_")], "all": list(KERNELS)}



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
        raise argparse.ArgumentTypeError(
            f"expected a row count such as 10000, 100k or 1M, got {text!r}"
        ) from None
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
