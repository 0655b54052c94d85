"""A kernel's status as an exception: the one place where a C status becomes Python (as
pyarrow's ``check_status``). The statuses are csrc/fx_status.h's; the extension modules give
their names (``status_name``) and numbers (``STATUS``), so none is copied here. The compiled
code calls :func:`raise_status` through its ``check_status``; Python code that gets a status
back from a kernel calls :func:`check_status`."""

from __future__ import annotations

from types import ModuleType
from typing import NoReturn

from fastaxo.errors import KernelError

__all__ = ["check_status", "raise_status"]


def raise_status(name: str, *, kernel: str, what: str, item: int = -1,
                 status: int = -1) -> NoReturn:
    """Raise for the kernel status ``name`` (not ``"FX_OK"``): MemoryError for ``FX_ENOMEM``
    (``what`` says what was being done), :class:`KernelError` for anything else: the checks
    before a call rule out every other status its caller does not handle itself, so one
    reaching here is a bug in fastaxo."""
    if name == "FX_ENOMEM":
        raise MemoryError(f"{kernel}: out of memory {what}")
    where = f", item {item}" if item >= 0 else ""
    raise KernelError(
        f"{kernel}: internal error ({name}{where}) {what}; please report it",
        kernel=kernel, status=status, item=item,
    )


def check_status(ext: ModuleType, status: int, *, kernel: str, what: str, item: int = -1) -> None:
    """Nothing when a kernel of the extension module ``ext`` returned FX_OK, else
    :func:`raise_status`. Callers handle the statuses they expect (FX_EOVERLONG) first."""
    if status != ext.STATUS["FX_OK"]:
        raise_status(ext.status_name(status), kernel=kernel, what=what, item=item, status=status)
