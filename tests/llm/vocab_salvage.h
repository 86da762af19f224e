/* Test helper: recovers the tokenizer metadata of the shared ggml-vocab-*.gguf files.
 *
 * Why: the copies in shared/llm/vocab went through a lossy UTF-8 round trip. Every byte
 * sequence that was not valid UTF-8 became U+FFFD (EF BF BD), so the files are no longer
 * valid GGUF (the reader rightly rejects them, and a test checks that). The token texts
 * and merges are valid UTF-8 and survived; what broke are binary fields: counts and string
 * lengths with a byte >= 0x80, float scores, a few scalars.
 *
 * This walker reads the GGUF grammar over the damaged bytes. In a binary field one U+FFFD
 * stands for one lost byte (0x80..0xFF); such a count or length is resolved by what must
 * follow it (the next string's length, or the next metadata key); float arrays are skipped
 * to the next key. The recovered vocabulary is written to a fresh, valid GGUF that the
 * real reader then parses. SPM scores, which cannot be recovered, come from
 * shared/llm/llama2c-tokenizer.bin (intact) after checking that its texts are the same. */
#ifndef AK_TEST_VOCAB_SALVAGE_H
#define AK_TEST_VOCAB_SALVAGE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_writer.h"

typedef struct sv_in {
    const unsigned char *b;
    size_t n, pos;
} sv_in;

typedef struct sv_strs {
    const char **s;
    size_t *len;
    size_t n;
} sv_strs;

typedef struct salvage {
    char model[16], pre[32];
    sv_strs tokens, merges;
    int32_t *types; /* tokens.n entries, NULL if absent */
    int64_t bos, eos, unk, pad; /* -2 absent, -3 damaged */
    int add_bos, add_eos, add_space_prefix; /* -1 absent */
} salvage;

static inline int sv_fffd(const sv_in *r, size_t p) {
    return p + 3 <= r->n && r->b[p] == 0xEF && r->b[p + 1] == 0xBF && r->b[p + 2] == 0xBD;
}

/* k original bytes of a binary field; a lost byte reads as 0 and sets its bit in *mask. */
static inline int sv_bin(sv_in *r, int k, uint64_t *v, unsigned *mask) {
    *v = 0;
    *mask = 0;
    for (int i = 0; i < k; i++) {
        if (r->pos >= r->n) return 0;
        if (sv_fffd(r, r->pos)) {
            *mask |= 1u << i;
            r->pos += 3;
        } else {
            *v |= (uint64_t)r->b[r->pos++] << (8 * i);
        }
    }
    return 1;
}

static inline int sv_utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

/* Does a metadata key start at p (or the file end)? `strict`: only tokenizer.* and
 * general.* keys, for ends of string arrays whose elements could look like keys. */
static inline int sv_key_at(const sv_in *r, size_t p, int strict) {
    if (p == r->n) return 1;
    sv_in t = *r;
    t.pos = p;
    uint64_t len, type;
    unsigned m;
    if (!sv_bin(&t, 8, &len, &m) || m || len < 8 || len > 128 || t.pos + len > t.n) return 0;
    const char *k = (const char *)t.b + t.pos;
    if (strict && strncmp(k, "tokenizer.", 10) != 0 && strncmp(k, "general.", 8) != 0) return 0;
    for (uint64_t i = 0; i < len; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '.' || k[i] == '_'))
            return 0;
    t.pos += len;
    return sv_bin(&t, 4, &type, &m) && !m && type <= 12;
}

/* Candidates for a value with one lost byte: the byte is one of 0x80..0xFF. */
static inline int sv_one_lost(unsigned mask, int *shift) {
    if (!mask || (mask & (mask - 1))) return 0;
    *shift = 0;
    while (!(mask & (1u << *shift))) (*shift)++;
    *shift *= 8;
    return 1;
}

/* A string length with a lost byte: the one whose content is valid UTF-8 and is followed
 * by something that reads as the next small length field. */
static inline int sv_resolve_len(const sv_in *r, uint64_t v, unsigned mask, uint64_t *out) {
    int sh;
    if (!mask) return *out = v, 1;
    if (!sv_one_lost(mask, &sh)) return 0;
    for (uint64_t b = 0x80; b <= 0xFF; b++) {
        uint64_t len = v | b << sh;
        if (len > r->n - r->pos || !sv_utf8_ok(r->b + r->pos, len)) continue;
        sv_in t = *r;
        t.pos += len;
        uint64_t next;
        unsigned m;
        if (t.pos == t.n || (sv_bin(&t, 8, &next, &m) && (next >> 16) == 0 && (m & ~3u) == 0))
            return *out = len, 1;
    }
    return 0;
}

static inline int sv_string(sv_in *r, const char **s, size_t *len) {
    uint64_t v, n;
    unsigned m;
    if (!sv_bin(r, 8, &v, &m) || !sv_resolve_len(r, v, m, &n) || n > r->n - r->pos) return 0;
    *s = (const char *)r->b + r->pos;
    *len = (size_t)n;
    r->pos += n;
    return 1;
}

