/* `ak info model.onnx [--json] [--optimized]`: what an ONNX model contains — IR version,
 * producer, opsets, inputs and outputs with types and (symbolic) shapes, operator
 * histogram, parameters, and FLOPs of Conv/Gemm/MatMul where the file fixes their shapes;
 * with --optimized, also what the graph optimizer of a session does to it (the same list
 * `ak optimize` prints); with --plan, which backend runs each float32 MatMul/Gemm node
 * (own, openblas, blis, onednn) and the median times measured for each (a session is made and
 * run once on made-up inputs: nodes choose when a run first meets their shapes). */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "accelkit/infer.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/infer_feed.h"

static const char *kind_name(ak_value_kind k) {
    switch (k) {
    case AK_VALUE_TENSOR: return "tensor";
    case AK_VALUE_SEQUENCE: return "sequence";
    case AK_VALUE_MAP: return "map";
    case AK_VALUE_OPTIONAL: return "optional";
    case AK_VALUE_SPARSE_TENSOR: return "sparse_tensor";
    default: return "unknown";
    }
}

/* Names from a file printed as text: non-printable bytes become '?'. */
static void text_str(const char *s, int width) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++)
        putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
    for (; n < width; n++) putchar(' ');
}

static void print_shape_text(const ak_value_info *v) {
    if (v->kind != AK_VALUE_TENSOR && v->kind != AK_VALUE_SPARSE_TENSOR) {
        printf("%s", kind_name(v->kind));
        return;
    }
    printf("%s ", ak_elem_type_name(v->type));
    if (v->rank < 0) {
        printf("[shape not declared]");
        return;
    }
    putchar('[');
    for (int i = 0; i < v->rank; i++) {
        if (i) printf(", ");
        if (v->dims[i] >= 0) printf("%lld", (long long)v->dims[i]);
        else if (v->dim_names[i]) text_str(v->dim_names[i], 0);
        else putchar('?');
    }
    putchar(']');
}

static cJSON *shape_json(const ak_value_info *v) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "name", ak_cli_json_text(v->name));
    cJSON_AddStringToObject(o, "kind", kind_name(v->kind));
    cJSON_AddStringToObject(o, "type", ak_elem_type_name(v->type));
    if (v->rank < 0) {
        cJSON_AddNullToObject(o, "shape");
        return o;
    }
    cJSON *dims = cJSON_AddArrayToObject(o, "shape");
    for (int i = 0; i < v->rank; i++) {
        if (v->dims[i] >= 0) cJSON_AddItemToArray(dims, cJSON_CreateNumber((double)v->dims[i]));
        else cJSON_AddItemToArray(dims, ak_cli_json_text(v->dim_names[i]));
    }
    return o;
}

typedef ak_status (*value_getter)(const ak_model *, size_t, ak_value_info *);

static void print_values_text(const ak_model *m, size_t n, value_getter get, const char *title) {
    printf("%-13s%zu\n", title, n);
    for (size_t i = 0; i < n; i++) {
        ak_value_info v;
        if (get(m, i, &v) != AK_OK) continue;
        printf("  ");
        text_str(v.name, 20);
        printf(" ");
        print_shape_text(&v);
        printf("\n");
    }
}

static cJSON *values_json(const ak_model *m, size_t n, value_getter get) {
    cJSON *list = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        ak_value_info v;
        if (get(m, i, &v) == AK_OK) cJSON_AddItemToArray(list, shape_json(&v));
    }
    return list;
}

/* "144 FLOP", "3.63 GFLOP": the unit follows the size. */
static void print_flops(uint64_t flops) {
    static const char *units[] = {"", "K", "M", "G", "T", "P", "E"};
    double v = (double)flops;
    int u = 0;
    while (v >= 1000 && u < 6) {
        v /= 1000;
        u++;
    }
    if (u == 0) printf("%llu FLOP", (unsigned long long)flops);
    else printf("%.3g %sFLOP", v, units[u]);
}

