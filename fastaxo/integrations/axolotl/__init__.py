"""fastaxo as an Axolotl plugin.

One line in the Axolotl YAML::

    plugins:
      - fastaxo.integrations.axolotl.FastaxoPlugin

turns on, with Axolotl's results kept exactly:

- ``fastaxo_dedupe`` (default on): ``dataset_exact_deduplication`` compares rows by value in
  their Arrow buffers (:class:`fastaxo.RowSet`: sampled keys, byte comparison of candidates)
  instead of ``sha256(str(row))`` per row. Same kept rows, same order, same train -> eval
  ``seen_hashes`` hand-over. It never turns dedupe on by itself.
- ``fastaxo_packing`` (default on): sample packing's bin assignment (``pack_parallel``) runs
  fastaxo's first-fit kernel, bin for bin what Axolotl's numba packer returns, and
  ``MultipackBatchSampler.generate_batches`` keeps the sampler order and the bins as arrays
  (:class:`PackedBatches`): the same batches, the same random draws.
- ``fastaxo_chat_template`` (default on): ``type: chat_template`` datasets are tokenized in
  one pass per batch (:mod:`fastaxo.chat`): each conversation rendered four times whatever its
  length, tokenized once, the turns located and masked in C. Every row is Axolotl's
  ``input_ids`` / ``labels`` / ``attention_mask``; a row fastaxo cannot prove (tools, reasoning
  fields, a template that rewrites message text, ...) is tokenized by Axolotl's own code,
  counted, and the reason said once in the log.
- ``fastaxo_completion`` (default on): ``type: completion`` datasets and pretraining data
  (``pretraining_dataset``, ``type: pretrain``) are tokenized by fastaxo's C encoder, one call
  per batch, the rows cut and assembled in NumPy: Axolotl's rows exactly (truncation, EOS,
  pieces of ``sequence_len``, overflowing windows, streaming concatenation). A tokenizer the
  encoder does not reproduce, or a batch it cannot prove, is tokenized by Axolotl's own code,
  counted, and the reason said once in the log.
- ``fastaxo_length_filter`` (default on): Axolotl's drop of rows outside ``[min_sample_len,
  sequence_len]`` reads the lengths from the Arrow offsets (the same rows kept, the same error
  for an over-long row with ``excess_length_strategy: raise``).
- ``fastaxo_collator`` (default on): packed micro-batches are collated by
  :class:`FastaxoCollator` (Axolotl's V2 layout, tensor for tensor).
- ``fastaxo_loader_health`` (default on): a trainer callback logs, per logging step, the stall
  fraction, tokens/s, RSS/VmPeak and disk bytes read, a summary table at the end, and MFU
  when ``fastaxo_peak_flops`` is set.
- ``fastaxo_streaming`` (default off): local pre-tokenized Parquet/Arrow/JSONL/CSV datasets are
  read through fastaxo's bounded-memory reader, so a dataset larger than the process's memory
  is prepared (rows identical to Axolotl's, in Axolotl's order).

Anything a switch cannot honour for a given config is said once in the log and left to
Axolotl's own code. This module imports axolotl (and through it torch and transformers);
``import fastaxo`` does not import it.
"""

from __future__ import annotations

import os
from typing import Any

try:
    import axolotl as _axolotl
    from axolotl.integrations.base import BasePlugin
except ImportError as exc:  # pragma: no cover - exercised by users without axolotl
    raise ImportError(
        "fastaxo.integrations.axolotl needs axolotl (0.19 on Python < 3.12, 0.21) installed in "
        f"this environment: pip install 'fastaxo[axolotl]' ({exc})"
    ) from exc

from pydantic import BaseModel, Field

import fastaxo
from fastaxo.errors import UnsupportedVersionError
from fastaxo.integrations.axolotl.dedupe import (
    SeenHashes,
    make_deduplicate_dataset,
    select_rows,
)
from fastaxo.integrations.axolotl.packer import (
    PackedBatches,
    make_generate_batches,
    make_pack_parallel,
)
from fastaxo.integrations.axolotl.patches import patch_axolotl, patched, unpatch_axolotl
from fastaxo.integrations.axolotl.settings import LOG, Settings, report, say_once, use

PLUGIN_NAME = "fastaxo.integrations.axolotl.FastaxoPlugin"
# The Axolotl minors the plugin is built and tested for (pyproject's `axolotl` extra, one per
# Python; CI runs the plugin's tests on each: scripts/axolotl_leg.sh and the main leg)
SUPPORTED = ((0, 19), (0, 21))
_DEFAULT_ON = ("fastaxo_dedupe", "fastaxo_packing", "fastaxo_chat_template",
               "fastaxo_completion", "fastaxo_length_filter", "fastaxo_collator",
               "fastaxo_loader_health")


