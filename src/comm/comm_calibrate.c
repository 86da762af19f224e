/* The cost model's measurements (see comm_model.h): link times from ping-pongs, the time
 * of every algorithm of every chosen collective at a few small sizes, and the tuning file
 * that replaces both (AK_COMM_TUNING; `ak bench comm --calibrate FILE` writes one). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/algo/algo.h"
#include "comm/comm_model.h"
#include "comm/comm_ops.h"
#include "core/check.h"

/* Sizes the link model is measured at: latency, a medium message, a large one. */
static const double link_sizes[AK_LINK_POINTS] = {8, 65536, 1048576};

/* the algorithms' measured points: latency-bound, the end of the flat latency range, where
 * bandwidth starts to matter, bandwidth-bound (between 8 B and 32 KiB alone, the line
 * through them put a 4 KiB allreduce 2× off on emulated hosts and picked hierarchical
 * over recursive doubling there). comm_model.c interpolates between them. */
#define MEASURED AK_COMM_MEASURED_SIZES
const size_t ak__comm_measured_bytes[AK_COMM_MEASURED_SIZES] = {8, 4096, 32768, 262144};
#define MEASURED_REPS 7

/* Defaults per transport kind (α µs, β GB/s), from the project's 2-core VMs: threads
 * copy at memory speed, shm pays two copies, loopback TCP ~2 GB/s. */
#define DEFAULT_MEM ak__link_alpha_beta(1.0, 8.0)
#define DEFAULT_SHM ak__link_alpha_beta(2.0, 6.0)
#define DEFAULT_TCP ak__link_alpha_beta(20.0, 1.5)

/* ---- tuning file ---------------------------------------------------------------------- */

/* Lines "intra_alpha_us V", "intra_beta_gbps V", "inter_alpha_us V", "inter_beta_gbps V",
 * optionally "host_gbps V" (what all ranks of a host move at once; absent: unlimited) and
 * "topology RANKS HOSTS" followed by "COLL_us ALGO T8 T4K T32K T256K" lines
 * (COLL one of allreduce, broadcast, reduce, allgather, reduce_scatter), the measured
 * times, used only by a communicator of that topology (elsewhere the formulas alone
 * decide). Files with allreduce_us lines only (before the other collectives were
 * measured) load as they did. '#' starts a comment. */
static const char *const tuning_names[5] = {"intra_alpha_us", "intra_beta_gbps", "inter_alpha_us",
                                            "inter_beta_gbps", "host_gbps"};

typedef double measured_table[AK_COMM_COLL_COUNT_][AK_COMM_ALGO_COUNT_][MEASURED];

/* The collective whose measured-times line `name` is ("allreduce_us" …), or -1. */
static int measured_line_coll(const char *name) {
    for (int k = 0; k < AK_COMM_COLL_COUNT_; k++) {
        const char *coll = ak__comm_coll_name((ak_comm_coll)k);
        size_t len = strlen(coll);
        if (!strncmp(name, coll, len) && !strcmp(name + len, "_us")) return k;
    }
    return -1;
}

/* One "COLL_us ALGO t..." line into measured[coll][algo]; 0 on success. */
static int parse_measured_line(int coll, const char *rest, measured_table measured) {
    char algo_name[32];
    double v[MEASURED];
    ak_comm_algo a;
    if (sscanf(rest, "%31s %lf %lf %lf %lf", algo_name, &v[0], &v[1], &v[2], &v[3]) != 5 ||
        ak__comm_algo_parse(algo_name, &a) != AK_OK || a == AK_COMM_ALGO_AUTO)
        return -1;
    for (int k = 0; k < MEASURED; k++) {
        if (!(v[k] > 0)) return -1;
        measured[coll][a][k] = v[k];
    }
    return 0;
}

/* One line of a tuning file; 0 when understood. */
static int parse_tuning_line(const char *line, double ab[5], int topology[2],
                             measured_table measured) {
    char name[64];
    int used = 0;
    if (sscanf(line, "%63s %n", name, &used) != 1) return -1;
    const char *rest = line + used;
    if (!strcmp(name, "topology")) return sscanf(rest, "%d %d", &topology[0], &topology[1]) == 2 ? 0 : -1;
    for (int k = 0; k < 5; k++)
        if (!strcmp(name, tuning_names[k])) return sscanf(rest, "%lf", &ab[k]) == 1 && ab[k] > 0 ? 0 : -1;
    int coll = measured_line_coll(name);
    return coll >= 0 ? parse_measured_line(coll, rest, measured) : -1;
}

