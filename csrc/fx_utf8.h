/* fx_utf8: one UTF-8 decoder for the tokenizer's C (fx_pretok, fx_bpe). */
#ifndef FX_UTF8_H
#define FX_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* What fx_utf8_at returns for a byte that does not start a valid sequence. */
#define FX_UTF8_BAD 0xFFFFFFFFu

/* The code point at s[i] (i < n), its length in *len; an invalid or truncated sequence is
 * one byte long and decodes to 0xFFFFFFFF (in no class). */
static inline uint32_t fx_utf8_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    uint32_t c = s[i];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    size_t k;
    uint32_t min;
    if (c >= 0xC2 && c <= 0xDF) {
        k = 1, c &= 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 2, c &= 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 3, c &= 0x07, min = 0x10000;
    } else {
        *len = 1;
        return FX_UTF8_BAD;
    }
    if (n - i <= k) {
        *len = 1;
        return FX_UTF8_BAD;
    }
    for (size_t j = 1; j <= k; j++) {
        uint32_t b = s[i + j];
        if ((b & 0xC0) != 0x80) {
            *len = 1;
            return FX_UTF8_BAD;
        }
        c = (c << 6) | (b & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        *len = 1;
        return FX_UTF8_BAD;
    }
    *len = k + 1;
    return c;
}

#endif /* FX_UTF8_H */
