/* `ak bench kernels`: SGEMM GFLOP/s and % of the measured FMA peak beside OpenBLAS and
 * BLIS (same run, alternating A B A B, medians), then GB/s of the reduction and
 * conversion kernels beside memcpy of the same size; `--only table` lists every kernel of
 * kernels/kernels.def with the symbol each variant this CPU runs uses for it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "cli/bench_peers.h"
#include "cli/cli.h"
#include "kernels/dispatch.h"

#define MAX_SHAPES 32
#define VEC_BYTES ((size_t)16 << 20)

typedef struct bench_opts {
    size_t shapes[MAX_SHAPES][3];
    int nshapes;
    int gemm, vec, convert, table; /* which sections run */
    int peers, quick, json, threads;
    /* internal: `--peer-child NAME --reps R [--check]` times a peer (see bench_peers.h) */
    const char *peer_child;
    int reps, check;
} bench_opts;

typedef struct bench_env {
    ak_threadpool *pool;
    double peak_gflops; /* one core */
    double memcpy_gbps;
    int peer_missing[PEER_COUNT]; /* not installed (or its child failed) */
    int first_row;                /* for JSON separators */
} bench_env;

static const size_t default_shapes[][3] = {
    {1024, 1024, 1024}, {128, 768, 768}, {128, 3072, 768}, {196, 256, 2304}, {49, 512, 4608},
};

static int parse_opts(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->gemm = o->vec = o->convert = o->peers = 1;
    o->threads = ak_cli_bench_threads();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--gemm") == 0 && i + 1 < argc) {
            if (o->nshapes == MAX_SHAPES || ak_cli_parse_shape3(argv[++i], o->shapes[o->nshapes])) {
                fprintf(stderr, "ak bench kernels: bad --gemm '%s' (want MxNxK)\n", argv[i]);
                return -1;
            }
            o->nshapes++;
        } else if (strcmp(a, "--only") == 0 && i + 1 < argc) {
            const char *w = argv[++i];
            o->gemm = strcmp(w, "gemm") == 0;
            o->vec = strcmp(w, "vec") == 0;
            o->convert = strcmp(w, "convert") == 0;
            o->table = strcmp(w, "table") == 0;
            if (!o->gemm && !o->vec && !o->convert && !o->table) {
                fprintf(stderr, "ak bench kernels: --only takes gemm, vec, convert or table\n");
                return -1;
            }
        } else if (strcmp(a, "--peer-child") == 0 && i + 1 < argc) {
            o->peer_child = argv[++i];
        } else if (strcmp(a, "--reps") == 0 && i + 1 < argc) {
            o->reps = atoi(argv[++i]);
        } else if (strcmp(a, "--check") == 0) {
            o->check = 1;
        } else if (strcmp(a, "--no-peers") == 0) o->peers = 0;
        else if (strcmp(a, "--quick") == 0) o->quick = 1;
        else if (strcmp(a, "--json") == 0) o->json = 1;
        else {
            fprintf(stderr, "ak bench kernels: unknown option '%s'\n", a);
            return -1;
        }
    }
    if (o->nshapes == 0) {
        o->nshapes = (int)(sizeof default_shapes / sizeof *default_shapes);
        memcpy(o->shapes, default_shapes, sizeof default_shapes);
    } else if (o->nshapes > 0 && !o->vec && !o->convert && !o->table) {
        o->gemm = 1;
    }
    return 0;
}

/* ---- GEMM ------------------------------------------------------------------------- */

typedef struct gemm_case {
    size_t M, N, K;
    const float *A, *B;
    float *C;
    ak_threadpool *pool;
} gemm_case;

static void gemm_once(const gemm_case *g) {
    ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, g->M, g->N, g->K, 1.0f, g->A, g->K, g->B, g->N, 0.0f,
             g->C, g->N, g->pool);
}

/* GFLOP/s of one timed batch of `reps` calls. */
static double gemm_batch(const gemm_case *g, int reps) {
    uint64_t t0 = ak_now_ns();
    for (int r = 0; r < reps; r++) gemm_once(g);
    double flop = 2.0 * (double)g->M * (double)g->N * (double)g->K * reps;
    return flop / (double)(ak_now_ns() - t0);
}

