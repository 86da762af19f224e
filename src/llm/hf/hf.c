/* Opening a Hugging Face folder: config.json, the safetensors shards (model.safetensors,
 * the files named by model.safetensors.index.json, or else every *.safetensors in the
 * folder), one name index over all shards, and the chat template. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/check.h"
#include "llm/atomic_file.h"
#include "llm/hf/hf_internal.h"

#define MAX_TEXT_FILE (1ull << 30) /* a JSON or template file larger than this is not one */

ak_status ak__hf_path(const char *dir, const char *name, char **out) {
    size_t a = strlen(dir), b = strlen(name);
    *out = malloc(a + b + 2);
    if (!*out) return AK_FAIL(AK_ERR_NO_MEMORY, "path");
    memcpy(*out, dir, a);
    (*out)[a] = '/';
    memcpy(*out + a + 1, name, b + 1);
    return AK_OK;
}

ak_status ak__hf_read_file(const char *dir, const char *name, char **text, size_t *len,
                           int *missing) {
    char *path;
    AK_CHECK(ak__hf_path(dir, name, &path));
    *text = NULL;
    if (missing) *missing = 0;
    FILE *f = fopen(path, "rb");
    struct stat sb;
    ak_status st = AK_OK;
    if (!f) {
        if (missing) *missing = 1;
        st = AK_FAIL(AK_ERR_IO, "cannot open '%s'", path);
    } else if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) ||
               (uint64_t)sb.st_size > MAX_TEXT_FILE) {
        st = AK_FAIL(AK_ERR_INVALID_MODEL, "'%s' is not a regular file of at most 1 GiB", path);
    } else if (!(*text = malloc((size_t)sb.st_size + 1))) {
        st = AK_FAIL(AK_ERR_NO_MEMORY, "'%s': %lld bytes", path, (long long)sb.st_size);
    } else if (fread(*text, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
        st = AK_FAIL(AK_ERR_IO, "reading '%s' failed", path);
    } else {
        (*text)[sb.st_size] = '\0';
        if (len) *len = (size_t)sb.st_size;
    }
    if (f) fclose(f);
    if (st != AK_OK) {
        free(*text);
        *text = NULL;
    }
    free(path);
    return st;
}

ak_status ak__hf_read_json(const char *dir, const char *name, int optional, cJSON **out) {
    char *text;
    size_t len;
    int missing;
    *out = NULL;
    ak_status st = ak__hf_read_file(dir, name, &text, &len, &missing);
    if (st != AK_OK) return missing && optional ? AK_OK : st;
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!*out)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/%s is not valid JSON", dir, name);
    return AK_OK;
}

ak_status ak__hf_write_file(const char *dir, const char *name, const char *text, size_t len) {
    char *path;
    AK_CHECK(ak__hf_path(dir, name, &path));
    ak__atomic_file file;
    ak_status st = ak__atomic_open(&file, path);
    free(path);
    AK_CHECK(st);
    if ((st = ak__atomic_write(&file, text, len)) != AK_OK) {
        ak__atomic_abort(&file);
        return st;
    }
    return ak__atomic_commit(&file);
}

/* ---- shards -------------------------------------------------------------------------- */

/* A shard named by the index must be a plain file name inside the folder. */
static ak_status check_shard_name(const char *dir, const char *name) {
    if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/model.safetensors.index.json names the shard "
                       "'%s', which is not a file name in the folder", dir, name);
    return AK_OK;
}

static ak_status open_shard(ak__hf *h, const char *name) {
    char *path;
    AK_CHECK(ak__hf_path(h->dir, name, &path));
    ak_status st = ak__st_open(path, &h->shards[h->n_shards]);
    free(path);
    if (st == AK_OK) h->n_shards++;
    return st;
}

/* Names of the distinct shards in the weight map, in first-seen order (few: linear). */
static ak_status index_shards(const ak__hf *h, const cJSON *map, const char ***names, size_t *n) {
    size_t cap = (size_t)cJSON_GetArraySize(map);
    *names = malloc((cap ? cap : 1) * sizeof **names);
    if (!*names) return AK_FAIL(AK_ERR_NO_MEMORY, "shard list");
    *n = 0;
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/model.safetensors.index.json: weight_map "
                           "entry '%s' is not a file name", h->dir, e->string);
        AK_CHECK(check_shard_name(h->dir, e->valuestring));
        size_t i = 0;
        while (i < *n && strcmp((*names)[i], e->valuestring) != 0) i++;
        if (i == *n) (*names)[(*n)++] = e->valuestring;
    }
    return AK_OK;
}

