/* Writing a tokenizer as Hugging Face tokenizer.json + tokenizer_config.json (GGUF → HF).
 *
 * Byte-level BPE (`gpt2`) is written as it is: vocabulary, merges in rank order, its
 * pre-tokenizer expressions as Split steps before a ByteLevel (Falcon's as its own chain). SentencePiece-style BPE (`llama`) has scores,
 * not merges, so the merges are derived as transformers' SentencePiece converter does:
 * every split of a token into two vocabulary tokens (at code-point boundaries), ordered
 * by the token's score (best first), then token id, then the ids of the two halves.
 * Reading such a file back (hf_tokenizer.c) gives scores whose order is the original's,
 * hence the same encodings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/hf/hf_internal.h"
#include "llm/tokenizer/tokenizer.h"

/* A NUL-terminated copy of a token's text (cJSON takes C strings). */
static char *token_cstr(const ak_tokenizer *t, int32_t id) {
    size_t len;
    const char *s = ak__tok_text(t, id, &len);
    char *c = malloc(len + 1);
    if (c) {
        memcpy(c, s, len);
        c[len] = '\0';
    }
    return c;
}

static int add_string(cJSON *obj, const char *key, const ak_tokenizer *t, int32_t id) {
    if (id < 0) return cJSON_AddNullToObject(obj, key) != NULL;
    char *s = token_cstr(t, id);
    int ok = s && cJSON_AddStringToObject(obj, key, s);
    free(s);
    return ok;
}

/* ---- vocabulary and added tokens ----------------------------------------------------- */

/* model.vocab: text → id. A text that appears twice keeps the id the tokenizer maps it to. */
static cJSON *vocab_json(const ak_tokenizer *t) {
    cJSON *v = cJSON_CreateObject();
    for (int32_t i = 0; v && i < t->n_vocab; i++) {
        size_t len;
        const char *s = ak__tok_text(t, i, &len);
        if (ak_strmap_get(&t->vocab, s, len) != i) continue;
        char *c = token_cstr(t, i);
        int ok = c && cJSON_AddItemToObject(v, c, cJSON_CreateNumber(i));
        free(c);
        if (!ok) {
            cJSON_Delete(v);
            return NULL;
        }
    }
    return v;
}

static cJSON *added_token_json(const ak_tokenizer *t, int32_t id) {
    cJSON *e = cJSON_CreateObject();
    int ok = e && cJSON_AddNumberToObject(e, "id", id) && add_string(e, "content", t, id);
    ok = ok && cJSON_AddFalseToObject(e, "single_word") && cJSON_AddFalseToObject(e, "lstrip");
    ok = ok && cJSON_AddFalseToObject(e, "rstrip") && cJSON_AddFalseToObject(e, "normalized");
    ok = ok && cJSON_AddBoolToObject(e, "special", t->types[id] != AK_TOKTYPE_USER_DEFINED);
    if (!ok) cJSON_Delete(e);
    return ok ? e : NULL;
}

/* Control, user-defined and unknown tokens (the ones matched before the model runs). */
static cJSON *added_tokens_json(const ak_tokenizer *t) {
    cJSON *list = cJSON_CreateArray();
    for (int32_t i = 0; list && i < t->n_vocab; i++) {
        uint8_t ty = t->types[i];
        if (ty != AK_TOKTYPE_CONTROL && ty != AK_TOKTYPE_USER_DEFINED && ty != AK_TOKTYPE_UNKNOWN)
            continue;
        if (!cJSON_AddItemToArray(list, added_token_json(t, i))) {
            cJSON_Delete(list);
            return NULL;
        }
    }
    return list;
}

/* ---- merges -------------------------------------------------------------------------- */

typedef struct cand {
    float score;
    int32_t tok, left, right;
} cand;

static int by_score(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->tok != y->tok) return x->tok < y->tok ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

