/* A tokenizer.json Unigram pipeline in the terms of a GGUF `t5` vocabulary, and back.
 *
 * llama.cpp's `t5` tokenizer is SentencePiece's: an optional precompiled_charsmap, then
 * (remove_extra_whitespaces) runs of spaces made one and the ends trimmed, then spaces as
 * ▁ with one in front (add_space_prefix). Hugging Face's converter writes the same as
 *   normalizer     Precompiled(charsmap)?, Replace(" {2,}" → " ")?  (alone or a Sequence)
 *   pre_tokenizer  Metaspace(▁, prepend_scheme always | never), or T5's
 *                  Sequence[WhitespaceSplit, Metaspace(always)]
 *   decoder        Metaspace(▁)
 * except that Metaspace adds no ▁ before a text that starts with a space, where
 * SentencePiece does. So a `t5` vocabulary is written here with SentencePiece's steps as
 * normalizers — Precompiled?, Strip + Replace(" {2,}" → " ")?, Prepend(▁)?, Replace(" " →
 * ▁) — and Metaspace(never) only splitting; both forms are read back. Only those pipelines
 * have a GGUF form; every other component is refused by name.
 * T5's WhitespaceSplit chain equals the GGUF form when the extra spaces are removed and
 * a charsmap (which maps tabs and newlines to spaces, as nmt_nfkc does) comes first. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/hf/hf_internal.h"

#define METASPACE "\xe2\x96\x81" /* ▁ */

typedef struct norm_seen {
    int any[5]; /* per N_* step below */
} norm_seen;

static int type_is(const cJSON *node, const char *type) {
    const cJSON *t = ak__json_get(node, "type");
    return cJSON_IsString(t) && strcmp(t->valuestring, type) == 0;
}

static const char *type_of(const cJSON *node) {
    const cJSON *t = ak__json_get(node, "type");
    return cJSON_IsString(t) ? t->valuestring : "?";
}

static const char *str_of(const cJSON *node, const char *key) {
    const cJSON *v = ak__json_get(node, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

ak_status ak__base64_decode(const char *dir, const char *s, uint8_t **out, size_t *n) {
    size_t len = strlen(s);
    uint32_t acc = 0;
    int bits = 0;
    *n = 0;
    if (!(*out = malloc(len / 4 * 3 + 3))) return AK_FAIL(AK_ERR_NO_MEMORY, "precompiled_charsmap");
    for (size_t i = 0; i < len && s[i] != '='; i++) {
        int v = b64_value(s[i]);
        if (v < 0) {
            free(*out);
            *out = NULL;
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: precompiled_charsmap is "
                           "not base64 (byte %zu)", dir, i);
        }
        acc = (acc << 6) | (uint32_t)v;
        if ((bits += 6) >= 8) (*out)[(*n)++] = (uint8_t)(acc >> (bits -= 8));
    }
    return AK_OK;
}

char *ak__base64_encode(const uint8_t *data, size_t n) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *p = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < n ? (uint32_t)data[i + 1] << 8 : 0) |
                     (i + 2 < n ? data[i + 2] : 0);
        *p++ = abc[v >> 18 & 63];
        *p++ = abc[v >> 12 & 63];
        *p++ = i + 1 < n ? abc[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? abc[v & 63] : '=';
    }
    *p = '\0';
    return out;
}

/* Replace(pattern → content), the pattern a Regex or a String as `kind` says. */
static int is_replace(const cJSON *node, const char *kind, const char *pattern, const char *content) {
    const char *p = str_of(ak__json_get(node, "pattern"), kind), *c = str_of(node, "content");
    return type_is(node, "Replace") && p && c && strcmp(p, pattern) == 0 && strcmp(c, content) == 0;
}

static int is_strip_both(const cJSON *node) {
    return type_is(node, "Strip") && cJSON_IsTrue(ak__json_get(node, "strip_left")) &&
           cJSON_IsTrue(ak__json_get(node, "strip_right"));
}

/* The normalizer steps in the order SentencePiece applies them; `step` is how far the
 * list has come (each step at most once, in this order). */
enum { N_CHARSMAP, N_STRIP, N_EXTRA, N_PREPEND, N_SPACES, N_END };

