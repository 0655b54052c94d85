/*
 * fx_sha256.c - SHA-256 kernel for fastaxo.  See fx_sha256.h.
 *
 * Builds as plain C99 or C11 for any target without special flags: the
 * accelerated paths enable their ISA per function (gcc/clang target
 * attributes) and are only called after a runtime CPU probe.
 */
#include "fx_sha256.h"
#include "fx_compat.h"

#include <string.h>

/* ------------------------------------------------------------------------- */
/* Which accelerated paths can this compiler/target build?                   */
/* ------------------------------------------------------------------------- */

#define FX_HAVE_SHANI 0
#define FX_HAVE_ARMV8 0

#if !defined(FX_PORTABLE) && (defined(__x86_64__) || defined(_M_X64) || defined(_M_AMD64))
#  if defined(__clang__)
     /* clang-cl (MSVC mode) only declares the SHA intrinsics in <immintrin.h>
      * without -msha from clang 19 on. */
#    if (!defined(_MSC_VER) && __clang_major__ >= 4) || defined(__SHA__) || __clang_major__ >= 19
#      undef FX_HAVE_SHANI
#      define FX_HAVE_SHANI 1
#      define FX_SHANI_TARGET __attribute__((target("sha,sse4.1,ssse3")))
#    endif
#  elif defined(__GNUC__)
#    if __GNUC__ >= 5
#      undef FX_HAVE_SHANI
#      define FX_HAVE_SHANI 1
#      define FX_SHANI_TARGET __attribute__((target("sha,sse4.1,ssse3")))
#    endif
#  elif defined(_MSC_VER)
#    if _MSC_VER >= 1900
#      undef FX_HAVE_SHANI
#      define FX_HAVE_SHANI 1
#      define FX_SHANI_TARGET
#    endif
#  endif
#endif

#if !defined(FX_PORTABLE) && defined(__aarch64__) && !defined(_MSC_VER) && defined(__ARM_NEON) && \
    (defined(__LITTLE_ENDIAN__) || (defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__))
#  if defined(__ARM_FEATURE_SHA2) || (defined(__ARM_FEATURE_CRYPTO) && !defined(__clang__))
     /* The build already targets the SHA2 extension. */
#    undef FX_HAVE_ARMV8
#    define FX_HAVE_ARMV8 1
#    define FX_ARMV8_TARGET
#    define FX_ARMV8_BASELINE 1
#  elif defined(__clang__)
     /* arm_neon.h declares the SHA2 intrinsics with target("sha2") from
      * LLVM 16 on; older clangs gate them on __ARM_FEATURE_SHA2. */
#    if !defined(__apple_build_version__) && __clang_major__ >= 16
#      undef FX_HAVE_ARMV8
#      define FX_HAVE_ARMV8 1
#      define FX_ARMV8_TARGET __attribute__((target("sha2")))
#    endif
#  elif defined(__GNUC__) && __GNUC__ >= 9
#    undef FX_HAVE_ARMV8
#    define FX_HAVE_ARMV8 1
#    define FX_ARMV8_TARGET __attribute__((target("+crypto")))
#  endif
#endif

#if FX_HAVE_SHANI
#  if defined(_MSC_VER) && !defined(__clang__)
#    include <intrin.h>
#  else
#    include <cpuid.h>
#  endif
#  include <immintrin.h>
#endif

#if FX_HAVE_ARMV8
#  include <arm_neon.h>
#  if defined(__linux__) && !defined(FX_ARMV8_BASELINE)
#    include <sys/auxv.h>
#    ifndef AT_HWCAP
#      define AT_HWCAP 16
#    endif
#    ifndef HWCAP_SHA2
#      define HWCAP_SHA2 (1UL << 6)
#    endif
#  endif
#endif

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
/* Constants and helpers                                                      */
/* ------------------------------------------------------------------------- */

static const uint32_t fx_sha256_K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

static const uint32_t fx_sha256_IV[8] = {
    0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au, 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u,
};

/* Big-endian load/store: a bswap + unaligned 4-byte access where the byte
 * order is known to be little-endian, portable shifts otherwise. */
#if FX_GNUC && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define FX_BSWAP32(x) __builtin_bswap32(x)
#elif FX_MSVC
#  include <stdlib.h>
#  define FX_BSWAP32(x) _byteswap_ulong(x) /* every MSVC target is little-endian */
#endif

/* Force inlining of small helpers into the SIMD functions (gcc otherwise
 * keeps some out of line, with their vectors going through memory). */
#define FX_INLINE FX_FORCE_INLINE

static inline uint32_t fx_load_be32(const uint8_t *p)
{
#ifdef FX_BSWAP32
    uint32_t v;
    memcpy(&v, p, 4);
    return FX_BSWAP32(v);
#else
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
#endif
}

static inline void fx_store_be32(uint8_t *p, uint32_t v)
{
#ifdef FX_BSWAP32
    v = FX_BSWAP32(v);
    memcpy(p, &v, 4);
#else
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
#endif
}

static inline void fx_store_be64(uint8_t *p, uint64_t v)
{
    fx_store_be32(p, (uint32_t)(v >> 32));
    fx_store_be32(p + 4, (uint32_t)v);
}

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

static void fx_sha256_compress_portable(uint32_t state[8], const uint8_t *p, size_t nblocks)
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
/* Lane kernels: several messages at once (see fx_sha256_many_*)              */
/* ------------------------------------------------------------------------- */

/* One message is latency-bound: each SHA round instruction needs the result
 * of the previous one, so the SHA unit idles most of the time.  The lane
 * kernels (fx_lanes_fn, fx_final_fn) run the rounds of independent messages
 * ("lanes") in one instruction stream to fill those gaps.  Their code is the
 * single-lane block written once per lane: FXL_* macros are per-lane steps
 * (first argument = lane number, pasted onto the variable names) and
 * FX_EACHn(STEP, args) emits STEP for lanes 0..n-1, so every step is issued
 * for all lanes before the next one.  (FX_EXPAND makes MSVC's traditional
 * preprocessor split __VA_ARGS__ into separate arguments.) */
#define FX_EXPAND(x) x
#define FX_EACH1(STEP, ...) FX_EXPAND(STEP(0, __VA_ARGS__))
#define FX_EACH2(STEP, ...) FX_EXPAND(STEP(0, __VA_ARGS__)) FX_EXPAND(STEP(1, __VA_ARGS__))

/* The end of a message: its last t < 64 bytes, at p, of total bytes in all.
 * back16: the 16 bytes ending at p + t are readable (they may start before
 * p, in the same buffer). */
typedef struct {
    const uint8_t *p;
    size_t t;
    int back16;
    uint64_t total;
} fx_tail_in;

/* A lane kernel: for each lane l, the state st[l] (A..H order) absorbs
 * nblocks consecutive 64-byte blocks starting at src[l]. */
typedef void (*fx_lanes_fn)(uint32_t *const st[], const uint8_t *const src[], size_t nblocks);
/* A final lane kernel: for each lane l, the state st[l] (A..H; NULL: the
 * IV) absorbs the padded tail *tl[l] (1 or 2 blocks, padded by the kernel)
 * and the digest goes to out[l]; st[l] is left as is. */
