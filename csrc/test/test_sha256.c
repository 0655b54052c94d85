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
 *   --many N         number of random batches for fx_sha256_many_* (default 150)
 *   --many-no-mb     no 1..3 MB messages in those batches (for slow emulators)
 *
 * Every compiled+supported path is checked against the NIST vectors (oneshot
 * and streaming), then random lengths 0..70000 at random alignments against
 * the portable path, and streaming in random chunk sizes against oneshot.
 * fx_sha256_many_* (every variant, every impl) are checked against portable
 * oneshot digests of the concatenated messages: random batches of 0..300
 * messages of random lengths and segmentations, guard pages, threads.
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
        CHECK(fx_sha256_impl_parse("bogus", &id) == FX_EINVAL && id == 12345, "parse unknown");
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
            CHECK(fx_sha256_selftest(i) == FX_EUNSUPPORTED, "selftest(unsupported %d)", i);
            CHECK(fx_sha256_select(i) == FX_EUNSUPPORTED, "select(unsupported %d)", i);
            CHECK(fx_sha256_current() != i, "current not changed to unsupported %d", i);
        }
    }
    CHECK(fx_sha256_select(FX_SHA256_NIMPL) == FX_EINVAL && fx_sha256_select(-7) == FX_EINVAL,
          "select(bad id)");
    CHECK(fx_sha256_selftest(FX_SHA256_NIMPL) == FX_EINVAL, "selftest(bad id)");
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

/* ----------------------------------------------------- many messages */

/* Impl ids to pass to fx_sha256_many_*: every supported impl, AUTO, and ids
 * that are unsupported or invalid (those fall back to the current impl). */
static int many_impls(int ids[FX_SHA256_NIMPL + 3])
{
    int n = 0, i;
    for (i = 0; i < FX_SHA256_NIMPL; i++)
        if (fx_sha256_impl_supported(i))
            ids[n++] = i;
    ids[n++] = FX_SHA256_AUTO;
    ids[n++] = 77;
    for (i = 0; i < FX_SHA256_NIMPL; i++)
        if (!fx_sha256_impl_supported(i)) {
            ids[n++] = i;
            break;
        }
    return n;
}

static const char *impl_label(int id)
{
    const char *s = fx_sha256_impl_name(id);
    return s ? s : "invalid-id";
}

enum { POOL = (3 << 20) + 4096 };
static uint8_t *g_pool; /* POOL random bytes */

/* Message lengths for the random batches: mostly short (every length 0..200
 * and the padding edges), some 1..20 kB, occasionally (if big) 1..3 MB. */
static size_t many_len(int big)
{
    static const size_t edge[] = { 0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 191, 192 };
    uint64_t r = rnd();
    switch (r % 16) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6:
        return (size_t)((r >> 8) % 201);
    case 7: case 8: case 9:
        return edge[(r >> 8) % (sizeof(edge) / sizeof(edge[0]))];
    case 15:
        if (big && (r >> 8) % 6 == 0)
            return (size_t)(1u << 20) + (size_t)((r >> 16) % (2u << 20));
        /* fall through */
    default:
        return 1024 + (size_t)((r >> 8) % (19 * 1024 + 1));
    }
}

/* A batch of n messages: msg[i] is an exact-size heap copy (ASan catches any
 * read past either end), ref[i] its portable oneshot digest. */
typedef struct {
    int64_t n;
    size_t *len;
    uint8_t **msg;
    uint8_t (*ref)[32];
    /* the same messages cut into segments */
    fx_seg *segs;
    int64_t *seg_start;
    int64_t nsegs, cap;
    uint8_t **own; /* exact-size segment copies to free */
    int64_t nown;
} batch_t;

static void batch_add_seg(batch_t *b, const uint8_t *p, size_t len)
{
    fx_seg s;
    if (b->nsegs == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 256;
        b->segs = (fx_seg *)realloc(b->segs, (size_t)b->cap * sizeof(fx_seg));
        b->own = (uint8_t **)realloc(b->own, (size_t)b->cap * sizeof(uint8_t *));
    }
    s.ptr = p;
    s.len = len;
    if (len == 0) {
        uint64_t r = rnd() % 3; /* an empty segment: NULL, or a valid pointer */
        s.ptr = r == 0 ? NULL : r == 1 ? p : g_pool + 5;
    } else if (rnd() & 1) {
        /* own exact-size copy, so over-reads past this segment are caught */
        uint8_t *c = (uint8_t *)malloc(len);
        memcpy(c, p, len);
        b->own[b->nown++] = c;
        s.ptr = c;
    }
    b->segs[b->nsegs++] = s;
}

