/* `ak generate`: one prompt through the engine on the calling thread, the completion
 * streamed to stdout as it is sampled (or its ids with --print-ids). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/llm_cli.h"

typedef struct gen_args {
    const char *model, *draft, *prompt, *ids, *hooks_path;
    long n, threads, gamma, ngram, ctx;
    int print_ids, ignore_eos, stats, mmap, kv_f32;
    int kv_type; /* --kv-type: 0 f32, 1 f16, 2 q8_0; -1 not given */
    const char *stops[16];
    size_t n_stops;
    ak_cli_sampling sampling_flags;
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

static const char *parse_stop(void *dest, char *value, ak_opt_more *more) {
    gen_args *a = dest;
    (void)more;
    if (a->n_stops == sizeof a->stops / sizeof a->stops[0]) return "at most 16 stop strings";
    a->stops[a->n_stops++] = value;
    return NULL;
}

/* Parses the flags into a; AK_CLI_CONTINUE or an exit code. */
static int parse_args(int argc, char **argv, gen_args *a) {
    enum { OWN = 18 };
    const ak_opt own[OWN] = {
        {"model", 'm', AK_OPT_STRING, &a->model, "MODEL", .help = "GGUF file or Hugging Face folder (required)"},
        {"prompt", 'p', AK_OPT_STRING, &a->prompt, "TEXT", .help = "the prompt (or --ids)"},
        {"ids", 0, AK_OPT_STRING, &a->ids, "\"1 2 3\"", .help = "the prompt as token ids (or -p)"},
        {"n-predict", 'n', AK_OPT_INT, &a->n, "N", .help = "tokens to generate at most", .def = "128", .min = 1, .max = 1 << 20},
        {"threads", 't', AK_OPT_INT, &a->threads, "N", .help = "threads (0: AK_NUM_THREADS or all cores)", .def = "0", .min = 0, .max = 1024},
        {"stop", 0, AK_OPT_CUSTOM, a, "STR", .help = "stop when the completion contains STR (repeatable)", .parse = parse_stop},
        {"ignore-eos", 0, AK_OPT_FLAG, &a->ignore_eos, .help = "go on past the end-of-sequence token"},
        {"draft", 0, AK_OPT_STRING, &a->draft, "MODEL", .help = "speculative decoding with this draft model"},
        {"gamma", 0, AK_OPT_INT, &a->gamma, "G", .help = "draft tokens per step", .def = "4", .min = 0, .max = 16},
        {"ngram", 0, AK_OPT_INT, &a->ngram, "N", .help = "speculative decoding from N-grams of the context (0: off)", .def = "0", .min = 0, .max = 16},
        {"ctx", 0, AK_OPT_INT, &a->ctx, "N", .help = "context length (0: the model's)", .def = "0", .min = 0, .max = 1 << 24},
        {"hooks", 0, AK_OPT_STRING, &a->hooks_path, "LIB.so", .help = "pre/post-processing hooks from a shared library"},
        {"mmap", 0, AK_OPT_FLAG, &a->mmap, .help = "map the weights instead of reading them"},
        {"kv-f32", 0, AK_OPT_FLAG, &a->kv_f32, .help = "keep the KV cache in f32 instead of f16 (precision checks; the same as --kv-type f32)"},
        {"kv-type", 0, AK_OPT_ENUM, &a->kv_type, "TYPE", .choices = "f32|f16|q8_0", .help = "KV cache storage: f32, f16 (default) or q8_0 (ggml blocks, half of f16's bytes; head_dim a multiple of 32)"},
        {"print-ids", 0, AK_OPT_FLAG, &a->print_ids, .help = "print the generated token ids instead of text"},
        {"stats", 0, AK_OPT_FLAG, &a->stats, .help = "tokens and speed on stderr at the end"},
    };
    ak_opt opts[OWN + AK_CLI_SAMPLING_OPTS + 1];
    size_t n = 0;
    while (n < OWN && (own[n].name || own[n].letter)) n++;
    memcpy(opts, own, n * sizeof *own);
    ak_cli_sampling_opts(&a->sampling_flags, opts + n);
    opts[n + AK_CLI_SAMPLING_OPTS] = (ak_opt)AK_OPT_END;
    const ak_cli_cmd cmd = {.name = "generate", .opts = opts};
    int first, rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    if (!a->model) return ak_cli_usage_error(&cmd, "-m MODEL is required");
    if (a->kv_f32 && a->kv_type >= 0 && a->kv_type != 0)
        return ak_cli_usage_error(&cmd, "--kv-f32 and --kv-type %s disagree", a->kv_type == 1 ? "f16" : "q8_0");
    if (!a->prompt == !a->ids) return ak_cli_usage_error(&cmd, "give the prompt as -p TEXT or --ids, one of them");
    ak_cli_sampling_apply(&a->sampling_flags, &a->sampling);
    return AK_CLI_CONTINUE;
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
    if (a->kv_f32 || a->kv_type == 0) eo.kv_dtype = AK_DTYPE_F32;
    eo.kv_q8_0 = a->kv_type == 2;
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
    gen_args a = {.kv_type = -1};
    int rc = parse_args(argc, argv, &a);
    return rc != AK_CLI_CONTINUE ? rc : generate(&a);
}
