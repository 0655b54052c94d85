"""SHA-256 of rows and exact, first-occurrence dedupe.

The fast path is columnar input: a pyarrow Array/ChunkedArray, Table, RecordBatch or an
HF ``datasets.Dataset`` (hashed straight from its Arrow buffers), or a NumPy array. Lists
of ``str``/``bytes`` work too: pointers to their bytes are gathered once, then hashed
without the GIL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
import pyarrow as pa

from fastaxo._core.backend import ext
from fastaxo._core.ragged import is_hf_dataset
from fastaxo._core.threads import resolve_num_threads
from fastaxo._reference import hashing as reference
from fastaxo.errors import InvalidInputError, InvalidTypeError
from fastaxo.hashing.rows import BLOCK, ROW_ENCODING_VERSION, as_rows, hash_range, to_hex
from fastaxo.hashing.rowset import RowSet

__all__ = ["hash_rows", "dedupe", "DedupeResult", "Seen", "RowSet", "ROW_ENCODING_VERSION"]


# --------------------------------------------------------------------------- public API
@overload
def hash_rows(
    data: Any,
    *,
    columns: Sequence[str] | str | None = ...,
    num_threads: int | None = ...,
    hex: Literal[False] = ...,
) -> np.ndarray: ...
@overload
def hash_rows(
    data: Any,
    *,
    columns: Sequence[str] | str | None = ...,
    num_threads: int | None = ...,
    hex: Literal[True],
) -> list[str]: ...


def hash_rows(data, *, columns=None, num_threads=None, hex=False):
    """SHA-256 of each row.

    Parameters
    ----------
    data
        * pyarrow ``Array``/``ChunkedArray`` of string, binary, large_string or
          large_binary: the digest of each value's bytes (``hashlib.sha256(value)``).
        * pyarrow list/large_list of integers or floats (token ids): the digest of the
          row's values as little-endian bytes (``hashlib.sha256(np_row.tobytes())``).
        * pyarrow ``Table``/``RecordBatch``, HF ``datasets.Dataset``, or an Arrow array of
          any other type: the digest of the canonical encoding of the selected columns of
          the row (see :data:`ROW_ENCODING_VERSION` and ARCHITECTURE.md). Every value is
          length- or width-delimited and nulls are encoded, so distinct rows never share a
          byte string: ``("ab", "c")`` and ``("a", "bc")`` differ.
        * a numeric NumPy array: row ``i`` is ``arr[i]`` as little-endian bytes (a 1-D
          array's rows are single values); any strides and byte order are accepted.
        * a list (or 1-D NumPy array) of ``str`` (hashed as UTF-8) or ``bytes``.

        Arrow and NumPy inputs are hashed in place, with no copy (the fast path).
    columns
        For tables: the columns to hash, in this order. Default: all, in table order.
    num_threads
        Threads to use; default ``FASTAXO_NUM_THREADS``, else ``OMP_NUM_THREADS``, else
        the CPU count. Results are identical for every thread count.
    hex
        Return a list of 64-character lowercase hex strings instead of bytes.

    Returns
    -------
    numpy.ndarray
        ``uint8[n, 32]`` digests (or ``list[str]`` with ``hex=True``).

    Raises
    ------
    InvalidTypeError
        ``data`` (or one of its rows) has an unsupported type (also a ``TypeError``).
    NullValueError
        A null in an array whose digest is of raw bytes (also a ``ValueError``).
    ColumnNotFoundError
        ``columns`` names a column the table lacks (also a ``KeyError``).

    Examples
    --------
    >>> import pyarrow as pa
    >>> h = fastaxo.hash_rows(pa.table({"input_ids": [[1, 2], [3], [1, 2]]}))
    >>> h.shape, h.dtype.name, bool((h[0] == h[2]).all())
    ((3, 32), 'uint8', True)
    """
    nt = resolve_num_threads(num_threads)
    rows = as_rows(data, columns)
    out = np.empty((rows.n, 32), dtype=np.uint8)
    hash_range(rows, 0, rows.n, out, nt)
    return to_hex(out) if hex else out


class Seen:
    """The distinct rows seen so far, as their 32-byte SHA-256 digests.

    Pass it to the next :func:`dedupe` call (train then eval, or chunk after chunk of a
    stream). It holds about 32 bytes per distinct row (plus a hash table of 5-11 bytes per
    row) and never the rows themselves. It remembers the row encoding that produced it, so
    that rows hashed differently (other column types) are refused instead of never
    matching. Picklable; safe to share between threads.
    """

    def __init__(self) -> None:
        self._set = ext.SeenSet() if ext is not None else reference.PySeenSet()
        self.encoding: str | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._set)

    def __repr__(self) -> str:
        return (f"<fastaxo.Seen: {len(self)} distinct rows, {self.nbytes / 2**20:.1f} MiB, "
                f"encoding={self.encoding!r}>")

    @property
    def nbytes(self) -> int:
        """Bytes held by the set (digests, table and bookkeeping)."""
        return int(self._set.nbytes)

    def _bind(self, encoding: str) -> None:
        if self.encoding is None:
            self.encoding = encoding
        elif self.encoding != encoding:
            raise InvalidInputError(
                f"seen holds digests of rows encoded as {self.encoding!r}, but these rows are "
                "encoded as "
                f"{encoding!r}; their digests can never match. Use the same columns and types, or "
                "a new Seen"
            )

    def add(self, digests: np.ndarray) -> np.ndarray:
        """Insert ``uint8[n, 32]`` digests in order; returns a bool mask of the new ones."""
        d = _check_digests(digests, "digests")
        is_new = np.empty(d.shape[0], dtype=np.uint8)
        with self._lock:
            self._set.insert(d, is_new)
        return is_new.view(bool)

    def __contains__(self, digest: object) -> bool:
        return bool(
            self.contains(np.frombuffer(_one_digest(digest), dtype=np.uint8).reshape(1, 32))[0]
        )

    def contains(self, digests: np.ndarray) -> np.ndarray:
        """Bool mask: which of ``uint8[n, 32]`` digests are in the set."""
        d = _check_digests(digests, "digests")
        found = np.zeros(d.shape[0], dtype=np.uint8)
        with self._lock:
            self._set.contains(d, found)
        return found.view(bool)

    def digests(self) -> np.ndarray:
        """Every digest in insertion order, as ``uint8[len, 32]`` (a copy)."""
        with self._lock:
            out = np.empty((len(self._set), 32), dtype=np.uint8)
            self._set.export(out)
        return out

    def to_hex(self) -> list[str]:
        """Every digest as lowercase hex, in insertion order."""
        return to_hex(self.digests())

    def copy(self) -> Seen:
        new = Seen()
        new.encoding = self.encoding
        new.add(self.digests())
        return new

    def __reduce__(self):
        return (_seen_from_state, (self.encoding, self.digests().tobytes()))


def _seen_from_state(encoding: str | None, raw: bytes) -> Seen:
    s = Seen()
    s.encoding = encoding
    if raw:
        s.add(np.frombuffer(raw, dtype=np.uint8).reshape(-1, 32).copy())
    return s


def _one_digest(digest: object) -> bytes:
    if isinstance(digest, str):
        try:
            raw = bytes.fromhex(digest)
        except ValueError:
            raw = b""
    elif isinstance(digest, (bytes, bytearray, memoryview)):
        raw = bytes(digest)
    elif isinstance(digest, np.ndarray):
        raw = digest.astype(np.uint8, copy=False).tobytes()
    else:
        raise InvalidTypeError(
            f"digest must be 32 bytes or 64 hex characters, got {type(digest).__name__}"
        )
    if len(raw) != 32:
        raise InvalidInputError(f"digest must be 32 bytes or 64 hex characters, got {digest!r:.80}")
    return raw


def _check_digests(digests: Any, what: str) -> np.ndarray:
    d = np.asarray(digests)
    if d.ndim != 2 or d.shape[1] != 32 or d.dtype != np.uint8:
        raise InvalidInputError(
            f"{what} must be a uint8 array of shape (n, 32), got {d.dtype}{list(d.shape)}"
        )
    return np.ascontiguousarray(d)


@dataclass(frozen=True)
class DedupeResult:
    """What :func:`dedupe` found.

    Attributes
    ----------
    keep : numpy.ndarray
        int64 indices of the rows kept (first occurrences), increasing.
    n_rows : int
        Rows in the input.
    n_duplicates : int
        Rows dropped: duplicates within the input or of rows already in ``seen``.
    seen : Seen or RowSet
        The updated set; pass it to the next call.
    """

    keep: np.ndarray
    n_rows: int
    n_duplicates: int
    seen: Seen | RowSet

    @property
    def keep_mask(self) -> np.ndarray:
        """Bool mask over the input rows: True where a row is kept."""
        mask = np.zeros(self.n_rows, dtype=bool)
        mask[self.keep] = True
        return mask

    def apply(self, data: Any) -> Any:
        """The kept rows of ``data``, in input order: the rows at positions ``keep``.

        ``data`` is the input of the :func:`dedupe` call, or any table, array or list holding
        the same rows in the same order (positions are what is applied: e.g. the whole table
        when dedupe compared only some of its columns, or a column derived row by row). A
        ``data`` of another length cannot be those rows and is an
        :class:`~fastaxo.errors.InvalidInputError`.
        """
        if isinstance(data, tuple):
            data = list(data)
        supported = (pa.Table, pa.RecordBatch, pa.Array, pa.ChunkedArray, list)
        if not (isinstance(data, supported) or is_hf_dataset(data)
                or (isinstance(data, np.ndarray) and data.ndim >= 1)):
            raise InvalidTypeError(
                f"apply: data is {type(data).__name__}; expected the table, array or list that "
                "dedupe was called on (or one with the same rows in the same order)")
        if len(data) != self.n_rows:
            raise InvalidInputError(
                f"apply: data has {len(data):,} rows, but this result is for the {self.n_rows:,} "
                "rows dedupe was called on; apply it to that data (or to a table holding the same "
                "rows in the same order)")
        if isinstance(data, (pa.Table, pa.RecordBatch, pa.Array, pa.ChunkedArray)):
            return data.take(pa.array(self.keep))
        if isinstance(data, np.ndarray):
            return data[self.keep]
        if isinstance(data, list):
            return [data[i] for i in self.keep.tolist()]
        return data.select(self.keep)


def dedupe(
    data: Any,
    *,
    columns: Sequence[str] | str | None = None,
    seen: Seen | RowSet | None = None,
    num_threads: int | None = None,
) -> DedupeResult:
    """Keep the first occurrence of each distinct row, in input order.

    Rows are compared by the SHA-256 of their bytes as :func:`hash_rows` defines them
    (for tables: every selected column, nulls included). Rows whose digest is already in
    ``seen`` are dropped too, so a train set's ``seen`` removes the eval rows it contains,
    and a stream deduplicates chunk after chunk. Memory: the ``keep`` indices, ``seen``
    (about 32 bytes per distinct row) and one block of 65,536 digests; never the rows.

    Parameters
    ----------
    data, columns, num_threads
        As for :func:`hash_rows`. The default key is every column: a row is a duplicate when
        everything the output would hold of it is equal. :func:`fastaxo.prepare` follows the
        same rule; it writes only ``input_ids`` and ``labels``, so those are its default key.
    seen
        Rows seen earlier; updated in place and returned. Default: a new :class:`Seen`
        (digests: picklable, bounded memory on a stream). A :class:`RowSet` instead compares
        rows by value without hashing every byte (several times faster on long rows, the same
        result); it keeps references to the tables it was given.

    Returns
    -------
    DedupeResult
        ``keep`` (int64 indices), ``n_rows``, ``n_duplicates`` and ``seen``.

    Examples
    --------
    >>> import pyarrow as pa
    >>> r = fastaxo.dedupe(pa.table({"input_ids": [[1, 2], [3], [1, 2]]}))
    >>> r.keep.tolist(), r.n_duplicates
    ([0, 1], 1)
    """
    nt = resolve_num_threads(num_threads)
    if isinstance(seen, RowSet):
        is_new = seen.add(data, columns=columns, num_threads=nt)
        keep = np.flatnonzero(is_new).astype(np.int64, copy=False)
        return DedupeResult(
            keep=keep, n_rows=len(is_new), n_duplicates=len(is_new) - len(keep), seen=seen
        )
    if seen is None:
        seen = Seen()
    elif not isinstance(seen, Seen):
        raise InvalidTypeError(
            f"seen must be a fastaxo.Seen, a fastaxo.RowSet or None, got {type(seen).__name__}"
        )
    rows = as_rows(data, columns)
    if rows.n:
        seen._bind(rows.encoding)
    buf = np.empty((min(rows.n, BLOCK), 32), dtype=np.uint8)
    keeps: list[np.ndarray] = []
    for a in range(0, rows.n, BLOCK):
        b = min(rows.n, a + BLOCK)
        block = buf[: b - a]
        hash_range(rows, a, b, block, nt)
        keeps.append(np.flatnonzero(seen.add(block)) + a)
    keep = (
        np.concatenate(keeps).astype(np.int64, copy=False) if keeps else np.zeros(0, dtype=np.int64)
    )
    return DedupeResult(keep=keep, n_rows=rows.n, n_duplicates=rows.n - len(keep), seen=seen)


def iter_dedupe(chunks: Iterable[Any], *, columns: Sequence[str] | str | None = None,
                seen: Seen | None = None, num_threads: int | None = None):
    """Dedupe a stream chunk after chunk: yields ``(chunk, DedupeResult)`` for each chunk.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"input_ids": [[1, 2], [3], [1, 2]]})
    >>> [r.keep.tolist() for _, r in fastaxo.iter_dedupe([t, t])]
    [[0, 1], []]
    """
    seen = Seen() if seen is None else seen
    for chunk in chunks:
        res = dedupe(chunk, columns=columns, seen=seen, num_threads=num_threads)
        yield chunk, res
