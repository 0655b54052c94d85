"""Output files: never one of the inputs, written to a temporary file and renamed, and the
temporary removed on an error, a signal or (next time) after the process was killed.

Every command that writes goes through :func:`check_not_an_input` and :class:`TempOutput`:
``fastaxo prepare`` (pipeline/writer.py), ``fastaxo dedupe -o``, ``--report-json``.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Iterable
from typing import Any

from fastaxo.errors import InvalidInputError

__all__ = [
    "TempOutput",
    "check_not_an_input",
    "check_writable_dir",
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


def check_writable_dir(path: str, what: str = "output") -> str:
    """The directory ``path`` would be written in; refused (naming ``what``) unless it exists,
    is a directory and is writable, and ``path`` itself is not a directory."""
    out_dir = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(out_dir):
        raise InvalidInputError(f"{what}: directory {out_dir!r} does not exist")
    if os.path.isdir(path):
        raise InvalidInputError(f"{what}: {path!r} is a directory; expected a file name")
    # a real file, not os.access: root passes access() on a read-only or special file system
    probe = os.path.join(out_dir, f".{os.path.basename(path)}{_TAG}probe-{os.urandom(4).hex()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as e:
        reason = e.strerror or str(e)
        raise InvalidInputError(f"{what}: cannot write in {out_dir!r}: {reason}") from None
    return out_dir


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
    """A temporary path beside ``output`` (``.NAME.fastaxo-tmp-PID-RANDOM``, in the same
    directory so the rename is atomic); :meth:`commit` renames it to ``output``, :meth:`abort`
    removes it. While it exists it is registered, so a signal handler can remove it
    (:func:`remove_live_temporaries`); creating one removes stale temporaries of dead
    processes for the same output (:attr:`stale_removed`)."""

    def __init__(self, output: str):
        out_dir = check_writable_dir(output)
        self.output = output
        self.stale_removed = remove_stale_temporaries(output)
        name = f".{os.path.basename(output)}{_TAG}{os.getpid()}-{os.urandom(4).hex()}"
        self.path = os.path.join(out_dir, name)
        with _live_lock:
            _live.add(self.path)

    def commit(self) -> None:
        os.replace(self.path, self.output)
        self._forget()

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