/* Every tensor the index promises must be in the shard it names. */
static ak_status check_index(const ak__hf *h, const cJSON *map, const char **names, size_t n) {
    for (const cJSON *e = map->child; e; e = e->next) {
        size_t i = 0;
        while (strcmp(names[i], e->valuestring) != 0) i++;
        if (i >= n || !ak__st_find(&h->shards[i], e->string))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s' is not in %s as the index says",
                           h->dir, e->string, e->valuestring);
    }
    return AK_OK;
}

static ak_status open_indexed(ak__hf *h, const cJSON *index) {
    const cJSON *map = ak__json_get(index, "weight_map");
    if (!cJSON_IsObject(map))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/model.safetensors.index.json has no weight_map",
                       h->dir);
    const char **names = NULL;
    size_t n = 0;
    ak_status st;
    AK_CHECK_GOTO(st, index_shards(h, map, &names, &n));
    h->shards = calloc(n ? n : 1, sizeof *h->shards);
    if (!h->shards) {
        st = AK_FAIL(AK_ERR_NO_MEMORY, "shards");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) AK_CHECK_GOTO(st, open_shard(h, names[i]));
    st = check_index(h, map, names, n);
fail:
    free(names);
    return st;
}

static int is_safetensors(const struct dirent *d) {
    size_t n = strlen(d->d_name);
    return n > 12 && strcmp(d->d_name + n - 12, ".safetensors") == 0;
}

/* No single file and no index: every *.safetensors of the folder, in name order. */
static ak_status open_scanned(ak__hf *h) {
    struct dirent **list;
    int n = scandir(h->dir, &list, is_safetensors, alphasort);
    if (n < 0) return AK_FAIL(AK_ERR_IO, "cannot list '%s'", h->dir);
    ak_status st = AK_OK;
    if (n == 0) st = AK_FAIL(AK_ERR_INVALID_MODEL, "%s has no *.safetensors weights", h->dir);
    else if (!(h->shards = calloc((size_t)n, sizeof *h->shards)))
        st = AK_FAIL(AK_ERR_NO_MEMORY, "shards");
    for (int i = 0; i < n; i++) {
        if (st == AK_OK) st = open_shard(h, list[i]->d_name);
        free(list[i]);
    }
    free(list);
    return st;
}

static ak_status open_shards(ak__hf *h) {
    char *path;
    AK_CHECK(ak__hf_path(h->dir, "model.safetensors", &path));
    struct stat sb;
    int single = stat(path, &sb) == 0;
    free(path);
    if (single) {
        if (!(h->shards = calloc(1, sizeof *h->shards))) return AK_FAIL(AK_ERR_NO_MEMORY, "shards");
        return open_shard(h, "model.safetensors");
    }
    cJSON *index;
    AK_CHECK(ak__hf_read_json(h->dir, "model.safetensors.index.json", 1, &index));
    if (!index) return open_scanned(h);
    ak_status st = open_indexed(h, index);
    cJSON_Delete(index);
    return st;
}

/* One name → tensor map over all shards; a name in two shards is ambiguous. */
static ak_status index_tensors(ak__hf *h) {
    size_t n = 0;
    for (size_t s = 0; s < h->n_shards; s++) n += h->shards[s].n_tensors;
    h->all = malloc((n ? n : 1) * sizeof *h->all);
    if (!h->all) return AK_FAIL(AK_ERR_NO_MEMORY, "tensor index");
    AK_CHECK(ak_strmap_init(&h->index, n));
    for (size_t s = 0; s < h->n_shards; s++)
        for (size_t i = 0; i < h->shards[s].n_tensors; i++) {
            const ak__st_tensor *t = &h->shards[s].tensors[i];
            if (ak_strmap_put(&h->index, t->name, strlen(t->name), (int64_t)h->n_all, 0) != -1)
                return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s' is in two shards", h->dir,
                               t->name);
            h->all[h->n_all++] = t;
        }
    return AK_OK;
}

/* ---- chat template ------------------------------------------------------------------- */

/* chat_template is a string, or a list of {name, template} (then "default" or the first). */
static const char *pick_template(const cJSON *ct) {
    if (cJSON_IsString(ct)) return ct->valuestring;
    if (!cJSON_IsArray(ct)) return NULL;
    const char *first = NULL;
    for (const cJSON *e = ct->child; e; e = e->next) {
        const cJSON *name = ak__json_get(e, "name"), *tpl = ak__json_get(e, "template");
        if (!cJSON_IsString(tpl)) continue;
        if (cJSON_IsString(name) && strcmp(name->valuestring, "default") == 0) return tpl->valuestring;
        if (!first) first = tpl->valuestring;
    }
    return first;
}

