/* fx_bpe: the model, the word caches and the encode driver (fx_bpe.h has the contract;
 * fx_bpe_merge.c merges a piece). */
#include "fx_bpe.h"

#include <stdlib.h>
#include <string.h>

#include "fx_bpe_int.h"
#include "fx_compat.h"
#include "fx_mem.h"
#include "fx_unicode.h"
#include "fx_utf8.h"

/* -- hashing ------------------------------------------------------------------------------ */

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = mix64(h ^ w) + 0x632be59bd9b4e019ull;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return mix64(h ^ w ^ ((uint64_t)n << 56));
}

static size_t table_size(size_t n)
{
    size_t t = 16;
    while (t < 2 * n + 1)
        t <<= 1;
    return t;
}

/* A short piece (2 to KEY_MAX bytes) as a key of three words: its bytes, zero after its
 * end, in memory order. Made with three loads and masks where the machine is little-endian
 * and the text goes on for KEY_MAX bytes, else copied byte by byte: the same key either way.
 * It is what the direct table and the word cache compare and hash, no memcmp. */
#define KEY_MAX 24

#if FX_LITTLE
static const uint64_t low_bytes[9] = { /* low_bytes[v]: the first v bytes (little-endian) */
    0, 0xffull, 0xffffull, 0xffffffull, 0xffffffffull, 0xffffffffffull, 0xffffffffffffull,
    0xffffffffffffffull, ~0ull};
#endif

/* Key of p[0..n) (1 <= n <= KEY_MAX), where p[0..room) may be read (room >= n). */
static inline void make_key(const uint8_t *p, size_t n, size_t room, uint64_t k[3])
{
#if FX_LITTLE
    if (room >= KEY_MAX) {
        memcpy(k, p, KEY_MAX);
        k[0] &= low_bytes[n < 8 ? n : 8];
        k[1] &= low_bytes[n <= 8 ? 0 : n < 16 ? n - 8 : 8];
        k[2] &= low_bytes[n <= 16 ? 0 : n - 16];
        return;
    }
#endif
    (void)room;
    uint8_t b[KEY_MAX] = {0};
    memcpy(b, p, n);
    memcpy(k, b, KEY_MAX);
}

/* Key of p[0..n) (1 <= n <= 8), where p[0..room) may be read (room >= n): the first word of
 * make_key's (the other two are 0). */
static inline uint64_t make_key8(const uint8_t *p, size_t n, size_t room)
{
#if FX_LITTLE
    if (room >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        return w & low_bytes[n];
    }
#endif
    (void)room;
    uint64_t k[3];
    make_key(p, n, n, k);
    return k[0];
}

/* key_hash of a key of 8 bytes or fewer ({k0, 0, 0}). */
static inline uint64_t key_hash8(uint64_t k0, size_t n)
{
    uint64_t h = (k0 ^ (uint64_t)n) * 0x9e3779b97f4a7c15ull;
    return h ^ (h << 29);
}

static inline uint64_t key_hash(const uint64_t k[3], size_t n)
{
    uint64_t h = (k[0] ^ (uint64_t)n) * 0x9e3779b97f4a7c15ull;
    h ^= k[1] * 0xc2b2ae3d27d4eb4full;
    h ^= k[2] * 0x165667b19e3779f9ull;
    return h ^ (h << 29); /* (the tables index by the top bits) */
}

static inline int key_eq(const uint64_t a[3], const uint64_t b[3])
{
    return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2])) == 0;
}

/* -- the model ---------------------------------------------------------------------------- */

/* The id of the bytes p[0..n) (whose hash_bytes is h), or -1. */
static int32_t vocab_find_h(const fx_bpe *m, const uint8_t *p, size_t n, uint64_t h)
{
    size_t i = (size_t)h & m->vocab_mask;
    for (;;) {
        int32_t id = m->vocab_slots[i];
        if (id < 0)
            return -1;
        int64_t a = m->tok_off[id], b = m->tok_off[id + 1];
        if ((size_t)(b - a) == n && memcmp(m->tok_bytes + a, p, n) == 0)
            return id;
        i = (i + 1) & m->vocab_mask;
    }
}

static int32_t vocab_find(const fx_bpe *m, const uint8_t *p, size_t n)
{
    return vocab_find_h(m, p, n, hash_bytes(p, n));
}

/* The id a piece of 2 to 8 bytes with key k0 (hash h) encodes to when it is one token, or
 * -1. */
static inline int32_t direct8_find(const fx_bpe *m, uint64_t k0, size_t n, uint64_t h)
{
    size_t i = (size_t)(h >> m->direct8_shift);
    for (;;) {
        const direct8_slot *d = &m->direct8[i];
        if (d->len == n && d->k == k0)
            return d->id;
        if (d->len == 0)
            return -1;
        i = (i + 1) & m->direct8_mask;
    }
}

