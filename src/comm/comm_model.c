/* α–β cost model for choosing the allreduce algorithm (see comm_model.h). */
#include "comm/comm_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/algo/algo.h"
#include "core/check.h"

static const char *const algo_names[AK_COMM_ALGO_COUNT_] = {"auto", "ring", "rd", "tree", "hier",
                                                             "direct"};
static const char *const algo_long_names[AK_COMM_ALGO_COUNT_] = {
    "auto", "ring", "recursive_doubling", "tree", "hierarchical", "shm_direct"};

const char *ak_comm_algo_name(ak_comm_algo algo) {
    return (unsigned)algo < AK_COMM_ALGO_COUNT_ ? algo_long_names[algo] : "unknown";
}

ak_status ak__comm_algo_parse(const char *text, ak_comm_algo *out) {
    for (int i = 0; i < AK_COMM_ALGO_COUNT_; i++)
        if (strcmp(text, algo_names[i]) == 0 || strcmp(text, algo_long_names[i]) == 0) {
            *out = (ak_comm_algo)i;
            return AK_OK;
        }
    return AK_FAIL(AK_ERR_INVALID_ARG,
                   "algorithm '%s' is not one of auto, ring, rd, tree, hier, direct", text);
}

/* Sizes the link model is measured at: latency, a medium message, a large one. */
static const double link_sizes[AK_LINK_POINTS] = {8, 65536, 1048576};

/* A link obeying time = α + bytes/β exactly (defaults and tuning files). */
static ak__link_model alpha_beta(double alpha_us, double beta_gbps) {
    ak__link_model l;
    for (int i = 0; i < AK_LINK_POINTS; i++) {
        l.bytes[i] = link_sizes[i];
        l.us[i] = alpha_us + link_sizes[i] / (beta_gbps * 1e3);
    }
    return l;
}

/* Defaults per transport kind (α µs, β GB/s), from the project's 2-core VMs: threads
 * copy at memory speed, shm pays two copies, loopback TCP ~2 GB/s. */
#define DEFAULT_MEM alpha_beta(1.0, 8.0)
#define DEFAULT_SHM alpha_beta(2.0, 6.0)
#define DEFAULT_TCP alpha_beta(20.0, 1.5)

/* One-way time of a `bytes` message: linear between measured points, the last
 * segment's slope beyond them, the first point's time below (latency floor). */
static double link_time(const ak__link_model *l, double bytes) {
    if (bytes <= l->bytes[0]) return l->us[0];
    int i = 1;
    while (i < AK_LINK_POINTS - 1 && bytes > l->bytes[i]) i++;
    double slope = (l->us[i] - l->us[i - 1]) / (l->bytes[i] - l->bytes[i - 1]);
    return l->us[i - 1] + (bytes - l->bytes[i - 1]) * (slope > 0 ? slope : 0);
}

static double link_alpha(const ak__link_model *l) { return l->us[0]; }
static double link_beta_gbps(const ak__link_model *l) {
    double dt = l->us[AK_LINK_POINTS - 1] - l->us[0];
    return dt > 0 ? (l->bytes[AK_LINK_POINTS - 1] - l->bytes[0]) / (dt * 1e3) : INFINITY;
}

/* Tuning file (`ak bench comm --calibrate FILE` writes one): lines "intra_alpha_us V",
 * "intra_beta_gbps V", "inter_alpha_us V", "inter_beta_gbps V"; optionally
 * "topology RANKS HOSTS" followed by "allreduce_us ALGO T8 T4K T32K T256K" lines, the
 * measured allreduce times, used only by a communicator of that topology (elsewhere the
 * formulas alone decide). '#' starts a comment. */
static const char *const tuning_names[4] = {"intra_alpha_us", "intra_beta_gbps", "inter_alpha_us",
                                            "inter_beta_gbps"};

/* One "allreduce_us ALGO t..." line into measured[algo]; 0 on success. */
static int parse_measured_line(const char *rest, double measured[][AK_COMM_MEASURED_SIZES]) {
    char algo_name[32];
    double v[4];
    ak_comm_algo a;
    if (sscanf(rest, "%31s %lf %lf %lf %lf", algo_name, &v[0], &v[1], &v[2], &v[3]) != 5 ||
        ak__comm_algo_parse(algo_name, &a) != AK_OK || a == AK_COMM_ALGO_AUTO)
        return -1;
    for (int k = 0; k < 4; k++) {
        if (!(v[k] > 0)) return -1;
        measured[a][k] = v[k];
    }
    return 0;
}

