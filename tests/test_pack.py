"""Packing: bin assignment and packed rows against the plain-Python reference, exactly."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest
from conftest import EXT
from hypothesis import given
from hypothesis import strategies as st

import fastaxo
from fastaxo._core.ragged import as_ragged
from fastaxo._reference import packing as _reference_pack
from fastaxo.errors import InvalidInputError, InvalidTypeError, NullValueError, SequenceTooLongError

STRATS = ["bfd", "ffd", "ff", "nf"]


# ---------------------------------------------------------------- an independent oracle
def ref_items(lengths: list[int], cap: int, overflow: str):
    """(item_len, item_row, item_start) from rows, written out longhand."""
    items = []
    for r, n in enumerate(lengths):
        if n <= cap or overflow == "isolate":
            items.append((n, r, 0))
        elif overflow == "truncate":
            items.append((cap, r, 0))
        elif overflow == "split":
            for s in range(0, n, cap):
                items.append((min(cap, n - s), r, s))
        elif overflow == "drop":
            continue
        else:
            raise AssertionError("error mode with an over-long row")
    return items


def ref_pack_bins(lengths, cap, strategy, max_rows, group_size, overflow):
    items = ref_items(list(lengths), cap, overflow)
    max_items = max_rows or max(len(items), 1)
    bins = []
    if group_size is None:
        groups = [items]
    else:
        groups = [[it for it in items if g <= it[1] < g + group_size] for g in range(0, len(lengths), group_size)]
    for grp in groups:
        order, offs = _reference_pack.assign([it[0] for it in grp], cap, max_items, strategy, overflow == "isolate")
        for b in range(len(offs) - 1):
            bins.append([grp[order[e]] for e in range(offs[b], offs[b + 1])])
    return bins


def bins_as_tuples(b: fastaxo.Bins):
    out = []
    starts = b.starts
    for i in range(len(b)):
        lo, hi = int(b.offsets[i]), int(b.offsets[i + 1])
        out.append([(int(b.lengths[e]), int(b.indices[e]), int(starts[e])) for e in range(lo, hi)])
    return out


def axolotl_pack_group(lengths, group_offset, cap, bin_size):
    """Axolotl 0.21's numba pack_group (multipack.py), line for line in Python (safe_mode's
    max_bins skip cannot trigger: there are never more bins than items)."""
    rem, assigned = [], []
    for seq_id, size in enumerate(lengths):
        gi = seq_id + group_offset
        add = True
        for b in range(len(rem)):
            if rem[b] >= size and len(assigned[b]) < bin_size:
                rem[b] -= size
                assigned[b].append(gi)
                add = False
                break
        if add:
            rem.append(cap - size)
            assigned.append([gi])
    return assigned


def axolotl_pack_parallel(lengths, cap, group_size, bin_size):
    out = []
    for i in range(0, len(lengths), group_size):
        out.extend(axolotl_pack_group(lengths[i : i + group_size], i, cap, bin_size))
    return out


# ---------------------------------------------------------------- bin assignment
@st.composite
def packing_case(draw):
    cap = draw(st.integers(1, 300))
    small = st.integers(0, cap)
    overflow = draw(st.sampled_from(["error", "truncate", "split", "drop", "isolate"]))
    elem = small if overflow == "error" else st.one_of(small, small, st.integers(cap, 3 * cap + 5))
    lengths = draw(st.lists(elem, max_size=120))
    strategy = draw(st.sampled_from(STRATS))
    max_rows = draw(st.sampled_from([None, 1, 2, 3, 7]))
    group = draw(st.sampled_from([None, 1, 5, 17, 1000]))
    return lengths, cap, strategy, max_rows, group, overflow


@given(packing_case(), st.sampled_from([1, 2]))
def test_pack_bins_matches_reference(case, threads):
    lengths, cap, strategy, max_rows, group, overflow = case
    b = fastaxo.pack_bins(np.array(lengths, np.int64), cap, strategy=strategy, max_rows_per_bin=max_rows,
                          group_size=group, overflow=overflow, num_threads=threads)
    assert bins_as_tuples(b) == ref_pack_bins(lengths, cap, strategy, max_rows, group, overflow)
    check_invariants(b, lengths, cap, max_rows, overflow)


@given(packing_case(), st.data(), st.sampled_from([1, 2]))
def test_pack_bins_in_a_given_order(case, data, threads):
    """order=: the bins of pack_bins(lengths[order]) with rows named through order; 'ff' reads the
    lengths in place through the order (the C path), the other strategies gather."""
    lengths, cap, strategy, max_rows, group, overflow = case
    n = len(lengths)
    order = data.draw(st.one_of(st.permutations(range(n)), st.lists(st.integers(0, max(n - 1, 0)), max_size=150))
                      if n else st.just([]))
    gathered = [lengths[i] for i in order]
    b = fastaxo.pack_bins(np.array(lengths, np.int64), cap, strategy=strategy, max_rows_per_bin=max_rows,
                          group_size=group, overflow=overflow, num_threads=threads, order=np.array(order, np.int64))
    want = [[(ln, order[r], s) for ln, r, s in bin_] for bin_ in
            ref_pack_bins(gathered, cap, strategy, max_rows, group, overflow)]
    assert bins_as_tuples(b) == want
    plain = fastaxo.pack_bins(np.array(gathered, np.int64), cap, strategy=strategy, max_rows_per_bin=max_rows,
                              group_size=group, overflow=overflow, num_threads=threads)
    assert b.stats == plain.stats


def test_pack_bins_order_errors_and_ff_fast_path():
    lengths = np.array([5, 3000, 7, 9], np.int64)
    with pytest.raises(InvalidInputError, match=r"order\[2\] is 4; row ids must be in \[0, 4\)"):
        fastaxo.pack_bins(lengths, 2048, order=[0, 1, 4])
    with pytest.raises(InvalidInputError, match=r"order\[0\] is -1"):
        fastaxo.pack_bins(lengths, 2048, order=[-1])
    with pytest.raises(InvalidTypeError, match="order: expected a 1-D array of integer row ids"):
        fastaxo.pack_bins(lengths, 2048, order=np.zeros((2, 2), np.int64))
    with pytest.raises(InvalidTypeError, match="order: expected a 1-D array of integer row ids"):
        fastaxo.pack_bins(lengths, 2048, order=[0.5])
    with pytest.raises(SequenceTooLongError, match=r"lengths row 1 \(order\[2\]\) has 3,000 tokens") as ei:
        fastaxo.pack_bins(lengths, 2048, strategy="ff", order=[0, 2, 1, 3, 1])
    assert (ei.value.row, ei.value.length, ei.value.max_length) == (1, 3000, 2048)
    b = fastaxo.pack_bins(lengths, 2048, strategy="ff", overflow="isolate", order=[3, 1, 0, 1])
    assert b.to_list() == [[3, 0], [1], [1]] and b.stats.isolated == 2 and b.stats.overlong == 2
    big = np.random.default_rng(1).integers(1, 900, 50_000)
    perm = np.random.default_rng(2).permutation(50_000)
    for gs in (None, 7_000):
        fast = fastaxo.pack_bins(big, 2048, strategy="ff", group_size=gs, max_rows_per_bin=9, order=perm)
        slow = fastaxo.pack_bins(big[perm], 2048, strategy="ff", group_size=gs, max_rows_per_bin=9)
        assert np.array_equal(fast.indices, perm[slow.indices]) and np.array_equal(fast.offsets, slow.offsets)
        assert np.array_equal(fast.lengths, slow.lengths) and fast.stats == slow.stats


def check_invariants(b, lengths, cap, max_rows, overflow):
    """Lossless: every token of every row exactly once (unless dropped/truncated, as counted)."""
    covered = {r: [] for r in range(len(lengths))}
    starts = b.starts
    for e in range(len(b.indices)):
        covered[int(b.indices[e])].append((int(starts[e]), int(b.lengths[e])))
    dropped = truncated = 0
    for r, n in enumerate(lengths):
        spans = sorted(covered[r])
        if n > cap and overflow == "drop":
            assert spans == []
            dropped += 1
            continue
        assert spans, f"row {r} missing"
        if n > cap and overflow == "truncate":
            assert spans == [(0, cap)]
            truncated += 1
            continue
        pos = 0
        for s, ln in spans:
            assert s == pos
            pos += ln
        assert pos == n
    tokens = b.token_counts()
    per_bin = np.diff(b.offsets)
    assert (per_bin >= 1).all()
    if overflow != "isolate":
        assert (tokens <= cap).all()
    if max_rows:
        assert (per_bin <= max_rows).all()
    st_ = b.stats
    assert st_.bins == len(b) and st_.tokens == int(tokens.sum()) and st_.sequences == len(lengths)
    assert st_.dropped == dropped and st_.truncated == truncated
    assert st_.lower_bound == -(-st_.tokens // cap)
    if overflow != "isolate":
        assert st_.bins >= st_.lower_bound


@given(st.lists(st.integers(0, 512), max_size=400), st.sampled_from([1, 3, 200]), st.sampled_from([7, 100, 1000]))
def test_ff_is_axolotl_pack_parallel(lengths, bin_size, group_size):
    b = fastaxo.pack_bins(lengths, 512, strategy="ff", max_rows_per_bin=bin_size, group_size=group_size)
    assert b.to_list() == axolotl_pack_parallel(lengths, 512, group_size, bin_size)


def test_ff_isolates_overlong_like_axolotl():
    lengths = [100, 700, 0, 300, 900, 50, 0]
    b = fastaxo.pack_bins(lengths, 512, strategy="ff", overflow="isolate", max_rows_per_bin=200)
    assert b.to_list() == axolotl_pack_parallel(lengths, 512, 100_000, 200)
    assert b.stats.overlong == 2 and b.stats.isolated == 2


def test_big_assignment_quality_and_threads():
    rng = np.random.default_rng(7)
    lengths = np.clip(rng.lognormal(5.4, 0.8, 300_000), 1, 4096).astype(np.int64)
    lb = -(-int(lengths.sum()) // 4096)
    for strategy in ("bfd", "ffd"):
        b = fastaxo.pack_bins(lengths, 4096, strategy=strategy)
        assert b.stats.bins <= lb * 1.005, b.stats
        assert np.array_equal(np.sort(b.indices), np.arange(len(lengths)))
        assert (b.token_counts() <= 4096).all()
    one = fastaxo.pack_bins(lengths, 4096, strategy="bfd", group_size=50_000, num_threads=1)
    two = fastaxo.pack_bins(lengths, 4096, strategy="bfd", group_size=50_000, num_threads=2)
    assert np.array_equal(one.indices, two.indices) and np.array_equal(one.offsets, two.offsets)


def test_bfd_beats_or_ties_ffd_and_ff():
    rng = np.random.default_rng(3)
    lengths = np.clip(rng.lognormal(5.4, 0.9, 50_000), 1, 2048).astype(np.int64)
    bins = {s: fastaxo.pack_bins(lengths, 2048, strategy=s).stats.bins for s in STRATS}
    assert bins["bfd"] <= bins["ff"] and bins["ffd"] <= bins["ff"] <= bins["nf"]


def test_empty_and_zero_lengths():
    b = fastaxo.pack_bins([], 16)
    assert len(b) == 0 and b.stats.efficiency == 0.0 and b.to_list() == []
    b = fastaxo.pack_bins([0, 0, 0], 16, max_rows_per_bin=2)
    assert b.to_list() == [[0, 1], [2]]


def test_lengths_from_ragged_inputs():
    rows = [[1, 2, 3], [], [4] * 10]
    arr = pa.array(rows, pa.list_(pa.int32()))
    for form in (arr, pa.chunked_array([arr.slice(0, 1), arr.slice(1)]), rows, [np.array(r) for r in rows]):
        assert fastaxo.pack_bins(form, 10).to_list() == [[2, 1], [0]]  # BFD: the empty row joins the full bin


def test_bins_slicing_and_chunks():
    b = fastaxo.pack_bins(np.arange(1, 40), 50, strategy="ffd")
    parts = list(b.chunks(4))
    assert sum(len(p) for p in parts) == len(b)
    assert [x.tolist() for p in parts for x in p] == [x.tolist() for x in b]
    assert b[1:3].to_list() == b.to_list()[1:3] and b[-1].tolist() == b.to_list()[-1]
    with pytest.raises(IndexError):
        b[len(b)]


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        ({"max_length": 0}, InvalidInputError, "max_length must be >= 1"),
        ({"max_length": 2.5}, InvalidTypeError, "max_length must be a positive int"),
        ({"strategy": "best"}, InvalidInputError, "strategy must be one of"),
        ({"overflow": "wrap"}, InvalidInputError, "overflow must be one of"),
        ({"max_rows_per_bin": 0}, InvalidInputError, "max_rows_per_bin must be >= 1"),
        ({"group_size": -1}, InvalidInputError, "group_size must be >= 1"),
        ({"num_threads": 0}, InvalidInputError, "num_threads"),
        ({"max_length": (1 << 26) + 1}, InvalidInputError, "supports bins of up to"),
    ],
)
def test_pack_bins_argument_errors(kwargs, exc, words):
    args = {"max_length": 10, **kwargs}
    cap = args.pop("max_length")
    with pytest.raises(exc, match=words):
        fastaxo.pack_bins([1, 2, 3], cap, **args)


def test_overlong_error_names_row_and_length():
    with pytest.raises(SequenceTooLongError, match=r"row 2 has 5,000 tokens; max_length is 4,096") as ei:
        fastaxo.pack_bins([10, 20, 5000, 6000], 4096)
    assert (ei.value.row, ei.value.length, ei.value.max_length) == (2, 5000, 4096)
    assert isinstance(ei.value, ValueError)


def test_lengths_errors():
    with pytest.raises(InvalidInputError, match=r"lengths\[1\] is -3"):
        fastaxo.pack_bins([1, -3], 10)
    with pytest.raises(InvalidTypeError, match="integer lengths"):
        fastaxo.pack_bins(np.array([1.5, 2.0]), 10)
    with pytest.raises(InvalidTypeError, match="expected rows of integers, got values of dtype float32"):
        fastaxo.pack_bins(np.zeros((2, 2), np.float32), 10)


# ---------------------------------------------------------------- packed rows
@st.composite
def ragged_tokens(draw):
    lengths = draw(st.lists(st.one_of(st.integers(0, 40), st.integers(0, 3), st.integers(60, 200)), max_size=50))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    vdt = draw(st.sampled_from([np.int32, np.int64, np.uint16, np.uint32, np.int16]))
    rows = [rng.integers(0, 30000, n).astype(vdt) for n in lengths]
    labels = [np.where(rng.random(n) < 0.3, -100, r.astype(np.int64)) for n, r in zip(lengths, rows)]
    form = draw(st.sampled_from(["arrow", "large", "chunked", "sliced", "pair", "arrays", "lists"]))
    return rows, labels, form


def make_form(rows, form, name="x"):
    dt = rows[0].dtype if rows else np.dtype(np.int32)
    lengths = [len(r) for r in rows]
    values = np.concatenate(rows).astype(dt) if rows else np.zeros(0, dt)
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if form == "pair":
        return values, offsets
    if form == "arrays":
        return list(rows)
    if form == "lists":
        return [r.tolist() for r in rows]
    large = form == "large"
    cls = pa.LargeListArray if large else pa.ListArray
    pad = np.array([7, 8, 9], dt)  # a parent with extra rows around, to slice
    if form == "sliced":
        full_vals = np.concatenate([pad, values, pad])
        full_offs = np.concatenate([[0], offsets + 3, [offsets[-1] + 6]]).astype(np.int32)
        arr = cls.from_arrays(pa.array(full_offs), pa.array(full_vals))
        return arr.slice(1, len(rows))
    arr = cls.from_arrays(pa.array(offsets.astype(np.int64 if large else np.int32)), pa.array(values))
    if form == "chunked":
        k = len(rows) // 2
        return pa.chunked_array([arr.slice(0, k), arr.slice(k)], type=arr.type)
    return arr


@st.composite
def pack_case(draw):
    rows, labels, form = draw(ragged_tokens())
    max_len = draw(st.integers(1, 120))
    return dict(
        rows=rows, labels=labels, form=form, max_len=max_len,
        strategy=draw(st.sampled_from(STRATS)),
        layout=draw(st.sampled_from(["padded", "flat"])),
        attention=draw(st.sampled_from(["segments", "ones", None])),
        overflow=draw(st.sampled_from(["truncate", "split", "drop"])),
        dtype=draw(st.sampled_from([np.int32, np.int64])),
        mult=draw(st.sampled_from([None, 8, 64])),
        with_labels=draw(st.booleans()),
        threads=draw(st.sampled_from([1, 2])),
    )


@given(pack_case())
def test_pack_matches_reference_and_is_lossless(c):
    data = make_form(c["rows"], c["form"])
    labels = make_form(c["labels"], "arrays") if c["with_labels"] else None
    p = fastaxo.pack(data, c["max_len"], labels=labels, strategy=c["strategy"], layout=c["layout"],
                     attention=c["attention"], overflow=c["overflow"], dtype=c["dtype"],
                     pad_to_multiple_of=c["mult"], num_threads=c["threads"], pad_id=3)
    width = c["max_len"] if c["mult"] is None else -(-c["max_len"] // c["mult"]) * c["mult"]
    ids = as_ragged(data, "input_ids")
    lab = as_ragged(labels, "labels") if labels is not None else None
    ref = _reference_pack.materialise(ids, lab, {}, p.bins, width=width, layout=c["layout"],
                                      attention=c["attention"], position_ids=True, pad_id=3,
                                      label_pad_id=-100, pad_values={}, dt=np.dtype(c["dtype"]))
    assert sorted(p) == sorted(ref)
    for k in ref:
        assert p[k].dtype == ref[k].dtype, k
        assert np.array_equal(p[k], ref[k]), k
    # every kept token, in order, with its label: read the rows back from the output
    recovered: dict[int, list] = {}
    starts = p.bins.starts
    flat_ids = p["input_ids"].reshape(-1)
    flat_lab = p["labels"].reshape(-1) if labels is not None else None
    cu = p["cu_seqlens"]
    k = 0
    for b in range(len(p.bins)):
        for e in range(int(p.bins.offsets[b]), int(p.bins.offsets[b + 1])):
            a, z = int(cu[k]), int(cu[k + 1])
            assert z - a == int(p.bins.lengths[e])
            r = int(p.bins.indices[e])
            recovered.setdefault(r, []).append((int(starts[e]), flat_ids[a:z], None if flat_lab is None else flat_lab[a:z]))
            k += 1
        if c["layout"] == "padded" and int(p.bins.token_counts()[b]) < width:
            k += 1
    assert k == len(cu) - 1
    for r, row in enumerate(c["rows"]):
        n = len(row)
        if n > c["max_len"] and c["overflow"] == "drop":
            assert r not in recovered
            continue
        pieces = sorted(recovered[r], key=lambda t: t[0])
        got = np.concatenate([t[1] for t in pieces])
        want = row[: c["max_len"]] if (n > c["max_len"] and c["overflow"] == "truncate") else row
        assert np.array_equal(got, want.astype(np.int64))
        if labels is not None:
            got_l = np.concatenate([t[2] for t in pieces])
            assert np.array_equal(got_l, c["labels"][r][: len(want)])


def test_pack_layout_example_axolotl_v2():
    rows = [[11, 12, 13, 14, 15], [21, 22, 23], [31, 32, 33, 34]]
    p = fastaxo.pack(rows, 16, labels=rows, strategy="ff", pad_id=0)
    assert p["input_ids"].tolist() == [[11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 0, 0, 0, 0]]
    assert p["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 0, 0, 0, 0]]
    assert p["position_ids"].tolist() == [[0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3]]
    assert p["labels"].tolist()[0][-5:] == [34, -100, -100, -100, -100]
    assert p["cu_seqlens"].tolist() == [0, 5, 8, 12, 16] and p["cu_seqlens"].dtype == np.int32
    assert p["input_ids"].dtype == np.int64
    f = fastaxo.pack(rows, 16, layout="flat", strategy="ff", attention=None)
    assert f["input_ids"].tolist() == [11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34]
    assert f["cu_seqlens"].tolist() == [0, 5, 8, 12] and f["bin_offsets"].tolist() == [0, 12]
    assert "attention_mask" not in f


def test_pack_tables_datasets_and_extra_columns():
    rows = [[1, 2], [3, 4, 5], [6]]
    labels = [[-100, 2], [3, -100, 5], [6]]
    weights = [[0.5, 1.0], [1.0, 1.0, 0.25], [2.0]]
    tbl = pa.table({"input_ids": rows, "labels": labels, "w": weights, "text": ["a", "b", "c"]})
    p = fastaxo.pack(tbl, 4, columns=["w"], pad_values={"w": -1.0}, strategy="ff")
    assert p["labels"].tolist() == [[-100, 2, 6, -100], [3, -100, 5, -100]]
    assert p["w"].dtype == np.float64 and p["w"].tolist() == [[0.5, 1.0, 2.0, -1.0], [1.0, 1.0, 0.25, -1.0]]
    for form in (tbl.to_batches()[0], {"input_ids": rows, "labels": labels}):
        q = fastaxo.pack(form, 4, strategy="ff")
        assert np.array_equal(q["labels"], p["labels"]) and np.array_equal(q["input_ids"], p["input_ids"])
    import datasets  # a test dependency
    ds = datasets.Dataset.from_dict({"input_ids": rows * 5, "labels": labels * 5}).shuffle(seed=1)
    got = fastaxo.pack(ds, 8, strategy="ffd")
    want = fastaxo.pack(ds[:]["input_ids"], 8, labels=ds[:]["labels"], strategy="ffd")
    for k in want:
        assert np.array_equal(got[k], want[k]), k


def test_fixed_size_lists_pack_and_pad_as_their_rows():
    """HF datasets' ``Sequence(Value("int32"), length=N)`` columns are fixed_size_list: packed,
    padded and deduped as the list of the same rows (sliced, chunked, in a Dataset); a null
    row is refused as in a list column. Before: "expected an Arrow list or large_list"."""
    import datasets

    rng = np.random.default_rng(3)
    block = rng.integers(0, 50_000, (40, 6)).astype(np.int32)
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(block.ravel()), 6)
    plain = pa.array(list(block), pa.list_(pa.int32()))
    for f, p in ((fixed, plain), (fixed.slice(7, 20), plain.slice(7, 20)),
                 (pa.chunked_array([fixed.slice(0, 13), fixed.slice(13)]), plain)):
        got, want = fastaxo.pack(f, 16), fastaxo.pack(p, 16)
        for k in want:
            assert np.array_equal(got[k], want[k]), k
        assert np.array_equal(fastaxo.pad(f), fastaxo.pad(p))
    ds = datasets.Dataset.from_dict(
        {"input_ids": block.tolist()},
        features=datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int32"),
                                                                   length=6)}))
    assert pa.types.is_fixed_size_list(ds.data.schema.field("input_ids").type)
    got, want = fastaxo.pack(ds, 16), fastaxo.pack(plain, 16)
    for k in want:
        assert np.array_equal(got[k], want[k]), k
    with pytest.raises(fastaxo.errors.NullValueError, match="row 1"):
        fastaxo.pack(pa.array([[1, 2], None], pa.list_(pa.int32(), 2)), 8)


def test_iter_pack_equals_pack():
    rng = np.random.default_rng(5)
    rows = [rng.integers(0, 1000, n).astype(np.int32) for n in rng.integers(0, 300, 3000)]
    whole = fastaxo.pack(rows, 512)
    it = fastaxo.iter_pack(rows, 512, chunk_bins=100)
    assert it.stats == whole.stats and len(it) == -(-len(whole.bins) // 100)
    parts = list(it)
    for k in whole:
        if k != "cu_seqlens":
            assert np.array_equal(np.concatenate([q[k] for q in parts]), whole[k]), k
    # reused buffers: each chunk is right when consumed, and all chunks share memory
    reused = fastaxo.iter_pack(rows, 512, chunk_bins=100, reuse_buffers=True)
    first = None
    for q, want in zip(reused, parts):
        for k in want:
            assert np.array_equal(q[k], want[k]), k
        first = q["input_ids"] if first is None else first
        assert np.shares_memory(q["input_ids"], first)


def test_pack_with_given_bins_and_huge_row():
    big = np.arange(300_000, dtype=np.int32)
    rows = [big, np.arange(5, dtype=np.int32)]
    b = fastaxo.pack_bins(rows, 100_000, overflow="split")
    assert b.stats.split == 1 and b.stats.split_pieces == 3
    p = fastaxo.pack(rows, 100_000, bins=b, dtype=np.int32)
    assert np.array_equal(np.sort(p["input_ids"][p["attention_mask"] > 0]), np.sort(np.concatenate(rows)))
    with pytest.raises(InvalidInputError, match="packed rows are 50,000 wide"):
        fastaxo.pack(rows, 50_000, bins=b)
    with pytest.raises(InvalidInputError, match="the data has 1 rows"):
        fastaxo.pack(rows[:1], 100_000, bins=b)


def test_every_too_long_sequence_is_said_in_one_message(tmp_path):
    """pack_bins (rows and an order), pad and prepare refuse an over-long row with one message:
    where it is, its length, max_length, how many rows are longer, then the options that handle
    them in the caller's terms; ``max_length`` is the limit on every one of them."""
    import pyarrow.parquet as pq

    shape = (r"^(?P<where>.+) has (?P<n>[\d,]+) tokens; max_length is 4(; (?P<more>\d+) rows are "
             r"longer)?\. Pass (?P<fix>.+)$")
    f = tmp_path / "in.parquet"
    pq.write_table(pa.table({"input_ids": pa.array([[1] * 3, [1] * 9, [1] * 6], pa.list_(pa.int32()))}), f)
    calls = {
        "lengths row 1": lambda: fastaxo.pack_bins([3, 9, 6], 4),
        "lengths row 1 (order[0])": lambda: fastaxo.pack_bins([3, 9, 6], 4, strategy="ff",
                                                               order=[1, 2, 0]),
        "input_ids row 1": lambda: fastaxo.pad([[1] * 3, [1] * 9, [1] * 6], max_length=4),
        f"{f} row 1 (0-based): input_ids": lambda: fastaxo.prepare(
            [str(f)], str(tmp_path / "out.parquet"), max_length=4),
    }
    for where, call in calls.items():
        with pytest.raises(SequenceTooLongError) as ei:
            call()
        m = re.match(shape, str(ei.value))
        assert m, str(ei.value)
        assert (m["where"], m["n"], m["more"]) == (where, "9", "2"), str(ei.value)
        assert (ei.value.row, ei.value.length, ei.value.max_length) == (1, 9, 4)


