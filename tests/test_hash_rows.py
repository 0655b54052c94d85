"""fastaxo.hash_rows against the plain hashlib reference, on every input kind."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import binary_arrays, tables, token_list_arrays

import fastaxo
from fastaxo._reference import hashing as _reference
from fastaxo.errors import (
    ColumnNotFoundError,
    FastaxoError,
    InvalidInputError,
    InvalidTypeError,
    NullValueError,
)


def H(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def as_bytes(d: np.ndarray) -> list[bytes]:
    assert d.dtype == np.uint8 and d.ndim == 2 and d.shape[1] == 32
    return [bytes(r) for r in d]


# ----------------------------------------------------------------------------- arrays
@given(binary_arrays())
def test_binary_arrays_equal_hashlib_of_value_bytes(sha_path, arr):
    expected = [H(v.encode() if isinstance(v, str) else v) for v in arr.to_pylist()]
    for nt in (1, 2):
        assert as_bytes(fastaxo.hash_rows(arr, num_threads=nt)) == expected


@given(token_list_arrays())
def test_token_rows_equal_hashlib_of_little_endian_values(sha_path, arr):
    dtype = np.dtype(arr.type.value_type.to_pandas_dtype()).newbyteorder("<")
    expected = [H(np.asarray(r, dtype=dtype).tobytes()) for r in arr.to_pylist()]
    got = fastaxo.hash_rows(arr, num_threads=2)
    assert as_bytes(got) == expected
    assert (got == _reference.hash_rows(arr)).all()


def test_sliced_list_array_hashes_the_slice_not_the_parent_buffer():
    arr = pa.array([[1, 2], [3], [4, 5, 6], [7]], pa.list_(pa.int32()))
    sl = arr.slice(1, 2)
    assert len(sl.values) == 7  # the parent buffer is still there (apache/arrow#37733)
    expected = [H(np.array([3], "<i4").tobytes()), H(np.array([4, 5, 6], "<i4").tobytes())]
    assert as_bytes(fastaxo.hash_rows(sl)) == expected


def test_chunked_arrays_hash_chunk_by_chunk_in_order():
    chunks = [["a", "bb"], [], ["ccc"], ["", "d"]]
    arr = pa.chunked_array(chunks, pa.string())
    assert fastaxo.hash_rows(arr, hex=True) == [hashlib.sha256(s.encode()).hexdigest() for c in chunks for s in c]


def test_dictionary_string_array_hashes_like_its_values():
    arr = pa.array(["x", "y", "x", "zz"]).dictionary_encode()
    assert fastaxo.hash_rows(arr, hex=True) == [hashlib.sha256(s.encode()).hexdigest() for s in ["x", "y", "x", "zz"]]


def test_numeric_arrow_array_rows_are_single_values():
    arr = pa.array([1, -2, 3], pa.int16())
    assert as_bytes(fastaxo.hash_rows(arr)) == [H(np.int16(v).tobytes()) for v in (1, -2, 3)]


def test_other_arrow_types_use_the_table_encoding():
    arr = pa.array([{"a": 1}, None])
    assert (fastaxo.hash_rows(arr) == _reference.hash_rows(pa.table({"_": arr}))).all()


# ----------------------------------------------------------------------------- tables
@given(tables())
def test_tables_equal_the_reference_encoding(sha_path, table):
    expected = _reference.hash_rows(table)
    for nt in (1, 2):
        assert (fastaxo.hash_rows(table, num_threads=nt) == expected).all()
    batches = table.to_batches()
    if len(batches) == 1:
        assert (fastaxo.hash_rows(batches[0]) == expected).all()


@given(tables(min_rows=1), st.data())
def test_selected_columns_in_given_order(table, data):
    names = data.draw(st.permutations(table.column_names))[: data.draw(st.integers(1, table.num_columns))]
    assert (fastaxo.hash_rows(table, columns=names) == _reference.hash_rows(table, names)).all()


def test_canonical_encoding_separates_shifted_boundaries():
    t = pa.table({"a": ["ab", "a", "", None], "b": ["c", "bc", None, ""]})
    d = fastaxo.hash_rows(t, hex=True)
    assert len(set(d)) == 4
    # The documented encoding, spelled out for the first row: 0x01 u64(2) "ab" 0x01 u64(1) "c".
    msg = b"\x01" + (2).to_bytes(8, "little") + b"ab" + b"\x01" + (1).to_bytes(8, "little") + b"c"
    assert d[0] == hashlib.sha256(msg).hexdigest()
    # A null differs from an empty string, in either column.
    assert hashlib.sha256(b"\x01" + bytes(8) + b"\x00").hexdigest() == d[2]


def test_equal_rows_hash_equally_whatever_the_layout():
    """Chunking, slicing, large types and dictionary encoding never change a row's digest."""
    rows = {"s": ["u", "vv", None, "u"], "ids": [[1, 2], None, [], [1, 2]]}
    plain = pa.table({"s": pa.array(rows["s"]), "ids": pa.array(rows["ids"], pa.list_(pa.int32()))})
    large = pa.table({"s": pa.array(rows["s"], pa.large_string()).dictionary_encode(),
                      "ids": pa.array(rows["ids"], pa.large_list(pa.int32()))})
    chunked = pa.concat_tables([plain.slice(0, 1), plain.slice(1, 2), plain.slice(3)])
    a = fastaxo.hash_rows(plain)
    assert (a == fastaxo.hash_rows(large)).all() and (a == fastaxo.hash_rows(chunked)).all()
    assert (a[0] == a[3]).all() and len({bytes(r) for r in a}) == 3
    # A list containing a null element differs from one without, even if the value bytes agree.
    t = pa.table({"ids": pa.array([[0, 5], [None, 5]], pa.list_(pa.int32()))})
    d = fastaxo.hash_rows(t)
    assert not (d[0] == d[1]).all()
    assert (d == _reference.hash_rows(t)).all()


