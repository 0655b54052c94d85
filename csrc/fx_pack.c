/* fx_pack: bin assignment for sample packing.  See fx_pack.h for the contract.
 *
 * Layout of the work (n items, nb bins):
 *   1. validate (scalars, then one min/max pass over the lengths; the first negative or
 *      over-long index is only searched for when min/max say there is one);
 *   2. BFD/FFD: sort item indices by length descending, ties by index ascending, into
 *      `perm` (n int64, allocated): counting sort when the length range is at most
 *      max(n, 4096), else LSD radix sort (stable, so ties stay in index order), insertion
 *      sort for n <= 32.  The sorted lengths go to the caller's `order` array, which is
 *      free scratch until step 4 (and the radix sort's ping-pong buffer), so the
 *      assignment loop reads lengths sequentially instead of gathering through perm;
 *   3. assign: for the k-th processed item, its bin goes to bin_offsets[k] (the caller's
 *      n + 1 slots are free scratch until the end) and the bin's item count is bumped.
 *      BFD: LIFO stacks of bins per remaining value + a 64-ary bitmap for "smallest
 *      value >= s".  FFD/FF: an 8-ary max tree over bins, with the newest 8 bins kept
 *      outside it (almost every item lands in one of them; see fxp_ff);
 *   4. emit: counts -> exclusive prefix sums (cursors), scatter the items in processing
 *      order into `order` (insertion order within each bin), then write bin_offsets
 *      from the cursors.  No per-item allocation, no per-bin item lists.
 * NF needs neither: its order is the identity and its bins are runs.
 */
/* nanosleep (fx_sync.h) is POSIX: ask for it before any system header */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fx_compat.h"
#include "fx_pack.h"
#include "fx_sync.h"

/* ------------------------------------------------------------------ bit helpers */

/* FXP_PORTABLE_BITS forces the portable fallback (used by the tests). */
#if !defined(FXP_PORTABLE_BITS) && FX_GNUC
static inline int fxp_ctz64(uint64_t x) { return __builtin_ctzll(x); }
static inline int fxp_bitlen64(uint64_t x) { return x ? 64 - __builtin_clzll(x) : 0; }
#define FXP_INLINE inline
#elif !defined(FXP_PORTABLE_BITS) && FX_MSVC && (defined(_M_X64) || defined(_M_ARM64))
unsigned char _BitScanForward64(unsigned long *index, unsigned __int64 mask);
unsigned char _BitScanReverse64(unsigned long *index, unsigned __int64 mask);
#pragma intrinsic(_BitScanForward64)
#pragma intrinsic(_BitScanReverse64)
static __inline int fxp_ctz64(uint64_t x)
{
    unsigned long i;
    _BitScanForward64(&i, x);
    return (int)i;
}
static __inline int fxp_bitlen64(uint64_t x)
{
    unsigned long i;
    return _BitScanReverse64(&i, x) ? (int)i + 1 : 0;
}
#define FXP_INLINE __inline
#else
/* Portable fallback (x != 0): binary search for the lowest set bit. */
static int fxp_ctz64(uint64_t x)
{
    int r = 0;
    if (!(x & UINT64_C(0xffffffff))) { r += 32; x >>= 32; }
    if (!(x & UINT64_C(0xffff))) { r += 16; x >>= 16; }
    if (!(x & UINT64_C(0xff))) { r += 8; x >>= 8; }
    if (!(x & UINT64_C(0xf))) { r += 4; x >>= 4; }
    if (!(x & UINT64_C(0x3))) { r += 2; x >>= 2; }
    if (!(x & UINT64_C(0x1))) r += 1;
    return r;
}
static int fxp_bitlen64(uint64_t x)
{
    int b = 0;
    while (x) { b++; x >>= 1; }
    return b;
}
#define FXP_INLINE
#endif

/* Bodies instantiated twice (items read in place, or through an index) are forced inline
 * into their wrappers, so that each copy is compiled for its own way of reading. */
#define FXP_ALWAYS_INLINE static FX_FORCE_INLINE

/* Where FF's items come from: item k has length slen[k], or (index != NULL) it is row
 * index[k] of length len32[index[k]], readable once *progress > k (progress != NULL). */
typedef struct {
    const int64_t *slen;
    const int32_t *len32;
    const int64_t *index;
    const volatile int64_t *progress;
} fxp_items;

/* Leaves of a tree (a power of two >= 64) for an expected bin count. */
static int64_t fxp_tree_cap(int64_t bins_hint, int64_t n)
{
    int64_t cap = 64, want = bins_hint < n ? bins_hint : n;
    while (cap < want && cap < ((int64_t)1 << 40)) cap *= 2;
    return cap;
}

/* malloc of count elements of size sz, NULL on overflow or failure; count may be 0. */
static void *fxp_alloc(int64_t count, size_t sz, int zero)
{
    if (count < 0 || (uint64_t)count > (uint64_t)(SIZE_MAX / sz)) return NULL;
    if (count == 0) count = 1;
    return zero ? calloc((size_t)count, sz) : malloc((size_t)count * sz);
}

/* Grows *p (count elements of sz) to newcount; returns 0 or -1 (then *p is untouched). */
static int fxp_grow(void **p, int64_t newcount, size_t sz)
{
    void *q;
    if (newcount < 0 || (uint64_t)newcount > (uint64_t)(SIZE_MAX / sz)) return -1;
    q = realloc(*p, (size_t)newcount * sz);
    if (q == NULL) return -1;
    *p = q;
    return 0;
}

