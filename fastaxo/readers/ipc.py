"""The Arrow IPC decoders: the file format (random access, units are record batches) and the
stream format (HF save_to_disk, the datasets cache: units are message byte positions)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.ipc as ipc

from fastaxo._core.arrow import check_structure
from fastaxo.errors import FileFormatError, InvalidInputError
from fastaxo.readers.options import OPEN_ERRORS, Options, file_error, one_line, project
from fastaxo.readers.sources import format_hint

__all__ = ["IpcFileDecoder", "IpcStreamDecoder", "checked", "open_ipc", "position_error"]

_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"


class IpcFileDecoder:
    """Arrow IPC file (random access): units are record batches."""

    def __init__(self, path: str, opts: Options):
        self.path, self.opts = path, opts
        try:
            self.fh = pa.OSFile(path)  # never a memory map: see BatchReader's memory_map
            self.reader = ipc.open_file(self.fh, memory_pool=opts.pool)
            self.full_schema = self.reader.schema
        except OPEN_ERRORS as e:
            raise _open_error(path, "footer", e, "cannot open as an Arrow IPC file: ") from None
        self.schema = project(self.full_schema, opts.columns, path)
        self.num_rows = None  # per-batch counts would need the bodies: shard by stride

    def pieces(self, unit: int | None, offset: int) -> Iterator[tuple[pa.RecordBatch, int, int]]:
        nb = self.reader.num_record_batches
        if (unit or 0) > nb or (offset and (unit or 0) == nb):
            raise position_error(self.path, "unit", unit, f"is past its {nb} record batches")
        for i in range(unit or 0, nb):
            try:
                b = self.reader.get_batch(i)
            except (pa.ArrowException, OSError) as e:
                raise file_error(self.path, f"record batch {i} of {nb}", e) from None
            if i == (unit or 0) and offset:
                if offset >= b.num_rows:
                    raise position_error(self.path, "offset", offset,
                                         f"is past the {b.num_rows:,} rows of record batch {i}")
                b = b.slice(offset)
            if self.opts.columns is not None:
                b = b.select(list(self.opts.columns))
            yield checked(b, self.path, f"record batch {i} of {nb}"), i + 1, 0

    def close(self) -> None:
        self.fh.close()


class IpcStreamDecoder:
    """Arrow IPC stream (HF save_to_disk, the datasets cache): units are byte positions of
    messages, so a resume seeks instead of re-reading. With dictionary columns, units are
    batch numbers and a resume reads (without keeping) the batches before."""

    def __init__(self, path: str, opts: Options):
        self.path, self.opts = path, opts
        try:
            self.fh = pa.OSFile(path)
            self.size = self.fh.size()
            reader = ipc.open_stream(self.fh, memory_pool=opts.pool)
            self.full_schema = reader.schema
        except OPEN_ERRORS as e:
            raise _open_error(path, "schema", e, "cannot open as an Arrow IPC stream: ") from None
        self.schema = project(self.full_schema, opts.columns, path)
        self.num_rows = None
        self.by_message = not any(pa.types.is_dictionary(f.type) for f in self.full_schema)

    def _check_end(self, where: str) -> None:
        # A stream cut at a message boundary reads as a shorter stream; the end-of-stream
        # marker tells the two apart.
        if self.size >= 8:
            self.fh.seek(self.size - 8)
            if self.fh.read(8) == _EOS:
                return
        raise FileFormatError(f"{self.path} ({where}): the stream ends without its end-of-stream "
                              f"marker: truncated, or still being written", self.path, where)

    def pieces(self, unit: int | None, offset: int) -> Iterator[tuple[pa.RecordBatch, int, int]]:
        cols = list(self.opts.columns) if self.opts.columns is not None else None
        if not self.by_message:
            yield from self._pieces_by_batch(unit or 0, offset, cols)
            return
        self.fh.seek(0)
        pos = 0
        if unit and unit > self.size:
            raise position_error(self.path, "unit", unit, f"is past its {self.size:,} bytes")
        try:
            mr = ipc.MessageReader.open_stream(self.fh)
            mr.read_next_message()  # schema
            if unit:
                if unit < self.fh.tell():
                    raise position_error(self.path, "unit", unit, "is inside its schema")
                self.fh.seek(unit)
                mr = ipc.MessageReader.open_stream(self.fh)
            first = True
            while True:
                pos = self.fh.tell()
                try:
                    msg = mr.read_next_message()
                except StopIteration:
                    break
                except (pa.ArrowException, OSError) as e:
                    if first and unit:  # a resume position that is not a message's start
                        raise position_error(self.path, "unit", unit, "is not the start of a "
                                             f"message ({one_line(e)})") from None
                    raise
                if msg.type != "record batch":
                    continue
                b = ipc.read_record_batch(msg, self.full_schema)
                if first and offset:
                    if offset >= b.num_rows:
                        raise position_error(self.path, "offset", offset, f"is past the "
                                             f"{b.num_rows:,} rows of the message at byte {pos}")
                    b = b.slice(offset)
                first = False
                if cols is not None:
                    b = b.select(cols)
                yield checked(b, self.path, f"message at byte {pos}"), self.fh.tell(), 0
        except (pa.ArrowException, OSError) as e:
            raise file_error(self.path, f"message at byte {pos}", e) from None
        if first and offset:
            raise position_error(self.path, "offset", offset, f"is past the rows after byte {unit}")
        self._check_end(f"after byte {pos}")

    def _pieces_by_batch(self, unit: int, offset: int, cols):
        self.fh.seek(0)
        i = 0
        try:
            reader = ipc.open_stream(self.fh, memory_pool=self.opts.pool)
            while True:
                try:
                    b = reader.read_next_batch()
                except StopIteration:
                    break
                i += 1
                if i - 1 < unit:
                    continue
                if i - 1 == unit and offset:
                    if offset >= b.num_rows:
                        raise position_error(self.path, "offset", offset, f"is past the "
                                             f"{b.num_rows:,} rows of record batch {unit}")
                    b = b.slice(offset)
                b = b.select(cols) if cols is not None else b
                yield checked(b, self.path, f"record batch {i}"), i, 0
        except (pa.ArrowException, OSError) as e:
            raise file_error(self.path, f"record batch {i}", e) from None
        if i < unit or (i == unit and offset):
            raise position_error(self.path, "unit", unit, f"is past its {i} record batches")
        self._check_end(f"after record batch {i}")

    def close(self) -> None:
        self.fh.close()


def _open_error(path: str, where: str, err: BaseException, what: str) -> FileFormatError:
    hint = format_hint(path, "arrow")  # not Arrow at all: what it is, and what to pass
    if hint and not isinstance(err, UnicodeDecodeError):
        return FileFormatError(f"{path}: {what.rstrip(': ')}{hint}", path, where)
    return file_error(path, where, err, what)


def position_error(path: str, field: str, value: object, what: str) -> InvalidInputError:
    """A resume state's position that does not fit the file, found when the file is read."""
    return InvalidInputError(f"state: position {field} {value} {what} in {path}; the state was "
                             "damaged or edited, or saved for another file")


def open_ipc(path: str, opts: Options):
    with open(path, "rb") as fh:
        magic = fh.read(6)
    return IpcFileDecoder(path, opts) if magic == b"ARROW1" else IpcStreamDecoder(path, opts)


def checked(batch: pa.RecordBatch, path: str, where: str) -> pa.RecordBatch:
    """``batch`` after checking what could make a reader of it step outside its buffers:
    pyarrow takes an IPC file's buffers as they are, so a corrupt or crafted file would
    otherwise reach the kernels (the checks are O(1) per column and one vectorised pass over
    each offsets array)."""
    for name, col in zip(batch.schema.names, batch.columns):
        try:
            check_structure(col, f"column {name!r}")
        except InvalidInputError as e:
            raise FileFormatError(f"{path} ({where}): {e}: the file is corrupt", path,
                                  where) from None
    return batch
