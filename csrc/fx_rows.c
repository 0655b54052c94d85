/* Canonical row encoding for tables.  The byte string that is hashed for a row
 * is the concatenation over the selected columns of enc(column, row):
 *
 *   enc(null value)            = 0x00
 *   enc(non-null value)        = 0x01 || payload
 *   payload FIXED(w)           = the w little-endian value bytes
 *   payload BOOL               = 0x00 or 0x01
 *   payload BINARY             = u64le(byte length) || bytes
 *   payload LIST / FIXED_LIST  = u64le(count) || 0x00 || raw child bytes     when the child is
 *                                                    FIXED and none of these elements is null
 *                              = u64le(count) || 0x01 || enc(child, j)...  otherwise
 *   payload STRUCT             = enc(field, row) for each field in order
 *   DICT                       = enc of the dictionary value (so a dictionary column hashes
 *                                like its decoded column)
 *
 * Given the column types, every encoding is prefix-free, so distinct rows give distinct
 * byte strings: ("ab", "c") and ("a", "bc") differ in their length prefixes.  The
 * list fast/slow choice depends only on the row's own values, never on the buffer
 * layout, so equal rows hash equally across chunks, slices and files.
 */
#include <string.h>
#include "fx_rows.h"

int64_t fx_check_offsets32(const int32_t *o, int64_t n, int64_t limit)
{
    if (n >= 0 && o[0] < 0) return 0;
    for (int64_t i = 0; i < n; i++) {
        if (o[i + 1] < o[i] || o[i + 1] > limit) return i;
    }
    return -1;
}

int64_t fx_check_offsets64(const int64_t *o, int64_t n, int64_t limit)
{
    if (n >= 0 && o[0] < 0) return 0;
    for (int64_t i = 0; i < n; i++) {
        if (o[i + 1] < o[i] || o[i + 1] > limit) return i;
    }
    return -1;
}

static inline int fx_is_valid(const fx_col *c, int64_t i)
{
    if (c->validity == NULL) return 1;
    int64_t p = i + c->offset;
    return (c->validity[p >> 3] >> (p & 7)) & 1;
}

/* Where encoded bytes go: a streaming SHA-256 context, or a segment list. */
typedef struct {
    fx_sha256_ctx *ctx;   /* streaming mode when non-NULL */
    fx_segbuf *sb;        /* segment mode otherwise       */
} fx_emit;

#define FX_COPY_BELOW 64  /* spans shorter than one block are copied and coalesced */

static void fx_put(fx_emit *e, const uint8_t *p, size_t n)
{
    if (e->ctx != NULL) {
        fx_sha256_update(e->ctx, p, n);
        return;
    }
    fx_segbuf *sb = e->sb;
    if (sb->full || n == 0) return;
    if (n < FX_COPY_BELOW) {
        if (sb->nbytes + (int64_t)n > sb->cap_bytes) { sb->full = 1; return; }
        uint8_t *dst = sb->bytes + sb->nbytes;
        memcpy(dst, p, n);
        sb->nbytes += (int64_t)n;
        fx_seg *last = sb->nsegs > sb->row_first_seg ? &sb->segs[sb->nsegs - 1] : NULL;
        if (last != NULL && last->ptr + last->len == dst) {  /* contiguous in scratch */
            last->len += n;
            return;
        }
        p = dst;
    }
    if (sb->nsegs >= sb->cap_segs) { sb->full = 1; return; }
    sb->segs[sb->nsegs].ptr = p;
    sb->segs[sb->nsegs].len = n;
    sb->nsegs++;
}

static inline void fx_put_u64(fx_emit *e, uint64_t v)
{
    uint8_t b[8];
    for (int k = 0; k < 8; k++) b[k] = (uint8_t)(v >> (8 * k));
    fx_put(e, b, 8);
}

static inline void fx_put_byte(fx_emit *e, uint8_t v)
{
    fx_put(e, &v, 1);
}

static inline int64_t fx_read_offset(const fx_col *c, int64_t p)
{
    if (c->kind == FX_COL_BINARY32 || c->kind == FX_COL_LIST32)
        return ((const int32_t *)c->offsets)[p];
    return ((const int64_t *)c->offsets)[p];
}

static int fx_encode(fx_emit *ctx, const fx_col *c, int64_t i);

/* Encode elements [a, b) of child `ch` as a list payload (count already written). */
static int fx_encode_elems(fx_emit *ctx, const fx_col *ch, int64_t a, int64_t b)
{
    if (a < 0 || b < a || b > ch->length) return FX_EOFFSETS;
    fx_put_u64(ctx, (uint64_t)(b - a));
    if (ch->kind == FX_COL_FIXED) {
        int any_null = 0;
        if (ch->validity != NULL) {
            for (int64_t j = a; j < b; j++) {
                if (!fx_is_valid(ch, j)) { any_null = 1; break; }
            }
        }
        if (!any_null) {
            fx_put_byte(ctx, 0x00);
            fx_put(ctx, ch->data + (a + ch->offset) * (int64_t)ch->width,
                   (size_t)((b - a) * (int64_t)ch->width));
            return FX_OK;
        }
    }
    fx_put_byte(ctx, 0x01);
    for (int64_t j = a; j < b; j++) {
        int st = fx_encode(ctx, ch, j);
        if (st != FX_OK) return st;
    }
    return FX_OK;
}