/* ------------------------------------------------------------------ sort */

/* perm <- item indices by length descending, ties by index ascending;
 * slen[k] <- len[perm[k]].  slen (n slots) is also the radix sort's scratch buffer.
 * Returns FX_OK or FX_ENOMEM. */
static int fxp_sort_desc(const int64_t *len, int64_t n, int64_t minlen, int64_t maxlen,
                         int64_t *perm, int64_t *slen)
{
    int64_t *tmp = slen;
    uint64_t range = (uint64_t)(maxlen - minlen); /* both >= 0: no overflow */
    int64_t i, k;

    if (range == 0) {
        for (i = 0; i < n; i++) {
            perm[i] = i;
            slen[i] = maxlen;
        }
        return FX_OK;
    }
    if (n <= 32) { /* stable insertion sort */
        for (i = 0; i < n; i++) {
            int64_t s = len[i], j = i;
            while (j > 0 && len[perm[j - 1]] < s) {
                perm[j] = perm[j - 1];
                j--;
            }
            perm[j] = i;
        }
        for (i = 0; i < n; i++) slen[i] = len[perm[i]];
        return FX_OK;
    }
    {
        /* counting sort when its count array is no bigger than the items (or tiny) */
        uint64_t lim = (uint64_t)n < 4096u ? 4096u : (uint64_t)n;
        if (range < lim) { /* counting sort on key = maxlen - len in [0, range] */
            int64_t nkeys = (int64_t)range + 1, sum = 0;
            int64_t *cnt = (int64_t *)fxp_alloc(nkeys, sizeof(int64_t), 1);
            if (cnt == NULL) return FX_ENOMEM;
            for (i = 0; i < n; i++) cnt[maxlen - len[i]]++;
            for (k = 0; k < nkeys; k++) {
                int64_t c = cnt[k];
                cnt[k] = sum;
                sum += c;
            }
            for (i = 0; i < n; i++) perm[cnt[maxlen - len[i]]++] = i;
            /* cnt[key] is now the end of the key's run: fill slen run by run */
            for (i = 0, k = 0; k < nkeys; k++)
                for (; i < cnt[k]; i++) slen[i] = maxlen - k;
            free(cnt);
            return FX_OK;
        }
    }
    { /* LSD radix sort on key = maxlen - len, digits of <= 11 bits, stable */
        int bits = fxp_bitlen64(range);
        int passes = (bits + 10) / 11;
        int width = (bits + passes - 1) / passes;
        int64_t nbk = (int64_t)1 << width;
        uint64_t mask = (uint64_t)nbk - 1u;
        int p;
        int64_t *hist = (int64_t *)fxp_alloc(nbk * passes, sizeof(int64_t), 1);
        if (hist == NULL) return FX_ENOMEM;
        for (i = 0; i < n; i++) {
            uint64_t key = (uint64_t)(maxlen - len[i]);
            for (p = 0; p < passes; p++) hist[p * nbk + (int64_t)((key >> (p * width)) & mask)]++;
        }
        for (p = 0; p < passes; p++) {
            int64_t *h = hist + p * nbk, sum = 0;
            for (k = 0; k < nbk; k++) {
                int64_t c = h[k];
                h[k] = sum;
                sum += c;
            }
        }
        for (p = 0; p < passes; p++) {
            int64_t *h = hist + p * nbk;
            /* the last pass must write perm */
            int64_t *dst = ((passes - 1 - p) % 2 == 0) ? perm : tmp;
            const int64_t *src = (dst == perm) ? tmp : perm;
            int shift = p * width;
            if (p == 0) {
                for (i = 0; i < n; i++) {
                    uint64_t key = (uint64_t)(maxlen - len[i]);
                    dst[h[(key >> shift) & mask]++] = i;
                }
            } else {
                for (k = 0; k < n; k++) {
                    int64_t it = src[k];
                    uint64_t key = (uint64_t)(maxlen - len[it]);
                    dst[h[(key >> shift) & mask]++] = it;
                }
            }
        }
        free(hist);
        for (i = 0; i < n; i++) slen[i] = len[perm[i]];
        return FX_OK;
    }
}

/* ------------------------------------------------------------------ emit */

/* binseq[k] (stored in bin_offsets[0..n)) is the bin of the k-th processed item, which
 * is perm[k] (or k when perm is NULL); cnt[b] the item count of bin b.  Writes order and
 * bin_offsets[0..nb].  Destroys cnt. */
static void fxp_emit(const int64_t *perm, int64_t n, int64_t *cnt, int64_t nb,
                     int64_t *order, int64_t *bin_offsets)
{
    int64_t b, k, sum = 0;
    for (b = 0; b < nb; b++) {
        int64_t c = cnt[b];
        cnt[b] = sum;
        sum += c;
    }
    if (perm != NULL) {
        for (k = 0; k < n; k++) order[cnt[bin_offsets[k]]++] = perm[k];
    } else {
        for (k = 0; k < n; k++) order[cnt[bin_offsets[k]]++] = k;
    }
    bin_offsets[0] = 0;
    for (b = 0; b < nb; b++) bin_offsets[b + 1] = cnt[b];
}

/* ------------------------------------------------------------------ BFD */

#define FXP_MAX_LEVELS 8

