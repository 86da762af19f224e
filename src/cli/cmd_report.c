/* `ak report [DIR|FILE.jsonl ...] [-o report.html]`: reads benchmark results lines (the
 * envelope of bench_results.h) from results folders, refuses a malformed line naming its
 * file and line, and writes one self-contained HTML page: data/report/report.html with the
 * lines embedded as JSON and data/report/report.js (the plots), both compiled into `ak`
 * by cmake/embed.cmake. docs/report.md describes the envelope and the sections. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "report_page.inc" /* embedded_files[]: report.html, report.js */

#define MAX_LINE_BYTES (1 << 20)

static const char *embedded(const char *name) {
    for (size_t i = 0; i < sizeof embedded_files / sizeof *embedded_files; i++)
        if (!strcmp(embedded_files[i].path, name)) return embedded_files[i].text;
    return NULL;
}

/* ---- validation of one line's envelope ------------------------------------------------ */

static int is_string(const cJSON *o, const char *key) { return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, key)); }
static int is_number(const cJSON *o, const char *key) { return cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, key)); }

/* A figure is a number, a string, a boolean or null, or an object of numbers (a
 * breakdown: parts of a time or of a memory total). */
static const char *check_figures(const cJSON *figures) {
    const cJSON *f;
    cJSON_ArrayForEach(f, figures) {
        if (cJSON_IsObject(f)) {
            const cJSON *part;
            cJSON_ArrayForEach(part, f) if (!cJSON_IsNumber(part)) return "a breakdown in \"figures\" holds a value that is not a number";
        } else if (cJSON_IsArray(f)) {
            return "\"figures\" holds an array (want numbers, strings or breakdown objects)";
        }
    }
    return NULL;
}

/* NULL when the line is a results line, else what is wrong with it. */
static const char *check_envelope(const cJSON *line) {
    if (!cJSON_IsObject(line)) return "not a JSON object";
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(line, "schema");
    if (!cJSON_IsString(schema)) return "no \"schema\" string";
    if (strcmp(schema->valuestring, AK_BENCH_SCHEMA) != 0) return "unknown \"schema\" (want \"" AK_BENCH_SCHEMA "\")";
    const cJSON *bench = cJSON_GetObjectItemCaseSensitive(line, "benchmark");
    if (!cJSON_IsString(bench) || !bench->valuestring[0]) return "no \"benchmark\" name";
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(line, "machine");
    if (!cJSON_IsObject(m)) return "no \"machine\" object";
    if (!is_string(m, "cpu") || !is_number(m, "cores") || !is_string(m, "isa") ||
        !is_number(m, "fma_peak_gflops_per_core") || !is_number(m, "memory_gbps"))
        return "\"machine\" lacks cpu, cores, isa, fma_peak_gflops_per_core or memory_gbps";
    const cJSON *ak = cJSON_GetObjectItemCaseSensitive(line, "accelkit");
    if (!cJSON_IsObject(ak) || !is_string(ak, "version") || !is_string(ak, "commit"))
        return "no \"accelkit\" object with version and commit";
    const cJSON *peer = cJSON_GetObjectItemCaseSensitive(line, "peer");
    if (!cJSON_IsNull(peer) && !(cJSON_IsObject(peer) && is_string(peer, "name") && is_string(peer, "version")))
        return "\"peer\" is neither null nor an object with name and version";
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(line, "params"))) return "no \"params\" object";
    const cJSON *figures = cJSON_GetObjectItemCaseSensitive(line, "figures");
    if (!cJSON_IsObject(figures)) return "no \"figures\" object";
    if (!is_string(line, "timestamp")) return "no \"timestamp\" string";
    return check_figures(figures);
}

/* ---- reading the folders ------------------------------------------------------------ */

/* Reads every line of path into lines (each with "_src": "LABEL/FILE:N"); 0, or an exit
 * code after naming the file and line that is wrong. */
static int read_results_file(const char *path, const char *src_name, cJSON *lines) {
    FILE *f = fopen(path, "r");
    if (!f) return ak_cli_error("%s: %s", path, strerror(errno));
    char *buf = malloc(MAX_LINE_BYTES);
    if (!buf) {
        fclose(f);
        return ak_cli_report("line buffer", AK_ERR_NO_MEMORY);
    }
    int rc = 0;
    for (long n = 1; !rc && fgets(buf, MAX_LINE_BYTES, f); n++) {
        size_t len = strlen(buf);
        if (len == MAX_LINE_BYTES - 1 && buf[len - 1] != '\n') {
            rc = ak_cli_error("%s:%ld: line longer than %d bytes", path, n, MAX_LINE_BYTES - 2);
            break;
        }
        if (strspn(buf, " \t\r\n") == len) continue; /* blank lines are allowed */
        cJSON *line = cJSON_Parse(buf);
        const char *why = line ? check_envelope(line) : "not valid JSON";
        if (why) {
            rc = ak_cli_error("%s:%ld: not a results line: %s", path, n, why);
            cJSON_Delete(line);
            break;
        }
        char src[4200];
        snprintf(src, sizeof src, "%s:%ld", src_name, n);
        cJSON_AddStringToObject(line, "_src", src);
        cJSON_AddItemToArray(lines, line);
    }
    if (!rc && ferror(f)) rc = ak_cli_error("%s: read error", path);
    free(buf);
    fclose(f);
    return rc;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

/* The *.jsonl files of dir, sorted by name, into lines; one folder must hold one. */
static int read_results_dir(const char *dir, const char *label, cJSON *lines) {
    DIR *d = opendir(dir);
    if (!d) return ak_cli_error("%s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!ends_with(e->d_name, ".jsonl")) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) rc = ak_cli_report("file list", AK_ERR_NO_MEMORY);
            else names = grown;
        }
        if (!rc && !(names[n++] = strdup(e->d_name))) rc = ak_cli_report("file list", AK_ERR_NO_MEMORY);
    }
    closedir(d);
    if (!rc && n == 0) rc = ak_cli_error("%s: no results files (*.jsonl) in it", dir);
    if (!rc) qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 0; i < n; i++) {
        char path[4200], src[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(src, sizeof src, "%s/%s", label, names[i]);
        if (!rc) rc = read_results_file(path, src, lines);
        free(names[i]);
    }
    free(names);
    return rc;
}