typedef struct gemm_result {
    double gflops, peer_gflops[PEER_COUNT], max_rel_err;
} gemm_result;

/* One peer batch in its child process; marks the peer missing or failed for the run. */
static double peer_round(bench_env *env, int p, const size_t shape[3], int reps, int check,
                         double *max_rel_err) {
    if (env->peer_missing[p]) return 0;
    peer_batch b;
    int rc = bench_peer_batch(p, shape, reps, check, &b);
    if (rc != 0) {
        if (rc < 0) fprintf(stderr, "ak bench kernels: %s child failed\n", bench_peer_names[p]);
        env->peer_missing[p] = 1;
        return 0;
    }
    if (check && b.max_rel_diff > *max_rel_err) *max_rel_err = b.max_rel_diff;
    return b.gflops;
}

static int gemm_measure(const bench_opts *o, bench_env *env, const size_t shape[3],
                        gemm_result *res) {
    size_t M = shape[0], N = shape[1], K = shape[2];
    float *A = NULL, *B = NULL, *C = NULL;
    if (ak_alloc(M * K * 4, (void **)&A) || ak_alloc(K * N * 4, (void **)&B) ||
        ak_alloc(M * N * 4, (void **)&C)) {
        ak_free(A), ak_free(B);
        return ak_cli_report("gemm buffers", AK_ERR_NO_MEMORY);
    }
    bench_fill_random(A, M * K, 1);
    bench_fill_random(B, K * N, 2);
    double flop = 2.0 * (double)M * N * K;
    int reps = (int)((o->quick ? 2e8 : 2e9) * o->threads / flop) + 1, rounds = o->quick ? 3 : 7;
    gemm_case ours = {M, N, K, A, B, C, env->pool};
    double mine[7], theirs[PEER_COUNT][7];
    res->max_rel_err = 0;
    gemm_once(&ours); /* warm-up: packing buffers, page faults */
    for (int r = 0; r < rounds; r++) { /* alternate A B A B so drift hits both alike */
        mine[r] = gemm_batch(&ours, reps);
        for (int p = 0; p < PEER_COUNT; p++)
            theirs[p][r] = o->peers ? peer_round(env, p, shape, reps, r == 0, &res->max_rel_err) : 0;
    }
    res->gflops = ak_cli_median(mine, (size_t)rounds);
    for (int p = 0; p < PEER_COUNT; p++)
        res->peer_gflops[p] = ak_cli_median(theirs[p], (size_t)rounds);
    ak_free(A), ak_free(B), ak_free(C);
    return 0;
}

static void gemm_print(const bench_opts *o, bench_env *env, const size_t s[3],
                       const gemm_result *r) {
    double pct = 100.0 * r->gflops / (env->peak_gflops * o->threads);
    const double ob = r->peer_gflops[PEER_OPENBLAS], bl = r->peer_gflops[PEER_BLIS];
    if (o->json) {
        printf("%s{\"section\":\"gemm\",\"m\":%zu,\"n\":%zu,\"k\":%zu,\"threads\":%d,"
               "\"gflops\":%.2f,\"pct_peak\":%.1f,\"openblas_gflops\":%.2f,\"blis_gflops\":%.2f,"
               "\"vs_openblas\":%.3f,\"vs_blis\":%.3f,\"max_rel_diff\":%.2e}",
               env->first_row ? "" : ",\n", s[0], s[1], s[2], o->threads, r->gflops, pct, ob, bl,
               ob > 0 ? r->gflops / ob : 0, bl > 0 ? r->gflops / bl : 0, r->max_rel_err);
        env->first_row = 0;
        return;
    }
    char shape[64];
    snprintf(shape, sizeof shape, "%zux%zux%zu", s[0], s[1], s[2]);
    printf("%-16s %9.1f %7.1f%% %9.1f %9.1f %8.3f %8.3f %10.1e\n", shape, r->gflops, pct, ob, bl,
           ob > 0 ? r->gflops / ob : 0, bl > 0 ? r->gflops / bl : 0, r->max_rel_err);
}

