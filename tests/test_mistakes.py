"""Common mistakes get an error that names the fix (issue 20): a DatasetDict (pick a split), a
pandas DataFrame (pyarrow.Table.from_pandas), a torch tensor (.numpy()), a path string (read
the file first), for every kernel that takes data."""

from __future__ import annotations

import numpy as np
import pytest

import fastaxo
from fastaxo.errors import CapacityError, InvalidInputError, InvalidTypeError

KERNELS = {
    "hash_rows": lambda x: fastaxo.hash_rows(x),
    "dedupe": lambda x: fastaxo.dedupe(x),
    "pack": lambda x: fastaxo.pack(x, 8),
    "pad": lambda x: fastaxo.pad(x),
    "pack_bins": lambda x: fastaxo.pack_bins(x, 8),
}


def _datasetdict():
    datasets = pytest.importorskip("datasets")
    return datasets.DatasetDict({"train": datasets.Dataset.from_dict({"input_ids": [[1, 2]]})})


def _dataframe():
    pd = pytest.importorskip("pandas")
    return pd.DataFrame({"input_ids": [[1, 2], [3]]})


def _tensor():
    torch = pytest.importorskip("torch")
    return torch.tensor([[1, 2], [3, 4]])


MISTAKES = {
    "DatasetDict": (_datasetdict, r"DatasetDict of splits \['train'\]: pick one, e\.g\. "
                                  r"data\['train'\]"),
    "DataFrame": (_dataframe, r"pandas DataFrame: convert it, e\.g\. pyarrow\.Table\.from_pandas"),
    "path": (lambda: "train.parquet", r"a path or a string: read the file first"),
}


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_mistake_names_the_fix(kernel, mistake):
    make, fix = MISTAKES[mistake]
    with pytest.raises(InvalidTypeError, match=fix):
        KERNELS[kernel](make())


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_torch_tensor_names_the_fix(kernel):
    # torch is the main CI leg's (the minimum-dependencies leg deselects this test)
    with pytest.raises(InvalidTypeError, match=r"torch\.Tensor: pass tensor\.numpy\(\)"):
        KERNELS[kernel](_tensor())


def test_pathlike_and_right_inputs_unchanged(tmp_path):
    with pytest.raises(InvalidTypeError, match="read the file first"):
        fastaxo.hash_rows(tmp_path / "x.parquet")
    assert fastaxo.hash_rows(["a"]).shape == (1, 32)  # a list of str is data, not a path


