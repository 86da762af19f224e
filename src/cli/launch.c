/* `ak launch` (see launch.h). Ranks are placed on hosts in order, filling each host's
 * slots; rank 0's host serves the bootstrap store on a free port. Each rank's stdout and
 * stderr come back through pipes and are written line by line with a "[rank] " prefix.
 * When a rank fails, the others get SIGTERM, then SIGKILL after a grace period; so do all
 * ranks when the launcher itself is interrupted or terminated (Ctrl-C, timeout), and a
 * local rank whose launcher dies outright gets SIGKILL from the kernel (no orphans). */
#include "cli/launch.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accelkit/ak.h"
#include "comm/bootstrap/auth.h"

#define GRACE_MS 3000


int ak_launch_parse_hosts(const char *text, ak_launch_plan *plan) {
    char buf[4096];
    if (strlen(text) >= sizeof buf) return -1;
    strcpy(buf, text);
    plan->nhosts = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (plan->nhosts == AK_LAUNCH_MAX_HOSTS) return -1;
        ak_launch_host *h = &plan->hosts[plan->nhosts++];
        char *colon = strrchr(tok, ':');
        h->slots = 1;
        if (colon) { /* a whole number in range: 256 hosts' slots still add up in an int */
            *colon = '\0';
            char *end;
            errno = 0;
            long slots = strtol(colon + 1, &end, 10);
            if (errno || end == colon + 1 || *end || slots < 1 || slots > AK_LAUNCH_MAX_SLOTS) return -1;
            h->slots = (int)slots;
        }
        if (!tok[0] || strlen(tok) >= sizeof h->name) return -1;
        strcpy(h->name, tok);
    }
    return plan->nhosts > 0 ? 0 : -1;
}

int ak_launch_read_hostfile(const char *path, ak_launch_plan *plan) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512], spec[4096] = "";
    while (fgets(line, sizeof line, f)) {
        char name[200], slots[24] = "1"; /* slots as text: ak_launch_parse_hosts checks it */
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        if (sscanf(line, "%199s slots=%23s", name, slots) < 1) continue;
        if (strlen(spec) + strlen(name) + strlen(slots) + 3 >= sizeof spec) break;
        char item[256];
        const char *sep = spec[0] ? "," : "";
        if (strchr(name, ':')) /* "host:N" kept as written */
            snprintf(item, sizeof item, "%s%s", sep, name);
        else
            snprintf(item, sizeof item, "%s%s:%s", sep, name, slots);
        strcat(spec, item);
    }
    fclose(f);
    return spec[0] ? ak_launch_parse_hosts(spec, plan) : -1;
}

int ak_launch_is_local_host(const char *name) {
    char self[256] = "";
    gethostname(self, sizeof self - 1);
    return strcmp(name, "localhost") == 0 || strcmp(name, "127.0.0.1") == 0 ||
           strcmp(name, self) == 0;
}

/* 1 when a TCP listener could bind `port` on every address here now (SO_REUSEADDR, as the
 * store binds, so a closed connection's TIME_WAIT does not count as taken). */
static int port_is_free(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, ok = 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY),
                            .sin_port = htons((uint16_t)port)};
    if (fd < 0) return 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0)
        ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* The lowest port the kernel hands out to outgoing connections (ip_local_port_range). */
static int ephemeral_low(void) {
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768;
        fclose(f);
    }
    return lo;
}

/* Rank 0's store port P, with P+1 free too: accelkit.torch.distributed gives torch's own
 * store MASTER_PORT = AK_MASTER_PORT + 1. Both come from below the ephemeral range, where
 * no outgoing connection of a busy machine can take them between this check and the
 * ranks' bind (a port bound to 0 is an ephemeral one, and so is its neighbour); from 20000
 * up, so that the tests' own stores (tests/comm/test_procs.sh: 10000-19999) never race a
 * launch for the same port. When rank 0 runs on another host the ports are only likely to
 * be free there. */
