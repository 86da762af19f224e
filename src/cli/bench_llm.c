/* `ak bench llm`: llama-bench-style figures of the engine on one model — prompt
 * processing (pp, tokens/s and % of the FMA peak), single-stream decode (tg, tokens/s and
 * % of the read-bandwidth bound measured in the same run) and batched decode of N
 * sequences (--seqs); `--concurrency N` measures a running server instead
 * (bench_llm_server.c). Medians of --reps runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/bench_llm_server.h"
#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_progress.h"
#include "core/check.h"
#include "cli/llm_cli.h"

typedef struct llm_bench_args {
    const char *model, *draft_path;
    long threads, pp, tg, seqs, reps, gamma;
    long prompt_tokens; /* of each --seqs sequence (not --mixed) */
    int json, kv_f32, mixed, mmap;
    int kv_type; /* --kv-type: 0 f32, 1 f16, 2 q8_0; -1 not given */
    long context; /* --context: the single-sequence decode starts after this many prompt tokens */
    const char *out; /* --out DIR: the results lines (bench_results.h) */
    ak_llm_model *draft; /* loaded from draft_path */
} llm_bench_args;

typedef struct llm_bench_result {
    double pp_tps, pp_gflops, tg_tps, seqs_tps, read_gbps, peak_gflops;
    double pp_peak_pct;  /* median over reps of prefill GFLOP/s ÷ the peak measured just before */
    double tg_bound_pct; /* median over reps of decode ÷ the bound measured just before it */
    double spec_tps, spec_speedup; /* --draft: speculative decode, median of per-run ratios */
    uint64_t spec_proposed, spec_accepted;
    double kv_util; /* live tokens / token slots of the blocks held, averaged over steps */
} llm_bench_result;

typedef struct step_counter {
    int32_t tokens;
    double util_sum;
    int64_t util_steps;
} step_counter;

static void count_event(void *user, const ak_llm_event *ev) {
    if (ev->token >= 0) ((step_counter *)user)->tokens++;
}

static ak_status make_engine(ak_llm_model *m, const llm_bench_args *a, int32_t seqs,
                             ak_llm_model *draft, ak_llm_engine **e) {
    ak_llm_engine_options o;
    ak_llm_engine_options_default(&o);
    o.draft = draft;
    o.spec_gamma = (int32_t)a->gamma;
    o.n_threads = (int32_t)a->threads;
    o.max_seqs = seqs;
    int32_t batch = (int32_t)(a->pp > seqs ? a->pp : seqs);
    o.max_batch_tokens = batch > 512 ? batch : 512;
    o.kv_dtype = a->kv_f32 || a->kv_type == 0 ? AK_DTYPE_F32 : AK_DTYPE_F16;
    o.kv_q8_0 = a->kv_type == 2;
    o.prefix_caching = 0; /* every run computes its prompt */
    return ak_llm_engine_create(m, &o, e);
}

/* --mixed: prompts of 8..263 tokens and completions of 16..max_tokens, spread evenly */
static ak_status submit_n(ak_llm_engine *e, int32_t n, int32_t n_prompt, int32_t max_tokens,
                          int mixed, step_counter *c) {
    int32_t *prompt = malloc((size_t)(n_prompt > 264 ? n_prompt : 264) * sizeof *prompt);
    if (!prompt) return AK_ERR_NO_MEMORY;
    ak_status st = AK_OK;
    for (int32_t k = 0; k < n && st == AK_OK; ++k) {
        int32_t len = mixed ? 8 + (k * 7919) % 256 : n_prompt;
        for (int32_t i = 0; i < len; ++i) prompt[i] = 1 + (k * 977 + i * 131) % 30000;
        ak_llm_request r;
        ak_llm_request_default(&r);
        r.prompt = prompt;
        r.n_prompt = (size_t)len;
        r.max_tokens = mixed && max_tokens > 16 ? 16 + (k * 104729) % (max_tokens - 15) : max_tokens;
        r.sampling.temperature = 0.0f;
        r.ignore_eos = 1;
        r.on_event = count_event;
        r.user = c;
        st = ak_llm_engine_submit(e, &r, NULL);
    }
    free(prompt);
    return st;
}