/* Cut message m (len bytes) into segments in one of several styles. */
static void batch_cut(batch_t *b, const uint8_t *m, size_t len)
{
    uint64_t style = rnd() % 6;
    size_t pos = 0;
    if (len == 0 && (rnd() & 1))
        return; /* no segment at all */
    switch (style) {
    case 0: /* one segment */
        batch_add_seg(b, m, len);
        return;
    case 1: /* one segment between empty ones */
        batch_add_seg(b, m, 0);
        batch_add_seg(b, m, len);
        batch_add_seg(b, m + len, 0);
        return;
    case 2: /* 1-byte and empty segments (short messages), else random cuts */
        if (len <= 400) {
            while (pos < len) {
                size_t s = (size_t)(rnd() % 3);
                if (s > len - pos)
                    s = len - pos;
                batch_add_seg(b, m + pos, s);
                pos += s;
            }
            return;
        }
        /* fall through */
    case 3: { /* a few random cuts */
        int k = (int)(rnd() % 5) + 1;
        while (k-- > 0 && pos < len) {
            size_t s = (size_t)(rnd() % (len - pos + 1));
            batch_add_seg(b, m + pos, s);
            pos += s;
        }
        batch_add_seg(b, m + pos, len - pos);
        return;
    }
    default: /* rows of a table: small header segments (9, 10 bytes) around larger fields */
        while (pos < len) {
            size_t hdr = 9 + (size_t)(rnd() % 2), body = (size_t)(rnd() % 1300);
            if (hdr > len - pos)
                hdr = len - pos;
            batch_add_seg(b, m + pos, hdr);
            pos += hdr;
            if (body > len - pos)
                body = len - pos;
            batch_add_seg(b, m + pos, body);
            pos += body;
        }
        return;
    }
}

static void batch_make(batch_t *b, int64_t n, int mode)
{
    fx_sha256_compress_fn port = fx_sha256_compress_for(FX_SHA256_PORTABLE);
    size_t same = many_len(0);
    int64_t i;
    memset(b, 0, sizeof(*b));
    b->n = n;
    b->len = (size_t *)malloc(((size_t)n + 1) * sizeof(size_t));
    b->msg = (uint8_t **)malloc(((size_t)n + 1) * sizeof(uint8_t *));
    b->ref = (uint8_t(*)[32])malloc(((size_t)n + 1) * 32);
    b->seg_start = (int64_t *)malloc(((size_t)n + 1) * sizeof(int64_t));
    for (i = 0; i < n; i++) {
        size_t len = mode == 0 ? (size_t)(rnd() % 201) : mode == 3 ? same : many_len(mode == 2);
        size_t at = (size_t)(rnd() % (POOL - len + 1));
        b->len[i] = len;
        b->msg[i] = (uint8_t *)malloc(len ? len : 1);
        memcpy(b->msg[i], g_pool + at, len);
        fx_sha256_oneshot(port, b->msg[i], len, b->ref[i]);
        b->seg_start[i] = b->nsegs;
        batch_cut(b, b->msg[i], len);
    }
    b->seg_start[n] = b->nsegs;
}

static void batch_free(batch_t *b)
{
    int64_t i;
    for (i = 0; i < b->n; i++)
        free(b->msg[i]);
    for (i = 0; i < b->nown; i++)
        free(b->own[i]);
    free(b->len);
    free(b->msg);
    free(b->ref);
    free(b->seg_start);
    free(b->segs);
    free(b->own);
}

/* out (n digests + a canary) against ref; returns the first bad index or -1
 * (n if the canary after the digests was written). */
static int64_t digests_bad(const uint8_t *out, const uint8_t (*ref)[32], int64_t n)
{
    int64_t i, k;
    for (i = 0; i < n; i++)
        if (memcmp(out + 32 * i, ref[i], 32))
            return i;
    for (k = 0; k < 32; k++)
        if (out[32 * n + k] != 0xA5)
            return n;
    return -1;
}

