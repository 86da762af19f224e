/* Rank discovery: rank, world size and local placement from the config or a launcher's
 * environment variables, the store address, the Slurm node-list parser and the host id.
 *
 * Variables are read with getenv at call time, not through the params cache that ak_init
 * fills: launchers (and tests) may set them after the library is initialized, and the
 * launcher variables (RANK, SLURM_PROCID, ...) are not accelkit parameters anyway. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/bootstrap/discover.h"
#include "core/check.h"

#define DEFAULT_STORE_PORT 29500

/* A launcher: its name and the variables it sets (NULL = it does not say). */
typedef struct launcher {
    const char *name;
    const char *rank, *size, *local_rank, *local_size;
    int strict; /* our own prefix: one variable without the other is a mistake */
} launcher;

static const launcher launchers[] = {
    {"ak launch", "AK_RANK", "AK_WORLD_SIZE", "AK_LOCAL_RANK", "AK_LOCAL_SIZE", 1},
    /* horovodrun's own variables (its Gloo launcher sets them, torchrun's are unset then);
     * the HOROVOD_ prefix is nobody else's, so a half-set pair is a mistake */
    {"horovod", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", 1},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", 0},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", 0},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL, 0},
    /* MPICH / Intel MPI (Hydra): the PMI rank and size, the local ids MPICH adds */
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", 0},
};

static const char *slurm_nodelist_vars[] = {"SLURM_STEP_NODELIST", "SLURM_NODELIST",
                                            "SLURM_JOB_NODELIST"};

const char *ak__env(const char *name) {
    const char *v = name ? getenv(name) : NULL;
    return v && v[0] ? v : NULL;
}

/* Strict decimal int: the whole text, no sign games beyond a leading '-'. */
static ak_status parse_int(const char *var, const char *text, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    AK_ARG_CHECK(end != text && *end == '\0' && !isspace((unsigned char)text[0]),
                 "%s='%s' is not a number", var, text);
    AK_ARG_CHECK(errno == 0 && v >= INT_MIN && v <= INT_MAX, "%s='%s' is out of range", var,
                 text);
    *out = (int)v;
    return AK_OK;
}

/* Reads an optional variable: *out stays as is when unset. */
static ak_status env_int(const char *var, int *out) {
    const char *text = ak__env(var);
    return text ? parse_int(var, text, out) : AK_OK;
}

/* Fills rank/world/local from launcher l if its variables are set; *found says so. */
static ak_status from_launcher(const launcher *l, ak__world_info *w, int *found) {
    const char *rank = ak__env(l->rank), *size = ak__env(l->size);
    *found = 0;
    if (!rank && !size) return AK_OK;
    if (!rank || !size) {
        AK_ARG_CHECK(!l->strict, "%s is set but %s is not", rank ? l->rank : l->size,
                     rank ? l->size : l->rank);
        return AK_OK; /* a lone RANK may belong to something else: not this launcher */
    }
    AK_CHECK(parse_int(l->rank, rank, &w->rank));
    AK_CHECK(parse_int(l->size, size, &w->world_size));
    AK_CHECK(env_int(l->local_rank, &w->local_rank));
    AK_CHECK(env_int(l->local_size, &w->local_size));
    snprintf(w->source, sizeof w->source, "%s", l->name);
    *found = 1;
    return AK_OK;
}

static ak_status from_config(const ak_comm_config *cfg, ak__world_info *w, int *found) {
    *found = 0;
    if (!cfg || (cfg->rank == -1 && cfg->world_size == -1)) return AK_OK;
    AK_ARG_CHECK(cfg->rank != -1 && cfg->world_size != -1,
                 "ak_comm_config: rank (%d) and world_size (%d) must be set together (or both "
                 "-1 to discover)", cfg->rank, cfg->world_size);
    w->rank = cfg->rank;
    w->world_size = cfg->world_size;
    snprintf(w->source, sizeof w->source, "config");
    *found = 1;
    return AK_OK;
}

