"""Padding: pad and pad_batches against the plain-Python reference, exactly."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_pack import make_form, ragged_tokens

import fastaxo
from fastaxo._reference import packing as _reference_pack
from fastaxo.errors import InvalidInputError, InvalidTypeError, SequenceTooLongError


def ref_pad(rows, labels, pos, width, side, pad_id, label_pad_id, pos_pad, dt):
    left = side == "left"
    out = {"input_ids": _reference_pack.pad_rows(rows, width, left, pad_id, False, dt),
           "attention_mask": _reference_pack.pad_rows(rows, width, left, 0, False, dt, "ones")}
    if labels is not None:
        out["labels"] = _reference_pack.pad_rows(labels, width, left, label_pad_id, False, dt)
    if pos is True:
        out["position_ids"] = _reference_pack.pad_rows(rows, width, left, pos_pad or 0, pos_pad is None, dt, "iota")
    elif pos is not None:
        out["position_ids"] = _reference_pack.pad_rows(pos, width, left, pos_pad or 0, pos_pad is None, dt)
    return out


@st.composite
def pad_case(draw):
    rows, labels, form = draw(ragged_tokens())
    return dict(
        rows=rows, labels=labels, form=form,
        side=draw(st.sampled_from(["right", "left"])),
        pad_to=draw(st.sampled_from([None, None, 1, 16, 100])),
        mult=draw(st.sampled_from([None, 8])),
        dtype=draw(st.sampled_from([np.int32, np.int64])),
        with_labels=draw(st.booleans()),
        pos=draw(st.sampled_from([None, True, "given"])),
        pos_pad=draw(st.sampled_from([None, 0, -1])),
        threads=draw(st.sampled_from([1, 2])),
        batch=draw(st.sampled_from([None, 1, 3, 16])),
    )


def widths_for(lengths, pad_to, mult):
    w = pad_to if pad_to is not None else (max(lengths) if lengths else 0)
    return w if mult is None else -(-w // mult) * mult


@given(pad_case())
def test_pad_matches_reference(c):
    rows = c["rows"]
    data = make_form(rows, c["form"])
    labels = make_form(c["labels"], "arrays") if c["with_labels"] else None
    pos_rows = [np.arange(len(r)) * 2 for r in rows]
    pos = True if c["pos"] is True else (pos_rows if c["pos"] == "given" else None)
    kw = dict(labels=labels, position_ids=pos, max_length=c["pad_to"], pad_to_multiple_of=c["mult"], side=c["side"],
              truncate=True, pad_id=7, label_pad_id=-100, position_pad_id=c["pos_pad"], dtype=c["dtype"],
              num_threads=c["threads"])
    lens = [len(r) for r in rows]
    if c["batch"] is None:
        got = [fastaxo.pad(data, **kw)]
        bounds = [0, len(rows)]
    else:
        bounds = list(range(0, len(rows), c["batch"])) + [len(rows)]
        if len(rows) == 0:
            bounds = [0, 0]
        got = list(fastaxo.pad_batches(data, bounds, **kw))
    assert len(got) == len(bounds) - 1
    truncated = 0
    for b, g in enumerate(got):
        a, z = bounds[b], bounds[b + 1]
        w = widths_for(lens[a:z], c["pad_to"], c["mult"])
        truncated += sum(1 for n in lens[a:z] if n > w)
        want = ref_pad(rows[a:z], c["labels"][a:z] if labels is not None else None,
                       True if pos is True else (pos_rows[a:z] if pos is not None else None),
                       w, c["side"], 7, -100, c["pos_pad"], np.dtype(c["dtype"]))
        assert sorted(g) == sorted(want)
        for k in want:
            assert g[k].dtype == want[k].dtype and g[k].shape == (z - a, w), k
            assert np.array_equal(g[k], want[k]), k
    assert (got[0].truncated if c["batch"] is None else fastaxo.pad_batches(data, bounds, **kw).truncated) == truncated


_INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@st.composite
def numpy_row(draw, length):
    """One row of ``length`` small non-negative tokens as an ndarray the fast path may or may not
    take: any integer type, native or byte-swapped, contiguous or strided, 1-D or 2-D, or a
    subclass; returns (array, taken-by-the-fast-path-for-int32-output, for-int64-output)."""
    t = np.dtype(draw(st.sampled_from(_INT_TYPES)))
    vals = np.array(draw(st.lists(st.integers(0, 120), min_size=length, max_size=length)), t)
    shape = draw(st.sampled_from(["plain", "plain", "plain", "strided", "swapped", "2d", "subclass"]))
    if shape == "strided":
        base = np.zeros(2 * length, t)
        base[::2] = vals
        vals = base[::2]
    elif shape == "swapped":
        vals = vals.astype(t.newbyteorder())
    elif shape == "2d":
        vals = vals.reshape(1, length)
    elif shape == "subclass":
        vals = vals.view(_RowSub)
    fast = shape == "plain" or (shape == "strided" and length <= 1) or (shape == "swapped" and t.itemsize == 1)
    signed = t.kind == "i"
    return vals, fast and (t.itemsize <= 4 if signed else t.itemsize < 4), fast and (signed or t.itemsize < 8)


class _RowSub(np.ndarray):
    pass


@st.composite
def array_rows_case(draw):
    lengths = draw(st.lists(st.integers(0, 40), min_size=1, max_size=24))
    rows = [draw(numpy_row(n)) for n in lengths]
    labels = [draw(numpy_row(n)) for n in lengths] if draw(st.booleans()) else None
    return rows, labels


@given(array_rows_case(), st.sampled_from([np.int32, np.int64]), st.sampled_from(["right", "left"]),
       st.sampled_from([None, 8]), st.booleans())
def test_pad_list_fast_path_matches_reference(case, dtype, side, mult, mask):
    """A list of NumPy rows of mixed integer types: the fast path takes exactly the rows it can
    read in place and cast safely, and its output equals the reference; other lists go to the
    general path, which gives the same output."""
    from fastaxo._core import backend as _backend

    rows, labels = case
    data = [r for r, _, _ in rows]
    lab = [r for r, _, _ in labels] if labels is not None else None
    col = 1 if dtype is np.int32 else 2
    expect_fast = all(r[col] for r in rows) and (labels is None or all(r[col] for r in labels))
    ext = _backend.pack_ext
    if ext is not None:
        got = ext.pad_list(data, lab, np.dtype(dtype), 7, -100, mult or 0, side == "left", mask)
        assert (got is not None) == expect_fast
    plain = [np.asarray(r).reshape(-1).astype(np.int64) for r in data]
    plain_lab = [np.asarray(r).reshape(-1).astype(np.int64) for r in lab] if lab is not None else None
    w = widths_for([len(r) for r in plain], None, mult)
    want = ref_pad(plain, plain_lab, None, w, side, 7, -100, None, np.dtype(dtype))
    if not mask:
        del want["attention_mask"]
    try:
        out = fastaxo.pad(data, labels=lab, pad_to_multiple_of=mult, side=side, pad_id=7, attention_mask=mask,
                          dtype=dtype)
    except (InvalidInputError, InvalidTypeError) as exc:
        # only a 2-D row is refused (by the general path); strided, swapped or subclassed rows are padded
        assert any(np.ndim(r) != 1 for r in data + (lab or [])), exc
        return
    assert sorted(out) == sorted(want)
    for k in want:
        assert out[k].dtype == want[k].dtype and out[k].shape == want[k].shape, k
        assert np.array_equal(out[k], want[k]), k


def test_pad_example_left_right_and_truncate():
    rows = [np.array([1, 2, 3, 4, 5]), np.array([6, 7])]
    r = fastaxo.pad(rows, pad_to_multiple_of=4, position_ids=True)
    assert r["input_ids"].tolist() == [[1, 2, 3, 4, 5, 0, 0, 0], [6, 7, 0, 0, 0, 0, 0, 0]]
    assert r["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0]]
    assert r["position_ids"].tolist() == [[0, 1, 2, 3, 4, 0, 1, 2], [0, 1, 0, 1, 2, 3, 4, 5]]
    l = fastaxo.pad(rows, max_length=3, side="left", truncate=True, pad_id=9)
    assert l["input_ids"].tolist() == [[3, 4, 5], [9, 6, 7]]
    assert (l.truncated, l.truncated_tokens) == (1, 2)
    rt = fastaxo.pad(rows, max_length=3, truncate=True)
    assert rt["input_ids"].tolist() == [[1, 2, 3], [6, 7, 0]]


def test_pad_batches_each_to_its_own_width():
    rows = [[1], [2, 3, 4], [5, 6], [7, 8, 9, 10, 11]]
    pb = fastaxo.pad_batches(rows, [0, 2, 2, 4])
    assert len(pb) == 3 and pb.widths.tolist() == [3, 0, 5]
    assert pb[0]["input_ids"].tolist() == [[1, 0, 0], [2, 3, 4]]
    assert pb[1]["input_ids"].shape == (0, 0)
    assert pb[2]["input_ids"].tolist() == [[5, 6, 0, 0, 0], [7, 8, 9, 10, 11]]
    assert np.shares_memory(pb[2]["input_ids"], pb.buffers["input_ids"])


def test_pad_from_table_uses_labels_and_position_ids():
    tbl = pa.table({"input_ids": [[1, 2], [3]], "labels": [[-100, 2], [3]], "position_ids": [[0, 1], [0]]})
    r = fastaxo.pad(tbl, max_length=4)
    assert r["labels"].tolist() == [[-100, 2, -100, -100], [3, -100, -100, -100]]
    assert r["position_ids"].tolist() == [[0, 1, 0, 1], [0, 0, 1, 2]]


def test_pad_errors():
    rows = [[1, 2, 3], [4]]
    with pytest.raises(SequenceTooLongError, match=r"input_ids row 0 has 3 tokens; max_length is 2. Pass truncate=True"):
        fastaxo.pad(rows, max_length=2)
    with pytest.raises(InvalidInputError, match="side must be one of"):
        fastaxo.pad(rows, side="middle")
    with pytest.raises(InvalidInputError, match="labels row 1 has 2 values"):
        fastaxo.pad(rows, labels=[[1, 2, 3], [4, 5]])
    arrays = [np.array(r) for r in rows]
    with pytest.raises(InvalidInputError, match="labels row 1 has 2 values; input_ids row 1 has 1"):
        fastaxo.pad(arrays, labels=[np.array([1, 2, 3]), np.array([4, 5])])  # the list-of-arrays fast path
    # a strided row is read through the general path (it raised NumPy's buffer ValueError before)
    assert fastaxo.pad([np.arange(6)[::2], np.arange(2)])["input_ids"].tolist() == [[0, 2, 4], [0, 1, 0]]
    mixed = [np.array([1], np.int8), np.array([2**63], np.uint64)]
    with pytest.raises(InvalidInputError, match=r"input_ids row 1: a uint64 token id \(9223372036854775808\) does not fit"):
        fastaxo.pad(mixed)
    assert fastaxo.pad([mixed[0], np.array([5], np.uint64)])["input_ids"].tolist() == [[1], [5]]
    with pytest.raises(InvalidInputError, match="batch_offsets must start at 0 and end at the number of rows"):
        fastaxo.pad_batches(rows, [0, 1])
    with pytest.raises(InvalidInputError, match="must not decrease"):
        fastaxo.pad_batches(rows, [0, 2, 1, 2])
    with pytest.raises(InvalidInputError, match="max_length must be >= 1"):
        fastaxo.pad(rows, max_length=0)
    with pytest.raises(InvalidTypeError, match="pad_id must be an int"):
        fastaxo.pad(rows, pad_id=None)
    with pytest.raises(InvalidInputError, match="pad_id is 4294967296; it does not fit"):
        fastaxo.pad(rows, pad_id=2**32, dtype=np.int32)


def test_pad_empty():
    r = fastaxo.pad([])
    assert r["input_ids"].shape == (0, 0)
    r = fastaxo.pad([[], []], pad_to_multiple_of=8)
    assert r["input_ids"].shape == (2, 0)
    r = fastaxo.pad([[], []], max_length=3)
    assert r["attention_mask"].tolist() == [[0, 0, 0], [0, 0, 0]]


def test_big_pad_parallel_is_exact():
    rng = np.random.default_rng(4)
    rows = [rng.integers(-5, 50_000, n).astype(np.int32) for n in rng.integers(0, 700, 6000)]
    bounds = np.arange(0, 6001, 16)
    bounds[-1] = 6000
    one = fastaxo.pad_batches(rows, bounds, side="left", position_ids=True, num_threads=1)
    two = fastaxo.pad_batches(rows, bounds, side="left", position_ids=True, num_threads=2)
    for k in one.buffers:
        assert np.array_equal(one.buffers[k], two.buffers[k]), k
    for b in (0, 7, len(two) - 1):
        a, z = int(bounds[b]), int(bounds[b + 1])
        w = max(len(r) for r in rows[a:z])
        want = ref_pad(rows[a:z], None, True, w, "left", 0, -100, None, np.dtype(np.int64))
        for k in want:
            assert np.array_equal(two[b][k], want[k]), k
