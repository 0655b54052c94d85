/*
 * Standalone test harness for csrc/fx_sha256.c.
 *
 *   test_sha256 [options] VECTOR_DIR
 *
 * VECTOR_DIR holds the NIST CAVP files SHA256ShortMsg.rsp, SHA256LongMsg.rsp
 * and SHA256Monte.rsp (cryptography_vectors/hashes/SHA2/ from the PyPI
 * package cryptography-vectors).
 *
 * Options:
 *   --require NAME   fail unless impl NAME is compiled, supported and chosen
 *                    by fx_sha256_select(AUTO) (e.g. armv8-crypto under qemu)
 *   --random N       number of random-length messages (default 3000)
 *   --seed S         PRNG seed (default fixed)
 *   --big            also hash a 4 GiB + 77 byte message (64-bit only)
 *
 * Every compiled+supported path is checked against the NIST vectors (oneshot
 * and streaming), then random lengths 0..70000 at random alignments against
 * the portable path, and streaming in random chunk sizes against oneshot.
 * Ends with "N passed, M failed"; exit status 0 only if nothing failed.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../fx_sha256.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static long g_pass, g_fail;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (cond) {                                                       \
            g_pass++;                                                     \
        } else {                                                          \
            g_fail++;                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

/* ---------------------------------------------------------------- helpers */

static uint64_t g_rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
    /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decode hex (stops at the first non-hex char); returns byte count or -1. */
static long unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = 0;
    while (hexval((unsigned char)s[0]) >= 0) {
        int hi = hexval((unsigned char)s[0]), lo = hexval((unsigned char)s[1]);
        if (lo < 0 || n >= cap)
            return -1;
        out[n++] = (uint8_t)(hi * 16 + lo);
        s += 2;
    }
    return (long)n;
}