static uint8_t *out_alloc(int64_t n)
{
    uint8_t *out = (uint8_t *)malloc(32 * (size_t)n + 32);
    memset(out, 0xA5, 32 * (size_t)n + 32);
    return out;
}

/* Contiguous buffer data[0..total) (exact-size heap block); offsets in units
 * of width; refs computed here. */
static void check_offsets(int impl, const uint8_t *data, const int64_t *off64, int64_t width, int64_t n,
                          const char *what, long *ok, long *tot)
{
    fx_sha256_compress_fn port = fx_sha256_compress_for(FX_SHA256_PORTABLE);
    uint8_t(*ref)[32] = (uint8_t(*)[32])malloc(((size_t)n + 1) * 32);
    int32_t *off32 = (int32_t *)malloc(((size_t)n + 1) * sizeof(int32_t));
    uint8_t *out = out_alloc(n);
    int64_t i, bad;
    int fits32 = 1;
    for (i = 0; i <= n; i++) {
        fits32 &= off64[i] <= INT32_MAX;
        off32[i] = (int32_t)off64[i];
    }
    for (i = 0; i < n; i++) {
        size_t len = (size_t)((off64[i + 1] - off64[i]) * width);
        fx_sha256_oneshot(port, len ? data + off64[i] * width : g_pool, len, ref[i]);
    }
    fx_sha256_many_offsets64(impl, data, off64, width, n, out);
    bad = digests_bad(out, (const uint8_t(*)[32])ref, n);
    CHECK(bad < 0, "many_offsets64 %s (%s) n=%lld width=%lld: bad message %lld", impl_label(impl), what,
          (long long)n, (long long)width, (long long)bad);
    *ok += bad < 0;
    ++*tot;
    if (fits32) {
        memset(out, 0xA5, 32 * (size_t)n + 32);
        fx_sha256_many_offsets32(impl, data, off32, width, n, out);
        bad = digests_bad(out, (const uint8_t(*)[32])ref, n);
        CHECK(bad < 0, "many_offsets32 %s (%s) n=%lld width=%lld: bad message %lld", impl_label(impl), what,
              (long long)n, (long long)width, (long long)bad);
        *ok += bad < 0;
        ++*tot;
    }
    free(out);
    free(off32);
    free(ref);
}

static void check_fixed(int impl, const uint8_t *data, int64_t row, int64_t n, const char *what, long *ok,
                        long *tot)
{
    fx_sha256_compress_fn port = fx_sha256_compress_for(FX_SHA256_PORTABLE);
    uint8_t(*ref)[32] = (uint8_t(*)[32])malloc(((size_t)n + 1) * 32);
    uint8_t *out = out_alloc(n);
    int64_t i, bad;
    for (i = 0; i < n; i++)
        fx_sha256_oneshot(port, row ? data + i * row : g_pool, (size_t)row, ref[i]);
    fx_sha256_many_fixed(impl, data, row, n, out);
    bad = digests_bad(out, (const uint8_t(*)[32])ref, n);
    CHECK(bad < 0, "many_fixed %s (%s) n=%lld row=%lld: bad message %lld", impl_label(impl), what, (long long)n,
          (long long)row, (long long)bad);
    *ok += bad < 0;
    ++*tot;
    free(out);
    free(ref);
}

