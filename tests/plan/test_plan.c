/* Training planner against published results: Megatron-LM's Table 1 (Narayanan et al.
 * 2021: parameters, FLOPs, TFLOP/s per GPU), the ZeRO paper's memory example
 * (Rajbhandari et al. 2020), Korthikanti et al. 2022's activation formulas; plus the
 * search (beats the published plans, speed on a 1T model), mixed clusters, hybrid
 * recompute and the rejection of impossible inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/plan.h"

/* Narayanan et al. 2021, Table 1: GPT, V = 51200, s = 2048, A100-80GB, full recompute. */
typedef struct table1_row {
    const char *preset;
    double params_billion;
    int64_t heads, hidden, layers, tp, pp, gpus, batch;
    double tflops;
} table1_row;

static const table1_row TABLE1[] = {
    {"megatron-1.7b", 1.7, 24, 2304, 24, 1, 1, 32, 512, 137},
    {"megatron-3.6b", 3.6, 32, 3072, 30, 2, 1, 64, 512, 138},
    {"megatron-7.5b", 7.5, 32, 4096, 36, 4, 1, 128, 512, 142},
    {"megatron-18b", 18.4, 48, 6144, 40, 8, 1, 256, 1024, 135},
    {"megatron-39b", 39.1, 64, 8192, 48, 8, 2, 512, 1536, 138},
    {"megatron-76b", 76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140},
    {"megatron-145b", 145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148},
    {"megatron-310b", 310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155},
    {"megatron-530b", 529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163},
    {"megatron-1t", 1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163},
};
#define NROWS (sizeof(TABLE1) / sizeof(TABLE1[0]))

/* A model on `nodes` A100-80GB nodes with standard attention and a global batch. */
static void setup_a100(const char *model, int64_t nodes, int64_t gbs, ak_plan_model *m, ak_plan_cluster *c,
                       ak_plan_options *o) {
    assert_int_equal(ak_plan_model_load(model, m), AK_OK);
    assert_int_equal(ak_plan_cluster_load("a100-80gb", c), AK_OK);
    c->groups[0].nodes = nodes;
    ak_plan_options_default(o);
    o->global_batch = gbs;
    o->flash_attention = 0;
}

static void load_row(const table1_row *row, ak_plan_model *m, ak_plan_cluster *c, ak_plan_options *o) {
    /* 2021: attention scores materialized (no fused attention) */
    setup_a100(row->preset, row->gpus / 8, row->batch, m, c, o);
}

/* The published plan: (t, p, d, batch) forced, full recompute, no ZeRO or sequence
 * parallelism (not in Megatron-LM then); micro-batch and interleaving searched. */
static void published_constraint(const table1_row *row, ak_plan_config *want) {
    ak_plan_config_free_all(want);
    want->tp = row->tp;
    want->pp = row->pp;
    want->dp = row->gpus / (row->tp * row->pp);
    want->recompute = AK_PLAN_RECOMPUTE_FULL;
    want->zero_stage = 0;
    want->offload = AK_PLAN_OFFLOAD_NONE;
    want->sequence_parallel = 0;
}

static void best_plan(const ak_plan_model *m, const ak_plan_cluster *c, const ak_plan_options *o,
                      const ak_plan_config *want, ak_plan_result *best) {
    size_t n = 1;
    assert_int_equal(ak_plan_search(m, c, o, want, best, &n, NULL, NULL, NULL), AK_OK);
    assert_int_equal(n, 1);
}

static void test_table1_parameters_and_flops(void **state) {
    (void)state;
    for (size_t i = 0; i < NROWS; i++) {
        const table1_row *r = &TABLE1[i];
        ak_plan_model m;
        assert_int_equal(ak_plan_model_load(r->preset, &m), AK_OK);
        assert_int_equal(m.heads, r->heads);
        assert_int_equal(m.hidden, r->hidden);
        assert_int_equal(m.layers, r->layers);
        double params, l = (double)r->layers, h = (double)r->hidden, V = 51200, s = 2048;
        assert_int_equal(ak_plan_param_count(&m, &params), AK_OK);
        /* the paper's closed form: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)) */
        double closed = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
        assert_true(fabs(params / closed - 1) < 0.01);
        /* the table prints one decimal: ours must round to it */
        assert_true(fabs(params / 1e9 - r->params_billion) <= 0.05 + 1e-9);
        /* FLOPs with full recompute: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) */
        double model_flops, hw_flops, B = (double)r->batch;
        assert_int_equal(ak_plan_flops(&m, B, AK_PLAN_RECOMPUTE_FULL, 0, 0, &model_flops, &hw_flops), AK_OK);
        double paper = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
        assert_true(fabs(hw_flops / paper - 1) < 1e-9);
        assert_true(fabs(model_flops / (paper * 72.0 / 96.0) - 1) < 0.02); /* no recompute: 3 of 4 passes */
    }
}