/* The id a piece of 9 to KEY_MAX bytes with key k (hash h) encodes to when it is one token,
 * or -1. */
static inline int32_t direct_find(const fx_bpe *m, const uint64_t k[3], size_t n, uint64_t h)
{
    size_t i = (size_t)(h >> m->direct_shift);
    for (;;) {
        const direct_slot *d = &m->direct[i];
        if (d->len == n && key_eq(d->k, k))
            return d->id;
        if (d->len == 0)
            return -1;
        i = (i + 1) & m->direct_mask;
    }
}

static int trie_add(trie *t, const uint8_t *p, size_t n, int32_t token, size_t *cap)
{
    int32_t parent = -1; /* the node whose children hold p[j]; -1: the root's list for p[0] */
    for (size_t j = 0;; j++) {
        int32_t head = parent < 0 ? t->root[p[0]] : t->nodes[parent].child;
        int32_t node = head;
        while (node >= 0 && t->nodes[node].byte != p[j])
            node = t->nodes[node].sibling;
        if (node < 0) {
            if ((size_t)t->n_nodes == *cap) { /* (moves the nodes: no pointers into them) */
                size_t nc = *cap ? 2 * *cap : 64;
                trie_node *g = realloc(t->nodes, nc * sizeof *g);
                if (!g)
                    return FX_ENOMEM;
                t->nodes = g;
                *cap = nc;
            }
            node = t->n_nodes++;
            t->nodes[node] = (trie_node){-1, head, -1, p[j]};
            if (parent < 0)
                t->root[p[0]] = node;
            else
                t->nodes[parent].child = node;
        }
        if (j + 1 == n) {
            if (t->nodes[node].token < 0) /* the first of equal contents wins */
                t->nodes[node].token = token;
            return FX_OK;
        }
        parent = node;
    }
}

/* The longest added token at s[i..n): its index, and its end in *end; -1 if none. */
static int32_t trie_longest(const trie *t, const uint8_t *s, size_t n, size_t i, size_t *end)
{
    int32_t best = -1;
    int32_t node = t->root[s[i]];
    for (size_t j = i; node >= 0;) {
        while (node >= 0 && t->nodes[node].byte != s[j])
            node = t->nodes[node].sibling;
        if (node < 0)
            break;
        if (t->nodes[node].token >= 0) {
            best = t->nodes[node].token;
            *end = j + 1;
        }
        if (++j == n)
            break;
        node = t->nodes[node].child;
    }
    return best;
}

void fx_bpe_free(fx_bpe *m)
{
    if (!m)
        return;
    free(m->tok_bytes);
    free(m->tok_off);
    fx_big_free(m->vocab_slots, m->vocab_bytes);
    fx_big_free(m->merges, m->merges_bytes);
    fx_big_free(m->pair_filter, m->filter_bytes);
    free(m->merge_to);
    free(m->byte_rank);
    free(m->whole);
    fx_big_free(m->direct, m->direct_bytes);
    fx_big_free(m->direct8, m->direct8_bytes);
    free(m->added_bytes);
    free(m->added_off);
    free(m->added_ids);
    free(m->added_flags);
    free(m->added.nodes);
    free(m->added_norm.nodes);
    free(m);
}

int fx_bpe_set_probe(fx_bpe *m, int level)
{
    level = fx_bpe_probe_built(level);
#if FX_GNUC && (defined(__x86_64__) || defined(__i386__))
    if (level == FX_BPE_PROBE_AVX2 && !__builtin_cpu_supports("avx2"))
        level = FX_BPE_PROBE_PLAIN;
#endif
    m->probe = level;
    return level;
}

int32_t fx_bpe_vocab_size(const fx_bpe *m)
{
    return m->n_vocab;
}