/* 64-ary bitmap hierarchy over values 0..C: bit v of level 0 is set iff the stack of
 * value v is non-empty; bit w of level k+1 iff word w of level k is non-zero. */
typedef struct {
    uint64_t *lv[FXP_MAX_LEVELS];
    int64_t nw[FXP_MAX_LEVELS];
    int nlev;
} fxp_bitmap;

/* Smallest set value >= x, or -1. */
static FXP_INLINE int64_t fxp_succ(const fxp_bitmap *bm, int64_t x)
{
    int k = 0;
    for (;;) {
        int64_t w;
        uint64_t bits;
        if (k == bm->nlev) return -1;
        w = x >> 6;
        if (w >= bm->nw[k]) return -1;
        bits = bm->lv[k][w] & (~UINT64_C(0) << (x & 63));
        if (bits) {
            x = (w << 6) | fxp_ctz64(bits);
            break;
        }
        x = w + 1;
        k++;
    }
    while (k > 0) {
        k--;
        x = (x << 6) | fxp_ctz64(bm->lv[k][x]);
    }
    return x;
}

static FXP_INLINE void fxp_bm_set(fxp_bitmap *bm, int64_t v)
{
    int k;
    for (k = 0; k < bm->nlev; k++) {
        uint64_t *w = &bm->lv[k][v >> 6];
        uint64_t old = *w;
        *w = old | (UINT64_C(1) << (v & 63));
        if (old) return;
        v >>= 6;
    }
}

static FXP_INLINE void fxp_bm_clear(fxp_bitmap *bm, int64_t v)
{
    int k;
    for (k = 0; k < bm->nlev; k++) {
        uint64_t *w = &bm->lv[k][v >> 6];
        *w &= ~(UINT64_C(1) << (v & 63));
        if (*w) return;
        v >>= 6;
    }
}

static int fxp_bfd(const int64_t *slen, int64_t n, int64_t C, int64_t max_items,
                   const int64_t *perm, int64_t *order, int64_t *bin_offsets, int64_t *n_bins)
{
    int rc = FX_ENOMEM;
    fxp_bitmap bm;
    uint64_t *words = NULL;
    int64_t *heads = NULL, *cnt = NULL, *next = NULL;
    int64_t total = 0, bcap, nb = 0, k, nv = C + 1;
    int l;

    /* bitmap levels */
    bm.nlev = 0;
    do {
        int64_t w = (nv + 63) / 64;
        bm.nw[bm.nlev++] = w;
        total += w;
        nv = w;
    } while (nv > 1);
    words = (uint64_t *)fxp_alloc(total, sizeof(uint64_t), 1);
    /* heads[v] is only read while bit v is set, so it needs no initialisation */
    heads = (int64_t *)fxp_alloc(C + 1, sizeof(int64_t), 0);
    bcap = n < 1024 ? n : 1024;
    cnt = (int64_t *)fxp_alloc(bcap, sizeof(int64_t), 0);
    next = (int64_t *)fxp_alloc(bcap, sizeof(int64_t), 0);
    if (words == NULL || heads == NULL || cnt == NULL || next == NULL) goto out;
    total = 0;
    for (l = 0; l < bm.nlev; l++) {
        bm.lv[l] = words + total;
        total += bm.nw[l];
    }

    for (k = 0; k < n; k++) {
        int64_t s = slen[k], b, v = -1;
        if (s <= C) v = fxp_succ(&bm, s);
        if (v >= 0) {
            int64_t nx, r;
            b = heads[v];
            nx = next[b];
            if (nx < 0) fxp_bm_clear(&bm, v);
            else heads[v] = nx;
            if (++cnt[b] < max_items) {
                r = v - s;
                if (bm.lv[0][r >> 6] & (UINT64_C(1) << (r & 63))) {
                    next[b] = heads[r];
                } else {
                    next[b] = -1;
                    fxp_bm_set(&bm, r);
                }
                heads[r] = b;
            }
        } else {
            if (nb == bcap) {
                int64_t nc = bcap * 2 < n ? bcap * 2 : n;
                if (fxp_grow((void **)&cnt, nc, sizeof(int64_t))) goto out;
                if (fxp_grow((void **)&next, nc, sizeof(int64_t))) goto out;
                bcap = nc;
            }
            b = nb++;
            cnt[b] = 1;
            if (s <= C && max_items > 1) {
                int64_t r = C - s;
                if (bm.lv[0][r >> 6] & (UINT64_C(1) << (r & 63))) {
                    next[b] = heads[r];
                } else {
                    next[b] = -1;
                    fxp_bm_set(&bm, r);
                }
                heads[r] = b;
            }
        }
        bin_offsets[k] = b;
    }
    fxp_emit(perm, n, cnt, nb, order, bin_offsets);
    *n_bins = nb;
    rc = FX_OK;
out:
    free(words);
    free(heads);
    free(cnt);
    free(next);
    return rc;
}

/* ------------------------------------------------------------------ FFD / FF */

/* 8-ary max tree over bins.  Level 0 (leaves): value of bin b = remaining space if the
 * bin is open, else -1 (never >= an item length).  Level k entry i = max of level k-1
 * entries [8i, 8i+8).  Leaf capacity is a power of two >= 8; level sizes are powers of
 * two; the top level has <= 8 entries and is padded to 8. */
