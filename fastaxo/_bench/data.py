"""The matrix's data: seeded, generated per size under a temporary directory."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from fastaxo._bench.spec import CHUNK_ROWS, DUP_FRACTION, SEED, VOCAB, Shape

# ============================================================================ parent: data


def _text_chunk(rng: np.random.Generator, n: int, mean_bytes: int):
    import pyarrow as pa

    lengths = np.clip(rng.lognormal(np.log(mean_bytes) - 0.045, 0.3, n), 1, 16 * mean_bytes).astype(
        np.int64
    )
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = rng.integers(32, 127, int(offsets[-1]), dtype=np.uint8)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _chunks(n: int, shape: Shape):
    """Tables of <= CHUNK_ROWS rows: id, text, input_ids; 10% of each chunk's rows copy an earlier
    row of it."""
    import pyarrow as pa

    for k, start in enumerate(range(0, n, CHUNK_ROWS)):
        m = min(CHUNK_ROWS, n - start)
        rng = np.random.default_rng([SEED, shape.index, k])
        lens = shape.lengths(rng, m)
        offs = np.zeros(m + 1, dtype=np.int32)
        np.cumsum(lens, out=offs[1:])
        ids = pa.ListArray.from_arrays(
            pa.array(offs), pa.array(rng.integers(3, VOCAB, int(offs[-1]), dtype=np.int32))
        )
        text = _text_chunk(rng, m, shape.text_bytes)
        order = np.arange(m)
        n_dup = int(round(m * DUP_FRACTION))
        if n_dup and m > 1:
            at = np.sort(rng.choice(np.arange(1, m), n_dup, replace=False))
            order[at] = (rng.random(n_dup) * at).astype(np.int64)  # a copy of an earlier row
            take = pa.array(order)
            ids, text = ids.take(take), text.take(take)
        yield pa.table(
            {
                "id": pa.array(np.arange(start, start + m, dtype=np.int64)),
                "text": text,
                "input_ids": ids,
            }
        )


def estimate_data(n: int, shape: Shape) -> dict[str, float]:
    """Expected totals and file sizes (bytes) of the data of n rows."""
    t = n * shape.mean_tokens
    x = n * shape.text_bytes
    return {"tokens": t, "text": x, "arrow": x + 4 * t + 24 * n, "parquet": x + 4 * t + 24 * n,
            "jsonl": 1.06 * x + 6.2 * t + 45 * n, "lengths": 8 * n}


def generate_data(d: str, n: int, shape: Shape, formats: set[str]) -> dict[str, Any]:
    """Write data.arrow (+ the reader formats asked for) and lengths.npy; return paths and totals.
    """
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
                    jf = open(paths["jsonl"], "w", encoding="utf-8")  # noqa: SIM115 (closed below)
            writer.write_table(t)
            ids = t.column("input_ids").chunk(0)
            lens = np.diff(ids.offsets.to_numpy())
            lengths.append(lens.astype(np.int64))
            tokens += int(lens.sum())
            txt = t.column("text").chunk(0)
            toffs = np.frombuffer(txt.buffers()[1], dtype=np.int32)[
                txt.offset : txt.offset + len(txt) + 1
            ]
            text_bytes += int(toffs[-1] - toffs[0])
            if pw is not None:
                pw.write_table(t, row_group_size=CHUNK_ROWS)
            if jf is not None:
                jf.write(
                    "".join(
                        dumps({"id": i, "text": s, "input_ids": r}) + "\n"
                        for i, s, r in zip(
                            t.column("id").to_pylist(),
                            t.column("text").to_pylist(),
                            t.column("input_ids").to_pylist(),
                        )
                    )
                )
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