# ------------------------------------------------------------------ integer arguments (issue 27)
# Every integer argument of the public kernels passes one checker (fastaxo/_core/checks.py):
# huge values (past what the kernels' int64 holds), negative, bool, float and NumPy integers.
# pack_bins(max_length=2**63) used to end in a bare OverflowError from the C conversion.
L = np.array([3, 5, 7])
ROWS = [np.array([1, 2]), np.array([3])]  # a list of NumPy rows: pad's collator fast path
BIG, HUGE = 2**63, 2**64
OUT_OF_INT64 = r"is 9,223,372,036,854,775,808; it must be between 1 and 9,223,372,036,854,775,807"
OUT_OF_ID = r"is 9,223,372,036,854,775,808; it must be between -9,223,372,036,854,775,808 and 9,223,372,036,854,775,807"
INT_CASES = [  # (case, call, error, message)
    ("pack_bins max_length 2**63", lambda: fastaxo.pack_bins(L, BIG), InvalidInputError, "max_length " + OUT_OF_INT64),
    ("pack_bins max_length 2**63 ffd", lambda: fastaxo.pack_bins(L, BIG, strategy="ffd"), InvalidInputError, "max_length " + OUT_OF_INT64),
    ("pack_bins max_length 2**63 ff", lambda: fastaxo.pack_bins(L, BIG, strategy="ff"), InvalidInputError, "max_length " + OUT_OF_INT64),
    ("pack_bins max_length uint64", lambda: fastaxo.pack_bins(L, np.uint64(BIG), strategy="ffd"), InvalidInputError, "max_length " + OUT_OF_INT64),
    ("pack_bins max_length 2**64", lambda: fastaxo.pack_bins(L, HUGE, strategy="ffd"), InvalidInputError, r"max_length is 18,446,744,073,709,551,616; it must be between 1 and"),
    ("pack_bins max_length -1", lambda: fastaxo.pack_bins(L, -1), InvalidInputError, r"max_length must be >= 1, got -1"),
    ("pack_bins max_length bool", lambda: fastaxo.pack_bins(L, True), InvalidTypeError, r"max_length must be a positive int, got bool True"),
    ("pack_bins max_length float", lambda: fastaxo.pack_bins(L, 8.0), InvalidTypeError, r"max_length must be a positive int, got float 8.0"),
    ("pack_bins max_rows_per_bin 2**63", lambda: fastaxo.pack_bins(L, 8, max_rows_per_bin=BIG), InvalidInputError, "max_rows_per_bin " + OUT_OF_INT64),
    ("pack_bins group_size 2**63", lambda: fastaxo.pack_bins(L, 8, group_size=BIG), InvalidInputError, "group_size " + OUT_OF_INT64),
    ("pack_bins ff order group_size 2**63", lambda: fastaxo.pack_bins(L, 8, strategy="ff", order=[0, 2], group_size=BIG), InvalidInputError, "group_size " + OUT_OF_INT64),
    ("pack_bins num_threads 2**63", lambda: fastaxo.pack_bins(L, 8, num_threads=BIG), InvalidInputError, r"num_threads is 9,223,372,036,854,775,808; fastaxo runs at most"),
    ("pack_bins num_threads float", lambda: fastaxo.pack_bins(L, 8, num_threads=2.0), InvalidTypeError, r"num_threads must be a positive int or None, got float"),
    ("pack max_length 2**63", lambda: fastaxo.pack([[1, 2]], BIG, strategy="ffd"), InvalidInputError, "max_length " + OUT_OF_INT64),
    ("pack pad_to_multiple_of 2**63", lambda: fastaxo.pack([[1, 2]], 8, pad_to_multiple_of=BIG), InvalidInputError, "pad_to_multiple_of " + OUT_OF_INT64),
    ("pack pad_to_multiple_of 2**62", lambda: fastaxo.pack([[1, 2]], 8, pad_to_multiple_of=2**62), CapacityError, r"the packed output \(4,611,686,018,427,387,904 tokens per column"),
    ("pack pad_id 2**63", lambda: fastaxo.pack([[1, 2]], 8, pad_id=BIG), InvalidInputError, "pad_id " + OUT_OF_ID),
    ("pack pad_id below int64", lambda: fastaxo.pack([[1, 2]], 8, pad_id=-BIG - 1), InvalidInputError, r"pad_id is -9,223,372,036,854,775,809; it must be between"),
    ("pack pad_id bool", lambda: fastaxo.pack([[1, 2]], 8, pad_id=True), InvalidTypeError, r"pad_id must be an int, got bool True"),
    ("pack pad_id float", lambda: fastaxo.pack([[1, 2]], 8, pad_id=0.0), InvalidTypeError, r"pad_id must be an int, got float 0.0"),
    ("pack pad_id int32 output", lambda: fastaxo.pack([[1, 2]], 8, pad_id=2**31, dtype=np.int32), InvalidInputError, r"pad_id is 2147483648; it does not fit the output dtype int32"),
    ("pack label_pad_id 2**63", lambda: fastaxo.pack([[1, 2]], 8, labels=[[1, 2]], label_pad_id=BIG), InvalidInputError, "label_pad_id " + OUT_OF_ID),
    ("pack max_rows_per_bin 2**64", lambda: fastaxo.pack([[1, 2]], 8, max_rows_per_bin=HUGE), InvalidInputError, r"max_rows_per_bin is 18,446,744,073,709,551,616"),
    ("pack pad_values 2**63", lambda: fastaxo.pack([[1, 2]], 8, columns={"w": [[1, 2]]}, pad_values={"w": BIG}), InvalidInputError, r"pad_values\['w'\] " + OUT_OF_ID),
    ("pack pad_values int8 column", lambda: fastaxo.pack([[1, 2]], 8, columns={"w": [np.array([1, 2], np.int8)]}, pad_values={"w": 300}), InvalidInputError, r"pad_values\['w'\] is 300; it must be between -128 and 127"),
    ("pack pad_values bool", lambda: fastaxo.pack([[1, 2]], 8, columns={"w": [[1, 2]]}, pad_values={"w": True}), InvalidTypeError, r"pad_values\['w'\] must be an int, got bool"),
    ("pack pad_values float column huge int", lambda: fastaxo.pack([[1, 2]], 8, columns={"w": [np.array([0.5, 1.0], np.float32)]}, pad_values={"w": 10**400}), InvalidInputError, r"pad_values\['w'\] is 1000.*; a float32 column holds at most"),
    ("pack pad_values str", lambda: fastaxo.pack([[1, 2]], 8, columns={"w": [np.array([0.5, 1.0])]}, pad_values={"w": "x"}), InvalidTypeError, r"pad_values\['w'\] must be a number, got str"),
    ("pack pad_values unknown column", lambda: fastaxo.pack([[1, 2]], 8, pad_values={"input_ids": -1}), InvalidInputError, r"pad_values: 'input_ids' is not a column packed through columns="),
    ("iter_pack chunk_bins 2**63", lambda: fastaxo.iter_pack([[1, 2]], 8, chunk_bins=BIG), InvalidInputError, "chunk_bins " + OUT_OF_INT64),
    ("iter_pack chunk_bins 0", lambda: fastaxo.iter_pack([[1, 2]], 8, chunk_bins=0), InvalidInputError, r"chunk_bins must be >= 1, got 0"),
    ("iter_pack chunk_bins bool", lambda: fastaxo.iter_pack([[1, 2]], 8, chunk_bins=True), InvalidTypeError, r"chunk_bins must be a positive int, got bool"),
    ("pad max_length 2**63", lambda: fastaxo.pad([[1, 2]], max_length=BIG), InvalidInputError, "max_length " + OUT_OF_INT64),
    ("pad pad_to_multiple_of 2**63", lambda: fastaxo.pad([[1, 2]], pad_to_multiple_of=BIG), InvalidInputError, "pad_to_multiple_of " + OUT_OF_INT64),
    ("pad rows pad_to_multiple_of 2**63", lambda: fastaxo.pad(ROWS, pad_to_multiple_of=BIG), InvalidInputError, "pad_to_multiple_of " + OUT_OF_INT64),
    ("pad rows pad_to_multiple_of 2**47", lambda: fastaxo.pad(ROWS, pad_to_multiple_of=2**47), CapacityError, r"the padded output \(2 rows x at least 140,737,488,355,328 wide"),
    ("pad rows pad_to_multiple_of bool", lambda: fastaxo.pad(ROWS, pad_to_multiple_of=True), InvalidTypeError, r"pad_to_multiple_of must be a positive int or None, got bool"),
    ("pad rows pad_id 2**63", lambda: fastaxo.pad(ROWS, pad_id=BIG), InvalidInputError, "pad_id " + OUT_OF_ID),
    ("pad rows pad_id float", lambda: fastaxo.pad(ROWS, pad_id=1.5), InvalidTypeError, r"pad_id must be an int, got float 1.5"),
    ("pad label_pad_id below int64", lambda: fastaxo.pad([[1, 2]], labels=[[1, 2]], label_pad_id=-BIG - 1), InvalidInputError, r"label_pad_id is -9,223,372,036,854,775,809"),
    ("pad position_pad_id 2**63", lambda: fastaxo.pad([[1, 2]], position_ids=True, position_pad_id=BIG), InvalidInputError, "position_pad_id " + OUT_OF_ID),
    ("pad num_threads 0", lambda: fastaxo.pad([[1, 2]], num_threads=0), InvalidInputError, r"num_threads must be >= 1"),
    ("pad_batches max_length 2**63", lambda: fastaxo.pad_batches([[1, 2]], [0, 1], max_length=BIG), InvalidInputError, "max_length " + OUT_OF_INT64),
    ("pad_batches pad_id 2**64", lambda: fastaxo.pad_batches([[1, 2]], [0, 1], pad_id=HUGE), InvalidInputError, r"pad_id is 18,446,744,073,709,551,616; it must be between"),
    ("hash_rows num_threads 2**63", lambda: fastaxo.hash_rows(["a"], num_threads=BIG), InvalidInputError, r"num_threads is 9,223,372,036,854,775,808; fastaxo runs at most"),
    ("dedupe num_threads bool", lambda: fastaxo.dedupe(["a"], num_threads=True), InvalidTypeError, r"num_threads must be a positive int or None, got bool"),
    ("dedupe num_threads numpy -1", lambda: fastaxo.dedupe(["a"], num_threads=np.int64(-1)), InvalidInputError, r"num_threads must be >= 1"),
    ("iter_batches batch_rows 2**63", lambda: fastaxo.iter_batches("x.parquet", batch_rows=BIG), InvalidInputError, "batch_rows " + OUT_OF_INT64),
    ("iter_batches prefetch_bytes float", lambda: fastaxo.iter_batches("x.parquet", prefetch_bytes=1e9), InvalidTypeError, r"prefetch_bytes must be an int, got float"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in INT_CASES], ids=[c[0] for c in INT_CASES])
def test_an_integer_argument_out_of_range_is_one_clear_error(call, error, message):
    with pytest.raises(error, match=message) as e:
        call()
    assert "\n" not in str(e.value)


def test_numpy_integers_in_range_are_taken():
    assert len(fastaxo.pack_bins(L, np.int32(8), max_rows_per_bin=np.uint64(2), group_size=np.int8(2))) == 2
    assert fastaxo.pad(ROWS, pad_to_multiple_of=np.int64(4), pad_id=np.int16(-1))["input_ids"].tolist() == [[1, 2, -1, -1], [3, -1, -1, -1]]
    assert fastaxo.pack([[1, 2]], np.uint16(4), columns={"w": [[5, 6]]}, pad_values={"w": np.int64(-7)})["w"].tolist() == [[5, 6, -7, -7]]
