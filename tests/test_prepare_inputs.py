"""prepare() on data a user holds (issue 30): a pyarrow Table, RecordBatch or
RecordBatchReader, a datasets.Dataset (also one with an indices mapping: shuffled, selected)
or an IterableDataset gives the file that the same rows give from Parquet."""

from __future__ import annotations

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastaxo
from fastaxo.errors import SequenceTooLongError

I32 = pa.list_(pa.int32())


def _table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    ids = [rng.integers(0, 1000, int(rng.integers(1, 60))).tolist() for _ in range(n)]
    ids += ids[:300]  # duplicates, across batches
    labs = [[-100] + r[1:] for r in ids]
    return pa.table({"input_ids": pa.array(ids, I32), "labels": pa.array(labs, I32),
                     "source": pa.array([f"doc{i}" for i in range(len(ids))])})


def _from_parquet(t, tmp_path, name):
    pq.write_table(t, tmp_path / f"{name}.parquet", row_group_size=500)
    rep = fastaxo.prepare(str(tmp_path / f"{name}.parquet"), str(tmp_path / f"{name}-ref.parquet"),
                          128, batch_rows=700, pack_window=1000, progress=False)
    return rep, pq.read_table(tmp_path / f"{name}-ref.parquet")


@pytest.mark.parametrize("kind", ["table", "batch", "reader", "dataset", "dataset_selected",
                                  "iterable"])
def test_data_in_memory_packs_as_its_parquet_file(tmp_path, kind):
    t = _table()
    if kind == "dataset_selected":  # an indices mapping: the rows are read in its order
        order = np.random.default_rng(1).permutation(t.num_rows)[:2500]
        src = datasets.Dataset(t).select(order)
        t = t.take(pa.array(order))
    elif kind == "table":
        src = t
    elif kind == "batch":
        src = t.combine_chunks().to_batches()[0]
    elif kind == "reader":
        src = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=333))
    elif kind == "dataset":
        src = datasets.Dataset(t)
    else:
        src = datasets.Dataset(t).to_iterable_dataset(num_shards=3)
    want_rep, want = _from_parquet(t, tmp_path, "ref")
    rep = fastaxo.prepare(src, str(tmp_path / "out.parquet"), 128, batch_rows=700,
                          pack_window=1000, progress=False)
    assert pq.read_table(tmp_path / "out.parquet").equals(want)
    for k in ("rows_in", "tokens_in", "duplicates", "bins", "tokens_out"):
        assert getattr(rep, k) == getattr(want_rep, k), k
    assert rep.provenance["inputs"][0]["name"].split(".")[0] in ("pyarrow", "datasets")


def test_errors_name_the_object_and_row(tmp_path):
    t = _table(200)
    ids = t.column("input_ids").to_pylist()
    ids[150] = list(range(300))
    t = t.set_column(0, "input_ids", pa.array(ids, I32)).drop_columns(["labels"])
    with pytest.raises(SequenceTooLongError, match=r"^pyarrow\.Table row 150 \(0-based\): "
                       r"input_ids has 300 tokens"):
        fastaxo.prepare(t, str(tmp_path / "o.parquet"), 128, batch_rows=64, progress=False)
    assert not (tmp_path / "o.parquet").exists()
