/* `ak info model.onnx [--json] [--optimized]`: what an ONNX model contains — IR version,
 * producer, opsets, inputs and outputs with types and (symbolic) shapes, operator
 * histogram, parameters, and FLOPs of Conv/Gemm/MatMul where the file fixes their shapes;
 * with --optimized, also what the graph optimizer of a session does to it (the same list
 * `ak optimize` prints). */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "accelkit/infer.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"

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
    int json = 0, optimized = 0, first;
    const ak_opt opts[] = {
        {"json", 0, AK_OPT_FLAG, &json, .help = "one JSON object instead of text"},
        {"optimized", 0, AK_OPT_FLAG, &optimized,
         .help = "also list what the graph optimizer folds, removes and fuses (makes a session)"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "info", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first == argc) return ak_cli_usage_error(&cmd, "no model given");
    if (argc - first > 1)
        return ak_cli_usage_error(&cmd, "one model at a time ('%s' and '%s')", argv[first], argv[first + 1]);
    const char *path = argv[first];
    ak_model *m;
    ak_status st = ak_onnx_load_file(path, &m);
    if (st != AK_OK) return ak_cli_report(path, st);
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
