/* One rank of the fault-injection campaign (tests/fault/campaign.sh): a small training-
 * like job whose every result is known exactly, so a fault can only end it with an error
 * (or, elastic, a recovery), never with a wrong number.
 *
 *   fault_job comm DIR STEPS      ak_comm allreduces; every 4th step rank 0 writes a
 *                                 checkpoint (DIR/ckpt, write + fsync + rename) and all
 *                                 meet at a barrier
 *   fault_job train DIR STEPS     the same through the Horovod-style runtime (ak_train),
 *                                 response cache off, so every step is negotiated
 *   fault_job elastic DIR STEPS   an elastic worker under `ak launch --min-np`: on an
 *                                 error it drops the communicator, restores its last
 *                                 committed state, re-joins the launcher's next round and
 *                                 takes the state from the new rank 0; every 3rd step each
 *                                 rank checkpoints its state to DIR/ckpt.ID
 *   fault_job reference STEPS     prints the parameters' checksum an undisturbed run ends
 *                                 with (whatever the world size)
 *
 * The step's gradient is the sum of 12 integer-valued items split over the world, summed
 * exactly (i64), so the parameters are the same bits whatever worlds a job went through.
 *
 * Fault points: with FAULT_RANK, FAULT_STEP, FAULT_PHASE (init, coll, ckpt, rejoin) set,
 * the rank FAULT_RANK (elastic: the worker AK_ELASTIC_ID) creates DIR/at when it reaches
 * that phase of that step; the campaign watches for the file and strikes after a random
 * delay; FAULT2_RANK's worker creates DIR/at2 when it starts re-joining (a second
 * fault during re-rendezvous). Every rank writes DIR/pid.R on start (elastic: DIR/pid.ID) and, when it ends,
 * DIR/result.R (elastic: DIR/result.ID): "EXIT END_MS MESSAGE", END_MS the wall clock
 * in ms. Exit: 0 done, 3 wrong result, 10 + ak_status of the first error. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accelkit/comm.h"
#include "accelkit/train.h"

#define NPARAM 256
#define ITEMS 12 /* global batch: divisible by every world size 1..4 */

static const char *g_dir = ".";
static char g_id[32] = "?"; /* rank (fixed jobs) or elastic worker id: names the files */

static long long wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void write_file(const char *name, const char *text) {
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

/* Ends the process, leaving its result line for the campaign. */
static int finish(int code, const char *msg) {
    char line[1024], name[64];
    snprintf(line, sizeof line, "%d %lld %s\n", code, wall_ms(), msg ? msg : "");
    snprintf(name, sizeof name, "result.%s", g_id);
    write_file(name, line);
    if (code) fprintf(stderr, "fault_job %s: exit %d: %s\n", g_id, code, msg ? msg : "");
    return code;
}

static int fail_status(ak_status st, const char *what) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, ak_status_str(st), ak_last_error());
    return finish(10 + (int)st, msg);
}

/* Signals the campaign when this process reaches the fault point it waits for. */
static void fault_point(const char *phase, int step) {
    const char *r = getenv("FAULT_RANK"), *s = getenv("FAULT_STEP"), *p = getenv("FAULT_PHASE");
    const char *r2 = getenv("FAULT2_RANK");
    char text[64];
    snprintf(text, sizeof text, "%s %d %lld\n", phase, step, wall_ms());
    if (r2 && !strcmp(r2, g_id) && !strcmp(phase, "rejoin")) write_file("at2", text);
    if (!r || !s || !p || strcmp(r, g_id) || atoi(s) != step || strcmp(p, phase)) return;
    write_file("at", text);
}

/* Item i of step s, element k: small integers, exact in i64 sums. */
static int64_t item(int s, int i, int k) { return (int64_t)((s * 7 + i * 3 + k * 5) % 11) - 5; }

/* This rank's share of step s's gradient: items [rank*ITEMS/size, (rank+1)*ITEMS/size). */
static void local_grad(int s, int rank, int size, int64_t *g) {
    int per = ITEMS / size;
    for (int k = 0; k < NPARAM; k++) {
        g[k] = 0;
        for (int i = rank * per; i < (rank + 1) * per; i++) g[k] += item(s, i, k);
    }
}

