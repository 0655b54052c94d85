/* fx_rowset: exact set of table rows compared by value (see fx_rowset.h). */
#if !defined(_WIN32) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1   /* MAP_ANONYMOUS under -std=c11 (glibc) */
#endif
#if defined(__APPLE__) && !defined(_DARWIN_C_SOURCE)
#define _DARWIN_C_SOURCE 1
#endif
#include <stdlib.h>
#include <string.h>
#include "fx_rowset.h"
#include "fx_compat.h"
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#if defined(MAP_ANONYMOUS) || defined(MAP_ANON)
#define FX_ZMMAP 1
#ifndef MAP_ANONYMOUS
#define MAP_ANONYMOUS MAP_ANON
#endif
#endif
#endif

#define FX_KEY_WINDOWS 4   /* windows sampled from an encoding longer than 64 bytes */
#define FX_KEY_WIDTH 16    /* bytes per window                                        */

/* ------------------------------------------------------------------ scratch */
int fx_segbuf_alloc(fx_segbuf *sb, int64_t cap_segs, int64_t cap_bytes)
{
    memset(sb, 0, sizeof(*sb));
    sb->segs = (fx_seg *)malloc((size_t)cap_segs * sizeof(fx_seg));
    sb->bytes = (uint8_t *)malloc((size_t)cap_bytes);
    if (sb->segs == NULL || sb->bytes == NULL) {
        fx_segbuf_release(sb);
        return FX_ENOMEM;
    }
    sb->cap_segs = cap_segs;
    sb->cap_bytes = cap_bytes;
    return 0;
}

void fx_segbuf_release(fx_segbuf *sb)
{
    free(sb->segs);
    free(sb->bytes);
    memset(sb, 0, sizeof(*sb));
}

static int64_t fx_tab_chunk(const fx_tab *t, int64_t row)
{
    int64_t lo = 0, hi = t->nchunks - 1;   /* last chunk with starts[k] <= row */
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) >> 1;
        if (t->starts[mid] <= row) lo = mid; else hi = mid - 1;
    }
    return lo;
}

int fx_tab_encode(const fx_tab *t, int64_t row, fx_segbuf *sb)
{
    int64_t k = fx_tab_chunk(t, row);
    const fx_col *cols = t->cols + k * (int64_t)t->ncols;
    int64_t local = row - t->starts[k];
    for (;;) {
        sb->nsegs = 0;
        sb->nbytes = 0;
        int st = fx_encode_row_segs(cols, t->ncols, local, sb);
        if (st != FX_EFULL) return st;
        /* Grow both (a row that overflows one usually needs more of the other too). */
        int64_t ns = sb->cap_segs * 4, nb = sb->cap_bytes * 4;
        fx_seg *segs = (fx_seg *)realloc(sb->segs, (size_t)ns * sizeof(fx_seg));
        if (segs == NULL) return FX_ENOMEM;
        sb->segs = segs;
        sb->cap_segs = ns;
        uint8_t *bytes = (uint8_t *)realloc(sb->bytes, (size_t)nb);
        if (bytes == NULL) return FX_ENOMEM;
        sb->bytes = bytes;
        sb->cap_bytes = nb;
    }
}

/* ------------------------------------------------------------------ key, compare, digest */
static inline uint64_t fx_fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t fx_step(uint64_t h, uint64_t w)
{
    h ^= w * 0x87c37b91114253d5ULL;
    h = (h << 31) | (h >> 33);
    return h * 0x4cf5ad432745937fULL + 0x52dce729;
}

static inline uint64_t fx_load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static int64_t fx_segs_len(const fx_segbuf *sb)
{
    int64_t n = 0;
    for (int64_t s = 0; s < sb->nsegs; s++) n += (int64_t)sb->segs[s].len;
    return n;
}

/* Copy `want` bytes starting at encoding position `pos` into dst; (*s, *base) is
 * a cursor: segment *s starts at encoding position *base (positions increase). */