static void *dup(const void *p, size_t n)
{
    void *q = malloc(n ? n : 1);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

fx_bpe *fx_bpe_new(const fx_bpe_spec *sp, int *status, const char **what)
{
    *status = FX_EINVAL;
    *what = "";
    if (sp->n_vocab < 1 || sp->n_merges < 0 || sp->n_added < 0 || sp->pretok < 0 ||
        sp->pretok > FX_PRETOK_NONE || sp->bos_id < -1) {
        *what = "a count or an option is out of range";
        return NULL;
    }
    fx_bpe *m = calloc(1, sizeof *m);
    if (!m) {
        *status = FX_ENOMEM;
        return NULL;
    }
    size_t nv = (size_t)sp->n_vocab;
    m->n_vocab = sp->n_vocab;
    m->pretok = sp->pretok;
    m->ignore_merges = sp->ignore_merges != 0;
    m->nfc = sp->nfc != 0;
    m->bos_id = sp->bos_id;
    fx_bpe_set_probe(m, FX_BPE_PROBE_AVX2);
    for (size_t i = 0; i < nv; i++) {
        if (sp->tok_off[i + 1] < sp->tok_off[i]) {
            *what = "vocabulary offsets decrease";
            goto fail;
        }
    }
    size_t nb = (size_t)sp->tok_off[nv];
    m->tok_bytes = dup(sp->tok_bytes, nb);
    m->tok_off = dup(sp->tok_off, (nv + 1) * sizeof(int64_t));
    size_t vt = table_size(nv);
    m->vocab_bytes = vt * sizeof(int32_t);
    m->vocab_slots = fx_big_calloc(m->vocab_bytes);
    if (sp->n_vocab > ((int32_t)1 << MERGE_ID_BITS) ||
        sp->n_merges >= ((int32_t)1 << MERGE_RANK_BITS) - 1) {
        *what = "more than 2^21 vocabulary ids or 2^22 - 2 merges";
        goto fail;
    }
    size_t mt = 16;
    while (mt < (size_t)sp->n_merges + (size_t)sp->n_merges * 3 / 5 + 1)
        mt <<= 1; /* at most 5/8 full */
    m->merges_bytes = mt * sizeof(uint64_t);
    m->merges = fx_big_calloc(m->merges_bytes);
    /* the filter: 8 bits a table slot, at least 5 a merge (about 1 in 16 bits set: a pair
     * that does not merge passes it that often) */
    m->filter_bytes = mt;
    m->pair_filter = fx_big_calloc(m->filter_bytes);
    m->merge_to = malloc(((size_t)sp->n_merges + 1) * sizeof(int32_t));
    m->whole = calloc(nv, 1);
    m->byte_rank = malloc(65536 * sizeof(int32_t));
    if (!m->tok_bytes || !m->tok_off || !m->vocab_slots || !m->merges || !m->merge_to ||
        !m->whole || !m->byte_rank || !m->pair_filter) {
        *status = FX_ENOMEM;
        goto fail;
    }
    m->vocab_mask = vt - 1;
    memset(m->vocab_slots, 0xff, vt * sizeof(int32_t));
    for (int32_t id = 0; id < m->n_vocab; id++) {
        const uint8_t *p = m->tok_bytes + m->tok_off[id];
        size_t n = (size_t)(m->tok_off[id + 1] - m->tok_off[id]);
        if (n == 0)
            continue;
        if (vocab_find(m, p, n) >= 0) {
            *what = "two vocabulary ids hold the same bytes";
            goto fail;
        }
        size_t i = (size_t)hash_bytes(p, n) & m->vocab_mask;
        while (m->vocab_slots[i] >= 0)
            i = (i + 1) & m->vocab_mask;
        m->vocab_slots[i] = id;
    }
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        m->byte_id[b] = vocab_find(m, &byte, 1);
        if (m->byte_id[b] < 0) {
            *what = "a byte has no token of its own";
            goto fail;
        }
    }
    m->merge_mask = mt - 1;
    m->merge_shift = 64;
    for (size_t t = mt; t > 1; t >>= 1)
        m->merge_shift--;
    m->filter_shift = m->merge_shift - 3; /* mt * 8 bits */
    for (int32_t r = 0; r < sp->n_merges; r++) {
        int32_t a = sp->merges[3 * r], b = sp->merges[3 * r + 1], c = sp->merges[3 * r + 2];
        if (a < 0 || b < 0 || c < 0 || a >= m->n_vocab || b >= m->n_vocab || c >= m->n_vocab) {
            *what = "a merge names an id outside the vocabulary";
            goto fail;
        }
        uint64_t key = merge_key(a, b);
        size_t i = merge_home(m, key);
        while (m->merges[i] != 0 && (m->merges[i] & ~MERGE_RANK_MASK) != key)
            i = (i + 1) & m->merge_mask;
        m->merges[i] = key | ((uint64_t)r + 1); /* a repeated pair: the last rank */
        size_t bit = merge_filter_bit(m, key);
        m->pair_filter[bit >> 6] |= UINT64_C(1) << (bit & 63);
        m->merge_to[r] = c;
    }
    for (int x = 0; x < 256; x++)
        for (int y = 0; y < 256; y++)
            m->byte_rank[x << 8 | y] = merge_rank(m, m->byte_id[x], m->byte_id[y]);
    m->n_added = sp->n_added;
    size_t na = (size_t)sp->n_added;
    for (int b = 0; b < 256; b++)
        m->added.root[b] = m->added_norm.root[b] = -1;
    if (na) {
        m->added_bytes = dup(sp->added_bytes, (size_t)sp->added_off[na]);
        m->added_off = dup(sp->added_off, (na + 1) * sizeof(int64_t));
        m->added_ids = dup(sp->added_ids, na * sizeof(int32_t));
        m->added_flags = dup(sp->added_flags, na);
        if (!m->added_bytes || !m->added_off || !m->added_ids || !m->added_flags) {
            *status = FX_ENOMEM;
            goto fail;
        }
        size_t cap = 0, cap_norm = 0;
        for (size_t k = 0; k < na; k++) {
            int64_t a = m->added_off[k], b = m->added_off[k + 1];
            if (b <= a || m->added_ids[k] < 0) {
                *what = "an added token is empty or has a negative id";
                goto fail;
            }
            int norm = (m->added_flags[k] & FX_ADDED_NORMALIZED) != 0;
            if (trie_add(norm ? &m->added_norm : &m->added, m->added_bytes + a, (size_t)(b - a),
                         (int32_t)k, norm ? &cap_norm : &cap)) {
                *status = FX_ENOMEM;
                goto fail;
            }
        }
    }
    for (int t = 0; t < 2; t++) {
        trie *tr = t ? &m->added_norm : &m->added;
        tr->first = -1;
        for (int b = 0, seen = 0; b < 256; b++) {
            if (tr->root[b] >= 0) {
                tr->first = seen++ ? -1 : b;
                if (seen > 1)
                    break;
            }
        }
    }
    /* whole[id]: merging the token's own bytes ends in the token (then a piece equal to it
     * needs no merging: one probe of the vocabulary) */
    {
        size_t maxlen = 0;
        for (size_t id = 0; id < nv; id++) {
            size_t n = (size_t)(m->tok_off[id + 1] - m->tok_off[id]);
            if (n > maxlen)
                maxlen = n;
        }
        int32_t *scratch = malloc((2 * maxlen + 2) * sizeof(int32_t));
        if (!scratch) {
            *status = FX_ENOMEM;
            goto fail;
        }
        for (size_t id = 0; id < nv; id++) {
            size_t n = (size_t)(m->tok_off[id + 1] - m->tok_off[id]), got;
            if (n == 0)
                continue;
            if (fx_bpe_merge_ids(m, m->tok_bytes + m->tok_off[id], n, scratch,
                                 scratch + maxlen + 1, &got) != FX_OK) {
                free(scratch);
                *status = FX_ENOMEM;
                goto fail;
            }
            m->whole[id] = got == 1 && scratch[maxlen + 1] == (int32_t)id;
        }
        free(scratch);
    }
    /* the direct tables: each at most 2/3 full */
    {
        size_t count = 0, count8 = 0, bits = 4, bits8 = 4;
        for (size_t id = 0; id < nv; id++) {
            size_t n = (size_t)(m->tok_off[id + 1] - m->tok_off[id]);
            if (n >= 2 && n <= KEY_MAX && (m->ignore_merges || m->whole[id]))
                *(n <= 8 ? &count8 : &count) += 1;
        }
        count8 += 256; /* and the bytes, in direct8 too (one path for pieces up to 8 bytes) */
        while (((size_t)1 << bits) < count + count / 2 + 1)
            bits++;
        while (((size_t)1 << bits8) < count8 + count8 / 2 + 1)
            bits8++;
        m->direct_bytes = ((size_t)1 << bits) * sizeof(direct_slot);
        m->direct8_bytes = ((size_t)1 << bits8) * sizeof(direct8_slot);
        m->direct = fx_big_calloc(m->direct_bytes);
        m->direct8 = fx_big_calloc(m->direct8_bytes);
        if (!m->direct || !m->direct8) {
            *status = FX_ENOMEM;
            goto fail;
        }
        m->direct_mask = ((size_t)1 << bits) - 1;
        m->direct_shift = 64 - (unsigned)bits;
        m->direct8_mask = ((size_t)1 << bits8) - 1;
        m->direct8_shift = 64 - (unsigned)bits8;
        for (size_t id = 0; id < nv; id++) {
            size_t n = (size_t)(m->tok_off[id + 1] - m->tok_off[id]);
            if (n < 1 || n > KEY_MAX || !(n == 1 || m->ignore_merges || m->whole[id]))
                continue; /* (a byte's token is byte_id, whole or not) */
            uint64_t k[3];
            make_key(m->tok_bytes + m->tok_off[id], n, n, k);
            if (n <= 8) {
                size_t i = (size_t)(key_hash8(k[0], n) >> m->direct8_shift);
                while (m->direct8[i].len)
                    i = (i + 1) & m->direct8_mask;
                m->direct8[i] = (direct8_slot){k[0], (int32_t)id, (uint32_t)n};
                continue;
            }
            size_t i = (size_t)(key_hash(k, n) >> m->direct_shift);
            while (m->direct[i].len)
                i = (i + 1) & m->direct_mask;
            m->direct[i] = (direct_slot){{k[0], k[1], k[2]}, (int32_t)id, (uint32_t)n};
        }
    }
    *status = FX_OK;
    return m;
fail:
    fx_bpe_free(m);
    return NULL;
}

