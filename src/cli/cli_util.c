/* Helpers shared by `ak` subcommands: error reporting, argument parsing, JSON output,
 * statistics. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"

/* "ak compare: " or, before a subcommand is chosen, "ak: " */
static void print_prefix(void) {
    if (ak__cli_current) fprintf(stderr, "ak %s: ", ak__cli_current);
    else fputs("ak: ", stderr);
}

int ak_cli_report(const char *what, ak_status st) {
    print_prefix();
    fprintf(stderr, "%s: %s: %s\n", what, ak_status_str(st), ak_last_error());
    return AK_EXIT_ERROR;
}

int ak_cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_prefix();
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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

int ak_cli_print_json(cJSON *root) {
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) return ak_cli_report("json", AK_ERR_NO_MEMORY);
    puts(text);
    cJSON_free(text);
    return 0;
}

void ak_cli_json_round(cJSON *obj, const char *key, double value, int decimals) {
    double scale = pow(10.0, decimals);
    double rounded = isfinite(value) ? round(value * scale) / scale : value;
    cJSON_AddNumberToObject(obj, key, rounded);
}

/* Length of the valid UTF-8 sequence at p, 0 if it is not one. */
static size_t utf8_length(const unsigned char *p) {
    size_t n = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3
             : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 2 && p[0] < 0xC2) return 0; /* overlong */
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return n;
}

cJSON *ak_cli_json_text(const char *text) {
    if (!text) return cJSON_CreateNull();
    size_t len = strlen(text);
    char *clean = malloc(len + 1);
    if (!clean) return NULL;
    const unsigned char *p = (const unsigned char *)text;
    size_t j = 0;
    while (*p) {
        size_t n = utf8_length(p);
        if (n == 0) clean[j++] = '?', p++;
        else memcpy(clean + j, p, n), j += n, p += n;
    }
    clean[j] = '\0';
    cJSON *item = cJSON_CreateString(clean);
    free(clean);
    return item;
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
