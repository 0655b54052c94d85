/* fx_perm: torch's CPU randperm replayed (see fx_perm.h). */
/* nanosleep (fx_sync.h) is POSIX: ask for it before any system header */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include "fx_perm.h"

#include <string.h>

#include "fx_sync.h"

enum { MT_N = 624, MT_M = 397 };

typedef struct {
    uint32_t s[MT_N];
    uint32_t out[MT_N];   /* tempered outputs of the current block */
    int next;             /* next unread entry of out */
} mt_state;

static void mt_seed(mt_state *mt, uint32_t seed)
{
    mt->s[0] = seed;
    for (uint32_t j = 1; j < MT_N; j++)
        mt->s[j] = 1812433253u * (mt->s[j - 1] ^ (mt->s[j - 1] >> 30)) + j;
    mt->next = MT_N;
}

/* One whole block: twist the state, temper all 624 words (two simple loops the compiler
 * vectorises; the one-word-at-a-time generator of the reference spends most of its time on
 * the branch that decides when to twist). */
static void mt_block(mt_state *mt)
{
    uint32_t *s = mt->s;
    int k;
#define MT_MIX(a, b) ((((a) & 0x80000000u) | ((b) & 0x7fffffffu)))
#define MT_MAG(y) (((y) & 1u) ? 0x9908b0dfu : 0u)
    for (k = 0; k < MT_N - MT_M; k++) {
        uint32_t y = MT_MIX(s[k], s[k + 1]);
        s[k] = s[k + MT_M] ^ (y >> 1) ^ MT_MAG(y);
    }
    for (; k < MT_N - 1; k++) {
        uint32_t y = MT_MIX(s[k], s[k + 1]);
        s[k] = s[k + (MT_M - MT_N)] ^ (y >> 1) ^ MT_MAG(y);
    }
    {
        uint32_t y = MT_MIX(s[MT_N - 1], s[0]);
        s[MT_N - 1] = s[MT_M - 1] ^ (y >> 1) ^ MT_MAG(y);
    }
#undef MT_MIX
#undef MT_MAG
    for (k = 0; k < MT_N; k++) {
        uint32_t y = s[k];
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c5680u;
        y ^= (y << 15) & 0xefc60000u;
        y ^= y >> 18;
        mt->out[k] = y;
    }
    mt->next = 0;
}

void fx_mt19937_fill(uint32_t seed, int64_t k, uint32_t *out)
{
    mt_state mt;
    mt_seed(&mt, seed);
    for (int64_t i = 0; i < k; i++) {
        if (mt.next == MT_N) mt_block(&mt);
        out[i] = mt.out[mt.next++];
    }
}

/* Shuffle p[0..n) by the forward Fisher-Yates of torch, but only its first `steps` steps
 * (steps <= n - 1): p[0..steps) are then final. After each block, base + (steps done) is
 * published to *progress (if not NULL). */
static void shuffle(mt_state *mt, int64_t *p, int64_t n, int64_t steps, volatile int64_t *progress, int64_t base)
{
    uint32_t z[MT_N];
    int64_t i = 0;
    while (i < steps) {
        if (mt->next == MT_N) mt_block(mt);
        int64_t take = MT_N - mt->next;
        if (take > steps - i) take = steps - i;
        const uint32_t *r = mt->out + mt->next;
        /* the remainders first: independent divisions pipeline, the swaps below don't
         * wait for them (n - i < 2^32, so 32-bit division is exact) */
        for (int64_t t = 0; t < take; t++) z[t] = r[t] % (uint32_t)(n - i - t);
        for (int64_t t = 0; t < take; t++) {
            int64_t a = i + t, b = a + z[t];
            int64_t v = p[a];
            p[a] = p[b];
            p[b] = v;
        }
        mt->next += (int)take;
        i += take;
        if (progress != NULL) fx_publish(progress, base + i);
    }
}

int fx_randperm_mt19937_progress(uint32_t seed, int64_t n, int64_t count, int64_t *out,
                                 volatile int64_t *progress)
{
    if (n < 1 || n >= FX_RANDPERM_MAX_N || count < 0) return -1;
    mt_state mt;
    mt_seed(&mt, seed);
    for (int64_t done = 0; done < count; done += n) {
        int64_t *p = out + done;
        int64_t steps = count - done >= n ? n - 1 : count - done;  /* the last one: partial */
        for (int64_t i = 0; i < n; i++) p[i] = i;
        shuffle(&mt, p, n, steps, progress, done);
        /* a full permutation's last place is final after its n - 1 steps */
        if (progress != NULL) fx_publish(progress, done + n < count ? done + n : count);
    }
    if (progress != NULL) fx_publish(progress, count);
    return 0;
}

int fx_randperm_mt19937(uint32_t seed, int64_t n, int64_t count, int64_t *out)
{
    return fx_randperm_mt19937_progress(seed, n, count, out, NULL);
}
