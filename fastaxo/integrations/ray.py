"""fastaxo on Ray: exact dedupe across a whole corpus and packing, on a Ray cluster.

    pip install 'fastaxo[ray]'

    from fastaxo.integrations.ray import prepare
    report = prepare(["data/*.parquet"], "packed/", 4096, address="auto")   # or a ray.data.Dataset

The result is what :func:`fastaxo.prepare` writes for the same input, split into shards: the
same kept rows (the first occurrence of each distinct row in the global order: files in the
order given, rows in file order; for a ``ray.data.Dataset``, its row order), the same windows of
``pack_window`` kept rows, packed the same way, so the shards ``part-00000.parquet``,
``part-00001.parquet``, ... read one after another hold exactly the rows of the single-machine
output file (window w is shard w). ``fastaxo.iter_batches("packed/")`` reads them in that
order; so does Axolotl's loader.

Stages (the driver holds unit descriptors, counts and object references, never rows):

1. **units**: the input cut into runs of consecutive rows in the global order: Parquet files
   by whole row groups (about ``unit_rows`` rows a unit, from the footers), other formats a
   file a unit, a ``ray.data.Dataset`` block by block (materialized, in its order). Row ``r``
   of unit ``u`` has the key ``u << 32 | r``, so keys sort in the global order.
2. **scan** (``ray.data`` ``map_batches``, one unit a batch): each unit is read, checked and cast
   as ``fastaxo prepare`` does (errors name the file and row), tokenized when a tokenizer is
   given, and every non-empty row hashed with fastaxo's SHA-256 kernel over the dedupe columns
   (the digests of the single-machine :class:`fastaxo.Seen`). Out: one small row per input
   row: digest (32 bytes), key, length, and the digest's partition.
3. **dedupe** (a shuffle keyed on the digest, in Ray tasks over the scan's blocks): each block
   is split into ``partitions`` by digest; one task per partition sees every copy of its
   digests and keeps the smallest key of each (the first occurrence in the global order),
   split by bucket (runs of units holding about ``pack_window`` rows); one task per bucket
   merges and sorts its kept keys. Memory per task: a partition's digests and keys (40 bytes a
   row) or a bucket's keys (8 bytes a kept row). With ``dedupe=False`` every non-empty row is
   kept (the same tasks, no digest comparison).
4. **pack** (Ray tasks, one per window): window w = kept rows ``[w * pack_window, (w + 1) *
   pack_window)`` of the global order. The task reads the units that hold them, takes those
   rows, packs them with ``fastaxo prepare``'s packer and writes shard w under a temporary name,
   renamed when complete (a retried task rewrites the same bytes; a half-written shard is
   never visible under its final name). Windows are independent: they run in parallel.

Each task sets fastaxo's thread count to the CPUs it reserves (``num_cpus_per_task``), so the
kernels, which release the GIL, use them without oversubscribing a node. Ray retries a task
whose worker died; every task here is a pure function of its inputs, so a retry gives the same
output: nothing lost, nothing doubled.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

try:
    import ray
    import ray.data
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "fastaxo.integrations.ray needs Ray Data: pip install 'fastaxo[ray]' "
        f"(or pip install 'ray[data]') ({exc})"
    ) from exc

import fastaxo
from fastaxo._core import arrow
from fastaxo._core.checks import positive_int
from fastaxo.errors import (
    FastaxoError,
    InvalidInputError,
    InvalidTypeError,
    SchemaMismatchError,
)
from fastaxo.pipeline.prepare import (
    ATTENTION_MODES,
    DEFAULT_PACK_WINDOW,
    _check_batch,
    _compact,
    _Counts,
    _load_tokenizer,
    _pack_window,
    _Writer,
    output_schema,
)

__all__ = ["prepare", "RayPrepareReport", "DEFAULT_UNIT_ROWS", "MANIFEST"]

DEFAULT_UNIT_ROWS = 16_384   # rows per unit of input (Parquet: whole row groups up to about this). A window's
                             # task reads whole units, so smaller units read fewer rows it does not pack
MANIFEST = "_fastaxo_ray.json"
_KEY_SHIFT = 32              # key = unit << 32 | row in unit
_ROW_MASK = (1 << _KEY_SHIFT) - 1
_I32 = pa.int32()


# ---------------------------------------------------------------------------------------------
# the report

@dataclass
class RayPrepareReport(_Counts):
    """What :func:`prepare` did on Ray. The counts mean what :class:`fastaxo.PrepareReport`'s
    do; ``shards`` are the output files in order (shard w = window w), ``window_bins`` /
    ``window_lower_bound`` each window's bins and its own lower bound; stage times are wall
    seconds of the driver waiting for each stage; ``nodes`` / ``cpus`` describe the cluster."""

    units: int = 0
    partitions: int = 0
    buckets: int = 0
    shards: list[str] = field(default_factory=list)
    window_bins: list[int] = field(default_factory=list)
    window_lower_bound: list[int] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    nodes: int = 0
    cpus: float = 0.0
    cpus_per_task: float = 1.0
    threads_per_task: int = 1

    def __str__(self) -> str:
        pct = lambda a, b: f"{100 * a / b:.2f}%" if b else "0%"  # noqa: E731
        extra = self.bins - self.lower_bound
        worst = max(((b - lb) / lb for b, lb in zip(self.window_bins, self.window_lower_bound) if lb),
                    default=0.0)
        stages = ", ".join(f"{k} {v:.2f} s" for k, v in self.stage_seconds.items())
        return "\n".join([
            f"fastaxo prepare on Ray ({self.nodes} node(s), {self.cpus:g} CPUs, {self.cpus_per_task:g} CPU(s) and "
            f"{self.threads_per_task} thread(s) a task): {len(self.inputs)} input(s) -> {self.output}",
            f"  rows in            {self.rows_in:,} ({self.tokens_in:,} tokens) in {self.units:,} units",
            f"  duplicates dropped {self.duplicates:,} ({pct(self.duplicates, self.rows_in)})"
            + ("" if self.dedupe else " [dedupe off]")
            + (f"; empty rows left out {self.empty_rows:,}" if self.empty_rows else "")
            + f"; shuffle: {self.partitions} digest partitions, {self.buckets} key buckets",
            f"  over-long rows     {self.overlong:,} longer than {self.seq_len:,}"
            + (f" ({self.overflow})" if self.overlong else ""),
            f"  packed             {self.rows_packed:,} rows ({self.sequences_out:,} sequences, {self.tokens_out:,} "
            f"tokens) -> {self.bins:,} bins of {self.seq_len:,} ({self.strategy}, {self.windows:,} windows of "
            f"{self.pack_window:,} rows, a shard each)",
            f"  efficiency         {self.efficiency:.4%} of the bins' tokens used; lower bound {self.lower_bound:,} "
            f"bins (+{extra:,}, {pct(extra, self.lower_bound)}); worst window +{worst:.2%} over its own bound",
            f"  time               {self.seconds:.2f} s: {self.rows_per_s:,.0f} rows/s, {self.tokens_per_s:,.0f} "
            f"tokens/s; stages: {stages}",
            f"  output             {len(self.shards):,} shards, {self.row_groups:,} row groups, "
            f"{self.output_bytes / 2**20:,.0f} MiB",
        ])


# ---------------------------------------------------------------------------------------------
# units

@dataclass(frozen=True)
class _Unit:
    """Consecutive rows of the input: rows [row0, row0 + nrows) of a file (Parquet: the row
    groups ``rgs``; other formats: the whole file, nrows unknown until read = -1), or block
    ``block`` of a dataset."""

    kind: str                 # "parquet" | "file" | "block"
    path: str = ""
    fmt: str = ""
    compression: str | None = None
    rgs: tuple[int, ...] = ()
    row0: int = 0
    nrows: int = -1
    block: int = -1
    ref: Any = None           # "block": the block's ObjectRef (a task that gets the unit can get it)

    def where(self, row: int) -> tuple[str, int]:
        """(the file or block named in errors, the row there) of row ``row`` of this unit."""
        if self.kind == "block":
            return f"dataset block {self.block}", row
        return self.path, self.row0 + row


def _plan_files(inputs: Any, fmt: str | None, unit_rows: int) -> list[_Unit]:
    from fastaxo.readers import resolve_source

    units: list[_Unit] = []
    for path, f, comp in resolve_source(inputs, fmt):
        if f != "parquet":
            units.append(_Unit("file", path, f, comp))
            continue
        import pyarrow.parquet as pq

        try:
            md = pq.read_metadata(path)
        except (pa.ArrowInvalid, OSError) as e:
            from fastaxo.errors import FileFormatError

            raise FileFormatError(f"{path}: not a readable Parquet file: {e}", path) from None
        rgs: list[int] = []
        n = row0 = 0
        for g in range(md.num_row_groups):
            rgs.append(g)
            n += md.row_group(g).num_rows
            if n >= unit_rows:
                units.append(_Unit("parquet", path, f, None, tuple(rgs), row0, n))
                row0 += n
                rgs, n = [], 0
        if rgs:
            units.append(_Unit("parquet", path, f, None, tuple(rgs), row0, n))
    return units


def _schema_of_unit(u: _Unit) -> pa.Schema:
    if u.kind == "block":
        return ray.get(u.ref).schema
    if u.kind == "parquet":
        import pyarrow.parquet as pq

        return pq.read_schema(u.path)
    return fastaxo.iter_batches(u.path, format=u.fmt, compression=u.compression, batch_rows=1024).schema


def _read_unit(u: _Unit, columns: list[str]) -> pa.Table:
    """The unit's rows, the given columns, as one table."""
    if u.kind == "block":
        t = ray.get(u.ref)
        missing = [c for c in columns if c not in t.column_names]
        if missing:
            raise SchemaMismatchError(f"dataset block {u.block}: no column {missing[0]!r} (columns: {t.column_names}); "
                                      "every block must have the columns of the first")
        return t.select(columns)
    if u.kind == "parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(u.path, pre_buffer=False, buffer_size=1 << 20)
        return pf.read_row_groups(list(u.rgs), columns=columns, use_threads=False)
    with fastaxo.iter_batches(u.path, format=u.fmt, compression=u.compression, columns=columns,
                              prefetch=0) as it:
        batches = list(it)
        return pa.Table.from_batches(batches, schema=it.schema) if batches else it.schema.empty_table()


