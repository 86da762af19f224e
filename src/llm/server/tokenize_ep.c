/* The /tokenize and /detokenize endpoints (see server_extras.h), as llama-server has
 * them: the model's tokenizer over HTTP, for clients that count or build prompts. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/server/server_extras.h"

#define BAD(err, param, ...) \
    (ak__oai_error_set((err), 400, (param), NULL, __VA_ARGS__), AK_ERR_INVALID_ARG)

static ak_status parse_object(const char *body, size_t len, cJSON **root, ak__oai_error *err) {
    *root = body ? cJSON_ParseWithLength(body, len) : NULL;
    if (!*root) return BAD(err, NULL, "The request body is not valid JSON.");
    if (!cJSON_IsObject(*root)) return BAD(err, NULL, "The request body must be a JSON object.");
    return AK_OK;
}

static ak_status flag(const cJSON *root, const char *name, int *out, ak__oai_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v)) return AK_OK;
    if (!cJSON_IsBool(v)) return BAD(err, name, "'%s' must be a boolean.", name);
    *out = cJSON_IsTrue(v);
    return AK_OK;
}

/* One {"id", "piece"}: the piece as a string when its bytes are valid UTF-8 alone, else
 * as the list of byte values (llama-server's convention). */
static ak_status piece_item(const ak_tokenizer *tok, int32_t id, cJSON *arr) {
    ak__bytes raw = {NULL, 0, 0}, clean = {NULL, 0, 0};
    ak_status st = ak__token_bytes(tok, id, &raw);
    if (st == AK_OK) st = ak__utf8_sanitize(raw.v ? raw.v : "", raw.len, &clean);
    cJSON *o = cJSON_CreateObject();
    int ok = st == AK_OK && o && cJSON_AddItemToArray(arr, o) &&
             cJSON_AddNumberToObject(o, "id", id);
    if (ok && clean.len == raw.len && (!raw.len || !memcmp(clean.v, raw.v, raw.len))) {
        char *text = malloc(raw.len + 1);
        ok = text != NULL;
        if (ok) {
            if (raw.len) memcpy(text, raw.v, raw.len);
            text[raw.len] = '\0';
            ok = cJSON_AddStringToObject(o, "piece", text) != NULL;
            free(text);
        }
    } else if (ok) {
        cJSON *bytes = cJSON_AddArrayToObject(o, "piece");
        for (size_t i = 0; ok && bytes && i < raw.len; i++)
            ok = cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)raw.v[i]));
        ok = ok && bytes;
    }
    ak__bytes_free(&raw);
    ak__bytes_free(&clean);
    if (st != AK_OK) return st;
    return ok ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "tokenize: pieces");
}

static ak_status print_into(cJSON *root, ak__bytes *out) {
    char *text = cJSON_PrintUnformatted(root);
    ak_status st = text ? ak__bytes_append(out, text, strlen(text))
                        : AK_FAIL(AK_ERR_NO_MEMORY, "tokenize: JSON");
    cJSON_free(text);
    return st;
}

static ak_status tokenize(const ak_tokenizer *tok, const cJSON *root, cJSON *reply,
                          ak__oai_error *err) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    if (!cJSON_IsString(content)) return BAD(err, "content", "'content' must be a string.");
    int add_special = 0, with_pieces = 0, parse_special = 1;
    AK_CHECK(flag(root, "add_special", &add_special, err));
    AK_CHECK(flag(root, "with_pieces", &with_pieces, err));
    AK_CHECK(flag(root, "parse_special", &parse_special, err));
    size_t len = strlen(content->valuestring), n = 0;
    int32_t *ids = malloc((len + 3) * sizeof *ids);
    if (!ids) return AK_FAIL(AK_ERR_NO_MEMORY, "tokenize: %zu bytes", len);
    unsigned flags = (add_special ? AK_TOK_ADD_SPECIAL : 0) | (parse_special ? AK_TOK_PARSE_SPECIAL : 0);
    ak_status st = ak_tokenizer_encode(tok, content->valuestring, len, flags, ids, len + 3, &n);
    cJSON *arr = st == AK_OK ? cJSON_AddArrayToObject(reply, "tokens") : NULL;
    if (st == AK_OK && !arr) st = AK_FAIL(AK_ERR_NO_MEMORY, "tokenize: JSON");
    for (size_t i = 0; st == AK_OK && i < n; i++) {
        if (with_pieces) st = piece_item(tok, ids[i], arr);
        else if (!cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i])))
            st = AK_FAIL(AK_ERR_NO_MEMORY, "tokenize: JSON");
    }
    free(ids);
    return st;
}

ak_status ak__tokenize_json(const ak_tokenizer *tok, const char *body, size_t len,
                            ak__bytes *out, ak__oai_error *err) {
    cJSON *root = NULL, *reply = cJSON_CreateObject();
    ak_status st = reply ? parse_object(body, len, &root, err)
                         : AK_FAIL(AK_ERR_NO_MEMORY, "tokenize: JSON");
    if (st == AK_OK) st = tokenize(tok, root, reply, err);
    if (st == AK_OK) st = print_into(reply, out);
    cJSON_Delete(root);
    cJSON_Delete(reply);
    return st;
}

static ak_status detokenize(const ak_tokenizer *tok, int32_t n_vocab, const cJSON *root,
                            cJSON *reply, ak__oai_error *err) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!cJSON_IsArray(arr)) return BAD(err, "tokens", "'tokens' must be an array of token ids.");
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return AK_FAIL(AK_ERR_NO_MEMORY, "detokenize: %zu tokens", n);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (d < 0 || d >= n_vocab || d != (double)(int32_t)d) {
            free(ids);
            return BAD(err, "tokens", "'tokens' must hold token ids between 0 and %d (entry %zu).",
                       n_vocab - 1, i);
        }
        ids[i++] = (int32_t)d;
    }
    size_t need = 0;
    ak_status st = ak_tokenizer_decode(tok, ids, n, 0, NULL, 0, &need);
    if (st == AK_ERR_INVALID_ARG || st == AK_OK) ak_clear_error(), st = AK_OK;
    char *text = st == AK_OK ? malloc(need + 1) : NULL;
    if (st == AK_OK && !text) st = AK_FAIL(AK_ERR_NO_MEMORY, "detokenize");
    size_t got = 0;
    if (st == AK_OK) st = ak_tokenizer_decode(tok, ids, n, 0, text, need + 1, &got);
    ak__bytes clean = {NULL, 0, 0};
    if (st == AK_OK) st = ak__utf8_sanitize(text, got, &clean);
    if (st == AK_OK) st = ak__bytes_append(&clean, "", 1); /* NUL for cJSON */
    if (st == AK_OK && !cJSON_AddStringToObject(reply, "content", clean.v))
        st = AK_FAIL(AK_ERR_NO_MEMORY, "detokenize: JSON");
    ak__bytes_free(&clean);
    free(text);
    free(ids);
    return st;
}

ak_status ak__detokenize_json(const ak_tokenizer *tok, int32_t n_vocab, const char *body,
                              size_t len, ak__bytes *out, ak__oai_error *err) {
    cJSON *root = NULL, *reply = cJSON_CreateObject();
    ak_status st = reply ? parse_object(body, len, &root, err)
                         : AK_FAIL(AK_ERR_NO_MEMORY, "detokenize: JSON");
    if (st == AK_OK) st = detokenize(tok, n_vocab, root, reply, err);
    if (st == AK_OK) st = print_into(reply, out);
    cJSON_Delete(root);
    cJSON_Delete(reply);
    return st;
}
