/* Resource safety of failing communicator creations: 1 000 ak_comm_init calls that must
 * fail (no store at the address, a rank that never joins, an unparsable address, bad
 * world sizes and ranks, a local world of bad size, two ranks that disagree on the world
 * size) each leave the process with the file descriptors (/proc/self/fd), threads
 * (/proc/self/task) and shared-memory segments (/dev/shm/accelkit-*) it had before.
 * Then crash recovery: a segment left by a process killed during set-up is removed by the
 * next communicator created on the host. And the cap on sizes other ranks send
 * (ak__wire_bytes, AK_COMM_MAX_BYTES set to 1 MiB here): negative, overflowing and
 * oversize counts refused, naming the limit.
 *   test_resources [ITERATIONS]   (default 1000) */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accelkit/comm.h"
#include "comm/transport/transport.h"
#include "train/train_internal.h"

static int count_entries(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && (!prefix || !strncmp(e->d_name, prefix, strlen(prefix)))) n++;
    closedir(d);
    return n - (prefix ? 0 : 1); /* the directory's own descriptor while listing fds */
}

typedef struct counts {
    int fds, threads, shm;
} counts;

static counts now_counts(void) {
    return (counts){count_entries("/proc/self/fd", NULL), count_entries("/proc/self/task", NULL) + 1,
                    count_entries("/dev/shm", "accelkit-")};
}

/* A port nothing listens on: bound then closed (nothing else takes it this quickly). */
static int free_port(void) {
    static int next = 0;
    if (!next) next = 21000 + (int)(getpid() % 9000);
    return next++ % 11000 + 21000;
}

typedef struct mismatch_arg {
    int rank, size, port;
    ak_status st;
} mismatch_arg;

static void *mismatch_rank(void *p) {
    mismatch_arg *a = p;
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.rank = a->rank;
    cfg.world_size = a->size;
    cfg.store_addr = "127.0.0.1";
    cfg.store_port = a->port;
    cfg.timeout_ms = 300;
    ak_comm *c = NULL;
    a->st = ak_comm_init(&cfg, &c);
    ak_comm_free(c);
    return NULL;
}

/* One failing creation of kind i % 7; 0 when it failed as it must. */
static int fail_once(int i) {
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.store_addr = "127.0.0.1";
    cfg.store_port = free_port();
    cfg.timeout_ms = 20;
    ak_comm *c = NULL;
    ak_status st;
    switch (i % 7) {
    case 0: /* no store at the address */
        cfg.rank = 1, cfg.world_size = 2;
        break;
    case 1: /* rank 0 serves the store, rank 1 never comes */
        cfg.rank = 0, cfg.world_size = 2;
        break;
    case 2: cfg.rank = 0, cfg.world_size = 0; break;
    case 3: cfg.rank = 3, cfg.world_size = 2; break;
    case 4: /* an address that is no address */
        cfg.rank = 1, cfg.world_size = 2, cfg.store_addr = "300.1.2.3";
        break;
    case 5: {
        ak_comm *local[2] = {NULL, NULL};
        st = ak_comm_init_local(i % 2 ? 0 : -3, &cfg, local);
        return st == AK_OK;
    }
    default: { /* two ranks that disagree on the world size */
        mismatch_arg a[2] = {{0, 2, cfg.store_port, AK_OK}, {1, 3, cfg.store_port, AK_OK}};
        pthread_t t[2];
        for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, mismatch_rank, &a[r]);
        for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
        return a[0].st == AK_OK || a[1].st == AK_OK;
    }
    }
    st = ak_comm_init(&cfg, &c);
    if (st == AK_OK) ak_comm_free(c);
    return st == AK_OK;
}

/* Counts may lag an exited thread by a moment: wait up to 2 s for them to settle. */
static int settled(counts want, counts *got) {
    for (int i = 0; i < 200; i++) {
        *got = now_counts();
        if (got->fds == want.fds && got->threads == want.threads && got->shm <= want.shm) return 1;
        usleep(10000);
    }
    return 0;
}

