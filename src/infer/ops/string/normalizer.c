/* StringNormalizer (opset 10): drops stopwords, then changes case.
 *
 * Case mapping is Unicode's simple per-code-point mapping (utf8proc), which is what the
 * "en_US" locale (onnxruntime's default) does with UTF-8 text; other locales are refused
 * by name. Stopwords compare byte for byte, or after lower-casing both sides when
 * is_case_sensitive is 0. A 1-D [C] or 2-D [1, C] input keeps its rank; when every
 * string is dropped the output is one empty string ([1] or [1, 1]), as the spec says. */
#include <stdlib.h>
#include <string.h>

#include "accelkit/version.h"
#include "infer/ops/string/string_ops.h"

#if AK_WITH_LLM
#include <utf8proc.h>
#endif

enum { CASE_NONE, CASE_LOWER, CASE_UPPER };

typedef struct normalizer {
    int action;
    int case_sensitive;
    size_t num_stop;
    ak_string *stop; /* lower-cased when not case sensitive (in the pool below) */
    ak__string_pool bytes;
} normalizer;

/* Maps s to upper or lower case into the pool; fails on invalid UTF-8. */
static ak_status map_case(const ak__ir_node *n, ak__string_pool *pool, ak_string s, int action,
                          ak_string *out) {
#if AK_WITH_LLM
    char *dst;
    AK_CHECK(ak__string_pool_alloc(pool, s.len * 4 + 4, &dst)); /* one code point: <= 4 bytes */
    size_t at = 0, used = 0;
    while (at < s.len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s.data + at,
                                              (utf8proc_ssize_t)(s.len - at), &cp);
        if (k <= 0)
            return AK_OP_FAIL(n, AK_ERR_INVALID_ARG, "input string is not valid UTF-8 (byte %zu "
                              "of \"%.*s\")", at, (int)(s.len < 64 ? s.len : 64), s.data);
        /* utf8proc 2.8 upper-cases ß to ẞ; Unicode's simple mapping (and glibc's, which
         * onnxruntime uses) leaves it alone: the one code point where they differ */
        if (action == CASE_LOWER) cp = utf8proc_tolower(cp);
        else if (cp != 0xDF) cp = utf8proc_toupper(cp);
        used += (size_t)utf8proc_encode_char(cp, (utf8proc_uint8_t *)dst + used);
        at += (size_t)k;
    }
    *out = (ak_string){dst, used};
    return AK_OK;
#else
    (void)pool, (void)s, (void)action, (void)out;
    return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED, "case mapping needs utf8proc (a build with AK_WITH_LLM)");
#endif
}

static void normalizer_destroy(void *state) {
    normalizer *z = state;
    if (!z) return;
    ak__string_pool_free(&z->bytes);
    free(z->stop);
    free(z);
}

static ak_status read_action(const ak__ir_node *n, int *action) {
    const char *a = ak__attr_string(n, "case_change_action", "NONE");
    if (!strcmp(a, "NONE")) *action = CASE_NONE;
    else if (!strcmp(a, "LOWER")) *action = CASE_LOWER;
    else if (!strcmp(a, "UPPER")) *action = CASE_UPPER;
    else return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "case_change_action '%s' is not NONE, LOWER "
                           "or UPPER", a);
    const char *locale = ak__attr_string(n, "locale", "");
    if (locale[0] && strcmp(locale, "en_US") && strcmp(locale, "en_US.UTF-8") &&
        strcmp(locale, "C") && strcmp(locale, "C.UTF-8"))
        return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED, "locale '%s' is not supported (only en_US and "
                          "C: Unicode's default case mapping)", locale);
    return AK_OK;
}

