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


def test_a_tokenizer_object_gives_its_directorys_file(tmp_path):
    """prepare() takes the tokenizer as an object: a tokenizers.Tokenizer or a transformers
    fast tokenizer gives the file its directory gives (text, and chat with the transformers
    one), the caller's object left as it was; the provenance has its digest. Of another type,
    it is refused naming what came (on Ray: test_ray)."""
    import json

    import chat_data
    import tokenizers
    import transformers

    from fastaxo.errors import InvalidTypeError

    d = str(chat_data.qwen3_dir())
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps({"text": f"document {i} " * (i % 9 + 1)}) + "\n"
                           for i in range(300)))
    fastaxo.prepare(str(src), str(tmp_path / "dir.parquet"), 64, tokenizer=d, progress=False)
    want = pq.read_table(tmp_path / "dir.parquet")
    hf = tokenizers.Tokenizer.from_file(f"{d}/tokenizer.json")
    hf.enable_truncation(8)  # the caller's settings: prepare works on a copy without them
    auto = transformers.AutoTokenizer.from_pretrained(d)
    for obj in (hf, auto):
        out = tmp_path / f"{type(obj).__name__}.parquet"
        rep = fastaxo.prepare(str(src), str(out), 64, tokenizer=obj, progress=False)
        assert pq.read_table(out).equals(want), type(obj).__name__
        assert rep.provenance["tokenizer"]["sha256"] and rep.tokenizer.endswith("object>")
    assert hf.truncation is not None and hf.truncation["max_length"] == 8
    convs = chat_data.conversations(seed=3, n=10, turns=(1, 4), hi=30)
    pq.write_table(pa.table({"messages": convs}), tmp_path / "chat.parquet")
    fastaxo.prepare(str(tmp_path / "chat.parquet"), str(tmp_path / "c1.parquet"), 2048,
                    tokenizer=d, progress=False)
    rep = fastaxo.prepare(str(tmp_path / "chat.parquet"), str(tmp_path / "c2.parquet"), 2048,
                          tokenizer=auto, progress=False)
    assert pq.read_table(tmp_path / "c2.parquet").equals(pq.read_table(tmp_path / "c1.parquet"))
    assert rep.provenance["tokenizer"]["chat_template_sha256"]
    with pytest.raises(InvalidTypeError, match="tokenizer: expected a tokenizer directory .* got int"):
        fastaxo.prepare(str(src), str(tmp_path / "x.parquet"), 64, tokenizer=7, progress=False)