static ak_status read_chat_template(ak__hf *h) {
    cJSON *cfg;
    AK_CHECK(ak__hf_read_json(h->dir, "tokenizer_config.json", 1, &cfg));
    const char *tpl = cfg ? pick_template(ak__json_get(cfg, "chat_template")) : NULL;
    if (tpl) {
        h->chat_template = strdup(tpl);
        cJSON_Delete(cfg);
        return h->chat_template ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "chat template");
    }
    cJSON_Delete(cfg);
    /* newer transformers save the template next to the config */
    int missing;
    ak_status st = ak__hf_read_file(h->dir, "chat_template.jinja", &h->chat_template, NULL, &missing);
    return st == AK_OK || missing ? AK_OK : st;
}

/* ---- the handle ---------------------------------------------------------------------- */

void ak__hf_close(ak__hf *h) {
    if (!h) return;
    for (size_t i = 0; i < h->n_shards; i++) ak__st_close(&h->shards[i]);
    free(h->shards);
    free(h->all);
    ak_strmap_free(&h->index);
    cJSON_Delete(h->config);
    free(h->chat_template);
    free(h->dir);
    free(h);
}

ak_status ak__hf_open(const char *dir, ak__hf **out) {
    AK_ARG_CHECK(dir != NULL && out != NULL, "dir or out is NULL");
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return AK_FAIL(AK_ERR_IO, "'%s' is not a folder", dir);
    ak__hf *h = calloc(1, sizeof *h);
    if (!h || !(h->dir = strdup(dir))) {
        free(h);
        return AK_FAIL(AK_ERR_NO_MEMORY, "Hugging Face folder");
    }
    ak_status st;
    AK_CHECK_GOTO(st, ak__hf_read_json(dir, "config.json", 0, &h->config));
    if (!cJSON_IsObject(h->config)) {
        st = AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json is not a JSON object", dir);
        goto fail;
    }
    AK_CHECK_GOTO(st, open_shards(h));
    AK_CHECK_GOTO(st, index_tensors(h));
    AK_CHECK_GOTO(st, read_chat_template(h));
    *out = h;
    return AK_OK;
fail:
    ak__hf_close(h);
    return st;
}

const char *ak__hf_dir(const ak__hf *h) { return h->dir; }

static const ak__st_tensor *find(const ak__hf *h, const char *name) {
    int64_t i = ak_strmap_get(&h->index, name, strlen(name));
    return i < 0 ? NULL : h->all[i];
}

int ak__hf_has_tensor(const ak__hf *h, const char *name) { return find(h, name) != NULL; }

size_t ak__hf_tensor_count(const ak__hf *h) { return h->n_all; }

const char *ak__hf_tensor_name(const ak__hf *h, size_t i) {
    return i < h->n_all ? h->all[i]->name : NULL;
}

ak_status ak__hf_tensor(const ak__hf *h, const char *name, ak__tensor_view *out) {
    AK_ARG_CHECK(h != NULL && name != NULL && out != NULL, "NULL argument");
    const ak__st_tensor *t = find(h, name);
    if (!t) return AK_FAIL(AK_ERR_INVALID_ARG, "%s has no tensor '%s'", h->dir, name);
    switch (t->dtype) {
    case AK_ST_F32: out->type = AK_WTYPE_F32; break;
    case AK_ST_F16: out->type = AK_WTYPE_F16; break;
    case AK_ST_BF16: out->type = AK_WTYPE_BF16; break;
    default:
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: tensor '%s' is %s (supported: F32, F16, BF16)",
                       h->dir, name, ak__st_dtype_name(t->dtype));
    }
    if (t->n_dims > 4)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: tensor '%s' has %u dimensions (at most 4)",
                       h->dir, name, t->n_dims);
    out->n_dims = t->n_dims ? t->n_dims : 1;
    for (uint32_t i = 0; i < 4; i++) out->dims[i] = 1;
    for (uint32_t i = 0; i < t->n_dims; i++) out->dims[i] = t->shape[t->n_dims - 1 - i];
    out->data = t->data;
    out->bytes = t->bytes;
    return AK_OK;
}

ak_status ak__hf_chat_template(const ak__hf *h, const char **text) {
    AK_ARG_CHECK(h != NULL && text != NULL, "NULL argument");
    *text = h->chat_template;
    return AK_OK;
}