def test_table_with_unsigned_dictionary_indices_and_nulls():
    idx = pa.array([2, None, 0, 1, 2], pa.uint8())
    col = pa.DictionaryArray.from_arrays(idx, pa.array(["a", "b", "c"]))
    t = pa.table({"d": col}).slice(1)
    assert (fastaxo.hash_rows(t) == _reference.hash_rows(pa.table({"d": col.dictionary_decode()}).slice(1))).all()


def test_hf_datasets_dataset_input_with_and_without_indices_mapping():
    datasets = pytest.importorskip("datasets")  # installed with the test extras: never skipped in CI
    table = pa.table({"text": ["a", "b", "a", "c"], "ids": [[1], [2], [1], [3]]})
    ds = datasets.Dataset(table)
    assert (fastaxo.hash_rows(ds) == fastaxo.hash_rows(table)).all()
    sub = ds.select([3, 0, 2])  # an indices mapping: rows in this order
    assert (fastaxo.hash_rows(sub, columns=["ids"]) == fastaxo.hash_rows(table.take([3, 0, 2]), columns=["ids"])).all()
    res = fastaxo.dedupe(ds)
    assert res.keep.tolist() == [0, 1, 3]
    assert res.apply(ds)["text"] == ["a", "b", "c"]


# ----------------------------------------------------------------------------- numpy and lists
@pytest.mark.parametrize("dtype", ["<i4", ">i4", "<f8", ">u2", "<i8"])
def test_numpy_2d_rows_any_byte_order_and_strides(dtype):
    rng = np.random.default_rng(0)
    base = rng.integers(0, 1000, (70, 9)).astype(dtype)
    for arr in (base, base[::2], base[:, ::3], np.asfortranarray(base)):
        le = np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("<"))
        assert as_bytes(fastaxo.hash_rows(arr)) == [H(r.tobytes()) for r in le]


def test_numpy_1d_rows_are_values_and_string_arrays_work():
    a = np.arange(5, dtype=np.int64)
    assert as_bytes(fastaxo.hash_rows(a)) == [H(np.int64(v).tobytes()) for v in a]
    s = np.array(["x", "é", ""])
    assert fastaxo.hash_rows(s, hex=True) == [hashlib.sha256(v.encode()).hexdigest() for v in s]


@given(st.lists(st.one_of(st.text(max_size=70), st.binary(max_size=70)), max_size=50))
def test_lists_of_str_and_bytes(rows):
    expected = [hashlib.sha256(r.encode() if isinstance(r, str) else r).hexdigest() for r in rows]
    assert fastaxo.hash_rows(rows, hex=True, num_threads=2) == expected


