/* `ak info model.onnx [--json]`: what an ONNX model contains — IR version, producer,
 * opsets, inputs and outputs with types and (symbolic) shapes, operator histogram,
 * parameters, and FLOPs of Conv/Gemm/MatMul where the file fixes their shapes. */
#include <stdio.h>
#include <string.h>

#include "accelkit/infer.h"
#include "cli/cli.h"

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

/* A JSON string literal; control characters and non-ASCII bytes are escaped so any name
 * from a file gives valid JSON. */
static void json_str(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
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

static void print_shape_json(const ak_value_info *v) {
    printf("{\"name\":");
    json_str(v->name);
    printf(",\"kind\":\"%s\",\"type\":\"%s\",\"shape\":", kind_name(v->kind),
           ak_elem_type_name(v->type));
    if (v->rank < 0) {
        printf("null}");
        return;
    }
    putchar('[');
    for (int i = 0; i < v->rank; i++) {
        if (i) putchar(',');
        if (v->dims[i] >= 0) printf("%lld", (long long)v->dims[i]);
        else if (v->dim_names[i]) json_str(v->dim_names[i]);
        else printf("null");
    }
    printf("]}");
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

static void print_values_json(const ak_model *m, size_t n, value_getter get) {
    putchar('[');
    for (size_t i = 0; i < n; i++) {
        ak_value_info v;
        if (get(m, i, &v) != AK_OK) continue;
        if (i) putchar(',');
        print_shape_json(&v);
    }
    putchar(']');
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

static void print_json(const char *path, const ak_model *m, const ak_model_summary *s,
                       const ak_model_flops *f) {
    printf("{\"path\":");
    json_str(path);
    printf(",\"ir_version\":%lld,\"model_version\":%lld,\"producer_name\":",
           (long long)s->ir_version, (long long)s->model_version);
    json_str(s->producer_name);
    printf(",\"producer_version\":");
    json_str(s->producer_version);
    printf(",\"opsets\":[");
    for (size_t i = 0; i < s->num_opsets; i++) {
        const char *domain;
        int64_t version;
        if (ak_model_opset(m, i, &domain, &version) != AK_OK) continue;
        printf("%s{\"domain\":", i ? "," : "");
        json_str(domain);
        printf(",\"version\":%lld}", (long long)version);
    }
    printf("],\"inputs\":");
    print_values_json(m, s->num_inputs, ak_model_input);
    printf(",\"outputs\":");
    print_values_json(m, s->num_outputs, ak_model_output);
    printf(",\"nodes\":%zu,\"subgraph_nodes\":%zu,\"ops\":{", s->num_nodes, s->num_subgraph_nodes);
    for (size_t i = 0; i < s->num_op_types; i++) {
        const char *op;
        size_t count;
        if (ak_model_op_count(m, i, &op, &count) != AK_OK) continue;
        if (i) putchar(',');
        json_str(op);
        printf(":%zu", count);
    }
    printf("},\"initializers\":%zu,\"params\":%llu,\"param_bytes\":%llu,", s->num_initializers,
           (unsigned long long)s->num_params, (unsigned long long)s->param_bytes);
    /* flops is null unless every candidate node was counted */
    if (f->counted == f->candidates) printf("\"flops\":%llu", (unsigned long long)f->flops);
    else printf("\"flops\":null");
    printf(",\"flops_counted_nodes\":%zu,\"flops_candidate_nodes\":%zu,"
           "\"flops_counted\":%llu}\n",
           f->counted, f->candidates, (unsigned long long)f->flops);
}

int ak_cli_info(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "ak info: unknown option '%s'\n", argv[i]);
            return AK_EXIT_ERROR;
        } else if (path) {
            fprintf(stderr, "ak info: one model at a time ('%s' and '%s')\n", path, argv[i]);
            return AK_EXIT_ERROR;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "usage: ak info model.onnx [--json]\n");
        return AK_EXIT_ERROR;
    }
    ak_model *m;
    ak_status st = ak_onnx_load_file(path, &m);
    if (st != AK_OK) return ak_cli_report(path, st);
    ak_model_summary s;
    ak_model_flops f;
    if ((st = ak_model_get_summary(m, &s)) != AK_OK || (st = ak_model_get_flops(m, &f)) != AK_OK) {
        ak_model_free(m);
        return ak_cli_report(path, st);
    }
    if (json) print_json(path, m, &s, &f);
    else print_text(path, m, &s, &f);
    ak_model_free(m);
    return AK_EXIT_OK;
}
