/* `ak align`: precision alignment of a model between accelkit and a reference engine
 * (llama.cpp's libllama for GGUF files, a PyTorch implementation for Hugging Face
 * folders). This file owns the options (so --help and usage errors are the CLI's) and
 * runs the comparison in its Python helper, accelkit/align.py, with $AK_BIN set to this
 * `ak`: numpy, torch and ctypes to libllama live more naturally there.
 *
 * The helper is looked for where each way of installing puts it: beside this binary in
 * the wheel (`pip install .`: accelkit/bin/ak, accelkit/align.py), under
 * share/accelkit/python (cmake --install, make deb), and in the source tree of a build
 * folder (its CMakeCache.txt names it).
 *
 * One mode is the helper's own: --layer-logits L --out FILE.npy writes accelkit's logits
 * after its first L layers (model/model_lens.h) for the per-layer comparison. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelkit/version.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"

#if AK_WITH_LLM
#include "cli/llm_cli.h"

static const char *const REFS[] = {"auto", "llamacpp", "torch"};
static const char *const KV_TYPES[] = {"f32", "f16"};
static const char *const DTYPES[] = {"float64", "float32"};

typedef struct align_opts {
    const char *prompt, *ids, *out;
    int ref, kv, dtype; /* indexes into REFS, KV_TYPES, DTYPES */
    long n, threads, layer_logits;
    int json, layers;
} align_opts;

static int exists(const char *path) { return access(path, R_OK) == 0; }

/* The folder of the running binary (resolved /proc/self/exe), without the trailing '/'. */
static int exe_dir(char *buf, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash) return -1;
    *slash = '\0';
    return 0;
}

/* CMAKE_HOME_DIRECTORY of the build folder `dir`, when `dir` is one. */
static int source_dir_of_build(const char *dir, char *out, size_t cap) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/CMakeCache.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static const char key[] = "CMAKE_HOME_DIRECTORY:INTERNAL=";
    char line[PATH_MAX + 64];
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, sizeof key - 1) != 0) continue;
        line[strcspn(line, "\n")] = '\0';
        size_t len = strlen(line + sizeof key - 1);
        if (len >= cap) break;
        memcpy(out, line + sizeof key - 1, len + 1);
        found = 0;
    }
    fclose(f);
    return found;
}

/* dir + tail into out (cap bytes); 0 when it fits. */
static int join(char *out, size_t cap, const char *dir, const char *tail) {
    size_t a = strlen(dir), b = strlen(tail);
    if (a + b + 1 > cap) return -1;
    memcpy(out, dir, a);
    memcpy(out + a, tail, b + 1);
    return 0;
}

/* Where accelkit/align.py is, into `script` (PATH_MAX bytes); the places looked at are
 * listed in `tried` (its last one when they do not all fit). */
static int find_helper(char *script, char *tried, size_t tried_cap) {
    char dir[PATH_MAX], src[PATH_MAX];
    if (exe_dir(dir, sizeof dir) != 0) return -1;
    const char *bases[3] = {dir, dir, NULL};
    const char *tails[3] = {"/../align.py", "/../share/accelkit/python/accelkit/align.py",
                            "/python/accelkit/align.py"};
    if (source_dir_of_build(dir, src, sizeof src) == 0) bases[2] = src;
    tried[0] = '\0';
    for (int i = 0; i < 3; ++i) {
        if (!bases[i] || join(script, PATH_MAX, bases[i], tails[i]) != 0) continue;
        if (exists(script)) return 0;
        size_t used = strlen(tried), len = strlen(script);
        if (used + len + 3 > tried_cap) used = 0; /* keep the last one */
        memcpy(tried + used, used ? ", " : "", used ? 2 : 0);
        memcpy(tried + used + (used ? 2 : 0), script, len + 1);
    }
    return -1;
}

