"""What every file decoder of the reader shares: the read options (:class:`Options`), the
memory pool decoded batches live in, and the helpers that name a file in errors and project
its schema to the requested columns."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from fastaxo.errors import ColumnNotFoundError, FileFormatError, InvalidInputError

__all__ = ["Options", "file_error", "project", "resolve_pool"]


@dataclass(frozen=True)
class Options:
    """The reader's options every decoder reads with (one set per BatchReader)."""

    columns: tuple[str, ...] | None
    batch_rows: int
    decode_rows: int
    use_threads: bool
    block_bytes: int
    buffer_bytes: int
    text_column: str
    pool: Any = None
    memory_map: bool = False


def file_error(path: str, where: str | None, err: BaseException, what: str = "") -> FileFormatError:
    loc = f" ({where})" if where else ""
    return FileFormatError(f"{path}{loc}: {what}{err}", path, where)


def project(schema: pa.Schema, columns: Sequence[str] | None, path: str) -> pa.Schema:
    if columns is None:
        return schema
    missing = [c for c in columns if schema.get_field_index(c) < 0]
    if missing:
        raise ColumnNotFoundError(
            f"columns: {missing} not in {path} (it has {schema.names})"
        )
    return pa.schema([schema.field(c) for c in columns], metadata=schema.metadata)


_DECAY_SET = False


def _set_jemalloc_decay() -> None:
    """Once per process: jemalloc keeps freed pages for FASTAXO_JEMALLOC_DECAY_MS (default
    10000) before returning them. Measured on the 2M-row chat file: peak RSS 170-181 MiB
    against 183-193 MiB with the build's default (pages given back and taken again grow the
    footprint), at the same speed. pyarrow's jemalloc pool is not its default pool, so
    this touches only what fastaxo (or a caller who chose jemalloc) allocates there.
    FASTAXO_JEMALLOC_DECAY_MS=keep leaves the setting alone."""
    global _DECAY_SET
    if _DECAY_SET:
        return
    _DECAY_SET = True
    value = os.environ.get("FASTAXO_JEMALLOC_DECAY_MS", "10000")
    if value == "keep":
        return
    try:
        pa.jemalloc_set_decay_ms(int(value))
    except (ValueError, NotImplementedError, pa.ArrowException):
        pass


def resolve_pool(memory_pool: Any) -> pa.MemoryPool:
    """``"auto"``: jemalloc where this pyarrow has it, else pyarrow's default pool. Measured
    on the 2M-row chat file: with mimalloc (the default pool) the RSS of the decoders keeps
    freed pages and creeps up ~40% over the first few hundred MB read; jemalloc returns them."""
    if isinstance(memory_pool, pa.MemoryPool):
        return memory_pool
    if memory_pool is None or memory_pool == "default":
        return pa.default_memory_pool()
    if memory_pool == "auto":
        try:
            pool = pa.jemalloc_memory_pool()
        except (NotImplementedError, pa.ArrowException):
            return pa.default_memory_pool()
        _set_jemalloc_decay()
        return pool
    raise InvalidInputError(f"memory_pool must be 'auto', 'default', None or a pyarrow.MemoryPool, "
                            f"got {memory_pool!r}")


