/* Builds the kernel tables (ref, generic, avx2, avx512, avx512w) from kernels/kernels.def
 * and selects the active one. Each table starts as a copy of the variant below it (ref at the
 * bottom), then takes the variant's own AK_IMPL lines, so a kernel a variant does not
 * implement falls back to a correct one.
 *
 * The kernels layer selects its table itself, on first use: core validates AK_ISA and
 * AK_KERNELS (ak_init fails on a bad value) and records the active ISA and the CPU family
 * (AK_CPU_FAMILY: avx512w, the 512-bit tiles, where 512-bit vectors run at full width,
 * on AVX-512); the choice is
 * made again only when ak_init re-ran (tests that change the environment). */
#include "kernels/dispatch.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "core/init.h"
#include "core/params.h"
#include "kernels/gemm.h"
#include "kernels/linear.h"

enum { TABLE_REF, TABLE_GENERIC, TABLE_AVX2, TABLE_AVX512, TABLE_AVX512W, TABLE_COUNT };
/* AK_IMPL's variant column names these */
enum { VARIANT_ref = TABLE_REF, VARIANT_generic = TABLE_GENERIC, VARIANT_avx2 = TABLE_AVX2,
       VARIANT_avx512 = TABLE_AVX512, VARIANT_avx512w = TABLE_AVX512W };

const char *const ak__kernel_variants[AK__KERNEL_VARIANTS] = {"ref", "generic", "avx2",
                                                               "avx512", "avx512w"};

