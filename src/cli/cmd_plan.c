/* `ak plan` (training planner: search or evaluate parallel plans) and `ak mfu` (MFU and
 * HFU from a measured throughput). Arithmetic lives in src/plan/; this file parses
 * flags and prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "accelkit/plan.h"
#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_progress.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MAX_TOP 1000

typedef struct plan_args {
    const char *model, *cluster, *baseline;
    const char *out; /* --out DIR: the best plans as results lines (plan.best) */
    long top, nodes, devices, gbs;
    int json, list, attention, tp_overlap;
    ak_plan_options opt;
    ak_plan_config want;
} plan_args;

static int64_t cluster_devices(const ak_plan_cluster *c) {
    int64_t devices = 0;
    for (int i = 0; i < c->ngroups; i++) devices += c->groups[i].nodes * c->groups[i].devices_per_node;
    return devices;
}


/* ---- plan fields: shared by the --tp style flags and --baseline "tp=8,pp=4" ---------- */

static int parse_count(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    size_t v;
    if (ak_cli_parse_size(text, &v) != 0 || (int64_t)v < lo || (int64_t)v > hi) return -1;
    *out = (int64_t)v;
    return 0;
}

static int parse_recompute(const char *text, ak_plan_config *c) {
    static const char *names[] = {"none", "selective", "full"};
    for (int i = 0; i < 3; i++)
        if (strcmp(text, names[i]) == 0) {
            c->recompute = (ak_plan_recompute)i;
            c->recompute_layers = -1;
            return 0;
        }
    if (strcmp(text, "hybrid") == 0) {
        c->recompute = AK_PLAN_RECOMPUTE_HYBRID;
        c->recompute_layers = -1; /* searched: the smallest k that fits */
        return 0;
    }
    if (strncmp(text, "hybrid:", 7) != 0 || parse_count(text + 7, 1, 100000, &c->recompute_layers) != 0) return -1;
    c->recompute = AK_PLAN_RECOMPUTE_HYBRID;
    return 0;
}

static int parse_onoff(const char *text, int *out) {
    if (!strcmp(text, "on") || !strcmp(text, "1") || !strcmp(text, "true")) return *out = 1, 0;
    if (!strcmp(text, "off") || !strcmp(text, "0") || !strcmp(text, "false")) return *out = 0, 0;
    return -1;
}

static int parse_offload(const char *text, ak_plan_offload *out) {
    static const char *names[] = {"none", "optimizer", "params"};
    for (int i = 0; i < 3; i++)
        if (strcmp(text, names[i]) == 0) return *out = (ak_plan_offload)i, 0;
    return -1;
}

/* Sets one plan field by name; returns 1 if the key is not a plan field, -1 on a bad value. */
static int set_plan_field(ak_plan_config *c, const char *key, const char *value) {
    int64_t z;
    if (!strcmp(key, "tp")) return parse_count(value, 1, 1024, &c->tp);
    if (!strcmp(key, "pp")) return parse_count(value, 1, 100000, &c->pp);
    if (!strcmp(key, "dp")) return parse_count(value, 1, 100000000, &c->dp);
    if (!strcmp(key, "vp")) return parse_count(value, 1, 100000, &c->vp);
    if (!strcmp(key, "mbs")) return parse_count(value, 1, 1000000, &c->mbs);
    if (!strcmp(key, "sp")) return parse_onoff(value, &c->sequence_parallel);
    if (!strcmp(key, "recompute")) return parse_recompute(value, c);
    if (!strcmp(key, "offload")) return parse_offload(value, &c->offload);
    if (!strcmp(key, "zero")) {
        if (parse_count(value, 0, 3, &z) != 0) return -1;
        c->zero_stage = (int)z;
        return 0;
    }
    return 1;
}

/* "tp=8,pp=4,recompute=full" */
static int parse_plan_spec(const char *spec, ak_plan_config *c) {
    char buf[512];
    if (strlen(spec) >= sizeof(buf)) return ak_cli_error("--baseline is too long");
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return ak_cli_error("--baseline: '%s' is not key=value", tok);
        *eq = '\0';
        if (set_plan_field(c, tok, eq + 1) != 0) return ak_cli_error("--baseline: bad field '%s'", tok);
    }
    return 0;
}

/* ---- argument parsing -------------------------------------------------------------- */

