"""fastaxo.dedupe: first occurrence kept, in input order, across calls via Seen."""

from __future__ import annotations

import hashlib
import pickle
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import tables

import fastaxo
from fastaxo._bench.demo import tokenized_table
from fastaxo._reference import hashing as _reference
from fastaxo.errors import InvalidInputError, InvalidTypeError


def reference_keep(rows: list, seen: set | None = None) -> list[int]:
    seen = set() if seen is None else seen
    keep = []
    for i, r in enumerate(rows):
        if r not in seen:
            seen.add(r)
            keep.append(i)
    return keep


@given(st.lists(st.sampled_from(["a", "b", "", "ccc", "dd", "é"]), max_size=60), st.integers(1, 3))
def test_keeps_first_occurrences_in_input_order(rows, nt):
    res = fastaxo.dedupe(rows, num_threads=nt)
    assert res.keep.tolist() == reference_keep(rows)
    assert res.keep.dtype == np.int64
    assert res.n_rows == len(rows) and res.n_duplicates == len(rows) - len(res.keep)
    assert len(res.seen) == len(set(rows))
    assert res.apply(rows) == list(dict.fromkeys(rows))


@given(tables(max_rows=30))
def test_tables_match_the_reference_dedupe(table):
    digests = _reference.hash_rows(table)
    keep, _ = _reference.dedupe_indices(digests)
    res = fastaxo.dedupe(table)
    assert res.keep.tolist() == keep.tolist()
    assert res.apply(table).num_rows == len(keep)


def test_seen_carries_from_train_to_eval():
    train = pa.table({"ids": pa.array([[1, 2], [3], [1, 2]], pa.list_(pa.int32()))})
    evals = pa.table({"ids": pa.array([[3], [4], [4], [1, 2]], pa.list_(pa.int32()))})
    r1 = fastaxo.dedupe(train)
    r2 = fastaxo.dedupe(evals, seen=r1.seen)
    assert r1.keep.tolist() == [0, 1]
    assert r2.keep.tolist() == [1]  # [3] and [1, 2] were in train, the second [4] is a repeat
    assert r2.seen is r1.seen and len(r2.seen) == 3


def test_stream_of_chunks_equals_one_call_and_holds_about_32_bytes_per_row():
    table = tokenized_table(30_000, dup_fraction=0.2, seed=5)
    whole = fastaxo.dedupe(table)
    seen = fastaxo.Seen()
    kept = []
    for start in range(0, table.num_rows, 7_000):
        chunk = table.slice(start, 7_000)
        res = fastaxo.dedupe(chunk, seen=seen)
        kept.extend((res.keep + start).tolist())
    assert kept == whole.keep.tolist()
    assert len(seen) == len(whole.keep) == 24_000
    # 32 bytes per digest, a table of at most ~11 bytes per digest, one 1 MiB chunk of slack.
    assert seen.nbytes <= 43 * len(seen) + 2**20 + 4096
    assert list(fastaxo.iter_dedupe([table.slice(0, 10), table.slice(0, 10)]))[1][1].keep.tolist() == []


def test_large_set_grows_correctly_past_many_chunks():
    rng = np.random.default_rng(9)
    digests = rng.integers(0, 256, (200_000, 32), dtype=np.uint8)
    seen = fastaxo.Seen()
    assert seen.add(digests).all()
    assert not seen.add(digests[::-1]).any()
    assert len(seen) == 200_000
    assert (seen.digests() == digests).all()  # insertion order
    assert seen.contains(digests[:5]).all()
    assert not seen.contains(rng.integers(0, 256, (5, 32), dtype=np.uint8)).any()
    assert bytes(digests[7]) in seen and digests[7].tobytes().hex() in seen


def test_seen_refuses_rows_encoded_differently():
    r = fastaxo.dedupe(pa.table({"ids": pa.array([[1]], pa.list_(pa.int32()))}))
    with pytest.raises(InvalidInputError, match=r"seen holds digests of rows encoded as 'table:v1:list<int32>'.*list<int64>"):
        fastaxo.dedupe(pa.table({"ids": pa.array([[1]], pa.list_(pa.int64()))}), seen=r.seen)
    # Layout-only differences are the same encoding.
    fastaxo.dedupe(pa.table({"ids": pa.array([[1]], pa.large_list(pa.int32()))}), seen=r.seen)
    with pytest.raises(InvalidTypeError, match="seen must be a fastaxo.Seen"):
        fastaxo.dedupe(["a"], seen=set())


def test_seen_pickles_and_copies():
    res = fastaxo.dedupe(["x", "y", "x"])
    s2 = pickle.loads(pickle.dumps(res.seen))
    assert s2.encoding == "bytes" and s2.to_hex() == res.seen.to_hex()
    assert s2.to_hex() == [hashlib.sha256(b"x").hexdigest(), hashlib.sha256(b"y").hexdigest()]
    c = s2.copy()
    fastaxo.dedupe(["z"], seen=c)
    assert len(c) == 3 and len(s2) == 2