/* A process that dies (SIGKILL) holding a fresh segment named as the kit names them. */
static int crashed_segment(char *name, size_t cap) {
    int pipefd[2];
    if (pipe(pipefd)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char n[128];
        if (ak__shm_segment_name(n, sizeof n, "test") != AK_OK) _exit(1);
        int fd = shm_open(n, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, 4096)) _exit(1);
        if (write(pipefd[1], n, strlen(n) + 1) < 0) _exit(1);
        raise(SIGKILL);
    }
    close(pipefd[1]);
    ssize_t got = read(pipefd[0], name, cap - 1);
    close(pipefd[0]);
    waitpid(pid, NULL, 0);
    if (got <= 0) return -1;
    name[got] = '\0';
    return 0;
}

static int check_crash_recovery(void) {
    char name[128], path[160];
    if (crashed_segment(name, sizeof name)) {
        fprintf(stderr, "FAIL: the crashing child made no segment\n");
        return 1;
    }
    snprintf(path, sizeof path, "/dev/shm%s", name);
    if (access(path, F_OK)) {
        fprintf(stderr, "FAIL: %s was not left behind by the killed child\n", path);
        return 1;
    }
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.transport = AK_COMM_TRANSPORT_SHM;
    ak_comm *c[2] = {NULL, NULL};
    ak_status st = ak_comm_init_local(2, &cfg, c);
    ak_comm_free(c[0]);
    ak_comm_free(c[1]);
    if (st != AK_OK) {
        fprintf(stderr, "FAIL: a shm world of 2 threads: %s\n", ak_last_error());
        return 1;
    }
    if (!access(path, F_OK)) {
        fprintf(stderr, "FAIL: %s of a dead process survived the next communicator\n", path);
        return 1;
    }
    printf("crash recovery: %s of the killed process removed by the next communicator\n", name);
    return 0;
}

static int check_wire_cap(void) {
    size_t bytes = 0;
    int bad = 0;
    if (ak__wire_bytes("t", 1024, 1024, &bytes) != AK_OK || bytes != 1048576) bad++;
    if (ak__wire_bytes("t", 1025, 1024, &bytes) != AK_ERR_MISMATCH ||
        !strstr(ak_last_error(), "AK_COMM_MAX_BYTES (1048576 bytes)")) bad++;
    if (ak__wire_bytes("t", -1, 4, &bytes) != AK_ERR_MISMATCH) bad++;
    if (ak__wire_bytes("t", INT64_MAX, 8, &bytes) != AK_ERR_MISMATCH) bad++;
    if (bad) fprintf(stderr, "FAIL: AK_COMM_MAX_BYTES: %d wrong answers\n", bad);
    return bad;
}

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 1000;
    setenv("AK_COMM_MAX_BYTES", "1048576", 1); /* read once, at the first parameter use */
    ak_log_set_level(AK_LOG_OFF);
    fail_once(0); /* the library's lazily created state (logging, parameters) first */
    counts before = now_counts(), after;
    int bad = 0;
    for (int i = 0; i < iterations; i++)
        if (fail_once(i)) {
            fprintf(stderr, "FAIL: creation %d (kind %d) succeeded\n", i, i % 7);
            bad++;
        }
    if (!settled(before, &after)) {
        fprintf(stderr, "FAIL: after %d failing creations: %d fds (before %d), %d threads "
                "(before %d), %d shm segments (before %d)\n", iterations, after.fds,
                before.fds, after.threads, before.threads, after.shm, before.shm);
        bad++;
    } else {
        printf("%d failing creations: fds %d -> %d, threads %d -> %d, shm segments %d -> %d\n",
               iterations, before.fds, after.fds, before.threads, after.threads, before.shm,
               after.shm);
    }
    bad += check_crash_recovery();
    bad += check_wire_cap();
    return bad ? 1 : 0;
}
