"""The Ray tasks of a prepare: the scan (map_batches over units), the shuffle keyed on the
digest, and the pack task of a window."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
import pyarrow as pa
import ray
import ray.data

import fastaxo
from fastaxo._core import arrow
from fastaxo.errors import FastaxoError, InvalidInputError
from fastaxo.integrations.ray.units import (
    KEY_SHIFT,
    ROW_MASK,
    Cfg,
    Unit,
    add_counts,
    checked_unit,
)
from fastaxo.pipeline.stages import (
    ATTENTION_MODES,
    Kept,
    output_schema,
    retyped,
    window_data,
    write_packed_window,
)
from fastaxo.pipeline.writer import Writer

__all__ = ["ERROR_PART", "SCAN_SCHEMA", "block_totals", "count_keys", "first_keys_fn",
           "merge_bucket", "pack_task", "scan_batch", "split_parts_fn"]

SCAN_SCHEMA = pa.schema([("part", pa.int32()), ("digest", pa.binary(32)), ("key", pa.int64()),
                          ("len", pa.int64()), ("nonempty", pa.int64()), ("error", pa.binary()),
                          ("counts", pa.binary())])
ERROR_PART = -2   # a unit whose rows failed a check: one row, key = unit, error = the pickled error
# "counts": on a unit's first row, what the unit adds to the report (CheckedUnit.counts) as
# JSON; null elsewhere (a unit without rows has nothing to count)


def scan_batch(batch: pa.Table, cfg: Cfg, block_refs: list[Any] | None) -> pa.Table:
    """map_batches function: one unit (a one-row batch: its index and pickled descriptor; a
    dataset block's ObjectRef comes from ``block_refs``, which Ray serializes in band) -> one row
    per input row: digest partition (-1 for an empty row), digest (zeros unless deduping), key,
    length, and on the unit's first row its counts for the report."""
    import dataclasses
    import pickle

    fastaxo_threads = cfg.threads
    outs = []
    for ui, spec in zip(batch.column("unit").to_pylist(), batch.column("spec").to_pylist()):
        u = pickle.loads(spec)
        if u.kind == "block":
            assert block_refs is not None  # a dataset's units come with its blocks' refs
            u = dataclasses.replace(u, ref=block_refs[u.block])
        try:
            raw, work, lens, unit_counts = checked_unit(u, cfg,
                                                        bounds=cfg.layout == "standard")
        except FastaxoError as exc:
            # Returned as data, not raised: Ray keeps only the text of a task's exception chain, and
            # the driver reports the error of the first bad unit in the global order, as the
            # single-machine prepare would (several units may fail at once here).
            outs.append(pa.table({"part": pa.array([ERROR_PART], pa.int32()),
                                  "digest": pa.array([b"\0" * 32], pa.binary(32)),
                                  "key": pa.array([ui], pa.int64()),
                                  "len": pa.array([0], pa.int64()),
                                  "nonempty": pa.array([0], pa.int64()),
                                  "error": pa.array([pickle.dumps(exc)], pa.binary()),
                                  "counts": pa.nulls(1, pa.binary())},
                                 schema=SCAN_SCHEMA))
            continue
        n = raw.num_rows
        if n >= 1 << KEY_SHIFT:
            raise InvalidInputError(f"{u.where(0)[0]}: a unit of {n:,} rows; units hold < 2**32 "
                                    "rows "
                                    "(lower unit_rows)")
        keys = (np.int64(ui) << KEY_SHIFT) + np.arange(n, dtype=np.int64)
        nonempty = lens > 0
        part = np.full(n, -1, np.int32)
        digest = np.zeros((n, 32), np.uint8)
        if cfg.dedupe and n:
            key_tab = pa.table({c: (work[c] if c in work else raw.column(c)) for c in cfg.key_cols})
            digest = fastaxo.hash_rows(key_tab, num_threads=fastaxo_threads)
            word = digest[:, :8].copy().view(np.uint64).ravel()
            part = (word % np.uint64(cfg.partitions)).astype(np.int32)
        elif n:
            part = np.zeros(n, np.int32)
        part[~nonempty] = -1
        counts: list[bytes | None] = [None] * n
        if n and unit_counts:
            counts[0] = json.dumps(unit_counts, sort_keys=True).encode()
        outs.append(pa.table({
            "part": arrow.from_numpy(part),
            "digest": pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), n,
                                                           [None, pa.py_buffer(digest)]),
            "key": arrow.from_numpy(keys),
            "len": arrow.from_numpy(lens.astype(np.int64, copy=False)),
            "nonempty": arrow.from_numpy(nonempty.astype(np.int64)),
            "error": pa.nulls(n, pa.binary()),
            "counts": pa.array(counts, pa.binary()),
        }, schema=SCAN_SCHEMA))
    return pa.concat_tables(outs) if outs else SCAN_SCHEMA.empty_table()


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

