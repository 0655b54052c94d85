/* fx_sha256_many.c - many messages per call (fx_sha256_many_*): lane
 * kernels where the impl has them, else one message at a time. */
#include "fx_sha256_int.h"

/* ------------------------------------------------------------------------- */
/* Many messages: fx_sha256_many_*                                            */
/* ------------------------------------------------------------------------- */

/* Scheme.  With lane kernels (SHA-NI, ARMv8) the messages are hashed two at
 * a time: each of the FX_LANES lanes holds one message in progress (its
 * state, a cursor into its segments, and its next ready blocks).  Ready
 * blocks come straight from the input when the lane's current segment has
 * >= 64 bytes left (all its whole blocks at once, no copy); otherwise the
 * next block is gathered across segments into the lane's buffer.  What is
 * left at the end, when it lies in one segment (always, for one-piece
 * messages), is the lane's tail: fewer than 64 bytes, not yet padded.
 *
 * A step: if every lane is at its tail, the final kernel pads the tails,
 * runs their 1 or 2 blocks and writes the digests (the common case for short
 * messages: one call per pair, the state starting from the IV constants).
 * Otherwise lanes at their tail get it padded into their buffer, and the
 * lane kernel runs as many blocks as every lane has ready.  A lane that
 * finishes takes the next message; when none is left it retires, and the
 * last busy lane goes on alone with the single-lane compress, so a huge
 * message among small ones runs at two-lane speed while there is company and
 * at single-lane speed after.  Everything lives on the stack; nothing
 * outside the segments is read.  Without lane kernels (portable), the
 * messages are hashed one by one. */

enum { FX_LANES = 2 }; /* lanes per kernel call (see fx_sha256_x2_shani) */

/* Where the messages of one call come from (message i, 0 <= i < n). */
enum { FX_SRC_SEGS, FX_SRC_OFF32, FX_SRC_OFF64, FX_SRC_FIXED, FX_SRC_PTRS };
typedef struct {
    int kind;
    const uint8_t *data;       /* OFF32, OFF64, FIXED */
    int64_t width;             /* OFF32, OFF64: bytes per offset unit; FIXED: row bytes */
    const int32_t *off32;      /* OFF32 */
    const int64_t *off64;      /* OFF64 */
    const fx_seg *segs;        /* SEGS */
    const int64_t *seg_start;  /* SEGS */
    const char *const *ptrs;   /* PTRS */
    const int64_t *lens;       /* PTRS */
} fx_msgs;

/* Read position in a message: p[0..left) is the unread part of the current
 * segment, which starts at base; [seg, seg_end) are the segments not yet
 * started. */
typedef struct {
    const uint8_t *p, *base;
    size_t left;
    const fx_seg *seg, *seg_end;
} fx_cursor;

/* Cursor at the start of message i. */
static inline void fx_msgs_get(const fx_msgs *m, int64_t i, fx_cursor *c)
{
    c->seg = c->seg_end = NULL;
    switch (m->kind) {
    case FX_SRC_SEGS:
        c->p = NULL;
        c->left = 0;
        c->seg = m->segs + m->seg_start[i];
        c->seg_end = m->segs + m->seg_start[i + 1];
        break;
    case FX_SRC_OFF32:
        c->left = (size_t)((int64_t)m->off32[i + 1] - m->off32[i]) * (size_t)m->width;
        /* (no arithmetic on data when empty: it may be NULL then) */
        c->p = c->left ? m->data + (size_t)m->off32[i] * (size_t)m->width : NULL;
        break;
    case FX_SRC_OFF64:
        c->left = (size_t)(m->off64[i + 1] - m->off64[i]) * (size_t)m->width;
        c->p = c->left ? m->data + (size_t)m->off64[i] * (size_t)m->width : NULL;
        break;
    case FX_SRC_FIXED:
        c->left = (size_t)m->width;
        c->p = c->left ? m->data + (size_t)i * (size_t)m->width : NULL;
        break;
    default: /* FX_SRC_PTRS */
        c->left = (size_t)m->lens[i];
        c->p = (const uint8_t *)m->ptrs[i];
        break;
    }
    c->base = c->p;
}

/* One message at a time (impls without a lane kernel, or a single message). */
static void fx_many_serial(fx_sha256_compress_fn fn, const fx_msgs *m, int64_t n, uint8_t *out)
{
    static const uint8_t empty[1] = { 0 };
    int64_t i;
    for (i = 0; i < n; i++, out += 32) {
        fx_cursor c;
        fx_sha256_ctx ctx;
        fx_msgs_get(m, i, &c);
        if (c.seg != c.seg_end && !c.left && c.seg + 1 == c.seg_end) {
            c.p = c.seg->ptr; /* a single segment */
            c.left = c.seg->len;
            c.seg++;
        }
        if (c.seg == c.seg_end) {
            fx_sha256_oneshot(fn, c.left ? c.p : empty, c.left, out);
            continue;
        }
        fx_sha256_init_with(&ctx, fn);
        fx_sha256_update(&ctx, c.p, c.left);
        for (; c.seg != c.seg_end; c.seg++)
            fx_sha256_update(&ctx, c.seg->ptr, c.seg->len);
        fx_sha256_final(&ctx, out);
    }
}

