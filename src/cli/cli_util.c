/* Helpers shared by `ak` subcommands: error reporting, argument parsing, statistics. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int ak_cli_report(const char *what, ak_status st) {
    fprintf(stderr, "ak: %s: %s: %s\n", what, ak_status_str(st), ak_last_error());
    return AK_EXIT_ERROR;
}

int ak_cli_parse_size(const char *text, size_t *out) {
    if (!text || !*text || *text == '-' || *text == '+') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end) return -1;
    *out = (size_t)v;
    return 0;
}

int ak_cli_parse_shape3(const char *text, size_t out[3]) {
    char buf[128];
    if (!text || strlen(text) >= sizeof buf) return -1;
    /* accept x, X, ',' and the UTF-8 multiplication sign as separators */
    size_t j = 0;
    for (const char *p = text; *p; p++) {
        if (strncmp(p, "\xc3\x97", 2) == 0) {
            buf[j++] = 'x';
            p++;
        } else {
            buf[j++] = (*p == 'X' || *p == ',') ? 'x' : *p;
        }
    }
    buf[j] = '\0';
    char *save = NULL, *tok = strtok_r(buf, "x", &save);
    for (int i = 0; i < 3; i++, tok = strtok_r(NULL, "x", &save))
        if (!tok || ak_cli_parse_size(tok, &out[i]) != 0 || out[i] == 0 || out[i] > 1000000)
            return -1;
    return tok ? -1 : 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ak_cli_median(double *values, size_t n) {
    if (n == 0) return 0;
    qsort(values, n, sizeof *values, cmp_double);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

int ak_cli_bench_threads(void) {
    const char *env = getenv("AK_NUM_THREADS");
    size_t n;
    if (env && ak_cli_parse_size(env, &n) == 0 && n > 0) return (int)n;
    return 1;
}