static void fx_gather(const fx_segbuf *sb, int64_t pos, int64_t want, uint8_t *dst,
                      int64_t *s, int64_t *base)
{
    while (pos >= *base + (int64_t)sb->segs[*s].len) {
        *base += (int64_t)sb->segs[*s].len;
        (*s)++;
    }
    int64_t ss = *s, sbase = *base, got = 0;
    while (got < want) {
        int64_t off = pos + got - sbase, avail = (int64_t)sb->segs[ss].len - off;
        int64_t n = want - got < avail ? want - got : avail;
        memcpy(dst + got, sb->segs[ss].ptr + off, (size_t)n);
        got += n;
        if (got < want) {
            sbase += (int64_t)sb->segs[ss].len;
            ss++;
        }
    }
}

uint64_t fx_segs_key(const fx_segbuf *sb)
{
    enum { ALL = FX_KEY_WINDOWS * FX_KEY_WIDTH };
    int64_t len = fx_segs_len(sb), s = 0, base = 0;
    uint64_t h = fx_fmix64((uint64_t)len ^ 0x9e3779b97f4a7c15ULL);
    uint8_t buf[ALL];
    if (len <= ALL) {   /* short: every byte (the length is mixed in, so zero fill is unambiguous) */
        memset(buf, 0, sizeof buf);
        if (len > 0) fx_gather(sb, 0, len, buf, &s, &base);
        for (int i = 0; i < ALL; i += 8) h = fx_step(h, fx_load64(buf + i));
        return fx_fmix64(h);
    }
    for (int j = 0; j < FX_KEY_WINDOWS; j++) {
        int64_t pos = (len - FX_KEY_WIDTH) * (2 * j + 1) / (2 * FX_KEY_WINDOWS);
        fx_gather(sb, pos, FX_KEY_WIDTH, buf, &s, &base);
        h = fx_step(h, fx_load64(buf));
        h = fx_step(h, fx_load64(buf + 8));
    }
    return fx_fmix64(h);
}

/* Prefetch the source bytes of an encoded row's key windows. */
static void fx_segs_prefetch_windows(const fx_segbuf *sb, int64_t len)
{
    int64_t s = 0, base = 0;
    for (int j = 0; j < FX_KEY_WINDOWS; j++) {
        int64_t pos = (len - FX_KEY_WIDTH) * (2 * j + 1) / (2 * FX_KEY_WINDOWS);
        while (pos >= base + (int64_t)sb->segs[s].len) {
            base += (int64_t)sb->segs[s].len;
            s++;
        }
        for (int64_t ss = s, sbase = base; ss < sb->nsegs && sbase < pos + FX_KEY_WIDTH; ss++) {
            const uint8_t *p = sb->segs[ss].ptr;
            int64_t lo = pos > sbase ? pos - sbase : 0;
            FX_PREFETCH(p + lo);
            FX_PREFETCH(p + lo + FX_KEY_WIDTH - 1);
            sbase += (int64_t)sb->segs[ss].len;
        }
    }
}

int64_t fx_tab_keys(const fx_tab *t, const int64_t *rows, int64_t m, fx_segbuf *sbs,
                    uint64_t *keys, uint8_t *status)
{
    /* The windows of a row are a few cache misses each; a row at a time they are paid one
     * after another.  So: encode a group of rows (each into its own scratch), prefetch all
     * their windows, then compute the keys. */
    int64_t nbad = 0;
    for (int64_t g0 = 0; g0 < m; g0 += FX_KEY_GROUP) {
        int64_t gm = m - g0 < FX_KEY_GROUP ? m - g0 : FX_KEY_GROUP;
        for (int64_t g = 0; g < gm; g++) {
            int st = fx_tab_encode(t, rows[g0 + g], &sbs[g]);
            status[g0 + g] = (uint8_t)st;
            if (st != FX_OK) {
                nbad++;
                continue;
            }
            int64_t len = fx_segs_len(&sbs[g]);
            if (len > FX_KEY_WINDOWS * FX_KEY_WIDTH) fx_segs_prefetch_windows(&sbs[g], len);
        }
        for (int64_t g = 0; g < gm; g++) {
            if (status[g0 + g] == FX_OK) keys[g0 + g] = fx_segs_key(&sbs[g]);
        }
    }
    return nbad;
}

