/* fx_compat: the compiler-specific parts of fastaxo's C, each behind a guard.
 *
 * FX_GNUC is 1 for gcc and clang (GNU builtins and attributes), FX_MSVC for Microsoft's
 * compiler proper (its intrinsics; clang-cl counts as clang). Anything else takes plain C11.
 * -DFX_PORTABLE sets both to 0: gcc or clang then compile what a compiler with neither
 * gets, which is how scripts/check_c.sh builds and tests those fallbacks (and, by reading,
 * the MSVC lines beside them) on Linux.
 */
#ifndef FX_COMPAT_H
#define FX_COMPAT_H

#if !defined(FX_PORTABLE) && (defined(__GNUC__) || defined(__clang__))
#define FX_GNUC 1
#else
#define FX_GNUC 0
#endif

#if !defined(FX_PORTABLE) && defined(_MSC_VER) && !defined(__clang__)
#define FX_MSVC 1
#else
#define FX_MSVC 0
#endif

/* Prefetch for reading: FX_PREFETCH into every cache level, FX_PREFETCH_ONCE for data used
 * once (non-temporal). A hint: a no-op where the compiler has none. */
#if FX_GNUC
#define FX_PREFETCH(p) __builtin_prefetch((p))
#define FX_PREFETCH_ONCE(p) __builtin_prefetch((p), 0, 0)
#elif FX_MSVC && (defined(_M_X64) || defined(_M_IX86))
#include <xmmintrin.h>
#define FX_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define FX_PREFETCH_ONCE(p) _mm_prefetch((const char *)(p), _MM_HINT_NTA)
#else
#define FX_PREFETCH(p) ((void)(p))
#define FX_PREFETCH_ONCE(p) ((void)(p))
#endif

/* A small helper inlined even where the optimiser would not (SIMD bodies). */
#if FX_GNUC
#define FX_FORCE_INLINE inline __attribute__((always_inline))
#elif FX_MSVC
#define FX_FORCE_INLINE __forceinline
#else
#define FX_FORCE_INLINE inline
#endif

/* FX_LITTLE: 1 where words load little-endian (byte 0 lowest), known at compile time;
 * 0 elsewhere (code that needs it then takes its byte-by-byte path). */
#if FX_GNUC && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FX_LITTLE 1
#elif FX_MSVC /* every target of MSVC is little-endian */
#define FX_LITTLE 1
#else
#define FX_LITTLE 0
#endif

/* FX_CTZ64(x): the count of trailing zero bits of x != 0, where there is a builtin for it
 * (FX_HAVE_CTZ64 1); code without it takes a byte-by-byte path. */
#if FX_GNUC
#define FX_HAVE_CTZ64 1
#define FX_CTZ64(x) ((unsigned)__builtin_ctzll(x))
#elif FX_MSVC && defined(_M_X64)
#include <intrin.h>
#define FX_HAVE_CTZ64 1
static __forceinline unsigned fx_ctz64_msvc(unsigned __int64 x)
{
    unsigned long i;
    _BitScanForward64(&i, x);
    return (unsigned)i;
}
#define FX_CTZ64(x) fx_ctz64_msvc(x)
#else
#define FX_HAVE_CTZ64 0
#endif

#endif /* FX_COMPAT_H */