/* One line of a tuning file; 0 when understood. */
static int parse_tuning_line(const char *line, double ab[4], int topology[2],
                             double measured[][AK_COMM_MEASURED_SIZES]) {
    char name[64];
    int used = 0;
    if (sscanf(line, "%63s %n", name, &used) != 1) return -1;
    const char *rest = line + used;
    if (!strcmp(name, "topology")) return sscanf(rest, "%d %d", &topology[0], &topology[1]) == 2 ? 0 : -1;
    if (!strcmp(name, "allreduce_us")) return parse_measured_line(rest, measured);
    for (int k = 0; k < 4; k++)
        if (!strcmp(name, tuning_names[k])) return sscanf(rest, "%lf", &ab[k]) == 1 && ab[k] > 0 ? 0 : -1;
    return -1;
}

static ak_status read_tuning(ak_comm *c, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return AK_FAIL(AK_ERR_IO, "AK_COMM_TUNING: cannot open '%s'", path);
    double ab[4] = {link_alpha(&c->links[0]), link_beta_gbps(&c->links[0]),
                    link_alpha(&c->links[1]), link_beta_gbps(&c->links[1])};
    double measured[AK_COMM_ALGO_COUNT_][AK_COMM_MEASURED_SIZES] = {{0}};
    int topology[2] = {0, 0};
    char line[256];
    int lineno = 0;
    ak_status st = AK_OK;
    while (st == AK_OK && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[strspn(line, " \t")] == '#' || line[strspn(line, " \t\r\n")] == '\0') continue;
        if (parse_tuning_line(line, ab, topology, measured))
            st = AK_FAIL(AK_ERR_INVALID_ARG, "%s:%d: expected 'NAME positive-number' with NAME one "
                         "of intra_alpha_us, intra_beta_gbps, inter_alpha_us, inter_beta_gbps, "
                         "or 'topology RANKS HOSTS', or 'allreduce_us ALGO' and 4 positive times",
                         path, lineno);
    }
    fclose(f);
    c->links[AK_COMM_TP_INTRA] = alpha_beta(ab[0], ab[1]);
    c->links[AK_COMM_TP_INTER] = alpha_beta(ab[2], ab[3]);
    if (topology[0] == c->size && topology[1] == c->host_count)
        memcpy(c->algo_measured_us, measured, sizeof measured);
    return st;
}

/* Time of `steps` messages of `bytes` each over link l, in µs. */
static double link_us(const ak__link_model *l, double steps, double bytes) {
    return steps * link_time(l, bytes);
}

/* ---- calibration: ping-pong between rank 0 and one peer per link class ------------- */

#define CAL_LARGE ((size_t)1 << 20)
#define CAL_TAG 0xCA11B0A7ull

/* One-way time in µs of `bytes`, from `reps` round trips (after one warm-up). */
static ak_status pingpong(ak_comm *c, int peer, int initiator, void *buf, size_t bytes,
                          int reps, double *one_way_us) {
    uint64_t t0 = 0;
    for (int r = -1; r < reps; r++) {
        if (r == 0) t0 = ak_now_ns();
        for (int leg = 0; leg < 2; leg++) {
            ak__p2p op;
            if ((leg == 0) == initiator) ak__p2p_init_send(&op, peer, buf, bytes, CAL_TAG ^ bytes);
            else ak__p2p_init_recv(&op, peer, buf, bytes, CAL_TAG ^ bytes);
            ak__p2p *ops[1] = {&op};
            AK_CHECK(ak__p2p_post(c, &op));
            AK_CHECK(ak__p2p_wait(c, ops, 1));
        }
    }
    *one_way_us = (double)(ak_now_ns() - t0) / 1e3 / (2.0 * reps);
    return AK_OK;
}

/* One-way times at the model's sizes; both ends run it, rank 0 keeps the result. */
static ak_status measure_link(ak_comm *c, int peer, ak__link_model *out) {
    void *buf;
    AK_CHECK(ak__comm_scratch(c, CAL_LARGE, &buf));
    memset(buf, 0, CAL_LARGE);
    static const int reps[AK_LINK_POINTS] = {20, 8, 3};
    for (int i = 0; i < AK_LINK_POINTS; i++) {
        out->bytes[i] = link_sizes[i];
        AK_CHECK(pingpong(c, peer, c->rank == 0, buf, (size_t)link_sizes[i], reps[i], &out->us[i]));
    }
    return AK_OK;
}

/* Measures each link class in use; rank 0 publishes the parameters to everyone, so all
 * ranks choose the same algorithm. */
