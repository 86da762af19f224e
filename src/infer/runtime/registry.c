/* Operator lookup over the family tables of ops/. A family may list several
 * definitions of one operator for different opset ranges: the one with the highest
 * min_opset not above the model's opset wins. */
#include <string.h>

#include "infer/runtime/op.h"

static const ak__op_def *const *const families[] = {
    ak__ops_elementwise, ak__ops_nn,  ak__ops_tensor, ak__ops_reduce,   ak__ops_norm,
    ak__ops_math,        ak__ops_rnn, ak__ops_fused,  ak__ops_sequence,
    ak__ops_control, /* If, Loop, Scan */
    ak__ops_quant, /* the INT8 operators (ops/quant) */
    ak__ops_signal, /* windows, MelWeightMatrix, DFT, STFT (ops/signal) */
    ak__ops_select, /* NonMaxSuppression, Unique (ops/select) */
    ak__ops_training, /* ai.onnx.preview.training optimizers (ops/training) */
    ak__ops_string, /* StringNormalizer, RegexFullMatch, StringSplit, StringConcat */
    ak__ops_random, /* RandomNormal/Uniform(Like), Bernoulli, Multinomial */
};

const ak__op_def *ak__op_find(const char *domain, const char *op_type, int64_t opset) {
    const ak__op_def *best = NULL;
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const ak__op_def *const *d = families[f]; *d; d++) {
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
