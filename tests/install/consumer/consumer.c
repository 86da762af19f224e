/* A program that uses an installed accelkit as any user would: the version from
 * accelkit/version.h against the library's, an SGEMM and an allreduce on a 1-rank world,
 * each result checked. Exit 0 when all agree. Built by tests/install/c_consumer.sh with
 * pkg-config and with find_package(accelkit). */
#include <math.h>
#include <stdio.h>

#include <accelkit/ak.h>
#include <accelkit/comm.h>
#include <accelkit/kernels.h>

static int failed(const char *what, ak_status st) {
    fprintf(stderr, "consumer: %s: %s: %s\n", what, ak_status_str(st), ak_last_error());
    return 1;
}

static int check_version(void) {
    int major, minor, patch;
    ak_status st = ak_version(&major, &minor, &patch);
    if (st != AK_OK) return failed("ak_version", st);
    if (major != AK_VERSION_MAJOR || minor != AK_VERSION_MINOR || patch != AK_VERSION_PATCH) {
        fprintf(stderr, "consumer: header says %s, library %d.%d.%d\n", AK_VERSION_STRING,
                major, minor, patch);
        return 1;
    }
    return 0;
}

/* (2x3)·(3x2) against the product worked out by hand */
static int check_sgemm(void) {
    const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    const float want[4] = {58, 64, 139, 154};
    float c[4] = {0};
    ak_status st = ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2, NULL);
    if (st != AK_OK) return failed("ak_sgemm", st);
    for (int i = 0; i < 4; i++)
        if (fabsf(c[i] - want[i]) > 1e-4f) {
            fprintf(stderr, "consumer: sgemm C[%d] = %g, expected %g\n", i, c[i], want[i]);
            return 1;
        }
    return 0;
}

/* a 1-rank world: the sum is the input itself */
static int check_allreduce(void) {
    ak_comm *comm;
    ak_status st = ak_comm_init_local(1, NULL, &comm);
    if (st != AK_OK) return failed("ak_comm_init_local", st);
    float in[3] = {1.5f, -2.0f, 4.0f}, out[3] = {0};
    st = ak_comm_allreduce(comm, in, out, 3, AK_DTYPE_F32, AK_REDUCE_SUM);
    ak_comm_free(comm);
    if (st != AK_OK) return failed("ak_comm_allreduce", st);
    for (int i = 0; i < 3; i++)
        if (out[i] != in[i]) {
            fprintf(stderr, "consumer: allreduce[%d] = %g, expected %g\n", i, out[i], in[i]);
            return 1;
        }
    return 0;
}

int main(void) {
    ak_status st = ak_init();
    if (st != AK_OK) return failed("ak_init", st);
    if (check_version() || check_sgemm() || check_allreduce()) return 1;
    printf("consumer: accelkit %s: version, sgemm and allreduce ok\n", AK_VERSION_STRING);
    return 0;
}