/* Every split of every token into two tokens, at UTF-8 code-point boundaries. */
static ak_status spm_candidates(const ak_tokenizer *t, cand **out, size_t *n) {
    size_t cap = 1024, k = 0;
    cand *c = malloc(cap * sizeof *c);
    if (!c) return AK_FAIL(AK_ERR_NO_MEMORY, "merges");
    for (int32_t i = 0; i < t->n_vocab; i++) {
        size_t len;
        const char *s = ak__tok_text(t, i, &len);
        for (size_t at = 1; at < len; at++) {
            if (((unsigned char)s[at] & 0xC0) == 0x80) continue;
            int64_t l = ak_strmap_get(&t->vocab, s, at), r = ak_strmap_get(&t->vocab, s + at, len - at);
            if (l < 0 || r < 0) continue;
            if (k == cap) {
                cand *v = realloc(c, (cap *= 2) * sizeof *c);
                if (!v) {
                    free(c);
                    return AK_FAIL(AK_ERR_NO_MEMORY, "merges");
                }
                c = v;
            }
            c[k++] = (cand){t->scores[i], i, (int32_t)l, (int32_t)r};
        }
    }
    qsort(c, k, sizeof *c, by_score);
    *out = c;
    *n = k;
    return AK_OK;
}

static int add_merge(cJSON *list, const char *l, size_t ll, const char *r, size_t rl) {
    char *s = malloc(ll + rl + 2);
    if (!s) return 0;
    memcpy(s, l, ll);
    s[ll] = ' ';
    memcpy(s + ll + 1, r, rl);
    s[ll + 1 + rl] = '\0';
    int ok = cJSON_AddItemToArray(list, cJSON_CreateString(s));
    free(s);
    return ok;
}

static cJSON *merges_json(const ak_tokenizer *t) {
    cJSON *list = cJSON_CreateArray();
    int ok = list != NULL;
    if (t->kind == AK_TOKENIZER_BPE) {
        for (size_t i = 0; ok && i < t->n_merges; i++) {
            size_t len;
            const char *m = ak__tok_merge(t, i, &len);
            const char *sp = memchr(m + 1, ' ', len - 1);
            ok = add_merge(list, m, (size_t)(sp - m), sp + 1, len - (size_t)(sp - m) - 1);
        }
    } else if (ok) {
        cand *c = NULL;
        size_t n = 0;
        ok = spm_candidates(t, &c, &n) == AK_OK;
        if (ok) {
            for (size_t i = 0; ok && i < n; i++) {
                size_t ll, rl;
                const char *l = ak__tok_text(t, c[i].left, &ll);
                const char *r = ak__tok_text(t, c[i].right, &rl);
                ok = add_merge(list, l, ll, r, rl);
            }
            free(c);
        }
    }
    if (!ok) cJSON_Delete(list);
    return ok ? list : NULL;
}

/* ---- the pipeline around the model --------------------------------------------------- */

static const char k_bytelevel[] =
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}";
static const char k_falcon_pre[] =
    "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Punctuation\",\"behavior\":"
    "\"Contiguous\"},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
    "\"use_regex\":true},{\"type\":\"Digits\",\"individual_digits\":false},{\"type\":\"Split\","
    "\"pattern\":{\"Regex\":\"[0-9][0-9][0-9]\"},\"behavior\":\"Isolated\",\"invert\":false}]}";
static const char k_spm_normalizer[] =
    "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]}";
static const char k_spm_normalizer_plain[] =
    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}";
static const char k_spm_decoder[] =
    "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
    "\"\xe2\x96\x81\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}%s]}";
static const char k_strip[] = ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}";

static int add_raw(cJSON *obj, const char *key, const char *json) {
    cJSON *v = cJSON_Parse(json);
    if (v && cJSON_AddItemToObject(obj, key, v)) return 1;
    cJSON_Delete(v);
    return 0;
}