int fx_segs_equal(const fx_segbuf *a, const fx_segbuf *b)
{
    int64_t i = 0, j = 0;
    size_t oi = 0, oj = 0;
    for (;;) {
        while (i < a->nsegs && oi == a->segs[i].len) { i++; oi = 0; }
        while (j < b->nsegs && oj == b->segs[j].len) { j++; oj = 0; }
        if (i == a->nsegs || j == b->nsegs) return i == a->nsegs && j == b->nsegs;
        size_t ra = a->segs[i].len - oi, rb = b->segs[j].len - oj, n = ra < rb ? ra : rb;
        if (memcmp(a->segs[i].ptr + oi, b->segs[j].ptr + oj, n) != 0) return 0;
        oi += n;
        oj += n;
    }
}

#define FX_CMP_GROUP 8   /* pairs whose first lines are prefetched together */

static void fx_segs_prefetch_heads(const fx_segbuf *sb)
{
    for (int64_t s = 0; s < sb->nsegs; s++) {
        const uint8_t *p = sb->segs[s].ptr;
        size_t n = sb->segs[s].len < 512 ? sb->segs[s].len : 512;
        for (size_t o = 0; o < n; o += 64) FX_PREFETCH(p + o);
    }
}

int64_t fx_rowset_compare(const fx_rowset *s, const fx_tab *const *srcs, const fx_tab *t,
                          const int64_t *rows, const int64_t *cand, int64_t m, fx_segbuf *sbs,
                          uint8_t *status)
{
    /* Pairs are compared a group at a time: both rows of the next FX_CMP_GROUP pairs (rows
     * without a candidate are skipped) are encoded and the first lines of every span
     * prefetched before the first memcmp, so the misses of different pairs overlap (the
     * hardware prefetcher takes over inside a span). */
    int64_t nbad = 0, i = 0;
    fx_segbuf *a = sbs, *b = sbs + FX_KEY_GROUP;
    int64_t gi[FX_CMP_GROUP];
    while (i < m) {
        int gm = 0;
        for (; i < m && gm < FX_CMP_GROUP; i++) {
            int64_t e = cand[i];
            if (e < 0) continue;
            int st = fx_tab_encode(t, rows[i], &a[gm]);
            if (st == FX_OK) st = fx_tab_encode(srcs[s->src[e]], s->row[e], &b[gm]);
            status[i] = (uint8_t)st;
            if (st != FX_OK) {
                nbad++;
                continue;
            }
            fx_segs_prefetch_heads(&a[gm]);
            fx_segs_prefetch_heads(&b[gm]);
            gi[gm++] = i;
        }
        for (int g = 0; g < gm; g++) {
            if (!fx_segs_equal(&a[g], &b[g])) status[gi[g]] = 255;
        }
    }
    return nbad;
}

uint64_t fx_segs_digest64(const fx_segbuf *sb, fx_sha256_compress_fn fn)
{
    fx_sha256_ctx ctx;
    uint8_t out[32];
    fx_sha256_init_with(&ctx, fn);
    for (int64_t s = 0; s < sb->nsegs; s++) fx_sha256_update(&ctx, sb->segs[s].ptr, sb->segs[s].len);
    fx_sha256_final(&ctx, out);
    return fx_load64(out);
}

/* Zeroed arrays whose pages stay untouched until written.  A set is typically built once
 * per process on fresh memory, where every page touched costs a fault (~1 ms per MiB on
 * the VMs this was measured on), and most of a set's zeroed arrays (chain links, the key
 * table) are written sparsely.  calloc only guarantees that when the block happens to be
 * fresh from mmap; from a reused heap block it memsets all of it.  So big ones are mapped
 * directly (POSIX), the rest come from calloc. */
#define FX_ZBIG ((size_t)1 << 18)

static void *fx_zalloc(size_t bytes)
{
#ifdef FX_ZMMAP
    if (bytes >= FX_ZBIG) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
#endif
    return calloc(bytes ? bytes : 1, 1);
}

static void fx_zfree(void *p, size_t bytes)
{
    if (p == NULL) return;
#ifdef FX_ZMMAP
    if (bytes >= FX_ZBIG) {
        munmap(p, bytes);
        return;
    }
#endif
    free(p);
}

/* A zeroed array grown from `old` to `bytes` bytes (the new part zero), or NULL (p kept). */
static void *fx_zgrow(void *p, size_t old, size_t bytes)
{
    void *q = fx_zalloc(bytes);
    if (q == NULL) return NULL;
    if (old) memcpy(q, p, old);
    fx_zfree(p, old);
    return q;
}