/* Seconds of the steps after the first `skip` ones, with the tokens they produced. */
static ak_status time_steps(ak_llm_engine *e, int skip, step_counter *c, double *secs,
                            int32_t *tokens) {
    int32_t pending = 1;
    for (int i = 0; i < skip && pending > 0; ++i) AK_CHECK(ak_llm_engine_step(e, &pending));
    int32_t before = c->tokens;
    uint64_t t0 = ak_now_ns();
    while (pending > 0) {
        AK_CHECK(ak_llm_engine_step(e, &pending));
        ak_llm_engine_stats s;
        ak_llm_engine_get_stats(e, &s);
        if (s.kv_token_slots_used > 0) {
            c->util_sum += (double)s.kv_tokens_live / (double)s.kv_token_slots_used;
            c->util_steps++;
        }
    }
    *secs = (double)(ak_now_ns() - t0) * 1e-9;
    *tokens = c->tokens - before;
    return AK_OK;
}

/* One prompt of a->pp tokens computed in one step of engine e (which has no prefix
 * caching, so every run computes it all); the request then runs out its one token. */
static ak_status run_pp(ak_llm_engine *e, const llm_bench_args *a, double *tps) {
    step_counter c = {0};
    AK_CHECK(submit_n(e, 1, (int32_t)a->pp, 1, 0, &c));
    uint64_t t0 = ak_now_ns();
    int32_t pending;
    AK_CHECK(ak_llm_engine_step(e, &pending)); /* the whole prompt in one step */
    *tps = (double)a->pp / ((double)(ak_now_ns() - t0) * 1e-9);
    while (pending > 0) AK_CHECK(ak_llm_engine_step(e, &pending));
    return AK_OK;
}

static double g_kv_util; /* of the last batched run */

static ak_status run_decode_with(ak_llm_model *m, const llm_bench_args *a, int32_t seqs,
                                 ak_llm_model *draft, double *tps, ak_llm_engine_stats *stats) {
    ak_llm_engine *e;
    AK_CHECK(make_engine(m, a, seqs, draft, &e));
    step_counter c = {0};
    double secs = 0;
    int32_t tokens = 0;
    int mixed = a->mixed && seqs > 1;
    int32_t prompt = seqs > 1 ? (int32_t)a->prompt_tokens : a->context > 0 ? (int32_t)a->context : 1;
    ak_status st = submit_n(e, seqs, prompt, (int32_t)a->tg, mixed, &c);
    /* one-token prompts: step 1 computes them all and is left out; longer prompts (and
     * mixed loads) are timed with their prefill chunks, as a server's clients see them;
     * --context: the prefill chunks are left out, so the decode at that depth is timed */
    int skip = mixed || prompt > 1 ? 0 : 1;
    if (seqs == 1 && a->context > 0) {
        int32_t batch = (int32_t)(a->pp > seqs ? a->pp : seqs);
        batch = batch > 512 ? batch : 512;
        skip = (prompt + batch - 1) / batch;
    }
    if (st == AK_OK) st = time_steps(e, skip, &c, &secs, &tokens);
    *tps = secs > 0 ? tokens / secs : 0;
    if (seqs > 1) g_kv_util = c.util_steps ? c.util_sum / (double)c.util_steps : 0;
    if (stats) ak_llm_engine_get_stats(e, stats);
    ak_llm_engine_free(e);
    return st;
}

static ak_status run_decode(ak_llm_model *m, const llm_bench_args *a, int32_t seqs, double *tps) {
    return run_decode_with(m, a, seqs, NULL, tps, NULL);
}

/* --draft: speculative against plain decoding, the two alternating so that both see the
 * same machine; the speed-up is the median of the per-pair ratios. */
static ak_status run_speculative(ak_llm_model *m, const llm_bench_args *a, llm_bench_result *r) {
    double spec[16], ratio[16];
    int reps = a->reps < 16 ? (int)a->reps : 16;
    for (int k = 0; k < reps; ++k) {
        double plain;
        ak_llm_engine_stats s;
        AK_CHECK(run_decode(m, a, 1, &plain));
        AK_CHECK(run_decode_with(m, a, 1, a->draft, &spec[k], &s));
        ratio[k] = plain > 0 ? spec[k] / plain : 0;
        r->spec_proposed += s.spec_proposed;
        r->spec_accepted += s.spec_accepted;
    }
    r->spec_tps = ak_cli_median(spec, (size_t)reps);
    r->spec_speedup = ak_cli_median(ratio, (size_t)reps);
    return AK_OK;
}

