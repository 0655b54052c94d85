"""The body of a Parquet data page of list rows in plain Python: the twin of
``_pack.parquet_list_page`` (csrc/fx_parquet.h states the layout), the test oracle, and the
page maker of ``pipeline.parquet.ListTableWriter`` without the extension."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["list_page"]


def _runs(levels: list[tuple[int, int]]) -> bytes:
    """(value, count) pairs, equal neighbours joined, as RLE runs of one-byte values."""
    out = bytearray()
    merged: list[list[int]] = []
    for value, count in levels:
        if count == 0:
            continue
        if merged and merged[-1][0] == value:
            merged[-1][1] += count
        else:
            merged.append([value, count])
    for value, count in merged:
        h = count << 1
        while h >= 0x80:
            out.append((h & 0x7F) | 0x80)
            h >>= 7
        out += bytes((h, value))
    return bytes(out)


def list_page(offsets: Any, values: Any, width: int, max_def: int,
              empty_def: int) -> tuple[bytes, int, int | None, int | None]:
    """(the uncompressed page body, its level count, the smallest and the largest value as
    signed integers, None without a value) for the list rows ``offsets`` indexing ``values``
    (elements of ``width`` bytes)."""
    off = np.asarray(offsets, dtype=np.int64)
    if len(off) == 0:
        raise ValueError("offsets must hold at least one entry (rows + 1), got none")
    if not 0 <= empty_def < max_def <= 3:
        raise ValueError(f"levels must satisfy 0 <= empty_def < max_def <= 3, got empty_def="
                         f"{empty_def} and max_def={max_def}")
    lengths = np.diff(off)
    if off[0] < 0 or (lengths < 0).any():
        raise ValueError("offsets must be >= 0 and must not decrease")
    rep: list[tuple[int, int]] = []
    dfn: list[tuple[int, int]] = []
    for n in lengths.tolist():
        rep += [(0, 1), (1, max(n - 1, 0))]
        dfn.append((max_def, n) if n else (empty_def, 1))
    r, d = _runs(rep), _runs(dfn)
    body = bytes(memoryview(values).cast("B")[int(off[0]) * width:int(off[-1]) * width])
    levels = int(np.maximum(lengths, 1).sum())
    vals = np.frombuffer(body, dtype=f"<i{width}")
    lo, hi = (int(vals.min()), int(vals.max())) if len(vals) else (None, None)
    return (len(r).to_bytes(4, "little") + r + len(d).to_bytes(4, "little") + d + body,
            levels, lo, hi)