/* The plan fields as flags (--tp 8): each sets its field of the wanted configuration. */
#define PLAN_FIELD_PARSER(field, want)                                                    \
    static const char *flag_##field(void *dest, char *value, ak_opt_more *more) {       \
        (void)more;                                                                       \
        return set_plan_field(dest, #field, value) == 0 ? NULL : want;                    \
    }
PLAN_FIELD_PARSER(tp, "want an integer in [1, 1024]")
PLAN_FIELD_PARSER(pp, "want an integer in [1, 100000]")
PLAN_FIELD_PARSER(dp, "want an integer in [1, 100000000]")
PLAN_FIELD_PARSER(vp, "want an integer in [1, 100000]")
PLAN_FIELD_PARSER(mbs, "want an integer in [1, 1000000]")
PLAN_FIELD_PARSER(sp, "want on or off")
PLAN_FIELD_PARSER(recompute, "want none, selective, full, hybrid or hybrid:K")
PLAN_FIELD_PARSER(zero, "want 0, 1, 2 or 3")
PLAN_FIELD_PARSER(offload, "want none, optimizer or params")
#undef PLAN_FIELD_PARSER

static const char k_plan_notes[] =
    "The plan flags (--tp ... --offload) fix that field; the others are searched.\n"
    "PRESET names: ak plan --list. FILE: a JSON description (docs/planner.md).";

