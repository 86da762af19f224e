/* The `ak` option layer (see cli_opts.h): one table per subcommand turned into
 * getopt_long's arrays, value checks per kind, and the --help text. */
#include "cli/cli_opts.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define MAX_LONG 160     /* long names and aliases of one table */
#define LONG_VAL_BASE 256 /* getopt_long's val for a long-only flag: base + table index */
#define NAME_MAX_LEN 48
#define HELP_COLUMN 30
#define HELP_WIDTH 100

const char *ak__cli_current = NULL;

/* ---- numbers ------------------------------------------------------------------------ */

int ak_cli_parse_long(const char *text, long lo, long hi, long *out) {
    if (!text || !*text) return -1;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int ak_cli_parse_double(const char *text, double *out) {
    if (!text || !*text) return -1;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* "8", "64M", "4K", "1G", "1.5M" (a whole number of bytes) */
int ak_cli_parse_bytes(const char *text, size_t *out) {
    if (!text || !*text || *text == '-' || *text == '+') return -1;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text) return -1;
    double mult = 1;
    switch (*end) {
    case 'K': case 'k': mult = 1024.0, end++; break;
    case 'M': case 'm': mult = 1048576.0, end++; break;
    case 'G': case 'g': mult = 1073741824.0, end++; break;
    default: break;
    }
    v *= mult;
    if (*end || !(v >= 0) || v > 1.8e19 || v != floor(v)) return -1;
    *out = (size_t)v;
    return 0;
}

/* ---- one table ---------------------------------------------------------------------- */

static int takes_value(const ak_opt *o) {
    return o->kind != AK_OPT_FLAG;
}

static size_t count_opts(const ak_opt *opts) {
    size_t n = 0;
    while (opts[n].name || opts[n].letter) n++;
    return n;
}

/* The i-th name of "a|b|c" into buf; 0 when there is no such name. */
static int alias_at(const char *names, int i, char *buf) {
    for (const char *p = names; p; i--) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (i == 0) {
            if (len >= NAME_MAX_LEN) return 0;
            memcpy(buf, p, len);
            buf[len] = '\0';
            return 1;
        }
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* "-t/--threads", "--tol", "-x": how an error names the flag. */
static const char *flag_label(const ak_opt *o, char *buf, size_t cap) {
    char first[NAME_MAX_LEN] = "";
    if (o->name) alias_at(o->name, 0, first);
    if (o->letter && first[0]) snprintf(buf, cap, "-%c/--%s", o->letter, first);
    else if (o->letter) snprintf(buf, cap, "-%c", o->letter);
    else snprintf(buf, cap, "--%s", first);
    return buf;
}

static int name_matches(const ak_opt *o, const char *name, size_t len) {
    char alias[NAME_MAX_LEN];
    for (int i = 0; o->name && alias_at(o->name, i, alias); i++)
        if (strlen(alias) == len && strncmp(alias, name, len) == 0) return 1;
    return 0;
}

static const ak_opt *find_long(const ak_opt *opts, const char *name, size_t len) {
    for (size_t i = 0; opts[i].name || opts[i].letter; i++)
        if (name_matches(&opts[i], name, len)) return &opts[i];
    return NULL;
}

static const ak_opt *find_letter(const ak_opt *opts, int letter) {
    for (size_t i = 0; opts[i].name || opts[i].letter; i++)
        if (opts[i].letter == letter) return &opts[i];
    return NULL;
}

/* ---- messages ----------------------------------------------------------------------- */

static void lookup_registry(const ak_cli_cmd *cmd, const char **usage, const char **summary) {
    *usage = cmd->usage, *summary = cmd->summary;
    if (!*usage || !*summary) {
        const char *u = NULL, *s = NULL;
        ak__cli_lookup(cmd->name, &u, &s);
        if (!*usage) *usage = u ? u : cmd->name;
        if (!*summary) *summary = s ? s : "";
    }
}

static void print_usage_line(const ak_cli_cmd *cmd, FILE *out) {
    const char *usage, *summary;
    lookup_registry(cmd, &usage, &summary);
    fprintf(out, "usage: %s\n", usage);
}

int ak_cli_usage_error(const ak_cli_cmd *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ak %s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    print_usage_line(cmd, stderr);
    fputs("(--help lists every option)\n", stderr);
    return AK_EXIT_ERROR;
}

static const char *default_placeholder(const ak_opt *o) {
    switch (o->kind) {
    case AK_OPT_INT: return "N";
    case AK_OPT_SIZE: return "BYTES";
    case AK_OPT_DOUBLE: return "X";
    case AK_OPT_ENUM: return o->choices;
    default: return "VALUE";
    }
}

/* "  -n, --np, --num-proc N" */
static void print_flag_names(const ak_opt *o, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "  ");
    if (o->letter) len += (size_t)snprintf(buf + len, cap - len, "-%c", o->letter);
    else len += (size_t)snprintf(buf + len, cap - len, "    "); /* long names line up */
    char alias[NAME_MAX_LEN];
    for (int i = 0; o->name && alias_at(o->name, i, alias) && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s--%s", o->letter || i ? ", " : "", alias);
    if (takes_value(o) && len < cap)
        snprintf(buf + len, cap - len, " %s", o->arg ? o->arg : default_placeholder(o));
}

#define NBSP '\x1f' /* a space the wrapping keeps ("default: 0") */

/* text from column HELP_COLUMN on, wrapped at HELP_WIDTH at spaces */
static void print_wrapped(FILE *out, const char *text) {
    size_t col = HELP_COLUMN;
    while (*text) {
        size_t word = strcspn(text, " ");
        if (col > HELP_COLUMN && col + 1 + word > HELP_WIDTH) {
            fprintf(out, "\n%*s", HELP_COLUMN, "");
            col = HELP_COLUMN;
        } else if (col > HELP_COLUMN) {
            fputc(' ', out);
            col++;
        }
        for (size_t i = 0; i < word; i++) fputc(text[i] == NBSP ? ' ' : text[i], out);
        col += word;
        text += word;
        while (*text == ' ') text++;
    }
    fputc('\n', out);
}

void ak_cli_print_help(const ak_cli_cmd *cmd, FILE *out) {
    const char *usage, *summary;
    lookup_registry(cmd, &usage, &summary);
    fprintf(out, "usage: %s\n%s\n\noptions:\n", usage, summary);
    for (const ak_opt *o = cmd->opts; o && (o->name || o->letter); o++) {
        char names[256];
        print_flag_names(o, names, sizeof names);
        if (strlen(names) < HELP_COLUMN) fprintf(out, "%-*s", HELP_COLUMN, names);
        else fprintf(out, "%s\n%*s", names, HELP_COLUMN, "");
        char meaning[1024];
        snprintf(meaning, sizeof meaning, "%s%s%s%s", o->help ? o->help : "",
                 o->def ? " (default:\x1f" : "", o->def ? o->def : "", o->def ? ")" : "");
        print_wrapped(out, meaning);
    }
    fprintf(out, "%-*s%s\n", HELP_COLUMN, "  -h, --help", "print this help");
    if (cmd->notes) fprintf(out, "\n%s\n", cmd->notes);
}

/* ---- values ------------------------------------------------------------------------- */

static int enum_index(const char *choices, const char *value) {
    char alias[NAME_MAX_LEN];
    for (int i = 0; alias_at(choices, i, alias); i++)
        if (strcmp(alias, value) == 0) return i;
    return -1;
}

static int has_range(const ak_opt *o) {
    return o->min != 0 || o->max != 0;
}

/* A range bound as a long: LONG_MAX as a double rounds up past it. */
static long bound(double v) {
    if (v >= (double)LONG_MAX) return LONG_MAX;
    if (v <= (double)LONG_MIN) return LONG_MIN;
    return (long)v;
}

/* Stores value in o->dest; NULL on success, else what a good value looks like. */
static const char *store_value(const ak_opt *o, char *value, ak_opt_more *more, char *why,
                               size_t cap) {
    long l;
    double d;
    size_t z;
    switch (o->kind) {
    case AK_OPT_FLAG: *(int *)o->dest = 1; return NULL;
    case AK_OPT_STRING: *(const char **)o->dest = value; return NULL;
    case AK_OPT_INT:
        if (ak_cli_parse_long(value, has_range(o) ? bound(o->min) : LONG_MIN,
                              has_range(o) ? bound(o->max) : LONG_MAX, &l) == 0)
            return *(long *)o->dest = l, NULL;
        if (!has_range(o)) return "want an integer";
        snprintf(why, cap, "want an integer in [%ld, %ld]", bound(o->min), bound(o->max));
        return why;
    case AK_OPT_SIZE:
        if (ak_cli_parse_bytes(value, &z) == 0 && (!has_range(o) || ((double)z >= o->min && (double)z <= o->max)))
            return *(size_t *)o->dest = z, NULL;
        if (!has_range(o)) return "want a whole number (K, M, G suffixes: 1024-based)";
        snprintf(why, cap, "want a whole number in [%.0f, %.0f] (K, M, G suffixes: 1024-based)",
                 o->min, o->max);
        return why;
    case AK_OPT_DOUBLE:
        if (ak_cli_parse_double(value, &d) == 0 && (!has_range(o) || (d >= o->min && d <= o->max)))
            return *(double *)o->dest = d, NULL;
        if (!has_range(o)) return "want a number";
        if (isinf(o->max)) snprintf(why, cap, "want a number >= %g", o->min);
        else snprintf(why, cap, "want a number in [%g, %g]", o->min, o->max);
        return why;
    case AK_OPT_ENUM:
        if ((l = enum_index(o->choices, value)) >= 0) return *(int *)o->dest = (int)l, NULL;
        snprintf(why, cap, "want one of %s", o->choices);
        return why;
    case AK_OPT_CUSTOM: return o->parse(o->dest, value, more);
    }
    return "unknown option kind";
}

char *ak_opt_take(ak_opt_more *more) {
    if (*more->next >= more->argc) return NULL;
    return more->argv[(*more->next)++];
}

static int apply_defaults(const ak_cli_cmd *cmd) {
    char why[160];
    for (const ak_opt *o = cmd->opts; o && (o->name || o->letter); o++) {
        if (!o->def || o->kind == AK_OPT_CUSTOM || o->kind == AK_OPT_FLAG) continue;
        if (o->kind == AK_OPT_STRING) {
            *(const char **)o->dest = o->def;
        } else if (store_value(o, (char *)o->def, NULL, why, sizeof why)) {
            fprintf(stderr, "ak %s: bad default '%s' in the option table\n", cmd->name, o->def);
            return -1;
        }
    }
    return 0;
}

/* ---- parsing ------------------------------------------------------------------------ */

/* horovodrun and mpirun spell some long flags with one dash (-np, -hostfile): those that
 * name a long flag exactly become "--name" before getopt sees them. */
static char rewritten[16][NAME_MAX_LEN + 64];
static const char *rewritten_from[16]; /* what was typed, for error messages */
static int rewritten_used;

static const char *as_typed(const char *arg) {
    for (int i = 0; i < rewritten_used; i++)
        if (arg == rewritten[i]) return rewritten_from[i];
    return arg;
}

static void accept_single_dash_names(const ak_cli_cmd *cmd, int argc, char **argv) {
    int used = rewritten_used;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (strcmp(a, "--") == 0) return;
        if (a[0] != '-' || a[1] == '\0') {
            if (cmd->flags & AK_CMD_OPTIONS_FIRST) return;
            continue;
        }
        const ak_opt *o;
        if (a[1] == '-') { /* --name [value] */
            size_t len = strcspn(a + 2, "=");
            o = find_long(cmd->opts, a + 2, len);
            if (o && takes_value(o) && !a[2 + len]) i++;
            continue;
        }
        size_t len = strcspn(a + 1, "=");
        o = len >= 2 ? find_long(cmd->opts, a + 1, len) : NULL;
        if (o && used < 16 && strlen(a) + 2 < sizeof rewritten[0]) {
            snprintf(rewritten[used], sizeof rewritten[0], "-%s", a);
            rewritten_from[used] = a;
            argv[i] = rewritten[used++];
            rewritten_used = used;
            if (takes_value(o) && !a[1 + len]) i++;
        } else if (!o && (o = find_letter(cmd->opts, a[1])) && takes_value(o) && !a[2]) {
            i++; /* -t 4 */
        }
    }
}

typedef struct getopt_tables {
    struct option longs[MAX_LONG + 2];
    char shorts[2 * 64 + 8];
} getopt_tables;

static int build_tables(const ak_cli_cmd *cmd, getopt_tables *t, char names[][NAME_MAX_LEN]) {
    size_t nl = 0, ns = 0, n = count_opts(cmd->opts);
    t->shorts[ns++] = (cmd->flags & AK_CMD_OPTIONS_FIRST) ? '+' : ':';
    if (cmd->flags & AK_CMD_OPTIONS_FIRST) t->shorts[ns++] = ':';
    t->shorts[ns++] = 'h';
    for (size_t i = 0; i < n; i++) {
        const ak_opt *o = &cmd->opts[i];
        int val = o->letter ? o->letter : LONG_VAL_BASE + (int)i;
        if (o->letter && ns + 3 < sizeof t->shorts) {
            t->shorts[ns++] = (char)o->letter;
            if (takes_value(o)) t->shorts[ns++] = ':';
        }
        for (int k = 0; o->name && alias_at(o->name, k, names[nl]); k++) {
            if (nl == MAX_LONG) return -1;
            t->longs[nl] = (struct option){names[nl], takes_value(o) ? required_argument : no_argument, NULL, val};
            nl++;
        }
    }
    t->shorts[ns] = '\0';
    t->longs[nl++] = (struct option){"help", no_argument, NULL, 'h'};
    t->longs[nl] = (struct option){0};
    return 0;
}

static const ak_opt *opt_of_val(const ak_cli_cmd *cmd, int val) {
    if (val >= LONG_VAL_BASE) return &cmd->opts[val - LONG_VAL_BASE];
    return find_letter(cmd->opts, val);
}

/* Reports what getopt rejected: an unknown flag, a missing value, a value given to a
 * flag that takes none. */
static int reject(const ak_cli_cmd *cmd, char **argv, int c) {
    char label[128];
    const char *last = as_typed(argv[optind - 1]);
    int long_form = strncmp(last, "--", 2) == 0 || last != argv[optind - 1]; /* -np: typed so */
    if (long_form) snprintf(label, sizeof label, "%.*s", (int)strcspn(last, "="), last);
    else snprintf(label, sizeof label, "-%c", optopt);
    if (c == ':') return ak_cli_usage_error(cmd, "option '%s' needs a value", label);
    if (optopt != 0 && long_form && opt_of_val(cmd, optopt))
        return ak_cli_usage_error(cmd, "option '%s' takes no value", label);
    if (optopt != 0) snprintf(label, sizeof label, "-%c", optopt);
    return ak_cli_usage_error(cmd, "unknown option '%s'", label);
}

int ak_cli_parse(const ak_cli_cmd *cmd, int argc, char **argv, int *first_operand) {
    static getopt_tables t;
    static char names[MAX_LONG][NAME_MAX_LEN];
    ak__cli_current = cmd->name;
    if (build_tables(cmd, &t, names) != 0 || apply_defaults(cmd) != 0) return AK_EXIT_ERROR;
    accept_single_dash_names(cmd, argc, argv);
    optind = 0; /* glibc: start over, as for a new argv */
    opterr = 0;
    int c, index;
    char why[200], label[128];
    while ((c = getopt_long(argc, argv, t.shorts, t.longs, &index)) != -1) {
        if (c == 'h') {
            ak_cli_print_help(cmd, stdout);
            return AK_EXIT_OK;
        }
        if (c == '?' || c == ':') return reject(cmd, argv, c);
        const ak_opt *o = opt_of_val(cmd, c);
        ak_opt_more more = {argc, &optind, argv};
        const char *bad = store_value(o, optarg, &more, why, sizeof why);
        if (bad)
            return ak_cli_usage_error(cmd, "bad value '%s' for %s: %s", optarg ? optarg : "",
                                      flag_label(o, label, sizeof label), bad);
    }
    *first_operand = optind;
    return AK_CLI_CONTINUE;
}