/* Random batches through every fx_sha256_many_* on every impl. */
static void test_many_random(int nbatch, int big)
{
    int ids[FX_SHA256_NIMPL + 3], nid = many_impls(ids), b, k;
    long ok = 0, tot = 0;
    int64_t msgs = 0;
    uint64_t bytes = 0;

    for (b = 0; b < nbatch; b++) {
        batch_t bt;
        int64_t n, i, bad, total = 0;
        int mode = (int)(rnd() % 4); /* 0 short, 1 mixed, 2 mixed + MBs, 3 all one length */
        uint8_t *cat, *out;
        int64_t *off, *lens, base, width;
        if (!big && mode == 2)
            mode = 1;
        n = b < 3 ? b : (int64_t)(rnd() % 301); /* n = 0, 1, 2 first */
        batch_make(&bt, n, mode);
        msgs += n;
        for (i = 0; i < n; i++)
            total += (int64_t)bt.len[i];
        bytes += (uint64_t)total;

        /* the messages back to back in one exact-size block, after a random
         * prefix (offsets need not start at 0) */
        base = (int64_t)(rnd() % 100);
        cat = (uint8_t *)malloc((size_t)(base + total) + 1);
        off = (int64_t *)malloc(((size_t)n + 1) * sizeof(int64_t));
        off[0] = base;
        memset(cat, 0x3c, (size_t)base);
        for (i = 0; i < n; i++) {
            memcpy(cat + off[i], bt.msg[i], bt.len[i]);
            off[i + 1] = off[i] + (int64_t)bt.len[i];
        }

        lens = (int64_t *)malloc(((size_t)n + 1) * sizeof(int64_t));
        for (i = 0; i < n; i++)
            lens[i] = (int64_t)bt.len[i];
        out = out_alloc(n);
        for (k = 0; k < nid; k++) {
            int impl = ids[k];
            memset(out, 0xA5, 32 * (size_t)n + 32);
            fx_sha256_many_segs(impl, bt.segs, bt.seg_start, n, out);
            bad = digests_bad(out, (const uint8_t(*)[32])bt.ref, n);
            CHECK(bad < 0, "many_segs %s batch %d n=%lld: bad message %lld (len %zu, %lld segs)", impl_label(impl),
                  b, (long long)n, (long long)bad, bad >= 0 && bad < n ? bt.len[bad] : 0,
                  bad >= 0 && bad < n ? (long long)(bt.seg_start[bad + 1] - bt.seg_start[bad]) : 0LL);
            ok += bad < 0;
            tot++;

            memset(out, 0xA5, 32 * (size_t)n + 32);
            fx_sha256_many_ptrs(impl, (const char *const *)bt.msg, lens, n, out);
            bad = digests_bad(out, (const uint8_t(*)[32])bt.ref, n);
            CHECK(bad < 0, "many_ptrs %s batch %d n=%lld: bad message %lld", impl_label(impl), b, (long long)n,
                  (long long)bad);
            ok += bad < 0;
            tot++;

            /* offsets in bytes (width 1), and in units of 2/4/8/3 bytes over
             * the same block */
            check_offsets(impl, cat, off, 1, n, "batch", &ok, &tot);
            width = b % 4 == 3 ? 3 : 2 << (b % 4);
            {
                int64_t *offw = (int64_t *)malloc(((size_t)n + 1) * sizeof(int64_t));
                offw[0] = base / width;
                for (i = 0; i < n; i++) {
                    int64_t units = (int64_t)bt.len[i] / width;
                    offw[i + 1] = offw[i] + units;
                }
                check_offsets(impl, cat, offw, width, n, "units", &ok, &tot);
                free(offw);
            }
            /* fixed-size rows over the same block */
            if (n) {
                int64_t row = mode == 3 ? (int64_t)bt.len[0] : (total + base) / n, small = (int64_t)(rnd() % 200);
                if (mode != 3 && small < row && (rnd() & 1))
                    row = small;
                check_fixed(impl, mode == 3 ? cat + base : cat, row, n, "batch", &ok, &tot);
            }
        }
        free(out);
        free(lens);
        free(off);
        free(cat);
        batch_free(&bt);
    }
    CHECK(ok == tot, "many random: %ld/%ld", ok, tot);
    printf("  many_* random batches: %d batches, %lld messages, %.1f MB, %d impl ids: %ld/%ld pass\n", nbatch,
           (long long)msgs, (double)bytes / 1e6, nid, ok, tot);
}

/* Guard pages (works without sanitizers, e.g. under qemu): every message,
 * segment or row starts right after or ends right before an inaccessible
 * page. */
