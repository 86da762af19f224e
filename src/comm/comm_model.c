/* α–β cost model: the formulas per (collective, algorithm) and the choice (see
 * comm_model.h; the measurements live in comm_calibrate.c). */
#include "comm/comm_model.h"

#include <math.h>
#include <string.h>

#include "comm/algo/algo.h"
#include "core/check.h"
#include "core/params.h"

static const char *const algo_names[AK_COMM_ALGO_COUNT_] = {"auto", "ring", "rd",    "tree",
                                                             "hier", "direct", "hier_pipe"};
static const char *const algo_long_names[AK_COMM_ALGO_COUNT_] = {
    "auto", "ring", "recursive_doubling", "tree", "hierarchical", "shm_direct",
    "hierarchical_pipelined"};
static const char *const coll_names[AK_COMM_COLL_COUNT_] = {"allreduce", "broadcast", "reduce",
                                                            "allgather", "reduce_scatter"};

const char *ak_comm_algo_name(ak_comm_algo algo) {
    return (unsigned)algo < AK_COMM_ALGO_COUNT_ ? algo_long_names[algo] : "unknown";
}

const char *ak__comm_algo_short_name(ak_comm_algo algo) {
    return (unsigned)algo < AK_COMM_ALGO_COUNT_ ? algo_names[algo] : "unknown";
}

const char *ak__comm_coll_name(ak_comm_coll coll) {
    return (unsigned)coll < AK_COMM_COLL_COUNT_ ? coll_names[coll] : "unknown";
}

ak_status ak__comm_algo_parse(const char *text, ak_comm_algo *out) {
    for (int i = 0; i < AK_COMM_ALGO_COUNT_; i++)
        if (strcmp(text, algo_names[i]) == 0 || strcmp(text, algo_long_names[i]) == 0) {
            *out = (ak_comm_algo)i;
            return AK_OK;
        }
    return AK_FAIL(AK_ERR_INVALID_ARG,
                   "algorithm '%s' is not one of auto, ring, rd, tree, hier, hier_pipe, direct",
                   text);
}

/* ---- links ------------------------------------------------------------------------------ */

/* Sizes the link model is measured at: latency, a medium message, a large one. */
static const double link_sizes[AK_LINK_POINTS] = {8, 65536, 1048576};

ak__link_model ak__link_alpha_beta(double alpha_us, double beta_gbps) {
    ak__link_model l;
    for (int i = 0; i < AK_LINK_POINTS; i++) {
        l.bytes[i] = link_sizes[i];
        l.us[i] = alpha_us + link_sizes[i] / (beta_gbps * 1e3);
    }
    return l;
}

double ak__link_alpha(const ak__link_model *l) { return l->us[0]; }

double ak__link_beta_gbps(const ak__link_model *l) {
    double dt = l->us[AK_LINK_POINTS - 1] - l->us[0];
    return dt > 0 ? (l->bytes[AK_LINK_POINTS - 1] - l->bytes[0]) / (dt * 1e3) : INFINITY;
}

/* One-way time of a `bytes` message: linear between measured points, the last
 * segment's slope beyond them, the first point's time below (latency floor). */
static double link_time(const ak__link_model *l, double bytes) {
    if (bytes <= l->bytes[0]) return l->us[0];
    int i = 1;
    while (i < AK_LINK_POINTS - 1 && bytes > l->bytes[i]) i++;
    double slope = (l->us[i] - l->us[i - 1]) / (l->bytes[i] - l->bytes[i - 1]);
    return l->us[i - 1] + (bytes - l->bytes[i - 1]) * (slope > 0 ? slope : 0);
}

/* Time of `steps` messages of `bytes` each over link l, in µs. */
static double link_us(const ak__link_model *l, double steps, double bytes) {
    return steps * link_time(l, bytes);
}

/* ---- topology ----------------------------------------------------------------------------- */

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

