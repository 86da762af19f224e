/* Test program for tests/comm/test_procs.sh and test_netns.sh: one rank of a world the
 * script starts.
 *   comm_rank sweep [small]         allreduce over counts {0,1,7,64,1000,1048577} × every
 *                                   dtype × sum/prod/min/max/avg, each in place and out of
 *                                   place, every element checked ("small": without 1048577)
 *   comm_rank colls [small]         reduce (root varying), broadcast, allgather, allgatherv
 *                                   (uneven, gaps), reduce_scatter over counts
 *                                   {0,1,7,64,1000,1048577} × every dtype × op where
 *                                   there is one, in and out of place, exact checks: with
 *                                   AK_COMM_ALGO=ring/rd, every algorithm the model picks
 *                                   among ("small": without 1048577)
 *   comm_rank ops                   every other operation, each in place and out of place
 *                                   where it has both, from every root, exact checks:
 *                                   reduce, broadcast, allgather(v), reduce_scatter,
 *                                   alltoall(v), gather, scatter, barrier, send/recv,
 *                                   split, and every async call with several in flight
 *   comm_rank kill RANK ITERS       allreduce in a loop; RANK kills itself (SIGKILL)
 *                                   after ITERS iterations
 *   comm_rank soak STOPFILE         allreduces 10 ms apart, every element checked, until
 *                                   STOPFILE exists (30 s at most); rank 0 first prints
 *                                   "store port P" (AK_MASTER_PORT) so test_auth_job.sh
 *                                   can send strangers to the store meanwhile
 *   comm_rank count                 allreduce whose count differs by rank
 *   comm_rank dtype                 allreduce whose dtype differs by rank
 * Exit: 0 success, 10 + ak_status of the first failure, 3 for a wrong result. Prints
 * the failure and how long it took to stderr. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelkit/comm.h"

static int failed(ak_comm *c, float *buf, ak_status st, uint64_t t0) {
    int rank = -1;
    ak_comm_rank(c, &rank);
    fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, ak_status_str(st),
            (double)(ak_now_ns() - t0) / 1e6, ak_last_error());
    ak_comm_free(c);
    free(buf);
    return 10 + (int)st;
}

/* ---- sweep: exact results from (rank, index) ------------------------------------- */

/* Small integers, so every dtype holds every sum/product exactly (i8 wraps alike). */
static double input(int rank, size_t i, ak_reduce_op op) {
    if (op == AK_REDUCE_PROD) return rank == (int)(i % 3) ? -2.0 : 1.0;
    return (double)((rank + 1) * (int)(i % 5 + 1));
}

static double expected(int n, size_t i, ak_reduce_op op, ak_dtype dt) {
    double base = (double)(i % 5 + 1);
    switch (op) {
    case AK_REDUCE_SUM: return base * n * (n + 1) / 2;
    case AK_REDUCE_PROD: return (int)(i % 3) < n ? -2.0 : 1.0;
    case AK_REDUCE_MIN: return base;
    case AK_REDUCE_MAX: return base * n;
    default: {
        double sum = base * n * (n + 1) / 2;
        /* integers: the sum wraps in the dtype first, then divides truncating */
        if (dt == AK_DTYPE_I8) sum = (int8_t)(int)sum;
        if (dt == AK_DTYPE_U8) sum = (uint8_t)(int)sum;
        return dt >= AK_DTYPE_I8 ? trunc(sum / n) : sum / n;
    }
    }
}

static void put(ak_dtype dt, void *b, size_t i, double v) {
    float f = (float)v;
    switch (dt) {
    case AK_DTYPE_F32: ((float *)b)[i] = f; break;
    case AK_DTYPE_F64: ((double *)b)[i] = v; break;
    case AK_DTYPE_F16: ak_f32_to_f16((uint16_t *)b + i, &f, 1); break;
    case AK_DTYPE_BF16: ak_f32_to_bf16((uint16_t *)b + i, &f, 1); break;
    case AK_DTYPE_I8: ((int8_t *)b)[i] = (int8_t)(int)v; break;
    case AK_DTYPE_U8: ((uint8_t *)b)[i] = (uint8_t)(int)v; break;
    case AK_DTYPE_I32: ((int32_t *)b)[i] = (int32_t)v; break;
    default: ((int64_t *)b)[i] = (int64_t)v; break;
    }
}

/* Inputs and results repeat every 15 elements (i % 5 and i % 3): write one period, then
 * double the filled prefix, so a million elements cost a few memcpys, not a million
 * conversions per call. */