/* A {"SpecialToken": {"id": text, "type_id": 0}} element of a template. */
static int add_special_piece(cJSON *list, const ak_tokenizer *t, int32_t id) {
    cJSON *e = cJSON_CreateObject(), *sp = cJSON_CreateObject();
    int ok = e && sp && cJSON_AddItemToObject(e, "SpecialToken", sp);
    if (!ok) {
        cJSON_Delete(e);
        cJSON_Delete(sp);
        return 0;
    }
    ok = add_string(sp, "id", t, id) && cJSON_AddNumberToObject(sp, "type_id", 0);
    return cJSON_AddItemToArray(list, e) && ok;
}

/* special_tokens[text] = {"id": text, "ids": [id], "tokens": [text]} */
static int add_special_entry(cJSON *specials, const ak_tokenizer *t, int32_t id) {
    char *text = token_cstr(t, id);
    cJSON *e = cJSON_CreateObject();
    int ok = text && e && cJSON_AddStringToObject(e, "id", text);
    ok = ok && cJSON_AddItemToObject(e, "ids", cJSON_CreateIntArray(&(int){id}, 1));
    ok = ok && cJSON_AddItemToObject(e, "tokens", cJSON_CreateStringArray((const char *const[]){text}, 1));
    ok = ok && cJSON_AddItemToObject(specials, text, e);
    if (!ok) cJSON_Delete(e);
    free(text);
    return ok;
}

/* TemplateProcessing that adds BOS/EOS as the tokenizer does. */
static cJSON *post_processor(const ak_tokenizer *t) {
    int bos = t->add_bos && t->bos >= 0, eos = t->add_eos && t->eos >= 0;
    if (!bos && !eos) return cJSON_CreateNull();
    cJSON *pp = cJSON_CreateObject(), *single = cJSON_CreateArray(), *specials = cJSON_CreateObject();
    int ok = pp && single && specials;
    ok = ok && cJSON_AddStringToObject(pp, "type", "TemplateProcessing") != NULL;
    ok = ok && (!bos || add_special_piece(single, t, t->bos));
    ok = ok && cJSON_AddItemToArray(single, cJSON_Parse("{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}"));
    ok = ok && (!eos || add_special_piece(single, t, t->eos));
    ok = ok && (!bos || add_special_entry(specials, t, t->bos));
    ok = ok && (!eos || t->eos == t->bos || add_special_entry(specials, t, t->eos));
    if (ok) {
        cJSON_AddItemToObject(pp, "single", single);
        cJSON_AddItemToObject(pp, "special_tokens", specials);
        return pp;
    }
    cJSON_Delete(pp);
    cJSON_Delete(single);
    cJSON_Delete(specials);
    return NULL;
}

/* The pre-tokenizer's expressions as Split(Isolated) steps, then ByteLevel without its own
 * split: what hf_tokenizer.c reads back into the same expressions. */
static cJSON *split_chain(const ak_tokenizer *t) {
    cJSON *seq = cJSON_CreateObject(), *list = cJSON_CreateArray();
    int ok = seq && list && cJSON_AddStringToObject(seq, "type", "Sequence");
    for (size_t i = 0; ok && i < ak__pretok_count(t->pre); i++) {
        cJSON *split = cJSON_CreateObject(), *pattern = cJSON_CreateObject();
        ok = split && pattern && cJSON_AddStringToObject(split, "type", "Split") &&
             cJSON_AddStringToObject(pattern, "Regex", ak__pretok_source(t->pre, i));
        if (ok) cJSON_AddItemToObject(split, "pattern", pattern);
        else cJSON_Delete(pattern);
        int only = ak__pretok_matches_only(t->pre, i);
        ok = ok && cJSON_AddStringToObject(split, "behavior", only ? "Removed" : "Isolated") &&
             cJSON_AddBoolToObject(split, "invert", only);
        if (split) cJSON_AddItemToArray(list, split);
    }
    cJSON *bl = ok ? cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                                 "\"trim_offsets\":true,\"use_regex\":false}") : NULL;
    ok = ok && bl;
    if (bl) cJSON_AddItemToArray(list, bl);
    if (list) cJSON_AddItemToObject(seq, "pretokenizers", list);
    if (!ok) cJSON_Delete(seq);
    return ok ? seq : NULL;
}