static int parse_plan_args(int argc, char **argv, plan_args *a) {
    memset(a, 0, sizeof(*a));
    ak_plan_options_default(&a->opt);
    ak_plan_config_free_all(&a->want);
    a->attention = a->opt.flash_attention ? 0 : 1;
    int first;
    const ak_opt opts[] = {
        {"model", 0, AK_OPT_STRING, &a->model, "PRESET|FILE", .help = "the model (required)"},
        {"cluster", 0, AK_OPT_STRING, &a->cluster, "PRESET|FILE", .help = "the cluster (required)"},
        {"gbs", 0, AK_OPT_INT, &a->gbs, "N", .help = "global batch in sequences (required)", .min = 1, .max = 100000000},
        {"nodes", 0, AK_OPT_INT, &a->nodes, "N", .help = "resize a one-device-type cluster to N nodes", .min = 1, .max = 100000000},
        {"devices", 0, AK_OPT_INT, &a->devices, "N", .help = "resize a one-device-type cluster to N devices", .min = 1, .max = 100000000},
        {"top", 0, AK_OPT_INT, &a->top, "K", .help = "plans listed", .def = "10", .min = 1, .max = MAX_TOP},
        {"tp", 0, AK_OPT_CUSTOM, &a->want, "T", .help = "tensor-parallel size", .parse = flag_tp},
        {"pp", 0, AK_OPT_CUSTOM, &a->want, "P", .help = "pipeline stages", .parse = flag_pp},
        {"dp", 0, AK_OPT_CUSTOM, &a->want, "D", .help = "data-parallel size", .parse = flag_dp},
        {"vp", 0, AK_OPT_CUSTOM, &a->want, "V", .help = "virtual pipeline stages per device", .parse = flag_vp},
        {"mbs", 0, AK_OPT_CUSTOM, &a->want, "M", .help = "micro-batch size", .parse = flag_mbs},
        {"sp", 0, AK_OPT_CUSTOM, &a->want, "on|off", .help = "sequence parallelism", .parse = flag_sp},
        {"recompute", 0, AK_OPT_CUSTOM, &a->want, "none|selective|full|hybrid:K", .help = "activation recomputation (hybrid:K: K layers in full)", .parse = flag_recompute},
        {"zero", 0, AK_OPT_CUSTOM, &a->want, "0-3", .help = "ZeRO stage", .parse = flag_zero},
        {"offload", 0, AK_OPT_CUSTOM, &a->want, "none|optimizer|params", .help = "offload to host memory", .parse = flag_offload},
        {"attention", 0, AK_OPT_ENUM, &a->attention, .choices = "flash|standard", .help = "attention kernel the step uses", .def = "flash"},
        {"tp-overlap", 0, AK_OPT_FLAG, &a->tp_overlap, .help = "tensor-parallel communication overlaps the GEMMs"},
        {"baseline", 0, AK_OPT_STRING, &a->baseline, "'tp=..,pp=..'", .help = "also evaluate this plan and explain how the best one differs"},
        {"json", 0, AK_OPT_FLAG, &a->json, .help = "one JSON object instead of text"},
        {"list", 0, AK_OPT_FLAG, &a->list, .help = "list the model and cluster presets"},
        {"out", 0, AK_OPT_STRING, &a->out, "DIR", .help = "also append the best plans as results lines to DIR/plan.jsonl (ak report)"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "plan", .opts = opts, .notes = k_plan_notes};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    a->opt.flash_attention = a->attention == 0;
    a->opt.tp_overlap = a->tp_overlap;
    a->opt.global_batch = a->gbs;
    if (a->list) return AK_CLI_CONTINUE;
    if (!a->model || !a->cluster) return ak_cli_usage_error(&cmd, "--model and --cluster are required");
    if (a->opt.global_batch < 1) return ak_cli_usage_error(&cmd, "--gbs (global batch in sequences) is required");
    return AK_CLI_CONTINUE;
}

/* --nodes / --devices resize a single-device-type cluster. */
static int resize_cluster(const plan_args *a, ak_plan_cluster *c) {
    if (!a->nodes && !a->devices) return 0;
    if (c->ngroups != 1) return ak_cli_error("--nodes/--devices need a cluster of one device type");
    ak_plan_group *g = &c->groups[0];
    if (a->nodes) g->nodes = (int64_t)a->nodes;
    if (a->devices && (int64_t)a->devices < g->devices_per_node) {
        g->devices_per_node = (int64_t)a->devices;
        g->nodes = 1;
    } else if (a->devices) {
        if ((int64_t)a->devices % g->devices_per_node != 0) {
            return ak_cli_error("--devices %ld is not a multiple of the %lld devices per node", a->devices,
                                (long long)g->devices_per_node);
        }
        g->nodes = (int64_t)a->devices / g->devices_per_node;
    }
    return 0;
}

/* ---- printing ---------------------------------------------------------------------- */

static void print_config(const ak_plan_config *c) {
    char recompute[32];
    static const char *names[] = {"none", "selective", "full", "hybrid"};
    if (c->recompute == AK_PLAN_RECOMPUTE_HYBRID) snprintf(recompute, sizeof(recompute), "hybrid:%lld", (long long)c->recompute_layers);
    else snprintf(recompute, sizeof(recompute), "%s", names[c->recompute]);
    static const char *offload[] = {"none", "optimizer", "params"};
    printf("%3lld %4lld %6lld %3lld %4lld %-3s %-10s %4d %-9s", (long long)c->tp, (long long)c->pp, (long long)c->dp,
           (long long)c->vp, (long long)c->mbs, c->sequence_parallel ? "on" : "off", recompute, c->zero_stage,
           offload[c->offload]);
}

static void print_table(const ak_plan_result *r, size_t n) {
    printf("  # tp   pp     dp  vp  mbs sp  recompute  zero offload     iter_s  TFLOP/s    MFU    HFU  mem_GiB\n");
    for (size_t i = 0; i < n; i++) {
        printf("%3zu ", i + 1);
        print_config(&r[i].config);
        printf(" %9.3f %8.1f %6.3f %6.3f %8.1f\n", r[i].time_per_iter_s, r[i].tflops_per_device, r[i].mfu, r[i].hfu,
               r[i].memory.total / GIB);
    }
}

typedef struct component {
    const char *name;
    double seconds;
} component;

static size_t components(const ak_plan_time *t, component *out) {
    component all[] = {{"gemm", t->gemm},           {"attention", t->attention}, {"elementwise", t->elementwise},
                       {"tp_comm", t->tp_comm},     {"pp_bubble", t->pp_bubble}, {"pp_p2p", t->pp_p2p},
                       {"dp_comm", t->dp_comm},     {"zero_comm", t->zero_comm}, {"offload", t->offload},
                       {"optimizer", t->optimizer}};
    memcpy(out, all, sizeof(all));
    return sizeof(all) / sizeof(all[0]);
}

static void print_breakdown(const ak_plan_result *r, const ak_plan_cluster *c) {
    component parts[16];
    size_t n = components(&r->time, parts);
    printf("\nbest plan: %.3f s per iteration, %.0f tokens/s, %lld micro-batches per pipeline\n  time:",
           r->time_per_iter_s, r->tokens_per_s, (long long)r->microbatches);
    for (size_t i = 0; i < n; i++)
        if (parts[i].seconds > 0) printf(" %s %.3f s (%.1f%%)", parts[i].name, parts[i].seconds, 100.0 * parts[i].seconds / r->time_per_iter_s);
    const ak_plan_memory *m = &r->memory;
    printf("\n  memory per device: weights %.1f, gradients %.1f, optimizer %.1f, activations %.1f, "
           "buffers %.1f = %.1f GiB of %.0f",
           m->weights / GIB, m->gradients / GIB, m->optimizer / GIB, m->activations / GIB, m->buffers / GIB,
           m->total / GIB, c->groups[0].memory_bytes / GIB);
    if (m->host_bytes_per_node > 0) printf("; host %.1f GiB per node", m->host_bytes_per_node / GIB);
    if (c->ngroups > 1) {
        printf("\n  stages:");
        for (int i = 0; i < c->ngroups; i++)
            printf(" %lld x %lld layers on %s", (long long)r->config.group_stages[i],
                   (long long)r->config.group_stage_layers[i], c->groups[i].device);
    }
    printf("\n");
}

/* Why the best plan beats the baseline: the plan fields that differ, then the time
 * components that changed most. */
static void print_explanation(const ak_plan_result *best, const ak_plan_result *base) {
    double speedup = base->time_per_iter_s / best->time_per_iter_s;
    printf("\nbaseline: ");
    print_config(&base->config);
    printf(" -> %.3f s, %.1f TFLOP/s per device, %.1f GiB%s\n", base->time_per_iter_s, base->tflops_per_device,
           base->memory.total / GIB, base->fits ? "" : " (does NOT fit in memory)");
    printf("best plan is %.3fx %s than the baseline.\n  plan differences:", speedup >= 1 ? speedup : 1 / speedup,
           speedup >= 1 ? "faster" : "slower");
    const ak_plan_config *a = &best->config, *b = &base->config;
    static const char *rc[] = {"none", "selective", "full", "hybrid"}, *off[] = {"none", "optimizer", "params"};
    int same = 1;
#define DIFF_INT(field, label)                                                                           \
    if (a->field != b->field) same = 0, printf(" %s %lld (baseline %lld);", label, (long long)a->field, (long long)b->field)
    DIFF_INT(tp, "tp"); DIFF_INT(pp, "pp"); DIFF_INT(dp, "dp"); DIFF_INT(vp, "vp"); DIFF_INT(mbs, "mbs");
    DIFF_INT(sequence_parallel, "sp"); DIFF_INT(zero_stage, "zero");
#undef DIFF_INT
    if (a->recompute != b->recompute) same = 0, printf(" recompute %s (baseline %s);", rc[a->recompute], rc[b->recompute]);
    if (a->offload != b->offload) same = 0, printf(" offload %s (baseline %s);", off[a->offload], off[b->offload]);
    printf("%s\n  time changes:", same ? " none: the baseline is the best plan" : "");
    component pa[16], pb[16];
    size_t n = components(&best->time, pa);
    components(&base->time, pb);
    for (size_t shown = 0; shown < 5; shown++) { /* the largest changes first */
        size_t k = n;
        for (size_t i = 0; i < n; i++)
            if (fabs(pa[i].seconds - pb[i].seconds) > 1e-9 && (k == n || fabs(pa[i].seconds - pb[i].seconds) > fabs(pa[k].seconds - pb[k].seconds))) k = i;
        if (k == n) break;
        printf(" %s %+.3f s (%.3f -> %.3f);", pa[k].name, pa[k].seconds - pb[k].seconds, pb[k].seconds, pa[k].seconds);
        pa[k].seconds = pb[k].seconds; /* shown */
    }
    printf("\n");
}

static cJSON *result_object(const ak_plan_result *r) {
    char *text = NULL;
    if (ak_plan_result_json(r, &text) != AK_OK) return NULL;
    cJSON *obj = cJSON_Parse(text);
    free(text);
    return obj;
}

static void print_json(const plan_args *a, const ak_plan_model *m, const ak_plan_cluster *c,
                       const ak_plan_result *best, size_t n, const ak_plan_search_stats *st,
                       const ak_plan_result *base) {
    double params = 0;
    ak_plan_param_count(m, &params);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", m->name);
    cJSON_AddNumberToObject(root, "params", params);
    cJSON_AddStringToObject(root, "cluster", c->name);
    cJSON_AddNumberToObject(root, "devices", (double)cluster_devices(c));
    cJSON_AddNumberToObject(root, "global_batch", (double)a->opt.global_batch);
    cJSON_AddNumberToObject(root, "plans_evaluated", (double)st->evaluated);
    cJSON_AddNumberToObject(root, "plans_feasible", (double)st->feasible);
    cJSON_AddNumberToObject(root, "plans_kept", (double)st->kept);
    cJSON_AddNumberToObject(root, "search_seconds", st->seconds);
    cJSON *plans = cJSON_AddArrayToObject(root, "plans");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(plans, result_object(&best[i]));
    if (base) {
        cJSON_AddItemToObject(root, "baseline", result_object(base));
        cJSON_AddNumberToObject(root, "speedup_vs_baseline", base->time_per_iter_s / best[0].time_per_iter_s);
    }
    ak_cli_print_json(root);
}

/* "tp=8 pp=16 dp=24 vp=8 mbs=1 sp recompute=none zero=1 offload=none" from a plan's JSON */
static void plan_summary(const cJSON *plan, char *out, size_t cap) {
    static const char *const keys[] = {"tp", "pp", "dp", "vp", "mbs", "recompute", "zero", "offload"};
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof keys / sizeof *keys && len < cap; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(plan, keys[i]);
        if (cJSON_IsNumber(v)) len += (size_t)snprintf(out + len, cap - len, "%s%s=%g", len ? " " : "", keys[i], v->valuedouble);
        else if (cJSON_IsString(v)) len += (size_t)snprintf(out + len, cap - len, "%s%s=%s", len ? " " : "", keys[i], v->valuestring);
        if (i == 4 && len < cap && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(plan, "sequence_parallel")))
            len += (size_t)snprintf(out + len, cap - len, " sp");
    }
}

