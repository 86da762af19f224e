/* `ak launch`: start N ranks (local ones directly, remote ones over ssh) with the
 * variables rank discovery reads, prefix their output with the rank, and propagate the
 * first failure. Also used by `ak bench comm -np N` to start itself. */
#ifndef AK_CLI_LAUNCH_H
#define AK_CLI_LAUNCH_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#define AK_LAUNCH_MAX_HOSTS 256
#define AK_LAUNCH_MAX_SLOTS (1 << 20) /* per host */

/* ---- elastic jobs (launch_elastic.c) ---- */
typedef struct ak_launch_elastic {
    int enabled;             /* --min-np, --max-np or --host-discovery-script given */
    int min_np, max_np;      /* 0: -np; max 0 = unbounded with a discovery script, else -np */
    const char *discovery;   /* --host-discovery-script: prints "host[:slots]" lines */
    int slots_per_host;      /* --slots-per-host, for discovered hosts without ":slots" */
    int timeout_s;           /* --elastic-timeout (HOROVOD_ELASTIC_TIMEOUT), default 600 */
    int reset_limit;         /* --reset-limit: rounds after the first; -1 = unlimited */
    int cooldown_min_s, cooldown_max_s; /* --blacklist-cooldown-range; 0 0 = for good */
} ak_launch_elastic;

typedef struct ak_launch_host {
    char name[128];
    int slots;
} ak_launch_host;

#define AK_LAUNCH_MAX_EXPORTS 64

typedef struct ak_launch_plan {
    int np;
    ak_launch_host hosts[AK_LAUNCH_MAX_HOSTS];
    int nhosts;       /* 0 = all ranks local */
    int ssh_port;     /* 0 = ssh's default */
    int prefix_output; /* "[rank] " before each line */
    const char *export_vars[AK_LAUNCH_MAX_EXPORTS]; /* -x NAME: forwarded over ssh even if it describes the session */
    int nexport;
    char *const *argv; /* the command, NULL-terminated */
    ak_launch_elastic elastic;
} ak_launch_plan;

/* Parses "h1:2,h2:2" (slots default 1) into plan->hosts. 0 on success. */
int ak_launch_parse_hosts(const char *text, ak_launch_plan *plan);
/* Reads a hostfile: one host per line, "host slots=N" or "host:N", '#' comments. */
int ak_launch_read_hostfile(const char *path, ak_launch_plan *plan);
/* Runs the plan; returns the first failing rank's exit code (128+signal when killed),
 * or 0 when every rank succeeded; 2 when ranks could not be started. */
/* The job's secret, which every rank must share (docs/security.md): AK_JOB_SECRET or
 * AK_JOB_SECRET_FILE as the user set them (checked), else a fresh random one put in
 * AK_JOB_SECRET, which local ranks inherit and remote ones read from ssh's stdin. 0 on
 * success; -1 after printing why not. */
int ak_launch_job_secret(void);
int ak_launch_run(const ak_launch_plan *plan);

/* Runs an elastic plan (see docs/elastic.md); same return values. */
int ak_launch_run_elastic(const ak_launch_plan *plan);

/* ---- the process layer both share (launch.c) ---- */

typedef struct ak_launch_proc {
    pid_t pid;
    int out_fd, err_fd; /* -1 once closed */
    int stdin_fd;       /* a remote rank's ssh stdin, held open while it may run; else -1 */
    char out_line[4096], err_line[4096];
    size_t out_len, err_len;
    int exited, code;
} ak_launch_proc;

/* Starts plan->argv on host (locally or over ssh) with env's "NAME=VALUE" entries set;
 * 0 on success. */
int ak_launch_spawn(const ak_launch_plan *plan, const char *host, const char *const *env,
                    ak_launch_proc *proc);
/* Waits up to timeout_ms for output and writes the complete lines, each prefixed with
 * "[i] " (i = the process's index in procs) when plan->prefix_output. */
void ak_launch_pump_output(const ak_launch_plan *plan, ak_launch_proc *procs, int nprocs,
                           int timeout_ms);
int ak_launch_have_output(const ak_launch_proc *procs, int nprocs);
/* Signals each running process's group; remote ones also lose their ssh stdin. */
void ak_launch_kill_all(ak_launch_proc *procs, int nprocs, int sig);
void ak_launch_close_stdin(ak_launch_proc *proc);
/* Collects proc's exit if it has ended (status in code: 128 + signal when killed) and
 * closes its ssh stdin; 1 when it ended now, 0 when running or already collected. */
int ak_launch_reap(ak_launch_proc *proc);
int ak_launch_is_local_host(const char *name);
/* This host's address as `peer` would reach it (AK_COMM_BIND_ADDR wins); 0 on success. */
int ak_launch_address_toward(const char *peer, char *out, size_t cap);
/* SIGINT/SIGTERM/SIGHUP set ak_launch_signal instead of killing the launcher. */
void ak_launch_catch_signals(void);
extern volatile sig_atomic_t ak_launch_signal;

#endif /* AK_CLI_LAUNCH_H */
