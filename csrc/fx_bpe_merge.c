/* fx_bpe_merge: byte-level BPE of one piece, lowest merge rank first, leftmost on ties (HF's
 * order): a scan of the pairs for short pieces, a heap for long ones (fx_bpe_int.h). */
#include <stdlib.h>
#include <string.h>

#include "fx_bpe_int.h"
#include "fx_compat.h"

/* The index of the first lowest of rank[0..n4) (n4 a multiple of 4, at least 4), and that
 * rank in *low. SSE2 (part of x86-64 itself) compares four ranks at a time: the minimum, then
 * the first lane equal to it; first_lowest_plain (below) is a scan with conditional moves. */
#if !defined(FX_BPE_NO_SSE2) && FX_HAVE_CTZ64 && (defined(__SSE2__) || defined(_M_X64))
#include <emmintrin.h>

static inline __m128i min4(__m128i a, __m128i b)
{
    __m128i gt = _mm_cmpgt_epi32(a, b); /* (SSE2 has no pminsd) */
    return _mm_or_si128(_mm_and_si128(gt, b), _mm_andnot_si128(gt, a));
}

static inline size_t first_lowest(const int32_t *rank, size_t n4, int32_t *low)
{
    __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)rank);
    for (size_t i = 4; i < n4; i += 4)
        lo = min4(lo, _mm_loadu_si128((const __m128i *)(const void *)(rank + i)));
    lo = min4(lo, _mm_shuffle_epi32(lo, _MM_SHUFFLE(1, 0, 3, 2)));
    lo = min4(lo, _mm_shuffle_epi32(lo, _MM_SHUFFLE(2, 3, 0, 1)));
    *low = _mm_cvtsi128_si32(lo);
    for (size_t i = 0;; i += 4) { /* found by i == n4 - 4 at the latest */
        __m128i eq = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(const void *)(rank + i)),
                                     lo);
        unsigned mask = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(eq));
        if (mask)
            return i + FX_CTZ64(mask);
    }
}
/* The same with AVX2, eight ranks at a time (n8 a multiple of 8), where the processor has it
 * (fx_bpe_new asks: m->scan): gcc and clang compile it for AVX2 alone. */
#if FX_GNUC && (defined(__x86_64__) || defined(__i386__)) && !defined(FX_BPE_NO_AVX2)
#define FX_BPE_AVX2 1
#include <immintrin.h>

__attribute__((target("avx2"))) static inline size_t first_lowest8(const int32_t *rank,
                                                                     size_t n8, int32_t *low)
{
    __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)rank);
    for (size_t i = 8; i < n8; i += 8)
        lo = _mm256_min_epi32(lo, _mm256_loadu_si256((const __m256i *)(const void *)(rank + i)));
    __m128i m = _mm_min_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
    m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    *low = _mm_cvtsi128_si32(m);
    __m256i all = _mm256_broadcastd_epi32(m);
    for (size_t i = 0;; i += 8) { /* found by i == n8 - 8 at the latest */
        __m256i eq = _mm256_cmpeq_epi32(
            _mm256_loadu_si256((const __m256i *)(const void *)(rank + i)), all);
        unsigned mask = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(eq));
        if (mask)
            return i + FX_CTZ64(mask);
    }
}
#endif
#define FX_BPE_SSE2 1
#endif

/* The plain scan, conditional moves: what builds without SSE2 run (ARM's), and a test's
 * choice elsewhere (fx_bpe_set_scan). */
static inline size_t first_lowest_plain(const int32_t *rank, size_t n4, int32_t *low)
{
    size_t best = 0;
    int32_t lo = rank[0];
    for (size_t i = 1; i < n4; i++) {
        int32_t r = rank[i];
        best = r < lo ? i : best;
        lo = r < lo ? r : lo;
    }
    *low = lo;
    return best;
}

