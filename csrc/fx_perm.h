/* fx_perm: torch's CPU randperm, bit for bit, without torch.
 *
 * torch.randperm(n, generator=g) on the CPU (n < 2^32 / 20) is a forward Fisher-Yates
 * shuffle of 0..n-1 driven by the generator's MT19937: for i in 0..n-2,
 * z = next32() % (n - i), swap(p[i], p[i + z]). A fresh torch.Generator seeded with s runs
 * MT19937 seeded by init_genrand(s & 0xffffffff). This reproduces that stream and shuffle,
 * so that torch's RandomSampler (which draws a seed from the global generator and
 * seeds a fresh one with it) can be replayed into an int64 array in one call.
 * No allocation beyond a 2.5 KiB state on the stack, no globals: thread safe.
 */
#ifndef FX_PERM_H
#define FX_PERM_H

#include <stdint.h>

/* Largest n for which torch uses the shuffle above (std::numeric_limits<uint32_t>::max() / 20). */
#define FX_RANDPERM_MAX_N ((int64_t)(4294967295u / 20u))

/* out[0..count) = what RandomSampler(range(n), num_samples=count) yields from a fresh
 * generator seeded with seed: count / n full permutations from one MT19937 stream, then the
 * first count % n entries of one more (only the draws that fix those entries are made).
 * out must have room for ceil(count / n) * n entries (the partial permutation's swaps reach
 * all n places; the entries past count are scratch). Needs 1 <= n < FX_RANDPERM_MAX_N and
 * count >= 0; returns 0, or -1 for arguments outside that. */
int fx_randperm_mt19937(uint32_t seed, int64_t n, int64_t count, int64_t *out);

/* The same, publishing progress for a consumer on another thread (csrc/fx_sync.h): after
 * each block of up to 624 shuffle steps, *progress = the number of leading entries of out
 * that are final (non-decreasing; count at the end). A forward Fisher-Yates never writes a
 * place before its current step again, so the consumer can read those while the shuffle
 * goes on. progress may be NULL. Check the arguments before starting a consumer: on -1
 * nothing is published. */
int fx_randperm_mt19937_progress(uint32_t seed, int64_t n, int64_t count, int64_t *out,
                                 volatile int64_t *progress);

/* The first k 32-bit outputs of MT19937 seeded with init_genrand(seed) (for tests). */
void fx_mt19937_fill(uint32_t seed, int64_t k, uint32_t *out);

#endif
