/* fx_unicode: see fx_unicode.h.
 *
 * NFC works segment by segment. A segment starts at a "boundary": a starter (ccc 0) whose
 * NFC_QC is Yes. Such a code point never composes with what precedes it (it is no second
 * element of a composite) and its decomposition starts with such a starter too (checked by
 * the generator), so nothing before a boundary interacts with anything after it and each
 * segment normalizes alone. A segment that passes the quick check (all Yes, classes in order)
 * is copied; any other is decomposed, reordered and recomposed in a work buffer. Each step is
 * linear in the segment, so the whole is linear in the text.
 */
#define FX_UC_DEFINE_TABLES
#include "fx_unicode.h"
#include "fx_compat.h"

#include <stdlib.h>
#include <string.h>

/* The NFC byte of a code point (fx_unicode_tables.h): ccc rank << 2 | bit 1: NFC_QC is not
 * Yes | bit 0: it has a canonical decomposition. Both bits: No; bit 1 alone: Maybe (it may
 * compose with the starter before it). */
#define NB_DECOMP 1u
#define NB_NOT_YES 2u
#define NB_MAYBE NB_NOT_YES
#define NB_RANK(b) ((b) >> 2)

#define LOW21 ((UINT64_C(1) << 21) - 1)
#define LOW42 ((UINT64_C(1) << 42) - 1)
#define HIGHS UINT64_C(0x8080808080808080)

/* Hangul syllables decompose and compose arithmetically (Unicode 3.12). */
enum {
    S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
    L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT,
    S_COUNT = L_COUNT * N_COUNT
};

/* Runs of marks up to this long are insertion-sorted; longer ones counting-sorted. */
#define SHORT_RUN 16

static inline unsigned nfc_byte(uint32_t cp)
{
    if (cp >= FX_UC_NFC_LIMIT)
        return 0;
    return fx_uc_nfc_blocks[((unsigned)fx_uc_nfc_index[cp >> FX_UC_NFC_SHIFT] << FX_UC_NFC_SHIFT)
                            | (cp & ((1u << FX_UC_NFC_SHIFT) - 1))];
}

/* The code point at s[i] (i < n) and its length in *len. A sequence cut short by n (invalid
 * input) ends at n: never read past it. */
static inline uint32_t utf8_decode(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    uint32_t c = s[i];
    size_t k, m;
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    if (c < 0xE0) {
        m = 2;
        c &= 0x1F;
    } else if (c < 0xF0) {
        m = 3;
        c &= 0x0F;
    } else {
        m = 4;
        c &= 0x07;
    }
    if (m > n - i)
        m = n - i;
    for (k = 1; k < m; k++)
        c = c << 6 | (s[i + k] & 0x3Fu);
    *len = m;
    return c;
}

