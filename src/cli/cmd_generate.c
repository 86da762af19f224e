/* `ak generate`: one prompt through the engine on the calling thread, the completion
 * streamed to stdout as it is sampled (or its ids with --print-ids). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/llm_cli.h"

typedef struct gen_args {
    const char *model, *draft, *prompt, *ids, *hooks_path;
    long n, threads, gamma, ngram, ctx;
    int print_ids, ignore_eos, stats, mmap;
    const char *stops[16];
    size_t n_stops;
    ak_sampling_params sampling;
} gen_args;

typedef struct gen_out {
    const ak_tokenizer *tok;
    const ak_llm_hooks *hooks;
    int print_ids;
    int32_t *ids;
    size_t n_ids, cap, printed; /* bytes of the decoded completion already written */
    char *text;
    size_t text_cap;
    ak_finish_reason finish;
    size_t trim;
} gen_out;

static int usage(void) {
    fprintf(stderr, "usage: ak generate -m MODEL (-p TEXT | --ids \"1 2 3\") [-n 128] [-t threads] "
            "[--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] "
            "[--presence-penalty X] [--frequency-penalty X] [--seed S] [--stop STR]... "
            "[--ignore-eos] [--draft MODEL] [--gamma 4] [--ngram N] [--ctx N] [--hooks lib.so] "
            "[--mmap] [--print-ids] [--stats]\n");
    return AK_EXIT_ERROR;
}

static int parse_flag(int argc, char **argv, int *i, gen_args *a) {
    const char *f = argv[*i];
    const char **strs[] = {&a->model, &a->model, &a->prompt, &a->ids, &a->draft, &a->hooks_path};
    const char *names[] = {"-m", "--model", "-p", "--ids", "--draft", "--hooks"};
    for (size_t k = 0; k < 6; ++k)
        if (strcmp(f, names[k]) == 0 && *i + 1 < argc) {
            *strs[k] = argv[++*i];
            return 0;
        }
    if (strcmp(f, "-n") == 0) return ak_cli_flag_int(argc, argv, i, 1, 1 << 20, &a->n);
    if (strcmp(f, "-t") == 0) return ak_cli_flag_int(argc, argv, i, 0, 1024, &a->threads);
    if (strcmp(f, "--gamma") == 0) return ak_cli_flag_int(argc, argv, i, 0, 16, &a->gamma);
    if (strcmp(f, "--ngram") == 0) return ak_cli_flag_int(argc, argv, i, 0, 16, &a->ngram);
    if (strcmp(f, "--ctx") == 0) return ak_cli_flag_int(argc, argv, i, 0, 1 << 24, &a->ctx);
    if (strcmp(f, "--print-ids") == 0) return a->print_ids = 1, 0;
    if (strcmp(f, "--ignore-eos") == 0) return a->ignore_eos = 1, 0;
    if (strcmp(f, "--stats") == 0) return a->stats = 1, 0;
    if (strcmp(f, "--mmap") == 0) return a->mmap = 1, 0;
    if (strcmp(f, "--stop") == 0 && *i + 1 < argc && a->n_stops < 16) {
        a->stops[a->n_stops++] = argv[++*i];
        return 0;
    }
    int r = ak_cli_sampling_flag(argc, argv, i, &a->sampling);
    if (r == 1) return 0;
    if (r == 0) fprintf(stderr, "ak generate: unknown or incomplete option '%s'\n", f);
    return -1;
}

/* Writes a piece of the completion, through the post-process hook when one is loaded. */
static void write_piece(const gen_out *o, const char *piece, size_t len) {
    if (!o->hooks || !o->hooks->post_process) {
        fwrite(piece, 1, len, stdout);
        return;
    }
    char out[4096];
    size_t n = 0;
    if (o->hooks->post_process(o->hooks->user, piece, len, out, sizeof out, &n) == AK_OK)
        fwrite(out, 1, n < sizeof out ? n : sizeof out, stdout);
}

/* Writes the newly decoded complete UTF-8 characters of the completion. */
static void stream_text(gen_out *o, int final) {
    size_t len = 0;
    if (ak_tokenizer_decode(o->tok, o->ids, o->n_ids, 0, o->text, o->text_cap, &len) != AK_OK) return;
    if (final) len = len >= o->trim ? len - o->trim : 0;
    size_t end = len;
    if (!final) /* hold back an incomplete trailing UTF-8 sequence */
        for (size_t back = 1; back <= 3 && back <= len; ++back) {
            unsigned char c = (unsigned char)o->text[len - back];
            if ((c & 0xC0) != 0x80) {
                int need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
                if ((size_t)need > back) end = len - back;
                break;
            }
        }
    if (end > o->printed) {
        write_piece(o, o->text + o->printed, end - o->printed);
        fflush(stdout);
        o->printed = end;
    }
}

static void on_event(void *user, const ak_llm_event *ev) {
    gen_out *o = user;
    if (ev->token >= 0 && o->n_ids < o->cap) o->ids[o->n_ids++] = ev->token;
    if (ev->finish != AK_FINISH_NONE) {
        o->finish = ev->finish;
        o->trim = ev->stop_trim;
    }
    if (o->print_ids) return;
    stream_text(o, ev->finish != AK_FINISH_NONE);
}

