/* The model's own chat template: compiles it with the Jinja interpreter (jinja_*.c) and
 * renders it the way Hugging Face's apply_chat_template does — messages, tools (None
 * when not given), documents (None), add_generation_prompt, bos_token / eos_token and
 * any extra variables as the template's context. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/chat/chat.h"
#include "llm/chat/jinja.h"

struct ak_chat_template {
    jj_template *t;
};

/* Limits against hostile templates: generous for real chat templates (a few KiB of
 * output over tens of messages), small enough to stop a runaway one quickly. */
static const jj_limits k_limits = {
    .max_output = 64u << 20,
    .max_memory = 512u << 20,
    .max_iterations = 10u * 1000 * 1000,
    .max_depth = 64,
};

ak_status ak_chat_template_compile(const char *text, ak_chat_template **out) {
    AK_ENSURE_INIT();
    AK_ARG_CHECK(text != NULL, "text is NULL");
    AK_ARG_CHECK(out != NULL, "out is NULL");
    ak_chat_template *t = calloc(1, sizeof *t);
    if (!t) return AK_FAIL(AK_ERR_NO_MEMORY, "chat template: out of memory");
    ak_status st = ak__jj_compile(text, strlen(text), &t->t);
    if (st != AK_OK) {
        free(t);
        return st;
    }
    *out = t;
    return AK_OK;
}

void ak_chat_template_free(ak_chat_template *t) {
    if (!t) return;
    ak__jj_template_free(t->t);
    free(t);
}

/* JSON → value. JSON numbers without a fraction become ints (json.loads keeps "1.0" a
 * float; cJSON does not keep the text, so integral floats print as ints). */
static int from_json(jj_arena *a, const cJSON *j, jj_val *out, int depth) {
    if (depth > 200) return 0;
    if (cJSON_IsNull(j)) *out = jj_none();
    else if (cJSON_IsBool(j)) *out = jj_bool(cJSON_IsTrue(j));
    else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        *out = d == floor(d) && fabs(d) < 9007199254740992.0 ? jj_int((int64_t)d) : jj_float(d);
    } else if (cJSON_IsString(j)) {
        *out = jj_str(j->valuestring, strlen(j->valuestring));
    } else if (cJSON_IsArray(j)) {
        jj_list *l = ak__jj_list_new(a, (size_t)cJSON_GetArraySize(j));
        if (!l) return 0;
        for (const cJSON *e = j->child; e; e = e->next)
            if (!from_json(a, e, &l->v[l->n++], depth + 1)) return 0;
        *out = (jj_val){JJ_LIST, 0, {0}};
        out->u.l = l;
    } else if (cJSON_IsObject(j)) {
        jj_dict *d = ak__jj_dict_new(a);
        if (!d) return 0;
        for (const cJSON *e = j->child; e; e = e->next) {
            jj_val v;
            if (!from_json(a, e, &v, depth + 1) ||
                !ak__jj_dict_set(a, d, jj_str(e->string, strlen(e->string)), v))
                return 0;
        }
        *out = (jj_val){JJ_DICT, 0, {0}};
        out->u.d = d;
    } else {
        return 0;
    }
    return 1;
}

static int set_var(jj_arena *a, jj_dict *vars, const char *name, jj_val v) {
    return ak__jj_dict_set(a, vars, jj_str(name, strlen(name)), v);
}

ak_status ak__chat_template_render_json(const ak_chat_template *t, const cJSON *messages,
                                        const cJSON *tools, const cJSON *extra,
                                        int add_generation_prompt, const char *bos,
                                        const char *eos, int64_t now, char **text, size_t *len) {
    AK_ARG_CHECK(t != NULL && text != NULL && len != NULL, "chat template: NULL argument");
    AK_ARG_CHECK(cJSON_IsArray(messages), "chat template: messages must be a JSON array");
    AK_ARG_CHECK(!tools || cJSON_IsArray(tools) || cJSON_IsNull(tools),
                 "chat template: tools must be a JSON array");
    AK_ARG_CHECK(!extra || cJSON_IsObject(extra), "chat template: extra variables must be a "
                 "JSON object");
    jj_arena arena = {0};
    arena.limit = k_limits.max_memory;
    jj_dict *vars = ak__jj_dict_new(&arena);
    jj_val v;
    int ok = vars != NULL;
    if (ok && extra) /* first, so the named variables below win */
        for (const cJSON *e = extra->child; ok && e; e = e->next)
            ok = from_json(&arena, e, &v, 0) && set_var(&arena, vars, e->string, v);
    ok = ok && from_json(&arena, messages, &v, 0) && set_var(&arena, vars, "messages", v);
    if (ok && tools && !cJSON_IsNull(tools)) ok = from_json(&arena, tools, &v, 0);
    else v = jj_none();
    ok = ok && set_var(&arena, vars, "tools", v) && set_var(&arena, vars, "documents", jj_none());
    ok = ok && set_var(&arena, vars, "add_generation_prompt", jj_bool(add_generation_prompt));
    bos = bos ? bos : "";
    eos = eos ? eos : "";
    ok = ok && set_var(&arena, vars, "bos_token", jj_str(bos, strlen(bos)));
    ok = ok && set_var(&arena, vars, "eos_token", jj_str(eos, strlen(eos)));
    ak_status st = ok ? ak__jj_render(t->t, &arena, vars, &k_limits, now, text, len)
                      : AK_FAIL(AK_ERR_NO_MEMORY, "chat template: the context does not fit "
                                "in memory (or nests deeper than 200)");
    ak__jj_arena_free(&arena);
    return st;
}

static ak_status parse_json(const char *text, const char *what, cJSON **out) {
    *out = NULL;
    if (!text) return AK_OK;
    *out = cJSON_Parse(text);
    if (!*out) return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: %s is not valid JSON", what);
    return AK_OK;
}

ak_status ak_chat_template_render(const ak_chat_template *t, const ak_chat_render_opts *o,
                                  char *buf, size_t cap, size_t *len) {
    AK_ENSURE_INIT();
    AK_ARG_CHECK(t != NULL && o != NULL && len != NULL, "chat template: NULL argument");
    AK_ARG_CHECK(o->messages_json != NULL, "chat template: messages_json is NULL");
    AK_ARG_CHECK(buf != NULL || cap == 0, "buf is NULL with cap %zu", cap);
    cJSON *msgs = NULL, *tools = NULL, *extra = NULL;
    char *text = NULL;
    ak_status st;
    AK_CHECK_GOTO(st, parse_json(o->messages_json, "messages_json", &msgs));
    AK_CHECK_GOTO(st, parse_json(o->tools_json, "tools_json", &tools));
    AK_CHECK_GOTO(st, parse_json(o->extra_json, "extra_json", &extra));
    AK_CHECK_GOTO(st, ak__chat_template_render_json(t, msgs, tools, extra,
                                                    o->add_generation_prompt, o->bos_token,
                                                    o->eos_token, o->now, &text, len));
    if (*len > cap) {
        st = AK_FAIL(AK_ERR_INVALID_ARG, "chat: %zu bytes do not fit in %zu", *len, cap);
        goto fail;
    }
    if (cap) memcpy(buf, text, *len < cap ? *len + 1 : *len);
fail:
    free(text);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    cJSON_Delete(extra);
    return st;
}