static ak_status calibrate(ak_comm *c) {
    for (int cls = 0; cls < AK_COMM_TP_COUNT; cls++) {
        int peer = -1;
        for (int r = 1; r < c->size && peer < 0; r++)
            if ((c->host_of[r] == c->host_of[0]) == (cls == AK_COMM_TP_INTRA)) peer = r;
        if (peer < 0) continue;
        if (c->rank == 0) AK_CHECK(measure_link(c, peer, &c->links[cls]));
        else if (c->rank == peer) AK_CHECK(measure_link(c, 0, &c->links[cls]));
    }
    char key[AK_STORE_MAX_KEY + 1];
    snprintf(key, sizeof key, "%s/model", c->prefix);
    if (c->rank == 0) return ak__store_set(c->store, key, c->links, sizeof c->links);
    size_t len;
    AK_CHECK(ak__store_get(c->store, key, c->links, sizeof c->links, &len, c->config.timeout_ms));
    if (len != sizeof c->links)
        return AK_FAIL(AK_ERR_REMOTE, "comm: cost-model parameters from rank 0 have %zu bytes, "
                       "expected %zu", len, sizeof c->links);
    return AK_OK;
}

/* ---- measured latency per algorithm -------------------------------------------------- */

static double model_us(const ak_comm *c, ak_comm_algo algo, size_t bytes);

/* the measured points: latency-bound, the end of the flat latency range, where bandwidth
 * starts to matter, bandwidth-bound (between 8 B and 32 KiB alone, the line through them
 * put a 4 KiB allreduce 2× off on emulated hosts and picked hierarchical over recursive
 * doubling there) */
#define MEASURED AK_COMM_MEASURED_SIZES
static const size_t measured_bytes[MEASURED] = {8, 4096, 32768, 262144};
static const int measured_reps[MEASURED] = {7, 7, 7, 7};

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static ak_status run_algo(ak_comm *c, ak_comm_algo a, float *buf, size_t count) {
    ak__group g = {c->all_ranks, c->size, c->rank};
    uint64_t tag = ak__comm_next_tag(c, 0x7a, count, AK_DTYPE_F32, AK_REDUCE_SUM, (int)a);
    switch (a) {
    case AK_COMM_ALGO_RING:
        return ak__allreduce_ring(c, &g, buf, buf, count, AK_DTYPE_F32, AK_REDUCE_SUM, tag);
    case AK_COMM_ALGO_RECURSIVE_DOUBLING:
        return ak__allreduce_recursive_doubling(c, &g, buf, count, AK_DTYPE_F32, AK_REDUCE_SUM, tag);
    case AK_COMM_ALGO_TREE: return ak__allreduce_tree(c, &g, buf, count, AK_DTYPE_F32, AK_REDUCE_SUM, tag);
    default:
        return ak__allreduce_hierarchical(c, buf, buf, count, AK_DTYPE_F32, AK_REDUCE_SUM, tag);
    }
}

/* Times allreduces of 8 B, 4, 32 and 256 KiB with every algorithm that can run here: their real
 * cost in the latency-bound range (steps, phases, polling two transports, a shaper's
 * burst), which a per-link model misjudges. At each size the algorithms take turns, one
 * run each per round, so they meet the same link state: one after another, the first
 * ran on a shaper's full token bucket and the next ones on what the earlier 256 KiB runs
 * left of it (on 1 Gbit/s tbf links the tree measured 272 µs at 32 KiB that way, against
 * 72 µs in a sweep, and lost to the ring, which measured 231 µs there). The slowest
 * rank's figures count, agreed through a max-allreduce, so every rank ends with the
 * same table and the same choice. */
/* The model has a formula for it here (hierarchical needs hosts with ≥ 2 ranks each). */
static int algo_runs_here(const ak_comm *c, int a) {
    return isfinite(model_us(c, (ak_comm_algo)a, 8));
}

