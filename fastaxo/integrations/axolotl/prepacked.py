"""Training on ``fastaxo prepare``'s packed Parquet in Axolotl.

Axolotl takes a dataset as pretokenized when it has ``input_ids``, ``labels`` and
``attention_mask``: prepare's axolotl layout. Its standard layout (``seq_lengths`` instead of
a mask) Axolotl would take for raw prompts and fail on; the plugin's ``prepacked`` part makes
Axolotl's check take it too (:func:`make_is_tokenized`). Left alone the axolotl layout would
leak: with ``sample_packing: false`` its collator
pads the rows and hands the segment ids to the model as a 2-D mask (each sequence then attends
to the ones before it in its row), and with ``sample_packing: true`` it renumbers
``position_ids`` per row and packs the packed rows again. The plugin collates such datasets
with :class:`PackedCollator` (a block-diagonal mask for eager/sdpa, varlen keywords for flash
attention) and refuses ``sample_packing: true`` on them.
"""

from __future__ import annotations

import os
from typing import Any

from fastaxo.errors import InvalidInputError
from fastaxo.integrations.transformers.collator import (
    DEFAULT_MAX_MASK_BYTES,
    PackedCollator,
    layout_for,
)
from fastaxo.pipeline.stages import STANDARD_COLUMNS

__all__ = ["AxolotlPackedCollator", "attn_implementation", "check_prepacked",
           "collator_for_prepacked", "is_prepacked", "make_is_tokenized", "prepacked_paths"]

#: the schema metadata key fastaxo prepare writes
METADATA_KEY = b"fastaxo.prepare"


def is_prepacked(path: str) -> bool:
    """Whether ``path`` (a Parquet file, or a directory of them) was written by fastaxo
    prepare (its schema metadata)."""
    import pyarrow.parquet as pq

    p = os.fspath(path)
    if os.path.isdir(p):
        names = sorted(n for n in os.listdir(p) if n.endswith(".parquet"))
        if not names:
            return False
        p = os.path.join(p, names[0])
    if not (os.path.isfile(p) and p.endswith(".parquet")):
        return False
    try:
        meta = pq.read_schema(p).metadata or {}
    except (OSError, ValueError):  # unreadable, damaged (ArrowInvalid), a non-UTF-8 name: not
        return False               # fastaxo's; Axolotl's own loader says what is wrong with it
    return METADATA_KEY in meta


def prepacked_paths(cfg: Any) -> list[str]:
    """The local dataset paths of ``cfg.datasets`` / ``cfg.test_datasets`` that fastaxo
    prepare packed."""
    out = []
    for key in ("datasets", "test_datasets"):
        for ds in (cfg.get(key) if hasattr(cfg, "get") else None) or []:
            path = ds.get("path") if hasattr(ds, "get") else None
            if isinstance(path, str) and is_prepacked(path):
                out.append(path)
    return out


def attn_implementation(cfg: Any) -> str:
    """The attention implementation the run asks for (``attn_implementation``, or the older
    flags), sdpa when none is set (transformers' default)."""
    if cfg.get("attn_implementation"):
        return str(cfg.get("attn_implementation"))
    for flag, name in (("flash_attention", "flash_attention_2"), ("flex_attention",
                       "flex_attention"), ("sdp_attention", "sdpa"), ("eager_attention", "eager")):
        if cfg.get(flag):
            return name
    return "sdpa"


def check_prepacked(cfg: Any) -> list[str]:
    """The packed paths of ``cfg``, after refusing the settings that would merge their
    sequences (raised at ``register``, before any work)."""
    paths = prepacked_paths(cfg)
    if not paths:
        return paths
    if cfg.get("sample_packing"):
        raise InvalidInputError(
            f"datasets: {paths[0]} was packed by fastaxo prepare; with sample_packing: true "
            "Axolotl would renumber its position_ids and pack the packed rows again, merging "
            "their sequences. Set sample_packing: false (the fastaxo plugin then collates the "
            "rows with their sequences kept apart)")
    attn = attn_implementation(cfg)
    try:
        layout_for(attn)
    except InvalidInputError as e:
        raise InvalidInputError(f"datasets: {paths[0]} was packed by fastaxo prepare; {e}") \
            from None
    return paths


def make_is_tokenized(original: Any) -> Any:
    """Axolotl's ``_is_dataset_already_tokenized(dataset)``, also true for a dataset with the
    standard layout's columns (prepare's, or any packed rows that name their sequences'
    lengths): such rows are tokenized, and go to the collator as they are."""
    import functools

    @functools.wraps(original)
    def _is_dataset_already_tokenized(dataset: Any) -> bool:
        if original(dataset):
            return True
        import datasets

        # (the axolotl layout has attention_mask instead of seq_lengths: Axolotl's own check)
        return (isinstance(dataset, datasets.Dataset)
                and all(c in dataset.features for c in STANDARD_COLUMNS))

    return _is_dataset_already_tokenized


class AxolotlPackedCollator:
    """The collator Axolotl builds for a fastaxo-packed dataset: Axolotl calls
    ``Cls(tokenizer, padding=..., pad_to_multiple_of=..., return_tensors="pt", **kwargs)``;
    the rows go through :class:`PackedCollator`. Plain attributes only: picklable, safe in
    forked DataLoader workers."""

    def __init__(self, tokenizer: Any = None, *, attn_implementation: str = "sdpa",
                 pad_to_multiple_of: int | None = None, return_tensors: str = "pt",
                 label_pad_token_id: int = -100,
                 max_mask_bytes: int | None = DEFAULT_MAX_MASK_BYTES, **_axolotl_kwargs: Any):
        pad_id = getattr(tokenizer, "pad_token_id", None)
        self.collator = PackedCollator(attn_implementation=attn_implementation,
                                       pad_token_id=pad_id, label_pad_token_id=label_pad_token_id,
                                       pad_to_multiple_of=pad_to_multiple_of,
                                       return_tensors=return_tensors,
                                       max_mask_bytes=max_mask_bytes)

    def __call__(self, features: Any, return_tensors: str | None = None) -> dict[str, Any]:
        return self.collator(features, return_tensors=return_tensors)


def collator_for_prepacked(cfg: Any, is_eval: bool, say_once: Any) -> tuple[type, dict] | None:
    """``(AxolotlPackedCollator, kwargs)`` when the run trains on fastaxo-packed data."""
    if cfg.get("eval_sample_packing" if is_eval else "sample_packing"):
        return None
    if not prepacked_paths(cfg):
        return None
    attn = attn_implementation(cfg)
    say_once("collator-prepacked", f"collator: fastaxo-packed dataset; sequences kept apart "
             f"for {attn} ({layout_for(attn)} layout)")
    kwargs: dict[str, Any] = {"attn_implementation": attn}
    if cfg.get("fastaxo_max_mask_bytes") is not None:
        kwargs["max_mask_bytes"] = int(cfg.get("fastaxo_max_mask_bytes"))
    return AxolotlPackedCollator, kwargs
