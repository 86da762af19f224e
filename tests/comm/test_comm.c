/* Tests of the public collective API on worlds of threads (ak_comm_init_local): every
 * operation, in place and out of place, sub-communicators, async requests, bad input and
 * mismatched calls. Results are checked element by element against values predictable
 * from (rank, index). The algorithms themselves are swept in test_algo.c. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/comm.h"

#define MAX_WORLD 8

typedef struct rank_ctx {
    ak_comm *comm;
    int rank, size;
    int failures;
    char why[256];
    void (*body)(struct rank_ctx *);
} rank_ctx;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            if (!r->failures++) snprintf(r->why, sizeof r->why, __VA_ARGS__);             \
            return;                                                                       \
        }                                                                                 \
    } while (0)

static void *rank_main(void *p) {
    rank_ctx *r = p;
    r->body(r);
    return NULL;
}

/* Runs body on every rank of a fresh world of n threads and fails on any rank's failure. */
static void run_world(int n, void (*body)(rank_ctx *)) {
    ak_comm *comms[MAX_WORLD];
    assert_int_equal(ak_comm_init_local(n, NULL, comms), AK_OK);
    rank_ctx ctx[MAX_WORLD];
    pthread_t t[MAX_WORLD];
    for (int i = 0; i < n; i++) {
        ctx[i] = (rank_ctx){comms[i], i, n, 0, "", body};
        pthread_create(&t[i], NULL, rank_main, &ctx[i]);
    }
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++) ak_comm_free(comms[i]);
    int failed = 0;
    for (int i = 0; i < n; i++)
        if (ctx[i].failures) failed = 1, print_error("world %d, rank %d: %s\n", n, i, ctx[i].why);
    if (failed) fail();
}

static float val(int rank, size_t i) { return (float)((rank + 1) * (int)(i % 5 + 1)); }

static void body_allreduce(rank_ctx *r) {
    enum { N = 1003 };
    float in[N], out[N];
    for (size_t i = 0; i < N; i++) in[i] = val(r->rank, i);
    float ranks_sum = r->size * (r->size + 1) / 2.0f;
    CHECK(ak_comm_allreduce(r->comm, in, out, N, AK_DTYPE_F32, AK_REDUCE_SUM) == AK_OK, "%s",
          ak_last_error());
    for (size_t i = 0; i < N; i++) CHECK(out[i] == (i % 5 + 1) * ranks_sum, "sum[%zu]=%g", i, out[i]);
    CHECK(ak_comm_allreduce(r->comm, AK_IN_PLACE, in, N, AK_DTYPE_F32, AK_REDUCE_MAX) == AK_OK,
          "%s", ak_last_error());
    for (size_t i = 0; i < N; i++) CHECK(in[i] == val(r->size - 1, i), "max[%zu]=%g", i, in[i]);
    int32_t v[3] = {r->rank, 10, -r->rank};
    CHECK(ak_comm_allreduce(r->comm, v, v, 3, AK_DTYPE_I32, AK_REDUCE_AVG) == AK_OK, "%s",
          ak_last_error());
    CHECK(v[0] == (r->size - 1) / 2 && v[1] == 10 && v[2] == -((r->size - 1) / 2),
          "avg %d %d %d", v[0], v[1], v[2]);
}