static int free_port(void) {
    int top = ephemeral_low() - 2, bottom = 20000;
    if (top > bottom) {
        unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
        for (int tries = 0; tries < 200; tries++) {
            int port = bottom + (int)(rand_r(&seed) % (unsigned)(top - bottom));
            if (port_is_free(port) && port_is_free(port + 1)) return port;
        }
    }
    for (int tries = 0; tries < 50; tries++) { /* no room below the range: two bound to 0 */
        int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
        socklen_t len = sizeof a;
        if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0)
            port = ntohs(a.sin_port);
        if (fd >= 0) close(fd);
        if (port > 0 && port < 65535 && port_is_free(port + 1)) return port;
    }
    return 29500;
}

/* The launcher's address as seen from `peer`: the source address the kernel would route
 * from (a UDP connect sends nothing). AK_COMM_BIND_ADDR wins; the host name is the last
 * resort. 0 on success. */
int ak_launch_address_toward(const char *peer, char *out, size_t cap) {
    const char *bind = getenv("AK_COMM_BIND_ADDR");
    if (bind && bind[0]) return snprintf(out, cap, "%s", bind) >= (int)cap;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    int ok = 0;
    if (getaddrinfo(peer, "9", &hints, &res) == 0) {
        int fd = socket(res->ai_family, SOCK_DGRAM, 0);
        struct sockaddr_storage self;
        socklen_t len = sizeof self;
        ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
             getsockname(fd, (struct sockaddr *)&self, &len) == 0 &&
             getnameinfo((struct sockaddr *)&self, len, out, (socklen_t)cap, NULL, 0, NI_NUMERICHOST) == 0;
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
    }
    if (ok) return 0;
    return gethostname(out, cap) != 0;
}

static int total_slots(const ak_launch_plan *p) {
    int total = 0;
    for (int h = 0; h < p->nhosts; h++) total += p->hosts[h].slots;
    return total;
}

/* Host of each rank: fill hosts' slots in order (np never exceeds them: checked first). */
static const char *host_of_rank(const ak_launch_plan *p, int rank, int *local_rank, int *local_size) {
    if (p->nhosts == 0) {
        *local_rank = rank;
        *local_size = p->np;
        return "localhost";
    }
    int base = 0;
    *local_rank = 0, *local_size = 1;
    for (int h = 0; h < p->nhosts; h++) {
        if (rank < base + p->hosts[h].slots) {
            int left = p->np - base; /* ranks placed from this host on */
            *local_rank = rank - base;
            *local_size = p->hosts[h].slots < left ? p->hosts[h].slots : left;
            return p->hosts[h].name;
        }
        base += p->hosts[h].slots;
    }
    return "localhost";
}

/* Where the ranks find rank 0's store: loopback when every rank is local, else an
 * address the remote ranks can reach. 0 on success. */
static int master_address(const ak_launch_plan *p, char *out, size_t cap) {
    int lr, ls;
    const char *h0 = host_of_rank(p, 0, &lr, &ls), *remote = NULL;
    if (!ak_launch_is_local_host(h0)) return snprintf(out, cap, "%s", h0) >= (int)cap;
    for (int r = 1; r < p->np && !remote; r++) {
        const char *h = host_of_rank(p, r, &lr, &ls);
        if (!ak_launch_is_local_host(h)) remote = h;
    }
    if (!remote) return snprintf(out, cap, "127.0.0.1") >= (int)cap;
    return ak_launch_address_toward(remote, out, cap);
}

/* The variables rank discovery reads ("NAME=VALUE" in env, NULL-terminated). */
static void rank_env(const ak_launch_plan *p, int rank, int local_rank, int local_size,
                     const char *master, int port, char text[6][300], const char *env[7]) {
    snprintf(text[0], 300, "AK_RANK=%d", rank);
    snprintf(text[1], 300, "AK_WORLD_SIZE=%d", p->np);
    snprintf(text[2], 300, "AK_LOCAL_RANK=%d", local_rank);
    snprintf(text[3], 300, "AK_LOCAL_SIZE=%d", local_size);
    snprintf(text[4], 300, "AK_MASTER_ADDR=%s", master);
    snprintf(text[5], 300, "AK_MASTER_PORT=%d", port);
    for (int i = 0; i < 6; i++) env[i] = text[i];
    env[6] = NULL;
}

