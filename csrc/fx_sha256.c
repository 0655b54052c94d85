/*
 * fx_sha256.c - SHA-256 kernel for fastaxo.  See fx_sha256.h.
 *
 * Builds as plain C99 or C11 for any target without special flags: the
 * accelerated paths enable their ISA per function (gcc/clang target
 * attributes) and are only called after a runtime CPU probe.
 */
#include "fx_sha256_int.h"

/* ------------------------------------------------------------------------- */
/* Process-global state: the selected impl and the cached CPU probe.         */
/* ------------------------------------------------------------------------- */

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_ATOMICS__)
#  include <stdatomic.h>
typedef atomic_int fx_atomic_int;
#  define FX_ATOMIC_LOAD(p) atomic_load_explicit((p), memory_order_acquire)
#  define FX_ATOMIC_STORE(p, v) atomic_store_explicit((p), (v), memory_order_release)
#elif FX_GNUC
typedef int fx_atomic_int;
#  define FX_ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#  define FX_ATOMIC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#else
/* Aligned int loads/stores are single instructions on every supported target
 * (and MSVC gives volatile acquire/release semantics on x86/x64).  The values
 * written are idempotent; the owner calls fx_sha256_select() at import. */
typedef volatile int fx_atomic_int;
#  define FX_ATOMIC_LOAD(p) (*(p))
#  define FX_ATOMIC_STORE(p, v) (*(p) = (v))
#endif

/* Selected impl id + 1 (0 = never selected). */
static fx_atomic_int fx_g_current = 0;
/* Bit mask of supported impls; 0 = not probed yet (bit 0, portable, is
 * always set once probed). */
static fx_atomic_int fx_g_probe = 0;

/* ------------------------------------------------------------------------- */
/* Portable implementation                                                    */
/* ------------------------------------------------------------------------- */

#define FX_ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
#define FX_BS0(x) (FX_ROTR(x, 2) ^ FX_ROTR(x, 13) ^ FX_ROTR(x, 22))
#define FX_BS1(x) (FX_ROTR(x, 6) ^ FX_ROTR(x, 11) ^ FX_ROTR(x, 25))
#define FX_SS0(x) (FX_ROTR(x, 7) ^ FX_ROTR(x, 18) ^ ((x) >> 3))
#define FX_SS1(x) (FX_ROTR(x, 17) ^ FX_ROTR(x, 19) ^ ((x) >> 10))
#define FX_CH(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define FX_MAJ(x, y, z) (((x) & (y)) | ((z) & ((x) | (y))))

/* One round; the caller rotates the variable names instead of moving data.
 * Maj(a,b,c) = b ^ ((a ^ b) & (b ^ c)), and this round's a ^ b is the next
 * round's b ^ c (carried in xbc). */
#define FX_RND(a, b, c, d, e, f, g, h, k, w)                          \
    do {                                                              \
        uint32_t t1_ = (h) + FX_BS1(e) + FX_CH(e, f, g) + (k) + (w);  \
        uint32_t xab_ = (a) ^ (b);                                    \
        uint32_t t2_ = FX_BS0(a) + ((b) ^ (xab_ & xbc));              \
        xbc = xab_;                                                   \
        (d) += t1_;                                                   \
        (h) = t1_ + t2_;                                              \
    } while (0)

/* Message expansion in a 16-word ring: W[i] for i >= 16. */
#define FX_WX(i) \
    (W[(i) & 15] += FX_SS1(W[((i) - 2) & 15]) + W[((i) - 7) & 15] + FX_SS0(W[((i) - 15) & 15]))

