/* Builds the kernel tables (ref, generic, avx2, avx512) and selects the active one once
 * at start-up. Every table starts from the references, so a variant that does not
 * provide a kernel falls back to a correct one. */
#include "kernels/dispatch.h"

#include <pthread.h>
#include <string.h>

#include "core/check.h"
#include "core/init.h"

enum { TABLE_REF, TABLE_GENERIC, TABLE_AVX2, TABLE_AVX512, TABLE_COUNT };

static ak__kernels tables[TABLE_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static const ak__kernels *active;
static size_t stream_min_bytes;

static void fill_ref(ak__kernels *k, const char *name) {
    memset(k, 0, sizeof *k);
    k->name = name;
    ak__fill_vec_ref(k);
    ak__fill_reduce_ref(k);
    ak__fill_convert_ref(k);
    ak__fill_gemm_ref(k);
    ak__fill_linear_ref(k);
    ak__fill_attn_ref(k);
}

static void build_tables(void) {
    size_t llc = ak__cpu_cache_bytes(3);
    stream_min_bytes = llc ? llc / 2 : (size_t)16 << 20;
    fill_ref(&tables[TABLE_REF], "ref");
    fill_ref(&tables[TABLE_GENERIC], "generic");
    ak__fill_gemm_generic(&tables[TABLE_GENERIC]);
    if (ak__cpu_supports(AK_ISA_AVX2)) {
        ak__kernels *k = &tables[TABLE_AVX2];
        fill_ref(k, "avx2");
        ak__fill_vec_avx2(k);
        ak__fill_reduce_avx2(k);
        ak__fill_convert_avx2(k);
        ak__fill_gemm_avx2(k);
        ak__fill_linear_avx2(k);
        ak__fill_attn_avx2(k);
    }
    if (ak__cpu_supports(AK_ISA_AVX512)) {
        ak__kernels *k = &tables[TABLE_AVX512];
        tables[TABLE_AVX512] = tables[TABLE_AVX2];
        k->name = "avx512";
        ak__fill_gemm_avx512(k);
        ak__fill_linear_avx512(k);
    }
}

const ak__kernels *ak__kernels_for(const char *variant) {
    pthread_once(&tables_once, build_tables);
    for (int i = 0; i < TABLE_COUNT; i++)
        if (tables[i].name && variant && strcmp(tables[i].name, variant) == 0) return &tables[i];
    return NULL;
}

const ak__kernels *ak__kernels_active(void) { return active; }

size_t ak__kernels_stream_min_bytes(void) {
    pthread_once(&tables_once, build_tables);
    return stream_min_bytes;
}

ak_status ak__kernels_select(ak_isa isa, int force_ref) {
    static const char *const by_isa[AK_ISA_COUNT_] = {"generic", "avx2", "avx512"};
    AK_ARG_CHECK((unsigned)isa < AK_ISA_COUNT_, "unknown ISA %d", (int)isa);
    const ak__kernels *k = ak__kernels_for(force_ref ? "ref" : by_isa[isa]);
    if (!k) return AK_FAIL(AK_ERR_UNSUPPORTED, "no kernels for ISA '%s' on this CPU",
                           ak_isa_name(isa));
    active = k;
    return AK_OK;
}