int fx_bpe_scan_built(int level)
{
#ifdef FX_BPE_AVX2
    if (level >= FX_BPE_SCAN_AVX2)
        return FX_BPE_SCAN_AVX2;
#endif
#ifdef FX_BPE_SSE2
    if (level >= FX_BPE_SCAN_SSE2)
        return FX_BPE_SCAN_SSE2;
#endif
    (void)level;
    return FX_BPE_SCAN_PLAIN;
}

/* Start fetching the id the merge of rank r makes (INT32_MAX: none), so that it is at hand
 * if that pair is merged: otherwise each merge waits for merge_to and then for the merge table
 * in turn, two cache misses in a row. */
static FX_FORCE_INLINE void fetch_result(const fx_bpe *m, int32_t r)
{
    FX_PREFETCH(m->merge_to + (r == INT32_MAX ? 0 : r));
}

/* Short pieces (up to SHORT_PIECE bytes): repeatedly merge the adjacent pair of lowest rank,
 * leftmost first (HF's heap order). rank[i] is the rank of symbol i's pair with the next
 * symbol still there (INT32_MAX: none, or symbol i merged away); symbols stay where they
 * started, linked by next/prev, so a merge moves nothing and re-probes two pairs. Each step
 * scans all n ranks (four at a time), with no branch that depends on them. The first ranks,
 * pairs of bytes, come from byte_rank. */
static FX_FORCE_INLINE void merge_short_with(const fx_bpe *m, const uint8_t *p, int32_t *ids,
                                             size_t n, size_t *n_out, int scan)
{
    int32_t rank[SHORT_PIECE + 8];
    uint8_t next[SHORT_PIECE], prev[SHORT_PIECE];
    size_t n4 = scan == FX_BPE_SCAN_AVX2 ? (n + 7) & ~(size_t)7 : (n + 3) & ~(size_t)3;
    for (size_t i = 0; i + 1 < n; i++) {
        rank[i] = m->byte_rank[(unsigned)p[i] << 8 | p[i + 1]];
        fetch_result(m, rank[i]);
        next[i] = (uint8_t)(i + 1);
        prev[i + 1] = (uint8_t)i;
    }
    for (size_t i = n - 1; i < n4; i++)
        rank[i] = INT32_MAX;
    next[n - 1] = (uint8_t)n;
    for (;;) {
        int32_t low;
        size_t best;
#ifdef FX_BPE_AVX2
        if (scan == FX_BPE_SCAN_AVX2)
            best = first_lowest8(rank, n4, &low);
        else
#endif
#ifdef FX_BPE_SSE2
        if (scan == FX_BPE_SCAN_SSE2)
            best = first_lowest(rank, n4, &low);
        else
#endif
            best = first_lowest_plain(rank, n4, &low);
        if (low == INT32_MAX)
            break;
        size_t gone = next[best], after = next[gone], before = best ? prev[best] : 0;
        int32_t made = m->merge_to[low];
        ids[best] = made;
        rank[gone] = INT32_MAX;
        next[best] = (uint8_t)after;
        /* the two new pairs' slots fetched together, then probed: one wait, not two */
        uint64_t right = after < n ? merge_key(made, ids[after]) : 0;
        uint64_t left = best ? merge_key(ids[before], made) : 0;
        if (after < n)
            FX_PREFETCH(&m->merges[merge_home(m, right)]);
        if (best) /* (symbol 0 is never merged away: best > 0 has a symbol before it) */
            FX_PREFETCH(&m->merges[merge_home(m, left)]);
        if (after < n) {
            prev[after] = (uint8_t)best;
            rank[best] = merge_rank_of(m, right);
            fetch_result(m, rank[best]);
        } else {
            rank[best] = INT32_MAX;
        }
        if (best) {
            rank[before] = merge_rank_of(m, left);
            fetch_result(m, rank[before]);
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i = next[i])
        ids[k++] = ids[i];
    *n_out = k;
}

#ifdef FX_BPE_AVX2
__attribute__((target("avx2"))) static void merge_short_avx2(const fx_bpe *m, const uint8_t *p,
                                                             int32_t *ids, size_t n,
                                                             size_t *n_out)
{
    merge_short_with(m, p, ids, n, n_out, FX_BPE_SCAN_AVX2);
}
#endif

static void merge_short(const fx_bpe *m, const uint8_t *p, int32_t *ids, size_t n,
                        size_t *n_out)
{
#ifdef FX_BPE_AVX2
    if (m->scan == FX_BPE_SCAN_AVX2) {
        merge_short_avx2(m, p, ids, n, n_out);
        return;
    }
#endif
    if (m->scan == FX_BPE_SCAN_SSE2)
        merge_short_with(m, p, ids, n, n_out, FX_BPE_SCAN_SSE2);
    else
        merge_short_with(m, p, ids, n, n_out, FX_BPE_SCAN_PLAIN);
}

/* Long pieces: a binary heap of candidate merges ordered by (rank, position) over a linked
 * list of symbols; a popped candidate whose symbols changed since it was pushed is skipped.
 * O(n log n) for a piece of n bytes. */
typedef struct {
    int32_t rank, pos, left, right;
} cand;

static inline int cand_less(const cand *a, const cand *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(cand *h, size_t *n, cand c)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n)
{
    cand top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, best = i;
        const cand *bc = &last;
        if (l < *n && cand_less(&h[l], bc))
            best = l, bc = &h[l];
        if (l + 1 < *n && cand_less(&h[l + 1], bc))
            best = l + 1;
        if (best == i)
            break;
        h[i] = h[best];
        i = best;
    }
    if (*n)
        h[i] = last;
    return top;
}