#define PERIOD 15
static void fill(unsigned char *b, size_t count, size_t es, const unsigned char *period) {
    size_t n = count < PERIOD ? count : PERIOD;
    memcpy(b, period, n * es);
    while (n < count) {
        size_t k = n <= count - n ? n : count - n;
        memcpy(b + n * es, b, k * es);
        n += k;
    }
}

static int sweep_one(ak_comm *c, int rank, int n, size_t count, ak_dtype dt, ak_reduce_op op,
                     int in_place, unsigned char *in, unsigned char *out, unsigned char *want) {
    size_t es;
    ak_dtype_size(dt, &es);
    unsigned char pin[PERIOD * 8], pwant[PERIOD * 8];
    for (size_t i = 0; i < PERIOD; i++) {
        put(dt, pin, i, input(rank, i, op));
        put(dt, pwant, i, expected(n, i, op, dt));
    }
    fill(in, count, es, pin);
    fill(want, count, es, pwant);
    unsigned char *dst = in_place ? in : out;
    ak_status st = ak_comm_allreduce(c, in_place ? AK_IN_PLACE : in, dst, count, dt, op);
    if (st != AK_OK) {
        fprintf(stderr, "rank %d: %s count %zu %s: %s\n", rank, ak_dtype_name(dt), count,
                ak_reduce_op_name(op), ak_last_error());
        return 10 + (int)st;
    }
    if (memcmp(dst, want, count * es) != 0) {
        fprintf(stderr, "rank %d: wrong %s %s result, count %zu, %s\n", rank, ak_dtype_name(dt),
                ak_reduce_op_name(op), count, in_place ? "in place" : "out of place");
        return 3;
    }
    if (!in_place) { /* the input must come back untouched */
        fill(want, count, es, pin);
        if (memcmp(in, want, count * es) != 0) {
            fprintf(stderr, "rank %d: %s %s count %zu changed its sendbuf\n", rank,
                    ak_dtype_name(dt), ak_reduce_op_name(op), count);
            return 3;
        }
    }
    return 0;
}

/* Every (count, dtype, op), in place and out of place: 480 calls, 80 of them of ~1M
 * elements (8 ranks over TCP: about 2 s on 2 cores), which "small" leaves out. */
static int sweep(ak_comm *c, int rank, int n, int small) {
    static const size_t counts[] = {0, 1, 7, 64, 1000, 1048577};
    size_t ncounts = small ? 5 : 6, max = 1048577 * 8;
    unsigned char *in = malloc(max), *out = malloc(max), *want = malloc(max);
    int rc = in && out && want ? 0 : 2;
    for (size_t k = 0; k < ncounts && !rc; k++)
        for (int dt = 0; dt < AK_DTYPE_COUNT_ && !rc; dt++)
            for (int op = 0; op < AK_REDUCE_COUNT_ && !rc; op++)
                for (int ip = 0; ip < 2 && !rc; ip++)
                    rc = sweep_one(c, rank, n, counts[k], (ak_dtype)dt, (ak_reduce_op)op, ip,
                                   in, out, want);
    free(in), free(out), free(want);
    ak_comm_free(c);
    return rc;
}

/* ---- colls: the collectives the cost model picks algorithms for -------------------- */

typedef struct colls_ctx {
    ak_comm *c;
    int rank, n;
    unsigned char *a, *b, *want; /* COLLS_CAP bytes each */
} colls_ctx;

#define COLLS_CAP ((size_t)1048577 * 8 * 2)

/* values a call's rank `owner` contributes: the sweep's inputs (small integers) */
static void owned(ak_dtype dt, ak_reduce_op op, int owner, unsigned char *buf, size_t count) {
    size_t es;
    ak_dtype_size(dt, &es);
    unsigned char period[PERIOD * 8];
    for (size_t i = 0; i < PERIOD; i++) put(dt, period, i, input(owner, i, op));
    fill(buf, count, es, period);
}

static int colls_fail(const colls_ctx *x, const char *what, ak_dtype dt, ak_reduce_op op,
                      size_t count, ak_status st) {
    fprintf(stderr, "rank %d: %s %s %s count %zu: %s\n", x->rank, what, ak_dtype_name(dt),
            ak_reduce_op_name(op), count, st != AK_OK ? ak_last_error() : "wrong result");
    return st != AK_OK ? 10 + (int)st : 3;
}

