/* fx_pretok: the pre-tokenizer patterns of byte-level BPE tokenizers, matched by hand.
 *
 * Each function returns where the regex's leftmost match starting at byte i ends, working the
 * alternation and its backtracking out case by case (as Oniguruma would run it on the
 * segment; a match never starts before i because every position is covered by some
 * alternative of these patterns). Character classes come from fx_unicode (Unicode 16.0, the
 * tables of HF's Oniguruma). Invalid UTF-8 bytes are taken one at a time, in no class.
 */
#include <string.h>

#include "fx_bpe.h"
#include "fx_compat.h"
#include "fx_unicode.h"
#include "fx_utf8.h"


/* The class of any byte: fx_uclass below 0x80 (checked against it by tests/test_tokenizer.py's
 * sweep), HI (decode the code point) from 0x80 up. */
#define HI 0x40u
#define HI16 HI, HI, HI, HI, HI, HI, HI, HI, HI, HI, HI, HI, HI, HI, HI, HI
static const uint8_t byte_cls[256] = {
     0,  0,  0,  0,  0,  0,  0,  0,  0,  4, 20,  4,  4, 20,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     4,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     2,  2,  2,  2,  2,  2,  2,  2,  2,  2,  0,  0,  0,  0,  0,  0,
     0,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  0,  0,  0,  0,  0,
     0,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  0,  0,  0,  0,  0,
    HI16, HI16, HI16, HI16, HI16, HI16, HI16, HI16,
};

static inline unsigned cls(uint32_t c)
{
    return c < 0x80 ? byte_cls[c] : c == FX_UTF8_BAD ? 0u : fx_uclass(c);
}

#define IS_L(k) ((k) & FX_UC_L)
#define IS_N(k) ((k) & FX_UC_N)
#define IS_WS(k) ((k) & FX_UC_WS)
/* [^\s\p{L}\p{N}] */
#define IS_P(k) (!((k) & (FX_UC_L | FX_UC_N | FX_UC_WS)))

/* The class of the code point at s[i] (i < n), its length in *len. */
static inline unsigned cls_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    unsigned k = byte_cls[s[i]];
    if (!(k & HI)) {
        *len = 1;
        return k;
    }
    return cls(fx_utf8_at(s, n, i, len));
}

/* End of the run of code points of class mask `want` starting at i (at most `max` of them). */
static size_t run(const uint8_t *s, size_t n, size_t i, unsigned want, size_t max)
{
    size_t got = 0, len;
    while (i < n && got < max) {
        if (!(cls_at(s, n, i, &len) & want))
            break;
        i += len;
        got++;
    }
    return i;
}

/* End of the run of \p{L} from i: ASCII letters a byte at a time, the rest decoded. */
static inline size_t letters(const uint8_t *s, size_t n, size_t i)
{
    for (;;) {
#if FX_LITTLE && FX_HAVE_CTZ64
        /* eight bytes at a time: a byte is an ASCII letter when, lowercased by | 0x20, it is
         * in 0x61..0x7A (bytes from 0x80 up carry into the next byte's sums, but only the
         * first non-letter counts, and the bytes below it are all under 0x80) */
        while (i + 8 <= n) {
            uint64_t w, x, hi = 0x8080808080808080ull;
            memcpy(&w, s + i, 8);
            x = w | 0x2020202020202020ull;
            uint64_t letter = (x + 0x1f1f1f1f1f1f1f1full) & ~(x + 0x0505050505050505ull) & ~w & hi;
            if (letter != hi) {
                i += FX_CTZ64(~letter & hi) >> 3;
                break;
            }
            i += 8;
        }
#endif
        while (i < n && (byte_cls[s[i]] & FX_UC_L))
            i++;
        if (i >= n || s[i] < 0x80)
            return i;
        /* letters past ASCII one after another (a word of most scripts), then ASCII again */
        do {
            size_t len;
            if (!(cls(fx_utf8_at(s, n, i, &len)) & FX_UC_L))
                return i;
            i += len;
        } while (i < n && s[i] >= 0x80);
        if (i >= n || !(byte_cls[s[i]] & FX_UC_L))
            return i;
    }
}

