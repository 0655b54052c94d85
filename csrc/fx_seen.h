/* fx_seen: an insertion-ordered set of 32-byte digests.
 *
 * Digests live in fixed-size chunks appended in insertion order (never moved,
 * so growth costs no copy and no 2x peak); an open-addressing table of uint32
 * slots (index + 1, 0 = empty, linear probing, load <= 3/4) finds them.  The
 * first 8 digest bytes are already uniform, so they are the hash.  Memory: 32
 * bytes per digest plus 5.3-10.7 bytes of table per digest, plus < 1 chunk.
 */
#ifndef FX_SEEN_H
#define FX_SEEN_H

#include <stddef.h>
#include <stdint.h>

#include "fx_status.h"

#define FX_SEEN_CHUNK_SHIFT 15                       /* 32768 digests = 1 MiB per chunk */
#define FX_SEEN_CHUNK (1 << FX_SEEN_CHUNK_SHIFT)
#define FX_SEEN_MAX ((int64_t)0xFFFFFFFEu)           /* slots hold index + 1 in uint32  */

/* Statuses: fx_status.h (FX_OK, FX_ENOMEM, FX_EFULL past FX_SEEN_MAX). */

typedef struct {
    uint8_t **chunks;
    int64_t nchunks, chunks_cap;
    int64_t count;
    uint32_t *table;
    uint64_t mask;          /* table size - 1 (0 when no table yet) */
} fx_seen;

void fx_seen_init(fx_seen *s);
void fx_seen_free(fx_seen *s);
/* Make room for `extra` more digests without rehashing during the next inserts. */
int fx_seen_reserve(fx_seen *s, int64_t extra);
/* Index of the digest in insertion order, or -1. */
int64_t fx_seen_find(const fx_seen *s, const uint8_t d[32]);
/* Insert each of n digests (rows of 32 bytes) in order; is_new[i] = 1 when digest i
 * was not in the set before (including earlier digests of this same call). */
int fx_seen_insert_many(fx_seen *s, const uint8_t *digests, int64_t n, uint8_t *is_new);
const uint8_t *fx_seen_get(const fx_seen *s, int64_t index);
size_t fx_seen_nbytes(const fx_seen *s);

#endif
