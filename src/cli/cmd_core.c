/* Core subcommands: ak version, ak sysinfo, ak config. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "accelkit/kernels.h"
#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cmd_train.h"
#include "core/params.h"
#include "kernels/dispatch.h"

/* A subcommand without flags still answers --help and refuses what it does not know. */
static int parse_no_options(const char *name, int argc, char **argv) {
    static const ak_opt none[] = {AK_OPT_END};
    const ak_cli_cmd cmd = {.name = name, .opts = none};
    int first;
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc == AK_CLI_CONTINUE && first < argc)
        return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    return rc;
}

int ak_cli_version(int argc, char **argv) {
    int rc = parse_no_options("version", argc, argv);
    if (rc != AK_CLI_CONTINUE) return rc;
    printf("accelkit %s\n", AK_VERSION_STRING);
    return AK_EXIT_OK;
}

static void print_features(const ak_cpu_info *c) {
    struct { const char *name; int on; } f[] = {
        {"sse4.2", c->has_sse42},         {"avx", c->has_avx},
        {"avx2", c->has_avx2},            {"fma", c->has_fma},
        {"f16c", c->has_f16c},            {"avx512f", c->has_avx512f},
        {"avx512bw", c->has_avx512bw},    {"avx512vl", c->has_avx512vl},
        {"avx512dq", c->has_avx512dq},    {"avx512_bf16", c->has_avx512_bf16},
        {"avx512_fp16", c->has_avx512_fp16}, {"avx512_vnni", c->has_avx512_vnni},
    };
    printf("features      ");
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].on) printf(" %s", f[i].name);
    printf("\n");
}

static int print_sysinfo_json(const ak_cpu_info *c, int threads, double peak, double memcpy_bw) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", AK_VERSION_STRING);
    cJSON_AddStringToObject(o, "commit", ak__build_commit);
    cJSON_AddStringToObject(o, "vendor", c->vendor);
    cJSON_AddStringToObject(o, "brand", c->brand);
    cJSON_AddNumberToObject(o, "cores", c->logical_cores);
    cJSON_AddNumberToObject(o, "threads", threads);
    cJSON_AddStringToObject(o, "best_isa", ak_isa_name(c->best_isa));
    cJSON_AddStringToObject(o, "active_isa", ak_isa_name(c->active_isa));
    cJSON_AddStringToObject(o, "kernels", ak__kernels_active()->name);
    cJSON_AddStringToObject(o, "family", ak_cpu_family_name(c->family));
    cJSON_AddStringToObject(o, "detected_family", ak_cpu_family_name(c->detected_family));
    cJSON_AddBoolToObject(o, "wide512", ak_cpu_family_wide512(c->family));
    cJSON_AddNumberToObject(o, "l1d_bytes", (double)c->l1d_bytes);
    cJSON_AddNumberToObject(o, "l2_bytes", (double)c->l2_bytes);
    cJSON_AddNumberToObject(o, "l3_bytes", (double)c->l3_bytes);
    ak_cli_json_round(o, "fma_peak_gflops_per_core", peak, 2);
    ak_cli_json_round(o, "memcpy_gbps", memcpy_bw, 2);
    return ak_cli_print_json(o) ? AK_EXIT_ERROR : AK_EXIT_OK;
}

