/* fx_bpe_merge: byte-level BPE of one piece, lowest merge rank first, leftmost on ties (HF's
 * order): a scan of the pairs for short pieces, a heap for long ones (fx_bpe_int.h). */
#include <stdlib.h>
#include <string.h>

#include "fx_bpe_int.h"

/* Short pieces (up to SHORT_PIECE bytes): repeatedly merge the adjacent pair of lowest rank,
 * leftmost first (HF's heap order), keeping each pair's rank in rank[] so a merge re-probes
 * two pairs only. */
typedef struct {
    int32_t id, rank, merged; /* the symbol, and the merge of it with the next one */
} sym;

static inline void pair_at(const fx_bpe *m, sym *v, size_t i)
{
    const merge_slot *s = merge_find(m, v[i].id, v[i + 1].id);
    v[i].rank = s ? s->rank : INT32_MAX;
    v[i].merged = s ? s->merged : -1;
}

static void merge_short(const fx_bpe *m, int32_t *ids, size_t n, size_t *n_out)
{
    sym v[SHORT_PIECE];
    for (size_t i = 0; i < n; i++)
        v[i].id = ids[i];
    v[n - 1].rank = INT32_MAX;
    for (size_t i = 0; i + 1 < n; i++)
        pair_at(m, v, i);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (v[i].rank < v[best].rank)
                best = i;
        if (v[best].rank == INT32_MAX)
            break;
        v[best].id = v[best].merged;
        memmove(v + best + 1, v + best + 2, (n - best - 2) * sizeof *v);
        n--;
        if (best + 1 < n)
            pair_at(m, v, best);
        else
            v[best].rank = INT32_MAX;
        if (best)
            pair_at(m, v, best - 1);
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = v[i].id;
    *n_out = n;
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

static int merge_long(const fx_bpe *m, int32_t *ids, size_t n, size_t *n_out)
{
    /* each symbol: its id, prev and next (positions are the original byte indices) */
    int32_t *prev = malloc(n * sizeof(int32_t)), *next = malloc(n * sizeof(int32_t));
    cand *heap = malloc(2 * n * sizeof(cand)); /* n - 1 pairs + one new pair per merge */
    if (!prev || !next || !heap) {
        free(prev);
        free(next);
        free(heap);
        return FX_BPE_ENOMEM;
    }
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        const merge_slot *s = merge_find(m, ids[i], ids[i + 1]);
        if (s)
            heap_push(heap, &hn, (cand){s->rank, (int32_t)i, ids[i], ids[i + 1]});
    }
    while (hn) {
        cand c = heap_pop(heap, &hn);
        int32_t i = c.pos, j = next[i];
        if (ids[i] != c.left || j < 0 || ids[j] != c.right)
            continue; /* stale: a symbol changed or went */
        /* removed symbols have ids[] = -1 so stale candidates fail the check above */
        const merge_slot *s = merge_find(m, c.left, c.right);
        ids[i] = s->merged;
        ids[j] = -1;
        next[i] = next[j];
        if (next[j] >= 0)
            prev[next[j]] = i;
        if (prev[i] >= 0) {
            const merge_slot *t = merge_find(m, ids[prev[i]], ids[i]);
            if (t)
                heap_push(heap, &hn, (cand){t->rank, prev[i], ids[prev[i]], ids[i]});
        }
        if (next[i] >= 0) {
            const merge_slot *t = merge_find(m, ids[i], ids[next[i]]);
            if (t)
                heap_push(heap, &hn, (cand){t->rank, i, ids[i], ids[next[i]]});
        }
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i])
        ids[k++] = ids[i];
    *n_out = k;
    free(prev);
    free(next);
    free(heap);
    return FX_BPE_OK;
}

int fx_bpe_merge_ids(const fx_bpe *m, const uint8_t *p, size_t n, int32_t *ids, int32_t *out,
                     size_t *n_out)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = m->byte_id[p[i]];
    size_t k;
    if (n <= SHORT_PIECE) {
        merge_short(m, ids, n, &k);
    } else if (merge_long(m, ids, n, &k) != FX_BPE_OK) {
        return FX_BPE_ENOMEM;
    }
    memcpy(out, ids, k * sizeof *ids);
    *n_out = k;
    return FX_BPE_OK;
}
