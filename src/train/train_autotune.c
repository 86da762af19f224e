/* Training runtime, HOROVOD_AUTOTUNE: an online search over the fusion threshold and the
 * cycle time while the job trains, with Horovod's sampling and log file.
 *
 * Sampling (as Horovod's): the responses a cycle runs are the same on every rank, so every
 * rank counts the same steps: a sample ends when some tensor has been seen
 * HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE more times; its score is the bytes the runtime moved
 * per microsecond of the sample; a point's score is the median of 5 samples. The first
 * HOROVOD_AUTOTUNE_WARMUP_SAMPLES points' scores are dropped.
 *
 * Search (not Horovod's Bayesian optimisation): the starting configuration and Horovod's
 * four seed points (fusion MB, cycle ms) = (4, 5), (32, 50), (16, 25), (8, 10), then a
 * pattern search around the best point so far (fusion threshold doubled / halved, cycle
 * time doubled / halved, within Horovod's bounds 0-64 MB and 1-100 ms) until no neighbour
 * is new or HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES points were scored; then the best point
 * stays. Rank 0 decides and broadcasts each point; every rank switches at the same cycle.
 * A dimension fixed by its variable (HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME) or by
 * ak_train_config is not searched.
 *
 * HOROVOD_AUTOTUNE_LOG (rank 0): Horovod's CSV, header
 * hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,cycle_time_ms,tensor_fusion_threshold,score
 * then one line per scored point and a last line with the chosen point and its score
 * (threshold in MB, score in bytes/us; the first four columns are what the job runs
 * with: accelkit does not tune them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/hash.h"
#include "core/params.h"
#include "train/train_internal.h"

#define SAMPLES 5
#define MAX_POINTS 128
#define NAME_SLOTS 4096 /* tensors counted per sample window (more are not counted) */
#define MB (1024.0 * 1024.0)

typedef struct point {
    double mb, ms, score;
} point;

struct ak__autotune {
    int active;
    int warmups_left, steps_per_sample, max_scored;
    int fixed_mb, fixed_ms;
    /* the sample window */
    uint64_t name_hash[NAME_SLOTS];
    int name_count[NAME_SLOTS];
    int sample;
    double scores[SAMPLES];
    double bytes;
    uint64_t sample_start_ns;
    /* the search */
    point tried[MAX_POINTS];
    int ntried, nscored;
    point queue[8];
    int nqueue;
    point current, best;
    FILE *log;
};

