/* Test program for tests/comm/test_procs.sh: one rank of a world started by the script.
 *   comm_fault_rank kill RANK_TO_KILL ITERS   allreduce in a loop; the chosen rank kills
 *                                             itself (SIGKILL) after ITERS iterations
 *   comm_fault_rank count                      allreduce whose count differs by rank
 * Exit: 0 success, 10 + ak_status of the first failure, 3 for a wrong result. Prints
 * the failure and how long it took to stderr. */
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
    if (!strcmp(argv[1], "count")) {
        uint64_t t0 = ak_now_ns();
        st = ak_comm_allreduce(c, buf, buf, rank == 0 ? N : N / 2, AK_DTYPE_F32, AK_REDUCE_SUM);
        if (st != AK_OK) return failed(c, buf, st, t0);
    }
    ak_comm_free(c);
    free(buf);
    return 0;
}
