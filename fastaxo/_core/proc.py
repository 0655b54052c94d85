"""Process statistics from Linux's /proc (None or {} elsewhere): memory fields of
/proc/PID/status, I/O counters of /proc/self/io, the peak-RSS reset, MemAvailable."""

from __future__ import annotations

__all__ = ["io_counters", "mem_available_bytes", "peak_rss_mib", "reset_peak", "status_kib"]


def status_kib(field: str, pid: int | str = "self") -> int | None:
    """A /proc/PID/status field in KiB (``"VmRSS"``, ``"VmHWM"``, ``"VmPeak"``, ``"VmSize"``)."""
    key = field.rstrip(":") + ":"
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def peak_rss_mib() -> float | None:
    """This process's peak resident set (VmHWM) in MiB."""
    kib = status_kib("VmHWM")
    return None if kib is None else kib / 1024


def io_counters() -> dict[str, int]:
    """/proc/self/io: ``rchar``, ``read_bytes``, ... (bytes)."""
    try:
        with open("/proc/self/io") as fh:
            return {k: int(v) for k, v in (line.split(":") for line in fh)}
    except (OSError, ValueError):
        return {}


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def mem_available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo in bytes."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None