/* Sets each "NAME=VALUE" of env in this (child) process. */
static void set_env_list(const char *const *env) {
    for (; env && *env; env++) {
        char name[64];
        size_t n = strcspn(*env, "=");
        if (n >= sizeof name || !(*env)[n]) continue;
        memcpy(name, *env, n), name[n] = '\0';
        setenv(name, *env + n + 1, 1);
    }
}

/* Remote ranks get the launcher's environment, as horovodrun gives them, less what
 * describes the launcher's own login session or shell; ssh runs a shell command line, so
 * each value and argument is single-quoted. */
static int forwarded(const ak_launch_plan *p, const char *kv) {
    static const char *const session[] = {"HOSTNAME=", "HOME=", "PWD=", "OLDPWD=", "SHLVL=", "_=",
                                          "USER=", "LOGNAME=", "SHELL=", "MAIL=", "TERM=",
                                          "TERMCAP=", "DISPLAY=", "XAUTHORITY=", "LS_COLORS=",
                                          "SSH_", "XDG_", "BASH_FUNC_", "DBUS_",
                                          "AK_JOB_SECRET=" /* goes through stdin */};
    size_t name_len = strcspn(kv, "=");
    if (kv[name_len] != '=' || name_len == 0 || (kv[0] >= '0' && kv[0] <= '9')) return 0;
    for (size_t i = 0; i < name_len; i++) /* a name the remote shell cannot take is skipped */
        if (!(kv[i] == '_' || (kv[i] >= 'A' && kv[i] <= 'Z') || (kv[i] >= 'a' && kv[i] <= 'z') ||
              (kv[i] >= '0' && kv[i] <= '9')))
            return 0;
    for (int i = 0; i < p->nexport; i++) /* -x NAME forwards even a session variable */
        if (strlen(p->export_vars[i]) == name_len && !strncmp(kv, p->export_vars[i], name_len)) return 1;
    for (size_t i = 0; i < sizeof session / sizeof *session; i++)
        if (!strncmp(kv, session[i], strlen(session[i]))) return 0;
    return 1;
}

/* word as one single-quoted shell word; with keep_name, the NAME= of NAME=VALUE stays bare
 * so that env(1) still sees an assignment. */
