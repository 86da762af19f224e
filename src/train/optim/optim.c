/* ak_optim_step: argument checks, the per-step constants, the choice of kernel variant
 * and the block driver that spreads one step over the global thread pool.
 *
 * The buffer is cut into blocks whose size depends only on n, and LAMB adds its
 * per-block partial norms in block order, so a step gives the same bits for any
 * AK_NUM_THREADS. LAMB runs in two phases (moments and norms, then the trust-ratio
 * update), each one pass over its buffers. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/check.h"
#include "core/init.h"
#include "kernels/api_check.h"
#include "kernels/dispatch.h"
#include "train/optim/optim_internal.h"

/* Blocks hold at least BLOCK_MIN elements (a block of Adam moves ~460 KB, well above a
 * pool hand-off) and there are at most MAX_BLOCKS of them (LAMB's partial sums live on
 * the stack). */
#define BLOCK_MIN ((size_t)16384)
#define MAX_BLOCKS ((size_t)512)

static const char *kind_name(ak_optim_kind kind) {
    switch (kind) {
    case AK_OPTIM_SGD: return "SGD";
    case AK_OPTIM_ADAM: return "Adam";
    case AK_OPTIM_ADAMW: return "AdamW";
    case AK_OPTIM_LAMB: return "LAMB";
    }
    return "unknown";
}

/* ---- variants ----------------------------------------------------------------------- */

/* One view per kernel table, named by the variant whose optimizer loops it runs (the
 * suffix of its Adam symbol: generic runs ref's, avx512 avx2's). */
static ak__optim_kernels views[AK__KERNEL_VARIANTS];
static const ak__kernels *view_tables[AK__KERNEL_VARIANTS];
static pthread_once_t views_once = PTHREAD_ONCE_INIT;

static void build_views(void) {
    for (int v = 0; v < AK__KERNEL_VARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(ak__kernel_variants[v]);
        if (!k) continue;
        const char *suffix = strstr(k->impl[AK__KERNEL_f32_adam], "__");
        views[v] = (ak__optim_kernels){.name = suffix ? suffix + 2 : k->name,
                                       .sgd = k->f32_sgd,
                                       .adam = k->f32_adam,
                                       .lamb_moments = k->f32_lamb_moments,
                                       .lamb_apply = k->f32_lamb_apply};
        view_tables[v] = k;
    }
}

const ak__optim_kernels *ak__optim_kernels_for(const char *variant) {
    pthread_once(&views_once, build_views);
    for (int v = 0; v < AK__KERNEL_VARIANTS; v++)
        if (view_tables[v] && variant && strcmp(ak__kernel_variants[v], variant) == 0)
            return &views[v];
    return NULL;
}

/* Follows the active kernel table, so AK_ISA=generic and AK_KERNELS=ref give the scalar
 * reference here too. */
const ak__optim_kernels *ak__optim_kernels_active(void) {
    return ak__optim_kernels_for(ak__kernels_active()->name);
}

/* ---- configuration ------------------------------------------------------------------ */

static int finite_nonneg(float x) { return isfinite(x) && x >= 0.0f; }

static ak_status check_config(const ak_optim_config *cfg, int64_t step) {
    AK_ARG_CHECK(cfg, "ak_optim_step: cfg is NULL");
    AK_ARG_CHECK(cfg->struct_size == sizeof(ak_optim_config),
                 "ak_optim_config.struct_size is %u, expected %zu (initialize with "
                 "AK_OPTIM_CONFIG_INIT)", (unsigned)cfg->struct_size, sizeof(ak_optim_config));
    AK_ARG_CHECK((unsigned)cfg->kind <= AK_OPTIM_LAMB,
                 "ak_optim_step: unknown optimizer kind %d (AK_OPTIM_SGD, AK_OPTIM_ADAM, "
                 "AK_OPTIM_ADAMW or AK_OPTIM_LAMB)", (int)cfg->kind);
    const char *name = kind_name(cfg->kind);
    AK_ARG_CHECK(step >= 1, "ak_optim_step: step = %lld, steps count from 1", (long long)step);
    AK_ARG_CHECK(finite_nonneg(cfg->lr), "ak_optim_step: %s lr = %g must be finite and >= 0",
                 name, (double)cfg->lr);
    AK_ARG_CHECK(finite_nonneg(cfg->weight_decay),
                 "ak_optim_step: %s weight_decay = %g must be finite and >= 0", name,
                 (double)cfg->weight_decay);
    AK_ARG_CHECK(isfinite(cfg->grad_scale), "ak_optim_step: %s grad_scale = %g is not finite",
                 name, (double)cfg->grad_scale);
    if (cfg->kind == AK_OPTIM_SGD) {
        AK_ARG_CHECK(finite_nonneg(cfg->momentum),
                     "ak_optim_step: SGD momentum = %g must be finite and >= 0",
                     (double)cfg->momentum);
        AK_ARG_CHECK(isfinite(cfg->dampening), "ak_optim_step: SGD dampening = %g is not finite",
                     (double)cfg->dampening);
        AK_ARG_CHECK(!cfg->nesterov || (cfg->momentum > 0.0f && cfg->dampening == 0.0f),
                     "ak_optim_step: SGD Nesterov momentum needs momentum > 0 and dampening 0 "
                     "(momentum = %g, dampening = %g)", (double)cfg->momentum,
                     (double)cfg->dampening);
        return AK_OK;
    }
    AK_ARG_CHECK(cfg->beta1 >= 0.0f && cfg->beta1 < 1.0f,
                 "ak_optim_step: %s beta1 = %g must be in [0, 1)", name, (double)cfg->beta1);
    AK_ARG_CHECK(cfg->beta2 >= 0.0f && cfg->beta2 < 1.0f,
                 "ak_optim_step: %s beta2 = %g must be in [0, 1)", name, (double)cfg->beta2);
    AK_ARG_CHECK(finite_nonneg(cfg->eps), "ak_optim_step: %s eps = %g must be finite and >= 0",
                 name, (double)cfg->eps);
    return AK_OK;
}