/* Is i a possible value of a count with (at most one) lost byte? */
static inline int sv_count_fits(uint64_t v, unsigned mask, uint64_t i) {
    int sh;
    if (!mask) return i == v;
    if (!sv_one_lost(mask, &sh)) return 0;
    uint64_t b = (i >> sh) & 0xFF;
    return b >= 0x80 && (i & ~(0xFFull << sh)) == v;
}

static inline int sv_count_done(const sv_in *r, uint64_t v, unsigned mask, uint64_t i) {
    if (!mask) return i == v;
    return sv_count_fits(v, mask, i) && sv_key_at(r, r->pos, 1);
}

static inline int sv_strings(sv_in *r, uint64_t v, unsigned mask, sv_strs *out) {
    size_t cap = 1024;
    out->s = malloc(cap * sizeof *out->s);
    out->len = malloc(cap * sizeof *out->len);
    for (out->n = 0; !sv_count_done(r, v, mask, out->n); out->n++) {
        if (out->n > (1u << 22)) return 0;
        if (out->n == cap) {
            cap *= 2;
            out->s = realloc(out->s, cap * sizeof *out->s);
            out->len = realloc(out->len, cap * sizeof *out->len);
        }
        if (!sv_string(r, &out->s[out->n], &out->len[out->n])) return 0;
    }
    return 1;
}

static inline int sv_int32s(sv_in *r, uint64_t v, unsigned mask, int32_t **out, size_t *n) {
    size_t cap = 1024;
    *out = malloc(cap * sizeof **out);
    for (*n = 0; !sv_count_done(r, v, mask, *n); (*n)++) {
        uint64_t x;
        unsigned m;
        if (*n > (1u << 22) || !sv_bin(r, 4, &x, &m) || m) return 0;
        if (*n == cap) *out = realloc(*out, (cap *= 2) * sizeof **out);
        (*out)[*n] = (int32_t)(uint32_t)x;
    }
    return 1;
}

/* Floats are beyond repair; skip to the next key. */
static inline int sv_skip_to_key(sv_in *r) {
    for (size_t p = r->pos; p <= r->n; p++)
        if (sv_key_at(r, p, 0)) return r->pos = p, 1;
    return 0;
}

static inline void sv_copy(char *dst, size_t cap, const char *s, size_t n) {
    if (n >= cap) n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

static inline int sv_value(sv_in *r, salvage *sv, const char *key, uint32_t type) {
    uint64_t v;
    unsigned m;
    static const int size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
        const char *s;
        size_t n;
        if (!sv_string(r, &s, &n)) return 0;
        if (!strcmp(key, "tokenizer.ggml.model")) sv_copy(sv->model, sizeof sv->model, s, n);
        if (!strcmp(key, "tokenizer.ggml.pre")) sv_copy(sv->pre, sizeof sv->pre, s, n);
        return 1;
    }
    if (type == 9) {
        uint64_t et;
        if (!sv_bin(r, 4, &et, &m) || m || !sv_bin(r, 8, &v, &m)) return 0;
        if (et == 8) {
            sv_strs tmp = {0}, *dst = &tmp;
            if (!strcmp(key, "tokenizer.ggml.tokens")) dst = &sv->tokens;
            if (!strcmp(key, "tokenizer.ggml.merges")) dst = &sv->merges;
            int ok = sv_strings(r, v, m, dst);
            free(tmp.s);
            free(tmp.len);
            return ok;
        }
        if ((et == 4 || et == 5) && !strcmp(key, "tokenizer.ggml.token_type")) {
            size_t n;
            return sv_int32s(r, v, m, &sv->types, &n) && n == sv->tokens.n;
        }
        return sv_skip_to_key(r);
    }
    if (type > 12 || !size[type]) return 0;
    if (type == 6 || type == 12) return sv_skip_to_key(r); /* a float: its bytes may be lost */
    if (!sv_bin(r, size[type], &v, &m)) return 0;
    int64_t id = m ? -3 : (int64_t)v;
    if (!strcmp(key, "tokenizer.ggml.bos_token_id")) sv->bos = id;
    if (!strcmp(key, "tokenizer.ggml.eos_token_id")) sv->eos = id;
    if (!strcmp(key, "tokenizer.ggml.unknown_token_id")) sv->unk = id;
    if (!strcmp(key, "tokenizer.ggml.padding_token_id")) sv->pad = id;
    if (!strcmp(key, "tokenizer.ggml.add_bos_token")) sv->add_bos = (int)v;
    if (!strcmp(key, "tokenizer.ggml.add_eos_token")) sv->add_eos = (int)v;
    if (!strcmp(key, "tokenizer.ggml.add_space_prefix")) sv->add_space_prefix = (int)v;
    return 1;
}