static void print_text(const char *path, const ak_model *m, const ak_model_summary *s,
                       const ak_model_flops *f) {
    printf("%-13s", "model");
    text_str(path, 0);
    printf("\n%-13s%lld (model version %lld)\n", "ir version", (long long)s->ir_version,
           (long long)s->model_version);
    printf("%-13s", "producer");
    text_str(s->producer_name[0] ? s->producer_name : "(not given)", 0);
    if (s->producer_version[0]) putchar(' ');
    text_str(s->producer_version, 0);
    printf("\n%-13s", "opsets");
    for (size_t i = 0; i < s->num_opsets; i++) {
        const char *domain;
        int64_t version;
        if (ak_model_opset(m, i, &domain, &version) != AK_OK) continue;
        printf("%s", i ? ", " : "");
        text_str(domain[0] ? domain : "ai.onnx", 0);
        printf(" %lld", (long long)version);
    }
    printf("\n");
    print_values_text(m, s->num_inputs, ak_model_input, "inputs");
    print_values_text(m, s->num_outputs, ak_model_output, "outputs");
    printf("%-13s%llu in %zu initializers (%.2f MiB)\n", "parameters",
           (unsigned long long)s->num_params, s->num_initializers,
           (double)s->param_bytes / (1 << 20));
    printf("%-13s%zu nodes, %zu operator types", "graph", s->num_nodes, s->num_op_types);
    if (s->num_subgraph_nodes) printf(" (+%zu nodes in subgraphs)", s->num_subgraph_nodes);
    printf("\n");
    for (size_t i = 0; i < s->num_op_types; i++) {
        const char *op;
        size_t count;
        if (ak_model_op_count(m, i, &op, &count) != AK_OK) continue;
        printf("  ");
        text_str(op, 20);
        printf(" %zu\n", count);
    }
    printf("%-13s", "FLOPs");
    if (f->candidates == 0) printf("no Conv/ConvTranspose/Gemm/MatMul nodes\n");
    else if (f->counted == f->candidates) {
        print_flops(f->flops);
        printf(" (Conv/ConvTranspose/Gemm/MatMul, %zu nodes)\n", f->counted);
    }
    else if (f->counted == 0)
        printf("needs shape inference (no shapes known for the %zu Conv/ConvTranspose/Gemm/"
               "MatMul nodes)\n", f->candidates);
    else {
        printf("at least ");
        print_flops(f->flops);
        printf(": %zu of %zu Conv/ConvTranspose/Gemm/MatMul nodes have static shapes in the "
               "file; the rest needs shape inference\n", f->counted, f->candidates);
    }
}

static cJSON *opsets_json(const ak_model *m, const ak_model_summary *s) {
    cJSON *list = cJSON_CreateArray();
    for (size_t i = 0; i < s->num_opsets; i++) {
        const char *domain;
        int64_t version;
        if (ak_model_opset(m, i, &domain, &version) != AK_OK) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "domain", ak_cli_json_text(domain));
        cJSON_AddNumberToObject(o, "version", (double)version);
        cJSON_AddItemToArray(list, o);
    }
    return list;
}

static cJSON *ops_json(const ak_model *m, const ak_model_summary *s) {
    cJSON *ops = cJSON_CreateObject();
    for (size_t i = 0; i < s->num_op_types; i++) {
        const char *op;
        size_t count;
        if (ak_model_op_count(m, i, &op, &count) != AK_OK) continue;
        cJSON *n = cJSON_CreateNumber((double)count), *key = ak_cli_json_text(op);
        if (key && cJSON_IsString(key)) cJSON_AddItemToObject(ops, key->valuestring, n);
        else cJSON_Delete(n);
        cJSON_Delete(key);
    }
    return ops;
}

/* --optimized: a session with every optimizer level; what it folded, removed and fused. */
static ak_status optimizations(const ak_model *m, cJSON *json_out) {
    ak_session *s;
    ak_status st = ak_session_create(m, NULL, &s);
    if (st != AK_OK) return st;
    ak_session_memory mem;
    size_t count = 0;
    st = ak_session_get_memory(s, &mem);
    if (st == AK_OK) st = ak_session_optimizations(s, 0, NULL, NULL, &count);
    if (st == AK_OK && !json_out) {
        printf("%-13s%zu nodes folded into constants\n", "optimized", mem.num_folded);
        for (size_t i = 0; i < count; i++) {
            const char *what;
            size_t times;
            if (ak_session_optimizations(s, i, &what, &times, NULL) == AK_OK)
                printf("  %-40s %zu\n", what, times);
        }
    } else if (st == AK_OK) {
        cJSON *o = cJSON_AddObjectToObject(json_out, "optimized");
        cJSON_AddNumberToObject(o, "nodes folded into constants", (double)mem.num_folded);
        for (size_t i = 0; i < count; i++) {
            const char *what;
            size_t times;
            if (ak_session_optimizations(s, i, &what, &times, NULL) == AK_OK)
                cJSON_AddNumberToObject(o, what, (double)times);
        }
    }
    ak_session_free(s);
    return st;
}