static ak_status read_tuning(ak_comm *c, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return AK_FAIL(AK_ERR_IO, "AK_COMM_TUNING: cannot open '%s'", path);
    const ak__link_model *in = &c->links[AK_COMM_TP_INTRA], *out = &c->links[AK_COMM_TP_INTER];
    double ab[5] = {ak__link_alpha(in), ak__link_beta_gbps(in), ak__link_alpha(out),
                    ak__link_beta_gbps(out), c->host_gbps};
    measured_table measured = {{{0}}};
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
                         "host_gbps, or 'topology RANKS HOSTS', or 'COLL_us ALGO' and 4 positive times "
                         "(COLL: allreduce, broadcast, reduce, allgather, reduce_scatter)",
                         path, lineno);
    }
    fclose(f);
    c->links[AK_COMM_TP_INTRA] = ak__link_alpha_beta(ab[0], ab[1]);
    c->links[AK_COMM_TP_INTER] = ak__link_alpha_beta(ab[2], ab[3]);
    c->host_gbps = ab[4];
    if (topology[0] == c->size && topology[1] == c->host_count)
        memcpy(c->algo_measured_us, measured, sizeof measured);
    return st;
}

ak_status ak__comm_model_save(const ak_comm *c, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return AK_FAIL(AK_ERR_IO, "cannot write the tuning file '%s'", path);
    fprintf(f, "# accelkit collective cost model (AK_COMM_TUNING): %d ranks on %d hosts\n",
            c->size, c->host_count);
    const ak__link_model *in = &c->links[AK_COMM_TP_INTRA], *out = &c->links[AK_COMM_TP_INTER];
    double ab[4] = {ak__link_alpha(in), ak__link_beta_gbps(in), ak__link_alpha(out),
                    ak__link_beta_gbps(out)};
    for (int k = 0; k < 4; k++) fprintf(f, "%s %.6g\n", tuning_names[k], isfinite(ab[k]) ? ab[k] : 1e6);
    if (isfinite(c->host_gbps)) fprintf(f, "%s %.6g\n", tuning_names[4], c->host_gbps);
    fprintf(f, "topology %d %d\n", c->size, c->host_count);
    for (int k = 0; k < AK_COMM_COLL_COUNT_; k++)
        for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++) {
            const double *m = c->algo_measured_us[k][a];
            if (m[0] > 0)
                fprintf(f, "%s_us %s %.6g %.6g %.6g %.6g\n", ak__comm_coll_name((ak_comm_coll)k),
                        ak__comm_algo_short_name((ak_comm_algo)a), m[0], m[1], m[2], m[3]);
        }
    return fclose(f) == 0 ? AK_OK : AK_FAIL(AK_ERR_IO, "cannot write the tuning file '%s'", path);
}

/* ---- links: ping-pong between rank 0 and one peer per link class --------------------- */

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

#define CAL_LARGE ((size_t)1 << 20)
#define CAL_TAG 0xCA11B0A7ull

/* One-way time in µs of `bytes`: half the fastest of `reps` round trips (after one
 * warm-up). The fastest, because on shared vCPUs a round trip that meets a descheduled
 * peer measures the neighbours, not the link: averaged, the 1 MiB point moved between
 * 0.6 and 2.9 GB/s from one communicator to the next on the project's VM. */
static ak_status pingpong(ak_comm *c, int peer, int initiator, void *buf, size_t bytes,
                          int reps, double *one_way_us) {
    double best = INFINITY;
    for (int r = -1; r < reps; r++) {
        uint64_t t0 = ak_now_ns();
        for (int leg = 0; leg < 2; leg++) {
            ak__p2p op;
            if ((leg == 0) == initiator) ak__p2p_init_send(&op, peer, buf, bytes, CAL_TAG ^ bytes);
            else ak__p2p_init_recv(&op, peer, buf, bytes, CAL_TAG ^ bytes);
            ak__p2p *ops[1] = {&op};
            AK_CHECK(ak__p2p_post(ak__comm_algo(c), &op));
            AK_CHECK(ak__p2p_wait(ak__comm_algo(c), ops, 1));
        }
        double us = (double)(ak_now_ns() - t0) / 1e3;
        if (r >= 0 && us < best) best = us;
    }
    *one_way_us = best / 2;
    return AK_OK;
}