typedef void (*fx_final_fn)(const uint32_t *const st[], const fx_tail_in *const tl[], uint8_t *const out[]);
/* A tail padder: writes the padded tail tl to blk (1 or 2 blocks, the count
 * is returned) with whole 16-byte vector stores, so that the 16-byte loads
 * of the kernels forward from them without a stall. */
typedef size_t (*fx_tail_fn)(uint8_t blk[128], const fx_tail_in *tl);

/* ------------------------------------------------------------------------- */
/* Shared by the SIMD finish paths (little-endian targets only)              */
/* ------------------------------------------------------------------------- */

#if FX_HAVE_SHANI || FX_HAVE_ARMV8

/* Byte-shuffle masks (pshufb / tbl: an index >= 16 yields 0).
 * fx_simd_shr + k (0 <= k <= 16) moves byte k to lane 0 and zeroes the top
 * k lanes; fx_simd_pad + 16 - r (-16 <= r <= 16) is 0x80 at lane r if
 * 0 <= r < 16, and all zeros otherwise. */
static const uint8_t fx_simd_shr[32] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
};
static const uint8_t fx_simd_pad[48] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* For chunk c (bytes 16c .. 16c+15) of a padded tail of t < 64 message
 * bytes at p, when the 16 bytes ending at p + t are readable: the chunk
 * holds r = t - 16c message bytes (all 16 if r >= 16, none if r <= 0).
 * Its bytes are the 16 at *src shuffled by fx_simd_shr + *shr, ORed with
 * fx_simd_pad + *pad (the 0x80 when it falls in this chunk).  Branch-free:
 * a full chunk loads itself, a partial or empty one the last 16 bytes. */
static FX_INLINE void fx_tail_chunk(const uint8_t *p, size_t t, int c, const uint8_t **src, size_t *shr, size_t *pad)
{
    ptrdiff_t r = (ptrdiff_t)t - 16 * c;
    ptrdiff_t at = 16 * c < (ptrdiff_t)t - 16 ? 16 * c : (ptrdiff_t)t - 16;
    *src = p + at;
    *shr = (size_t)(16 - (r < 0 ? 0 : r > 16 ? 16 : r));
    *pad = (size_t)(16 - (r < -16 ? -16 : r > 16 ? 16 : r));
}

/* Bytes p[0..n) (n < 16) as a little-endian 128-bit value lo:hi with zeros
 * above; reads only p[0..n). */
static FX_INLINE void fx_load_short(const uint8_t *p, size_t n, uint64_t *lo_out, uint64_t *hi_out)
{
    uint64_t lo = 0, hi = 0;
    if (n >= 8) {
        memcpy(&lo, p, 8);
        if (n > 8) {
            memcpy(&hi, p + n - 8, 8);
            hi >>= 8 * (16 - n);
        }
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + n - 4, 4);
        lo = (uint64_t)a | (((uint64_t)b >> (8 * (8 - n))) << 32);
    } else if (n) {
        lo = (uint64_t)p[0] | ((uint64_t)p[n >> 1] << (8 * (n >> 1))) | ((uint64_t)p[n - 1] << (8 * (n - 1)));
    }
    *lo_out = lo;
    *hi_out = hi;
}

#endif

/* ------------------------------------------------------------------------- */
/* x86-64 SHA-NI                                                              */
/* ------------------------------------------------------------------------- */

#if FX_HAVE_SHANI

static void fx_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
#if defined(_MSC_VER) && !defined(__clang__)
    int v[4];
    __cpuidex(v, (int)leaf, (int)sub);
    r[0] = (uint32_t)v[0]; r[1] = (uint32_t)v[1]; r[2] = (uint32_t)v[2]; r[3] = (uint32_t)v[3];
#else
    unsigned int a, b, c, d;
    __cpuid_count(leaf, sub, a, b, c, d);
    r[0] = a; r[1] = b; r[2] = c; r[3] = d;
#endif
}

static int fx_probe_shani(void)
{
    uint32_t r[4];
    fx_cpuid(0, 0, r);
    if (r[0] < 7)
        return 0;
    fx_cpuid(1, 0, r);
    if (!(r[2] & (1u << 9)) /* SSSE3 */ || !(r[2] & (1u << 19)) /* SSE4.1 */)
        return 0;
    fx_cpuid(7, 0, r);
    return (r[1] & (1u << 29)) ? 1 : 0; /* SHA */
}

/* One group of four rounds (two sha256rnds2), with the message schedule for
 * later groups interleaved.  Message vector i holds W[4i..4i+3]; four vectors
 * rotate through M0..M3 (vector i lives in M[i % 4]). */
#define FX_SHANI_ROUNDS(Mc, kidx)                                          \
    MSG = _mm_add_epi32((Mc), _mm_loadu_si128((const __m128i *)(fx_sha256_K + 4 * (kidx)))); \
    S1 = _mm_sha256rnds2_epu32(S1, S0, MSG)
#define FX_SHANI_ROUNDS_END()                                              \
    MSG = _mm_shuffle_epi32(MSG, 0x0E);                                    \
    S0 = _mm_sha256rnds2_epu32(S0, S1, MSG)
/* Finish vector i+1 (slot Mn): += W[t-7] (from Mc:Mp), then sigma1 terms. */
#define FX_SHANI_MSG2(Mn, Mc, Mp)                                          \
    TMP = _mm_alignr_epi8((Mc), (Mp), 4);                                  \
    Mn = _mm_add_epi32((Mn), TMP);                                         \
    Mn = _mm_sha256msg2_epu32((Mn), (Mc))
/* Start vector i+3 in slot Mp: W[t-16] + sigma0(W[t-15]). */
#define FX_SHANI_MSG1(Mp, Mc) Mp = _mm_sha256msg1_epu32((Mp), (Mc))

/* One 64-byte block: M0..M3 hold the message words (already byte-swapped);
 * S0/S1 hold the state in ABEF/CDGH order.  Clobbers M0..M3, MSG, TMP. */
