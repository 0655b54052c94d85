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
    /* each length by itself, its continuation bytes tested together: the same answers as a
     * loop over them, with fewer branches (most text past ASCII is 2 or 3 bytes a letter) */
    size_t room = n - i;
    if (c < 0xE0) {
        if (c >= 0xC2 && room >= 2 && (s[i + 1] & 0xC0) == 0x80) {
            *len = 2;
            return (c & 0x1F) << 6 | (s[i + 1] & 0x3Fu);
        }
    } else if (c < 0xF0) {
        if (room >= 3 && ((s[i + 1] & 0xC0) | (s[i + 2] & 0xC0) << 8) == 0x8080) {
            uint32_t cp = (c & 0x0F) << 12 | (s[i + 1] & 0x3Fu) << 6 | (s[i + 2] & 0x3Fu);
            if (cp >= 0x800 && cp - 0xD800 >= 0x800) { /* no overlong, no surrogate */
                *len = 3;
                return cp;
            }
        }
    } else if (c <= 0xF4 && room >= 4 &&
               ((s[i + 1] & 0xC0) | (s[i + 2] & 0xC0) << 8 | (uint32_t)(s[i + 3] & 0xC0) << 16)
                   == 0x808080) {
        uint32_t cp = (c & 0x07) << 18 | (s[i + 1] & 0x3Fu) << 12 | (s[i + 2] & 0x3Fu) << 6 |
                      (s[i + 3] & 0x3Fu);
        if (cp >= 0x10000 && cp <= 0x10FFFF) {
            *len = 4;
            return cp;
        }
    }
    *len = 1;
    return FX_UTF8_BAD;
}

#endif /* FX_UTF8_H */