/* Checks the numbers, naming the variables they came from. */
static ak_status validate(const ak__world_info *w, const launcher *l) {
    const char *rank_var = l ? l->rank : "ak_comm_config.rank";
    const char *size_var = l ? l->size : "ak_comm_config.world_size";
    AK_ARG_CHECK(w->world_size >= 1, "%s=%d: the world size must be at least 1", size_var,
                 w->world_size);
    AK_ARG_CHECK(w->rank >= 0 && w->rank < w->world_size, "%s=%d is out of range for %s=%d",
                 rank_var, w->rank, size_var, w->world_size);
    if (l && w->local_size != -1)
        AK_ARG_CHECK(w->local_size >= 1 && w->local_size <= w->world_size,
                     "%s=%d is out of range for %s=%d", l->local_size, w->local_size, size_var,
                     w->world_size);
    if (l && w->local_rank != -1)
        AK_ARG_CHECK(w->local_rank >= 0 && w->local_rank < w->world_size &&
                         (w->local_size == -1 || w->local_rank < w->local_size),
                     "%s=%d is out of range", l->local_rank, w->local_rank);
    return AK_OK;
}

static ak_status set_addr(ak__world_info *w, const char *what, const char *addr) {
    AK_ARG_CHECK(strlen(addr) < sizeof w->store_addr, "%s is longer than %zu bytes", what,
                 sizeof w->store_addr - 1);
    snprintf(w->store_addr, sizeof w->store_addr, "%s", addr);
    return AK_OK;
}

/* Store address: config, AK_MASTER_ADDR, MASTER_ADDR, Slurm's first node, loopback. */
static ak_status discover_addr(const ak_comm_config *cfg, int slurm, ak__world_info *w) {
    if (cfg && cfg->store_addr && cfg->store_addr[0])
        return set_addr(w, "ak_comm_config.store_addr", cfg->store_addr);
    static const char *vars[] = {"AK_MASTER_ADDR", "MASTER_ADDR"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (ak__env(vars[i])) return set_addr(w, vars[i], ak__env(vars[i]));
    for (size_t i = 0; slurm && i < sizeof slurm_nodelist_vars / sizeof *slurm_nodelist_vars;
         i++) {
        const char *list = ak__env(slurm_nodelist_vars[i]);
        if (!list) continue;
        ak_status st = ak__slurm_first_node(list, w->store_addr, sizeof w->store_addr);
        if (st != AK_OK) { /* copied: the new message is formatted over the old one */
            char why[256];
            snprintf(why, sizeof why, "%s", ak_last_error());
            return AK_FAIL(st, "%s: %s", slurm_nodelist_vars[i], why);
        }
        return AK_OK;
    }
    return set_addr(w, "default", "127.0.0.1");
}

/* Store port: config, AK_MASTER_PORT, MASTER_PORT, 29500 (0 counts as unset everywhere,
 * as in AK_MASTER_PORT's declared default). */
static ak_status discover_port(const ak_comm_config *cfg, ak__world_info *w) {
    if (cfg) {
        AK_ARG_CHECK(cfg->store_port >= 0 && cfg->store_port <= 65535,
                     "ak_comm_config.store_port=%d is not a port", cfg->store_port);
        w->store_port = cfg->store_port;
    }
    static const char *vars[] = {"AK_MASTER_PORT", "MASTER_PORT"};
    for (size_t i = 0; w->store_port == 0 && i < sizeof vars / sizeof *vars; i++) {
        AK_CHECK(env_int(vars[i], &w->store_port));
        AK_ARG_CHECK(w->store_port >= 0 && w->store_port <= 65535, "%s=%d is not a port",
                     vars[i], w->store_port);
    }
    if (w->store_port == 0) w->store_port = DEFAULT_STORE_PORT;
    return AK_OK;
}

ak_status ak__discover(const ak_comm_config *cfg, ak__world_info *out) {
    AK_ARG_CHECK(out, "ak__discover: NULL output");
    AK_ARG_CHECK(!cfg || cfg->struct_size >= offsetof(ak_comm_config, store_port) + sizeof(int),
                 "ak_comm_config.struct_size=%u: initialize it with AK_COMM_CONFIG_INIT",
                 cfg ? (unsigned)cfg->struct_size : 0u);
    ak__world_info w = {.rank = 0, .world_size = 1, .local_rank = -1, .local_size = -1};
    const launcher *used = NULL;
    int found;
    AK_CHECK(from_config(cfg, &w, &found));
    for (size_t i = 0; !found && i < sizeof launchers / sizeof *launchers; i++) {
        AK_CHECK(from_launcher(&launchers[i], &w, &found));
        if (found) used = &launchers[i];
    }
    if (!found) { /* nobody launched us: a world of one */
        w.local_rank = 0;
        w.local_size = 1;
        snprintf(w.source, sizeof w.source, "single");
    }
    AK_CHECK(validate(&w, used));
    AK_CHECK(discover_addr(cfg, used && strcmp(used->name, "slurm") == 0, &w));
    AK_CHECK(discover_port(cfg, &w));
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "discovered rank %d of %d (local %d of %d) from %s, store %s:%d",
                 w.rank, w.world_size, w.local_rank, w.local_size, w.source, w.store_addr,
                 w.store_port);
    *out = w;
    return AK_OK;
}