#define FX_ZGROW(ptr, type, oldn, n) do { \
        type *p_ = (type *)fx_zgrow((ptr), (size_t)(oldn) * sizeof(type), (size_t)(n) * sizeof(type)); \
        if (p_ == NULL) return FX_ENOMEM; \
        (ptr) = p_; \
    } while (0)

/* ------------------------------------------------------------------ the set */
void fx_rowset_init(fx_rowset *s)
{
    memset(s, 0, sizeof(*s));
}

void fx_rowset_free(fx_rowset *s)
{
    size_t cap = (size_t)s->cap;
    free(s->src); free(s->row);
    fx_zfree(s->digest, cap * sizeof(uint64_t)); fx_zfree(s->next, cap * sizeof(int64_t));
    fx_zfree(s->flags, cap);
    fx_zfree(s->kslot, s->kmask ? (size_t)(s->kmask + 1) * sizeof(uint64_t) : 0);
    free(s->dslot_key); free(s->dslot_head);
    fx_rowset_init(s);
}

size_t fx_rowset_nbytes(const fx_rowset *s)
{
    size_t per_entry = sizeof(int32_t) + sizeof(int64_t)
                       + (s->next ? sizeof(uint64_t) + sizeof(int64_t) + 1 : 0);
    size_t slot = sizeof(uint64_t) + sizeof(int64_t);
    return (size_t)s->cap * per_entry + (size_t)(s->kmask ? s->kmask + 1 : 0) * sizeof(uint64_t)
           + (size_t)(s->dmask ? s->dmask + 1 : 0) * slot + sizeof(*s);
}

#define FX_GROW(ptr, type, n) do { \
        type *p_ = (type *)realloc((ptr), (size_t)(n) * sizeof(type)); \
        if (p_ == NULL) return FX_ENOMEM; \
        (ptr) = p_; \
    } while (0)

static int fx_entries_reserve(fx_rowset *s, int64_t need)
{
    if (need <= s->cap) return 0;
    int64_t cap = s->cap ? s->cap : 1024;
    while (cap < need) cap *= 2;
    FX_GROW(s->src, int32_t, cap);
    FX_GROW(s->row, int64_t, cap);
    if (s->next != NULL) {   /* the chain arrays exist once a key was shared (see fx_extras) */
        FX_ZGROW(s->digest, uint64_t, s->cap, cap);
        FX_ZGROW(s->next, int64_t, s->cap, cap);
        FX_ZGROW(s->flags, uint8_t, s->cap, cap);
    }
    s->cap = cap;
    return 0;
}

/* Chain links, digests and hot flags: allocated the first time two distinct rows share a
 * key (most sets never need them: 12 bytes per entry instead of 29).  All three are zeroed
 * arrays (fx_zalloc; a link is next entry + 1, 0 = end of chain) that nothing writes until an
 * entry joins a chain, so a set with a few shared keys touches a few pages of them. */
static int fx_extras(fx_rowset *s)
{
    if (s->next != NULL) return 0;
    if (s->cap == 0 && fx_entries_reserve(s, 1)) return FX_ENOMEM;
    size_t cap = (size_t)s->cap;   /* the chain arrays always have the entries' capacity */
    s->digest = (uint64_t *)fx_zalloc(cap * sizeof(uint64_t));
    s->flags = (uint8_t *)fx_zalloc(cap);
    s->next = (int64_t *)fx_zalloc(cap * sizeof(int64_t));
    if (s->digest == NULL || s->flags == NULL || s->next == NULL) {
        fx_zfree(s->digest, cap * sizeof(uint64_t)); fx_zfree(s->flags, cap);
        fx_zfree(s->next, cap * sizeof(int64_t));
        s->digest = NULL; s->flags = NULL; s->next = NULL;
        return FX_ENOMEM;
    }
    return 0;
}