def digests_of(block: pa.Table) -> np.ndarray:
    arr = block.column("digest").combine_chunks()
    return np.frombuffer(arr.buffers()[1], np.uint8, count=32 * len(arr),
                         offset=32 * arr.offset).reshape(-1, 32)


@ray.remote(max_retries=3)
def block_totals(block: pa.Table) -> dict[str, Any]:
    """rows, tokens, non-empty rows per unit, the units' counts for the report added up, and the
    first failed unit's error (if any) of a scanned block."""
    part = _column(block, "part", np.int32)
    keys = _column(block, "key", np.int64)
    err = np.flatnonzero(part == ERROR_PART)
    error = None
    if len(err):
        i = int(err[np.argmin(keys[err])])
        error = (int(keys[i]), block.column("error")[i].as_py())
    ok = part != ERROR_PART
    lens = _column(block, "len", np.int64)[ok]
    units = keys[ok] >> KEY_SHIFT
    nonempty = part[ok] >= 0
    uniq, counts = np.unique(units[nonempty], return_counts=True)
    total: dict[str, Any] = {}
    for c in block.column("counts").drop_null().to_pylist():
        add_counts(total, json.loads(c))
    return {"rows": int(ok.sum()), "tokens": int(lens.sum()),
            "nonempty": {int(u): int(c) for u, c in zip(uniq, counts)}, "error": error,
            "counts": total}


def _column(block: pa.Table, name: str, dtype: type) -> np.ndarray:
    """A fixed-width column of a scanned block as NumPy (empty of ``dtype`` for an empty block)."""
    if not block.num_rows:
        return np.zeros(0, dtype)
    return arrow.fixed_view(block.column(name).combine_chunks())


def split_parts_fn(parts: int, *blocks: pa.Table) -> pa.Table | list[pa.Table]:
    """The non-empty rows of some scanned blocks, by digest partition: ``parts`` (digest, key)
    tables. (A task takes a group of blocks: the shuffle's objects are tasks x partitions.)"""
    block = pa.concat_tables([b.select(["part", "digest", "key"]) for b in blocks]).combine_chunks()
    part = _column(block, "part", np.int32)
    sel = np.flatnonzero(part >= 0)
    t = block.select(["digest", "key"]).take(arrow.from_numpy(sel))
    p = part[sel]
    order = np.argsort(p, kind="stable")
    t = t.take(arrow.from_numpy(order))
    bounds = np.searchsorted(p[order], np.arange(parts + 1))
    out = [t.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])) for i in range(parts)]
    return out[0] if parts == 1 else out  # num_returns=1 makes the return value the one object