static void test_many_guard(void)
{
    fx_sha256_compress_fn port = fx_sha256_compress_for(FX_SHA256_PORTABLE);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), room = 2 * pg;
    uint8_t *map = (uint8_t *)mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *mid, *hi, *cat;
    int ids[FX_SHA256_NIMPL + 3], nid = many_impls(ids), k;
    enum { MAXN = 48, MAXSEG = 16 };
    fx_seg segs[MAXN * MAXSEG];
    int64_t seg_start[MAXN + 1], lens[MAXN + 1], off[MAXN + 1];
    const char *ptrs[MAXN];
    uint8_t ref[MAXN][32], out[MAXN * 32 + 32];
    long ok = 0, tot = 0;
    size_t L = 0, i;

    if (map == MAP_FAILED) {
        printf("  many_* guard pages: mmap failed, skipped\n");
        return;
    }
    mid = map + pg;
    hi = map + 3 * pg;
    mprotect(map, pg, PROT_NONE);
    mprotect(hi, pg, PROT_NONE);
    for (i = 0; i < room; i++)
        mid[i] = (uint8_t)rnd();
    cat = (uint8_t *)malloc(room);

    /* segments and pointer lists: lengths 0..700 once each, then some up to
     * two pages, in calls of 1..MAXN messages */
    while (L <= 800) {
        int64_t n = (int64_t)(rnd() % MAXN) + 1, m, nseg = 0;
        for (m = 0; m < n; m++, L++) {
            size_t len = L <= 700 ? L : (size_t)(rnd() % (room + 1)), pos = 0;
            int s = 0;
            seg_start[m] = nseg;
            while (pos < len || (s == 0 && (rnd() & 1))) {
                size_t sl = 0;
                uint64_t r = rnd();
                if (s == MAXSEG - 1 || (r & 3) == 0)
                    sl = len - pos; /* the rest */
                else if ((r & 3) == 1)
                    sl = (size_t)((r >> 8) % 3); /* 0, 1, 2 bytes */
                else
                    sl = (size_t)((r >> 8) % (len - pos + 1));
                if (sl > len - pos)
                    sl = len - pos;
                segs[nseg].ptr = (r >> 40) & 1 ? mid : hi - sl;
                segs[nseg].len = sl;
                memcpy(cat + pos, segs[nseg].ptr, sl);
                pos += sl;
                nseg++;
                s++;
            }
            fx_sha256_oneshot(port, cat, len, ref[m]);
            lens[m] = (int64_t)len;
            ptrs[m] = (const char *)((rnd() & 1) ? mid : hi - len);
        }
        seg_start[n] = nseg;
        for (k = 0; k < nid; k++) {
            memset(out, 0xA5, sizeof(out));
            fx_sha256_many_segs(ids[k], segs, seg_start, n, out);
            ok += digests_bad(out, (const uint8_t(*)[32])ref, n) < 0;
            tot++;
            /* ptrs: same lengths, data at the start or end of the room */
            fx_sha256_many_ptrs(ids[k], ptrs, lens, n, out);
            for (m = 0; m < n; m++)
                fx_sha256_oneshot(port, ptrs[m], (size_t)lens[m], ref[m]);
            ok += digests_bad(out, (const uint8_t(*)[32])ref, n) < 0;
            tot++;
            /* restore the segment refs for the next impl */
            for (m = 0; m < n; m++) {
                size_t pos = 0;
                int64_t j;
                for (j = seg_start[m]; j < seg_start[m + 1]; j++) {
                    memcpy(cat + pos, segs[j].ptr, segs[j].len);
                    pos += segs[j].len;
                }
                fx_sha256_oneshot(port, cat, pos, ref[m]);
            }
        }
    }
    CHECK(ok == tot, "many guard pages (segs, ptrs): %ld/%ld", ok, tot);
    printf("  many_segs/many_ptrs guard pages, lengths 0..700 + 100 up to 2 pages: %ld/%ld pass\n", ok, tot);

    /* fixed rows and offsets: the block of rows ends at the upper guard or
     * starts after the lower one */
    ok = tot = 0;
    for (L = 0; L <= 300; L++) {
        int64_t n = (int64_t)(rnd() % MAXN) + 1, m;
        int64_t row = (int64_t)L;
        int where;
        while (n * row > (int64_t)room)
            n--;
        for (where = 0; where < 2; where++) {
            const uint8_t *data = where ? mid : hi - n * row;
            int64_t total;
            for (m = 0; m < n; m++)
                fx_sha256_oneshot(port, data + m * row, (size_t)row, ref[m]);
            for (k = 0; k < nid; k++) {
                memset(out, 0xA5, sizeof(out));
                fx_sha256_many_fixed(ids[k], data, row, n, out);
                ok += digests_bad(out, (const uint8_t(*)[32])ref, n) < 0;
                tot++;
            }
            /* offsets: random lengths, fitting the room */
            off[0] = 0;
            for (m = 0; m < n; m++)
                off[m + 1] = off[m] + (int64_t)(rnd() % (L + 1));
            total = off[n];
            data = where ? mid : hi - total;
            for (m = 0; m < n; m++)
                fx_sha256_oneshot(port, data + off[m], (size_t)(off[m + 1] - off[m]), ref[m]);
            for (k = 0; k < nid; k++) {
                int32_t off32[MAXN + 1];
                for (m = 0; m <= n; m++)
                    off32[m] = (int32_t)off[m];
                memset(out, 0xA5, sizeof(out));
                fx_sha256_many_offsets64(ids[k], data, off, 1, n, out);
                ok += digests_bad(out, (const uint8_t(*)[32])ref, n) < 0;
                memset(out, 0xA5, sizeof(out));
                fx_sha256_many_offsets32(ids[k], data, off32, 1, n, out);
                ok += digests_bad(out, (const uint8_t(*)[32])ref, n) < 0;
                tot += 2;
            }
        }
    }
    CHECK(ok == tot, "many guard pages (fixed, offsets): %ld/%ld", ok, tot);
    printf("  many_fixed/many_offsets guard pages, rows 0..300 B: %ld/%ld pass\n", ok, tot);
    free(cat);
    munmap(map, 4 * pg);
}