#define FXP_B 8
typedef struct {
    int64_t *mem;
    int64_t *lv[24];
    int64_t cap; /* leaves */
    int h;       /* levels */
} fxp_tree;

static int fxp_tree_build(fxp_tree *t, int64_t cap, const int64_t *old_leaves, int64_t nold)
{
    int64_t total = 0, sz = cap, i;
    int k, h = 0;
    int64_t *mem;
    for (;;) {
        int64_t a = sz < FXP_B ? FXP_B : sz;
        total += a;
        h++;
        if (sz <= FXP_B) break;
        sz /= FXP_B;
        if (sz < 1) sz = 1;
    }
    mem = (int64_t *)fxp_alloc(total, sizeof(int64_t), 0);
    if (mem == NULL) return -1;
    total = 0;
    sz = cap;
    for (k = 0; k < h; k++) {
        int64_t a = sz < FXP_B ? FXP_B : sz;
        t->lv[k] = mem + total;
        total += a;
        sz /= FXP_B;
        if (sz < 1) sz = 1;
    }
    if (nold) memcpy(t->lv[0], old_leaves, (size_t)nold * sizeof(int64_t));
    for (i = nold; i < cap; i++) t->lv[0][i] = -1;
    sz = cap;
    for (k = 1; k < h; k++) {
        int64_t nsz = sz / FXP_B, j;
        const int64_t *src = t->lv[k - 1];
        int64_t *dst = t->lv[k];
        if (nsz < 1) nsz = 1;
        for (i = 0; i < nsz; i++) {
            int64_t m = src[i * FXP_B];
            for (j = 1; j < FXP_B; j++) m = src[i * FXP_B + j] > m ? src[i * FXP_B + j] : m;
            dst[i] = m;
        }
        for (; i < FXP_B; i++) dst[i] = -1;
        sz = nsz;
    }
    t->mem = mem;
    t->cap = cap;
    t->h = h;
    return 0;
}

static FXP_INLINE unsigned fxp_mask8(const int64_t *g, int64_t s)
{
    unsigned a = (unsigned)(g[0] >= s) | (unsigned)(g[1] >= s) << 1;
    unsigned b = (unsigned)(g[2] >= s) << 2 | (unsigned)(g[3] >= s) << 3;
    unsigned c = (unsigned)(g[4] >= s) << 4 | (unsigned)(g[5] >= s) << 5;
    unsigned d = (unsigned)(g[6] >= s) << 6 | (unsigned)(g[7] >= s) << 7;
    return (a | b) | (c | d);
}

static FXP_INLINE int64_t fxp_max8(const int64_t *g)
{
    int64_t a = g[0] > g[1] ? g[0] : g[1];
    int64_t b = g[2] > g[3] ? g[2] : g[3];
    int64_t c = g[4] > g[5] ? g[4] : g[5];
    int64_t d = g[6] > g[7] ? g[6] : g[7];
    a = a > b ? a : b;
    c = c > d ? c : d;
    return a > c ? a : c;
}

/* FF / FFD.  The most recent FXP_W bins (the "window") live outside the tree, in
 * wrem[0..wn) (oldest first; bin of slot j = nb - wn + j); the tree holds the older bins
 * [0, nb - wn) (its other leaves are -1).  Since every tree bin precedes every window
 * bin, the leftmost bin with remaining >= s is the tree's if the tree's max is >= s,
 * else the first window slot that fits.  With realistic data nearly all items go to one
 * of the last few bins, so the tree is rarely searched or updated.  A new bin evicts
 * the oldest window bin into the tree when the window is full. */
#define FXP_W 8

/* What the two first-fit bodies (int64 below, int32 SSE2 after it) share. */

/* The length of item k: a row length through the index (first waiting for the producer's
 * progress to pass k, when there is one), or slen[k]. */
FXP_ALWAYS_INLINE int64_t fxp_item_len(const fxp_items *it, int64_t k, int64_t *avail)
{
    if (it->index != NULL) {
        if (k >= *avail) *avail = fx_wait_progress(it->progress, k);
        return it->len32[it->index[k]];
    }
    return it->slen[k];
}

/* Twice the room for per-bin counts (a new bin found cnt full): nonzero when memory runs
 * out. Out of line: the hot path is only the compare before the call. */
static int fxp_grow_counts(int64_t **cnt, int64_t *ccap)
{
    if (fxp_grow((void **)cnt, 2 * *ccap, sizeof(int64_t))) return 1;
    *ccap *= 2;
    return 0;
}

/* The bins of items assigned (bin_offsets[k] = item k's bin) written out in order. */
FXP_ALWAYS_INLINE void fxp_ff_emit(const fxp_items *it, const int64_t *perm, int64_t n,
                                   int64_t *cnt, int64_t nb, int64_t *order,
                                   int64_t *bin_offsets, int64_t *n_bins)
{
    fxp_emit(it->index != NULL ? it->index : perm, n, cnt, nb, order, bin_offsets);
    *n_bins = nb;
}