static void tohex(const uint8_t *md, char out[65])
{
    static const char d[] = "0123456789abcdef";
    int i;
    for (i = 0; i < 32; i++) {
        out[2 * i] = d[md[i] >> 4];
        out[2 * i + 1] = d[md[i] & 15];
    }
    out[64] = 0;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (char *)malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Streaming hash, update() in random chunk sizes (including 0). */
static void stream_hash(fx_sha256_compress_fn fn, const uint8_t *msg, size_t len, uint8_t out[32])
{
    fx_sha256_ctx ctx;
    size_t off = 0;
    fx_sha256_init_with(&ctx, fn);
    fx_sha256_update(&ctx, NULL, 0);
    while (off < len) {
        uint64_t r = rnd();
        size_t left = len - off, n;
        switch (r & 3) {
        case 0: n = (size_t)((r >> 8) % 4); break;
        case 1: n = (size_t)((r >> 8) % 65); break;
        case 2: n = (size_t)((r >> 8) % 300); break;
        default: n = (size_t)((r >> 8) % (left + 1)); break;
        }
        if (n > left)
            n = left;
        fx_sha256_update(&ctx, msg + off, n);
        off += n;
    }
    fx_sha256_final(&ctx, out);
}

/* ------------------------------------------------------------ NIST files */

typedef struct {
    size_t len;
    uint8_t *msg;
    uint8_t md[32];
} vec_t;

/* Parse Len/Msg/MD triples; returns count, vectors in *out (malloc'd). */
static size_t parse_msg_rsp(const char *path, vec_t **out)
{
    char *text = read_file(path), *line, *save = NULL;
    size_t n = 0, cap = 0;
    vec_t *v = NULL;
    long bits = -1;
    uint8_t *msg = NULL;

    *out = NULL;
    if (!text)
        return 0;
    for (line = strtok_r(text, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        if (!strncmp(line, "Len = ", 6)) {
            bits = atol(line + 6);
        } else if (!strncmp(line, "Msg = ", 6) && bits >= 0) {
            size_t blen = strlen(line + 6) / 2 + 1;
            long got;
            msg = (uint8_t *)malloc(blen);
            got = unhex(line + 6, msg, blen);
            if (got < 0 || (bits > 0 && got * 8 != bits)) {
                fprintf(stderr, "bad Msg line in %s\n", path);
                exit(2);
            }
        } else if (!strncmp(line, "MD = ", 5) && msg) {
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                v = (vec_t *)realloc(v, cap * sizeof(*v));
            }
            v[n].len = (size_t)(bits / 8);
            v[n].msg = msg;
            if (unhex(line + 5, v[n].md, 32) != 32) {
                fprintf(stderr, "bad MD line in %s\n", path);
                exit(2);
            }
            n++;
            msg = NULL;
            bits = -1;
        }
    }
    free(text);
    *out = v;
    return n;
}

typedef struct {
    uint8_t seed[32];
    size_t n;
    uint8_t md[100][32];
} monte_t;

static int parse_monte(const char *path, monte_t *m)
{
    char *text = read_file(path), *line, *save = NULL;
    int have_seed = 0;
    m->n = 0;
    if (!text)
        return 0;
    for (line = strtok_r(text, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        if (!strncmp(line, "Seed = ", 7))
            have_seed = unhex(line + 7, m->seed, 32) == 32;
        else if (!strncmp(line, "MD = ", 5) && m->n < 100 && unhex(line + 5, m->md[m->n], 32) == 32)
            m->n++;
    }
    free(text);
    return have_seed && m->n == 100;
}

/* ----------------------------------------------------------- test groups */

static void test_msg_vectors(const char *label, int impl, const vec_t *v, size_t n)
{
    fx_sha256_compress_fn fn = fx_sha256_compress_for(impl);
    size_t i, ok = 0;
    uint8_t md[32], md2[32];
    char hx[65];
    for (i = 0; i < n; i++) {
        int good;
        fx_sha256_oneshot(fn, v[i].msg, v[i].len, md);
        stream_hash(fn, v[i].msg, v[i].len, md2);
        good = !memcmp(md, v[i].md, 32) && !memcmp(md2, v[i].md, 32);
        tohex(md, hx);
        CHECK(good, "%s %s vector %zu (len %zu): got %s", fx_sha256_impl_name(impl), label, i, v[i].len, hx);
        ok += (size_t)good;
    }
    printf("  %-13s NIST %-9s %3zu/%zu pass\n", fx_sha256_impl_name(impl), label, ok, n);
}

static void test_monte(int impl, const monte_t *m)
{
    fx_sha256_compress_fn fn = fx_sha256_compress_for(impl);
    uint8_t seed[32], buf[96];
    size_t j, ok = 0;
    int i;
    memcpy(seed, m->seed, 32);
    for (j = 0; j < 100; j++) {
        int good;
        /* buf = MD[i-3] || MD[i-2] || MD[i-1] */
        memcpy(buf, seed, 32);
        memcpy(buf + 32, seed, 32);
        memcpy(buf + 64, seed, 32);
        for (i = 3; i < 1003; i++) {
            uint8_t md[32];
            fx_sha256_oneshot(fn, buf, 96, md);
            memmove(buf, buf + 32, 64);
            memcpy(buf + 64, md, 32);
        }
        memcpy(seed, buf + 64, 32);
        good = !memcmp(seed, m->md[j], 32);
        CHECK(good, "%s Monte checkpoint %zu", fx_sha256_impl_name(impl), j);
        ok += (size_t)good;
    }
    printf("  %-13s NIST %-9s %3zu/100 pass\n", fx_sha256_impl_name(impl), "Monte", ok);
}

static void test_api(const char *require)
{
    int i, n_supported = 0, best = FX_SHA256_PORTABLE;

    CHECK(fx_sha256_impl_compiled(FX_SHA256_PORTABLE) == 1, "portable compiled");
    CHECK(fx_sha256_impl_supported(FX_SHA256_PORTABLE) == 1, "portable supported");
    CHECK(fx_sha256_impl_compiled(FX_SHA256_AUTO) == 0 && fx_sha256_impl_compiled(FX_SHA256_NIMPL) == 0,
          "compiled(bad id)");
    CHECK(fx_sha256_impl_supported(-2) == 0 && fx_sha256_impl_supported(FX_SHA256_NIMPL) == 0, "supported(bad id)");
    CHECK(fx_sha256_impl_name(-2) == NULL && fx_sha256_impl_name(FX_SHA256_NIMPL) == NULL, "name(bad id)");
    CHECK(strcmp(fx_sha256_impl_name(FX_SHA256_PORTABLE), "portable") == 0, "name portable");
    CHECK(strcmp(fx_sha256_impl_name(FX_SHA256_SHANI), "sha-ni") == 0, "name sha-ni");
    CHECK(strcmp(fx_sha256_impl_name(FX_SHA256_ARMV8), "armv8-crypto") == 0, "name armv8");
    CHECK(fx_sha256_impl_from_name("auto") == FX_SHA256_AUTO, "from_name auto");
    CHECK(fx_sha256_impl_from_name("AUTO") == FX_SHA256_AUTO, "from_name AUTO");
    CHECK(fx_sha256_impl_from_name("bogus") == -1 && fx_sha256_impl_from_name(NULL) == -1, "from_name unknown");
    CHECK(fx_sha256_impl_from_name("") == -1 && fx_sha256_impl_from_name("sha-ni ") == -1, "from_name near-miss");
    CHECK(fx_sha256_impl_from_name("shani") == FX_SHA256_SHANI, "from_name alias");
    {
        int id = 12345;
        CHECK(fx_sha256_impl_parse("bogus", &id) == FX_ERR_INVALID && id == 12345, "parse unknown");
        CHECK(fx_sha256_impl_parse("auto", &id) == FX_OK && id == FX_SHA256_AUTO, "parse auto");
    }
    for (i = 0; i < FX_SHA256_NIMPL; i++) {
        const char *nm = fx_sha256_impl_name(i);
        int sup = fx_sha256_impl_supported(i);
        CHECK(fx_sha256_impl_from_name(nm) == i, "from_name(name(%d))", i);
        CHECK(!sup || fx_sha256_impl_compiled(i), "supported implies compiled (%d)", i);
        printf("  impl %d %-13s compiled=%d supported=%d\n", i, nm, fx_sha256_impl_compiled(i), sup);
        if (sup) {
            n_supported++;
            best = i;
            CHECK(fx_sha256_compress_for(i) != NULL, "compress_for(%d) != NULL", i);
            CHECK(fx_sha256_selftest(i) == FX_OK, "selftest(%s)", nm);
            CHECK(fx_sha256_select(i) == FX_OK, "select(%s)", nm);
            CHECK(fx_sha256_current() == i, "current after select(%s)", nm);
        } else {
            CHECK(fx_sha256_compress_for(i) == NULL, "compress_for(unsupported %d) == NULL", i);
            CHECK(fx_sha256_selftest(i) == FX_ERR_UNSUPPORTED, "selftest(unsupported %d)", i);
            CHECK(fx_sha256_select(i) == FX_ERR_UNSUPPORTED, "select(unsupported %d)", i);
            CHECK(fx_sha256_current() != i, "current not changed to unsupported %d", i);
        }
    }
    CHECK(fx_sha256_select(FX_SHA256_NIMPL) == FX_ERR_INVALID && fx_sha256_select(-7) == FX_ERR_INVALID,
          "select(bad id)");
    CHECK(fx_sha256_selftest(FX_SHA256_NIMPL) == FX_ERR_INVALID, "selftest(bad id)");
    CHECK(fx_sha256_compress_for(FX_SHA256_NIMPL) == NULL, "compress_for(bad id)");
    CHECK(fx_sha256_select(FX_SHA256_AUTO) == FX_OK, "select(AUTO)");
    CHECK(fx_sha256_current() == best, "AUTO picks best supported (%d vs %d)", fx_sha256_current(), best);
    CHECK(fx_sha256_compress_for(FX_SHA256_AUTO) == fx_sha256_compress_for(best), "compress_for(AUTO)");
    {
        fx_sha256_ctx ctx;
        fx_sha256_init(&ctx);
        CHECK(ctx.compress == fx_sha256_compress_for(best), "init captures current fn");
    }
    printf("  supported paths: %d, AUTO selects %s\n", n_supported, fx_sha256_impl_name(fx_sha256_current()));
    if (require) {
        int want = fx_sha256_impl_from_name(require);
        CHECK(want >= 0 && fx_sha256_impl_supported(want) && fx_sha256_current() == want,
              "--require %s: not supported/selected", require);
    }
}

/* Random lengths 0..70000 at random alignments: every path vs portable
 * oneshot, streaming vs oneshot. */
static void test_random(int nmsg)
{
    enum { MAXLEN = 70000, SLACK = 64 };
    uint8_t *buf = (uint8_t *)malloc(MAXLEN + SLACK);
    fx_sha256_compress_fn port = fx_sha256_compress_for(FX_SHA256_PORTABLE);
    long ok[FX_SHA256_NIMPL] = { 0 }, tot[FX_SHA256_NIMPL] = { 0 };
    int t, impl;
    size_t i;

    for (i = 0; i < MAXLEN + SLACK; i++)
        buf[i] = (uint8_t)rnd();
    for (t = 0; t < nmsg; t++) {
        uint64_t r = rnd();
        size_t len, off = (size_t)(r % SLACK);
        uint8_t ref[32], md[32], md2[32];
        if (t <= 300)
            len = (size_t)t; /* every short length */
        else if (r & (1ull << 40))
            len = (size_t)((r >> 8) % (MAXLEN + 1));
        else
            len = (size_t)((r >> 8) % 1100);
        if (t == 301)
            len = MAXLEN;
        fx_sha256_oneshot(port, buf + off, len, ref);
        for (impl = 0; impl < FX_SHA256_NIMPL; impl++) {
            fx_sha256_compress_fn fn = fx_sha256_compress_for(impl);
            int good;
            if (!fn)
                continue;
            fx_sha256_oneshot(fn, buf + off, len, md);
            stream_hash(fn, buf + off, len, md2);
            good = !memcmp(md, ref, 32) && !memcmp(md2, ref, 32);
            CHECK(good, "random: %s len %zu off %zu", fx_sha256_impl_name(impl), len, off);
            ok[impl] += good;
            tot[impl]++;
        }
    }
    for (impl = 0; impl < FX_SHA256_NIMPL; impl++)
        if (tot[impl])
            printf("  %-13s random    %ld/%ld pass (oneshot + random-chunk streaming vs portable)\n",
                   fx_sha256_impl_name(impl), ok[impl], tot[impl]);

    /* Exactly-sized heap copies (lengths 0..300 and a few big ones): under
     * -fsanitize=address any read outside the message is caught. */
    for (t = 0; t <= 310; t++) {
        size_t len = t <= 300 ? (size_t)t : (size_t)(rnd() % (MAXLEN + 1));
        uint8_t *m = (uint8_t *)malloc(len ? len : 1);
        uint8_t ref[32], md[32], md2[32];
        memcpy(m, buf + 7, len);
        fx_sha256_oneshot(port, m, len, ref);
        for (impl = 0; impl < FX_SHA256_NIMPL; impl++) {
            fx_sha256_compress_fn fn = fx_sha256_compress_for(impl);
            if (!fn)
                continue;
            fx_sha256_oneshot(fn, m, len, md);
            stream_hash(fn, m, len, md2);
            CHECK(!memcmp(md, ref, 32) && !memcmp(md2, ref, 32), "exact-size: %s len %zu",
                  fx_sha256_impl_name(impl), len);
            /* output aliasing the input */
            if (len >= 32) {
                fx_sha256_oneshot(fn, m, len, m);
                CHECK(!memcmp(m, ref, 32), "out aliasing data: %s len %zu", fx_sha256_impl_name(impl), len);
                memcpy(m, buf + 7, 32);
            }
        }
        free(m);
    }
    printf("  exact-size heap messages 0..300 + 10 random: done\n");

    /* Guard pages (works without sanitizers, e.g. under qemu): messages that
     * end right before an inaccessible page or start right after one. */
    {
        long pg = sysconf(_SC_PAGESIZE);
        size_t span = 4 * (size_t)pg;
        uint8_t *map = (uint8_t *)mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        long nok = 0, ntot = 0;
        if (map == MAP_FAILED) {
            printf("  guard pages: mmap failed, skipped\n");
        } else {
            uint8_t *lo_guard = map, *mid = map + pg, *hi_guard = map + 3 * (size_t)pg;
            mprotect(lo_guard, (size_t)pg, PROT_NONE);
            mprotect(hi_guard, (size_t)pg, PROT_NONE);
            memcpy(mid, buf, 1024);
            for (t = 0; t <= 700; t++) {
                size_t len = (size_t)t;
                int where;
                for (where = 0; where < 2; where++) {
                    const uint8_t *m = where ? mid : hi_guard - len; /* start after / end before a guard */
                    uint8_t ref[32], md[32];
                    fx_sha256_oneshot(port, m, len, ref);
                    for (impl = 0; impl < FX_SHA256_NIMPL; impl++) {
                        fx_sha256_compress_fn fn = fx_sha256_compress_for(impl);
                        if (!fn)
                            continue;
                        fx_sha256_oneshot(fn, m, len, md);
                        ntot++;
                        nok += !memcmp(md, ref, 32);
                        stream_hash(fn, m, len, md);
                        ntot++;
                        nok += !memcmp(md, ref, 32);
                    }
                }
            }
            CHECK(nok == ntot, "guard pages: %ld/%ld", nok, ntot);
            printf("  guard pages (no read outside the message), lengths 0..700: %ld/%ld pass\n", nok, ntot);
            munmap(map, span);
        }
    }
    free(buf);
}

/* Several threads: the very first use of the library (lazy select racing),
 * then concurrent hashing with a shared compress fn. */
typedef struct {
    const uint8_t *buf;
    int id;
    int bad;
    int impl_seen;
} thr_t;

static const char *const k_thread_md = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

static void *thread_main(void *arg)
{
    thr_t *t = (thr_t *)arg;
    fx_sha256_ctx ctx;
    uint8_t md[32], want[32];
    int k;
    char hx[65];
    t->impl_seen = fx_sha256_current();
    fx_sha256_init(&ctx);
    fx_sha256_update(&ctx, "abc", 3);
    fx_sha256_final(&ctx, md);
    tohex(md, hx);
    t->bad = strcmp(hx, k_thread_md) != 0;
    fx_sha256_oneshot(NULL, t->buf, 5000, want);
    for (k = 0; k < 300; k++) {
        fx_sha256_oneshot(ctx.compress, t->buf, 5000, md);
        t->bad |= memcmp(md, want, 32) != 0;
    }
    return NULL;
}

static void test_threads_first_use(void)
{
    enum { NT = 4 };
    pthread_t th[NT];
    thr_t st[NT];
    uint8_t *buf = (uint8_t *)malloc(5000);
    int i;
    for (i = 0; i < 5000; i++)
        buf[i] = (uint8_t)(i * 7 + 1);
    for (i = 0; i < NT; i++) {
        st[i].buf = buf;
        st[i].id = i;
        st[i].bad = 1;
        pthread_create(&th[i], NULL, thread_main, &st[i]);
    }
    for (i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    for (i = 0; i < NT; i++) {
        CHECK(!st[i].bad, "thread %d hash mismatch", i);
        CHECK(st[i].impl_seen == st[0].impl_seen && st[i].impl_seen >= 0, "thread %d saw impl %d", i, st[i].impl_seen);
    }
    printf("  %d threads, lazy select on first use -> %s\n", NT, fx_sha256_impl_name(st[0].impl_seen));
    free(buf);
}

/* 2^32 + 77 zero bytes: checks the >4 GiB length handling (oneshot size_t
 * arithmetic and the 64-bit bit count).  Expected digest from hashlib. */
static void test_big(void)
{
    const char *want = "0d6f9075eac4ce4f67177dd825ea22144ec98f20902c6a04809f2b28909b8cd4";
    uint64_t len64 = (1ull << 32) + 77;
    size_t len;
    uint8_t *z, md[32];
    char hx[65];
    fx_sha256_ctx ctx;
    size_t off;
    if (sizeof(size_t) < 8) {
        printf("  big: skipped (32-bit size_t)\n");
        return;
    }
    len = (size_t)len64;
    z = (uint8_t *)calloc(len, 1);
    if (!z) {
        printf("  big: skipped (calloc failed)\n");
        return;
    }
    fx_sha256_oneshot(NULL, z, len, md);
    tohex(md, hx);
    CHECK(!strcmp(hx, want), "big oneshot (%s): %s", fx_sha256_impl_name(fx_sha256_current()), hx);
    fx_sha256_init(&ctx);
    for (off = 0; off < len;) {
        size_t n = len - off < ((size_t)3 << 30) + 5 ? len - off : ((size_t)3 << 30) + 5;
        fx_sha256_update(&ctx, z + off, n);
        off += n;
    }
    fx_sha256_final(&ctx, md);
    tohex(md, hx);
    CHECK(!strcmp(hx, want), "big streaming: %s", hx);
    printf("  %-13s 4 GiB+77 B message: %s\n", fx_sha256_impl_name(fx_sha256_current()),
           strcmp(hx, want) ? "FAIL" : "pass");
    free(z);
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *require = NULL;
    int nrandom = 3000, big = 0, a, impl;
    char path[4096];
    vec_t *shortv, *longv;
    size_t nshort, nlong, i;
    monte_t monte;

    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--require") && a + 1 < argc)
            require = argv[++a];
        else if (!strcmp(argv[a], "--random") && a + 1 < argc)
            nrandom = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--seed") && a + 1 < argc)
            g_rng = strtoull(argv[++a], NULL, 0) | 1;
        else if (!strcmp(argv[a], "--big"))
            big = 1;
        else
            dir = argv[a];
    }
    if (!dir) {
        fprintf(stderr, "usage: %s [--require NAME] [--random N] [--seed S] [--big] VECTOR_DIR\n", argv[0]);
        return 2;
    }

    printf("threads / lazy selection:\n");
    test_threads_first_use();
    printf("API:\n");
    test_api(require);

    snprintf(path, sizeof(path), "%s/SHA256ShortMsg.rsp", dir);
    nshort = parse_msg_rsp(path, &shortv);
    snprintf(path, sizeof(path), "%s/SHA256LongMsg.rsp", dir);
    nlong = parse_msg_rsp(path, &longv);
    snprintf(path, sizeof(path), "%s/SHA256Monte.rsp", dir);
    CHECK(nshort == 65 && nlong == 64, "NIST files: %zu short, %zu long vectors (expected 65, 64)", nshort, nlong);
    CHECK(parse_monte(path, &monte), "NIST Monte file %s", path);

    printf("NIST CAVP:\n");
    for (impl = 0; impl < FX_SHA256_NIMPL; impl++) {
        if (!fx_sha256_impl_supported(impl)) {
            printf("  %-13s skipped (compiled=%d, not supported here)\n", fx_sha256_impl_name(impl),
                   fx_sha256_impl_compiled(impl));
            continue;
        }
        test_msg_vectors("ShortMsg", impl, shortv, nshort);
        test_msg_vectors("LongMsg", impl, longv, nlong);
        if (monte.n == 100)
            test_monte(impl, &monte);
    }
    printf("random (seed-driven):\n");
    test_random(nrandom);
    if (big) {
        printf("big:\n");
        test_big();
    }

    for (i = 0; i < nshort; i++)
        free(shortv[i].msg);
    for (i = 0; i < nlong; i++)
        free(longv[i].msg);
    free(shortv);
    free(longv);

    printf("%ld passed, %ld failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
