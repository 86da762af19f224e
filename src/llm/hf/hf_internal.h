/* The layout of an opened Hugging Face folder, shared by the files of llm/hf/ only. */
#ifndef AK_LLM_HF_INTERNAL_H
#define AK_LLM_HF_INTERNAL_H

#include <cjson/cJSON.h>

#include "llm/hf/hf.h"
#include "llm/hf/safetensors.h"

struct ak__hf {
    char *dir;
    cJSON *config;          /* config.json */
    char *chat_template;    /* NULL when the folder has none */
    ak__st_file *shards;
    size_t n_shards;
    const ak__st_tensor **all; /* every tensor of every shard */
    size_t n_all;
    ak_strmap index;        /* name → position in `all` */
};

/* A member of a JSON object, NULL when absent or JSON null. */
static inline const cJSON *ak__json_get(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(v) ? NULL : v;
}

/* Parses `dir`/`name` as JSON; *out = NULL and AK_OK when the file is absent and
 * optional, AK_ERR_INVALID_MODEL when it is not JSON. */
ak_status ak__hf_read_json(const char *dir, const char *name, int optional, cJSON **out);

/* A tokenizer.json precompiled_charsmap: standard base64 (padding optional) into a new
 * *out (an error names dir/tokenizer.json and the bad byte). */
ak_status ak__base64_decode(const char *dir, const char *s, uint8_t **out, size_t *n);
/* Standard base64 with padding, a new string (NULL: out of memory). */
char *ak__base64_encode(const uint8_t *data, size_t n);
/* Adds the normalizer, pre_tokenizer and decoder of a `t5` vocabulary to root; 0 on
 * failure (hf_unigram_form.c). */
int ak__ugm_pipeline_json(const ak__ugm_form *f, cJSON *root);

#endif /* AK_LLM_HF_INTERNAL_H */