static inline int sv_walk(const unsigned char *b, size_t n, salvage *sv) {
    memset(sv, 0, sizeof *sv);
    sv->bos = sv->eos = sv->unk = sv->pad = -2;
    sv->add_bos = sv->add_eos = sv->add_space_prefix = -1;
    sv_in r = {b, n, 0};
    uint64_t magic, version, n_tensors, n_kv;
    unsigned m1, m2, m3, m4;
    if (!sv_bin(&r, 4, &magic, &m1) || !sv_bin(&r, 4, &version, &m2) || !sv_bin(&r, 8, &n_tensors, &m3) ||
        !sv_bin(&r, 8, &n_kv, &m4) || (m1 | m2 | m3 | m4) || magic != 0x46554747u || n_tensors)
        return 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        const char *k;
        size_t kl;
        uint64_t type;
        unsigned m;
        char key[160];
        if (!sv_string(&r, &k, &kl) || !sv_bin(&r, 4, &type, &m) || m) return 0;
        sv_copy(key, sizeof key, k, kl);
        if (!sv_value(&r, sv, key, (uint32_t)type)) return 0;
    }
    return sv->tokens.n > 0;
}

/* A damaged id is resolved to the control token it can be (e.g. <|endoftext|>). */
static inline int64_t sv_fix_id(const salvage *sv, int64_t id) {
    if (id != -3 || !sv->types) return id < -1 ? -1 : id;
    for (size_t i = 0; i < sv->tokens.n; i++)
        if (sv->types[i] == 3) return (int64_t)i; /* first control token */
    return -1;
}

/* llama2c's export writes SentencePiece pieces with U+2581 as ' ' and BOS/EOS as
 * "\n<s>\n" / "\n</s>\n"; compares modulo that. */
static inline int sv_same_piece(const char *gg, size_t gl, const char *l2, size_t ll, size_t id) {
    if (id == 1 || id == 2) return 1;
    size_t i = 0, j = 0;
    while (i < gl && j < ll) {
        if (gl - i >= 3 && !memcmp(gg + i, "\xe2\x96\x81", 3)) {
            if (l2[j] != ' ') return 0;
            i += 3;
        } else {
            if (gg[i] != l2[j]) return 0;
            i++;
        }
        j++;
    }
    return i == gl && j == ll;
}

/* Scores of the first tokens from llama2c-tokenizer.bin, when its texts match; the
 * rest (added special tokens) get 0. Returns NULL if the vocabularies differ. */
static inline float *sv_llama2c_scores(const char *path, const salvage *sv) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *scores = calloc(sv->tokens.n, sizeof *scores);
    int32_t maxlen;
    int ok = fread(&maxlen, 4, 1, f) == 1;
    size_t i = 0;
    char buf[1024];
    for (; ok && i < sv->tokens.n; i++) {
        float s;
        int32_t len;
        if (fread(&s, 4, 1, f) != 1 || fread(&len, 4, 1, f) != 1) break;
        ok = len >= 0 && (size_t)len < sizeof buf && fread(buf, 1, (size_t)len, f) == (size_t)len &&
             sv_same_piece(sv->tokens.s[i], sv->tokens.len[i], buf, (size_t)len, i);
        scores[i] = s;
    }
    fclose(f);
    if (!ok || i < 32000) {
        free(scores);
        return NULL;
    }
    return scores;
}

/* Writes the recovered vocabulary as a valid GGUF. */
static inline void sv_write(const salvage *sv, const float *scores, gw *w) {
    gw_begin(w, 0);
    gw_kv_string(w, "general.architecture", "vocab");
    gw_kv_string(w, "tokenizer.ggml.model", sv->model);
    if (sv->pre[0]) gw_kv_string(w, "tokenizer.ggml.pre", sv->pre);
    gw_kv_strings(w, "tokenizer.ggml.tokens", sv->tokens.s, sv->tokens.len, sv->tokens.n);
    if (scores) gw_kv_f32s(w, "tokenizer.ggml.scores", scores, sv->tokens.n);
    if (sv->types) gw_kv_i32s(w, "tokenizer.ggml.token_type", sv->types, sv->tokens.n);
    if (sv->merges.n) gw_kv_strings(w, "tokenizer.ggml.merges", sv->merges.s, sv->merges.len, sv->merges.n);
    const char *idk[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"};
    int64_t ids[4] = {sv->bos, sv->eos, sv->unk, sv->pad};
    for (int i = 0; i < 4; i++)
        if (ids[i] != -2 && sv_fix_id(sv, ids[i]) >= 0) gw_kv_u32(w, idk[i], (uint32_t)sv_fix_id(sv, ids[i]));
    if (sv->add_bos >= 0) gw_kv_bool(w, "tokenizer.ggml.add_bos_token", sv->add_bos);
    if (sv->add_eos >= 0) gw_kv_bool(w, "tokenizer.ggml.add_eos_token", sv->add_eos);
    if (sv->add_space_prefix >= 0) gw_kv_bool(w, "tokenizer.ggml.add_space_prefix", sv->add_space_prefix);
}

static inline void sv_free(salvage *sv) {
    free(sv->tokens.s);
    free(sv->tokens.len);
    free(sv->merges.s);
    free(sv->merges.len);
    free(sv->types);
}

#endif /* AK_TEST_VOCAB_SALVAGE_H */