static ak_status normalizer_setup(const ak__ir_node *n, normalizer *z) {
    AK_CHECK(read_action(n, &z->action));
    z->case_sensitive = ak__attr_int(n, "is_case_sensitive", 0) != 0;
    const ak__ir_attr *sw = ak__ir_node_attr(n, "stopwords");
    if (!sw || !sw->count) return AK_OK;
    if (sw->type != AK_ATTR_STRINGS)
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "stopwords is not a list of strings");
    z->stop = calloc(sw->count, sizeof *z->stop);
    if (!z->stop) return AK_FAIL(AK_ERR_NO_MEMORY, "StringNormalizer: out of memory");
    z->num_stop = sw->count;
    for (size_t i = 0; i < sw->count; i++) {
        ak_string w = {sw->u.strings[i].data, sw->u.strings[i].len};
        if (z->case_sensitive) z->stop[i] = w;
        else AK_CHECK(map_case(n, &z->bytes, w, CASE_LOWER, &z->stop[i]));
    }
    return AK_OK;
}

static ak_status normalizer_create(const ak__ir_node *n, const ak__tensor *const *consts,
                                   void **state) {
    (void)consts;
    normalizer *z = calloc(1, sizeof *z);
    if (!z) return AK_FAIL(AK_ERR_NO_MEMORY, "StringNormalizer: out of memory");
    ak_status st = normalizer_setup(n, z);
    if (st != AK_OK) {
        normalizer_destroy(z);
        return st;
    }
    *state = z;
    return AK_OK;
}

/* Whether s is a stopword; `scratch` holds s lower-cased when needed. */
static ak_status is_stopword(const ak__op_ctx *ctx, const normalizer *z, ak_string s,
                             ak__string_pool *scratch, int *stop) {
    *stop = 0;
    if (!z->num_stop) return AK_OK;
    if (!z->case_sensitive) AK_CHECK(map_case(ctx->node, scratch, s, CASE_LOWER, &s));
    for (size_t i = 0; i < z->num_stop && !*stop; i++)
        *stop = z->stop[i].len == s.len && (!s.len || !memcmp(z->stop[i].data, s.data, s.len));
    return AK_OK;
}

static ak_status check_input(const ak__op_ctx *ctx, const ak__tensor **x) {
    AK_CHECK(ak__op_require(ctx, 0, x));
    AK_CHECK(ak__op_check_type(ctx, 0, *x, AK_ELEM_STRING));
    if ((*x)->rank == 1 || ((*x)->rank == 2 && (*x)->dims[0] == 1)) return AK_OK;
    return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "input must be [C] or [1, C] (rank %d)",
                      (*x)->rank);
}

static ak_status normalizer_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(check_input(ctx, &x));
    normalizer *z = ctx->state;
    ak__string_pool scratch = {0};
    uint64_t kept = 0;
    ak_status st = AK_OK;
    for (uint64_t i = 0; i < x->count && st == AK_OK; i++) {
        int stop;
        st = is_stopword(ctx, z, ((const ak_string *)x->data)[i], &scratch, &stop);
        kept += !stop;
    }
    ak__string_pool_free(&scratch);
    AK_CHECK(st);
    int64_t dims[2] = {1, (int64_t)(kept ? kept : 1)};
    return ak__op_set_output(ctx, 0, AK_ELEM_STRING, x->rank, x->rank == 1 ? dims + 1 : dims);
}

static ak_status normalizer_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    normalizer *z = ctx->state;
    ak__string_pool *pool = NULL;
    AK_CHECK(ak__strings_pool(ctx, &pool));
    ak_string *out = y->data;
    uint64_t n = 0;
    for (uint64_t i = 0; i < x->count; i++) {
        ak_string s = ((const ak_string *)x->data)[i];
        int stop;
        AK_CHECK(is_stopword(ctx, z, s, pool, &stop));
        if (stop) continue;
        if (z->action != CASE_NONE) AK_CHECK(map_case(ctx->node, pool, s, z->action, &s));
        out[n++] = s;
    }
    if (!n) out[0] = (ak_string){NULL, 0};
    return AK_OK;
}

const ak__op_def ak__op_string_normalizer = {"", "StringNormalizer", 10, 0, normalizer_create,
                                             normalizer_destroy, normalizer_reshape,
                                             normalizer_run};
