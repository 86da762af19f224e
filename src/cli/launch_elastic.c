/* `ak launch` in elastic mode (--min-np, --max-np, --host-discovery-script): Horovod
 * elastic's driver. The launcher serves the rendezvous store itself, so no worker's loss
 * takes the job's meeting point with it, and forms numbered rounds: a round starts when
 * every live worker has asked for a place (ak_comm_init) and there are at least --min-np
 * of them; each gets its rank, the world size and the host set's version. Workers that
 * fail are not restarted on their host (blacklisted, for good or for a cooldown); hosts
 * that the discovery script adds get new workers up to --max-np; workers on hosts it
 * drops are told to leave at the next round. Protocol and semantics: docs/elastic.md. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accelkit/ak.h"
#include "cli/launch.h"
#include "comm/bootstrap/elastic.h"
#include "comm/bootstrap/store.h"

#define MAX_WORKERS 512
#define DISCOVERY_PERIOD_NS 1000000000ull
#define DISCOVERY_LIMIT_MS 30000
#define GRACE_NS 3000000000ull

typedef struct el_host {
    char name[128];
    int slots;
    int listed;            /* in the last discovery (or -H) */
    uint64_t banned_until; /* a worker failed here: no new ones until then (UINT64_MAX: for good) */
} el_host;

typedef struct el_worker {
    int host;
    int leaving;         /* told (or to be told) to leave, or stopped by the launcher */
    long long asked;     /* its latest request number (-1 none) */
    long long answered;  /* the latest request answered (-1 none) */
    int last_rank;       /* rank in the last round it joined (-1 none) */
} el_worker;

typedef struct el_job {
    const ak_launch_plan *p;
    const ak_launch_elastic *e;
    ak__store_server *server;
    ak__store *store;
    int port;
    el_host hosts[AK_LAUNCH_MAX_HOSTS];
    int nhosts;
    ak_launch_proc procs[MAX_WORKERS];
    el_worker w[MAX_WORKERS];
    int nworkers, max_np;
    int round, resets;
    long long hosts_version, requests_seen;
    uint64_t next_discovery, waiting_since, stop_deadline;
    int completed;   /* a worker exited 0 on its own: the job's result is success */
    int failure;     /* the last failing worker's exit code */
    int fatal;       /* the launcher gave up: exit code to return (0: not given up) */
} el_job;

static int live(const el_job *j, int i) { return j->procs[i].pid > 0 && !j->procs[i].exited; }

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ak launch: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
    va_end(ap);
}

/* ---- hosts -------------------------------------------------------------------------- */

static int host_index(el_job *j, const char *name) {
    for (int h = 0; h < j->nhosts; h++)
        if (!strcmp(j->hosts[h].name, name)) return h;
    if (j->nhosts == AK_LAUNCH_MAX_HOSTS || strlen(name) >= sizeof j->hosts[0].name) return -1;
    el_host *h = &j->hosts[j->nhosts];
    memset(h, 0, sizeof *h);
    strcpy(h->name, name);
    return j->nhosts++;
}

static int usable(const el_job *j, int h) {
    return j->hosts[h].listed && ak_now_ns() >= j->hosts[h].banned_until;
}