typedef ak_status (*bench_fn)(ak_llm_model *, const llm_bench_args *, int32_t, double *);

static ak_status median_of(bench_fn fn, ak_llm_model *m, const llm_bench_args *a, int32_t seqs,
                           double *out) {
    double v[16];
    int reps = a->reps < 16 ? (int)a->reps : 16;
    for (int r = 0; r < reps; ++r) AK_CHECK(fn(m, a, seqs, &v[r]));
    *out = ak_cli_median(v, (size_t)reps);
    return AK_OK;
}

/* FLOPs of a prefill of n tokens with logits for the last one only. */
static double prefill_flops(const ak_llm_model_info *i, double n) {
    double q = (double)i->n_heads * i->head_dim, kv = (double)i->n_kv_heads * i->head_dim;
    double layer = (double)i->dim * (q + 2 * kv) + q * i->dim + 3.0 * i->dim * i->ffn_dim;
    double attention = 2.0 * q * n * (n + 1) / 2.0; /* QKᵀ and PV over the causal half */
    return i->n_layers * (2.0 * n * layer + 2.0 * attention) + 2.0 * i->dim * i->n_vocab;
}

static ak_status measure_bandwidth(long threads, double *gbps) {
    ak_threadpool *pool;
    AK_CHECK(ak_threadpool_create((int)threads, &pool));
    ak_status st = ak_measure_read_bandwidth(512u << 20, pool, gbps);
    ak_threadpool_free(pool);
    return st;
}

static ak_status measure_machine(const llm_bench_args *a, llm_bench_result *r) {
    AK_CHECK(measure_bandwidth(a->threads, &r->read_gbps));
    AK_CHECK(ak_measure_fma_peak(200, &r->peak_gflops));
    r->peak_gflops *= (double)a->threads;
    return AK_OK;
}

/* Like the bandwidth (below), the FMA peak a VM gets drifts, so each prefill run is paired
 * with a peak measurement taken just before it. */
static ak_status run_pp_against_peak(ak_llm_model *m, const llm_bench_args *a,
                                     const ak_llm_model_info *info, llm_bench_result *r) {
    double tps[16], peak[16], pct[16];
    int reps = a->reps < 16 ? (int)a->reps : 16;
    double flops_per_token = prefill_flops(info, (double)a->pp) / (double)a->pp;
    ak_llm_engine *e;
    AK_CHECK(make_engine(m, a, 1, NULL, &e));
    ak_status st = run_pp(e, a, &tps[0]); /* warm-up: first touch of the buffers */
    for (int k = 0; k < reps && st == AK_OK; ++k) {
        st = ak_measure_fma_peak(100, &peak[k]);
        peak[k] *= (double)a->threads;
        if (st == AK_OK) st = run_pp(e, a, &tps[k]);
        pct[k] = 100 * tps[k] * flops_per_token * 1e-9 / peak[k];
    }
    ak_llm_engine_free(e);
    AK_CHECK(st);
    r->pp_tps = ak_cli_median(tps, (size_t)reps);
    r->pp_gflops = r->pp_tps * flops_per_token * 1e-9;
    r->peak_gflops = ak_cli_median(peak, (size_t)reps);
    r->pp_peak_pct = ak_cli_median(pct, (size_t)reps);
    return AK_OK;
}

/* The VM's memory bandwidth drifts by tens of percent within seconds, so every decode run
 * is paired with a bandwidth measurement taken just before it; the figure reported is the
 * median of the per-run ratios. */
static ak_status run_tg_against_bound(ak_llm_model *m, const llm_bench_args *a,
                                      const ak_llm_model_info *info, llm_bench_result *r) {
    double tps[16], gbps[16], pct[16];
    int reps = a->reps < 16 ? (int)a->reps : 16;
    for (int k = 0; k < reps; ++k) {
        AK_CHECK(measure_bandwidth(a->threads, &gbps[k]));
        AK_CHECK(run_decode(m, a, 1, &tps[k]));
        pct[k] = 100 * tps[k] / (gbps[k] * 1e9 / (double)info->weight_bytes);
    }
    r->tg_tps = ak_cli_median(tps, (size_t)reps);
    r->read_gbps = ak_cli_median(gbps, (size_t)reps);
    r->tg_bound_pct = ak_cli_median(pct, (size_t)reps);
    return AK_OK;
}