/* One-way times at the model's sizes; both ends run it, rank 0 keeps the result. */
static ak_status measure_link(ak_comm *c, int peer, ak__link_model *out) {
    void *buf;
    AK_CHECK(ak__comm_scratch(c, CAL_LARGE, &buf));
    memset(buf, 0, CAL_LARGE);
    static const int reps[AK_LINK_POINTS] = {20, 8, 5};
    for (int i = 0; i < AK_LINK_POINTS; i++) {
        out->bytes[i] = link_sizes[i];
        AK_CHECK(pingpong(c, peer, c->rank == 0, buf, (size_t)link_sizes[i], reps[i], &out->us[i]));
    }
    return AK_OK;
}

/* All ranks of each host send a message to their right neighbour on the host and receive
 * from their left at once, HOST_ROUNDS times back to back after a barrier (every host at
 * the same time): the host's aggregate rate in GB/s, from the slowest rank of the host
 * (a rank whose neighbour started early finds its data waiting). The messages add up to
 * HOST_SET per round (2-8 MiB each), because the rate depends on the working set: 4
 * ranks on 2 vCPUs over loopback TCP moved 5-8 GB/s together with 1 MiB messages (in
 * cache) but 3.4-4.8 with 4-16 MiB, which is what large collectives see (a 16 MiB
 * binomial broadcast moved its 3 S at 3.7 GB/s). INFINITY alone on a host. */
#define HOST_ROUNDS 2
#define HOST_SET ((size_t)32 << 20) /* all ranks' messages of a round together */
static ak_status measure_host(ak_comm *c, double *gbps) {
    int l = c->local_size, me = c->local_index_of[c->rank];
    *gbps = INFINITY;
    if (l < 2) return AK_OK;
    ak__group host = {c->same_host_ranks, l, me};
    size_t bytes = HOST_SET / (size_t)l;
    bytes = bytes < ((size_t)2 << 20) ? (size_t)2 << 20 : bytes > ((size_t)8 << 20) ? (size_t)8 << 20 : bytes;
    char *buf;
    AK_CHECK(ak_alloc(2 * bytes, (void **)&buf));
    memset(buf, 0, 2 * bytes);
    int right = c->same_host_ranks[(me + 1) % l], left = c->same_host_ranks[(me + l - 1) % l];
    ak_status st = ak__barrier_dissemination(ak__comm_algo(c), &host, CAL_TAG ^ 0x5);
    uint64_t t0 = ak_now_ns();
    for (int r = 0; r < HOST_ROUNDS && st == AK_OK; r++)
        st = ak__p2p_sendrecv(ak__comm_algo(c), right, buf, bytes, left, buf + bytes, bytes, CAL_TAG ^ 0x6);
    double us = (double)(ak_now_ns() - t0) / 1e3 / HOST_ROUNDS;
    ak_free(buf);
    AK_CHECK(st);
    AK_CHECK(ak__allreduce_recursive_doubling(ak__comm_algo(c), &host, &us, 1, AK_DTYPE_F64, AK_REDUCE_MAX,
                                              CAL_TAG ^ 0x7));
    *gbps = (double)l * (double)bytes / (us * 1e3);
    return AK_OK;
}

/* What rank 0 measured, published to every rank so all choose the same algorithms. */
typedef struct model_params {
    ak__link_model links[AK_COMM_TP_COUNT];
    double host_gbps;
} model_params;

/* Measures each link class in use (rank 0 with one peer of the class; a split keeps its
 * parent's, the same links) and each host's aggregate rate (every rank: it depends on
 * how many ranks share the host); rank 0 publishes its figures. */
