/* Shared pieces of the LLM subcommands (see llm_cli.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/llm_cli.h"
#include "llm/model/model_lens.h"

int ak_cli_parse_ids(const char *text, int32_t **ids, size_t *n) {
    size_t cap = strlen(text) / 2 + 2, count = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') ++p;
        if (!*p) break;
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x > INT32_MAX) {
            ak_cli_error("bad token id near '%.16s' (want non-negative integers)", p);
            free(v);
            return -1;
        }
        v[count++] = (int32_t)x;
        p = end;
    }
    *ids = v;
    *n = count;
    return 0;
}

int ak_cli_encode(const ak_tokenizer *tok, const char *text, int add_special, int32_t **ids,
                  size_t *n) {
    size_t len = strlen(text), cap = len + 3;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    unsigned flags = AK_TOK_PARSE_SPECIAL | (add_special ? AK_TOK_ADD_SPECIAL : 0u);
    ak_status st = ak_tokenizer_encode(tok, text, len, flags, v, cap, n);
    if (st != AK_OK) {
        free(v);
        ak_cli_report("tokenize", st);
        return -1;
    }
    *ids = v;
    return 0;
}

void ak_cli_sampling_opts(ak_cli_sampling *s, ak_opt *rows) {
    const ak_opt table[AK_CLI_SAMPLING_OPTS] = {
        {"temp", 0, AK_OPT_DOUBLE, &s->temp, "T", .help = "sampling temperature (0: greedy)", .def = "1"},
        {"top-k", 0, AK_OPT_INT, &s->top_k, "K", .help = "keep the K most likely tokens (0: off)", .def = "0", .min = 0, .max = INT32_MAX},
        {"top-p", 0, AK_OPT_DOUBLE, &s->top_p, "P", .help = "nucleus mass (1: off)", .def = "1"},
        {"min-p", 0, AK_OPT_DOUBLE, &s->min_p, "P", .help = "drop tokens below P times the top one's probability (0: off)", .def = "0"},
        {"repeat-penalty", 0, AK_OPT_DOUBLE, &s->repeat_penalty, "R", .help = "penalty of tokens of prompt and output (1: off)", .def = "1"},
        {"presence-penalty", 0, AK_OPT_DOUBLE, &s->presence_penalty, "X", .help = "subtracted once per token already generated (0: off)", .def = "0"},
        {"frequency-penalty", 0, AK_OPT_DOUBLE, &s->frequency_penalty, "X", .help = "subtracted per occurrence in the output (0: off)", .def = "0"},
        {"seed", 0, AK_OPT_INT, &s->seed, "S", .help = "random seed: same seed and inputs, same tokens", .def = "0", .min = 0, .max = LONG_MAX},
        {"logprobs", 0, AK_OPT_INT, &s->logprobs, "N", .help = "top-N log-probabilities per token", .def = "0", .min = 0, .max = 20},
    };
    memcpy(rows, table, sizeof table);
}

void ak_cli_sampling_apply(const ak_cli_sampling *s, ak_sampling_params *p) {
    ak_sampling_params_default(p);
    p->temperature = (float)s->temp;
    p->top_k = (int32_t)s->top_k;
    p->top_p = (float)s->top_p;
    p->min_p = (float)s->min_p;
    p->repetition_penalty = (float)s->repeat_penalty;
    p->presence_penalty = (float)s->presence_penalty;
    p->frequency_penalty = (float)s->frequency_penalty;
    p->seed = (uint64_t)s->seed;
    p->n_logprobs = (int32_t)s->logprobs;
}

/* A float32 [rows, cols] .npy: the header dict padded with spaces to end at byte 128. */
static int save_npy(const char *path, const float *data, size_t rows, int32_t cols) {
    char header[118];
    int len = snprintf(header, sizeof header,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %d), }", rows, cols);
    memset(header + len, ' ', sizeof header - (size_t)len);
    header[sizeof header - 1] = '\n';
    const unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, sizeof header, 0};
    FILE *f = fopen(path, "wb");
    size_t count = rows * (size_t)cols;
    int ok = f && fwrite(magic, 1, sizeof magic, f) == sizeof magic &&
             fwrite(header, 1, sizeof header, f) == sizeof header &&
             fwrite(data, sizeof *data, count, f) == count;
    if (f && fclose(f) != 0) ok = 0;
    return ok ? AK_EXIT_OK : ak_cli_error("cannot write '%s'", path);
}

int ak_cli_logits_npy(const char *model, const char *ids_text, const char *out, int32_t layer,
                      int32_t threads) {
    int32_t *ids;
    size_t n;
    if (ak_cli_parse_ids(ids_text, &ids, &n) != 0) return AK_EXIT_ERROR;
    ak_llm_model *m;
    ak_status st = ak_llm_model_load(model, &m);
    if (st != AK_OK) {
        free(ids);
        return ak_cli_report(model, st);
    }
    ak_llm_model_info info;
    ak_llm_model_get_info(m, &info);
    float *logits = malloc(n * (size_t)info.n_vocab * sizeof *logits); /* [n, vocab] */
    int rc;
    if (!logits)
        rc = ak_cli_error("out of memory for %zu x %d logits", n, info.n_vocab);
    else if ((st = layer < 0 ? ak_llm_model_logits(m, ids, n, logits, threads)
                             : ak__llm_model_lens_logits(m, layer, ids, n, logits, threads)) != AK_OK)
        rc = ak_cli_report(layer < 0 ? "logits" : "layer logits", st);
    else
        rc = save_npy(out, logits, n, info.n_vocab);
    free(logits);
    free(ids);
    ak_llm_model_free(m);
    return rc;
}