static ak_status measure_algorithms(ak_comm *c) {
    double t[AK_COMM_ALGO_COUNT_][MEASURED] = {{0}};
    float *buf;
    AK_CHECK(ak__comm_work(c, measured_bytes[MEASURED - 1], (void **)&buf));
    memset(buf, 0, measured_bytes[MEASURED - 1]);
    for (int k = 0; k < MEASURED; k++) {
        size_t count = measured_bytes[k] / sizeof(float);
        double reps[AK_COMM_ALGO_COUNT_][8];
        for (int r = -1; r < measured_reps[k]; r++) /* round -1: warm-up */
            for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++) {
                if (!algo_runs_here(c, a)) continue;
                uint64_t t0 = ak_now_ns();
                AK_CHECK(run_algo(c, (ak_comm_algo)a, buf, count));
                if (r >= 0) reps[a][r] = (double)(ak_now_ns() - t0) / 1e3;
            }
        /* medians: one descheduled run must not decide */
        for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++)
            if (algo_runs_here(c, a)) t[a][k] = median(reps[a], measured_reps[k]);
    }
    ak__group g = {c->all_ranks, c->size, c->rank};
    size_t n = sizeof t / sizeof(double);
    uint64_t tag = ak__comm_next_tag(c, 0x7b, n, AK_DTYPE_F64, AK_REDUCE_MAX, -1);
    AK_CHECK(ak__allreduce_recursive_doubling(c, &g, t, n, AK_DTYPE_F64, AK_REDUCE_MAX, tag));
    memcpy(c->algo_measured_us, t, sizeof t);
    for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++)
        if (t[a][0] > 0)
            AK_LOG_INFO(AK_SUBSYS_COMM, "cost model: %s allreduce measured %.1f / %.1f / %.1f / "
                        "%.1f µs at 8 B / 4 / 32 / 256 KiB", algo_long_names[a], t[a][0], t[a][1],
                        t[a][2], t[a][3]);
    return AK_OK;
}

ak_status ak__comm_model_init(ak_comm *c, int threads_of_one_process) {
    c->links[AK_COMM_TP_INTRA] = threads_of_one_process ? DEFAULT_MEM : DEFAULT_SHM;
    c->links[AK_COMM_TP_INTER] = DEFAULT_TCP;
    if (c->config.transport == AK_COMM_TRANSPORT_TCP) c->links[AK_COMM_TP_INTRA] = DEFAULT_TCP;
    if (c->config.tuning_file) return read_tuning(c, c->config.tuning_file);
    /* threads of one process keep the defaults: their world is one host of copies */
    if (threads_of_one_process || c->size == 1) return AK_OK;
    AK_CHECK(calibrate(c));
    AK_CHECK(measure_algorithms(c));
    AK_LOG_INFO(AK_SUBSYS_COMM, "cost model: intra α %.1f µs β %.2f GB/s, inter α %.1f µs "
                "β %.2f GB/s", link_alpha(&c->links[0]), link_beta_gbps(&c->links[0]),
                link_alpha(&c->links[1]), link_beta_gbps(&c->links[1]));
    return AK_OK;
}

/* Ranks per host when every host has the same number (layout host by host), else 0. */
static int uniform_local(const ak_comm *c) {
    int l = c->local_size;
    return c->host_count * l == c->size ? l : 0;
}

/* A step between ranks at distance d: inside a host when d < l (uniform layout). */
static const ak__link_model *step_link(const ak_comm *c, int d) {
    int l = uniform_local(c);
    int inside = c->host_count == 1 || (l > 0 && d < l);
    return &c->links[inside ? AK_COMM_TP_INTRA : AK_COMM_TP_INTER];
}

/* Recursive doubling: at distance d ≥ l every rank of a host crosses the host link at
 * once, so l flows share it; folding for n ≠ 2^k adds two full-buffer steps. */
static double model_recursive_doubling(const ak_comm *c, double n_bytes) {
    int p = 1, l = uniform_local(c);
    while (p * 2 <= c->size) p *= 2;
    double t = 0;
    for (int d = 1; d < p; d *= 2) {
        const ak__link_model *link = step_link(c, d);
        int flows = link == &c->links[AK_COMM_TP_INTER] && l > 0 ? l : 1;
        t += link_us(link, 1, n_bytes * flows);
    }
    if (p != c->size) t += link_us(step_link(c, c->size), 2, n_bytes);
    return t;
}

/* Binomial reduce then broadcast: step k pairs ranks 2^k apart, one flow per link. */
static double model_tree(const ak_comm *c, double n_bytes) {
    double t = 0;
    for (int d = 1; d < c->size; d *= 2) t += link_us(step_link(c, d), 2, n_bytes);
    return t;
}

/* Measured times where there are some: interpolated between the measured sizes, and
 * beyond the largest one the formula's growth added to its measured time. */
