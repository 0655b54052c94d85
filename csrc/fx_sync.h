/* fx_sync: a progress counter shared by one producer and one consumer thread.
 *
 * The producer fills an array front to back and publishes how many entries are final with
 * fx_publish (a release store); the consumer reads entry k only after fx_wait_progress has
 * returned a value > k (acquire loads), so it sees the entries as written. Used to run two
 * stages of one call on two cores (fx_perm's shuffle feeding fx_pack's first fit).
 * Header-only, C99 with GCC/Clang builtins or MSVC on x64 (where plain volatile accesses
 * are acquire/release in hardware; the compiler barriers keep the compiler from moving
 * other accesses across them).
 */
#ifndef FX_SYNC_H
#define FX_SYNC_H

#include <stdint.h>

#include "fx_compat.h"

#if FX_MSVC
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <intrin.h>
#include <windows.h>
#define FX_SYNC_INLINE static __inline
static __forceinline int64_t fx_acquire_load(const volatile int64_t *p)
{
    int64_t v = *p;
    _ReadWriteBarrier();
    return v;
}
static __forceinline void fx_publish(volatile int64_t *p, int64_t v)
{
    _ReadWriteBarrier();
    *p = v;
}
#define FX_CPU_RELAX() YieldProcessor()
#define FX_THREAD_YIELD() SwitchToThread()
#define FX_THREAD_NAP() Sleep(0)
#else
#if FX_GNUC
#define fx_acquire_load(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define fx_publish(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_ATOMICS__)
/* C11 atomics on the counter (an aligned int64_t: the same object representation as
 * _Atomic int64_t on every target with lock-free 64-bit atomics). */
#include <stdatomic.h>
#define fx_acquire_load(p) \
    atomic_load_explicit((const volatile _Atomic int64_t *)(p), memory_order_acquire)
#define fx_publish(p, v) \
    atomic_store_explicit((volatile _Atomic int64_t *)(p), (v), memory_order_release)
#else
#error "fx_sync.h needs gcc/clang builtins, MSVC or C11 atomics"
#endif
#if FX_GNUC && (defined(__x86_64__) || defined(__i386__))
#define FX_CPU_RELAX() __builtin_ia32_pause()
#elif FX_GNUC && defined(__aarch64__)
#define FX_CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define FX_CPU_RELAX() ((void)0)
#endif
#include <sched.h>
#include <time.h>
#define FX_THREAD_YIELD() sched_yield()
static inline void fx_thread_nap(void)
{
    struct timespec ts = {0, 50000}; /* 50 us */
    nanosleep(&ts, NULL);
}
#define FX_THREAD_NAP() fx_thread_nap()
#define FX_SYNC_INLINE static inline
#endif

/* Wait until *p > k; returns the value seen. Spins briefly (the producer is normally
 * ahead), yields a few times, then naps (50 us) between checks: on a machine whose cores are
 * busy the producer may be descheduled, and a consumer that kept spinning or yielding (still
 * runnable: CFS gives it its share) took the time the producer needed (the 2-thread sampler
 * ran 5x slower than one thread with the other core busy; bench/bench_contention.py). */
FX_SYNC_INLINE int64_t fx_wait_progress(const volatile int64_t *p, int64_t k)
{
    int64_t v = fx_acquire_load(p);
    int spins = 0;
    while (v <= k) {
        if (spins < 256) {
            FX_CPU_RELAX();
        } else if (spins < 256 + 16) {
            FX_THREAD_YIELD();
        } else {
            FX_THREAD_NAP();
        }
        spins++;
        v = fx_acquire_load(p);
    }
    return v;
}

#endif /* FX_SYNC_H */
