/*
 * Tiny benchmark for csrc/fx_sha256.c: ns/message for 60 B, 64 B, 1 kB and
 * 16 kB messages through fx_sha256_oneshot (and the streaming API at 60 B),
 * for every supported path.  Best of several runs, single thread.
 *
 *   bench_sha256 [seconds_per_measurement]
 *
 * Built with -DFX_BENCH_OPENSSL (and -lcrypto) it also times OpenSSL's
 * SHA256() and EVP_Digest() on the same buffers for a like-for-like baseline.
 */
#define _POSIX_C_SOURCE 200809L
#include "../fx_sha256.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef FX_BENCH_OPENSSL
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/evp.h>
#include <openssl/sha.h>
#endif

static volatile uint8_t g_sink;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { KIND_ONESHOT, KIND_STREAM, KIND_OSSL_SHA256, KIND_OSSL_EVP };

#ifdef FX_BENCH_OPENSSL
static EVP_MD *g_md;
#endif

static void run(int kind, fx_sha256_compress_fn fn, const uint8_t *buf, size_t size, size_t rows, long iters)
{
    uint8_t out[32];
    uint8_t acc = 0;
    long k;
    size_t r = 0;
    for (k = 0; k < iters; k++) {
        const uint8_t *p = buf + r * size;
        if (++r == rows)
            r = 0;
        switch (kind) {
        case KIND_ONESHOT:
            fx_sha256_oneshot(fn, p, size, out);
            break;
        case KIND_STREAM: {
            fx_sha256_ctx ctx;
            fx_sha256_init_with(&ctx, fn);
            fx_sha256_update(&ctx, p, size);
            fx_sha256_final(&ctx, out);
            break;
        }
#ifdef FX_BENCH_OPENSSL
        case KIND_OSSL_SHA256:
            SHA256(p, size, out);
            break;
        case KIND_OSSL_EVP:
            EVP_Digest(p, size, out, NULL, g_md, NULL);
            break;
#endif
        default:
            (void)fn;
            break;
        }
        acc ^= out[0];
    }
    g_sink ^= acc;
}

/* best-of-5 ns per message */
static double measure(int kind, fx_sha256_compress_fn fn, const uint8_t *buf, size_t size, size_t rows, double secs)
{
    long iters = 16;
    double best = 1e30, t;
    int rep;
    /* calibrate */
    for (;;) {
        double t0 = now_s();
        run(kind, fn, buf, size, rows, iters);
        t = now_s() - t0;
        if (t > secs / 10)
            break;
        iters *= 4;
    }
    iters = (long)((double)iters * (secs / 5) / t) + 1;
    for (rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        run(kind, fn, buf, size, rows, iters);
        t = (now_s() - t0) / (double)iters;
        if (t < best)
            best = t;
    }
    return best * 1e9;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = { 60, 64, 1024, 16384 };
    enum { NSIZES = sizeof(sizes) / sizeof(sizes[0]) };
    double secs = argc > 1 ? atof(argv[1]) : 0.5;
    size_t total = 1u << 20, i, s;
    uint8_t *buf = (uint8_t *)malloc(total + 64);
    int impl;

    for (i = 0; i < total + 64; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);
    if (fx_sha256_select(FX_SHA256_AUTO) != FX_OK)
        fprintf(stderr, "warning: select(AUTO) failed\n");
    printf("selected: %s\n", fx_sha256_impl_name(fx_sha256_current()));
    printf("%-22s", "ns/message (MB/s)");
    for (s = 0; s < NSIZES; s++)
        printf("  %18zu B", sizes[s]);
    printf("\n");

    for (impl = 0; impl < FX_SHA256_NIMPL; impl++) {
        fx_sha256_compress_fn fn = fx_sha256_compress_for(impl);
        char label[64];
        if (!fn)
            continue;
        snprintf(label, sizeof(label), "%s oneshot", fx_sha256_impl_name(impl));
        printf("%-22s", label);
        for (s = 0; s < NSIZES; s++) {
            size_t rows = total / sizes[s];
            double ns = measure(KIND_ONESHOT, fn, buf, sizes[s], rows > 4096 ? 4096 : rows, secs);
            printf("  %8.1f (%7.1f)", ns, (double)sizes[s] / ns * 1e3);
        }
        printf("\n");
        snprintf(label, sizeof(label), "%s stream", fx_sha256_impl_name(impl));
        printf("%-22s", label);
        for (s = 0; s < NSIZES; s++) {
            size_t rows = total / sizes[s];
            double ns = measure(KIND_STREAM, fn, buf, sizes[s], rows > 4096 ? 4096 : rows, secs);
            printf("  %8.1f (%7.1f)", ns, (double)sizes[s] / ns * 1e3);
        }
        printf("\n");
        fflush(stdout);
    }
#ifdef FX_BENCH_OPENSSL
    g_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    {
        int kinds[2] = { KIND_OSSL_SHA256, KIND_OSSL_EVP };
        const char *names[2] = { "openssl SHA256()", "openssl EVP_Digest" };
        int k;
        for (k = 0; k < 2; k++) {
            printf("%-22s", names[k]);
            for (s = 0; s < NSIZES; s++) {
                size_t rows = total / sizes[s];
                double ns = measure(kinds[k], NULL, buf, sizes[s], rows > 4096 ? 4096 : rows, secs);
                printf("  %8.1f (%7.1f)", ns, (double)sizes[s] / ns * 1e3);
            }
            printf("\n");
        }
    }
    EVP_MD_free(g_md);
#endif
    free(buf);
    return 0;
}
