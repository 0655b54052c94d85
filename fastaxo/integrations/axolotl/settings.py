"""What every part of the Axolotl plugin shares: its :class:`Settings` (from the YAML keys),
the settings in force (:func:`current`, :func:`use`), messages said once in the log, and the
JSON-lines report. Imports neither axolotl nor the other parts of the plugin."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastaxo._core.threads import forked_child, resolve_num_threads
from fastaxo.errors import FastaxoError

__all__ = ["LOG", "Settings", "count_rows", "current", "report", "row_counts", "say_once", "use"]

LOG = logging.getLogger("fastaxo.axolotl")


@dataclass(frozen=True)
class Settings:
    dedupe: bool = True
    packing: bool = True
    chat_template: bool = True
    completion: bool = True
    length_filter: bool = True
    collator: bool = True
    streaming: bool = False
    loader_health: bool = True
    batch_rows: int = 8192
    prefetch_bytes: int = 64 << 20
    threads: int | None = None
    peak_flops: float | None = None
    report: str | None = None

    @classmethod
    def from_cfg(cls, cfg: Any) -> Settings:
        get = cfg.get if hasattr(cfg, "get") else (lambda k, d=None: getattr(cfg, k, d))

        def flag(key: str, default: bool) -> bool:
            v = get(key)
            return default if v is None else bool(v)

        return cls(
            dedupe=flag("fastaxo_dedupe", True),
            packing=flag("fastaxo_packing", True),
            chat_template=flag("fastaxo_chat_template", True),
            completion=flag("fastaxo_completion", True),
            length_filter=flag("fastaxo_length_filter", True),
            collator=flag("fastaxo_collator", True),
            streaming=flag("fastaxo_streaming", False),
            loader_health=flag("fastaxo_loader_health", True),
            batch_rows=int(get("fastaxo_batch_rows") or 8192),
            prefetch_bytes=int(get("fastaxo_prefetch_bytes")
                               if get("fastaxo_prefetch_bytes") is not None else 64 << 20),
            threads=get("fastaxo_threads"),
            peak_flops=get("fastaxo_peak_flops"),
            report=get("fastaxo_report"),
        )


_current = Settings()
_said: set[str] = set()
_report_lock = threading.Lock()
_counts: dict[str, Counter[str]] = {}
_counts_lock = threading.Lock()


def current() -> Settings:
    """The settings in force: the plugin's (from the YAML) or ``patched(**settings)``'s."""
    return _current


def use(settings: Settings) -> Settings:
    """Put ``settings`` in force; returns the ones it replaces."""
    global _current
    old, _current = _current, settings
    return old


def say_once(key: str, msg: str, level: int = logging.WARNING) -> None:
    if key not in _said:
        _said.add(key)
        LOG.log(level, "fastaxo: %s", msg)


def count_rows(event: str, rows: int, fast: int, fallbacks: dict[str, int]) -> None:
    """A batch of ``event`` (e.g. "completion") done: ``fast`` of its ``rows`` by fastaxo,
    ``fallbacks`` (reason -> rows) by Axolotl's own code. Each reason is said once in the log,
    the rows are counted (:func:`row_counts`) and the batch is one report line."""
    for reason in fallbacks:
        say_once(f"{event}-fallback-{reason}", f"{event}: rows go to Axolotl's own "
                 f"tokenization: {reason} (each such row is counted, see fastaxo_report)")
    with _counts_lock:
        c = _counts.setdefault(event, Counter())
        c["fast"] += fast
        for reason, n in fallbacks.items():
            c[f"fallback: {reason}"] += n
    report(event, rows=rows, fast=fast, fallbacks=dict(fallbacks))


def row_counts(event: str) -> dict[str, int]:
    """Rows of ``event`` counted in this process so far: ``fast``, and ``fallback: <reason>``
    per reason."""
    with _counts_lock:
        return dict(_counts.get(event, ()))


def report(event: str, path: str | None = None, **fields: Any) -> None:
    """Append ``{"event": event, **fields}`` to ``path`` (default: the ``fastaxo_report`` file),
    if one is set."""
    path = path or _current.report or os.environ.get("FASTAXO_AXOLOTL_REPORT")
    if not path:
        return
    # kernel_threads: what a kernel called here with the default runs on (1 in a forked
    # DataLoader worker, see fastaxo._core.threads)
    try:
        kt: int | None = resolve_num_threads(_current.threads)
    except FastaxoError:
        kt = None
    rec = {"event": event, "pid": os.getpid(), "time": time.time(),
           "forked_child": forked_child(), "kernel_threads": kt, **fields}
    line = json.dumps(rec, default=_jsonable) + "\n"
    with _report_lock, open(path, "a") as fh:  # O_APPEND: whole lines from any process
        fh.write(line)


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
