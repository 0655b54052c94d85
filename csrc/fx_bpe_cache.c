/* fx_bpe_cache: the per-thread word cache of the BPE encoder (fx_bpe_int.h has its layout):
 * creation, insertion, and growth when the text's words do not fit. */
#include <stdlib.h>
#include <string.h>

#include "fx_bpe_int.h"
#include "fx_compat.h"
#include "fx_mem.h"

/* The bytes of a table of 2^bits slots of size bytes, and of its spilled bits (one a set). */
static size_t table_bytes(unsigned bits, size_t size)
{
    return ((size_t)1 << bits) * size;
}

static size_t spilled_bytes(unsigned bits)
{
    return ((size_t)1 << bits) / 16 + 1;
}

/* A table of 2^bits empty slots of size bytes (2 MiB-aligned from fx_big_calloc: slots on
 * cache lines), or 0 when memory runs out (t unchanged). */
static int table_new(fx_ctab *t, unsigned bits, size_t size)
{
    void *slots = fx_big_calloc(table_bytes(bits, size));
    uint8_t *spilled = calloc(1, spilled_bytes(bits));
    if (!slots || !spilled) {
        fx_big_free(slots, table_bytes(bits, size));
        free(spilled);
        return 0;
    }
    t->slots = slots;
    t->spilled = spilled;
    t->bits = bits;
    t->evicted = 0;
    return 1;
}

static void table_free(fx_ctab *t, size_t size)
{
    fx_big_free(t->slots, table_bytes(t->bits, size));
    free(t->spilled);
}

fx_bpe_cache *fx_bpe_cache_new(void)
{
    fx_bpe_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (!table_new(&c->words, CACHE_BITS_MIN, sizeof(cache_slot)) ||
        !table_new(&c->longs, LONG_BITS_MIN, sizeof(long_slot))) {
        fx_bpe_cache_free(c);
        return NULL;
    }
    return c;
}

void fx_bpe_cache_free(fx_bpe_cache *c)
{
    if (c) {
        table_free(&c->words, sizeof(cache_slot));
        table_free(&c->longs, sizeof(long_slot));
        free(c->norm);
        free(c->norm_src);
    }
    free(c);
}

void fx_bpe_cache_stats(const fx_bpe_cache *c, unsigned *bits, unsigned *long_bits,
                        uint64_t *merged)
{
    *bits = c->words.bits;
    *long_bits = c->longs.bits;
    *merged = c->merged;
}

/* The two tables' slots, for the code they share: whether one is in use (len 0: empty) and
 * its hash (a word slot keeps the top 32 bits, enough for its set at any size). */
typedef struct {
    size_t size;
    int (*used)(const void *);
    uint64_t (*hash)(const void *);
} slot_kind;

static int word_used(const void *e)
{
    return ((const cache_slot *)e)->len != 0;
}

static uint64_t word_hash(const void *e)
{
    return (uint64_t)((const cache_slot *)e)->hi << 32;
}

static int long_used(const void *e)
{
    return ((const long_slot *)e)->len != 0;
}

static uint64_t long_hash(const void *e)
{
    return ((const long_slot *)e)->h;
}

static const slot_kind WORDS = {sizeof(cache_slot), word_used, word_hash};
static const slot_kind LONGS = {sizeof(long_slot), long_used, long_hash};

/* The slot a new entry takes in a two-way set: way 0 when empty, else way 1 (evicting what
 * it holds when full). Way 0 keeps a piece that was asked for again, so pieces seen in turn
 * that map to one full set evict each other (k - 1 of k miss) rather than all of them (first
 * in, first out: all k miss on every pass). */
static inline char *way_for(const slot_kind *k, char *set)
{
    return k->used(set) ? set + k->size : set;
}

/* An empty slot for an entry of hash h in t: in its home set, else in its other set (marking
 * the home spilled); NULL when both are full. */
