/* Tests of ak_quantize_model's C API (src/infer/quantize/), run in the release and the
 * ASan+UBSan builds (the end-to-end checks against ONNX Runtime are
 * test_quantize_ort.py): bad options refused by name; libonnx-testdata's MatMul with its
 * B made an initializer, quantized static (calibrated on four samples) and dynamic, runs
 * and stays within a few quantization steps of the float product; a MatMul whose B is a
 * graph input is left in float and counted as skipped. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "accelkit/infer.h"
#include "infer/model.h"
#include "infer/onnx/onnx_write.h"

#define MATMUL "/usr/share/libonnx-testdata/data/node/test_matmul_2d/model.onnx"

static float B[12] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 0.1f, 1.5f, 0.3f, -2.0f, 0.6f, 0.9f, -0.4f};
static const int64_t A_DIMS[2] = {3, 4}, B_DIMS[2] = {4, 3};

static void temp_path(char *path) {
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

/* test_matmul_2d (a [3,4] x b [4,3]) with b an initializer holding B, written to path. */
static void write_const_b_model(const char *path) {
    ak_model *m;
    if (access(MATMUL, R_OK) != 0)
        fail_msg("%s is absent: install Debian's libonnx-testdata (scripts/setup)", MATMUL);
    assert_int_equal(ak_onnx_load_file(MATMUL, &m), AK_OK);
    ak__ir_graph *g = m->graph;
    int32_t b = ak__ir_value_find(g, "b");
    assert_true(b != AK_IR_NONE && g->num_inputs == 2 && g->inputs[1] == b);
    static ak__ir_tensor t = {AK_ELEM_F32, 2, B_DIMS, 12, sizeof B, B};
    g->values[b].flags = (g->values[b].flags & ~(uint32_t)AK_IR_VALUE_INPUT) | AK_IR_VALUE_CONST;
    g->values[b].constant = &t;
    g->num_inputs = 1;
    assert_int_equal(ak__onnx_write_file(m, NULL, path), AK_OK);
    ak_model_free(m);
}

static float sample(int k, int i) { return sinf(0.7f * (float)(k * 12 + i)) * (1.0f + 0.5f * k); }

/* The quantized model's product against the float one on sample 0; the largest error. */
static float max_error(const char *path) {
    float a[12], want[9];
    for (int i = 0; i < 12; i++) a[i] = sample(0, i);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            want[r * 3 + c] = 0;
            for (int k = 0; k < 4; k++) want[r * 3 + c] += a[r * 4 + k] * B[k * 3 + c];
        }
    ak_session *s;
    assert_int_equal(ak_session_create_from_file(path, NULL, &s), AK_OK);
    const char *name = "a";
    ak_tensor in = {AK_ELEM_F32, 2, A_DIMS, a}, out;
    assert_int_equal(ak_session_run(s, &name, &in, 1, NULL, &out, 1), AK_OK);
    assert_int_equal(out.type, AK_ELEM_F32);
    float err = 0;
    for (int i = 0; i < 9; i++) err = fmaxf(err, fabsf(((const float *)out.data)[i] - want[i]));
    ak_session_free(s);
    return err;
}

static void test_static_and_dynamic(void **state) {
    (void)state;
    char src[] = "/tmp/ak-test-quantize-src-XXXXXX", dst[] = "/tmp/ak-test-quantize-dst-XXXXXX";
    temp_path(src);
    temp_path(dst);
    write_const_b_model(src);
    float data[4][12];
    ak_tensor inputs[4];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 12; i++) data[k][i] = sample(k, i);
        inputs[k] = (ak_tensor){AK_ELEM_F32, 2, A_DIMS, data[k]};
    }
    const char *names[] = {"a"};
    for (int method = 0; method < 2; method++) {
        ak_quantize_options o;
        ak_quantize_options_init(&o);
        o.method = method ? AK_CALIBRATE_PERCENTILE : AK_CALIBRATE_MINMAX;
        o.num_samples = 4;
        o.num_inputs = 1;
        o.input_names = names;
        o.inputs = inputs;
        ak_quantize_report rep;
        assert_int_equal(ak_quantize_model(src, dst, &o, &rep), AK_OK);
        assert_int_equal(rep.quantized, 1);
        assert_int_equal(rep.calibrated, 1); /* a: the product is a graph output, kept float */
        /* |a| <= 2.5 over the samples: steps of ~0.02 on a and ~0.016 on B */
        assert_true(max_error(dst) < 0.3f);
    }
    ak_quantize_options o;
    ak_quantize_options_init(&o);
    o.dynamic = 1;
    o.per_channel = 1;
    ak_quantize_report rep;
    assert_int_equal(ak_quantize_model(src, dst, &o, &rep), AK_OK);
    assert_int_equal(rep.quantized, 1);
    assert_true(max_error(dst) < 0.1f);
    unlink(src);
    unlink(dst);
}

static void test_weight_not_constant(void **state) {
    (void)state;
    char dst[] = "/tmp/ak-test-quantize-dst-XXXXXX";
    temp_path(dst);
    ak_quantize_options o;
    ak_quantize_options_init(&o);
    o.dynamic = 1;
    ak_quantize_report rep;
    assert_int_equal(ak_quantize_model(MATMUL, dst, &o, &rep), AK_OK);
    assert_int_equal(rep.quantized, 0);
    assert_int_equal(rep.skipped, 1);
    unlink(dst);
}

static void refused(const ak_quantize_options *o, ak_status want, const char *msg) {
    assert_int_equal(ak_quantize_model(MATMUL, "/tmp/ak-test-quantize-never.onnx", o, NULL), want);
    if (!strstr(ak_last_error(), msg)) fail_msg("error '%s' lacks '%s'", ak_last_error(), msg);
    assert_int_equal(access("/tmp/ak-test-quantize-never.onnx", F_OK), -1);
}

static void test_bad_options(void **state) {
    (void)state;
    ak_quantize_options o;
    assert_int_equal(ak_quantize_model(MATMUL, "/tmp/x.onnx", NULL, NULL), AK_ERR_INVALID_ARG);
    ak_quantize_options_init(&o);
    refused(&o, AK_ERR_INVALID_ARG, "needs calibration samples");
    o.dynamic = 1;
    o.method = AK_CALIBRATE_PERCENTILE;
    o.percentile = 40;
    refused(&o, AK_ERR_INVALID_ARG, "percentile 40");
    ak_quantize_options_init(&o);
    o.dynamic = 1;
    const char *ops[] = {"MatMul", "Softmax"};
    o.op_types = ops;
    o.num_op_types = 2;
    refused(&o, AK_ERR_INVALID_ARG, "unknown op type 'Softmax'");
    ops[1] = "Conv";
    refused(&o, AK_ERR_UNSUPPORTED, "not Conv");
    ak_quantize_options_init(&o);
    o.dynamic = 1;
    const char *ex[] = {"nosuch"};
    o.exclude = ex;
    o.num_exclude = 1;
    refused(&o, AK_ERR_INVALID_ARG, "no node named 'nosuch'");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_and_dynamic),
        cmocka_unit_test(test_weight_not_constant),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