/* reduce to root, in place at the root or not: the sweep's expected values there */
static int colls_reduce(colls_ctx *x, size_t count, ak_dtype dt, ak_reduce_op op, int root, int ip) {
    size_t es;
    ak_dtype_size(dt, &es);
    int me_root = x->rank == root;
    unsigned char *in = ip && me_root ? x->b : x->a, pwant[PERIOD * 8];
    owned(dt, op, x->rank, in, count);
    ak_status st = ak_comm_reduce(x->c, ip && me_root ? AK_IN_PLACE : x->a, me_root ? x->b : NULL,
                                  count, dt, op, root);
    if (st != AK_OK) return colls_fail(x, "reduce", dt, op, count, st);
    if (!me_root) return 0;
    for (size_t i = 0; i < PERIOD; i++) put(dt, pwant, i, expected(x->n, i, op, dt));
    fill(x->want, count, es, pwant);
    return memcmp(x->b, x->want, count * es) ? colls_fail(x, ip ? "reduce in place" : "reduce", dt, op, count, AK_OK) : 0;
}

/* rank r ends with elements [r × count, (r + 1) × count) of the reduction */
static int colls_reduce_scatter(colls_ctx *x, size_t count, ak_dtype dt, ak_reduce_op op, int ip) {
    size_t es, total = count * (size_t)x->n;
    ak_dtype_size(dt, &es);
    unsigned char pwant[PERIOD * 8];
    owned(dt, op, x->rank, ip ? x->b : x->a, total);
    ak_status st = ak_comm_reduce_scatter(x->c, ip ? AK_IN_PLACE : x->a, x->b, count, dt, op);
    if (st != AK_OK) return colls_fail(x, "reduce_scatter", dt, op, count, st);
    for (size_t i = 0; i < PERIOD; i++) put(dt, pwant, i, expected(x->n, i, op, dt));
    fill(x->want, total, es, pwant);
    if (memcmp(x->b, x->want + (size_t)x->rank * count * es, count * es))
        return colls_fail(x, ip ? "reduce_scatter in place" : "reduce_scatter", dt, op, count, AK_OK);
    return 0;
}

/* broadcast of the root's values; allgather(v) of every rank's (v: rank r contributes
 * (r + v) % 3 × count elements, one element apart, gaps untouched) */
static int colls_gathers(colls_ctx *x, size_t count, ak_dtype dt, int root, int ip, int v) {
    size_t es, counts[64], displs[64], off = 0;
    ak_dtype_size(dt, &es);
    owned(dt, AK_REDUCE_SUM, root, x->want, count);
    owned(dt, AK_REDUCE_SUM, x->rank, x->b, count); /* non-roots start from their own values */
    if (x->rank == root || !count) memcpy(x->b, x->want, count * es);
    ak_status st = ak_comm_broadcast(x->c, x->b, count, dt, root);
    if (st != AK_OK || memcmp(x->b, x->want, count * es))
        return colls_fail(x, "broadcast", dt, AK_REDUCE_SUM, count, st);
    for (int r = 0; r < x->n; r++) {
        counts[r] = v ? (size_t)((r + v) % 3) * count : count;
        displs[r] = off + (v ? 1 : 0);
        off = displs[r] + counts[r];
    }
    memset(x->want, 0x7E, off * es);
    memset(x->b, 0x7E, off * es);
    for (int r = 0; r < x->n; r++) owned(dt, AK_REDUCE_SUM, r, x->want + displs[r] * es, counts[r]);
    unsigned char *mine = ip ? x->b + displs[x->rank] * es : x->a;
    owned(dt, AK_REDUCE_SUM, x->rank, mine, counts[x->rank]);
    const void *send = ip ? AK_IN_PLACE : x->a;
    st = v ? ak_comm_allgatherv(x->c, send, counts[x->rank], x->b, counts, displs, dt)
           : ak_comm_allgather(x->c, send, x->b, count, dt);
    if (st != AK_OK || memcmp(x->b, x->want, off * es))
        return colls_fail(x, v ? "allgatherv" : "allgather", dt, AK_REDUCE_SUM, count, st);
    return 0;
}

/* Every (count, dtype, op) in and out of place; allgather and reduce_scatter get about
 * as many elements in all as the others per rank (count / n, odd). */
static int colls(ak_comm *c, int rank, int n, int small) {
    static const size_t counts[] = {0, 1, 7, 64, 1000, 1048577};
    colls_ctx x = {c, rank, n, malloc(COLLS_CAP), malloc(COLLS_CAP), malloc(COLLS_CAP)};
    int rc = x.a && x.b && x.want && n <= 64 ? 0 : 2, seq = 0;
    for (size_t k = 0; k < (small ? 5u : 6u) && !rc; k++)
        for (int dt = 0; dt < AK_DTYPE_COUNT_ && !rc; dt++)
            for (int ip = 0; ip < 2 && !rc; ip++) {
                size_t per_rank = counts[k] > 1000 ? (counts[k] / (size_t)n) | 1 : counts[k];
                for (int op = 0; op < AK_REDUCE_COUNT_ && !rc; op++, seq++) {
                    rc = colls_reduce(&x, counts[k], (ak_dtype)dt, (ak_reduce_op)op, seq % n, ip);
                    if (!rc) rc = colls_reduce_scatter(&x, per_rank, (ak_dtype)dt, (ak_reduce_op)op, ip);
                }
                if (!rc) rc = colls_gathers(&x, per_rank, (ak_dtype)dt, seq % n, ip, 0);
                if (!rc) rc = colls_gathers(&x, per_rank, (ak_dtype)dt, seq % n, ip, 1 + dt % 2);
            }
    free(x.a), free(x.b), free(x.want);
    ak_comm_free(c);
    return rc;
}

