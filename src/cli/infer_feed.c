/* Inputs for `ak run`, `ak compare` and `ak bench MODEL` (see infer_feed.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/infer_feed.h"

int ak_feed_load_model(const char *path, ak_model **out) {
    ak_status st = ak_onnx_load_file(path, out);
    if (st != AK_OK) {
        ak_cli_report(path, st);
        return -1;
    }
    return 0;
}

int ak_feed_add_dim(ak_feed *f, const char *arg) {
    const char *eq = strchr(arg, '=');
    size_t v;
    if (!eq || eq == arg || ak_cli_parse_size(eq + 1, &v) || f->num_dim_values == 16) {
        ak_cli_error("--dim expects name=value, got '%s'", arg);
        return -1;
    }
    f->dim_values[f->num_dim_values].name = strndup(arg, (size_t)(eq - arg));
    f->dim_values[f->num_dim_values++].value = (int64_t)v;
    return 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Reads one tensor file and feeds it as `name` (NULL: the name inside the file). */
static int add_path(ak_feed *f, const char *name, const char *path) {
    if (f->n == AK_FEED_MAX) {
        ak_cli_error("more than %d inputs", AK_FEED_MAX);
        return -1;
    }
    ak_tensor_file *tf;
    ak_status st = ends_with(path, ".pb") ? ak_tensor_load_pb(path, &tf)
                                          : ak_tensor_load_npy(path, &tf);
    if (st != AK_OK) {
        ak_cli_report(path, st);
        return -1;
    }
    const char *inner;
    ak_tensor_file_get(tf, &inner, &f->tensors[f->n]);
    f->files[f->n] = tf;
    f->names[f->n] = strdup(name ? name : inner);
    f->n++;
    return 0;
}

int ak_feed_add_file(ak_feed *f, const char *arg) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        ak_cli_error("--input expects name=file.npy, got '%s'", arg);
        return -1;
    }
    char *name = strndup(arg, (size_t)(eq - arg));
    int rc = add_path(f, name, eq + 1);
    free(name);
    return rc;
}

/* The model's inputs, or its outputs when reading references ("output" prefix). */
typedef ak_status (*value_fn)(const ak_model *, size_t, ak_value_info *);

static size_t value_count(const ak_model *m, int outputs) {
    ak_model_summary sum;
    ak_model_get_summary(m, &sum);
    return outputs ? sum.num_outputs : sum.num_inputs;
}

static int add_numbered(ak_feed *f, const ak_model *m, const char *dir, const char *prefix,
                        value_fn value, size_t count) {
    for (size_t k = 0;; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s_%zu.pb", dir, prefix, k);
        if (access(path, F_OK) != 0) return 0;
        ak_value_info info;
        if (k >= count || value(m, k, &info) != AK_OK) {
            ak_cli_error("%s: the model has only %zu %ss", path, count, prefix);
            return -1;
        }
        if (add_path(f, info.name, path)) return -1;
    }
}

int ak_feed_add_dir(ak_feed *f, const ak_model *m, const char *dir, const char *prefix) {
    int outputs = strcmp(prefix, "output") == 0;
    value_fn value = outputs ? ak_model_output : ak_model_input;
    size_t count = value_count(m, outputs);
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/%s_0.pb", dir, prefix);
    if (access(probe, F_OK) == 0) return add_numbered(f, m, dir, prefix, value, count);
    for (size_t i = 0; i < count; i++) {
        ak_value_info info;
        value(m, i, &info);
        snprintf(probe, sizeof probe, "%s/%s.npy", dir, info.name);
        if (access(probe, F_OK) == 0 && add_path(f, info.name, probe)) return -1;
    }
    return 0;
}

static int fed(const ak_feed *f, const char *name) {
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0) return 1;
    return 0;
}

static int64_t dim_value(const ak_feed *f, const ak_value_info *v, int i) {
    if (v->dims[i] >= 0) return v->dims[i];
    for (size_t k = 0; v->dim_names[i] && k < f->num_dim_values; k++)
        if (strcmp(f->dim_values[k].name, v->dim_names[i]) == 0) return f->dim_values[k].value;
    return 1;
}

/* Uniform [-1, 1) floats, small non-negative integers (valid as ids or indices). */
static void fill(void *data, ak_elem_type type, size_t n, unsigned *state) {
    for (size_t i = 0; i < n; i++) {
        *state = *state * 1664525u + 1013904223u;
        double r = *state / 4294967296.0;
        switch (type) {
        case AK_ELEM_F32: ((float *)data)[i] = (float)(r * 2 - 1); break;
        case AK_ELEM_F64: ((double *)data)[i] = r * 2 - 1; break;
        case AK_ELEM_I64: ((int64_t *)data)[i] = (int64_t)(r * 100); break;
        case AK_ELEM_I32: ((int32_t *)data)[i] = (int32_t)(r * 100); break;
        case AK_ELEM_STRING: break; /* zeroed: empty strings */
        default: ((uint8_t *)data)[i * ak_elem_type_size(type)] = (uint8_t)(r * 2); break;
        }
    }
}

static int make_input(ak_feed *f, const ak_value_info *v, unsigned *state) {
    if (v->kind != AK_VALUE_TENSOR || !ak_elem_type_size(v->type) || v->rank < 0) {
        ak_cli_error("input '%s' has no declared tensor type and shape; feed it with "
                        "--input", v->name);
        return -1;
    }
    size_t n = 1, k = f->n;
    for (int i = 0; i < v->rank; i++) {
        f->dims[k][i] = dim_value(f, v, i);
        n *= (size_t)f->dims[k][i];
    }
    if (ak_alloc(n * ak_elem_type_size(v->type), &f->made[k]) != AK_OK) return -1;
    memset(f->made[k], 0, n * ak_elem_type_size(v->type));
    fill(f->made[k], v->type, n, state);
    f->tensors[k] = (ak_tensor){v->type, v->rank, f->dims[k], f->made[k]};
    f->names[k] = strdup(v->name);
    f->n++;
    return 0;
}

int ak_feed_fill_random(ak_feed *f, const ak_model *m, unsigned seed) {
    ak_model_summary sum;
    ak_model_get_summary(m, &sum);
    unsigned state = seed;
    for (size_t i = 0; i < sum.num_inputs; i++) {
        ak_value_info v;
        ak_model_input(m, i, &v);
        if (fed(f, v.name)) continue;
        if (f->n == AK_FEED_MAX || make_input(f, &v, &state)) return -1;
    }
    return 0;
}

void ak_feed_free(ak_feed *f) {
    for (size_t i = 0; i < f->n; i++) {
        ak_tensor_file_free(f->files[i]);
        ak_free(f->made[i]);
        free((char *)f->names[i]);
    }
    for (size_t k = 0; k < f->num_dim_values; k++) free((char *)f->dim_values[k].name);
    memset(f, 0, sizeof *f);
}
