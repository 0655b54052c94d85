"""PackedCollator on a real (tiny, random) transformers Llama: every packed sequence's logits
equal its own unpacked run, for eager and sdpa (4-D mask) and for the flattened varlen layout;
and the leak it exists to prevent is real."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conftest import main_leg_only

import fastaxo
from fastaxo.integrations.transformers import PackedCollator, layout_for

try:
    import torch
    import transformers
    _MISSING = None
except ImportError as exc:  # pragma: no cover
    _MISSING = exc
main_leg_only(_MISSING, "torch and transformers")

VOCAB = 97
ATOL = 1e-4


def tiny_llama(attn: str):
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, use_cache=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.float32)
    model.config._attn_implementation = attn
    return model.eval()


def sequences(seed: int = 0, n: int = 23, hi: int = 40) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, hi, n)
    lens[3] = 64  # a row that fills a bin alone
    return [rng.integers(3, VOCAB, k).astype(np.int64) for k in lens]


def unpacked_logits(model, seqs):
    with torch.no_grad():
        return [model(input_ids=torch.from_numpy(s)[None]).logits[0] for s in seqs]


def packed_logits(model, batch):
    with torch.no_grad():
        return model(**{k: v for k, v in batch.items() if k != "labels"}).logits


def check_rows(packed, batch, logits, want):
    """Every sequence of every packed row against its unpacked run."""
    bins = packed.bins
    seen = 0
    for b in range(len(bins)):
        at = 0
        for e in range(int(bins.offsets[b]), int(bins.offsets[b + 1])):
            row, k = int(bins.indices[e]), int(bins.lengths[e])
            got = logits[b, at:at + k]
            assert torch.allclose(got, want[row], atol=ATOL), (b, row)
            assert batch["position_ids"][b, at:at + k].tolist() == list(range(k))
            at += k
            seen += 1
    assert seen == len(want)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_packed_logits_equal_unpacked_runs(attn):
    seqs = sequences()
    model = tiny_llama(attn)
    want = unpacked_logits(model, seqs)
    packed = fastaxo.pack(seqs, 64)  # default: segment-id mask + position ids, padded rows
    batch = PackedCollator(model=model)(packed)
    assert batch["attention_mask"].shape == (len(packed.bins), 1, 64, 64)
    assert batch["attention_mask"].dtype == (torch.bool if attn == "sdpa" else torch.float32)
    check_rows(packed, batch, packed_logits(model, batch), want)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_the_segment_mask_as_a_2d_mask_leaks(attn):
    """What the collator prevents: pack's rows fed straight to a stock model let the second
    sequence of a bin attend to the first."""
    seqs = sequences()
    model = tiny_llama(attn)
    want = unpacked_logits(model, seqs)
    packed = fastaxo.pack(seqs, 64)
    raw = {k: torch.from_numpy(packed[k]) for k in ("input_ids", "attention_mask",
                                                     "position_ids")}
    with torch.no_grad():
        logits = model(**raw).logits
    bins, bad = packed.bins, 0
    for b in range(len(bins)):
        at = 0
        for e in range(int(bins.offsets[b]), int(bins.offsets[b + 1])):
            row, k = int(bins.indices[e]), int(bins.lengths[e])
            bad += not torch.allclose(logits[b, at:at + k], want[row], atol=ATOL)
            at += k
    assert bad > 0


def test_varlen_matches_transformers_flattening_collator():
    seqs = sequences(1)
    packed = fastaxo.pack(seqs, 64, labels=[s[::-1].copy() for s in seqs])
    got = PackedCollator(attn_implementation="flash_attention_2")(packed)
    order = packed.bins.indices  # the bins' sequences, in packed order
    labels = [seqs[i][::-1].copy() for i in order]
    ref = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=True)(
        [{"input_ids": seqs[i], "labels": lab} for i, lab in zip(order, labels)])
    assert set(got) == set(ref)
    for k, v in ref.items():
        if isinstance(v, torch.Tensor):
            assert got[k].dtype == v.dtype, k
            assert torch.equal(got[k], v), k
        else:
            assert got[k] == v, k


def test_varlen_rows_give_unpacked_logits():
    """The flattened layout on sdpa with no mask: transformers reads the sequences from the
    position ids (what flash attention's varlen path gets from cu_seq_lens)."""
    seqs = sequences(2)
    model = tiny_llama("sdpa")
    want = unpacked_logits(model, seqs)
    packed = fastaxo.pack(seqs, 64)
    batch = PackedCollator(attn_implementation="flash_attention_2", pad_to_multiple_of=64)(packed)
    assert batch["input_ids"].shape[1] % 64 == 0
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits[0]
    cu = batch["cu_seq_lens_q"].tolist()
    for j, row in enumerate(packed.bins.indices):
        assert torch.allclose(logits[cu[j]:cu[j + 1]], want[int(row)], atol=ATOL)


def test_labels_padding_and_separators():
    seqs = [np.array([5, 6, 7]), np.array([8, 9]), np.array([10, 11, 12, 13])]
    labels = [np.array([-100, 6, 7]), np.array([8, 9]), np.array([10, -100, 12, 13])]
    packed = fastaxo.pack(seqs, 8, labels=labels, strategy="nf")
    out = PackedCollator(attn_implementation="sdpa", pad_to_multiple_of=4,
                         return_tensors="np")(packed)
    assert out["input_ids"].tolist() == [[5, 6, 7, 8, 9, 0, 0, 0], [10, 11, 12, 13, 0, 0, 0, 0]]
    assert out["labels"].tolist() == [[-100, 6, 7, -100, 9, -100, -100, -100],
                                      [-100, -100, 12, 13, -100, -100, -100, -100]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2], [0, 1, 2, 3, 0, 1, 2, 3]]
    m = out["attention_mask"][0, 0]
    assert m[4].tolist() == [False, False, False, True, True, False, False, False]
    assert m[7].tolist() == [False] * 5 + [True] * 3  # padding sees only padding: no NaN rows
    keep = PackedCollator(attn_implementation="eager", separator_id=None,
                          return_tensors="np")(packed)
    assert keep["labels"][0].tolist() == [-100, 6, 7, 8, 9, -100, -100, -100]
    assert keep["attention_mask"].dtype == np.float32
    assert keep["attention_mask"][0, 0, 4].tolist()[3:5] == [0.0, 0.0]