/* ---- host identity ---------------------------------------------------------------- */

ak_status ak__host_id(char *buf, size_t cap) {
    AK_ARG_CHECK(buf && cap > 0, "ak__host_id: NULL or empty buffer");
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        return AK_FAIL(AK_ERR_IO, "host id: gethostname: %s", strerror(errno));
    host[sizeof host - 1] = '\0';
    struct stat st;
    int rc, n;
    AK_SYSCHECK(rc, stat("/proc/self/ns/net", &st));
    if (rc == 0) {
        n = snprintf(buf, cap, "%s:%llu", host, (unsigned long long)st.st_ino);
    } else { /* no /proc (or no namespaces): one namespace per hostname is all we can say */
        AK_LOG_DEBUG(AK_SUBSYS_COMM, "host id: /proc/self/ns/net: %s; using the hostname only",
                     strerror(errno));
        n = snprintf(buf, cap, "%s", host);
    }
    AK_ARG_CHECK(n >= 0 && (size_t)n < cap, "host id: needs %d bytes, the buffer has %zu", n + 1,
                 cap);
    return AK_OK;
}

/* ---- Slurm node lists --------------------------------------------------------------- */

static int is_host_char(char c) {
    return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

/* Checks one bracket group "01-04,07]" starting after '['; *end points past ']' and
 * *first_len is the length of its first number (the digits are kept as written, so
 * zero-padding survives). */
static ak_status parse_brackets(const char *list, const char *p, const char **end,
                                size_t *first_len) {
    *first_len = strspn(p, "0123456789");
    for (;;) {
        size_t lo_len = strspn(p, "0123456789");
        AK_ARG_CHECK(lo_len > 0 && lo_len <= 18, "Slurm node list '%s': expected a number at "
                     "'%s'", list, p);
        unsigned long long lo = strtoull(p, NULL, 10);
        p += lo_len;
        if (*p == '-') {
            size_t hi_len = strspn(++p, "0123456789");
            AK_ARG_CHECK(hi_len > 0 && hi_len <= 18 && strtoull(p, NULL, 10) >= lo,
                         "Slurm node list '%s': bad range before '%s'", list, p);
            p += hi_len;
        }
        if (*p == ']') {
            *end = p + 1;
            return AK_OK;
        }
        AK_ARG_CHECK(*p == ',', "Slurm node list '%s': unterminated '['", list);
        p++;
    }
}

ak_status ak__slurm_first_node(const char *nodelist, char *buf, size_t cap) {
    AK_ARG_CHECK(nodelist && buf && cap > 0, "ak__slurm_first_node: NULL argument");
    size_t n = 0;
    const char *p = nodelist;
    AK_ARG_CHECK(*p && *p != ',', "Slurm node list '%s': empty first host", nodelist);
    while (*p && *p != ',') {
        const char *piece = p;
        size_t len = 1;
        if (*p == '[') {
            AK_CHECK(parse_brackets(nodelist, p + 1, &p, &len));
            piece++;
        } else {
            AK_ARG_CHECK(is_host_char(*p), "Slurm node list '%s': unexpected '%c'", nodelist,
                         *p);
            p++;
        }
        AK_ARG_CHECK(n + len < cap, "Slurm node list '%s': first host longer than %zu bytes",
                     nodelist, cap - 1);
        memcpy(buf + n, piece, len);
        n += len;
    }
    buf[n] = '\0';
    return AK_OK;
}
