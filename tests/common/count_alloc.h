/* Test helper: a counting allocator. It wraps malloc, calloc, realloc, posix_memalign and
 * aligned_alloc; while `counting` is set every call adds one to `allocations`. It is left
 * out under AddressSanitizer and ThreadSanitizer, which own malloc (COUNTING is then 0).
 * Include in exactly one file of a test executable (the wrappers are global definitions). */
#ifndef AK_TEST_COUNT_ALLOC_H
#define AK_TEST_COUNT_ALLOC_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNTING 0
#else
#define COUNTING 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static volatile int counting;
static volatile long allocations;

void *malloc(size_t n) {
    if (counting) __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t m) {
    if (counting) __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n) {
    if (counting) __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __libc_realloc(p, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
    if (counting) __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    *out = __libc_memalign(align, n);
    return *out ? 0 : 12;
}
void *aligned_alloc(size_t align, size_t n) {
    if (counting) __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __libc_memalign(align, n);
}
#endif

#endif /* AK_TEST_COUNT_ALLOC_H */
