/* fx_pack: bin assignment for sample packing (which sequences share a packed row).
 *
 * Input: n item lengths (int64, >= 0), a bin capacity C (tokens, >= 1) and a limit on
 * items per bin (max_items >= 1).  Output, written by the caller-allocated arrays:
 *   order[0..n)            item indices (0-based, local to this call), grouped by bin;
 *                          bins in creation order, items in a bin in insertion order;
 *   bin_offsets[0..nb]     bin b holds order[bin_offsets[b] .. bin_offsets[b+1]);
 *                          bin_offsets[0] == 0 and bin_offsets[nb] == n; needs n + 1 slots;
 *   *n_bins                nb.
 * Every item appears exactly once.  A bin's items sum to <= C tokens, except that an item
 * longer than C (allowed only with allow_overlong) is put alone in a new bin, which is then
 * closed (nothing else, not even an empty item, joins it).  This is exactly what Axolotl's
 * numba first-fit does (remaining space goes negative).  Without allow_overlong an item
 * longer than C returns FX_EOVERLONG and sets *bad_item.
 *
 * Strategies (all deterministic; ties are part of the contract, the Python reference in
 * fastaxo/_reference_pack.py implements the same rules):
 *   FX_PACK_BFD  best-fit decreasing.  Items sorted by length descending, ties by index
 *                ascending (stable).  Each item goes to the open bin whose remaining space is
 *                the smallest that is >= the item's length; among bins with that same
 *                remaining space, the one that most recently reached it (LIFO).  If none
 *                fits, a new bin.  O(n log64 C) with a 64-ary bitmap over remaining-space
 *                values; needs C <= FX_PACK_BFD_MAX_CAPACITY.
 *   FX_PACK_FFD  first-fit decreasing.  Same sort; each item goes to the lowest-numbered
 *                (earliest created) bin with remaining >= length.  O(n log bins) with a
 *                max segment tree over bins.
 *   FX_PACK_FF   first-fit in the given order (Axolotl's pack_parallel / pack_group).
 *   FX_PACK_NF   next-fit in the given order: only the most recently created bin is open;
 *                if the item doesn't fit (space or item count) a new bin opens.  O(n).
 * A bin that holds max_items items takes no more items (Axolotl's bin_size).
 * "Fits" means remaining >= length and count < max_items; remaining = C - sum of lengths
 * (negative for a bin holding one over-long item).  Empty items (length 0) fit any bin with
 * remaining >= 0 and room by count.
 *
 * Memory: allocated inside (malloc/realloc, freed before return; FX_ENOMEM on
 * failure): BFD 8*(C+1) bytes of stack heads (reserved, touched only where used) + C/8
 * bytes of bitmap + 16 bytes per bin; FFD/FF 18-34 bytes per bin (the 8 newest bins are
 * checked first, older ones through an 8-ary max tree grown by doubling); the decreasing
 * sorts 8 bytes per item plus up to 8*max(n, 4096) for the counting sort (a radix sort
 * when lengths spread wider).  NF allocates nothing.
 * No Python, no printing, thread-safe (no globals): callable from several threads on
 * disjoint groups at once.
 *
 * Errors are checked in this order: arguments (also NULL outputs), negative lengths, BFD
 * capacity, over-long items.  On any error *n_bins = 0, *bad_item is the index concerned
 * or -1, and order / bin_offsets hold garbage (they double as scratch).
 */
#ifndef FX_PACK_H
#define FX_PACK_H

#include <stdint.h>

#include "fx_status.h"

enum { FX_PACK_BFD = 0, FX_PACK_FFD = 1, FX_PACK_FF = 2, FX_PACK_NF = 3 };

/* Statuses (fx_status.h): FX_OK; FX_EINVAL, a bad argument (n < 0, C < 1, max_items < 1,
 * an unknown strategy, a negative length (*bad_item set), BFD with C too large);
 * FX_EOVERLONG, an item longer than C without allow_overlong (*bad_item set); FX_ENOMEM. */

#define FX_PACK_BFD_MAX_CAPACITY ((int64_t)1 << 26)

int fx_pack_assign(const int64_t *lengths, int64_t n, int64_t capacity, int64_t max_items,
                   int strategy, int allow_overlong,
                   int64_t *order, int64_t *bin_offsets, int64_t *n_bins, int64_t *bad_item);

/* First fit (FX_PACK_FF) over rows taken in a given order, without gathering their lengths:
 * item k is row index[k], of length lengths[index[k]] (int32, >= 0: the caller checks both
 * that and 0 <= index[k] < the rows of lengths). The bins are exactly fx_pack_assign(FF)'s
 * on the gathered lengths, but order[] receives row ids (index[k]) instead of item
 * positions. An over-long item without allow_overlong stops with FX_EOVERLONG and
 * *bad_item = its position k.
 * progress: NULL, or a counter a producer on another thread advances while it fills index
 * (csrc/fx_sync.h; fx_randperm_mt19937_progress): index[k] is read only once *progress > k
 * has been seen, so packing runs alongside the shuffle that makes the order. The producer
 * must reach n. bins_hint: the expected number of bins (0: unknown), the initial size of
 * the bin arrays (they grow by doubling).  Memory as FF's above; thread-safe. */
int fx_pack_ff_index(const int32_t *lengths, const int64_t *index, int64_t n, int64_t capacity,
                     int64_t max_items, int allow_overlong, const volatile int64_t *progress, int64_t bins_hint,
                     int64_t *order, int64_t *bin_offsets, int64_t *n_bins, int64_t *bad_item);

#endif
