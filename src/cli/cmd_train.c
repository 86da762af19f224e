/* `ak train` (run a plan of `ak plan --json` on this host's ranks: accelkit.torch.parallel's
 * reference model, measured beside the prediction) and the cluster description of this
 * host that `ak sysinfo --cluster-json` writes for the planner. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cmd_train.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Reads intra/inter α (µs) and β (GB/s) from an AK_COMM_TUNING file (`ak bench comm
 * --calibrate FILE`); a link the file marks unmeasured (1e6) keeps NAN. */
static int read_comm_tuning(const char *path, double ab[4]) {
    static const char *const names[4] = {"intra_alpha_us", "intra_beta_gbps", "inter_alpha_us",
                                         "inter_beta_gbps"};
    FILE *f = fopen(path, "r");
    if (!f) return ak_cli_error("--comm-tuning: cannot read '%s'", path);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char name[64];
        double v;
        if (sscanf(line, "%63s %lf", name, &v) != 2) continue;
        for (int k = 0; k < 4; k++)
            if (!strcmp(name, names[k]) && v > 0 && v < 1e6) ab[k] = v;
    }
    fclose(f);
    if (!isfinite(ab[0]) || !isfinite(ab[1]))
        return ak_cli_error("--comm-tuning: '%s' has no intra_alpha_us / intra_beta_gbps (write it "
                            "with ak bench comm --np N --calibrate FILE)", path);
    return AK_EXIT_OK;
}

int ak__cli_cluster_json(const ak_cluster_measures *m) {
    double ab[4] = {NAN, NAN, NAN, NAN};
    if (!m->comm_tuning) return ak_cli_error("--cluster-json needs --comm-tuning FILE (from ak bench comm --np N --calibrate FILE)");
    int rc = read_comm_tuning(m->comm_tuning, ab);
    if (rc != AK_EXIT_OK) return rc;
    if (!isfinite(ab[2])) { /* one host: the "network" is the same shared memory */
        ab[2] = ab[0];
        ab[3] = ab[1];
    }
    double ranks = (double)m->ranks, share = (double)m->cores / ranks; /* cores per rank */
    double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", "this-host");
    cJSON_AddStringToObject(o, "description",
                            "this host measured by ak sysinfo --cluster-json: one device = one rank "
                            "(its share of the cores); efficiency terms: accelkit.torch.parallel.calibrate");
    cJSON_AddStringToObject(o, "device", "cpu-rank");
    cJSON_AddNumberToObject(o, "nodes", 1);
    cJSON_AddNumberToObject(o, "devices_per_node", m->ranks);
    cJSON_AddNumberToObject(o, "peak_tflops", m->peak_gflops_per_core * share / 1e3);
    cJSON_AddNumberToObject(o, "memory_gib", mem / ranks / GIB);
    cJSON_AddNumberToObject(o, "memory_bw_gbs", m->memcpy_gbps * share);
    cJSON_AddNumberToObject(o, "gemm_efficiency", 1.0);
    cJSON_AddNumberToObject(o, "intra_bw_gbs", ab[1]);
    cJSON_AddNumberToObject(o, "intra_latency_us", ab[0]);
    cJSON_AddNumberToObject(o, "inter_bw_gbs", ab[3]);
    cJSON_AddNumberToObject(o, "inter_latency_us", ab[2]);
    cJSON_AddNumberToObject(o, "host_memory_gib", mem / GIB);
    cJSON_AddNumberToObject(o, "pcie_bw_gbs", m->memcpy_gbps * share);
    /* Adam streams 28 bytes per parameter (ak plan's optimizer step) */
    cJSON_AddNumberToObject(o, "host_optimizer_params_per_s", m->memcpy_gbps * 1e9 / 28.0);
    cJSON_AddNumberToObject(o, "value_bytes", 4);     /* fp32 training on the CPU */
    cJSON_AddNumberToObject(o, "optimizer_bytes", 8); /* Adam's two fp32 moments */
    cJSON_AddNumberToObject(o, "reserved_gib", 0);
    cJSON_AddNumberToObject(o, "kernel_overhead_us", 0);
    cJSON_AddNumberToObject(o, "elementwise_efficiency", 1.0);
    return ak_cli_print_json(o) ? AK_EXIT_ERROR : AK_EXIT_OK;
}