/* --out: one plan.best line per plan kept, figures as ak_plan_result_json gives them */
static int record_plans(const plan_args *a, const ak_plan_model *m, const ak_plan_cluster *c,
                        const ak_plan_result *best, size_t n) {
    ak__bench_out out;
    int rc = ak__bench_out_open(&out, a->out, "plan", 0, 0);
    if (rc) return rc;
    static const char *const figure_keys[] = {"time_per_iter_s", "mfu", "hfu", "tflops_per_device",
                                              "tokens_per_s", "memory_bytes_per_device", "breakdown", "memory"};
    for (size_t i = 0; i < n; i++) {
        cJSON *plan = result_object(&best[i]);
        if (!plan) continue;
        char summary[256];
        plan_summary(plan, summary, sizeof summary);
        cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
        cJSON_AddStringToObject(params, "model", m->name);
        cJSON_AddStringToObject(params, "cluster", c->name);
        cJSON_AddNumberToObject(params, "devices", (double)cluster_devices(c));
        cJSON_AddNumberToObject(params, "gbs", (double)a->opt.global_batch);
        cJSON_AddNumberToObject(params, "rank", (double)(i + 1));
        cJSON_AddStringToObject(params, "plan", summary);
        for (size_t k = 0; k < sizeof figure_keys / sizeof *figure_keys; k++) {
            cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(plan, figure_keys[k]);
            if (v) cJSON_AddItemToObject(figures, figure_keys[k], v);
        }
        cJSON_Delete(plan);
        ak__bench_out_add(&out, "plan.best", NULL, NULL, params, figures);
    }
    ak__bench_out_close(&out);
    return 0;
}

