/* Test program for tests/comm/test_procs.sh: one rank of a world the script starts.
 *   comm_rank sweep                 allreduce over counts {0,1,7,64,1000,1048577} × every
 *                                   dtype × sum/prod/min/max/avg, in and out of place,
 *                                   every element checked
 *   comm_rank kill RANK ITERS       allreduce in a loop; RANK kills itself (SIGKILL)
 *                                   after ITERS iterations
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

static int sweep_one(ak_comm *c, int rank, int n, size_t count, ak_dtype dt, ak_reduce_op op,
                     int in_place, unsigned char *in, unsigned char *out, unsigned char *want) {
    size_t es;
    ak_dtype_size(dt, &es);
    for (size_t i = 0; i < count; i++) {
        put(dt, in, i, input(rank, i, op));
        put(dt, want, i, expected(n, i, op, dt));
    }
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
    return 0;
}

static int sweep(ak_comm *c, int rank, int n) {
    static const size_t counts[] = {0, 1, 7, 64, 1000, 1048577};
    size_t max = 1048577 * 8;
    unsigned char *in = malloc(max), *out = malloc(max), *want = malloc(max);
    int rc = 0;
    for (size_t k = 0; k < sizeof counts / sizeof *counts && !rc; k++)
        for (int dt = 0; dt < AK_DTYPE_COUNT_ && !rc; dt++)
            for (int op = 0; op < AK_REDUCE_COUNT_ && !rc; op++) {
                /* the largest count only for a few pairs, to keep the test short */
                if (k == 5 && !((dt == AK_DTYPE_F32 && op == AK_REDUCE_SUM) ||
                                (dt == AK_DTYPE_BF16 && op == AK_REDUCE_MAX) ||
                                (dt == AK_DTYPE_I64 && op == AK_REDUCE_AVG)))
                    continue;
                rc = sweep_one(c, rank, n, counts[k], (ak_dtype)dt, (ak_reduce_op)op, op % 2, in,
                               out, want);
            }
    free(in), free(out), free(want);
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
    if (!strcmp(argv[1], "sweep")) {
        free(buf);
        return sweep(c, rank, size);
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