void fx_ids_free(fx_ids *out)
{
    if (!out->fixed) {
        free(out->ids);
        free(out->offsets);
    }
    memset(out, 0, sizeof *out);
}

static int reserve(fx_ids *out, size_t more)
{
    if ((uint64_t)out->n + more <= (uint64_t)out->cap)
        return FX_OK;
    if (out->fixed || (uint64_t)out->n + more > ((uint64_t)1 << 40))
        return FX_EBIG;
    int64_t cap = out->cap ? out->cap : 256;
    while ((uint64_t)cap < (uint64_t)out->n + more)
        cap *= 2;
    int32_t *ids = realloc(out->ids, (size_t)cap * sizeof(int32_t));
    if (!ids)
        return FX_ENOMEM;
    out->ids = ids;
    if (out->want_offsets) {
        int64_t *off = realloc(out->offsets, (size_t)cap * 2 * sizeof(int64_t));
        if (!off)
            return FX_ENOMEM;
        out->offsets = off;
    }
    out->cap = cap;
    return FX_OK;
}

/* Merge p[0..n) into dst (room for n ids): the count of ids, or -(an FX_BPE_* error). */
static int64_t merge_piece(const fx_bpe *m, const uint8_t *p, size_t n, int32_t *dst)
{
    int32_t stack[2 * SHORT_PIECE];
    int32_t *scratch = n <= SHORT_PIECE ? stack : malloc(n * sizeof(int32_t));
    if (!scratch)
        return -FX_ENOMEM;
    size_t got;
    int rc = fx_bpe_merge_ids(m, p, n, scratch, dst, &got);
    if (scratch != stack)
        free(scratch);
    return rc ? -rc : (int64_t)got;
}