static void body_rooted(rank_ctx *r) {
    enum { N = 77 };
    double buf[N], all[N * MAX_WORLD], mine[N];
    for (int root = 0; root < r->size; root++) {
        for (size_t i = 0; i < N; i++) buf[i] = r->rank == root ? (double)i * 3 : -1;
        CHECK(ak_comm_broadcast(r->comm, buf, N, AK_DTYPE_F64, root) == AK_OK, "%s", ak_last_error());
        for (size_t i = 0; i < N; i++) CHECK(buf[i] == (double)i * 3, "bcast root %d", root);
        for (size_t i = 0; i < N; i++) mine[i] = val(r->rank, i);
        CHECK(ak_comm_reduce(r->comm, mine, buf, N, AK_DTYPE_F64, AK_REDUCE_SUM, root) == AK_OK,
              "%s", ak_last_error());
        if (r->rank == root)
            for (size_t i = 0; i < N; i++)
                CHECK(buf[i] == (i % 5 + 1) * r->size * (r->size + 1) / 2.0, "reduce root %d", root);
        CHECK(ak_comm_gather(r->comm, mine, all, N, AK_DTYPE_F64, root) == AK_OK, "%s", ak_last_error());
        if (r->rank == root)
            for (int s = 0; s < r->size; s++)
                for (size_t i = 0; i < N; i++) CHECK(all[s * N + i] == val(s, i), "gather");
        for (int s = 0; s < r->size; s++)
            for (size_t i = 0; i < N; i++) all[s * N + i] = s * 1000.0 + (double)i;
        CHECK(ak_comm_scatter(r->comm, all, mine, N, AK_DTYPE_F64, root) == AK_OK, "%s", ak_last_error());
        for (size_t i = 0; i < N; i++) CHECK(mine[i] == r->rank * 1000.0 + (double)i, "scatter");
    }
}

static void body_gather_family(rank_ctx *r) {
    enum { N = 41 };
    int64_t in[N * MAX_WORLD], out[N * MAX_WORLD];
    for (size_t i = 0; i < N; i++) in[i] = r->rank * 100 + (int64_t)i;
    CHECK(ak_comm_allgather(r->comm, in, out, N, AK_DTYPE_I64) == AK_OK, "%s", ak_last_error());
    for (int s = 0; s < r->size; s++)
        for (size_t i = 0; i < N; i++) CHECK(out[s * N + i] == s * 100 + (int64_t)i, "allgather");
    /* alltoall: block d of rank s carries s*1000 + d */
    for (int d = 0; d < r->size; d++)
        for (size_t i = 0; i < N; i++) in[d * N + i] = r->rank * 1000 + d;
    CHECK(ak_comm_alltoall(r->comm, in, out, N, AK_DTYPE_I64) == AK_OK, "%s", ak_last_error());
    for (int s = 0; s < r->size; s++)
        for (size_t i = 0; i < N; i++) CHECK(out[s * N + i] == s * 1000 + r->rank, "alltoall");
    /* reduce_scatter: block b reduced lands on rank b */
    for (int b = 0; b < r->size; b++)
        for (size_t i = 0; i < N; i++) in[b * N + i] = b + (int64_t)i + r->rank;
    CHECK(ak_comm_reduce_scatter(r->comm, in, out, N, AK_DTYPE_I64, AK_REDUCE_SUM) == AK_OK, "%s",
          ak_last_error());
    for (size_t i = 0; i < N; i++)
        CHECK(out[i] == r->size * (r->rank + (int64_t)i) + r->size * (r->size - 1) / 2, "rs[%zu]", i);
    /* allgatherv with uneven counts: rank s contributes s+1 elements */
    size_t counts[MAX_WORLD], displs[MAX_WORLD], off = 0;
    for (int s = 0; s < r->size; s++) counts[s] = (size_t)s + 1, displs[s] = off, off += counts[s];
    for (size_t i = 0; i <= (size_t)r->rank; i++) in[i] = r->rank;
    CHECK(ak_comm_allgatherv(r->comm, in, counts[r->rank], out, counts, displs, AK_DTYPE_I64) == AK_OK,
          "%s", ak_last_error());
    for (int s = 0; s < r->size; s++)
        for (size_t i = 0; i < counts[s]; i++) CHECK(out[displs[s] + i] == s, "allgatherv");
}

static void body_p2p_barrier(rank_ctx *r) {
    int token = -1;
    /* pass a token around the ring: rank 0 starts it */
    if (r->size > 1) {
        int next = (r->rank + 1) % r->size, prev = (r->rank + r->size - 1) % r->size;
        if (r->rank == 0) {
            token = 42;
            CHECK(ak_comm_send(r->comm, &token, 1, AK_DTYPE_I32, next) == AK_OK, "%s", ak_last_error());
            CHECK(ak_comm_recv(r->comm, &token, 1, AK_DTYPE_I32, prev) == AK_OK, "%s", ak_last_error());
        } else {
            CHECK(ak_comm_recv(r->comm, &token, 1, AK_DTYPE_I32, prev) == AK_OK, "%s", ak_last_error());
            token++;
            CHECK(ak_comm_send(r->comm, &token, 1, AK_DTYPE_I32, next) == AK_OK, "%s", ak_last_error());
        }
        if (r->rank == 0) CHECK(token == 42 + r->size - 1, "token %d", token);
    }
    for (int i = 0; i < 20; i++) CHECK(ak_comm_barrier(r->comm) == AK_OK, "%s", ak_last_error());
}

