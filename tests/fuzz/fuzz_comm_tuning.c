/* Fuzz: the AK_COMM_TUNING file (the collective cost model's α–β figures and measured
 * algorithm times). The input is the file; a 2-rank local world is created with it, as
 * ak_comm_init does when AK_COMM_TUNING is set. It must be accepted or refused with a
 * message naming the line, never crash; an accepted model must then choose an algorithm
 * for every collective at every size (no NaN trap, no out-of-range choice). */
#include <stdint.h>
#include <stdlib.h>

#include "accelkit/comm.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.tuning_file = fuzz_write_file("tuning", data, size);
    ak_comm *comms[2] = {NULL, NULL};
    if (ak_comm_init_local(2, &cfg, comms) != AK_OK) {
        if (comms[0] || comms[1]) abort();
        fuzz_refused("tuning file");
        return 0;
    }
    fuzz_accepted("tuning file");
    check_choices(comms[0]);
    check_choices(comms[1]);
    ak_comm_free(comms[0]);
    ak_comm_free(comms[1]);
    return 0;
}
