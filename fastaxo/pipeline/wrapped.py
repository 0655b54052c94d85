"""prepare's ``wrapped`` strategy (TRL's, for pretraining text): a window's documents back to
back, cut every ``max_length`` tokens. Every row is full but a window's last; a document may
run on into the next row, where it continues as a new segment (its positions restart, as a
packed segment's do, and in the standard layout its first label is -100). Nothing is dropped
or padded; the documents cut are counted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo.packing.bins import PackStats
from fastaxo.pipeline.columns import IGNORE_INDEX, SEQ_LENGTHS, list_lengths

__all__ = ["write_wrapped_window"]


def _values(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The int32 values of a list<int32> column, its rows back to back."""
    parts = arrow.spanned_values(col)
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


def write_wrapped_window(table: pa.Table, writer: Any, fields: list[pa.Field], *,
                         max_length: int, att_mode: str | None, has_labels: bool,
                         rows_per_group: int) -> PackStats:
    """Write one window's documents (``table``: input_ids [+ labels], no empty row) back to
    back in rows of ``max_length`` tokens, ``rows_per_group`` rows a row group; its stats."""
    L = max_length
    standard = SEQ_LENGTHS in [f.name for f in fields]
    lens = list_lengths(table.column("input_ids"))
    cols = {"input_ids": _values(table.column("input_ids"))}
    if has_labels:
        cols["labels"] = _values(table.column("labels"))
    n = len(cols["input_ids"])
    doc_starts = np.zeros(len(lens), np.int64)
    np.cumsum(lens[:-1], out=doc_starts[1:])
    row_starts = np.arange(0, n, L, dtype=np.int64)
    nrows = len(row_starts)
    for r0 in range(0, nrows, rows_per_group):
        r1 = min(r0 + rows_per_group, nrows)
        t0, t1 = r0 * L, min(r1 * L, n)
        rs = row_starts[r0:r1]
        ds = doc_starts[(doc_starts > t0) & (doc_starts < t1)]
        segs = np.union1d(rs, ds)  # every segment's first token (sorted)
        seg_len = np.diff(np.append(segs, t1))
        pos = (np.arange(t0, t1, dtype=np.int64) - np.repeat(segs, seg_len)).astype(np.int32)
        offs = np.append(rs - t0, t1 - t0).astype(np.int32)
        out = {"input_ids": cols["input_ids"][t0:t1], "position_ids": pos}
        if has_labels:
            out["labels"] = cols["labels"][t0:t1]
        first_seg = np.searchsorted(segs, rs)  # each row's first segment
        seq_offs = np.append(first_seg, len(segs)).astype(np.int32)
        if standard:  # labels always, -100 on each segment's first token; segment lengths
            lab = (out["labels"] if has_labels else out["input_ids"]).copy()
            lab[segs - t0] = IGNORE_INDEX
            out["labels"] = lab
            out[SEQ_LENGTHS] = seg_len.astype(np.int32)
        if att_mode is not None:
            if att_mode == "segments":  # 1.. within each row: the segment's rank in its row
                seg_no = np.arange(len(segs)) - np.repeat(first_seg, np.diff(np.append(
                    first_seg, len(segs))))
                out["attention_mask"] = np.repeat(seg_no + 1, seg_len).astype(np.int32)
            else:
                out["attention_mask"] = np.ones(t1 - t0, np.int32)
        o, so = arrow.from_numpy(offs), arrow.from_numpy(seq_offs)
        writer.write([pa.ListArray.from_arrays(so if f.name == SEQ_LENGTHS else o,
                                               arrow.from_numpy(np.ascontiguousarray(
                                                   out[f.name]))) for f in fields])
    # a document is cut where a row starts strictly inside it
    ends = doc_starts + lens
    inside = (np.searchsorted(row_starts, ends, side="left")
              - np.searchsorted(row_starts, doc_starts, side="right"))
    cut = inside > 0
    return PackStats(
        strategy="wrapped", max_length=L, sequences=len(lens),
        entries=len(lens) + int(inside.sum()), bins=nrows, tokens=n,
        lower_bound=-(-n // L), efficiency=n / (nrows * L) if nrows else 0.0, overflow="split",
        overlong=int(np.count_nonzero(lens > L)), split=int(np.count_nonzero(cut)),
        split_pieces=int((inside[cut] + 1).sum()))