#define FX_SHANI_BLOCK()                                                                               \
    do {                                                                                               \
        __m128i ABEF_SAVE_ = S0, CDGH_SAVE_ = S1;                                                      \
        /* groups 0..2 */                                                                              \
        FX_SHANI_ROUNDS(M0, 0); FX_SHANI_ROUNDS_END();                                                 \
        FX_SHANI_ROUNDS(M1, 1); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M0, M1);                          \
        FX_SHANI_ROUNDS(M2, 2); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M1, M2);                          \
        /* groups 3..12: msg2 finishes vector i+1, msg1 starts vector i+3 */                           \
        FX_SHANI_ROUNDS(M3, 3); FX_SHANI_MSG2(M0, M3, M2); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M2, M3);  \
        FX_SHANI_ROUNDS(M0, 4); FX_SHANI_MSG2(M1, M0, M3); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M3, M0);  \
        FX_SHANI_ROUNDS(M1, 5); FX_SHANI_MSG2(M2, M1, M0); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M0, M1);  \
        FX_SHANI_ROUNDS(M2, 6); FX_SHANI_MSG2(M3, M2, M1); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M1, M2);  \
        FX_SHANI_ROUNDS(M3, 7); FX_SHANI_MSG2(M0, M3, M2); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M2, M3);  \
        FX_SHANI_ROUNDS(M0, 8); FX_SHANI_MSG2(M1, M0, M3); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M3, M0);  \
        FX_SHANI_ROUNDS(M1, 9); FX_SHANI_MSG2(M2, M1, M0); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M0, M1);  \
        FX_SHANI_ROUNDS(M2, 10); FX_SHANI_MSG2(M3, M2, M1); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M1, M2); \
        FX_SHANI_ROUNDS(M3, 11); FX_SHANI_MSG2(M0, M3, M2); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M2, M3); \
        FX_SHANI_ROUNDS(M0, 12); FX_SHANI_MSG2(M1, M0, M3); FX_SHANI_ROUNDS_END(); FX_SHANI_MSG1(M3, M0); \
        /* groups 13, 14: only msg2 left (vectors 14, 15); group 15 */                                 \
        FX_SHANI_ROUNDS(M1, 13); FX_SHANI_MSG2(M2, M1, M0); FX_SHANI_ROUNDS_END();                     \
        FX_SHANI_ROUNDS(M2, 14); FX_SHANI_MSG2(M3, M2, M1); FX_SHANI_ROUNDS_END();                     \
        FX_SHANI_ROUNDS(M3, 15); FX_SHANI_ROUNDS_END();                                                \
        S0 = _mm_add_epi32(S0, ABEF_SAVE_);                                                            \
        S1 = _mm_add_epi32(S1, CDGH_SAVE_);                                                            \
    } while (0)

#define FX_SHANI_LOAD(M, src) M = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(src)), BSWAP)
#define FX_SHANI_BSWAP_MASK() _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL)

FX_SHANI_TARGET
static void fx_sha256_compress_shani(uint32_t state[8], const uint8_t *p, size_t nblocks)
{
    __m128i S0, S1, MSG, TMP, M0, M1, M2, M3;
    const __m128i BSWAP = FX_SHANI_BSWAP_MASK();

    if (!nblocks)
        return;

    /* state (A..H) -> ABEF / CDGH lane order used by sha256rnds2 */
    TMP = _mm_loadu_si128((const __m128i *)(const void *)&state[0]);
    S1 = _mm_loadu_si128((const __m128i *)(const void *)&state[4]);
    TMP = _mm_shuffle_epi32(TMP, 0xB1);    /* CDAB */
    S1 = _mm_shuffle_epi32(S1, 0x1B);      /* EFGH */
    S0 = _mm_alignr_epi8(TMP, S1, 8);      /* ABEF */
    S1 = _mm_blend_epi16(S1, TMP, 0xF0);   /* CDGH */

    do {
        FX_SHANI_LOAD(M0, p + 0);
        FX_SHANI_LOAD(M1, p + 16);
        FX_SHANI_LOAD(M2, p + 32);
        FX_SHANI_LOAD(M3, p + 48);
        FX_SHANI_BLOCK();
        p += 64;
    } while (--nblocks);

    /* ABEF / CDGH -> state (A..H) */
    TMP = _mm_shuffle_epi32(S0, 0x1B);     /* FEBA */
    S1 = _mm_shuffle_epi32(S1, 0xB1);      /* DCHG */
    S0 = _mm_blend_epi16(TMP, S1, 0xF0);   /* DCBA */
    S1 = _mm_alignr_epi8(S1, TMP, 8);      /* HGFE */
    _mm_storeu_si128((__m128i *)(void *)&state[0], S0);
    _mm_storeu_si128((__m128i *)(void *)&state[4], S1);
}

/* The IV in ABEF / CDGH lane order (lane 0 first). */
static const uint32_t fx_shani_iv[8] = {
    0x9b05688cu, 0x510e527fu, 0xbb67ae85u, 0x6a09e667u, /* F E B A */
    0x5be0cd19u, 0x1f83d9abu, 0xa54ff53au, 0x3c6ef372u, /* H G D C */
};

/* The 64-bit big-endian bit length of a total-byte message in the last 8
 * bytes of a 16-byte chunk, zeros before. */
FX_SHANI_TARGET
static FX_INLINE __m128i fx_shani_lenchunk(uint64_t total)
{
    const __m128i rev = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, -128, -128, -128, -128, -128, -128, -128, -128);
    return _mm_shuffle_epi8(_mm_set_epi64x(0, (long long)(total << 3)), rev);
}

/* The padded tail of a message, in message byte order: the last t < 64
 * bytes, at p, then 0x80, zeros, and the bit length of the total-byte
 * message.  Returns the number of blocks, 1 or 2: the first block is the
 * 16-byte chunks T[0..3]; a second one (t >= 56) is three zero chunks and
 * fx_shani_lenchunk(total).  The chunks are built in registers straight
 * from p (no stack buffer, so no store-forwarding stalls and no memcpy /
 * memset).  back16 says that the 16 bytes ending at p + t are readable
 * (they may start before p, in the same buffer); otherwise nothing outside
 * p[0..t) is read. */
FX_SHANI_TARGET
static FX_INLINE int fx_shani_tail(__m128i T[4], const uint8_t *p, size_t t, int back16, uint64_t total)
{
    if (back16) {
        /* (unrolled by hand, so that T stays in registers) */
#define FX_SHANI_TAIL_CHUNK(c)                                                                          \
        do {                                                                                            \
            const uint8_t *src_;                                                                        \
            size_t shr_, pad_;                                                                          \
            fx_tail_chunk(p, t, c, &src_, &shr_, &pad_);                                                \
            T[c] = _mm_or_si128(                                                                        \
                _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)src_),                  \
                                 _mm_loadu_si128((const __m128i *)(const void *)(fx_simd_shr + shr_))), \
                _mm_loadu_si128((const __m128i *)(const void *)(fx_simd_pad + pad_)));                  \
        } while (0)
        FX_SHANI_TAIL_CHUNK(0);
        FX_SHANI_TAIL_CHUNK(1);
        FX_SHANI_TAIL_CHUNK(2);
        FX_SHANI_TAIL_CHUNK(3);
#undef FX_SHANI_TAIL_CHUNK
    } else {
        /* t < 16 bytes at p and nothing before them: read just those */
        uint64_t lo, hi;
        fx_load_short(p, t, &lo, &hi);
        T[0] = _mm_or_si128(_mm_set_epi64x((long long)hi, (long long)lo),
                            _mm_loadu_si128((const __m128i *)(const void *)(fx_simd_pad + 16 - t)));
        T[1] = T[2] = T[3] = _mm_setzero_si128();
    }
    if (t >= 56)
        return 2;
    T[3] = _mm_or_si128(T[3], fx_shani_lenchunk(total));
    return 1;
}

/* Finish a hash with SHA-NI: starting from state st (A..H order; NULL = the
 * IV), absorb the last len bytes at p of a message of total bytes, pad, and
 * write the digest.  The state stays in registers throughout and the padded
 * tail block(s) are assembled in registers straight from p (no stack buffer,
 * so no store-forwarding stalls and no memcpy/memset).  Used by oneshot
 * (st = NULL, the whole message) and final (ctx state + buffered bytes). */
