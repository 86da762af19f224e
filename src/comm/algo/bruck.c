/* Bruck allgather(v): ceil(log2 n) rounds for any group size n, the latency-optimal
 * allgather where recursive doubling cannot run (n not a power of two, or allgatherv
 * blocks that are not laid out back to back in group order).
 *
 * Every rank collects the blocks in an order rotated to start at its own: scratch slot j
 * holds the block of group index (me + j) mod n, packed back to back. In the round at
 * distance d = 1, 2, 4, … index i sends its first min(d, n − d) slots to i − d and
 * receives as many from i + d, whose first slots are i's slots d, d + 1, …: after the
 * round i holds slots [0, min(2d, n)). A final pass copies slot j to its place in buf.
 * Steps: ceil(log2 n); bytes each rank sends: (n − 1)/n · S (S = all blocks), plus one
 * local copy of S in and out of the scratch, which is why recursive doubling (no copy)
 * is preferred where it runs. */
#include <string.h>

#include "comm/algo/algo.h"
#include "core/check.h"

ak_status ak__allgatherv_bruck(const ak__algo_ctx *c, const ak__group *g, void *buf, const size_t *counts,
                               const size_t *displs, size_t elem_size, uint64_t tag) {
    int n = g->n, me = g->me;
    size_t total = 0;
    for (int b = 0; b < n; b++) total += counts[b];
    if (n == 1 || total == 0) return AK_OK;
    /* scratch: slot offsets (elements, n + 1 of them), then the slots, 64-byte aligned */
    size_t head = ((size_t)(n + 1) * sizeof(size_t) + 63) & ~(size_t)63;
    void *scratch;
    AK_CHECK(ak__algo_scratch(c, head + total * elem_size, &scratch));
    size_t *slot = scratch;
    char *data = (char *)scratch + head, *out = buf;
    slot[0] = 0;
    for (int j = 0; j < n; j++) slot[j + 1] = slot[j] + counts[(me + j) % n];
    memcpy(data, out + displs[me] * elem_size, counts[me] * elem_size);
    for (int d = 1; d < n; d <<= 1) {
        int k = d < n - d ? d : n - d; /* slots exchanged this round */
        int to = g->ranks[(me - d + n) % n], from = g->ranks[(me + d) % n];
        /* slots [0, k) out, [d, d + k) in: disjoint since k ≤ d */
        AK_CHECK(ak__p2p_sendrecv(c, to, data, slot[k] * elem_size, from,
                                  data + slot[d] * elem_size, (slot[d + k] - slot[d]) * elem_size,
                                  tag));
    }
    for (int j = 1; j < n; j++) {
        int b = (me + j) % n;
        if (counts[b])
            memcpy(out + displs[b] * elem_size, data + slot[j] * elem_size, counts[b] * elem_size);
    }
    return AK_OK;
}
