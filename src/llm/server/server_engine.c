/* The LLM engine as the server's generation backend. Kept apart from the HTTP code so the
 * server itself can be tested against a scripted backend. */
#include "llm/server/server.h"

static ak_status engine_submit(void *ctx, const ak_llm_request *r, uint64_t *id) {
    return ak_llm_engine_submit(ctx, r, id);
}

static ak_status engine_cancel(void *ctx, uint64_t id) { return ak_llm_engine_cancel(ctx, id); }

static ak_status engine_stats(void *ctx, ak_llm_engine_stats *s) {
    return ak_llm_engine_get_stats(ctx, s);
}

/* embeddings */
static ak_status model_embed(void *ctx, const int32_t *ids, size_t n, float *out, size_t cap) {
    return ak_llm_model_embed(ctx, ids, n, out, cap);
}

ak__server_embedder ak__server_model_embedder(ak_llm_model *m) {
    ak__server_embedder e = {model_embed, m, 0, 0, 0};
    ak_llm_model_info info;
    if (ak_llm_model_get_info(m, &info) != AK_OK) return (ak__server_embedder){0};
    e.dim = info.dim;
    e.pooling = info.pooling;
    e.embedding_only = info.embedding_only;
    return e;
}

ak__server_backend ak__server_engine_backend(ak_llm_engine *e) {
    ak__server_backend b = {engine_submit, engine_cancel, engine_stats, e};
    return b;
}
