/* Monotonic clock. */
#include <time.h>

#include "accelkit/ak.h"

uint64_t ak_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