def test_seen_is_safe_to_share_between_threads():
    seen = fastaxo.Seen()
    chunks = [[f"row{(k * 37 + i) % 5000}" for i in range(4000)] for k in range(8)]
    kept = []

    def work(chunk):
        kept.append(len(fastaxo.dedupe(chunk, seen=seen).keep))

    ts = [threading.Thread(target=work, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    distinct = len({r for c in chunks for r in c})
    assert distinct == 4259
    assert len(seen) == distinct and sum(kept) == distinct  # each distinct row kept exactly once


def test_digest_argument_errors():
    seen = fastaxo.Seen()
    with pytest.raises(InvalidInputError, match="32 bytes or 64 hex"):
        b"short" in seen
    with pytest.raises(InvalidInputError, match=r"digests must be a uint8 array of shape \(n, 32\)"):
        seen.add(np.zeros((2, 31), np.uint8))


def test_dedupe_of_a_parquet_file_read_back(tmp_path):
    table = tokenized_table(5_000, dup_fraction=0.1, seed=2)
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=1_000)
    back = pq.read_table(tmp_path / "t.parquet")
    assert back.column("input_ids").num_chunks >= 1
    res = fastaxo.dedupe(back)
    assert len(res.keep) == 4_500
    assert res.keep.tolist() == fastaxo.dedupe(table).keep.tolist()


def test_cli_dedupe_streams_parquet_files(tmp_path):
    from fastaxo.__main__ import main

    table = tokenized_table(3_000, dup_fraction=0.1, seed=3)
    pq.write_table(table.slice(0, 2_000), tmp_path / "a.parquet")
    pq.write_table(table.slice(1_000), tmp_path / "b.parquet")  # overlaps a.parquet by 1,000 rows
    assert main(["dedupe", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "-o", str(tmp_path / "o.parquet"),
                 "--batch-rows", "512"]) == 0
    out = pq.read_table(tmp_path / "o.parquet")
    assert out.equals(table.take(fastaxo.dedupe(table).keep))


def test_cli_default_dataset_runs(capsys):
    from fastaxo.__main__ import main

    assert main(["dedupe", "--rows", "20000"]) == 0
    out = capsys.readouterr().out
    assert "kept 18,000 rows, dropped 2,000 duplicates" in out and "digests identical: True" in out
    assert "result: OK" in out


# ------------------------------------------------------------------ apply on another table
# (issue 27) DedupeResult.apply on a table that was not deduped: a longer one silently gave the
# rows at the kept positions of its head (its tail dropped), a shorter one a bare pyarrow,
# NumPy or IndexError. apply takes positions: the same rows in the same order (the input, or
# the whole table when dedupe compared some of its columns), any other length is refused.
def _datasets(rows):
    datasets = pytest.importorskip("datasets")
    return datasets.Dataset.from_dict({"text": rows})


ROWS = ["a", "b", "a", "c", "b", "d"]
RES = fastaxo.dedupe(ROWS)  # keep [0, 1, 3, 5]
APPLY_CASES = [  # (case, data given to apply, error or the rows wanted)
    ("the input", ROWS, ["a", "b", "c", "d"]),
    ("a tuple", tuple(ROWS), ["a", "b", "c", "d"]),
    ("same length, other content: positions", [f"x{i}" for i in range(6)], ["x0", "x1", "x3", "x5"]),
    ("a wider table of the same rows", pa.table({"text": ROWS, "n": list(range(6))}), {"text": ["a", "b", "c", "d"], "n": [0, 1, 3, 5]}),
    ("a NumPy array of the same length", np.arange(6) * 10, [0, 10, 30, 50]),
    ("a longer list", ROWS + ["e", "f"], (InvalidInputError, r"apply: data has 8 rows, but this result is for the 6 rows dedupe was called on")),
    ("a shorter list", ROWS[:4], (InvalidInputError, r"apply: data has 4 rows, but this result is for the 6 rows")),
    ("a longer table", pa.table({"text": ROWS * 2}), (InvalidInputError, r"apply: data has 12 rows")),
    ("a shorter Arrow array", pa.array(ROWS[:2]), (InvalidInputError, r"apply: data has 2 rows")),
    ("a longer NumPy array", np.arange(7), (InvalidInputError, r"apply: data has 7 rows")),
    ("an empty list", [], (InvalidInputError, r"apply: data has 0 rows")),
    ("a 0-d array", np.array(3), (InvalidTypeError, r"apply: data is ndarray; expected the table, array or list")),
    ("a dict", {"text": ROWS}, (InvalidTypeError, r"apply: data is dict; expected the table, array or list")),
    ("a longer Dataset", "dataset+1", (InvalidInputError, r"apply: data has 7 rows")),
]


@pytest.mark.parametrize("data, want", [c[1:] for c in APPLY_CASES], ids=[c[0] for c in APPLY_CASES])
def test_apply_takes_positions_of_the_same_rows_and_refuses_other_lengths(data, want):
    if isinstance(data, str):  # (made here: datasets is imported only when installed)
        data = _datasets(ROWS + ["z"])
    if isinstance(want, tuple):
        with pytest.raises(want[0], match=want[1]):
            RES.apply(data)
        return
    got = RES.apply(data)
    if isinstance(got, pa.Table):
        got = got.to_pydict()
    elif isinstance(got, np.ndarray):
        got = got.tolist()
    assert got == want
