# Included by _tok.pyx: the Unicode layer (csrc/fx_unicode.h), exposed for
# tests/test_unicode_tables.py, which compares it with HF tokenizers itself.

UNICODE_VERSION = FX_UC_VERSION.decode()
NFC_UNICODE_VERSION = FX_UC_NFC_VERSION.decode()
UC_L = FX_UC_L
UC_N = FX_UC_N
UC_WS = FX_UC_WS
UC_M = FX_UC_M
UC_CRLF = FX_UC_CRLF
UC_W = FX_UC_W


def _uclass_all():
    """The class byte (``UC_*`` bits) of every code point 0..0x10FFFF, in order."""
    cdef bytearray out = bytearray(0x110000)
    cdef uint8_t *p = out
    cdef uint32_t cp
    with nogil:
        for cp in range(0x110000):
            p[cp] = <uint8_t>fx_uclass(cp)
    return bytes(out)


def _nfc_is_quick(str s):
    """fx_nfc_is_quick on the UTF-8 of ``s``: True when ``s`` is certainly NFC already."""
    cdef bytes b = s.encode("utf-8")
    cdef const uint8_t *p = b
    cdef size_t n = len(b)
    cdef int r
    with nogil:
        r = fx_nfc_is_quick(p, n)
    return r != 0


def _nfc_utf8(bytes b, bint offsets=True):
    """``(fx_nfc(b), src_of)``: the NFC of the UTF-8 text ``b`` and, when ``offsets``, the
    source byte offset of each output byte (else None)."""
    cdef const uint8_t *p = b
    cdef size_t n = len(b), out_len = 0, out_cap = 0, src_cap = 0, i
    cdef uint8_t *out = NULL
    cdef int64_t *src = NULL
    cdef int rc
    try:
        with nogil:
            rc = fx_nfc(p, n, &out, &out_len, &out_cap, &src if offsets else NULL, &src_cap)
        check_status(rc, "fx_nfc", "normalizing")
        text = out[:out_len] if out_len else b""
        return text, [src[i] for i in range(out_len)] if offsets else None
    finally:
        free(out)
        free(src)


def _nfc(str s):
    """``(NFC of s, src)`` by fx_nfc: ``src[k]`` is the index in ``s`` of the code point the
    k-th code point of the result comes from (fx_nfc's byte offsets, counted in code points)."""
    b = s.encode("utf-8")
    out, src = _nfc_utf8(b)
    starts = [i for i, x in enumerate(b) if x & 0xC0 != 0x80]  # code point k starts at starts[k]
    index = dict(zip(starts, range(len(starts))))
    return out.decode("utf-8"), [index[src[i]] for i, x in enumerate(out) if x & 0xC0 != 0x80]