static inline char *free_slot(const slot_kind *k, fx_ctab *t, uint64_t h)
{
    size_t i = fx_set_index(h, t->bits);
    char *set = (char *)t->slots + i * k->size;
    if (!k->used(set + k->size))
        return way_for(k, set);
    char *alt = (char *)t->slots + fx_alt_index(h, t->bits) * k->size;
    if (k->used(alt + k->size))
        return NULL;
    fx_spill(t, i);
    return way_for(k, alt);
}

/* Grow t (slots of kind k) to four times the sets: the old entries are placed again, way 0
 * first (the order of use kept), each in the new sets of its hash (one is lost only if both
 * of its sets are full, four times emptier than before). 0 when memory runs out (t kept: it
 * is a cache). */
static int grow(const slot_kind *k, fx_ctab *t)
{
    fx_ctab old = *t;
    if (!table_new(t, old.bits + 2, k->size))
        return 0;
    const size_t n = (size_t)1 << old.bits, ahead = 16;
    for (int w = 0; w < 2; w++) {
        for (size_t i = (size_t)w; i < n; i += 2) {
            /* the new home set of an entry further on fetched now: the placements' cache
             * misses overlap (a cold pass that grows the table pays for them) */
            const char *f = i + ahead < n ? (const char *)old.slots + (i + ahead) * k->size : NULL;
            if (f && k->used(f)) {
                const char *to = (char *)t->slots + fx_set_index(k->hash(f), t->bits) * k->size;
                FX_PREFETCH(to);
                FX_PREFETCH(to + k->size);
            }
            const char *e = (const char *)old.slots + i * k->size;
            char *at = k->used(e) ? free_slot(k, t, k->hash(e)) : NULL;
            if (at)
                memcpy(at, e, k->size);
        }
    }
    table_free(&old, k->size);
    return 1;
}

/* A slot for an entry of hash h in t (slots of kind k): a free one (free_slot), else way 1
 * of its home set (evicting). Once the table has evicted an eighth of its slots' worth of
 * entries (with two sets a piece it is then nearly full: its pieces do not fit) it grows
 * once, up to 2^max_bits slots. A failed allocation keeps the old table and tries again only
 * after as many evictions more, not on every one. Inlined into each caller, so the slot kind
 * is a constant and its functions are inlined too. */
static inline char *slot_for(const slot_kind *k, fx_ctab *t, unsigned max_bits, uint64_t h)
{
    char *to = free_slot(k, t, h);
    if (to)
        return to;
    if (++t->evicted > ((size_t)1 << t->bits) / 8 && t->bits < max_bits) {
        if (grow(k, t) && (to = free_slot(k, t, h)) != NULL)
            return to;
        t->evicted = 0;
    }
    return (char *)t->slots + fx_set_index(h, t->bits) * k->size + k->size;
}

void fx_cache_put(fx_bpe_cache *c, const uint64_t k[3], size_t n, uint64_t h,
                  const int32_t *ids, int64_t got)
{
    cache_slot *to = (cache_slot *)(void *)slot_for(&WORDS, &c->words, CACHE_BITS_MAX, h);
    memcpy(to->k, k, sizeof to->k);
    to->len = (uint8_t)n;
    to->nids = (uint8_t)got;
    to->hi = (uint32_t)(h >> 32);
    memcpy(to->ids, ids, (size_t)got * sizeof(int32_t));
}

void fx_long_put(fx_bpe_cache *c, const uint8_t *p, size_t n, uint64_t h, const int32_t *ids,
                 int64_t got)
{
    if (n > LONG_KEY || got < 1 || fx_long_ids_at(n) + (size_t)got * sizeof(int32_t) > LONG_DATA)
        return;
    long_slot *to = (long_slot *)(void *)slot_for(&LONGS, &c->longs, LONG_BITS_MAX, h);
    to->h = h;
    to->len = (uint16_t)n;
    to->nids = (uint16_t)got;
    memcpy(to->data, p, n);
    memcpy(to->data + fx_long_ids_at(n), ids, (size_t)got * sizeof(int32_t));
}