static void test_table1_throughput_within_15_percent(void **state) {
    (void)state;
    for (size_t i = 0; i < NROWS; i++) {
        const table1_row *r = &TABLE1[i];
        ak_plan_model m;
        ak_plan_cluster c;
        ak_plan_options o;
        ak_plan_config want;
        ak_plan_result best;
        load_row(r, &m, &c, &o);
        published_constraint(r, &want);
        best_plan(&m, &c, &o, &want, &best);
        double ratio = best.tflops_per_device / r->tflops;
        print_message("%-14s t=%lld p=%lld d=%lld vp=%lld mbs=%lld: predicted %.1f TFLOP/s, published %.0f (%.3f)\n",
                      r->preset, (long long)best.config.tp, (long long)best.config.pp, (long long)best.config.dp,
                      (long long)best.config.vp, (long long)best.config.mbs, best.tflops_per_device, r->tflops, ratio);
        assert_true(ratio > 0.85 && ratio < 1.15);
        assert_true(best.fits);
        assert_true(best.hfu > best.mfu); /* recomputation is hardware work, not model work */
    }
}

static double breakdown_sum(const ak_plan_time *t) {
    return t->gemm + t->attention + t->elementwise + t->tp_comm + t->pp_bubble + t->pp_p2p + t->dp_comm +
           t->zero_comm + t->offload + t->optimizer;
}

static void test_search_beats_published_plans(void **state) {
    (void)state;
    for (size_t i = 0; i < NROWS; i++) {
        ak_plan_model m;
        ak_plan_cluster c;
        ak_plan_options o;
        ak_plan_config want, any;
        ak_plan_result published, best;
        load_row(&TABLE1[i], &m, &c, &o);
        published_constraint(&TABLE1[i], &want);
        best_plan(&m, &c, &o, &want, &published);
        ak_plan_config_free_all(&any);
        best_plan(&m, &c, &o, &any, &best);
        assert_true(best.time_per_iter_s <= published.time_per_iter_s * (1 + 1e-12));
        /* the breakdown explains the time: its parts add up to it */
        assert_true(fabs(breakdown_sum(&best.time) - best.time_per_iter_s) < 1e-9 * best.time_per_iter_s);
        assert_true(fabs(breakdown_sum(&published.time) - published.time_per_iter_s) < 1e-9 * published.time_per_iter_s);
    }
}

/* Korthikanti et al. 2022 (abstract): the 530B model on 2240 A100s reaches 42.1 % MFU with
 * full recomputation and 54.2 % with sequence parallelism + selective recomputation
 * (t = 8, p = 35 as in their Table 3). The global batch is not in the abstract: 2240 is
 * assumed (predictions move < 5 % between 1120 and 2240). */
static void test_korthikanti_530b_mfu(void **state) {
    (void)state;
    ak_plan_model m;
    ak_plan_cluster c;
    ak_plan_options o;
    ak_plan_config want;
    ak_plan_result full, selective;
    setup_a100("megatron-530b", 280, 2240, &m, &c, &o);
    ak_plan_config_free_all(&want);
    want.tp = 8, want.pp = 35, want.dp = 8, want.zero_stage = 0, want.offload = AK_PLAN_OFFLOAD_NONE;
    want.recompute = AK_PLAN_RECOMPUTE_FULL, want.sequence_parallel = 0;
    best_plan(&m, &c, &o, &want, &full);
    want.recompute = AK_PLAN_RECOMPUTE_SELECTIVE, want.sequence_parallel = 1;
    best_plan(&m, &c, &o, &want, &selective);
    print_message("530B on 2240 A100: MFU full %.3f (paper 0.421), selective+SP %.3f (paper 0.542)\n", full.mfu,
                  selective.mfu);
    assert_true(fabs(full.mfu / 0.421 - 1) < 0.15);
    assert_true(fabs(selective.mfu / 0.542 - 1) < 0.15);
    assert_true(selective.time_per_iter_s < full.time_per_iter_s);
}

