/* CPU feature detection (cpuid + xgetbv) and the active-ISA choice (AK_ISA). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/check.h"
#include "core/init.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define AK_X86 1
#endif

static ak_cpu_info cpu;
static unsigned x86_family; /* cpuid's display family; 0 off x86 */

static const char *const isa_names[AK_ISA_COUNT_] = {"generic", "avx2", "avx512"};

static const char *const family_names[AK_CPU_FAMILY_COUNT_] = {"other", "avx2", "zen4", "zen5",
                                                                "intel-avx512"};

const char *ak_cpu_family_name(ak_cpu_family family) {
    return (unsigned)family < AK_CPU_FAMILY_COUNT_ ? family_names[family] : "unknown";
}

int ak_cpu_family_wide512(ak_cpu_family family) {
    return family == AK_CPU_FAMILY_ZEN5 || family == AK_CPU_FAMILY_INTEL_AVX512;
}

const char *ak_isa_name(ak_isa isa) {
    return (unsigned)isa < AK_ISA_COUNT_ ? isa_names[isa] : "unknown";
}

ak_status ak_isa_parse(const char *text, ak_isa *out) {
    AK_ARG_CHECK(text && out, "ak_isa_parse: NULL argument");
    if (strcasecmp(text, "auto") == 0 || text[0] == '\0') {
        AK_CHECK(ak__cpu_detect());
        *out = cpu.best_isa;
        return AK_OK;
    }
    for (int i = 0; i < AK_ISA_COUNT_; i++) {
        if (strcasecmp(text, isa_names[i]) == 0) {
            *out = (ak_isa)i;
            return AK_OK;
        }
    }
    return AK_FAIL(AK_ERR_INVALID_ARG, "'%s' is not one of auto, generic, avx2, avx512", text);
}

#ifdef AK_X86
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void read_brand(void) {
    unsigned r[12];
    unsigned max_ext = __get_cpuid_max(0x80000000u, NULL);
    if (max_ext < 0x80000004u) return;
    for (unsigned i = 0; i < 3; i++)
        __get_cpuid(0x80000002u + i, &r[i * 4], &r[i * 4 + 1], &r[i * 4 + 2], &r[i * 4 + 3]);
    memcpy(cpu.brand, r, sizeof r);
    cpu.brand[48] = '\0';
    /* trim the leading/trailing blanks some vendors pad with */
    char *s = cpu.brand;
    while (*s == ' ') s++;
    memmove(cpu.brand, s, strlen(s) + 1);
    for (size_t n = strlen(cpu.brand); n > 0 && cpu.brand[n - 1] == ' '; n--)
        cpu.brand[n - 1] = '\0';
}

/* The display family of cpuid leaf 1's eax: the base family, plus the extended family
 * when the base is 0xF (AMD 19h = Zen 3/4, 1Ah = Zen 5). */
static unsigned display_family(unsigned eax) {
    unsigned base = (eax >> 8) & 0xf;
    return base == 0xf ? base + ((eax >> 20) & 0xff) : base;
}

static void read_features(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    __get_cpuid(0, &a, &b, &c, &d);
    memcpy(cpu.vendor, &b, 4);
    memcpy(cpu.vendor + 4, &d, 4);
    memcpy(cpu.vendor + 8, &c, 4);
    cpu.vendor[12] = '\0';
    __get_cpuid(1, &a, &b, &c, &d);
    x86_family = display_family(a);
    int osxsave = (c >> 27) & 1;
    uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    int os_ymm = (xcr0 & 0x6) == 0x6;    /* XMM and YMM state saved by the OS */
    int os_zmm = (xcr0 & 0xe6) == 0xe6;  /* plus opmask and ZMM state */
    cpu.has_sse42 = (c >> 20) & 1;
    cpu.has_avx = ((c >> 28) & 1) && os_ymm;
    cpu.has_fma = ((c >> 12) & 1) && os_ymm;
    cpu.has_f16c = ((c >> 29) & 1) && os_ymm;
    if (max_leaf >= 7) {
        __get_cpuid_count(7, 0, &a, &b, &c, &d);
        cpu.has_avx2 = ((b >> 5) & 1) && os_ymm;
        cpu.has_avx512f = ((b >> 16) & 1) && os_zmm;
        cpu.has_avx512dq = ((b >> 17) & 1) && os_zmm;
        cpu.has_avx512bw = ((b >> 30) & 1) && os_zmm;
        cpu.has_avx512vl = ((b >> 31) & 1) && os_zmm;
        cpu.has_avx512_vnni = ((c >> 11) & 1) && os_zmm;
        cpu.has_avx512_fp16 = ((d >> 23) & 1) && os_zmm;
        __get_cpuid_count(7, 1, &a, &b, &c, &d);
        cpu.has_avx512_bf16 = ((a >> 5) & 1) && os_zmm;
    }
}
#endif

/* Cache size from sysfs (what lscpu shows); glibc's sysconf misreads some hypervisors. */
static size_t sysfs_cache_bytes(int index) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long v = 0;
    char unit = 0;
    int got = fscanf(f, "%lu%c", &v, &unit);
    fclose(f);
    if (got < 1) return 0;
    return v * (unit == 'K' ? 1024ul : unit == 'M' ? 1048576ul : 1ul);
}

static void read_topology(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu.logical_cores = n > 0 ? (int)n : 1;
#ifdef _SC_LEVEL1_DCACHE_SIZE
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE),
         l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    cpu.l1d_bytes = l1 > 0 ? (size_t)l1 : 0;
    cpu.l2_bytes = l2 > 0 ? (size_t)l2 : 0;
    cpu.l3_bytes = l3 > 0 ? (size_t)l3 : 0;