static ak_status calibrate_links(ak_comm *c, const ak_comm *parent) {
    model_params p;
    memcpy(p.links, parent ? parent->links : c->links, sizeof p.links);
    for (int cls = 0; cls < AK_COMM_TP_COUNT && !parent; cls++) {
        int peer = -1;
        for (int r = 1; r < c->size && peer < 0; r++)
            if ((c->host_of[r] == c->host_of[0]) == (cls == AK_COMM_TP_INTRA)) peer = r;
        if (peer < 0) continue;
        if (c->rank == 0) AK_CHECK(measure_link(c, peer, &p.links[cls]));
        else if (c->rank == peer) AK_CHECK(measure_link(c, 0, &p.links[cls]));
    }
    AK_CHECK(measure_host(c, &p.host_gbps));
    char key[AK_STORE_MAX_KEY + 1];
    snprintf(key, sizeof key, "%s/model", c->prefix);
    size_t len = sizeof p;
    if (c->rank == 0) AK_CHECK(ak__store_set(c->store, key, &p, sizeof p));
    else AK_CHECK(ak__store_get(c->store, key, &p, sizeof p, &len, c->config.timeout_ms));
    if (len != sizeof p)
        return AK_FAIL(AK_ERR_REMOTE, "comm: cost-model parameters from rank 0 have %zu bytes, "
                       "expected %zu", len, sizeof p);
    memcpy(c->links, p.links, sizeof c->links);
    c->host_gbps = p.host_gbps;
    return AK_OK;
}

/* ---- algorithms: each timed at the measured sizes ------------------------------------ */

/* The model has a formula for it here (hierarchical needs hosts with ≥ 2 ranks each,
 * recursive halving a power-of-two group, and each collective has its own algorithms). */
static int algo_runs_here(const ak_comm *c, int coll, int a) {
    return isfinite(ak__comm_formula_us(c, (ak_comm_coll)coll, (ak_comm_algo)a, 8));
}

/* One call of `coll` moving `bytes` (as ak_comm_choose_coll_algo counts them) through the
 * operations layer with algorithm a, so the time includes what a real call pays (the
 * reduce's work copy, the reduce-scatter's result copy). f32 sums, root 0; allgather
 * moves bytes (u8), at least one per rank. */
static ak_status run_measured(ak_comm *c, int coll, ak_comm_algo a, size_t bytes, void *x, void *y) {
    size_t floats = bytes / sizeof(float), per_rank = floats / (size_t)c->size;
    ak__coll k = {.kind = AK_COLL_ALLREDUCE, .sendbuf = AK_IN_PLACE, .recvbuf = x,
                  .count = floats, .dtype = AK_DTYPE_F32, .op = AK_REDUCE_SUM, .root = 0};
    switch (coll) {
    case AK_COMM_COLL_BROADCAST: k.kind = AK_COLL_BROADCAST, k.sendbuf = x; break;
    case AK_COMM_COLL_REDUCE: k.kind = AK_COLL_REDUCE, k.sendbuf = x, k.recvbuf = y; break;
    case AK_COMM_COLL_ALLGATHER:
        k.kind = AK_COLL_ALLGATHER, k.dtype = AK_DTYPE_U8;
        k.count = bytes / (size_t)c->size ? bytes / (size_t)c->size : 1;
        break;
    case AK_COMM_COLL_REDUCE_SCATTER:
        k.kind = AK_COLL_REDUCE_SCATTER, k.count = per_rank ? per_rank : 1;
        break;
    default: break;
    }
    return ak__coll_run_algo(c, &k, a);
}

static void log_measured(const ak_comm *c) {
    for (int k = 0; k < AK_COMM_COLL_COUNT_; k++)
        for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++) {
            const double *t = c->algo_measured_us[k][a];
            if (t[0] > 0)
                AK_LOG_INFO(AK_SUBSYS_COMM, "cost model: %s %s measured %.1f / %.1f / %.1f / "
                            "%.1f µs at 8 B / 4 / 32 / 256 KiB",
                            ak_comm_algo_name((ak_comm_algo)a), ak__comm_coll_name((ak_comm_coll)k),
                            t[0], t[1], t[2], t[3]);
        }
}

/* Times every algorithm of every chosen collective that can run here at 8 B, 4, 32 and
 * 256 KiB: their real cost in the latency-bound range (steps, phases, polling two
 * transports, a shaper's burst), which a per-link model misjudges. At each size they
 * take turns, one run each per round, so they meet the same link state: one after
 * another, the first ran on a shaper's full token bucket and the next ones on what the
 * earlier 256 KiB runs left of it (on 1 Gbit/s tbf links the tree allreduce measured
 * 272 µs at 32 KiB that way, against 72 µs in a sweep, and lost to the ring). The
 * slowest rank's medians count, agreed through a max-allreduce, so every rank ends with
 * the same table and the same choices. */