/* Writes c (< 0x200000) as UTF-8 at p; returns its length. */
static inline size_t utf8_encode(uint32_t c, uint8_t *p)
{
    if (c < 0x80) {
        p[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        p[0] = (uint8_t)(0xC0 | c >> 6);
        p[1] = (uint8_t)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        p[0] = (uint8_t)(0xE0 | c >> 12);
        p[1] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
        p[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    p[0] = (uint8_t)(0xF0 | c >> 18);
    p[1] = (uint8_t)(0x80 | (c >> 12 & 0x3F));
    p[2] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
    p[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

/* The index of the first non-ASCII byte of s[i..n), or n. Sixteen bytes a step; in the word
 * that holds one, its lowest high bit says where (little-endian, with ctz), not a byte loop:
 * chat text puts a non-ASCII character every few hundred bytes. */
static inline size_t skip_ascii(const uint8_t *s, size_t n, size_t i)
{
    uint64_t w, w2;
    while (n - i >= 16) {
        memcpy(&w, s + i, 8);
        memcpy(&w2, s + i + 8, 8);
        if ((w | w2) & HIGHS)
            break;
        i += 16;
    }
    while (n - i >= 8) {
        memcpy(&w, s + i, 8);
        if (w & HIGHS) {
#if FX_LITTLE && FX_HAVE_CTZ64
            return i + (FX_CTZ64(w & HIGHS) >> 3);
#else
            break;
#endif
        }
        i += 8;
    }
    while (i < n && s[i] < 0x80)
        i++;
    return i;
}

int fx_nfc_is_quick(const uint8_t *s, size_t n)
{
    size_t i = 0, len;
    unsigned last = 0, b, r;
    while (i < n) {
        if (s[i] < 0x80) {
            i = skip_ascii(s, n, i);
            last = 0;
            continue;
        }
        uint32_t c = utf8_decode(s, n, i, &len);
        i += len;
        if (c < FX_UC_NFC_QUICK) {
            last = 0;
            continue;
        }
        b = nfc_byte(c);
        r = NB_RANK(b);
        if ((b & NB_NOT_YES) || (r != 0 && r < last))
            return 0;
        last = r;
    }
    return 1;
}

/* Grows *p (capacity *cap elements of `size` bytes) to hold at least `need` elements. */
static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    size_t c;
    void *q;
    if (need <= *cap)
        return FX_OK;
    c = *cap < 64 ? 64 : *cap;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : c * 2;
    if (c > SIZE_MAX / size)
        return FX_ENOMEM;
    q = realloc(*p, c * size);
    if (!q)
        return FX_ENOMEM;
    *p = q;
    *cap = c;
    return FX_OK;
}

/* The caller's output buffers. */
typedef struct {
    uint8_t **out;
    size_t *len, *cap;
    int64_t **src;  /* NULL: no offsets wanted */
    size_t *src_cap;
} sink;

static int reserve(sink *k, size_t extra)
{
    size_t need;
    void *p;
    if (extra > SIZE_MAX - *k->len)
        return FX_ENOMEM;
    need = *k->len + extra;
    p = *k->out;
    if (grow(&p, k->cap, need, 1))
        return FX_ENOMEM;
    *k->out = (uint8_t *)p;
    if (k->src) {
        p = *k->src;
        if (grow(&p, k->src_cap, need, sizeof(int64_t)))
            return FX_ENOMEM;
        *k->src = (int64_t *)p;
    }
    return FX_OK;
}

/* Appends s[a..b) unchanged. */
static int emit_copy(sink *k, const uint8_t *s, size_t a, size_t b)
{
    size_t i;
    if (a == b)
        return FX_OK;
    if (reserve(k, b - a))
        return FX_ENOMEM;
    memcpy(*k->out + *k->len, s + a, b - a);
    if (k->src) {
        int64_t *d = *k->src + *k->len, at = (int64_t)a;
        for (i = a; i < b; i++) {
            if ((s[i] & 0xC0) != 0x80)
                at = (int64_t)i;
            *d++ = at;
        }
    }
    *k->len += b - a;
    return FX_OK;
}

/* A segment being normalized: code points, their NFC bytes and their changes, and room for
 * the counting sort. Reused across the segments of one call.
 *
 * chg is the alignment "change" of HF's unicode-normalization-alignments: the first code
 * point of a decomposition 0, the others 1; a composite the sum of its two parts' changes
 * minus 1. HF's NormalizedString::transform turns the sequence of changes into alignments by
 * walking the input (see emit_nfc); carrying the changes through the same reordering and
 * composition gives its alignments exactly. */
typedef struct {
    uint32_t *cp;
    uint8_t *nb;
    int32_t *chg;
    size_t n, cap;
    uint32_t *tcp;
    uint8_t *tnb;
    int32_t *tchg;
    size_t tcap;
} work;

static void work_free(work *w)
{
    free(w->cp);
    free(w->nb);
    free(w->chg);
    free(w->tcp);
    free(w->tnb);
    free(w->tchg);
}

static int work_reserve(work *w, size_t extra)
{
    size_t need = w->n + extra, c1 = w->cap, c2 = w->cap, c3 = w->cap;
    void *p;
    if (need <= w->cap)
        return FX_OK;
    /* the three arrays grow in step: grow each from the common capacity */
    p = w->cp;
    if (grow(&p, &c1, need, sizeof(uint32_t)))
        return FX_ENOMEM;
    w->cp = (uint32_t *)p;
    p = w->nb;
    if (grow(&p, &c2, need, 1))
        return FX_ENOMEM;
    w->nb = (uint8_t *)p;
    p = w->chg;
    if (grow(&p, &c3, need, sizeof(int32_t)))
        return FX_ENOMEM;
    w->chg = (int32_t *)p;
    w->cap = c1;  /* grow() picks the same capacity for the same inputs */
    return FX_OK;
}

static inline void push(work *w, uint32_t c)
{
    w->cp[w->n] = c;
    w->nb[w->n] = (uint8_t)nfc_byte(c);
    w->chg[w->n] = 1; /* decompose() sets its first code point's to 0 */
    w->n++;
}

/* The index in fx_uc_decomp of cp's entry, or -1. */
static long find_decomp(uint32_t cp)
{
    size_t lo = 0, hi = FX_UC_NDECOMP;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((fx_uc_decomp[mid] >> 42) < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < FX_UC_NDECOMP && (fx_uc_decomp[lo] >> 42) == cp ? (long)lo : -1;
}

/* Appends the full canonical decomposition of c (room for FX_UC_DECOMP_MAX is reserved),
 * changes 1 (the caller sets the first one's to 0). */
static void decompose(work *w, uint32_t c)
{
    uint32_t si = c - S_BASE;
    long at;
    if (si < S_COUNT) {
        push(w, L_BASE + si / N_COUNT);
        push(w, V_BASE + si % N_COUNT / T_COUNT);
        if (si % T_COUNT)
            push(w, T_BASE + si % T_COUNT);
        return;
    }
    if ((nfc_byte(c) & NB_DECOMP) && (at = find_decomp(c)) >= 0) {
        uint64_t e = fx_uc_decomp[at];
        decompose(w, (uint32_t)(e >> 21 & LOW21));
        if (e & LOW21)
            decompose(w, (uint32_t)(e & LOW21));
        return;
    }
    push(w, c);
}

/* The primary composite of the pair (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    uint32_t li = a - L_BASE, vi = b - V_BASE, si = a - S_BASE, ti = b - T_BASE;
    uint64_t key = (uint64_t)a << 21 | b;
    size_t lo = 0, hi = FX_UC_NCOMP;
    if (li < L_COUNT && vi < V_COUNT)
        return S_BASE + (li * V_COUNT + vi) * T_COUNT;
    if (si < S_COUNT && si % T_COUNT == 0 && ti - 1 < T_COUNT - 1)
        return a + ti;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((fx_uc_decomp[fx_uc_comp[mid]] & LOW42) < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < FX_UC_NCOMP && (fx_uc_decomp[fx_uc_comp[lo]] & LOW42) == key)
        return (uint32_t)(fx_uc_decomp[fx_uc_comp[lo]] >> 42);
    return 0;
}

/* Stable sort of the marks w[a..b) by combining class. */
static int sort_run(work *w, size_t a, size_t b)
{
    size_t i, j, count[64] = {0};
    for (i = a + 1; i < b && w->nb[i - 1] >> 2 <= w->nb[i] >> 2; i++)
        ;
    if (i == b)
        return FX_OK;  /* already in order: the usual case */
    if (b - a <= SHORT_RUN) {
        for (i = a + 1; i < b; i++) {
            uint32_t c = w->cp[i];
            uint8_t v = w->nb[i];
            int32_t chg = w->chg[i];
            for (j = i; j > a && w->nb[j - 1] >> 2 > v >> 2; j--) {
                w->cp[j] = w->cp[j - 1];
                w->nb[j] = w->nb[j - 1];
                w->chg[j] = w->chg[j - 1];
            }
            w->cp[j] = c;
            w->nb[j] = v;
            w->chg[j] = chg;
        }
        return FX_OK;
    }
    if (b - a > w->tcap) {
        size_t c1 = w->tcap, c2 = w->tcap, c3 = w->tcap;
        void *p = w->tcp;
        if (grow(&p, &c1, b - a, sizeof(uint32_t)))
            return FX_ENOMEM;
        w->tcp = (uint32_t *)p;
        p = w->tnb;
        if (grow(&p, &c2, b - a, 1))
            return FX_ENOMEM;
        w->tnb = (uint8_t *)p;
        p = w->tchg;
        if (grow(&p, &c3, b - a, sizeof(int32_t)))
            return FX_ENOMEM;
        w->tchg = (int32_t *)p;
        w->tcap = c1;
    }
    for (i = a; i < b; i++)
        count[w->nb[i] >> 2]++;
    for (i = 0, j = 0; i < 64; i++) {
        size_t c = count[i];
        count[i] = j;
        j += c;
    }
    for (i = a; i < b; i++) {
        j = count[w->nb[i] >> 2]++;
        w->tcp[j] = w->cp[i];
        w->tnb[j] = w->nb[i];
        w->tchg[j] = w->chg[i];
    }
    memcpy(w->cp + a, w->tcp, (b - a) * sizeof(uint32_t));
    memcpy(w->nb + a, w->tnb, b - a);
    memcpy(w->chg + a, w->tchg, (b - a) * sizeof(int32_t));
    return FX_OK;
}

/* Canonical composition of w in place (UAX #15, D117): each code point that may compose
 * backward and is not blocked from the last starter is tried against it. */
static void compose_all(work *w)
{
    size_t i, j = 0, starter = SIZE_MAX;
    unsigned last = 0;
    for (i = 0; i < w->n; i++) {
        uint32_t c = w->cp[i];
        unsigned v = w->nb[i], r = NB_RANK(v);
        /* not blocked: adjacent to the starter, or every mark between has a lower class
         * (they are in order, so the last one kept decides) */
        if (starter != SIZE_MAX && (v & 3u) == NB_MAYBE && (j == starter + 1 || last < r)) {
            uint32_t x = compose(w->cp[starter], c);
            if (x) {
                w->cp[starter] = x;
                w->chg[starter] += w->chg[i] - 1;  /* as the crate's Recompositions */
                continue;
            }
        }
        if (r == 0)
            starter = j;
        last = r;
        w->cp[j] = c;
        w->nb[j] = (uint8_t)v;
        w->chg[j] = w->chg[i];
        j++;
    }
    w->n = j;
}

/* Appends NFC(s[a..b)). */
static int emit_nfc(sink *k, work *w, const uint8_t *s, size_t a, size_t b)
{
    size_t i = a, len, start;
    uint8_t *o;
    int64_t *d;
    w->n = 0;
    while (i < b) {
        uint32_t c = utf8_decode(s, b, i, &len);
        if (work_reserve(w, FX_UC_DECOMP_MAX))
            return FX_ENOMEM;
        start = w->n;
        decompose(w, c);
        w->chg[start] = 0;
        i += len;
    }
    for (i = 0; i < w->n; i = start) {
        while (i < w->n && NB_RANK(w->nb[i]) == 0)
            i++;
        for (start = i; start < w->n && NB_RANK(w->nb[start]) != 0; start++)
            ;
        if (start - i > 1 && sort_run(w, i, start))
            return FX_ENOMEM;
    }
    compose_all(w);
    if (w->n > SIZE_MAX / 4 || reserve(k, w->n * 4))
        return FX_ENOMEM;
    o = *k->out + *k->len;
    d = k->src ? *k->src + *k->len : NULL;
    /* HF's transform walk: pos runs over the input code points in order; an output code point
     * of change <= 0 is aligned to the input code point at pos and consumes 1 - change of
     * them, one of change 1 is aligned to the code point before pos and consumes none. The
     * changes add up to (outputs - inputs), so the walk ends at b. */
    size_t pos = a, at = a;
    for (i = 0; i < w->n; i++) {
        len = utf8_encode(w->cp[i], o);
        o += len;
        if (!d)
            continue;
        if (w->chg[i] > 0) {
            /* HF aligns this to (0, 0) at pos 0, which no decomposition reaches: the first
             * output is the first part of a decomposition (they are in canonical order) */
            for (at = pos ? pos - 1 : 0; at > 0 && pos - at < 4 && (s[at] & 0xC0) == 0x80;)
                at--;
        } else {
            int64_t take = 1 - (int64_t)w->chg[i];
            at = pos;
            for (; take > 0 && pos < b; take--) {
                size_t step;
                (void)utf8_decode(s, b, pos, &step);
                pos += step;
            }
        }
        for (start = 0; start < len; start++)
            *d++ = (int64_t)at;
    }
    *k->len = (size_t)(o - *k->out);
    return FX_OK;
}

int fx_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len, size_t *out_cap,
           int64_t **src_of, size_t *src_cap)
{
    sink k;
    work w;
    size_t i = 0, len, seg = 0, done = 0;  /* s[done..seg) is NFC, not yet emitted */
    unsigned last = 0, b, r;
    int bad = 0, rc;
    k.out = out;
    k.len = out_len;
    k.cap = out_cap;
    k.src = src_of;
    k.src_cap = src_cap;
    memset(&w, 0, sizeof w);
    *out_len = 0;
    while (i < n) {
        if (!bad && s[i] < 0x80) {  /* ASCII: boundaries all */
            i = skip_ascii(s, n, i);
            seg = i - 1;
            last = 0;
            continue;
        }
        uint32_t c = utf8_decode(s, n, i, &len);
        b = c < FX_UC_NFC_QUICK ? 0 : nfc_byte(c);
        r = NB_RANK(b);
        if (r == 0 && !(b & NB_NOT_YES)) {
            if (bad) {
                if ((rc = emit_copy(&k, s, done, seg)) || (rc = emit_nfc(&k, &w, s, seg, i)))
                    goto end;
                done = i;
                bad = 0;
            }
            seg = i;
        } else if ((b & NB_NOT_YES) || r < last) {
            bad = 1;
        }
        last = r;
        i += len;
    }
    if (bad) {
        if (!(rc = emit_copy(&k, s, done, seg)))
            rc = emit_nfc(&k, &w, s, seg, n);
    } else {
        rc = emit_copy(&k, s, done, n);
    }
end:
    work_free(&w);
    return rc;
}
