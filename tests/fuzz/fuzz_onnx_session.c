/* Fuzz: ONNX session creation and one run — shape inference, constant folding, the
 * optimizer's fusions and the memory plan — on graphs built from the fuzz bytes.
 *
 * Random protobuf bytes never get past the decoder, so this target is structure-aware:
 * the bytes are a recipe (fuzz_recipe below) that picks an opset, one or two graph inputs
 * of small shapes, then up to MAX_NODES nodes, each any operator the runtime registers
 * (read from its family tables), fed by earlier values or new small initializers, with
 * attributes from a menu of the names ONNX operators use and small values. The recipe is
 * serialized as a real ModelProto and goes through the public API: ak_onnx_load_bytes,
 * ak_session_create (folding and optimizing on or off), ak_session_run. Every step must
 * succeed or fail with a message; outputs must have sane shapes and readable data. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/infer.h"
#include "fuzz_file.h"
#include "infer/runtime/op.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_NODES 6
#define MAX_VALUES 64

/* ---- the recipe: bytes consumed in order, zeros once they run out ------------------- */

typedef struct fuzz_recipe {
    const uint8_t *p;
    size_t left;
} fuzz_recipe;

static unsigned take(fuzz_recipe *r) {
    if (!r->left) return 0;
    r->left--;
    return *r->p++;
}

/* A value in [lo, hi], from one byte. */
static int64_t take_range(fuzz_recipe *r, int64_t lo, int64_t hi) {
    return lo + (int64_t)(take(r) % (unsigned)(hi - lo + 1));
}

/* ---- a minimal protobuf writer ------------------------------------------------------- */

typedef struct pb {
    uint8_t *v;
    size_t n, cap;
} pb;

static void pb_raw(pb *b, const void *p, size_t n) {
    if (b->cap - b->n < n) {
        while (b->cap - b->n < n) b->cap = b->cap ? b->cap * 2 : 256;
        b->v = realloc(b->v, b->cap);
        if (!b->v) abort();
    }
    if (n) memcpy(b->v + b->n, p, n);
    b->n += n;
}

static void pb_varint(pb *b, uint64_t x) {
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n] = (uint8_t)(x & 0x7f);
        x >>= 7;
        if (x) t[n] |= 0x80;
        n++;
    } while (x);
    pb_raw(b, t, n);
}

static void pb_int(pb *b, int field, int64_t x) {
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, (uint64_t)x);
}

static void pb_bytes(pb *b, int field, const void *p, size_t n) {
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_raw(b, p, n);
}