/* The ids of the piece of key k (n bytes) from a two-way set of the word cache into dst:
 * their count, or -1 when the set does not hold it (a hit in way 1 moves to way 0). */
static inline int64_t word_way(cache_slot *set, size_t n, const uint64_t k[3], int32_t *dst)
{
    for (int w = 0; w < 2; w++) {
        if (set[w].len == n && key_eq(set[w].k, k)) {
            size_t got = set[w].nids;
            for (size_t j = 0; j < got; j++)
                dst[j] = set[w].ids[j];
            if (w) {
                cache_slot t = set[0];
                set[0] = set[1];
                set[1] = t;
            }
            return (int64_t)got;
        }
    }
    return -1;
}

/* A short piece not in the direct table: its home set of the word cache, its other set when
 * the home spilled, then the long-piece table (a result of more than CACHE_IDS ids), then
 * merging. */
static int64_t cached_short(const fx_bpe *m, fx_bpe_cache *c, const uint8_t *p, size_t n,
                            const uint64_t k[3], uint64_t h, int32_t *dst)
{
    if (!c)
        return merge_piece(m, p, n, dst);
    const fx_ctab *t = &c->words;
    size_t i = fx_set_index(h, t->bits);
    int64_t hit = word_way((cache_slot *)t->slots + i, n, k, dst);
    if (hit < 0 && fx_spilled(t, i))
        hit = word_way((cache_slot *)t->slots + fx_alt_index(h, t->bits), n, k, dst);
    if (hit >= 0)
        return hit;
    size_t bit = fx_short_long_bit(h);
    const uint64_t word = c->short_long[bit >> 6], mask = UINT64_C(1) << (bit & 63);
    const long_slot *ls = word & mask ? fx_long_hit(c, p, n, h) : NULL;
    if (ls)
        return fx_long_copy(ls, dst);
    c->merged++;
    int64_t got = merge_piece(m, p, n, dst);
    if (got > CACHE_IDS) {
        c->short_long[bit >> 6] |= mask;
        fx_long_put(c, p, n, h, dst, got);
    } else if (got > 0) {
        fx_cache_put(c, k, n, h, dst, got);
    }
    return got;
}

/* The ids of a piece p[0..n) of more than KEY_MAX bytes into dst (room for n ids): their
 * count, or -(an FX_BPE_* error). */
static int64_t encode_long(const fx_bpe *m, fx_bpe_cache *cache, const uint8_t *p, size_t n,
                           int32_t *dst)
{
    uint64_t h = hash_bytes(p, n);
    int32_t id = vocab_find_h(m, p, n, h);
    if (id >= 0 && (m->ignore_merges || m->whole[id])) {
        dst[0] = id;
        return 1;
    }
    const long_slot *ls = cache && n <= LONG_KEY ? fx_long_hit(cache, p, n, h) : NULL;
    if (ls)
        return fx_long_copy(ls, dst);
    int64_t got = merge_piece(m, p, n, dst);
    if (cache) {
        cache->merged++;
        fx_long_put(cache, p, n, h, dst, got);
    }
    return got;
}

