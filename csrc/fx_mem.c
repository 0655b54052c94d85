/* fx_mem: see fx_mem.h. */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS and madvise under -std=c11 */
#endif
#include "fx_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int fail_all; /* fx_big_fail */

int fx_big_fail(int on)
{
    int was = fail_all;
    fail_all = on != 0;
    return was;
}

#if defined(__linux__) && !defined(FX_NO_HUGE)
#include <pthread.h>
#include <sys/mman.h>

#define HUGE ((size_t)2 << 20)

static size_t whole_pages(size_t n)
{
    return (n + HUGE - 1) & ~(HUGE - 1);
}

/* Freed mappings kept for the next table of their size (a new tokenizer's tables, a cleared
 * word cache): a fresh mapping's first write faults, and on huge pages the fault may first
 * compact memory (THP defrag=madvise: ~10 ms a table on a busy host), where zeroing a kept
 * one costs ~0.1 ms a MiB. At most POOL_SLOTS mappings and POOL_BYTES bytes. The lock is
 * only ever tried: a table taken while another thread holds it (or after a fork in which
 * another thread held it) is simply mapped anew. */
#define POOL_SLOTS 8
#define POOL_BYTES ((size_t)64 << 20)
static struct {
    char *p;
    size_t len;
} pool[POOL_SLOTS];
static size_t pool_bytes;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static char *pool_take(size_t len)
{
    char *p = NULL;
    if (pthread_mutex_trylock(&pool_lock) != 0)
        return NULL;
    for (int i = 0; i < POOL_SLOTS && !p; i++) {
        if (pool[i].p && pool[i].len == len) {
            p = pool[i].p;
            pool[i].p = NULL;
            pool_bytes -= len;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return p;
}

static int pool_give(char *p, size_t len)
{
    int kept = 0;
    if (pthread_mutex_trylock(&pool_lock) != 0)
        return 0;
    if (len <= POOL_BYTES - pool_bytes) {
        for (int i = 0; i < POOL_SLOTS && !kept; i++) {
            if (!pool[i].p) {
                pool[i].p = p;
                pool[i].len = len;
                pool_bytes += len;
                kept = 1;
            }
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return kept;
}

void *fx_big_calloc(size_t n)
{
    if (fail_all)
        return NULL;
    if (n < HUGE) { /* on cache lines (the tables' slots and buckets are laid out by line) */
        size_t lines = n ? (n + 63) & ~(size_t)63 : 64;
        void *p = NULL;
        if (posix_memalign(&p, 64, lines) != 0)
            return NULL;
        memset(p, 0, lines);
        return p;
    }
    if (n > SIZE_MAX - 2 * HUGE)
        return NULL;
    size_t len = whole_pages(n);
    char *kept = pool_take(len);
    if (kept) {
        memset(kept, 0, n);
        return kept;
    }
    /* twice the alignment mapped, the ends trimmed: a mapping aligned to 2 MiB, which is
     * what lets the kernel back it with huge pages (zeroed, as anonymous memory is) */
    size_t span = len + HUGE;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    size_t lead = (HUGE - ((uintptr_t)p & (HUGE - 1))) & (HUGE - 1);
    if (lead)
        munmap(p, lead);
    if (span - lead > len)
        munmap(p + lead + len, span - lead - len);
#ifdef MADV_HUGEPAGE
    madvise(p + lead, len, MADV_HUGEPAGE); /* a hint: refused, the pages stay small */
#endif
    return p + lead;
}

void fx_big_free(void *p, size_t n)
{
    if (!p)
        return;
    if (n < HUGE) {
        free(p);
        return;
    }
    size_t len = whole_pages(n);
    if (!pool_give(p, len))
        munmap(p, len);
}
#else
void *fx_big_calloc(size_t n)
{
    return fail_all ? NULL : calloc(n ? n : 1, 1);
}

void fx_big_free(void *p, size_t n)
{
    (void)n;
    free(p);
}
#endif
