"""Where the rows come from: a source (paths, directories, globs, lists of them) resolved to
files in reading order, each with its format and outer compression."""

from __future__ import annotations

import glob as _glob
import hashlib
import json
import os
import stat
from typing import Any

import pyarrow as pa

from fastaxo.errors import InvalidInputError, InvalidTypeError, SourceNotFoundError

__all__ = ["FORMATS", "TEXT_FORMATS", "resolve_source", "detect", "norm_format",
           "split_compression", "stamp", "fingerprint", "changed", "check_readable",
           "looks_like", "format_hint"]

FORMATS = ("parquet", "arrow", "jsonl", "csv", "tsv", "text")
_ALIASES = {"json": "jsonl", "ndjson": "jsonl", "txt": "text", "ipc": "arrow", "feather": "arrow",
            "arrow_stream": "arrow", "pq": "parquet"}
EXTENSIONS = {
    ".parquet": "parquet", ".pq": "parquet", ".parq": "parquet",
    ".arrow": "arrow", ".arrows": "arrow", ".feather": "arrow", ".ipc": "arrow",
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
    ".txt": "text", ".text": "text",
}
COMPRESSION_EXTENSIONS = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd",
                          ".zstd": "zstd", ".lz4": "lz4"}
TEXT_FORMATS = ("jsonl", "csv", "tsv", "text")
# Files a directory may hold that are not data (HF save_to_disk, Spark, Hadoop).
_SKIP_NAMES = {"dataset_info.json", "state.json", "dataset_dict.json", "_SUCCESS", "_metadata",
               "_common_metadata"}


def split_compression(path: str) -> tuple[str, str | None]:
    root, ext = os.path.splitext(path)
    comp = COMPRESSION_EXTENSIONS.get(ext.lower())
    return (root, comp) if comp else (path, None)


def detect(path: str, fmt: str | None, compression: str | None) -> tuple[str, str | None]:
    """(format, compression) of one file: given, or from its name."""
    stem, comp = split_compression(path)
    if compression is not None:
        comp = None if compression in ("none", "") else compression
    if fmt is None:
        ext = os.path.splitext(stem)[1].lower()
        fmt = EXTENSIONS.get(ext)
        if fmt is None:
            raise InvalidInputError(
                f"source: cannot tell the format of {path!r} from its name (known endings: "
                f"{', '.join(sorted(EXTENSIONS))}, optionally + "
                f"{', '.join(sorted(COMPRESSION_EXTENSIONS))}); "
                f"pass format= one of {FORMATS}"
            )
    if comp is not None and fmt not in TEXT_FORMATS:
        raise InvalidInputError(
            f"source: {path!r} is {fmt} with outer {comp} compression; {fmt} files compress "
            f"inside the format (decompress the file first)"
        )
    if comp is not None and not pa.Codec.is_available(comp):
        raise InvalidInputError(
            f"source: {path!r} needs the {comp} codec, which this pyarrow lacks")
    return fmt, comp


def norm_format(fmt: str | None) -> str | None:
    if fmt is None:
        return None
    if not isinstance(fmt, str):
        raise InvalidTypeError(f"format must be a string or None, got {type(fmt).__name__}")
    f = _ALIASES.get(fmt.lower(), fmt.lower())
    if f not in FORMATS:
        raise InvalidInputError(f"format must be one of {FORMATS} (or None to detect), got {fmt!r}")
    return f


def _is_data_name(name: str) -> bool:
    return not (name.startswith((".", "_")) or name in _SKIP_NAMES
                or name.endswith((".crc", ".lock")))


def _denied(path: str, what: str) -> SourceNotFoundError:
    return SourceNotFoundError(
        f"source: permission denied: cannot {what} {path!r} as user {_user()}; give this user "
        "read access (and search access to the directories above it), or run as its owner")


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError, AttributeError):  # no pwd (Windows), or an unnamed uid
        return str(getattr(os, "geteuid", lambda: "?")())