double ak__comm_model_allreduce_us(const ak_comm *c, ak_comm_algo algo, size_t bytes) {
    double t = model_us(c, algo, bytes);
    if ((unsigned)algo >= AK_COMM_ALGO_COUNT_ || !isfinite(t)) return t;
    const double *m = c->algo_measured_us[algo];
    if (m[0] <= 0) return t;
    double b = (double)bytes;
    if (b <= (double)measured_bytes[0]) return m[0];
    for (int k = 1; k < MEASURED; k++) {
        double b0 = (double)measured_bytes[k - 1], b1 = (double)measured_bytes[k];
        if (b <= b1) return m[k - 1] + (b - b0) / (b1 - b0) * (m[k] - m[k - 1]);
    }
    return m[MEASURED - 1] + t - model_us(c, algo, measured_bytes[MEASURED - 1]);
}

static double model_us(const ak_comm *c, ak_comm_algo algo, size_t bytes) {
    int p = c->size;
    double n = (double)bytes;
    if (p == 1) return 0;
    /* every ring step waits for its slowest edge: a host link when there are hosts */
    const ak__link_model *flat = &c->links[c->host_count > 1 ? AK_COMM_TP_INTER : AK_COMM_TP_INTRA];
    switch (algo) {
    case AK_COMM_ALGO_RING: return link_us(flat, 2.0 * (p - 1), n / p);
    case AK_COMM_ALGO_RECURSIVE_DOUBLING: return model_recursive_doubling(c, n);
    case AK_COMM_ALGO_TREE: return model_tree(c, n);
    case AK_COMM_ALGO_HIERARCHICAL: {
        int h = c->host_count, l = uniform_local(c);
        if (h < 2 || l < 2) return INFINITY;
        const ak__link_model *in = &c->links[AK_COMM_TP_INTRA], *out = &c->links[AK_COMM_TP_INTER];
        /* the l inter-host rings run at once and share each host link */
        return 2.0 * link_us(in, l - 1, n / l) + link_us(out, 2.0 * (h - 1), n / h);
    }
    default: return INFINITY;
    }
}

/* Processes of one host can read each other's memory: the direct algorithm moves no
 * message at all, so it wins at every size (threads keep the ring over direct copies;
 * AK_COMM_TRANSPORT=tcp asks for sockets). */
static int shm_direct_possible(const ak_comm *c) {
    return c->host_count == 1 && !c->threads_local && c->size > 1 &&
           c->config.transport != AK_COMM_TRANSPORT_TCP;
}

ak_comm_algo ak__comm_pick_allreduce(const ak_comm *c, size_t bytes) {
    if (c->config.algo == AK_COMM_ALGO_SHM_DIRECT && !shm_direct_possible(c))
        return AK_COMM_ALGO_RING; /* forced where it cannot run: the general algorithm */
    if (c->config.algo != AK_COMM_ALGO_AUTO) return c->config.algo;
    if (shm_direct_possible(c)) return AK_COMM_ALGO_SHM_DIRECT;
    ak_comm_algo best = AK_COMM_ALGO_RING;
    double best_us = INFINITY;
    for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++) {
        double t = ak__comm_model_allreduce_us(c, (ak_comm_algo)a, bytes);
        if (t < best_us) {
            best_us = t;
            best = (ak_comm_algo)a;
        }
    }
    return best;
}

ak_status ak_comm_choose_algo(const ak_comm *c, size_t bytes, ak_comm_algo *out) {
    AK_ARG_CHECK(c && out, "ak_comm_choose_algo: NULL argument");
    *out = ak__comm_pick_allreduce(c, bytes);
    return AK_OK;
}

ak_status ak__comm_model_save(const ak_comm *c, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return AK_FAIL(AK_ERR_IO, "cannot write the tuning file '%s'", path);
    fprintf(f, "# accelkit collective cost model (AK_COMM_TUNING): %d ranks on %d hosts\n",
            c->size, c->host_count);
    const ak__link_model *in = &c->links[AK_COMM_TP_INTRA], *out = &c->links[AK_COMM_TP_INTER];
    double ab[4] = {link_alpha(in), link_beta_gbps(in), link_alpha(out), link_beta_gbps(out)};
    for (int k = 0; k < 4; k++) fprintf(f, "%s %.6g\n", tuning_names[k], isfinite(ab[k]) ? ab[k] : 1e6);
    fprintf(f, "topology %d %d\n", c->size, c->host_count);
    for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++) {
        const double *m = c->algo_measured_us[a];
        if (m[0] > 0)
            fprintf(f, "allreduce_us %s %.6g %.6g %.6g %.6g\n", algo_names[a], m[0], m[1], m[2], m[3]);
    }
    return fclose(f) == 0 ? AK_OK : AK_FAIL(AK_ERR_IO, "cannot write the tuning file '%s'", path);
}
