"""Padding in prepare's input (issue 30): rows tokenized with padding="max_length" carry pad
tokens; the input's attention_mask marks them, and prepare drops them, counted, never packs
them. A mask with holes is refused naming the row."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastaxo
from fastaxo.errors import InvalidInputError, SchemaMismatchError
from fastaxo.pipeline.unpad import strip_padding

I32 = pa.list_(pa.int32())


def _padded(n: int, width: int, seed: int, side: str = "right", pad_id: int = 0):
    """n rows of 1..width tokens, each padded to width as HF's padding="max_length" does:
    (input_ids, labels, attention_mask, the rows unpadded, their labels)."""
    rng = np.random.default_rng(seed)
    ids, labs, mask, bare, bare_labs = [], [], [], [], []
    for i in range(n):
        n_tok = int(rng.integers(1, width + 1)) if i % 9 else width  # some rows need no pad
        row = rng.integers(1, 50_000, n_tok).tolist()
        lab = [-100 if k < n_tok // 3 else t for k, t in enumerate(row)]
        pad = width - n_tok
        if side == "right":
            ids.append(row + [pad_id] * pad)
            labs.append(lab + [-100] * pad)
            mask.append([1] * n_tok + [0] * pad)
        else:
            ids.append([pad_id] * pad + row)
            labs.append([-100] * pad + lab)
            mask.append([0] * pad + [1] * n_tok)
        bare.append(row)
        bare_labs.append(lab)
    return ids, labs, mask, bare, bare_labs


def _table(ids, labs=None, mask=None):
    cols = {"input_ids": pa.array(ids, I32)}
    if labs is not None:
        cols["labels"] = pa.array(labs, I32)
    if mask is not None:
        cols["attention_mask"] = pa.array(mask, pa.list_(pa.int64()))
    return pa.table(cols)


@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_rows_pack_no_pad_token(tmp_path, side):
    """The issue's case: 500 rows padded to 512 (62% pad tokens in the issue's run). Packed
    with their mask, the output is the output of the same rows without padding, token for
    token, and the report counts every pad token dropped and every padded row."""
    ids, labs, mask, bare, bare_labs = _padded(500, 512, seed=1, side=side)
    pq.write_table(_table(ids, labs, mask), tmp_path / "padded.parquet", row_group_size=128)
    pq.write_table(_table(bare, bare_labs), tmp_path / "bare.parquet", row_group_size=128)
    rep = fastaxo.prepare(str(tmp_path / "padded.parquet"), str(tmp_path / "a.parquet"), 2048,
                          progress=False)
    ref = fastaxo.prepare(str(tmp_path / "bare.parquet"), str(tmp_path / "b.parquet"), 2048,
                          progress=False)
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    pads = sum(m.count(0) for m in mask)
    assert pads > 0.3 * sum(map(len, ids))
    assert rep.pad_tokens_dropped == pads
    assert rep.padded_rows == sum(1 for m in mask if 0 in m)
    assert (rep.tokens_in, rep.tokens_out, rep.bins) == (ref.tokens_in, ref.tokens_out, ref.bins)
    assert ref.pad_tokens_dropped == ref.padded_rows == 0
    assert f"{pads:,} pad tokens dropped" in str(rep)
    assert json.loads(json.dumps(rep.as_dict()))["pad_tokens_dropped"] == pads


def test_a_mask_with_a_hole_is_refused_naming_the_row(tmp_path):
    ids, labs, mask, _, _ = _padded(40, 16, seed=2)
    mask[27] = [1, 1, 0, 1] + [1] * 12
    pq.write_table(_table(ids, labs, mask), tmp_path / "in.parquet", row_group_size=10)
    out = tmp_path / "out.parquet"
    with pytest.raises(InvalidInputError, match=r"in\.parquet row 27 \(0-based\): attention_mask "
                       r"is 0 at position 2 between positions it marks as tokens"):
        fastaxo.prepare(str(tmp_path / "in.parquet"), str(out), 64, progress=False)
    assert not out.exists() and os.listdir(tmp_path) == ["in.parquet"]


def test_a_mask_of_another_length_is_refused_naming_the_row(tmp_path):
    ids, labs, mask, _, _ = _padded(30, 16, seed=3)
    mask[12] = mask[12][:-1]
    pq.write_table(_table(ids, labs, mask), tmp_path / "in.parquet")
    with pytest.raises(InvalidInputError, match=r"row 12 \(0-based\): attention_mask has 15 "
                       r"values and input_ids 16"):
        fastaxo.prepare(str(tmp_path / "in.parquet"), str(tmp_path / "o.parquet"), 64,
                        progress=False)


def test_inputs_must_agree_on_the_mask(tmp_path):
    ids, labs, mask, _, _ = _padded(20, 8, seed=4)
    pq.write_table(_table(ids, labs, mask), tmp_path / "a.parquet")
    pq.write_table(_table(ids, labs), tmp_path / "b.parquet")
    for order in (["a", "b"], ["b", "a"]):
        with pytest.raises(SchemaMismatchError, match="attention_mask"):
            fastaxo.prepare([str(tmp_path / f"{x}.parquet") for x in order],
                            str(tmp_path / "o.parquet"), 64, progress=False)


def test_all_padding_rows_are_empty_and_bool_masks_count(tmp_path):
    """A row of pad tokens only becomes an empty row (counted as one, and its pads as
    dropped); a mask of booleans is read as 0/1; JSON Lines input too."""
    ids = [[5, 6, 0, 0], [0, 0, 0, 0], [7, 8, 9, 10]]
    mask = [[True, True, False, False], [False] * 4, [True] * 4]
    with open(tmp_path / "in.jsonl", "w") as fh:
        for r, m in zip(ids, mask):
            fh.write(json.dumps({"input_ids": r, "attention_mask": m}) + "\n")
    rep = fastaxo.prepare(str(tmp_path / "in.jsonl"), str(tmp_path / "o.parquet"), 8,
                          progress=False)
    assert (rep.pad_tokens_dropped, rep.padded_rows, rep.empty_rows) == (6, 2, 1)
    got = pq.read_table(tmp_path / "o.parquet").column("input_ids").to_pylist()
    assert sorted(t for row in got for t in row) == [5, 6, 7, 8, 9, 10]


def test_the_command_line_says_what_it_dropped(tmp_path):
    import subprocess
    import sys

    ids, labs, mask, _, _ = _padded(50, 32, seed=5)
    pq.write_table(_table(ids, labs, mask), tmp_path / "in.parquet")
    r = subprocess.run([sys.executable, "-m", "fastaxo", "prepare", str(tmp_path / "in.parquet"),
                        "-o", str(tmp_path / "o.parquet"), "--max-length", "64"],
                       capture_output=True, text=True, cwd="/", timeout=300)
    assert r.returncode == 0, r.stderr
    pads = sum(m.count(0) for m in mask)
    assert f"input padding      {pads:,} pad tokens dropped from" in r.stdout


def _reference(ids, labs, mask):
    """Plain Python: keep the positions of each row whose mask is nonzero."""
    return ([[t for t, m in zip(r, ms) if m] for r, ms in zip(ids, mask)],
            [[t for t, m in zip(r, ms) if m] for r, ms in zip(labs, mask)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9), st.integers(0, 6),
                          st.integers(1, 3)), max_size=30),
       st.integers(0, 3), st.booleans())
def test_strip_padding_equals_the_reference(shape, cut, large):
    """Rows of any lead padding, tokens and tail padding (empty rows, rows of padding only,
    mask values other than 1), sliced, as list and large_list: what strip_padding keeps is
    what the reference keeps, and the counts are its counts."""
    ids, labs, mask = [], [], []
    for k, (lead, n_tok, tail, v) in enumerate(shape):
        ids.append(list(range(k * 100, k * 100 + lead + n_tok + tail)))
        labs.append([-t for t in ids[-1]])
        mask.append([0] * lead + [v] * n_tok + [0] * tail)
    typ = pa.large_list(pa.int32()) if large else I32
    cut = min(cut, len(ids))
    cols = {"input_ids": pa.array(ids, typ).slice(cut), "labels": pa.array(labs, typ).slice(cut)}
    m = pa.array(mask, pa.list_(pa.int16())).slice(cut)
    got = strip_padding(cols, m, "t", 0)
    want_ids, want_labs = _reference(ids[cut:], labs[cut:], mask[cut:])
    assert got.work["input_ids"].to_pylist() == want_ids
    assert got.work["labels"].to_pylist() == want_labs
    assert got.pad_tokens == sum(ms.count(0) for ms in mask[cut:])
    assert got.padded_rows == sum(1 for ms in mask[cut:] if 0 in ms)


def _pad_run_reference(ids, labs, pad_id):
    """Plain Python: drop the trailing run of pad_id (labels -100 there, when given)."""
    out_ids, out_labs, dropped, rows = [], [], 0, 0
    for i, row in enumerate(ids):
        lab = labs[i] if labs is not None else None
        n = len(row)
        while n and row[n - 1] == pad_id and (lab is None or lab[n - 1] == -100):
            n -= 1
        dropped += len(row) - n
        rows += n != len(row)
        out_ids.append(row[:n])
        out_labs.append(lab[:n] if lab is not None else None)
    return out_ids, out_labs, dropped, rows


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=12), max_size=12), st.booleans(),
       st.integers(0, 3), st.booleans())
def test_strip_pad_run_equals_the_reference(rows, with_labels, pad_id, labels_mark):
    """Rows of small ids (so runs of the pad id, inside and at the ends, are common), with or
    without labels (-100 where the reference draws them): the C-free NumPy pass against plain
    Python, sliced and chunked inputs included."""
    from fastaxo.pipeline.unpad import strip_pad_run

    labs = None
    if with_labels:
        labs = [[-100 if (t == pad_id) == labels_mark or k % 3 == 0 else t
                 for k, t in enumerate(r)] for r in rows]
    want_ids, want_labs, dropped, n_rows = _pad_run_reference(rows, labs, pad_id)
    extra = [[pad_id, 1]]  # a row before the slice: offsets must not start at 0
    work = {"input_ids": pa.array(extra + rows, I32).slice(1)}
    if labs is not None:
        work["labels"] = pa.array(extra + labs, I32).slice(1)
    got = strip_pad_run(work, pad_id)
    assert got.work["input_ids"].to_pylist() == want_ids
    if labs is not None:
        assert got.work["labels"].to_pylist() == want_labs
    assert (got.pad_tokens, got.padded_rows) == (dropped, n_rows)


def test_a_trailing_pad_id_run_is_dropped_without_a_mask(tmp_path):
    """The issue's case again, with the pad id instead of the mask (pad id 0, right padding):
    the output equals the unpadded rows'; with the pad id also the EOS, an EOS the row trains
    on (label not -100) stays; the CLI flag does the same; a tokenizer refuses the option."""
    ids, labs, _, bare, bare_labs = _padded(500, 512, seed=4, pad_id=0)
    pq.write_table(_table(ids, labs), tmp_path / "padded.parquet", row_group_size=128)
    pq.write_table(_table(bare, bare_labs), tmp_path / "bare.parquet", row_group_size=128)
    rep = fastaxo.prepare(str(tmp_path / "padded.parquet"), str(tmp_path / "a.parquet"), 2048,
                          progress=False, pad_token_id=0)
    fastaxo.prepare(str(tmp_path / "bare.parquet"), str(tmp_path / "b.parquet"), 2048,
                    progress=False)
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    pads = sum(len(a) - len(b) for a, b in zip(ids, bare))
    assert rep.pad_tokens_dropped == pads > 0.3 * sum(map(len, ids))
    assert "a run of pad id 0 ending a row" in str(rep)
    # pad id == EOS id (2): a trained EOS (label 2) ends each row before the padding
    eos_rows = [[5, 6, 2, 2, 2], [7, 2]]
    eos_labs = [[-100, 6, 2, -100, -100], [7, 2]]
    pq.write_table(_table(eos_rows, eos_labs), tmp_path / "eos.parquet")
    rep = fastaxo.prepare(str(tmp_path / "eos.parquet"), str(tmp_path / "e.parquet"), 8,
                          progress=False, pad_token_id=2, dedupe=False, strategy="nf")
    assert pq.read_table(tmp_path / "e.parquet").column("input_ids").to_pylist() == [
        [5, 6, 2, 7, 2]]
    assert (rep.pad_tokens_dropped, rep.padded_rows) == (2, 1)
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "fastaxo", "prepare", str(tmp_path / "eos.parquet"),
                        "-o", str(tmp_path / "c.parquet"), "--max-length", "8",
                        "--pad-token-id", "2", "--no-dedupe", "--strategy", "nf"],
                       capture_output=True, text=True, cwd="/", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "2 pad tokens dropped from 1 rows" in r.stdout
    with pytest.raises(InvalidInputError, match="pad_token_id: it names the padding"):
        fastaxo.prepare(str(tmp_path / "eos.parquet"), str(tmp_path / "x.parquet"), 8,
                        tokenizer=str(tmp_path), pad_token_id=2)


def test_a_row_both_paddings_touch_counts_once(tmp_path):
    """A mask that marks part of a row's padding and a pad id that names the rest: the row's
    tokens are dropped by both, and it is one padded row, not two."""
    ids = [[5, 6, 0, 0, 0], [7, 8, 9], [4, 0]]
    mask = [[1, 1, 1, 1, 0], [1, 1, 1], [1, 1]]
    pq.write_table(_table(ids, mask=mask), tmp_path / "p.parquet")
    rep = fastaxo.prepare(str(tmp_path / "p.parquet"), str(tmp_path / "o.parquet"), 16,
                          progress=False, pad_token_id=0, dedupe=False, strategy="nf")
    assert pq.read_table(tmp_path / "o.parquet").column("input_ids").to_pylist() == [
        [5, 6, 7, 8, 9, 4]]
    assert (rep.pad_tokens_dropped, rep.padded_rows) == (4, 2)
