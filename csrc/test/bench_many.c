/*
 * Benchmark of fx_sha256_many_* against hashing the same rows one at a time
 * (fx_sha256_oneshot for one-piece rows, init/update/final for segmented
 * ones), single thread, with the current impl.  Calls are made on chunks of
 * CHUNK consecutive rows, as the parallel caller does.  Cases are measured
 * in interleaved rounds (single, many, single, many, ...) and the median
 * ns/row over the rounds is reported, since the machine may be shared.
 *
 *   bench_many [rounds] [seconds_per_measurement] [impl-name]
 */
#define _POSIX_C_SOURCE 200809L
#include "../fx_sha256.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { CHUNK = 128, MAXROUNDS = 64 };

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

/* A case: n rows, each either one piece (off[i]..off[i+1] of data) or a list
 * of segments (segs / seg_start). */
typedef struct {
    const char *name;
    int64_t n;
    uint8_t *data;
    int64_t *off;
    fx_seg *segs;
    int64_t *seg_start;
    double bytes_per_row;
} bcase;

static int g_impl;
static uint8_t *g_out;

static void run_single(const bcase *c)
{
    fx_sha256_compress_fn fn = fx_sha256_compress_for(g_impl);
    int64_t i;
    if (c->segs) {
        for (i = 0; i < c->n; i++) {
            fx_sha256_ctx ctx;
            int64_t s;
            fx_sha256_init_with(&ctx, fn);
            for (s = c->seg_start[i]; s < c->seg_start[i + 1]; s++)
                fx_sha256_update(&ctx, c->segs[s].ptr, c->segs[s].len);
            fx_sha256_final(&ctx, g_out + 32 * i);
        }
    } else {
        for (i = 0; i < c->n; i++)
            fx_sha256_oneshot(fn, c->data + c->off[i], (size_t)(c->off[i + 1] - c->off[i]), g_out + 32 * i);
    }
}

static void run_many(const bcase *c)
{
    int64_t s;
    for (s = 0; s < c->n; s += CHUNK) {
        int64_t k = c->n - s < CHUNK ? c->n - s : CHUNK;
        if (c->segs)
            fx_sha256_many_segs(g_impl, c->segs, c->seg_start + s, k, g_out + 32 * s);
        else
            fx_sha256_many_offsets64(g_impl, c->data, c->off + s, 1, k, g_out + 32 * s);
    }
}

/* ns per row, running the whole case repeatedly for about secs seconds. */
static double measure(void (*fn)(const bcase *), const bcase *c, double secs)
{
    long reps = 0;
    double t0 = now_s(), t;
    do {
        fn(c);
        reps++;
        t = now_s() - t0;
    } while (t < secs);
    return t / (double)reps / (double)c->n * 1e9;
}