/* Runs the discovery script with a time limit; its stdout in out. 0 on success. */
static int run_discovery(const char *script, char *out, size_t cap) {
    int fds[2];
    if (pipe(fds)) return -1;
    pid_t pid = fork();
    if (pid < 0) return close(fds[0]), close(fds[1]), -1;
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]), close(fds[1]);
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    uint64_t deadline = ak_now_ns() + (uint64_t)DISCOVERY_LIMIT_MS * 1000000u;
    for (;;) {
        struct pollfd pf = {fds[0], POLLIN, 0};
        if (ak_now_ns() > deadline || poll(&pf, 1, 100) < 0) break;
        if (!pf.revents) continue;
        ssize_t n = read(fds[0], out + len, cap - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
        if (len == cap - 1) break;
    }
    out[len] = '\0';
    close(fds[0]);
    kill(pid, SIGKILL); /* no-op when done; a hung script must not stay */
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The host set now: the script's "host[:slots]" lines, or -H / localhost:np. Returns the
 * change against the previous set: 1 hosts (or slots) came, 2 left, 3 both; -1 when the
 * script failed (the previous set stays). */
static int discover(el_job *j) {
    static char text[65536];
    int listed[AK_LAUNCH_MAX_HOSTS] = {0}, slots[AK_LAUNCH_MAX_HOSTS] = {0};
    if (!j->e->discovery) {
        for (int i = 0; i < (j->p->nhosts ? j->p->nhosts : 1); i++) {
            int h = host_index(j, j->p->nhosts ? j->p->hosts[i].name : "localhost");
            if (h >= 0) listed[h] = 1, slots[h] = j->p->nhosts ? j->p->hosts[i].slots : j->p->np;
        }
    } else {
        if (run_discovery(j->e->discovery, text, sizeof text)) return -1;
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char name[128];
            int n = j->e->slots_per_host > 0 ? j->e->slots_per_host : 1;
            if (sscanf(line, " %127[^: \t\r]:%d", name, &n) < 1 || n < 1) continue;
            int h = host_index(j, name);
            if (h >= 0) listed[h] = 1, slots[h] = n;
        }
    }
    int change = 0;
    for (int h = 0; h < j->nhosts; h++) {
        el_host *x = &j->hosts[h];
        if (listed[h] && (!x->listed || slots[h] > x->slots)) change |= 1;
        if (x->listed && (!listed[h] || slots[h] < x->slots)) change |= 2;
        x->listed = listed[h], x->slots = listed[h] ? slots[h] : 0;
    }
    return change;
}

/* Records a change of the host set for the workers (ak_elastic_hosts_changed). */
static void publish_change(el_job *j, int change) {
    char key[AK_STORE_MAX_KEY + 1], val[8];
    long long v = j->hosts_version + 1;
    snprintf(key, sizeof key, AK_ELASTIC_KEY_HOSTS_CHANGE, v);
    int n = snprintf(val, sizeof val, "%d", change);
    int64_t after;
    if (ak__store_set(j->store, key, val, (size_t)n) == AK_OK &&
        ak__store_add(j->store, AK_ELASTIC_KEY_HOSTS, 1, &after) == AK_OK)
        j->hosts_version = after;
}

/* ---- workers ------------------------------------------------------------------------ */

static int workers_on(const el_job *j, int h) {
    int n = 0;
    for (int i = 0; i < j->nworkers; i++) n += live(j, i) && j->w[i].host == h && !j->w[i].leaving;
    return n;
}

static int staying(const el_job *j) {
    int n = 0;
    for (int i = 0; i < j->nworkers; i++) n += live(j, i) && !j->w[i].leaving;
    return n;
}

static int spawn_worker(el_job *j, int h) {
    int id = j->nworkers;
    char text[5][300], addr[256] = "127.0.0.1";
    const char *host = j->hosts[h].name;
    if (!ak_launch_is_local_host(host) && ak_launch_address_toward(host, addr, sizeof addr)) return -1;
    snprintf(text[0], 300, "AK_ELASTIC_ADDR=%s", addr);
    snprintf(text[1], 300, "AK_ELASTIC_PORT=%d", j->port);
    snprintf(text[2], 300, "AK_ELASTIC_ID=%d", id);
    snprintf(text[3], 300, "AK_ELASTIC_TIMEOUT=%d", j->e->timeout_s);
    snprintf(text[4], 300, "HOROVOD_ELASTIC=1");
    const char *env[] = {text[0], text[1], text[2], text[3], text[4], NULL};
    j->procs[id].stdin_fd = -1;
    j->w[id] = (el_worker){h, 0, -1, -1, -1};
    if (ak_launch_spawn(j->p, host, env, &j->procs[id])) return -1;
    j->nworkers++;
    return 0;
}

