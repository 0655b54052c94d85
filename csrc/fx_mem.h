/* fx_mem: zeroed allocations for large tables probed at random (the BPE merge table, direct
 * tables and word caches). Where the system has transparent huge pages (Linux, MADV_HUGEPAGE),
 * a table of 2 MiB or more is mapped on 2 MiB pages: one page fault and one TLB entry per
 * 2 MiB instead of 512 of each, which random probes otherwise pay in TLB misses; a few freed
 * mappings (at most 64 MiB) are kept and zeroed for the next table of their size, which then
 * neither faults nor waits for the kernel to compact memory. Below 2 MiB, zeroed memory on
 * cache lines. Elsewhere, calloc. */
#ifndef FX_MEM_H
#define FX_MEM_H

#include <stddef.h>

/* n zeroed bytes (n = 0: a valid pointer to none), or NULL when out of memory. */
void *fx_big_calloc(size_t n);

/* Frees what fx_big_calloc(n) returned (NULL: nothing); n must be the size asked for. */
void fx_big_free(void *p, size_t n);

/* Test hook: while on is nonzero, fx_big_calloc returns NULL, as out of memory would (tests
 * reach the paths that handle it). Returns the previous setting. Set it while no other thread
 * allocates. */
int fx_big_fail(int on);

#endif /* FX_MEM_H */
