"""A kernel's status code as an exception: the one place where a C status becomes Python."""

from __future__ import annotations

from types import ModuleType

from fastaxo.errors import KernelError

__all__ = ["check_pack_status"]


def check_pack_status(ext: ModuleType, status: int, *, kernel: str, items: int, item: int) -> None:
    """Raise for a packing kernel's status other than OK: MemoryError for ENOMEM (``items``
    sequences were being packed), :class:`KernelError` for anything else (a bug: the checks
    before the call rule out every other status). Callers handle the statuses they expect
    (EOVERLONG) before calling this."""
    if status == ext.OK:
        return
    if status == ext.ENOMEM:
        raise MemoryError(f"{kernel}: out of memory packing {items:,} sequences")
    raise KernelError(
        f"{kernel}: internal error (status {status}, item {item}); please report it",
        kernel=kernel, status=status, item=item,
    )
