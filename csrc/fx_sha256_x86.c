/* fx_sha256_x86.c - SHA-256 with the x86-64 SHA extensions (SHA-NI): one
 * message, and two interleaved (see fx_sha256_int.h). */
#include "fx_sha256_simd.h"

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

int fx_probe_shani(void)
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
void fx_sha256_compress_shani(uint32_t state[8], const uint8_t *p, size_t nblocks)
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
void fx_sha256_finish_shani(const uint32_t *st, const uint8_t *p, size_t len, uint64_t total,
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
void fx_sha256_x2_shani(uint32_t *const st[], const uint8_t *const src[], size_t nblocks)
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
size_t fx_sha256_tail_shani(uint8_t blk[128], const fx_tail_in *tl)
{
    return fx_shani_tail_store(blk, tl, 0);
}

/* Two lanes at their ends (fx_final_fn): the state starts from the IV
 * constants when there is none, and the digests go straight to out.  (The
 * padded tails pass through a stack buffer: fed to the rounds straight from
 * registers they would be a little faster with gcc, but clang then spills
 * the chaining state and is twice as slow.) */
FX_SHANI_TARGET
void fx_sha256_x2_final_shani(const uint32_t *const st[], const fx_tail_in *const tl[], uint8_t *const out[])
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