/* 16 rounds starting at round j (a multiple of 16), with the given W source. */
#define FX_RND16(WSRC)                                                             \
    do {                                                                           \
        FX_RND(a, b, c, d, e, f, g, h, Kj[0], WSRC(0));                            \
        FX_RND(h, a, b, c, d, e, f, g, Kj[1], WSRC(1));                            \
        FX_RND(g, h, a, b, c, d, e, f, Kj[2], WSRC(2));                            \
        FX_RND(f, g, h, a, b, c, d, e, Kj[3], WSRC(3));                            \
        FX_RND(e, f, g, h, a, b, c, d, Kj[4], WSRC(4));                            \
        FX_RND(d, e, f, g, h, a, b, c, Kj[5], WSRC(5));                            \
        FX_RND(c, d, e, f, g, h, a, b, Kj[6], WSRC(6));                            \
        FX_RND(b, c, d, e, f, g, h, a, Kj[7], WSRC(7));                            \
        FX_RND(a, b, c, d, e, f, g, h, Kj[8], WSRC(8));                            \
        FX_RND(h, a, b, c, d, e, f, g, Kj[9], WSRC(9));                            \
        FX_RND(g, h, a, b, c, d, e, f, Kj[10], WSRC(10));                          \
        FX_RND(f, g, h, a, b, c, d, e, Kj[11], WSRC(11));                          \
        FX_RND(e, f, g, h, a, b, c, d, Kj[12], WSRC(12));                          \
        FX_RND(d, e, f, g, h, a, b, c, Kj[13], WSRC(13));                          \
        FX_RND(c, d, e, f, g, h, a, b, Kj[14], WSRC(14));                          \
        FX_RND(b, c, d, e, f, g, h, a, Kj[15], WSRC(15));                          \
    } while (0)

#define FX_W_LOAD(i) (W[i] = fx_load_be32(p + 4 * (i)))
#define FX_W_EXP(i) FX_WX(i)

void fx_sha256_compress_portable(uint32_t state[8], const uint8_t *p, size_t nblocks)
{
    uint32_t a, b, c, d, e, f, g, h, xbc;
    uint32_t W[16];

    for (; nblocks; nblocks--, p += 64) {
        const uint32_t *Kj = fx_sha256_K;
        int j;

        a = state[0]; b = state[1]; c = state[2]; d = state[3];
        e = state[4]; f = state[5]; g = state[6]; h = state[7];
        xbc = b ^ c;

        FX_RND16(FX_W_LOAD);
        for (j = 1; j < 4; j++) {
            Kj += 16;
            FX_RND16(FX_W_EXP);
        }

        state[0] += a; state[1] += b; state[2] += c; state[3] += d;
        state[4] += e; state[5] += f; state[6] += g; state[7] += h;
    }
}

/* ------------------------------------------------------------------------- */
/* Impl registry                                                              */
/* ------------------------------------------------------------------------- */

static const char *const fx_impl_names[FX_SHA256_NIMPL] = { "portable", "sha-ni", "armv8-crypto" };

static int fx_valid_impl(int impl)
{
    return impl >= 0 && impl < FX_SHA256_NIMPL;
}

fx_sha256_compress_fn fx_compiled_fn(int impl)
{
    switch (impl) {
    case FX_SHA256_PORTABLE:
        return fx_sha256_compress_portable;
#if FX_HAVE_SHANI
    case FX_SHA256_SHANI:
        return fx_sha256_compress_shani;
#endif
#if FX_HAVE_ARMV8
    case FX_SHA256_ARMV8:
        return fx_sha256_compress_armv8;
#endif
    default:
        return NULL;
    }
}

int fx_sha256_impl_compiled(int impl)
{
    return fx_compiled_fn(impl) != NULL;
}

static int fx_probe_mask(void)
{
    int m = FX_ATOMIC_LOAD(&fx_g_probe);
    if (m == 0) {
        m = 1 << FX_SHA256_PORTABLE;
#if FX_HAVE_SHANI
        if (fx_probe_shani())
            m |= 1 << FX_SHA256_SHANI;
#endif
#if FX_HAVE_ARMV8
        if (fx_probe_armv8())
            m |= 1 << FX_SHA256_ARMV8;
#endif
        FX_ATOMIC_STORE(&fx_g_probe, m); /* idempotent: every thread computes the same mask */
    }
    return m;
}

int fx_sha256_impl_supported(int impl)
{
    if (!fx_valid_impl(impl) || !fx_sha256_impl_compiled(impl))
        return 0;
    return (fx_probe_mask() >> impl) & 1;
}

const char *fx_sha256_impl_name(int impl)
{
    if (impl == FX_SHA256_AUTO)
        return "auto";
    if (!fx_valid_impl(impl))
        return NULL;
    return fx_impl_names[impl];
}

static int fx_streq_nocase(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca >= 'A' && ca <= 'Z')
            ca = (unsigned char)(ca + ('a' - 'A'));
        if (cb >= 'A' && cb <= 'Z')
            cb = (unsigned char)(cb + ('a' - 'A'));
        if (ca != cb)
            return 0;
        if (!ca)
            return 1;
    }
}

