/*
 * fx_sha256_int.h - what the files of the SHA-256 kernel share (not an API:
 * fx_sha256.h is).  fx_sha256.c: the portable path, the impl registry, the
 * hashing API, the self-test and the selection; fx_sha256_many.c: many
 * messages per call; fx_sha256_x86.c: SHA-NI; fx_sha256_arm.c: ARMv8 crypto.
 */
#ifndef FX_SHA256_INT_H
#define FX_SHA256_INT_H

#include "fx_sha256.h"
#include "fx_compat.h"

#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#  define FX_MAYBE_UNUSED __attribute__((unused))
#else
#  define FX_MAYBE_UNUSED
#endif

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
/* Constants and helpers                                                      */
/* ------------------------------------------------------------------------- */

FX_MAYBE_UNUSED static const uint32_t fx_sha256_K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

FX_MAYBE_UNUSED static const uint32_t fx_sha256_IV[8] = {
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

/* Pad the tail (tlen < 64 bytes at tail) for a message of total nbytes bytes
 * into blk (128 bytes); returns the number of blocks (1 or 2).  tail == blk
 * pads in place. */
static inline size_t fx_sha256_pad(uint8_t blk[128], const uint8_t *tail, size_t tlen, uint64_t nbytes)
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

static inline void fx_sha256_output(const uint32_t h[8], uint8_t out[32])
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

/* ------------------------------------------------------------------------- */
/* Between the files of the SHA-256 kernel                                    */
/* ------------------------------------------------------------------------- */

/* fx_sha256.c */
void fx_sha256_compress_portable(uint32_t state[8], const uint8_t *p, size_t nblocks);
fx_sha256_compress_fn fx_compiled_fn(int impl);

#if FX_HAVE_SHANI /* fx_sha256_x86.c */
int fx_probe_shani(void);
void fx_sha256_compress_shani(uint32_t state[8], const uint8_t *p, size_t nblocks);
void fx_sha256_finish_shani(const uint32_t *st, const uint8_t *p, size_t len, uint64_t total,
                            uint8_t out[32]);
void fx_sha256_x2_shani(uint32_t *const st[], const uint8_t *const src[], size_t nblocks);
size_t fx_sha256_tail_shani(uint8_t blk[128], const fx_tail_in *tl);
void fx_sha256_x2_final_shani(const uint32_t *const st[], const fx_tail_in *const tl[],
                              uint8_t *const out[]);
#endif

#if FX_HAVE_ARMV8 /* fx_sha256_arm.c */
int fx_probe_armv8(void);
void fx_sha256_compress_armv8(uint32_t state[8], const uint8_t *p, size_t nblocks);
void fx_sha256_finish_armv8(const uint32_t *st, const uint8_t *p, size_t len, uint64_t total,
                            uint8_t out[32]);
void fx_sha256_x2_armv8(uint32_t *const st[], const uint8_t *const src[], size_t nblocks);
size_t fx_sha256_tail_armv8(uint8_t blk[128], const fx_tail_in *tl);
void fx_sha256_x2_final_armv8(const uint32_t *const st[], const fx_tail_in *const tl[],
                              uint8_t *const out[]);
#endif

#endif /* FX_SHA256_INT_H */
