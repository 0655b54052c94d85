/* fx_bpe_int: what fx_bpe.c (the model, caches, driver) and fx_bpe_merge.c (merging a piece)
 * share: the model's layout and its merge lookup. Internal: not part of fx_bpe.h's contract. */
#ifndef FX_BPE_INT_H
#define FX_BPE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fx_bpe.h"

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

/* The merge table: one 64-bit word a merge, left id << 43 | right id << 22 | rank + 1 (0: an
 * empty slot), open addressing at most 5/8 full; the merged id is merge_to[rank]. A quarter
 * of the bytes of a (key, rank, id) slot: the table's lines stay in the caches (its probes
 * are most of merging's cost). Ids below 2^21, ranks below 2^22 - 1 (fx_bpe_new checks). */
#define MERGE_ID_BITS 21
#define MERGE_RANK_BITS 22
#define MERGE_RANK_MASK ((UINT64_C(1) << MERGE_RANK_BITS) - 1)

/* The direct tables: every token of 2 to KEY_MAX bytes that a piece equal to it encodes to
 * (ignore_merges, or whole[id]); len 0: an empty slot. Tokens of 9 bytes or more in direct
 * (32 bytes a slot, two to a cache line), of 2 to 8 (most pieces) in direct8: their bytes in
 * one word, 16 bytes a slot, four to a line, a quarter of the memory: one load, one multiply
 * and one compare find them. */
typedef struct {
    uint64_t k[3];
    int32_t id;
    uint32_t len;
} direct_slot;

typedef struct {
    uint64_t k;
    int32_t id;
    uint32_t len;
} direct8_slot;

typedef struct { /* a trie over added-token bytes: first child, next sibling */
    int32_t child, sibling, token; /* token: index into the added arrays, or -1 */
    uint8_t byte;
} trie_node;

typedef struct {
    trie_node *nodes;
    int32_t n_nodes, root[256];
    int first; /* the one first byte of every token in it (memchr finds them), or -1 */
} trie;

struct fx_bpe {
    int32_t n_vocab;
    uint8_t *tok_bytes;
    int64_t *tok_off;
    int32_t *vocab_slots; /* open addressing on token bytes: id, or -1 */
    size_t vocab_mask;
    uint64_t *merges;
    int32_t *merge_to; /* merge_to[rank]: the id the merge of that rank makes */
    size_t merge_mask;
    unsigned merge_shift; /* merge_home: the top bits of a multiplicative hash */
    /* one bit a hash of the pair keys (merge_filter_bit), set for every merge: most pairs
     * looked up while merging do not merge, and this bitset (a sixteenth of the table's
     * bytes) answers them without a miss on the table */
    uint64_t *pair_filter;
    unsigned filter_shift;
    /* byte_rank[x << 8 | y]: merge_rank of the tokens of bytes x and y (the first pairs of
     * every piece: one load instead of a probe of the merge table) */
    int32_t *byte_rank;
    uint8_t *whole;    /* whole[id]: BPE of the token's own bytes is the token itself */
    direct_slot *direct;
    size_t direct_mask;
    unsigned direct_shift; /* index: key_hash >> direct_shift */
    direct8_slot *direct8;
    size_t direct8_mask;
    unsigned direct8_shift;
    int32_t byte_id[256];
    int32_t n_added;
    uint8_t *added_bytes;
    int64_t *added_off;
    int32_t *added_ids;
    uint8_t *added_flags;
    trie added, added_norm; /* the added tokens matched on the raw text; on normalized text */
    int32_t pretok, ignore_merges, nfc, bos_id;
    int probe; /* FX_BPE_PROBE_*: how fx_bpe_merge.c looks up ranks (fx_bpe_set_probe) */
    /* the sizes of the tables fx_big_calloc made (fx_mem.h: huge pages; freed by size) */
    size_t vocab_bytes, merges_bytes, direct_bytes, direct8_bytes, filter_bytes;
};

static inline uint64_t merge_key(int32_t a, int32_t b)
{
    return (uint64_t)(uint32_t)a << (MERGE_ID_BITS + MERGE_RANK_BITS)
           | (uint64_t)(uint32_t)b << MERGE_RANK_BITS;
}

/* The first slot to probe for key k (merge_key): Fibonacci hashing (the key's bits are
 * spread by one multiply; its top bits index), one multiply where mix64 takes two. The home
 * is the first slot of a bucket of MERGE_BUCKET slots, 64 bytes (a cache line: fx_big_calloc
 * aligns the table to one): linear probing from there keeps a key in its home bucket unless
 * that bucket is full, so a lookup can compare the bucket's slots at once (fx_bpe_merge.c)
 * and stop at a bucket with an empty slot. */