/* Every ring step waits for its slowest edge: a host link when there are hosts. */
static const ak__link_model *slowest_link(const ak_comm *c) {
    return &c->links[c->host_count > 1 ? AK_COMM_TP_INTER : AK_COMM_TP_INTRA];
}

/* Time of one `bytes` message per rank between partners at distance d: at d ≥ l every
 * rank of a host crosses the host link at once, so l flows share it. */
static double pair_step_us(const ak_comm *c, int d, double bytes) {
    const ak__link_model *link = step_link(c, d);
    int l = uniform_local(c);
    int flows = link == &c->links[AK_COMM_TP_INTER] && l > 0 ? l : 1;
    return link_us(link, 1, bytes * flows);
}

/* A local copy (Bruck's reordering), at memory speed: 2 vCPU VMs copy ~15 GB/s. */
#define LOCAL_COPY_GBPS 10.0

/* Reductions of whole buffers that run after their exchange, not overlapped with the
 * wire (the ring's and the hierarchical allreduce's are pipelined segment by segment and
 * hide behind it): they decide between algorithms that move the same bytes. On 2 ranks
 * recursive doubling and the ring both send S per rank, the formulas' growth from the
 * largest measured size was the same, and noise at 256 KiB picked recursive doubling
 * for 64 MiB at 1.4 GB/s busbw against the ring's 2.4 (TCP loopback). A reduction
 * reads two buffers and writes one: ~14 GB/s of S on one core here, less with the other
 * core busy moving bytes. */
#define REDUCE_GBPS 8.0

/* ⌈log2 n⌉: the binomial tree's levels, each a reduction of S at its parent. */
static int ceil_log2(int n) {
    int k = 0;
    while ((1 << k) < n) k++;
    return k;
}

/* ⌊log2 n⌋: recursive doubling's rounds among p = 2^⌊log2 n⌋ ranks. */
static int floor_log2(int n) {
    int k = 0;
    while ((2 << k) <= n) k++;
    return k;
}

/* Whole-buffer reductions one after another on the critical path: recursive doubling's
 * rounds (and the fold), the binomial reduce's levels. They come on top of the host
 * bound too: with both algorithms held at the bytes the host's cores can move, the
 * measured 256 KiB times alone decided, and recursive doubling won 16 and 64 MiB. */
static double reductions_us(const ak_comm *c, ak_comm_coll coll, ak_comm_algo algo, double s) {
    double count = 0;
    if (coll == AK_COMM_COLL_ALLREDUCE && algo == AK_COMM_ALGO_RECURSIVE_DOUBLING) {
        int rounds = floor_log2(c->size);
        count = rounds + ((1 << rounds) != c->size); /* the fold's reduction */
    } else if ((coll == AK_COMM_COLL_ALLREDUCE || coll == AK_COMM_COLL_REDUCE) &&
               algo == AK_COMM_ALGO_TREE) {
        count = ceil_log2(c->size);
    }
    return count * s / (REDUCE_GBPS * 1e3);
}

/* ---- formulas (S = bytes as ak_comm_choose_coll_algo counts them, n ranks) ------------ */

/* Recursive-doubling allreduce: log2 p exchanges of S, plus two when n ≠ p = 2^⌊log2 n⌋
 * (fold and unfold). */
static double rd_allreduce_us(const ak_comm *c, double s) {
    int p = 1 << floor_log2(c->size);
    double t = 0;
    for (int d = 1; d < p; d *= 2) t += pair_step_us(c, d, s);
    if (p != c->size) t += link_us(step_link(c, c->size), 2, s);
    return t;
}

/* Binomial reduce: a step of S per distance 1, 2, 4, … < n, each after the one before
 * (the reductions that follow each: reductions_us). */
static double binomial_us(const ak_comm *c, double s) {
    double t = 0;
    for (int d = 1; d < c->size; d *= 2) t += link_us(step_link(c, d), 1, s);
    return t;
}

/* Binomial broadcast, pipelined in segments: the chain root → … → leaf streams, so the
 * slowest hop carries S and every other hop adds one segment; but the root's children
 * across hosts share its host link (one rank per host: ⌈log2 n⌉ · S through it). */