@dataclass(frozen=True)
class _Cfg:
    """Everything a task needs besides its unit (pickled into each task)."""

    seq_len: int
    strategy: str
    overflow: str
    attention: str
    dedupe: bool
    key_cols: tuple[str, ...]
    has_labels: bool
    tokenizer: str | None
    text_column: str
    partitions: int
    threads: int
    schema_options: str   # json of the output's metadata
    test_hold: str = ""   # FASTAXO_RAY_TEST_HOLD of the driver (tests only)


def _read_columns(cfg: _Cfg) -> list[str]:
    need = [cfg.text_column] if cfg.tokenizer is not None else ["input_ids"] + (["labels"] if cfg.has_labels else [])
    extra = [c for c in cfg.key_cols if c not in ("input_ids", "labels")] if cfg.dedupe else []
    return list(dict.fromkeys(need + extra))


_TOKENIZERS: dict[str, Any] = {}


def _tokenizer(cfg: _Cfg) -> Any:
    if cfg.tokenizer is None:
        return None
    tok = _TOKENIZERS.get(cfg.tokenizer)
    if tok is None:
        tok = _TOKENIZERS[cfg.tokenizer] = _load_tokenizer(cfg.tokenizer)
    return tok


def _checked_unit(u: _Unit, cfg: _Cfg) -> tuple[pa.RecordBatch, dict[str, pa.Array],
                                                                          np.ndarray]:
    """(the unit's raw columns, its checked token columns as list<int32>, lengths), with the
    checks and errors of ``fastaxo prepare`` (the file and row named)."""
    raw = _read_unit(u, _read_columns(cfg)).combine_chunks()
    path, row0 = u.where(0)
    batch = pa.RecordBatch.from_arrays(
        [c.chunk(0) if c.num_chunks else pa.array([], c.type) for c in raw.columns], schema=raw.schema)
    work, lens, _ = _check_batch(batch, path, row0, tok=_tokenizer(cfg), text_column=cfg.text_column,
                                 has_labels=cfg.has_labels, seq_len=cfg.seq_len, overflow=cfg.overflow)
    return batch, work, lens


