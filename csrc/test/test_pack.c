/*
 * Standalone test harness for csrc/fx_pack.c.
 *
 *   test_pack [options]
 *
 * Options:
 *   --cases N     random cases compared with the naive reference, each run with all four
 *                 strategies (default 2500)
 *   --mid N       n of the mid-size chat-like cases compared with the reference
 *                 (default 20000; 0 skips)
 *   --big N       n of the big invariant checks (default 1000000; 0 skips)
 *   --threads N   threads for the concurrency check (default 4; 0 skips)
 *   --seed S      PRNG seed (default fixed)
 *   --no-bench    no timing lines
 *   --bench-reps R  timing: best of R calls per strategy (default 5)
 *
 * The reference (ref_pack) is a deliberately naive O(n * bins) model of the contract in
 * fx_pack.h: it scans every bin for each item.  BFD ties are resolved by a per-bin stamp
 * of the moment the bin reached its current remaining space (the largest stamp wins),
 * which is the LIFO rule.  fx_pack_assign must agree with it exactly (return code,
 * *bad_item, *n_bins, bin_offsets, order).  Also: error codes, invariants on big inputs,
 * threads, and every allocation failing in turn (a second copy of fx_pack.c is compiled
 * into this file with a failing allocator) must give FX_ENOMEM with nothing leaked.
 * fx_pack_ff_index (first fit through an index, int32 lengths, optionally fed by a producer
 * thread through a progress counter) must equal fx_pack_assign(FF) on the gathered lengths
 * with row ids out, fed or not, and fail cleanly on every allocation too.
 * Ends with "N passed, M failed"; exit status 0 only if nothing failed.
 */
#define _POSIX_C_SOURCE 200809L
#include "../fx_pack.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ fault injection */

/* fi_countdown: -1 = never fail; otherwise the allocation that finds it at 0 fails. */
static long fi_countdown = -1;
static long fi_live;   /* blocks currently allocated through fi_* */
static long fi_events; /* allocation calls so far */

static int fi_should_fail(void)
{
    fi_events++;
    if (fi_countdown < 0) return 0;
    return fi_countdown-- == 0;
}
static void *fi_malloc(size_t n)
{
    void *p;
    if (fi_should_fail()) return NULL;
    p = malloc(n);
    if (p) fi_live++;
    return p;
}
static void *fi_calloc(size_t a, size_t b)
{
    void *p;
    if (fi_should_fail()) return NULL;
    p = calloc(a, b);
    if (p) fi_live++;
    return p;
}
static void *fi_realloc(void *q, size_t n)
{
    void *p;
    if (fi_should_fail()) return NULL;
    p = realloc(q, n);
    if (p && !q) fi_live++;
    return p;
}
static void fi_free(void *p)
{
    if (p) fi_live--;
    free(p);
}

int fx_pack_assign_fi(const int64_t *lengths, int64_t n, int64_t capacity, int64_t max_items,
                      int strategy, int allow_overlong,
                      int64_t *order, int64_t *bin_offsets, int64_t *n_bins, int64_t *bad_item);
int fx_pack_ff_index_fi(const int32_t *lengths, const int64_t *index, int64_t n, int64_t capacity,
                        int64_t max_items, int allow_overlong, const volatile int64_t *progress, int64_t bins_hint,
                        int64_t *order, int64_t *bin_offsets, int64_t *n_bins, int64_t *bad_item);

#define malloc fi_malloc
#define calloc fi_calloc
#define realloc fi_realloc
#define free fi_free
#define fx_pack_assign fx_pack_assign_fi
#define fx_pack_ff_index fx_pack_ff_index_fi
#include "../fx_pack.c"
#undef malloc
#undef calloc
#undef realloc
#undef free
#undef fx_pack_assign
#undef fx_pack_ff_index

/* ------------------------------------------------------------------ tallies */

typedef struct {
    long pass, fail;
} tally;

static tally g_t;
static int g_verbose_left = 25; /* detailed failure reports still allowed (main thread) */

