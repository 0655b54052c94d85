"""The JSON Lines depth check in NumPy: the twin of ``_pack.json_too_deep`` (csrc/fx_json.h
states the rules), the test oracle and the fallback without the extension. Whole-array
passes, no Python loop over bytes: one pass picks the bytes the rules act on (a few percent
of a block of text), the rest works on those."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["json_too_deep"]

_SPECIAL = np.zeros(256, dtype=bool)
_SPECIAL[list(b'\n"\\[]{}')] = True


def json_too_deep(block: Any, limit: int) -> int:
    """The 0-based index of the first line of ``block`` whose depth exceeds ``limit``, or -1."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    a = np.frombuffer(block, dtype=np.uint8)
    pos = np.flatnonzero(_SPECIAL[a])
    if len(pos) == 0:
        return -1
    c = a[pos]
    k = np.arange(len(pos))
    newline = c == 10
    backslash = c == 92
    # escaped: an odd run of backslashes right before (a run is adjacent bytes; it never
    # spans a newline, and only special bytes can be escaped in a way that matters)
    follows = np.zeros(len(pos), dtype=bool)  # element k-1 is the byte right before k
    follows[1:] = pos[1:] == pos[:-1] + 1
    starts_run = backslash & ~(follows & np.concatenate(([False], backslash[:-1])))
    run_start = np.maximum.accumulate(np.where(starts_run, k, 0))
    run_len = np.where(backslash, k - run_start + 1, 0)  # backslashes up to k in its run
    before = np.zeros(len(pos), dtype=np.int64)
    before[1:] = np.where(follows[1:], run_len[:-1], 0)
    escaped = (before & 1).astype(bool) & ~newline
    line = np.cumsum(newline) - newline  # the line each byte is on
    starts_line = np.concatenate(([True], newline[:-1]))
    first_of_line = np.maximum.accumulate(np.where(starts_line, k, 0))  # its line's first

    def within_line(counts: np.ndarray) -> np.ndarray:
        """Inclusive running sums of ``counts`` restarted at every line."""
        s = np.cumsum(counts)
        return s - (s - counts)[first_of_line]

    quote = (c == 34) & ~escaped
    # in a string: an odd number of quotes before the byte on its line
    in_string = ((within_line(quote.astype(np.int64)) - quote) & 1).astype(bool)
    live = ~escaped & ~in_string
    step = (live & ((c == 91) | (c == 123))).astype(np.int64) - (live & ((c == 93) | (c == 125)))
    deep = np.flatnonzero(within_line(step) > limit)
    return int(line[deep[0]]) if len(deep) else -1
