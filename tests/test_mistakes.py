"""Common mistakes get an error that names the fix (issue 20): a DatasetDict (pick a split), a
pandas DataFrame (pyarrow.Table.from_pandas), a torch tensor (.numpy()), a path string (read
the file first), for every kernel that takes data."""

from __future__ import annotations

import pytest

import fastaxo
from fastaxo.errors import InvalidTypeError

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
