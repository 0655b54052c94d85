"""Thread-count resolution, done once per call before any kernel runs.

Two rules protect the process: a thread count has an upper bound (:func:`max_num_threads`;
past it OpenMP's runtime aborts the process when it cannot create the threads), and in a
process forked from this one (a DataLoader worker, ``multiprocessing`` with "fork") every
kernel runs on one thread: GNU OpenMP's thread team does not survive a fork, and a child that
starts one hangs for ever."""

from __future__ import annotations

import functools
import os

from fastaxo.errors import InvalidInputError, InvalidTypeError

__all__ = ["default_num_threads", "forked_child", "max_num_threads", "resolve_num_threads"]

_forked = False


def _after_fork_in_child() -> None:
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def forked_child() -> bool:
    """True in a process forked from one that imported fastaxo: kernels run on one thread."""
    return _forked


@functools.lru_cache(maxsize=1)
def _cpu_count() -> int:
    """CPUs this process may use (read once: sched_getaffinity costs microseconds per call)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def max_num_threads() -> int:
    """The most threads a call may ask for: max(256, 4 x the CPUs this process may use)."""
    return max(256, 4 * _cpu_count())


def _from_env(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    # OMP_NUM_THREADS may be a list ("4,2") for nested levels: the first is ours.
    first = raw.split(",")[0].strip()
    try:
        value = int(first)
    except ValueError:
        raise InvalidInputError(
            f"environment variable {name} must be a positive integer, got {raw!r}"
        ) from None
    if value < 1:
        raise InvalidInputError(f"environment variable {name} must be >= 1, got {raw!r}")
    if value > max_num_threads():
        raise InvalidInputError(
            f"environment variable {name}={raw!r} asks for more threads than fastaxo runs "
            f"(at most {max_num_threads()}: 4 x the {_cpu_count()} CPUs, or 256)")
    return value


def default_num_threads() -> int:
    """FASTAXO_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs this process may use.

    Examples
    --------
    >>> fastaxo.default_num_threads() >= 1
    True
    """
    for name in ("FASTAXO_NUM_THREADS", "OMP_NUM_THREADS"):
        value = _from_env(name)
        if value is not None:
            return value
    return _cpu_count()


def resolve_num_threads(num_threads: object = None) -> int:
    """The thread count for one call: the argument, else :func:`default_num_threads`; 1 in a
    forked child (see the module docstring)."""
    if num_threads is None:
        return 1 if _forked else default_num_threads()
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        try:
            import numpy as np

            if isinstance(num_threads, np.integer):
                num_threads = int(num_threads)
            else:
                raise TypeError
        except TypeError:
            raise InvalidTypeError(
                f"num_threads must be a positive int or None, got {type(num_threads).__name__} "
                f"{num_threads!r}"
            ) from None
    if num_threads < 1:
        raise InvalidInputError(
            f"num_threads must be >= 1 (or None for the default), got {num_threads}"
        )
    if num_threads > max_num_threads():
        raise InvalidInputError(
            f"num_threads is {num_threads:,}; fastaxo runs at most {max_num_threads()} threads "
            f"(4 x the {_cpu_count()} CPUs this process may use, or 256)")
    return 1 if _forked else num_threads