static void body_split_async(rank_ctx *r) {
    ak_comm *half;
    CHECK(ak_comm_split(r->comm, r->rank % 2, -r->rank, &half) == AK_OK, "%s", ak_last_error());
    int hr, hs;
    ak_comm_rank(half, &hr);
    ak_comm_size(half, &hs);
    CHECK(hs == (r->size + 1 - r->rank % 2) / 2, "split size %d", hs);
    float x = 1;
    CHECK(ak_comm_allreduce(half, &x, &x, 1, AK_DTYPE_F32, AK_REDUCE_SUM) == AK_OK, "%s", ak_last_error());
    CHECK(x == (float)hs, "split allreduce %g", x);
    ak_comm_free(half);
    ak_comm *none = (ak_comm *)1;
    CHECK(ak_comm_split(r->comm, r->rank == 0 ? 0 : -1, 0, &none) == AK_OK, "%s", ak_last_error());
    CHECK((r->rank == 0) == (none != NULL), "color -1 must give NULL");
    ak_comm_free(none);
    /* several async ops in flight, completed in order */
    enum { K = 6, N = 300 };
    static _Thread_local float bufs[K][N];
    ak_comm_request *req[K];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) bufs[k][i] = (float)(k + r->rank);
        CHECK(ak_comm_iallreduce(r->comm, bufs[k], bufs[k], N, AK_DTYPE_F32, AK_REDUCE_SUM, &req[k]) == AK_OK,
              "%s", ak_last_error());
    }
    float blocking = 1; /* a blocking call queues behind the async ones */
    CHECK(ak_comm_allreduce(r->comm, &blocking, &blocking, 1, AK_DTYPE_F32, AK_REDUCE_SUM) == AK_OK,
          "%s", ak_last_error());
    for (int k = 0; k < K; k++) {
        int done = 0;
        CHECK(ak_comm_test(req[k], &done) == AK_OK, "test");
        CHECK(ak_comm_wait(req[k]) == AK_OK, "%s", ak_last_error());
        float want = (float)(k * r->size + r->size * (r->size - 1) / 2);
        for (int i = 0; i < N; i++) CHECK(bufs[k][i] == want, "async %d: %g", k, bufs[k][i]);
    }
}

/* Every async operation, several in flight at once (completion in submission order on
 * the progress thread), one of them in place, each result checked after its wait. */