static double binomial_bcast_us(const ak_comm *c, double s) {
    double seg = s < (double)AK_BCAST_SEG_BYTES ? s : (double)AK_BCAST_SEG_BYTES;
    double hops = 0, worst = 0, root_out = 0;
    for (int d = 1; d < c->size; d *= 2) {
        const ak__link_model *link = step_link(c, d);
        double full = link_us(link, 1, s), part = link_us(link, 1, seg);
        hops += part;
        if (full - part > worst) worst = full - part;
        if (link == &c->links[AK_COMM_TP_INTER]) root_out += full;
    }
    return hops + worst > root_out ? hops + worst : root_out;
}

/* Recursive doubling allgather / recursive halving reduce-scatter (n a power of two):
 * at distance m the message is m blocks, S · m/n. */
static double doubling_us(const ak_comm *c, double s) {
    double t = 0;
    for (int m = 1; m < c->size; m *= 2) t += pair_step_us(c, m, s * m / c->size);
    return t;
}

/* Bruck allgather: at distance d, min(d, n − d) blocks to the rank d below; with several
 * hosts some pairs of every round cross a host link (min(d, l) flows at once), and the
 * result is reordered by one local copy of S. */
static double bruck_us(const ak_comm *c, double s) {
    int n = c->size, l = uniform_local(c), cross = c->host_count > 1;
    double t = s / (LOCAL_COPY_GBPS * 1e3);
    for (int d = 1; d < n; d *= 2) {
        int k = d < n - d ? d : n - d, flows = cross && l > 0 ? (d < l ? d : l) : 1;
        t += link_us(slowest_link(c), 1, s * k / n * flows);
    }
    return t;
}

/* Binomial scatter of n blocks: the root's sends, largest subtree first (its link is the
 * bottleneck, so they add up): the child at distance m gets min(m, n − m) blocks. */
static double scatter_us(const ak_comm *c, double s) {
    int n = c->size, p = 1;
    while (p < n) p *= 2;
    double t = 0;
    for (int m = p / 2; m >= 1; m /= 2) {
        int k = m < n - m ? m : n - m;
        t += link_us(step_link(c, m), 1, s * k / n);
    }
    return t;
}

/* n − 1 ring steps of one block (S/n) each. */
static double ring_pass_us(const ak_comm *c, double s) {
    return link_us(slowest_link(c), c->size - 1, s / c->size);
}

static double hierarchical_us(const ak_comm *c, double s) {
    int h = c->host_count, l = uniform_local(c);
    if (h < 2 || l < 2) return INFINITY;
    const ak__link_model *in = &c->links[AK_COMM_TP_INTRA], *out = &c->links[AK_COMM_TP_INTER];
    /* the l inter-host rings run at once and share each host link */
    return 2.0 * link_us(in, l - 1, s / l) + link_us(out, 2.0 * (h - 1), s / h);
}

/* ---- the pipelined hierarchical allreduce: chunk size and time --------------------- */

/* Starting its helper thread (once per call) and handing each chunk from one thread
 * to the other and back (a condition variable each way, a wake-up when the other
 * sleeps). Chunk sizes from 256 KiB to 4 MiB measured the same on the emulated 2 × 2
 * hosts at 1 Gbit/s (562 ms for 64 MiB): these keep the model off needlessly many. */
#define PIPE_THREAD_US 40.0
#define PIPE_HANDOFF_US 20.0
/* The chunks it tries, in bytes: 256 KiB … 16 MiB, powers of two. Below 256 KiB the
 * rings' own segments (64–256 KiB) would be cut further and α would dominate. */
#define PIPE_CHUNK_MIN ((size_t)256 << 10)
#define PIPE_CHUNK_MAX ((size_t)16 << 20)

