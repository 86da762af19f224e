/* α–β cost model for choosing the allreduce algorithm (see comm_model.h). */
#include "comm/comm_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"

static const char *const algo_names[AK_COMM_ALGO_COUNT_] = {"auto", "ring", "rd", "tree", "hier"};
static const char *const algo_long_names[AK_COMM_ALGO_COUNT_] = {
    "auto", "ring", "recursive_doubling", "tree", "hierarchical"};

const char *ak_comm_algo_name(ak_comm_algo algo) {
    return (unsigned)algo < AK_COMM_ALGO_COUNT_ ? algo_long_names[algo] : "unknown";
}

ak_status ak__comm_algo_parse(const char *text, ak_comm_algo *out) {
    for (int i = 0; i < AK_COMM_ALGO_COUNT_; i++)
        if (strcmp(text, algo_names[i]) == 0 || strcmp(text, algo_long_names[i]) == 0) {
            *out = (ak_comm_algo)i;
            return AK_OK;
        }
    return AK_FAIL(AK_ERR_INVALID_ARG, "algorithm '%s' is not one of auto, ring, rd, tree, hier",
                   text);
}

/* Defaults per transport kind (α µs, β GB/s), measured on the project's 2-core VMs:
 * threads copy at memory speed, shm pays two copies, loopback TCP ~2 GB/s. */
static const ak__link_model default_mem = {1.0, 8.0};
static const ak__link_model default_shm = {2.0, 6.0};
static const ak__link_model default_tcp = {20.0, 1.5};

/* Tuning file: lines "intra_alpha_us V", "intra_beta_gbps V", "inter_alpha_us V",
 * "inter_beta_gbps V"; '#' starts a comment. */
static ak_status read_tuning(ak_comm *c, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return AK_FAIL(AK_ERR_IO, "AK_COMM_TUNING: cannot open '%s'", path);
    char line[256], name[64];
    double v;
    int lineno = 0;
    ak_status st = AK_OK;
    while (st == AK_OK && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[strspn(line, " \t")] == '#' || line[strspn(line, " \t\r\n")] == '\0') continue;
        if (sscanf(line, "%63s %lf", name, &v) != 2 || !(v > 0)) {
            st = AK_FAIL(AK_ERR_INVALID_ARG, "%s:%d: expected 'name positive-number'", path, lineno);
        } else if (strcmp(name, "intra_alpha_us") == 0) c->links[AK_COMM_TP_INTRA].alpha_us = v;
        else if (strcmp(name, "intra_beta_gbps") == 0) c->links[AK_COMM_TP_INTRA].beta_gbps = v;
        else if (strcmp(name, "inter_alpha_us") == 0) c->links[AK_COMM_TP_INTER].alpha_us = v;
        else if (strcmp(name, "inter_beta_gbps") == 0) c->links[AK_COMM_TP_INTER].beta_gbps = v;
        else st = AK_FAIL(AK_ERR_INVALID_ARG, "%s:%d: unknown parameter '%s'", path, lineno, name);
    }
    fclose(f);
    return st;
}

ak_status ak__comm_model_init(ak_comm *c, int threads_of_one_process) {
    c->links[AK_COMM_TP_INTRA] = threads_of_one_process ? default_mem : default_shm;
    c->links[AK_COMM_TP_INTER] = default_tcp;
    if (c->config.transport == AK_COMM_TRANSPORT_TCP) c->links[AK_COMM_TP_INTRA] = default_tcp;
    return c->config.tuning_file ? read_tuning(c, c->config.tuning_file) : AK_OK;
}

/* Time of `steps` messages of `bytes` each over link l, in µs. */
static double link_us(const ak__link_model *l, double steps, double bytes) {
    return steps * l->alpha_us + steps * bytes / (l->beta_gbps * 1e3);
}

static double log2_ceil(int p) { return p > 1 ? ceil(log2((double)p)) : 0; }

double ak__comm_model_allreduce_us(const ak_comm *c, ak_comm_algo algo, size_t bytes) {
    int p = c->size;
    double n = (double)bytes;
    if (p == 1) return 0;
    /* flat algorithms run at the pace of the slowest link they cross */
    const ak__link_model *flat = &c->links[c->host_count > 1 ? AK_COMM_TP_INTER : AK_COMM_TP_INTRA];
    switch (algo) {
    case AK_COMM_ALGO_RING: return link_us(flat, 2.0 * (p - 1), n / p);
    case AK_COMM_ALGO_RECURSIVE_DOUBLING: {
        int pow2 = 1 << (int)floor(log2((double)p));
        return link_us(flat, log2_ceil(pow2) + (pow2 != p ? 2 : 0), n);
    }
    case AK_COMM_ALGO_TREE: return link_us(flat, 2.0 * log2_ceil(p), n);
    case AK_COMM_ALGO_HIERARCHICAL: {
        int h = c->host_count, l = c->local_size;
        if (h < 2 || l < 2 || h * l != p) return INFINITY;
        const ak__link_model *in = &c->links[AK_COMM_TP_INTRA], *out = &c->links[AK_COMM_TP_INTER];
        return 2.0 * link_us(in, l - 1, n / l) + link_us(out, 2.0 * (h - 1), n / l / h);
    }
    default: return INFINITY;
    }
}

ak_comm_algo ak__comm_pick_allreduce(const ak_comm *c, size_t bytes) {
    if (c->config.algo != AK_COMM_ALGO_AUTO) return c->config.algo;
    ak_comm_algo best = AK_COMM_ALGO_RING;
    double best_us = INFINITY;
    for (int a = AK_COMM_ALGO_RING; a < AK_COMM_ALGO_COUNT_; a++) {
        double t = ak__comm_model_allreduce_us(c, (ak_comm_algo)a, bytes);
        if (t < best_us) {
            best_us = t;
            best = (ak_comm_algo)a;
        }
    }
    return best;
}

ak_status ak_comm_choose_algo(const ak_comm *c, size_t bytes, ak_comm_algo *out) {
    AK_ARG_CHECK(c && out, "ak_comm_choose_algo: NULL argument");
    *out = ak__comm_pick_allreduce(c, bytes);
    return AK_OK;
}