static void body_async_ops(rank_ctx *r) {
    enum { N = 37 };
    const int n = r->size, me = r->rank, root = n - 1;
    static _Thread_local int32_t bc[N], ag_in[N], ag[N * MAX_WORLD], agv_in[MAX_WORLD],
        agv[MAX_WORLD * MAX_WORLD], rs_in[N * MAX_WORLD], rs[N], a2a_in[N * MAX_WORLD],
        a2a[N * MAX_WORLD], a2a_ip[N * MAX_WORLD];
    size_t counts[MAX_WORLD], displs[MAX_WORLD], off = 0;
    for (int s = 0; s < n; s++) counts[s] = (size_t)s + 1, displs[s] = off, off += counts[s];
    for (size_t i = 0; i < N; i++) {
        bc[i] = me == root ? 5 * (int32_t)i : -1;
        ag_in[i] = me * 100 + (int32_t)i;
    }
    for (size_t i = 0; i < counts[me]; i++) agv_in[i] = me * 10 + (int32_t)i;
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < N; i++) {
            rs_in[b * N + i] = b + (int32_t)i + me;
            a2a_in[b * N + i] = a2a_ip[b * N + i] = me * 1000 + b;
        }
    ak_comm_request *req[6];
    CHECK(ak_comm_ibroadcast(r->comm, bc, N, AK_DTYPE_I32, root, &req[0]) == AK_OK, "%s",
          ak_last_error());
    CHECK(ak_comm_iallgather(r->comm, ag_in, ag, N, AK_DTYPE_I32, &req[1]) == AK_OK, "%s",
          ak_last_error());
    CHECK(ak_comm_iallgatherv(r->comm, agv_in, counts[me], agv, counts, displs, AK_DTYPE_I32,
                              &req[2]) == AK_OK, "%s", ak_last_error());
    CHECK(ak_comm_ireduce_scatter(r->comm, rs_in, rs, N, AK_DTYPE_I32, AK_REDUCE_SUM, &req[3]) == AK_OK,
          "%s", ak_last_error());
    CHECK(ak_comm_ialltoall(r->comm, a2a_in, a2a, N, AK_DTYPE_I32, &req[4]) == AK_OK, "%s",
          ak_last_error());
    CHECK(ak_comm_ialltoall(r->comm, AK_IN_PLACE, a2a_ip, N, AK_DTYPE_I32, &req[5]) == AK_OK,
          "%s", ak_last_error());
    for (int k = 0; k < 6; k++)
        CHECK(ak_comm_wait(req[k]) == AK_OK, "async op %d: %s", k, ak_last_error());
    for (size_t i = 0; i < N; i++) CHECK(bc[i] == 5 * (int32_t)i, "ibroadcast [%zu] = %d", i, bc[i]);
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < N; i++) {
            CHECK(ag[s * N + i] == s * 100 + (int32_t)i, "iallgather block %d [%zu]", s, i);
            CHECK(a2a[s * N + i] == s * 1000 + me, "ialltoall block %d [%zu]", s, i);
            CHECK(a2a_ip[s * N + i] == s * 1000 + me, "ialltoall in place block %d [%zu]", s, i);
        }
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < counts[s]; i++)
            CHECK(agv[displs[s] + i] == s * 10 + (int32_t)i, "iallgatherv block %d [%zu]", s, i);
    for (size_t i = 0; i < N; i++)
        CHECK(rs[i] == n * (me + (int32_t)i) + n * (n - 1) / 2, "ireduce_scatter [%zu] = %d", i, rs[i]);
    ak_comm_request *none = (ak_comm_request *)1;
    CHECK(ak_comm_ialltoall(r->comm, ag_in, (void *)AK_IN_PLACE, 1, AK_DTYPE_I32, &none) ==
              AK_ERR_INVALID_ARG, "ialltoall into AK_IN_PLACE accepted");
    CHECK(ak_comm_ireduce_scatter(r->comm, rs_in, rs, 1, AK_DTYPE_I32, AK_REDUCE_SUM, NULL) ==
              AK_ERR_INVALID_ARG, "ireduce_scatter without a request pointer accepted");
}

/* AK_IN_PLACE with MPI's meaning for every collective that has one: each result checked
 * against the out-of-place one's expectation, the ignored buffers passed as NULL. */
