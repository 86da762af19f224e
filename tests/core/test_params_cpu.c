/* Tests of environment parameters (parsing, ranges, documentation) and of CPU detection
 * with the AK_ISA override. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/check.h"
#include "core/init.h"
#include "core/params.h"
#include "kernels/dispatch.h"

static void test_defaults_and_overrides(void **state) {
    unsetenv("AK_NUM_THREADS");
    assert_int_equal(ak__params_load(), AK_OK);
    assert_int_equal(ak__param_int(AK_PARAM_NUM_THREADS), 0);
    assert_false(ak__param_is_set(AK_PARAM_NUM_THREADS));
    setenv("AK_NUM_THREADS", "3", 1);
    assert_int_equal(ak__params_load(), AK_OK);
    assert_int_equal(ak__param_int(AK_PARAM_NUM_THREADS), 3);
    assert_true(ak__param_is_set(AK_PARAM_NUM_THREADS));
    unsetenv("AK_NUM_THREADS");
}

static void test_bad_values_are_named(void **state) {
    setenv("AK_NUM_THREADS", "two", 1);
    assert_int_equal(ak__params_load(), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "AK_NUM_THREADS"));
    assert_non_null(strstr(ak_last_error(), "two"));
    setenv("AK_NUM_THREADS", "-1", 1);
    assert_int_equal(ak__params_load(), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "out of range"));
    setenv("AK_NUM_THREADS", "4x", 1);
    assert_int_equal(ak__params_load(), AK_ERR_INVALID_ARG);
    unsetenv("AK_NUM_THREADS");
    assert_int_equal(ak__params_load(), AK_OK);
}

/* docs/configuration.md must describe every declared parameter. */
static void test_every_param_documented(void **state) {
    const char *dir = getenv("AK_DOCS_DIR");
    assert_non_null(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/configuration.md", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    for (int i = 0; i < AK_PARAM_COUNT_; i++) {
        const ak__param_desc *d = ak__param_describe((ak__param_id)i);
        char needle[64];
        snprintf(needle, sizeof needle, "`%s`", d->name);
        if (!strstr(doc, needle)) fail_msg("%s is not documented in %s", d->name, path);
    }
}

static void test_cpu_info(void **state) {
    ak_cpu_info c;
    assert_int_equal(ak_cpu_get_info(&c), AK_OK);
    assert_true(c.logical_cores >= 1);
    assert_true(c.active_isa <= c.best_isa);
    if (c.has_avx2 && c.has_fma && c.has_f16c) assert_true(c.best_isa >= AK_ISA_AVX2);
    if (c.best_isa >= AK_ISA_AVX512) assert_true(c.has_avx512f && c.has_avx512bw);
    assert_string_equal(ak_isa_name(AK_ISA_GENERIC), "generic");
    ak_isa isa;
    assert_int_equal(ak_isa_parse("AVX2", &isa), AK_OK);
    assert_int_equal(isa, AK_ISA_AVX2);
    assert_int_equal(ak_isa_parse("auto", &isa), AK_OK);
    assert_int_equal(isa, c.best_isa);
    assert_int_equal(ak_isa_parse("sse9", &isa), AK_ERR_INVALID_ARG);
}

static void test_isa_override(void **state) {
    setenv("AK_ISA", "generic", 1);
    assert_int_equal(ak__init_reset(), AK_OK);
    ak_cpu_info c;
    assert_int_equal(ak_cpu_get_info(&c), AK_OK);
    assert_int_equal(c.active_isa, AK_ISA_GENERIC);
    assert_string_equal(ak__kernels_active()->name, "generic");

    setenv("AK_ISA", "bogus", 1);
    assert_int_equal(ak__init_reset(), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "bogus"));
    /* the failure sticks: every call reports it instead of running on a wrong table */
    assert_int_equal(ak_cpu_get_info(&c), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "AK_ISA"));

    setenv("AK_KERNELS", "ref", 1);
    unsetenv("AK_ISA");
    assert_int_equal(ak__init_reset(), AK_OK);
    assert_string_equal(ak__kernels_active()->name, "ref");
    setenv("AK_KERNELS", "fastest", 1);
    assert_int_equal(ak__init_reset(), AK_ERR_INVALID_ARG);
    unsetenv("AK_KERNELS");
    assert_int_equal(ak__init_reset(), AK_OK);
}

/* The family picks the table within the ISA: avx512w only for full-width 512-bit families
 * on an AVX-512 ISA; a family the CPU's ISA cannot serve, or an unknown name, is refused. */
static void test_family_override(void **state) {
    ak_cpu_info c;
    assert_int_equal(ak_cpu_get_info(&c), AK_OK);
    assert_int_equal(c.family, c.detected_family);
    assert_string_equal(ak_cpu_family_name(AK_CPU_FAMILY_ZEN4), "zen4");
    assert_true(ak_cpu_family_wide512(AK_CPU_FAMILY_ZEN5));
    assert_false(ak_cpu_family_wide512(AK_CPU_FAMILY_ZEN4));
    if (c.best_isa >= AK_ISA_AVX512) {
        /* AMD and Intel AVX-512 cores have a family of their own */
        if (!strcmp(c.vendor, "GenuineIntel") || !strcmp(c.vendor, "AuthenticAMD"))
            assert_true(c.family >= AK_CPU_FAMILY_ZEN4);
        setenv("AK_CPU_FAMILY", "zen4", 1);
        assert_int_equal(ak__init_reset(), AK_OK);
        assert_string_equal(ak__kernels_active()->name, "avx512");
        setenv("AK_CPU_FAMILY", "Intel-AVX512", 1);
        assert_int_equal(ak__init_reset(), AK_OK);
        assert_string_equal(ak__kernels_active()->name, "avx512w");
        setenv("AK_ISA", "avx2", 1); /* the family does not raise the ISA */
        assert_int_equal(ak__init_reset(), AK_OK);
        assert_string_equal(ak__kernels_active()->name, "avx2");
        unsetenv("AK_ISA");
    } else {
        setenv("AK_CPU_FAMILY", "zen5", 1);
        assert_int_equal(ak__init_reset(), AK_ERR_UNSUPPORTED);
        assert_non_null(strstr(ak_last_error(), "AK_CPU_FAMILY"));
    }
    setenv("AK_CPU_FAMILY", "zen9", 1);
    assert_int_equal(ak__init_reset(), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "'zen9' is not one of"));
    unsetenv("AK_CPU_FAMILY");
    assert_int_equal(ak__init_reset(), AK_OK);
}

static void test_log_env(void **state) {
    setenv("AK_LOG", "chatty", 1);
    assert_int_equal(ak__init_reset(), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "chatty"));
    unsetenv("AK_LOG");
    assert_int_equal(ak__init_reset(), AK_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_overrides),
        cmocka_unit_test(test_bad_values_are_named),
        cmocka_unit_test(test_every_param_documented),
        cmocka_unit_test(test_cpu_info),
        cmocka_unit_test(test_isa_override),
        cmocka_unit_test(test_family_override),
        cmocka_unit_test(test_log_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