static void print_progress(double fraction, void *user) {
    ak_cli_progress_update(user, fraction, NULL);
}

static int list_presets(void) {
    const char *kinds[] = {"models", "clusters"}, *name;
    for (int k = 0; k < 2; k++) {
        printf("%s:", kinds[k]);
        for (size_t i = 0; ak_plan_preset_name(kinds[k], i, &name) == AK_OK; i++) printf(" %s", name);
        printf("\n");
    }
    return AK_EXIT_OK;
}

static void print_header(const ak_plan_model *m, const ak_plan_cluster *c, const plan_args *a,
                         const ak_plan_search_stats *st) {
    double params = 0;
    int64_t devices = cluster_devices(c);
    ak_plan_param_count(m, &params);
    printf("model %s: %.2f B parameters, %lld layers, hidden %lld | cluster %s: %lld devices | global batch %lld x %lld tokens\n",
           m->name, params / 1e9, (long long)m->layers, (long long)m->hidden, c->name, (long long)devices,
           (long long)a->opt.global_batch, (long long)m->seq_len);
    printf("searched %llu plans in %.3f s: %llu fit in memory, %llu not dominated\n",
           (unsigned long long)st->evaluated, st->seconds, (unsigned long long)st->feasible, (unsigned long long)st->kept);
}

