/* fx_fill: the element moves of packing and padding.
 *
 * Packed rows and padded batches are built from three operations on typed runs:
 * copy a run of source tokens (converting the integer type when asked), fill a run with
 * one value (the pad id, -100, a segment id) and write 0, 1, 2, ... (position ids).
 * Element types are codes (FX_T_*); conversions are defined from any integer type to
 * int32 or int64 (the caller checks the range when narrowing), and between equal types
 * for every type (a plain memcpy, so float columns travel unchanged).
 * No allocation, no globals: safe to call from many threads on disjoint outputs.
 */
#ifndef FX_FILL_H
#define FX_FILL_H

#include <stdint.h>

enum {
    FX_T_I8 = 0, FX_T_I16 = 1, FX_T_I32 = 2, FX_T_I64 = 3,
    FX_T_U8 = 4, FX_T_U16 = 5, FX_T_U32 = 6, FX_T_U64 = 7,
    FX_T_F32 = 8, FX_T_F64 = 9, FX_T_F16 = 10, FX_T_NTYPES = 11
};

/* Size in bytes of an element of type t (0 for an unknown code). */
int fx_type_size(int t);
/* 1 when fx_copy_elems supports src type st -> dst type dt. */
int fx_copy_supported(int dt, int st);
/* dst[i] = (dt) src[i] for i < n. */
void fx_copy_elems(void *dst, int dt, const void *src, int st, int64_t n);
/* dst[i] = the element whose bytes are pattern[0..size) for i < n. */
void fx_fill_elems(void *dst, int size, const void *pattern, int64_t n);
/* dst[i] = start + i (dt is FX_T_I32 or FX_T_I64). */
void fx_iota_elems(void *dst, int dt, int64_t start, int64_t n);
/* The smallest and the largest of v[0..n), n >= 1: one pass (vectorised), for the types an
 * output column may be narrowed to. */
void fx_bounds_i32(const int32_t *v, int64_t n, int32_t *lo, int32_t *hi);


/* Hint that a run of `bytes` (the first 4 KiB of it) at p will be read soon: entries are
 * read in bin order, which is random in the source, so the hardware prefetcher alone misses
 * the start of every entry. No effect without GCC/clang builtins. */
void fx_prefetch_run(const void *p, int64_t bytes);

#endif
