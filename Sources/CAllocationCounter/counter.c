// See CAllocationCounter.h.
#define _GNU_SOURCE
#include "CAllocationCounter.h"
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern void __libc_free(void *);

static __thread int counting;   // initial-exec TLS in the executable: no allocation to reach it
static __thread uint64_t thread_count;  // the calling thread's own counted allocations
static uint64_t total_count;
static uint64_t total_bytes;
static int interposer_hit;
static int trap_mode = -1;  // BOARDLOOP_ALLOC_TRAP=1: trap at the first counted allocation (debugging)

static inline void note(size_t bytes) {
    interposer_hit = 1;
    if (counting) {
        if (trap_mode < 0) {
            const char *e = getenv("BOARDLOOP_ALLOC_TRAP");
            trap_mode = e && e[0] == '1';
        }
        if (trap_mode) __builtin_trap();
        thread_count++;
        __atomic_fetch_add(&total_count, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&total_bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
    }
}

// Sanitizer runtimes own malloc themselves: under ThreadSanitizer (or ASan)
// the interposer is left out and bl_alloc_interposer_active() reports 0, so
// allocation tests skip instead of reading a count that is not real.
#if defined(__has_feature)
#  if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#    define BL_NO_INTERPOSER 1
#  endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#  define BL_NO_INTERPOSER 1
#endif

// Which sanitizer this build runs under (the test support's `Sanitizers`).
int bl_sanitizer_thread(void) {
#if defined(__SANITIZE_THREAD__)
    return 1;
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
    return 1;
#  endif
#endif
    return 0;
}

int bl_sanitizer_address(void) {
#if defined(__SANITIZE_ADDRESS__)
    return 1;
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
    return 1;
#  endif
#endif
    return 0;
}

#ifndef BL_NO_INTERPOSER
void *malloc(size_t n) { note(n); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { note(a * b); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { note(n); return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t al, size_t n) { note(n); return __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { note(n); return __libc_memalign(al, n); }
void *valloc(size_t n) { note(n); return __libc_valloc(n); }
void *pvalloc(size_t n) { note(n); return __libc_pvalloc(n); }
int posix_memalign(void **out, size_t al, size_t n) {
    note(n);
    void *p = __libc_memalign(al, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
#endif

void bl_alloc_counting_begin(void) { counting = 1; }
void bl_alloc_counting_end(void) { counting = 0; }
uint64_t bl_alloc_count(void) { return __atomic_load_n(&total_count, __ATOMIC_RELAXED); }
uint64_t bl_alloc_bytes(void) { return __atomic_load_n(&total_bytes, __ATOMIC_RELAXED); }
void bl_alloc_reset(void) {
    __atomic_store_n(&total_count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&total_bytes, 0, __ATOMIC_RELAXED);
}
uint64_t bl_alloc_thread_count(void) { return thread_count; }
void bl_alloc_thread_reset(void) { thread_count = 0; }
int bl_alloc_interposer_active(void) {
    interposer_hit = 0;
    // strdup lives in libc: its malloc call reaches us only if the
    // interposition works for code outside this executable too.
    char *volatile p = strdup("x");
    free(p);
    return interposer_hit;
}