/* One chunk's work on each thread of the pipelined algorithms (chunk = bytes of all
 * ranks' data in it). Allreduce: the caller reduce-scatters and allgathers it over the
 * host ((l−1)/l of it each), the helper runs the inter-host ring allreduce of its 1/l
 * (l flows share the link: 2(h−1) steps of chunk/h). Reduce-scatter and allgather: the
 * caller stages (or unpacks) the chunk by a local copy and runs one ring over the host,
 * the helper one ring across hosts (h−1 steps of chunk/h on the link). */
static void hier_pipe_stages(const ak_comm *c, ak_comm_coll coll, double chunk, double *caller,
                             double *helper) {
    int h = c->host_count, l = uniform_local(c);
    const ak__link_model *in = &c->links[AK_COMM_TP_INTRA], *out = &c->links[AK_COMM_TP_INTER];
    double a = link_us(in, l - 1, chunk / l);
    if (coll == AK_COMM_COLL_ALLREDUCE) {
        *caller = 2 * a;
        *helper = link_us(out, 2.0 * (h - 1), chunk / h);
    } else {
        *caller = a + chunk / (LOCAL_COPY_GBPS * 1e3);
        *helper = link_us(out, h - 1.0, chunk / h);
    }
}

/* Time of s bytes in chunks of `chunk`: the first chunk's caller work and the last
 * one's helper work stand alone, in between the slower thread sets the pace:
 * caller + helper + (K − 1) · max(caller, helper), plus the thread and hand-offs. */
static double hier_pipe_chunk_us(const ak_comm *c, ak_comm_coll coll, double s, double chunk) {
    double k = ceil(s / chunk), caller, helper;
    if (k <= 1) return INFINITY; /* one chunk is the unpipelined algorithm */
    hier_pipe_stages(c, coll, chunk, &caller, &helper);
    return caller + helper + (k - 1) * fmax(caller, helper) + PIPE_THREAD_US + k * PIPE_HANDOFF_US;
}

/* The model's chunk for s bytes: the fastest of the candidates (the larger on a tie);
 * the largest when none gives two chunks. */
static size_t hier_pipe_model_chunk(const ak_comm *c, ak_comm_coll coll, double s) {
    size_t best = PIPE_CHUNK_MAX;
    double best_us = INFINITY;
    for (size_t ch = PIPE_CHUNK_MAX; ch >= PIPE_CHUNK_MIN; ch /= 2) {
        double t = hier_pipe_chunk_us(c, coll, s, (double)ch);
        if (t < best_us) best_us = t, best = ch;
    }
    return best;
}

/* AK_COMM_HIER_CHUNK (bytes; validated when the library starts) overrides the model's
 * chunk, for measuring; 0 when unset. */
static size_t hier_pipe_forced_chunk(void) {
    return (size_t)ak__param_int(AK_PARAM_COMM_HIER_CHUNK);
}

size_t ak__comm_pipe_chunk(const ak_comm *c, ak_comm_coll coll, size_t bytes) {
    size_t forced = hier_pipe_forced_chunk();
    return forced ? forced : hier_pipe_model_chunk(c, coll, (double)bytes);
}

/* INFINITY where it does not pay: one host, one rank per host, or a single chunk (which
 * is the unpipelined schedule: the model picks another; forced, it still runs). */
static double hier_pipe_us(const ak_comm *c, ak_comm_coll coll, double s) {
    if (c->host_count < 2 || uniform_local(c) < 2) return INFINITY;
    return hier_pipe_chunk_us(c, coll, s, (double)ak__comm_pipe_chunk(c, coll, (size_t)s));
}

static double allreduce_us(const ak_comm *c, ak_comm_algo algo, double s) {
    switch (algo) {
    case AK_COMM_ALGO_RING: return 2 * ring_pass_us(c, s);
    case AK_COMM_ALGO_RECURSIVE_DOUBLING: return rd_allreduce_us(c, s);
    case AK_COMM_ALGO_TREE: return binomial_us(c, s) + binomial_bcast_us(c, s); /* reduce, broadcast */
    case AK_COMM_ALGO_HIERARCHICAL: return hierarchical_us(c, s);
    case AK_COMM_ALGO_HIER_PIPE: return hier_pipe_us(c, AK_COMM_COLL_ALLREDUCE, s);
    default: return INFINITY;
    }
}

