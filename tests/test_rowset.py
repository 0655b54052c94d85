"""fastaxo.RowSet: exact dedupe by value (sampled keys + byte comparison), against the
reference (a Python dict of each row's canonical encoding, fastaxo._reference.hashing.row_messages)
and against the SHA-256 path (fastaxo.Seen)."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import tables

import fastaxo
from fastaxo._reference import hashing as _reference
from fastaxo.errors import InvalidInputError, InvalidTypeError


def reference_keep(messages: list[bytes], seen: dict | None = None) -> list[int]:
    seen = {} if seen is None else seen
    keep = []
    for i, m in enumerate(messages):
        if m not in seen:
            seen[m] = None
            keep.append(i)
    return keep


def with_duplicates(table: pa.Table, picks: list[int]) -> pa.Table:
    """The table's rows, then the rows at `picks` again (in that order), as several chunks."""
    if not table.num_rows or not picks:
        return table
    idx = list(range(table.num_rows)) + [p % table.num_rows for p in picks]
    out = table.take(pa.array(idx))
    cut = len(idx) // 2
    return pa.Table.from_batches(out.slice(0, cut).to_batches() + out.slice(cut).to_batches(), schema=out.schema)


@given(tables(max_rows=30), st.lists(st.integers(0, 1000), max_size=20), st.integers(1, 3))
def test_equals_the_reference_and_the_sha_path(table, picks, nt):
    data = with_duplicates(table, picks)
    msgs = _reference.row_messages(data)
    res = fastaxo.dedupe(data, seen=fastaxo.RowSet(), num_threads=nt)
    assert res.keep.tolist() == reference_keep(msgs)
    assert res.keep.tolist() == fastaxo.dedupe(data, num_threads=nt).keep.tolist()
    assert isinstance(res.seen, fastaxo.RowSet) and len(res.seen) == len(set(msgs))
    assert res.n_duplicates == data.num_rows - len(res.keep)


