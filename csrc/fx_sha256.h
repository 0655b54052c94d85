/*
 * fx_sha256.h - SHA-256 kernel for fastaxo (plain C99/C11, no Python.h).
 *
 * Three compression back ends, chosen at run time:
 *   FX_SHA256_PORTABLE  portable C, always compiled and supported
 *   FX_SHA256_SHANI     x86-64 SHA extensions (gcc/clang via target attributes,
 *                       MSVC via plain intrinsics); no special compiler flags
 *   FX_SHA256_ARMV8     AArch64 crypto extensions (Linux: HWCAP_SHA2, macOS
 *                       arm64: always; other OSes: only if the build itself
 *                       already targets SHA2)
 *
 * Threading: call fx_sha256_select() once (e.g. at module import); after that
 * every function here is thread-safe.  A compress function pointer obtained
 * from fx_sha256_compress_for() / ctx->compress is a pure function and can be
 * shared by any number of threads.  fx_sha256_current() selects lazily on
 * first use (race-free where C11 atomics or GNU __atomic builtins exist; on
 * other compilers call fx_sha256_select() once before going multi-threaded).
 *
 * Lengths are size_t; the message bit length is kept modulo 2^64 in uint64_t,
 * so messages above 4 GiB are fine.
 */
#ifndef FX_SHA256_H
#define FX_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "fx_status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    FX_SHA256_AUTO = -1,
    FX_SHA256_PORTABLE = 0,
    FX_SHA256_SHANI = 1,
    FX_SHA256_ARMV8 = 2,
    FX_SHA256_NIMPL = 3
};

/* Statuses: fx_status.h (FX_OK, FX_EUNSUPPORTED, FX_ESELFTEST, FX_EINVAL). */

enum { FX_SHA256_DIGEST_SIZE = 32, FX_SHA256_BLOCK_SIZE = 64 };

/* Process nblocks consecutive 64-byte blocks (any alignment) into state.
 * nblocks == 0 is allowed and leaves state unchanged. */
typedef void (*fx_sha256_compress_fn)(uint32_t state[8], const uint8_t *blocks, size_t nblocks);

typedef struct {
    uint32_t h[8];
    uint64_t nbytes;
    uint8_t buf[64];
    size_t buflen;
    fx_sha256_compress_fn compress;
} fx_sha256_ctx;

/* 1 if the code for impl was compiled into this build (0 for bad ids / AUTO). */
int fx_sha256_impl_compiled(int impl);
/* compiled AND the CPU/OS supports it (runtime probe, cached). */
int fx_sha256_impl_supported(int impl);
/* "portable", "sha-ni", "armv8-crypto" ("auto" for FX_SHA256_AUTO); NULL for bad id. */
const char *fx_sha256_impl_name(int impl);
/* Inverse of fx_sha256_impl_name (case-insensitive; also accepts the aliases
 * "shani", "sha_ni", "armv8", "armv8_crypto").  "auto" -> FX_SHA256_AUTO.
 * Unknown / NULL -> -1.  NOTE: -1 == FX_SHA256_AUTO, so use
 * fx_sha256_impl_parse() when "unknown" must be told apart from "auto". */
int fx_sha256_impl_from_name(const char *name);
/* Like fx_sha256_impl_from_name but returns FX_OK (and *impl) or FX_EINVAL. */
int fx_sha256_impl_parse(const char *name, int *impl);

/* Known-answer test of that path (plus cross-check against the portable path
 * for the accelerated ones): FX_OK / FX_ESELFTEST / FX_EUNSUPPORTED
 * (FX_EINVAL for an out-of-range id; AUTO tests the current impl). */
int fx_sha256_selftest(int impl);
/* AUTO: the best supported impl that passes its selftest, falling back to
 * portable (returns FX_OK, or FX_ESELFTEST if even portable fails, in which
 * case portable is still selected).  Explicit impl: FX_EINVAL for a bad
 * id, FX_EUNSUPPORTED if not supported, FX_ESELFTEST if it fails; on any
 * error the current selection is left unchanged.  Sets the process-global
 * current impl. */
int fx_sha256_select(int impl);
/* The selected impl id (runs fx_sha256_select(AUTO) lazily if never selected). */
int fx_sha256_current(void);
/* Compress function of impl; NULL if unsupported or bad id.  AUTO -> the
 * current impl's function. */
fx_sha256_compress_fn fx_sha256_compress_for(int impl);

/* Uses the current impl's compress fn, captured once into ctx. */
void fx_sha256_init(fx_sha256_ctx *ctx);
/* fn == NULL means the current impl's function. */
void fx_sha256_init_with(fx_sha256_ctx *ctx, fx_sha256_compress_fn fn);
/* Full blocks are compressed straight from data, no copy.  len may be 0 and
 * data may then be NULL. */
void fx_sha256_update(fx_sha256_ctx *ctx, const void *data, size_t len);
/* Writes the digest.  The ctx must be re-initialised before reuse. */
void fx_sha256_final(fx_sha256_ctx *ctx, uint8_t out[32]);
/* Fastest path for one whole message: full blocks straight from data, then the
 * 1 or 2 padded tail blocks from the stack.  fn == NULL means current impl.
 * out may alias data. */
void fx_sha256_oneshot(fx_sha256_compress_fn fn, const void *data, size_t len, uint8_t out[32]);

/* ---- Many independent messages ------------------------------------------
 * Digests of n messages, 32 bytes each, to out[32*i .. 32*i+32).  impl is
 * the impl to use (normally fx_sha256_current(), read once by the caller;
 * AUTO, or an impl that is not supported, means the current one).  With SHA-NI
 * or ARMv8 two messages are hashed at a time with their rounds interleaved
 * (about twice the single-message throughput per core on long messages,
 * also faster on short ones); portable hashes one at a time.  Thread-safe
 * (no globals written), no malloc, nothing read outside the messages.  Empty
 * messages and empty segments are fine (their pointers may then be NULL).
 * out must not overlap the messages.  n <= 0 does nothing. */

typedef struct {
    const uint8_t *ptr;
    size_t len;
} fx_seg;

/* Message i = concatenation of segs[seg_start[i] .. seg_start[i+1]);
 * seg_start has n+1 entries. */
void fx_sha256_many_segs(int impl, const fx_seg *segs, const int64_t *seg_start, int64_t n, uint8_t *out);
/* Contiguous messages: message i = data + off[i]*width, of length
 * (off[i+1]-off[i])*width bytes; off has n+1 entries. */
void fx_sha256_many_offsets32(int impl, const uint8_t *data, const int32_t *off, int64_t width, int64_t n,
                              uint8_t *out);
void fx_sha256_many_offsets64(int impl, const uint8_t *data, const int64_t *off, int64_t width, int64_t n,
                              uint8_t *out);
/* Fixed-size rows: message i = data + i*row_bytes, of row_bytes bytes. */
void fx_sha256_many_fixed(int impl, const uint8_t *data, int64_t row_bytes, int64_t n, uint8_t *out);
/* Pointer + length lists: message i = ptrs[i][0 .. lens[i]). */
void fx_sha256_many_ptrs(int impl, const char *const *ptrs, const int64_t *lens, int64_t n, uint8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* FX_SHA256_H */