/* The best plan under the baseline's constraints (fields it leaves out are searched). */
static int evaluate_baseline(const plan_args *a, const ak_plan_model *m, const ak_plan_cluster *c, ak_plan_result *out) {
    ak_plan_config want;
    ak_plan_config_free_all(&want);
    if (parse_plan_spec(a->baseline, &want) != 0) return AK_EXIT_ERROR;
    size_t n = 1;
    ak_status st = ak_plan_search(m, c, &a->opt, &want, out, &n, NULL, NULL, NULL);
    if (st != AK_OK) return ak_cli_report("--baseline", st);
    if (n == 0) {
        fprintf(stderr, "ak plan: the baseline '%s' is not possible or does not fit in memory\n", a->baseline);
        return AK_EXIT_FAIL;
    }
    return 0;
}

static int report_no_plan(const ak_plan_search_stats *st, const ak_plan_cluster *c) {
    if (st->evaluated == 0) {
        fprintf(stderr, "ak plan: no plan satisfies the constraints (divisibility of heads, layers, devices and batch)\n");
        return AK_EXIT_FAIL;
    }
    fprintf(stderr, "ak plan: no plan fits in memory; the smallest needs %.1f GiB per device (%.0f GiB available):\n  ",
            st->least_memory.memory.total / GIB, c->groups[0].memory_bytes / GIB);
    print_config(&st->least_memory.config);
    fprintf(stderr, "\n");
    return AK_EXIT_FAIL;
}

static int run_plan(const plan_args *a, const ak_plan_model *m, const ak_plan_cluster *c) {
    ak_plan_result *best = calloc((size_t)a->top, sizeof(*best)), base;
    if (!best) return ak_cli_report("search", AK_ERR_NO_MEMORY);
    size_t n = (size_t)a->top;
    ak_plan_search_stats st;
    ak_cli_progress progress;
    ak_cli_progress_begin(&progress, "ak plan: searching");
    ak_status s = ak_plan_search(m, c, &a->opt, &a->want, best, &n, &st, print_progress, &progress);
    ak_cli_progress_end(&progress);
    int rc = AK_EXIT_OK;
    if (s != AK_OK) rc = ak_cli_report("search", s);
    else if (n == 0) rc = report_no_plan(&st, c);
    else if (a->baseline && (rc = evaluate_baseline(a, m, c, &base)) != 0) {}
    else if (a->out && (rc = record_plans(a, m, c, best, n)) != 0) {}
    else if (a->json) print_json(a, m, c, best, n, &st, a->baseline ? &base : NULL);
    else {
        print_header(m, c, a, &st);
        print_table(best, n);
        print_breakdown(&best[0], c);
        if (a->baseline) print_explanation(&best[0], &base);
    }
    free(best);
    return rc;
}

int ak_cli_plan(int argc, char **argv) {
    plan_args a;
    int rc = parse_plan_args(argc, argv, &a);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (a.list) return list_presets();
    ak_plan_model m;
    ak_plan_cluster c;
    ak_status st = ak_plan_model_load(a.model, &m);
    if (st != AK_OK) return ak_cli_report("--model", st);
    if ((st = ak_plan_cluster_load(a.cluster, &c)) != AK_OK) return ak_cli_report("--cluster", st);
    if ((rc = resize_cluster(&a, &c)) != 0) return rc;
    if ((st = ak_plan_cluster_check(&c)) != AK_OK) return ak_cli_report("--nodes/--devices", st);
    return run_plan(&a, &m, &c);
}

/* ---- ak mfu ------------------------------------------------------------------------ */

typedef struct mfu_args {
    const char *model, *cluster;
    long devices, gbs;
    double tokens_per_s, step_time;
    int json, attention, recompute;
} mfu_args;

static const char *parse_positive(void *dest, char *value, ak_opt_more *more) {
    double v;
    (void)more;
    if (ak_cli_parse_double(value, &v) != 0 || !(v > 0.0)) return "want a positive number";
    *(double *)dest = v;
    return NULL;
}