def _key(description: str, **bounds: Any) -> Any:
    """A plugin config key: None (unset) by default, described in Axolotl's schema."""
    return Field(default=None, json_schema_extra={"description": description}, **bounds)


class FastaxoArgs(BaseModel):
    """The plugin's config keys, mixed into Axolotl's schema by ``get_input_args``."""

    fastaxo_dedupe: bool | None = _key(
        "Run dataset_exact_deduplication on fastaxo.RowSet (rows compared by value in their Arrow "
        "buffers; the same kept rows in the same order). Default on.")
    fastaxo_packing: bool | None = _key(
        "Sample-packing bin assignment (pack_parallel) on fastaxo's kernel, bin for bin. "
        "Default on.")
    fastaxo_chat_template: bool | None = _key(
        "Tokenize type: chat_template datasets in one pass per batch (Axolotl's exact rows; "
        "rows it cannot prove go to Axolotl's code, counted). Default on.")
    fastaxo_completion: bool | None = _key(
        "Tokenize type: completion and pretraining datasets with fastaxo's C encoder (Axolotl's "
        "exact rows; tokenizers or batches it cannot prove go to Axolotl's code, counted). "
        "Default on.")
    fastaxo_length_filter: bool | None = _key(
        "Drop rows outside [min_sample_len, sequence_len] from the Arrow offsets (Axolotl's rows "
        "and error) instead of a filter over every row as Python lists. Default on.")
    fastaxo_collator: bool | None = _key(
        "Collate packed micro-batches with fastaxo (Axolotl's V2 layout). Default on.")
    fastaxo_streaming: bool | None = _key(
        "Prepare local pre-tokenized files through fastaxo's bounded-memory reader. Default off.")
    fastaxo_batch_rows: int | None = _key(
        "Rows per batch of the streaming loader (default 8192, fewer for rows over 2 KiB: "
        "~16 MiB).", ge=1)
    fastaxo_prefetch_bytes: int | None = _key(
        "Read-ahead budget of the streaming loader in bytes (default 64 MiB).", ge=0)
    fastaxo_threads: int | None = _key(
        "Threads for fastaxo's kernels (default: FASTAXO_NUM_THREADS, OMP_NUM_THREADS or the "
        "CPUs).", ge=1)
    fastaxo_loader_health: bool | None = _key(
        "Log stall fraction, tokens/s, RSS, disk reads per logging step and a summary. "
        "Default on.")
    fastaxo_peak_flops: float | None = _key(
        "Peak FLOP/s of the hardware (all devices of this process); adds MFU to loader health.",
        gt=0)
    fastaxo_max_mask_bytes: int | None = _key(
        "Largest 4-D attention mask (eager/sdpa) the collator of a fastaxo-packed dataset builds "
        "per batch, in bytes (default 1 GiB; a bigger batch is refused naming its size).", ge=1)
    fastaxo_report: str | None = _key(
        "Append one JSON line per fastaxo action (dedupe, pack, collate, stream, health) to this "
        "file.")


def _axolotl_version() -> tuple[int, int]:
    parts = str(getattr(_axolotl, "__version__", "0.0")).split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        return (0, 0)


def check_axolotl_version() -> None:
    """Raise a clear error unless the installed axolotl is one the plugin supports (0.19 or
    0.21, :data:`SUPPORTED`).

    ``FASTAXO_AXOLOTL_VERSION_CHECK=0`` turns the error into a warning (at your own risk: each
    replacement still checks the function it replaces and leaves Axolotl's own in place if
    that has changed)."""
    if _axolotl_version() in SUPPORTED:
        return
    names = " and ".join(f"{a}.{b}" for a, b in SUPPORTED)
    msg = (f"fastaxo's Axolotl plugin supports axolotl {names}; this is axolotl "
           f"{getattr(_axolotl, '__version__', '?')}. Install a supported one (pip install "
           "'fastaxo[axolotl]' picks it for this Python), or upgrade fastaxo.")
    if os.environ.get("FASTAXO_AXOLOTL_VERSION_CHECK", "1") == "0":
        say_once("version", msg + " (FASTAXO_AXOLOTL_VERSION_CHECK=0: going on anyway)")
        return
    raise UnsupportedVersionError(msg)


# ---------------------------------------------------------------------------------------------
# the plugin

