/* Progress lines of long `ak` work (see cli_progress.h). */
#include "cli/cli_progress.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accelkit/ak.h"

#define SHOW_AFTER_NS 2000000000ull /* work shorter than this shows nothing */
#define REDRAW_NS 100000000ull      /* at most ten redraws a second */
#define LINE_WIDTH 79

void ak_cli_progress_begin(ak_cli_progress *p, const char *what) {
    memset(p, 0, sizeof *p);
    p->what = what;
    p->tty = isatty(STDERR_FILENO);
    p->start_ns = ak_now_ns();
}

static void draw(ak_cli_progress *p, const char *text) {
    fprintf(stderr, "\r%-*.*s", LINE_WIDTH, LINE_WIDTH, text);
    fflush(stderr);
    p->shown = 1;
}

void ak_cli_progress_update(ak_cli_progress *p, double fraction, const char *detail) {
    if (!p->tty) return;
    uint64_t now = ak_now_ns();
    if (now - p->start_ns < SHOW_AFTER_NS || now - p->last_ns < REDRAW_NS) return;
    p->last_ns = now;
    char line[256];
    double secs = (double)(now - p->start_ns) * 1e-9;
    if (fraction >= 0)
        snprintf(line, sizeof line, "%s %3.0f%%%s%s (%.0f s)", p->what, 100.0 * fraction,
                 detail ? ", " : "", detail ? detail : "", secs);
    else
        snprintf(line, sizeof line, "%s%s%s (%.0f s)", p->what, detail ? ", " : "",
                 detail ? detail : "", secs);
    draw(p, line);
}

void ak_cli_progress_end(ak_cli_progress *p) {
    if (!p->shown) return;
    fprintf(stderr, "\r%*s\r", LINE_WIDTH, "");
    fflush(stderr);
    p->shown = 0;
}

/* ---- busy: a thread redraws the elapsed time -------------------------------------- */

static void *busy_main(void *arg) {
    ak_cli_busy *b = arg;
    pthread_mutex_lock(&b->mu);
    while (!b->done) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        if (pthread_cond_timedwait(&b->cv, &b->mu, &until) == ETIMEDOUT && !b->done)
            ak_cli_progress_update(&b->line, -1, NULL);
    }
    ak_cli_progress_end(&b->line);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

void ak_cli_busy_begin(ak_cli_busy *b, const char *what) {
    memset(b, 0, sizeof *b);
    ak_cli_progress_begin(&b->line, what);
    if (!b->line.tty) return; /* nothing to show: no thread */
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->running = pthread_create(&b->thread, NULL, busy_main, b) == 0;
}

void ak_cli_busy_end(ak_cli_busy *b) {
    if (!b->running) return;
    pthread_mutex_lock(&b->mu);
    b->done = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    b->running = 0;
}