static int power_of_two(int n) { return (n & (n - 1)) == 0; }

/* The algorithms of the other collectives: RING (bandwidth-optimal) and one log-step
 * algorithm, TREE for the rooted ones and RECURSIVE_DOUBLING for the others. */
static double other_us(const ak_comm *c, ak_comm_coll coll, ak_comm_algo algo, double s) {
    int ring = algo == AK_COMM_ALGO_RING;
    if (algo == AK_COMM_ALGO_HIER_PIPE)
        return coll == AK_COMM_COLL_ALLGATHER || coll == AK_COMM_COLL_REDUCE_SCATTER
                   ? hier_pipe_us(c, coll, s)
                   : INFINITY;
    switch (coll) {
    case AK_COMM_COLL_BROADCAST:
        if (ring) return scatter_us(c, s) + ring_pass_us(c, s);
        return algo == AK_COMM_ALGO_TREE ? binomial_bcast_us(c, s) : INFINITY;
    case AK_COMM_COLL_REDUCE: /* the gather: n − 1 blocks into the root over its link */
        if (ring) return ring_pass_us(c, s) + link_us(slowest_link(c), 1, s * (c->size - 1) / c->size);
        return algo == AK_COMM_ALGO_TREE ? binomial_us(c, s) : INFINITY;
    case AK_COMM_COLL_ALLGATHER:
        if (ring) return ring_pass_us(c, s);
        if (algo != AK_COMM_ALGO_RECURSIVE_DOUBLING) return INFINITY;
        return power_of_two(c->size) ? doubling_us(c, s) : bruck_us(c, s);
    case AK_COMM_COLL_REDUCE_SCATTER:
        if (ring) return ring_pass_us(c, s);
        return algo == AK_COMM_ALGO_RECURSIVE_DOUBLING && power_of_two(c->size) ? doubling_us(c, s)
                                                                                : INFINITY;
    default: return INFINITY;
    }
}

/* ---- what the ranks of a host send together -------------------------------------------- */

/* Blocks (of n) a binomial scatter sends in all: every non-root v receives its subtree's. */
static double scatter_blocks(int n) {
    double blocks = 0;
    for (int v = 1; v < n; v++) {
        int low = v & -v; /* v's subtree is [v, v + lowest set bit) */
        blocks += (v + low < n ? v + low : n) - v;
    }
    return blocks;
}

/* Bytes all ranks send in one call, in units of S. */
static double sent_in_all(const ak_comm *c, ak_comm_coll coll, ak_comm_algo algo) {
    int n = c->size, rounds = floor_log2(n), p = 1 << rounds;
    switch (coll) {
    case AK_COMM_COLL_ALLREDUCE: /* ring, tree and hierarchical: 2(n − 1) S */
        return algo == AK_COMM_ALGO_RECURSIVE_DOUBLING ? (double)p * rounds + 2.0 * (n - p)
                                                       : 2.0 * (n - 1);
    case AK_COMM_COLL_BROADCAST:
        return n - 1 + (algo == AK_COMM_ALGO_RING ? scatter_blocks(n) / n : 0);
    case AK_COMM_COLL_REDUCE:
        return n - 1 + (algo == AK_COMM_ALGO_RING ? (double)(n - 1) / n : 0);
    default: return n - 1; /* allgather, reduce_scatter: every algorithm */
    }
}

/* The host bound: the ranks of a host share its cores (and memory), so together they
 * move host_gbps whatever the links allow one flow; a call takes at least its bytes per
 * host at that rate. On 2 vCPUs with 4 ranks over loopback TCP this is what decides
 * large messages: the scatter + allgather broadcast sends 4 S where the binomial one
 * sends 3 S, and took 33.6 ms against 25.0 at 16 MiB, though its busiest link carries
 * 1.5 S against the binomial root's 2 S. Unmeasured (INFINITY): no bound. */
