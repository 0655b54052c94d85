# Included by _pack.pyx: the text reader's check of a JSON Lines block before pyarrow parses it
# (fastaxo/readers/text.py; the rules are csrc/fx_json.h's).


def json_too_deep(const uint8_t[::1] block, int64_t limit):
    """The 0-based index of the first line of ``block`` whose JSON nests deeper than ``limit``
    levels (strings and escapes honoured; csrc/fx_json.h), or -1. GIL released."""
    cdef int64_t n = block.shape[0], r
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if n == 0:
        return -1
    with nogil:
        r = fx_json_too_deep(&block[0], n, limit)
    return r