/* New workers on the usable hosts' free slots, up to --max-np. */
static void spawn_more(el_job *j) {
    for (int h = 0; h < j->nhosts && !j->completed; h++) {
        if (!usable(j, h)) continue;
        for (int free = j->hosts[h].slots - workers_on(j, h); free > 0; free--) {
            if (staying(j) >= j->max_np || j->nworkers == MAX_WORKERS) return;
            if (spawn_worker(j, h)) {
                say("cannot start a worker on %s: %s", j->hosts[h].name, strerror(errno));
                return;
            }
        }
    }
}

/* Workers on hosts no longer listed leave at the next round. */
static void mark_leavers(el_job *j) {
    for (int i = 0; i < j->nworkers; i++)
        if (live(j, i) && !j->hosts[j->w[i].host].listed) j->w[i].leaving = 1;
}

static void on_exit_of(el_job *j, int i) {
    ak_launch_proc *pr = &j->procs[i];
    el_host *h = &j->hosts[j->w[i].host];
    if (j->w[i].leaving) return;
    if (pr->code == 0) {
        j->completed = 1;
        return;
    }
    j->failure = pr->code;
    uint64_t now = ak_now_ns(), span = (uint64_t)(j->e->cooldown_max_s - j->e->cooldown_min_s);
    uint64_t cooldown_s = (uint64_t)j->e->cooldown_min_s + (uint64_t)rand() % (span + 1);
    h->banned_until = j->e->cooldown_max_s <= 0 ? UINT64_MAX : now + cooldown_s * 1000000000ull;
    if (h->banned_until == UINT64_MAX)
        say("worker %d exited with %d; no new workers on its host %s", i, pr->code, h->name);
    else
        say("worker %d exited with %d; no new workers on its host %s for %.0f s", i, pr->code,
            h->name, (double)(h->banned_until - now) / 1e9);
}

static void reap(el_job *j) {
    for (int i = 0; i < j->nworkers; i++)
        if (ak_launch_reap(&j->procs[i])) on_exit_of(j, i);
}

/* ---- rounds ------------------------------------------------------------------------- */

/* Request numbers of the workers that asked since the last look. */
static void read_requests(el_job *j) {
    char val[32], key[AK_STORE_MAX_KEY + 1];
    size_t len;
    if (ak__store_get(j->store, AK_ELASTIC_KEY_REQUESTS, val, sizeof val - 1, &len, 0) != AK_OK)
        return;
    val[len < sizeof val ? len : sizeof val - 1] = '\0';
    long long seen = strtoll(val, NULL, 10);
    if (seen == j->requests_seen) return;
    j->requests_seen = seen;
    for (int i = 0; i < j->nworkers; i++) {
        snprintf(key, sizeof key, AK_ELASTIC_KEY_READY, i);
        if (!live(j, i) || ak__store_get(j->store, key, val, sizeof val - 1, &len, 0) != AK_OK)
            continue;
        val[len < sizeof val ? len : sizeof val - 1] = '\0';
        j->w[i].asked = strtoll(val, NULL, 10);
    }
}

static void answer(el_job *j, int i, const char *text) {
    char key[AK_STORE_MAX_KEY + 1];
    snprintf(key, sizeof key, AK_ELASTIC_KEY_ASSIGN, i, j->w[i].asked);
    if (ak__store_set(j->store, key, text, strlen(text)) == AK_OK) j->w[i].answered = j->w[i].asked;
}

static void give_up(el_job *j, const char *why, int n) {
    say("%s (%d worker(s), --min-np %d, waited %d s); stopping the job", why, n, j->e->min_np,
        j->e->timeout_s);
    j->fatal = j->failure ? j->failure : 1;
}

/* Waiting longer than --elastic-timeout for a round ends the job. */
static void check_wait(el_job *j, const char *why, int n) {
    if (ak_now_ns() - j->waiting_since > (uint64_t)j->e->timeout_s * 1000000000ull) give_up(j, why, n);
}

/* Rank order: workers of the last round first, in their ranks (rank 0 keeps the state
 * that new workers sync from), then new ones in the order they were started. */