static void body_in_place(rank_ctx *r) {
    enum { N = 29 };
    int32_t all[N * MAX_WORLD], mine[N];
    const int n = r->size, me = r->rank;
    for (int root = 0; root < n; root++) {
        /* reduce: the root's input already in recvbuf; recvbuf NULL elsewhere */
        for (size_t i = 0; i < N; i++) mine[i] = me + (int32_t)i;
        if (me == root)
            CHECK(ak_comm_reduce(r->comm, AK_IN_PLACE, mine, N, AK_DTYPE_I32, AK_REDUCE_SUM,
                                 root) == AK_OK, "reduce in place: %s", ak_last_error());
        else
            CHECK(ak_comm_reduce(r->comm, mine, NULL, N, AK_DTYPE_I32, AK_REDUCE_SUM, root) == AK_OK,
                  "reduce, NULL recvbuf off the root: %s", ak_last_error());
        for (size_t i = 0; i < N; i++) {
            int32_t want = me == root ? n * (int32_t)i + n * (n - 1) / 2 : me + (int32_t)i;
            CHECK(mine[i] == want, "reduce root %d [%zu] = %d, want %d", root, i, mine[i], want);
        }
        /* gather: the root's block already at root × N */
        for (size_t i = 0; i < N * MAX_WORLD; i++) all[i] = -1;
        for (size_t i = 0; i < N; i++) mine[i] = me * 100 + (int32_t)i;
        if (me == root) {
            memcpy(all + (size_t)root * N, mine, sizeof mine);
            CHECK(ak_comm_gather(r->comm, AK_IN_PLACE, all, N, AK_DTYPE_I32, root) == AK_OK,
                  "gather in place: %s", ak_last_error());
            for (int s = 0; s < n; s++)
                for (size_t i = 0; i < N; i++)
                    CHECK(all[s * N + i] == s * 100 + (int32_t)i, "gather in place root %d: "
                          "block %d [%zu] = %d", root, s, i, all[s * N + i]);
        } else {
            CHECK(ak_comm_gather(r->comm, mine, NULL, N, AK_DTYPE_I32, root) == AK_OK,
                  "gather, NULL recvbuf off the root: %s", ak_last_error());
        }
        /* scatter: the root keeps its block in sendbuf (recvbuf AK_IN_PLACE) */
        for (size_t i = 0; i < N; i++) mine[i] = -1;
        for (int s = 0; s < n; s++)
            for (size_t i = 0; i < N; i++) all[s * N + i] = s * 1000 + (int32_t)i;
        if (me == root) {
            CHECK(ak_comm_scatter(r->comm, all, (void *)AK_IN_PLACE, N, AK_DTYPE_I32, root) == AK_OK,
                  "scatter in place: %s", ak_last_error());
            for (int s = 0; s < n; s++)
                for (size_t i = 0; i < N; i++)
                    CHECK(all[s * N + i] == s * 1000 + (int32_t)i, "scatter in place changed "
                          "the root's sendbuf");
        } else {
            CHECK(ak_comm_scatter(r->comm, NULL, mine, N, AK_DTYPE_I32, root) == AK_OK,
                  "scatter, NULL sendbuf off the root: %s", ak_last_error());
            for (size_t i = 0; i < N; i++)
                CHECK(mine[i] == me * 1000 + (int32_t)i, "scatter root %d [%zu] = %d", root, i,
                      mine[i]);
        }
    }
    /* alltoall in place, both spellings: block d of rank s carries s * 1000 + d */
    for (int spelling = 0; spelling < 2; spelling++) {
        for (int d = 0; d < n; d++)
            for (size_t i = 0; i < N; i++) all[d * N + i] = me * 1000 + d * 10 + (int32_t)(i % 7);
        CHECK(ak_comm_alltoall(r->comm, spelling ? (const void *)all : AK_IN_PLACE, all, N,
                               AK_DTYPE_I32) == AK_OK, "alltoall in place: %s", ak_last_error());
        for (int s = 0; s < n; s++)
            for (size_t i = 0; i < N; i++)
                CHECK(all[s * N + i] == s * 1000 + me * 10 + (int32_t)(i % 7),
                      "alltoall in place (%s): block %d [%zu] = %d",
                      spelling ? "sendbuf == recvbuf" : "AK_IN_PLACE", s, i, all[s * N + i]);
    }
    /* alltoallv in place: rank s sends (s + d) % 3 + 1 elements to rank d, so the receive
     * layout (what the data is read by) is uneven and, with gaps, not the uniform one */
    size_t rc[MAX_WORLD], rd[MAX_WORLD], off = 0;
    for (int s = 0; s < n; s++) {
        rc[s] = (size_t)((s + me) % 3 + 1);
        rd[s] = off + 1; /* one element of gap before each block */
        off = rd[s] + rc[s];
    }
    for (size_t i = 0; i < off; i++) all[i] = -5;
    for (int d = 0; d < n; d++)
        for (size_t i = 0; i < rc[d]; i++) all[rd[d] + i] = me * 1000 + d * 10 + (int32_t)i;
    CHECK(ak_comm_alltoallv(r->comm, AK_IN_PLACE, NULL, NULL, all, rc, rd, AK_DTYPE_I32) == AK_OK,
          "alltoallv in place: %s", ak_last_error());
    for (int s = 0; s < n; s++) {
        CHECK(all[rd[s] - 1] == -5, "alltoallv in place wrote the gap before block %d", s);
        for (size_t i = 0; i < rc[s]; i++)
            CHECK(all[rd[s] + i] == s * 1000 + me * 10 + (int32_t)i,
                  "alltoallv in place: block %d [%zu] = %d", s, i, all[rd[s] + i]);
    }
    /* reduce_scatter in place: the n × N input in recvbuf, block me of the sum at its start */
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < N; i++) all[b * N + i] = b + (int32_t)i + me;
    CHECK(ak_comm_reduce_scatter(r->comm, AK_IN_PLACE, all, N, AK_DTYPE_I32, AK_REDUCE_SUM) == AK_OK,
          "reduce_scatter in place: %s", ak_last_error());
    for (size_t i = 0; i < N; i++)
        CHECK(all[i] == n * (me + (int32_t)i) + n * (n - 1) / 2, "reduce_scatter in place [%zu]", i);
    /* allgather in place: own block already at me × N */
    for (size_t i = 0; i < N * MAX_WORLD; i++) all[i] = -1;
    for (size_t i = 0; i < N; i++) all[me * N + i] = me * 7 + (int32_t)i;
    CHECK(ak_comm_allgather(r->comm, AK_IN_PLACE, all, N, AK_DTYPE_I32) == AK_OK,
          "allgather in place: %s", ak_last_error());
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < N; i++)
            CHECK(all[s * N + i] == s * 7 + (int32_t)i, "allgather in place block %d", s);
}

