"""prepare's progress with a total for every input: rows when every input says how many it
holds (Parquet footers, data in memory), else bytes of the input files, each file's share
from where its reader is (a Parquet file: its rows read; a text file: the first byte of the
block being read, blocks of ~4 MiB). Compressed text only says its rows (its reader's
position is in the decompressed stream): those runs count rows without a total."""

from __future__ import annotations

import os
from typing import Any

from fastaxo._core.progress import Progress

__all__ = ["Meter"]


class Meter:
    """Counts a prepare pass on ``bar``. ``files``: (path, format, compression) in reading
    order; ``rows``: each file's rows where known (None: unknown)."""

    def __init__(self, files: list[tuple[str, str, str | None]], rows: list[int | None]):
        self.rows = rows
        self.sizes: list[int] | None = None
        total: int | None = None
        unit = "rows"
        if all(r is not None for r in rows):
            total = sum(r or 0 for r in rows)
        elif all(fmt != "memory" and (fmt == "parquet" or comp is None)
                 for _, fmt, comp in files):
            self.sizes = [os.path.getsize(p) for p, _, _ in files]
            total, unit = sum(self.sizes), "bytes"
        self.bar = Progress("fastaxo prepare", total, unit)
        self._file = 0
        self._before = 0  # bytes of the files read before this one

    def start_file(self, fi: int) -> None:
        if self.sizes is not None:
            self._before = sum(self.sizes[:fi])
        self._file = fi

    def batch(self, n: int, reader: Any, rows_in_file: int) -> None:
        """A batch of ``n`` rows read; ``rows_in_file`` rows of this file so far."""
        if self.sizes is None:
            self.bar.update(n)
            return
        size = self.sizes[self._file]
        known = self.rows[self._file]
        if known:
            share = min(rows_in_file / known, 1.0)
        else:
            pos = reader.position
            unit = pos.get("unit")
            share = 1.0 if pos.get("done") else min((unit or 0) / size, 1.0) if size else 1.0
        self.bar.update(max(self._before + int(share * size) - self.bar.done, 0))

    def end_file(self) -> None:
        if self.sizes is not None:
            end = self._before + self.sizes[self._file]
            self.bar.update(max(end - self.bar.done, 0))

    def stage(self, text: str) -> None:
        self.bar.stage(text)

    def update(self, n: int, postfix: str | None = None) -> None:
        self.bar.update(n, postfix)

    def close(self) -> None:
        self.bar.close()
