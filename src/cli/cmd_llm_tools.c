/* `ak tokenize` (ids of a text under a model's or vocabulary's tokenizer) and `ak logits`
 * (the logits of one prefill, as .npy, for precision comparisons). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/infer.h"
#include "cli/cli.h"
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
    int bos = 0;
    for (int i = 1; i < argc; ++i) {
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--file") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--bos")) bos = 1;
        else if (!text && argv[i][0] != '-') text = argv[i];
        else return fprintf(stderr, "usage: ak tokenize -m MODEL_OR_VOCAB_GGUF (\"text\" | --file F) [--bos]\n"), AK_EXIT_ERROR;
    }
    if (!model || !text == !file)
        return fprintf(stderr, "usage: ak tokenize -m MODEL_OR_VOCAB_GGUF (\"text\" | --file F) [--bos]\n"), AK_EXIT_ERROR;
    ak_llm_model *m = NULL;
    ak_gguf *g = NULL;
    ak_tokenizer *own = NULL;
    const ak_tokenizer *tok = NULL;
    ak_status st = open_tokenizer(model, &m, &g, &own, &tok);
    int rc;
    if (st != AK_OK) {
        rc = ak_cli_report(model, st);
    } else {
        size_t len = text ? strlen(text) : 0;
        char *content = file ? read_file(file, &len) : NULL;
        rc = file && !content ? (fprintf(stderr, "ak tokenize: cannot read '%s'\n", file), AK_EXIT_ERROR)
                              : print_ids(tok, file ? content : text, len, bos);
        free(content);
    }
    if (own) ak_tokenizer_free(own);
    if (g) ak_gguf_close(g);
    ak_llm_model_free(m);
    return rc;
}

#if AK_WITH_ONNX
static int save_logits(const char *path, const float *logits, size_t rows, int32_t vocab) {
    int64_t dims[2] = {(int64_t)rows, vocab};
    ak_tensor t = {AK_ELEM_F32, 2, dims, (void *)logits};
    ak_status st = ak_tensor_save_npy(path, &t);
    return st == AK_OK ? AK_EXIT_OK : ak_cli_report(path, st);
}
#else /* no ONNX engine, whose ak_tensor_save_npy this is: a float32 [rows, vocab] .npy */
static int save_logits(const char *path, const float *logits, size_t rows, int32_t vocab) {
    char header[128]; /* dict, padded with spaces to 118 bytes + '\n': data at offset 128 */
    int n = snprintf(header, sizeof header,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %d), }", rows, vocab);
    memset(header + n, ' ', sizeof header - 10 - (size_t)n - 1);
    header[sizeof header - 10 - 1] = '\n';
    const unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, sizeof header - 10, 0};
    FILE *f = fopen(path, "wb");
    size_t count = rows * (size_t)vocab;
    int ok = f && fwrite(magic, 1, sizeof magic, f) == sizeof magic &&
             fwrite(header, 1, sizeof header - 10, f) == sizeof header - 10 &&
             fwrite(logits, sizeof *logits, count, f) == count;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "ak logits: cannot write '%s'\n", path);
    return ok ? AK_EXIT_OK : AK_EXIT_ERROR;
}
#endif

int ak_cli_logits(int argc, char **argv) {
    const char *model = NULL, *ids_text = NULL, *out = NULL;
    long threads = 0;
    for (int i = 1; i < argc; ++i) {
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc) ids_text = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "-t") && ak_cli_flag_int(argc, argv, &i, 0, 1024, &threads) == 0) continue;
        else model = NULL, i = argc;
    }
    if (!model || !ids_text || !out)
        return fprintf(stderr, "usage: ak logits -m MODEL --ids \"1 2 3\" --out LOGITS.npy [-t threads]\n"), AK_EXIT_ERROR;
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
    float *logits = malloc(n * (size_t)info.n_vocab * sizeof *logits);
    int rc = AK_EXIT_ERROR;
    if (logits && (st = ak_llm_model_logits(m, ids, n, logits, (int32_t)threads)) == AK_OK)
        rc = save_logits(out, logits, n, info.n_vocab);
    else if (logits)
        rc = ak_cli_report("logits", st);
    free(logits);
    free(ids);
    ak_llm_model_free(m);
    return rc;
}