static int merge_long(const fx_bpe *m, const uint8_t *p, int32_t *ids, size_t n,
                      size_t *n_out)
{
    /* each symbol: its id, prev and next (positions are the original byte indices) */
    int32_t *prev = malloc(n * sizeof(int32_t)), *next = malloc(n * sizeof(int32_t));
    cand *heap = malloc(2 * n * sizeof(cand)); /* n - 1 pairs + one new pair per merge */
    if (!prev || !next || !heap) {
        free(prev);
        free(next);
        free(heap);
        return FX_ENOMEM;
    }
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t r = m->byte_rank[(unsigned)p[i] << 8 | p[i + 1]];
        if (r != INT32_MAX)
            heap_push(heap, &hn, (cand){r, (int32_t)i, ids[i], ids[i + 1]});
    }
    while (hn) {
        cand c = heap_pop(heap, &hn);
        int32_t i = c.pos, j = next[i];
        if (ids[i] != c.left || j < 0 || ids[j] != c.right)
            continue; /* stale: a symbol changed or went */
        /* removed symbols have ids[] = -1 so stale candidates fail the check above */
        ids[i] = m->merge_to[c.rank];
        ids[j] = -1;
        next[i] = next[j];
        if (next[j] >= 0)
            prev[next[j]] = i;
        if (prev[i] >= 0) {
            int32_t r = merge_rank(m, ids[prev[i]], ids[i]);
            if (r != INT32_MAX)
                heap_push(heap, &hn, (cand){r, prev[i], ids[prev[i]], ids[i]});
        }
        if (next[i] >= 0) {
            int32_t r = merge_rank(m, ids[i], ids[next[i]]);
            if (r != INT32_MAX)
                heap_push(heap, &hn, (cand){r, i, ids[i], ids[next[i]]});
        }
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i])
        ids[k++] = ids[i];
    *n_out = k;
    free(prev);
    free(next);
    free(heap);
    return FX_OK;
}

int fx_bpe_merge_ids(const fx_bpe *m, const uint8_t *p, size_t n, int32_t *ids, int32_t *out,
                     size_t *n_out)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = m->byte_id[p[i]];
    size_t k;
    if (n <= SHORT_PIECE) {
        merge_short(m, p, ids, n, &k);
    } else if (merge_long(m, p, ids, n, &k) != FX_OK) {
        return FX_ENOMEM;
    }
    memcpy(out, ids, k * sizeof *ids);
    *n_out = k;
    return FX_OK;
}