FXP_ALWAYS_INLINE int fxp_ff_body(fxp_items it, int64_t n, int64_t C, int64_t max_items, int allow_overlong,
                                   int64_t bins_hint, const int64_t *perm, int64_t *order, int64_t *bin_offsets,
                                   int64_t *n_bins, int64_t *bad_item)
{
    int rc = FX_ENOMEM;
    fxp_tree t;
    int64_t *cnt = NULL;
    int64_t nb = 0, k, ccap = fxp_tree_cap(bins_hint, n), tmax = -1;
    int64_t avail = (it.index != NULL && it.progress != NULL) ? 0 : n;
    int64_t wrem[FXP_W];
    int wn = 0, j;

    for (j = 0; j < FXP_W; j++) wrem[j] = -1;
    t.mem = NULL;
    cnt = (int64_t *)fxp_alloc(ccap, sizeof(int64_t), 0);
    if (cnt == NULL || fxp_tree_build(&t, ccap, NULL, 0)) goto out;

    for (k = 0; k < n; k++) {
        int64_t s = fxp_item_len(&it, k, &avail), b;
        unsigned m;
        if (s > C) {
            if (!allow_overlong) {
                *bad_item = k;
                rc = FX_EOVERLONG;
                goto out;
            }
            m = 0;
        } else if (tmax >= s) { /* an older bin fits: tree search */
            int64_t idx = 0, nv;
            int l, top = t.h - 1;
            for (l = top; l >= 0; l--)
                idx = idx * FXP_B + fxp_ctz64(fxp_mask8(t.lv[l] + idx * FXP_B, s));
            b = idx;
            nv = (++cnt[b] < max_items) ? t.lv[0][b] - s : -1;
            t.lv[0][b] = nv;
            for (l = 1; l < t.h; l++) {
                int64_t mx = fxp_max8(t.lv[l - 1] + (idx & ~(int64_t)(FXP_B - 1)));
                idx /= FXP_B;
                if (t.lv[l][idx] == mx) break;
                t.lv[l][idx] = mx;
            }
            tmax = fxp_max8(t.lv[top]);
            bin_offsets[k] = b;
            continue;
        } else {
            m = fxp_mask8(wrem, s);
        }
        if (m) { /* first window bin that fits */
            j = fxp_ctz64(m);
            b = nb - wn + j;
            wrem[j] = (++cnt[b] < max_items) ? wrem[j] - s : -1;
        } else { /* new bin */
            if (wn == FXP_W) { /* evict the oldest window bin into the tree */
                int64_t e = nb - FXP_W, v = wrem[0], idx;
                int l;
                if (e == t.cap) {
                    fxp_tree t2;
                    if (fxp_tree_build(&t2, 2 * t.cap, t.lv[0], t.cap)) goto out;
                    free(t.mem);
                    t = t2;
                }
                t.lv[0][e] = v;
                idx = e;
                for (l = 1; l < t.h; l++) {
                    idx /= FXP_B;
                    if (t.lv[l][idx] >= v) break;
                    t.lv[l][idx] = v;
                }
                if (v > tmax) tmax = v;
                for (j = 1; j < FXP_W; j++) wrem[j - 1] = wrem[j];
                wn--;
            }
            if (nb == ccap && fxp_grow_counts(&cnt, &ccap)) goto out;
            b = nb++;
            cnt[b] = 1;
            wrem[wn++] = (s <= C && max_items > 1) ? C - s : -1;
        }
        bin_offsets[k] = b;
    }
    fxp_ff_emit(&it, perm, n, cnt, nb, order, bin_offsets, n_bins);
    rc = FX_OK;
out:
    free(t.mem);
    free(cnt);
    return rc;
}

static int fxp_ff(const int64_t *slen, int64_t n, int64_t C, int64_t max_items, int64_t bins_hint,
                  const int64_t *perm, int64_t *order, int64_t *bin_offsets, int64_t *n_bins)
{
    fxp_items it = {slen, NULL, NULL, NULL};
    int64_t bad;
    return fxp_ff_body(it, n, C, max_items, 1, bins_hint, perm, order, bin_offsets, n_bins, &bad);
}

static int fxp_ff_index(const fxp_items *it, int64_t n, int64_t C, int64_t max_items, int allow_overlong,
                        int64_t bins_hint, int64_t *order, int64_t *bin_offsets, int64_t *n_bins,
                        int64_t *bad_item)
{
    return fxp_ff_body(*it, n, C, max_items, allow_overlong, bins_hint, NULL, order, bin_offsets, n_bins,
                       bad_item);
}

/* ------------------------------------------------------------------ FF / FFD, 32-bit SSE2 */

/* The same algorithm as fxp_ff (and the same bins, item for item) for capacities below
 * 2^31 - 1, with the window held in two SSE2 registers of four int32 each instead of an
 * int64 array: "which of the 8 window bins fit" is two compares and two movemasks
 * (the int64 version spends ~45 instructions on it: x86-64's baseline has no 64-bit
 * compare), and the window is never stored and re-loaded, so no update waits on a store
 * forward.  The tree levels are int32 too and use the same compare.  SSE2 is part of
 * x86-64 itself: no run-time dispatch.  FXP_NO_SSE2 turns it off (tests). */
#if !defined(FXP_NO_SSE2) && (defined(__SSE2__) || defined(_M_X64))
#define FXP_FF32 1
#include <emmintrin.h>

typedef struct {
    int32_t *mem;
    int32_t *lv[24];
    int64_t cap; /* leaves */
    int h;       /* levels */
} fxp_tree32;