static int add_pipeline(cJSON *root, const ak_tokenizer *t) {
    int spm = t->kind == AK_TOKENIZER_SPM;
    char decoder[512];
    snprintf(decoder, sizeof decoder, k_spm_decoder, t->add_space_prefix ? k_strip : "");
    int ok = cJSON_AddNullToObject(root, "truncation") && cJSON_AddNullToObject(root, "padding");
    ok = ok && cJSON_AddItemToObject(root, "added_tokens", added_tokens_json(t));
    if (spm) {
        ok = ok && add_raw(root, "normalizer", t->add_space_prefix ? k_spm_normalizer
                                                                   : k_spm_normalizer_plain);
        ok = ok && cJSON_AddNullToObject(root, "pre_tokenizer");
    } else {
        ok = ok && cJSON_AddNullToObject(root, "normalizer");
        int falcon = t->pre_name && strcmp(t->pre_name, "falcon") == 0;
        if (falcon) ok = ok && add_raw(root, "pre_tokenizer", k_falcon_pre);
        else ok = ok && cJSON_AddItemToObject(root, "pre_tokenizer", split_chain(t));
    }
    ok = ok && cJSON_AddItemToObject(root, "post_processor", post_processor(t));
    return ok && add_raw(root, "decoder", spm ? decoder : k_bytelevel);
}

static cJSON *model_json(const ak_tokenizer *t) {
    int spm = t->kind == AK_TOKENIZER_SPM;
    cJSON *m = cJSON_CreateObject();
    int ok = m && cJSON_AddStringToObject(m, "type", "BPE") && cJSON_AddNullToObject(m, "dropout");
    ok = ok && add_string(m, "unk_token", t, spm ? t->unk : -1);
    ok = ok && cJSON_AddNullToObject(m, "continuing_subword_prefix");
    ok = ok && cJSON_AddNullToObject(m, "end_of_word_suffix");
    ok = ok && cJSON_AddBoolToObject(m, "fuse_unk", spm) && cJSON_AddBoolToObject(m, "byte_fallback", spm);
    ok = ok && cJSON_AddBoolToObject(m, "ignore_merges", t->ignore_merges);
    ok = ok && cJSON_AddItemToObject(m, "vocab", vocab_json(t));
    ok = ok && cJSON_AddItemToObject(m, "merges", merges_json(t));
    if (!ok) cJSON_Delete(m);
    return ok ? m : NULL;
}

static ak_status write_json(const char *dir, const char *name, const cJSON *root) {
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    if (!text) return AK_FAIL(AK_ERR_NO_MEMORY, "%s/%s", dir, name);
    ak_status st = ak__hf_write_file(dir, name, text, strlen(text));
    free(text);
    return st;
}

static cJSON *tokenizer_config(const ak_tokenizer *t, const char *chat_template) {
    cJSON *c = cJSON_CreateObject();
    int ok = c && cJSON_AddBoolToObject(c, "add_bos_token", t->add_bos);
    ok = ok && cJSON_AddBoolToObject(c, "add_eos_token", t->add_eos);
    ok = ok && add_string(c, "bos_token", t, t->bos) && add_string(c, "eos_token", t, t->eos);
    ok = ok && add_string(c, "unk_token", t, t->unk) && add_string(c, "pad_token", t, t->pad);
    ok = ok && cJSON_AddFalseToObject(c, "clean_up_tokenization_spaces");
    ok = ok && cJSON_AddStringToObject(c, "tokenizer_class", "PreTrainedTokenizerFast");
    if (ok && chat_template) ok = cJSON_AddStringToObject(c, "chat_template", chat_template) != NULL;
    if (!ok) cJSON_Delete(c);
    return ok ? c : NULL;
}