# ---------------------------------------------------------------------------------------------
# stage 2: scan (map_batches over units)

_SCAN_SCHEMA = pa.schema([("part", pa.int32()), ("digest", pa.binary(32)), ("key", pa.int64()),
                          ("len", pa.int64()), ("nonempty", pa.int64()), ("error", pa.binary())])
_ERROR_PART = -2   # a unit whose rows failed a check: one row, key = unit, error = the pickled error


def _scan_batch(batch: pa.Table, cfg: _Cfg, block_refs: list[Any] | None) -> pa.Table:
    """map_batches function: one unit (a one-row batch: its index and pickled descriptor; a
    dataset block's ObjectRef comes from ``block_refs``, which Ray serializes in band) -> one row
    per input row: digest partition (-1 for an empty row), digest (zeros unless deduping), key,
    length."""
    import dataclasses
    import pickle

    fastaxo_threads = cfg.threads
    outs = []
    for ui, spec in zip(batch.column("unit").to_pylist(), batch.column("spec").to_pylist()):
        u = pickle.loads(spec)
        if u.kind == "block":
            u = dataclasses.replace(u, ref=block_refs[u.block])
        try:
            raw, work, lens = _checked_unit(u, cfg)
        except FastaxoError as exc:
            # Returned as data, not raised: Ray keeps only the text of a task's exception chain, and
            # the driver reports the error of the first bad unit in the global order, as the
            # single-machine prepare would (several units may fail at once here).
            outs.append(pa.table({"part": pa.array([_ERROR_PART], pa.int32()),
                                  "digest": pa.array([b"\0" * 32], pa.binary(32)), "key": pa.array([ui], pa.int64()),
                                  "len": pa.array([0], pa.int64()), "nonempty": pa.array([0], pa.int64()),
                                  "error": pa.array([pickle.dumps(exc)], pa.binary())}, schema=_SCAN_SCHEMA))
            continue
        n = raw.num_rows
        if n >= 1 << _KEY_SHIFT:
            raise InvalidInputError(f"{u.where(0)[0]}: a unit of {n:,} rows; units hold < 2**32 rows "
                                    "(lower unit_rows)")
        keys = (np.int64(ui) << _KEY_SHIFT) + np.arange(n, dtype=np.int64)
        nonempty = lens > 0
        part = np.full(n, -1, np.int32)
        digest = np.zeros((n, 32), np.uint8)
        if cfg.dedupe and n:
            key_tab = pa.table({c: (work[c] if c in work else raw.column(c)) for c in cfg.key_cols})
            digest = fastaxo.hash_rows(key_tab, num_threads=fastaxo_threads)
            part = (digest[:, :8].copy().view(np.uint64).ravel() % np.uint64(cfg.partitions)).astype(np.int32)
        elif n:
            part = np.zeros(n, np.int32)
        part[~nonempty] = -1
        outs.append(pa.table({
            "part": arrow.from_numpy(part),
            "digest": pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), n, [None, pa.py_buffer(digest)]),
            "key": arrow.from_numpy(keys),
            "len": arrow.from_numpy(lens.astype(np.int64, copy=False)),
            "nonempty": arrow.from_numpy(nonempty.astype(np.int64)),
            "error": pa.nulls(n, pa.binary()),
        }, schema=_SCAN_SCHEMA))
    return pa.concat_tables(outs) if outs else _SCAN_SCHEMA.empty_table()