def _long_rows(n_variants: int, copies: int, width: int = 100, seed: int = 0) -> tuple[pa.Table, list[int]]:
    """Rows of equal length that differ only at one value outside every key window, so all
    of them share a key: distinct rows chain, and past FX_ROWSET_HOT the key turns hot."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 1000, width)
    rows = []
    for v in range(n_variants):
        r = base.copy()
        r[20] = 10_000 + v  # bytes 9+160..: between the first and second window of 816 bytes
        rows.append(r)
    order = [v for v in range(n_variants) for _ in range(copies)]
    rng.shuffle(order)
    t = pa.table({"ids": pa.array([rows[v].tolist() for v in order], pa.list_(pa.int64()))})
    return t, order


@pytest.mark.parametrize("n_variants", [3, 40])
@pytest.mark.parametrize("nt", [1, 2])
def test_rows_sharing_a_key_chain_then_turn_hot(n_variants, nt):
    t, order = _long_rows(n_variants, copies=3)
    rs = fastaxo.RowSet()
    keep = fastaxo.dedupe(t, seen=rs, num_threads=nt).keep.tolist()
    first = {}
    for i, v in enumerate(order):
        first.setdefault(v, i)
    assert keep == sorted(first.values())
    assert len(rs) == n_variants
    assert rs.stats["compares"] > 0  # the chain was walked by comparison
    assert (rs.stats["hot_keys"] >= 1) == (n_variants > 16)
    # and a second call finds them all through the chain / the digest table
    again = fastaxo.dedupe(t.slice(0, 50), seen=rs, num_threads=nt)
    assert again.keep.tolist() == [] and len(rs) == n_variants


def test_train_then_eval_across_sources_layouts_and_types():
    train = pa.table({"ids": pa.array([[1, 2], [3] * 40, [1, 2], []], pa.list_(pa.int32())),
                      "s": ["a", "b" * 70, "a", None]})
    # the same values as large_list / large_string / dictionary, chunked: one encoding
    evals = pa.table({"ids": pa.chunked_array([pa.array([[3] * 40, [4]], pa.large_list(pa.int32())),
                                               pa.array([[4], [1, 2], []], pa.large_list(pa.int32()))]),
                      "s": pa.array(["b" * 70, "z", "z", "a", None]).dictionary_encode()})
    rs = fastaxo.RowSet()
    r1 = fastaxo.dedupe(train, seen=rs)
    r2 = fastaxo.dedupe(evals, seen=rs)
    assert r1.keep.tolist() == [0, 1, 3]
    assert r2.keep.tolist() == [1]
    assert len(rs) == 4 and rs.stats["sources"] == 2


def test_hf_dataset_with_and_without_indices_mapping():
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(3)
    rows = [rng.integers(0, 50, rng.integers(0, 40)).tolist() for _ in range(300)]
    rows += [rows[i] for i in rng.integers(0, 300, 100)]
    ds = datasets.Dataset.from_dict({"input_ids": rows, "n": [len(r) for r in rows]})
    for d in (ds, ds.shuffle(seed=1), ds.shuffle(seed=2).select(range(0, 400, 3))):
        got = fastaxo.dedupe(d, seen=fastaxo.RowSet()).keep.tolist()
        assert got == fastaxo.dedupe(d).keep.tolist()
        assert got == reference_keep(_reference.row_messages(d.with_format("arrow")[:]))


@pytest.mark.parametrize("nt", [1, 2])
def test_many_blocks_with_and_without_a_row_map(nt):
    """More rows than one insert block (32,768): duplicates within a block, across blocks and
    across calls; the same rows through a datasets-style row map (a shuffled take order)."""
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(11)
    n = 80_000
    base = [rng.integers(0, 30, rng.integers(0, 12)).tolist() for _ in range(n)]  # many equal by chance
    t = pa.table({"input_ids": pa.array(base, pa.list_(pa.int32())), "n": [len(r) for r in base]})
    msgs = _reference.row_messages(t)
    rs = fastaxo.RowSet()
    got = fastaxo.dedupe(t, seen=rs, num_threads=nt).keep.tolist()
    want = reference_keep(msgs)
    assert got == want and 0 < n - len(want) and len(want) < n
    again = fastaxo.dedupe(t.slice(n - 40_000), seen=rs, num_threads=nt)
    assert again.keep.tolist() == []  # every row was seen in the first call
    ds = datasets.Dataset(datasets.table.InMemoryTable(t)).shuffle(seed=4)
    order = ds._indices.column(0).to_numpy()
    assert fastaxo.dedupe(ds, seen=fastaxo.RowSet(), num_threads=nt).keep.tolist() == \
        reference_keep([msgs[i] for i in order])


def test_huge_rows_outgrow_the_scratch():
    # 20,000 short strings in one row: more segments than the per-thread scratch holds
    big = ["x" * (i % 7) for i in range(20_000)]
    t = pa.table({"l": pa.array([big, big[:-1] + ["y"], big, [], big[:-1] + ["y"]], pa.list_(pa.string()))})
    assert fastaxo.dedupe(t, seen=fastaxo.RowSet()).keep.tolist() == [0, 1, 3]


def test_empty_inputs_and_empty_rows():
    rs = fastaxo.RowSet()
    empty = pa.table({"a": pa.array([], pa.list_(pa.int64()))})
    res = fastaxo.dedupe(empty, seen=rs)
    assert res.keep.tolist() == [] and len(rs) == 0
    t = pa.table({"a": pa.array([[], None, [], None, [0]], pa.list_(pa.int64()))})
    assert fastaxo.dedupe(t, seen=rs).keep.tolist() == [0, 1, 4]


def test_errors_name_what_came():
    rs = fastaxo.RowSet()
    rs.add(pa.table({"a": [1, 2]}))
    with pytest.raises(InvalidInputError, match="encoded as"):
        rs.add(pa.table({"a": ["x"]}))
    with pytest.raises(InvalidTypeError, match="RowSet takes a pyarrow Table"):
        fastaxo.RowSet().add([b"a", b"b"])
    with pytest.raises(InvalidTypeError, match="union"):
        u = pa.UnionArray.from_sparse(pa.array([0, 1], pa.int8()), [pa.array([1, 2]), pa.array(["a", "b"])])
        fastaxo.RowSet().add(pa.table({"u": u}))
    with pytest.raises(InvalidInputError, match="columns"):
        fastaxo.RowSet().add(pa.array([1, 2]), columns=["a"])


def test_threads_sharing_one_rowset():
    rng = np.random.default_rng(5)
    rows = [rng.integers(0, 4, 30).tolist() for _ in range(400)]
    t = pa.table({"ids": pa.array(rows, pa.list_(pa.int64()))})
    rs = fastaxo.RowSet()
    results = []

    def work(part):
        results.append(int(rs.add(t.slice(part * 100, 100), num_threads=2).sum()))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    distinct = len({tuple(r) for r in rows})
    assert sum(results) == distinct == len(rs)


def test_pure_python_fallback_agrees():
    t, order = _long_rows(20, copies=2)
    fallback = fastaxo.RowSet()
    fallback._core = None  # the path taken when the extension is missing
    assert fallback.add(t).tolist() == fastaxo.RowSet().add(t).tolist()


def test_descriptors_from_the_arrow_c_stream():
    """RowSet describes tables of fixed-width, bool, null, list, fixed-size list and struct
    columns from their Arrow C stream (no Python object per chunk); other types go through
    column_spec. Both give the reference's answer, including sliced structs (the C interface
    exports a struct's children unsliced) and nested lists of structs."""
    ext = fastaxo._core.backend.ext
    if ext is None:
        pytest.skip("the compiled extension is not loaded (FASTAXO_PURE_PYTHON)")
    rng = np.random.default_rng(5)
    n = 400
    base = [rng.integers(0, 3, rng.integers(0, 4)).tolist() for _ in range(n)]
    st_ = pa.StructArray.from_arrays([pa.array(rng.integers(0, 3, n)), pa.array(rng.integers(0, 2, n) == 1)],
                                     names=["a", "b"])
    cols = {
        "ids": pa.array(base, pa.list_(pa.int32())),
        "big": pa.array(base, pa.large_list(pa.int16())),
        "n": pa.array(rng.integers(0, 3, n), pa.uint8()),
        "f": pa.array(rng.integers(0, 2, n).astype(np.float32)),
        "flag": pa.array(rng.integers(0, 2, n) == 1),
        "none": pa.nulls(n),
        "fixed": pa.FixedSizeListArray.from_arrays(pa.array(rng.integers(0, 2, 2 * n), pa.int64()), 2),
        "st": st_,
        "lst": pa.ListArray.from_arrays(pa.array(np.arange(0, n + 1) // 2, pa.int32()), st_),
        "opt": pa.array([None if i % 5 == 0 else i % 3 for i in range(n)], pa.int64()),
    }
    full = with_duplicates(pa.table(cols), rng.integers(0, n, 150).tolist())
    tables = [full, full.slice(37, 450), pa.Table.from_batches(full.slice(11).to_batches(max_chunksize=50))]
    for t in tables:
        assert ext.TabDesc.from_arrow(t, [t]) is not None
        want = reference_keep(_reference.row_messages(t))
        assert 0 < len(want) < t.num_rows
        for nt in (1, 2):
            assert fastaxo.dedupe(t, seen=fastaxo.RowSet(), num_threads=nt).keep.tolist() == want
    for other in (pa.table({"s": ["a", "b"]}), pa.table({"d": pa.array(["x", "y"]).dictionary_encode()}),
                  pa.table({"m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))})):
        assert ext.TabDesc.from_arrow(other, [other]) is None
        assert fastaxo.dedupe(other, seen=fastaxo.RowSet()).keep.tolist() == \
            reference_keep(_reference.row_messages(other))
