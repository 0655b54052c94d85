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

__all__ = ["OPEN_ERRORS", "Options", "file_error", "one_line", "project", "resolve_pool"]


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


def one_line(err: BaseException) -> str:
    """``err``'s message on one line: pyarrow's can span lines (a cause on the next line, or a
    C++ backtrace in debug builds): its first three non-empty lines, joined."""
    lines = [x.strip() for x in str(err).splitlines() if x.strip()]
    return "; ".join(lines[:3]) or type(err).__name__


# What opening a file and reading its schema or footer raises when the file is damaged or is
# not its format: pyarrow's errors, OSError (I/O), and ValueError (UnicodeDecodeError: pyarrow
# decodes column names as UTF-8 in Python).
OPEN_ERRORS = (pa.ArrowException, OSError, ValueError)


def file_error(path: str, where: str | None, err: BaseException, what: str = "") -> FileFormatError:
    loc = f" ({where})" if where else ""
    if isinstance(err, UnicodeDecodeError):
        return FileFormatError(
            f"{path}{loc}: {what}a column name or other text in its metadata is not valid UTF-8 "
            f"({err.reason} at byte {err.start}); rewrite the file with UTF-8 column names",
            path, where)
    return FileFormatError(f"{path}{loc}: {what}{one_line(err)}", path, where)


def _undecodable_name(fields: list[pa.Field]) -> UnicodeDecodeError | None:
    """The error of the first field name (nested ones included) that is not UTF-8, or None."""
    while fields:
        f = fields.pop()
        try:
            f.name  # noqa: B018 (decoding it is the check)
        except UnicodeDecodeError as e:
            return e
        t = f.type
        if pa.types.is_struct(t) or pa.types.is_union(t):
            fields.extend(t.field(i) for i in range(t.num_fields))
        elif pa.types.is_map(t):
            fields.extend((t.key_field, t.item_field))
        elif hasattr(t, "value_field"):  # the list types
            fields.append(t.value_field)
    return None


def project(schema: pa.Schema, columns: Sequence[str] | None, path: str) -> pa.Schema:
    """``schema`` reduced to ``columns`` (None: all), after checking that every name in it
    decodes (pyarrow decodes names lazily: a non-UTF-8 one would raise mid-read)."""
    bad = _undecodable_name(list(schema))
    if bad is not None:
        raise file_error(path, "schema", bad) from None
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


