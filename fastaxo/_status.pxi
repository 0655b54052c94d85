# The C status vocabulary (csrc/fx_status.h) on the Python side, included by each extension
# module: STATUS (name -> number, read from the header), status_name, and check_status, the
# one way a status other than FX_OK becomes an exception (fastaxo._core.status.raise_status;
# inline: a module that only returns statuses to Python has no use for it, and no warning).

STATUS = {fx_status_name(s).decode(): s for s in range(FX_NSTATUS)}


def status_name(int status):
    """The name of a C status (csrc/fx_status.h), e.g. ``"FX_ENOMEM"``."""
    return fx_status_name(status).decode()


cdef inline int check_status(int status, str kernel, str what, int64_t item=-1) except -1:
    """0 for FX_OK; else raise through fastaxo._core.status.raise_status: MemoryError for
    FX_ENOMEM, KernelError for the rest. A caller handles the statuses its input can cause
    (FX_EUTF8, FX_EOVERLONG, ...) first, with messages that name that input."""
    if status == FX_OK:
        return 0
    from fastaxo._core.status import raise_status
    raise_status(status_name(status), kernel=kernel, what=what, item=item, status=status)
    return -1