static double host_bound_us(const ak_comm *c, ak_comm_coll coll, ak_comm_algo algo, double s) {
    if (!isfinite(c->host_gbps) || c->host_gbps <= 0) return 0;
    return s * sent_in_all(c, coll, algo) / c->host_count / (c->host_gbps * 1e3);
}

/* ---- what one host link can carry, sustained ------------------------------------------ */

/* Bytes, in units of S, that the busiest host link carries in one direction during one
 * call, for h hosts of l ranks laid out host by host (n = h · l); 0 where not worked out
 * (a layout that is not uniform, log-step patterns when l is not a power of two: their
 * partners then straddle hosts unevenly), which bounds nothing. In the log-step patterns
 * the partner at distance d ≥ l is on another host and every rank of a host crosses at
 * once; a binomial tree crosses once per level d ≥ l, into (reduce) or out of (broadcast)
 * the root's host. Phases in one direction one after another add up. */
static double busiest_link_share(const ak_comm *c, ak_comm_coll coll, ak_comm_algo algo) {
    int h = c->host_count, l = uniform_local(c), n = c->size;
    if (h < 2 || l == 0) return 0;
    int ring = algo == AK_COMM_ALGO_RING, pow2 = power_of_two(n) && power_of_two(l);
    double ring_pass = (double)(n - 1) / n, off_host = (double)(n - l) / n;
    double levels = power_of_two(l) ? ceil_log2(h) : 0;
    double doubling = pow2 ? (double)l * (n - l) / n : 0; /* Σ over m = l … n/2 of l · m/n */
    switch (coll) {
    case AK_COMM_COLL_ALLREDUCE:
        if (ring) return 2 * ring_pass;
        if (algo == AK_COMM_ALGO_HIERARCHICAL || algo == AK_COMM_ALGO_HIER_PIPE)
            return 2.0 * (h - 1) / h;
        if (algo == AK_COMM_ALGO_TREE) return levels;
        return pow2 ? l * levels : 0; /* recursive doubling: l · S per far round */
    case AK_COMM_COLL_BROADCAST: /* scatter out of the root's host, then the ring */
        return ring ? off_host + ring_pass : levels;
    case AK_COMM_COLL_REDUCE: /* the ring, then the gather into the root's host */
        return ring ? ring_pass + off_host : levels;
    default: /* allgather, reduce_scatter: Bruck's pattern is not worked out */
        if (algo == AK_COMM_ALGO_HIER_PIPE) return (double)(h - 1) / h;
        return ring ? ring_pass : doubling;
    }
}

/* No call moves its bytes across a host link faster than the link's sustained rate. The
 * measured times can: calibration times single calls, and a rate limiter's burst lets a
 * few through at line speed (tbf's 256 KB on the emulated 1 Gbit/s links), so recursive
 * doubling measured fastest at 4 KiB where back to back it pushes 2 S through a host
 * link against the binomial tree's S (and takes 1.2× as long). */
static double host_link_floor_us(const ak_comm *c, ak_comm_coll coll, ak_comm_algo algo,
                                 double s) {
    double share = busiest_link_share(c, coll, algo);
    if (share <= 0) return 0;
    double beta = ak__link_beta_gbps(&c->links[AK_COMM_TP_INTER]);
    return isfinite(beta) && beta > 0 ? share * s / (beta * 1e3) : 0;
}

double ak__comm_formula_us(const ak_comm *c, ak_comm_coll coll, ak_comm_algo algo, size_t bytes) {
    double s = (double)bytes;
    double t = coll == AK_COMM_COLL_ALLREDUCE ? allreduce_us(c, algo, s) : other_us(c, coll, algo, s);
    if (!isfinite(t)) return t;
    if (c->size == 1) return 0; /* a group of one moves nothing */
    double host = host_bound_us(c, coll, algo, s);
    return (host > t ? host : t) + reductions_us(c, coll, algo, s);
}

