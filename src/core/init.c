/* ak_init: one-time library start-up (parameters, logging, CPU and ISA, tracing). The
 * kernels layer picks its table itself from the ISA and AK_KERNELS validated here.
 * A failure is remembered and returned by every later call, so a bad AK_ISA surfaces
 * as an error from whatever the caller does first, never as a crash. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "core/check.h"
#include "core/init.h"
#include "core/params.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_done;
static ak_status init_status;
static char init_error[512];
static atomic_uint init_generation; /* successful runs of ak_init so far */

static ak_status configure_logging(void) {
    ak_log_level level;
    uint32_t mask;
    AK_CHECK(ak_log_parse_level(ak__param_str(AK_PARAM_LOG), &level));
    AK_CHECK(ak_log_parse_subsystems(ak__param_str(AK_PARAM_LOG_SUBSYS), &mask));
    ak_log_set_level(level);
    ak_log_set_subsystems(mask);
    return AK_OK;
}

/* Validates AK_ISA (the CPU must run it), AK_CPU_FAMILY (its ISA too) and AK_KERNELS; the
 * kernels layer reads all three. */
static ak_status check_kernel_settings(ak_isa *active_isa) {
    ak_isa isa;
    const char *isa_text = ak__param_str(AK_PARAM_ISA);
    ak_status st = ak_isa_parse(isa_text, &isa);
    if (st != AK_OK) {
        char detail[256]; /* the message is rewritten in place below */
        snprintf(detail, sizeof detail, "%s", ak_last_error());
        return AK_FAIL(st, "AK_ISA: %s", detail);
    }
    AK_CHECK(ak__cpu_set_active_isa(isa));
    ak_cpu_family family;
    st = ak__cpu_family_parse(ak__param_str(AK_PARAM_CPU_FAMILY), &family);
    if (st == AK_OK) st = ak__cpu_set_family(family);
    if (st != AK_OK) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s", ak_last_error());
        return AK_FAIL(st, "AK_CPU_FAMILY: %s", detail);
    }
    const char *kernels = ak__param_str(AK_PARAM_KERNELS);
    if (strcmp(kernels, "ref") != 0 && strcmp(kernels, "auto") != 0)
        return AK_FAIL(AK_ERR_INVALID_ARG, "AK_KERNELS='%s' is not one of auto, ref", kernels);
    *active_isa = isa;
    return AK_OK;
}

static ak_status run_init(void) {
    AK_CHECK(ak__params_load());
    AK_CHECK(configure_logging());
    AK_CHECK(ak__cpu_detect());
    ak_isa isa;
    AK_CHECK(check_kernel_settings(&isa));
    const char *trace = ak__param_str(AK_PARAM_TRACE);
    if (trace[0]) AK_CHECK(ak__trace_start_at_exit(trace));
    AK_LOG_INFO(AK_SUBSYS_CORE, "accelkit %s initialized: ISA %s, family %s, kernels %s",
                AK_VERSION_STRING, ak_isa_name(isa), ak_cpu_family_name(ak__cpu_family()),
                ak__param_str(AK_PARAM_KERNELS));
    return AK_OK;
}

ak_status ak_init(void) {
    pthread_mutex_lock(&init_lock);
    if (!init_done) {
        init_status = run_init();
        if (init_status == AK_OK) atomic_fetch_add(&init_generation, 1);
        snprintf(init_error, sizeof init_error, "%s", ak_last_error());
        init_done = 1;
    }
    ak_status st = init_status;
    pthread_mutex_unlock(&init_lock);
    if (st != AK_OK) return AK_FAIL(st, "accelkit initialization failed: %s", init_error);
    return AK_OK;
}

unsigned ak__init_generation(void) { return atomic_load(&init_generation); }

ak_status ak__init_reset(void) {
    pthread_mutex_lock(&init_lock);
    init_done = 0;
    pthread_mutex_unlock(&init_lock);
    return ak_init();
}