# ---------------------------------------------------------------------------------------------
# stage 3: a shuffle keyed on the digest (Ray tasks over the scan's blocks)
#
#   split (one task per scan block): rows -> P partitions by digest (part), each (digest, key)
#   first (one task per partition): every copy of a digest is here; the smallest key of each
#       digest is its first occurrence -> kept keys, split into B buckets (ranges of units)
#   merge (one task per bucket): the bucket's kept keys from every partition, sorted
#
# Ray Data's own repartition(keys=...) does the same with actors; these plain tasks start in
# milliseconds, their outputs are lineage-reconstructable objects, and every step is a pure
# function of its inputs (a retried task returns the same bytes).

def _digests(block: pa.Table) -> np.ndarray:
    arr = block.column("digest").combine_chunks()
    return np.frombuffer(arr.buffers()[1], np.uint8, count=32 * len(arr), offset=32 * arr.offset).reshape(-1, 32)


@ray.remote(max_retries=3)
def _block_totals(block: pa.Table) -> dict[str, Any]:
    """rows, tokens, non-empty rows per unit, and the first failed unit's error (if any) of a
    scanned block."""
    part = arrow.fixed_view(block.column("part").combine_chunks()) if block.num_rows else np.zeros(0, np.int32)
    keys = arrow.fixed_view(block.column("key").combine_chunks()) if block.num_rows else np.zeros(0, np.int64)
    err = np.flatnonzero(part == _ERROR_PART)
    error = None
    if len(err):
        i = int(err[np.argmin(keys[err])])
        error = (int(keys[i]), block.column("error")[i].as_py())
    ok = part != _ERROR_PART
    lens = arrow.fixed_view(block.column("len").combine_chunks())[ok] if block.num_rows else np.zeros(0, np.int64)
    units = keys[ok] >> _KEY_SHIFT
    nonempty = part[ok] >= 0
    uniq, counts = np.unique(units[nonempty], return_counts=True)
    return {"rows": int(ok.sum()), "tokens": int(lens.sum()), "nonempty": {int(u): int(c) for u, c in zip(uniq, counts)},
            "error": error}


def _split_parts_fn(parts: int, *blocks: pa.Table) -> list[pa.Table]:
    """The non-empty rows of some scanned blocks, by digest partition: ``parts`` (digest, key)
    tables. (A task takes a group of blocks: the shuffle's objects are tasks x partitions.)"""
    block = pa.concat_tables([b.select(["part", "digest", "key"]) for b in blocks]).combine_chunks()
    part = arrow.fixed_view(block.column("part").combine_chunks()) if block.num_rows else np.zeros(0, np.int32)
    sel = np.flatnonzero(part >= 0)
    t = block.select(["digest", "key"]).take(arrow.from_numpy(sel))
    p = part[sel]
    order = np.argsort(p, kind="stable")
    t = t.take(arrow.from_numpy(order))
    bounds = np.searchsorted(p[order], np.arange(parts + 1))
    out = [t.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])) for i in range(parts)]
    return out[0] if parts == 1 else out  # num_returns=1 makes the return value the one object