/* ---- Unigram (`t5`) --------------------------------------------------------------------- */

/* model: {"type": "Unigram", "unk_id", "byte_fallback": false, "vocab": [[piece, score]]} */
static cJSON *unigram_model_json(const ak_tokenizer *t) {
    cJSON *m = cJSON_CreateObject(), *vocab = cJSON_CreateArray();
    int ok = m && vocab && cJSON_AddStringToObject(m, "type", "Unigram");
    ok = ok && (t->unk >= 0 ? cJSON_AddNumberToObject(m, "unk_id", t->unk) != NULL
                            : cJSON_AddNullToObject(m, "unk_id") != NULL);
    ok = ok && cJSON_AddFalseToObject(m, "byte_fallback");
    for (int32_t i = 0; ok && i < t->n_vocab; i++) {
        char *text = token_cstr(t, i);
        cJSON *pair = cJSON_CreateArray();
        ok = text && pair && cJSON_AddItemToArray(pair, cJSON_CreateString(text)) &&
             cJSON_AddItemToArray(pair, cJSON_CreateNumber(t->scores ? t->scores[i] : 0.0));
        if (pair) cJSON_AddItemToArray(vocab, pair);
        free(text);
    }
    if (vocab) cJSON_AddItemToObject(m, "vocab", vocab);
    if (!ok) cJSON_Delete(m);
    return ok ? m : NULL;
}

static ak_status write_tokenizer_files(const ak_tokenizer *t, const cJSON *root,
                                       const char *chat_template, const char *dir) {
    ak_status st = write_json(dir, "tokenizer.json", root);
    if (st != AK_OK) return st;
    cJSON *cfg = tokenizer_config(t, chat_template);
    st = write_json(dir, "tokenizer_config.json", cfg);
    cJSON_Delete(cfg);
    return st;
}

ak_status ak__hf_write_unigram_tokenizer(const ak_tokenizer *t, const ak__ugm_form *form,
                                         const char *chat_template, const char *dir) {
    AK_ARG_CHECK(t != NULL && form != NULL && dir != NULL, "tokenizer, form or dir is NULL");
    if (t->kind != AK_TOKENIZER_UGM) return AK_FAIL(AK_ERR_INVALID_ARG, "not a Unigram vocabulary");
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddStringToObject(root, "version", "1.0") &&
             cJSON_AddNullToObject(root, "truncation") && cJSON_AddNullToObject(root, "padding") &&
             cJSON_AddItemToObject(root, "added_tokens", added_tokens_json(t)) &&
             ak__ugm_pipeline_json(form, root) &&
             cJSON_AddItemToObject(root, "post_processor", post_processor(t)) &&
             cJSON_AddItemToObject(root, "model", unigram_model_json(t));
    ak_status st = ok ? write_tokenizer_files(t, root, chat_template, dir)
                      : AK_FAIL(AK_ERR_NO_MEMORY, "tokenizer.json");
    cJSON_Delete(root);
    return st;
}

ak_status ak__hf_write_tokenizer(const ak_tokenizer *t, const char *chat_template,
                                 const char *dir) {
    AK_ARG_CHECK(t != NULL && dir != NULL, "tokenizer or dir is NULL");
    if (t->kind != AK_TOKENIZER_SPM && t->kind != AK_TOKENIZER_BPE)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "only BPE and SentencePiece-style vocabularies can "
                       "be written as tokenizer.json");
    if (t->norm)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "a tokenizer with normalizers (or a Metaspace / "
                       "prefix-space pre-tokenizer) cannot be written as tokenizer.json yet");
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddStringToObject(root, "version", "1.0") && add_pipeline(root, t);
    ok = ok && cJSON_AddItemToObject(root, "model", model_json(t));
    ak_status st = ok ? write_tokenizer_files(t, root, chat_template, dir)
                      : AK_FAIL(AK_ERR_NO_MEMORY, "tokenizer.json");
    cJSON_Delete(root);
    return st;
}