static double clamp(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

static point make_point(const ak__autotune *a, const ak_train *t, double mb, double ms) {
    point p = {a->fixed_mb ? (double)t->fusion_threshold / MB : clamp(mb, 0, 64),
               a->fixed_ms ? t->cycle_ms : clamp(ms, 1, 100), 0};
    return p;
}

static int same_point(point x, point y) {
    return fabs(x.mb - y.mb) < 1e-9 && fabs(x.ms - y.ms) < 1e-9;
}

static int in_tried(const ak__autotune *a, point p) {
    for (int i = 0; i < a->ntried; i++)
        if (same_point(a->tried[i], p)) return 1;
    return 0;
}

static int already_tried(const ak__autotune *a, point p) {
    if (in_tried(a, p)) return 1;
    for (int i = 0; i < a->nqueue; i++)
        if (same_point(a->queue[i], p)) return 1;
    return 0;
}

static void enqueue(ak__autotune *a, point p) {
    if (a->nqueue < (int)(sizeof a->queue / sizeof *a->queue) && !already_tried(a, p))
        a->queue[a->nqueue++] = p;
}

static void log_point(const ak__autotune *a, const ak_train *t, point p) {
    AK_LOG_INFO(AK_SUBSYS_TRAIN, "autotune: fusion threshold %.3g MB, cycle time %.3g ms: "
                "score %.4g bytes/us", p.mb, p.ms, p.score);
    if (!a->log) return;
    int hier = (int)ak__param_int(AK_PARAM_HVD_HIERARCHICAL_ALLREDUCE);
    fprintf(a->log, "%d,0,0,%d,%g,%g,%g\n", hier, t->cache_capacity > 0, p.ms, p.mb, p.score);
    fflush(a->log);
}

static void apply_point(ak_train *t, point p) {
    t->fusion_threshold = (size_t)(p.mb * MB);
    t->cycle_ms = p.ms;
}

/* Rank 0: after the current point was scored, the next point (or the end of the search). */
static void choose_next(ak__autotune *a, const ak_train *t) {
    if (a->ntried < MAX_POINTS) a->tried[a->ntried++] = a->current;
    a->nscored++;
    if (a->current.score > a->best.score || a->nscored == 1) {
        a->best = a->current;
        /* a better point: look around it */
        enqueue(a, make_point(a, t, a->best.mb * 2, a->best.ms));
        enqueue(a, make_point(a, t, a->best.mb / 2 < 0.5 ? 0 : a->best.mb / 2, a->best.ms));
        enqueue(a, make_point(a, t, a->best.mb, a->best.ms * 2));
        enqueue(a, make_point(a, t, a->best.mb, a->best.ms / 2));
    }
    while (a->nqueue > 0 && in_tried(a, a->queue[0])) /* seeds the search reached itself */
        memmove(a->queue, a->queue + 1, sizeof(point) * (size_t)--a->nqueue);
    if (a->nqueue == 0 || a->nscored >= a->max_scored) {
        a->active = 0;
        a->current = a->best;
        return;
    }
    a->current = a->queue[0];
    memmove(a->queue, a->queue + 1, sizeof(point) * (size_t)--a->nqueue);
}

/* Every rank: rank 0's decision (point, still active) reaches all at the same cycle. */
static ak_status sync_point(ak_train *t, ak__pset *p, ak__autotune *a) {
    double msg[3] = {a->current.mb, a->current.ms, a->active};
    AK_CHECK(ak_comm_broadcast(p->comm, msg, 3, AK_DTYPE_F64, 0));
    a->current.mb = msg[0];
    a->current.ms = msg[1];
    a->active = msg[2] != 0;
    apply_point(t, a->current);
    return AK_OK;
}

static void reset_window(ak__autotune *a) {
    memset(a->name_count, 0, sizeof a->name_count);
    memset(a->name_hash, 0, sizeof a->name_hash);
    a->sample = 0;
    a->bytes = 0;
    a->sample_start_ns = ak_now_ns();
}

/* The count of the tensor `name` after this sighting. */
static int count_name(ak__autotune *a, const char *name) {
    uint64_t h = ak__fnv1a64_str(name) | 1;
    for (size_t i = 0, k = h % NAME_SLOTS; i < NAME_SLOTS; i++, k = (k + 1) % NAME_SLOTS) {
        if (a->name_hash[k] == h) return ++a->name_count[k];
        if (!a->name_hash[k]) {
            a->name_hash[k] = h;
            return a->name_count[k] = 1;
        }
    }
    return 0;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* A point's samples are complete: score it (rank 0), move on (every rank). */
static ak_status point_done(ak_train *t, ak__pset *p, ak__autotune *a) {
    qsort(a->scores, SAMPLES, sizeof *a->scores, cmp_double);
    a->current.score = a->scores[SAMPLES / 2];
    if (a->warmups_left > 0) {
        a->warmups_left--;
    } else {
        if (t->rank == 0) {
            log_point(a, t, a->current);
            choose_next(a, t);
        }
        AK_CHECK(sync_point(t, p, a));
        if (!a->active && t->rank == 0) {
            AK_LOG_INFO(AK_SUBSYS_TRAIN, "autotune: chose fusion threshold %.3g MB, cycle "
                        "time %.3g ms (score %.4g bytes/us)", a->best.mb, a->best.ms,
                        a->best.score);
            log_point(a, t, a->best);
        }
    }
    reset_window(a);
    return AK_OK;
}

ak_status ak__autotune_update(ak_train *t, ak__pset *p, const ak__response *r, int n) {
    ak__autotune *a = t->autotune;
    if (!a || !a->active || p->id != 0) return AK_OK;
    for (int i = 0; i < n; i++) {
        if (r[i].error) continue;
        if (count_name(a, r[i].name) > (a->sample + 1) * a->steps_per_sample) {
            uint64_t now = ak_now_ns();
            double us = (double)(now - a->sample_start_ns) / 1e3;
            a->scores[a->sample++] = us > 0 ? a->bytes / us : 0;
            a->bytes = 0;
            a->sample_start_ns = now;
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        size_t es = 0;
        if (r[i].error || ak_dtype_size(r[i].sig.dtype, &es) != AK_OK) continue;
        if (r[i].sig.kind <= AK_TRAIN_REDUCESCATTER)
            a->bytes += (double)ak__sig_elements(&r[i].sig) * (double)es;
    }
    return a->sample >= SAMPLES ? point_done(t, p, a) : AK_OK;
}

ak_status ak__autotune_start(ak_train *t, const ak_train_config *cfg) {
    if (!ak__param_int(AK_PARAM_HVD_AUTOTUNE)) return AK_OK;
    if (getenv("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"))
        AK_LOG_WARN(AK_SUBSYS_TRAIN, "autotune: HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE has no "
                    "effect: accelkit's search is a pattern search, not Bayesian optimisation");
    ak__autotune *a = calloc(1, sizeof *a);
    if (!a) return AK_FAIL(AK_ERR_NO_MEMORY, "autotune: out of memory");
    a->active = 1;
    a->warmups_left = (int)ak__param_int(AK_PARAM_HVD_AUTOTUNE_WARMUP_SAMPLES);
    a->steps_per_sample = (int)ak__param_int(AK_PARAM_HVD_AUTOTUNE_STEPS_PER_SAMPLE);
    a->max_scored = (int)ak__param_int(AK_PARAM_HVD_AUTOTUNE_MAX_SAMPLES);
    a->fixed_mb = cfg->fusion_threshold >= 0 || getenv("HOROVOD_FUSION_THRESHOLD");
    a->fixed_ms = cfg->cycle_time_ms > 0 || getenv("HOROVOD_CYCLE_TIME");
    a->current = make_point(a, t, (double)t->fusion_threshold / MB, t->cycle_ms);
    static const double seeds[][2] = {{4, 5}, {32, 50}, {16, 25}, {8, 10}};
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++)
        enqueue(a, make_point(a, t, seeds[i][0], seeds[i][1]));
    const char *path = ak__param_str(AK_PARAM_HVD_AUTOTUNE_LOG);
    if (t->rank == 0 && path[0]) {
        a->log = fopen(path, "w");
        if (!a->log) {
            free(a);
            return AK_FAIL(AK_ERR_IO, "HOROVOD_AUTOTUNE_LOG=%s: cannot open it for writing", path);
        }
        fprintf(a->log, "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,"
                        "cache_enabled,cycle_time_ms,tensor_fusion_threshold,score\n");
        fflush(a->log);
    }
    apply_point(t, a->current);
    reset_window(a);
    t->autotune = a;
    return AK_OK;
}

void ak__autotune_free(ak_train *t) {
    if (!t->autotune) return;
    if (t->autotune->log) fclose(t->autotune->log);
    free(t->autotune);
    t->autotune = NULL;
}