/* Scalars are derived in double from the config values and rounded to f32
 * once, as torch does with its Python floats (1 - beta1, lr / (1 - beta1**step),
 * math.sqrt(...), 1 - lr * weight_decay). */
ak_status ak__optim_coef_init(const ak_optim_config *cfg, int64_t step, ak__optim_coef *out) {
    AK_CHECK(check_config(cfg, step));
    AK_ARG_CHECK(out, "ak__optim_coef_init: out is NULL");
    ak__optim_coef c;
    memset(&c, 0, sizeof c);
    double lr = cfg->lr, wd = cfg->weight_decay, t = (double)step;
    double beta1 = cfg->beta1, beta2 = cfg->beta2;
    c.grad_scale = (float)cfg->grad_scale;
    c.neg_lr = (float)-lr;
    c.weight_decay = (float)cfg->weight_decay;
    c.param_decay = 1.0f;
    c.momentum = (float)cfg->momentum;
    c.one_minus_dampening = (float)(1.0 - cfg->dampening);
    c.nesterov = cfg->nesterov != 0;
    c.first_step = step == 1;
    c.beta1 = (float)cfg->beta1;
    c.beta2 = (float)cfg->beta2;
    c.one_minus_beta1 = (float)(1.0 - beta1);
    c.one_minus_beta2 = (float)(1.0 - beta2);
    c.eps = (float)cfg->eps;
    double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    c.neg_step_size = (float)-(lr / bc1);
    c.bc2_sqrt = (float)sqrt(bc2);
    c.bc1 = (float)bc1;
    c.bc2 = (float)bc2;
    if (cfg->kind == AK_OPTIM_ADAMW) { /* decoupled: p *= 1 - lr·wd, no L2 term */
        c.param_decay = (float)(1.0 - lr * wd);
        c.weight_decay = 0.0f;
    }
    *out = c;
    return AK_OK;
}

float ak__optim_lamb_neg_lr_ratio(const ak__optim_coef *c, double p_sq, double u_sq) {
    double pn = sqrt(p_sq), un = sqrt(u_sq);
    /* != rather than >: a NaN norm gives a NaN ratio, as in apex */
    double ratio = pn != 0.0 && un != 0.0 ? pn / un : 1.0;
    return (float)((double)c->neg_lr * ratio);
}

/* ---- buffers ------------------------------------------------------------------------ */

static ak_status check_state(const char *what, const char *name, const float *s, size_t n) {
    AK_ARG_CHECK(s || n == 0, "ak_optim_step: %s needs %s, got NULL (n = %zu)", what, name, n);
    return ak__check_buf("ak_optim_step", name, s, n, sizeof(float));
}

static ak_status check_buffers(const ak_optim_config *cfg, const float *param,
                               const float *grad, const float *state1, const float *state2,
                               size_t n) {
    static const char fn[] = "ak_optim_step";
    AK_ARG_CHECK(n <= SIZE_MAX / sizeof(float),
                 "%s: n = %zu elements overflows the address space", fn, n);
    AK_CHECK(ak__check_buf(fn, "param", param, n, sizeof(float)));
    AK_CHECK(ak__check_buf(fn, "grad", grad, n, sizeof(float)));
    const char *names[4] = {"param", "grad", NULL, NULL};
    const void *bufs[4] = {param, grad, NULL, NULL};
    int used = 2;
    if (cfg->kind == AK_OPTIM_SGD) {
        if (cfg->momentum != 0.0f) {
            AK_CHECK(check_state("SGD with momentum", "state1 (the momentum buffer)", state1, n));
            names[used] = "state1";
            bufs[used++] = state1;
        }
    } else {
        const char *what = kind_name(cfg->kind);
        AK_CHECK(check_state(what, "state1 (exp_avg)", state1, n));
        AK_CHECK(check_state(what, "state2 (exp_avg_sq)", state2, n));
        names[used] = "state1";
        bufs[used++] = state1;
        names[used] = "state2";
        bufs[used++] = state2;
    }
    size_t bytes = n * sizeof(float);
    for (int i = 0; i < used; i++)
        for (int j = i + 1; j < used; j++)
            AK_CHECK(ak__check_overlap(fn, names[i], bufs[i], bytes, names[j], bufs[j], bytes, 0));
    return AK_OK;
}