static void pb_str(pb *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

/* Embeds `sub` as field `field` and frees it. */
static void pb_msg(pb *b, int field, pb *sub) {
    pb_bytes(b, field, sub->v, sub->n);
    free(sub->v);
    memset(sub, 0, sizeof *sub);
}

static void pb_float(pb *b, int field, float f) {
    pb_varint(b, (uint64_t)field << 3 | 5);
    pb_raw(b, &f, 4); /* little-endian hosts only, like the runtime */
}

/* ---- the graph being built ------------------------------------------------------------ */

typedef struct graph_build {
    pb graph;
    char names[MAX_VALUES][16];
    int n_values;
    int n_init;
} graph_build;

static const char *new_value(graph_build *g, char prefix) {
    if (g->n_values == MAX_VALUES) return NULL;
    char *name = g->names[g->n_values++];
    snprintf(name, sizeof g->names[0], "%c%d", prefix, g->n_values);
    return name;
}

/* A TensorProto: float values (small integers and halves) or int64 values in [-2, 6]. */
static void tensor_proto(fuzz_recipe *r, pb *t, const char *name) {
    int is_int = take(r) & 1;
    int rank = (int)take_range(r, 0, 3);
    int64_t count = 1;
    for (int d = 0; d < rank; d++) {
        int64_t dim = take_range(r, 0, 4);
        pb_int(t, 1, dim);
        count *= dim;
    }
    pb_int(t, 2, is_int ? AK_ELEM_I64 : AK_ELEM_F32);
    if (name) pb_str(t, 8, name);
    pb raw = {0};
    for (int64_t i = 0; i < count; i++) {
        if (is_int) {
            int64_t x = take_range(r, -2, 6);
            pb_raw(&raw, &x, sizeof x);
        } else {
            float x = (float)((int)take(r) - 128) / 32.0f;
            pb_raw(&raw, &x, sizeof x);
        }
    }
    pb_bytes(t, 9, raw.v ? raw.v : (uint8_t *)"", raw.n);
    free(raw.v);
}

static const char *new_initializer(fuzz_recipe *r, graph_build *g) {
    const char *name = new_value(g, 'c');
    if (!name) return NULL;
    pb t = {0};
    tensor_proto(r, &t, name);
    pb_msg(&g->graph, 5, &t);
    g->n_init++;
    return name;
}

/* ---- attributes ------------------------------------------------------------------------ */

enum { A_FLOAT = 1, A_INT = 2, A_STRING = 3, A_TENSOR = 4, A_INTS = 7 };

static const struct {
    const char *name;
    int type;
} k_attrs[] = {
    {"axis", A_INT},        {"axes", A_INTS},         {"keepdims", A_INT},
    {"perm", A_INTS},       {"transA", A_INT},        {"transB", A_INT},
    {"alpha", A_FLOAT},     {"beta", A_FLOAT},        {"epsilon", A_FLOAT},
    {"kernel_shape", A_INTS}, {"strides", A_INTS},    {"dilations", A_INTS},
    {"pads", A_INTS},       {"group", A_INT},         {"to", A_INT},
    {"mode", A_STRING},     {"auto_pad", A_STRING},   {"split", A_INTS},
    {"num_outputs", A_INT}, {"value", A_TENSOR},      {"largest", A_INT},
    {"sorted", A_INT},      {"exclusive", A_INT},     {"reverse", A_INT},
    {"ceil_mode", A_INT},   {"count_include_pad", A_INT}, {"blocksize", A_INT},
    {"equation", A_STRING}, {"direction", A_STRING},  {"min", A_FLOAT},
    {"max", A_FLOAT},       {"starts", A_INTS},       {"ends", A_INTS},
    {"select_last_index", A_INT}, {"noop_with_empty_axes", A_INT}, {"upper", A_INT},
    {"p", A_INT},           {"size", A_INT},          {"bias", A_FLOAT},
    {"stash_type", A_INT},  {"allowzero", A_INT},     {"output_padding", A_INTS},
    {"coordinate_transformation_mode", A_STRING}, {"hidden_size", A_INT},
    {"shape", A_INTS},      {"batch_dims", A_INT},    {"seed", A_FLOAT},
};

static const char *const k_strings[] = {
    "constant", "reflect", "edge", "nearest", "linear", "cubic", "DCR", "CRD", "NOTSET",
    "SAME_UPPER", "SAME_LOWER", "VALID", "forward", "reverse", "bidirectional", "ij,jk->ik",
    "ii->i", "bij,bjk->bik", "i,i->", "...ij->...ji", "half_pixel", "asymmetric", "align_corners",
    "wrap", "",
};

static void attribute(fuzz_recipe *r, pb *node, unsigned which) {
    unsigned k = which % (sizeof k_attrs / sizeof *k_attrs);
    pb a = {0};
    pb_str(&a, 1, k_attrs[k].name);
    pb_int(&a, 20, k_attrs[k].type);
    switch (k_attrs[k].type) {
    case A_FLOAT: pb_float(&a, 2, (float)((int)take(r) - 64) / 16.0f); break;
    case A_INT:
        /* "to": an element type; others small, sometimes negative */
        pb_int(&a, 3, strcmp(k_attrs[k].name, "to") == 0 ? take_range(r, 0, 16) : take_range(r, -3, 6));
        break;
    case A_STRING:
        pb_str(&a, 4, k_strings[take(r) % (sizeof k_strings / sizeof *k_strings)]);
        break;
    case A_TENSOR: {
        pb t = {0};
        tensor_proto(r, &t, NULL);
        pb_msg(&a, 5, &t);
        break;
    }
    case A_INTS: {
        int n = (int)take_range(r, 0, 6);
        for (int i = 0; i < n; i++) pb_int(&a, 8, take_range(r, -2, 4));
        break;
    }
    }
    pb_msg(node, 5, &a);
}

/* ---- nodes -------------------------------------------------------------------------------- */

static const ak__op_def *const *const k_families[] = {
    ak__ops_elementwise, ak__ops_nn,  ak__ops_tensor, ak__ops_reduce,   ak__ops_norm,
    ak__ops_math,        ak__ops_rnn, ak__ops_fused,  ak__ops_sequence,
};

static const ak__op_def *k_ops[1024];
static size_t n_ops;

static void list_ops(void) {
    for (size_t f = 0; f < sizeof k_families / sizeof *k_families; f++)
        for (const ak__op_def *const *d = k_families[f]; *d && n_ops < 1024; d++) k_ops[n_ops++] = *d;
}

/* One node: an operator, 1-3 inputs (earlier values, new initializers or an omitted
 * optional one), 1-2 outputs, 0-3 attributes. */
static void node(fuzz_recipe *r, graph_build *g) {
    const ak__op_def *op = k_ops[(take(r) | take(r) << 8) % n_ops];
    pb n = {0};
    int n_in = (int)take_range(r, 1, 3);
    for (int i = 0; i < n_in; i++) {
        unsigned how = take(r);
        const char *in = NULL;
        if (how < 160 && g->n_values > 0) in = g->names[how % (unsigned)g->n_values];
        else if (how < 250) in = new_initializer(r, g);
        pb_str(&n, 1, in ? in : "");
    }
    int n_out = take(r) % 4 == 0 ? 2 : 1;
    for (int i = 0; i < n_out; i++) {
        const char *out = new_value(g, 'v');
        if (out) pb_str(&n, 2, out);
    }
    pb_str(&n, 4, op->op_type);
    if (op->domain[0]) pb_str(&n, 7, op->domain);
    int n_attr = (int)take_range(r, 0, 3);
    for (int i = 0; i < n_attr; i++) attribute(r, &n, take(r));
    pb_msg(&g->graph, 1, &n);
}

/* A graph input (or output, elem_type 0 = left to inference): name and tensor type. */
static void value_info(pb *graph, int field, const char *name, int elem, int rank, const int64_t *dims) {
    pb vi = {0}, type = {0}, tt = {0}, shape = {0};
    pb_str(&vi, 1, name);
    if (elem) {
        pb_int(&tt, 1, elem);
        for (int d = 0; d < rank; d++) {
            pb dim = {0};
            pb_int(&dim, 1, dims[d]);
            pb_msg(&shape, 1, &dim);
        }
        pb_msg(&tt, 2, &shape);
        pb_msg(&type, 1, &tt);
        pb_msg(&vi, 2, &type);
    }
    pb_msg(graph, field, &vi);
}

/* ---- feeding and checking ------------------------------------------------------------- */

typedef struct feed {
    int rank;
    int64_t dims[4];
    int elem;
    void *data;
} feed;

static void make_feed(fuzz_recipe *r, feed *f, int elem) {
    f->elem = elem;
    f->rank = (int)take_range(r, 0, 4);
    int64_t count = 1;
    for (int d = 0; d < f->rank; d++) count *= f->dims[d] = take_range(r, 1, 4);
    size_t esize = elem == AK_ELEM_I64 ? 8 : 4;
    f->data = calloc((size_t)count, esize);
    if (!f->data) abort();
    for (int64_t i = 0; i < count; i++) {
        if (elem == AK_ELEM_I64) ((int64_t *)f->data)[i] = take_range(r, 0, 3);
        else ((float *)f->data)[i] = (float)((int)take(r) - 128) / 32.0f;
    }
}

static void check_outputs(const ak_tensor *outs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t count = 1;
        if (outs[i].rank < 0) abort();
        for (int d = 0; d < outs[i].rank; d++) {
            if (outs[i].dims[d] < 0) abort();
            count *= (uint64_t)outs[i].dims[d];
        }
        size_t bytes = (size_t)count * ak_elem_type_size(outs[i].type);
        volatile uint8_t touch = 0;
        if (bytes && outs[i].type != AK_ELEM_STRING) touch = ((const uint8_t *)outs[i].data)[bytes - 1];
        (void)touch;
    }
}

