/* fx_rows: SHA-256 of rows laid out the Arrow way, and of table rows in
 * fastaxo's canonical, unambiguous encoding.  Plain C99, no Python.h.
 *
 * Every function hashes ONE row; the caller (Cython, prange over rows) owns
 * the parallel loop, so that threads and the GIL stay in one place.
 */
#ifndef FX_ROWS_H
#define FX_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "fx_status.h"
#include "fx_sha256.h"

/* Column kinds of the canonical encoding (see ARCHITECTURE.md, "row encoding"). */
enum {
    FX_COL_NULL = 0,      /* Arrow null type: every value is null                       */
    FX_COL_FIXED = 1,     /* fixed-width value of `width` bytes (ints, floats, temporal, */
                          /* decimal, fixed_size_binary)                                 */
    FX_COL_BOOL = 2,      /* bit-packed boolean                                          */
    FX_COL_BINARY32 = 3,  /* string / binary, int32 offsets                              */
    FX_COL_BINARY64 = 4,  /* large_string / large_binary, int64 offsets                  */
    FX_COL_LIST32 = 5,    /* list<child>, int32 offsets                                  */
    FX_COL_LIST64 = 6,    /* large_list<child>, int64 offsets                            */
    FX_COL_FIXED_LIST = 7,/* fixed_size_list<child, width>                               */
    FX_COL_STRUCT = 8,    /* struct<children...>                                         */
    FX_COL_DICT = 9       /* dictionary: `width`-byte signed indices into child 0        */
};

/* A row's status, written per row by the parallel loop (fx_status.h): FX_OK, FX_EOFFSETS
 * (offsets decrease or point outside the values), FX_EDICT_INDEX (a dictionary index out of
 * range); the row set adds FX_ENOMEM (its scratch could not grow). */

typedef struct fx_col {
    int32_t kind;
    int32_t width;            /* FIXED: bytes; FIXED_LIST: list size; DICT: index bytes */
    int64_t offset;           /* the array's own slice offset (physical = logical + offset) */
    int64_t length;           /* logical length of the array (for bounds checks)  */
    const uint8_t *validity;  /* Arrow validity bitmap or NULL (no nulls)          */
    const void *offsets;      /* BINARY / LIST offsets buffer (not pre-shifted)    */
    const uint8_t *data;      /* values (FIXED/BOOL/BINARY) or indices (DICT)      */
    int64_t data_len;         /* bytes available in `data` (BINARY bounds checks)  */
    int32_t nchildren;
    const struct fx_col *children;  /* contiguous array of nchildren descriptors    */
} fx_col;

/* Index of the first row whose offsets are not 0 <= o[i] <= o[i+1] <= limit, or -1. */
int64_t fx_check_offsets32(const int32_t *offsets, int64_t n, int64_t limit);
int64_t fx_check_offsets64(const int64_t *offsets, int64_t n, int64_t limit);

/* Canonical digest of row `row` over `ncols` top-level columns.  Returns FX_ROW_*. */
int fx_hash_table_row(fx_sha256_compress_fn fn, const fx_col *cols, int32_t ncols,
                      int64_t row, uint8_t out[32]);

/* Rows as segment lists, for the multi-lane SHA-256 (fx_sha256_many_segs).
 *
 * A segment buffer is caller-owned scratch (one per thread, allocated before the
 * parallel loop): small pieces (headers, short values) are copied into `bytes` and
 * coalesced; long value spans are referenced in place, never copied.  Capacities are
 * fixed: when a row does not fit, fx_encode_row_segs returns FX_EFULL and leaves
 * the buffer as it was before that row, so the caller can flush and retry, or hash that
 * row with fx_hash_table_row.
 */
typedef struct {
    fx_seg *segs;
    int64_t nsegs, cap_segs;
    uint8_t *bytes;
    int64_t nbytes, cap_bytes;
    int64_t row_first_seg;   /* segments before this index belong to earlier rows */
    int full;
} fx_segbuf;

int fx_encode_row_segs(const fx_col *cols, int32_t ncols, int64_t row, fx_segbuf *sb);

/* Digests of rows [first, first + m) into out (32 * m bytes), through the multi-lane
 * kernel of `impl`: rows are encoded as segments into `sb` (scratch of this thread) and
 * hashed in batches; a row too big for the scratch is streamed alone.  `starts` is
 * scratch of at least m + 1 int64.  Returns the number of bad rows (their digests are
 * zero; fx_hash_table_row on them tells the status). */
int64_t fx_hash_table_rows(int impl, const fx_col *cols, int32_t ncols, int64_t first,
                           int64_t m, fx_segbuf *sb, int64_t *starts, uint8_t *out);

#endif