/* AK_IN_PLACE where it means nothing fails with AK_ERR_INVALID_ARG naming the argument,
 * on every rank before anything is sent (so the world stays usable). */
static void body_in_place_rejected(rank_ctx *r) {
    int32_t buf[8 * MAX_WORLD] = {0};
    void *ip = (void *)AK_IN_PLACE;
    const int root = 0, me = r->rank;
#define REJECTED(call, needle)                                                                 do {                                                                                           ak_status st_ = (call);                                                                    CHECK(st_ == AK_ERR_INVALID_ARG, "%s: got %s", #call, ak_status_str(st_));                 CHECK(strstr(ak_last_error(), needle), "%s: error '%s' does not name %s", #call,                 ak_last_error(), needle);                                                        } while (0)
    REJECTED(ak_comm_allreduce(r->comm, buf, ip, 8, AK_DTYPE_I32, AK_REDUCE_SUM), "recvbuf");
    REJECTED(ak_comm_broadcast(r->comm, ip, 8, AK_DTYPE_I32, root), "buf");
    REJECTED(ak_comm_allgather(r->comm, buf, ip, 8, AK_DTYPE_I32), "recvbuf");
    REJECTED(ak_comm_alltoall(r->comm, buf, ip, 8, AK_DTYPE_I32), "recvbuf");
    REJECTED(ak_comm_reduce_scatter(r->comm, buf, ip, 8, AK_DTYPE_I32, AK_REDUCE_SUM), "recvbuf");
    if (r->size > 1) {
        REJECTED(ak_comm_send(r->comm, ip, 1, AK_DTYPE_I32, !me), "buf");
        REJECTED(ak_comm_recv(r->comm, ip, 1, AK_DTYPE_I32, !me), "buf");
    }
    if (me == root) {
        REJECTED(ak_comm_scatter(r->comm, AK_IN_PLACE, buf, 8, AK_DTYPE_I32, root), "sendbuf");
        REJECTED(ak_comm_reduce(r->comm, AK_IN_PLACE, NULL, 8, AK_DTYPE_I32, AK_REDUCE_SUM, root),
                 "recvbuf");
    } else {
        REJECTED(ak_comm_reduce(r->comm, AK_IN_PLACE, buf, 8, AK_DTYPE_I32, AK_REDUCE_SUM, root),
                 "sendbuf");
        REJECTED(ak_comm_gather(r->comm, AK_IN_PLACE, buf, 8, AK_DTYPE_I32, root), "sendbuf");
        REJECTED(ak_comm_scatter(r->comm, buf, ip, 8, AK_DTYPE_I32, root), "recvbuf");
    }
    /* sendbuf == recvbuf with different layouts: blocks would overwrite unsent ones */
    size_t sc[MAX_WORLD], sd[MAX_WORLD], rc[MAX_WORLD], rd[MAX_WORLD];
    for (int s = 0; s < r->size; s++) sc[s] = rc[s] = 1, sd[s] = (size_t)s, rd[s] = (size_t)s + 1;
    REJECTED(ak_comm_alltoallv(r->comm, buf, sc, sd, buf, rc, rd, AK_DTYPE_I32), "layouts differ");
#undef REJECTED
    /* nothing was sent: the world still works */
    CHECK(ak_comm_allreduce(r->comm, AK_IN_PLACE, buf, 8, AK_DTYPE_I32, AK_REDUCE_SUM) == AK_OK,
          "%s", ak_last_error());
}