static char *shell_quoted(const char *word, int keep_name) {
    const char *eq = keep_name ? strchr(word, '=') : NULL;
    size_t n = strlen(word), extra = 0, head = eq ? (size_t)(eq - word) + 1 : 0;
    for (const char *c = word; *c; c++) extra += *c == '\'' ? 3 : 0;
    char *out = malloc(n + extra + 3), *o = out;
    memcpy(o, word, head);
    o += head;
    *o++ = '\'';
    for (const char *c = word + head; *c; c++) {
        if (*c == '\'') memcpy(o, "'\\''", 4), o += 4;
        else *o++ = *c;
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

/* What runs a remote rank: the command in its own session, and a watcher that stops that
 * session when ssh's stdin ends. Without a terminal sshd sends the rank no SIGHUP, so when
 * the launcher (or its ssh client) dies or stops the job, a rank busy computing would run
 * on until its next write or collective failed; the launcher holds each ssh's stdin open
 * and closes it when it stops the ranks. `setsid -w` keeps the rank's exit status; fd 3
 * carries stdin to the watcher because a background list's own stdin is /dev/null. The
 * first line of stdin is the job secret (see send_secret): on ssh's command line every
 * user of the remote host could read it in the process list. */
static const char remote_guard[] =
    "IFS= read -r s; if [ -n \"$s\" ]; then AK_JOB_SECRET=$s; export AK_JOB_SECRET; fi; unset s; "
    "exec 3<&0; setsid -w \"$@\" </dev/null 3<&- & c=$!; "
    "{ cat <&3; kill -TERM -$c || kill -TERM $c; sleep 3; kill -KILL -$c; } >/dev/null 2>&1 & w=$!; "
    "wait $c; s=$?; kill $w; exit $s";

/* ssh [-p PORT] -o BatchMode=yes HOST cd 'CWD' >/dev/null 2>&1; env VARS... sh -c GUARD
 * ak-rank ARGV...: BatchMode makes a host that would ask for a password fail at once
 * instead of hanging the launch, and the rank starts in the launcher's directory as
 * horovodrun's do. */
static char **ssh_argv(const ak_launch_plan *p, const char *host) {
    extern char **environ;
    int n = 0, nenv = 0;
    while (p->argv[n]) n++;
    while (environ[nenv]) nenv++;
    char **out = calloc((size_t)(n + nenv) + 24, sizeof *out);
    if (!out) return NULL;
    int i = 0;
    out[i++] = "ssh";
    if (p->ssh_port) {
        static char port[16];
        snprintf(port, sizeof port, "%d", p->ssh_port);
        out[i++] = "-p", out[i++] = port;
    }
    out[i++] = "-o", out[i++] = "BatchMode=yes";
    out[i++] = (char *)host;
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) {
        out[i++] = "cd";
        out[i++] = shell_quoted(cwd, 0);
        out[i++] = ">/dev/null 2>&1;";
    }
    out[i++] = "env";
    for (int e = 0; e < nenv; e++) /* includes the rank variables set just before */
        if (forwarded(p, environ[e])) out[i++] = shell_quoted(environ[e], 1);
    out[i++] = "sh", out[i++] = "-c", out[i++] = shell_quoted(remote_guard, 0), out[i++] = "ak-rank";
    for (int a = 0; a < n; a++) out[i++] = shell_quoted(p->argv[a], 0);
    return out;
}

/* The first line a remote rank's shell reads (remote_guard): the job secret, or an empty
 * line when the job's secret comes from AK_JOB_SECRET_FILE. The pipe is empty, so the
 * short line goes in at once. */
static void send_secret(int fd) {
    const char *secret = getenv("AK_JOB_SECRET");
    size_t n = secret ? strlen(secret) : 0;
    ssize_t w;
    if (n && (w = write(fd, secret, n)) != (ssize_t)n) return; /* ssh is gone: it fails anyway */
    w = write(fd, "\n", 1);
    (void)w;
}

int ak_launch_job_secret(void) {
    const char *secret = getenv("AK_JOB_SECRET"), *file = getenv("AK_JOB_SECRET_FILE");
    if (!(secret && secret[0]) && !(file && file[0])) {
        char hex[65];
        if (ak__auth_generate_secret(hex) != AK_OK || setenv("AK_JOB_SECRET", hex, 1) != 0) {
            fprintf(stderr, "ak launch: cannot make a job secret: %s\n", ak_last_error());
            return -1;
        }
        memset(hex, 0, sizeof hex);
        return 0;
    }
    if (secret && strchr(secret, '\n')) {
        fprintf(stderr, "ak launch: AK_JOB_SECRET contains a newline\n");
        return -1;
    }
    ak__auth_key key;
    if (ak__auth_key_from_env(&key) != AK_OK) {
        fprintf(stderr, "ak launch: %s\n", ak_last_error());
        return -1;
    }
    memset(&key, 0, sizeof key);
    return 0;
}

int ak_launch_spawn(const ak_launch_plan *p, const char *host, const char *const *env,
                    ak_launch_proc *rp) {
    int out[2], err[2], in[2] = {-1, -1};
    int remote = !ak_launch_is_local_host(host);
    rp->stdin_fd = -1;
    if (pipe(out) || pipe(err) || (remote && pipe2(in, O_CLOEXEC))) return -1;
    pid_t launcher = getpid();
    rp->pid = fork();
    if (rp->pid < 0) return -1;
    if (rp->pid == 0) {
        if (remote) dup2(in[0], STDIN_FILENO); /* the copy on 0 stays open across exec */
        /* the launcher's handlers would keep a rank that is slow to exec alive on SIGTERM */
        signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL);
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        setpgid(0, 0); /* the launcher can signal the rank and its children */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* the launcher died before prctl: the rank was reparented (to init or a subreaper) */
        if (getppid() != launcher) _exit(128 + SIGKILL);
        set_env_list(env);
        char **ssh = remote ? ssh_argv(p, host) : NULL;
        if (!remote) execvp(p->argv[0], p->argv);
        else if (ssh) execvp("ssh", ssh);
        fprintf(stderr, "ak launch: cannot run '%s': %s\n", p->argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(rp->pid, rp->pid); /* also here: a kill right after fork must reach the group */
    close(out[1]), close(err[1]);
    if (remote) close(in[0]), rp->stdin_fd = in[1], send_secret(in[1]);
    rp->out_fd = out[0];
    rp->err_fd = err[0];
    return 0;
}

static int spawn_rank(const ak_launch_plan *p, int rank, const char *master, int port,
                      ak_launch_proc *rp) {
    int lr, ls;
    const char *host = host_of_rank(p, rank, &lr, &ls), *env[7];
    char text[6][300];
    rank_env(p, rank, lr, ls, master, port, text, env);
    return ak_launch_spawn(p, host, env, rp);
}

/* Writes complete lines from buf with the rank prefix; keeps a partial last line. */
static void flush_lines(FILE *to, int rank, int prefix, char *buf, size_t *len, int final) {
    size_t start = 0;
    for (size_t i = 0; i < *len; i++) {
        if (buf[i] != '\n') continue;
        if (prefix) fprintf(to, "[%d] ", rank);
        fwrite(buf + start, 1, i - start + 1, to);
        start = i + 1;
    }
    if (final && start < *len) {
        if (prefix) fprintf(to, "[%d] ", rank);
        fwrite(buf + start, 1, *len - start, to);
        fputc('\n', to);
        start = *len;
    }
    if (start == 0 && *len == 4096) start = *len, fwrite(buf, 1, *len, to); /* overlong line */
    memmove(buf, buf + start, *len - start);
    *len -= start;
    fflush(to);
}

static void drain(int *fd, char *buf, size_t *len, FILE *to, int rank, int prefix) {
    ssize_t n = read(*fd, buf + *len, 4096 - *len);
    if (n > 0) {
        *len += (size_t)n;
        flush_lines(to, rank, prefix, buf, len, 0);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        flush_lines(to, rank, prefix, buf, len, 1);
        close(*fd);
        *fd = -1;
    }
}

void ak_launch_close_stdin(ak_launch_proc *rp) {
    if (rp->stdin_fd >= 0) close(rp->stdin_fd);
    rp->stdin_fd = -1;
}

/* A remote rank also loses its ssh stdin, which stops it even if its ssh client lingers. */
void ak_launch_kill_all(ak_launch_proc *procs, int np, int sig) {
    for (int r = 0; r < np; r++) {
        ak_launch_close_stdin(&procs[r]);
        if (procs[r].pid > 0 && !procs[r].exited && kill(-procs[r].pid, sig) != 0)
            kill(procs[r].pid, sig); /* no group (yet): the rank itself */
    }
}

int ak_launch_reap(ak_launch_proc *rp) {
    int status;
    if (rp->exited || rp->pid <= 0 || waitpid(rp->pid, &status, WNOHANG) != rp->pid) return 0;
    rp->exited = 1;
    ak_launch_close_stdin(rp);
    rp->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return 1;
}

static int reap(ak_launch_proc *procs, int np, int *first_failure) {
    int running = 0;
    for (int r = 0; r < np; r++) {
        if (ak_launch_reap(&procs[r]) && procs[r].code != 0 && *first_failure < 0)
            *first_failure = r;
        running += !procs[r].exited;
    }
    return running;
}

void ak_launch_pump_output(const ak_launch_plan *p, ak_launch_proc *procs, int nprocs, int timeout_ms) {
    struct pollfd fds[2 * 512];
    int n = 0, owner[2 * 512];
    for (int r = 0; r < nprocs && n + 2 <= 2 * 512; r++) {
        if (procs[r].out_fd >= 0) owner[n] = r, fds[n++] = (struct pollfd){procs[r].out_fd, POLLIN, 0};
        if (procs[r].err_fd >= 0) owner[n] = -r - 1, fds[n++] = (struct pollfd){procs[r].err_fd, POLLIN, 0};
    }
    /* with every pipe closed, still wait: the caller loops until the ranks are reaped */
    if (poll(n ? fds : NULL, (nfds_t)n, timeout_ms) <= 0) return;
    for (int i = 0; i < n; i++) {
        if (!fds[i].revents) continue;
        ak_launch_proc *rp = &procs[owner[i] >= 0 ? owner[i] : -owner[i] - 1];
        int rank = (int)(rp - procs);
        if (owner[i] >= 0) drain(&rp->out_fd, rp->out_line, &rp->out_len, stdout, rank, p->prefix_output);
        else drain(&rp->err_fd, rp->err_line, &rp->err_len, stderr, rank, p->prefix_output);
    }
}

int ak_launch_have_output(const ak_launch_proc *procs, int np) {
    for (int r = 0; r < np; r++)
        if (procs[r].out_fd >= 0 || procs[r].err_fd >= 0) return 1;
    return 0;
}

volatile sig_atomic_t ak_launch_signal;

static void on_launcher_signal(int sig) { ak_launch_signal = sig; }

/* SIGINT/SIGTERM/SIGHUP to the launcher stop the ranks instead of orphaning them. */
void ak_launch_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_launcher_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int ak_launch_run(const ak_launch_plan *p) {
    if (p->np < 1 || p->np > 512 || !p->argv || !p->argv[0]) return 2;
    ak_launch_proc *procs = calloc((size_t)p->np, sizeof *procs);
    if (!procs) return 2;
    for (int r = 0; r < p->np; r++) procs[r].stdin_fd = -1;
    if (p->nhosts > 0 && p->np > total_slots(p)) {
        fprintf(stderr, "ak launch: -np %d is more than the %d slots of the hosts given\n", p->np,
                total_slots(p));
        free(procs);
        return 2;
    }
    char master[256];
    if (master_address(p, master, sizeof master)) {
        fprintf(stderr, "ak launch: cannot find an address of this host that the other hosts can "
                        "reach; set AK_COMM_BIND_ADDR\n");
        free(procs);
        return 2;
    }
    ak_launch_catch_signals();
    int port = free_port();
    int first_failure = -1, started = 0;
    for (; started < p->np; started++)
        if (spawn_rank(p, started, master, port, &procs[started]) != 0) break;
    if (started < p->np) {
        fprintf(stderr, "ak launch: could not start rank %d: %s\n", started, strerror(errno));
        ak_launch_kill_all(procs, started, SIGKILL);
    }
    uint64_t kill_deadline = 0, drain_deadline = 0;
    int nprocs = started;
    for (;;) {
        int running = reap(procs, nprocs, &first_failure);
        /* after the last exit, give the pipes a second: a leftover grandchild may hold one */
        if (!running && !drain_deadline) drain_deadline = ak_now_ns() + 1000000000ull;
        if (!running && (!ak_launch_have_output(procs, nprocs) || ak_now_ns() > drain_deadline)) break;
        ak_launch_pump_output(p, procs, nprocs, 50);
        if ((first_failure >= 0 || started < p->np || ak_launch_signal) && !kill_deadline) {
            ak_launch_kill_all(procs, nprocs, SIGTERM);
            kill_deadline = ak_now_ns() + (uint64_t)GRACE_MS * 1000000u;
        }
        if (kill_deadline && ak_now_ns() > kill_deadline) ak_launch_kill_all(procs, nprocs, SIGKILL);
    }
    int rc = started < p->np ? 2 : first_failure >= 0 ? procs[first_failure].code : 0;
    if (ak_launch_signal && first_failure < 0) {
        fprintf(stderr, "ak launch: stopped by signal %d; stopped the ranks\n", (int)ak_launch_signal);
        rc = 128 + ak_launch_signal;
    }
    if (first_failure >= 0)
        fprintf(stderr, "ak launch: rank %d exited with %d; stopped the others\n", first_failure, rc);
    free(procs);
    return rc;
}