/* Open-addressing table (linear probing) of (hash, head entry); head -1 = empty. */
static int fx_table_resize(uint64_t **keys, int64_t **heads, uint64_t *mask, int64_t need)
{
    uint64_t size = 1024;
    while ((double)size * 0.75 < (double)need) size *= 2;
    if (*mask && size <= *mask + 1) return 0;
    uint64_t *nk = (uint64_t *)malloc(size * sizeof(uint64_t));
    int64_t *nh = (int64_t *)malloc(size * sizeof(int64_t));
    if (nk == NULL || nh == NULL) {
        free(nk);
        free(nh);
        return FX_ENOMEM;
    }
    for (uint64_t i = 0; i < size; i++) nh[i] = -1;
    if (*mask) {
        for (uint64_t i = 0; i <= *mask; i++) {
            if ((*heads)[i] < 0) continue;
            uint64_t j = (*keys)[i] & (size - 1);
            while (nh[j] >= 0) j = (j + 1) & (size - 1);
            nk[j] = (*keys)[i];
            nh[j] = (*heads)[i];
        }
    }
    free(*keys);
    free(*heads);
    *keys = nk;
    *heads = nh;
    *mask = size - 1;
    return 0;
}

static uint64_t fx_table_find(const uint64_t *keys, const int64_t *heads, uint64_t mask, uint64_t h)
{
    uint64_t j = h & mask;
    while (heads[j] >= 0 && keys[j] != h) j = (j + 1) & mask;
    return j;
}

/* The key table.  A slot is one 64-bit word: the key's TAG (its high 32 bits) << 32 |
 * (head entry + 1), 0 when empty; the probe starts at tag & mask, so growing the table
 * needs nothing but the slots.  8 bytes a slot instead of 16 (key + head): the table is the
 * one structure a set touches at random, and on fresh memory (a set built once per
 * process) every page it touches costs a fault; 100k rows: 2 MiB instead of 4.  Keys with
 * equal tags are one key here: a tag shared by distinct keys (~n^2 / 2^33 pairs) only adds
 * byte comparisons of rows that then differ (rows are always compared), never a wrong
 * answer. */
static inline uint32_t fx_tag(uint64_t key) { return (uint32_t)(key >> 32); }

static int fx_ktable_resize(fx_rowset *s, int64_t need)
{
    uint64_t size = 1024;
    while ((double)size * 0.8 < (double)need) size *= 2;   /* load <= 0.8: 8 slots a line */
    if (s->kmask && size <= s->kmask + 1) return 0;
    uint64_t *nk = (uint64_t *)fx_zalloc(size * sizeof(uint64_t));  /* zero, untouched */
    if (nk == NULL) return FX_ENOMEM;
    if (s->kmask) {
        for (uint64_t i = 0; i <= s->kmask; i++) {
            uint64_t v = s->kslot[i];
            if (!v) continue;
            uint64_t j = (v >> 32) & (size - 1);
            while (nk[j]) j = (j + 1) & (size - 1);
            nk[j] = v;
        }
    }
    fx_zfree(s->kslot, s->kmask ? (size_t)(s->kmask + 1) * sizeof(uint64_t) : 0);
    s->kslot = nk;
    s->kmask = size - 1;
    return 0;
}

/* The slot of `tag`: its own, or the empty one where it would go. */
static inline uint64_t fx_ktable_find(const fx_rowset *s, uint32_t tag)
{
    uint64_t j = tag & s->kmask;
    for (;;) {
        uint64_t v = s->kslot[j];
        if (!v || (uint32_t)(v >> 32) == tag) return j;
        j = (j + 1) & s->kmask;
    }
}

static inline int64_t fx_kslot_head(uint64_t v) { return (int64_t)(v & 0xffffffffu) - 1; }

int fx_rowset_reserve(fx_rowset *s, int64_t extra)
{
    if (extra < 0 || s->count + extra > FX_ROWSET_MAX_ENTRIES) return -1;
    if (fx_entries_reserve(s, s->count + extra)) return FX_ENOMEM;
    return fx_ktable_resize(s, s->kcount + extra);
}

static int64_t fx_new_entry(fx_rowset *s, uint64_t key, int32_t src, int64_t row)
{
    if (fx_entries_reserve(s, s->count + 1)) return -2;
    int64_t e = s->count++;
    (void)key;
    s->src[e] = src;
    s->row[e] = row;
    return e;   /* its digest, link and flag (if allocated) are still zero: never written */
}

void fx_rowset_prefetch(const fx_rowset *s, uint64_t key)
{
    if (s->kmask) FX_PREFETCH(&s->kslot[fx_tag(key) & s->kmask]);
}