/* ---- ops: every other operation, exact int32/f64 checks ------------------------------- */

typedef struct ops_ctx {
    ak_comm *c;
    int rank, n;
    const char *what; /* the operation being checked, for the failure message */
} ops_ctx;

#define OPS_CALL(x, call)                                                                 \
    do {                                                                                  \
        ak_status st_ = (call);                                                           \
        if (st_ != AK_OK) {                                                               \
            fprintf(stderr, "rank %d: %s: %s\n", (x)->rank, (x)->what, ak_last_error());   \
            return 10 + (int)st_;                                                         \
        }                                                                                 \
    } while (0)

#define OPS_EXPECT(x, cond, ...)                                                          \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "rank %d: %s: ", (x)->rank, (x)->what);                       \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
            return 3;                                                                     \
        }                                                                                 \
    } while (0)

/* a value only (owner, index, salt) determine */
static int32_t v32(int owner, size_t i, int salt) {
    return (int32_t)((unsigned)owner * 1000003u + (unsigned)i * 7u + (unsigned)salt * 101u);
}

/* reduce (sum of f64, exact: small integers) and broadcast, gather, scatter from every
 * root; reduce and gather in place at the root, scatter with recvbuf AK_IN_PLACE there */
static int ops_rooted(ops_ctx *x, size_t count, int32_t *a, int32_t *b) {
    const int n = x->n, me = x->rank;
    double *d = (double *)(void *)b;
    for (int root = 0; root < n; root++)
        for (int ip = 0; ip < 2; ip++) {
            x->what = ip ? "reduce in place" : "reduce";
            for (size_t i = 0; i < count; i++) d[i] = (double)(me + 1) * (double)(i % 9 + 1);
            double *res = (double *)(void *)a;
            if (me == root && ip)
                OPS_CALL(x, ak_comm_reduce(x->c, AK_IN_PLACE, d, count, AK_DTYPE_F64, AK_REDUCE_SUM, root));
            else
                OPS_CALL(x, ak_comm_reduce(x->c, d, me == root ? res : NULL, count, AK_DTYPE_F64,
                                           AK_REDUCE_SUM, root));
            const double *got = ip ? d : res;
            for (size_t i = 0; i < count && me == root; i++)
                OPS_EXPECT(x, got[i] == (double)(i % 9 + 1) * n * (n + 1) / 2,
                           "root %d count %zu [%zu] = %g", root, count, i, got[i]);

            x->what = "broadcast";
            for (size_t i = 0; i < count; i++) a[i] = me == root ? v32(root, i, ip) : -1;
            OPS_CALL(x, ak_comm_broadcast(x->c, a, count, AK_DTYPE_I32, root));
            for (size_t i = 0; i < count; i++)
                OPS_EXPECT(x, a[i] == v32(root, i, ip), "root %d count %zu [%zu]", root, count, i);

            x->what = ip ? "gather in place" : "gather";
            for (size_t i = 0; i < count * (size_t)n; i++) a[i] = -1;
            for (size_t i = 0; i < count; i++) b[i] = v32(me, i, 3);
            if (me == root && ip) {
                memcpy(a + (size_t)root * count, b, count * sizeof *b);
                OPS_CALL(x, ak_comm_gather(x->c, AK_IN_PLACE, a, count, AK_DTYPE_I32, root));
            } else {
                OPS_CALL(x, ak_comm_gather(x->c, b, me == root ? a : NULL, count, AK_DTYPE_I32, root));
            }
            for (int s = 0; s < n && me == root; s++)
                for (size_t i = 0; i < count; i++)
                    OPS_EXPECT(x, a[(size_t)s * count + i] == v32(s, i, 3),
                               "root %d count %zu: block %d [%zu]", root, count, s, i);

            x->what = ip ? "scatter in place" : "scatter";
            for (int s = 0; s < n; s++)
                for (size_t i = 0; i < count; i++) a[(size_t)s * count + i] = v32(s, i, 4);
            for (size_t i = 0; i < count; i++) b[i] = -1;
            if (me == root && ip)
                OPS_CALL(x, ak_comm_scatter(x->c, a, (void *)AK_IN_PLACE, count, AK_DTYPE_I32, root));
            else
                OPS_CALL(x, ak_comm_scatter(x->c, me == root ? a : NULL, b, count, AK_DTYPE_I32, root));
            const int32_t *mine = me == root && ip ? a + (size_t)root * count : b;
            for (size_t i = 0; i < count; i++)
                OPS_EXPECT(x, mine[i] == v32(me, i, 4), "root %d count %zu [%zu]", root, count, i);
        }
    return 0;
}