def _is_listed(cfg: Any) -> bool:
    plugins = (cfg.get("plugins") if hasattr(cfg, "get") else None) or []
    return any(str(p).strip() == PLUGIN_NAME for p in plugins)


def _any_key(cfg: Any) -> bool:
    return any(str(k).startswith("fastaxo_") and v is not None for k, v in dict(cfg).items())


class FastaxoPlugin(BasePlugin):
    """Axolotl plugin: fastaxo's dedupe, packer, collator, streaming loader and loader health.

    Listed under ``plugins:`` it turns on dedupe, packing, chat-template tokenization, collator
    and loader health (each
    ``fastaxo_*: false`` switches one off); ``fastaxo_streaming: true`` adds the streaming
    loader. If it is loaded without being listed (an ``axolotl.plugins`` entry point), every
    hook does nothing unless a ``fastaxo_*`` key is set.
    """

    def __init__(self):
        super().__init__()
        self.active = False
        self.settings = Settings()

    # -- config ---------------------------------------------------------------------------
    def get_input_args(self) -> str:
        return "fastaxo.integrations.axolotl.FastaxoArgs"

    def register(self, cfg: dict):
        self.active = _is_listed(cfg) or _any_key(cfg)
        if not self.active:
            return
        check_axolotl_version()
        from fastaxo.integrations.axolotl.prepacked import check_prepacked

        # before anything is patched: a refused config changes nothing
        prepacked = check_prepacked(cfg)
        self.settings = Settings.from_cfg(cfg)
        use(self.settings)
        names = ("dedupe", "packing", "chat_template", "completion", "length_filter")
        parts = [p for p in names if getattr(self.settings, p)]
        # a packed file in prepare's standard layout: Axolotl must take it as tokenized
        done = patch_axolotl(parts + (["prepacked"] if prepacked else []))
        LOG.info("fastaxo %s: plugin active (%s)", fastaxo.__version__, ", ".join(
            [f"{p}={'on' if p in done else 'off'}" for p in names]
            + [f"collator={'on' if self.settings.collator else 'off'}",
               f"streaming={'on' if self.settings.streaming else 'off'}",
               f"loader_health={'on' if self.settings.loader_health else 'off'}"]))
        report("register", axolotl=getattr(_axolotl, "__version__", None),
               fastaxo=fastaxo.__version__, patched=done, settings=self.settings.__dict__)

    def on_config_validation_error(self, cfg: dict):
        unpatch_axolotl()
        self.active = False

    def post_train_unload(self, cfg):
        if self.active:
            unpatch_axolotl()
        return None

    # -- data -----------------------------------------------------------------------------
    def load_datasets(self, cfg, preprocess: bool = False):
        if not (self.active and self.settings.streaming):
            return None
        from fastaxo.integrations.axolotl.stream import load_datasets_streaming

        return load_datasets_streaming(cfg, preprocess, self.settings, say_once=say_once,
                                       report=report)

    def get_collator_cls_and_kwargs(self, cfg, is_eval: bool = False):
        if not self.active:
            return None
        from fastaxo.integrations.axolotl.prepacked import collator_for_prepacked

        # a fastaxo-packed dataset: its sequences kept apart whatever fastaxo_collator says
        got = collator_for_prepacked(cfg, is_eval, say_once=say_once)
        if got is not None or not self.settings.collator:
            return got
        from fastaxo.integrations.axolotl.collator import collator_for

        return collator_for(cfg, is_eval, self.settings, say_once=say_once)

    # -- training -------------------------------------------------------------------------
    def add_callbacks_post_trainer(self, cfg, trainer):
        if not (self.active and self.settings.loader_health):
            return []
        from fastaxo.integrations.axolotl.health import LoaderHealthCallback

        cb = LoaderHealthCallback(trainer, cfg, self.settings, report=report)
        return [cb]


__all__ = ["FastaxoPlugin", "FastaxoArgs", "Settings", "SeenHashes", "PackedBatches",
           "patch_axolotl", "unpatch_axolotl", "patched", "check_axolotl_version", "report",
           "select_rows", "make_deduplicate_dataset", "make_pack_parallel",
           "make_generate_batches", "FastaxoCollator", "LoaderHealthCallback"]


def __getattr__(name: str):
    if name == "FastaxoCollator":
        from fastaxo.integrations.axolotl.collator import FastaxoCollator

        return FastaxoCollator
    if name == "LoaderHealthCallback":
        from fastaxo.integrations.axolotl.health import LoaderHealthCallback

        return LoaderHealthCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
