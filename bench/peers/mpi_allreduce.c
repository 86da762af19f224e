/* Allreduce peer harness: MPI_Allreduce (Open MPI from Debian) timed as nccl-tests times
 * collectives, the peer of `ak bench comm`. bench/comm/vs_peers.sh builds and runs it:
 *   mpicc -O2 mpi_allreduce.c -o mpi_allreduce
 *   mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl tcp,self mpi_allreduce [MIN_BYTES] [MAX_BYTES]
 *   (--mca btl vader,self: shared memory)
 * Float32 sums of MIN_BYTES (8) to MAX_BYTES (64 MiB), doubling. Per size: one checked
 * call, then 200 calls below 1 MiB, 20 below 16 MiB, 5 above, each rank timing its mean;
 * the time is the slowest rank's mean. Prints a header, then per size: bytes, time_us,
 * algbw = bytes / time and busbw = algbw · 2(n−1)/n in GB/s, and whether the sum was right. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int calls_for(long bytes) { return bytes < (1L << 20) ? 200 : bytes < (16L << 20) ? 20 : 5; }

/* Rank r contributes (r + 1)·(i mod 7 + 1) at index i, so the sum is n(n+1)/2·(i mod 7 + 1). */
static void fill(float *x, long count, int rank) {
    for (long i = 0; i < count; i++) x[i] = (float)((rank + 1) * (i % 7 + 1));
}

static int sum_is_right(const float *y, long count, int n) {
    for (long i = 0; i < count; i++)
        if (y[i] != (float)(n * (n + 1) / 2 * (i % 7 + 1))) return 0;
    return 1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long min_bytes = argc > 1 ? atol(argv[1]) : 8, max_bytes = argc > 2 ? atol(argv[2]) : 64L << 20;
    if (min_bytes < 4 || max_bytes < min_bytes) {
        if (rank == 0) fprintf(stderr, "usage: %s [MIN_BYTES >= 4] [MAX_BYTES >= MIN_BYTES]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    float *x = malloc((size_t)max_bytes), *y = malloc((size_t)max_bytes);
    if (!x || !y) MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0) printf("%12s %12s %10s %10s %6s\n", "bytes", "time_us", "algbw", "busbw", "ok");
    for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        long count = bytes / 4;
        int calls = calls_for(bytes);
        fill(x, count, rank);
        MPI_Allreduce(x, y, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        int ok = sum_is_right(y, count, n);
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (int i = 0; i < calls; i++) MPI_Allreduce(x, y, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t = (MPI_Wtime() - t) / calls;
        double slowest;
        MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        double algbw = (double)(count * 4) / slowest / 1e9;
        if (rank == 0)
            printf("%12ld %12.1f %10.3f %10.3f %6s\n", count * 4, slowest * 1e6, algbw,
                   algbw * 2.0 * (n - 1) / n, ok ? "yes" : "NO");
    }
    free(x);
    free(y);
    MPI_Finalize();
    return 0;
}