static void test_worlds(void **state) {
    static const int sizes[] = {1, 2, 3, 4, 5, 8};
    void (*bodies[])(rank_ctx *) = {body_allreduce, body_rooted, body_gather_family,
                                    body_p2p_barrier, body_split_async, body_in_place,
                                    body_in_place_rejected, body_async_ops};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t b = 0; b < sizeof bodies / sizeof *bodies; b++) run_world(sizes[s], bodies[b]);
}

/* Ranks that disagree on the count get AK_ERR_MISMATCH instead of corrupt memory. */
static void body_mismatch(rank_ctx *r) {
    float buf[64] = {0};
    size_t count = r->rank == 0 ? 64 : 32;
    ak_status st = ak_comm_allreduce(r->comm, buf, buf, count, AK_DTYPE_F32, AK_REDUCE_SUM);
    CHECK(st == AK_ERR_MISMATCH || st == AK_ERR_REMOTE, "got %s", ak_status_str(st));
    CHECK(ak_comm_barrier(r->comm) != AK_OK, "a failed communicator must stay failed");
}

/* Same count and bytes per element, different dtypes (f32 against i32): the bytes would
 * line up, so only the tag's dtype digest can tell; the sum would be garbage otherwise. */
static void body_dtype_mismatch(rank_ctx *r) {
    uint32_t buf[64] = {0};
    ak_dtype dt = r->rank == 0 ? AK_DTYPE_F32 : AK_DTYPE_I32;
    ak_status st = ak_comm_allreduce(r->comm, AK_IN_PLACE, buf, 64, dt, AK_REDUCE_SUM);
    CHECK(st == AK_ERR_MISMATCH || st == AK_ERR_REMOTE, "got %s", ak_status_str(st));
    CHECK(ak_comm_barrier(r->comm) != AK_OK, "a failed communicator must stay failed");
}

static void test_mismatch(void **state) {
    run_world(2, body_mismatch);
    run_world(2, body_dtype_mismatch);
    run_world(3, body_dtype_mismatch);
}

static void test_bad_arguments(void **state) {
    ak_comm *c[1];
    assert_int_equal(ak_comm_init_local(1, NULL, c), AK_OK);
    float x = 1;
    assert_int_equal(ak_comm_allreduce(NULL, &x, &x, 1, AK_DTYPE_F32, AK_REDUCE_SUM), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_comm_allreduce(c[0], NULL, &x, 1, AK_DTYPE_F32, AK_REDUCE_SUM), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "sendbuf"));
    assert_int_equal(ak_comm_allreduce(c[0], &x, &x, 1, (ak_dtype)99, AK_REDUCE_SUM), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_comm_allreduce(c[0], &x, &x, 1, AK_DTYPE_F32, (ak_reduce_op)9), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_comm_broadcast(c[0], &x, 1, AK_DTYPE_F32, 1), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "root"));
    assert_int_equal(ak_comm_send(c[0], &x, 1, AK_DTYPE_F32, 0), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_comm_allreduce(c[0], &x, &x, 1, AK_DTYPE_F32, AK_REDUCE_SUM), AK_OK);
    assert_int_equal(ak_comm_init_local(0, NULL, c), AK_ERR_INVALID_ARG);
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.struct_size = 3;
    ak_comm *never = NULL;
    assert_int_equal(ak_comm_init(&cfg, &never), AK_ERR_INVALID_ARG);
    assert_null(never);
    assert_non_null(strstr(ak_last_error(), "struct_size"));
    ak_comm_free(c[0]);
    ak_comm_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worlds),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
