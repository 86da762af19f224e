/* grammar_probe: the grammar state of libaccelkit driven over stdin, for the test that
 * compares it token by token with llama.cpp's grammar sampler (test_grammar_oracle.py).
 *
 *   grammar_probe MODEL.gguf GRAMMAR.gbnf      (the model's vocabulary is used)
 * stdin, one command per line; each answers one line on stdout:
 *   mask        the allowed token ids, space-separated ("-" when none)
 *   accept ID   "ok", or "rejected" (the state is then unchanged)
 *   reset       back to the start state; "ok"
 * Exit 0 at end of input, 2 on a bad file or grammar (the error on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/llm.h"
#include "llm/grammar/grammar.h"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        rewind(f);
        text = n >= 0 ? malloc((size_t)n + 1) : NULL;
        if (text && fread(text, 1, (size_t)n, f) == (size_t)n) *len = (size_t)n;
        else free(text), text = NULL;
    }
    fclose(f);
    return text;
}

static void print_mask(const ak__grammar_state *s, uint32_t *allowed, int32_t n_vocab) {
    if (ak__grammar_state_mask(s, allowed) != AK_OK) {
        printf("error %s\n", ak_last_error());
        return;
    }
    int any = 0;
    for (int32_t t = 0; t < n_vocab; ++t)
        if (allowed[t / 32] >> (t % 32) & 1) printf(any++ ? " %d" : "%d", t);
    puts(any ? "" : "-");
}

static int serve(const ak_llm_grammar *g, int32_t n_vocab) {
    ak__grammar_state s;
    if (ak__grammar_state_init(&s, g) != AK_OK) return fprintf(stderr, "%s\n", ak_last_error()), 2;
    uint32_t *allowed = calloc(((size_t)n_vocab + 31) / 32, sizeof *allowed);
    if (!allowed) return ak__grammar_state_free(&s), 2;
    char line[256];
    int id;
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "mask", 4) == 0) {
            print_mask(&s, allowed, n_vocab);
        } else if (sscanf(line, "accept %d", &id) == 1) {
            puts(ak__grammar_state_accept_token(&s, id) == AK_OK ? "ok" : "rejected");
        } else if (strncmp(line, "reset", 5) == 0) {
            ak__grammar_state_free(&s);
            if (ak__grammar_state_init(&s, g) != AK_OK) break;
            puts("ok");
        } else {
            printf("error unknown command: %s", line);
        }
        fflush(stdout);
    }
    free(allowed);
    ak__grammar_state_free(&s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) return fprintf(stderr, "usage: grammar_probe MODEL.gguf GRAMMAR.gbnf\n"), 2;
    size_t len = 0;
    char *text = read_file(argv[2], &len);
    if (!text) return fprintf(stderr, "grammar_probe: cannot read %s\n", argv[2]), 2;
    ak_gguf *gguf = NULL;
    ak_tokenizer *tok = NULL;
    ak_llm_grammar *g = NULL;
    ak_tokenizer_info info;
    int rc = 2;
    if (ak_gguf_open(argv[1], &gguf) == AK_OK && ak_tokenizer_from_gguf(gguf, &tok) == AK_OK &&
        ak_tokenizer_get_info(tok, &info) == AK_OK && ak_llm_grammar_compile(tok, text, len, &g) == AK_OK)
        rc = serve(g, info.n_vocab);
    else
        fprintf(stderr, "grammar_probe: %s\n", ak_last_error());
    ak_llm_grammar_free(g);
    if (tok) ak_tokenizer_free(tok);
    if (gguf) ak_gguf_close(gguf);
    free(text);
    return rc;
}