/* Measured times where there are some: interpolated between the measured sizes, and
 * beyond the largest one the formula's growth added to its measured time. */
static double measured_us(const ak_comm *c, ak_comm_coll coll, ak_comm_algo algo, double b,
                          double formula) {
    const double *m = c->algo_measured_us[coll][algo];
    const size_t *at = ak__comm_measured_bytes;
    enum { LAST = AK_COMM_MEASURED_SIZES - 1 };
    if (m[0] <= 0) return formula;
    if (b <= (double)at[0]) return m[0];
    for (int k = 1; k <= LAST; k++) {
        double b0 = (double)at[k - 1], b1 = (double)at[k];
        if (b <= b1) return m[k - 1] + (b - b0) / (b1 - b0) * (m[k] - m[k - 1]);
    }
    return m[LAST] + formula - ak__comm_formula_us(c, coll, algo, at[LAST]);
}

/* The pipelined hierarchical algorithms are never timed (at the measured sizes they
 * are one chunk): each pays what its unpipelined counterpart's measured time at the
 * largest measured size exceeds that one's formula by (steps, polling, copies the
 * formula leaves out), so it is not preferred on a formula alone. The counterpart: the
 * hierarchical allreduce, the ring reduce-scatter and allgather. */
static double pipe_excess_us(const ak_comm *c, ak_comm_coll coll) {
    ak_comm_algo base = coll == AK_COMM_COLL_ALLREDUCE ? AK_COMM_ALGO_HIERARCHICAL : AK_COMM_ALGO_RING;
    const double *m = c->algo_measured_us[coll][base];
    size_t at = ak__comm_measured_bytes[AK_COMM_MEASURED_SIZES - 1];
    if (m[AK_COMM_MEASURED_SIZES - 1] <= 0) return 0;
    double f = ak__comm_formula_us(c, coll, base, at);
    return isfinite(f) ? fmax(0, m[AK_COMM_MEASURED_SIZES - 1] - f) : 0;
}

/* The measured (or formula) time, never below what the host links can carry. */
double ak__comm_model_us(const ak_comm *c, ak_comm_coll coll, ak_comm_algo algo, size_t bytes) {
    double t = ak__comm_formula_us(c, coll, algo, bytes);
    if (!isfinite(t)) return t;
    double b = (double)bytes;
    if (algo == AK_COMM_ALGO_HIER_PIPE) t += pipe_excess_us(c, coll);
    return fmax(measured_us(c, coll, algo, b, t), host_link_floor_us(c, coll, algo, b));
}

/* ---- the choice --------------------------------------------------------------------------- */

/* Processes of one host can read each other's memory: the direct allreduce moves no
 * message at all, so it wins at every size (threads keep the ring over direct copies;
 * AK_COMM_TRANSPORT=tcp asks for sockets). */
static int shm_direct_possible(const ak_comm *c) {
    return c->host_count == 1 && !c->threads_local && c->size > 1 &&
           c->config.transport != AK_COMM_TRANSPORT_TCP;
}

static ak_comm_algo cheapest(const ak_comm *c, ak_comm_coll coll, size_t bytes) {
    ak_comm_algo best = coll == AK_COMM_COLL_BROADCAST || coll == AK_COMM_COLL_REDUCE
                            ? AK_COMM_ALGO_TREE
                            : AK_COMM_ALGO_RING;
    double best_us = INFINITY;
    for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++) {
        double t = ak__comm_model_us(c, coll, (ak_comm_algo)a, bytes);
        if (t < best_us) best_us = t, best = (ak_comm_algo)a;
    }
    return best;
}

/* Allreduce: forced algorithms run as they are (hierarchical on one host runs the flat
 * ring itself and says so), except shm direct where it cannot run (the ring). */
static ak_comm_algo pick_allreduce(const ak_comm *c, size_t bytes, ak_comm_algo forced) {
    if (forced == AK_COMM_ALGO_SHM_DIRECT && !shm_direct_possible(c)) return AK_COMM_ALGO_RING;
    if (forced != AK_COMM_ALGO_AUTO) return forced;
    if (shm_direct_possible(c)) return AK_COMM_ALGO_SHM_DIRECT;
    return cheapest(c, AK_COMM_COLL_ALLREDUCE, bytes);
}