static void apply(int64_t *param, const int64_t *g) {
    for (int k = 0; k < NPARAM; k++) param[k] = param[k] * 3 % 1000003 - g[k];
}

static int check_grad(int s, const int64_t *got) {
    int64_t want[NPARAM];
    local_grad(s, 0, 1, want);
    return memcmp(want, got, sizeof want) == 0;
}

static uint64_t checksum(const int64_t *param) {
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < NPARAM; k++) h = (h ^ (uint64_t)param[k]) * 1099511628211ull;
    return h;
}

/* Durable write of the state, as a trainer's checkpoint: temp file, fsync, rename. */
static int checkpoint(const char *name, int step, const int64_t *param) {
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return -1;
    int ok = write(fd, &step, sizeof step) == (ssize_t)sizeof step &&
             write(fd, param, NPARAM * sizeof *param) == (ssize_t)(NPARAM * sizeof *param) &&
             fsync(fd) == 0;
    close(fd);
    return ok && rename(tmp, path) == 0 ? 0 : -1;
}

static void write_pid(void) {
    char name[64], text[32];
    snprintf(name, sizeof name, "pid.%s", g_id);
    snprintf(text, sizeof text, "%d\n", (int)getpid());
    write_file(name, text);
}

/* ---- fixed worlds ------------------------------------------------------------------ */

static int run_comm(int steps) {
    fault_point("init", 0);
    ak_comm *c = NULL;
    ak_status st = ak_comm_init(NULL, &c);
    if (st != AK_OK) return fail_status(st, "init");
    int rank, size;
    ak_comm_rank(c, &rank);
    ak_comm_size(c, &size);
    int64_t param[NPARAM] = {0}, g[NPARAM];
    for (int s = 0; s < steps && st == AK_OK; s++) {
        fault_point("coll", s);
        local_grad(s, rank, size, g);
        st = ak_comm_allreduce(c, AK_IN_PLACE, g, NPARAM, AK_DTYPE_I64, AK_REDUCE_SUM);
        if (st != AK_OK) break;
        if (!check_grad(s, g)) return ak_comm_free(c), finish(3, "wrong allreduce result");
        apply(param, g);
        if (s % 4 == 3) {
            fault_point("ckpt", s);
            if (rank == 0 && checkpoint("ckpt", s, param))
                return ak_comm_free(c), finish(4, "checkpoint write failed");
            st = ak_comm_barrier(c);
        }
    }
    if (st != AK_OK) {
        int code = fail_status(st, "collective");
        ak_comm_free(c);
        return code;
    }
    ak_comm_free(c);
    char msg[64];
    snprintf(msg, sizeof msg, "params %016" PRIx64, checksum(param));
    return finish(0, msg);
}

static int run_train(int steps) {
    fault_point("init", 0);
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT;
    cfg.cache_capacity = 0; /* negotiate every step */
    ak_train *t = NULL;
    ak_status st = ak_train_init(&cfg, &t);
    if (st != AK_OK) return fail_status(st, "runtime init");
    ak_comm *c;
    int rank, size;
    ak_train_comm(t, &c);
    ak_comm_rank(c, &rank);
    ak_comm_size(c, &size);
    int64_t param[NPARAM] = {0}, g[NPARAM];
    for (int s = 0; s < steps; s++) {
        fault_point("coll", s);
        local_grad(s, rank, size, g);
        ak_train_op op = AK_TRAIN_OP_INIT;
        op.name = "grad";
        op.dtype = AK_DTYPE_I64;
        op.ndim = 1;
        op.shape[0] = NPARAM;
        op.input = op.output = g;
        ak_train_handle h;
        st = ak_train_enqueue(t, &op, &h);
        if (st == AK_OK) {
            st = ak_train_wait(t, h);
            ak_train_release(t, h);
        }
        if (st != AK_OK) {
            int code = fail_status(st, "runtime allreduce");
            ak_train_shutdown(t);
            return code;
        }
        if (!check_grad(s, g)) return ak_train_shutdown(t), finish(3, "wrong allreduce result");
        apply(param, g);
    }
    ak_train_shutdown(t);
    char msg[64];
    snprintf(msg, sizeof msg, "params %016" PRIx64, checksum(param));
    return finish(0, msg);
}