static int fxp_tree32_build(fxp_tree32 *t, int64_t cap, const int32_t *old_leaves, int64_t nold)
{
    int64_t total = 0, sz = cap, i;
    int k, h = 0;
    for (;;) {
        total += sz < FXP_B ? FXP_B : sz;
        h++;
        if (sz <= FXP_B) break;
        sz /= FXP_B;
    }
    int32_t *mem = (int32_t *)fxp_alloc(total, sizeof(int32_t), 0);
    if (mem == NULL) return -1;
    total = 0;
    sz = cap;
    for (k = 0; k < h; k++) {
        t->lv[k] = mem + total;
        total += sz < FXP_B ? FXP_B : sz;
        sz = sz / FXP_B < 1 ? 1 : sz / FXP_B;
    }
    if (nold) memcpy(t->lv[0], old_leaves, (size_t)nold * sizeof(int32_t));
    for (i = nold; i < cap; i++) t->lv[0][i] = -1;
    sz = cap;
    for (k = 1; k < h; k++) {
        int64_t nsz = sz / FXP_B < 1 ? 1 : sz / FXP_B;
        for (i = 0; i < nsz; i++) {
            const int32_t *g = t->lv[k - 1] + i * FXP_B;
            int32_t m = g[0];
            for (int j = 1; j < FXP_B; j++) m = g[j] > m ? g[j] : m;
            t->lv[k][i] = m;
        }
        for (; i < FXP_B; i++) t->lv[k][i] = -1;
        sz = nsz;
    }
    t->mem = mem;
    t->cap = cap;
    t->h = h;
    return 0;
}

/* bit j set iff lane j (lo: 0-3, hi: 4-7) > sm1 (= s - 1, so: remaining >= s) */
static FXP_INLINE unsigned fxp_fit8_32(__m128i lo, __m128i hi, __m128i sm1)
{
    return (unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(lo, sm1)))
           | (unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(hi, sm1))) << 4;
}

static FXP_INLINE unsigned fxp_mask8_32(const int32_t *g, __m128i sm1)
{
    return fxp_fit8_32(_mm_loadu_si128((const __m128i *)g), _mm_loadu_si128((const __m128i *)(g + 4)), sm1);
}

static FXP_INLINE int32_t fxp_max8_32(const int32_t *g)
{
    int32_t a = g[0] > g[1] ? g[0] : g[1], b = g[2] > g[3] ? g[2] : g[3];
    int32_t c = g[4] > g[5] ? g[4] : g[5], d = g[6] > g[7] ? g[6] : g[7];
    a = a > b ? a : b;
    c = c > d ? c : d;
    return a > c ? a : c;
}

/* lane masks: row j has -1 in lane j of the 8 */
static const int32_t fxp_lane32[FXP_W][FXP_W] = {
    {-1, 0, 0, 0, 0, 0, 0, 0}, {0, -1, 0, 0, 0, 0, 0, 0}, {0, 0, -1, 0, 0, 0, 0, 0},
    {0, 0, 0, -1, 0, 0, 0, 0}, {0, 0, 0, 0, -1, 0, 0, 0}, {0, 0, 0, 0, 0, -1, 0, 0},
    {0, 0, 0, 0, 0, 0, -1, 0}, {0, 0, 0, 0, 0, 0, 0, -1}};