/* allgather, reduce_scatter, alltoall: out of place, then in place */
static int ops_all(ops_ctx *x, size_t count, int32_t *a, int32_t *b) {
    const int n = x->n, me = x->rank;
    const size_t total = count * (size_t)n;
    for (int ip = 0; ip < 2; ip++) {
        x->what = ip ? "allgather in place" : "allgather";
        for (size_t i = 0; i < total; i++) b[i] = -1;
        for (size_t i = 0; i < count; i++) (ip ? b + (size_t)me * count : a)[i] = v32(me, i, 5);
        OPS_CALL(x, ak_comm_allgather(x->c, ip ? AK_IN_PLACE : a, b, count, AK_DTYPE_I32));
        for (int s = 0; s < n; s++)
            for (size_t i = 0; i < count; i++)
                OPS_EXPECT(x, b[(size_t)s * count + i] == v32(s, i, 5), "count %zu: block %d [%zu]",
                           count, s, i);

        x->what = ip ? "reduce_scatter in place" : "reduce_scatter";
        int32_t *src = ip ? b : a;
        for (int blk = 0; blk < n; blk++)
            for (size_t i = 0; i < count; i++)
                src[(size_t)blk * count + i] = blk + (int32_t)(i % 11) + me;
        OPS_CALL(x, ak_comm_reduce_scatter(x->c, ip ? AK_IN_PLACE : a, b, count, AK_DTYPE_I32,
                                           AK_REDUCE_SUM));
        for (size_t i = 0; i < count; i++)
            OPS_EXPECT(x, b[i] == n * (me + (int32_t)(i % 11)) + n * (n - 1) / 2,
                       "count %zu [%zu] = %d", count, i, b[i]);

        x->what = ip ? "alltoall in place" : "alltoall";
        int32_t *send = ip ? b : a;
        for (int d = 0; d < n; d++)
            for (size_t i = 0; i < count; i++)
                send[(size_t)d * count + i] = v32(me, i, d + 6);
        OPS_CALL(x, ak_comm_alltoall(x->c, ip ? AK_IN_PLACE : a, b, count, AK_DTYPE_I32));
        for (int s = 0; s < n; s++)
            for (size_t i = 0; i < count; i++)
                OPS_EXPECT(x, b[(size_t)s * count + i] == v32(s, i, me + 6),
                           "count %zu: block from %d [%zu]", count, s, i);
    }
    return 0;
}

/* uneven layouts with gaps (which must stay untouched): rank s contributes (s + k) % 3
 * scaled elements, some none */
static size_t vcount(int s, int k, size_t scale) { return (size_t)((s + k) % 3) * scale; }