int ak_cli_sysinfo(int argc, char **argv) {
    int json = 0, quick = 0, cluster_json = 0, first;
    long ranks = 0;
    const char *comm_tuning = NULL;
    const ak_opt opts[] = {
        {"json", 0, AK_OPT_FLAG, &json, .help = "one JSON object instead of text"},
        {"cluster-json", 0, AK_OPT_FLAG, &cluster_json, .help = "this host as a cluster description for ak plan (one device per rank; needs --comm-tuning)"},
        {"ranks", 0, AK_OPT_INT, &ranks, "N", .help = "--cluster-json: ranks the host is split into (default: the cores)", .min = 1, .max = 4096},
        {"comm-tuning", 0, AK_OPT_STRING, &comm_tuning, "FILE", .help = "--cluster-json: link alpha/beta from ak bench comm --np N --calibrate FILE"},
        {"quick", 0, AK_OPT_FLAG, &quick, .help = "shorter FMA-peak measurement (less precise)"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "sysinfo", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    ak_status st;
    ak_cpu_info c;
    if ((st = ak_init()) != AK_OK) return ak_cli_report("init", st);
    if ((st = ak_cpu_get_info(&c)) != AK_OK) return ak_cli_report("cpu", st);
    ak_threadpool *pool;
    int threads = 0;
    if ((st = ak_threadpool_global(&pool)) != AK_OK || (st = ak_threadpool_size(pool, &threads)))
        return ak_cli_report("thread pool", st);
    double peak = 0, memcpy_bw = 0;
    if ((st = ak_measure_fma_peak(quick ? 50 : 400, &peak)) != AK_OK)
        return ak_cli_report("FMA peak", st);
    if ((st = ak_measure_memcpy((size_t)16 << 20, &memcpy_bw)) != AK_OK)
        return ak_cli_report("memcpy", st);
    if (cluster_json) {
        ak_cluster_measures m = {peak, memcpy_bw, c.logical_cores, ranks ? ranks : c.logical_cores, comm_tuning};
        return ak__cli_cluster_json(&m);
    }
    if (json) return print_sysinfo_json(&c, threads, peak, memcpy_bw);
    printf("accelkit      %s\n", AK_VERSION_STRING);
    printf("cpu           %s (%s)\n", c.brand[0] ? c.brand : "unknown", c.vendor);
    printf("cores         %d online, global pool %d threads (AK_NUM_THREADS)\n",
           c.logical_cores, threads);
    printf("caches        L1d %zu KiB, L2 %zu KiB, L3 %zu KiB\n", c.l1d_bytes >> 10,
           c.l2_bytes >> 10, c.l3_bytes >> 10);
    print_features(&c);
    printf("isa           %s active (best %s; AK_ISA), kernels '%s'\n", ak_isa_name(c.active_isa),
           ak_isa_name(c.best_isa), ak__kernels_active()->name);
    printf("family        %s%s (AK_CPU_FAMILY; detected %s): %s\n", ak_cpu_family_name(c.family),
           c.family == c.detected_family ? "" : " [set]", ak_cpu_family_name(c.detected_family),
           ak_cpu_family_wide512(c.family) ? "512-bit vectors at full width, 512-bit tiles"
           : c.family == AK_CPU_FAMILY_ZEN4 ? "512-bit vectors split in two, 256-bit tiles"
                                            : "256-bit tiles");
    printf("fp32 peak     %.1f GFLOP/s per core (measured, FMA chains, %s)\n", peak,
           ak_isa_name(c.active_isa));
    printf("memcpy        %.1f GB/s (16 MiB, one thread, bytes read + written)\n", memcpy_bw);
    return AK_EXIT_OK;
}

int ak_cli_config(int argc, char **argv) {
    int rc = parse_no_options("config", argc, argv);
    if (rc != AK_CLI_CONTINUE) return rc;
    ak_status st = ak_init();
    if (st != AK_OK) return ak_cli_report("init", st);
    printf("%-18s %-8s %-10s %s\n", "variable", "layer", "value", "meaning");
    for (int i = 0; i < AK_PARAM_COUNT_; i++) {
        const ak__param_desc *d = ak__param_describe((ak__param_id)i);
        const char *v = ak__param_str((ak__param_id)i);
        printf("%-18s %-8s %-10s %s%s\n", d->name, d->layer, v[0] ? v : "\"\"", d->doc,
               ak__param_is_set((ak__param_id)i) ? " [set]" : "");
    }
    return AK_EXIT_OK;
}
