/* The tuning cache: one text file, $XDG_CACHE_HOME/accelkit/infer-backends.tsv (or
 * ~/.cache/accelkit/...), a header line, then one line per key:
 *   KEY <tab> own=NS openblas=NS blis=NS
 * with the median nanoseconds of each backend measured for it (choose.c makes the keys:
 * operator, input types and shapes, attributes, threads, CPU model, library versions).
 * Lines are appended with one write each (O_APPEND), so sessions of several processes may
 * share it; a later line for a key wins. A line that does not parse is refused with a log
 * line (its key is measured again); a file whose header is not ours is ignored with a log
 * line and replaced by the next save. The cache only saves time: failing to read or write
 * it is logged, never an error. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "infer/backends/choose.h"

#define CACHE_HEADER "# accelkit inference backend tuning cache 1"

const char *ak__bk_cache_path(char *buf, size_t cap) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') /* the XDG spec: a relative path is invalid, ignored */
        n = snprintf(buf, cap, "%s/accelkit/infer-backends.tsv", xdg);
    else if (home && home[0])
        n = snprintf(buf, cap, "%s/.cache/accelkit/infer-backends.tsv", home);
    else
        return NULL;
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

/* Parses "own=123 blis=456" into ns; 0 when a word is not NAME=POSITIVE. */
static int parse_times(char *s, uint64_t *ns) {
    int any = 0;
    for (char *save = NULL, *w = strtok_r(s, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(w, '=');
        if (!eq) return 0;
        *eq = '\0';
        int k = ak__infer_backend_find(w);
        char *end;
        errno = 0;
        unsigned long long v = strtoull(eq + 1, &end, 10);
        if (k < 0 || *end || end == eq + 1 || errno || v == 0 || ns[k]) return 0;
        ns[k] = (uint64_t)v;
        any = 1;
    }
    return any;
}

void ak__bk_cache_load(ak__bk_session *b) {
    char path[4096];
    if (!ak__bk_cache_path(path, sizeof path)) {
        AK_LOG_DEBUG(AK_SUBSYS_INFER, "backend tuning cache: neither XDG_CACHE_HOME nor HOME is set");
        return;
    }
    FILE *f = fopen(path, "r");
    if (!f) return; /* none yet */
    char line[2048];
    size_t lineno = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        int whole = len && line[len - 1] == '\n';
        if (whole) line[--len] = '\0';
        if (lineno == 1) {
            if (strcmp(line, CACHE_HEADER) != 0) {
                AK_LOG_WARN(AK_SUBSYS_INFER,
                            "backend tuning cache %s is not one of accelkit's (first line is not "
                            "'%s'): ignored, nodes are measured again and the file replaced",
                            path, CACHE_HEADER);
                b->cache_bad = 1;
                break;
            }
            continue;
        }
        char *tab = strchr(line, '\t');
        uint64_t ns[AK_BK_COUNT] = {0};
        if (!whole || !tab || tab == line || !parse_times(tab + 1, ns)) {
            if (bad++ == 0)
                AK_LOG_WARN(AK_SUBSYS_INFER,
                            "backend tuning cache %s line %zu is not 'KEY<tab>NAME=NS ...': "
                            "refused (its nodes are measured again)", path, lineno);
            if (!whole) /* skip the rest of an over-long line */
                while (fgets(line, sizeof line, f) && line[strlen(line) - 1] != '\n') {}
            continue;
        }
        *tab = '\0';
        ak__bk_entry *e = NULL;
        for (size_t i = 0; i < b->num_entries && !e; i++)
            if (strcmp(b->entries[i].key, line) == 0) e = &b->entries[i];
        if (!e && !(e = ak__bk_entry_add(b, line))) break;
        memcpy(e->ns, ns, sizeof ns);
        e->from_cache = 1;
    }
    if (bad > 1) AK_LOG_WARN(AK_SUBSYS_INFER, "backend tuning cache %s: %zu lines refused", path, bad);
    fclose(f);
}

/* mkdir -p of the file's folder */
static int make_dirs(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int rc = mkdir(path, 0700);
        *p = '/';
        if (rc != 0 && errno != EEXIST) return -1;
    }
    return 0;
}

void ak__bk_cache_save(ak__bk_session *b, const ak__bk_entry *e) {
    char path[4096], line[2048];
    if (!ak__bk_cache_path(path, sizeof path)) return;
    int w = snprintf(line, sizeof line, "%s\t", e->key);
    for (int k = 0; k < AK_BK_COUNT && w > 0 && (size_t)w < sizeof line; k++)
        if (e->ns[k])
            w += snprintf(line + w, sizeof line - (size_t)w, "%s%s=%" PRIu64,
                          line[w - 1] == '\t' ? "" : " ", ak__infer_backend_name(k), e->ns[k]);
    if (w <= 0 || (size_t)w + 1 >= sizeof line) return; /* a key too long to keep: measured each time */
    line[w++] = '\n';
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    if (make_dirs(dir) != 0) {
        AK_LOG_WARN(AK_SUBSYS_INFER, "backend tuning cache: cannot make the folder of %s: %s", path,
                    strerror(errno));
        return;
    }
    int fd;
    if (b->cache_bad) { /* a foreign file: replaced by ours (header, this line) */
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int ok = fd >= 0 && write(fd, CACHE_HEADER "\n", sizeof CACHE_HEADER) == (ssize_t)sizeof CACHE_HEADER;
        ok = ok && write(fd, line, (size_t)w) == (ssize_t)w;
        if (fd >= 0) ok = close(fd) == 0 && ok;
        if (ok && rename(tmp, path) == 0) {
            b->cache_bad = 0;
            return;
        }
        AK_LOG_WARN(AK_SUBSYS_INFER, "backend tuning cache: cannot replace %s: %s", path, strerror(errno));
        unlink(tmp);
        return;
    }
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        AK_LOG_WARN(AK_SUBSYS_INFER, "backend tuning cache: cannot open %s: %s", path, strerror(errno));
        return;
    }
    struct stat st;
    int ok = fstat(fd, &st) == 0;
    /* a new file starts with the header (two writers both seeing it empty write it twice:
     * the second copy is then a refused line, measured again once) */
    if (ok && st.st_size == 0)
        ok = write(fd, CACHE_HEADER "\n", sizeof CACHE_HEADER) == (ssize_t)sizeof CACHE_HEADER;
    ok = ok && write(fd, line, (size_t)w) == (ssize_t)w;
    if (!ok) AK_LOG_WARN(AK_SUBSYS_INFER, "backend tuning cache: cannot write %s: %s", path, strerror(errno));
    close(fd);
}