/* The offsets of id k of out, which spans text[pos..end) (pos < end <= n): see set_offsets. */
static inline void set_span(fx_ids *out, int64_t k, size_t pos, size_t end, size_t n,
                            const int64_t *src, const uint8_t *seg, int64_t src_end,
                            int64_t base)
{
    int64_t a = (int64_t)pos, b = (int64_t)end;
    if (src && out->want_offsets == FX_OFFSETS_CHARS) {
        size_t cl;
        a = src[pos];
        b = src[end - 1];
        (void)fx_utf8_at(seg, (size_t)src_end, (size_t)b, &cl);
        b += (int64_t)cl;
    } else if (src) {
        a = src[pos];
        b = end < n ? src[end] : src_end;
    }
    out->offsets[2 * k] = base + a;
    out->offsets[2 * k + 1] = base + b;
}

/* Offsets of the ids out->ids[first..out->n) that came from text[0..n) starting at byte `at`
 * of that text: each id spans its token's byte length; src (or NULL for the identity) maps a
 * byte of text to its byte in the segment seg[0..src_end) (the text before NFC), base added.
 * FX_OFFSETS_CHARS: an id ends where the code point HF aligns its last byte to ends (the
 * conversion to code points happens per text, in fx_bpe_encode). */
static void set_offsets(const fx_bpe *m, fx_ids *out, int64_t first, size_t at, size_t n,
                        const int64_t *src, const uint8_t *seg, int64_t src_end, int64_t base)
{
    size_t pos = at;
    for (int64_t k = first; k < out->n; k++) {
        int32_t id = out->ids[k];
        size_t end = pos + (size_t)(m->tok_off[id + 1] - m->tok_off[id]);
        set_span(out, k, pos, end, n, src, seg, src_end, base);
        pos = end;
    }
}

/* Pieces the pre-tokenizer gives per call, looked up as a batch: the table slots of all of
 * them are fetched before the first is read, so their cache misses overlap. */
#define BATCH 64

/* A piece of a batch: its key and hash (2 to KEY_MAX bytes), and its id when the direct
 * table (or the byte table) gives one, else -1. */
typedef struct {
    uint64_t k[3], h;
    int32_t id;
} batch_key;

/* The byte offsets out->offsets[2 first .. 2 out->n) of text s[0..n) as HF's code point
 * offsets: a start at the code point holding that byte, an end after the code point holding
 * the byte before it. Starts and ends each never decrease within a text (tokens come in order,
 * fx_nfc's offsets never decrease), so two cursors convert them in one pass. */
static void bytes_to_chars(const uint8_t *s, size_t n, fx_ids *out, int64_t first)
{
    for (int w = 0; w < 2; w++) {
        size_t b = 0;
        int64_t c = 0; /* code points starting in s[0..b) */
        for (int64_t k = first; k < out->n; k++) {
            int64_t *o = &out->offsets[2 * k + w];
            size_t t = *o < 0 ? 0 : (size_t)*o > n ? n : (size_t)*o;
            if (t < b) { /* not expected (offsets are monotone); restart, never read out */
                b = 0;
                c = 0;
            }
            for (; b < t; b++)
                c += (s[b] & 0xC0) != 0x80;
            /* an end counts every code point started before it; a start inside a code point
             * belongs to that code point */
            *o = w == 1 || t >= n || (s[t] & 0xC0) != 0x80 ? c : c - 1;
        }
    }
}

static int32_t added_next(const fx_bpe *m, const trie *t, const uint8_t *s, size_t n, size_t i,
                          size_t prev, size_t *a, size_t *e);

/* Append added token k, which spans text[a..e) of a segment of len bytes (see set_offsets). */
static int put_added(const fx_bpe *m, fx_ids *out, int32_t k, size_t a, size_t e, size_t len,
                     const int64_t *src, const uint8_t *seg, int64_t src_end, int64_t base)
{
    int rc = reserve(out, 1);
    if (rc)
        return rc;
    out->ids[out->n] = m->added_ids[k];
    if (out->want_offsets)
        set_span(out, out->n, a, e, len, src, seg, src_end, base);
    out->n++;
    return FX_OK;
}

/* A segment between added tokens: normalize, split out the normalized added tokens, then
 * pre-tokenize and merge the rest. */