static int bench_gemm(const bench_opts *o, bench_env *env) {
    if (!o->json) {
        printf("\nSGEMM, row-major C = A·B, %d thread(s), median of alternating batches\n",
               o->threads);
        printf("%-16s %9s %8s %9s %9s %8s %8s %10s\n", "M×N×K", "GFLOP/s", "%peak",
               "OpenBLAS", "BLIS", "vs OB", "vs BLIS", "max rel Δ");
    }
    for (int i = 0; i < o->nshapes; i++) {
        gemm_result r = {0};
        if (gemm_measure(o, env, o->shapes[i], &r)) return AK_EXIT_ERROR;
        gemm_print(o, env, o->shapes[i], &r);
    }
    return AK_EXIT_OK;
}

/* ---- reductions and conversions ---------------------------------------------------- */

typedef enum vec_kind {
    VEC_ADD, VEC_ADD_INPLACE, VEC_AXPY, VEC_SUM, CONV_TO16, CONV_FROM16
} vec_kind;

typedef struct vec_case {
    const char *name;
    vec_kind kind;
    ak_dtype dtype;
    double traffic; /* bytes moved per byte of one operand buffer (reads + writes) */
} vec_case;

static const vec_case vec_cases[] = {
    {"f32 add a+b->c", VEC_ADD, AK_DTYPE_F32, 3},   {"f32 add a+=b", VEC_ADD_INPLACE, AK_DTYPE_F32, 3},
    {"f16 add a+b->c", VEC_ADD, AK_DTYPE_F16, 3},   {"f16 add a+=b", VEC_ADD_INPLACE, AK_DTYPE_F16, 3},
    {"bf16 add a+b->c", VEC_ADD, AK_DTYPE_BF16, 3}, {"bf16 add a+=b", VEC_ADD_INPLACE, AK_DTYPE_BF16, 3},
    {"f32 axpy", VEC_AXPY, AK_DTYPE_F32, 3},        {"f32 sum", VEC_SUM, AK_DTYPE_F32, 1},
    {"f16 sum", VEC_SUM, AK_DTYPE_F16, 1},          {"bf16 sum", VEC_SUM, AK_DTYPE_BF16, 1},
};

static const vec_case conv_cases[] = {
    /* 16 MiB of input: narrowing writes half of it, widening twice */
    {"f32->f16", CONV_TO16, AK_DTYPE_F16, 1.5},  {"f16->f32", CONV_FROM16, AK_DTYPE_F16, 3},
    {"f32->bf16", CONV_TO16, AK_DTYPE_BF16, 1.5}, {"bf16->f32", CONV_FROM16, AK_DTYPE_BF16, 3},
};

typedef struct vec_buffers {
    void *a, *b, *c;
} vec_buffers;

static void vec_run(const vec_case *v, const vec_buffers *buf, size_t bytes) {
    size_t esize;
    ak_dtype_size(v->dtype, &esize);
    size_t n = bytes / esize;
    double sum;
    switch (v->kind) {
    case VEC_ADD: ak_vec_add(v->dtype, buf->c, buf->a, buf->b, n); break;
    case VEC_ADD_INPLACE: ak_vec_add(v->dtype, buf->a, buf->a, buf->b, n); break;
    case VEC_AXPY: ak_vec_axpy(v->dtype, buf->a, 1e-3f, buf->b, n); break;
    case VEC_SUM: ak_vec_sum(v->dtype, buf->a, n, &sum); break;
    case CONV_TO16: /* `bytes` of f32 input */
        if (v->dtype == AK_DTYPE_F16) ak_f32_to_f16(buf->c, buf->a, bytes / 4);
        else ak_f32_to_bf16(buf->c, buf->a, bytes / 4);
        break;
    case CONV_FROM16: /* `bytes` of 16-bit input */
        if (v->dtype == AK_DTYPE_F16) ak_f16_to_f32(buf->c, buf->a, bytes / 2);
        else ak_bf16_to_f32(buf->c, buf->a, bytes / 2);
        break;
    }
}