/* Threads hashing the same batch concurrently (no shared mutable state). */
typedef struct {
    const batch_t *b;
    int impl;
    int bad;
} many_thr_t;

static void *many_thread_main(void *arg)
{
    many_thr_t *t = (many_thr_t *)arg;
    uint8_t *out = out_alloc(t->b->n);
    int r;
    for (r = 0; r < 20; r++) {
        /* chunks of up to 64 messages, as a parallel caller would do */
        int64_t s;
        for (s = 0; s < t->b->n; s += 64) {
            int64_t c = t->b->n - s < 64 ? t->b->n - s : 64;
            fx_sha256_many_segs(t->impl, t->b->segs, t->b->seg_start + s, c, out + 32 * s);
        }
        t->bad |= digests_bad(out, (const uint8_t(*)[32])t->b->ref, t->b->n) >= 0;
    }
    free(out);
    return NULL;
}

static void test_many_threads(void)
{
    enum { NT = 4 };
    pthread_t th[NT];
    many_thr_t st[NT];
    batch_t b;
    int i, bad = 0;
    batch_make(&b, 200, 1);
    for (i = 0; i < NT; i++) {
        st[i].b = &b;
        st[i].impl = fx_sha256_current();
        st[i].bad = 0;
        pthread_create(&th[i], NULL, many_thread_main, &st[i]);
    }
    for (i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        bad |= st[i].bad;
    }
    CHECK(!bad, "many_segs from %d threads", NT);
    printf("  many_segs from %d threads in chunks of 64: %s\n", NT, bad ? "FAIL" : "pass");
    batch_free(&b);
}

static void test_many(int nbatch, int big)
{
    size_t i;
    g_pool = (uint8_t *)malloc(POOL);
    for (i = 0; i < POOL; i++)
        g_pool[i] = (uint8_t)rnd();
    test_many_random(nbatch, big);
    test_many_guard();
    test_many_threads();
    free(g_pool);
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
    int nrandom = 3000, big = 0, nmany = 150, many_big = 1, a, impl;
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
        else if (!strcmp(argv[a], "--many") && a + 1 < argc)
            nmany = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--many-no-mb"))
            many_big = 0;
        else
            dir = argv[a];
    }
    if (!dir) {
        fprintf(stderr, "usage: %s [--require NAME] [--random N] [--many N] [--many-no-mb] [--seed S] [--big] VECTOR_DIR\n",
                argv[0]);
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
    printf("many messages (fx_sha256_many_*):\n");
    test_many(nmany, many_big);
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