def test_non_ascii_str_is_utf8_and_the_object_is_not_mutated():
    s = "naïve " * 100
    before = s.__sizeof__()
    assert fastaxo.hash_rows([s], hex=True) == [hashlib.sha256(s.encode()).hexdigest()]
    assert s.__sizeof__() == before  # no UTF-8 cache attached to the caller's string


def test_empty_inputs_give_empty_results():
    for data in ([], pa.array([], pa.string()), pa.table({"a": pa.array([], pa.int32())}),
                 np.zeros((0, 4), np.int32), pa.chunked_array([], pa.large_binary())):
        out = fastaxo.hash_rows(data)
        assert out.shape == (0, 32) and out.dtype == np.uint8
        assert fastaxo.hash_rows(data, hex=True) == []
        res = fastaxo.dedupe(data)
        assert res.keep.tolist() == [] and res.n_duplicates == 0 and len(res.seen) == 0


# ----------------------------------------------------------------------------- threads
def test_results_identical_for_any_thread_count():
    rng = np.random.default_rng(3)
    rows = [rng.bytes(int(n)) for n in rng.integers(0, 3000, 5000)]
    arr = pa.array(rows, pa.binary())
    ref = fastaxo.hash_rows(arr, num_threads=1)
    for nt in (2, 3, 8):
        assert (fastaxo.hash_rows(arr, num_threads=nt) == ref).all()
        assert (fastaxo.hash_rows(rows, num_threads=nt) == ref).all()


def test_concurrent_calls_from_python_threads_release_the_gil_and_agree():
    rng = np.random.default_rng(4)
    arr = pa.array([rng.bytes(int(n)) for n in rng.integers(0, 5000, 4000)], pa.binary())
    ref = fastaxo.hash_rows(arr, num_threads=1)
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(fastaxo.hash_rows(arr, num_threads=2))
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and len(results) == 20
    assert all((r == ref).all() for r in results)


def test_thread_count_resolution(monkeypatch):
    from fastaxo._core.threads import resolve_num_threads

    monkeypatch.delenv("FASTAXO_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3,1")
    assert resolve_num_threads(None) == 3
    monkeypatch.setenv("FASTAXO_NUM_THREADS", "5")
    assert resolve_num_threads(None) == 5 and resolve_num_threads(2) == 2
    assert resolve_num_threads(np.int64(4)) == 4
    monkeypatch.setenv("FASTAXO_NUM_THREADS", "zero")
    with pytest.raises(InvalidInputError, match="FASTAXO_NUM_THREADS"):
        resolve_num_threads(None)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad", [0, -1])
def test_num_threads_must_be_positive(bad):
    with pytest.raises(InvalidInputError, match=r"num_threads must be >= 1.*got " + str(bad)) as e:
        fastaxo.hash_rows(["a"], num_threads=bad)
    assert isinstance(e.value, ValueError) and isinstance(e.value, FastaxoError)


@pytest.mark.parametrize("bad", [1.5, "2", True])
def test_num_threads_must_be_an_int(bad):
    with pytest.raises(InvalidTypeError, match="num_threads must be a positive int") as e:
        fastaxo.hash_rows(["a"], num_threads=bad)
    assert isinstance(e.value, TypeError)


@pytest.mark.parametrize(
    "data, match",
    [
        (42, r"data is builtins.int; expected a pyarrow Array"),
        ({"a": 1}, r"data is builtins.dict"),
        (["ok", 3, "x"], r"data\[1\] is int 3; expected str or bytes"),
        (["ok", None], r"data\[1\] is NoneType None; expected str or bytes"),
        (np.array([{"a": 1}], dtype=object), r"data\[0\] is dict"),
        (np.zeros((2, 2), dtype="datetime64[s]"), r"dtype datetime64\[s\]"),
    ],
)
def test_wrong_types_name_argument_expected_and_given(data, match):
    with pytest.raises(InvalidTypeError, match=match) as e:
        fastaxo.hash_rows(data)
    assert isinstance(e.value, TypeError) and isinstance(e.value, FastaxoError)