def _first_keys_fn(bucket_of_unit: np.ndarray, buckets: int, dedupe: bool, *tables: pa.Table) -> list[np.ndarray]:
    """Kept keys of one partition, by bucket: with dedupe the smallest key of each digest (its
    first occurrence in the global order), else every key."""
    parts = [t for t in tables if t.num_rows]
    if parts:
        keys = np.concatenate([arrow.fixed_view(t.column("key").combine_chunks()) for t in parts])
    else:
        keys = np.zeros(0, np.int64)
    if dedupe and len(keys):
        dig = np.concatenate([_digests(t) for t in parts])
        # sort by (digest, key): lexsort's last key is the primary one; big-endian words keep
        # the byte order of the digest
        order = np.lexsort([keys] + [dig[:, k:k + 8].copy().view(">u8").ravel() for k in (24, 16, 8, 0)])
        d = dig[order]
        first = np.ones(len(order), bool)
        first[1:] = np.any(d[1:] != d[:-1], axis=1)
        keys = keys[order[first]]
    b = bucket_of_unit[keys >> _KEY_SHIFT]
    order = np.argsort(b, kind="stable")
    keys, b = keys[order], b[order]
    bounds = np.searchsorted(b, np.arange(buckets + 1))
    out = [np.ascontiguousarray(keys[bounds[i]:bounds[i + 1]]) for i in range(buckets)]
    return out[0] if buckets == 1 else out


@ray.remote(num_cpus=0.1, max_retries=3)
def _count(keys: np.ndarray) -> int:
    return len(keys)


@ray.remote(max_retries=3)
def _merge_bucket(*pieces: np.ndarray) -> np.ndarray:
    """The kept keys of one bucket, from every partition, sorted (= the global order)."""
    keys = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
    keys.sort()
    return keys


# ---------------------------------------------------------------------------------------------
# stage 4: a window

def _test_hold(spec: str, stage: str, index: int) -> None:
    """Fault injection for the tests: with FASTAXO_RAY_TEST_HOLD="pack:W:DIR" in the driver's
    environment, the first attempt of window W's task writes its pid to DIR/hold-W.pid and
    waits (up to 2 min) to be killed."""
    if spec.count(":") < 2:
        return
    kind, idx, hold_dir = spec.split(":", 2)
    if kind != stage or idx != str(index):
        return
    pid_file = os.path.join(hold_dir, f"hold-{index}.pid")
    done = pid_file + ".seen"
    if os.path.exists(done):
        return  # a retry: run
    with open(done, "w"):
        pass
    with open(pid_file + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(pid_file + ".tmp", pid_file)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.05)


