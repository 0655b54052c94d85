/*
 * fx_sha256.c - SHA-256 kernel for fastaxo.  See fx_sha256.h.
 *
 * Builds as plain C99 or C11 for any target without special flags: the
 * accelerated paths enable their ISA per function (gcc/clang target
 * attributes) and are only called after a runtime CPU probe.
 */
#include "fx_sha256.h"

#include <string.h>

/* ------------------------------------------------------------------------- */
/* Which accelerated paths can this compiler/target build?                   */
/* ------------------------------------------------------------------------- */

#define FX_HAVE_SHANI 0
#define FX_HAVE_ARMV8 0

#if defined(__x86_64__) || defined(_M_X64) || defined(_M_AMD64)
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

#if defined(__aarch64__) && !defined(_MSC_VER) && defined(__ARM_NEON) && \
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
#elif defined(__GNUC__) || defined(__clang__)
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
#if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define FX_BSWAP32(x) __builtin_bswap32(x)
#elif defined(_MSC_VER) && !defined(__clang__)
#  include <stdlib.h>
#  define FX_BSWAP32(x) _byteswap_ulong(x) /* every MSVC target is little-endian */
#endif

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
/* Shared by the SIMD finish paths (little-endian targets only)              */
/* ------------------------------------------------------------------------- */

#if FX_HAVE_SHANI || FX_HAVE_ARMV8

/* Byte-shuffle masks (pshufb / tbl: an index >= 16 yields 0).
 * fx_simd_shr + k moves byte k to lane 0 and zeroes the top k lanes;
 * fx_simd_pad + 16 - r is 0x80 at lane r and 0 elsewhere. */
static const uint8_t fx_simd_shr[32] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
};
static const uint8_t fx_simd_pad[32] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* Bytes p[0..n) (n < 16) as a little-endian 128-bit value lo:hi with zeros
 * above; reads only p[0..n). */
static inline void fx_load_short(const uint8_t *p, size_t n, uint64_t *lo_out, uint64_t *hi_out)
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
    __m128i S0, S1, MSG, TMP, M0, M1, M2, M3, last16, T[8];
    const __m128i BSWAP = FX_SHANI_BSWAP_MASK();
    size_t full = len >> 6, t = len & 63, nchunks = (t < 56) ? 4 : 8, c;

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

    /* Tail: t bytes at p, then 0x80, zeros, 64-bit big-endian bit length.
     * last16 = the 16 bytes ending at the end of the data (or, when there are
     * fewer than 16 bytes of data, all of them in the low lanes).  Nothing
     * outside p[0..len) is ever read. */
    if (len >= 16)
        last16 = _mm_loadu_si128((const __m128i *)(const void *)(p + t - 16));
    else {
        uint64_t lo, hi;
        fx_load_short(p, t, &lo, &hi);
        last16 = _mm_set_epi64x((long long)hi, (long long)lo);
    }
    for (c = 0; c < nchunks; c++) {
        size_t lo = 16 * c;
        if (lo + 16 <= t) {
            T[c] = _mm_loadu_si128((const __m128i *)(const void *)(p + lo));
        } else if (lo <= t) {
            size_t r = t - lo; /* message bytes in this chunk, 0..15 */
            __m128i d = (len >= 16)
                ? _mm_shuffle_epi8(last16, _mm_loadu_si128((const __m128i *)(const void *)(fx_simd_shr + 16 - r)))
                : last16;
            T[c] = _mm_or_si128(d, _mm_loadu_si128((const __m128i *)(const void *)(fx_simd_pad + 16 - r)));
        } else {
            T[c] = _mm_setzero_si128();
        }
    }
    /* bit length, big-endian, into the last 8 bytes */
    {
        const __m128i rev = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, -128, -128, -128, -128, -128, -128, -128, -128);
        __m128i bits = _mm_set_epi64x(0, (long long)(total << 3));
        T[nchunks - 1] = _mm_or_si128(T[nchunks - 1], _mm_shuffle_epi8(bits, rev));
    }
    for (c = 0; c < nchunks; c += 4) {
        M0 = _mm_shuffle_epi8(T[c + 0], BSWAP);
        M1 = _mm_shuffle_epi8(T[c + 1], BSWAP);
        M2 = _mm_shuffle_epi8(T[c + 2], BSWAP);
        M3 = _mm_shuffle_epi8(T[c + 3], BSWAP);
        FX_SHANI_BLOCK();
    }

    /* ABEF / CDGH -> A..H, byte-swapped to big-endian output */
    TMP = _mm_shuffle_epi32(S0, 0x1B);     /* FEBA */
    S1 = _mm_shuffle_epi32(S1, 0xB1);      /* DCHG */
    S0 = _mm_blend_epi16(TMP, S1, 0xF0);   /* DCBA */
    S1 = _mm_alignr_epi8(S1, TMP, 8);      /* HGFE */
    _mm_storeu_si128((__m128i *)(void *)out, _mm_shuffle_epi8(S0, BSWAP));
    _mm_storeu_si128((__m128i *)(void *)(out + 16), _mm_shuffle_epi8(S1, BSWAP));
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

