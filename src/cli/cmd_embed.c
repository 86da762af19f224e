/* `ak embed -m MODEL "text"...`: the embedding of each text (or of --ids) as JSON, as
 * ak_llm_model_embed gives it (pooled as the model says, L2-normalized), with the token
 * ids it was computed from — what the embedding tests compare with their references. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/llm_cli.h"

static void print_vector(const float *v, size_t n) {
    putchar('[');
    for (size_t i = 0; i < n; ++i) printf(i ? ",%.9g" : "%.9g", (double)v[i]);
    putchar(']');
}

/* One {"index", "tokens", "embedding"} object; 0 on success. */
static int embed_one(ak_llm_model *m, const ak_llm_model_info *info, size_t index,
                     const int32_t *ids, size_t n) {
    size_t cap = (size_t)info->dim * (info->pooling == 0 ? n : 1);
    float *out = malloc(cap * sizeof *out);
    if (!out) return ak_cli_error("out of memory");
    ak_status st = ak_llm_model_embed(m, ids, n, out, cap);
    if (st != AK_OK) {
        free(out);
        return ak_cli_report("embed", st);
    }
    printf("%s{\"index\":%zu,\"tokens\":[", index ? "," : "", index);
    for (size_t i = 0; i < n; ++i) printf(i ? ",%d" : "%d", ids[i]);
    printf("],\"embedding\":");
    print_vector(out, cap);
    putchar('}');
    free(out);
    return 0;
}

static int embed_text(ak_llm_model *m, const ak_llm_model_info *info, size_t index,
                      const char *text) {
    const ak_tokenizer *tok;
    ak_llm_model_tokenizer(m, &tok);
    size_t len = strlen(text), n = 0;
    int32_t *ids = malloc((len + 3) * sizeof *ids);
    if (!ids) return ak_cli_error("out of memory");
    ak_status st = ak_tokenizer_encode(tok, text, len, AK_TOK_ADD_SPECIAL, ids, len + 3, &n);
    int rc = st != AK_OK ? ak_cli_report("tokenize", st)
             : n == 0     ? ak_cli_error("text %zu gives no tokens", index)
                          : embed_one(m, info, index, ids, n);
    free(ids);
    return rc;
}

int ak_cli_embed(int argc, char **argv) {
    const char *model = NULL, *ids_text = NULL;
    int first;
    const ak_opt opts[] = {
        {"model", 'm', AK_OPT_STRING, &model, "MODEL", .help = "GGUF file (bert, nomic-bert or a decoder) (required)"},
        {"ids", 0, AK_OPT_STRING, &ids_text, "\"1 2 3\"", .help = "embed these token ids instead of texts"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "embed", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (!model) return ak_cli_usage_error(&cmd, "-m MODEL is required");
    if (!ids_text == (first >= argc)) return ak_cli_usage_error(&cmd, "give texts or --ids, one of them");
    ak_llm_model *m;
    ak_status st = ak_llm_model_load(model, &m);
    if (st != AK_OK) return ak_cli_report(model, st);
    ak_llm_model_info info;
    ak_llm_model_get_info(m, &info);
    printf("{\"model\":\"%s\",\"dim\":%d,\"pooling\":%d,\"data\":[", info.arch, info.dim,
           info.pooling);
    rc = 0;
    if (ids_text) {
        int32_t *ids = NULL;
        size_t n = 0;
        rc = ak_cli_parse_ids(ids_text, &ids, &n) != 0 ? AK_EXIT_ERROR
             : n == 0 ? ak_cli_error("--ids holds no ids") : embed_one(m, &info, 0, ids, n);
        free(ids);
    }
    for (int i = first; rc == 0 && !ids_text && i < argc; ++i)
        rc = embed_text(m, &info, (size_t)(i - first), argv[i]);
    printf("]}\n");
    ak_llm_model_free(m);
    return rc;
}
