"""A bounded-memory streaming reader: Parquet, Arrow IPC (file and stream), JSON Lines,
CSV/TSV and plain text, compressed or not.

``iter_batches(source, ...)`` returns a :class:`BatchReader`: an iterator of pyarrow
RecordBatches of exactly ``batch_rows`` rows (the last may be shorter), read by a
background thread with a bounded read-ahead, shardable across ranks, optionally shuffled
within a bounded seeded window, resumable from ``state_dict()``, and measured
(:class:`ReaderStats`: rows/s, disk bytes, RSS, consumer stall).

The pipeline, all of it inside the prefetch thread::

    files -> pieces (decoded slices, each with the cursor before and after it)
          -> shard (contiguous row ranges for Parquet, rows g % world_size == rank otherwise)
          -> windows (one piece each, or >= shuffle_buffer rows permuted with a seeded RNG)
          -> exact batches of batch_rows, each with the state that resumes right after it
          -> bounded queue (depth and bytes) -> the consumer

A *cursor* ``(file, unit, offset, row)`` names the next row to read: ``unit`` is a Parquet
row group, an Arrow IPC file's record batch, an IPC stream message's byte position, or a
text block's byte position; ``offset`` rows into it; ``row`` its index in the whole source
(before sharding). Pieces start and end at deterministic places, so reading again from a
cursor reproduces the same pieces; the saved state is ``(window start cursor, window
number, rows of that window already delivered)``.
"""

from fastaxo.readers.batch_reader import (
    BatchReader,
    ReaderStats,
    iter_batches,
    iter_parquet,
    list_column,
)
from fastaxo.readers.sources import FORMATS, resolve_source

__all__ = ["BatchReader", "ReaderStats", "iter_batches", "iter_parquet", "list_column", "FORMATS",
           "resolve_source"]