int fx_sha256_impl_parse(const char *name, int *impl)
{
    static const struct { const char *name; int id; } aliases[] = {
        { "auto", FX_SHA256_AUTO },
        { "portable", FX_SHA256_PORTABLE },
        { "sha-ni", FX_SHA256_SHANI },
        { "shani", FX_SHA256_SHANI },
        { "sha_ni", FX_SHA256_SHANI },
        { "armv8-crypto", FX_SHA256_ARMV8 },
        { "armv8_crypto", FX_SHA256_ARMV8 },
        { "armv8", FX_SHA256_ARMV8 },
    };
    size_t i;
    if (!name)
        return FX_EINVAL;
    for (i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (fx_streq_nocase(name, aliases[i].name)) {
            if (impl)
                *impl = aliases[i].id;
            return FX_OK;
        }
    }
    return FX_EINVAL;
}

int fx_sha256_impl_from_name(const char *name)
{
    int id;
    if (fx_sha256_impl_parse(name, &id) != FX_OK)
        return -1;
    return id;
}

fx_sha256_compress_fn fx_sha256_compress_for(int impl)
{
    if (impl == FX_SHA256_AUTO)
        impl = fx_sha256_current();
    if (!fx_sha256_impl_supported(impl))
        return NULL;
    return fx_compiled_fn(impl);
}

/* ------------------------------------------------------------------------- */
/* Hashing API                                                                */
/* ------------------------------------------------------------------------- */

static fx_sha256_compress_fn fx_current_fn(void)
{
    return fx_compiled_fn(fx_sha256_current());
}

void fx_sha256_init_with(fx_sha256_ctx *ctx, fx_sha256_compress_fn fn)
{
    memcpy(ctx->h, fx_sha256_IV, sizeof(ctx->h));
    ctx->nbytes = 0;
    ctx->buflen = 0;
    ctx->compress = fn ? fn : fx_current_fn();
}

void fx_sha256_init(fx_sha256_ctx *ctx)
{
    fx_sha256_init_with(ctx, NULL);
}

void fx_sha256_update(fx_sha256_ctx *ctx, const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    size_t n;

    if (!len)
        return;
    ctx->nbytes += (uint64_t)len;

    if (ctx->buflen) {
        size_t take = 64 - ctx->buflen;
        if (take > len)
            take = len;
        memcpy(ctx->buf + ctx->buflen, p, take);
        ctx->buflen += take;
        p += take;
        len -= take;
        if (ctx->buflen < 64)
            return;
        ctx->compress(ctx->h, ctx->buf, 1);
        ctx->buflen = 0;
    }

    n = len >> 6;
    if (n) {
        ctx->compress(ctx->h, p, n);
        p += n << 6;
        len &= 63;
    }
    if (len) {
        memcpy(ctx->buf, p, len);
        ctx->buflen = len;
    }
}

void fx_sha256_final(fx_sha256_ctx *ctx, uint8_t out[32])
{
    uint8_t blk[128];
    size_t nb;
#if FX_HAVE_SHANI
    if (ctx->compress == fx_sha256_compress_shani) {
        fx_sha256_finish_shani(ctx->h, ctx->buf, ctx->buflen, ctx->nbytes, out);
        return;
    }
#endif
#if FX_HAVE_ARMV8
    if (ctx->compress == fx_sha256_compress_armv8) {
        fx_sha256_finish_armv8(ctx->h, ctx->buf, ctx->buflen, ctx->nbytes, out);
        return;
    }
#endif
    nb = fx_sha256_pad(blk, ctx->buf, ctx->buflen, ctx->nbytes);
    ctx->compress(ctx->h, blk, nb);
    fx_sha256_output(ctx->h, out);
}

void fx_sha256_oneshot(fx_sha256_compress_fn fn, const void *data, size_t len, uint8_t out[32])
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t h[8];
    uint8_t blk[128];
    size_t full = len >> 6, nb;

    if (!fn)
        fn = fx_current_fn();
#if FX_HAVE_SHANI
    if (fn == fx_sha256_compress_shani) {
        fx_sha256_finish_shani(NULL, p, len, (uint64_t)len, out);
        return;
    }
#endif
#if FX_HAVE_ARMV8
    if (fn == fx_sha256_compress_armv8) {
        fx_sha256_finish_armv8(NULL, p, len, (uint64_t)len, out);
        return;
    }
