/* fx_bpe_cache: the per-thread word cache of the BPE encoder (fx_bpe_int.h has its layout):
 * creation, insertion, and growth when the text's words do not fit. */
#include <stdlib.h>
#include <string.h>

#include "fx_bpe_int.h"
#include "fx_mem.h"

static size_t slots_bytes(unsigned bits)
{
    return ((size_t)1 << bits) * sizeof(cache_slot);
}

static size_t longs_bytes(unsigned bits)
{
    return ((size_t)1 << bits) * sizeof(long_slot);
}

fx_bpe_cache *fx_bpe_cache_new(void)
{
    fx_bpe_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->bits = CACHE_BITS_MIN;
    c->long_bits = LONG_BITS_MIN;
    c->slots = fx_big_calloc(slots_bytes(c->bits)); /* 2 MiB-aligned: slots on cache lines */
    c->longs = fx_big_calloc(longs_bytes(c->long_bits));
    if (!c->slots || !c->longs) {
        fx_bpe_cache_free(c);
        return NULL;
    }
    return c;
}

void fx_bpe_cache_free(fx_bpe_cache *c)
{
    if (c) {
        fx_big_free(c->slots, slots_bytes(c->bits));
        fx_big_free(c->longs, longs_bytes(c->long_bits));
        free(c->norm);
        free(c->norm_src);
    }
    free(c);
}

void fx_bpe_cache_bits(const fx_bpe_cache *c, unsigned *bits, unsigned *long_bits)
{
    *bits = c->bits;
    *long_bits = c->long_bits;
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

/* The slot a new entry takes in a two-way set: way 1 (way 0 when empty), evicting the older
 * or less used one. Way 0 keeps a piece that was asked for again, so pieces seen in turn that
 * map to one full set evict each other (k - 1 of k miss) rather than all of them (first in,
 * first out: all k miss on every pass). */
static char *way_for(const slot_kind *t, char *set)
{
    return t->used(set) ? set + t->size : set;
}

/* A slot for an entry of hash h in *table (2^*bits slots of kind t). Once the table has
 * evicted half its slots' worth of entries (its pieces do not fit) it grows once to four
 * times the sets, up to 2^max_bits slots: each old set's entries go to sets of their own (the
 * hash's next two bits choose among four), way 0 first, so none is lost and the order of use
 * is kept. A failed allocation keeps the old table (it is a cache) and tries again only after
 * as many evictions more, not on every one. */
static char *slot_for(const slot_kind *t, void **table, unsigned *bits, unsigned max_bits,
                      size_t *evicted, uint64_t h)
{
    char *to = way_for(t, (char *)*table + fx_set_index(h, *bits) * t->size);
    if (!t->used(to) || ++*evicted <= ((size_t)1 << *bits) / 2 || *bits >= max_bits)
        return to;
    unsigned nb = *bits + 2;
    char *grown = fx_big_calloc(((size_t)1 << nb) * t->size);
    if (!grown) {
        *evicted = 0;
        return to;
    }
    for (size_t i = 0; i < ((size_t)1 << *bits); i++) {
        const char *e = (const char *)*table + i * t->size;
        if (t->used(e))
            memcpy(way_for(t, grown + fx_set_index(t->hash(e), nb) * t->size), e, t->size);
    }
    fx_big_free(*table, ((size_t)1 << *bits) * t->size);
    *table = grown;
    *bits = nb;
    *evicted = 0;
    return way_for(t, grown + fx_set_index(h, nb) * t->size);
}

void fx_cache_put(fx_bpe_cache *c, const uint64_t k[3], size_t n, uint64_t h,
                  const int32_t *ids, int64_t got)
{
    void *table = c->slots;
    cache_slot *to = (cache_slot *)(void *)slot_for(&WORDS, &table, &c->bits, CACHE_BITS_MAX,
                                                    &c->evicted, h);
    c->slots = table;
    memcpy(to->k, k, sizeof to->k);
    to->len = (uint8_t)n;
    to->nids = (uint8_t)got;
    to->hi = (uint32_t)(h >> 32);
    memcpy(to->ids, ids, (size_t)got * sizeof(int32_t));
}

void fx_long_put(fx_bpe_cache *c, const uint8_t *p, size_t n, uint64_t h, const int32_t *ids,
                 int64_t got)
{
    if (n > LONG_KEY || got < 1 || got > LONG_IDS)
        return;
    void *table = c->longs;
    long_slot *to = (long_slot *)(void *)slot_for(&LONGS, &table, &c->long_bits, LONG_BITS_MAX,
                                                  &c->long_evicted, h);
    c->longs = table;
    to->h = h;
    to->len = (uint16_t)n;
    to->nids = (uint16_t)got;
    memcpy(to->key, p, n);
    memcpy(to->ids, ids, (size_t)got * sizeof(int32_t));
}