static int encode_segment(const fx_bpe *m, fx_bpe_cache *cache, const uint8_t *s, size_t n,
                          int64_t base, fx_ids *out)
{
    const uint8_t *text = s;
    size_t len = n;
    const int64_t *src = NULL;
    if (m->nfc && !fx_nfc_is_quick(s, n)) {
        if (!cache)
            return FX_EINVAL;
        if (fx_nfc(s, n, &cache->norm, &len, &cache->norm_cap,
                   out->want_offsets ? &cache->norm_src : NULL, &cache->norm_src_cap))
            return FX_ENOMEM;
        text = cache->norm;
        src = out->want_offsets ? cache->norm_src : NULL;
    }
    /* a piece of b bytes gives at most b ids: room for the segment at once, or (a fixed
     * output that NFC made too short for the normalized bytes) piece by piece */
    int rc = reserve(out, len), per_piece = rc == FX_EBIG && out->fixed;
    if (rc && !per_piece)
        return rc;
    const int want_offsets = out->want_offsets;
    size_t ends[BATCH];
    batch_key bk[BATCH];
    /* HF's second pass: the next normalized added token k spans text[ta..te) (ta = len: none);
     * the text before it is pre-tokenized alone */
    size_t ta, te;
    int32_t k = added_next(m, &m->added_norm, text, len, 0, 0, &ta, &te);
    for (size_t i = 0; i < len;) {
        if (i == ta) {
            if ((rc = put_added(m, out, k, ta, te, len, src, s, (int64_t)n, base)) != 0)
                return rc;
            i = te;
            k = added_next(m, &m->added_norm, text, len, i, i, &ta, &te);
            continue;
        }
        size_t np = fx_pretok_split(text, ta, i, m->pretok, ends, BATCH);
        /* 1: the keys, and the direct tables' slots fetched (a key of 8 bytes or fewer: its
         * first word only, the others set in step 2 when the word cache needs them) */
        for (size_t q = 0, a = i; q < np; a = ends[q++]) {
            size_t pn = ends[q] - a;
            if (pn <= 8) {
                bk[q].k[0] = make_key8(text + a, pn, len - a);
                bk[q].h = key_hash8(bk[q].k[0], pn);
                FX_PREFETCH(&m->direct8[bk[q].h >> m->direct8_shift]);
            } else if (pn > 8 && pn <= KEY_MAX) {
                make_key(text + a, pn, len - a, bk[q].k);
                bk[q].h = key_hash(bk[q].k, pn);
                FX_PREFETCH(&m->direct[bk[q].h >> m->direct_shift]);
            }
        }
        /* 2: the direct tables (and single bytes); a short piece not there has its word
         * cache set fetched */
        for (size_t q = 0, a = i; q < np; a = ends[q++]) {
            size_t pn = ends[q] - a;
            bk[q].id = -1;
            if (pn <= KEY_MAX) {
                if (pn <= 8)
                    bk[q].id = direct8_find(m, bk[q].k[0], pn, bk[q].h);
                else
                    bk[q].id = direct_find(m, bk[q].k, pn, bk[q].h);
                if (bk[q].id < 0 && pn <= 8)
                    bk[q].k[1] = bk[q].k[2] = 0;
                if (bk[q].id < 0 && cache) {
                    const cache_slot *set = fx_cache_set(cache, bk[q].h);
                    FX_PREFETCH(set);
                    FX_PREFETCH(set + 1);
                }
            }
        }
        /* 3: the ids, in order (their count kept here, written to out when needed) */
        int64_t on = out->n;
        for (size_t q = 0; q < np; q++) {
            size_t e = ends[q], pn = e - i;
            int64_t got = 1;
            if (per_piece) {
                out->n = on;
                if ((rc = reserve(out, pn)) != 0)
                    return rc;
            }
            int32_t *dst = out->ids + on;
            if (bk[q].id >= 0)
                dst[0] = bk[q].id;
            else if (pn <= KEY_MAX)
                got = cached_short(m, cache, text + i, pn, bk[q].k, bk[q].h, dst);
            else
                got = encode_long(m, cache, text + i, pn, dst);
            if (got < 0) {
                out->n = on;
                return (int)-got;
            }
            if (want_offsets) {
                out->n = on + got;
                set_offsets(m, out, on, i, len, src, s, (int64_t)n, base);
            }
            on += got;
            i = e;
        }
        out->n = on;
    }
    return FX_OK;
}

static size_t ws_before(const uint8_t *s, size_t from, size_t a)
{
    /* step back over whitespace code points in s[from..a) */
    while (a > from) {
        size_t b = a - 1, len;
        while (b > from && a - b < 4 && (s[b] & 0xC0) == 0x80)
            b--;
        uint32_t c = fx_utf8_at(s, a, b, &len);
        if (b + len != a || c == FX_UTF8_BAD || !(fx_uclass(c) & FX_UC_WS))
            break; /* not one whole code point, or not whitespace */
        a = b;
    }
    return a;
}

static size_t ws_after(const uint8_t *s, size_t n, size_t e)
{
    while (e < n) {
        size_t len;
        uint32_t c = fx_utf8_at(s, n, e, &len);
        if (c == FX_UTF8_BAD || !(fx_uclass(c) & FX_UC_WS))
            break;
        e += len;
    }
    return e;
}

