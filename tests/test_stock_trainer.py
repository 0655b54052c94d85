"""prepare's standard layout on a stock transformers model with no custom collator: given only
``input_ids`` and restarting ``position_ids`` (what the Trainer's default collator hands over
once the unused ``seq_lengths`` is dropped) and ``use_cache=False``, transformers finds the
packed sequences itself, so each sequence's logits equal its unpacked run (eager and sdpa).
With the cache on (the default config, in train mode) it does not look: the leak is asserted,
which is why the README's recipe sets ``use_cache=False``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import main_leg_only

import fastaxo

try:
    import datasets
    import torch
    import transformers
    from test_transformers import sequences, tiny_llama, unpacked_logits
    _MISSING = None
except ImportError as exc:  # pragma: no cover
    _MISSING = exc
main_leg_only(_MISSING, "torch, transformers and datasets")

SEQ = 64
ATOL = 1e-4


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """(the sequences, the packed rows as ``Dataset.from_parquet`` gives them)."""
    tmp = tmp_path_factory.mktemp("stock")
    seqs = sequences(seed=3, n=40)
    pq.write_table(pa.table({"input_ids": pa.array([s.tolist() for s in seqs],
                                                   pa.list_(pa.int64()))}), tmp / "rows.parquet")
    rep = fastaxo.prepare(str(tmp / "rows.parquet"), str(tmp / "packed.parquet"), SEQ,
                          dedupe=False, progress=False)
    assert rep.layout == "standard" and rep.sequences_out == len(seqs)
    datasets.config.HF_DATASETS_CACHE = str(tmp / "hf")
    return seqs, datasets.Dataset.from_parquet(str(tmp / "packed.parquet"))


def _per_sequence(model, row) -> list[tuple[tuple, torch.Tensor]]:
    """(a sequence's ids, its logits) for every sequence of one packed row, run as the
    default collator hands it over: input_ids and position_ids, no attention_mask."""
    ids = torch.tensor(row["input_ids"])[None]
    pos = torch.tensor(row["position_ids"])[None]
    with torch.no_grad():
        logits = model(input_ids=ids, position_ids=pos).logits[0]
    out, at = [], 0
    for k in row["seq_lengths"]:
        out.append((tuple(row["input_ids"][at:at + k]), logits[at:at + k]))
        at += k
    assert at == len(row["input_ids"])
    return out


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_a_stock_model_keeps_the_packed_sequences_apart_without_its_cache(packed, attn):
    seqs, ds = packed
    model = tiny_llama(attn)
    assert model.config.use_cache is False
    want = {tuple(s.tolist()): w for s, w in zip(seqs, unpacked_logits(model, seqs))}
    seen = 0
    for row in ds:
        for key, got in _per_sequence(model, row):
            assert torch.allclose(got, want[key], atol=ATOL), key
            seen += 1
    assert seen == len(seqs) and len(ds) < len(seqs)  # (rows hold several sequences)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_with_its_cache_on_a_stock_model_leaks_across_the_packed_sequences(packed, attn):
    seqs, ds = packed
    model = tiny_llama(attn)
    want = {tuple(s.tolist()): w for s, w in zip(seqs, unpacked_logits(model, seqs))}
    model.config.use_cache = True  # transformers' default: a cache is made, packing not looked for
    model.train()
    worst = 0.0
    for row in ds:
        for i, (key, got) in enumerate(_per_sequence(model, row)):
            err = float((got - want[key]).abs().max())
            if i == 0:
                assert err < ATOL  # a row's first sequence sees nothing before it
            else:
                worst = max(worst, err)
    assert worst > 1e-2, worst  # the later sequences attend to the ones before them


def test_the_trainers_default_collator_hands_over_what_the_detection_needs(packed, tmp_path):
    """The README's stock recipe (batch size 1, no data_collator): the batches reaching the
    model hold input_ids, labels and position_ids, and no attention_mask."""
    _, ds = packed
    model = tiny_llama("sdpa")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=1,
                                          report_to="none")
    trainer = transformers.Trainer(model=model, args=args, train_dataset=ds)
    batch = next(iter(trainer.get_train_dataloader()))
    assert set(batch) == {"input_ids", "labels", "position_ids"}
    row = np.asarray(batch["position_ids"][0])
    assert (row == 0).sum() >= 2  # a packed row: its position ids restart
    # the standard layout's labels: -100 on each sequence's first token
    assert (np.asarray(batch["labels"][0])[row == 0] == -100).all()