FX_SHANI_TARGET
static void fx_sha256_finish_shani(const uint32_t *st, const uint8_t *p, size_t len, uint64_t total,
                                   uint8_t out[32])
{
    __m128i S0, S1, MSG, TMP, M0, M1, M2, M3, T[4];
    const __m128i BSWAP = FX_SHANI_BSWAP_MASK();
    size_t full = len >> 6, t = len & 63;

    if (st) {
        TMP = _mm_loadu_si128((const __m128i *)(const void *)&st[0]);
        S1 = _mm_loadu_si128((const __m128i *)(const void *)&st[4]);
        TMP = _mm_shuffle_epi32(TMP, 0xB1);
        S1 = _mm_shuffle_epi32(S1, 0x1B);
        S0 = _mm_alignr_epi8(TMP, S1, 8);
        S1 = _mm_blend_epi16(S1, TMP, 0xF0);
    } else {
        S0 = _mm_loadu_si128((const __m128i *)(const void *)&fx_shani_iv[0]);
        S1 = _mm_loadu_si128((const __m128i *)(const void *)&fx_shani_iv[4]);
    }

    for (; full; full--, p += 64) {
        FX_SHANI_LOAD(M0, p + 0);
        FX_SHANI_LOAD(M1, p + 16);
        FX_SHANI_LOAD(M2, p + 32);
        FX_SHANI_LOAD(M3, p + 48);
        FX_SHANI_BLOCK();
    }

    /* Tail (nothing outside p[0..len) is read) */
    if (fx_shani_tail(T, p, t, len >= 16, total) == 2) {
        M0 = _mm_shuffle_epi8(T[0], BSWAP);
        M1 = _mm_shuffle_epi8(T[1], BSWAP);
        M2 = _mm_shuffle_epi8(T[2], BSWAP);
        M3 = _mm_shuffle_epi8(T[3], BSWAP);
        FX_SHANI_BLOCK();
        T[0] = T[1] = T[2] = _mm_setzero_si128();
        T[3] = fx_shani_lenchunk(total);
    }
    M0 = _mm_shuffle_epi8(T[0], BSWAP);
    M1 = _mm_shuffle_epi8(T[1], BSWAP);
    M2 = _mm_shuffle_epi8(T[2], BSWAP);
    M3 = _mm_shuffle_epi8(T[3], BSWAP);
    FX_SHANI_BLOCK();

    /* ABEF / CDGH -> A..H, byte-swapped to big-endian output */
    TMP = _mm_shuffle_epi32(S0, 0x1B);     /* FEBA */
    S1 = _mm_shuffle_epi32(S1, 0xB1);      /* DCHG */
    S0 = _mm_blend_epi16(TMP, S1, 0xF0);   /* DCBA */
    S1 = _mm_alignr_epi8(S1, TMP, 8);      /* HGFE */
    _mm_storeu_si128((__m128i *)(void *)out, _mm_shuffle_epi8(S0, BSWAP));
    _mm_storeu_si128((__m128i *)(void *)(out + 16), _mm_shuffle_epi8(S1, BSWAP));
}

/* ------------------------------------------------------------------------- */
/* SHA-NI lane kernels                                                        */
/* ------------------------------------------------------------------------- */

/* Per-lane versions of the steps above (see "Lane kernels").  Lane
 * l's registers are S0_l, S1_l (state, ABEF / CDGH), M0_l..M3_l (message
 * vectors), MSG_l, TMP_l, and SV0_l / SV1_l hold the state at the start of
 * the block for the final addition.  The saves are volatile on purpose: two
 * lanes need more than the 16 xmm registers that the (legacy-SSE-only) SHA
 * instructions can use, and without the hint gcc spills the chaining state
 * instead, which puts a store-to-load forward on the critical path of every
 * block (-7%); the saves are read once per block, far from their store. */
#define FXL_SHANI_DECL(l, unused)                                            \
    __m128i S0_##l, S1_##l, MSG_##l, TMP_##l, M0_##l, M1_##l, M2_##l, M3_##l; \
    volatile __m128i SV0_##l, SV1_##l;
/* st[l] (A..H) -> ABEF / CDGH */
#define FXL_SHANI_LOAD_STATE(l, unused)                                      \
    TMP_##l = _mm_loadu_si128((const __m128i *)(const void *)&st[l][0]);     \
    S1_##l = _mm_loadu_si128((const __m128i *)(const void *)&st[l][4]);      \
    TMP_##l = _mm_shuffle_epi32(TMP_##l, 0xB1);                              \
    S1_##l = _mm_shuffle_epi32(S1_##l, 0x1B);                                \
    S0_##l = _mm_alignr_epi8(TMP_##l, S1_##l, 8);                            \
    S1_##l = _mm_blend_epi16(S1_##l, TMP_##l, 0xF0);
/* ... or, if st[l] is NULL, the IV */
#define FXL_SHANI_LOAD_STATE_OR_IV(l, unused)                                \
    if (st[l]) {                                                             \
        FXL_SHANI_LOAD_STATE(l, 0)                                           \
    } else {                                                                 \
        S0_##l = _mm_loadu_si128((const __m128i *)(const void *)&fx_shani_iv[0]); \
        S1_##l = _mm_loadu_si128((const __m128i *)(const void *)&fx_shani_iv[4]); \
    }
