/* Keeping the process heap warm for training (AK_TRAIN_KEEP_HEAP).
 *
 * A training step allocates the same large tensors every time: activations, their
 * gradients, im2col buffers. glibc's malloc serves every block above its mmap threshold
 * (at most 32 MiB) with a fresh mmap and returns it with munmap on free, so each step
 * page-faults and the kernel zeroes the whole working set again: ResNet-18 at batch 32
 * spent 385 ms of system time per 4.4 s step on 1.5 M minor faults. Serving those blocks
 * from the heap and never trimming it lets the next step reuse the same, already mapped
 * pages (4 ms of system time, the step 10 % shorter; docs/training.md).
 *
 * Where transparent huge pages are given on advice (the "madvise" mode, Debian's default),
 * the background thread also advises each new stretch of the heap as it grows (2 MiB
 * pages: fewer TLB misses over the large tensors), which is what glibc's
 * glibc.malloc.hugetlb=1 tunable does from process start (that tunable made one-process
 * ResNet-18 steps 3-9 % shorter; docs/training.md has the figures of the advice itself).
 *
 * The cost is that memory freed at the end of a step stays with the process: its resident
 * size stays at its peak (which each step reaches anyway). A user's own malloc settings
 * win: nothing is changed when MALLOC_*_ variables or glibc.malloc tunables are set. */
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/check.h"
#include "core/params.h"
#include "train/train_internal.h"

int ak__train_huge_pages_on_advice(void) {
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    int ok = fgets(mode, sizeof mode, f) != NULL;
    fclose(f);
    return ok && strstr(mode, "[madvise]") != NULL;
}

#if !defined(__GLIBC__) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/* another C library, or a sanitizer's allocator: nothing to tune */
int ak__train_keep_heap(void) { return 0; }
void ak__train_heap_advise(void) {}
#else
#include <malloc.h>

/* 1 when the environment already says how glibc's malloc should behave. */
static int user_configured_malloc(void) {
    static const char *const vars[] = {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_",
                                       "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    const char *tunables = getenv("GLIBC_TUNABLES");
    return tunables && strstr(tunables, "glibc.malloc.") != NULL;
}

#define HUGE_PAGE ((uintptr_t)2 << 20)

/* The heap's end up to which huge pages were advised; 0 while not advising. */
static _Atomic uintptr_t heap_advised_end;

void ak__train_heap_advise(void) {
    uintptr_t from = atomic_load(&heap_advised_end);
    if (!from) return;
    uintptr_t end = (uintptr_t)sbrk(0) & ~(HUGE_PAGE - 1);
    if (end <= from || !atomic_compare_exchange_strong(&heap_advised_end, &from, end)) return;
    (void)madvise((void *)from, end - from, MADV_HUGEPAGE); /* advice: failure costs speed only */
}

int ak__train_keep_heap(void) {
    if (!ak__param_int(AK_PARAM_TRAIN_KEEP_HEAP)) return 0;
    if (user_configured_malloc()) {
        AK_LOG_INFO(AK_SUBSYS_TRAIN, "AK_TRAIN_KEEP_HEAP: malloc settings found in the "
                                     "environment, glibc's malloc left as configured");
        return 0;
    }
    /* no mmap'd blocks: large blocks come from the heap; no trimming: freed pages stay
     * mapped for the next step; a 64 MiB pad makes the heap grow in few steps */
    int ok = mallopt(M_MMAP_MAX, 0) && mallopt(M_TRIM_THRESHOLD, INT_MAX) &&
             mallopt(M_TOP_PAD, 64 << 20);
    if (ok && ak__train_huge_pages_on_advice() && !atomic_load(&heap_advised_end))
        atomic_store(&heap_advised_end, ((uintptr_t)sbrk(0) + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
    AK_LOG_INFO(AK_SUBSYS_TRAIN, "AK_TRAIN_KEEP_HEAP: large blocks from the heap, kept after "
                                 "free%s%s", ok ? "" : " (mallopt refused a setting)",
                atomic_load(&heap_advised_end) ? ", huge pages advised as it grows" : "");
    return ok;
}
#endif
