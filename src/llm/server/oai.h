/* The OpenAI API surface of `ak serve`: request bodies of /v1/completions and
 * /v1/chat/completions parsed and validated into ak__oai_request (every field's type and
 * range, with OpenAI-style error answers), and the JSON of responses, stream chunks,
 * logprobs and errors. No I/O and no engine here, so all of it is unit-testable. */
#ifndef AK_LLM_SERVER_OAI_H
#define AK_LLM_SERVER_OAI_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "accelkit/llm.h"
#include "llm/server/detok.h"
#include "llm/server/tools.h"

#define AK__OAI_MAX_N 16          /* samples per request */
#define AK__OAI_MAX_LOGPROBS 20   /* top-n log-probabilities per token */
#define AK__OAI_MAX_STOPS 16      /* stop strings per request */
#define AK__OAI_MAX_STOP_LEN 256  /* bytes per stop string */

typedef enum ak__oai_kind { AK__OAI_COMPLETION = 0, AK__OAI_CHAT = 1 } ak__oai_kind;

typedef struct ak__oai_error {
    int http;          /* 400, 404, 405, 413, 429, 500, 503 */
    const char *type;  /* "invalid_request_error" (4xx) or "server_error" (5xx) */
    const char *param; /* the offending field, or NULL */
    const char *code;  /* e.g. "context_length_exceeded", or NULL */
    char message[512];
} ak__oai_error;

typedef struct ak__oai_request {
    ak__oai_kind kind;
    cJSON *root;                /* the parsed body: owns the strings pointed to below */
    /* completions: the prompt as text, or as token ids */
    const char *prompt;
    int32_t *prompt_ids;
    size_t n_prompt_ids;
    /* chat */
    ak_chat_message *messages;
    size_t n_messages;
    char **owned;               /* contents joined from parts */
    size_t n_owned;
    int32_t max_tokens;         /* 0 = not given */
    int32_t n;
    ak_sampling_params sampling;
    int seed_set;
    int stream, include_usage;
    int logprobs;               /* completions: -1 off, else top-n; chat: 0/1 */
    int top_logprobs;           /* chat */
    const char **stops;
    size_t n_stops;
    int32_t *stop_ids;
    size_t n_stop_ids;
    int ignore_eos;
    /* tools / function calling (tools.c) */
    ak__oai_tools tools;
    /* constrained decoding (oai_format.c): response_format / grammar / json_schema as GBNF,
     * NULL = unconstrained */
    char *grammar_text;
} ak__oai_request;

/* Fills `e` (message formatted like printf); type follows from http. */
void ak__oai_error_set(ak__oai_error *e, int http, const char *param, const char *code,
                       const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Parses body[0..len). AK_OK, or AK_ERR_INVALID_ARG with `err` describing the 4xx, or
 * AK_ERR_NO_MEMORY. Token ids must be < n_vocab. Free with ak__oai_request_free. */
ak_status ak__oai_parse(ak__oai_kind kind, const char *body, size_t len, int32_t n_vocab,
                        ak__oai_request *out, ak__oai_error *err);
void ak__oai_request_free(ak__oai_request *r);

/* {"error": {"message", "type", "param", "code"}} */
ak_status ak__oai_error_json(const ak__oai_error *e, ak__bytes *out);

/* ---- responses ----------------------------------------------------------------------- */

/* One generated token with its alternatives, as the engine reported it. */
typedef struct ak__oai_logprob {
    int32_t token;
    float logprob;
    int32_t n_top;
    ak_llm_logprob top[AK__OAI_MAX_LOGPROBS];
    uint32_t text_offset; /* completions: byte offset of the token's text in the output */
} ak__oai_logprob;

/* What a response or chunk says about one sample. */
typedef struct ak__oai_choice {
    int32_t index;
    const char *text;              /* the new text (chunk) or all of it (response) */
    size_t text_len;
    const ak__oai_logprob *lps;    /* tokens covered; NULL when logprobs are off */
    size_t n_lps;
    const char *finish;            /* "stop", "length", or NULL while running */
    int first;                     /* chat chunks: the first carries the role */
    /* tools: calls of a chat message (part 0) or delta (1 header, 2 arguments); tools.h */
    const ak__tool_call *calls;
    size_t n_calls;
    int32_t call_index;
    int call_part;
} ak__oai_choice;

typedef struct ak__oai_usage {
    uint32_t prompt_tokens, completion_tokens, cached_tokens;
} ak__oai_usage;

/* Identifies a response: id "cmpl-..." / "chatcmpl-...", creation time, model name. */
typedef struct ak__oai_meta {
    ak__oai_kind kind;
    const char *id;
    int64_t created;
    const char *model;
    int logprobs;                  /* include logprobs objects */
    const ak_tokenizer *tok;       /* for token texts in logprobs */
} ak__oai_meta;

/* A whole non-streamed response. */
ak_status ak__oai_response_json(const ak__oai_meta *m, const ak__oai_choice *choices,
                                size_t n, const ak__oai_usage *usage, ak__bytes *out);
/* One server-sent event "data: {...}\n\n" with these choices (usage may be NULL; with
 * n == 0 and usage it is the final usage chunk). */
ak_status ak__oai_chunk_sse(const ak__oai_meta *m, const ak__oai_choice *choices, size_t n,
                            const ak__oai_usage *usage, ak__bytes *out);

#endif /* AK_LLM_SERVER_OAI_H */