/* ABEF / CDGH -> st[l] (A..H) */
#define FXL_SHANI_STORE_STATE(l, unused)                                     \
    TMP_##l = _mm_shuffle_epi32(S0_##l, 0x1B);                               \
    S1_##l = _mm_shuffle_epi32(S1_##l, 0xB1);                                \
    S0_##l = _mm_blend_epi16(TMP_##l, S1_##l, 0xF0);                         \
    S1_##l = _mm_alignr_epi8(S1_##l, TMP_##l, 8);                            \
    _mm_storeu_si128((__m128i *)(void *)&st[l][0], S0_##l);                  \
    _mm_storeu_si128((__m128i *)(void *)&st[l][4], S1_##l);
/* ABEF / CDGH -> digest at out[l] */
#define FXL_SHANI_DIGEST(l, unused)                                          \
    TMP_##l = _mm_shuffle_epi32(S0_##l, 0x1B);                               \
    S1_##l = _mm_shuffle_epi32(S1_##l, 0xB1);                                \
    S0_##l = _mm_blend_epi16(TMP_##l, S1_##l, 0xF0);                         \
    S1_##l = _mm_alignr_epi8(S1_##l, TMP_##l, 8);                            \
    _mm_storeu_si128((__m128i *)(void *)out[l], _mm_shuffle_epi8(S0_##l, BSWAP)); \
    _mm_storeu_si128((__m128i *)(void *)(out[l] + 16), _mm_shuffle_epi8(S1_##l, BSWAP));
/* Start a block: load the lane's next block (at p_l); save the state. */
#define FXL_SHANI_BEGIN(l, unused)                                           \
    FX_SHANI_LOAD(M0_##l, p_##l + 0);                                        \
    FX_SHANI_LOAD(M1_##l, p_##l + 16);                                       \
    FX_SHANI_LOAD(M2_##l, p_##l + 32);                                       \
    FX_SHANI_LOAD(M3_##l, p_##l + 48);                                       \
    p_##l += 64;                                                             \
    SV0_##l = S0_##l;                                                        \
    SV1_##l = S1_##l;
#define FXL_SHANI_END(l, unused)                                             \
    S0_##l = _mm_add_epi32(S0_##l, SV0_##l);                                 \
    S1_##l = _mm_add_epi32(S1_##l, SV1_##l);
/* = FX_SHANI_ROUNDS, FX_SHANI_ROUNDS_END, FX_SHANI_MSG2, FX_SHANI_MSG1 */
#define FXL_SHANI_RND(l, Mc, kidx)                                           \
    MSG_##l = _mm_add_epi32(Mc##_##l, _mm_loadu_si128((const __m128i *)(const void *)(fx_sha256_K + 4 * (kidx)))); \
    S1_##l = _mm_sha256rnds2_epu32(S1_##l, S0_##l, MSG_##l);
#define FXL_SHANI_RND_END(l, unused)                                         \
    MSG_##l = _mm_shuffle_epi32(MSG_##l, 0x0E);                              \
    S0_##l = _mm_sha256rnds2_epu32(S0_##l, S1_##l, MSG_##l);
#define FXL_SHANI_MSG2(l, Mn, Mc, Mp)                                        \
    TMP_##l = _mm_alignr_epi8(Mc##_##l, Mp##_##l, 4);                        \
    Mn##_##l = _mm_add_epi32(Mn##_##l, TMP_##l);                             \
    Mn##_##l = _mm_sha256msg2_epu32(Mn##_##l, Mc##_##l);
#define FXL_SHANI_MSG1(l, Mp, Mc) Mp##_##l = _mm_sha256msg1_epu32(Mp##_##l, Mc##_##l);

/* The rounds of one block (after a BEGIN step) for every lane, the schedule
 * of FX_SHANI_BLOCK: "group k on Mc, then msg2 finishing Mn, then msg1
 * starting Mp", each step for all lanes. */
#define FXL_SHANI_G(EACH, Mc, k) EACH(FXL_SHANI_RND, Mc, k) EACH(FXL_SHANI_RND_END, 0)
#define FXL_SHANI_G1(EACH, Mc, k, Mp) FXL_SHANI_G(EACH, Mc, k) EACH(FXL_SHANI_MSG1, Mp, Mc)
#define FXL_SHANI_G21(EACH, Mc, k, Mn, Mp, Mq)                               \
    EACH(FXL_SHANI_RND, Mc, k) EACH(FXL_SHANI_MSG2, Mn, Mc, Mp)              \
    EACH(FXL_SHANI_RND_END, 0) EACH(FXL_SHANI_MSG1, Mq, Mc)
#define FXL_SHANI_G2(EACH, Mc, k, Mn, Mp)                                    \
    EACH(FXL_SHANI_RND, Mc, k) EACH(FXL_SHANI_MSG2, Mn, Mc, Mp) EACH(FXL_SHANI_RND_END, 0)
#define FX_SHANI_BLOCK_LANES(EACH)                                           \
    FXL_SHANI_G(EACH, M0, 0)                                                 \
    FXL_SHANI_G1(EACH, M1, 1, M0)                                            \
    FXL_SHANI_G1(EACH, M2, 2, M1)                                            \
    FXL_SHANI_G21(EACH, M3, 3, M0, M2, M2)                                   \
    FXL_SHANI_G21(EACH, M0, 4, M1, M3, M3)                                   \
    FXL_SHANI_G21(EACH, M1, 5, M2, M0, M0)                                   \
    FXL_SHANI_G21(EACH, M2, 6, M3, M1, M1)                                   \
    FXL_SHANI_G21(EACH, M3, 7, M0, M2, M2)                                   \
    FXL_SHANI_G21(EACH, M0, 8, M1, M3, M3)                                   \
    FXL_SHANI_G21(EACH, M1, 9, M2, M0, M0)                                   \
    FXL_SHANI_G21(EACH, M2, 10, M3, M1, M1)                                  \
    FXL_SHANI_G21(EACH, M3, 11, M0, M2, M2)                                  \
    FXL_SHANI_G21(EACH, M0, 12, M1, M3, M3)                                  \
    FXL_SHANI_G2(EACH, M1, 13, M2, M0)                                       \
    FXL_SHANI_G2(EACH, M2, 14, M3, M1)                                       \
    FXL_SHANI_G(EACH, M3, 15)                                                \
    EACH(FXL_SHANI_END, 0)

/* Body of a lane kernel (fx_lanes_fn) for the lanes that EACH names. */
#define FXL_SHANI_SRC(l, unused) const uint8_t *p_##l = src[l];
#define FX_SHANI_LANES_BODY(EACH)                                            \
    const __m128i BSWAP = FX_SHANI_BSWAP_MASK();                             \
    EACH(FXL_SHANI_DECL, 0)                                                  \
    EACH(FXL_SHANI_SRC, 0)                                                   \
    EACH(FXL_SHANI_LOAD_STATE, 0)                                            \
    for (; nblocks; nblocks--) {                                             \
        EACH(FXL_SHANI_BEGIN, 0)                                             \
        FX_SHANI_BLOCK_LANES(EACH)                                           \
    }                                                                        \
    EACH(FXL_SHANI_STORE_STATE, 0)

/* Two lanes: on Zen 4 this doubles the throughput of one, and the SHA unit
 * is then about saturated (3 lanes gain 3%, 4 lanes spill and lose; see
 * csrc/test/bench_interleave.c). */
FX_SHANI_TARGET
static void fx_sha256_x2_shani(uint32_t *const st[], const uint8_t *const src[], size_t nblocks)
{
    FX_SHANI_LANES_BODY(FX_EACH2)
}

/* The padded tail tl to blk (1 or 2 blocks, the count is returned; with
 * both, the second block is written even when not needed).  Written out
 * with 16-byte stores: as a loop, gcc may make it a memcpy call, whose wide
 * or rep-movs stores the kernel's 16-byte loads cannot forward from. */
FX_SHANI_TARGET
static FX_INLINE size_t fx_shani_tail_store(uint8_t blk[128], const fx_tail_in *tl, int both)
{
    __m128i T[4];
    int nb = fx_shani_tail(T, tl->p, tl->t, tl->back16, tl->total);
    _mm_storeu_si128((__m128i *)(void *)(blk + 0), T[0]);
    _mm_storeu_si128((__m128i *)(void *)(blk + 16), T[1]);
    _mm_storeu_si128((__m128i *)(void *)(blk + 32), T[2]);
    _mm_storeu_si128((__m128i *)(void *)(blk + 48), T[3]);
    if (nb == 2 || both) {
        _mm_storeu_si128((__m128i *)(void *)(blk + 64), _mm_setzero_si128());
        _mm_storeu_si128((__m128i *)(void *)(blk + 80), _mm_setzero_si128());
        _mm_storeu_si128((__m128i *)(void *)(blk + 96), _mm_setzero_si128());
        _mm_storeu_si128((__m128i *)(void *)(blk + 112), fx_shani_lenchunk(tl->total));
    }
    return (size_t)nb;
}

/* fx_tail_fn */
FX_SHANI_TARGET
static size_t fx_sha256_tail_shani(uint8_t blk[128], const fx_tail_in *tl)
{
    return fx_shani_tail_store(blk, tl, 0);
}

/* Two lanes at their ends (fx_final_fn): the state starts from the IV
 * constants when there is none, and the digests go straight to out.  (The
 * padded tails pass through a stack buffer: fed to the rounds straight from
 * registers they would be a little faster with gcc, but clang then spills
 * the chaining state and is twice as slow.) */
FX_SHANI_TARGET
static void fx_sha256_x2_final_shani(const uint32_t *const st[], const fx_tail_in *const tl[], uint8_t *const out[])
{
    const __m128i BSWAP = FX_SHANI_BSWAP_MASK();
    uint8_t blk[2][128];
    size_t n0 = fx_shani_tail_store(blk[0], tl[0], 1);
    size_t n1 = fx_shani_tail_store(blk[1], tl[1], 1);
    size_t b;
    const uint8_t *p_0 = blk[0], *p_1 = blk[1];
    FX_EACH2(FXL_SHANI_DECL, 0)
    FX_EACH2(FXL_SHANI_LOAD_STATE_OR_IV, 0)
    /* One or two blocks.  If only one lane needs the second (zeros and the
     * bit length), the other runs it too and drops the result: that is free
     * (the lanes run in parallel). */
    for (b = 1;; b++) {
        FX_EACH2(FXL_SHANI_BEGIN, 0)
        FX_SHANI_BLOCK_LANES(FX_EACH2)
        if (n0 == b) {
            FXL_SHANI_DIGEST(0, 0)
        }
        if (n1 == b) {
            FXL_SHANI_DIGEST(1, 0)
        }
        if (b == 2 || (n0 == 1 && n1 == 1))
            break;
    }
}

#endif /* FX_HAVE_SHANI */

/* ------------------------------------------------------------------------- */
/* AArch64 crypto extensions                                                  */
/* ------------------------------------------------------------------------- */

#if FX_HAVE_ARMV8

static int fx_probe_armv8(void)
{
#if defined(FX_ARMV8_BASELINE)
    return 1; /* the compiler was told the CPU has SHA2 */
#elif defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_SHA2) ? 1 : 0;
#elif defined(__APPLE__)
    return 1; /* every Apple arm64 CPU has FEAT_SHA256 */
#else
    return 0;
#endif
}

/* Four rounds on message vector Mc (+ K[4*kidx..]). */
#define FX_ARM_ROUNDS(Mc, kidx)                                        \
    do {                                                               \
        uint32x4_t wk_ = vaddq_u32((Mc), vld1q_u32(fx_sha256_K + 4 * (kidx))); \
        uint32x4_t t_ = S0;                                            \
        S0 = vsha256hq_u32(S0, S1, wk_);                               \
        S1 = vsha256h2q_u32(S1, t_, wk_);                              \
    } while (0)
/* Replace vector i (Ma) by vector i+4. */
#define FX_ARM_SCHED(Ma, Mb, Mc, Md) Ma = vsha256su1q_u32(vsha256su0q_u32((Ma), (Mb)), (Mc), (Md))

/* One 64-byte block from M0..M3 (byte-swapped words) into S0 (ABCD), S1 (EFGH). */
#define FX_ARM_BLOCK()                                                 \
    do {                                                               \
        uint32x4_t ABCD_SAVE_ = S0, EFGH_SAVE_ = S1;                   \
        FX_ARM_ROUNDS(M0, 0);  FX_ARM_SCHED(M0, M1, M2, M3);           \
        FX_ARM_ROUNDS(M1, 1);  FX_ARM_SCHED(M1, M2, M3, M0);           \
        FX_ARM_ROUNDS(M2, 2);  FX_ARM_SCHED(M2, M3, M0, M1);           \
        FX_ARM_ROUNDS(M3, 3);  FX_ARM_SCHED(M3, M0, M1, M2);           \
        FX_ARM_ROUNDS(M0, 4);  FX_ARM_SCHED(M0, M1, M2, M3);           \
        FX_ARM_ROUNDS(M1, 5);  FX_ARM_SCHED(M1, M2, M3, M0);           \
        FX_ARM_ROUNDS(M2, 6);  FX_ARM_SCHED(M2, M3, M0, M1);           \
        FX_ARM_ROUNDS(M3, 7);  FX_ARM_SCHED(M3, M0, M1, M2);           \
        FX_ARM_ROUNDS(M0, 8);  FX_ARM_SCHED(M0, M1, M2, M3);           \
        FX_ARM_ROUNDS(M1, 9);  FX_ARM_SCHED(M1, M2, M3, M0);           \
        FX_ARM_ROUNDS(M2, 10); FX_ARM_SCHED(M2, M3, M0, M1);           \
        FX_ARM_ROUNDS(M3, 11); FX_ARM_SCHED(M3, M0, M1, M2);           \
        FX_ARM_ROUNDS(M0, 12);                                         \
        FX_ARM_ROUNDS(M1, 13);                                         \
        FX_ARM_ROUNDS(M2, 14);                                         \
        FX_ARM_ROUNDS(M3, 15);                                         \
        S0 = vaddq_u32(S0, ABCD_SAVE_);                                \
        S1 = vaddq_u32(S1, EFGH_SAVE_);                                \
    } while (0)

#define FX_ARM_WORDS(v) vreinterpretq_u32_u8(vrev32q_u8(v))

FX_ARMV8_TARGET
static void fx_sha256_compress_armv8(uint32_t state[8], const uint8_t *p, size_t nblocks)
{
    uint32x4_t S0, S1, M0, M1, M2, M3;

    if (!nblocks)
        return;

    S0 = vld1q_u32(&state[0]);
    S1 = vld1q_u32(&state[4]);
    do {
        M0 = FX_ARM_WORDS(vld1q_u8(p + 0));
        M1 = FX_ARM_WORDS(vld1q_u8(p + 16));
        M2 = FX_ARM_WORDS(vld1q_u8(p + 32));
        M3 = FX_ARM_WORDS(vld1q_u8(p + 48));
        FX_ARM_BLOCK();
        p += 64;
    } while (--nblocks);
    vst1q_u32(&state[0], S0);
    vst1q_u32(&state[4], S1);
}

/* As fx_shani_lenchunk and fx_shani_tail. */
FX_ARMV8_TARGET
static FX_INLINE uint8x16_t fx_armv8_lenchunk(uint64_t total)
{
    return vcombine_u8(vdup_n_u8(0), vrev64_u8(vcreate_u8(total << 3)));
}

FX_ARMV8_TARGET
static FX_INLINE int fx_armv8_tail(uint8x16_t T[4], const uint8_t *p, size_t t, int back16, uint64_t total)
{
    if (back16) {
#define FX_ARM_TAIL_CHUNK(c)                                                                            \
        do {                                                                                            \
            const uint8_t *src_;                                                                        \
            size_t shr_, pad_;                                                                          \
            fx_tail_chunk(p, t, c, &src_, &shr_, &pad_);                                                \
            T[c] = vorrq_u8(vqtbl1q_u8(vld1q_u8(src_), vld1q_u8(fx_simd_shr + shr_)),                   \
                            vld1q_u8(fx_simd_pad + pad_));                                              \
        } while (0)
        FX_ARM_TAIL_CHUNK(0);
        FX_ARM_TAIL_CHUNK(1);
        FX_ARM_TAIL_CHUNK(2);
        FX_ARM_TAIL_CHUNK(3);
#undef FX_ARM_TAIL_CHUNK
    } else {
        uint64_t lo, hi;
        fx_load_short(p, t, &lo, &hi);
        T[0] = vorrq_u8(vcombine_u8(vcreate_u8(lo), vcreate_u8(hi)), vld1q_u8(fx_simd_pad + 16 - t));
        T[1] = T[2] = T[3] = vdupq_n_u8(0);
    }
    if (t >= 56)
        return 2;
    T[3] = vorrq_u8(T[3], fx_armv8_lenchunk(total));
    return 1;
}

/* Finish a hash with the ARMv8 crypto extensions; same contract and scheme
 * as fx_sha256_finish_shani. */
FX_ARMV8_TARGET
static void fx_sha256_finish_armv8(const uint32_t *st, const uint8_t *p, size_t len, uint64_t total,
                                   uint8_t out[32])
{
    uint32x4_t S0, S1, M0, M1, M2, M3;
    uint8x16_t T[4];
    size_t full = len >> 6, t = len & 63;

    if (!st)
        st = fx_sha256_IV;
    S0 = vld1q_u32(&st[0]);
    S1 = vld1q_u32(&st[4]);
    for (; full; full--, p += 64) {
        M0 = FX_ARM_WORDS(vld1q_u8(p + 0));
        M1 = FX_ARM_WORDS(vld1q_u8(p + 16));
        M2 = FX_ARM_WORDS(vld1q_u8(p + 32));
        M3 = FX_ARM_WORDS(vld1q_u8(p + 48));
        FX_ARM_BLOCK();
    }

    if (fx_armv8_tail(T, p, t, len >= 16, total) == 2) {
        M0 = FX_ARM_WORDS(T[0]);
        M1 = FX_ARM_WORDS(T[1]);
        M2 = FX_ARM_WORDS(T[2]);
        M3 = FX_ARM_WORDS(T[3]);
        FX_ARM_BLOCK();
        T[0] = T[1] = T[2] = vdupq_n_u8(0);
        T[3] = fx_armv8_lenchunk(total);
    }
    M0 = FX_ARM_WORDS(T[0]);
    M1 = FX_ARM_WORDS(T[1]);
    M2 = FX_ARM_WORDS(T[2]);
    M3 = FX_ARM_WORDS(T[3]);
    FX_ARM_BLOCK();
    vst1q_u8(out, vrev32q_u8(vreinterpretq_u8_u32(S0)));
    vst1q_u8(out + 16, vrev32q_u8(vreinterpretq_u8_u32(S1)));
}

/* Lane kernels, as the SHA-NI ones (see "Lane kernels"), with per-lane
 * FX_ARM_ROUNDS / FX_ARM_SCHED.  AArch64 has 32 vector registers, enough
 * for two lanes. */
#define FXL_ARM_DECL(l, unused) uint32x4_t S0_##l, S1_##l, SV0_##l, SV1_##l, M0_##l, M1_##l, M2_##l, M3_##l;
#define FXL_ARM_LOAD_STATE(l, unused)                                        \
    S0_##l = vld1q_u32(&st[l][0]);                                           \
    S1_##l = vld1q_u32(&st[l][4]);
/* ... or, if st[l] is NULL, the IV */
#define FXL_ARM_LOAD_STATE_OR_IV(l, unused)                                  \
    S0_##l = vld1q_u32(st[l] ? &st[l][0] : &fx_sha256_IV[0]);                \
    S1_##l = vld1q_u32(st[l] ? &st[l][4] : &fx_sha256_IV[4]);
#define FXL_ARM_SRC(l, unused) const uint8_t *p_##l = src[l];
#define FXL_ARM_STORE_STATE(l, unused)                                       \
    vst1q_u32(&st[l][0], S0_##l);                                            \
    vst1q_u32(&st[l][4], S1_##l);
/* the state -> digest at out[l] */
#define FXL_ARM_DIGEST(l, unused)                                            \
    vst1q_u8(out[l], vrev32q_u8(vreinterpretq_u8_u32(S0_##l)));              \
    vst1q_u8(out[l] + 16, vrev32q_u8(vreinterpretq_u8_u32(S1_##l)));
/* Start a block: load the lane's next block (at p_l); save the state. */
#define FXL_ARM_BEGIN(l, unused)                                             \
    M0_##l = FX_ARM_WORDS(vld1q_u8(p_##l + 0));                              \
    M1_##l = FX_ARM_WORDS(vld1q_u8(p_##l + 16));                             \
    M2_##l = FX_ARM_WORDS(vld1q_u8(p_##l + 32));                             \
    M3_##l = FX_ARM_WORDS(vld1q_u8(p_##l + 48));                             \
    p_##l += 64;                                                             \
    SV0_##l = S0_##l;                                                        \
    SV1_##l = S1_##l;
#define FXL_ARM_END(l, unused)                                               \
    S0_##l = vaddq_u32(S0_##l, SV0_##l);                                     \
    S1_##l = vaddq_u32(S1_##l, SV1_##l);
#define FXL_ARM_ROUNDS(l, Mc, kidx)                                          \
    {                                                                        \
        uint32x4_t wk_ = vaddq_u32(Mc##_##l, vld1q_u32(fx_sha256_K + 4 * (kidx))); \
        uint32x4_t t_ = S0_##l;                                              \
        S0_##l = vsha256hq_u32(S0_##l, S1_##l, wk_);                         \
        S1_##l = vsha256h2q_u32(S1_##l, t_, wk_);                            \
    }
#define FXL_ARM_SCHED(l, Ma, Mb, Mc, Md)                                     \
    Ma##_##l = vsha256su1q_u32(vsha256su0q_u32(Ma##_##l, Mb##_##l), Mc##_##l, Md##_##l);
/* Four rounds on Ma for all lanes, then Ma's replacement (vector i+4). */
#define FXL_ARM_GS(EACH, Ma, Mb, Mc, Md, k) EACH(FXL_ARM_ROUNDS, Ma, k) EACH(FXL_ARM_SCHED, Ma, Mb, Mc, Md)
#define FX_ARM_BLOCK_LANES(EACH)                                             \
    FXL_ARM_GS(EACH, M0, M1, M2, M3, 0)                                      \
    FXL_ARM_GS(EACH, M1, M2, M3, M0, 1)                                      \
    FXL_ARM_GS(EACH, M2, M3, M0, M1, 2)                                      \
    FXL_ARM_GS(EACH, M3, M0, M1, M2, 3)                                      \
    FXL_ARM_GS(EACH, M0, M1, M2, M3, 4)                                      \
    FXL_ARM_GS(EACH, M1, M2, M3, M0, 5)                                      \
    FXL_ARM_GS(EACH, M2, M3, M0, M1, 6)                                      \
    FXL_ARM_GS(EACH, M3, M0, M1, M2, 7)                                      \
    FXL_ARM_GS(EACH, M0, M1, M2, M3, 8)                                      \
    FXL_ARM_GS(EACH, M1, M2, M3, M0, 9)                                      \
    FXL_ARM_GS(EACH, M2, M3, M0, M1, 10)                                     \
    FXL_ARM_GS(EACH, M3, M0, M1, M2, 11)                                     \
    EACH(FXL_ARM_ROUNDS, M0, 12)                                             \
    EACH(FXL_ARM_ROUNDS, M1, 13)                                             \
    EACH(FXL_ARM_ROUNDS, M2, 14)                                             \
    EACH(FXL_ARM_ROUNDS, M3, 15)                                             \
    EACH(FXL_ARM_END, 0)

/* Body of a lane kernel (fx_lanes_fn) for the lanes that EACH names. */
#define FX_ARM_LANES_BODY(EACH)                                              \
    EACH(FXL_ARM_DECL, 0)                                                    \
    EACH(FXL_ARM_SRC, 0)                                                     \
    EACH(FXL_ARM_LOAD_STATE, 0)                                              \
    for (; nblocks; nblocks--) {                                             \
        EACH(FXL_ARM_BEGIN, 0)                                               \
        FX_ARM_BLOCK_LANES(EACH)                                             \
    }                                                                        \
    EACH(FXL_ARM_STORE_STATE, 0)

FX_ARMV8_TARGET
static void fx_sha256_x2_armv8(uint32_t *const st[], const uint8_t *const src[], size_t nblocks)
{
    FX_ARM_LANES_BODY(FX_EACH2)
}

/* As fx_shani_tail_store and fx_sha256_tail_shani. */
FX_ARMV8_TARGET
static FX_INLINE size_t fx_armv8_tail_store(uint8_t blk[128], const fx_tail_in *tl, int both)
{
    uint8x16_t T[4];
    int nb = fx_armv8_tail(T, tl->p, tl->t, tl->back16, tl->total);
    vst1q_u8(blk + 0, T[0]);
    vst1q_u8(blk + 16, T[1]);
    vst1q_u8(blk + 32, T[2]);
    vst1q_u8(blk + 48, T[3]);
    if (nb == 2 || both) {
        vst1q_u8(blk + 64, vdupq_n_u8(0));
        vst1q_u8(blk + 80, vdupq_n_u8(0));
        vst1q_u8(blk + 96, vdupq_n_u8(0));
        vst1q_u8(blk + 112, fx_armv8_lenchunk(tl->total));
    }
    return (size_t)nb;
}

FX_ARMV8_TARGET
static size_t fx_sha256_tail_armv8(uint8_t blk[128], const fx_tail_in *tl)
{
    return fx_armv8_tail_store(blk, tl, 0);
}

/* Two lanes at their ends (fx_final_fn). */
FX_ARMV8_TARGET
static void fx_sha256_x2_final_armv8(const uint32_t *const st[], const fx_tail_in *const tl[], uint8_t *const out[])
{
    uint8_t blk[2][128];
    size_t n0 = fx_armv8_tail_store(blk[0], tl[0], 1);
    size_t n1 = fx_armv8_tail_store(blk[1], tl[1], 1);
    size_t b;
    const uint8_t *p_0 = blk[0], *p_1 = blk[1];
    FX_EACH2(FXL_ARM_DECL, 0)
    FX_EACH2(FXL_ARM_LOAD_STATE_OR_IV, 0)
    for (b = 1;; b++) { /* one or two blocks (see fx_sha256_x2_final_shani) */
        FX_EACH2(FXL_ARM_BEGIN, 0)
        FX_ARM_BLOCK_LANES(FX_EACH2)
        if (n0 == b) {
            FXL_ARM_DIGEST(0, 0)
        }
        if (n1 == b) {
            FXL_ARM_DIGEST(1, 0)
        }
        if (b == 2 || (n0 == 1 && n1 == 1))
            break;
    }
}

#endif /* FX_HAVE_ARMV8 */

/* ------------------------------------------------------------------------- */
/* Impl registry                                                              */
/* ------------------------------------------------------------------------- */

static const char *const fx_impl_names[FX_SHA256_NIMPL] = { "portable", "sha-ni", "armv8-crypto" };

static int fx_valid_impl(int impl)
{
    return impl >= 0 && impl < FX_SHA256_NIMPL;
}

static fx_sha256_compress_fn fx_compiled_fn(int impl)
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
        return FX_ERR_INVALID;
    for (i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (fx_streq_nocase(name, aliases[i].name)) {
            if (impl)
                *impl = aliases[i].id;
            return FX_OK;
        }
    }
    return FX_ERR_INVALID;
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

/* Pad the tail (tlen < 64 bytes at tail) for a message of total nbytes bytes
 * into blk (128 bytes); returns the number of blocks (1 or 2).  tail == blk
 * pads in place. */
static size_t fx_sha256_pad(uint8_t blk[128], const uint8_t *tail, size_t tlen, uint64_t nbytes)
{
    size_t nb = (tlen < 56) ? 1 : 2;
    size_t end = nb * 64;
    if (tlen && tail != blk)
        memcpy(blk, tail, tlen);
    blk[tlen] = 0x80;
    memset(blk + tlen + 1, 0, end - 8 - (tlen + 1));
    fx_store_be64(blk + end - 8, nbytes << 3);
    return nb;
}

static void fx_sha256_output(const uint32_t h[8], uint8_t out[32])
{
    fx_store_be32(out + 0, h[0]);
    fx_store_be32(out + 4, h[1]);
    fx_store_be32(out + 8, h[2]);
    fx_store_be32(out + 12, h[3]);
    fx_store_be32(out + 16, h[4]);
    fx_store_be32(out + 20, h[5]);
    fx_store_be32(out + 24, h[6]);
    fx_store_be32(out + 28, h[7]);
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
    return bad ? FX_ERR_SELFTEST : FX_OK;
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
    return bad ? FX_ERR_SELFTEST : FX_OK;
}

int fx_sha256_selftest(int impl)
{
    int rc;
    if (impl == FX_SHA256_AUTO)
        impl = fx_sha256_current();
    if (!fx_valid_impl(impl))
        return FX_ERR_INVALID;
    if (!fx_sha256_impl_supported(impl))
        return FX_ERR_UNSUPPORTED;
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
        return FX_ERR_INVALID;
    if (!fx_sha256_impl_supported(impl))
        return FX_ERR_UNSUPPORTED;
    if (fx_sha256_selftest(impl) != FX_OK)
        return FX_ERR_SELFTEST;
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
