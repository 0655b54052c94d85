/* fx_bpe_merge: byte-level BPE of one piece, lowest merge rank first, leftmost on ties (HF's
 * order): a scan of the pairs for short pieces, a heap for long ones (fx_bpe_int.h). */
#include <stdlib.h>
#include <string.h>

#include "fx_bpe_int.h"
#include "fx_compat.h"

/* The rank lookup with AVX2 (fx_bpe_new picks it where the processor has it: m->probe): the
 * eight slots of a key's home bucket (one cache line) compared at once, and the rank chosen
 * without a branch on whether the pair merges (the data's to say, so a branch on it is often
 * mispredicted). Only a full bucket sends the lookup on to the next. gcc and clang compile it
 * for AVX2 alone. */
#if FX_GNUC && FX_HAVE_CTZ64 && (defined(__x86_64__) || defined(__i386__)) && \
    !defined(FX_BPE_NO_AVX2)
#define FX_BPE_AVX2 1
#include <immintrin.h>

/* A bucket with no merge in it: a key the filter rules out reads this one (always in the
 * cache) in place of its home, chosen without a branch (whether a pair merges is the data's
 * to say: a branch on it is mispredicted). */
static const uint64_t NO_MERGES[MERGE_BUCKET] __attribute__((aligned(64)));

__attribute__((target("avx2"))) static inline int32_t merge_rank8(const fx_bpe *m, uint64_t k)
{
    const __m256i key_bits = _mm256_set1_epi64x((long long)~MERGE_RANK_MASK);
    const __m256i key = _mm256_set1_epi64x((long long)k), zero = _mm256_setzero_si256();
    size_t i = merge_home(m, k);
    uintptr_t may = (uintptr_t)0 - (uintptr_t)merge_may_be(m, k);
    const uint64_t *at = (const uint64_t *)(((uintptr_t)(m->merges + i) & may) |
                                            ((uintptr_t)NO_MERGES & ~may));
    for (;;) {
        const __m256i *b = (const __m256i *)(const void *)at;
        __m256i v0 = _mm256_loadu_si256(b), v1 = _mm256_loadu_si256(b + 1);
        unsigned hit = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(
                           _mm256_cmpeq_epi64(_mm256_and_si256(v0, key_bits), key))) |
                       (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(
                           _mm256_cmpeq_epi64(_mm256_and_si256(v1, key_bits), key)))
                           << 4;
        unsigned empty =
            (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v0, zero))) |
            (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v1, zero)))
                << 4;
        hit &= ~empty; /* an empty slot's key bits equal the key of ids 0 and 0 */
        if (__builtin_expect((hit | empty) != 0, 1)) {
            uint64_t e = at[FX_CTZ64(hit | 0x100u) & 7];
            int32_t r = (int32_t)(e & MERGE_RANK_MASK) - 1;
            return hit ? r : INT32_MAX;
        }
        i = (i + MERGE_BUCKET) & m->merge_mask;
        at = m->merges + i;
    }
}
#endif

/* The rank of the merge of key k (merge_rank_of) by the lookup `probe` names. */
static FX_FORCE_INLINE int32_t merge_rank_by(const fx_bpe *m, uint64_t k, int probe)
{
#ifdef FX_BPE_AVX2
    if (probe == FX_BPE_PROBE_AVX2)
        return merge_rank8(m, k);
#endif
    (void)probe;
    return merge_rank_of(m, k);
}

int fx_bpe_probe_built(int level)
{
#ifdef FX_BPE_AVX2
    if (level >= FX_BPE_PROBE_AVX2)
        return FX_BPE_PROBE_AVX2;
#endif
    (void)level;
    return FX_BPE_PROBE_PLAIN;
}

/* The index of the first lowest of rank[0..n) (n >= 1), and that rank in *low: a scan with
 * conditional moves. (SSE2 and AVX2 scans of 4 and 8 ranks were slower on the pieces merging
 * meets, 2 to 24 bytes: each step's three rank stores, then a vector load across them, stall
 * the load until the stores complete.) */
static inline size_t first_lowest(const int32_t *rank, size_t n, int32_t *low)
{
    size_t best = 0;
    int32_t lo = rank[0];
    for (size_t i = 1; i < n; i++) {
        int32_t r = rank[i];
        best = r < lo ? i : best;
        lo = r < lo ? r : lo;
    }
    *low = lo;
    return best;
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
 * started, linked by next/prev, so a merge moves nothing and looks up two pairs. Each step
 * scans the n - 1 ranks with no branch that depends on them. The first ranks, pairs of bytes,
 * come from byte_rank. */
static FX_FORCE_INLINE void merge_short_with(const fx_bpe *m, const uint8_t *p, int32_t *ids,
                                             size_t n, size_t *n_out, int probe)
{
    int32_t rank[SHORT_PIECE];
    uint8_t next[SHORT_PIECE], prev[SHORT_PIECE];
    size_t pairs = n > 1 ? n - 1 : 1;
    rank[0] = INT32_MAX; /* (a piece of one byte: nothing to merge) */
    for (size_t i = 0; i + 1 < n; i++) {
        rank[i] = m->byte_rank[(unsigned)p[i] << 8 | p[i + 1]];
        fetch_result(m, rank[i]);
        next[i] = (uint8_t)(i + 1);
        prev[i + 1] = (uint8_t)i;
    }
    next[n - 1] = (uint8_t)n;
    for (;;) {
        int32_t low;
        size_t best = first_lowest(rank, pairs, &low);
        if (low == INT32_MAX)
            break;
        size_t gone = next[best], after = next[gone], before = best ? prev[best] : 0;
        int32_t made = m->merge_to[low];
        ids[best] = made;
        rank[gone] = INT32_MAX;
        next[best] = (uint8_t)after;
        /* the two new pairs' buckets fetched together, then looked up: one wait, not two */
        uint64_t right = after < n ? merge_key(made, ids[after]) : 0;
        uint64_t left = best ? merge_key(ids[before], made) : 0;
        if (after < n)
            FX_PREFETCH(&m->merges[merge_home(m, right)]);
        if (best) /* (symbol 0 is never merged away: best > 0 has a symbol before it) */
            FX_PREFETCH(&m->merges[merge_home(m, left)]);
        if (after < n) {
            prev[after] = (uint8_t)best;
            rank[best] = merge_rank_by(m, right, probe);
            fetch_result(m, rank[best]);
        } else {
            rank[best] = INT32_MAX;
        }
        if (best) {
            rank[before] = merge_rank_by(m, left, probe);
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
    merge_short_with(m, p, ids, n, n_out, FX_BPE_PROBE_AVX2);
}
#endif

static void merge_short(const fx_bpe *m, const uint8_t *p, int32_t *ids, size_t n,
                        size_t *n_out)
{
#ifdef FX_BPE_AVX2
    if (m->probe == FX_BPE_PROBE_AVX2) {
        merge_short_avx2(m, p, ids, n, n_out);
        return;
    }
#endif
    merge_short_with(m, p, ids, n, n_out, FX_BPE_PROBE_PLAIN);
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
