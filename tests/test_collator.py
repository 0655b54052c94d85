"""PackedCollator: the faults kept out of it (a varlen sequence opening on padding), each as
a table of one-line cases against its plain-Python twin (fastaxo._reference.collate)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import main_leg_only

from fastaxo._reference.collate import packed_collate

try:
    import torch

    from fastaxo.integrations.transformers import PackedCollator
    _MISSING = None
except ImportError as exc:  # pragma: no cover
    _MISSING = exc
main_leg_only(_MISSING, "torch")


# ---------------------------------------------------------------------------------------------
# item by item

TRL_LEFT_PADDED = [  # TRL's pack_dataset rows (bfd) of left-padded sequences: padding first
    {"input_ids": [0, 0, 5, 6], "attention_mask": [0, 0, 1, 1], "seq_lengths": [4]},
    {"input_ids": [0, 7, 8, 0, 9], "attention_mask": [0, 1, 1, 0, 1], "seq_lengths": [3, 2]},
]


@pytest.mark.parametrize("rows, cu, labels", [
    # a row's first sequence opens on padding: it stays its own sequence
    (TRL_LEFT_PADDED, [0, 2, 4, 5], [-100, 6, -100, 8, -100]),
    # the same inside a row: the second declared sequence opens on padding
    ([{"input_ids": [5, 6, 0, 7], "attention_mask": [1, 1, 0, 1], "seq_lengths": [2, 2]}],
     [0, 2, 3], [-100, 6, -100]),
    # padding inside a declared sequence does not split it
    ([{"input_ids": [5, 0, 6], "attention_mask": [1, 0, 1], "seq_lengths": [3]}],
     [0, 2], [-100, 6]),
    # the same batch marked by a 0/1 mask with position ids, and by segment ids
    ([{"input_ids": [0, 0, 5, 6], "attention_mask": [0, 0, 1, 1], "position_ids": [0, 1, 0, 1]},
      {"input_ids": [0, 7, 8, 0, 9], "attention_mask": [0, 1, 1, 0, 1],
       "position_ids": [0, 0, 1, 0, 0]}],
     [0, 2, 4, 5], [-100, 6, -100, 8, -100]),
    ([{"input_ids": [0, 0, 5, 6], "attention_mask": [0, 0, 1, 1]},
      {"input_ids": [0, 7, 8, 0, 9], "attention_mask": [0, 1, 1, 0, 2]}],
     [0, 2, 4, 5], [-100, 6, -100, 8, -100]),
])
def test_varlen_sequence_opening_on_padding_keeps_its_start(rows, cu, labels):
    """A sequence whose first tokens are padding (attention_mask 0) starts at its first kept
    token in the varlen layout: it neither joins the sequence before it nor is its first
    token predicted from that sequence (the separator label goes on it)."""
    got = PackedCollator(attn_implementation="flash_attention_2", return_tensors="np")(rows)
    assert got["cu_seq_lens_q"].tolist() == cu
    assert got["labels"][0].tolist() == labels
    assert got["position_ids"][0].tolist() == [i - a for a, z in zip(cu, cu[1:])
                                                for i in range(a, z)]
    assert got["cu_seq_lens_q"].tolist() == packed_collate(rows, "varlen")["cu_seq_lens"]
    mask = PackedCollator(attn_implementation="sdpa", return_tensors="np")(rows)
    assert mask["labels"].tolist() == packed_collate(rows, "mask")["labels"]


def test_trl_left_padded_rows_give_unpacked_logits():
    """TRL's own pack_dataset on left-padded rows, collated for flash attention (run here on
    sdpa from the position ids, as transformers does without a mask): every sequence's logits
    equal its unpadded run."""
    trl_utils = pytest.importorskip("trl.data_utils")
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    rng = np.random.default_rng(7)
    seqs = [rng.integers(3, 97, int(k)).tolist() for k in rng.integers(1, 12, 24)]
    width = 12  # each sequence left-padded to it, as a tokenizer with padding_side="left" does
    padded = {"input_ids": [[0] * (width - len(s)) + s for s in seqs],
              "attention_mask": [[0] * (width - len(s)) + [1] * len(s) for s in seqs]}
    packed = trl_utils.pack_dataset(datasets.Dataset.from_dict(padded), 40, strategy="bfd")
    rows = [packed[i] for i in range(len(packed))]
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, pad_token_id=0, use_cache=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.config._attn_implementation = "sdpa"
    batch = PackedCollator(attn_implementation="flash_attention_2")(rows)
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits[0]
        want = {tuple(s): model(input_ids=torch.tensor([s])).logits[0] for s in seqs}
    cu = batch["cu_seq_lens_q"].tolist()
    assert len(cu) - 1 == len(seqs)
    for a, z in zip(cu, cu[1:]):
        key = tuple(batch["input_ids"][0, a:z].tolist())
        assert torch.allclose(logits[a:z], want[key], atol=1e-4), key
        assert batch["labels"][0, a].item() == -100


