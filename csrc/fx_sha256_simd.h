/*
 * fx_sha256_simd.h - helpers of the SIMD finish paths (fx_sha256_x86.c,
 * fx_sha256_arm.c); little-endian targets only.
 */
#ifndef FX_SHA256_SIMD_H
#define FX_SHA256_SIMD_H

#include "fx_sha256_int.h"

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

#endif /* FX_SHA256_SIMD_H */
