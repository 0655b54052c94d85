"""Loader health, measured inside training: is the trainer waiting on data?

Imported only by the Axolotl plugin (it imports transformers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback

from fastaxo._core.proc import io_counters, status_kib

LOG = logging.getLogger("fastaxo.axolotl")


def _tokens(batch: Any) -> tuple[int, int]:
    """(positions, real tokens) of a collated batch: real = non-zero attention_mask where the
    batch has one, else positions whose label or position says they are not padding."""
    ids = batch.get("input_ids") if hasattr(batch, "get") else None
    if ids is None:
        return 0, 0
    n = int(ids.numel()) if hasattr(ids, "numel") else int(getattr(ids, "size", 0))
    mask = batch.get("attention_mask")
    if mask is not None and hasattr(mask, "count_nonzero"):
        return n, int(mask.count_nonzero())
    return n, n


class LoaderHealthCallback(TrainerCallback):
    """Per logging step: ``fastaxo/stall_fraction`` (time the training loop waited for the next
    batch over the step wall time), ``fastaxo/tokens_per_s`` (non-padding tokens where the batch
    has a mask), ``fastaxo/rss_mib``, ``fastaxo/vm_peak_mib``, ``fastaxo/read_mib`` (disk bytes
    read since the last log) and, with ``fastaxo_peak_flops``, ``fastaxo/mfu`` from 6·N FLOPs
    per token (8·N with gradient checkpointing). A summary table at the end of training.

    The wait is measured by wrapping the trainer's ``get_batch_samples`` (the one place the
    training loop pulls batches from its dataloader), so it includes collation in the main
    process and any wait on DataLoader workers, and nothing else.
    """

    def __init__(self, trainer: Any, cfg: Any, settings: Any,
                 report: Callable[..., None] | None = None):
        self.report = report or (lambda *a, **k: None)
        self.peak_flops = settings.peak_flops
        self.n_params = None
        self.flops_per_token = None
        self.wait = 0.0
        self.positions = 0
        self.tokens = 0
        self.batches = 0
        self.t_start: float | None = None
        self.t_last: float | None = None
        self.mark = (0.0, 0, 0)
        self.io_last = io_counters().get("read_bytes")
        self.io_start = self.io_last
        self.rows: list[dict[str, float]] = []
        self._wrap(trainer)
        model = getattr(trainer, "model", None)
        if model is not None and hasattr(model, "parameters"):
            self.n_params = sum(p.numel() for p in model.parameters())
            gc = bool(getattr(getattr(trainer, "args", None), "gradient_checkpointing", False)
                      or (cfg.get("gradient_checkpointing") if hasattr(cfg, "get") else False))
            self.flops_per_token = (8 if gc else 6) * self.n_params

    def _wrap(self, trainer: Any) -> None:
        from fastaxo.integrations.axolotl.patches import instance_method

        inner = instance_method("health", trainer, "get_batch_samples")
        if inner is None:
            return
        cb = self

        def get_batch_samples(epoch_iterator, num_batches, device):
            t0 = time.perf_counter()
            out = inner(epoch_iterator, num_batches, device)
            cb.wait += time.perf_counter() - t0
            for b in out[0]:
                p, t = _tokens(b)
                cb.positions += p
                cb.tokens += t
                cb.batches += 1
            return out

        trainer.get_batch_samples = get_batch_samples

    def on_train_begin(self, args, state, control, **kwargs):
        self.t_start = self.t_last = time.perf_counter()

    def _interval(self) -> dict[str, float]:
        now = time.perf_counter()
        wait, tokens, batches = self.mark
        dt = max(now - (self.t_last or now), 1e-9)
        d_wait, d_tok = self.wait - wait, self.tokens - tokens
        io = io_counters().get("read_bytes")
        row = {
            "stall_fraction": d_wait / dt,
            "tokens_per_s": d_tok / dt,
            "rss_mib": (status_kib("VmRSS") or 0) / 1024,
            "vm_peak_mib": (status_kib("VmPeak") or 0) / 1024,
            "read_mib": (((io - self.io_last) / 2**20)
                         if io is not None and self.io_last is not None else float("nan")),
            "batches": self.batches - batches,
            "seconds": dt,
        }
        if self.peak_flops and self.flops_per_token:
            row["mfu"] = d_tok * self.flops_per_token / dt / self.peak_flops
        self.t_last, self.io_last, self.mark = now, io, (self.wait, self.tokens, self.batches)
        return row

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.t_start is None or logs is None or "train_runtime" in logs:
            return
        row = self._interval()
        row["step"] = state.global_step
        self.rows.append(row)
        for k in ("stall_fraction", "tokens_per_s", "rss_mib", "vm_peak_mib", "read_mib", "mfu"):
            if k in row:
                logs[f"fastaxo/{k}"] = round(float(row[k]), 6)

    def summary(self) -> dict[str, Any]:
        total = max(time.perf_counter() - (self.t_start or time.perf_counter()), 1e-9)
        io = io_counters().get("read_bytes")
        out = {
            "seconds": total,
            "wait_seconds": self.wait,
            "stall_fraction": self.wait / total,
            "batches": self.batches,
            "tokens": self.tokens,
            "positions": self.positions,
            "tokens_per_s": self.tokens / total,
            "rss_mib": (status_kib("VmRSS") or 0) / 1024,
            "vm_peak_mib": (status_kib("VmPeak") or 0) / 1024,
            "peak_rss_mib": (status_kib("VmHWM") or 0) / 1024,
            "read_mib": (((io - self.io_start) / 2**20)
                         if io is not None and self.io_start is not None else None),
        }
        if self.n_params:
            out["params"] = self.n_params
        if self.peak_flops and self.flops_per_token:
            out["mfu"] = self.tokens * self.flops_per_token / total / self.peak_flops
        return out

    def on_train_end(self, args, state, control, **kwargs):
        if self.t_start is None:
            return
        s = self.summary()
        lines = ["fastaxo loader health (whole run)",
                 f"  {'wall time':24s} {s['seconds']:12.2f} s",
                 f"  {'waiting for batches':24s} {s['wait_seconds']:12.3f} s  "
                 f"({100 * s['stall_fraction']:.2f}% stall)",
                 f"  {'batches':24s} {s['batches']:12d}",
                 f"  {'tokens (non-padding)':24s} {s['tokens']:12d}  "
                 f"({s['tokens_per_s']:,.0f} tokens/s)",
                 f"  {'padding':24s} {100 * (1 - s['tokens'] / max(s['positions'], 1)):11.2f} %",
                 f"  {'RSS / VmHWM / VmPeak':24s} {s['rss_mib']:,.0f} / {s['peak_rss_mib']:,.0f} / "
                 f"{s['vm_peak_mib']:,.0f} MiB"]
        if s.get("read_mib") is not None:
            lines.append(f"  {'disk read':24s} {s['read_mib']:12.1f} MiB")
        if "mfu" in s:
            lines.append(f"  {'MFU':24s} {100 * s['mfu']:11.2f} %  ({s['params']:,} params)")
        LOG.info("\n".join(lines))
        self.report("loader_health", **s, intervals=self.rows)
