"""prepare's packed Parquet read back in tests, in either layout, its invariants checked on the
way: the sequences (split where position_ids restart) and what each layout promises of them."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

IGNORE = -100
STANDARD = ["input_ids", "labels", "position_ids", "seq_lengths"]
_NARROW = ((pa.int8(), 8), (pa.int16(), 16), (pa.int32(), 32))


def narrowest(lo: int, hi: int) -> pa.DataType:
    """The narrowest of int8 / int16 / int32 holding [lo, hi]."""
    for t, bits in _NARROW:
        if -(1 << (bits - 1)) <= lo and hi < (1 << (bits - 1)):
            return t
    raise AssertionError(f"[{lo}, {hi}] does not fit int32")


def first_masked(labels: tuple | list) -> tuple:
    """A sequence's labels as the standard layout holds them: -100 on its first token."""
    labels = tuple(labels)
    return (IGNORE, *labels[1:]) if labels else labels


def layout_of(table: pa.Table) -> str:
    return "standard" if "seq_lengths" in table.column_names else "axolotl"


def _check_standard(t: pa.Table, max_length: int | None) -> None:
    assert t.column_names == STANDARD, t.column_names
    if max_length is None:  # the options prepare recorded
        max_length = json.loads(t.schema.metadata[b"fastaxo.prepare"])["max_length"]
    assert t.schema.field("position_ids").type.value_type == narrowest(0, max_length - 1)
    assert t.schema.field("seq_lengths").type.value_type == narrowest(1, max_length)
    for name in ("input_ids", "labels"):
        vt = t.schema.field(name).type.value_type
        assert vt in (pa.int8(), pa.int16(), pa.int32()), (name, vt)
        vals = t.column(name).combine_chunks().values.to_numpy() if t.num_rows else []
        if len(vals):  # the narrowest holding this file's values (the input may hold more)
            assert vt.bit_width >= narrowest(int(vals.min()), int(vals.max())).bit_width


def sequences(path: Any, seq_len: int | None = None, attention: str = "segments"
              ) -> tuple[pa.Table, list[tuple[tuple, tuple | None]]]:
    """(the table, every sequence as (input_ids, labels or None)) of a packed file, checked:
    position_ids 0..L-1 per sequence, no row over ``seq_len``; standard layout: seq_lengths
    equal to the sequences, -100 as each one's first label, the narrowest types; axolotl
    layout: ``attention`` ("segments": ids 1..k per row, "ones", "none": no column)."""
    t = pq.read_table(path)
    standard = layout_of(t) == "standard"
    if standard:
        _check_standard(t, seq_len)
    has_labels = "labels" in t.column_names
    segs = []
    for r in range(t.num_rows):
        ids = t.column("input_ids")[r].values.to_numpy()
        pos = t.column("position_ids")[r].values.to_numpy()
        lab = t.column("labels")[r].values.to_numpy() if has_labels else None
        assert 0 < len(ids) and (seq_len is None or len(ids) <= seq_len)
        assert len(pos) == len(ids)
        starts = np.flatnonzero(pos == 0)
        assert len(starts) and starts[0] == 0
        ends = np.append(starts[1:], len(ids))
        if standard:
            sl = t.column("seq_lengths")[r].values.to_numpy()
            assert np.array_equal(sl, ends - starts), (sl, ends - starts)
            assert (lab[starts] == IGNORE).all()
        elif attention != "none":
            att = t.column("attention_mask")[r].values.to_numpy()
            want = (np.repeat(np.arange(1, len(starts) + 1), ends - starts)
                    if attention == "segments" else np.ones(len(ids)))
            assert np.array_equal(att, want)
        else:
            assert "attention_mask" not in t.column_names
        for a, b in zip(starts, ends):
            assert np.array_equal(pos[a:b], np.arange(b - a))
            segs.append((tuple(ids[a:b].tolist()),
                         tuple(lab[a:b].tolist()) if lab is not None else None))
    return t, segs


def as_packed(segs: list[tuple[tuple, tuple | None]], layout: str = "standard"
              ) -> list[tuple[tuple, tuple | None]]:
    """Expected sequences (input_ids, labels or None) as ``layout`` writes them: the standard
    layout always has labels (the input's, else its input_ids), -100 on the first token."""
    if layout != "standard":
        return segs
    return [(ids, first_masked(lab if lab is not None else ids)) for ids, lab in segs]