/* ---- block driver ------------------------------------------------------------------- */

typedef struct run_ctx {
    const ak__optim_kernels *k;
    ak_optim_kind kind;
    const ak__optim_coef *c;
    float *p;
    const float *g;
    float *s1, *s2;
    size_t n, block;
    int lamb_phase;     /* 1: moments and norms, 2: apply */
    double *p_sq, *u_sq; /* LAMB: one partial sum per block */
    float neg_lr_ratio; /* LAMB phase 2 */
} run_ctx;

static void run_blocks(void *arg, size_t begin, size_t end, int thread_index) {
    const run_ctx *r = arg;
    (void)thread_index;
    for (size_t b = begin; b < end; b++) {
        size_t lo = b * r->block, len = r->n - lo < r->block ? r->n - lo : r->block;
        float *p = r->p + lo, *m = r->s1 ? r->s1 + lo : NULL, *v = r->s2 ? r->s2 + lo : NULL;
        const float *g = r->g + lo;
        switch (r->kind) {
        case AK_OPTIM_SGD: r->k->sgd(r->c, p, g, m, len); break;
        case AK_OPTIM_ADAM:
        case AK_OPTIM_ADAMW: r->k->adam(r->c, p, g, m, v, len); break;
        case AK_OPTIM_LAMB:
            if (r->lamb_phase == 1) {
                r->p_sq[b] = r->u_sq[b] = 0.0;
                r->k->lamb_moments(r->c, p, g, m, v, len, &r->p_sq[b], &r->u_sq[b]);
            } else {
                r->k->lamb_apply(r->c, p, m, v, len, r->neg_lr_ratio);
            }
            break;
        }
    }
}

static void run_all(ak_threadpool *pool, run_ctx *r, size_t nblocks) {
    if (!pool || nblocks == 1 ||
        ak_threadpool_parallel_for(pool, nblocks, 1, run_blocks, r) != AK_OK)
        run_blocks(r, 0, nblocks, 0);
}

void ak__optim_run(const ak__optim_kernels *k, ak_optim_kind kind, const ak__optim_coef *c,
                   float *param, const float *grad, float *state1, float *state2, size_t n,
                   ak_threadpool *pool) {
    if (n == 0) return;
    size_t block = (n + MAX_BLOCKS - 1) / MAX_BLOCKS;
    block = block < BLOCK_MIN ? BLOCK_MIN : (block + 15) / 16 * 16; /* whole cache lines */
    size_t nblocks = (n + block - 1) / block;
    double p_sq[MAX_BLOCKS], u_sq[MAX_BLOCKS];
    run_ctx r = {k, kind, c, param, grad, state1, state2, n, block, 1, p_sq, u_sq, 0.0f};
    if (kind == AK_OPTIM_SGD && c->momentum == 0.0f) r.s1 = NULL; /* no momentum buffer */
    if (kind == AK_OPTIM_SGD) r.s2 = NULL;
    run_all(pool, &r, nblocks);
    if (kind != AK_OPTIM_LAMB) return;
    double ps = 0.0, us = 0.0;
    for (size_t b = 0; b < nblocks; b++) { /* block order: the same for any thread count */
        ps += p_sq[b];
        us += u_sq[b];
    }
    r.lamb_phase = 2;
    r.neg_lr_ratio = ak__optim_lamb_neg_lr_ratio(c, ps, us);
    run_all(pool, &r, nblocks);
}

/* ---- public entry point ------------------------------------------------------------- */

ak_status ak_optim_step(const ak_optim_config *cfg, int64_t step, float *param,
                        const float *grad, float *state1, float *state2, size_t n) {
    AK_ENSURE_INIT();
    ak__optim_coef c;
    AK_CHECK(ak__optim_coef_init(cfg, step, &c));
    AK_CHECK(check_buffers(cfg, param, grad, state1, state2, n));
    if (n == 0) return AK_OK;
    ak_threadpool *pool = NULL;
    if (n >= 2 * BLOCK_MIN && ak_threadpool_global(&pool) != AK_OK)
        pool = NULL; /* no pool: still correct on this thread */
    ak__optim_run(ak__optim_kernels_active(), cfg->kind, &c, param, grad, state1, state2, n,
                  pool);
    return AK_OK;
}