/* End of a run of [^\s\p{L}\p{N}] from i. */
static size_t run_p(const uint8_t *s, size_t n, size_t i)
{
    for (;;) {
        while (i < n && !(byte_cls[s[i]] & (FX_UC_L | FX_UC_N | FX_UC_WS | HI)))
            i++;
        size_t len;
        if (i >= n || s[i] < 0x80 || !IS_P(cls(fx_utf8_at(s, n, i, &len))))
            return i;
        i += len;
    }
}

static inline int lower_is(uint32_t c, char want)
{
    return c == (uint32_t)want || c == (uint32_t)(want - 'a' + 'A');
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at i (s[i] == '\''), or case-sensitive ones: the end, or 0. */
static size_t contraction(const uint8_t *s, size_t n, size_t i, int fold)
{
    size_t l1, l2;
    if (i + 1 >= n)
        return 0;
    uint32_t a = fx_utf8_at(s, n, i + 1, &l1);
    uint32_t b = i + 1 + l1 < n ? fx_utf8_at(s, n, i + 1 + l1, &l2) : 0;
    if (!fold) {
        if (a == 's' || a == 't' || a == 'm' || a == 'd')
            return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return i + 3;
        return 0;
    }
    /* U+017F LATIN SMALL LETTER LONG S folds to 's' */
    if (lower_is(a, 's') || a == 0x17F || lower_is(a, 't') || lower_is(a, 'm') ||
        lower_is(a, 'd'))
        return i + 1 + l1;
    if (b && ((lower_is(a, 'r') && lower_is(b, 'e')) || (lower_is(a, 'v') && lower_is(b, 'e')) ||
              (lower_is(a, 'l') && lower_is(b, 'l'))))
        return i + 1 + l1 + l2;
    return 0;
}

/* Whitespace from i (s[i] is \s): \s*[\r\n]+ | \s+(?!\S) | \s+ */
static size_t spaces(const uint8_t *s, size_t n, size_t i, int crlf_alt)
{
    size_t j = i, last_nl = 0, last_start = i; /* last_start: where the last \s began */
    while (j < n) {
#if FX_LITTLE && FX_HAVE_CTZ64
        if (s[j] == ' ') { /* a run of spaces (indentation), eight bytes at a time */
            size_t e = j + 1;
            while (e + 8 <= n) {
                uint64_t w;
                memcpy(&w, s + e, 8);
                w ^= 0x2020202020202020ull;
                if (w) {
                    e += FX_CTZ64(w) >> 3;
                    break;
                }
                e += 8;
            }
            while (e < n && s[e] == ' ')
                e++;
            last_start = e - 1;
            j = e;
            continue;
        }
#endif
        size_t len;
        unsigned k = cls_at(s, n, j, &len);
        if (!IS_WS(k))
            break;
        last_start = j;
        j += len;
        if (k & FX_UC_CRLF)
            last_nl = j;
    }
    if (crlf_alt && last_nl)
        return last_nl; /* \s*[\r\n]+ backs off to the last line break of the run */
    if (j == n || last_start == i)
        return j;      /* \s+(?!\S) to the end, or \s+ for a single character */
    return last_start; /* \s+(?!\S) leaves the last one for the next token */
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+ */
static FX_FORCE_INLINE size_t next_llama3(const uint8_t *s, size_t n, size_t i, size_t digits)
{
    size_t len, len2, e;
    unsigned b = s[i], kb = byte_cls[b];
    /* ASCII first: the common cases (a word, a space or symbol then a word, one digit run,
     * a symbol run) without decoding; the rest, and anything non-ASCII, below */
    if (kb & FX_UC_L)
        return letters(s, n, i + 1);
    if (!(kb & HI) && b != '\'') {
        unsigned kn = i + 1 < n ? byte_cls[s[i + 1]] : 0;
        if (!(kb & (FX_UC_N | FX_UC_CRLF)) && (kn & FX_UC_L))
            return letters(s, n, i + 2);
        if (!(kn & HI)) {
            if (kb & FX_UC_N) { /* ASCII digits here; any other digit through run() */
                size_t j = i + 1;
                while (j < n && j - i < digits && (byte_cls[s[j]] & FX_UC_N))
                    j++;
                if (j - i < digits && j < n && s[j] >= 0x80)
                    return run(s, n, j, FX_UC_N, digits - (j - i));
                return j;
            }
            if (IS_P(kb) || (b == ' ' && i + 1 < n && IS_P(kn))) {
                e = run_p(s, n, b == ' ' ? i + 1 : i);
                while (e < n && (s[e] == '\r' || s[e] == '\n'))
                    e++;
                return e;
            }
            return spaces(s, n, i, 1); /* \s, then no letter and no symbol */
        }
    }
    uint32_t c = fx_utf8_at(s, n, i, &len);
    unsigned k = cls(c);
    if (c == '\'' && (e = contraction(s, n, i, 1)) != 0)
        return e;
    if (IS_L(k))
        return letters(s, n, i + len);
    if (c != '\r' && c != '\n' && !IS_N(k) && i + len < n &&
        IS_L(cls(fx_utf8_at(s, n, i + len, &len2))))
        return letters(s, n, i + len + len2);
    if (IS_N(k))
        return run(s, n, i + len, FX_UC_N, digits - 1);
    if (IS_P(k) || (c == ' ' && i + 1 < n && IS_P(cls(fx_utf8_at(s, n, i + 1, &len2))))) {
        e = run_p(s, n, c == ' ' ? i + 1 : i);
        while (e < n && (s[e] == '\r' || s[e] == '\n'))
            e++;
        return e;
    }
    return spaces(s, n, i, 1);
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t next_gpt2(const uint8_t *s, size_t n, size_t i)
{
    size_t len, e;
    uint32_t c = fx_utf8_at(s, n, i, &len);
    unsigned k = cls(c);
    if (c == '\'' && (e = contraction(s, n, i, 0)) != 0)
        return e;
    size_t j = i;
    if (c == ' ' && i + 1 < n) { /* an optional space before a letter, digit or symbol run */
        c = fx_utf8_at(s, n, i + 1, &len);
        k = cls(c);
        if (IS_WS(k))
            return spaces(s, n, i, 0);
        j = i + 1;
    }
    if (IS_L(k))
        return letters(s, n, j + len);
    if (IS_N(k))
        return run(s, n, j + len, FX_UC_N, SIZE_MAX);
    if (IS_P(k))
        return run_p(s, n, j + len);
    return spaces(s, n, i, 0);
}

size_t fx_pretok_split(const uint8_t *seg, size_t n, size_t i, int pretok, size_t *ends,
                       size_t max)
{
    size_t k = 0;
    switch (pretok) {
    case FX_PRETOK_LLAMA3:
        for (; k < max && i < n; k++)
            ends[k] = i = next_llama3(seg, n, i, 3);
        break;
    case FX_PRETOK_QWEN2:
        for (; k < max && i < n; k++)
            ends[k] = i = next_llama3(seg, n, i, 1);
        break;
    case FX_PRETOK_GPT2:
        for (; k < max && i < n; k++)
            ends[k] = i = next_gpt2(seg, n, i);
        break;
    default:
        if (max && i < n)
            ends[k++] = n;
    }
    return k;
}

size_t fx_pretok_next(const uint8_t *seg, size_t n, size_t i, int pretok)
{
    switch (pretok) {
    case FX_PRETOK_LLAMA3:
        return next_llama3(seg, n, i, 3);
    case FX_PRETOK_QWEN2:
        return next_llama3(seg, n, i, 1);
    case FX_PRETOK_GPT2:
        return next_gpt2(seg, n, i);
    default:
        return n;
    }
}