#define MERGE_BUCKET 8
static inline size_t merge_home(const fx_bpe *m, uint64_t k)
{
    return (size_t)((k * 0x9e3779b97f4a7c15ull) >> m->merge_shift) & ~(size_t)(MERGE_BUCKET - 1);
}

/* The bit of key k in pair_filter: the top bits of merge_home's product. */
static inline size_t merge_filter_bit(const fx_bpe *m, uint64_t k)
{
    return (size_t)((k * 0x9e3779b97f4a7c15ull) >> m->filter_shift);
}

/* Whether key k may be a merge (0: it is not one). */
static inline int merge_may_be(const fx_bpe *m, uint64_t k)
{
    size_t bit = merge_filter_bit(m, k);
    return (int)((m->pair_filter[bit >> 6] >> (bit & 63)) & 1);
}

/* The rank of the merge whose key is k (merge_key), or INT32_MAX when there is none. */
static inline int32_t merge_rank_of(const fx_bpe *m, uint64_t k)
{
    if (!merge_may_be(m, k))
        return INT32_MAX;
    for (size_t i = merge_home(m, k);; i = (i + 1) & m->merge_mask) {
        uint64_t e = m->merges[i];
        if (e == 0)
            return INT32_MAX;
        if ((e & ~MERGE_RANK_MASK) == k)
            return (int32_t)(e & MERGE_RANK_MASK) - 1;
    }
}

/* The rank of the merge of ids a and b, or INT32_MAX when there is none. */
static inline int32_t merge_rank(const fx_bpe *m, int32_t a, int32_t b)
{
    return merge_rank_of(m, merge_key(a, b));
}

/* Pieces up to this many bytes merge by a scan of their pairs, longer ones through a heap. */
#define SHORT_PIECE 64

/* The best lookup (FX_BPE_PROBE_*) at most `level` that this build has (fx_bpe_merge.c); the
 * processor's AVX2 is the caller's to check. */
int fx_bpe_probe_built(int level);

/* The BPE of the bytes p[0..n) (n >= 1) into out (room for n ids; ids: room for n, scratch):
 * FX_OK with the count in *n_out, or FX_ENOMEM. */
int fx_bpe_merge_ids(const fx_bpe *m, const uint8_t *p, size_t n, int32_t *ids, int32_t *out,
                     size_t *n_out);

/* -- the word cache (fx_bpe_cache.c) ------------------------------------------------------ */

/* Each of the cache's two tables: 2^bits slots in two-way sets. An entry goes to its home set
 * (fx_set_index), or, when both of its ways are taken, to its other set (fx_alt_index), and
 * the home set's bit in spilled says so: a lookup that misses at home reads the other set only
 * then. Two choices of set hold what one cannot (a piece whose home is full no longer evicts
 * a neighbour on every pass); the bit keeps a miss at one set's cost, as with one choice. */
typedef struct {
    void *slots;
    uint8_t *spilled; /* a bit per set: an entry of this home went to its other set */
    unsigned bits;
    size_t evicted; /* entries pushed out since the table had its size */
} fx_ctab;

/* Two-way sets of 64-byte slots (one cache line each) for the pieces of 2 to 24 bytes that
 * are not one token (those the direct tables give) and merge into at most CACHE_IDS ids:
 * 2^CACHE_BITS_MIN slots (4 MB) to begin with, four times that (16 MB) once it has evicted
 * an eighth as many pieces as it holds (a text whose words do not fit: many languages at once;
 * a few MB of one language stay below that, and do not pay for the larger table). */
#define CACHE_BITS_MIN 16
#define CACHE_BITS_MAX 18
#define CACHE_IDS 8

typedef struct {
    uint64_t k[3];
    uint8_t len, nids; /* len 0: empty */
    uint16_t unused;
    uint32_t hi; /* the hash's top 32 bits: the sets, when the table grows */
    int32_t ids[CACHE_IDS];
} cache_slot;

/* Longer pieces (25 to LONG_KEY bytes: words of scripts with two or three bytes a letter,
 * and short pieces of more than CACHE_IDS ids), when bytes and ids fit a slot, in two-way
 * sets of 256-byte slots keyed by hash_bytes and checked by memcmp: 2^LONG_BITS_MIN slots
 * (1 MB), growing as the word cache does to 2^LONG_BITS_MAX (4 MB). A slot's data holds the
 * piece's bytes, then (from the next multiple of 4) its ids: a piece has no more ids than
 * bytes, so a short key leaves room for many (a word of 20 three-byte letters that merges
 * into 25 ids: 60 + 100 bytes). */
#define LONG_BITS_MIN 12
#define LONG_BITS_MAX 14
#define LONG_KEY 240
#define LONG_DATA 244

typedef struct {
    uint64_t h;
    uint16_t len, nids; /* len 0: empty */
    uint8_t data[LONG_DATA];
} long_slot;

