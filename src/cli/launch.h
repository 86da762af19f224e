/* `ak launch`: start N ranks (local ones directly, remote ones over ssh) with the
 * variables rank discovery reads, prefix their output with the rank, and propagate the
 * first failure. Also used by `ak bench comm -np N` to start itself. */
#ifndef AK_CLI_LAUNCH_H
#define AK_CLI_LAUNCH_H

#define AK_LAUNCH_MAX_HOSTS 256

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
} ak_launch_plan;

/* Parses "h1:2,h2:2" (slots default 1) into plan->hosts. 0 on success. */
int ak_launch_parse_hosts(const char *text, ak_launch_plan *plan);
/* Reads a hostfile: one host per line, "host slots=N" or "host:N", '#' comments. */
int ak_launch_read_hostfile(const char *path, ak_launch_plan *plan);
/* Runs the plan; returns the first failing rank's exit code (128+signal when killed),
 * or 0 when every rank succeeded; 2 when ranks could not be started. */
int ak_launch_run(const ak_launch_plan *plan);

#endif /* AK_CLI_LAUNCH_H */