static int parse_mfu_args(int argc, char **argv, mfu_args *a) {
    memset(a, 0, sizeof(*a));
    int first;
    const ak_opt opts[] = {
        {"model", 0, AK_OPT_STRING, &a->model, "PRESET|FILE", .help = "the model (required)"},
        {"cluster", 0, AK_OPT_STRING, &a->cluster, "PRESET|FILE", .help = "the cluster: its device's peak FLOP/s (required)"},
        {"devices", 0, AK_OPT_INT, &a->devices, "N", .help = "devices the throughput was measured on (required)", .min = 1, .max = 100000000},
        {"tokens-per-s", 0, AK_OPT_CUSTOM, &a->tokens_per_s, "X", .help = "measured tokens per second, all devices together", .parse = parse_positive},
        {"step-time", 0, AK_OPT_CUSTOM, &a->step_time, "S", .help = "measured seconds per step (with --gbs)", .parse = parse_positive},
        {"gbs", 0, AK_OPT_INT, &a->gbs, "N", .help = "sequences per step (with --step-time)", .min = 1, .max = 100000000},
        {"recompute", 0, AK_OPT_ENUM, &a->recompute, .choices = "none|selective|full", .help = "activation recomputation (hardware FLOPs)", .def = "none"},
        {"attention", 0, AK_OPT_ENUM, &a->attention, .choices = "flash|standard", .help = "attention kernel", .def = "flash"},
        {"json", 0, AK_OPT_FLAG, &a->json, .help = "one JSON object instead of text"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "mfu", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    if (!a->model || !a->cluster || !a->devices)
        return ak_cli_usage_error(&cmd, "--model, --cluster and --devices are required");
    if ((a->tokens_per_s > 0) == (a->step_time > 0))
        return ak_cli_usage_error(&cmd, "give either --tokens-per-s or --step-time (with --gbs)");
    if (a->step_time > 0 && !a->gbs) return ak_cli_usage_error(&cmd, "--step-time needs --gbs (sequences per step)");
    return AK_CLI_CONTINUE;
}

int ak_cli_mfu(int argc, char **argv) {
    mfu_args a;
    int rc = parse_mfu_args(argc, argv, &a);
    if (rc != AK_CLI_CONTINUE) return rc;
    ak_plan_model m;
    ak_plan_cluster c;
    ak_status st = ak_plan_model_load(a.model, &m);
    if (st != AK_OK) return ak_cli_report("--model", st);
    if ((st = ak_plan_cluster_load(a.cluster, &c)) != AK_OK) return ak_cli_report("--cluster", st);
    double tokens = a.tokens_per_s > 0 ? a.tokens_per_s : (double)a.gbs * (double)m.seq_len / a.step_time;
    double mfu, hfu, model_flops, hw_flops;
    ak_plan_recompute recompute = (ak_plan_recompute)a.recompute;
    int flash = a.attention == 0;
    if ((st = ak_plan_mfu(&m, &c, (int64_t)a.devices, tokens, recompute, flash, &mfu, &hfu)) != AK_OK ||
        (st = ak_plan_flops(&m, 1.0, recompute, 0.0, flash, &model_flops, &hw_flops)) != AK_OK)
        return ak_cli_report("mfu", st);
    double per_device = tokens * hw_flops / (double)m.seq_len / (double)a.devices / 1e12;
    if (a.json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", m.name);
        cJSON_AddNumberToObject(o, "devices", (double)a.devices);
        cJSON_AddNumberToObject(o, "tokens_per_s", tokens);
        cJSON_AddNumberToObject(o, "model_flops_per_token", model_flops / (double)m.seq_len);
        cJSON_AddNumberToObject(o, "tflops_per_device", per_device);
        cJSON_AddNumberToObject(o, "mfu", mfu);
        cJSON_AddNumberToObject(o, "hfu", hfu);
        return ak_cli_print_json(o) ? AK_EXIT_ERROR : AK_EXIT_OK;
    } else {
        printf("model %s on %ld x %s: %.0f tokens/s, %.4g model FLOP per token\n", m.name, a.devices,
               c.groups[0].device, tokens, model_flops / (double)m.seq_len);
        printf("MFU %.1f %%  HFU %.1f %%  (%.1f TFLOP/s per device of hardware work, recompute %s)\n", 100 * mfu,
               100 * hfu, per_device, (const char *[]){"none", "selective", "full"}[a.recompute]);
    }
    return AK_EXIT_OK;
}