static void test_zero_paper_example(void **state) {
    (void)state;
    /* Rajbhandari et al. 2020, Figure 1: 7.5 B parameters, 64 data-parallel devices */
    const double expected_gb[4] = {120.0, 31.4, 16.6, 1.9};
    for (int stage = 0; stage < 4; stage++) {
        double bytes;
        assert_int_equal(ak_plan_zero_model_state_bytes(7.5e9, 64, stage, &bytes), AK_OK);
        assert_true(fabs(round(bytes / 1e8) / 10.0 - expected_gb[stage]) < 1e-9);
    }
    double bytes;
    assert_int_equal(ak_plan_zero_model_state_bytes(7.5e9, 64, 4, &bytes), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_plan_zero_model_state_bytes(-1, 64, 1, &bytes), AK_ERR_INVALID_ARG);
}

static void test_korthikanti_activations(void **state) {
    (void)state;
    ak_plan_model m;
    assert_int_equal(ak_plan_model_load("megatron-18b", &m), AK_OK);
    double s = 2048, b = 2, h = 6144, a = 48, t = 8, bytes;
    double sbh = s * b * h, attn = 5 * a * s / h;
#define ACT(tp_, sp_, rc_) (assert_int_equal(ak_plan_layer_activation_bytes(&m, 2, tp_, sp_, rc_, 0, &bytes), AK_OK), bytes)
    assert_true(fabs(ACT(1, 0, AK_PLAN_RECOMPUTE_NONE) - sbh * (34 + attn)) < 1e-6 * bytes);
    assert_true(fabs(ACT(8, 0, AK_PLAN_RECOMPUTE_NONE) - sbh * (10 + 24 / t + attn / t)) < 1e-6 * bytes);
    assert_true(fabs(ACT(8, 1, AK_PLAN_RECOMPUTE_NONE) - sbh / t * (34 + attn)) < 1e-6 * bytes);
    assert_true(fabs(ACT(8, 1, AK_PLAN_RECOMPUTE_SELECTIVE) - sbh * 34 / t) < 1e-6 * bytes);
    assert_true(fabs(ACT(8, 0, AK_PLAN_RECOMPUTE_SELECTIVE) - sbh * (10 + 24 / t)) < 1e-6 * bytes);
    assert_true(fabs(ACT(8, 0, AK_PLAN_RECOMPUTE_FULL) - 2 * sbh) < 1e-6 * bytes);
    assert_true(fabs(ACT(8, 1, AK_PLAN_RECOMPUTE_FULL) - 2 * sbh / t) < 1e-6 * bytes);
#undef ACT
    assert_int_equal(ak_plan_layer_activation_bytes(&m, 2, 8, 1, AK_PLAN_RECOMPUTE_HYBRID, 0, &bytes),
                     AK_ERR_INVALID_ARG);
}

static void test_full_search_1t_is_fast(void **state) {
    (void)state;
    ak_plan_model m;
    ak_plan_cluster c;
    ak_plan_options o;
    ak_plan_config any;
    ak_plan_result best[10];
    size_t n = 10;
    ak_plan_search_stats st;
    load_row(&TABLE1[NROWS - 1], &m, &c, &o);
    o.flash_attention = 1;
    ak_plan_config_free_all(&any);
    assert_int_equal(ak_plan_search(&m, &c, &o, &any, best, &n, &st, NULL, NULL), AK_OK);
    print_message("1T on 3072 devices: %llu plans evaluated (%llu fit, %llu kept) in %.3f s\n",
                  (unsigned long long)st.evaluated, (unsigned long long)st.feasible, (unsigned long long)st.kept,
                  st.seconds);
    assert_true(st.seconds < 5.0);
    assert_true(st.evaluated > 1000);
    assert_int_equal(n, 10);
    for (size_t i = 1; i < n; i++) assert_true(best[i - 1].time_per_iter_s <= best[i].time_per_iter_s);
    for (size_t i = 0; i < n; i++) assert_true(best[i].fits && best[i].memory.total <= c.groups[0].memory_bytes);
}

