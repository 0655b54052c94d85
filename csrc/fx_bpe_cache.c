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

/* Four times the sets: each old set's pieces go to sets of their own (the hash's next two
 * bits choose among four), way 0 first, so no piece is lost and the order of use is kept. */
static void grow_slots(fx_bpe_cache *c)
{
    unsigned bits = c->bits + 2;
    cache_slot *to = fx_big_calloc(slots_bytes(bits));
    if (!to)
        return;
    for (size_t i = 0; i < ((size_t)1 << c->bits); i++) {
        const cache_slot *s = &c->slots[i];
        if (!s->len)
            continue;
        cache_slot *set = &to[((size_t)s->hi >> (32 - bits)) & ~(size_t)1];
        set[set[0].len ? 1 : 0] = *s;
    }
    fx_big_free(c->slots, slots_bytes(c->bits));
    c->slots = to;
    c->bits = bits;
    c->evicted = 0;
}

void fx_cache_put(fx_bpe_cache *c, cache_slot *set, const uint64_t k[3], size_t n, uint64_t h,
                  const int32_t *ids, int64_t got)
{
    /* a new piece takes way 1 (way 0 when empty), evicting the older or less used one: way 0
     * keeps a piece that was asked for again, so pieces seen in turn that map to one full set
     * evict each other (k - 1 of k miss) rather than all of them (first in, first out: all k
     * miss on every pass) */
    cache_slot *to = set[0].len ? &set[1] : &set[0];
    if (to->len && ++c->evicted > ((size_t)1 << c->bits) / 2 && c->bits < CACHE_BITS_MAX) {
        grow_slots(c);
        set = fx_cache_set(c, h);
        to = set[0].len ? &set[1] : &set[0];
    }
    memcpy(to->k, k, sizeof to->k);
    to->len = (uint8_t)n;
    to->nids = (uint8_t)got;
    to->hi = (uint32_t)(h >> 32);
    memcpy(to->ids, ids, (size_t)got * sizeof(int32_t));
}

/* The long table four times larger, as grow_slots. */
static void grow_longs(fx_bpe_cache *c)
{
    unsigned bits = c->long_bits + 2;
    long_slot *to = fx_big_calloc(longs_bytes(bits));
    if (!to)
        return;
    for (size_t i = 0; i < ((size_t)1 << c->long_bits); i++) {
        const long_slot *s = &c->longs[i];
        if (!s->len)
            continue;
        long_slot *set = &to[(s->h >> (64 - bits)) & ~(uint64_t)1];
        set[set[0].len ? 1 : 0] = *s;
    }
    fx_big_free(c->longs, longs_bytes(c->long_bits));
    c->longs = to;
    c->long_bits = bits;
    c->long_evicted = 0;
}

void fx_long_put(fx_bpe_cache *c, const uint8_t *p, size_t n, uint64_t h, const int32_t *ids,
                 int64_t got)
{
    if (n > LONG_KEY || got < 1 || got > LONG_IDS)
        return;
    long_slot *set = &c->longs[(h >> (64 - c->long_bits)) & ~(uint64_t)1];
    long_slot *to = set[0].len ? &set[1] : &set[0];
    if (to->len && ++c->long_evicted > ((size_t)1 << c->long_bits) / 2 &&
        c->long_bits < LONG_BITS_MAX) {
        grow_longs(c);
        set = &c->longs[(h >> (64 - c->long_bits)) & ~(uint64_t)1];
        to = set[0].len ? &set[1] : &set[0];
    }
    to->h = h;
    to->len = (uint16_t)n;
    to->nids = (uint16_t)got;
    memcpy(to->key, p, n);
    memcpy(to->ids, ids, (size_t)got * sizeof(int32_t));
}