def _pack_task(w: int, lo: int, hi: int, bucket_base: int, u_lo: int, units: list[_Unit], cfg: _Cfg, out_dir: str,
               *bucket_keys: np.ndarray) -> dict[str, Any]:
    """Window w: kept rows [lo, hi) of the global order, found in the sorted kept keys of its
    buckets (consecutive; the first bucket's first key has global position ``bucket_base``).
    ``units`` are the units u_lo, u_lo + 1, ... of those buckets (only they travel with the
    task). Reads the units holding the rows, packs them and writes shard w."""
    t0 = time.perf_counter()
    _test_hold(cfg.test_hold, "pack", w)
    keys = np.concatenate(bucket_keys)[lo - bucket_base: hi - bucket_base]
    unit_of = keys >> _KEY_SHIFT
    rows = keys & _ROW_MASK
    parts: list[pa.Table] = []
    bounds = np.flatnonzero(np.diff(unit_of)) + 1
    for a, b in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(keys)]])):
        if a == b:
            continue
        u = units[int(unit_of[a]) - u_lo]
        _, work, _ = _checked_unit(u, cfg)
        parts.append(_compact(pa.table(work), rows[a:b]))  # rows are increasing (keys sorted)
    table = pa.concat_tables([p.cast(parts[0].schema) for p in parts]) if parts else None
    schema = output_schema(cfg.has_labels, cfg.attention, json.loads(cfg.schema_options))
    name = f"part-{w:05d}.parquet"
    writer = _Writer(os.path.join(out_dir, name), schema)
    try:
        st = _pack_window(table, writer, list(schema), seq_len=cfg.seq_len, strategy=cfg.strategy,
                          overflow=cfg.overflow, att_mode=ATTENTION_MODES[cfg.attention], has_labels=cfg.has_labels,
                          num_threads=cfg.threads)
        nbytes = writer.commit()
    except BaseException:
        writer.abort()
        raise
    return {"window": w, "shard": name, "stats": st, "row_groups": writer.row_groups, "bytes": nbytes,
            "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------------------------
# the driver

def _unwrap(exc: BaseException) -> BaseException:
    """The fastaxo error inside a Ray task error, if there is one."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, FastaxoError):
            return e
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException) and id(cause) not in seen:
            e = cause
            continue
        e = e.__cause__ or e.__context__
    return exc


def _quiet_ray_data() -> None:
    """No progress bars or per-operator INFO lines from Ray Data (fastaxo prints its report)."""
    import logging

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    for attr in ("enable_operator_progress_bars", "print_on_execution_start"):
        if hasattr(ctx, attr):
            setattr(ctx, attr, False)
    for name in ("ray.data", "ray.data._internal.execution.streaming_executor",
                 "ray.data._internal.progress"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _init_ray(address: str | None) -> None:
    _quiet_ray_data()
    if ray.is_initialized():
        return
    kw: dict[str, Any] = {"include_dashboard": False, "logging_level": "ERROR", "log_to_driver": False}
    if address in (None, "", "local"):
        ray.init(**kw)
    else:
        ray.init(address=address, **kw)


def _worker_fastaxo() -> tuple[str, bool, str]:
    """(where a worker imports fastaxo from, whether its compiled extension loaded, why not)."""
    from fastaxo._core import backend

    return fastaxo.__file__, backend.ext is not None, repr(backend.import_error)


def _check_workers_fastaxo() -> None:
    """Refuse to run when the workers' fastaxo lacks the compiled extension the driver has:
    Ray puts the driver's working directory on its workers' ``sys.path``, so a driver started
    in a fastaxo source checkout makes the workers import that uncompiled tree and run the
    pure-Python fallback, silently ~20x slower (what the tests' driver once did)."""
    from fastaxo._core import backend

    if backend.ext is None:
        return
    remedy = (f"this driver uses {os.path.dirname(fastaxo.__file__)}. Ray puts the driver's working directory "
              f"({os.getcwd()}) on its workers' sys.path: start the driver from another directory, or install "
              "fastaxo (with its extension) where the workers import it")
    try:
        where, has_ext, why = ray.get(ray.remote(num_cpus=0, max_retries=0)(_worker_fastaxo).remote())
    except ray.exceptions.RayTaskError as exc:  # e.g. FASTAXO_REQUIRE_EXTENSION=1 on the workers
        last = [ln.strip() for ln in str(exc).splitlines() if ln.strip()][-1]
        raise FastaxoError(f"Ray workers cannot import fastaxo with its compiled extension ({last}); {remedy}") from None
    if not has_ext:
        raise FastaxoError(f"Ray workers import fastaxo from {os.path.dirname(where)} without its compiled "
                           f"extension ({why}); {remedy}")


def prepare(inputs: Any, output: str, seq_len: int, *, strategy: str = "bfd", overflow: str = "error",
            attention: str = "segments", dedupe: bool = True, dedupe_columns: list[str] | None = None,
            pack_window: int = DEFAULT_PACK_WINDOW, tokenizer: str | None = None, text_column: str = "text",
            format: str | None = None, unit_rows: int = DEFAULT_UNIT_ROWS, partitions: int | None = None,
            num_cpus_per_task: float = 1, threads_per_task: int | None = None,
            address: str | None = None) -> RayPrepareReport:
    """Dedupe and pack tokenized rows on a Ray cluster: ``fastaxo prepare`` across machines.

    Parameters
    ----------
    inputs : path, directory, glob, list of them, or ray.data.Dataset
        Files any :func:`fastaxo.iter_batches` format reads (Parquet is cut by row groups), or
        a Ray Dataset with ``input_ids`` (and ``labels``) list columns, or text with
        ``tokenizer``. Its row order is the global order; make it deterministic.
    output : str
        A directory (created if missing; it must not hold shards already) for
        ``part-NNNNN.parquet`` and the manifest ``_fastaxo_ray.json``. On a cluster, a path every
        node can write (a shared file system).
    seq_len, strategy, overflow, attention, dedupe, dedupe_columns, pack_window, tokenizer, text_column, format
        As for :func:`fastaxo.prepare`; ``pack_window`` kept rows are packed together (a window
        is a shard, and the unit of parallelism of the packing stage: efficiency is measured per
        window, against its own lower bound). ``tokenizer`` is a local directory every node
        can read; with it, the text is tokenized twice (scan and pack) instead of holding the
        tokenized corpus in the object store.
    unit_rows : int
        Rows per unit of input (Parquet: whole row groups up to about this many).
    partitions : int, optional
        Digest partitions of the dedupe shuffle (default: about one per 2M rows, at least the
        cluster's CPUs).
    num_cpus_per_task : float
        CPUs each task reserves; ``threads_per_task`` (default: the same, at least 1) threads
        for fastaxo's kernels inside it.
    address : str, optional
        Ray cluster to connect to (``"auto"``, ``"host:port"``); ``None`` or ``"local"`` starts
        or joins a local Ray. An already initialised Ray is used as it is.

    Returns
    -------
    RayPrepareReport
    """
    from fastaxo.pipeline.prepare import (
        _check_options,
        _first_columns,
        _input_columns,
        _schema_options,
    )

    seq_len, strategy, overflow, attention, pack_window, dedupe_columns = _check_options(
        seq_len, strategy, overflow, attention, pack_window, dedupe_columns)
    unit_rows = positive_int(unit_rows, "unit_rows")
    if partitions is not None:
        partitions = positive_int(partitions, "partitions")
    if not isinstance(num_cpus_per_task, (int, float)) or isinstance(num_cpus_per_task, bool) or num_cpus_per_task <= 0:
        raise InvalidInputError(f"num_cpus_per_task must be a number > 0, got {num_cpus_per_task!r:.40}")
    threads = positive_int(threads_per_task, "threads_per_task") if threads_per_task is not None \
        else max(1, int(num_cpus_per_task))
    if not isinstance(output, (str, os.PathLike)):
        raise InvalidTypeError(f"output must be a directory path, got {type(output).__name__}")
    output = os.path.abspath(os.fspath(output))
    if os.path.exists(output) and not os.path.isdir(output):
        raise InvalidInputError(f"output: {output!r} exists and is not a directory")
    if os.path.isdir(output) and any(n.startswith("part-") and n.endswith(".parquet") for n in os.listdir(output)):
        raise InvalidInputError(f"output: {output!r} already holds shards (part-*.parquet); use an empty directory")
    tok_dir = os.path.abspath(tokenizer) if tokenizer is not None else None
    if tok_dir is not None:
        _load_tokenizer(tok_dir)  # fail here, not in a task

    t_start = time.perf_counter()
    _init_ray(address)
    _check_workers_fastaxo()
    stage: dict[str, float] = {}

    # ---- 1. units
    t = time.perf_counter()
    is_dataset = isinstance(inputs, ray.data.Dataset)
    if is_dataset:
        refs = inputs.materialize().to_arrow_refs()
        units = [_Unit("block", block=i, ref=r) for i, r in enumerate(refs)]
        names = [f"ray.data.Dataset ({len(refs)} blocks)"]
    else:
        units = _plan_files(inputs, format, unit_rows)
        names = list(dict.fromkeys(u.path for u in units))
        out_dir = output + os.sep
        for p in names:
            if os.path.abspath(p).startswith(out_dir):
                raise InvalidInputError(f"output: {output!r} holds the input {p!r}")
    if not units:
        raise InvalidInputError("inputs: no rows (a dataset without blocks)")
    if len(units) >= 2**31:
        raise InvalidInputError(f"inputs: {len(units):,} units; raise unit_rows")
    where0 = units[0].where(0)[0]
    has_labels, key_cols = _first_columns(_schema_of_unit(units[0]), where0, tok_dir is not None,
                                          text_column, dedupe_columns)
    firsts_of_source = [units[0]] if is_dataset else [next(x for x in units if x.path == p) for p in names]
    for u in firsts_of_source:
        _input_columns(_schema_of_unit(u), u.where(0)[0], where0, tokenizing=tok_dir is not None,
                       text_column=text_column, has_labels=has_labels, dedupe=dedupe, key_cols=key_cols)
    known_rows = sum(u.nrows for u in units if u.nrows > 0)
    res = ray.cluster_resources()
    cpus = float(res.get("CPU", 1.0))
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    P = partitions or max(int(cpus), -(-max(known_rows, 1) // 2_000_000))
    options = _schema_options(seq_len, strategy, overflow, attention, bool(dedupe), key_cols, pack_window)
    cfg = _Cfg(seq_len, strategy, overflow, attention, bool(dedupe), tuple(key_cols), has_labels, tok_dir,
               text_column, P, threads, json.dumps(options), os.environ.get("FASTAXO_RAY_TEST_HOLD", ""))
    os.makedirs(output, exist_ok=True)
    stage["plan"] = time.perf_counter() - t

    rep = RayPrepareReport(inputs=names, output=output, seq_len=seq_len, strategy=strategy, overflow=overflow,
                           attention=attention, pack_window=pack_window, dedupe=bool(dedupe),
                           dedupe_columns=key_cols if dedupe else None, labels=has_labels, tokenizer=tok_dir,
                           units=len(units), partitions=P, nodes=nodes, cpus=cpus,
                           cpus_per_task=float(num_cpus_per_task), threads_per_task=threads)
    task_opts = {"num_cpus": num_cpus_per_task}
    try:
        # ---- 2. scan: map_batches over the units
        t = time.perf_counter()
        import dataclasses
        import pickle

        # one row a unit, with its descriptor: each scan task carries its own unit, not the list
        specs = [pickle.dumps(dataclasses.replace(u, ref=None)) for u in units]
        units_ds = ray.data.from_arrow(pa.table({"unit": pa.array(np.arange(len(units), dtype=np.int64)),
                                                 "spec": pa.array(specs, pa.binary())}))
        units_ds = units_ds.repartition(len(units))
        scanned = units_ds.map_batches(_scan_batch, batch_size=1, batch_format="pyarrow", zero_copy_batch=True,
                                       fn_kwargs={"cfg": cfg, "block_refs": refs if is_dataset else None},
                                       **task_opts).materialize()
        stage["scan"] = time.perf_counter() - t

        t = time.perf_counter()
        scan_refs = scanned.to_arrow_refs()
        totals = ray.get([_block_totals.remote(r) for r in scan_refs])
        errors = [x["error"] for x in totals if x["error"] is not None]
        if errors:
            import pickle

            raise pickle.loads(min(errors)[1])
        rep.rows_in = sum(x["rows"] for x in totals)
        rep.tokens_in = sum(x["tokens"] for x in totals)
        per_unit = np.zeros(len(units), np.int64)
        for x in totals:
            for u, c in x["nonempty"].items():
                per_unit[u] += c
        nonempty = int(per_unit.sum())
        rep.empty_rows = rep.rows_in - nonempty
        stage["count"] = time.perf_counter() - t

        # ---- 3. dedupe: a shuffle keyed on the digest; the kept keys by bucket, sorted. Buckets:
        # runs of units of about range_rows non-empty rows (at least a window, and about four a
        # CPU), so that the objects of the shuffle stay (split tasks + buckets) x partitions.
        t = time.perf_counter()
        range_rows = max(pack_window, -(-nonempty // max(4 * int(cpus), 1)))
        cum = np.cumsum(per_unit)
        bucket_of_unit = np.maximum(cum - 1, 0) // range_rows
        bucket_of_unit = np.maximum.accumulate(bucket_of_unit).astype(np.int64)  # monotone by unit
        B = int(bucket_of_unit[-1]) + 1
        rep.buckets = B
        split = ray.remote(max_retries=3)(_split_parts_fn).options(num_returns=P, **task_opts)
        first = ray.remote(max_retries=3)(_first_keys_fn).options(num_returns=B, **task_opts)
        n_split = min(len(scan_refs), max(4 * int(cpus), 1))
        groups = [scan_refs[i::n_split] for i in range(n_split)]
        parts_of_block = [split.remote(P, *g) for g in groups if g]
        if P == 1:
            parts_of_block = [[x] for x in parts_of_block]
        bucket_of_unit_ref = ray.put(bucket_of_unit)
        firsts = []
        for p in range(P):
            out = first.remote(bucket_of_unit_ref, B, bool(dedupe), *[pb[p] for pb in parts_of_block])
            firsts.append([out] if B == 1 else out)
        buckets = [_merge_bucket.remote(*[f[b] for f in firsts]) for b in range(B)]
        counts = np.array(ray.get([_count.remote(x) for x in buckets]), np.int64)
        stage["dedupe"] = time.perf_counter() - t

        # ---- 4. windows: kept rows in the global order, pack_window at a time
        t = time.perf_counter()
        kept_total = int(counts.sum())
        rep.duplicates = nonempty - kept_total
        starts = np.zeros(B + 1, np.int64)
        np.cumsum(counts, out=starts[1:])
        nwin = -(-kept_total // pack_window)
        pack = ray.remote(max_retries=3)(_pack_task).options(**task_opts)
        futures = []
        for w in range(nwin):
            lo, hi = w * pack_window, min(kept_total, (w + 1) * pack_window)
            b0 = int(np.searchsorted(starts, lo, side="right")) - 1
            b1 = int(np.searchsorted(starts, hi, side="left"))   # buckets [b0, b1) hold [lo, hi)
            u_lo = int(np.searchsorted(bucket_of_unit, b0, side="left"))
            u_hi = int(np.searchsorted(bucket_of_unit, b1, side="left"))  # the units of buckets [b0, b1)
            futures.append(pack.remote(w, lo, hi, int(starts[b0]), u_lo, units[u_lo:u_hi], cfg, output,
                                       *buckets[b0:b1]))
        results = ray.get(futures)
        stage["pack"] = time.perf_counter() - t
    except Exception as exc:  # Ray wraps a task's exception (RayTaskError, Ray Data's UserCodeException)
        inner = _unwrap(exc)
        if inner is not exc:
            raise inner from None
        raise
    finally:
        # temporary files of attempts that died before their rename (a retry wrote the shard)
        for n in os.listdir(output):
            if n.startswith(".part-") and ".fastaxo-tmp-" in n:
                try:
                    os.unlink(os.path.join(output, n))
                except OSError:
                    pass

    for r in sorted(results, key=lambda r: r["window"]):
        st = r["stats"]
        rep.add_pack_stats(st)
        rep.shards.append(r["shard"])
        rep.window_bins.append(st.bins)
        rep.window_lower_bound.append(st.lower_bound)
        rep.row_groups += r["row_groups"]
        rep.output_bytes += r["bytes"]
    rep.stage_seconds = {k: round(v, 3) for k, v in stage.items()}
    rep.finish(time.perf_counter() - t_start)
    tmp = os.path.join(output, f".{MANIFEST}.tmp")
    with open(tmp, "w") as fh:
        json.dump({"shards": rep.shards, "report": rep.as_dict()}, fh, indent=1)
    os.replace(tmp, os.path.join(output, MANIFEST))
    return rep