static int ops_v(ops_ctx *x, size_t scale, int32_t *a, int32_t *b) {
    const int n = x->n, me = x->rank;
    size_t counts[64], displs[64], sc[64], sd[64], rc[64], rd[64], off = 0, soff = 0, roff = 0;
    for (int s = 0; s < n; s++) {
        counts[s] = vcount(s, 0, scale), displs[s] = off + 1, off = displs[s] + counts[s];
        sc[s] = vcount(me, s, scale), sd[s] = soff, soff += sc[s];       /* me -> s */
        rc[s] = vcount(s, me, scale), rd[s] = roff + 2, roff = rd[s] + rc[s]; /* s -> me */
    }
    for (int ip = 0; ip < 2; ip++) {
        x->what = ip ? "allgatherv in place" : "allgatherv";
        for (size_t i = 0; i <= off; i++) b[i] = -7;
        int32_t *mine = ip ? b + displs[me] : a;
        for (size_t i = 0; i < counts[me]; i++) mine[i] = v32(me, i, 20);
        OPS_CALL(x, ak_comm_allgatherv(x->c, ip ? AK_IN_PLACE : a, counts[me], b, counts, displs,
                                       AK_DTYPE_I32));
        for (int s = 0; s < n; s++) {
            OPS_EXPECT(x, b[displs[s] - 1] == -7, "scale %zu: gap before block %d written", scale, s);
            for (size_t i = 0; i < counts[s]; i++)
                OPS_EXPECT(x, b[displs[s] + i] == v32(s, i, 20), "scale %zu: block %d [%zu]",
                           scale, s, i);
        }

        /* in place, recvbuf's block d (rc[d] elements at rd[d]) goes to d (MPI's rule),
         * which works here because every pair exchanges the same amount both ways:
         * vcount(me, d) == vcount(d, me) */
        x->what = ip ? "alltoallv in place" : "alltoallv";
        for (size_t i = 0; i <= roff; i++) b[i] = -7;
        for (int d = 0; d < n; d++)
            for (size_t i = 0; i < sc[d]; i++) {
                int32_t v = v32(me, i, 30 + d);
                if (ip) b[rd[d] + i] = v;
                else a[sd[d] + i] = v;
            }
        if (ip)
            OPS_CALL(x, ak_comm_alltoallv(x->c, AK_IN_PLACE, NULL, NULL, b, rc, rd, AK_DTYPE_I32));
        else
            OPS_CALL(x, ak_comm_alltoallv(x->c, a, sc, sd, b, rc, rd, AK_DTYPE_I32));
        for (int s = 0; s < n; s++) {
            OPS_EXPECT(x, b[rd[s] - 1] == -7 && b[rd[s] - 2] == -7,
                       "scale %zu: gap before block %d written", scale, s);
            for (size_t i = 0; i < rc[s]; i++)
                OPS_EXPECT(x, b[rd[s] + i] == v32(s, i, 30 + me), "scale %zu: block from %d [%zu]",
                           scale, s, i);
        }
    }
    return 0;
}

/* a token around the ring (send/recv), barriers, a split by parity with an allreduce in
 * each half and a color -1 rank, then every async call in flight at once */