def test_pack_errors():
    rows = [[1, 2, 3], [4, 5]]
    with pytest.raises(InvalidInputError, match=r"labels row 1 has 3 values; input_ids row 1 has 2"):
        fastaxo.pack(rows, 8, labels=[[1, 2, 3], [4, 5, 6]])
    with pytest.raises(SequenceTooLongError, match="input_ids row 0 has 3 tokens"):
        fastaxo.pack(rows, 2)
    with pytest.raises(InvalidInputError, match="overflow='isolate'"):
        fastaxo.pack(rows, 2, overflow="isolate")
    with pytest.raises(InvalidInputError, match="dtype must be np.int32 or np.int64"):
        fastaxo.pack(rows, 8, dtype=np.int16)
    with pytest.raises(InvalidInputError, match="do not fit the output dtype int32"):
        fastaxo.pack([[1, 2**40]], 8, dtype=np.int32)
    with pytest.raises(InvalidTypeError, match="expected rows of integers"):
        fastaxo.pack([np.array([1.5])], 8)
    with pytest.raises(InvalidTypeError, match="expected integer token ids, got a float"):
        fastaxo.pack([[1, 2.5]], 8)
    with pytest.raises(InvalidTypeError, match="expected an Arrow list or large_list of numbers"):
        fastaxo.pack(pa.array(["a", "b"]), 8)
    with pytest.raises(NullValueError, match="input_ids row 1 is null"):
        fastaxo.pack(pa.array([[1], None], pa.list_(pa.int32())), 8)
    with pytest.raises(InvalidInputError, match=r"offsets are corrupt at row 1"):
        fastaxo.pack((np.arange(5, dtype=np.int32), np.array([0, 3, 2, 5])), 8)
    with pytest.raises(InvalidInputError, match="beyond the 5 values"):
        fastaxo.pack((np.arange(5, dtype=np.int32), np.array([0, 3, 9])), 8)
    with pytest.raises(fastaxo.ColumnNotFoundError, match="no column 'input_ids'"):
        fastaxo.pack(pa.table({"ids": [[1]]}), 8)
    with pytest.raises(InvalidTypeError, match="expected a pyarrow ListArray"):
        fastaxo.pack(42, 8)
    with pytest.raises(InvalidInputError, match="layout must be one of"):
        fastaxo.pack(rows, 8, layout="ragged")


