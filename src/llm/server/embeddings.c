/* POST /v1/embeddings (OpenAI's API): `input` as a string, an array of strings, an array
 * of token ids or an array of arrays of ids; `encoding_format` float (default) or base64
 * (the little-endian float32 bytes, as OpenAI sends them); `dimensions` only where the
 * model allows it — no model here is known to be matryoshka-trained, so any value other
 * than its width is refused by name; `model` and `user` accepted. Texts are tokenized
 * with the model's special tokens ([CLS] … [SEP] for BERT, BOS for decoders); id arrays
 * are used as given. Each input is one forward pass (ak_llm_model_embed through the
 * server's embedder), run in turn on the connection's thread; vectors come back pooled as
 * the model says and L2-normalized. An input over the context is a 400 naming its index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/server/embeddings.h"

#define BAD(err, param, ...) \
    (ak__oai_error_set((err), 400, (param), NULL, __VA_ARGS__), AK_ERR_INVALID_ARG)

/* One input as token ids (owned). */
typedef struct embed_input {
    int32_t *ids;
    size_t n;
} embed_input;

typedef struct embed_req {
    embed_input *in;
    size_t n_in;
    int base64;
} embed_req;

static void req_free(embed_req *r) {
    for (size_t i = 0; i < r->n_in; ++i) free(r->in[i].ids);
    free(r->in);
}

static ak_status tokenize(const ak__server *s, const cJSON *v, size_t index, embed_input *out,
                          ak__oai_error *err) {
    const char *text = v->valuestring;
    size_t len = strlen(text), n = 0;
    if (len == 0) return BAD(err, "input", "input[%zu] is an empty string", index);
    out->ids = malloc((len + 3) * sizeof *out->ids);
    if (!out->ids) return AK_FAIL(AK_ERR_NO_MEMORY, "embeddings: out of memory");
    AK_CHECK(ak_tokenizer_encode(s->tok, text, len, AK_TOK_ADD_SPECIAL, out->ids, len + 3, &n));
    out->n = n;
    return AK_OK;
}

static ak_status take_ids(const ak__server *s, const cJSON *arr, size_t index,
                          embed_input *out, ak__oai_error *err) {
    size_t n = (size_t)cJSON_GetArraySize(arr);
    if (n == 0) return BAD(err, "input", "input[%zu] is an empty array of token ids", index);
    out->ids = malloc(n * sizeof *out->ids);
    if (!out->ids) return AK_FAIL(AK_ERR_NO_MEMORY, "embeddings: out of memory");
    size_t j = 0;
    for (const cJSON *t = arr->child; t; t = t->next, ++j) {
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!cJSON_IsNumber(t) || d != (double)(int64_t)d || d < 0 || d >= s->n_vocab)
            return BAD(err, "input", "input[%zu][%zu] is not a token id of this model "
                       "(integers in [0, %d))", index, j, s->n_vocab);
        out->ids[j] = (int32_t)d;
    }
    out->n = n;
    return AK_OK;
}

/* input: string | [string...] | [id...] | [[id...]...] */
static ak_status parse_input(const ak__server *s, const cJSON *input, embed_req *r,
                             ak__oai_error *err) {
    if (!input) return BAD(err, "input", "'input' is required");
    if (!cJSON_IsString(input) && !cJSON_IsArray(input))
        return BAD(err, "input", "'input' must be a string, an array of strings, an array of "
                   "token ids or an array of arrays of token ids");
    int flat_ids = cJSON_IsArray(input) && input->child && cJSON_IsNumber(input->child);
    size_t n = cJSON_IsString(input) || flat_ids ? 1 : (size_t)cJSON_GetArraySize(input);
    if (n == 0) return BAD(err, "input", "'input' is an empty array");
    r->in = calloc(n, sizeof *r->in);
    if (!r->in) return AK_FAIL(AK_ERR_NO_MEMORY, "embeddings: out of memory");
    r->n_in = n;
    if (cJSON_IsString(input)) return tokenize(s, input, 0, &r->in[0], err);
    if (flat_ids) return take_ids(s, input, 0, &r->in[0], err);
    size_t i = 0;
    for (const cJSON *v = input->child; v; v = v->next, ++i) {
        if (cJSON_IsString(v)) AK_CHECK(tokenize(s, v, i, &r->in[i], err));
        else if (cJSON_IsArray(v)) AK_CHECK(take_ids(s, v, i, &r->in[i], err));
        else return BAD(err, "input", "input[%zu] must be a string or an array of token ids", i);
    }
    return AK_OK;
}