static int print_json(const llm_bench_args *a, const ak_llm_model_info *i,
                      const llm_bench_result *r, double bound) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "model", ak_cli_json_text(a->model));
    cJSON_AddStringToObject(o, "weights", ak_wtype_name((ak_wtype)i->weight_type));
    cJSON_AddNumberToObject(o, "threads", (double)a->threads);
    cJSON_AddNumberToObject(o, "weight_bytes", (double)i->weight_bytes);
    ak_cli_json_round(o, "read_gbps", r->read_gbps, 2);
    ak_cli_json_round(o, "fma_peak_gflops", r->peak_gflops, 1);
    cJSON_AddNumberToObject(o, "pp", (double)a->pp);
    ak_cli_json_round(o, "pp_tps", r->pp_tps, 1);
    ak_cli_json_round(o, "pp_gflops", r->pp_gflops, 1);
    ak_cli_json_round(o, "pp_peak_pct", r->pp_peak_pct, 1);
    cJSON_AddNumberToObject(o, "tg", (double)a->tg);
    ak_cli_json_round(o, "tg_tps", r->tg_tps, 2);
    ak_cli_json_round(o, "tg_bound_tps", bound, 2);
    ak_cli_json_round(o, "tg_bound_pct", r->tg_bound_pct, 1);
    cJSON_AddNumberToObject(o, "seqs", (double)a->seqs);
    ak_cli_json_round(o, "seqs_tps", r->seqs_tps, 1);
    cJSON_AddBoolToObject(o, "mixed", a->mixed);
    ak_cli_json_round(o, "kv_util_pct", 100 * r->kv_util, 1);
    cJSON_AddItemToObject(o, "draft", ak_cli_json_text(a->draft_path ? a->draft_path : ""));
    cJSON_AddNumberToObject(o, "gamma", (double)a->gamma);
    ak_cli_json_round(o, "spec_tps", r->spec_tps, 2);
    ak_cli_json_round(o, "spec_speedup", r->spec_speedup, 3);
    cJSON_AddNumberToObject(o, "spec_proposed", (double)r->spec_proposed);
    cJSON_AddNumberToObject(o, "spec_accepted", (double)r->spec_accepted);
    return ak_cli_print_json(o) ? AK_EXIT_ERROR : AK_EXIT_OK;
}

/* --draft: the llm.speculative line, speculative decoding against plain decoding of the
 * same model in the same run. */
static void record_speculative(ak__bench_out *out, const llm_bench_args *a,
                               const ak_llm_model_info *i, const llm_bench_result *r,
                               const char *model) {
    const char *draft = strrchr(a->draft_path, '/') ? strrchr(a->draft_path, '/') + 1 : a->draft_path;
    cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
    cJSON_AddItemToObject(params, "model", ak_cli_json_text(model));
    cJSON_AddStringToObject(params, "type", ak_wtype_name((ak_wtype)i->weight_type));
    cJSON_AddItemToObject(params, "draft", ak_cli_json_text(draft));
    cJSON_AddNumberToObject(params, "gamma", (double)a->gamma);
    cJSON_AddNumberToObject(params, "threads", (double)a->threads);
    cJSON_AddNumberToObject(params, "tokens", (double)a->tg);
    ak_cli_json_round(figures, "tokens_per_s", r->spec_tps, 2);
    ak_cli_json_round(figures, "plain_tokens_per_s", r->tg_tps, 2);
    ak_cli_json_round(figures, "speedup", r->spec_speedup, 3);
    cJSON_AddNumberToObject(figures, "drafts_proposed", (double)r->spec_proposed);
    cJSON_AddNumberToObject(figures, "drafts_accepted", (double)r->spec_accepted);
    ak__bench_out_add(out, "llm.speculative", NULL, NULL, params, figures);
}

/* One results line per phase measured: llm.prefill, llm.decode, llm.batched (and
 * llm.speculative with --draft). */