def _stat(path: str) -> os.stat_result | None:
    """``os.stat(path)``; None if nothing is there. A path this user may not reach (a
    directory above it without search permission) is an error saying so, not "no such
    file"."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        raise _denied(path, "reach") from None
    except OSError as e:
        raise SourceNotFoundError(f"source: cannot read {path!r}: {e.strerror or e}") from None


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_readable(path: str) -> None:
    """Refuse what the reader cannot read: not a regular file (a FIFO, a device, a socket: the
    reader seeks, reopens and reads files twice, which a pipe cannot do, and would consume it
    first), or a file this user may not open."""
    st = _stat(path)
    if st is None:
        raise SourceNotFoundError(f"source: no such file or directory: {path!r}")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise InvalidInputError(
            f"source: {path!r} is {kind}, not a regular file: fastaxo reads its inputs by "
            "position (it seeks, reopens them to resume, reads Parquet footers first); save the "
            "data to a file and pass that")
    try:
        os.close(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)))
    except PermissionError:
        raise _denied(path, "read") from None
    except OSError as e:
        raise SourceNotFoundError(f"source: cannot open {path!r}: {e.strerror or e}") from None


def _expand_one(src: Any, fmt: str | None) -> list[str]:
    if not isinstance(src, (str, os.PathLike)):
        raise InvalidTypeError(
            "source must be a path, a directory, a glob or a list of them, got "
            f"{type(src).__name__}"
        )
    path = os.fspath(src)
    st = _stat(path)
    if st is not None and stat.S_ISDIR(st.st_mode):
        state = os.path.join(path, "state.json")
        if os.path.isfile(state):  # HF save_to_disk: the data files, in their order
            try:
                with open(state, encoding="utf-8") as fh:  # JSON: UTF-8, not the locale's
                    files = [d["filename"] for d in json.load(fh)["_data_files"]]
                return [os.path.join(path, f) for f in files]
            except PermissionError:
                raise _denied(state, "read") from None
            except (KeyError, TypeError, ValueError):
                pass
        out = []

        def unlistable(err: OSError) -> None:  # os.walk would skip the directory silently
            if isinstance(err, PermissionError):
                raise _denied(err.filename or path, "list the directory")
            raise SourceNotFoundError(f"source: cannot list {err.filename or path!r}: "
                                      f"{err.strerror or err}")

        for root, dirs, names in os.walk(path, onerror=unlistable):
            dirs[:] = sorted(d for d in dirs if _is_data_name(d))
            for n in sorted(names):
                if not _is_data_name(n):
                    continue
                p = os.path.join(root, n)
                stem, _ = split_compression(n)
                ext_fmt = EXTENSIONS.get(os.path.splitext(stem)[1].lower())
                if ext_fmt is None or (fmt is not None and ext_fmt != fmt):
                    continue
                out.append(p)
        if not out:
            raise SourceNotFoundError(f"source: directory {path!r} holds no {fmt or 'data'} files")
        return sorted(out)
    if st is not None:
        return [path]
    if any(c in path for c in "*?["):
        out = sorted(p for p in _glob.glob(path, recursive=True) if os.path.isfile(p))
        if not out:
            raise SourceNotFoundError(f"source: glob {path!r} matches no file")
        return out
    raise SourceNotFoundError(f"source: no such file or directory: {path!r}")


def resolve_source(source: Any, fmt: str | None = None,
                   compression: str | None = None) -> list[tuple[str, str, str | None]]:
    """The files of ``source`` in reading order, each with its (format, compression).
    Directories and globs are sorted by path; a list keeps its order."""
    fmt = norm_format(fmt)
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    if not items:
        raise InvalidInputError("source: an empty list names no file")
    paths: list[str] = []
    for s in items:
        paths.extend(_expand_one(s, fmt))
    for p in paths:
        check_readable(p)
    files = [(p, *detect(p, fmt, compression)) for p in paths]
    kinds = {f for _, f, _ in files}
    if len(kinds) > 1:
        raise InvalidInputError(
            f"source: files of different formats ({', '.join(sorted(kinds))}); read them "
            f"separately or pass format="
        )
    return files


# --------------------------------------------------------------------------- what a file is

_MAGIC = ((b"PAR1", "a Parquet file", "parquet"), (b"ARROW1", "an Arrow IPC file", "arrow"),
          (b"\xff\xff\xff\xff", "an Arrow IPC stream", "arrow"),
          (b"\x1f\x8b", "gzip-compressed", "gzip"),
          (b"\x28\xb5\x2f\xfd", "zstd-compressed", "zstd"),
          (b"\x04\x22\x4d\x18", "lz4-compressed", "lz4"))


def _is_text(head: bytes) -> bool:
    """UTF-8 without control characters (but tab, newline, CR, form feed)."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # (a character cut by the end of head is still text)
            return False
        text = head[:e.start].decode("utf-8")
    return not any(c < " " and c not in "\t\n\r\f" for c in text)


