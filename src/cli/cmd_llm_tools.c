/* `ak tokenize` (ids of a text under a model's or vocabulary's tokenizer) and `ak logits`
 * (the logits of one prefill, as .npy, for precision comparisons). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/llm_cli.h"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(buf, 2 * cap + 1);
            if (!grown) { free(buf); buf = NULL; break; }
            buf = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

/* A model's tokenizer, or a vocabulary-only GGUF's. */
static ak_status open_tokenizer(const char *path, ak_llm_model **m, ak_gguf **g, ak_tokenizer **own,
                                const ak_tokenizer **tok) {
    ak_llm_load_options o = {.mmap = 1}; /* only the vocabulary is read */
    if (ak_llm_model_load_with(path, &o, m) == AK_OK) return ak_llm_model_tokenizer(*m, tok);
    ak_status st = ak_gguf_open(path, g);
    if (st != AK_OK) return st;
    st = ak_tokenizer_from_gguf(*g, own);
    *tok = *own;
    return st;
}

static int print_ids(const ak_tokenizer *tok, const char *text, size_t len, int bos) {
    ak_tokenizer_info info;
    ak_tokenizer_get_info(tok, &info);
    int32_t *ids = malloc((len + 3) * sizeof *ids);
    size_t n = 0;
    if (!ids) return AK_EXIT_ERROR;
    ak_status st = ak_tokenizer_encode(tok, text, len, AK_TOK_PARSE_SPECIAL, ids, len + 3, &n);
    if (st != AK_OK) {
        free(ids);
        return ak_cli_report("tokenize", st);
    }
    int first = 1;
    if (bos && info.bos >= 0) printf("%d", info.bos), first = 0;
    for (size_t i = 0; i < n; ++i, first = 0) printf(first ? "%d" : " %d", ids[i]);
    printf("\n");
    free(ids);
    return AK_EXIT_OK;
}

int ak_cli_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    int bos = 0, first;
    const ak_opt opts[] = {
        {"model", 'm', AK_OPT_STRING, &model, "MODEL", .help = "a model, or a GGUF file holding only a vocabulary (required)"},
        {"file", 0, AK_OPT_STRING, &file, "F", .help = "tokenize the content of F instead of a text argument"},
        {"bos", 0, AK_OPT_FLAG, &bos, .help = "start with the beginning-of-sequence token"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "tokenize", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (argc - first > 1) return ak_cli_usage_error(&cmd, "one text at a time (quote it)");
    if (first < argc) text = argv[first];
    if (!model) return ak_cli_usage_error(&cmd, "-m MODEL is required");
    if (!text == !file) return ak_cli_usage_error(&cmd, "give a text or --file F, one of them");
    ak_llm_model *m = NULL;
    ak_gguf *g = NULL;
    ak_tokenizer *own = NULL;
    const ak_tokenizer *tok = NULL;
    ak_status st = open_tokenizer(model, &m, &g, &own, &tok);
    if (st != AK_OK) {
        rc = ak_cli_report(model, st);
    } else {
        size_t len = text ? strlen(text) : 0;
        char *content = file ? read_file(file, &len) : NULL;
        rc = file && !content ? ak_cli_error("cannot read '%s'", file)
                              : print_ids(tok, file ? content : text, len, bos);
        free(content);
    }
    if (own) ak_tokenizer_free(own);
    if (g) ak_gguf_close(g);
    ak_llm_model_free(m);
    return rc;
}

int ak_cli_logits(int argc, char **argv) {
    const char *model = NULL, *ids_text = NULL, *out = NULL;
    long threads = 0;
    int first;
    const ak_opt opts[] = {
        {"model", 'm', AK_OPT_STRING, &model, "MODEL", .help = "GGUF file or Hugging Face folder (required)"},
        {"ids", 0, AK_OPT_STRING, &ids_text, "\"1 2 3\"", .help = "the token ids of the prefill (required)"},
        {"out", 0, AK_OPT_STRING, &out, "LOGITS.npy", .help = "where the float32 [n, vocab] logits go (required)"},
        {"threads", 't', AK_OPT_INT, &threads, "N", .help = "threads (0: AK_NUM_THREADS or all cores)", .def = "0", .min = 0, .max = 1024},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "logits", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    if (!model || !ids_text || !out) return ak_cli_usage_error(&cmd, "-m MODEL, --ids and --out are required");
    return ak_cli_logits_npy(model, ids_text, out, -1, (int32_t)threads);
}
