"""The packing collator: Axolotl's V2 layout from bins of rows, with fastaxo's padding.

Imported only by the Axolotl plugin (it imports axolotl, torch and transformers).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from itertools import chain
from typing import Any

import numpy as np
from axolotl.utils.collators.batching import (
    BatchSamplerDataCollatorForSeq2Seq,
    V2BatchSamplerDataCollatorForSeq2Seq,
)

import fastaxo
from fastaxo._core.ragged import lists_to_values
from fastaxo.integrations.axolotl.settings import report
from fastaxo.padding import pad_rows

_KNOWN = {"input_ids", "labels", "attention_mask", "position_ids", "length"}


def _flat(rows: list[Any], total: int) -> np.ndarray:
    """One int64 array of all rows concatenated (rows: lists, NumPy arrays or tensors)."""
    first = rows[0] if rows else None
    if isinstance(first, list):
        # one C pass over the Python ints: ~2 ns a token against np.fromiter's ~14 (most of a
        # collate call: 4 columns of a 4k-token bin)
        got = lists_to_values(rows)
        if got is not None and len(got) == 2 and len(got[0]) == total:
            return got[0]
        return np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=total)
    return np.concatenate([np.asarray(r, dtype=np.int64).reshape(-1) for r in rows]) if rows \
        else np.zeros(0, dtype=np.int64)


@dataclass
class FastaxoCollator(V2BatchSamplerDataCollatorForSeq2Seq):
    """Collates packed micro-batches (``list[bin: list[row dict]]``) into Axolotl's V2 layout,
    tensor for tensor what ``V2BatchSamplerDataCollatorForSeq2Seq`` returns (``segments=False``:
    what ``BatchSamplerDataCollatorForSeq2Seq`` returns, a 1/0 mask).

    Per bin its rows are concatenated; ``attention_mask`` becomes segment ids (row ``i`` of the
    bin times ``i + 1``; 0 = padding), ``input_ids`` pad with the tokenizer's pad id, ``labels``
    with ``label_pad_token_id``, ``position_ids`` continue 0, 1, 2, ... over the padding; every
    bin of the batch is padded to the longest, rounded up to ``pad_to_multiple_of``; ``length``
    is dropped. All of it on whole arrays: one flat array per column, fastaxo's padding kernel.

    Cases it does not cover (left padding, ``max_length``, extra columns, rows whose columns
    differ in length, empty rows (Axolotl's collator turns such a batch into floats), a
    context-parallel shard, squashed position ids, an encoder-decoder model) go to Axolotl's
    own collator, call by call. A dataclass: picklable, no state but its fields,
    so it is safe in forked or spawned DataLoader workers.
    """

    segments: bool = True
    num_threads: int | None = None
    report_path: str | None = None

    def _fallback(self):
        cls = (V2BatchSamplerDataCollatorForSeq2Seq if self.segments
               else BatchSamplerDataCollatorForSeq2Seq)
        names = {f.name for f in fields(cls)}
        return cls(**{f.name: getattr(self, f.name) for f in fields(self) if f.name in names})

    def _fast_ok(self, bins: list, return_tensors: str) -> tuple[str, ...] | None:
        if return_tensors not in ("pt", "np") or self.max_length is not None:
            return None
        if (self.padding not in (True, "longest")
                and str(self.padding) != "PaddingStrategy.LONGEST"):
            return None
        # fields of Axolotl 0.21's collator (0.19's has none of them)
        if (getattr(self, "squash_position_ids", False)
                or getattr(self, "cp_shard", None) is not None
                or getattr(self, "emit_fa_varlen_kwargs", False)):
            return None
        if self.model is not None and hasattr(self.model, "prepare_decoder_input_ids_from_labels"):
            return None
        tok = self.tokenizer
        if getattr(tok, "padding_side", "right") != "right" or tok.pad_token_id is None:
            return None
        if not bins or not all(isinstance(b, list) and b for b in bins):
            return None
        keys = tuple(bins[0][0].keys())
        if "input_ids" not in keys or not set(keys) <= _KNOWN:
            return None
        for b in bins:
            for row in b:
                if row.keys() != bins[0][0].keys():
                    return None
        return keys

    def __call__(self, features, return_tensors=None):
        if not features:
            return self._fallback()(features, return_tensors=return_tensors)
        bins = features if isinstance(features[0], list) else [features]
        rt = return_tensors or self.return_tensors
        keys = self._fast_ok(bins, rt)
        if keys is None:
            return self._fallback()(features, return_tensors=return_tensors)
        out = self._collate(bins, keys)
        if out is None:
            return self._fallback()(features, return_tensors=return_tensors)
        if self.report_path:
            report("collate", path=self.report_path, batches=1, bins=len(bins),
                   tokens=int(out["input_ids"].size))
        if rt == "pt":
            import torch

            out = {k: torch.from_numpy(v) for k, v in out.items()}
        from transformers import BatchEncoding

        return BatchEncoding(out)

    def _collate(self, bins: list, keys: tuple[str, ...]) -> dict[str, np.ndarray] | None:
        rows = [row for b in bins for row in b]
        cols = [k for k in keys if k != "length"]
        lengths = np.fromiter((len(r["input_ids"]) for r in rows), dtype=np.int64, count=len(rows))
        if len(rows) and lengths.min() == 0:
            # Axolotl's np.array([]) is float64 and turns the batch float: its quirk, its path
            return None
        for k in cols:
            if k != "input_ids" and not all(len(r[k]) == n for r, n in zip(rows, lengths.tolist())):
                return None
        total = int(lengths.sum())
        rows_per_bin = np.fromiter((len(b) for b in bins), dtype=np.int64, count=len(bins))
        row_off = np.zeros(len(bins) + 1, dtype=np.int64)
        np.cumsum(rows_per_bin, out=row_off[1:])
        tok_off = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=tok_off[1:])
        bin_off = tok_off[row_off]  # token offsets of the bins in the flat arrays
        width = int(np.diff(bin_off).max()) if len(bins) else 0
        m = self.pad_to_multiple_of
        if m:
            width = -(-width // m) * m
        flat = {k: _flat([r[k] for r in rows], total) for k in cols}
        if self.segments and "attention_mask" in flat:  # row i of its bin times (i + 1)
            seg = np.arange(len(rows), dtype=np.int64) - np.repeat(row_off[:-1], rows_per_bin) + 1
            flat["attention_mask"] = flat["attention_mask"] * np.repeat(seg, lengths)
        fast = self._pad_bins(flat, bin_off, width)
        if fast is not None:
            return {k: fast[k] for k in cols}
        nt = self.num_threads
        ids = (flat["input_ids"], bin_off)
        labels = (flat["labels"], bin_off) if "labels" in flat else None
        positions = (flat["position_ids"], bin_off) if "position_ids" in flat else None
        padded = fastaxo.pad(ids, labels=labels, position_ids=positions,
                             max_length=width, pad_id=int(self.tokenizer.pad_token_id),
                             label_pad_id=int(self.label_pad_token_id), attention_mask=False,
                             dtype=np.int64, num_threads=nt)
        out: dict[str, np.ndarray] = {}
        for k in cols:
            if k == "input_ids":
                out[k] = padded["input_ids"]
            elif k == "labels":
                out[k] = padded["labels"]
            elif k == "position_ids":
                out[k] = padded["position_ids"]
            else:  # attention_mask (segment ids made above, or 1/0)
                out[k] = fastaxo.pad((flat[k], bin_off), max_length=width, pad_id=0,
                                     attention_mask=False, dtype=np.int64,
                                     num_threads=nt)["input_ids"]
        return out

    def _pad_bins(self, flat: dict[str, np.ndarray], bin_off: np.ndarray,
                  width: int) -> dict[str, np.ndarray] | None:
        """The bins padded by fastaxo's list kernel (``padding.pad_rows``): each bin a view of
        the flat columns, input_ids with labels in one call, position_ids with the mask in
        another; the position pad tail then set to 0, 1, 2, ... None without the extension (the
        general path then pads): a micro-batch is a few bins, where the general path's
        per-column checks cost more than the copy."""
        spans = list(zip(bin_off[:-1].tolist(), bin_off[1:].tolist()))
        m = int(self.pad_to_multiple_of or 0)
        i64 = np.dtype(np.int64)

        def views(k: str) -> list[np.ndarray] | None:
            return [flat[k][a:b] for a, b in spans] if k in flat else None

        ids = views("input_ids")
        assert ids is not None  # every row has input_ids (checked by _fast_ok)
        got = pad_rows(ids, views("labels"), i64, int(self.tokenizer.pad_token_id),
                       int(self.label_pad_token_id), m, False, False)
        if got is None or got[0].shape[1] != width:
            return None
        out: dict[str, Any] = {"input_ids": got[0]}
        if got[2] is not None:
            out["labels"] = got[2]
        pos, mask = views("position_ids"), views("attention_mask")
        if pos is not None or mask is not None:
            first, second = (pos, mask) if pos is not None else (mask, None)
            assert first is not None
            got = pad_rows(first, second, i64, 0, 0, m, False, False)
            if got is None or got[0].shape[1] != width:
                return None
            if pos is not None:
                tail = np.arange(width, dtype=np.int64) - np.diff(bin_off)[:, None]
                np.copyto(got[0], tail, where=tail >= 0)  # the pad tail continues 0, 1, 2, ...
                out["position_ids"] = got[0]
                if mask is not None:
                    out["attention_mask"] = got[2]
            else:
                out["attention_mask"] = got[0]
        return out


def _flash_requested(cfg: Any) -> bool:
    return bool(cfg.flash_attention) or "flash" in str(cfg.attn_implementation or "")


def collator_for(cfg: Any, is_eval: bool, settings: Any, say_once) -> tuple[type, dict] | None:
    """``(FastaxoCollator, kwargs)`` where Axolotl would use its V2 (or plain batch-sampler)
    packing collator, else None (Axolotl's choice stands)."""
    packed = bool(cfg.eval_sample_packing) if is_eval else bool(cfg.sample_packing)
    if not packed:
        return None
    for key, why in (("pretraining_dataset", "pretraining datasets"), ("rl", "RL trainers"),
                     ("reward_model", "reward models"), ("process_reward_model", "reward models"),
                     ("processor_type", "multimodal processors"),
                     ("batch_flattening", "batch_flattening")):
        if cfg.get(key):
            say_once(f"collator-{key}", f"collator: not used with {why}; Axolotl's collator stays")
            return None
    if _flash_requested(cfg):
        say_once("collator-flash", "collator: flash attention collates with varlen kwargs in "
                 "Axolotl's collator; Axolotl's collator stays")
        return None
    if (cfg.get("context_parallel_size") or 1) > 1:
        say_once("collator-cp", "collator: context parallel; Axolotl's collator stays")
        return None
    try:
        from axolotl.monkeypatch.multipack import SUPPORTED_MULTIPACK_MODEL_TYPES
    except ImportError:
        SUPPORTED_MULTIPACK_MODEL_TYPES = []
    segments = (cfg.attn_implementation == "flex_attention"
                or cfg.model_config_type in SUPPORTED_MULTIPACK_MODEL_TYPES
                or (cfg.model_config_type in ["llama"]
                    and cfg.attn_implementation != "flash_attention_2"))
    report_path = settings.report or os.environ.get("FASTAXO_AXOLOTL_REPORT")
    return FastaxoCollator, {"segments": bool(segments), "num_threads": settings.threads,
                             "report_path": report_path}