static int ops_misc(ops_ctx *x, int32_t *a, int32_t *b) {
    const int n = x->n, me = x->rank;
    x->what = "send/recv";
    if (n > 1) {
        int next = (me + 1) % n, prev = (me + n - 1) % n;
        enum { M = 70001 }; /* several shm slots, every tcp stream */
        if (me == 0) {
            for (size_t i = 0; i < M; i++) a[i] = v32(0, i, 40);
            OPS_CALL(x, ak_comm_send(x->c, a, M, AK_DTYPE_I32, next));
            OPS_CALL(x, ak_comm_recv(x->c, b, M, AK_DTYPE_I32, prev));
        } else {
            OPS_CALL(x, ak_comm_recv(x->c, b, M, AK_DTYPE_I32, prev));
            for (size_t i = 0; i < M; i++) b[i] += 1;
            OPS_CALL(x, ak_comm_send(x->c, b, M, AK_DTYPE_I32, next));
        }
        if (me == 0)
            for (size_t i = 0; i < M; i++)
                OPS_EXPECT(x, b[i] == v32(0, i, 40) + n - 1, "token [%zu] = %d", i, b[i]);
    }
    x->what = "barrier";
    for (int i = 0; i < 5; i++) OPS_CALL(x, ak_comm_barrier(x->c));

    x->what = "split";
    ak_comm *half = NULL;
    OPS_CALL(x, ak_comm_split(x->c, me % 2, -me, &half));
    int hr = -1, hs = -1;
    ak_comm_rank(half, &hr);
    ak_comm_size(half, &hs);
    int want_size = (n + 1 - me % 2) / 2;
    int32_t v = me, sum = 0;
    for (int s = me % 2; s < n; s += 2) sum += s;
    ak_status st = ak_comm_allreduce(half, AK_IN_PLACE, &v, 1, AK_DTYPE_I32, AK_REDUCE_SUM);
    ak_comm_free(half);
    if (st != AK_OK) {
        fprintf(stderr, "rank %d: split allreduce: %s\n", me, ak_last_error());
        return 10 + (int)st;
    }
    OPS_EXPECT(x, hs == want_size && v == sum, "size %d (want %d), sum %d (want %d)", hs,
               want_size, v, sum);
    OPS_EXPECT(x, hr == (hs - 1) - me / 2, "rank %d in the half, ordered by key -rank", hr);
    /* everyone in the parent's order: the parent's whole cost model, so its choices */
    ak_comm *dup = NULL;
    OPS_CALL(x, ak_comm_split(x->c, 0, me, &dup));
    for (int k = 0; k < AK_COMM_COLL_COUNT_; k++)
        for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 32) {
            ak_comm_algo pa = AK_COMM_ALGO_AUTO, da = AK_COMM_ALGO_AUTO;
            ak_comm_choose_coll_algo(x->c, (ak_comm_coll)k, bytes, &pa);
            ak_comm_choose_coll_algo(dup, (ak_comm_coll)k, bytes, &da);
            OPS_EXPECT(x, pa == da, "collective %d at %zu B: split chose %s, parent %s", k, bytes,
                       ak_comm_algo_name(da), ak_comm_algo_name(pa));
        }
    ak_comm_free(dup);
    ak_comm *none = (ak_comm *)1;
    OPS_CALL(x, ak_comm_split(x->c, me == 0 ? 0 : -1, 0, &none));
    OPS_EXPECT(x, (me == 0) == (none != NULL), "color -1 must give NULL");
    if (none) {
        int one = 1;
        OPS_CALL(x, ak_comm_allreduce(none, AK_IN_PLACE, &one, 1, AK_DTYPE_I32, AK_REDUCE_SUM));
        ak_comm_free(none);
    }

    x->what = "async";
    enum { K = 7, C = 3001 };
    int32_t *ar = a, *bc = a + C, *ag_in = a + 2 * C, *ag = a + 3 * C;      /* ag: n × C */
    int32_t *rs_in = b, *rs = b + (size_t)n * C, *t_in = b + (size_t)(n + 1) * C;
    int32_t *t_out = t_in + (size_t)n * C, *t_ip = t_out + (size_t)n * C;
    int32_t *agv = t_ip + (size_t)n * C;
    size_t counts[64], displs[64], off = 0;
    for (int s = 0; s < n; s++) counts[s] = (size_t)s + 1, displs[s] = off, off += counts[s];
    for (size_t i = 0; i < C; i++) {
        ar[i] = me + (int32_t)i;
        bc[i] = me == n - 1 ? v32(n - 1, i, 50) : -1;
        ag_in[i] = v32(me, i, 51);
    }
    for (int blk = 0; blk < n; blk++)
        for (size_t i = 0; i < C; i++) {
            rs_in[(size_t)blk * C + i] = blk + me + (int32_t)(i % 13);
            t_in[(size_t)blk * C + i] = t_ip[(size_t)blk * C + i] = v32(me, i, 60 + blk);
        }
    ak_comm_request *req[K];
    OPS_CALL(x, ak_comm_iallreduce(x->c, AK_IN_PLACE, ar, C, AK_DTYPE_I32, AK_REDUCE_SUM, &req[0]));
    OPS_CALL(x, ak_comm_ibroadcast(x->c, bc, C, AK_DTYPE_I32, n - 1, &req[1]));
    OPS_CALL(x, ak_comm_iallgather(x->c, ag_in, ag, C, AK_DTYPE_I32, &req[2]));
    OPS_CALL(x, ak_comm_ireduce_scatter(x->c, rs_in, rs, C, AK_DTYPE_I32, AK_REDUCE_SUM, &req[3]));
    OPS_CALL(x, ak_comm_ialltoall(x->c, t_in, t_out, C, AK_DTYPE_I32, &req[4]));
    OPS_CALL(x, ak_comm_ialltoall(x->c, AK_IN_PLACE, t_ip, C, AK_DTYPE_I32, &req[5]));
    OPS_CALL(x, ak_comm_iallgatherv(x->c, ag_in, counts[me], agv, counts, displs, AK_DTYPE_I32,
                                    &req[6]));
    int blocking = 1; /* a blocking call queues behind them */
    OPS_CALL(x, ak_comm_allreduce(x->c, AK_IN_PLACE, &blocking, 1, AK_DTYPE_I32, AK_REDUCE_SUM));
    OPS_EXPECT(x, blocking == n, "blocking allreduce behind the async ones: %d", blocking);
    for (int k = 0; k < K; k++) OPS_CALL(x, ak_comm_wait(req[k]));
    for (size_t i = 0; i < C; i++) {
        OPS_EXPECT(x, ar[i] == n * (int32_t)i + n * (n - 1) / 2, "iallreduce [%zu]", i);
        OPS_EXPECT(x, bc[i] == v32(n - 1, i, 50), "ibroadcast [%zu]", i);
        OPS_EXPECT(x, rs[i] == n * (me + (int32_t)(i % 13)) + n * (n - 1) / 2,
                   "ireduce_scatter [%zu]", i);
    }
    for (int s = 0; s < n; s++) {
        for (size_t i = 0; i < C; i++) {
            OPS_EXPECT(x, ag[(size_t)s * C + i] == v32(s, i, 51), "iallgather block %d [%zu]", s, i);
            OPS_EXPECT(x, t_out[(size_t)s * C + i] == v32(s, i, 60 + me), "ialltoall block %d", s);
            OPS_EXPECT(x, t_ip[(size_t)s * C + i] == v32(s, i, 60 + me),
                       "ialltoall in place block %d", s);
        }
        for (size_t i = 0; i < counts[s]; i++)
            OPS_EXPECT(x, agv[displs[s] + i] == v32(s, i, 51), "iallgatherv block %d [%zu]", s, i);
    }
    return 0;
}

