"""Helpers the matrix, its cells, its report and the bench/ scripts share: memory release and
prefault, number formats, output digests, the machine and versions the results ran on."""

from __future__ import annotations

import gc
import hashlib
import importlib
import os
import platform
import subprocess
from collections.abc import Iterable
from typing import Any

import numpy as np

from fastaxo._bench.spec import GiB
from fastaxo._core.proc import mem_available_bytes

# ============================================================================ small helpers




def release_memory() -> None:
    """Give freed memory back (gc, glibc malloc_trim, pyarrow pools) so a peak measured from the
    current RSS is not hidden by memory freed earlier and reused."""
    gc.collect()
    try:
        import pyarrow as pa

        for pool in (pa.default_memory_pool(), getattr(pa, "jemalloc_memory_pool", None),
                     getattr(pa, "mimalloc_memory_pool", None), pa.system_memory_pool()):
            try:
                (pool() if callable(pool) else pool).release_unused()  # type: ignore[union-attr]
            except Exception:  # None (a pool this pyarrow lacks) or not implemented
                pass
    except ImportError:
        pass
    malloc_trim()


def malloc_trim() -> None:
    """Return freed heap memory to the OS (glibc's malloc_trim; nothing elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def prefault(nbytes: int) -> None:
    """Touch and free nbytes of fresh memory (untimed), so the timed run that follows does not pay
    for the first touch of pages the hypervisor took back (memory freed for about a second goes
    back on these VMs, and faulting it in again runs at 0.3-2 GB/s): every implementation's timed
    run starts from the same memory state."""
    if nbytes <= 0:
        return
    a = np.empty(nbytes, dtype=np.uint8)
    a[::4096] = 1
    del a



def fmt_n(n: float) -> str:
    n = int(n)
    for div, suf in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= div and n % div == 0:
            return f"{n // div}{suf}"
    return f"{n:,}"


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:,.2f}{suf}"
    return f"{x:,.1f}"


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:,.0f} us"
    if s < 10:
        return f"{s * 1e3:,.1f} ms"
    return f"{s:,.1f} s"


def secs(x: float) -> str:
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"


def fmt_mib(x: float | None) -> str:
    return "-" if x is None else (f"{x:,.1f}" if x < 100 else f"{x:,.0f}")



# ============================================================================ digests (checks)


class Digest:
    """SHA-256 per output key, fed array by array (values as little-endian int64 for integers)."""

    def __init__(self) -> None:
        self._h: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def _hasher(self, key: str):
        h = self._h.get(key)
        if h is None:
            h = self._h[key] = hashlib.sha256()
        return h

    def array(self, key: str, a: Any, with_shape: bool = True) -> None:
        a = np.asarray(a)
        if a.dtype.kind in "iub":
            a = a.astype("<i8", copy=False)
        a = np.ascontiguousarray(a)
        h = self._hasher(key)
        if with_shape:
            h.update(repr(a.shape).encode())
        h.update(a.data if a.size else b"")

    def raw(self, key: str, b: Any) -> None:
        self._hasher(key).update(b)

    def count(self, key: str, k: int) -> None:
        self.counts[key] = self.counts.get(key, 0) + int(k)

    def result(self) -> dict[str, str]:
        out = {k: h.hexdigest() for k, h in self._h.items()}
        out.update({k: str(v) for k, v in self.counts.items()})
        return out


def compare_outputs(a: dict[str, str], b: dict[str, str], keys: Iterable[str]) -> tuple[bool, str]:
    """(identical, detail) over ``keys`` present in both digests."""
    keys = [k for k in keys if k in a and k in b]
    if not keys:
        return False, "no output in common to compare"
    diff = [k for k in keys if a[k] != b[k]]
    if diff:
        return False, "differs in " + ", ".join(diff)
    return True, "identical " + ", ".join(keys)


# ============================================================================ parent: environment


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = None
    try:
        with open("/proc/meminfo") as f:
            ram = int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    os_name = f"{platform.system()} {platform.release()}"
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = f"{line.split('=', 1)[1].strip().strip(chr(34))} ({os_name})"
                    break
    except OSError:
        pass
    avail = mem_available_bytes()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": None if ram is None else round(ram / GiB, 1),
        "mem_available_gib": None if avail is None else round(avail / GiB, 1),
        "os": os_name,
        "machine": platform.machine(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def machine_short(m: dict[str, Any]) -> str:
    ram = f", {m['ram_gib']:.0f} GiB RAM" if m.get("ram_gib") else ""
    return f"{m['cpu']}, {m['cores']} cores{ram}"


def versions_info(avail: dict[str, bool]) -> dict[str, str | None]:
    import importlib.metadata as md

    import fastaxo

    out: dict[str, str | None] = {"fastaxo": fastaxo.__version__}
    for dist in (
        "numpy",
        "pyarrow",
        "fast-axolotl",
        "datasets",
        "axolotl",
        "torch",
        "numba",
        "matplotlib",
    ):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def git_commit() -> str | None:
    """The commit of the source tree fastaxo was imported from, else the commit the installed
    build was made from (setup.py records it; None for a build from an sdist)."""
    import fastaxo

    root = os.path.dirname(os.path.dirname(os.path.abspath(fastaxo.__file__)))
    if not os.path.exists(os.path.join(root, ".git")):
        try:
            _build_info = importlib.import_module("fastaxo._build_info")
        except ImportError:
            return None
        c = getattr(_build_info, "GIT_COMMIT", None)
        return f"{c} (the installed build's)" if c else None
    try:
        sha = subprocess.run(
            ["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha + ("-dirty" if dirty else "")) if sha else None
