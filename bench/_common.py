"""Shared benchmark plumbing: interleaved timing, medians, peak RSS in a fresh process."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from fastaxo._bench.util import machine_info, machine_short, malloc_trim
from fastaxo._core.proc import reset_peak, status_kib  # noqa: F401 (the bench scripts import them from here)


def machine() -> str:
    """The machine in one line (CPU, cores, RAM, OS, Python), from fastaxo._bench.util."""
    m = machine_info()
    return f"{machine_short(m)}, {m['os']}, {m['python']}"


def interleaved(fns: dict[str, Callable[[], Any]], reps: int, min_time: float = 0.0) -> dict[str, list[float]]:
    """Run each function once per round, `reps` rounds (round-robin), returning wall times."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def child_peak(script: str, args: list[str], timeout: float = 3600) -> dict[str, Any]:
    """Run `script --child args...` in a fresh interpreter; it prints one JSON line last."""
    r = subprocess.run([sys.executable, script, "--child", *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def fmt_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    return "\n".join([line, sep, *body])


class JsonRecorder(list):
    """The records of a run; each is also appended to the --json file as soon as it exists."""

    def __init__(self, path: str | None):
        super().__init__()
        self.path = path
        if path:
            open(path, "w").close()

    def append(self, rec: dict) -> None:
        super().append(rec)
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps(rec) + "\n")


def release_freed_memory() -> None:
    """Return freed heap memory to the OS (glibc malloc_trim), so a peak measured from the
    current RSS is not hidden by memory freed earlier and reused without raising RSS."""
    malloc_trim()


def rows_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a bench over input sizes: --rows, --max-length, --reps, --json."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--rows", default="20000,200000", help="input rows, comma-separated")
    ap.add_argument("--max-length", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None, help="append one JSON record per cell")
    return ap
