/* RegexFullMatch (opset 20): whether each string matches `pattern` as a whole.
 *
 * The spec's syntax is RE2's; the pattern is compiled by PCRE2 (UTF mode, anchored at
 * both ends), which reads RE2's syntax the same way except for constructs only one of
 * them has: a pattern PCRE2 cannot compile is refused naming the pattern and PCRE2's
 * reason. \d, \w and \s stay ASCII-only as in RE2 (no PCRE2_UCP); \p{..} classes are
 * Unicode in both. */
#include <stdlib.h>
#include <string.h>

#include "accelkit/version.h"
#include "infer/ops/string/string_ops.h"

#if AK_WITH_LLM
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

typedef struct regex_op {
    pcre2_code *code;
    pcre2_match_data *match;
} regex_op;

static void regex_destroy(void *state) {
    regex_op *r = state;
    if (!r) return;
    pcre2_match_data_free(r->match);
    pcre2_code_free(r->code);
    free(r);
}

static ak_status regex_create(const ak__ir_node *n, const ak__tensor *const *consts, void **state) {
    (void)consts;
    const ak__ir_attr *a = ak__ir_node_attr(n, "pattern");
    if (!a || a->type != AK_ATTR_STRING)
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "attribute 'pattern' (a string) is required");
    regex_op *r = calloc(1, sizeof *r);
    if (!r) return AK_FAIL(AK_ERR_NO_MEMORY, "RegexFullMatch: out of memory");
    int err;
    PCRE2_SIZE at;
    r->code = pcre2_compile((PCRE2_SPTR)a->u.s.data, a->u.s.len,
                            PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &at, NULL);
    if (!r->code) {
        PCRE2_UCHAR why[160];
        pcre2_get_error_message(err, why, sizeof why);
        regex_destroy(r);
        return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED, "pattern \"%.*s\" cannot be compiled (PCRE2, "
                          "offset %zu: %s)", (int)(a->u.s.len < 200 ? a->u.s.len : 200),
                          a->u.s.data, (size_t)at, (const char *)why);
    }
    r->match = pcre2_match_data_create_from_pattern(r->code, NULL);
    if (!r->match) {
        regex_destroy(r);
        return AK_FAIL(AK_ERR_NO_MEMORY, "RegexFullMatch: out of memory");
    }
    *state = r;
    return AK_OK;
}

static ak_status regex_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    regex_op *r = ctx->state;
    for (uint64_t i = 0; i < x->count; i++) {
        ak_string s = ((const ak_string *)x->data)[i];
        int rc = pcre2_match(r->code, (PCRE2_SPTR)(s.data ? s.data : ""), s.len, 0, 0, r->match,
                             NULL);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR why[160];
            pcre2_get_error_message(rc, why, sizeof why);
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "matching string %llu failed: %s",
                              (unsigned long long)i, (const char *)why);
        }
        ((uint8_t *)y->data)[i] = rc >= 0;
    }
    return AK_OK;
}
#else
static ak_status regex_create(const ak__ir_node *n, const ak__tensor *const *consts, void **state) {
    (void)consts, (void)state;
    return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED, "regular expressions need PCRE2 (a build with "
                      "AK_WITH_LLM)");
}
static void regex_destroy(void *state) { (void)state; }
static ak_status regex_run(ak__op_ctx *ctx) { (void)ctx; return AK_OK; }
#endif

static ak_status regex_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_check_type(ctx, 0, x, AK_ELEM_STRING));
    return ak__op_set_output(ctx, 0, AK_ELEM_BOOL, x->rank, x->dims);
}

const ak__op_def ak__op_regex_full_match = {"", "RegexFullMatch", 20, 0, regex_create,
                                            regex_destroy, regex_reshape, regex_run};
