/* Progress of long `ak` work on a terminal: one line on stderr, overwritten in place,
 * shown only when stderr is a TTY and the work has run for 2 s (short runs and piped or
 * redirected output see nothing), cleared at the end. */
#ifndef AK_CLI_CLI_PROGRESS_H
#define AK_CLI_CLI_PROGRESS_H

#include <pthread.h>
#include <stdint.h>

/* Work in known steps: the caller reports the fraction done. */
typedef struct ak_cli_progress {
    const char *what;          /* "ak bench llm: decode" */
    uint64_t start_ns, last_ns; /* start, and the last time the line was drawn */
    int tty, shown;
} ak_cli_progress;

void ak_cli_progress_begin(ak_cli_progress *p, const char *what);
/* fraction in [0, 1]; detail (may be NULL) follows it ("size 4 MiB"). */
void ak_cli_progress_update(ak_cli_progress *p, double fraction, const char *detail);
void ak_cli_progress_end(ak_cli_progress *p);

/* Work in one call that reports nothing (a conversion): a thread shows the time spent. */
typedef struct ak_cli_busy {
    ak_cli_progress line;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, done;
} ak_cli_busy;

void ak_cli_busy_begin(ak_cli_busy *b, const char *what);
void ak_cli_busy_end(ak_cli_busy *b);

#endif /* AK_CLI_CLI_PROGRESS_H */
