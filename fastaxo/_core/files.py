"""Output files: never one of the inputs, never a special file, written to a temporary file,
fsynced and renamed, and the temporary removed on an error, a signal or (next time) after the
process was killed.

Every command that writes goes through :func:`check_output` (before any input is read),
:func:`check_not_an_input` and :class:`TempOutput`: ``fastaxo prepare`` (pipeline/writer.py),
``fastaxo dedupe -o``, ``--report-json``.

An output that is a symbolic link is written through: the file it points to is replaced (what
``>`` in a shell does), and the link stays. ``os.replace`` on the link itself would put a new
file in the link's place and leave the file it pointed to unchanged.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import stat
import threading
from collections.abc import Iterable
from typing import Any

from fastaxo.errors import InvalidInputError, InvalidTypeError

__all__ = [
    "TempOutput",
    "check_not_an_input",
    "check_output",
    "received_signal",
    "remove_live_temporaries",
    "remove_stale_temporaries",
    "signals_remove_temporaries",
]

_TAG = ".fastaxo-tmp-"
_live: set[str] = set()
_live_lock = threading.Lock()


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of what ``path`` names, through symlinks; None if it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def check_not_an_input(output: str, inputs: Iterable[str], what: str = "output") -> None:
    """Refuse an output that is one of the inputs: the same file by device and inode (through
    symlinks and hard links), or the same path when neither exists yet."""
    out_id = _identity(output)
    out_real = os.path.realpath(output)
    for p in inputs:
        same = (out_id is not None and _identity(p) == out_id) or os.path.realpath(p) == out_real
        if same:
            how = "" if os.path.abspath(p) == os.path.abspath(output) else f" (as {p!r})"
            raise InvalidInputError(
                f"{what}: {output!r} is also an input{how}; writing it would destroy the input. "
                "Choose another output path.")


_SPECIAL = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
            (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a loop of symbolic links"))


def _special_kind(target: str, what: str) -> str | None:
    """What ``target`` is when it exists and is not a regular file (lstat: links not
    followed; ``target`` has them resolved already, so a link left is a loop)."""
    try:
        mode = os.lstat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # (the directory check names the problem)
        return None
    except OSError as e:
        raise InvalidInputError(f"{what}: cannot use {target!r}: {e.strerror or e}") from None
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _SPECIAL if test(mode)), "not a regular file")


def check_output(path: str | os.PathLike[str], what: str = "output") -> str:
    """The regular file an output at ``path`` replaces: ``path`` with its symbolic links
    resolved (see the module docstring). Refused with one line naming ``what``, before any
    work: an empty path; a path ending in a separator (a directory's name); an existing
    directory, device, FIFO or socket (renaming the finished file over it would replace the
    device itself: ``-o /dev/null`` as root replaced /dev/null); a directory that does not
    exist or cannot be written in."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidTypeError(f"{what} must be a path, got {type(path).__name__}")
    path = os.fspath(path)
    if not isinstance(path, str):
        raise InvalidTypeError(f"{what} must be a str path, got bytes {path!r:.60}")
    if not path:
        raise InvalidInputError(f"{what}: the path is empty; give a file name")
    if path.endswith(os.sep) or (os.altsep and path.endswith(os.altsep)):
        raise InvalidInputError(
            f"{what}: {path!r} ends with a path separator, which names a directory; give a file "
            f"name, e.g. {os.path.join(path, 'out.parquet')!r}")
    target = os.path.realpath(path)
    kind = _special_kind(target, what)
    if kind == "a directory":  # (os.replace cannot replace one; said now, not after the run)
        raise InvalidInputError(f"{what}: {path!r} is a directory; give a file name, e.g. "
                                f"{os.path.join(path, 'out.parquet')!r}")
    if kind is not None:
        via = "" if os.path.abspath(path) == target else f" (a link to {target!r})"
        raise InvalidInputError(
            f"{what}: {path!r}{via} is {kind}, not a regular file; fastaxo writes a new file and "
            "renames it into place, which would replace it. Give the path of a regular file")
    _writable_dir(target, what)
    return target


def _writable_dir(path: str, what: str) -> str:
    """The directory ``path`` would be written in; refused (naming ``what``) unless it exists,
    is a directory and is writable."""
    out_dir = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(out_dir):
        if os.path.exists(out_dir):
            raise InvalidInputError(f"{what}: {out_dir!r} is not a directory")
        raise InvalidInputError(f"{what}: directory {out_dir!r} does not exist")
    # a real file, not os.access: root passes access() on a read-only or special file system
    probe = os.path.join(out_dir, f".{os.path.basename(path)}{_TAG}probe-{os.urandom(4).hex()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as e:
        reason = e.strerror or str(e)
        raise InvalidInputError(f"{what}: cannot write in {out_dir!r}: {reason}") from None
    return out_dir


def _fsync_path(path: str) -> None:
    """Flush a file's data to the device (any descriptor of the file flushes it; a writable
    one, because Windows' fsync needs one)."""
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    """Flush a directory's entries (the rename into it) where the platform can: POSIX. Windows
    cannot open a directory to flush it (skipped there). A directory this process may not open
    (write-only permissions) or a file system that cannot flush one is not an error: the
    rename is done, only its durability is the file system's."""
    if os.name != "posix":
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except PermissionError:
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (so a temporary named after it is still being
    written). A number no process can have (from a hand-made file name) is not alive."""
    if not 0 < pid < 2**31:
        return False
    if os.name == "nt":
        # os.kill(pid, 0) is no probe on Windows: signal 0 is CTRL_C_EVENT, sent to a console
        # process group, and any other value terminates the process
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)  # signal 0: the checks of kill(2), nothing delivered
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: someone else's process, alive
        return True
    return True


def _windows_pid_alive(pid: int) -> bool:
    """Windows: open the process with the least access right (granted for most processes,
    other users' too) and read its exit code; access denied means it exists (a protected
    process)."""
    import ctypes
    from ctypes import wintypes

    process_query_limited_information, still_active, error_access_denied = 0x1000, 259, 5
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    kernel32.OpenProcess.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.DWORD)
    kernel32.OpenProcess.restype = wintypes.HANDLE
    kernel32.GetExitCodeProcess.argtypes = (wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD))
    kernel32.GetExitCodeProcess.restype = wintypes.BOOL
    kernel32.CloseHandle.argtypes = (wintypes.HANDLE,)
    kernel32.CloseHandle.restype = wintypes.BOOL
    handle = kernel32.OpenProcess(process_query_limited_information, False, pid)
    if not handle:  # ERROR_INVALID_PARAMETER: no such process
        return bool(ctypes.get_last_error() == error_access_denied)  # type: ignore[attr-defined]
    try:
        code = wintypes.DWORD()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True  # cannot tell: keep the temporary
        # a process that exited with code 259 looks alive: its temporary is kept (never lost)
        return code.value == still_active
    finally:
        kernel32.CloseHandle(handle)


def remove_stale_temporaries(output: str) -> list[str]:
    """Remove temporaries for ``output`` left by processes that no longer run (killed with
    SIGKILL, or a crash); returns the paths removed. Temporaries of live processes are kept."""
    out_dir = os.path.dirname(os.path.abspath(output)) or "."
    pattern = re.compile(re.escape(f".{os.path.basename(output)}{_TAG}") + r"(\d+)-\w+$")
    removed: list[str] = []
    try:
        names = os.listdir(out_dir)
    except OSError:
        return removed
    for name in names:
        m = pattern.match(name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            path = os.path.join(out_dir, name)
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


class TempOutput:
    """A temporary path beside the file ``output`` names (``.NAME.fastaxo-tmp-PID-RANDOM``, in
    the same directory so the rename is atomic); :meth:`commit` makes it durable and renames it
    over that file, :meth:`abort` removes it. ``output`` is checked by :func:`check_output`
    (``what`` names it in errors); a symbolic link is written through. While the temporary
    exists it is registered, so a signal handler can remove it
    (:func:`remove_live_temporaries`); creating one removes stale temporaries of dead
    processes for the same output (:attr:`stale_removed`)."""

    def __init__(self, output: str | os.PathLike[str], what: str = "output"):
        self.target = check_output(output, what)
        self.output = os.fspath(output)
        self.what = what
        self.stale_removed = remove_stale_temporaries(self.target)
        name = f".{os.path.basename(self.target)}{_TAG}{os.getpid()}-{os.urandom(4).hex()}"
        self.path = os.path.join(os.path.dirname(self.target), name)
        with _live_lock:
            _live.add(self.path)

    def commit(self) -> None:
        """fsync the temporary's data, rename it over the output, fsync the directory: a
        power cut leaves the old output or the whole new one, never an empty file."""
        # checked again at the last moment: something may have been put there during the run
        kind = _special_kind(self.target, self.what)
        if kind is not None:
            raise InvalidInputError(
                f"{self.what}: {self.output!r} became {kind} during the run; not replaced. "
                "Give the path of a regular file")
        _fsync_path(self.path)
        os.replace(self.path, self.target)
        self._forget()
        _fsync_dir(os.path.dirname(self.target))

    def abort(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
        self._forget()

    def _forget(self) -> None:
        with _live_lock:
            _live.discard(self.path)

    def __enter__(self) -> TempOutput:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def remove_live_temporaries() -> None:
    """Unlink every registered temporary of this process (from a signal handler: no locks)."""
    for path in list(_live):
        try:
            os.unlink(path)
        except OSError:
            pass


class Terminated(BaseException):  # noqa: N818 (it is not an error: the process was told to stop)
    """Raised in the main thread by the CLI's SIGTERM / SIGHUP handler."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_received: list[int] = []


def received_signal() -> int | None:
    """The SIGTERM / SIGHUP the handler of :func:`signals_remove_temporaries` took, if any. The
    handler's Terminated can come back as another error (raised inside a callback that library
    code turns into its own exception, or replaced by a cleanup that fails on the temporary the
    handler removed); the CLI asks this to report the signal all the same."""
    return _received[-1] if _received else None


def signals_remove_temporaries() -> dict[int, Any]:
    """Install SIGTERM and SIGHUP handlers (main thread only) that remove this process's
    temporaries and raise :class:`Terminated`, so that the code unwinds as for Ctrl-C. Returns
    the previous handlers (for :func:`signal.signal` to put back)."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    _received.clear()

    def on_signal(signum: int, frame: Any) -> None:
        _received.append(signum)
        remove_live_temporaries()
        raise Terminated(signum)

    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, on_signal)
    return previous

