"""The streaming reader: sources, format decoders, prefetch and :class:`BatchReader`."""

from fastaxo.readers.reader import (
    BatchReader,
    ReaderStats,
    iter_batches,
    iter_parquet,
    list_column,
    resolve_source,
)

__all__ = ["BatchReader", "ReaderStats", "iter_batches", "iter_parquet", "list_column", "resolve_source"]