#endif
    /* sysfs index0 = L1d, index2 = L2, index3 = L3 on x86 Linux */
    size_t s1 = sysfs_cache_bytes(0), s2 = sysfs_cache_bytes(2), s3 = sysfs_cache_bytes(3);
    if (s1) cpu.l1d_bytes = s1;
    if (s2) cpu.l2_bytes = s2;
    if (s3) cpu.l3_bytes = s3;
}

static int isa_supported(ak_isa isa) {
    switch (isa) {
    case AK_ISA_GENERIC: return 1;
    case AK_ISA_AVX2: return cpu.has_avx2 && cpu.has_fma && cpu.has_f16c;
    case AK_ISA_AVX512:
        return isa_supported(AK_ISA_AVX2) && cpu.has_avx512f && cpu.has_avx512bw &&
               cpu.has_avx512vl && cpu.has_avx512dq;
    default: return 0;
    }
}

/* The family from the vendor, the display family and the ISA found. Zen 3 (19h without
 * AVX-512) and older AMD cores are AVX2 cores here; an AVX-512 core of an unknown vendor
 * keeps the ISA's default tiles. */
static ak_cpu_family detect_family(void) {
    if (!isa_supported(AK_ISA_AVX512))
        return isa_supported(AK_ISA_AVX2) ? AK_CPU_FAMILY_AVX2 : AK_CPU_FAMILY_OTHER;
    if (strcmp(cpu.vendor, "AuthenticAMD") == 0) {
        if (x86_family == 0x19) return AK_CPU_FAMILY_ZEN4;
        if (x86_family >= 0x1a) return AK_CPU_FAMILY_ZEN5;
        return AK_CPU_FAMILY_OTHER;
    }
    if (strcmp(cpu.vendor, "GenuineIntel") == 0) return AK_CPU_FAMILY_INTEL_AVX512;
    return AK_CPU_FAMILY_OTHER;
}

static void detect_once(void) {
    memset(&cpu, 0, sizeof cpu);
    snprintf(cpu.vendor, sizeof cpu.vendor, "unknown");
#ifdef AK_X86
    read_features();
    read_brand();
#endif
    read_topology();
    cpu.best_isa = AK_ISA_GENERIC;
    for (int i = AK_ISA_COUNT_ - 1; i > 0; i--) {
        if (isa_supported((ak_isa)i)) {
            cpu.best_isa = (ak_isa)i;
            break;
        }
    }
    cpu.active_isa = cpu.best_isa;
    cpu.detected_family = cpu.family = detect_family();
}

ak_status ak__cpu_detect(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, detect_once);
    return AK_OK;
}

ak_status ak__cpu_set_active_isa(ak_isa isa) {
    AK_CHECK(ak__cpu_detect());
    if (!isa_supported(isa))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "this CPU cannot run ISA '%s' (best: %s)",
                       ak_isa_name(isa), ak_isa_name(cpu.best_isa));
    cpu.active_isa = isa;
    return AK_OK;
}

ak_status ak__cpu_family_parse(const char *text, ak_cpu_family *out) {
    AK_ARG_CHECK(text && out, "ak__cpu_family_parse: NULL argument");
    AK_CHECK(ak__cpu_detect());
    if (strcasecmp(text, "auto") == 0 || text[0] == '\0') {
        *out = cpu.detected_family;
        return AK_OK;
    }
    for (int i = 0; i < AK_CPU_FAMILY_COUNT_; i++) {
        if (strcasecmp(text, family_names[i]) == 0) {
            *out = (ak_cpu_family)i;
            return AK_OK;
        }
    }
    return AK_FAIL(AK_ERR_INVALID_ARG,
                   "'%s' is not one of auto, other, avx2, zen4, zen5, intel-avx512", text);
}

/* A family's tiles need its ISA: the AVX-512 families AVX-512, avx2 AVX2. */
ak_status ak__cpu_set_family(ak_cpu_family family) {
    AK_CHECK(ak__cpu_detect());
    ak_isa needs = family == AK_CPU_FAMILY_AVX2    ? AK_ISA_AVX2
                   : family == AK_CPU_FAMILY_OTHER ? AK_ISA_GENERIC
                                                   : AK_ISA_AVX512;
    if ((unsigned)family >= AK_CPU_FAMILY_COUNT_)
        return AK_FAIL(AK_ERR_INVALID_ARG, "CPU family %d is out of range", (int)family);
    if (!isa_supported(needs))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "family '%s' needs ISA '%s', which this CPU lacks",
                       ak_cpu_family_name(family), ak_isa_name(needs));
    cpu.family = family;
    return AK_OK;
}

ak_cpu_family ak__cpu_family(void) {
    ak__cpu_detect();
    return cpu.family;
}

size_t ak__cpu_cache_bytes(int level) {
    ak__cpu_detect();
    return level == 1 ? cpu.l1d_bytes : level == 2 ? cpu.l2_bytes : level == 3 ? cpu.l3_bytes : 0;
}

ak_status ak_cpu_get_info(ak_cpu_info *out) {
    AK_ARG_CHECK(out, "ak_cpu_get_info: NULL output");
    AK_ENSURE_INIT();
    *out = cpu;
    return AK_OK;
}

int ak__cpu_active_avx2(void) {
    static _Atomic int cached = -1;
    int v = cached;
    if (v < 0) {
        ak_cpu_info info;
        v = ak_cpu_get_info(&info) == AK_OK && info.active_isa >= AK_ISA_AVX2;
        cached = v;
    }
    return v;
}

ak_isa ak__cpu_active_isa(void) {
    ak_cpu_info info;
    return ak_cpu_get_info(&info) == AK_OK ? info.active_isa : AK_ISA_GENERIC;
}

int ak__cpu_supports(ak_isa isa) {
    ak__cpu_detect();
    return isa_supported(isa);
}