/* The prompt through the hooks: pre-process, then the hook's or the model's tokenizer. */
static int hooked_prompt(const ak_llm_hooks *h, const ak_tokenizer *tok, const char *text,
                         int32_t **ids, size_t *n) {
    size_t len = strlen(text), cap = 4 * len + 4096, out_len = 0;
    char *pre = malloc(cap + 1);
    int32_t *v = malloc((cap + 3) * sizeof *v);
    ak_status st = pre && v ? AK_OK : AK_ERR_NO_MEMORY;
    if (st == AK_OK && h->pre_process) st = h->pre_process(h->user, text, len, pre, cap, &out_len);
    else if (st == AK_OK) memcpy(pre, text, out_len = len);
    if (st == AK_OK && h->tokenize) st = h->tokenize(h->user, pre, out_len, v, cap + 3, n);
    else if (st == AK_OK)
        st = ak_tokenizer_encode(tok, pre, out_len, AK_TOK_PARSE_SPECIAL | AK_TOK_ADD_SPECIAL, v,
                                 cap + 3, n);
    free(pre);
    if (st != AK_OK) {
        free(v);
        ak_cli_report("hooks", st);
        return -1;
    }
    *ids = v;
    return 0;
}

static int load_prompt(const gen_args *a, const ak_llm_hooks *hooks, const ak_tokenizer *tok,
                       int32_t **ids, size_t *n) {
    if (a->ids) return ak_cli_parse_ids(a->ids, ids, n);
    if (hooks) return hooked_prompt(hooks, tok, a->prompt, ids, n);
    return ak_cli_encode(tok, a->prompt, 1, ids, n);
}

static int run_engine(const gen_args *a, ak_llm_model *m, ak_llm_model *draft,
                      const int32_t *prompt, size_t n_prompt, gen_out *o) {
    ak_llm_engine_options eo;
    ak_llm_engine_options_default(&eo);
    eo.n_threads = (int32_t)a->threads;
    eo.max_seqs = 1;
    eo.max_context = (int32_t)a->ctx;
    eo.draft = draft;
    eo.spec_gamma = (int32_t)a->gamma;
    eo.spec_ngram = (int32_t)a->ngram;
    ak_llm_engine *e;
    ak_status st = ak_llm_engine_create(m, &eo, &e);
    if (st != AK_OK) return ak_cli_report("engine", st);
    ak_llm_request r;
    ak_llm_request_default(&r);
    r.prompt = prompt;
    r.n_prompt = n_prompt;
    r.max_tokens = (int32_t)a->n;
    r.sampling = a->sampling;
    r.stop_strings = a->stops;
    r.n_stop_strings = a->n_stops;
    r.ignore_eos = a->ignore_eos;
    r.on_event = on_event;
    r.user = o;
    uint64_t t0 = ak_now_ns();
    st = ak_llm_engine_submit(e, &r, NULL);
    int32_t pending = 1;
    while (st == AK_OK && pending > 0) st = ak_llm_engine_step(e, &pending);
    double secs = (double)(ak_now_ns() - t0) * 1e-9;
    ak_llm_engine_stats s;
    ak_llm_engine_get_stats(e, &s);
    ak_llm_engine_free(e);
    if (st != AK_OK) return ak_cli_report("generate", st);
    if (a->print_ids) {
        for (size_t i = 0; i < o->n_ids; ++i) printf(i ? " %d" : "%d", o->ids[i]);
    }
    printf("\n");
    if (a->stats)
        fprintf(stderr, "ak generate: %zu prompt + %llu generated tokens in %.3f s (%.1f t/s); "
                "speculation %llu/%llu accepted\n", n_prompt, (unsigned long long)s.generated_tokens,
                secs, (double)s.generated_tokens / secs, (unsigned long long)s.spec_accepted,
                (unsigned long long)s.spec_proposed);
    return AK_EXIT_OK;
}

static int generate(const gen_args *a) {
    ak_llm_model *m = NULL, *draft = NULL;
    ak_llm_load_options lo = {.mmap = a->mmap};
    ak_status st = ak_llm_model_load_with(a->model, &lo, &m);
    if (st != AK_OK) return ak_cli_report(a->model, st);
    if (a->draft && (st = ak_llm_model_load_with(a->draft, &lo, &draft)) != AK_OK) {
        ak_llm_model_free(m);
        return ak_cli_report(a->draft, st);
    }
    const ak_tokenizer *tok;
    ak_llm_model_tokenizer(m, &tok);
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    int rc = AK_EXIT_ERROR;
    ak_llm_hooks hooks;
    if (a->hooks_path && (st = ak_llm_hooks_load(a->hooks_path, &hooks)) != AK_OK) {
        ak_llm_model_free(draft);
        ak_llm_model_free(m);
        return ak_cli_report(a->hooks_path, st);
    }
    const ak_llm_hooks *h = a->hooks_path ? &hooks : NULL;
    gen_out o = {tok, h, a->print_ids, NULL, 0, (size_t)a->n + 1, 0, NULL, 0, AK_FINISH_NONE, 0};
    o.ids = malloc(o.cap * sizeof *o.ids);
    o.text_cap = o.cap * 64 + 64;
    o.text = malloc(o.text_cap);
    if (o.ids && o.text && load_prompt(a, h, tok, &prompt, &n_prompt) == 0)
        rc = run_engine(a, m, draft, prompt, n_prompt, &o);
    free(prompt);
    free(o.ids);
    free(o.text);
    ak_llm_model_free(draft);
    ak_llm_model_free(m);
    return rc;
}

int ak_cli_generate(int argc, char **argv) {
    gen_args a = {0};
    a.n = 128;
    a.gamma = 4;
    ak_sampling_params_default(&a.sampling);
    for (int i = 1; i < argc; ++i)
        if (parse_flag(argc, argv, &i, &a) != 0) return usage();
    if (!a.model || (!a.prompt == !a.ids)) return usage();
    return generate(&a);
}