int64_t fx_rowset_head(fx_rowset *s, uint64_t key, int32_t src, int64_t row, int *inserted)
{
    *inserted = 0;
    if (fx_ktable_resize(s, s->kcount + 1)) return -2;
    uint32_t tag = fx_tag(key);
    uint64_t j = fx_ktable_find(s, tag);
    if (s->kslot[j]) return fx_kslot_head(s->kslot[j]);
    if (s->count >= FX_ROWSET_MAX_ENTRIES) return -2;
    int64_t e = fx_new_entry(s, key, src, row);
    if (e < 0) return -2;
    s->kslot[j] = (uint64_t)tag << 32 | (uint64_t)(e + 1);
    s->kcount++;
    *inserted = 1;
    return -1;
}

/* Add entry e (digest already set) to the digest table, at the end of its chain. */
static int fx_digest_insert(fx_rowset *s, int64_t e)
{
    if (fx_table_resize(&s->dslot_key, &s->dslot_head, &s->dmask, s->dcount + 1)) return FX_ENOMEM;
    uint64_t j = fx_table_find(s->dslot_key, s->dslot_head, s->dmask, s->digest[e]);
    s->next[e] = 0;
    if (s->dslot_head[j] < 0) {
        s->dslot_key[j] = s->digest[e];
        s->dslot_head[j] = e;
        s->dcount++;
        return 0;
    }
    int64_t t = s->dslot_head[j];
    while (s->next[t]) t = s->next[t] - 1;
    s->next[t] = e + 1;
    return 0;
}

int64_t fx_rowset_resolve(fx_rowset *s, const fx_tab *const *srcs, uint64_t key, int32_t src,
                          int64_t row, fx_segbuf *mine, fx_segbuf *other, fx_sha256_compress_fn fn)
{
    uint64_t slot = s->kmask ? s->kslot[fx_ktable_find(s, fx_tag(key))] : 0;
    if (!slot) return -3;   /* the caller saw a head for this key: cannot happen */
    int64_t head = fx_kslot_head(slot);
    if (fx_extras(s)) return -2;
    if (!(s->flags[head] & 1)) {
        int64_t last = head, len = 1;
        for (int64_t e = s->next[head] - 1; e >= 0; e = s->next[e] - 1) {
            int st = fx_tab_encode(srcs[s->src[e]], s->row[e], other);
            if (st != FX_OK) return st == FX_ENOMEM ? -2 : -3;
            s->compares++;
            if (fx_segs_equal(mine, other)) return e;
            last = e;
            len++;
        }
        int64_t n = fx_new_entry(s, key, src, row);
        if (n < 0) return -2;
        s->next[last] = n + 1;
        if (len + 1 <= FX_ROWSET_HOT) return -1;
        /* The chain is long: move it to the digest table. */
        int64_t chain[FX_ROWSET_HOT + 1], m = 0;
        for (int64_t e = head; e >= 0 && m < FX_ROWSET_HOT + 1; e = s->next[e] - 1) chain[m++] = e;
        for (int64_t i = 0; i < m; i++) {
            int st = fx_tab_encode(srcs[s->src[chain[i]]], s->row[chain[i]], other);
            if (st != FX_OK) return st == FX_ENOMEM ? -2 : -3;
            s->digest[chain[i]] = fx_segs_digest64(other, fn);
        }
        for (int64_t i = 0; i < m; i++) {
            if (fx_digest_insert(s, chain[i])) return -2;
        }
        s->flags[head] |= 1;
        s->hot_keys++;
        return -1;
    }
    uint64_t d = fx_segs_digest64(mine, fn);
    if (s->dmask) {
        uint64_t k = fx_table_find(s->dslot_key, s->dslot_head, s->dmask, d);
        for (int64_t e = s->dslot_head[k]; e >= 0; e = s->next[e] - 1) {
            int st = fx_tab_encode(srcs[s->src[e]], s->row[e], other);
            if (st != FX_OK) return st == FX_ENOMEM ? -2 : -3;
            s->compares++;
            if (fx_segs_equal(mine, other)) return e;
        }
    }
    int64_t n = fx_new_entry(s, key, src, row);
    if (n < 0) return -2;
    s->digest[n] = d;
    return fx_digest_insert(s, n) ? -2 : -1;
}