static int record_result(const llm_bench_args *a, const ak_llm_model_info *i,
                         const llm_bench_result *r, double bound) {
    ak__bench_out out;
    int rc = ak__bench_out_open(&out, a->out, "llm", 0, 0);
    if (rc || !out.file) return rc;
    const char *base = strrchr(a->model, '/') ? strrchr(a->model, '/') + 1 : a->model;
    for (int phase = 0; phase < 3; phase++) {
        if ((phase == 0 && a->pp <= 0) || (phase == 1 && a->tg <= 0) || (phase == 2 && a->seqs <= 1)) continue;
        cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
        cJSON_AddItemToObject(params, "model", ak_cli_json_text(base));
        cJSON_AddStringToObject(params, "type", ak_wtype_name((ak_wtype)i->weight_type));
        cJSON_AddNumberToObject(params, "threads", (double)a->threads);
        cJSON_AddNumberToObject(params, "tokens", (double)(phase == 0 ? a->pp : a->tg));
        if (phase == 0) {
            ak_cli_json_round(figures, "tokens_per_s", r->pp_tps, 1);
            ak_cli_json_round(figures, "gflops", r->pp_gflops, 1);
            ak_cli_json_round(figures, "pct_fma_peak", r->pp_peak_pct, 1);
        } else if (phase == 1) {
            ak_cli_json_round(figures, "tokens_per_s", r->tg_tps, 2);
            ak_cli_json_round(figures, "bound_tokens_per_s", bound, 2);
            ak_cli_json_round(figures, "pct_bandwidth", r->tg_bound_pct, 1);
        } else {
            cJSON_AddNumberToObject(params, "seqs", (double)a->seqs);
            ak_cli_json_round(figures, "tokens_per_s", r->seqs_tps, 1);
            ak_cli_json_round(figures, "kv_util_pct", 100 * r->kv_util, 1);
        }
        ak__bench_out_add(&out, phase == 0 ? "llm.prefill" : phase == 1 ? "llm.decode" : "llm.batched",
                          NULL, NULL, params, figures);
    }
    if (a->draft && a->tg > 0) record_speculative(&out, a, i, r, base);
    ak__bench_out_close(&out);
    return 0;
}

static int print_result(const llm_bench_args *a, const ak_llm_model_info *i,
                        const llm_bench_result *r) {
    double bound = r->read_gbps * 1e9 / (double)i->weight_bytes;
    int rc = record_result(a, i, r, bound);
    if (rc) return rc;
    if (a->json) return print_json(a, i, r, bound);
    printf("model %s (%s, %.1f M params, %.1f MB of weights read per token), %ld threads\n",
           a->model, ak_wtype_name((ak_wtype)i->weight_type), (double)i->n_params / 1e6,
           (double)i->weight_bytes / 1e6, a->threads);
    printf("machine: read bandwidth %.2f GB/s, FMA peak %.1f GFLOP/s\n", r->read_gbps, r->peak_gflops);
    if (a->pp > 0)
        printf("pp%-4ld %9.1f t/s  %7.1f GFLOP/s  %5.1f %% of the FMA peak (median of per-run "
               "ratios)\n", a->pp, r->pp_tps, r->pp_gflops, r->pp_peak_pct);
    if (a->tg > 0)
        printf("tg%-4ld %9.2f t/s  bound %.2f t/s  %5.1f %% of the bandwidth bound (median of "
               "per-run ratios)\n", a->tg, r->tg_tps, bound, r->tg_bound_pct);
    if (a->seqs > 1)
        printf("%ld seqs%s %7.1f t/s aggregate, KV memory held by live tokens %.1f %%\n", a->seqs,
               a->mixed ? " (mixed lengths)" : "", r->seqs_tps, 100 * r->kv_util);
    if (a->draft)
        printf("speculative (draft %s, gamma %ld) %7.2f t/s  %.2fx plain decode (median of "
               "paired runs), %llu/%llu drafts accepted\n", a->draft_path, a->gamma, r->spec_tps,
               r->spec_speedup, (unsigned long long)r->spec_accepted,
               (unsigned long long)r->spec_proposed);
    return AK_EXIT_OK;
}