/* A forced name for another collective: ring → its ring-based algorithm; rd and tree →
 * its log-step one; hier and direct are allreduce's alone (AUTO: none); hier_pipe is
 * handled before (reduce-scatter, allgather) or is allreduce's alone too. */
static ak_comm_algo forced_for(ak_comm_coll coll, ak_comm_algo forced) {
    if (forced == AK_COMM_ALGO_RING) return AK_COMM_ALGO_RING;
    if (forced != AK_COMM_ALGO_RECURSIVE_DOUBLING && forced != AK_COMM_ALGO_TREE)
        return AK_COMM_ALGO_AUTO;
    return coll == AK_COMM_COLL_BROADCAST || coll == AK_COMM_COLL_REDUCE
               ? AK_COMM_ALGO_TREE
               : AK_COMM_ALGO_RECURSIVE_DOUBLING;
}

ak_comm_algo ak__comm_pick(const ak_comm *c, ak_comm_coll coll, size_t bytes, ak_comm_algo want) {
    ak_comm_algo forced = want != AK_COMM_ALGO_AUTO ? want : c->config.algo;
    if (coll == AK_COMM_COLL_ALLREDUCE) return pick_allreduce(c, bytes, forced);
    /* like the allreduce's, the pipelined reduce-scatter and allgather run forced at any
     * size and layout (one chunk, one after another; the ring on unequal hosts) */
    if (forced == AK_COMM_ALGO_HIER_PIPE &&
        (coll == AK_COMM_COLL_REDUCE_SCATTER || coll == AK_COMM_COLL_ALLGATHER))
        return forced;
    if (forced == AK_COMM_ALGO_AUTO) return cheapest(c, coll, bytes);
    ak_comm_algo a = forced_for(coll, forced);
    if (a != AK_COMM_ALGO_AUTO && isfinite(ak__comm_formula_us(c, coll, a, bytes))) return a;
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "comm: %s has no %s algorithm for %d ranks: the cost "
                 "model chooses", ak_comm_algo_name(forced), coll_names[coll], c->size);
    return cheapest(c, coll, bytes);
}

void ak__comm_model_log(const ak_comm *c) {
    static const size_t at[5] = {8, 4096, 65536, 1 << 20, 16 << 20};
    for (int k = 0; k < AK_COMM_COLL_COUNT_; k++) {
        const char *pick[5];
        for (int i = 0; i < 5; i++) pick[i] = algo_names[cheapest(c, (ak_comm_coll)k, at[i])];
        AK_LOG_INFO(AK_SUBSYS_COMM, "cost model: %s at 8 B / 4 KiB / 64 KiB / 1 MiB / 16 MiB: "
                    "%s / %s / %s / %s / %s", coll_names[k], pick[0], pick[1], pick[2], pick[3],
                    pick[4]);
    }
}

ak_status ak_comm_choose_coll_algo(const ak_comm *c, ak_comm_coll coll, size_t bytes,
                                   ak_comm_algo *out) {
    AK_ARG_CHECK(c && out, "ak_comm_choose_coll_algo: NULL argument");
    AK_ARG_CHECK((unsigned)coll < AK_COMM_COLL_COUNT_,
                 "ak_comm_choose_coll_algo: collective %d is not one of AK_COMM_COLL_*", (int)coll);
    *out = ak__comm_pick(c, coll, bytes, AK_COMM_ALGO_AUTO);
    return AK_OK;
}

ak_status ak_comm_choose_algo(const ak_comm *c, size_t bytes, ak_comm_algo *out) {
    AK_ARG_CHECK(c && out, "ak_comm_choose_algo: NULL argument");
    return ak_comm_choose_coll_algo(c, AK_COMM_COLL_ALLREDUCE, bytes, out);
}