static int order_workers(const el_job *j, int *order) {
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < j->nworkers; i++) {
            const el_worker *w = &j->w[i];
            int asking = live(j, i) && !w->leaving && w->asked > w->answered;
            if (!asking || (w->last_rank >= 0) == pass) continue;
            int k = n++; /* insertion by last rank (pass 0); start order (pass 1) */
            for (; pass == 0 && k > 0 && j->w[order[k - 1]].last_rank > w->last_rank; k--)
                order[k] = order[k - 1];
            order[k] = i;
        }
    return n;
}

static void assign_round(el_job *j, const int *order, int n) {
    char text[128];
    for (int k = 0; k < n; k++) {
        snprintf(text, sizeof text, "%d %d %d %lld", j->round, k, n, j->hosts_version);
        answer(j, order[k], text);
        j->w[order[k]].last_rank = k;
    }
    for (int i = 0; i < j->nworkers; i++)
        if (live(j, i) && j->w[i].leaving && j->w[i].asked > j->w[i].answered)
            answer(j, i, "leave its host left the job or the job is at --max-np");
    say("round %d: %d worker(s)", j->round, n);
    j->resets += j->round > 0;
    j->round++;
    j->waiting_since = 0;
}

/* Forms the next round once every live worker asked and at least --min-np will stay. */
static void form_round(el_job *j) {
    int nlive = 0, npending = 0, order[MAX_WORKERS];
    for (int i = 0; i < j->nworkers; i++)
        if (live(j, i)) nlive++, npending += j->w[i].asked > j->w[i].answered;
    if (!npending) {
        j->waiting_since = 0;
        return;
    }
    if (!j->waiting_since) j->waiting_since = ak_now_ns();
    if (j->completed) { /* training is over: no new rounds; who still asks may go */
        for (int i = 0; i < j->nworkers; i++)
            if (live(j, i) && j->w[i].asked > j->w[i].answered)
                j->w[i].leaving = 1, answer(j, i, "leave the job has finished");
        return;
    }
    if (npending < nlive) {
        check_wait(j, "workers still running never asked for a round", nlive);
        return;
    }
    int n = order_workers(j, order);
    for (; n > j->max_np; n--) j->w[order[n - 1]].leaving = 1; /* the newest go */
    if (n < j->e->min_np) {
        check_wait(j, "too few workers to form a round", n);
        return;
    }
    if (j->e->reset_limit >= 0 && j->round > 0 && j->resets >= j->e->reset_limit) {
        say("the job re-formed %d times, its --reset-limit; stopping", j->resets);
        j->fatal = j->failure ? j->failure : 1;
        return;
    }
    assign_round(j, order, n);
}

/* ---- the job ------------------------------------------------------------------------ */

static void tick_discovery(el_job *j) {
    uint64_t now = ak_now_ns();
    int cooled = 0;
    for (int h = 0; h < j->nhosts; h++) { /* a host whose cooldown ended counts as come back */
        el_host *x = &j->hosts[h];
        if (!x->banned_until || x->banned_until == UINT64_MAX || now < x->banned_until) continue;
        x->banned_until = 0, cooled |= x->listed;
        say("host %s's cooldown is over: it may get workers again", x->name);
    }
    if (now < j->next_discovery && !cooled) return;
    j->next_discovery = now + DISCOVERY_PERIOD_NS;
    int change = j->e->discovery ? discover(j) : 0;
    if (change < 0) return;
    change |= cooled;
    if (!change) return;
    publish_change(j, change);
    mark_leavers(j);
    spawn_more(j);
}

/* Before the first round: hosts with --min-np slots, waited for up to the timeout. */
static int first_workers(el_job *j) {
    uint64_t deadline = ak_now_ns() + (uint64_t)j->e->timeout_s * 1000000000ull;
    for (;;) {
        int slots = 0;
        if (discover(j) >= 0)
            for (int h = 0; h < j->nhosts; h++) slots += usable(j, h) ? j->hosts[h].slots : 0;
        if (slots >= j->e->min_np) break;
        if (ak_now_ns() > deadline || ak_launch_signal) {
            say("the hosts offer %d slot(s), fewer than --min-np %d, after %d s", slots,
                j->e->min_np, j->e->timeout_s);
            return -1;
        }
        usleep(500000);
    }
    j->next_discovery = ak_now_ns() + DISCOVERY_PERIOD_NS;
    spawn_more(j);
    if (j->nworkers < j->e->min_np) { /* spawn_more said why; run_loop stops the rest */
        say("started %d worker(s), fewer than --min-np %d", j->nworkers, j->e->min_np);
        j->fatal = 2;
    }
    return 0;
}

