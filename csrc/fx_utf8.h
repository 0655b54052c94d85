/* fx_utf8: one UTF-8 decoder for the tokenizer's C (fx_pretok, fx_bpe), and the encoder of
 * Python's str storage (PEP 393: 1, 2 or 4 bytes a code point) into UTF-8. */
#ifndef FX_UTF8_H
#define FX_UTF8_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* Bytes of UTF-8 that n code points of `kind` bytes each (1, 2, 4) take at most. */
static inline int64_t fx_ucs_utf8_bound(int kind, int64_t n)
{
    return kind == 1 ? 2 * n : kind == 2 ? 3 * n : 4 * n;
}

/* One code point of a str into o; returns the new end, or NULL for a surrogate. */
static inline uint8_t *fx_ucs_put(uint32_t c, uint8_t *o)
{
    if (c < 0x80) {
        *o++ = (uint8_t)c;
    } else if (c < 0x800) {
        *o++ = (uint8_t)(0xC0 | c >> 6);
        *o++ = (uint8_t)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        if (c - 0xD800u < 0x800u)
            return NULL;
        *o++ = (uint8_t)(0xE0 | c >> 12);
        *o++ = (uint8_t)(0x80 | (c >> 6 & 0x3F));
        *o++ = (uint8_t)(0x80 | (c & 0x3F));
    } else {
        *o++ = (uint8_t)(0xF0 | c >> 18);
        *o++ = (uint8_t)(0x80 | (c >> 12 & 0x3F));
        *o++ = (uint8_t)(0x80 | (c >> 6 & 0x3F));
        *o++ = (uint8_t)(0x80 | (c & 0x3F));
    }
    return o;
}

/* The UTF-8 of the n code points at data (`kind` bytes each, 1, 2 or 4, native order: a
 * PEP 393 string's storage) into out (fx_ucs_utf8_bound bytes of room). Returns the bytes
 * written, or -1 with *bad the index of the first surrogate: UTF-8 cannot hold one
 * (str.encode("utf-8") refuses it too). Code points past U+10FFFF do not occur in a str.
 * (One loop per kind, so that none tests the kind per code point.) */
static inline int64_t fx_ucs_to_utf8(int kind, const void *data, int64_t n, uint8_t *out,
                                     int64_t *bad)
{
    uint8_t *o = out;
    int64_t i = 0;
    if (kind == 1) {
        const uint8_t *p = (const uint8_t *)data;
        while (i < n) {
            /* ASCII 8 at a time (Latin-1 text is mostly ASCII) */
            while (i + 8 <= n) {
                uint64_t w;
                memcpy(&w, p + i, 8);
                if (w & 0x8080808080808080u)
                    break;
                memcpy(o, &w, 8);
                o += 8;
                i += 8;
            }
            if (i == n)
                break;
            o = fx_ucs_put(p[i++], o); /* (below U+0100: never a surrogate) */
        }
    } else if (kind == 2) {
        const uint16_t *p = (const uint16_t *)data;
        for (; i < n; i++) {
            if ((o = fx_ucs_put(p[i], o)) == NULL) {
                *bad = i;
                return -1;
            }
        }
    } else {
        const uint32_t *p = (const uint32_t *)data;
        for (; i < n; i++) {
            if ((o = fx_ucs_put(p[i], o)) == NULL) {
                *bad = i;
                return -1;
            }
        }
    }
    return o - out;
}

/* Characters (the bytes that do not continue a sequence: not 10xxxxxx) among the 8 bytes of
 * w: a byte's bit 7 set and bit 6 clear marks a continuation; the marks are summed by one
 * multiply. Any byte order (bytes are counted, not placed). */
static inline int64_t fx_utf8_starts8(uint64_t w)
{
    uint64_t cont = (w & ~(w << 1) & 0x8080808080808080u) >> 7;
    return 8 - (int64_t)((cont * 0x0101010101010101u) >> 56);
}

/* The characters of the UTF-8 s[0..n) (as Python counts a valid string's: the bytes that
 * start one), 8 bytes at a time. */
static inline int64_t fx_utf8_count(const uint8_t *s, int64_t n)
{
    int64_t i = 0, c = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        c += fx_utf8_starts8(w);
    }
    for (; i < n; i++)
        c += (s[i] & 0xC0) != 0x80;
    return c;
}

/* From byte `at` of s[0..n), the byte where the character k characters on starts (k = 0: the
 * first character starting at or after `at`), or n past the last one. Whole words are
 * skipped while they hold no more than the characters left to pass. */
static inline int64_t fx_utf8_skip(const uint8_t *s, int64_t n, int64_t at, int64_t k)
{
    while (at + 8 <= n) {
        uint64_t w;
        memcpy(&w, s + at, 8);
        int64_t c = fx_utf8_starts8(w);
        if (c > k)
            break;
        k -= c;
        at += 8;
    }
    for (; at < n; at++) {
        if ((s[at] & 0xC0) != 0x80) {
            if (k == 0)
                return at;
            k--;
        }
    }
    return n;
}

#endif /* FX_UTF8_H */
