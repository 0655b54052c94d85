/*
 * Microbenchmark: SHA-NI compression of K independent 16 kB buffers with
 * their rounds interleaved in one instruction stream (K = 1..4), to pick the
 * lane count of the multi-message kernel for this CPU.
 *
 *   bench_interleave [runs] [seconds_per_run]
 *
 * Includes fx_sha256.c itself to reach the static lane macros.  Reports the
 * median over `runs` interleaved rounds (K = 1, 2, 3, 4, 1, 2, ...) of GB/s
 * per core (bytes of all lanes / time), single thread.
 */
#define _POSIX_C_SOURCE 200809L
#include "../fx_sha256.c"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if !FX_HAVE_SHANI
int main(void)
{
    printf("SHA-NI not compiled in: nothing to measure\n");
    return 0;
}
#else

#define FX_EACH3(STEP, ...) STEP(0, __VA_ARGS__) STEP(1, __VA_ARGS__) STEP(2, __VA_ARGS__)
#define FX_EACH4(STEP, ...) STEP(0, __VA_ARGS__) STEP(1, __VA_ARGS__) STEP(2, __VA_ARGS__) STEP(3, __VA_ARGS__)

FX_SHANI_TARGET static void x1(uint32_t *const st[], const uint8_t *const src[], size_t nblocks)
{
    FX_SHANI_LANES_BODY(FX_EACH1)
}
FX_SHANI_TARGET static void x3(uint32_t *const st[], const uint8_t *const src[], size_t nblocks)
{
    FX_SHANI_LANES_BODY(FX_EACH3)
}
FX_SHANI_TARGET static void x4(uint32_t *const st[], const uint8_t *const src[], size_t nblocks)
{
    FX_SHANI_LANES_BODY(FX_EACH4)
}
/* the production single-lane compress, for comparison with x1 */
static void x1_ref(uint32_t *const st[], const uint8_t *const src[], size_t nblocks)
{
    fx_sha256_compress_shani(st[0], src[0], nblocks);
}

typedef void (*lanes_fn)(uint32_t *const st[], const uint8_t *const src[], size_t nblocks);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { BUF = 16384, MAXRUNS = 64 };

static volatile uint32_t g_sink;

/* GB/s over all k lanes for about secs seconds. */
static double run(lanes_fn fn, int k, const uint8_t *buf, double secs)
{
    uint32_t state[4][8];
    uint32_t *st[4] = { state[0], state[1], state[2], state[3] };
    const uint8_t *src[4] = { buf, buf + BUF, buf + 2 * BUF, buf + 3 * BUF };
    long iters = 0;
    double t0 = now_s(), t;
    int l;
    memset(state, 0, sizeof(state));
    do {
        int i;
        for (i = 0; i < 16; i++)
            fn(st, src, BUF / 64);
        iters += 16;
        t = now_s() - t0;
    } while (t < secs);
    for (l = 0; l < k; l++)
        g_sink ^= state[l][0];
    return (double)iters * k * BUF / t * 1e-9;
}

int main(int argc, char **argv)
{
    static const struct { const char *name; lanes_fn fn; int k; } v[] = {
        { "1 lane (fx_sha256_compress_shani)", x1_ref, 1 },
        { "1 lane (lane macros)", x1, 1 },
        { "2 lanes", fx_sha256_x2_shani, 2 },
        { "3 lanes", x3, 3 },
        { "4 lanes", x4, 4 },
    };
    enum { NV = sizeof(v) / sizeof(v[0]) };
    int runs = argc > 1 ? atoi(argv[1]) : 9;
    double secs = argc > 2 ? atof(argv[2]) : 0.2;
    double res[NV][MAXRUNS];
    uint8_t *buf = (uint8_t *)malloc(4 * BUF);
    int r, i;

    if (!fx_sha256_impl_supported(FX_SHA256_SHANI)) {
        printf("CPU lacks SHA-NI\n");
        return 0;
    }
    if (runs > MAXRUNS)
        runs = MAXRUNS;
    for (i = 0; i < 4 * BUF; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 11);
    /* correctness: every lane count gives the single-lane result */
    {
        uint32_t ref[4][8], got[4][8];
        uint32_t *gp[4] = { got[0], got[1], got[2], got[3] };
        const uint8_t *src[4] = { buf, buf + BUF, buf + 2 * BUF, buf + 3 * BUF };
        int l, bad = 0;
        for (l = 0; l < 4; l++) {
            memcpy(ref[l], fx_sha256_IV, 32);
            fx_sha256_compress_portable(ref[l], src[l], BUF / 64);
        }
        for (i = 0; i < NV; i++) {
            for (l = 0; l < 4; l++)
                memcpy(got[l], fx_sha256_IV, 32);
            v[i].fn(gp, src, BUF / 64);
            for (l = 0; l < v[i].k; l++)
                bad |= memcmp(got[l], ref[l], 32) != 0;
        }
        if (bad) {
            printf("lane kernels disagree with portable!\n");
            return 1;
        }
    }
    for (r = 0; r < runs; r++)
        for (i = 0; i < NV; i++)
            res[i][r] = run(v[i].fn, v[i].k, buf, secs);
    printf("SHA-NI compress, 16 kB per lane, median of %d runs (min..max), single core:\n", runs);
    for (i = 0; i < NV; i++) {
        qsort(res[i], (size_t)runs, sizeof(double), cmp_double);
        printf("  %-36s %6.2f GB/s  (%5.2f .. %5.2f)\n", v[i].name, res[i][runs / 2], res[i][0], res[i][runs - 1]);
    }
    free(buf);
    return 0;
}
#endif
