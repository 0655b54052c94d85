/* fx_sha256_arm.c - SHA-256 with the AArch64 crypto extensions: one message,
 * and two interleaved (see fx_sha256_int.h). */
#include "fx_sha256_simd.h"

/* ------------------------------------------------------------------------- */
/* AArch64 crypto extensions                                                  */
/* ------------------------------------------------------------------------- */

#if FX_HAVE_ARMV8

int fx_probe_armv8(void)
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
void fx_sha256_compress_armv8(uint32_t state[8], const uint8_t *p, size_t nblocks)
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
void fx_sha256_finish_armv8(const uint32_t *st, const uint8_t *p, size_t len, uint64_t total,
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
void fx_sha256_x2_armv8(uint32_t *const st[], const uint8_t *const src[], size_t nblocks)
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
size_t fx_sha256_tail_armv8(uint8_t blk[128], const fx_tail_in *tl)
{
    return fx_armv8_tail_store(blk, tl, 0);
}

/* Two lanes at their ends (fx_final_fn). */
FX_ARMV8_TARGET
void fx_sha256_x2_final_armv8(const uint32_t *const st[], const fx_tail_in *const tl[], uint8_t *const out[])
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