static int bench(llm_bench_args *a) {
    ak_llm_model *m;
    ak_llm_load_options lo = {.mmap = a->mmap};
    ak_status st = ak_llm_model_load_with(a->model, &lo, &m);
    if (st != AK_OK) return ak_cli_report(a->model, st);
    if (a->draft_path && (st = ak_llm_model_load_with(a->draft_path, &lo, &a->draft)) != AK_OK) {
        ak_llm_model_free(m);
        return ak_cli_report(a->draft_path, st);
    }
    ak_llm_model_info info;
    ak_llm_model_get_info(m, &info);
    llm_bench_result r = {0};
    ak_cli_busy busy;
    ak_cli_busy_begin(&busy, "ak bench llm: measuring");
    st = measure_machine(a, &r);
    if (st == AK_OK && a->pp > 0) st = run_pp_against_peak(m, a, &info, &r);
    if (st == AK_OK && a->tg > 0) st = run_tg_against_bound(m, a, &info, &r);
    if (st == AK_OK && a->seqs > 1) st = median_of(run_decode, m, a, (int32_t)a->seqs, &r.seqs_tps);
    if (st == AK_OK && a->draft && a->tg > 0) st = run_speculative(m, a, &r);
    ak_cli_busy_end(&busy);
    r.kv_util = g_kv_util;
    ak_llm_model_free(m);
    ak_llm_model_free(a->draft);
    if (st != AK_OK) return ak_cli_report("bench llm", st);
    return print_result(a, &info, &r);
}

/* --url or --concurrency anywhere (also as --url=...): the server load test */
static int wants_server(int argc, char **argv) {
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; ++i)
        if (!strncmp(argv[i], "--url", 5) || !strncmp(argv[i], "--concurrency", 13)) return 1;
    return 0;
}

int ak_bench_llm(int argc, char **argv) {
    if (wants_server(argc, argv)) return ak_bench_llm_server(argc, argv);
    llm_bench_args a = {.threads = ak_cli_bench_threads(), .kv_type = -1};
    int first;
    const ak_opt opts[] = {
        {"model", 'm', AK_OPT_STRING, &a.model, "MODEL", .help = "GGUF file or Hugging Face folder (required)"},
        {"threads", 't', AK_OPT_INT, &a.threads, "N", .help = "threads (default: AK_NUM_THREADS, else 1)", .min = 1, .max = 256},
        {"prompt", 'p', AK_OPT_INT, &a.pp, "N", .help = "prompt tokens of the prefill run (0: none)", .def = "128", .min = 0, .max = 65536},
        {"gen", 'n', AK_OPT_INT, &a.tg, "N", .help = "tokens of the decode run (0: none)", .def = "64", .min = 0, .max = 65536},
        {"seqs", 0, AK_OPT_INT, &a.seqs, "N", .help = "also decode N sequences together (batched decode)", .def = "0", .min = 0, .max = 4096},
        {"prompt-tokens", 0, AK_OPT_INT, &a.prompt_tokens, "N", .help = "prompt of each --seqs sequence", .def = "1", .min = 1, .max = 65536},
        {"mixed", 0, AK_OPT_FLAG, &a.mixed, .help = "--seqs with mixed prompt and completion lengths"},
        {"reps", 0, AK_OPT_INT, &a.reps, "N", .help = "runs of each measurement (medians)", .def = "3", .min = 1, .max = 16},
        {"kv-f32", 0, AK_OPT_FLAG, &a.kv_f32, .help = "f32 KV cache (default: f16)"},
        {"context", 0, AK_OPT_INT, &a.context, "N", .help = "the decode run starts after an N-token prompt (long-context decode; 0: a 1-token prompt)", .def = "0", .min = 0, .max = 1 << 20},
        {"kv-type", 0, AK_OPT_ENUM, &a.kv_type, "TYPE", .choices = "f32|f16|q8_0", .help = "KV cache storage: f32, f16 (default) or q8_0 (ggml blocks, half of f16's bytes; head_dim a multiple of 32)"},
        {"mmap", 0, AK_OPT_FLAG, &a.mmap, .help = "map the weights instead of reading them"},
        {"draft", 0, AK_OPT_STRING, &a.draft_path, "MODEL", .help = "also time speculative decoding with this draft model"},
        {"gamma", 0, AK_OPT_INT, &a.gamma, "G", .help = "draft tokens per step", .def = "4", .min = 1, .max = 16},
        {"json", 0, AK_OPT_FLAG, &a.json, .help = "one JSON object instead of text"},
        {"out", 0, AK_OPT_STRING, &a.out, "DIR", .help = "append the results as JSON lines to DIR/llm.jsonl (none: do not)", .def = AK_BENCH_OUT_DEFAULT},
        AK_OPT_END};
    const ak_cli_cmd cmd = {
        .name = "bench llm", .opts = opts,
        .notes = "A running server instead: ak bench llm --url URL --concurrency N [options]\n"
                 "(ak bench llm --url URL --help lists its options)."};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    if (!a.model) return ak_cli_usage_error(&cmd, "-m MODEL is required");
    return bench(&a);
}
