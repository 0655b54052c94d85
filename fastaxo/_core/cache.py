"""fastaxo's on-disk cache: where it lives, how a record is written and how it is bounded.

Records are optimisations (tokenizer snapshots, the C encoder's arrays): a record that cannot
be written is logged, never raised, and a reader treats anything it cannot verify as a miss.
``FASTAXO_CACHE_DIR`` says where (default ``$XDG_CACHE_HOME/fastaxo``, else
``~/.cache/fastaxo``); ``off`` disables every record. Each kind of record has a directory of
its own under it.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import time

__all__ = ["ENV", "STALE_TMP", "cache_root", "prune", "touch", "write_atomic"]

LOG = logging.getLogger("fastaxo")
ENV = "FASTAXO_CACHE_DIR"
# a writer's temporary file left by a killed process goes after this many seconds
STALE_TMP = 3600
_TMP = ".tmp-"


def cache_root() -> str | None:
    """The cache directory, or None when ``FASTAXO_CACHE_DIR=off``."""
    base = os.environ.get(ENV, "").strip()
    if base.lower() == "off":
        return None
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        root = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(root, "fastaxo")
    return base


def write_atomic(file: str, data: bytes, what: str) -> bool:
    """``data`` to ``file``: a private temporary file (mode 0600, in a 0700 directory) renamed
    over it, so a reader sees the old record or the new one, never part of one. A failure (a
    read-only cache, a full disk) is logged as ``what`` and gives False."""
    folder = os.path.dirname(file)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TMP, suffix=os.path.splitext(file)[1], dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, file)
        except BaseException:
            _unlink(tmp)
            raise
    except (OSError, ValueError) as e:
        LOG.debug("%s: not written to %s: %s", what, file, e)
        return False
    return True


def touch(file: str) -> None:
    """Mark a record used now (its place in :func:`prune`'s order); a read-only cache keeps
    its times."""
    try:
        os.utime(file)
    except OSError:
        pass


def prune(folder: str, keep: str, suffix: str, max_records: int, max_bytes: int) -> None:
    """Bound one kind of record: the newest ``max_records`` files ending in ``suffix`` within
    ``max_bytes`` stay (a record's time is its last use: a reader touches it), ``keep`` always;
    temporary files older than :data:`STALE_TMP` go. Races with another process pruning or
    writing are harmless (a record gone is made again)."""
    now = time.time()
    records = []
    try:
        with os.scandir(folder) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                if e.name.startswith(_TMP):
                    if now - st.st_mtime > STALE_TMP:
                        _unlink(e.path)
                elif e.name.endswith(suffix) and e.path != keep:
                    records.append((st.st_mtime, st.st_size, e.path))
        total = os.stat(keep).st_size
    except OSError:
        return
    records.sort(reverse=True)
    for n, (_, size, path) in enumerate(records, start=1):
        total += size
        if n >= max_records or total > max_bytes:
            _unlink(path)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