/* ---- elastic ----------------------------------------------------------------------- */

typedef struct elastic_state {
    int64_t step;
    int64_t param[NPARAM];
} elastic_state;

/* Joins the next round and takes the state from its rank 0. */
static ak_status rejoin(ak_comm **c, elastic_state *st, int first) {
    if (!first) fault_point("rejoin", (int)st->step);
    ak_status s = ak_comm_init(NULL, c);
    if (s != AK_OK) return s;
    s = ak_comm_broadcast(*c, st, sizeof *st, AK_DTYPE_U8, 0);
    if (s != AK_OK) ak_comm_free(*c), *c = NULL;
    return s;
}

static int run_elastic(int steps) {
    elastic_state cur = {0}, committed = {0};
    ak_comm *c = NULL;
    int resets = 0, first = 1;
    while (cur.step < steps) {
        if (!c) {
            ak_status s = rejoin(&c, &cur, first);
            int enabled = 0, round = 0, removed = 0;
            ak_elastic_status(&enabled, &round, &removed);
            if (removed) return finish(0, "told to leave");
            if (s != AK_OK) {
                if (s == AK_ERR_REMOTE || s == AK_ERR_TIMEOUT) { /* a peer died mid-sync */
                    cur = committed;
                    resets++;
                    continue;
                }
                return fail_status(s, "rejoin");
            }
            committed = cur;
            first = 0;
        }
        int rank, size, step = (int)cur.step;
        ak_comm_rank(c, &rank);
        ak_comm_size(c, &size);
        int64_t g[NPARAM];
        fault_point("coll", step);
        local_grad(step, rank, size, g);
        ak_status s = ak_comm_allreduce(c, AK_IN_PLACE, g, NPARAM, AK_DTYPE_I64, AK_REDUCE_SUM);
        if (s != AK_OK) {
            fprintf(stderr, "fault_job %s: step %d: %s: %s; re-joining\n", g_id, step,
                    ak_status_str(s), ak_last_error());
            ak_comm_free(c);
            c = NULL;
            cur = committed;
            resets++;
            continue;
        }
        if (!check_grad(step, g)) return ak_comm_free(c), finish(3, "wrong allreduce result");
        apply(cur.param, g);
        cur.step++;
        committed = cur;
        if (step % 3 == 2) {
            char name[64];
            snprintf(name, sizeof name, "ckpt.%s", g_id);
            fault_point("ckpt", step);
            if (checkpoint(name, step, cur.param))
                return ak_comm_free(c), finish(4, "checkpoint write failed");
        }
    }
    ak_comm_free(c);
    char msg[96];
    snprintf(msg, sizeof msg, "params %016" PRIx64 " resets %d", checksum(cur.param), resets);
    return finish(0, msg);
}

static int reference(int steps) {
    int64_t param[NPARAM] = {0}, g[NPARAM];
    for (int s = 0; s < steps; s++) {
        local_grad(s, 0, 1, g);
        apply(param, g);
    }
    printf("params %016" PRIx64 "\n", checksum(param));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "reference")) return reference(atoi(argv[2]));
    if (argc != 4) {
        fprintf(stderr, "usage: fault_job comm|train|elastic DIR STEPS | reference STEPS\n");
        return 2;
    }
    g_dir = argv[2];
    int steps = atoi(argv[3]);
    const char *id = getenv(strcmp(argv[1], "elastic") ? "AK_RANK" : "AK_ELASTIC_ID");
    snprintf(g_id, sizeof g_id, "%s", id ? id : "?");
    write_pid();
    if (!strcmp(argv[1], "comm")) return run_comm(steps);
    if (!strcmp(argv[1], "train")) return run_train(steps);
    if (!strcmp(argv[1], "elastic")) return run_elastic(steps);
    fprintf(stderr, "fault_job: unknown mode %s\n", argv[1]);
    return 2;
}