FXP_ALWAYS_INLINE int fxp_ff32_body(fxp_items it, int64_t n, int64_t C, int64_t max_items, int allow_overlong,
                                     int64_t bins_hint, const int64_t *perm, int64_t *order,
                                     int64_t *bin_offsets, int64_t *n_bins, int64_t *bad_item)
{
    int rc = FX_ENOMEM;
    fxp_tree32 t;
    int64_t *cnt = NULL;
    int64_t nb = 0, k, ccap = fxp_tree_cap(bins_hint, n);
    int64_t avail = (it.index != NULL && it.progress != NULL) ? 0 : n;
    int32_t tmax = -1;
    const __m128i ones = _mm_set1_epi32(-1);
    __m128i wlo = ones, whi = ones;   /* remaining space of the window bins, -1 = closed/none */
    int wn = 0;

    t.mem = NULL;
    cnt = (int64_t *)fxp_alloc(ccap, sizeof(int64_t), 0);
    if (cnt == NULL || fxp_tree32_build(&t, ccap, NULL, 0)) goto out;

    for (k = 0; k < n; k++) {
        int64_t s64 = fxp_item_len(&it, k, &avail), b;
        unsigned m = 0;
        int32_t s = (int32_t)s64;
        __m128i sm1 = _mm_set1_epi32(s - 1);
        if (s64 > C) {
            if (!allow_overlong) {
                *bad_item = k;
                rc = FX_EOVERLONG;
                goto out;
            }
            m = 0;
        } else if (tmax >= s) { /* an older bin fits: tree search */
            int64_t idx = 0;
            int l, top = t.h - 1;
            for (l = top; l >= 0; l--)
                idx = idx * FXP_B + fxp_ctz64(fxp_mask8_32(t.lv[l] + idx * FXP_B, sm1));
            b = idx;
            t.lv[0][b] = (++cnt[b] < max_items) ? t.lv[0][b] - s : -1;
            for (l = 1; l < t.h; l++) {
                int32_t mx = fxp_max8_32(t.lv[l - 1] + (idx & ~(int64_t)(FXP_B - 1)));
                idx /= FXP_B;
                if (t.lv[l][idx] == mx) break;
                t.lv[l][idx] = mx;
            }
            tmax = fxp_max8_32(t.lv[top]);
            bin_offsets[k] = b;
            continue;
        } else {
            m = fxp_fit8_32(wlo, whi, sm1);
        }
        if (m) { /* first window bin that fits */
            /* The lane mask of the first fitting lane, computed from the compare in the
             * vector registers (not from j, which would put movmsk -> tzcnt -> a table
             * load on the window's dependency chain; j only names the bin). */
            const __m128i flo = _mm_cmpgt_epi32(wlo, sm1), fhi = _mm_cmpgt_epi32(whi, sm1);
            __m128i plo = _mm_or_si128(flo, _mm_slli_si128(flo, 4));
            __m128i phi = _mm_or_si128(fhi, _mm_slli_si128(fhi, 4));
            plo = _mm_or_si128(plo, _mm_slli_si128(plo, 8));       /* inclusive prefix-or */
            phi = _mm_or_si128(phi, _mm_slli_si128(phi, 8));
            const __m128i anylo = _mm_shuffle_epi32(plo, 0xff);   /* some lane of lo fits */
            const __m128i mlo = _mm_andnot_si128(_mm_slli_si128(plo, 4), flo);
            const __m128i mhi = _mm_andnot_si128(_mm_or_si128(_mm_slli_si128(phi, 4), anylo), fhi);
            int j = fxp_ctz64(m);
            b = nb - wn + j;
            if (++cnt[b] < max_items) {
                const __m128i sv = _mm_set1_epi32(s);
                wlo = _mm_sub_epi32(wlo, _mm_and_si128(sv, mlo));
                whi = _mm_sub_epi32(whi, _mm_and_si128(sv, mhi));
            } else { /* full: lane j becomes -1 */
                wlo = _mm_or_si128(wlo, mlo);
                whi = _mm_or_si128(whi, mhi);
            }
        } else { /* new bin */
            int32_t v = (s64 <= C && max_items > 1) ? (int32_t)(C - s64) : -1;
            if (wn == FXP_W) { /* evict the oldest window bin (lane 0) into the tree */
                int64_t e = nb - FXP_W, idx;
                int32_t ev = _mm_cvtsi128_si32(wlo);
                int l;
                if (e == t.cap) {
                    fxp_tree32 t2;
                    if (fxp_tree32_build(&t2, 2 * t.cap, t.lv[0], t.cap)) goto out;
                    free(t.mem);
                    t = t2;
                }
                t.lv[0][e] = ev;
                idx = e;
                for (l = 1; l < t.h; l++) {
                    idx /= FXP_B;
                    if (t.lv[l][idx] >= ev) break;
                    t.lv[l][idx] = ev;
                }
                if (ev > tmax) tmax = ev;
                /* shift the window down one lane; the new bin enters at lane 7 */
                wlo = _mm_or_si128(_mm_srli_si128(wlo, 4), _mm_slli_si128(whi, 12));
                whi = _mm_or_si128(_mm_srli_si128(whi, 4), _mm_slli_si128(_mm_cvtsi32_si128(v), 12));
            } else { /* the first 8 bins: lane wn (still -1) becomes v */
                const __m128i mlo = _mm_loadu_si128((const __m128i *)fxp_lane32[wn]);
                const __m128i mhi = _mm_loadu_si128((const __m128i *)(fxp_lane32[wn] + 4));
                const __m128i vv = _mm_set1_epi32(v);
                wlo = _mm_or_si128(_mm_andnot_si128(mlo, wlo), _mm_and_si128(mlo, vv));
                whi = _mm_or_si128(_mm_andnot_si128(mhi, whi), _mm_and_si128(mhi, vv));
                wn++;
            }
            if (nb == ccap && fxp_grow_counts(&cnt, &ccap)) goto out;
            b = nb++;
            cnt[b] = 1;
        }
        bin_offsets[k] = b;
    }
    fxp_ff_emit(&it, perm, n, cnt, nb, order, bin_offsets, n_bins);
    rc = FX_OK;
out:
    free(t.mem);
    free(cnt);
    return rc;
}

static int fxp_ff32(const int64_t *slen, int64_t n, int64_t C, int64_t max_items, int64_t bins_hint,
                    const int64_t *perm, int64_t *order, int64_t *bin_offsets, int64_t *n_bins)
{
    fxp_items it = {slen, NULL, NULL, NULL};
    int64_t bad;
    return fxp_ff32_body(it, n, C, max_items, 1, bins_hint, perm, order, bin_offsets, n_bins, &bad);
}

static int fxp_ff32_index(const fxp_items *it, int64_t n, int64_t C, int64_t max_items, int allow_overlong,
                          int64_t bins_hint, int64_t *order, int64_t *bin_offsets, int64_t *n_bins,
                          int64_t *bad_item)
{
    return fxp_ff32_body(*it, n, C, max_items, allow_overlong, bins_hint, NULL, order, bin_offsets, n_bins,
                         bad_item);
}
#endif

/* FF / FFD entry: the 32-bit SSE2 version when the capacity allows it. */
static int fxp_ff_any(const int64_t *slen, int64_t n, int64_t C, int64_t max_items, int64_t bins_hint,
                      const int64_t *perm, int64_t *order, int64_t *bin_offsets, int64_t *n_bins)
{
#ifdef FXP_FF32
    if (C < INT32_MAX) return fxp_ff32(slen, n, C, max_items, bins_hint, perm, order, bin_offsets, n_bins);
#endif
    return fxp_ff(slen, n, C, max_items, bins_hint, perm, order, bin_offsets, n_bins);
}