#endif
    memcpy(h, fx_sha256_IV, sizeof(h));
    if (full)
        fn(h, p, full);
    nb = fx_sha256_pad(blk, p + (full << 6), len & 63, (uint64_t)len);
    fn(h, blk, nb);
    fx_sha256_output(h, out);
}

/* ------------------------------------------------------------------------- */
/* Self-test                                                                  */
/* ------------------------------------------------------------------------- */

static const struct {
    const char *msg;
    uint8_t md[32];
} fx_kat_text[] = {
    { "",
      { 0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
        0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55 } },
    { "abc",
      { 0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
        0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad } },
    { "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
      { 0x24, 0x8d, 0x6a, 0x61, 0xd2, 0x06, 0x38, 0xb8, 0xe5, 0xc0, 0x26, 0x93, 0x0c, 0x3e, 0x60, 0x39,
        0xa3, 0x3c, 0xe4, 0x59, 0x64, 0xff, 0x21, 0x67, 0xf6, 0xec, 0xed, 0xd4, 0x19, 0xdb, 0x06, 0xc1 } },
    { "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
      { 0xcf, 0x5b, 0x16, 0xa7, 0x78, 0xaf, 0x83, 0x80, 0x03, 0x6c, 0xe5, 0x9e, 0x7b, 0x04, 0x92, 0x37,
        0x0b, 0x24, 0x9b, 0x11, 0xe8, 0xf0, 0x7a, 0x51, 0xaf, 0xac, 0x45, 0x03, 0x7a, 0xfe, 0xe9, 0xd1 } },
};

/* Messages of the given length with byte i = ((i*167 + 13) ^ (i >> 5)) & 0xff;
 * digests from Python hashlib. */
static const struct {
    size_t len;
    uint8_t md[32];
} fx_kat_pattern[] = {
    { 55, {0x75,0x6e,0x84,0x58,0x22,0x93,0xd5,0x82,0xbc,0x8e,0x32,0xf4,0x32,0x87,0xa3,0x4a,0x4f,0x33,0x22,0xb3,0x4f,0x8b,0x8c,0x0e,0xe7,0xf8,0xf1,0x0d,0x10,0x94,0x67,0x76} },
    { 56, {0x95,0xff,0xcb,0x5d,0x43,0x50,0xd1,0x02,0x52,0xb3,0xa1,0xef,0x2b,0x88,0x2c,0xe8,0x46,0x55,0xcb,0xc9,0x99,0x7a,0xa0,0xa2,0xee,0x42,0x7f,0x5e,0xd6,0x53,0x19,0xb1} },
    { 63, {0x13,0x6b,0x13,0x08,0x0a,0x96,0x71,0x8f,0x82,0xd3,0xd3,0x56,0xf8,0xfc,0xbe,0x73,0x64,0xc7,0xae,0x1f,0x0e,0x5c,0x13,0x9b,0x57,0x9b,0x28,0x8d,0xf4,0x0b,0x32,0x85} },
    { 64, {0x64,0x70,0xf2,0xc9,0x01,0x0c,0x37,0xeb,0xcb,0x56,0x57,0x99,0x20,0xe9,0x47,0x51,0x59,0x92,0x13,0xb6,0xaa,0xb3,0x99,0xac,0xd9,0x05,0xd2,0xe7,0x29,0xf8,0x94,0x1c} },
    { 65, {0x58,0x9e,0xc4,0xda,0xb1,0xa8,0x5f,0xad,0x11,0x39,0x60,0x07,0x85,0x9d,0x13,0x4a,0x35,0xb4,0x3f,0x2e,0xcd,0x3f,0xcd,0x3c,0xd9,0x8f,0x02,0xde,0xc0,0x4e,0xee,0xc6} },
    { 119, {0x24,0x76,0xf4,0x5f,0xa7,0x78,0xef,0x08,0x20,0xdd,0x8a,0xae,0x8b,0x45,0xa9,0x91,0x02,0x6f,0x2f,0xe8,0xef,0x08,0xe1,0x93,0xf7,0x17,0xea,0x1f,0x5d,0xf5,0x51,0x9d} },
    { 120, {0x39,0x9b,0x06,0x00,0x2c,0x87,0xcd,0xda,0xc2,0xbf,0x2f,0x64,0x74,0xcc,0x9c,0x35,0xb4,0xdb,0x2a,0xd4,0x17,0x99,0x49,0x34,0x9d,0xf5,0x9c,0x88,0xb7,0xc8,0xfc,0x2d} },
    { 128, {0xb9,0xb7,0xef,0xde,0xc6,0xfd,0x15,0xba,0xb8,0x54,0x67,0xe4,0x74,0x94,0xdb,0x1a,0x8f,0x78,0x04,0x7f,0xe6,0x43,0xd4,0x83,0xe6,0xe0,0x34,0x77,0x69,0xee,0x47,0xb2} },
    { 1000, {0x90,0x48,0xde,0x86,0x7a,0x1e,0x28,0xd7,0xaa,0x93,0x5b,0x18,0xe4,0xeb,0x8d,0x68,0x6f,0x64,0x5c,0x76,0x58,0xa1,0x08,0x1a,0xc6,0x44,0x7a,0x11,0x51,0xee,0x6d,0x53} },
    { 4177, {0xb6,0xf9,0xe7,0xdb,0x8a,0x78,0x67,0xad,0x68,0x97,0x2d,0xe8,0x40,0xe1,0x1c,0xf9,0xf1,0xa6,0x3e,0x8f,0x3a,0xdc,0x29,0xaf,0x61,0xee,0xf6,0x8b,0xec,0x13,0x28,0x7b} },
};