/* Finish a hash with the ARMv8 crypto extensions; same contract and scheme
 * as fx_sha256_finish_shani. */
FX_ARMV8_TARGET
static void fx_sha256_finish_armv8(const uint32_t *st, const uint8_t *p, size_t len, uint64_t total,
                                   uint8_t out[32])
{
    uint32x4_t S0, S1, M0, M1, M2, M3;
    uint8x16_t last16, T[8];
    size_t full = len >> 6, t = len & 63, nchunks = (t < 56) ? 4 : 8, c;

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

    if (len >= 16) {
        last16 = vld1q_u8(p + t - 16);
    } else {
        uint64_t lo, hi;
        fx_load_short(p, t, &lo, &hi);
        last16 = vcombine_u8(vcreate_u8(lo), vcreate_u8(hi));
    }
    for (c = 0; c < nchunks; c++) {
        size_t lo = 16 * c;
        if (lo + 16 <= t) {
            T[c] = vld1q_u8(p + lo);
        } else if (lo <= t) {
            size_t r = t - lo; /* message bytes in this chunk, 0..15 */
            uint8x16_t d = (len >= 16) ? vqtbl1q_u8(last16, vld1q_u8(fx_simd_shr + 16 - r)) : last16;
            T[c] = vorrq_u8(d, vld1q_u8(fx_simd_pad + 16 - r));
        } else {
            T[c] = vdupq_n_u8(0);
        }
    }
    /* bit length, big-endian, into the last 8 bytes */
    T[nchunks - 1] = vorrq_u8(T[nchunks - 1],
                              vcombine_u8(vdup_n_u8(0), vrev64_u8(vcreate_u8(total << 3))));
    for (c = 0; c < nchunks; c += 4) {
        M0 = FX_ARM_WORDS(T[c + 0]);
        M1 = FX_ARM_WORDS(T[c + 1]);
        M2 = FX_ARM_WORDS(T[c + 2]);
        M3 = FX_ARM_WORDS(T[c + 3]);
        FX_ARM_BLOCK();
    }
    vst1q_u8(out, vrev32q_u8(vreinterpretq_u8_u32(S0)));
    vst1q_u8(out + 16, vrev32q_u8(vreinterpretq_u8_u32(S1)));
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
 * into blk (128 bytes); returns the number of blocks (1 or 2). */
static size_t fx_sha256_pad(uint8_t blk[128], const uint8_t *tail, size_t tlen, uint64_t nbytes)
{
    size_t nb = (tlen < 56) ? 1 : 2;
    size_t end = nb * 64;
    if (tlen)
        memcpy(blk, tail, tlen);
    blk[tlen] = 0x80;
    memset(blk + tlen + 1, 0, end - 8 - (tlen + 1));
    fx_store_be64(blk + end - 8, nbytes << 3);
    return nb;
}

static void fx_sha256_output(const uint32_t h[8], uint8_t out[32])
{
    int i;
    for (i = 0; i < 8; i++)
        fx_store_be32(out + 4 * i, h[i]);
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
    return bad ? FX_ERR_SELFTEST : FX_OK;
}

int fx_sha256_selftest(int impl)
{
    if (impl == FX_SHA256_AUTO)
        impl = fx_sha256_current();
    if (!fx_valid_impl(impl))
        return FX_ERR_INVALID;
    if (!fx_sha256_impl_supported(impl))
        return FX_ERR_UNSUPPORTED;
    return fx_selftest_fn(fx_compiled_fn(impl), impl != FX_SHA256_PORTABLE);
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
