// An in-process heap allocation counter for tests and benchmarks.
//
// Linking this target into an executable interposes malloc, calloc, realloc,
// posix_memalign, aligned_alloc, memalign, valloc and pvalloc for the whole
// process (an executable's definitions win over libc's in ELF symbol
// resolution, also for calls made from shared libraries such as the Swift
// runtime). Each forwards to glibc's __libc_* entry points. Allocations are
// counted only on threads that called bl_alloc_counting_begin(), so other
// threads of the test runner do not disturb a measurement.
#ifndef BOARDLOOP_CALLOCATIONCOUNTER_H
#define BOARDLOOP_CALLOCATIONCOUNTER_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/// Starts counting allocations made by the calling thread.
void bl_alloc_counting_begin(void);
/// Stops counting allocations made by the calling thread.
void bl_alloc_counting_end(void);
/// Allocations counted so far on all counting threads.
uint64_t bl_alloc_count(void);
/// Bytes requested by the counted allocations.
uint64_t bl_alloc_bytes(void);
/// Resets both totals to zero.
void bl_alloc_reset(void);
/// Allocations counted on the calling thread alone (while it counted)
/// since its last bl_alloc_thread_reset(): a per-thread figure when
/// several threads count at once.
uint64_t bl_alloc_thread_count(void);
/// Resets the calling thread's own count to zero.
void bl_alloc_thread_reset(void);
/// 1 when the interposer is the process's malloc (a self-check).
int bl_alloc_interposer_active(void);
int bl_sanitizer_thread(void);
int bl_sanitizer_address(void);

#ifdef __cplusplus
}
#endif
#endif