static uint8_t *random_bytes(size_t n)
{
    uint8_t *p = (uint8_t *)malloc(n ? n : 1);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    size_t i;
    for (i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    return p;
}

/* n contiguous rows of the given lengths (len_of(i)). */
static bcase make_rows(const char *name, int64_t n, size_t (*len_of)(int64_t))
{
    bcase c;
    int64_t i;
    memset(&c, 0, sizeof(c));
    c.name = name;
    c.n = n;
    c.off = (int64_t *)malloc(((size_t)n + 1) * sizeof(int64_t));
    c.off[0] = 0;
    for (i = 0; i < n; i++)
        c.off[i + 1] = c.off[i] + (int64_t)len_of(i);
    c.data = random_bytes((size_t)c.off[n]);
    c.bytes_per_row = (double)c.off[n] / (double)n;
    return c;
}

static size_t len60(int64_t i) { (void)i; return 60; }
static size_t len1k(int64_t i) { (void)i; return 1024; }
static size_t len16k(int64_t i) { (void)i; return 16384; }
/* 20..200 bytes, varying */
static size_t lenvar(int64_t i) { return 20 + (size_t)((i * 2654435761u) >> 7) % 181; }
/* one 64 MB row at index 5, the rest 60 B */
static size_t lenhuge(int64_t i) { return i == 5 ? (size_t)64 << 20 : 60; }

/* rows of 3 fields of ~1.2 kB, each after a 9-10 byte header segment, over
 * one buffer: 6 segments, ~3.6 kB per row */
static bcase make_segmented(int64_t n)
{
    bcase c;
    size_t pos = 0;
    int64_t i, k = 0;
    memset(&c, 0, sizeof(c));
    c.name = "3.6 kB, 6 segs";
    c.n = n;
    c.segs = (fx_seg *)malloc((size_t)n * 6 * sizeof(fx_seg));
    c.seg_start = (int64_t *)malloc(((size_t)n + 1) * sizeof(int64_t));
    c.data = random_bytes((size_t)n * 3700);
    for (i = 0; i < n; i++) {
        int f;
        c.seg_start[i] = k;
        for (f = 0; f < 3; f++) {
            size_t hdr = 9 + (size_t)((i + f) & 1), body = 1150 + (size_t)((i * 7 + f * 13) % 100);
            c.segs[k].ptr = c.data + pos;
            c.segs[k++].len = hdr;
            pos += hdr;
            c.segs[k].ptr = c.data + pos;
            c.segs[k++].len = body;
            pos += body;
        }
    }
    c.seg_start[n] = k;
    c.bytes_per_row = (double)pos / (double)n;
    return c;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    double secs = argc > 2 ? atof(argv[2]) : 0.1;
    bcase cases[8];
    int nc = 0, r, k;
    double res[8][2][MAXROUNDS];

    g_impl = fx_sha256_current();
    if (argc > 3 && (fx_sha256_impl_parse(argv[3], &g_impl) != FX_OK || fx_sha256_select(g_impl) != FX_OK)) {
        fprintf(stderr, "impl %s not available\n", argv[3]);
        return 2;
    }
    g_impl = fx_sha256_current();
    if (rounds > MAXROUNDS)
        rounds = MAXROUNDS;
    cases[nc++] = make_rows("60 B", 65536, len60);
    cases[nc++] = make_rows("20..200 B", 65536, lenvar);
    cases[nc++] = make_rows("1 kB", 8192, len1k);
    cases[nc++] = make_segmented(2048);
    cases[nc++] = make_rows("16 kB", 512, len16k);
    cases[nc++] = make_rows("64 MB + 60 B rows", 20000, lenhuge);
    g_out = (uint8_t *)malloc(32 * 65536);

    /* the two ways must agree */
    for (k = 0; k < nc; k++) {
        uint8_t *a = (uint8_t *)malloc(32 * (size_t)cases[k].n);
        run_single(&cases[k]);
        memcpy(a, g_out, 32 * (size_t)cases[k].n);
        run_many(&cases[k]);
        if (memcmp(a, g_out, 32 * (size_t)cases[k].n)) {
            printf("MISMATCH in case %s\n", cases[k].name);
            return 1;
        }
        free(a);
    }
    for (r = 0; r < rounds; r++)
        for (k = 0; k < nc; k++) {
            double s = k == nc - 1 ? secs * 5 : secs;
            res[k][0][r] = measure(run_single, &cases[k], s);
            res[k][1][r] = measure(run_many, &cases[k], s);
        }
    printf("impl %s, single thread, chunks of %d rows, median of %d rounds\n", fx_sha256_impl_name(g_impl), CHUNK,
           rounds);
    printf("  %-20s %12s %12s %8s %10s\n", "rows", "single ns", "many ns", "speedup", "many GB/s");
    for (k = 0; k < nc; k++) {
        double s, m;
        qsort(res[k][0], (size_t)rounds, sizeof(double), cmp_double);
        qsort(res[k][1], (size_t)rounds, sizeof(double), cmp_double);
        s = res[k][0][rounds / 2];
        m = res[k][1][rounds / 2];
        printf("  %-20s %12.1f %12.1f %7.2fx %10.2f\n", cases[k].name, s, m, s / m, cases[k].bytes_per_row / m);
    }
    return 0;
}