static ak_status norm_part(const char *dir, const cJSON *node, int *step, ak__ugm_form *f,
                           norm_seen *seen) {
    int kind = type_is(node, "Precompiled")                    ? N_CHARSMAP
               : is_strip_both(node)                           ? N_STRIP
               : is_replace(node, "Regex", " {2,}", " ")       ? N_EXTRA
               : type_is(node, "Prepend") && str_of(node, "prepend") &&
                         strcmp(str_of(node, "prepend"), METASPACE) == 0 ? N_PREPEND
               : is_replace(node, "String", " ", METASPACE)    ? N_SPACES
                                                               : N_END;
    if (kind == N_END || kind < *step)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: normalizer %s%s has no GGUF t5 "
                       "form (Precompiled, Strip, Replace \" {2,}\" with \" \", Prepend ▁, Replace "
                       "\" \" with ▁, in that order)", dir, type_of(node),
                       kind == N_END ? "" : " out of order");
    *step = kind + 1;
    seen->any[kind] = 1;
    if (kind != N_CHARSMAP) return AK_OK;
    const char *b64 = str_of(node, "precompiled_charsmap");
    if (!b64)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: Precompiled without a "
                       "precompiled_charsmap", dir);
    return ak__base64_decode(dir, b64, &f->charsmap, &f->charsmap_len);
}

static ak_status read_normalizer(const char *dir, const cJSON *norm, ak__ugm_form *f,
                                 norm_seen *seen) {
    int step = 0;
    if (!norm) return AK_OK;
    if (!type_is(norm, "Sequence")) AK_CHECK(norm_part(dir, norm, &step, f, seen));
    const cJSON *list = type_is(norm, "Sequence") ? ak__json_get(norm, "normalizers") : NULL;
    for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
        AK_CHECK(norm_part(dir, e, &step, f, seen));
    /* Strip only as the first half of SentencePiece's extra-space removal, Prepend only
     * before spaces become ▁ */
    if ((seen->any[N_STRIP] && !seen->any[N_EXTRA]) || (seen->any[N_PREPEND] && !seen->any[N_SPACES]))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: normalizer %s without %s has no "
                       "GGUF t5 form", dir, seen->any[N_STRIP] && !seen->any[N_EXTRA] ? "Strip" : "Prepend",
                       seen->any[N_STRIP] && !seen->any[N_EXTRA] ? "Replace \" {2,}\"" : "Replace \" \" with ▁");
    f->remove_extra_ws = seen->any[N_EXTRA];
    return AK_OK;
}

/* Metaspace(▁): 1 with a prefix, 0 without, -1 (an error said) otherwise. */
static ak_status read_metaspace(const char *dir, const cJSON *m, const char *where, int *prefix) {
    const char *rep = str_of(m, "replacement"), *scheme = str_of(m, "prepend_scheme");
    const cJSON *add = ak__json_get(m, "add_prefix_space");
    if (!type_is(m, "Metaspace") || (rep && strcmp(rep, METASPACE) != 0))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: %s %s has no GGUF t5 form "
                       "(Metaspace with ▁)", dir, where, type_of(m));
    if (scheme && strcmp(scheme, "always") != 0 && strcmp(scheme, "never") != 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: %s Metaspace prepend_scheme '%s' "
                       "has no GGUF t5 form (always, never)", dir, where, scheme);
    *prefix = scheme ? strcmp(scheme, "always") == 0 : !cJSON_IsFalse(add);
    return AK_OK;
}

static ak_status read_pre_tokenizer(const char *dir, const cJSON *pre, ak__ugm_form *f,
                                    const norm_seen *seen) {
    if (!pre)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: a Unigram model without a "
                       "Metaspace pre-tokenizer has no GGUF t5 form", dir);
    if (seen->any[N_SPACES]) { /* the normalizer made the ▁ (and the prefix) itself */
        int prefix;
        AK_CHECK(read_metaspace(dir, pre, "pre_tokenizer", &prefix));
        if (prefix)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer Metaspace "
                           "prepends ▁ after a normalizer made the spaces ▁: no GGUF t5 form", dir);
        f->add_space_prefix = seen->any[N_PREPEND];
        return AK_OK;
    }
    /* Hugging Face's converter: Metaspace adds the prefix (but not before a leading space,
     * where SentencePiece and the GGUF form add one all the same) */
    if (!type_is(pre, "Sequence")) return read_metaspace(dir, pre, "pre_tokenizer", &f->add_space_prefix);
    const cJSON *list = ak__json_get(pre, "pretokenizers");
    const cJSON *a = cJSON_IsArray(list) ? list->child : NULL, *b = a ? a->next : NULL;
    if (!a || !b || b->next || !type_is(a, "WhitespaceSplit"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer Sequence has no "
                       "GGUF t5 form (Metaspace, or WhitespaceSplit then Metaspace)", dir);
    AK_CHECK(read_metaspace(dir, b, "pre_tokenizer", &f->add_space_prefix));
    if (!f->add_space_prefix || !f->remove_extra_ws || !f->charsmap)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: WhitespaceSplit then Metaspace "
                       "equals the GGUF t5 form only after Precompiled and Replace \" {2,}\" "
                       "normalizers, with prepend_scheme always", dir);
    return AK_OK;
}