/* ---- ak train ------------------------------------------------------------------------ */

int ak_cli_train(int argc, char **argv) {
    const char *plan = NULL, *model = NULL, *python = NULL;
    long steps = 0, warmup = 0, np = 0, which = 0;
    int no_overlap = 0, first;
    const ak_opt opts[] = {
        {"plan", 0, AK_OPT_STRING, &plan, "FILE", .help = "the plan: ak plan --json output (its first plan) or one plan object"},
        {"model", 0, AK_OPT_STRING, &model, "FILE", .help = "the model description the plan was made for (planner JSON)"},
        {"steps", 0, AK_OPT_INT, &steps, "N", .help = "timed steps", .def = "5", .min = 1, .max = 1000000},
        {"warmup", 0, AK_OPT_INT, &warmup, "N", .help = "untimed steps first", .def = "1", .min = 0, .max = 1000000},
        {"index", 0, AK_OPT_INT, &which, "K", .help = "run the K-th plan of the list (0: the best)", .def = "0", .min = 0, .max = 100000},
        {"np", 0, AK_OPT_INT, &np, "N", .help = "ranks to start (default: the plan's tp*pp*dp)", .min = 1, .max = 4096},
        {"no-overlap", 0, AK_OPT_FLAG, &no_overlap, .help = "tensor-parallel collectives not overlapped with the GEMMs"},
        {"python", 0, AK_OPT_STRING, &python, "PATH", .help = "the Python with torch (default: $AK_PYTHON, else python3)"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {
        .name = "train", .opts = opts,
        .notes = "Starts the ranks with ak launch running python -m accelkit.torch.parallel.run_plan "
                 "(PYTHONPATH and AK_LIBRARY must let that Python import accelkit); rank 0 prints the "
                 "measured step time, memory per rank and MFU beside the plan's prediction."};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    if (!plan || !model) return ak_cli_usage_error(&cmd, "--plan and --model are required");
    if (!python) python = getenv("AK_PYTHON") && *getenv("AK_PYTHON") ? getenv("AK_PYTHON") : "python3";
    char nbuf[32], sbuf[32], wbuf[32], ibuf[32];
    snprintf(sbuf, sizeof sbuf, "%ld", steps);
    snprintf(wbuf, sizeof wbuf, "%ld", warmup);
    snprintf(ibuf, sizeof ibuf, "%ld", which);
    if (!np) { /* the plan's ranks: ask the runner, which reads the plan the same way */
        np = ak__cli_plan_ranks(plan, (int)which);
        if (np <= 0) return AK_EXIT_ERROR;
    }
    snprintf(nbuf, sizeof nbuf, "%ld", np);
    char *args[] = {"launch", "-np", nbuf, "--", (char *)python, "-m", "accelkit.torch.parallel.run_plan",
                    "--plan", (char *)plan, "--model", (char *)model, "--steps", sbuf, "--warmup", wbuf,
                    "--index", ibuf, no_overlap ? "--no-overlap" : NULL, NULL};
    int n = 0;
    while (args[n]) n++;
    return ak_cli_launch(n, args);
}

/* tp*pp*dp of plan `which` of a plan file, or -1 after printing why. */
long ak__cli_plan_ranks(const char *path, int which) {
    FILE *f = fopen(path, "rb");
    if (!f) return ak_cli_error("--plan: cannot read '%s'", path), -1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = size >= 0 ? malloc((size_t)size + 1) : NULL;
    size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!text) return ak_cli_error("--plan: cannot read '%s'", path), -1;
    text[got] = '\0';
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *plan = root, *list = cJSON_GetObjectItemCaseSensitive(root, "plans");
    if (cJSON_IsArray(list)) plan = cJSON_GetArrayItem(list, which);
    long ranks = 1;
    const char *keys[] = {"tp", "pp", "dp"};
    for (int k = 0; k < 3 && ranks > 0; k++) {
        const cJSON *v = plan ? cJSON_GetObjectItemCaseSensitive(plan, keys[k]) : NULL;
        ranks = cJSON_IsNumber(v) && v->valuedouble >= 1 ? ranks * (long)v->valuedouble : -1;
    }
    cJSON_Delete(root);
    if (ranks <= 0) ak_cli_error("--plan: '%s' holds no plan %d with tp, pp and dp (want ak plan --json output)", path, which);
    return ranks;
}
