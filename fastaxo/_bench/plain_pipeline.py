"""The plain-Python pipeline ``fastaxo demo`` measures against, and the check of a packed file.

``plain_prepare`` is the obvious code a user writes for the same job as :func:`fastaxo.prepare`:
pyarrow reads the file batch by batch, ``hashlib.sha256`` of each row's bytes in a Python set
drops duplicates, a first-fit-decreasing packer over Python lists (the linear scan over open
bins, as Axolotl's non-numba ``ffd`` is written) packs windows of ``window`` rows, and each bin
is built with ``np.concatenate`` of its rows and written with pyarrow. It produces the same
kind of file as prepare's standard layout (unpadded bins; labels with -100 on each sequence's
first token, position_ids, seq_lengths; int32) so both sides do the same work.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa


def _row_digest(ids: np.ndarray, labels: np.ndarray | None) -> bytes:
    h = hashlib.sha256(ids.tobytes())
    if labels is not None:
        h.update(labels.tobytes())
    return h.digest()


def _packed_digest(ids: np.ndarray, labels: np.ndarray) -> bytes:
    """A sequence as the standard layout holds it: int32 values, its first label -100."""
    lab = labels.astype(np.int32)
    if len(lab):
        lab[0] = -100
    return _row_digest(ids.astype(np.int32, copy=False), lab)


def _ffd(lengths: list[int], capacity: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    remaining: list[int] = []
    bins: list[list[int]] = []
    for i in order:
        n = lengths[i]
        for b in range(len(remaining)):
            if remaining[b] >= n:
                remaining[b] -= n
                bins[b].append(i)
                break
        else:
            remaining.append(capacity - n)
            bins.append([i])
    return bins


def plain_prepare(path: str, output: str, max_length: int, window: int = 100_000) -> dict[str, Any]:
    """Dedupe + FFD-pack + write, in plain Python. Returns stage times and the kept rows' digests.
    """
    import pyarrow.parquet as pq

    t = {"read": 0.0, "dedupe": 0.0, "pack": 0.0, "build": 0.0, "write": 0.0}
    t0 = time.perf_counter()
    seen: set[bytes] = set()
    kept: list[bytes] = []
    rows_in = dups = bins_total = 0
    pend_ids: list[np.ndarray] = []
    pend_lab: list[np.ndarray] = []
    writer = None

    def flush() -> None:
        nonlocal writer, bins_total
        ta = time.perf_counter()
        bins = _ffd([len(r) for r in pend_ids], max_length)
        tb = time.perf_counter()
        ids_rows, lab_rows, pos_rows, len_rows = [], [], [], []
        for b in bins:
            lens = [len(pend_ids[i]) for i in b]
            ids_rows.append(np.concatenate([pend_ids[i] for i in b]))
            lab = np.concatenate([pend_lab[i] for i in b])
            lab[np.cumsum([0] + lens[:-1])] = -100  # each sequence's first token
            lab_rows.append(lab)
            pos_rows.append(np.concatenate([np.arange(n, dtype=np.int32) for n in lens]))
            len_rows.append(np.array(lens, np.int32))
        table = pa.table({"input_ids": pa.array(ids_rows, pa.list_(pa.int32())),
                          "labels": pa.array(lab_rows, pa.list_(pa.int32())),
                          "position_ids": pa.array(pos_rows, pa.list_(pa.int32())),
                          "seq_lengths": pa.array(len_rows, pa.list_(pa.int32()))})
        tc = time.perf_counter()
        if writer is None:
            writer = pq.ParquetWriter(output, table.schema)
        writer.write_table(table)
        td = time.perf_counter()
        t["pack"] += tb - ta
        t["build"] += tc - tb
        t["write"] += td - tc
        bins_total += len(bins)
        pend_ids.clear()
        pend_lab.clear()

    tr = time.perf_counter()
    for batch in pq.ParquetFile(path).iter_batches(
        batch_size=8192, columns=["input_ids", "labels"]
    ):
        ids, labs = batch.column(0), batch.column(1)
        offs = np.asarray(ids.offsets)
        iv = np.asarray(ids.values)
        lv = np.asarray(labs.values)
        t["read"] += time.perf_counter() - tr
        td = time.perf_counter()
        for i in range(batch.num_rows):
            a, b = offs[i], offs[i + 1]
            d = _row_digest(iv[a:b], lv[a:b])
            rows_in += 1
            if d in seen:
                dups += 1
                continue
            seen.add(d)
            kept.append(_packed_digest(iv[a:b], lv[a:b]))
            pend_ids.append(iv[a:b])
            pend_lab.append(lv[a:b])
            if len(pend_ids) == window:
                t["dedupe"] += time.perf_counter() - td
                flush()
                td = time.perf_counter()
        t["dedupe"] += time.perf_counter() - td
        tr = time.perf_counter()
    if pend_ids:
        flush()
    if writer is not None:
        tw = time.perf_counter()
        writer.close()
        t["write"] += time.perf_counter() - tw
    return {
        "seconds": time.perf_counter() - t0,
        "stages": t,
        "rows_in": rows_in,
        "duplicates": dups,
        "bins": bins_total,
        "kept": kept,
    }


def check_packed(path: str, max_length: int, expected: list[bytes]) -> dict[str, Any]:
    """Read a packed file back (the standard layout): every sequence (split at position_ids ==
    0, which must agree with seq_lengths) hashed as plain_prepare hashes a kept row. OK iff the
    sequences are exactly the expected rows, each once, no bin holds more than ``max_length``
    tokens, and the columns are aligned."""
    import pyarrow.parquet as pq

    got: Counter[bytes] = Counter()
    bins = tokens = over = misaligned = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=8192):
        ids = batch.column("input_ids")
        offs = np.asarray(ids.offsets)
        iv = np.asarray(ids.values).astype(np.int32, copy=False)
        lv = np.asarray(batch.column("labels").values).astype(np.int32, copy=False)
        pv = np.asarray(batch.column("position_ids").values)
        sl = np.asarray(batch.column("seq_lengths").values)
        misaligned += int(len(lv) != len(iv) or len(pv) != len(iv))
        lens = np.diff(offs)
        bins += len(lens)
        tokens += int(lens.sum())
        over += int(np.count_nonzero(lens > max_length))
        starts = np.flatnonzero(pv == 0)
        ends = np.append(starts[1:], len(pv))
        misaligned += int(not np.array_equal(ends - starts, sl))
        for a, b in zip(starts.tolist(), ends.tolist()):
            got[_row_digest(iv[a:b], lv[a:b])] += 1
    want = Counter(expected)
    return {
        "ok": got == want and over == 0 and not misaligned and all(v == 1 for v in want.values()),
        "bins": bins,
        "tokens": tokens,
        "over_capacity_bins": over,
        "sequences": sum(got.values()),
        "missing": sum((want - got).values()),
        "unexpected": sum((got - want).values()),
    }