def test_nulls_in_raw_arrays_are_a_clear_error():
    with pytest.raises(NullValueError, match=r"data row 1 is null.*Table/RecordBatch") as e:
        fastaxo.hash_rows(pa.array(["a", None]))
    assert isinstance(e.value, ValueError)
    with pytest.raises(NullValueError, match=r"data row 2 is null"):
        fastaxo.hash_rows(pa.array([[1], [2], None], pa.list_(pa.int32())))
    with pytest.raises(NullValueError, match=r"data row 1 has a null token at position 1"):
        fastaxo.hash_rows(pa.array([[1], [2, None]], pa.list_(pa.int32())))
    # In chunked data the message names the row of the data, not of its chunk.
    for arr, row in [(pa.chunked_array([["a", "b"], ["c", None]]), 3),
                     (pa.chunked_array([[[1]], [[2], None]], pa.list_(pa.int32())), 2),
                     (pa.chunked_array([[1, 2], [3, None]], pa.int32()), 3)]:
        with pytest.raises(NullValueError, match=rf"data row {row} is null"):
            fastaxo.hash_rows(arr)
    with pytest.raises(NullValueError, match=r"data row 1 has a null token at position 1"):
        fastaxo.hash_rows(pa.chunked_array([[[1]], [[2, None]]], pa.list_(pa.int32())))
    # ...but a null outside the slice is not in the data.
    arr = pa.array([[None], [1, 2]], pa.list_(pa.int32())).slice(1)
    assert as_bytes(fastaxo.hash_rows(arr)) == [H(np.array([1, 2], "<i4").tobytes())]


def test_column_errors():
    t = pa.table({"a": [1], "b": ["x"]})
    with pytest.raises(ColumnNotFoundError, match=r"columns \['z'\] are not in the data; its columns are \['a', 'b'\]") as e:
        fastaxo.hash_rows(t, columns=["a", "z"])
    assert isinstance(e.value, KeyError)
    with pytest.raises(InvalidInputError, match="at least one column"):
        fastaxo.hash_rows(t, columns=[])
    with pytest.raises(InvalidInputError, match="names a column twice"):
        fastaxo.hash_rows(t, columns=["a", "a"])
    with pytest.raises(InvalidTypeError, match="columns must be a list of column names"):
        fastaxo.hash_rows(t, columns=[1])
    with pytest.raises(InvalidInputError, match="columns applies to tables"):
        fastaxo.hash_rows(["x"], columns=["a"])
    assert (fastaxo.hash_rows(t, columns="b") == fastaxo.hash_rows(t, columns=["b"])).all()


def test_corrupt_offsets_are_an_error_not_a_crash():
    offsets = pa.py_buffer(np.array([0, 5, 2, 6], dtype=np.int32).tobytes())
    data = pa.py_buffer(b"abcdef")
    bad = pa.Array.from_buffers(pa.binary(), 3, [None, offsets, data])
    with pytest.raises(InvalidInputError, match="offsets are corrupt at row 1"):
        fastaxo.hash_rows(bad)
    with pytest.raises(InvalidInputError, match="row 1 has offsets out of order"):
        fastaxo.hash_rows(pa.table({"b": bad}))


def test_a_row_of_several_hundred_megabytes():
    big = np.full(300 * 2**20, 7, dtype=np.uint8)
    arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2, [None, pa.py_buffer(np.array([0, 1, big.size], np.int64)), pa.py_buffer(big)])
    got = fastaxo.hash_rows(arr, num_threads=2)
    assert bytes(got[1]) == H(memoryview(big)[1:])
    assert bytes(got[0]) == H(b"\x07")


def test_table_rows_too_big_for_the_segment_scratch_fall_back_to_streaming():
    """Rows whose encoding overflows the per-thread scratch (64 KiB of headers, 4096 segments),
    mixed with small rows in the same 64-row chunk: flush, retry, stream alone, in order."""
    rng = np.random.default_rng(21)
    many_short = [[f"w{j}" for j in range(int(rng.integers(0, 12_000)))] if i % 7 == 3 else ["a", "bc"]
                  for i in range(150)]
    many_long = [[("x" * 70) + str(j) for j in range(5000)] if i % 11 == 5 else [] for i in range(150)]
    t = pa.table({"s": pa.array(many_short, pa.list_(pa.string())),
                  "l": pa.array(many_long, pa.large_list(pa.string())),
                  "n": pa.array([None if i % 5 == 0 else i for i in range(150)], pa.int64())})
    expected = _reference.hash_rows(t)
    for nt in (1, 2):
        assert (fastaxo.hash_rows(t, num_threads=nt) == expected).all()
    assert (fastaxo.hash_rows(t.slice(3, 100)) == expected[3:103]).all()