static ak_status read_decoder(const char *dir, const cJSON *dec) {
    int prefix;
    if (!dec)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: a Unigram model without a "
                       "Metaspace decoder has no GGUF t5 form", dir);
    return read_metaspace(dir, dec, "decoder", &prefix);
}

ak_status ak__hf_unigram_form(const char *dir, ak__ugm_form *out) {
    AK_ARG_CHECK(dir != NULL && out != NULL, "dir or out is NULL");
    memset(out, 0, sizeof *out);
    cJSON *j;
    AK_CHECK(ak__hf_read_json(dir, "tokenizer.json", 0, &j));
    ak_status st = AK_OK;
    const cJSON *model = ak__json_get(j, "model");
    if (!type_is(model, "Unigram"))
        st = AK_FAIL(AK_ERR_INVALID_ARG, "%s/tokenizer.json: not a Unigram model", dir);
    else if (cJSON_IsTrue(ak__json_get(model, "byte_fallback")))
        st = AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: Unigram byte_fallback has no GGUF "
                     "t5 form (llama.cpp's t5 tokenizer spells unknown text as <unk>)", dir);
    norm_seen seen = {{0}};
    if (st == AK_OK) st = read_normalizer(dir, ak__json_get(j, "normalizer"), out, &seen);
    if (st == AK_OK) st = read_pre_tokenizer(dir, ak__json_get(j, "pre_tokenizer"), out, &seen);
    if (st == AK_OK) st = read_decoder(dir, ak__json_get(j, "decoder"));
    cJSON_Delete(j);
    if (st != AK_OK) ak__ugm_form_free(out);
    return st;
}

void ak__ugm_form_free(ak__ugm_form *f) {
    if (!f) return;
    free(f->charsmap);
    memset(f, 0, sizeof *f);
}

/* ---- the other way: the pipeline of a GGUF `t5` vocabulary as tokenizer.json -------------- */

static cJSON *metaspace_json(int prefix) {
    cJSON *m = cJSON_CreateObject();
    int ok = m && cJSON_AddStringToObject(m, "type", "Metaspace") &&
             cJSON_AddStringToObject(m, "replacement", METASPACE) &&
             cJSON_AddStringToObject(m, "prepend_scheme", prefix ? "always" : "never") &&
             /* the older spelling, which transformers.js reads */
             cJSON_AddBoolToObject(m, "add_prefix_space", prefix) &&
             cJSON_AddBoolToObject(m, "split", 1);
    if (!ok) cJSON_Delete(m);
    return ok ? m : NULL;
}

static int add_parsed(cJSON *list, const char *json) {
    cJSON *v = cJSON_Parse(json);
    if (v && cJSON_AddItemToArray(list, v)) return 1;
    cJSON_Delete(v);
    return 0;
}

/* SentencePiece's normalization step by step, so that Metaspace only splits: the map,
 * the extra spaces (both ends, then runs), the ▁ in front, the spaces as ▁. Hugging
 * Face's converter leaves the prefix to Metaspace, which adds none before a leading space,
 * where SentencePiece (and llama.cpp) add one. */
static cJSON *normalizer_json(const ak__ugm_form *f) {
    cJSON *seq = cJSON_CreateObject(), *list = cJSON_CreateArray();
    int ok = seq && list && cJSON_AddStringToObject(seq, "type", "Sequence");
    if (ok && f->charsmap) {
        char *b64 = ak__base64_encode(f->charsmap, f->charsmap_len);
        cJSON *p = cJSON_CreateObject();
        ok = b64 && p && cJSON_AddStringToObject(p, "type", "Precompiled") &&
             cJSON_AddStringToObject(p, "precompiled_charsmap", b64);
        if (p) cJSON_AddItemToArray(list, p);
        free(b64);
    }
    if (ok && f->remove_extra_ws)
        ok = add_parsed(list, "{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":true}") &&
             add_parsed(list, "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" {2,}\"},\"content\":\" \"}");
    if (ok && f->add_space_prefix)
        ok = add_parsed(list, "{\"type\":\"Prepend\",\"prepend\":\"" METASPACE "\"}");
    ok = ok && add_parsed(list, "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" METASPACE "\"}");
    if (list) cJSON_AddItemToObject(seq, "normalizers", list);
    if (!ok) cJSON_Delete(seq);
    return ok ? seq : NULL;
}

int ak__ugm_pipeline_json(const ak__ugm_form *f, cJSON *root) {
    return cJSON_AddItemToObject(root, "normalizer", normalizer_json(f)) &&
           cJSON_AddItemToObject(root, "pre_tokenizer", metaspace_json(0)) &&
           cJSON_AddItemToObject(root, "decoder", metaspace_json(f->add_space_prefix));
}