/* Median GB/s of the kernel (traffic-weighted) and of memcpy, interleaved. */
static void vec_measure(const vec_case *v, const vec_buffers *buf, int rounds, double *gbps,
                        double *memcpy_gbps) {
    double mine[15], copy[15];
    vec_run(v, buf, VEC_BYTES); /* warm-up */
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = ak_now_ns();
        vec_run(v, buf, VEC_BYTES);
        uint64_t t1 = ak_now_ns();
        memcpy(buf->c, buf->b, VEC_BYTES);
        uint64_t t2 = ak_now_ns();
        mine[r] = v->traffic * VEC_BYTES / (double)(t1 - t0);
        copy[r] = 2.0 * VEC_BYTES / (double)(t2 - t1);
    }
    *gbps = ak_cli_median(mine, (size_t)rounds);
    *memcpy_gbps = ak_cli_median(copy, (size_t)rounds);
}

/* Conversions add their figure of merit, GB/s of input, beside the traffic figure. */
static void vec_print_row(const bench_opts *o, bench_env *env, const char *section,
                          const vec_case *v, double gbps, double copy_gbps) {
    int is_conv = v->kind == CONV_TO16 || v->kind == CONV_FROM16;
    double input_gbps = gbps / v->traffic;
    if (o->json) {
        printf("%s{\"section\":\"%s\",\"kernel\":\"%s\",\"bytes\":%zu,\"gbps\":%.2f,"
               "\"memcpy_gbps\":%.2f,\"pct_memcpy\":%.1f",
               env->first_row ? "" : ",\n", section, v->name, VEC_BYTES, gbps, copy_gbps,
               100.0 * gbps / copy_gbps);
        if (is_conv) printf(",\"input_gbps\":%.2f", input_gbps);
        printf("}");
        env->first_row = 0;
        return;
    }
    printf("%-18s %9.2f %9.2f %8.1f%%", v->name, gbps, copy_gbps, 100.0 * gbps / copy_gbps);
    if (is_conv) printf(" %11.2f", input_gbps);
    printf("\n");
}

static int bench_vec_section(const bench_opts *o, bench_env *env, const char *section,
                             const vec_case *cases, size_t ncases) {
    vec_buffers buf = {0};
    /* conversions write 2× the input for f16->f32, so c is twice as large */
    if (ak_alloc(VEC_BYTES, &buf.a) || ak_alloc(VEC_BYTES, &buf.b) ||
        ak_alloc(2 * VEC_BYTES, &buf.c)) {
        ak_free(buf.a), ak_free(buf.b);
        return ak_cli_report("vector buffers", AK_ERR_NO_MEMORY);
    }
    /* small values that stay finite in every format under repeated a += b */
    float *fa = buf.a, *fb = buf.b;
    bench_fill_random(fa, VEC_BYTES / 4, 3);
    bench_fill_random(fb, VEC_BYTES / 4, 4);
    for (size_t i = 0; i < VEC_BYTES / 4; i++) fb[i] *= 1e-6f;
    memset(buf.c, 0, 2 * VEC_BYTES);
    if (!o->json)
        printf("\n%s, one thread, 16 MiB operands; GB/s = bytes read + written per second\n"
               "%-18s %9s %9s %9s%s\n", section, "kernel", "GB/s", "memcpy", "%memcpy",
               cases[0].kind >= CONV_TO16 ? "  input GB/s" : "");
    for (size_t i = 0; i < ncases; i++) {
        double gbps, copy;
        vec_measure(&cases[i], &buf, o->quick ? 3 : 11, &gbps, &copy);
        vec_print_row(o, env, section, &cases[i], gbps, copy);
    }
    ak_free(buf.a), ak_free(buf.b), ak_free(buf.c);
    return AK_EXIT_OK;
}

/* ---- the kernel table ------------------------------------------------------------- */

/* One row per kernel of kernels.def: its checker, and per variant the CPU can run the
 * symbol that variant's table holds (its own or inherited); the active table first. */