/* "bench-results/" -> "bench-results": the folder's name as the page shows it */
static void folder_label(const char *arg, char *out, size_t cap) {
    snprintf(out, cap, "%s", arg);
    for (size_t len = strlen(out); len > 1 && out[len - 1] == '/'; len--) out[len - 1] = '\0';
}

static int add_folder(const char *arg, cJSON *folders) {
    struct stat st;
    if (stat(arg, &st) != 0) return ak_cli_error("%s: %s", arg, strerror(errno));
    char label[4096];
    folder_label(arg, label, sizeof label);
    cJSON *folder = cJSON_CreateObject();
    cJSON_AddItemToArray(folders, folder);
    cJSON_AddStringToObject(folder, "label", label);
    cJSON *lines = cJSON_AddArrayToObject(folder, "lines");
    if (S_ISDIR(st.st_mode)) return read_results_dir(arg, label, lines);
    return read_results_file(arg, label, lines);
}

/* ---- the page ------------------------------------------------------------------------ */

/* The data as JSON safe inside <script>: '<' only occurs in strings, where \u003c means
 * the same, so no "</script>" or "<!--" can end the element early. */
static int write_data(FILE *out, cJSON *data) {
    char *text = cJSON_PrintUnformatted(data);
    if (!text) return -1;
    for (const char *p = text; *p; p++) {
        if (*p == '<') fputs("\\u003c", out);
        else fputc(*p, out);
    }
    cJSON_free(text);
    return 0;
}

/* Copies the template to out with the two markers replaced by the data and the script. */
static int write_page(FILE *out, cJSON *data) {
    const char *page = embedded("report.html"), *script = embedded("report.js");
    const char *data_mark = "<!--ak:data-->", *script_mark = "<!--ak:script-->";
    const char *d = page ? strstr(page, data_mark) : NULL, *s = d ? strstr(d, script_mark) : NULL;
    if (!s || !script || strstr(script, "</script")) return ak_cli_error("the embedded report page is broken");
    fwrite(page, 1, (size_t)(d - page), out);
    if (write_data(out, data)) return ak_cli_report("json", AK_ERR_NO_MEMORY);
    const char *after_data = d + strlen(data_mark);
    fwrite(after_data, 1, (size_t)(s - after_data), out);
    fputs(script, out);
    fputs(s + strlen(script_mark), out);
    return 0;
}

static int write_report(const char *path, cJSON *data) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) return ak_cli_error("%s: %s", tmp, strerror(errno));
    int rc = write_page(out, data);
    if (fclose(out) != 0 && !rc) rc = ak_cli_error("%s: write error", tmp);
    if (!rc && rename(tmp, path) != 0) rc = ak_cli_error("%s: %s", path, strerror(errno));
    if (rc) remove(tmp);
    return rc;
}

int ak_cli_make_report(int argc, char **argv) {
    const char *output = NULL;
    int first;
    const ak_opt opts[] = {
        {"output", 'o', AK_OPT_STRING, &output, "FILE", .help = "the HTML page to write", .def = "report.html"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "report", .opts = opts,
                            .notes = "Operands: results folders (every *.jsonl in each) or files; default "
                                     AK_BENCH_OUT_DEFAULT ". Several are compared side by side."};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    cJSON *data = cJSON_CreateObject();
    char stamp[32];
    time_t now = time(NULL);
    struct tm utc;
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &utc));
    cJSON_AddStringToObject(data, "generated", stamp);
    cJSON_AddStringToObject(data, "accelkit", AK_VERSION_STRING);
    cJSON *folders = cJSON_AddArrayToObject(data, "folders");
    rc = 0;
    if (first >= argc) rc = add_folder(AK_BENCH_OUT_DEFAULT, folders);
    for (int i = first; i < argc && !rc; i++) rc = add_folder(argv[i], folders);
    if (!rc) rc = write_report(output, data);
    if (!rc) {
        int lines = 0;
        const cJSON *f;
        cJSON_ArrayForEach(f, folders) lines += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "lines"));
        printf("report: %s (%d results lines from %d folder(s))\n", output, lines, cJSON_GetArraySize(folders));
    }
    cJSON_Delete(data);
    return rc ? AK_EXIT_ERROR : AK_EXIT_OK;
}