/* Where a long slot's ids start in its data, for a piece of n bytes. */
static inline size_t fx_long_ids_at(size_t n)
{
    return (n + 3) & ~(size_t)3;
}

/* Copy the ids of a long slot to dst: their count. */
static inline int64_t fx_long_copy(const long_slot *s, int32_t *dst)
{
    memcpy(dst, s->data + fx_long_ids_at(s->len), (size_t)s->nids * sizeof(int32_t));
    return s->nids;
}

/* A bit per class of hashes (SHORT_LONG_BITS of a piece's hash): set when a short piece of
 * that class went to the long table (more than CACHE_IDS ids: a few percent of pieces). A
 * short piece the word table misses reads the long table only when its bit is set: the
 * table's slots, past the core's caches, are otherwise a second miss for every new piece. */
#define SHORT_LONG_BITS 16

struct fx_bpe_cache {
    fx_ctab words, longs; /* cache_slot and long_slot */
    uint64_t short_long[((size_t)1 << SHORT_LONG_BITS) / 64];
    uint64_t merged; /* pieces merged because neither table held them (a test hook's count) */
    uint8_t *norm; /* NFC scratch: the normalized segment and its source offsets */
    int64_t *norm_src;
    size_t norm_cap, norm_src_cap;
};

/* The index of the first slot of the two-way set of hash h in a table of 2^bits slots: the
 * hash's top bits (so a table four times larger splits each set into four). */
static inline size_t fx_set_index(uint64_t h, unsigned bits)
{
    return (size_t)(h >> (64 - bits)) & ~(size_t)1;
}

/* The first slot of the other set of hash h: from all of the hash's top 32 bits (what a word
 * slot keeps), mixed, so that pieces sharing a home set seldom share the other one. */
static inline size_t fx_alt_index(uint64_t h, unsigned bits)
{
    uint32_t x = (uint32_t)(h >> 32);
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return fx_set_index((uint64_t)x << 32, bits);
}

/* Whether an entry whose home set starts at slot i went to its other set (set i / 2's bit). */
static inline int fx_spilled(const fx_ctab *t, size_t i)
{
    return (t->spilled[i >> 4] >> ((i >> 1) & 7)) & 1;
}

/* Record that an entry whose home set starts at slot i went to its other set. */
static inline void fx_spill(fx_ctab *t, size_t i)
{
    t->spilled[i >> 4] |= (uint8_t)(1u << ((i >> 1) & 7));
}

/* The short_long bit of a hash: bits below the ones that pick sets, so that the pieces of a
 * set spread over the bits. */
static inline size_t fx_short_long_bit(uint64_t h)
{
    return (size_t)(h >> 8) & (((size_t)1 << SHORT_LONG_BITS) - 1);
}

/* The two-way set of the word cache for a piece of hash h. */
static inline cache_slot *fx_cache_set(const fx_bpe_cache *c, uint64_t h)
{
    return (cache_slot *)c->words.slots + fx_set_index(h, c->words.bits);
}

/* The slot of p[0..n) (whose hash is h) in a two-way set of the long table, else NULL (a hit
 * in way 1 moves to way 0, as in the word cache). */
static inline const long_slot *fx_long_way(long_slot *set, const uint8_t *p, size_t n,
                                           uint64_t h)
{
    for (int w = 0; w < 2; w++) {
        if (set[w].h == h && set[w].len == n && memcmp(set[w].data, p, n) == 0) {
            if (w) {
                long_slot t = set[0];
                set[0] = set[1];
                set[1] = t;
            }
            return set;
        }
    }
    return NULL;
}

/* The long-piece slot holding p[0..n) (whose hash is h), else NULL: its home set, then its
 * other set when the home spilled. */
static inline const long_slot *fx_long_hit(fx_bpe_cache *c, const uint8_t *p, size_t n,
                                           uint64_t h)
{
    const fx_ctab *t = &c->longs;
    size_t i = fx_set_index(h, t->bits);
    const long_slot *hit = fx_long_way((long_slot *)t->slots + i, p, n, h);
    if (hit || !fx_spilled(t, i))
        return hit;
    return fx_long_way((long_slot *)t->slots + fx_alt_index(h, t->bits), p, n, h);
}

/* Keep piece key k (n bytes, hash h) -> ids[0..got) (1 <= got <= CACHE_IDS) in the word
 * cache; the table may grow (a failed allocation keeps the old one). */
void fx_cache_put(fx_bpe_cache *c, const uint64_t k[3], size_t n, uint64_t h,
                  const int32_t *ids, int64_t got);

/* Keep the ids[0..got) of p[0..n) (hash h) in the long-piece table, if they fit. */
void fx_long_put(fx_bpe_cache *c, const uint8_t *p, size_t n, uint64_t h, const int32_t *ids,
                 int64_t got);

#endif /* FX_BPE_INT_H */
