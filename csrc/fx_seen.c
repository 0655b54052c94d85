#include <stdlib.h>
#include <string.h>
#include "fx_seen.h"

void fx_seen_init(fx_seen *s) { memset(s, 0, sizeof(*s)); }

void fx_seen_free(fx_seen *s)
{
    for (int64_t k = 0; k < s->nchunks; k++) free(s->chunks[k]);
    free(s->chunks);
    free(s->table);
    fx_seen_init(s);
}

const uint8_t *fx_seen_get(const fx_seen *s, int64_t index)
{
    return s->chunks[index >> FX_SEEN_CHUNK_SHIFT] + (size_t)(index & (FX_SEEN_CHUNK - 1)) * 32;
}

static inline uint64_t fx_seen_hash(const uint8_t d[32])
{
    uint64_t h;
    memcpy(&h, d, 8);
    return h;
}

static void fx_seen_place(uint32_t *table, uint64_t mask, const uint8_t *d, uint32_t slot_value)
{
    uint64_t pos = fx_seen_hash(d) & mask;
    while (table[pos] != 0) pos = (pos + 1) & mask;
    table[pos] = slot_value;
}

int fx_seen_reserve(fx_seen *s, int64_t extra)
{
    int64_t need = s->count + extra;
    if (extra < 0 || need > FX_SEEN_MAX) return FX_EFULL;
    /* table: capacity with need <= 3/4 * size */
    uint64_t size = s->mask ? s->mask + 1 : 0;
    if ((uint64_t)need * 4 > size * 3) {
        uint64_t nsize = size ? size : 1024;
        while ((uint64_t)need * 4 > nsize * 3) nsize <<= 1;
        uint32_t *nt = (uint32_t *)calloc(nsize, sizeof(uint32_t));
        if (nt == NULL) return FX_ENOMEM;
        for (int64_t k = 0; k < s->count; k++)
            fx_seen_place(nt, nsize - 1, fx_seen_get(s, k), (uint32_t)(k + 1));
        free(s->table);
        s->table = nt;
        s->mask = nsize - 1;
    }
    /* chunk pointer array */
    int64_t nchunks = (need + FX_SEEN_CHUNK - 1) >> FX_SEEN_CHUNK_SHIFT;
    if (nchunks > s->chunks_cap) {
        int64_t ncap = s->chunks_cap ? s->chunks_cap : 16;
        while (ncap < nchunks) ncap *= 2;
        uint8_t **nc = (uint8_t **)realloc(s->chunks, (size_t)ncap * sizeof(uint8_t *));
        if (nc == NULL) return FX_ENOMEM;
        s->chunks = nc;
        s->chunks_cap = ncap;
    }
    return FX_OK;
}

int64_t fx_seen_find(const fx_seen *s, const uint8_t d[32])
{
    if (s->mask == 0) return -1;
    uint64_t pos = fx_seen_hash(d) & s->mask;
    for (;;) {
        uint32_t v = s->table[pos];
        if (v == 0) return -1;
        if (memcmp(fx_seen_get(s, (int64_t)v - 1), d, 32) == 0) return (int64_t)v - 1;
        pos = (pos + 1) & s->mask;
    }
}

int fx_seen_insert_many(fx_seen *s, const uint8_t *digests, int64_t n, uint8_t *is_new)
{
    int st = fx_seen_reserve(s, n);
    if (st != FX_OK) return st;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *d = digests + (size_t)i * 32;
        uint64_t pos = fx_seen_hash(d) & s->mask;
        int found = 0;
        for (;;) {
            uint32_t v = s->table[pos];
            if (v == 0) break;
            if (memcmp(fx_seen_get(s, (int64_t)v - 1), d, 32) == 0) { found = 1; break; }
            pos = (pos + 1) & s->mask;
        }
        if (found) { is_new[i] = 0; continue; }
        int64_t k = s->count;
        int64_t c = k >> FX_SEEN_CHUNK_SHIFT;
        if (c == s->nchunks) {
            uint8_t *chunk = (uint8_t *)malloc((size_t)FX_SEEN_CHUNK * 32);
            if (chunk == NULL) return FX_ENOMEM;  /* rows before i are inserted and flagged */
            s->chunks[c] = chunk;
            s->nchunks++;
        }
        memcpy(s->chunks[c] + (size_t)(k & (FX_SEEN_CHUNK - 1)) * 32, d, 32);
        s->table[pos] = (uint32_t)(k + 1);
        s->count = k + 1;
        is_new[i] = 1;
    }
    return FX_OK;
}

size_t fx_seen_nbytes(const fx_seen *s)
{
    return (size_t)s->nchunks * FX_SEEN_CHUNK * 32 + (s->mask ? (size_t)(s->mask + 1) * 4 : 0)
           + (size_t)s->chunks_cap * sizeof(uint8_t *) + sizeof(*s);
}