static void run_session(const ak_model *m, fuzz_recipe *r, feed *feeds, int n_feeds) {
    ak_session_options o;
    ak_session_options_init(&o);
    o.threads = 1;
    unsigned flags = take(r);
    o.fold_constants = !(flags & 1);
    o.optimize = !(flags & 2);
    ak_session *s = NULL;
    if (ak_session_create(m, &o, &s) != AK_OK) {
        if (s) abort();
        fuzz_refused("session");
        return;
    }
    fuzz_accepted("session");
    const char *names[2] = {"X", "I"};
    ak_tensor in[2];
    for (int i = 0; i < n_feeds; i++)
        in[i] = (ak_tensor){(ak_elem_type)feeds[i].elem, feeds[i].rank, feeds[i].dims, feeds[i].data};
    ak_model_summary sum;
    if (ak_model_get_summary(m, &sum) != AK_OK) abort();
    ak_tensor outs[8];
    if (sum.num_outputs <= 8) {
        for (int run = 0; run < 2; run++) { /* the second run reuses the plan */
            ak_status st = ak_session_run(s, names, in, (size_t)n_feeds, NULL, outs, sum.num_outputs);
            if (st == AK_OK) check_outputs(outs, sum.num_outputs), fuzz_accepted("run");
            else {
                fuzz_refused("run");
                break;
            }
        }
    }
    ak_session_memory mem;
    if (ak_session_get_memory(s, &mem) != AK_OK) abort();
    ak_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!n_ops) { /* the first input, before the library reads its parameters */
        /* A recipe can ask for any shape through an operator's data (Expand,
         * ConstantOfShape, Tile, Range), and libFuzzer counts one allocation over its RSS
         * limit (2 GiB) as a finding. The library refuses one over AK_MAX_ALLOC_BYTES with
         * an error, the path worth fuzzing; 64 MiB keeps six such tensors under the limit. */
        setenv("AK_MAX_ALLOC_BYTES", "67108864", 0);
        /* accelkit's own kernels: timing each MatMul on every installed library (and
         * appending the times to the user's tuning cache) would only slow the fuzzer; the
         * backends' choice is tested by infer/test_backends */
        setenv("AK_INFER_BACKENDS", "own", 0);
        list_ops();
    }
    fuzz_recipe r = {data, size};
    graph_build g;
    memset(&g, 0, sizeof g);
    int64_t opset = take_range(&r, 11, 18); /* the opsets the loader reads (it refuses the rest) */
    feed feeds[2];
    int n_feeds = 1 + (int)(take(&r) & 1);
    for (int i = 0; i < n_feeds; i++) {
        make_feed(&r, &feeds[i], i == 0 ? AK_ELEM_F32 : AK_ELEM_I64);
        snprintf(g.names[g.n_values++], sizeof g.names[0], "%s", i == 0 ? "X" : "I");
        value_info(&g.graph, 11, g.names[i], feeds[i].elem, feeds[i].rank, feeds[i].dims);
    }
    int n_nodes = (int)take_range(&r, 1, MAX_NODES);
    for (int i = 0; i < n_nodes; i++) node(&r, &g);
    /* outputs: the last value made, and one more picked by the recipe */
    int last = g.n_values - 1, other = (int)(take(&r) % (unsigned)g.n_values);
    value_info(&g.graph, 12, g.names[last], 0, 0, NULL);
    if (other != last && g.names[other][0] == 'v') value_info(&g.graph, 12, g.names[other], 0, 0, NULL);
    pb_str(&g.graph, 2, "fuzz");

    pb model = {0}, opsets = {0};
    pb_int(&model, 1, 8); /* ir_version */
    pb_str(&opsets, 1, "");
    pb_int(&opsets, 2, opset);
    pb_msg(&model, 8, &opsets);
    static const char *const k_domains[] = {"com.microsoft", "com.accelkit"};
    for (int i = 0; i < 2; i++) { /* the fused operators' domains, so nodes may name them */
        pb_str(&opsets, 1, k_domains[i]);
        pb_int(&opsets, 2, 1);
        pb_msg(&model, 8, &opsets);
    }
    pb_msg(&model, 7, &g.graph);

    ak_model *m = NULL;
    ak_status st = ak_onnx_load_bytes(model.v, model.n, NULL, &m);
    if (st == AK_OK) run_session(m, &r, feeds, n_feeds);
    else if (m) abort();
    else fuzz_refused("model");
    ak_model_free(m);
    free(model.v);
    for (int i = 0; i < n_feeds; i++) free(feeds[i].data);
    return 0;
}