/* What an impl with lanes provides. */
typedef struct {
    fx_sha256_compress_fn one; /* one lane */
    fx_lanes_fn lanes;         /* FX_LANES lanes */
    fx_final_fn final;         /* FX_LANES lanes, all at their tails */
    fx_tail_fn tail;           /* pad one tail into a buffer */
} fx_lanes_impl;

/* A lane: one message in progress.  It has either nblk > 0 ready blocks at
 * blk, or (tail set) just its tail tl left, unpadded, still in the input. */
typedef struct {
    uint32_t h[8];       /* chaining state, A..H */
    const uint8_t *blk;  /* the next nblk ready blocks: straight from the */
    size_t nblk;         /* input, or in buf */
    int last;            /* those blocks end the message (padding included) */
    int tail;            /* nblk == 0 and the rest of the message is tl */
    fx_tail_in tl;
    fx_cursor cur;       /* the rest of the message */
    uint64_t nbytes;     /* message bytes taken into ready blocks (or tl) so far */
    int64_t idx;         /* message number: the digest goes to out + 32 * idx */
    uint8_t buf[128];    /* a block gathered across segments, or the padded tail */
} fx_lane;

/* Find the lane's next ready blocks or its tail (called when it has none).
 * The state is set to the IV on the first call, except when the whole
 * message is its tail: the final kernel then starts from the IV constants
 * (and the tail padding sets it otherwise, see fx_many_lanes). */
static FX_INLINE void fx_lane_refill(fx_lane *L)
{
    fx_cursor *c = &L->cur;
    size_t n = 0;

    while (!c->left && c->seg != c->seg_end) { /* skip to a non-empty segment */
        c->p = c->base = c->seg->ptr;
        c->left = c->seg->len;
        c->seg++;
    }
    if (!L->nbytes && !(c->left < 64 && c->seg == c->seg_end))
        memcpy(L->h, fx_sha256_IV, sizeof(L->h));
    if (c->left >= 64) { /* whole blocks straight from the segment */
        size_t nb = c->left >> 6;
        L->blk = c->p;
        L->nblk = nb;
        c->p += nb << 6;
        c->left &= 63;
        L->nbytes += (uint64_t)nb << 6;
        return;
    }
    if (c->seg == c->seg_end) { /* the tail, in one piece: padded later */
        L->nbytes += c->left;
        L->tl.p = c->p;
        L->tl.t = c->left;
        L->tl.back16 = c->left && (size_t)(c->p - c->base) + c->left >= 16;
        L->tl.total = L->nbytes;
        L->tail = 1;
        return;
    }
    /* Gather up to 64 bytes across segments. */
    L->blk = L->buf;
    for (;;) {
        size_t take = 64 - n < c->left ? 64 - n : c->left;
        if (take) {
            memcpy(L->buf + n, c->p, take);
            n += take;
            c->p += take;
            c->left -= take;
        }
        if (n == 64 || c->seg == c->seg_end)
            break;
        c->p = c->base = c->seg->ptr;
        c->left = c->seg->len;
        c->seg++;
    }
    L->nbytes += n;
    if (n == 64) {
        L->nblk = 1;
    } else { /* end of message (the last segments were short): pad */
        L->nblk = fx_sha256_pad(L->buf, L->buf, n, L->nbytes);
        L->last = 1;
    }
}

/* Start message i in lane L. */
static void fx_lane_start(fx_lane *L, const fx_msgs *m, int64_t i)
{
    fx_msgs_get(m, i, &L->cur);
    L->nblk = 0;
    L->nbytes = 0;
    L->last = 0;
    L->tail = 0;
    L->idx = i;
    fx_lane_refill(L);
}

