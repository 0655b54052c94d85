"""Training on packed rows with transformers, TRL or any PyTorch loop::

    from fastaxo.integrations.transformers import PackedCollator
    collator = PackedCollator(model=model)        # reads model.config._attn_implementation
    trainer = Trainer(model=model, train_dataset=packed_dataset, data_collator=collator, ...)

Packed rows are several sequences side by side. A stock transformers model keeps them apart
only when it is told where they start: :class:`PackedCollator` gives eager and sdpa attention a
block-diagonal causal 4-D mask and flash attention the varlen keywords (``cu_seq_lens_q/k``,
``max_length_q/k``, ``position_ids``). Feeding fastaxo's segment-id ``attention_mask`` to a
stock model as a plain 2-D mask lets every sequence attend to the ones before it in its row:
that layout is Axolotl's, for Axolotl's patched attention.
"""

from fastaxo.integrations.transformers.collator import (
    MASK_IMPLEMENTATIONS,
    PackedCollator,
    layout_for,
)

__all__ = ["MASK_IMPLEMENTATIONS", "PackedCollator", "layout_for"]