def first_keys_fn(bucket_of_unit: np.ndarray, buckets: int, dedupe: bool,
                  *tables: pa.Table) -> np.ndarray | list[np.ndarray]:
    """Kept keys of one partition, by bucket: with dedupe the smallest key of each digest (its
    first occurrence in the global order), else every key."""
    parts = [t for t in tables if t.num_rows]
    if parts:
        keys = np.concatenate([arrow.fixed_view(t.column("key").combine_chunks()) for t in parts])
    else:
        keys = np.zeros(0, np.int64)
    if dedupe and len(keys):
        dig = np.concatenate([digests_of(t) for t in parts])
        # sort by (digest, key): lexsort's last key is the primary one; big-endian words keep
        # the byte order of the digest
        words = [dig[:, k:k + 8].copy().view(">u8").ravel() for k in (24, 16, 8, 0)]
        order = np.lexsort([keys, *words])
        d = dig[order]
        first = np.ones(len(order), bool)
        first[1:] = np.any(d[1:] != d[:-1], axis=1)
        keys = keys[order[first]]
    b = bucket_of_unit[keys >> KEY_SHIFT]
    order = np.argsort(b, kind="stable")
    keys, b = keys[order], b[order]
    bounds = np.searchsorted(b, np.arange(buckets + 1))
    out = [np.ascontiguousarray(keys[bounds[i]:bounds[i + 1]]) for i in range(buckets)]
    return out[0] if buckets == 1 else out


@ray.remote(num_cpus=0.1, max_retries=3)
def count_keys(keys: np.ndarray) -> int:
    return len(keys)


@ray.remote(max_retries=3)
def merge_bucket(*pieces: np.ndarray) -> np.ndarray:
    """The kept keys of one bucket, from every partition, sorted (= the global order)."""
    keys = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
    keys.sort()
    return keys


# ---------------------------------------------------------------------------------------------
# stage 4: a window

def test_hold(stage: str, index: int) -> None:
    """Fault injection for the tests: with FASTAXO_RAY_TEST_HOLD="pack:W:DIR" in the worker's
    environment (a test sets it through the job's runtime_env, never the driver's options),
    the first attempt of window W's task writes its pid to DIR/hold-W.pid and waits (up to
    2 min) to be killed."""
    spec = os.environ.get("FASTAXO_RAY_TEST_HOLD", "")
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


def pack_task(w: int, lo: int, hi: int, bucket_base: int, u_lo: int, units: list[Unit], cfg: Cfg,
              out_dir: str, *bucket_keys: np.ndarray) -> dict[str, Any]:
    """Window w: kept rows [lo, hi) of the global order, found in the sorted kept keys of its
    buckets (consecutive; the first bucket's first key has global position ``bucket_base``).
    ``units`` are the units u_lo, u_lo + 1, ... of those buckets (only they travel with the
    task). Reads the units holding the rows, packs them and writes shard w."""
    t0 = time.perf_counter()
    test_hold("pack", w)
    keys = np.concatenate(bucket_keys)[lo - bucket_base: hi - bucket_base]
    unit_of = keys >> KEY_SHIFT
    rows = keys & ROW_MASK
    parts: list[Kept] = []
    bounds = np.flatnonzero(np.diff(unit_of)) + 1
    for a, b in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(keys)]])):
        if a == b:
            continue
        u = units[int(unit_of[a]) - u_lo]
        work = checked_unit(u, cfg).work
        parts.append(Kept(pa.table(work), rows[a:b]))  # rows are increasing (keys sorted)
    table = window_data(parts, ["input_ids"] + (["labels"] if cfg.has_labels else []),
                        cfg.strategy) if parts else None
    schema = output_schema(cfg.layout, cfg.has_labels, cfg.attention,
                           json.loads(cfg.schema_options),
                           json.loads(cfg.provenance) if cfg.provenance else None)
    # (int32 while written; the types the driver found from every unit's values at the end)
    final = retyped(schema, {k: pa.type_for_alias(v)
                             for k, v in json.loads(cfg.types or "{}").items()})
    name = f"part-{w:05d}.parquet"
    writer = Writer(os.path.join(out_dir, name), schema, num_threads=cfg.threads)
    try:
        st = write_packed_window(table, writer, list(schema), max_length=cfg.max_length,
                                 strategy=cfg.strategy, overflow=cfg.overflow,
                                 att_mode=ATTENTION_MODES[cfg.attention],
                                 has_labels=cfg.has_labels, num_threads=cfg.threads)
        nbytes = writer.commit(final)
    except BaseException:
        writer.abort()
        raise
    return {"window": w, "shard": name, "stats": st, "row_groups": writer.row_groups,
            "bytes": nbytes, "seconds": time.perf_counter() - t0}