static int bench_table(const bench_opts *o) {
    const ak__kernels *tables[AK__KERNEL_VARIANTS];
    for (int v = 0; v < AK__KERNEL_VARIANTS; v++)
        tables[v] = ak__kernels_for(ak__kernel_variants[v]);
    const ak__kernels *active = ak__kernels_active();
    if (o->json) {
        printf("{\"active\":\"%s\",\"kernels\":[\n", active->name);
        for (size_t i = 0; i < AK__KERNEL_COUNT_; i++) {
            const ak__kernel_info *k = &ak__kernel_list[i];
            printf("%s{\"kernel\":\"%s\",\"type\":\"%s\",\"elem\":\"%s\",\"check\":\"%s\"",
                   i ? ",\n" : "", k->name, k->type, k->elem, k->check);
            for (int v = 0; v < AK__KERNEL_VARIANTS; v++)
                if (tables[v])
                    printf(",\"%s\":\"%s\"", ak__kernel_variants[v], tables[v]->impl[i]);
            printf("}");
        }
        printf("\n]}\n");
        return AK_EXIT_OK;
    }
    printf("kernels/kernels.def: %d kernels, active table '%s'\n", AK__KERNEL_COUNT_,
           active->name);
    printf("%-18s %-10s", "kernel", "checker");
    for (int v = 0; v < AK__KERNEL_VARIANTS; v++)
        if (tables[v]) printf(" %-30s", ak__kernel_variants[v]);
    printf("\n");
    for (size_t i = 0; i < AK__KERNEL_COUNT_; i++) {
        printf("%-18s %-10s", ak__kernel_list[i].name, ak__kernel_list[i].check);
        for (int v = 0; v < AK__KERNEL_VARIANTS; v++)
            if (tables[v]) printf(" %-30s", tables[v]->impl[i]);
        printf("\n");
    }
    return AK_EXIT_OK;
}

/* ---- entry ------------------------------------------------------------------------ */

static int bench_setup(const bench_opts *o, bench_env *env) {
    ak_status st;
    memset(env, 0, sizeof *env);
    env->first_row = 1;
    if ((st = ak_threadpool_create(o->threads, &env->pool)) != AK_OK)
        return ak_cli_report("thread pool", st);
    if ((st = ak_measure_fma_peak(o->quick ? 50 : 300, &env->peak_gflops)) != AK_OK ||
        (st = ak_measure_memcpy(VEC_BYTES, &env->memcpy_gbps)) != AK_OK)
        return ak_cli_report("machine limits", st);
    ak_cpu_info cpu;
    ak_cpu_get_info(&cpu);
    if (o->json) {
        printf("{\"isa\":\"%s\",\"threads\":%d,\"fma_peak_gflops_per_core\":%.2f,"
               "\"memcpy_gbps\":%.2f,\"results\":[\n",
               ak_isa_name(cpu.active_isa), o->threads, env->peak_gflops, env->memcpy_gbps);
    } else {
        printf("accelkit kernels: isa %s, %d thread(s), FP32 FMA peak %.1f GFLOP/s per core, "
               "memcpy %.1f GB/s\n", ak_isa_name(cpu.active_isa), o->threads, env->peak_gflops,
               env->memcpy_gbps);
    }
    return AK_EXIT_OK;
}

int ak_bench_kernels(int argc, char **argv) {
    bench_opts o;
    bench_env env;
    if (parse_opts(argc, argv, &o)) return AK_EXIT_ERROR;
    if (o.peer_child)
        return bench_peer_child(o.peer_child, o.shapes[0], o.reps > 0 ? o.reps : 1, o.threads,
                                o.check);
    if (o.table) return bench_table(&o);
    int rc = bench_setup(&o, &env);
    if (rc == AK_EXIT_OK && o.gemm) rc = bench_gemm(&o, &env);
    if (rc == AK_EXIT_OK && o.vec)
        rc = bench_vec_section(&o, &env, "reductions", vec_cases,
                               sizeof vec_cases / sizeof *vec_cases);
    if (rc == AK_EXIT_OK && o.convert)
        rc = bench_vec_section(&o, &env, "conversions", conv_cases,
                               sizeof conv_cases / sizeof *conv_cases);
    if (o.json && rc == AK_EXIT_OK) printf("\n]}\n");
    ak_threadpool_free(env.pool);
    return rc;
}
