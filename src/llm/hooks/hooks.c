/* Hooks: loading a hooks library (dlopen + its ak_hooks_init) and running the text and
 * tokenize callbacks with the size protocol. A loaded library stays loaded for the life
 * of the process, because the callbacks it filled in point into it. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/hooks/hooks.h"

/* A hook may ask for this much output at most (it protects against garbage sizes). */
#define AK_HOOK_MAX_OUTPUT ((size_t)1 << 30)

typedef ak_status (*hooks_init_fn)(ak_llm_hooks *hooks);

ak_status ak_llm_hooks_load(const char *path, ak_llm_hooks *out) {
    AK_ENSURE_INIT();
    AK_ARG_CHECK(path != NULL && path[0] != '\0', "hooks library path is empty");
    AK_ARG_CHECK(out != NULL, "out is NULL");
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return AK_FAIL(AK_ERR_IO, "hooks: cannot load '%s': %s", path, dlerror());
    void *sym = dlsym(lib, "ak_hooks_init");
    if (!sym) {
        dlclose(lib);
        return AK_FAIL(AK_ERR_INVALID_ARG, "hooks: '%s' does not export ak_hooks_init", path);
    }
    hooks_init_fn init;
    memcpy(&init, &sym, sizeof init); /* ISO C has no object-to-function pointer cast */
    ak_llm_hooks hooks;
    memset(&hooks, 0, sizeof hooks);
    ak_status st = init(&hooks);
    if (st != AK_OK) {
        dlclose(lib);
        return AK_FAIL(st, "hooks: ak_hooks_init of '%s' failed (%s)", path, ak_status_str(st));
    }
    *out = hooks;
    return AK_OK;
}

/* One call of a text hook into a buffer of `cap` bytes: AK_OK with the result, or
 * AK_ERR_INVALID_ARG with *need set when the hook asks for more room. */
static ak_status call_text(ak__text_hook_fn fn, void *user, const char *text, size_t len,
                           size_t cap, char **out, size_t *out_len, size_t *need) {
    char *buf = malloc(cap + 1);
    if (!buf) return AK_FAIL(AK_ERR_NO_MEMORY, "hooks: output of %zu bytes", cap);
    size_t n = 0;
    ak_status st = fn(user, text, len, buf, cap, &n);
    if (st == AK_OK && n <= cap) {
        buf[n] = '\0';
        *out = buf;
        *out_len = n;
        return AK_OK;
    }
    free(buf);
    *need = 0;
    if (st == AK_OK)
        return AK_FAIL(AK_ERR_INTERNAL, "hooks: a text hook wrote %zu bytes into %zu", n, cap);
    if (n > cap && n <= AK_HOOK_MAX_OUTPUT) {
        *need = n;
        return AK_ERR_INVALID_ARG;
    }
    return AK_FAIL(st, "hooks: a text hook failed (%s)", ak_status_str(st));
}

ak_status ak__hooks_run_text(ak__text_hook_fn fn, void *user, const char *text, size_t len,
                             char **out, size_t *out_len) {
    AK_ARG_CHECK(text != NULL || len == 0, "text is NULL");
    AK_ARG_CHECK(out != NULL && out_len != NULL, "out is NULL");
    if (!fn) {
        char *copy = malloc(len + 1);
        if (!copy) return AK_FAIL(AK_ERR_NO_MEMORY, "hooks: text of %zu bytes", len);
        if (len) memcpy(copy, text, len);
        copy[len] = '\0';
        *out = copy;
        *out_len = len;
        return AK_OK;
    }
    /* a first guess, then exactly the size the hook asked for */
    size_t cap = len * 2 + 64, need = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        ak_status st = call_text(fn, user, text, len, cap, out, out_len, &need);
        if (st == AK_OK || need == 0) return st;
        cap = need;
    }
    return AK_FAIL(AK_ERR_INTERNAL, "hooks: a text hook keeps asking for more than %zu bytes", cap);
}

static ak_status tokenize_with(const ak_llm_hooks *hooks, const ak_tokenizer *tok,
                               const char *text, size_t len, unsigned flags, int32_t *ids,
                               size_t cap, size_t *n) {
    if (hooks && hooks->tokenize) return hooks->tokenize(hooks->user, text, len, ids, cap, n);
    return ak_tokenizer_encode(tok, text, len, flags, ids, cap, n);
}

ak_status ak__hooks_tokenize(const ak_llm_hooks *hooks, const ak_tokenizer *tok,
                             const char *text, size_t len, unsigned flags, int32_t **ids,
                             size_t *n_ids) {
    AK_ARG_CHECK(text != NULL || len == 0, "text is NULL");
    AK_ARG_CHECK(ids != NULL && n_ids != NULL, "ids is NULL");
    AK_ARG_CHECK(tok != NULL || (hooks && hooks->tokenize), "no tokenizer and no tokenize hook");
    size_t cap = len + 3; /* always enough for the model's tokenizer */
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *buf = malloc((cap ? cap : 1) * sizeof *buf);
        if (!buf) return AK_FAIL(AK_ERR_NO_MEMORY, "hooks: %zu token ids", cap);
        size_t n = 0;
        ak_status st = tokenize_with(hooks, tok, text, len, flags, buf, cap, &n);
        if (st == AK_OK && n <= cap) {
            *ids = buf;
            *n_ids = n;
            return AK_OK;
        }
        free(buf);
        if (st == AK_OK)
            return AK_FAIL(AK_ERR_INTERNAL, "hooks: tokenize wrote %zu ids into %zu", n, cap);
        if (st != AK_ERR_INVALID_ARG || n <= cap || n > AK_HOOK_MAX_OUTPUT / sizeof *buf) return st;
        cap = n;
    }
    return AK_FAIL(AK_ERR_INTERNAL, "hooks: tokenize keeps asking for more than %zu ids", cap);
}