int fx_pack_ff_index(const int32_t *lengths, const int64_t *index, int64_t n, int64_t capacity,
                     int64_t max_items, int allow_overlong, const volatile int64_t *progress, int64_t bins_hint,
                     int64_t *order, int64_t *bin_offsets, int64_t *n_bins, int64_t *bad_item)
{
    fxp_items it;
    int64_t bad = -1;
    if (bad_item != NULL) *bad_item = -1;
    if (n_bins != NULL) *n_bins = 0;
    if (n < 0 || capacity < 1 || max_items < 1 || n_bins == NULL || bin_offsets == NULL ||
        (n > 0 && (lengths == NULL || index == NULL || order == NULL)))
        return FX_EINVAL;
    if (n == 0) {
        bin_offsets[0] = 0;
        return FX_OK;
    }
    it.slen = NULL;
    it.len32 = lengths;
    it.index = index;
    it.progress = progress;
    int rc;
#ifdef FXP_FF32
    if (capacity < INT32_MAX)
        rc = fxp_ff32_index(&it, n, capacity, max_items, allow_overlong, bins_hint, order, bin_offsets, n_bins, &bad);
    else
#endif
        rc = fxp_ff_index(&it, n, capacity, max_items, allow_overlong, bins_hint, order, bin_offsets, n_bins, &bad);
    if (rc != FX_OK) *n_bins = 0;
    if (bad_item != NULL) *bad_item = bad;
    return rc;
}

/* ------------------------------------------------------------------ NF */

static void fxp_nf(const int64_t *len, int64_t n, int64_t C, int64_t max_items,
                   int64_t *order, int64_t *bin_offsets, int64_t *n_bins)
{
    int64_t i, nb = 0, rem = -1, cnt = 0;
    for (i = 0; i < n; i++) {
        int64_t s = len[i];
        order[i] = i;
        if (nb > 0 && s <= rem && cnt < max_items) { /* s >= 0, so rem >= 0 here */
            rem -= s;
            cnt++;
        } else {
            bin_offsets[nb++] = i;
            rem = C - s; /* negative for an over-long item: nothing joins it */
            cnt = 1;
        }
    }
    bin_offsets[nb] = n;
    *n_bins = nb;
}

/* ------------------------------------------------------------------ entry point */

int fx_pack_assign(const int64_t *lengths, int64_t n, int64_t capacity, int64_t max_items,
                   int strategy, int allow_overlong,
                   int64_t *order, int64_t *bin_offsets, int64_t *n_bins, int64_t *bad_item)
{
    int64_t i, minlen, maxlen, hint;
    uint64_t total = 0;
    int64_t *perm = NULL;
    int rc;

    if (bad_item != NULL) *bad_item = -1;
    if (n_bins != NULL) *n_bins = 0;
    if (n < 0 || capacity < 1 || max_items < 1 || strategy < FX_PACK_BFD ||
        strategy > FX_PACK_NF || n_bins == NULL || bin_offsets == NULL ||
        (n > 0 && (lengths == NULL || order == NULL)))
        return FX_EINVAL;

    minlen = 0;
    maxlen = 0;
    if (n > 0) {
        minlen = maxlen = lengths[0];
        for (i = 0; i < n; i++) {
            int64_t s = lengths[i];
            minlen = s < minlen ? s : minlen;
            maxlen = s > maxlen ? s : maxlen;
            total += (uint64_t)s;  /* wraps only past 2^64 tokens: then just a poor hint */
        }
    }
    /* the bins FF/FFD will need, give or take: tokens / capacity, plus some slack */
    hint = (int64_t)((total / (uint64_t)capacity) + (total / (uint64_t)capacity) / 8 + 8);
    if (minlen < 0) {
        for (i = 0; lengths[i] >= 0; i++) {}
        if (bad_item != NULL) *bad_item = i;
        return FX_EINVAL;
    }
    if (strategy == FX_PACK_BFD && capacity > FX_PACK_BFD_MAX_CAPACITY) return FX_EINVAL;
    if (maxlen > capacity && !allow_overlong) {
        for (i = 0; lengths[i] <= capacity; i++) {}
        if (bad_item != NULL) *bad_item = i;
        return FX_EOVERLONG;
    }
    if (n == 0) {
        *n_bins = 0;
        bin_offsets[0] = 0;
        return FX_OK;
    }
    if (strategy == FX_PACK_NF) {
        fxp_nf(lengths, n, capacity, max_items, order, bin_offsets, n_bins);
        return FX_OK;
    }
    if (strategy == FX_PACK_FF)
        return fxp_ff_any(lengths, n, capacity, max_items, hint, NULL, order, bin_offsets, n_bins);

    perm = (int64_t *)fxp_alloc(n, sizeof(int64_t), 0);
    if (perm == NULL) return FX_ENOMEM;
    rc = fxp_sort_desc(lengths, n, minlen, maxlen, perm, order);
    /* order is free until the emit step: it holds the sorted lengths meanwhile */
    if (rc == FX_OK) {
        if (strategy == FX_PACK_BFD)
            rc = fxp_bfd(order, n, capacity, max_items, perm, order, bin_offsets, n_bins);
        else
            rc = fxp_ff_any(order, n, capacity, max_items, hint, perm, order, bin_offsets, n_bins);
    }
    free(perm);
    return rc;
}
