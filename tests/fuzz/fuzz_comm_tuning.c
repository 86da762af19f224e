/* Fuzz: the AK_COMM_TUNING file (the collective cost model's α–β figures and measured
 * algorithm times). The input is the file; each rank of a 2-rank local world reads it
 * the way ak_comm_init does when AK_COMM_TUNING is set (ak__comm_model_init, the step of
 * communicator creation that reads the file). It must be accepted or refused with a
 * message naming the line, never crash; an accepted model must then choose an algorithm
 * for every collective at every size (no NaN trap, no out-of-range choice).
 *
 * The world itself is created once, on the first input, with that input as its tuning
 * file through the public ak_comm_init_local (so the whole creation path, refusal
 * included, still runs), and kept: creating it per input (two threads, the in-memory
 * store, the transports, the "ready" barrier) took 95 % of the time (790 exec/s; 12 900
 * this way, same flags). Each later input starts the model from the state a fresh
 * communicator has (default links, no measured times). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/comm.h"
#include "comm/comm_model.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_choices(const ak_comm *c) {
    static const size_t sizes[] = {0, 1, 8, 4096, 32768, 262144, (size_t)1 << 30, SIZE_MAX / 2};
    for (int coll = 0; coll < AK_COMM_COLL_COUNT_; coll++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            ak_comm_algo a;
            if (ak_comm_choose_coll_algo(c, (ak_comm_coll)coll, sizes[i], &a) != AK_OK ||
                a <= AK_COMM_ALGO_AUTO || a >= AK_COMM_ALGO_COUNT_)
                abort();
        }
}

/* The first input: a world created with it through the public API. 0 when refused. */
static int create_world(const char *tuning, ak_comm *comms[2]) {
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.tuning_file = tuning;
    comms[0] = comms[1] = NULL;
    if (ak_comm_init_local(2, &cfg, comms) != AK_OK) {
        if (comms[0] || comms[1]) abort();
        fuzz_refused("tuning file");
        return 0;
    }
    return 1;
}

/* A later input: each rank's model re-read from it, as communicator creation reads it. */
static int reread_model(const char *tuning, ak_comm *comms[2]) {
    int ok = 1;
    for (int r = 0; r < 2; r++) {
        comms[r]->config.tuning_file = tuning;
        memset(comms[r]->algo_measured_us, 0, sizeof comms[r]->algo_measured_us);
        if (ak__comm_model_init(comms[r], 1, NULL, 0) != AK_OK) ok = 0;
    }
    if (!ok) fuzz_refused("tuning file");
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ak_comm *world[2];
    const char *tuning = fuzz_write_file("tuning", data, size);
    int accepted;
    if (!world[0]) {
        accepted = create_world(tuning, world);
        if (!accepted) return 0; /* the next input tries again */
    } else {
        accepted = reread_model(tuning, world);
    }
    if (!accepted) return 0;
    fuzz_accepted("tuning file");
    check_choices(world[0]);
    check_choices(world[1]);
    return 0;
}
