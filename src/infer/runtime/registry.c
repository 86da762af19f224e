/* Operator lookup over the family tables of ops/. A family may list several
 * definitions of one operator for different opset ranges: the one with the highest
 * min_opset not above the model's opset wins. */
#include <string.h>

#include "infer/runtime/op.h"

static const ak__op_def *const *const families[] = {
    ak__ops_elementwise, ak__ops_nn,  ak__ops_tensor, ak__ops_reduce,   ak__ops_norm,
    ak__ops_math,        ak__ops_rnn, ak__ops_fused,  ak__ops_sequence,
    ak__ops_quant, /* the INT8 operators (ops/quant) */
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