#define FX_ST_MAXLEN 4177

/* Streaming hash with an awkward chunking (1, 2, 3, ... bytes, wrapping). */
static void fx_st_stream(fx_sha256_compress_fn fn, const uint8_t *msg, size_t len, uint8_t out[32])
{
    fx_sha256_ctx ctx;
    size_t off = 0, step = 1;
    fx_sha256_init_with(&ctx, fn);
    while (off < len) {
        size_t n = len - off < step ? len - off : step;
        fx_sha256_update(&ctx, msg + off, n);
        off += n;
        step = step * 7 % 150 + 1;
    }
    fx_sha256_final(&ctx, out);
}

static int fx_selftest_fn(fx_sha256_compress_fn fn, int crosscheck)
{
    /* +1: also hash from an odd address */
    uint8_t msg[FX_ST_MAXLEN + 1];
    uint8_t md[32], ref[32];
    size_t i, k;
    int bad = 0;

    for (i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)(((i * 167u + 13u) ^ (i >> 5)) & 0xffu);

    for (k = 0; k < sizeof(fx_kat_text) / sizeof(fx_kat_text[0]); k++) {
        const uint8_t *m = (const uint8_t *)fx_kat_text[k].msg;
        size_t len = strlen(fx_kat_text[k].msg);
        fx_sha256_oneshot(fn, m, len, md);
        bad |= memcmp(md, fx_kat_text[k].md, 32) != 0;
        fx_st_stream(fn, m, len, md);
        bad |= memcmp(md, fx_kat_text[k].md, 32) != 0;
    }
    for (k = 0; k < sizeof(fx_kat_pattern) / sizeof(fx_kat_pattern[0]); k++) {
        size_t len = fx_kat_pattern[k].len;
        fx_sha256_oneshot(fn, msg, len, md);
        bad |= memcmp(md, fx_kat_pattern[k].md, 32) != 0;
        fx_st_stream(fn, msg, len, md);
        bad |= memcmp(md, fx_kat_pattern[k].md, 32) != 0;
    }

    if (crosscheck) {
        fx_sha256_compress_fn port = fx_sha256_compress_portable;
        static const size_t big[] = { 191, 192, 193, 255, 256, 511, 1024, 2047, 4095, 4096, FX_ST_MAXLEN };
        uint32_t s1[8], s2[8];

        /* every length 0..130, at an aligned and an odd address */
        for (i = 0; i <= 130; i++) {
            for (k = 0; k < 2; k++) {
                fx_sha256_oneshot(fn, msg + k, i, md);
                fx_sha256_oneshot(port, msg + k, i, ref);
                bad |= memcmp(md, ref, 32) != 0;
            }
        }
        for (k = 0; k < sizeof(big) / sizeof(big[0]); k++) {
            fx_sha256_oneshot(fn, msg + (k & 1), big[k] - (k & 1), md);
            fx_sha256_oneshot(port, msg + (k & 1), big[k] - (k & 1), ref);
            bad |= memcmp(md, ref, 32) != 0;
        }
        /* raw compress with a non-IV state and various block counts */
        for (k = 0; k <= 9; k++) {
            size_t nb = k == 9 ? FX_ST_MAXLEN / 64 : k;
            for (i = 0; i < 8; i++)
                s1[i] = s2[i] = fx_sha256_K[(7 * i + k) & 63] ^ (uint32_t)(0x9e3779b9u * (i + 1));
            fn(s1, msg + (k & 1), nb);
            port(s2, msg + (k & 1), nb);
            bad |= memcmp(s1, s2, sizeof(s1)) != 0;
        }
    }
    return bad ? FX_ESELFTEST : FX_OK;
}

