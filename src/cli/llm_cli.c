/* Shared pieces of the LLM subcommands (see llm_cli.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/llm_cli.h"

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
            fprintf(stderr, "ak: bad token id near '%.16s' (want non-negative integers)\n", p);
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

int ak_cli_flag_int(int argc, char **argv, int *i, long lo, long hi, long *out) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "ak: %s needs a value\n", argv[*i]);
        return -1;
    }
    char *end;
    long v = strtol(argv[*i + 1], &end, 10);
    if (*end || end == argv[*i + 1] || v < lo || v > hi) {
        fprintf(stderr, "ak: %s '%s' is not an integer in [%ld, %ld]\n", argv[*i], argv[*i + 1], lo, hi);
        return -1;
    }
    *out = v;
    ++*i;
    return 0;
}

int ak_cli_flag_double(int argc, char **argv, int *i, double *out) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "ak: %s needs a value\n", argv[*i]);
        return -1;
    }
    char *end;
    double v = strtod(argv[*i + 1], &end);
    if (*end || end == argv[*i + 1]) {
        fprintf(stderr, "ak: %s '%s' is not a number\n", argv[*i], argv[*i + 1]);
        return -1;
    }
    *out = v;
    ++*i;
    return 0;
}

int ak_cli_sampling_flag(int argc, char **argv, int *i, ak_sampling_params *p) {
    static const char *const reals[] = {"--temp", "--top-p", "--min-p", "--repeat-penalty",
                                        "--presence-penalty", "--frequency-penalty"};
    float *const targets[] = {&p->temperature, &p->top_p, &p->min_p, &p->repetition_penalty,
                              &p->presence_penalty, &p->frequency_penalty};
    const char *a = argv[*i];
    for (size_t k = 0; k < sizeof reals / sizeof reals[0]; ++k) {
        if (strcmp(a, reals[k]) != 0) continue;
        double v;
        if (ak_cli_flag_double(argc, argv, i, &v) != 0) return -1;
        *targets[k] = (float)v;
        return 1;
    }
    long v;
    if (strcmp(a, "--top-k") == 0) {
        if (ak_cli_flag_int(argc, argv, i, 0, INT32_MAX, &v) != 0) return -1;
        p->top_k = (int32_t)v;
        return 1;
    }
    if (strcmp(a, "--seed") == 0) {
        if (ak_cli_flag_int(argc, argv, i, 0, INT64_MAX > LONG_MAX ? LONG_MAX : INT64_MAX, &v) != 0)
            return -1;
        p->seed = (uint64_t)v;
        return 1;
    }
    if (strcmp(a, "--logprobs") == 0) {
        if (ak_cli_flag_int(argc, argv, i, 0, 20, &v) != 0) return -1;
        p->n_logprobs = (int32_t)v;
        return 1;
    }
    return 0;
}
