"""Progress of long work on stderr: a bar on a terminal (tqdm's when it is installed), a plain
line every few seconds otherwise (a log file, CI, a pipe), with or without tqdm."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, TextIO

__all__ = ["Progress", "interactive"]

#: seconds before the first plain line, and between two
FIRST_LINE = 1.0
EVERY = 5.0


def interactive() -> bool:
    """Whether a person is watching: stderr is a terminal, or Python runs interactively (the
    REPL, ``python -i``, IPython, Jupyter)."""
    try:
        if sys.stderr is not None and sys.stderr.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    return hasattr(sys, "ps1") or bool(sys.flags.interactive) or "ipykernel" in sys.modules


def _count(n: float) -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.1f}{suffix}"
    return f"{n:.0f}"


def _amount(n: float, unit: str) -> str:
    """A count in ``unit``: bytes as MB / GB (decimal, as tqdm's unit_scale), the rest whole."""
    if unit == "bytes":
        return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"
    return f"{int(n):,}"


class Progress:
    """Counts done out of ``total`` (None: unknown) ``unit`` for ``desc``.

    On a terminal: tqdm's bar if tqdm is installed, else one line rewritten in place. Anywhere
    else: a line ``desc: done/total unit (pct), rate, elapsed, left, stage`` after ``first``
    seconds and then every ``every`` seconds, so a redirected run shows it is alive. A thread
    of its own writes that line (or refreshes the bar) on time even while nothing is counted,
    so a long stage (:meth:`stage`: "tokenizing 3,000/8,192 rows of the batch") shows itself
    as it goes. ``unit="bytes"`` shows MB / GB."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "rows", *,
                 stream: TextIO | None = None, first: float = FIRST_LINE,
                 every: float = EVERY):
        self.desc, self.total, self.unit = desc, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.postfix = ""
        self.stage_text = ""
        self.t0 = time.monotonic()
        self.next_at = self.t0 + first
        self.every = every
        self.lines = 0
        self._bar: Any = None
        self._tty = _isatty(self.stream)
        self._lock = threading.Lock()
        if self._tty and not os.environ.get("FASTAXO_NO_TQDM"):
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, unit="B" if unit == "bytes" else f" {unit}",
                                 unit_scale=True, file=self.stream, dynamic_ncols=True,
                                 desc=desc, mininterval=0.5)
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="fastaxo-progress", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        period = 0.5 if self._tty else min(self.every, 1.0)
        while not self._stop.wait(period):
            self.update(0)

    def _shown(self) -> str:
        return ", ".join(x for x in (self.stage_text, self.postfix) if x)

    def stage(self, text: str) -> None:
        """What the work is doing now (shown after the counts; "" when it is only counting)."""
        self.stage_text = text
        self.update(0)

    def update(self, n: int, postfix: str | None = None) -> None:
        with self._lock:
            self.done += int(n)
            if postfix is not None:
                self.postfix = postfix
            if self._bar is not None:
                self._bar.set_postfix_str(self._shown(), refresh=False)
                self._bar.update(int(n))
                if not n:
                    self._bar.refresh()
                return
            now = time.monotonic()
            if now >= self.next_at:
                self.next_at = now + (0.5 if self._tty else self.every)
                self._write(now, final=False)

    def _write(self, now: float, final: bool) -> None:
        elapsed = max(now - self.t0, 1e-9)
        rate = self.done / elapsed
        size = self.unit == "bytes"
        parts = [f"{self.desc}: {_amount(self.done, self.unit)}"
                 + (f"/{_amount(self.total, self.unit)}" if self.total else "")
                 + ("" if size else f" {self.unit}")]
        if self.total:
            parts[0] += f" ({100 * self.done / self.total:.1f}%)"
        parts.append(f"{_amount(rate, self.unit)}/s" if size
                     else f"{_count(rate)} {self.unit}/s")
        parts.append(f"{elapsed:.0f} s")
        if self.total and rate > 0 and not final:
            parts.append(f"~{max(self.total - self.done, 0) / rate:.0f} s left")
        if self._shown():
            parts.append(self._shown())
        text = ", ".join(parts)
        try:
            if self._tty:
                self.stream.write("\r" + text + "\x1b[K" + ("\n" if final else ""))
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: progress is not worth an error
            pass
        self.lines += 1

    def close(self) -> None:
        self._stop.set()
        if self._ticker.is_alive() and self._ticker is not threading.current_thread():
            self._ticker.join()
        with self._lock:
            self.stage_text = ""
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            elif self._tty and self.lines:
                self._write(time.monotonic(), final=True)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