const ak__kernel_info ak__kernel_list[AK__KERNEL_COUNT_] = {
#define AK_KERNEL(name, type, elem, ref, check)                                           \
    {#name, #type, #elem, #check, #ref, offsetof(ak__kernels, name)},
#define AK_KERNEL_AT(name, slot, type, elem, ref, check)                                  \
    {#name, #type, #elem, #check, #ref, offsetof(ak__kernels, slot)},
#include "kernels/kernels.def"
};

ak__any_kernel ak__kernel_get(const ak__kernels *k, size_t index) {
    ak__any_kernel fn = NULL;
    if (k && index < AK__KERNEL_COUNT_)
        memcpy(&fn, (const char *)k + ak__kernel_list[index].offset, sizeof fn);
    return fn;
}

static ak__kernels tables[TABLE_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static size_t stream_min_bytes;

/* One setter per kernel: stores the pointer at its member or slot and names it. */
#define AK_KERNEL(name, type, elem, ref, check)                                           \
    static void set_##name(ak__kernels *k, type *fn, const char *symbol) {              \
        k->name = fn;                                                                    \
        k->impl[AK__KERNEL_##name] = symbol;                                             \
    }
#define AK_KERNEL_AT(name, slot, type, elem, ref, check)                                  \
    static void set_##name(ak__kernels *k, type *fn, const char *symbol) {              \
        k->slot = fn;                                                                    \
        k->impl[AK__KERNEL_##name] = symbol;                                             \
    }
#include "kernels/kernels.def"

static void set_gemm_config(ak__kernels *k, const ak__gemm_config *cfg) {
    k->sgemm_ukernel = cfg->ukernel;
    k->sgemm_ukernel_epi = cfg->ukernel_epi;
    k->sgemm_mr = cfg->mr;
    k->sgemm_nr = cfg->nr;
    k->sgemm_config = cfg;
}

/* AK_IMPL_IF features: the CPU flags a variant's kernel needs beyond the variant's ISA */
static int cpu_feature_avx512vnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni");
}

/* VEX-encoded VNNI on 256-bit vectors: CPUID.(EAX=7,ECX=1):EAX bit 4, read directly
 * because clang 14's __builtin_cpu_supports does not know "avxvnni"; AVX2 (whose check
 * includes the OS saving YMM state) is needed beside it. */
static int cpu_feature_avxvnni(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, NULL) < 7 || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    __builtin_cpu_init();
    return ((a >> 4) & 1) && __builtin_cpu_supports("avx2");
}

static int cpu_feature_avx512bf16(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16");
}

static void fill_ref(ak__kernels *k) {
    memset(k, 0, sizeof *k);
    k->name = "ref";
#define AK_KERNEL(name, type, elem, ref, check) set_##name(k, ref, #ref);
#define AK_KERNEL_AT(name, slot, type, elem, ref, check) set_##name(k, ref, #ref);
#include "kernels/kernels.def"
}

/* The variant's own lines over a copy of the table below it. */
static void fill_variant(ak__kernels *k, const ak__kernels *below, int variant) {
    *k = *below;
    k->name = ak__kernel_variants[variant];
#define AK_IMPL(name, v, symbol)                                                          \
    if (variant == VARIANT_##v) set_##name(k, symbol, #symbol);
#define AK_IMPL_IF(name, v, symbol, feature)                                              \
    if (variant == VARIANT_##v && cpu_feature_##feature()) set_##name(k, symbol, #symbol);
#define AK_GEMM_CONFIG(v, config)                                                         \
    if (variant == VARIANT_##v) set_gemm_config(k, &config);
#include "kernels/kernels.def"
}

static void build_tables(void) {
    size_t llc = ak__cpu_cache_bytes(3);
    stream_min_bytes = llc ? llc / 2 : (size_t)16 << 20;
    fill_ref(&tables[TABLE_REF]);
    fill_variant(&tables[TABLE_GENERIC], &tables[TABLE_REF], TABLE_GENERIC);
    /* a variant is built only where the CPU can run it (ak__kernels_for returns NULL) */
    if (ak__cpu_supports(AK_ISA_AVX2))
        fill_variant(&tables[TABLE_AVX2], &tables[TABLE_GENERIC], TABLE_AVX2);
    if (ak__cpu_supports(AK_ISA_AVX512)) {
        fill_variant(&tables[TABLE_AVX512], &tables[TABLE_AVX2], TABLE_AVX512);
        /* every AVX-512 CPU can run it (the tests compare it there); only the families
         * with full-width 512-bit vectors choose it */
        fill_variant(&tables[TABLE_AVX512W], &tables[TABLE_AVX512], TABLE_AVX512W);
    }
}

const ak__kernels *ak__kernels_for(const char *variant) {
    pthread_once(&tables_once, build_tables);
    for (int i = 0; i < TABLE_COUNT; i++)
        if (tables[i].name && variant && strcmp(tables[i].name, variant) == 0) return &tables[i];
    return NULL;
}

int ak__kernels_nchwc_panel_blocks(const ak__kernels *k) {
    return k && k == &tables[TABLE_AVX512W] ? 4 : 2;
}

int ak__kernels_avx512(const ak__kernels *k) {
    return k && (k == &tables[TABLE_AVX512] || k == &tables[TABLE_AVX512W]);
}

size_t ak__kernels_stream_min_bytes(void) {
    pthread_once(&tables_once, build_tables);
    return stream_min_bytes;
}

/* The active table and the ak_init run it was chosen after. */
static _Atomic(const ak__kernels *) active;
static atomic_uint active_generation;

/* Core has validated both settings (ak_init fails on others) and refuses an ISA the
 * CPU cannot run, so the table asked for exists; before ak_init ran, the CPU's best. */
static const ak__kernels *choose(void) {
    static const int by_isa[AK_ISA_COUNT_] = {TABLE_GENERIC, TABLE_AVX2, TABLE_AVX512};
    pthread_once(&tables_once, build_tables);
    if (strcmp(ak__param_str(AK_PARAM_KERNELS), "ref") == 0) return &tables[TABLE_REF];
    ak_isa isa = ak__cpu_active_isa();
    int t = (unsigned)isa < AK_ISA_COUNT_ ? by_isa[isa] : TABLE_GENERIC;
    if (t == TABLE_AVX512 && ak_cpu_family_wide512(ak__cpu_family())) t = TABLE_AVX512W;
    while (t > TABLE_GENERIC && !tables[t].name) t--;
    return &tables[t];
}

const ak__kernels *ak__kernels_active(void) {
    unsigned gen = ak__init_generation();
    /* the generation is published after the table, so a matching one sees its table */
    if (atomic_load_explicit(&active_generation, memory_order_acquire) == gen) {
        const ak__kernels *k = atomic_load_explicit(&active, memory_order_relaxed);
        if (k) return k;
    }
    const ak__kernels *k = choose();
    atomic_store_explicit(&active, k, memory_order_release);
    atomic_store_explicit(&active_generation, gen, memory_order_release);
    return k;
}