/* 1 when the code point that ends at byte i of s (i > 0) is a word character (\w). */
static int word_before(const uint8_t *s, size_t i)
{
    size_t b = i - 1, len;
    while (b > 0 && i - b < 4 && (s[b] & 0xC0) == 0x80)
        b--;
    uint32_t c = fx_utf8_at(s, i, b, &len);
    return b + len == i && c != FX_UTF8_BAD && (fx_uclass(c) & FX_UC_W);
}

/* 1 when the code point at byte i of s[0..n) (i < n) is a word character (\w). */
static int word_at(const uint8_t *s, size_t n, size_t i)
{
    size_t len;
    uint32_t c = fx_utf8_at(s, n, i, &len);
    return c != FX_UTF8_BAD && (fx_uclass(c) & FX_UC_W);
}

/* HF's find_matches (tokenizers' added_vocabulary.rs) over s[0..n), the text of one pass,
 * from byte i on: the next token of trie t, leftmost-longest. A single_word token with a word
 * character just before or after it (in s) is no match, and the search goes on after it (HF's
 * Aho-Corasick iterator resumes there: a token starting inside it is never seen). Its span
 * [*a, *e): widened by lstrip over the whitespace before it, back to prev (the end of the
 * last token) at most, and by rstrip over the whitespace after it. The token's index, or -1
 * (and *a = *e = n) when there is none. */
static int32_t added_next(const fx_bpe *m, const trie *t, const uint8_t *s, size_t n, size_t i,
                          size_t prev, size_t *a, size_t *e)
{
    *a = *e = n;
    while (t->n_nodes && i < n) {
        if (t->first >= 0) {
            const uint8_t *hit = memchr(s + i, t->first, n - i);
            if (!hit)
                break;
            i = (size_t)(hit - s);
        } else if (t->root[s[i]] < 0) {
            i++;
            continue;
        }
        size_t end = i;
        int32_t k = trie_longest(t, s, n, i, &end);
        if (k < 0) {
            i++;
            continue;
        }
        uint8_t f = m->added_flags[k];
        if ((f & FX_ADDED_SINGLE_WORD) &&
            ((i > 0 && word_before(s, i)) || (end < n && word_at(s, n, end)))) {
            i = end;
            continue;
        }
        *a = f & FX_ADDED_LSTRIP ? ws_before(s, prev, i) : i;
        *e = f & FX_ADDED_RSTRIP ? ws_after(s, n, end) : end;
        return k;
    }
    return -1;
}

int fx_bpe_encode(const fx_bpe *m, fx_bpe_cache *cache, const uint8_t *s, size_t n,
                  int with_specials, fx_ids *out)
{
    if ((uint64_t)n >= ((uint64_t)1 << 62))
        return FX_EBIG;
    int rc;
    int64_t first = out->n;
    if (with_specials && m->bos_id >= 0) {
        if ((rc = reserve(out, 1)) != 0)
            return rc;
        out->ids[out->n] = m->bos_id;
        if (out->want_offsets)
            out->offsets[2 * out->n] = out->offsets[2 * out->n + 1] = 0;
        out->n++;
    }
    /* HF's first pass: the added tokens that are not normalized, on the raw text; seg: the
     * start of the text not yet encoded */
    size_t seg = 0, a, e;
    for (int32_t k; (k = added_next(m, &m->added, s, n, seg, seg, &a, &e)) >= 0; seg = e) {
        if (a > seg && (rc = encode_segment(m, cache, s + seg, a - seg, (int64_t)seg, out)))
            return rc;
        if ((rc = put_added(m, out, k, a, e, n, NULL, s, (int64_t)n, 0)) != 0)
            return rc;
    }
    if (seg < n && (rc = encode_segment(m, cache, s + seg, n - seg, (int64_t)seg, out)))
        return rc;
    if (out->want_offsets == FX_OFFSETS_CHARS)
        bytes_to_chars(s, n, out, first);
    return FX_OK;
}

int fx_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) { /* eight ASCII bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        size_t len;
        if (fx_utf8_at(s, n, i, &len) == FX_UTF8_BAD)
            return 0;
        i += len;
    }
    return 1;
}

int fx_bpe_encode_many(const fx_bpe *m, fx_bpe_cache *cache, const uint8_t *data,
                       const int64_t *off, int64_t first, int64_t last, int with_specials,
                       int validate, fx_ids *out, int64_t *counts, int64_t *bad)
{
    for (int64_t i = first; i < last; i++) {
        int64_t before = out->n;
        const uint8_t *s = data + (off[i] - off[0]);
        size_t n = (size_t)(off[i + 1] - off[i]);
        if (validate && !fx_utf8_valid(s, n)) {
            *bad = i;
            return FX_EUTF8;
        }
        int rc = fx_bpe_encode(m, cache, s, n, with_specials, out);
        if (rc) {
            *bad = i;
            return rc;
        }
        counts[i - first] = out->n - before;
    }
    return FX_OK;
}