static void test_presets(void **state) {
    (void)state;
    struct { const char *name; double billions; } known[] = {
        {"gpt3-175b", 175.0}, {"llama2-7b", 6.74}, {"llama2-13b", 13.0}, {"llama2-70b", 69.0},
        {"llama3-8b", 8.03}, {"llama3-70b", 70.6}, {"llama3-405b", 405.9}, {"mixtral-8x7b", 46.7}};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        ak_plan_model m;
        double p;
        assert_int_equal(ak_plan_model_load(known[i].name, &m), AK_OK);
        assert_string_equal(m.name, known[i].name);
        assert_int_equal(ak_plan_param_count(&m, &p), AK_OK);
        assert_true(fabs(p / 1e9 / known[i].billions - 1) < 0.01);
    }
    const char *name;
    size_t nclusters = 0;
    for (; ak_plan_preset_name("clusters", nclusters, &name) == AK_OK; nclusters++) {
        ak_plan_cluster c;
        assert_int_equal(ak_plan_cluster_load(name, &c), AK_OK);
        assert_string_equal(c.name, name);
    }
    assert_true(nclusters >= 7); /* A100-40/80, A800, H100, H800, H200, a mixed one */
}

static void test_mixed_cluster_balances_layers(void **state) {
    (void)state;
    ak_plan_model m;
    ak_plan_cluster c;
    ak_plan_options o;
    ak_plan_config any;
    ak_plan_result best;
    assert_int_equal(ak_plan_model_load("llama2-70b", &m), AK_OK);
    assert_int_equal(ak_plan_cluster_load("mixed-a100-h100", &c), AK_OK);
    assert_int_equal(c.ngroups, 2);
    assert_true(c.groups[1].peak_flops > 3 * c.groups[0].peak_flops);
    ak_plan_options_default(&o);
    o.global_batch = 1024;
    ak_plan_config_free_all(&any);
    any.pp = 4; /* two stages on each device type */
    best_plan(&m, &c, &o, &any, &best);
    const ak_plan_config *cfg = &best.config;
    assert_int_equal(cfg->group_stages[0] * cfg->group_stage_layers[0] + cfg->group_stages[1] * cfg->group_stage_layers[1],
                     m.layers);
    assert_true(cfg->group_stage_layers[1] > 2 * cfg->group_stage_layers[0]); /* H100 stages take more */
    assert_true(best.fits);
}

static void test_hybrid_recompute_trades_memory_for_time(void **state) {
    (void)state;
    ak_plan_model m;
    ak_plan_cluster c;
    ak_plan_options o;
    setup_a100("megatron-18b", 4, 256, &m, &c, &o);
    ak_plan_config cfg = {.tp = 8, .pp = 4, .dp = 1, .vp = 1, .mbs = 1, .recompute = AK_PLAN_RECOMPUTE_HYBRID};
    double last_mem = INFINITY, last_time = 0;
    for (int64_t k = 1; k < 10; k++) {
        ak_plan_result r;
        cfg.recompute_layers = k;
        assert_int_equal(ak_plan_evaluate(&m, &c, &o, &cfg, &r), AK_OK);
        assert_true(r.memory.activations < last_mem && r.time_per_iter_s > last_time);
        last_mem = r.memory.activations, last_time = r.time_per_iter_s;
    }
    cfg.recompute_layers = 10; /* = layers per stage: that is full recompute */
    ak_plan_result r;
    assert_int_equal(ak_plan_evaluate(&m, &c, &o, &cfg, &r), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "hybrid"));
}

static void test_mfu_from_throughput(void **state) {
    (void)state;
    const table1_row *r = &TABLE1[NROWS - 1];
    ak_plan_model m;
    ak_plan_cluster c;
    assert_int_equal(ak_plan_model_load(r->preset, &m), AK_OK);
    assert_int_equal(ak_plan_cluster_load("a100-80gb", &c), AK_OK);
    double model_flops, hw_flops, mfu, hfu;
    assert_int_equal(ak_plan_flops(&m, 1, AK_PLAN_RECOMPUTE_FULL, 0, 0, &model_flops, &hw_flops), AK_OK);
    double tokens_per_s = r->tflops * 1e12 * (double)r->gpus / (hw_flops / 2048.0);
    assert_int_equal(ak_plan_mfu(&m, &c, r->gpus, tokens_per_s, AK_PLAN_RECOMPUTE_FULL, 0, &mfu, &hfu), AK_OK);
    assert_true(fabs(hfu - 163.0 / 312.0) < 1e-9);
    assert_true(fabs(mfu / hfu - model_flops / hw_flops) < 1e-12);
    assert_int_equal(ak_plan_mfu(&m, &c, 0, tokens_per_s, AK_PLAN_RECOMPUTE_FULL, 0, &mfu, &hfu), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_plan_mfu(&m, &c, 8, -5, AK_PLAN_RECOMPUTE_FULL, 0, &mfu, &hfu), AK_ERR_INVALID_ARG);
}

