/* fx_json: see fx_json.h. */
#include "fx_json.h"

#include <string.h>

enum { C_NONE = 0, C_NEWLINE, C_QUOTE, C_ESCAPE, C_OPEN, C_CLOSE };

/* The classes that matter outside and inside a string; every other byte is skipped. */
static const uint8_t OUTSIDE[256] = {
    ['\n'] = C_NEWLINE, ['"'] = C_QUOTE, ['\\'] = C_ESCAPE,
    ['['] = C_OPEN, ['{'] = C_OPEN, [']'] = C_CLOSE, ['}'] = C_CLOSE,
};
static const uint8_t INSIDE[256] = {
    ['\n'] = C_NEWLINE, ['"'] = C_QUOTE, ['\\'] = C_ESCAPE,
};

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* Nonzero when one of the 8 bytes of w is 0 (exact as a test; SWAR). */
static inline uint64_t has_zero(uint64_t w) { return (w - ONES) & ~w & HIGHS; }

/* Nonzero when one of the 8 bytes of w is a byte class `cls` acts on. Most bytes of a JSON
 * Lines block are not (string contents, numbers, commas): eight at a time, about 3x the
 * byte-by-byte table walk. '[' | 0x20 == '{' and ']' | 0x20 == '}'; no other byte maps there. */
static inline uint64_t has_special(uint64_t w, int outside)
{
    uint64_t any = has_zero(w ^ (ONES * '"')) | has_zero(w ^ (ONES * '\\')) |
                   has_zero(w ^ (ONES * '\n'));
    if (outside) {
        uint64_t folded = w | (ONES * 0x20);
        any |= has_zero(folded ^ (ONES * '{')) | has_zero(folded ^ (ONES * '}'));
    }
    return any;
}

int64_t fx_json_too_deep(const uint8_t *p, int64_t n, int64_t limit)
{
    int64_t i = 0, line = 0, depth = 0;
    const uint8_t *cls = OUTSIDE;
    while (i < n) {
        uint64_t w;
        while (i + 8 <= n) {
            memcpy(&w, p + i, 8); /* one unaligned load */
            if (has_special(w, cls == OUTSIDE))
                break;
            i += 8;
        }
        while (i < n && !cls[p[i]])
            i++;
        if (i == n)
            break;
        switch (cls[p[i]]) {
        case C_NEWLINE:
            line++;
            depth = 0;
            cls = OUTSIDE;
            break;
        case C_QUOTE:
            cls = cls == OUTSIDE ? INSIDE : OUTSIDE;
            break;
        case C_ESCAPE:
            if (i + 1 < n && p[i + 1] != '\n')
                i++; /* the escaped byte */
            break;
        case C_OPEN:
            if (++depth > limit)
                return line;
            break;
        default: /* C_CLOSE */
            depth--;
            break;
        }
        i++;
    }
    return -1;
}
