/* fx_rowset: an exact, insertion-ordered set of table rows, compared by value.
 *
 * Exact dedupe does not need a digest of every byte of every row: two rows can
 * only be equal if their canonical encodings (fx_rows.c) have the same length
 * and the same bytes everywhere, so a cheap KEY (the encoding's length and a
 * few sampled windows of it) splits the rows into candidate classes, and only a
 * row whose key was seen before is compared, byte for byte, with the earlier
 * row(s) of that key.  Unique rows cost a few cache lines each; a duplicate
 * costs one memcmp of the two rows (which stops at the first difference).
 *
 * Entries are (source, row) pairs: the set keeps no copy of any row, so the
 * caller keeps every source's Arrow buffers alive for the set's lifetime.
 *
 * Distinct rows that share a key form a chain walked by comparison.  When a
 * chain grows past FX_ROWSET_HOT entries (an adversarial or very templated
 * input), the key turns "hot": its rows are found through a second table keyed
 * by a full 64-bit digest of the encoding (SHA-256, first 8 bytes), still
 * confirmed byte for byte.  No input makes the work quadratic in a chain.
 *
 * Plain C99, no Python.h.  The parallel loops live in Cython (_hash.pyx);
 * everything here that touches the set is serial, the row functions are
 * thread-safe given a per-thread fx_segbuf.
 */
#ifndef FX_ROWSET_H
#define FX_ROWSET_H

#include <stddef.h>
#include <stdint.h>
#include "fx_rows.h"

#define FX_ROWSET_HOT 16      /* chain length at which a key turns hot          */
#define FX_ROWSET_MAX_ENTRIES 2147483646   /* head entries are stored in 32 bits */

/* One source: nchunks chunks of ncols top-level column descriptors each
 * (cols[k * ncols + j] is column j of chunk k), rows numbered across chunks. */
typedef struct {
    int32_t ncols;
    int64_t nchunks;
    const int64_t *starts;   /* nchunks + 1 cumulative row starts */
    const fx_col *cols;
} fx_tab;

/* Scratch of one thread: allocate, then reuse for every row. */
int fx_segbuf_alloc(fx_segbuf *sb, int64_t cap_segs, int64_t cap_bytes);
void fx_segbuf_release(fx_segbuf *sb);

/* Encode row `row` (0 <= row < t->starts[nchunks]) into sb, replacing what it
 * held; grows sb when the row needs more.  FX_OK, FX_ROW_BAD_*, or
 * FX_ENOMEM. */
int fx_tab_encode(const fx_tab *t, int64_t row, fx_segbuf *sb);

/* The key of an encoded row: its length and FX_KEY_WINDOWS sampled windows. */
uint64_t fx_segs_key(const fx_segbuf *sb);
#define FX_KEY_GROUP 48   /* rows whose key windows are prefetched together */

/* Keys of rows[0..m) of t (status[i] = FX_ROW_* per row; returns the bad count).
 * Equal to encoding each row and calling fx_segs_key; `sbs` is FX_KEY_GROUP scratch
 * buffers, so that a group of rows is encoded, its windows prefetched together, then
 * hashed. */
int64_t fx_tab_keys(const fx_tab *t, const int64_t *rows, int64_t m, fx_segbuf *sbs,
                    uint64_t *keys, uint8_t *status);
/* 1 if the two encoded rows are byte-identical, else 0. */
int fx_segs_equal(const fx_segbuf *a, const fx_segbuf *b);
/* First 8 bytes of the SHA-256 of the encoded row. */
uint64_t fx_segs_digest64(const fx_segbuf *sb, fx_sha256_compress_fn fn);

typedef struct {
    int64_t count, cap;       /* entries */
    int32_t *src;             /* per entry: source index */
    int64_t *row;             /* per entry: row in its source */
    /* allocated when two distinct rows first share a key (NULL until then): */
    uint64_t *digest;         /* per entry: full digest (valid when in the digest table) */
    int64_t *next;            /* per entry: 1 + next entry of the same key / digest chain, 0 = end */
    uint8_t *flags;           /* per entry: 1 = head of a hot key */
    uint64_t *kslot;          /* key table: tag << 32 | (head entry + 1); 0 = empty (see
                                 FX_ROWSET_MAX_ENTRIES and fx_rowset.c) */
    uint64_t kmask; int64_t kcount;
    uint64_t *dslot_key;      /* digest table (hot keys only): digest -> first entry */
    int64_t *dslot_head;
    uint64_t dmask; int64_t dcount;
    int64_t compares, hot_keys;  /* statistics */
} fx_rowset;

void fx_rowset_init(fx_rowset *s);
void fx_rowset_free(fx_rowset *s);
/* Room for `extra` more entries: 0, FX_ENOMEM, or -1 past FX_ROWSET_MAX_ENTRIES. */
int fx_rowset_reserve(fx_rowset *s, int64_t extra);
size_t fx_rowset_nbytes(const fx_rowset *s);

/* For each i with cand[i] >= 0: compare row rows[i] of t with entry cand[i]; status[i] =
 * FX_OK if equal, 255 if not, else the bad row's FX_ROW_* (counted in the result).
 * `sbs` is 2 * FX_KEY_GROUP scratch buffers.  Read-only on the set: threads may share it. */
int64_t fx_rowset_compare(const fx_rowset *s, const fx_tab *const *srcs, const fx_tab *t,
                          const int64_t *rows, const int64_t *cand, int64_t m, fx_segbuf *sbs,
                          uint8_t *status);

/* Prefetch the key table slot of `key` (call a few rows ahead of fx_rowset_head). */
void fx_rowset_prefetch(const fx_rowset *s, uint64_t key);

/* The head entry of `key`, or -1 after inserting (src, row) as a new head
 * (then *inserted = 1).  -2 on allocation failure. */
int64_t fx_rowset_head(fx_rowset *s, uint64_t key, int32_t src, int64_t row, int *inserted);

/* A row whose key has a head that it does not equal: find an equal entry in
 * the key's chain (or the digest table if the key is hot) and return it, or
 * insert (src, row) and return -1.  `mine` holds the row's encoding; `other`
 * is scratch.  -2 on allocation failure, -3 on a bad stored row. */
int64_t fx_rowset_resolve(fx_rowset *s, const fx_tab *const *srcs, uint64_t key, int32_t src,
                          int64_t row, fx_segbuf *mine, fx_segbuf *other, fx_sha256_compress_fn fn);

#endif