static int ops(ak_comm *c, int rank, int n) {
    /* 1 and 7 elements, and 50001 (several shm slots and tcp streams per message) */
    static const size_t counts[] = {0, 1, 7, 50001};
    size_t cap = 50001 * (size_t)(n + 2) * 8 + 70001 * 2 + (size_t)n * 16 * 3001;
    int32_t *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b);
    ops_ctx x = {c, rank, n, ""};
    int rc = a && b && n <= 64 ? 0 : 2;
    for (size_t k = 0; k < sizeof counts / sizeof *counts && !rc; k++) {
        rc = ops_rooted(&x, counts[k], a, b);
        if (!rc) rc = ops_all(&x, counts[k], a, b);
        if (!rc) rc = ops_v(&x, counts[k] ? counts[k] : 1, a, b);
    }
    if (!rc) rc = ops_misc(&x, a, b);
    free(a), free(b);
    ak_comm_free(c);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    ak_comm *c;
    ak_status st = ak_comm_init(NULL, &c);
    if (st != AK_OK) {
        fprintf(stderr, "init: %s\n", ak_last_error());
        return 10 + (int)st;
    }
    int rank, size;
    ak_comm_rank(c, &rank);
    ak_comm_size(c, &size);
    enum { N = 1 << 20 };
    float *buf = calloc(N, sizeof *buf);
    if (!strcmp(argv[1], "kill") && argc == 4) {
        int victim = atoi(argv[2]), iters = atoi(argv[3]);
        for (int i = 0;; i++) {
            if (rank == victim && i == iters) raise(SIGKILL);
            for (int k = 0; k < N; k++) buf[k] = 1;
            uint64_t t0 = ak_now_ns();
            st = ak_comm_allreduce(c, buf, buf, N, AK_DTYPE_F32, AK_REDUCE_SUM);
            if (st != AK_OK) return failed(c, buf, st, t0);
            if (buf[N - 1] != (float)size) return free(buf), ak_comm_free(c), 3;
        }
    }
    if (!strcmp(argv[1], "soak") && argc == 3) {
        if (rank == 0) printf("store port %s\n", getenv("AK_MASTER_PORT")), fflush(stdout);
        /* the element after the checked ones carries rank 0's "stop" to everyone */
        for (int i = 0; i < 3000; i++) {
            for (int k = 0; k < 4096; k++) buf[k] = (float)(rank + 1 + i + k % 7);
            buf[4096] = rank == 0 && access(argv[2], F_OK) == 0 ? 1.0f : 0.0f;
            uint64_t t0 = ak_now_ns();
            st = ak_comm_allreduce(c, buf, buf, 4097, AK_DTYPE_F32, AK_REDUCE_SUM);
            if (st != AK_OK) return failed(c, buf, st, t0);
            for (int k = 0; k < 4096; k++)
                if (buf[k] != (float)(size * (size + 1) / 2 + size * (i + k % 7)))
                    return free(buf), ak_comm_free(c), 3;
            if (buf[4096] != 0.0f) break;
            usleep(10000);
        }
    }
    if (!strcmp(argv[1], "sweep")) {
        free(buf);
        return sweep(c, rank, size, argc > 2 && !strcmp(argv[2], "small"));
    }
    if (!strcmp(argv[1], "colls")) {
        free(buf);
        return colls(c, rank, size, argc > 2 && !strcmp(argv[2], "small"));
    }
    if (!strcmp(argv[1], "ops")) {
        free(buf);
        return ops(c, rank, size);
    }
    if (!strcmp(argv[1], "dtype")) {
        uint64_t t0 = ak_now_ns();
        st = ak_comm_allreduce(c, buf, buf, 4096, rank == 0 ? AK_DTYPE_F32 : AK_DTYPE_I32,
                               AK_REDUCE_SUM);
        if (st != AK_OK) return failed(c, buf, st, t0);
    }
    if (!strcmp(argv[1], "count")) {
        uint64_t t0 = ak_now_ns();
        st = ak_comm_allreduce(c, buf, buf, rank == 0 ? N : N / 2, AK_DTYPE_F32, AK_REDUCE_SUM);
        if (st != AK_OK) return failed(c, buf, st, t0);
    }
    ak_comm_free(c);
    free(buf);
    return 0;
}
