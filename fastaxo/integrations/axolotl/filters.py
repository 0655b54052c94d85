"""Axolotl's length filter (``_drop_outside_range``: rows outside ``[min_sample_len,
sequence_len]`` dropped, or an error for an over-long row) from the Arrow offsets.

Axolotl runs ``dataset.filter`` over every column of every row as Python lists to read one
length per row, and the filter's indices mapping makes saving the dataset copy it row by row.
Here the lengths come from ``input_ids``' offsets, the same rows are kept in the same order
(``Dataset.select``; with every row kept, the dataset itself), the same error is raised for the
first over-long row and the same count is logged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from fastaxo._core import arrow
from fastaxo.integrations.axolotl.settings import current

__all__ = ["input_lengths", "make_drop_outside_range"]


def input_lengths(dataset: Any) -> np.ndarray | None:
    """Tokens per row of ``dataset`` (in its row order, through an indices mapping), from the
    Arrow offsets of ``input_ids``; None when that column is not a list column."""
    if "input_ids" not in getattr(dataset, "column_names", ()):
        return None
    col = dataset.data.table.column("input_ids")
    t = col.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return None
    parts = [np.diff(arrow.offsets_of(c, pa.types.is_large_list(t))).astype(np.int64, copy=False)
             for c in col.chunks]
    lens = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if dataset._indices is not None:
        idx = [arrow.fixed_view(c) for c in dataset._indices.column(0).chunks]
        lens = lens[np.concatenate(idx) if idx else np.zeros(0, np.int64)]
    return lens


def make_drop_outside_range(original: Any) -> Any:
    """``axolotl.utils.data.utils._drop_outside_range`` from the offsets (Axolotl's own for a
    streaming dataset or one without a list ``input_ids``)."""

    def drop_outside_range(dataset: Any, max_len: int, min_len: int | None,
                           raise_on_long: bool, filter_kwargs: dict) -> tuple[Any, int]:
        from datasets import Dataset

        lens = input_lengths(dataset) if (current().length_filter
                                          and isinstance(dataset, Dataset)) else None
        if lens is None:
            return original(dataset, max_len, min_len, raise_on_long, filter_kwargs)
        from axolotl.utils.data import utils as du

        lo = min_len or 2  # filter_sequences_by_length's default
        if raise_on_long:
            over = np.flatnonzero(lens > max_len)
            if len(over):
                raise ValueError(f"Sequence encountered with {int(lens[over[0]])} tokens, which "
                                 f"exceeds the maximum {max_len}.")
        keep = (lens >= lo) & (lens <= max_len)
        prior = len(dataset)
        if not keep.all():
            dataset = dataset.select(np.flatnonzero(keep))
        dropped = 0
        if not raise_on_long and prior:
            dropped = prior - len(dataset)
            if dropped > 0:
                du.LOG.info(f"Dropped {dropped} sequences outside valid range "
                            f"([{min_len}, {max_len}])")
        return dataset, dropped

    drop_outside_range.__wrapped__ = original  # type: ignore[attr-defined]
    return drop_outside_range
