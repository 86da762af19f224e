/* POST /v1/embeddings (embeddings.c): the request parsed and answered as one JSON body. */
#ifndef AK_LLM_SERVER_EMBEDDINGS_H
#define AK_LLM_SERVER_EMBEDDINGS_H

#include "llm/server/server_internal.h"

/* The response body into `out`; on failure `err` holds the HTTP status and message (4xx:
 * the request, AK_ERR_INVALID_ARG; 5xx: the model). */
ak_status ak__embeddings_handle(const ak__server *s, const char *body, size_t len,
                                ak__bytes *out, ak__oai_error *err);

#endif /* AK_LLM_SERVER_EMBEDDINGS_H */