def test_pack_empty():
    p = fastaxo.pack([], 16)
    assert p["input_ids"].shape == (0, 16) and p["cu_seqlens"].tolist() == [0]
    p = fastaxo.pack([[], []], 16)
    assert p["input_ids"].shape == (1, 16) and p["attention_mask"].sum() == 0


@pytest.mark.skipif(EXT is None, reason="needs the compiled extension (CI requires it)")
def test_pure_python_fallback_agrees(monkeypatch):
    rng = np.random.default_rng(11)
    rows = [rng.integers(0, 50000, n).astype(np.int32) for n in rng.integers(0, 90, 400)]
    fast = fastaxo.pack(rows, 128, labels=rows, overflow="split")
    from fastaxo._core import backend as _backend

    monkeypatch.setattr(_backend, "pack_ext", None)
    slow = fastaxo.pack(rows, 128, labels=rows, overflow="split")
    for k in fast:
        assert np.array_equal(fast[k], slow[k]), k


def test_big_pack_parallel_is_exact():
    """The parallel, prefetching path (outputs far above the serial threshold): every token
    where the bins say, vectorised, and identical for 1 and 2 threads."""
    rng = np.random.default_rng(21)
    n = 30_000
    lens = np.clip(rng.lognormal(5.4, 0.8, n), 0, 2048).astype(np.int64)
    offs = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offs[1:])
    vals = rng.integers(0, 2**31 - 1, int(offs[-1]), dtype=np.int64)
    arr = pa.LargeListArray.from_arrays(pa.array(offs), pa.array(vals))
    chunked = pa.chunked_array([arr.slice(0, 7000), arr.slice(7000, 1), arr.slice(7001)])
    one = fastaxo.pack(chunked, 2048, labels=chunked, num_threads=1, dtype=np.int32)
    two = fastaxo.pack(chunked, 2048, labels=chunked, num_threads=2, dtype=np.int32)
    for k in one:
        assert np.array_equal(one[k], two[k]), k
    b = two.bins
    # destination of each entry's first token, and every token's source and destination
    per_bin_start = np.zeros(len(b.lengths), np.int64)
    cs = np.concatenate([[0], np.cumsum(b.lengths)])
    bin_of = np.repeat(np.arange(len(b)), np.diff(b.offsets))
    per_bin_start = cs[:-1] - cs[b.offsets[bin_of]] + bin_of * 2048
    tok_entry = np.repeat(np.arange(len(b.lengths)), b.lengths)
    within = np.arange(int(cs[-1])) - cs[tok_entry]
    dst = per_bin_start[tok_entry] + within
    src = offs[b.indices[tok_entry]] + within
    assert np.array_equal(two["input_ids"].reshape(-1)[dst], vals[src].astype(np.int32))
    assert np.array_equal(two["labels"].reshape(-1)[dst], vals[src].astype(np.int32))
    assert np.array_equal(np.sort(b.indices), np.arange(n))
    assert int((two["attention_mask"] > 0).sum()) == int(lens.sum())


