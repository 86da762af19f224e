/* The run-time choice between the portable and the AVX2 copies of hot_loops.h. */
#include "llm/model/hot_loops.h"

#include "accelkit/ak.h"

int ak__hot_loops_avx2(void) {
    static _Atomic int cached = -1;
    int v = cached;
    if (v < 0) {
        ak_cpu_info info;
        v = ak_cpu_get_info(&info) == AK_OK && info.active_isa >= AK_ISA_AVX2;
        cached = v;
    }
    return v;
}