static int any_live(const el_job *j) {
    for (int i = 0; i < j->nworkers; i++)
        if (live(j, i)) return 1;
    return 0;
}

/* Stops every worker: SIGTERM now, SIGKILL after the grace period. */
static void stop_all(el_job *j) {
    if (!j->stop_deadline) {
        for (int i = 0; i < j->nworkers; i++) j->w[i].leaving = 1;
        ak_launch_kill_all(j->procs, j->nworkers, SIGTERM);
        j->stop_deadline = ak_now_ns() + GRACE_NS;
    } else if (ak_now_ns() > j->stop_deadline) {
        ak_launch_kill_all(j->procs, j->nworkers, SIGKILL);
    }
}

static void run_loop(el_job *j) {
    uint64_t drain_deadline = 0;
    for (;;) {
        reap(j);
        if (!any_live(j)) {
            if (!drain_deadline) drain_deadline = ak_now_ns() + 1000000000ull;
            if (!ak_launch_have_output(j->procs, j->nworkers) || ak_now_ns() > drain_deadline) return;
        }
        ak_launch_pump_output(j->p, j->procs, j->nworkers, 50);
        if (ak_launch_signal || j->fatal) {
            stop_all(j);
            continue;
        }
        tick_discovery(j);
        read_requests(j);
        form_round(j);
    }
}

/* Where the rendezvous listens: AK_STORE_ADDR, else loopback when every worker runs
 * here (no discovery script, only local hosts), else every interface (workers on other
 * hosts dial the address toward them; the handshake keeps strangers out). */
static const char *rendezvous_address(const ak_launch_plan *p) {
    const char *chosen = getenv("AK_STORE_ADDR");
    if (chosen && chosen[0]) return chosen;
    if (p->elastic.discovery) return NULL;
    for (int h = 0; h < p->nhosts; h++)
        if (!ak_launch_is_local_host(p->hosts[h].name)) return NULL;
    return "127.0.0.1";
}

static int setup(el_job *j, const ak_launch_plan *p) {
    memset(j, 0, sizeof *j);
    j->p = p;
    j->e = &p->elastic;
    ak_launch_elastic *e = (ak_launch_elastic *)&p->elastic; /* defaults filled in place */
    if (e->min_np <= 0) e->min_np = p->np;
    j->max_np = e->max_np > 0 ? e->max_np : e->discovery ? MAX_WORKERS : p->np;
    if (e->timeout_s <= 0) e->timeout_s = 600;
    if (e->min_np > j->max_np) {
        say("--min-np %d is more than --max-np %d", e->min_np, j->max_np);
        return -1;
    }
    int64_t after;
    if (ak__store_serve(rendezvous_address(p), 0, &j->port, &j->server) != AK_OK ||
        ak__store_connect("127.0.0.1", j->port, 5000, &j->store) != AK_OK ||
        ak__store_add(j->store, AK_ELASTIC_KEY_HOSTS, 0, &after) != AK_OK) {
        say("cannot serve the rendezvous: %s", ak_last_error());
        return -1;
    }
    return 0;
}

int ak_launch_run_elastic(const ak_launch_plan *p) {
    static el_job job; /* large (workers' line buffers): not on the stack */
    el_job *j = &job;
    int rc = 2;
    if (setup(j, p) == 0) {
        ak_launch_catch_signals();
        if (first_workers(j) == 0) {
            run_loop(j);
            rc = j->fatal ? j->fatal : j->completed ? 0 : j->failure ? j->failure : 1;
        }
        if (ak_launch_signal) {
            say("stopped by signal %d; stopped the workers", (int)ak_launch_signal);
            rc = 128 + ak_launch_signal;
        }
    }
    ak__store_free(j->store);
    ak__store_server_stop(j->server);
    return rc;
}