/* --plan: a session run once on made-up inputs, then each GEMM-shaped node's backend. */
static const char *parse_plan_dim(void *dest, char *value, ak_opt_more *more) {
    (void)more;
    ak_feed *f = dest;
    const char *eq = strchr(value, '=');
    size_t v;
    if (!eq || eq == value || ak_cli_parse_size(eq + 1, &v)) return "want name=value";
    if (f->num_dim_values == 16) return "at most 16 --dim";
    return ak_feed_add_dim(f, value) ? "cannot record it" : NULL;
}

static int print_plan(const char *path, const ak_model *m, ak_feed *feed, long threads, int json) {
    ak_session_options o;
    ak_session_options_init(&o);
    o.threads = (int)threads;
    ak_session *s = NULL;
    ak_model_summary sum;
    ak_tensor outs[AK_FEED_MAX];
    ak_status st = ak_model_get_summary(m, &sum);
    if (st != AK_OK) return ak_cli_report(path, st);
    if (sum.num_outputs > AK_FEED_MAX) {
        fprintf(stderr, "ak info: %s: more than %d outputs\n", path, AK_FEED_MAX);
        return AK_EXIT_ERROR;
    }
    if (ak_feed_fill_random(feed, m, 42)) return AK_EXIT_ERROR;
    uint64_t t0 = ak_now_ns();
    if ((st = ak_session_create(m, &o, &s)) != AK_OK) return ak_cli_report(path, st);
    uint64_t t1 = ak_now_ns();
    st = ak_session_run(s, feed->names, feed->tensors, feed->n, NULL, outs, sum.num_outputs);
    uint64_t t2 = ak_now_ns();
    size_t n = 0;
    if (st == AK_OK) st = ak_session_backends(s, 0, NULL, &n);
    if (st != AK_OK) {
        ak_session_free(s);
        return ak_cli_report(path, st);
    }
    cJSON *root = json ? cJSON_CreateObject() : NULL, *rows = NULL;
    if (json) {
        cJSON_AddItemToObject(root, "path", ak_cli_json_text(path));
        cJSON_AddNumberToObject(root, "create_ms", (double)(t1 - t0) / 1e6);
        cJSON_AddNumberToObject(root, "first_run_ms", (double)(t2 - t1) / 1e6);
        rows = cJSON_AddArrayToObject(root, "nodes");
    } else {
        printf("plan         %s: %zu float32 MatMul/Gemm nodes; session created in %.1f ms, first "
               "run (choosing) %.1f ms\n", path, n, (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
        printf("  %-32s %-11s %10s  %-9s %-9s %s\n", "node", "op", "MACs", "backend", "how",
               "median ms per backend");
    }
    for (size_t i = 0; i < n; i++) {
        ak_node_backend b;
        if (ak_session_backends(s, i, &b, NULL) != AK_OK) continue;
        if (json) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddItemToObject(r, "node", ak_cli_json_text(b.node));
            cJSON_AddStringToObject(r, "op", b.op_type);
            cJSON_AddNumberToObject(r, "macs", (double)b.macs);
            cJSON_AddStringToObject(r, "backend", b.backend);
            cJSON_AddStringToObject(r, "how", b.how);
            cJSON *t = cJSON_AddObjectToObject(r, "median_ms");
            for (size_t k = 0; k < b.num_times; k++)
                cJSON_AddNumberToObject(t, b.names[k], (double)b.median_ns[k] / 1e6);
            cJSON_AddItemToArray(rows, r);
            continue;
        }
        printf("  ");
        text_str(b.node[0] ? b.node : "<unnamed>", 32);
        printf(" %-11s %10llu  %-9s %-9s", b.op_type, (unsigned long long)b.macs, b.backend, b.how);
        for (size_t k = 0; k < b.num_times; k++)
            printf(" %s%s %.3f", strcmp(b.names[k], b.backend) == 0 ? "*" : "", b.names[k],
                   (double)b.median_ns[k] / 1e6);
        putchar('\n');
    }
    ak_session_free(s);
    return json ? (ak_cli_print_json(root) ? AK_EXIT_ERROR : AK_EXIT_OK) : AK_EXIT_OK;
}

static int print_json(const char *path, const ak_model *m, const ak_model_summary *s,
                      const ak_model_flops *f, int optimized) {
    cJSON *o = cJSON_CreateObject();
    ak_status st = optimized ? optimizations(m, o) : AK_OK;
    if (st != AK_OK) {
        cJSON_Delete(o);
        return ak_cli_report(path, st);
    }
    cJSON_AddItemToObject(o, "path", ak_cli_json_text(path));
    cJSON_AddNumberToObject(o, "ir_version", (double)s->ir_version);
    cJSON_AddNumberToObject(o, "model_version", (double)s->model_version);
    cJSON_AddItemToObject(o, "producer_name", ak_cli_json_text(s->producer_name));
    cJSON_AddItemToObject(o, "producer_version", ak_cli_json_text(s->producer_version));
    cJSON_AddItemToObject(o, "opsets", opsets_json(m, s));
    cJSON_AddItemToObject(o, "inputs", values_json(m, s->num_inputs, ak_model_input));
    cJSON_AddItemToObject(o, "outputs", values_json(m, s->num_outputs, ak_model_output));
    cJSON_AddNumberToObject(o, "nodes", (double)s->num_nodes);
    cJSON_AddNumberToObject(o, "subgraph_nodes", (double)s->num_subgraph_nodes);
    cJSON_AddItemToObject(o, "ops", ops_json(m, s));
    cJSON_AddNumberToObject(o, "initializers", (double)s->num_initializers);
    cJSON_AddNumberToObject(o, "params", (double)s->num_params);
    cJSON_AddNumberToObject(o, "param_bytes", (double)s->param_bytes);
    /* flops is null unless every candidate node was counted */
    if (f->counted == f->candidates) cJSON_AddNumberToObject(o, "flops", (double)f->flops);
    else cJSON_AddNullToObject(o, "flops");
    cJSON_AddNumberToObject(o, "flops_counted_nodes", (double)f->counted);
    cJSON_AddNumberToObject(o, "flops_candidate_nodes", (double)f->candidates);
    cJSON_AddNumberToObject(o, "flops_counted", (double)f->flops);
    return ak_cli_print_json(o) ? AK_EXIT_ERROR : AK_EXIT_OK;
}

int ak_cli_info(int argc, char **argv) {
    int json = 0, optimized = 0, plan = 0, first;
    long threads = 0;
    ak_feed feed = {0};
    const ak_opt opts[] = {
        {"json", 0, AK_OPT_FLAG, &json, .help = "one JSON object instead of text"},
        {"optimized", 0, AK_OPT_FLAG, &optimized,
         .help = "also list what the graph optimizer folds, removes and fuses (makes a session)"},
        {"plan", 0, AK_OPT_FLAG, &plan,
         .help = "instead: which backend (own, openblas, blis, onednn) runs each float32 MatMul/Gemm "
                 "node, with the times measured (makes a session and runs it once on made-up inputs)"},
        {"threads", 't', AK_OPT_INT, &threads, "N", .help = "--plan: threads (0: AK_NUM_THREADS or all cores)",
         .min = 0, .max = 4096},
        {"dim", 0, AK_OPT_CUSTOM, &feed, "NAME=N",
         "--plan: value of a symbolic dimension for the made-up inputs (repeatable)", .parse = parse_plan_dim},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "info", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first == argc) return ak_cli_usage_error(&cmd, "no model given");
    if (argc - first > 1)
        return ak_cli_usage_error(&cmd, "one model at a time ('%s' and '%s')", argv[first], argv[first + 1]);
    const char *path = argv[first];
    if (plan && optimized) return ak_cli_usage_error(&cmd, "--plan and --optimized do not combine");
    if (!plan && (threads || feed.num_dim_values))
        return ak_cli_usage_error(&cmd, "--threads and --dim go with --plan");
    ak_model *m;
    ak_status st = ak_onnx_load_file(path, &m);
    if (st != AK_OK) return ak_cli_report(path, st);
    if (plan) {
        rc = print_plan(path, m, &feed, threads, json);
        ak_feed_free(&feed);
        ak_model_free(m);
        return rc;
    }
    ak_model_summary s;
    ak_model_flops f;
    if ((st = ak_model_get_summary(m, &s)) != AK_OK || (st = ak_model_get_flops(m, &f)) != AK_OK) {
        ak_model_free(m);
        return ak_cli_report(path, st);
    }
    rc = AK_EXIT_OK;
    if (json) {
        rc = print_json(path, m, &s, &f, optimized);
    } else {
        print_text(path, m, &s, &f);
        if (optimized && (st = optimizations(m, NULL)) != AK_OK) rc = ak_cli_report(path, st);
    }
    ak_model_free(m);
    return rc;
}