#define CHECK(t, cond, ...)                                               \
    do {                                                                  \
        if (cond) {                                                       \
            (t)->pass++;                                                  \
        } else {                                                          \
            (t)->fail++;                                                  \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

static const char *strat_name(int s)
{
    switch (s) {
    case FX_PACK_BFD: return "BFD";
    case FX_PACK_FFD: return "FFD";
    case FX_PACK_FF: return "FF";
    case FX_PACK_NF: return "NF";
    default: return "?";
    }
}

/* ------------------------------------------------------------------ PRNG */

typedef struct {
    uint64_t s;
} rng;

static uint64_t rnext(rng *r) /* splitmix64 */
{
    uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
/* uniform in [lo, hi] (hi - lo < 2^63) */
static int64_t rrange(rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1u;
    return lo + (int64_t)(rnext(r) % span);
}
static double runif(rng *r) { return ((double)(rnext(r) >> 11) + 0.5) / 9007199254740992.0; }
static double rnorm(rng *r)
{
    return sqrt(-2.0 * log(runif(r))) * cos(6.283185307179586 * runif(r));
}
/* chat-like: lognormal with mean ~300, clamped to [1, cap] */
static int64_t rchat(rng *r, int64_t cap)
{
    double v = exp(5.2 + 1.0 * rnorm(r));
    int64_t x = (int64_t)v;
    if (x < 1) x = 1;
    if (x > cap) x = cap;
    return x;
}

/* ------------------------------------------------------------------ naive reference */

typedef struct {
    int64_t len, idx;
} ref_pair;

static int ref_cmp(const void *a, const void *b)
{
    const ref_pair *x = (const ref_pair *)a, *y = (const ref_pair *)b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Same contract as fx_pack_assign; -1 if the reference itself runs out of memory. */
static int ref_pack(const int64_t *len, int64_t n, int64_t C, int64_t maxit, int strat,
                    int allow, int64_t *order, int64_t *off, int64_t *n_bins, int64_t *bad)
{
    int64_t i, k, b, nb = 0, clock = 0, pos;
    int64_t *seq, *rem, *cnt, *stamp, *binof;
    char *closed;
    ref_pair *pr;

    *bad = -1;
    *n_bins = 0;
    if (n < 0 || C < 1 || maxit < 1 || strat < 0 || strat > 3) return FX_EINVAL;
    for (i = 0; i < n; i++)
        if (len[i] < 0) {
            *bad = i;
            return FX_EINVAL;
        }
    if (strat == FX_PACK_BFD && C > FX_PACK_BFD_MAX_CAPACITY) return FX_EINVAL;
    if (!allow)
        for (i = 0; i < n; i++)
            if (len[i] > C) {
                *bad = i;
                return FX_EOVERLONG;
            }
    off[0] = 0;
    if (n == 0) return FX_OK;

    seq = malloc((size_t)n * sizeof *seq);
    rem = malloc((size_t)n * sizeof *rem);
    cnt = malloc((size_t)n * sizeof *cnt);
    stamp = malloc((size_t)n * sizeof *stamp);
    binof = malloc((size_t)n * sizeof *binof);
    closed = malloc((size_t)n);
    pr = malloc((size_t)n * sizeof *pr);
    if (!seq || !rem || !cnt || !stamp || !binof || !closed || !pr) {
        free(seq), free(rem), free(cnt), free(stamp), free(binof), free(closed), free(pr);
        return -1;
    }
    if (strat == FX_PACK_BFD || strat == FX_PACK_FFD) {
        for (i = 0; i < n; i++) pr[i].len = len[i], pr[i].idx = i;
        qsort(pr, (size_t)n, sizeof *pr, ref_cmp);
        for (i = 0; i < n; i++) seq[i] = pr[i].idx;
    } else {
        for (i = 0; i < n; i++) seq[i] = i;
    }
    for (k = 0; k < n; k++) {
        int64_t s = len[seq[k]], best = -1;
#define FITS(bb) (!closed[bb] && rem[bb] >= 0 && cnt[bb] < maxit && rem[bb] >= s)
        if (strat == FX_PACK_NF) {
            if (nb > 0 && FITS(nb - 1)) best = nb - 1;
        } else if (strat == FX_PACK_FF || strat == FX_PACK_FFD) {
            for (b = 0; b < nb; b++)
                if (FITS(b)) {
                    best = b;
                    break;
                }
        } else {
            for (b = 0; b < nb; b++)
                if (FITS(b) && (best < 0 || rem[b] < rem[best] ||
                                (rem[b] == rem[best] && stamp[b] > stamp[best])))
                    best = b;
        }
#undef FITS
        if (best < 0) {
            best = nb++;
            rem[best] = C - s;
            cnt[best] = 1;
            closed[best] = s > C;
        } else {
            rem[best] -= s;
            cnt[best]++;
        }
        stamp[best] = ++clock;
        binof[k] = best;
    }
    pos = 0;
    for (b = 0; b < nb; b++) {
        for (k = 0; k < n; k++)
            if (binof[k] == b) order[pos++] = seq[k];
        off[b + 1] = pos;
    }
    *n_bins = nb;
    free(seq), free(rem), free(cnt), free(stamp), free(binof), free(closed), free(pr);
    return FX_OK;
}

/* ------------------------------------------------------------------ invariants */

/* Structural checks of an FX_OK result; returns NULL or a description. */
static const char *check_result(const int64_t *len, int64_t n, int64_t C, int64_t maxit,
                                int strat, const int64_t *order, const int64_t *off, int64_t nb)
{
    static _Thread_local char msg[200];
    int64_t b, k;
    unsigned char *seen;
    const char *err = NULL;
    if (nb < 0 || nb > n || (n > 0 && nb == 0)) return "n_bins out of range";
    if (off[0] != 0 || off[nb] != n) return "bin_offsets ends";
    seen = calloc((size_t)(n > 0 ? n : 1), 1);
    if (!seen) return "test out of memory";
    for (b = 0; b < nb && !err; b++) {
        int64_t lo = off[b], hi = off[b + 1], sum = 0;
        if (hi <= lo) { err = "empty bin or decreasing offsets"; break; }
        if (hi - lo > maxit) { err = "max_items exceeded"; break; }
        for (k = lo; k < hi; k++) {
            int64_t it = order[k];
            if (it < 0 || it >= n) { err = "item index out of range"; break; }
            if (seen[it]) { err = "item twice"; break; }
            seen[it] = 1;
            sum += len[it];
            if (k > lo) { /* insertion order within the bin */
                int64_t pv = order[k - 1];
                int sorted = (strat == FX_PACK_BFD || strat == FX_PACK_FFD);
                if (sorted ? (len[pv] < len[it] || (len[pv] == len[it] && pv > it)) : pv > it) {
                    err = "items in a bin not in processing order";
                    break;
                }
            }
        }
        if (err) break;
        if (sum > C && !(hi - lo == 1 && len[order[lo]] > C)) {
            snprintf(msg, sizeof msg, "bin %lld over capacity (%lld > %lld)", (long long)b,
                     (long long)sum, (long long)C);
            err = msg;
            break;
        }
        if (b > 0) { /* bins in creation order: first items in processing order */
            int64_t p = order[off[b - 1]], q = order[lo];
            int sorted = (strat == FX_PACK_BFD || strat == FX_PACK_FFD);
            if (sorted ? (len[p] < len[q] || (len[p] == len[q] && p > q)) : p > q) {
                err = "bins not in creation order";
                break;
            }
        }
    }
    if (!err && strat == FX_PACK_NF)
        for (k = 0; k < n; k++)
            if (order[k] != k) { err = "NF order not the identity"; break; }
    free(seen);
    return err;
}

/* ------------------------------------------------------------------ one case */

typedef struct {
    tally *t;
    int verbose; /* may print details */
} ctx;

/* Runs fx_pack_assign and the reference; compares everything.  Returns 1 if equal. */
static int run_case(ctx *c, const char *tag, const int64_t *len, int64_t n, int64_t C,
                    int64_t maxit, int strat, int allow)
{
    size_t sz = (size_t)(n + 1) * sizeof(int64_t);
    int64_t *oa = malloc(sz), *fa = malloc(sz), *orr = malloc(sz), *fr = malloc(sz);
    int64_t nba = -7, nbr = -7, bada = -7, badr = -7, k;
    int rca, rcr, ok = 1;
    const char *why = NULL;
    char buf[160];

    if (!oa || !fa || !orr || !fr) {
        free(oa), free(fa), free(orr), free(fr);
        CHECK(c->t, 0, "test out of memory");
        return 0;
    }
    for (k = 0; k <= n; k++) oa[k] = fa[k] = orr[k] = fr[k] = -99;
    rca = fx_pack_assign(len, n, C, maxit, strat, allow, oa, fa, &nba, &bada);
    rcr = ref_pack(len, n, C, maxit, strat, allow, orr, fr, &nbr, &badr);
    if (rcr < 0) {
        why = "reference out of memory";
    } else if (rca != rcr) {
        snprintf(buf, sizeof buf, "rc %d, reference %d", rca, rcr);
        why = buf;
    } else if (bada != badr) {
        snprintf(buf, sizeof buf, "bad_item %lld, reference %lld", (long long)bada,
                 (long long)badr);
        why = buf;
    } else if (rca == FX_OK) {
        if (nba != nbr) {
            snprintf(buf, sizeof buf, "n_bins %lld, reference %lld", (long long)nba,
                     (long long)nbr);
            why = buf;
        } else {
            for (k = 0; k <= nba && !why; k++)
                if (fa[k] != fr[k]) {
                    snprintf(buf, sizeof buf, "bin_offsets[%lld] %lld, reference %lld",
                             (long long)k, (long long)fa[k], (long long)fr[k]);
                    why = buf;
                }
            for (k = 0; k < n && !why; k++)
                if (oa[k] != orr[k]) {
                    snprintf(buf, sizeof buf, "order[%lld] %lld, reference %lld", (long long)k,
                             (long long)oa[k], (long long)orr[k]);
                    why = buf;
                }
            if (!why) why = check_result(len, n, C, maxit, strat, oa, fa, nba);
        }
    }
    if (why) {
        ok = 0;
        c->t->fail++;
        if (c->verbose && g_verbose_left > 0) {
            g_verbose_left--;
            fprintf(stderr,
                    "FAIL %s: %s n=%lld C=%lld max_items=%lld allow_overlong=%d: %s\n", tag,
                    strat_name(strat), (long long)n, (long long)C, (long long)maxit, allow, why);
            if (n <= 40) {
                fprintf(stderr, "  lengths:");
                for (k = 0; k < n; k++) fprintf(stderr, " %lld", (long long)len[k]);
                fprintf(stderr, "\n");
            }
        }
    } else {
        c->t->pass++;
    }
    free(oa), free(fa), free(orr), free(fr);
    return ok;
}

/* ------------------------------------------------------------------ random cases */

static const int64_t k_maxits[] = {1, 2, 3, 200, INT64_MAX, 0 /* random */};

/* Fills a random case; returns n.  len must hold 3000 values. */
static int64_t gen_case(rng *r, int64_t *len, int64_t *C_out, int64_t *maxit_out, int *allow_out)
{
    int64_t n, C, i, nv;
    int64_t vals[8];
    int mode = (int)rrange(r, 0, 9), sz = (int)rrange(r, 0, 9);
    int cmode = (int)rrange(r, 0, 9);

    if (sz < 1) n = rrange(r, 0, 3);
    else if (sz < 5) n = rrange(r, 0, 40);
    else if (sz < 8) n = rrange(r, 0, 400);
    else n = rrange(r, 0, 3000);

    if (cmode < 2) C = rrange(r, 1, 6);
    else if (cmode < 4) C = rrange(r, 1, 64);
    else if (cmode < 9) C = rrange(r, 1, 5000);
    else C = rrange(r, 5000, 3000000); /* wide range: radix sort path */

    nv = rrange(r, 1, 8);
    for (i = 0; i < nv; i++) {
        switch (rrange(r, 0, 5)) {
        case 0: vals[i] = 0; break;
        case 1: vals[i] = C; break;
        case 2: vals[i] = C / rrange(r, 2, 5); break;
        case 3: vals[i] = rrange(r, 0, C); break;
        case 4: vals[i] = rrange(r, 0, C / 4 + 1); break;
        default: vals[i] = C + rrange(r, 1, 3); break;
        }
    }
    for (i = 0; i < n; i++) {
        int64_t v;
        switch (mode) {
        case 0: v = rrange(r, 0, C); break;               /* uniform */
        case 1: v = vals[rrange(r, 0, nv - 1)]; break;    /* few distinct values: ties */
        case 2: v = rrange(r, 0, C / 8 + 1); break;       /* small items */
        case 3: v = rchat(r, C); break;                   /* chat-like */
        case 4: v = rrange(r, 0, 2) ? rrange(r, 0, C) : vals[rrange(r, 0, nv - 1)]; break;
        case 5: v = 0; break;                             /* all empty */
        case 6: v = rrange(r, 0, 3) ? C : rrange(r, 0, C); break; /* many == C */
        case 7: /* some over-long, some far over */
            v = rrange(r, 0, 9) ? rrange(r, 0, C) :
                (rrange(r, 0, 3) ? C + rrange(r, 1, C + 1) : rrange(r, C + 1, INT64_MAX / 2));
            break;
        case 8: v = rrange(r, 0, 1) ? rrange(r, 0, 2) : rrange(r, C / 2, C); break;
        default: v = rrange(r, 0, 19) ? rrange(r, 0, C) : C + 1; break;
        }
        len[i] = v;
    }
    *maxit_out = k_maxits[rrange(r, 0, 5)];
    if (*maxit_out == 0) *maxit_out = rrange(r, 1, 12);
    *allow_out = (int)rrange(r, 0, 3) != 0; /* mostly allowed, so over-long runs get packed */
    *C_out = C;
    return n;
}

static void random_cases(ctx *c, uint64_t seed, long ncases)
{
    rng r = {seed};
    int64_t *len = malloc(3000 * sizeof(int64_t));
    long i;
    int s;
    char tag[64];
    if (!len) {
        CHECK(c->t, 0, "test out of memory");
        return;
    }
    for (i = 0; i < ncases; i++) {
        int64_t C, maxit;
        int allow;
        int64_t n = gen_case(&r, len, &C, &maxit, &allow);
        snprintf(tag, sizeof tag, "random case %ld (seed %llu)", i, (unsigned long long)seed);
        for (s = 0; s < 4; s++) run_case(c, tag, len, n, C, maxit, s, allow);
    }
    free(len);
}

/* ------------------------------------------------------------------ fixed cases */

static void fixed_cases(ctx *c)
{
    /* hand-made tie cases */
    {
        /* C=10: bins reach remaining 3 at different moments; a 3 must go to the latest */
        int64_t a[] = {7, 7, 7, 3, 3, 3};
        int s;
        for (s = 0; s < 4; s++) run_case(c, "ties 7s and 3s", a, 6, 10, INT64_MAX, s, 0);
    }
    {
        int64_t a[] = {5, 0, 0, 5, 0, 5, 0, 0, 0};
        int s;
        int64_t m;
        for (m = 1; m <= 4; m++)
            for (s = 0; s < 4; s++) run_case(c, "zeros", a, 9, 5, m, s, 0);
    }
    {
        int64_t a[] = {11, 0, 10, 0, 3, 12, 7, 0};
        int s;
        for (s = 0; s < 4; s++) run_case(c, "overlong singleton", a, 8, 10, INT64_MAX, s, 1);
    }
    {
        /* BFD LIFO, verified by hand: C=10 sorted 6,6,4,2,2,2 (idx 0,1,2,3,4,5) */
        int64_t a[] = {6, 6, 4, 2, 2, 2};
        int64_t order[6], off[7], nb = -1, bad = -1;
        int rc = fx_pack_assign(a, 6, 10, INT64_MAX, FX_PACK_BFD, 0, order, off, &nb, &bad);
        /* 6->bin0 (rem 4), 6->bin1 (rem 4, top), 4->bin1 (rem 0), 2->bin0 (rem 2),
           2->bin0 (rem 0, pushed after bin1 on stack 0), 2->new bin2 */
        int64_t eo[] = {0, 3, 4, 1, 2, 5}, ef[] = {0, 3, 5, 6};
        CHECK(c->t, rc == FX_OK && nb == 3 && !memcmp(order, eo, sizeof eo) &&
                        !memcmp(off, ef, sizeof ef),
              "hand-checked BFD case");
        run_case(c, "hand BFD", a, 6, 10, INT64_MAX, FX_PACK_BFD, 0);
    }
    {
        /* BFD tie: two bins at remaining 2, the most recent wins; zero joins it too */
        int64_t a[] = {8, 8, 2, 0};
        int64_t order[4], off[5], nb = -1, bad = -1;
        int rc = fx_pack_assign(a, 4, 10, INT64_MAX, FX_PACK_BFD, 0, order, off, &nb, &bad);
        int64_t eo[] = {0, 1, 2, 3}, ef[] = {0, 1, 4};
        CHECK(c->t, rc == FX_OK && nb == 2 && !memcmp(order, eo, sizeof eo) &&
                        !memcmp(off, ef, sizeof ef),
              "BFD LIFO tie");
    }
    {
        /* BFD at the largest capacity, lengths spanning it (radix sort path) */
        int64_t C = FX_PACK_BFD_MAX_CAPACITY, a[300];
        rng r = {99};
        int i;
        for (i = 0; i < 300; i++) a[i] = rrange(&r, 0, 3) ? rrange(&r, 0, C) : rrange(&r, 0, 64);
        run_case(c, "BFD max capacity", a, 300, C, INT64_MAX, FX_PACK_BFD, 0);
        run_case(c, "BFD max capacity, max_items 3", a, 300, C, 3, FX_PACK_BFD, 0);
    }
    {
        /* huge capacities and lengths for the other strategies */
        int64_t C = INT64_MAX, a[500];
        rng r = {7};
        int i, s;
        for (i = 0; i < 500; i++) a[i] = rrange(&r, 0, 2) ? (int64_t)(rnext(&r) >> 3) : rrange(&r, 0, 9);
        for (s = 1; s < 4; s++) run_case(c, "capacity INT64_MAX", a, 500, C, INT64_MAX, s, 0);
        C = (int64_t)1 << 40;
        for (s = 1; s < 4; s++) run_case(c, "capacity 2^40 + overlong", a, 500, C, 5, s, 1);
        a[17] = INT64_MAX;
        for (s = 0; s < 4; s++) run_case(c, "length INT64_MAX", a, 40, 1000, 2, s, 1);
        /* radix sort with 2, 3, 4 and 5 passes (range bit lengths 14, 27, 40, 50) */
        for (i = 0; i < 500; i++) a[i] = rrange(&r, 0, 4095) + (rrange(&r, 0, 9) ? 0 : 5000);
        for (s = 0; s < 4; s++) run_case(c, "radix 2 passes", a, 500, 9000, INT64_MAX, s, 1);
        for (i = 0; i < 500; i++) a[i] = rrange(&r, 0, ((int64_t)1 << 26) + 7);
        for (s = 0; s < 4; s++) run_case(c, "radix 3 passes", a, 500, (int64_t)1 << 26, 4, s, 1);
        for (i = 0; i < 500; i++) a[i] = rrange(&r, 0, ((int64_t)1 << 40) - 1);
        for (s = 1; s < 4; s++) run_case(c, "radix 4 passes", a, 500, (int64_t)1 << 40, 7, s, 0);
        for (i = 0; i < 500; i++) a[i] = rrange(&r, 0, ((int64_t)1 << 50) - 1) & ~(int64_t)0xfff;
        for (s = 1; s < 4; s++) run_case(c, "radix 5 passes, ties", a, 500, (int64_t)1 << 49, INT64_MAX, s, 1);
    }
}

/* ------------------------------------------------------------------ error codes */

static void error_cases(ctx *c)
{
    int64_t a[12] = {1, 2, 3, 4, 5, -1, 7, -8, 9, 10, 11, 12};
    int64_t ok[6] = {1, 2, 3, 50, 5, 60};
    int64_t order[16], off[17], nb, bad;
    int s, rc;
    tally *t = c->t;

    for (s = 0; s < 4; s++) {
        nb = 5, bad = 5;
        rc = fx_pack_assign(ok, -1, 10, 1, s, 0, order, off, &nb, &bad);
        CHECK(t, rc == FX_EINVAL && bad == -1, "%s n<0", strat_name(s));
        rc = fx_pack_assign(ok, 6, 0, 1, s, 1, order, off, &nb, &bad);
        CHECK(t, rc == FX_EINVAL && bad == -1, "%s C=0", strat_name(s));
        rc = fx_pack_assign(ok, 6, -5, 1, s, 1, order, off, &nb, &bad);
        CHECK(t, rc == FX_EINVAL && bad == -1, "%s C<0", strat_name(s));
        rc = fx_pack_assign(ok, 6, 100, 0, s, 0, order, off, &nb, &bad);
        CHECK(t, rc == FX_EINVAL && bad == -1, "%s max_items=0", strat_name(s));
        rc = fx_pack_assign(ok, 6, 100, -3, s, 0, order, off, &nb, &bad);
        CHECK(t, rc == FX_EINVAL && bad == -1, "%s max_items<0", strat_name(s));
        rc = fx_pack_assign(a, 12, 100, 4, s, 0, order, off, &nb, &bad);
        CHECK(t, rc == FX_EINVAL && bad == 5, "%s negative length: rc %d bad %lld",
              strat_name(s), rc, (long long)bad);
        rc = fx_pack_assign(a, 12, 100, 4, s, 0, order, off, &nb, NULL);
        CHECK(t, rc == FX_EINVAL, "%s negative length, bad_item NULL", strat_name(s));
        /* negative after an over-long one: still EINVAL, at the negative */
        rc = fx_pack_assign(a, 12, 3, 4, s, 0, order, off, &nb, &bad);
        CHECK(t, rc == FX_EINVAL && bad == 5, "%s negative beats over-long", strat_name(s));
        rc = fx_pack_assign(ok, 6, 4, 4, s, 0, order, off, &nb, &bad);
        CHECK(t, rc == FX_EOVERLONG && bad == 3, "%s over-long: rc %d bad %lld",
              strat_name(s), rc, (long long)bad);
        rc = fx_pack_assign(ok, 6, 4, 4, s, 0, order, off, &nb, NULL);
        CHECK(t, rc == FX_EOVERLONG, "%s over-long, bad_item NULL", strat_name(s));
        rc = fx_pack_assign(ok, 6, 4, 4, s, 1, order, off, &nb, &bad);
        CHECK(t, rc == FX_OK && bad == -1 && nb == 5, "%s over-long allowed: rc %d nb %lld",
              strat_name(s), rc, (long long)nb);
        rc = fx_pack_assign(ok, 6, 60, 4, s, 0, order, off, &nb, &bad);
        CHECK(t, rc == FX_OK && bad == -1, "%s length == C is not over-long", strat_name(s));
        /* n == 0 (even with NULL arrays) */
        nb = 5, bad = 5, off[0] = 77;
        rc = fx_pack_assign(NULL, 0, 10, 1, s, 0, NULL, off, &nb, &bad);
        CHECK(t, rc == FX_OK && nb == 0 && off[0] == 0 && bad == -1, "%s n=0", strat_name(s));
        /* NULL outputs */
        rc = fx_pack_assign(ok, 6, 100, 4, s, 0, order, NULL, &nb, &bad);
        CHECK(t, rc == FX_EINVAL, "%s bin_offsets NULL", strat_name(s));
        rc = fx_pack_assign(ok, 6, 100, 4, s, 0, order, off, NULL, &bad);
        CHECK(t, rc == FX_EINVAL, "%s n_bins NULL", strat_name(s));
        rc = fx_pack_assign(ok, 6, 100, 4, s, 0, NULL, off, &nb, &bad);
        CHECK(t, rc == FX_EINVAL, "%s order NULL", strat_name(s));
        rc = fx_pack_assign(NULL, 6, 100, 4, s, 0, order, off, &nb, &bad);
        CHECK(t, rc == FX_EINVAL, "%s lengths NULL", strat_name(s));
    }
    rc = fx_pack_assign(ok, 6, 10, 1, -1, 0, order, off, &nb, &bad);
    CHECK(t, rc == FX_EINVAL && bad == -1, "strategy -1");
    rc = fx_pack_assign(ok, 6, 10, 1, 4, 0, order, off, &nb, &bad);
    CHECK(t, rc == FX_EINVAL && bad == -1, "strategy 4");
    rc = fx_pack_assign(NULL, 0, 10, 1, 4, 0, NULL, off, &nb, &bad);
    CHECK(t, rc == FX_EINVAL, "strategy 4, n=0");
    rc = fx_pack_assign(NULL, 0, 0, 1, 0, 0, NULL, off, &nb, &bad);
    CHECK(t, rc == FX_EINVAL, "C=0, n=0");

    /* BFD capacity limit */
    rc = fx_pack_assign(ok, 6, FX_PACK_BFD_MAX_CAPACITY + 1, 4, FX_PACK_BFD, 0, order, off, &nb,
                        &bad);
    CHECK(t, rc == FX_EINVAL && bad == -1, "BFD C > max: rc %d bad %lld", rc, (long long)bad);
    rc = fx_pack_assign(ok, 6, INT64_MAX, 4, FX_PACK_BFD, 0, order, off, &nb, &bad);
    CHECK(t, rc == FX_EINVAL && bad == -1, "BFD C = INT64_MAX");
    rc = fx_pack_assign(NULL, 0, FX_PACK_BFD_MAX_CAPACITY + 1, 4, FX_PACK_BFD, 0, NULL, off, &nb,
                        &bad);
    CHECK(t, rc == FX_EINVAL && bad == -1, "BFD C > max, n=0");
    /* a negative length is reported (with its index) before the BFD capacity limit */
    rc = fx_pack_assign(a, 12, FX_PACK_BFD_MAX_CAPACITY + 1, 4, FX_PACK_BFD, 0, order, off, &nb,
                        &bad);
    CHECK(t, rc == FX_EINVAL && bad == 5, "BFD C > max with a negative length");
    rc = fx_pack_assign(ok, 6, FX_PACK_BFD_MAX_CAPACITY, 4, FX_PACK_BFD, 0, order, off, &nb, &bad);
    CHECK(t, rc == FX_OK && nb == 2, "BFD C == max");
    for (s = 1; s < 4; s++) {
        rc = fx_pack_assign(ok, 6, FX_PACK_BFD_MAX_CAPACITY + 1, 4, s, 0, order, off, &nb, &bad);
        CHECK(t, rc == FX_OK && nb == 2, "%s C > BFD max is fine", strat_name(s));
    }
}

/* ------------------------------------------------------------------ fault injection */

static void fault_cases(ctx *c)
{
    struct {
        int64_t n, C, maxit, lmax;
        int overlong;
    } shapes[] = {
        {5, 10, INT64_MAX, 10, 0},          /* tiny: insertion sort */
        {3000, 4096, INT64_MAX, 4096, 0},   /* counting sort, bins grow */
        {3000, 1000000, 3, 1000000, 0},     /* radix sort */
        {3000, 64, 1, 64, 1},               /* one item per bin: lots of growth */
        {200000, 4096, INT64_MAX, 4096, 0}, /* many bins: FF tree grows several times */
    };
    size_t si;
    int s;
    tally *t = c->t;
    for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si].n, i;
        int64_t *len = malloc((size_t)n * sizeof *len), *order = malloc((size_t)n * sizeof *order);
        int64_t *off = malloc((size_t)(n + 1) * sizeof *off), *o2 = malloc((size_t)n * sizeof *o2);
        int64_t *f2 = malloc((size_t)(n + 1) * sizeof *f2);
        rng r = {1234 + si};
        if (!len || !order || !off || !o2 || !f2) {
            CHECK(t, 0, "test out of memory");
            free(len), free(order), free(off), free(o2), free(f2);
            return;
        }
        for (i = 0; i < n; i++) {
            len[i] = rrange(&r, 0, shapes[si].lmax);
            if (shapes[si].overlong && rrange(&r, 0, 9) == 0) len[i] = shapes[si].C + 1;
        }
        for (s = 0; s < 4; s++) {
            int64_t nb = -1, nb2 = -1, bad = -1;
            long events, k;
            int rc, rc2, allfail = 1;
            fi_countdown = -1;
            fi_events = 0;
            fi_live = 0;
            rc = fx_pack_assign_fi(len, n, shapes[si].C, shapes[si].maxit, s,
                                   shapes[si].overlong, order, off, &nb, &bad);
            events = fi_events;
            rc2 = fx_pack_assign(len, n, shapes[si].C, shapes[si].maxit, s, shapes[si].overlong,
                                 o2, f2, &nb2, &bad);
            CHECK(t, rc == FX_OK && rc2 == FX_OK && fi_live == 0 && nb == nb2 &&
                            !memcmp(order, o2, (size_t)n * sizeof *o2) &&
                            !memcmp(off, f2, (size_t)(nb + 1) * sizeof *f2),
                  "fault-injection build, no failure: %s shape %d", strat_name(s), (int)si);
            if (s == FX_PACK_NF) CHECK(t, events == 0, "NF allocated %ld times", events);
            for (k = 0; k < events; k++) {
                fi_countdown = k;
                fi_live = 0;
                rc = fx_pack_assign_fi(len, n, shapes[si].C, shapes[si].maxit, s,
                                       shapes[si].overlong, order, off, &nb, &bad);
                if (rc != FX_ENOMEM || fi_live != 0) {
                    allfail = 0;
                    fprintf(stderr, "FAIL: %s shape %d, allocation %ld of %ld fails: rc %d, "
                            "%ld blocks leaked\n", strat_name(s), (int)si, k, events, rc, fi_live);
                }
            }
            CHECK(t, allfail, "ENOMEM on each of %ld allocations (%s shape %d)", events,
                  strat_name(s), (int)si);
            fi_countdown = -1;
        }
        free(len), free(order), free(off), free(o2), free(f2);
    }
}

/* ------------------------------------------------------------------ first fit through an index */

typedef struct {
    int64_t *index;          /* filled front to back by the producer */
    const int64_t *source;   /* what it copies */
    int64_t n, block;
    volatile int64_t progress;
} feeder;

static void *feeder_main(void *p)
{
    feeder *f = (feeder *)p;
    int64_t k = 0;
    while (k < f->n) {
        int64_t e = k + f->block < f->n ? k + f->block : f->n;
        for (; k < e; k++) f->index[k] = f->source[k];
        fx_publish(&f->progress, k);
        if ((k / f->block) % 7 == 3) sched_yield();  /* let the consumer catch up and wait */
    }
    return NULL;
}

/* fx_pack_ff_index == fx_pack_assign(FF) on lengths[index] with order mapped through index:
 * random sizes, index with repeats or a permutation, capacities on both sides of 2^31 - 1,
 * over-long items (isolated, or the error at the first), fed by a producer thread or not. */
static void index_cases(ctx *c, uint64_t seed, long ncases)
{
    tally *t = c->t;
    rng r = {seed};
    long ci;
    for (ci = 0; ci < ncases; ci++) {
        int64_t rows = rrange(&r, 1, ci % 50 == 0 ? 60000 : 400), n = rrange(&r, 0, 2 * rows), k;
        int64_t C = ci % 9 == 0 ? (int64_t)INT32_MAX + rrange(&r, 0, 5) : rrange(&r, 1, 3000);
        int64_t maxit = k_maxits[rrange(&r, 0, 4)];
        int allow = (int)rrange(&r, 0, 1), fed = (int)rrange(&r, 0, 1);
        int32_t *len = malloc((size_t)rows * sizeof *len);
        int64_t *gl = malloc((size_t)(n + 1) * sizeof *gl), *idx = malloc((size_t)(n + 1) * sizeof *idx);
        int64_t *src = malloc((size_t)(n + 1) * sizeof *src);
        int64_t *o1 = malloc((size_t)(n + 1) * sizeof *o1), *f1 = malloc((size_t)(n + 1) * sizeof *f1);
        int64_t *o2 = malloc((size_t)(n + 1) * sizeof *o2), *f2 = malloc((size_t)(n + 1) * sizeof *f2);
        int64_t nb1 = -1, nb2 = -1, bad1 = -1, bad2 = -1;
        int rc1, rc2;
        if (!len || !gl || !idx || !src || !o1 || !f1 || !o2 || !f2) {
            CHECK(t, 0, "test out of memory");
            free(len), free(gl), free(idx), free(src), free(o1), free(f1), free(o2), free(f2);
            return;
        }
        for (k = 0; k < rows; k++) {
            int64_t v = C > 3000 ? rrange(&r, 0, 3000) : rrange(&r, 0, C);
            if (rrange(&r, 0, 49) == 0) v = C < INT32_MAX ? C + rrange(&r, 1, 9) : v;  /* over-long */
            len[k] = (int32_t)v;
        }
        if (ci % 2 == 0 && n == rows) {  /* a permutation */
            for (k = 0; k < n; k++) src[k] = k;
            for (k = n - 1; k > 0; k--) {
                int64_t j = rrange(&r, 0, k), v = src[k];
                src[k] = src[j];
                src[j] = v;
            }
        } else {
            for (k = 0; k < n; k++) src[k] = rrange(&r, 0, rows - 1);
        }
        for (k = 0; k < n; k++) gl[k] = len[src[k]];
        rc1 = fx_pack_assign(gl, n, C, maxit, FX_PACK_FF, allow, o1, f1, &nb1, &bad1);
        if (rc1 == FX_OK)
            for (k = 0; k < n; k++) o1[k] = src[o1[k]];
        if (fed) {
            pthread_t th;
            feeder f = {idx, src, n, rrange(&r, 1, 700), 0};
            for (k = 0; k < n; k++) idx[k] = -1;   /* never read before published */
            if (pthread_create(&th, NULL, feeder_main, &f) != 0) {
                CHECK(t, 0, "pthread_create");
                fed = 0;
            } else {
                rc2 = fx_pack_ff_index(len, idx, n, C, maxit, allow, &f.progress, rrange(&r, 0, 50), o2, f2,
                                       &nb2, &bad2);
                pthread_join(th, NULL);
            }
        }
        if (!fed) {
            memcpy(idx, src, (size_t)n * sizeof *idx);
            rc2 = fx_pack_ff_index(len, idx, n, C, maxit, allow, NULL, rrange(&r, 0, 50), o2, f2, &nb2, &bad2);
        }
        CHECK(t, rc1 == rc2 && bad1 == bad2 && (rc1 != FX_OK ||
                  (nb1 == nb2 && !memcmp(o1, o2, (size_t)n * sizeof *o1) &&
                   !memcmp(f1, f2, (size_t)(nb1 + 1) * sizeof *f1))),
              "ff_index case %ld: rows %lld n %lld C %lld max_items %lld allow %d fed %d: rc %d/%d bad %lld/%lld "
              "bins %lld/%lld", ci, (long long)rows, (long long)n, (long long)C, (long long)maxit, allow, fed,
              rc1, rc2, (long long)bad1, (long long)bad2, (long long)nb1, (long long)nb2);
        free(len), free(gl), free(idx), free(src), free(o1), free(f1), free(o2), free(f2);
    }
    {   /* every allocation failing in turn */
        int64_t n = 100000, k, nb = -1, bad = -1;
        int32_t *len = malloc((size_t)n * sizeof *len);
        int64_t *idx = malloc((size_t)n * sizeof *idx), *o = malloc((size_t)n * sizeof *o);
        int64_t *f = malloc((size_t)(n + 1) * sizeof *f);
        long events, e;
        int allfail = 1, rc;
        if (!len || !idx || !o || !f) {
            CHECK(t, 0, "test out of memory");
            free(len), free(idx), free(o), free(f);
            return;
        }
        for (k = 0; k < n; k++) len[k] = (int32_t)rrange(&r, 1, 2048), idx[k] = n - 1 - k;
        fi_countdown = -1;
        fi_events = 0;
        fi_live = 0;
        rc = fx_pack_ff_index_fi(len, idx, n, 2048, 200, 1, NULL, 0, o, f, &nb, &bad);
        events = fi_events;
        CHECK(t, rc == FX_OK && fi_live == 0 && events > 2, "ff_index fault build: rc %d, %ld allocations",
              rc, events);
        for (e = 0; e < events; e++) {
            fi_countdown = e;
            fi_live = 0;
            rc = fx_pack_ff_index_fi(len, idx, n, 2048, 200, 1, NULL, 0, o, f, &nb, &bad);
            if (rc != FX_ENOMEM || fi_live != 0 || nb != 0) allfail = 0;
        }
        fi_countdown = -1;
        CHECK(t, allfail, "ff_index: ENOMEM on each of %ld allocations, nothing leaked", events);
        free(len), free(idx), free(o), free(f);
    }
}

/* ------------------------------------------------------------------ threads */

typedef struct {
    uint64_t seed;
    long ncases;
    tally t;
} thr_arg;

static void *thr_main(void *p)
{
    thr_arg *a = (thr_arg *)p;
    ctx c = {&a->t, 0};
    random_cases(&c, a->seed, a->ncases);
    return NULL;
}

static void thread_cases(ctx *c, int nthreads, long per)
{
    pthread_t th[16];
    thr_arg args[16];
    int i, started = 0;
    if (nthreads > 16) nthreads = 16;
    for (i = 0; i < nthreads; i++) {
        args[i].seed = 0xabc000u + (uint64_t)i;
        args[i].ncases = per;
        args[i].t.pass = args[i].t.fail = 0;
        if (pthread_create(&th[i], NULL, thr_main, &args[i]) != 0) break;
        started++;
    }
    CHECK(c->t, started == nthreads, "pthread_create");
    for (i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        c->t->pass += args[i].t.pass;
        c->t->fail += args[i].t.fail;
        if (args[i].t.fail) fprintf(stderr, "FAIL: thread %d: %ld failures\n", i, args[i].t.fail);
    }
}

/* ------------------------------------------------------------------ big inputs, timing */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void mid_cases(ctx *c, int64_t n)
{
    int64_t *len = malloc((size_t)n * sizeof *len), i;
    rng r = {4242};
    int s;
    if (!len) {
        CHECK(c->t, 0, "test out of memory");
        return;
    }
    for (i = 0; i < n; i++) len[i] = rchat(&r, 4096);
    for (s = 0; s < 4; s++) run_case(c, "mid chat-like", len, n, 4096, INT64_MAX, s, 0);
    for (s = 0; s < 4; s++) run_case(c, "mid chat-like, max_items 3", len, n, 4096, 3, s, 0);
    for (i = 0; i < n; i++) len[i] = rrange(&r, 0, 5) ? rchat(&r, 2048) : 0;
    for (s = 0; s < 4; s++) run_case(c, "mid chat-like, C=2048, zeros", len, n, 2048, 64, s, 0);
    /* wide length range (radix sort) */
    for (i = 0; i < n; i++) len[i] = rchat(&r, 1 << 20) * 97;
    for (s = 0; s < 4; s++) run_case(c, "mid chat-like x97, C=2^20", len, n, 1 << 20, INT64_MAX, s, 1);
    free(len);
}

static void big_cases(ctx *c, int64_t n, int bench, int reps)
{
    int64_t *len = malloc((size_t)n * sizeof *len), *order = malloc((size_t)n * sizeof *order);
    int64_t *off = malloc((size_t)(n + 1) * sizeof *off), i, nb, bad, sum = 0;
    const int64_t C = 4096;
    rng r = {777};
    int s, pass;
    if (!len || !order || !off) {
        CHECK(c->t, 0, "test out of memory");
        free(len), free(order), free(off);
        return;
    }
    for (pass = 0; pass < 4; pass++) {
        int64_t maxit = pass == 1 ? 16 : INT64_MAX, cap = pass == 3 ? C << 10 : C;
        int allow = pass >= 2;
        for (i = 0; i < n; i++) {
            len[i] = pass == 3 ? rchat(&r, C) * 1021 : rchat(&r, C); /* pass 3: radix sort */
            if (pass >= 2 && rrange(&r, 0, 999) == 0) len[i] = cap + rrange(&r, 1, 9000);
        }
        for (s = 0; s < 4; s++) {
            const char *why;
            int rc = fx_pack_assign(len, n, cap, maxit, s, allow, order, off, &nb, &bad);
            CHECK(c->t, rc == FX_OK, "big %s pass %d: rc %d", strat_name(s), pass, rc);
            if (rc != FX_OK) continue;
            why = check_result(len, n, cap, maxit, s, order, off, nb);
            CHECK(c->t, why == NULL, "big %s pass %d: %s", strat_name(s), pass, why ? why : "");
        }
    }
    if (bench) {
        /* chat-like lengths: lognormal mean ~300, max 4096; capacity 4096 */
        r.s = 31337;
        sum = 0;
        for (i = 0; i < n; i++) {
            len[i] = rchat(&r, C);
            sum += len[i];
        }
        printf("timing: n=%lld chat-like lengths (mean %.1f), capacity %lld, best of %d\n",
               (long long)n, (double)sum / (double)n, (long long)C, reps);
        for (s = 0; s < 4; s++) {
            double best = 1e300;
            int k, rc = FX_OK;
            int64_t lb = (sum + C - 1) / C;
            for (k = 0; k < reps; k++) {
                double t0 = now_ms(), dt;
                rc = fx_pack_assign(len, n, C, INT64_MAX, s, 0, order, off, &nb, &bad);
                dt = now_ms() - t0;
                if (dt < best) best = dt;
            }
            CHECK(c->t, rc == FX_OK, "bench %s", strat_name(s));
            printf("  %-3s %8.2f ms  bins %lld  lower bound ceil(sum/C) %lld  (+%.3f%%)\n",
                   strat_name(s), best, (long long)nb, (long long)lb,
                   100.0 * (double)(nb - lb) / (double)lb);
        }
        fflush(stdout);
    }
    free(len), free(order), free(off);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    long ncases = 2500;
    int64_t mid = 20000, big = 1000000;
    int nthreads = 4, bench = 1, reps = 5, i;
    uint64_t seed = 20240601;
    ctx c = {&g_t, 1};
    double t0 = now_ms();

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--cases") && v) ncases = atol(v), i++;
        else if (!strcmp(a, "--mid") && v) mid = atoll(v), i++;
        else if (!strcmp(a, "--big") && v) big = atoll(v), i++;
        else if (!strcmp(a, "--threads") && v) nthreads = atoi(v), i++;
        else if (!strcmp(a, "--seed") && v) seed = strtoull(v, NULL, 0), i++;
        else if (!strcmp(a, "--bench-reps") && v) reps = atoi(v), i++;
        else if (!strcmp(a, "--no-bench")) bench = 0;
        else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
    }

#define STEP(name, call)                                                                 \
    do {                                                                                 \
        long f0 = g_t.fail, p0 = g_t.pass;                                               \
        double ts = now_ms();                                                            \
        call;                                                                            \
        printf("%-28s %6ld passed, %ld failed  (%.0f ms)\n", name, g_t.pass - p0,         \
               g_t.fail - f0, now_ms() - ts);                                            \
        fflush(stdout);                                                                  \
    } while (0)

    STEP("error codes", error_cases(&c));
    STEP("fixed cases", fixed_cases(&c));
    STEP("random cases vs reference", random_cases(&c, seed, ncases));
    if (mid > 0) STEP("mid-size vs reference", mid_cases(&c, mid));
    if (nthreads > 0) STEP("threads vs reference", thread_cases(&c, nthreads, ncases / 10 + 1));
    STEP("allocation failures", fault_cases(&c));
    STEP("first fit through an index", index_cases(&c, seed ^ 0x5eed, ncases / 5 + 20));
    if (big > 0) STEP("big invariants", big_cases(&c, big, bench, reps));
    printf("total %.0f ms\n", now_ms() - t0);
    printf("%ld passed, %ld failed\n", g_t.pass, g_t.fail);
    return g_t.fail ? 1 : 0;
}
