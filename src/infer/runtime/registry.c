/* Operator lookup over the family tables of ops/. A family may list several
 * definitions of one operator for different opset ranges: the one with the highest
 * min_opset not above the model's opset wins. */
#include <string.h>

#include "infer/runtime/op.h"

/* Each family table with the name of its folder of ops/ (the conformance runner's rates per
 * family read the names). */
static const struct {
    const char *name;
    const ak__op_def *const *defs;
} families[] = {
    {"elementwise", ak__ops_elementwise},
    {"nn", ak__ops_nn},
    {"tensor", ak__ops_tensor},
    {"reduce", ak__ops_reduce},
    {"norm", ak__ops_norm},
    {"math", ak__ops_math},
    {"rnn", ak__ops_rnn},
    {"fused", ak__ops_fused},
    {"sequence", ak__ops_sequence},
    {"control", ak__ops_control},   /* If, Loop, Scan */
    {"quant", ak__ops_quant},       /* the INT8 operators */
    {"signal", ak__ops_signal},     /* windows, MelWeightMatrix, DFT, STFT */
    {"select", ak__ops_select},     /* NonMaxSuppression, Unique */
    {"training", ak__ops_training}, /* ai.onnx.preview.training optimizers */
    {"contrib", ak__ops_contrib},   /* com.microsoft Gelu family, FusedMatMul, RotaryEmbedding, MatMulNBits */
    {"attention", ak__ops_attention}, /* com.microsoft Attention, MultiHeadAttention */
    {"string", ak__ops_string}, /* StringNormalizer, RegexFullMatch, StringSplit, StringConcat */
    {"random", ak__ops_random}, /* RandomNormal/Uniform(Like), Bernoulli, Multinomial */
};

size_t ak__op_family_count(void) { return sizeof families / sizeof *families; }

const char *ak__op_family_name(size_t f) { return f < ak__op_family_count() ? families[f].name : NULL; }

const char *ak__op_family_of(const char *domain, const char *op_type) {
    for (size_t f = 0; f < ak__op_family_count(); f++)
        for (const ak__op_def *const *d = families[f].defs; *d; d++)
            if (strcmp((*d)->op_type, op_type) == 0 && strcmp((*d)->domain, domain) == 0)
                return families[f].name;
    return NULL;
}

const ak__op_def *ak__op_find(const char *domain, const char *op_type, int64_t opset) {
    const ak__op_def *best = NULL;
    for (size_t f = 0; f < ak__op_family_count(); f++)
        for (const ak__op_def *const *d = families[f].defs; *d; d++) {
            const ak__op_def *def = *d;
            if (strcmp(def->op_type, op_type) != 0 || strcmp(def->domain, domain) != 0) continue;
            if (def->min_opset > opset) continue;
            if (!best || def->min_opset > best->min_opset) best = def;
        }
    return best;
}

/* ---- operator versions whose semantics changed after opset 18 ---------------------------
 * Opsets 19-21 mostly widen type lists (float8, 4-bit integers: refused where such a
 * tensor occurs), so an operator implemented for an older version runs a newer one
 * unchanged. These are the exceptions: a node of the newer version is refused by name,
 * unless the definition found already implements that version (its min_opset). */

typedef struct version_change {
    const char *op_type;
    int64_t since;
    const char *what; /* the semantics that changed */
} version_change;

static const version_change version_changes[] = {
    {"GroupNormalization", 21, "scale and bias per channel (C) instead of per group"},
    /* implemented (ops/signal/dft.c); kept so DFT-17's definition never runs a DFT-20 */
    {"DFT", 20, "the axis as an input and onesided/inverse rules of DFT-20"},
};

ak_status ak__op_version_check(const ak__ir_node *n, const ak__op_def *def) {
    if (def->domain[0]) return AK_OK;
    for (size_t i = 0; i < sizeof version_changes / sizeof *version_changes; i++) {
        const version_change *c = &version_changes[i];
        if (strcmp(c->op_type, n->op_type) != 0 || n->opset < c->since ||
            def->min_opset >= c->since)
            continue;
        return AK_FAIL(AK_ERR_UNSUPPORTED,
                       "%s-%lld at node %s: %s is not implemented (accelkit implements %s-%lld)",
                       n->op_type, (long long)c->since, n->name[0] ? n->name : "<unnamed>",
                       c->what, def->op_type, (long long)def->min_opset);
    }
    return AK_OK;
}