def test_list_of_lists_conversion_and_errors():
    rows = [[1, 2, 3], (4, 5), [], [True, 7]]
    p = fastaxo.pack(rows, 8, strategy="ff", attention=None)
    assert p["input_ids"].tolist() == [[1, 2, 3, 4, 5, 1, 7, 0]]
    with pytest.raises(InvalidTypeError, match=r"got a float \(2.5\) at row 1, position 1"):
        fastaxo.pack([[1], [2, 2.5]], 8)
    with pytest.raises(InvalidTypeError, match=r"input_ids row 0, position 1: expected an int token id, got str"):
        fastaxo.pack([[1, "a"]], 8)
    with pytest.raises(InvalidInputError, match="does not fit in int64"):
        fastaxo.pack([[2**70]], 8)
    # NumPy scalars inside lists take the general path and still work
    assert fastaxo.pack([[np.int32(3), 4]], 4)["input_ids"].tolist() == [[3, 4, 0, 0]]


def test_one_name_each_the_old_ones_are_refused():
    """One vocabulary (max_length, pad_to_multiple_of, attention 'ones'): 0.1.0 was never
    released with the old names, so they are not accepted (no shim keeps two names)."""
    rows = [np.arange(1, 6), np.arange(1, 4), np.arange(1, 8)]
    new = fastaxo.pack(rows, max_length=8, attention="ones")
    assert set(np.unique(new["attention_mask"])) <= {0, 1}
    assert "attention_mask" not in fastaxo.pack(rows, 8, attention="none")
    assert fastaxo.pad(rows, max_length=9, pad_to_multiple_of=4)["input_ids"].shape == (3, 12)
    for call in (lambda: fastaxo.pack(rows, max_len=8), lambda: fastaxo.iter_pack(rows, max_len=8),
                 lambda: fastaxo.pack_bins([5, 3, 7], capacity=8),
                 lambda: fastaxo.pad(rows, pad_to=9), lambda: fastaxo.pad(rows, multiple_of=4),
                 lambda: fastaxo.pad_batches(rows, [0, 1, 3], multiple_of=4)):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            call()
    with pytest.raises(fastaxo.InvalidInputError, match="attention"):
        fastaxo.pack(rows, 8, attention="binary")