static int fx_encode(fx_emit *ctx, const fx_col *c, int64_t i)
{
    if (c->kind == FX_COL_NULL || !fx_is_valid(c, i)) {
        fx_put_byte(ctx, 0x00);
        return FX_OK;
    }
    if (c->kind != FX_COL_DICT) fx_put_byte(ctx, 0x01);
    int64_t p = i + c->offset;
    switch (c->kind) {
    case FX_COL_FIXED:
        fx_put(ctx, c->data + p * (int64_t)c->width, (size_t)c->width);
        return FX_OK;
    case FX_COL_BOOL:
        fx_put_byte(ctx, (uint8_t)((c->data[p >> 3] >> (p & 7)) & 1));
        return FX_OK;
    case FX_COL_BINARY32:
    case FX_COL_BINARY64: {
        int64_t a = fx_read_offset(c, p), b = fx_read_offset(c, p + 1);
        if (a < 0 || b < a || b > c->data_len) return FX_EOFFSETS;
        fx_put_u64(ctx, (uint64_t)(b - a));
        fx_put(ctx, c->data + a, (size_t)(b - a));
        return FX_OK;
    }
    case FX_COL_LIST32:
    case FX_COL_LIST64:
        return fx_encode_elems(ctx, &c->children[0], fx_read_offset(c, p),
                               fx_read_offset(c, p + 1));
    case FX_COL_FIXED_LIST:
        return fx_encode_elems(ctx, &c->children[0], p * (int64_t)c->width,
                               (p + 1) * (int64_t)c->width);
    case FX_COL_STRUCT:
        for (int32_t k = 0; k < c->nchildren; k++) {
            int st = fx_encode(ctx, &c->children[k], i);
            if (st != FX_OK) return st;
        }
        return FX_OK;
    case FX_COL_DICT: {
        int64_t idx;
        switch (c->width) {
        case 1: idx = ((const int8_t *)c->data)[p]; break;
        case 2: idx = ((const int16_t *)c->data)[p]; break;
        case 4: idx = ((const int32_t *)c->data)[p]; break;
        default: idx = ((const int64_t *)c->data)[p]; break;
        }
        if (idx < 0 || idx >= c->children[0].length) return FX_EDICT_INDEX;
        return fx_encode(ctx, &c->children[0], idx);
    }
    default:
        return FX_EOFFSETS;
    }
}

int fx_hash_table_row(fx_sha256_compress_fn fn, const fx_col *cols, int32_t ncols,
                      int64_t row, uint8_t out[32])
{
    fx_sha256_ctx ctx;
    fx_emit e = {&ctx, NULL};
    fx_sha256_init_with(&ctx, fn);
    for (int32_t k = 0; k < ncols; k++) {
        int st = fx_encode(&e, &cols[k], row);
        if (st != FX_OK) {
            memset(out, 0, 32);
            return st;
        }
    }
    fx_sha256_final(&ctx, out);
    return FX_OK;
}

/* ------------------------------------------------------------------ flat rows, fast */

/* A row of "flat" columns (no nulls anywhere: fixed-width values narrower than a copied
 * span, strings/binary, lists of fixed-width values) has the same encoding as above with
 * no choice left to make: per column 0x01, then the payload. fx_encode_flat writes exactly
 * the segments fx_put would (headers and spans shorter than FX_COPY_BELOW copied into the
 * scratch and merged with the run before them, longer spans referenced in place), without
 * the per-byte calls: the encoding of every row is on the path of keys, comparisons and
 * the multi-lane SHA-256, where the generic walk cost more than the memory it describes. */
static int fx_col_flat(const fx_col *c)
{
    if (c->validity != NULL) return 0;
    switch (c->kind) {
    case FX_COL_FIXED:
        return c->width > 0 && c->width < FX_COPY_BELOW;
    case FX_COL_BINARY32:
    case FX_COL_BINARY64:
        return 1;
    case FX_COL_LIST32:
    case FX_COL_LIST64:
        return c->nchildren == 1 && c->children[0].kind == FX_COL_FIXED && c->children[0].validity == NULL &&
               c->children[0].width > 0;
    default:
        return 0;
    }
}

static inline void fx_le64(uint8_t *p, uint64_t v)
{
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)(v >> (8 * k));
}

/* FX_OK, FX_EOFFSETS, or FX_EFULL when the scratch may not hold the row (the
 * caller then takes the generic path, which accounts exactly). Appends to sb like
 * fx_encode_row_segs. */