static void fx_many_lanes(const fx_lanes_impl *im, const fx_msgs *m, int64_t n, uint8_t *out)
{
    fx_lane lane[FX_LANES];
    fx_lane *busy[FX_LANES]; /* the lanes with a message, busy[0..nbusy) */
    uint32_t *st[FX_LANES];
    const uint32_t *cst[FX_LANES];
    const uint8_t *src[FX_LANES];
    const fx_tail_in *tl[FX_LANES];
    uint8_t *dst[FX_LANES];
    int nbusy = 0, l, final;
    int64_t next = 0;

    for (; nbusy < FX_LANES && next < n; nbusy++, next++) {
        busy[nbusy] = &lane[nbusy];
        fx_lane_start(busy[nbusy], m, next);
    }
    while (nbusy) {
        /* Every lane at its tail: the final kernel finishes them all. */
        final = nbusy == FX_LANES;
        for (l = 0; l < nbusy; l++)
            final &= busy[l]->tail;
        if (final) {
            for (l = 0; l < FX_LANES; l++) {
                fx_lane *L = busy[l];
                cst[l] = L->tl.total == L->tl.t ? NULL : L->h; /* NULL: the IV */
                tl[l] = &L->tl;
                dst[l] = out + 32 * L->idx;
            }
            im->final(cst, tl, dst);
        } else {
            /* Otherwise pad the tails into the lane buffers, and compress
             * as many blocks as every lane has ready. */
            size_t nb = (size_t)-1;
            for (l = 0; l < nbusy; l++) {
                fx_lane *L = busy[l];
                if (L->tail) {
                    if (L->tl.total == L->tl.t)
                        memcpy(L->h, fx_sha256_IV, sizeof(L->h));
                    L->blk = L->buf;
                    L->nblk = im->tail(L->buf, &L->tl);
                    L->last = 1;
                    L->tail = 0;
                }
                if (L->nblk < nb)
                    nb = L->nblk;
            }
            if (nbusy == FX_LANES) {
                for (l = 0; l < FX_LANES; l++) {
                    st[l] = busy[l]->h;
                    src[l] = busy[l]->blk;
                }
                im->lanes(st, src, nb);
            } else { /* FX_LANES == 2: one lane left, alone */
                im->one(busy[0]->h, busy[0]->blk, nb);
            }
            for (l = 0; l < nbusy; l++) {
                busy[l]->blk += nb << 6;
                busy[l]->nblk -= nb;
            }
        }
        /* Lanes out of ready blocks move on; finished lanes take the next
         * message or retire. */
        for (l = 0; l < nbusy;) {
            fx_lane *L = busy[l];
            if (!final) {
                if (L->nblk || L->tail) {
                    l++;
                    continue;
                }
                if (!L->last) {
                    fx_lane_refill(L);
                    l++;
                    continue;
                }
                fx_sha256_output(L->h, out + 32 * L->idx);
            }
            if (next < n) {
                fx_lane_start(L, m, next++);
                l++;
            } else {
                busy[l] = busy[--nbusy]; /* retire; busy[l] is looked at again */
            }
        }
    }
}

/* The lane functions of impl; 0 if it has none. */
static int fx_lanes_for(int impl, fx_lanes_impl *im)
{
    switch (impl) {
#if FX_HAVE_SHANI
    case FX_SHA256_SHANI:
        im->one = fx_sha256_compress_shani;
        im->lanes = fx_sha256_x2_shani;
        im->final = fx_sha256_x2_final_shani;
        im->tail = fx_sha256_tail_shani;
        return 1;
#endif
#if FX_HAVE_ARMV8
    case FX_SHA256_ARMV8:
        im->one = fx_sha256_compress_armv8;
        im->lanes = fx_sha256_x2_armv8;
        im->final = fx_sha256_x2_final_armv8;
        im->tail = fx_sha256_tail_armv8;
        return 1;
#endif
    default:
        (void)im;
        return 0;
    }
}

static void fx_many(int impl, const fx_msgs *m, int64_t n, uint8_t *out)
{
    fx_lanes_impl im;
    if (n <= 0)
        return;
    if (impl == FX_SHA256_AUTO || !fx_sha256_impl_supported(impl))
        impl = fx_sha256_current();
    if (n > 1 && fx_lanes_for(impl, &im))
        fx_many_lanes(&im, m, n, out);
    else
        fx_many_serial(fx_compiled_fn(impl), m, n, out);
}

void fx_sha256_many_segs(int impl, const fx_seg *segs, const int64_t *seg_start, int64_t n, uint8_t *out)
{
    fx_msgs m;
    memset(&m, 0, sizeof(m));
    m.kind = FX_SRC_SEGS;
    m.segs = segs;
    m.seg_start = seg_start;
    fx_many(impl, &m, n, out);
}

void fx_sha256_many_offsets32(int impl, const uint8_t *data, const int32_t *off, int64_t width, int64_t n,
                              uint8_t *out)
{
    fx_msgs m;
    memset(&m, 0, sizeof(m));
    m.kind = FX_SRC_OFF32;
    m.data = data;
    m.off32 = off;
    m.width = width;
    fx_many(impl, &m, n, out);
}

void fx_sha256_many_offsets64(int impl, const uint8_t *data, const int64_t *off, int64_t width, int64_t n,
                              uint8_t *out)
{
    fx_msgs m;
    memset(&m, 0, sizeof(m));
    m.kind = FX_SRC_OFF64;
    m.data = data;
    m.off64 = off;
    m.width = width;
    fx_many(impl, &m, n, out);
}

void fx_sha256_many_fixed(int impl, const uint8_t *data, int64_t row_bytes, int64_t n, uint8_t *out)
{
    fx_msgs m;
    memset(&m, 0, sizeof(m));
    m.kind = FX_SRC_FIXED;
    m.data = data;
    m.width = row_bytes;
    fx_many(impl, &m, n, out);
}

void fx_sha256_many_ptrs(int impl, const char *const *ptrs, const int64_t *lens, int64_t n, uint8_t *out)
{
    fx_msgs m;
    memset(&m, 0, sizeof(m));
    m.kind = FX_SRC_PTRS;
    m.ptrs = ptrs;
    m.lens = lens;
    fx_many(impl, &m, n, out);
}