/* Each bad description fails with AK_ERR_INVALID_ARG and a message naming the problem. */
static void expect_model_error(const char *json, const char *needle) {
    ak_plan_model m;
    assert_int_equal(ak_plan_model_from_json(json, &m), AK_ERR_INVALID_ARG);
    if (!strstr(ak_last_error(), needle)) fail_msg("'%s' lacks '%s'", ak_last_error(), needle);
}

static void test_impossible_inputs(void **state) {
    (void)state;
    const char *base = "\"hidden\":64,\"heads\":8,\"vocab\":100,\"seq_len\":32";
    char json[256];
    snprintf(json, sizeof(json), "{\"layers\":0,%s}", base);
    expect_model_error(json, "layers must be");
    expect_model_error("{\"layers\":2,\"hidden\":64,\"heads\":6,\"vocab\":100,\"seq_len\":32}", "must divide hidden");
    expect_model_error("{\"layers\":2,\"hidden\":-64,\"heads\":8,\"vocab\":100,\"seq_len\":32}", "hidden must be");
    expect_model_error("{\"layers\":2.5,\"hidden\":64,\"heads\":8,\"vocab\":100,\"seq_len\":32}", "whole number");
    snprintf(json, sizeof(json), "{\"layers\":2,\"hiden\":3,%s}", base);
    expect_model_error(json, "unknown key \"hiden\"");
    expect_model_error("{\"layers\":2,\"heads\":8}", "missing \"hidden\"");
    expect_model_error("{\"layers\": 2,", "invalid JSON");
    expect_model_error("[1,2]", "must be an object");
    snprintf(json, sizeof(json), "{\"layers\":2,\"norm\":\"batchnorm\",%s}", base);
    expect_model_error(json, "bad \"norm\"");

    ak_plan_model m;
    ak_plan_cluster c;
    assert_int_equal(ak_plan_model_load("gpt-5", &m), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "unknown model preset 'gpt-5'"));
    assert_int_equal(ak_plan_cluster_load("tpu-v9", &c), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "unknown cluster preset"));
    assert_int_equal(ak_plan_cluster_from_json("{\"preset\":\"h100\",\"nodes\":-2}", &c), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "nodes must be"));
    assert_int_equal(ak_plan_cluster_from_json("{\"preset\":\"h100\",\"gemm_efficiency\":1.5}", &c), AK_ERR_INVALID_ARG);

    /* impossible plans name the broken rule */
    ak_plan_options o;
    ak_plan_result r;
    setup_a100("megatron-1.7b", 1, 64, &m, &c, &o);
    ak_plan_config cfg = {.tp = 8, .pp = 1, .dp = 1, .vp = 1, .mbs = 1};
    assert_int_equal(ak_plan_evaluate(&m, &c, &o, &cfg, &r), AK_OK);
    cfg.tp = 16, cfg.dp = 1;
    assert_int_equal(ak_plan_evaluate(&m, &c, &o, &cfg, &r), AK_ERR_INVALID_ARG);
    cfg = (ak_plan_config){.tp = 4, .pp = 1, .dp = 2, .vp = 1, .mbs = 3};
    assert_int_equal(ak_plan_evaluate(&m, &c, &o, &cfg, &r), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "not a multiple of dp x mbs"));
    cfg = (ak_plan_config){.tp = 1, .pp = 2, .dp = 4, .vp = 1, .mbs = 1, .zero_stage = 2};
    assert_int_equal(ak_plan_evaluate(&m, &c, &o, &cfg, &r), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "ZeRO stage 2 needs pp=1"));
    o.global_batch = 0;
    cfg = (ak_plan_config){.tp = 8, .pp = 1, .dp = 1, .vp = 1, .mbs = 1};
    assert_int_equal(ak_plan_evaluate(&m, &c, &o, &cfg, &r), AK_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table1_parameters_and_flops),
        cmocka_unit_test(test_table1_throughput_within_15_percent),
        cmocka_unit_test(test_search_beats_published_plans),
        cmocka_unit_test(test_korthikanti_530b_mfu),
        cmocka_unit_test(test_zero_paper_example),
        cmocka_unit_test(test_korthikanti_activations),
        cmocka_unit_test(test_full_search_1t_is_fast),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_mixed_cluster_balances_layers),
        cmocka_unit_test(test_hybrid_recompute_trades_memory_for_time),
        cmocka_unit_test(test_mfu_from_throughput),
        cmocka_unit_test(test_impossible_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
