/* ak__llm_model_lens_logits: the logits after the first L layers (see model_lens.h). */
#include "llm/model/model_lens.h"

#include "core/check.h"
#include "llm/model/model.h"

ak_status ak__llm_model_lens_logits(const ak_llm_model *m, int32_t n_layers,
                                    const int32_t *ids, size_t n_ids, float *logits,
                                    int32_t n_threads) {
    AK_ARG_CHECK(m != NULL, "model is NULL");
    AK_ARG_CHECK(n_layers >= 1 && n_layers <= m->hp.n_layers,
                 "layer %d: the model has layers 1..%d", n_layers, m->hp.n_layers);
    /* A shallow copy that believes it has n_layers layers: the forward pass then runs the
     * first n_layers of the shared weights and goes on to the final norm and the output
     * matrix. Nothing is owned by the copy, so nothing is freed through it. */
    ak_llm_model shallow = *m;
    shallow.hp.n_layers = n_layers;
    return ak_llm_model_logits(&shallow, ids, n_ids, logits, n_threads);
}
