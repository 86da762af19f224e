/* API keys of the server (see server_extras.h): Bearer tokens checked against every
 * configured key with a comparison whose time does not depend on the token's bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/check.h"
#include "llm/server/server_extras.h"

static ak_status add_key(ak__auth *a, const char *key, size_t len) {
    if (len == 0) return AK_OK;
    char **v = realloc(a->keys, (a->n + 1) * sizeof *v);
    if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "API keys");
    a->keys = v;
    char *copy = malloc(len + 1);
    if (!copy) return AK_FAIL(AK_ERR_NO_MEMORY, "API keys");
    memcpy(copy, key, len);
    copy[len] = '\0';
    a->keys[a->n++] = copy;
    return AK_OK;
}

static ak_status load_file(ak__auth *a, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return AK_FAIL(AK_ERR_IO, "cannot read the API key file %s", path);
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & (S_IRGRP | S_IROTH)))
        AK_LOG_WARN(AK_SUBSYS_LLM, "the API key file %s can be read by other users "
                    "(chmod 600 it)", path);
    char line[4096];
    ak_status st = AK_OK;
    size_t before = a->n;
    while (st == AK_OK && fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                       line[len - 1] == '\t'))
            len--;
        size_t start = 0;
        while (start < len && (line[start] == ' ' || line[start] == '\t')) start++;
        if (start < len && line[start] != '#') st = add_key(a, line + start, len - start);
    }
    fclose(f);
    if (st == AK_OK && a->n == before)
        return AK_FAIL(AK_ERR_INVALID_ARG, "the API key file %s holds no key", path);
    return st;
}

ak_status ak__auth_load(ak__auth *a, const char *key, const char *key_file) {
    memset(a, 0, sizeof *a);
    if (key) {
        if (!key[0]) return AK_FAIL(AK_ERR_INVALID_ARG, "the API key is empty");
        AK_CHECK(add_key(a, key, strlen(key)));
    }
    if (key_file) AK_CHECK(load_file(a, key_file));
    return AK_OK;
}

void ak__auth_free(ak__auth *a) {
    for (size_t i = 0; i < a->n; i++) free(a->keys[i]);
    free(a->keys);
    memset(a, 0, sizeof *a);
}

/* 1 when equal; the loop runs over the key's length whatever the token holds. */
static int same(const char *key, const char *token, size_t token_len) {
    size_t key_len = strlen(key);
    volatile unsigned char diff = (unsigned char)(key_len != token_len);
    for (size_t i = 0; i < key_len; i++) {
        unsigned char t = i < token_len ? (unsigned char)token[i] : 0;
        diff |= (unsigned char)(t ^ (unsigned char)key[i]);
    }
    return diff == 0;
}

int ak__auth_check(const ak__auth *a, const char *authorization) {
    if (a->n == 0) return 1;
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0) return 0;
    const char *token = authorization + 7;
    while (*token == ' ') token++;
    size_t len = strlen(token);
    while (len && token[len - 1] == ' ') len--;
    int ok = 0;
    for (size_t i = 0; i < a->n; i++) ok |= same(a->keys[i], token, len); /* no early exit */
    return ok;
}