/* The interpreter: $AK_PYTHON, else Debian's (which has numpy and torch), else python3. */
static const char *python(void) {
    const char *env = getenv("AK_PYTHON");
    if (env && *env) return env;
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* Replaces this process by the helper with the parsed options. */
static int run_helper(const char *model, const align_opts *o) {
    char script[PATH_MAX], tried[4 * PATH_MAX];
    if (find_helper(script, tried, sizeof tried) != 0)
        return ak_cli_error("its Python helper accelkit/align.py is not installed beside this ak "
                            "(looked at: %s)", tried[0] ? tried : "/proc/self/exe unreadable");
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        setenv("AK_BIN", self, 1);
    }
    char n_text[32], threads_text[32];
    snprintf(n_text, sizeof n_text, "%ld", o->n);
    snprintf(threads_text, sizeof threads_text, "%ld", o->threads);
    const char *args[32];
    int a = 0;
    const char *py = python();
    args[a++] = py;
    args[a++] = script;
    args[a++] = model;
    args[a++] = "-n", args[a++] = n_text;
    args[a++] = "--threads", args[a++] = threads_text;
    args[a++] = "--kv", args[a++] = KV_TYPES[o->kv];
    args[a++] = "--dtype", args[a++] = DTYPES[o->dtype];
    args[a++] = "--ref", args[a++] = REFS[o->ref];
    if (o->prompt) args[a++] = "--prompt", args[a++] = o->prompt;
    if (o->ids) args[a++] = "--ids", args[a++] = o->ids;
    if (o->json) args[a++] = "--json";
    if (o->layers) args[a++] = "--layers";
    args[a] = NULL;
    fflush(NULL);
    execvp(py, (char *const *)args);
    return ak_cli_error("cannot run %s: %s (set AK_PYTHON to a Python 3 with numpy)", py,
                        strerror(errno));
}

/* --layer-logits L: accelkit's logits after its first L layers, for the helper. */
static int layer_logits(const char *model, const align_opts *o) {
    if (!o->ids || !o->out) return ak_cli_error("--layer-logits needs --ids and --out");
    return ak_cli_logits_npy(model, o->ids, o->out, (int32_t)o->layer_logits, (int32_t)o->threads);
}

int ak_cli_align(int argc, char **argv) {
    align_opts o = {0};
    int first;
    const ak_opt opts[] = {
        {"ref", 0, AK_OPT_ENUM, &o.ref, .help = "the reference (auto: llamacpp for a GGUF file, torch for a Hugging Face folder)", .def = "auto", .choices = "auto|llamacpp|torch"},
        {"prompt", 'p', AK_OPT_STRING, &o.prompt, "TEXT", .help = "the prompt, tokenized by accelkit (default: a fixed English sentence)"},
        {"ids", 0, AK_OPT_STRING, &o.ids, "\"1 2 3\"", .help = "the prompt as token ids (instead of --prompt)"},
        {"n-predict", 'n', AK_OPT_INT, &o.n, "N", .help = "greedy tokens generated by both engines", .def = "16", .min = 0, .max = 4096},
        {"json", 0, AK_OPT_FLAG, &o.json, .help = "one JSON object instead of the table"},
        {"layers", 0, AK_OPT_FLAG, &o.layers, .help = "per-layer error too (--ref torch): each layer's logit lens"},
        {"kv", 0, AK_OPT_ENUM, &o.kv, .help = "KV cache type of both engines' generation (f32: also llama.cpp's flash attention off; f16: both engines' defaults)", .def = "f32", .choices = "f32|f16"},
        {"dtype", 0, AK_OPT_ENUM, &o.dtype, .help = "the torch reference's compute type", .def = "float64", .choices = "float64|float32"},
        {"threads", 't', AK_OPT_INT, &o.threads, "N", .help = "threads of both engines (0: accelkit's default, llama.cpp 4)", .def = "0", .min = 0, .max = 1024},
        {"layer-logits", 0, AK_OPT_INT, &o.layer_logits, "L", .help = "(the helper's) write accelkit's logits after layer L of --ids to --out and stop", .def = "-1", .min = -1, .max = 1 << 20},
        {"out", 0, AK_OPT_STRING, &o.out, "FILE.npy", .help = "(with --layer-logits) the float32 [n, vocab] output"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {
        .name = "align", .opts = opts,
        .notes = "MODEL a GGUF file: the reference is llama.cpp's libllama (scripts/setup installs it;\n"
                 "      AK_LLAMACPP_LIB names another folder)\n"
                 "MODEL a Hugging Face folder: the reference is the PyTorch Llama-family decoder of\n"
                 "      accelkit/align_torch.py (llama, qwen2, mistral)\n"
                 "Prints per position the max abs and max relative (to the row's max |logit|) error of\n"
                 "the final logits and both engines' top-1 token, then the top-1 agreement and the\n"
                 "first diverging greedy token with both texts. Exit 0 when both ran, 2 on an error."};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (argc - first != 1) return ak_cli_usage_error(&cmd, "one MODEL expected");
    if (o.prompt && o.ids) return ak_cli_usage_error(&cmd, "--prompt and --ids exclude each other");
    if (o.layer_logits >= 0) return layer_logits(argv[first], &o);
    return run_helper(argv[first], &o);
}

#else /* a build without the LLM engine */
int ak_cli_align(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "ak align: this build has no LLM engine (AK_WITH_LLM=OFF); rebuild with "
                    "-DAK_WITH_LLM=ON\n");
    return AK_EXIT_ERROR;
}
#endif