def looks_like(head: bytes) -> tuple[str, str] | None:
    """(what, format or codec) a file that starts with ``head`` is, or ("text", "text") for
    text; None: neither. A magic counts only in front of binary bytes: a text file may begin
    with "PAR1"."""
    text = _is_text(head)
    if head[:3] == b"BZh" and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):  # bz2's is printable
        return "bz2-compressed", "bz2"
    for magic, what, name in _MAGIC:
        if head.startswith(magic) and not text:
            return what, name
    return ("text", "text") if head and text else None


def format_hint(path: str, fmt: str) -> str:
    """Why ``path`` did not open as ``fmt``, when its first bytes tell ("; it is a Parquet file:
    pass format='parquet'..."), else ""."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return ""
    seen = looks_like(head)
    if seen is None or seen[1] == fmt or (seen[1] == "text" and fmt in TEXT_FORMATS):
        return ""
    what, name = seen
    if name in COMPRESSION_EXTENSIONS.values():
        ending = {"gzip": "gz"}.get(name, name)
        return (f"; the file is {what}: name it with its ending ({os.path.basename(path)}."
                f"{ending}) or pass compression={name!r}")
    if name == "text":
        return (f"; the file is text, not {fmt}: pass its format (format='jsonl', 'csv', 'tsv' "
                "or 'text'; --format on the command line), or none to tell it from the name")
    return (f"; the file is {what}, not {fmt}: pass format={name!r} (--format {name}), or no "
            "format to tell it from the name")


# --------------------------------------------------------------------------- file identity

_EDGE = 64 << 10  # bytes of each end of a file in its fingerprint
_MAX_TAIL = 16 << 20


def stamp(path: str) -> tuple[int, int]:
    """(size, mtime_ns) of ``path``: what tells that a file changed during a read."""
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def changed(path: str, before: tuple[int, int], after: tuple[int, int]) -> str:
    """What differs between two stamps of ``path``, for an error message."""
    if before[0] != after[0]:
        return f"its size went from {before[0]:,} to {after[0]:,} bytes"
    return (f"it was modified (mtime_ns {before[1]} -> {after[1]}) at the same size of "
            f"{after[0]:,} bytes")


def fingerprint(path: str, fmt: str) -> list[Any]:
    """``[size, mtime_ns, digest]`` of a file, recorded in a reader's resume state: the digest
    is a SHA-256 of its first 64 KiB and of its end, the whole footer for Parquet and Arrow IPC
    files (row groups or batches, offsets, schema; up to 16 MiB), else its last 64 KiB. Two
    reads, whatever the file's size."""
    size, mtime = stamp(path)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        h.update(fh.read(_EDGE))
        tail = _EDGE
        magic, width = {"parquet": (b"PAR1", 8), "arrow": (b"ARROW1", 10)}.get(fmt, (b"", 0))
        if width and size >= 2 * width:
            fh.seek(size - width)
            end = fh.read(width)
            if end[4:] == magic:  # the footer's length, then the magic
                tail = max(tail, int.from_bytes(end[:4], "little") + width)
        tail = min(tail, size, _MAX_TAIL)
        fh.seek(size - tail)
        h.update(fh.read(tail))
    return [size, mtime, h.hexdigest()[:16]]