def test_rows_from_prepare_parquet_via_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    seqs = sequences(3, n=60)
    src = tmp_path / "in.parquet"
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"input_ids": pa.array([s.tolist() for s in seqs])}), src)
    out = tmp_path / "packed.parquet"
    fastaxo.prepare(str(src), str(out), 64, dedupe=False)
    ds = datasets.Dataset.from_parquet(str(out))
    model = tiny_llama("sdpa")
    want = {tuple(s.tolist()): w for s, w in zip(seqs, unpacked_logits(model, seqs))}
    batch = PackedCollator(model=model)([ds[i] for i in range(len(ds))])
    logits = packed_logits(model, batch)
    n = 0
    for b in range(len(ds)):
        pos = batch["position_ids"][b].tolist()
        starts = [i for i, p in enumerate(pos) if p == 0] + [len(ds[b]["input_ids"])]
        for a, z in zip(starts, starts[1:]):
            if a >= len(ds[b]["input_ids"]):
                break
            key = tuple(ds[b]["input_ids"][a:z])
            assert torch.allclose(logits[b, a:z], want[key], atol=ATOL)
            n += 1
    assert n == len(seqs)


def test_trl_seq_lengths_rows():
    trl_utils = pytest.importorskip("trl.data_utils")
    datasets = pytest.importorskip("datasets")
    seqs = sequences(4, n=30)
    ds = datasets.Dataset.from_dict({"input_ids": [s.tolist() for s in seqs]})
    packed = trl_utils.pack_dataset(ds, 64, strategy="bfd")
    assert "seq_lengths" in packed.column_names
    model = tiny_llama("eager")
    want = {tuple(s.tolist()): w for s, w in zip(seqs, unpacked_logits(model, seqs))}
    rows = [packed[i] for i in range(len(packed))]
    batch = PackedCollator(model=model)(rows)
    logits = packed_logits(model, batch)
    n = 0
    for b, row in enumerate(rows):
        at = 0
        for k in row["seq_lengths"]:
            assert torch.allclose(logits[b, at:at + k],
                                  want[tuple(row["input_ids"][at:at + k])], atol=ATOL)
            at, n = at + k, n + 1
    assert n == len(seqs)


