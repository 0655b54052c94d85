"""The floors ``fastaxo demo`` and ``bench/bench_prepare.py`` hold prepare against: pyarrow alone
reading the input file and writing the same packed rows, with prepare's former writer settings
(zstd level 1, no dictionary, no statistics, row groups of ~4M tokens).

- the old layout: input_ids, labels, position_ids and segment ids (int32), what prepare wrote
  before the standard layout;
- the new layout: the standard layout's own columns and types, as prepare writes them.

Both tables are built from prepare's output before the clock starts: a floor times only the
read of the input and pyarrow's write, no dedupe and no packing.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow

ROW_GROUP_TOKENS = 1 << 22  # prepare's row groups (pipeline.stages.ROW_GROUP_TOKENS)


def layouts(packed: pa.Table) -> dict[str, pa.Table]:
    """The old and the new layout of a standard-layout table (prepare's output)."""
    offs = arrow.offsets_of(packed.column("input_ids").combine_chunks(), False)
    sl = packed.column("seq_lengths").combine_chunks()
    counts = np.diff(arrow.offsets_of(sl, False))
    lengths = arrow.fixed_view(sl.values).astype(np.int64)
    # segment ids 1..k per row: each sequence's rank in its row, repeated over its tokens
    first = np.repeat(np.cumsum(counts) - counts, counts)
    rank = (np.arange(len(lengths)) - first + 1).astype(np.int32)
    seg = np.repeat(rank, lengths)
    o = arrow.from_numpy(offs.astype(np.int32))

    def int32(name: str) -> pa.Array:
        vals = arrow.fixed_view(packed.column(name).combine_chunks().values).astype(np.int32)
        return pa.ListArray.from_arrays(o, arrow.from_numpy(vals))

    old = pa.table({"input_ids": int32("input_ids"), "labels": int32("labels"),
                    "position_ids": int32("position_ids"),
                    "attention_mask": pa.ListArray.from_arrays(o, arrow.from_numpy(seg))})
    return {"old": old, "new": packed.replace_schema_metadata(None)}


def floor_seconds(data: str, table: pa.Table, out: str, max_length: int) -> float:
    """pyarrow reading ``data`` whole and writing ``table`` to ``out`` (removed after), in
    row groups of prepare's size; wall seconds."""
    import pyarrow.parquet as pq

    step = max(1, ROW_GROUP_TOKENS // max_length)
    t0 = time.perf_counter()
    pq.read_table(data)
    w = pq.ParquetWriter(out, table.schema, compression="zstd", compression_level=1,
                         use_dictionary=False, write_statistics=False)
    for a in range(0, len(table), step):
        w.write_table(table.slice(a, step), row_group_size=step)
    w.close()
    seconds = time.perf_counter() - t0
    os.remove(out)
    return seconds


def floors(data: str, packed_path: str, max_length: int, tmp: str) -> dict[str, Any]:
    """The two floors of one prepare run (its output ``packed_path``, standard layout), in
    wall seconds: ``old`` and ``new``."""
    import pyarrow.parquet as pq

    out: dict[str, Any] = {}
    for name, table in layouts(pq.read_table(packed_path)).items():
        path = os.path.join(tmp, f"floor-{name}.parquet")
        out[name] = floor_seconds(data, table, path, max_length)
    return out