#define ALGOS (AK_COMM_ALGO_COUNT_ - AK_COMM_ALGO_RING)
static ak_status measure_algorithms(ak_comm *c) {
    double reps[AK_COMM_COLL_COUNT_][AK_COMM_ALGO_COUNT_][MEASURED_REPS];
    void *x = NULL, *y = NULL;
    size_t top = ak__comm_measured_bytes[MEASURED - 1];
    ak_status st = ak_alloc(top, &x);
    if (st == AK_OK) st = ak_alloc(top, &y);
    if (st == AK_OK) memset(x, 0, top), memset(y, 0, top);
    for (int s = 0; s < MEASURED && st == AK_OK; s++) {
        for (int r = -1; r < MEASURED_REPS && st == AK_OK; r++) /* round -1: warm-up */
            for (int k = 0; k < AK_COMM_COLL_COUNT_ && st == AK_OK; k++)
                for (int i = 0; i < ALGOS && st == AK_OK; i++) {
                    /* each round starts at another algorithm: none always meets the link
                     * state the previous collective left */
                    int a = AK_COMM_ALGO_RING + (i + r + 1) % ALGOS;
                    if (!algo_runs_here(c, k, a)) continue;
                    uint64_t t0 = ak_now_ns();
                    st = run_measured(c, k, (ak_comm_algo)a, ak__comm_measured_bytes[s], x, y);
                    if (r >= 0) reps[k][a][r] = (double)(ak_now_ns() - t0) / 1e3;
                }
        /* medians: one descheduled run must not decide */
        for (int k = 0; k < AK_COMM_COLL_COUNT_ && st == AK_OK; k++)
            for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++)
                if (algo_runs_here(c, k, a))
                    c->algo_measured_us[k][a][s] = median(reps[k][a], MEASURED_REPS);
    }
    ak_free(y);
    ak_free(x);
    AK_CHECK(st);
    ak__group g = {c->all_ranks, c->size, c->rank};
    size_t n = sizeof c->algo_measured_us / sizeof(double);
    uint64_t tag = ak__comm_next_tag(c, 0x7b, n, AK_DTYPE_F64, AK_REDUCE_MAX, -1);
    AK_CHECK(ak__allreduce_recursive_doubling(ak__comm_algo(c), &g, c->algo_measured_us, n, AK_DTYPE_F64,
                                              AK_REDUCE_MAX, tag));
    log_measured(c);
    return AK_OK;
}

ak_status ak__comm_model_init(ak_comm *c, int threads_of_one_process, const ak_comm *parent,
                              int parent_topology) {
    c->links[AK_COMM_TP_INTRA] = threads_of_one_process ? DEFAULT_MEM : DEFAULT_SHM;
    c->links[AK_COMM_TP_INTER] = DEFAULT_TCP;
    c->host_gbps = INFINITY;
    if (c->config.transport == AK_COMM_TRANSPORT_TCP) c->links[AK_COMM_TP_INTRA] = DEFAULT_TCP;
    if (c->config.tuning_file) return read_tuning(c, c->config.tuning_file);
    /* threads of one process keep the defaults: their world is one host of copies */
    if (threads_of_one_process || c->size == 1) return AK_OK;
    uint64_t t0 = ak_now_ns();
    if (parent && parent_topology) { /* the parent's ranks in its order: its whole model */
        memcpy(c->links, parent->links, sizeof c->links);
        c->host_gbps = parent->host_gbps;
        memcpy(c->algo_measured_us, parent->algo_measured_us, sizeof c->algo_measured_us);
        return AK_OK;
    }
    AK_CHECK(calibrate_links(c, parent));
    uint64_t t1 = ak_now_ns();
    AK_CHECK(measure_algorithms(c));
    const ak__link_model *in = &c->links[AK_COMM_TP_INTRA], *out = &c->links[AK_COMM_TP_INTER];
    AK_LOG_INFO(AK_SUBSYS_COMM, "cost model: intra α %.1f µs β %.2f GB/s, inter α %.1f µs "
                "β %.2f GB/s, a host's ranks together %.2f GB/s; links measured in %.0f ms, "
                "algorithms in %.0f ms", ak__link_alpha(in), ak__link_beta_gbps(in),
                ak__link_alpha(out), ak__link_beta_gbps(out), c->host_gbps,
                (double)(t1 - t0) / 1e6, (double)(ak_now_ns() - t1) / 1e6);
    if (c->rank == 0) ak__comm_model_log(c);
    return AK_OK;
}