/* The lane kernels of impl (fx_sha256_many_*) against portable oneshot:
 * lengths 0..130 and some up to FX_ST_MAXLEN, in one piece and in two
 * segments. */
static int fx_selftest_many(int impl)
{
    enum { N = 160 };
    uint8_t msg[FX_ST_MAXLEN + 1];
    const char *ptrs[N];
    int64_t lens[N], seg_start[N + 1];
    fx_seg segs[2 * N];
    uint8_t out[2][N][32], ref[32];
    int i, bad = 0;

    for (i = 0; i < (int)sizeof(msg); i++)
        msg[i] = (uint8_t)(((i * 167u + 13u) ^ ((unsigned)i >> 5)) & 0xffu);
    for (i = 0; i < N; i++) {
        size_t len = i <= 130 ? (size_t)i : (size_t)(i * 977) % FX_ST_MAXLEN;
        ptrs[i] = (const char *)msg + (i & 1);
        lens[i] = (int64_t)len;
        seg_start[i] = 2 * i;
        segs[2 * i].ptr = msg + (i & 1);
        segs[2 * i].len = len / 3;
        segs[2 * i + 1].ptr = msg + (i & 1) + len / 3;
        segs[2 * i + 1].len = len - len / 3;
    }
    seg_start[N] = 2 * N;
    fx_sha256_many_ptrs(impl, ptrs, lens, N, out[0][0]);
    fx_sha256_many_segs(impl, segs, seg_start, N, out[1][0]);
    for (i = 0; i < N; i++) {
        fx_sha256_oneshot(fx_sha256_compress_portable, ptrs[i], (size_t)lens[i], ref);
        bad |= memcmp(out[0][i], ref, 32) != 0;
        bad |= memcmp(out[1][i], ref, 32) != 0;
    }
    return bad ? FX_ESELFTEST : FX_OK;
}

int fx_sha256_selftest(int impl)
{
    int rc;
    if (impl == FX_SHA256_AUTO)
        impl = fx_sha256_current();
    if (!fx_valid_impl(impl))
        return FX_EINVAL;
    if (!fx_sha256_impl_supported(impl))
        return FX_EUNSUPPORTED;
    rc = fx_selftest_fn(fx_compiled_fn(impl), impl != FX_SHA256_PORTABLE);
    if (rc == FX_OK && impl != FX_SHA256_PORTABLE)
        rc = fx_selftest_many(impl);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Selection                                                                  */
/* ------------------------------------------------------------------------- */

int fx_sha256_select(int impl)
{
    if (impl == FX_SHA256_AUTO) {
        static const int order[] = { FX_SHA256_SHANI, FX_SHA256_ARMV8 };
        size_t i;
        int rc;
        for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
            if (fx_sha256_impl_supported(order[i]) && fx_sha256_selftest(order[i]) == FX_OK) {
                FX_ATOMIC_STORE(&fx_g_current, order[i] + 1);
                return FX_OK;
            }
        }
        rc = fx_sha256_selftest(FX_SHA256_PORTABLE);
        FX_ATOMIC_STORE(&fx_g_current, FX_SHA256_PORTABLE + 1);
        return rc;
    }
    if (!fx_valid_impl(impl))
        return FX_EINVAL;
    if (!fx_sha256_impl_supported(impl))
        return FX_EUNSUPPORTED;
    if (fx_sha256_selftest(impl) != FX_OK)
        return FX_ESELFTEST;
    FX_ATOMIC_STORE(&fx_g_current, impl + 1);
    return FX_OK;
}

int fx_sha256_current(void)
{
    int cur = FX_ATOMIC_LOAD(&fx_g_current);
    if (cur == 0) {
        (void)fx_sha256_select(FX_SHA256_AUTO);
        cur = FX_ATOMIC_LOAD(&fx_g_current);
    }
    return cur - 1;
}