static int fx_encode_flat(const fx_col *cols, int32_t ncols, int64_t row, fx_segbuf *sb)
{
    /* at most two segments and 1 + 9 + FX_COPY_BELOW - 1 scratch bytes per column */
    if (sb->nsegs + 2 * (int64_t)ncols + 1 > sb->cap_segs ||
        sb->nbytes + (int64_t)ncols * (10 + FX_COPY_BELOW) > sb->cap_bytes)
        return FX_EFULL;
    fx_seg *segs = sb->segs;
    int64_t ns = sb->nsegs;
    uint8_t *w = sb->bytes + sb->nbytes, *run = w;
    for (int32_t k = 0; k < ncols; k++) {
        const fx_col *c = &cols[k];
        int64_t p = row + c->offset;
        const uint8_t *span;
        int64_t len;
        *w++ = 0x01;
        if (c->kind == FX_COL_FIXED) {
            memcpy(w, c->data + p * (int64_t)c->width, (size_t)c->width);
            w += c->width;
            continue;
        }
        int64_t a = fx_read_offset(c, p), b = fx_read_offset(c, p + 1);
        if (c->kind == FX_COL_BINARY32 || c->kind == FX_COL_BINARY64) {
            if (a < 0 || b < a || b > c->data_len) return FX_EOFFSETS;
            fx_le64(w, (uint64_t)(b - a));
            w += 8;
            span = c->data + a;
            len = b - a;
        } else {
            const fx_col *ch = &c->children[0];
            if (a < 0 || b < a || b > ch->length) return FX_EOFFSETS;
            fx_le64(w, (uint64_t)(b - a));
            w[8] = 0x00;
            w += 9;
            span = ch->data + (a + ch->offset) * (int64_t)ch->width;
            len = (b - a) * (int64_t)ch->width;
        }
        if (len < FX_COPY_BELOW) {
            if (len) memcpy(w, span, (size_t)len);
            w += len;
        } else {
            segs[ns].ptr = run;            /* the scratch run so far (never empty: a header) */
            segs[ns].len = (size_t)(w - run);
            segs[ns + 1].ptr = span;
            segs[ns + 1].len = (size_t)len;
            ns += 2;
            run = w;
        }
    }
    if (w > run) {
        segs[ns].ptr = run;
        segs[ns].len = (size_t)(w - run);
        ns++;
    }
    sb->row_first_seg = sb->nsegs;
    sb->nsegs = ns;
    sb->nbytes = w - sb->bytes;
    return FX_OK;
}

int fx_encode_row_segs(const fx_col *cols, int32_t ncols, int64_t row, fx_segbuf *sb)
{
    int64_t nsegs0 = sb->nsegs, nbytes0 = sb->nbytes;
    int32_t k;
    for (k = 0; k < ncols && fx_col_flat(&cols[k]); k++) {}
    if (k == ncols) {
        int st = fx_encode_flat(cols, ncols, row, sb);
        if (st != FX_EFULL) return st;
    }
    fx_emit e = {NULL, sb};
    sb->row_first_seg = nsegs0;
    sb->full = 0;
    for (int32_t k = 0; k < ncols; k++) {
        int st = fx_encode(&e, &cols[k], row);
        if (st != FX_OK || sb->full) {
            sb->nsegs = nsegs0;   /* drop this row's partial segments */
            sb->nbytes = nbytes0;
            sb->full = 0;
            return st != FX_OK ? st : FX_EFULL;
        }
    }
    return FX_OK;
}

static void fx_flush_rows(int impl, fx_segbuf *sb, int64_t *starts, int64_t k, uint8_t *out)
{
    if (k > 0) fx_sha256_many_segs(impl, sb->segs, starts, k, out);
    sb->nsegs = 0;
    sb->nbytes = 0;
    starts[0] = 0;
}

int64_t fx_hash_table_rows(int impl, const fx_col *cols, int32_t ncols, int64_t first,
                           int64_t m, fx_segbuf *sb, int64_t *starts, uint8_t *out)
{
    int64_t nbad = 0, pend = first, k = 0;   /* rows [pend, pend + k) are in sb */
    sb->nsegs = 0;
    sb->nbytes = 0;
    starts[0] = 0;
    for (int64_t r = first; r < first + m; r++) {
        int st = fx_encode_row_segs(cols, ncols, r, sb);
        if (st == FX_EFULL && k > 0) {
            fx_flush_rows(impl, sb, starts, k, out + (pend - first) * 32);
            pend = r;
            k = 0;
            st = fx_encode_row_segs(cols, ncols, r, sb);
        }
        if (st == FX_OK) {
            starts[++k] = sb->nsegs;
            continue;
        }
        fx_flush_rows(impl, sb, starts, k, out + (pend - first) * 32);
        uint8_t *o = out + (r - first) * 32;
        if (st == FX_EFULL) {
            st = fx_hash_table_row(fx_sha256_compress_for(impl), cols, ncols, r, o);
        } else {
            memset(o, 0, 32);
        }
        nbad += st != FX_OK;
        pend = r + 1;
        k = 0;
    }
    fx_flush_rows(impl, sb, starts, k, out + (pend - first) * 32);
    return nbad;
}
