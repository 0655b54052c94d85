/* fx_status: the one vocabulary of statuses that fastaxo's C functions return, and that the
 * per-row and per-chunk status arrays hold. One set of numbers, so a status means the same
 * thing from every kernel and the Python side turns it into an exception in one place
 * (fastaxo/_core/status.py, fed by fx_status_name through each extension's `status_name`). */
#ifndef FX_STATUS_H
#define FX_STATUS_H

enum {
    FX_OK = 0,
    FX_EINVAL = 1,       /* an argument outside the function's contract (its header says which) */
    FX_ENOMEM = 2,       /* an allocation failed; the outputs are as the function's header says */
    FX_EBIG = 3,         /* a count past what the output's type holds (INT32_MAX tokens, ...) */
    FX_EUTF8 = 4,        /* a text that is not valid UTF-8 */
    FX_ESURROGATE = 5,   /* a str holding a lone surrogate (no UTF-8 for it: the caller's path) */
    FX_EOVERLONG = 6,    /* an item longer than the capacity, without allow_overlong */
    FX_EFULL = 7,        /* a fixed-size table or scratch is full (the seen set; a row's scratch) */
    FX_EUNSUPPORTED = 8, /* an implementation this build or this processor does not have */
    FX_ESELFTEST = 9,    /* an implementation failed its self-test */
    FX_EOFFSETS = 10,    /* a row's offsets decrease or point outside its values */
    FX_EDICT_INDEX = 11, /* a row's dictionary index is out of range */
    FX_NSTATUS = 12
};

/* The name of a status ("FX_ENOMEM"), or "FX_UNKNOWN" for a number outside the enum. */
static inline const char *fx_status_name(int status)
{
    static const char *const names[FX_NSTATUS] = {
        "FX_OK", "FX_EINVAL", "FX_ENOMEM", "FX_EBIG", "FX_EUTF8", "FX_ESURROGATE",
        "FX_EOVERLONG", "FX_EFULL", "FX_EUNSUPPORTED", "FX_ESELFTEST", "FX_EOFFSETS",
        "FX_EDICT_INDEX"};
    return status >= 0 && status < FX_NSTATUS ? names[status] : "FX_UNKNOWN";
}

#endif