static ak_status parse(const ak__server *s, const char *body, size_t len, embed_req *r,
                       ak__oai_error *err) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return BAD(err, NULL, "The request body is not a JSON object");
    }
    ak_status st = AK_OK;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    if (f && !cJSON_IsNull(f)) {
        if (cJSON_IsString(f) && !strcmp(f->valuestring, "base64")) r->base64 = 1;
        else if (!cJSON_IsString(f) || strcmp(f->valuestring, "float"))
            st = BAD(err, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "dimensions");
    if (st == AK_OK && d && !cJSON_IsNull(d) &&
        (!cJSON_IsNumber(d) || d->valuedouble != (double)s->embedder.dim))
        st = BAD(err, "dimensions", "'dimensions' must be %d: this model's embeddings are not "
                 "known to allow truncation", s->embedder.dim);
    const char *str_fields[] = {"model", "user"};
    for (size_t i = 0; st == AK_OK && i < 2; ++i) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, str_fields[i]);
        if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
            st = BAD(err, str_fields[i], "'%s' must be a string", str_fields[i]);
    }
    if (st == AK_OK)
        st = parse_input(s, cJSON_GetObjectItemCaseSensitive(root, "input"), r, err);
    for (size_t i = 0; st == AK_OK && i < r->n_in; ++i)
        if (r->in[i].n > (size_t)s->n_ctx) {
            ak__oai_error_set(err, 400, "input", "context_length_exceeded", "input[%zu] has "
                              "%zu tokens; this model's context is %d", i, r->in[i].n,
                              s->n_ctx);
            st = AK_ERR_INVALID_ARG;
        }
    cJSON_Delete(root);
    return st;
}

/* ---- the response ------------------------------------------------------------------- */

static ak_status append_base64(ak__bytes *b, const float *v, size_t n) {
    static const char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t nb = n * 4;
    unsigned char *raw = malloc(nb ? nb : 1);
    char *txt = malloc((nb + 2) / 3 * 4 + 1);
    if (!raw || !txt) {
        free(raw);
        free(txt);
        return AK_FAIL(AK_ERR_NO_MEMORY, "embeddings: out of memory");
    }
    for (size_t i = 0; i < n; ++i) { /* little-endian whatever the host */
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k4 = 0; k4 < 4; ++k4) raw[4 * i + (size_t)k4] = (unsigned char)(u >> (8 * k4));
    }
    size_t o = 0;
    for (size_t i = 0; i < nb; i += 3) {
        uint32_t w = (uint32_t)raw[i] << 16 | (i + 1 < nb ? (uint32_t)raw[i + 1] << 8 : 0) |
                     (i + 2 < nb ? raw[i + 2] : 0);
        txt[o++] = k[w >> 18 & 63];
        txt[o++] = k[w >> 12 & 63];
        txt[o++] = i + 1 < nb ? k[w >> 6 & 63] : '=';
        txt[o++] = i + 2 < nb ? k[w & 63] : '=';
    }
    ak_status st = ak__bytes_append(b, "\"", 1);
    if (st == AK_OK) st = ak__bytes_append(b, txt, o);
    if (st == AK_OK) st = ak__bytes_append(b, "\"", 1);
    free(raw);
    free(txt);
    return st;
}

static ak_status append_vector(ak__bytes *b, const float *v, size_t n, int base64) {
    if (base64) return append_base64(b, v, n);
    AK_CHECK(ak__bytes_append(b, "[", 1));
    for (size_t i = 0; i < n; ++i) AK_CHECK(ak__bytes_appendf(b, i ? ",%.9g" : "%.9g", (double)v[i]));
    return ak__bytes_append(b, "]", 1);
}

static ak_status respond(const ak__server *s, const embed_req *r, ak__bytes *out) {
    size_t dim = (size_t)s->embedder.dim, tokens = 0;
    float *v = malloc(dim * sizeof *v);
    if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "embeddings: out of memory");
    ak_status st = ak__bytes_appendf(out, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; st == AK_OK && i < r->n_in; ++i) {
        st = s->embedder.embed(s->embedder.ctx, r->in[i].ids, r->in[i].n, v, dim);
        if (st == AK_OK)
            st = ak__bytes_appendf(out, "%s{\"object\":\"embedding\",\"index\":%zu,"
                                   "\"embedding\":", i ? "," : "", i);
        if (st == AK_OK) st = append_vector(out, v, dim, r->base64);
        if (st == AK_OK) st = ak__bytes_append(out, "}", 1);
        tokens += r->in[i].n;
    }
    free(v);
    char *name = NULL;
    cJSON *js = cJSON_CreateString(s->name);
    if (js) name = cJSON_PrintUnformatted(js);
    cJSON_Delete(js);
    if (st == AK_OK && !name) st = AK_FAIL(AK_ERR_NO_MEMORY, "embeddings: out of memory");
    if (st == AK_OK)
        st = ak__bytes_appendf(out, "],\"model\":%s,\"usage\":{\"prompt_tokens\":%zu,"
                               "\"total_tokens\":%zu}}", name, tokens, tokens);
    free(name);
    return st;
}

ak_status ak__embeddings_handle(const ak__server *s, const char *body, size_t len,
                                ak__bytes *out, ak__oai_error *err) {
    if (!s->embedder.embed) {
        ak__oai_error_set(err, 404, NULL, "not_found", "This server's model does not serve "
                          "embeddings");
        return AK_ERR_INVALID_ARG;
    }
    if (s->embedder.pooling == 0) {
        ak__oai_error_set(err, 400, NULL, NULL, "The model's pooling is 'none' (a vector per "
                          "token), which /v1/embeddings cannot return: use a model with mean, "
                          "cls or last pooling");
        return AK_ERR_INVALID_ARG;
    }
    embed_req r = {0};
    err->http = 0;
    ak_status st = parse(s, body, len, &r, err);
    if (st == AK_OK) st = respond(s, &r, out);
    if (st != AK_OK && err->http == 0) /* not the request's fault */
        ak__oai_error_set(err, 500, NULL, NULL, "%s", ak_last_error());
    req_free(&r);
    return st;
}