def test_errors_name_the_argument():
    with pytest.raises(fastaxo.InvalidInputError, match="model= or attn_implementation="):
        PackedCollator()
    with pytest.raises(fastaxo.InvalidInputError, match="'flex_attention'.*sdpa"):
        PackedCollator(attn_implementation="flex_attention")
    assert layout_for("paged|flash_attention_2") == "varlen"
    c = PackedCollator(attn_implementation="sdpa")
    with pytest.raises(fastaxo.InvalidInputError, match=r"features\[1\]\['labels'\] has 2"):
        c([{"input_ids": [1, 2, 3], "labels": [1, 2, 3]},
           {"input_ids": [1, 2, 3], "labels": [1, 2]}])
    with pytest.raises(fastaxo.InvalidInputError,
                       match=r"features\[0\] has no 'labels'; features\[1\] has it"):
        c([{"input_ids": [1, 2, 3]}, {"input_ids": [1, 2, 3], "labels": [1, 2, 3]}])
    with pytest.raises(fastaxo.InvalidInputError, match=r"features\[1\]\['position_ids'\] must"):
        c([{"input_ids": [1], "position_ids": [0]}, {"input_ids": [1], "position_ids": [0.5]}])
    with pytest.raises(fastaxo.InvalidInputError, match=r"features\[0\] has no 'input_ids'"):
        c([{"labels": [1]}])
    with pytest.raises(fastaxo.InvalidInputError, match="features is empty"):
        c([])
    with pytest.raises(fastaxo.InvalidInputError, match="seq_lengths'\\] add up to 9"):
        c([{"input_ids": [1, 2, 3], "seq_lengths": [4, 5]}])
    with pytest.raises(fastaxo.InvalidTypeError, match="features must be a list"):
        c("input_ids")
    with pytest.raises(fastaxo.InvalidInputError, match="pad_to_multiple_of"):
        PackedCollator(attn_implementation="sdpa", pad_to_multiple_of=0)


@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_packed_as_datasets_and_a_dataloader(layout):
    datasets = pytest.importorskip("datasets")
    seqs = sequences(5, n=40)
    packed = fastaxo.pack(seqs, 64, layout=layout, labels=seqs)
    table = packed.to_arrow()
    assert table.column_names == ["input_ids", "labels", "position_ids", "attention_mask"]
    assert table.num_rows == len(packed.bins)
    # zero-copy: the table's values are the packed arrays' memory
    values = table.column("input_ids").chunk(0).values
    assert values.buffers()[1].address == packed["input_ids"].ctypes.data
    ds = packed.to_dataset()
    assert isinstance(ds, datasets.Dataset) and len(ds) == len(packed.bins)
    rows = packed.to_torch_dataset()
    assert len(rows) == len(ds)
    for i in (0, len(ds) - 1, -1):
        for k in table.column_names:
            assert rows[i][k].tolist() == ds[i][k]
    with pytest.raises(IndexError):
        rows[len(rows)]
    model = tiny_llama("sdpa")
    want = {tuple(s.tolist()): w for s, w in zip(seqs, unpacked_logits(model, seqs))}
    loader = torch.utils.data.DataLoader(rows, batch_size=4,
                                         collate_fn=PackedCollator(model=model))
    n = 0
    for batch in loader:
        logits = packed_logits(model, batch)
        for b in range(len(batch["input_ids"])):
            pos = batch["position_ids"][b].tolist() + [0]
            starts = [i for i, p in enumerate(pos) if p == 0]
            for a, z in zip(starts, starts[1:]):
                key = tuple(batch["input_ids"][b, a:z].tolist())
                if key in want:
                    assert torch.allclose(logits[b, a:z], want[key], atol=ATOL)
                    n += 1
    assert n == len(seqs)


@pytest.mark.parametrize("attn", ["sdpa", "flash_attention_2"])
def test_seq_lengths_position_ids_and_segments_give_one_batch(attn):
    """The three ways rows can mark their sequences (TRL's seq_lengths, position ids,
    fastaxo's segment ids) give the same batch, and rows as lists, NumPy arrays or tensors
    too."""
    seqs = sequences(6, n=30)
    packed = fastaxo.pack(seqs, 64, layout="flat")
    rows = packed.to_arrow().to_pylist()
    by_len = []
    for r, b in zip(rows, range(len(packed.bins))):
        lens = packed.bins.lengths[packed.bins.offsets[b]:packed.bins.offsets[b + 1]]
        by_len.append({"input_ids": r["input_ids"], "seq_lengths": lens.tolist()})
    by_pos = [{"input_ids": r["input_ids"], "position_ids": r["position_ids"]} for r in rows]
    by_seg = [{"input_ids": r["input_ids"], "attention_mask": r["attention_mask"]} for r in rows]
    as_np = [{k: np.asarray(v) for k, v in r.items()} for r in by_pos]
    as_pt = list(packed.to_torch_dataset())
    c = PackedCollator(attn_implementation=attn, pad_to_multiple_of=16)
    want = c(by_len)
    for other in (by_pos, by_seg, as_np, as_pt):
        got = c(other)
        for k, v in want.items():
            assert (torch.equal(got[k], v) if isinstance(v, torch.Tensor) else got[k] == v), k
