/* Tools (function calling) of the OpenAI chat API: the request's "tools", "tool_choice"
 * and "parallel_tool_calls" validated, assistant "tool_calls" and role "tool" messages
 * checked and handed to the chat template as it expects them, the tool-call format of a
 * model recognized from its template text, the calls parsed out of generated text (a
 * streaming parser that holds back what could still become a call), their JSON, and the
 * GBNF grammar that forces a call (tool_choice "required" or a named function).
 * No I/O, no engine: all of it is unit-testable. */
#ifndef AK_LLM_SERVER_TOOLS_H
#define AK_LLM_SERVER_TOOLS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "accelkit/llm.h"
#include "llm/server/detok.h"

struct ak__oai_error;

/* How a model writes its calls (recognized from its chat template). */
typedef enum ak__tool_format {
    AK__TOOLS_NONE = 0, /* no known format: tools are refused */
    AK__TOOLS_HERMES,   /* <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Qwen, Hermes) */
    AK__TOOLS_LLAMA3,   /* [<|python_tag|>]{"name": ..., "parameters": {...}} (Llama 3.1+) */
    AK__TOOLS_MISTRAL,  /* [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...] */
} ak__tool_format;

typedef enum ak__tool_choice {
    AK__TOOL_CHOICE_AUTO = 0,
    AK__TOOL_CHOICE_NONE,
    AK__TOOL_CHOICE_REQUIRED,
    AK__TOOL_CHOICE_NAMED,
} ak__tool_choice;

/* The request's tool fields (pointers into the parsed body). */
typedef struct ak__oai_tools {
    const cJSON *tools;      /* the "tools" array, NULL when absent or empty */
    size_t n_tools;
    ak__tool_choice choice;
    const char *named;       /* AK__TOOL_CHOICE_NAMED: the function */
    int parallel;            /* parallel_tool_calls (default 1) */
    int has_tool_messages;   /* a role "tool" message or assistant tool_calls are present */
} ak__oai_tools;

/* The format of a Jinja chat template's tool calls; AK__TOOLS_NONE when none is known. */
ak__tool_format ak__tools_detect(const char *template_text);
const char *ak__tools_format_name(ak__tool_format f);

/* Validates "tools", "tool_choice", "parallel_tool_calls" of a chat body into `out`.
 * AK_ERR_INVALID_ARG with err filled (param names the field) on a malformed one. */
ak_status ak__tools_parse_request(const cJSON *body, ak__oai_tools *out,
                                  struct ak__oai_error *err);

/* Checks the tool parts of messages[i]: role "tool" needs tool_call_id and content;
 * assistant "tool_calls" need id, type "function", function.name and function.arguments
 * (a string). *is_tool_msg = 1 when the message carries either. */
ak_status ak__tools_check_message(const cJSON *m, size_t i, int *is_tool_msg,
                                  struct ak__oai_error *err);

/* The messages as the chat template sees them: each raw message of the body with its
 * role and content replaced by the parsed ones (developer -> system, parts joined), and
 * tool_calls[].function.arguments strings parsed into objects (what templates expect,
 * as vLLM and llama.cpp do); assistant content null next to tool_calls stays null. */
ak_status ak__tools_template_messages(const cJSON *raw_messages, const ak_chat_message *parsed,
                                      size_t n, cJSON **out);

/* ---- calls out of generated text ------------------------------------------------------ */

typedef struct ak__tool_call {
    char id[40];
    char *name;      /* malloc'd */
    char *arguments; /* malloc'd JSON text of an object */
} ak__tool_call;

/* Incremental parser of one sample's text. Text that cannot belong to a call is content
 * as soon as that is certain; text that could still be (the start of) a call marker or
 * of a call is held back until decided. A call whose JSON does not parse or whose function
 * is not among the tools stays content. Whitespace-only content is dropped when calls
 * were made. */
typedef struct ak__tool_parser {
    ak__tool_format fmt;
    const cJSON *tools;       /* borrowed: names are checked against it */
    int parallel;
    ak__bytes text;           /* every byte pushed */
    size_t pos;               /* text[0..pos) is decided */
    ak__bytes ws;             /* decided whitespace-only content not yet handed out */
    int bare_open;            /* a bare call ({ or [) may start: nothing but space so far */
    int done;                 /* a call block parsed and !parallel: the rest is content */
    ak__tool_call *calls;
    size_t n_calls, cap_calls;
    uint64_t rng;
} ak__tool_parser;

void ak__tool_parser_init(ak__tool_parser *p, ak__tool_format fmt, const cJSON *tools,
                          int parallel, uint64_t seed);
void ak__tool_parser_free(ak__tool_parser *p);
/* Feeds text[0..n); appends the content now decided to `content`. With `final`, nothing
 * is held back any more. New calls are p->calls[old n_calls..). */
ak_status ak__tool_parser_push(ak__tool_parser *p, const char *text, size_t n, int final,
                               ak__bytes *content);

/* OpenAI's tool_calls array for calls[0..n), their indices starting at `first_index`:
 * part 0: whole calls (message); 1: a delta's first chunk of each (index, id, type,
 * function.name, arguments ""); 2: a delta's arguments (index, function.arguments). */
cJSON *ak__tools_calls_json(const ak__tool_call *calls, size_t n, int32_t first_index,
                            int part);

/* ---- forced calls ---------------------------------------------------------------------- */

/* GBNF rules of a JSON schema: every rule named with `prefix`, the top one exactly
 * `prefix`, no root (the grammar machinery's ak__json_schema_rules). */
typedef ak_status (*ak__schema_rules_fn)(const char *schema_json, size_t len, const char *prefix,
                                         char **gbnf);

/* The grammar of a forced call in format `fmt`: one call of the named function (or of any
 * tool with "required"), several in a row when t->parallel and "required". Mistral's
 * [TOOL_CALLS] marker is a control token, so the grammar writes the bare array. A tool's
 * schema the converter refuses gives AK_ERR_INVALID_ARG with err on tools[i]. *gbnf is
 * malloc'd. */
ak_status ak__tools_gbnf(ak__tool_format fmt, const ak__oai_tools *t, ak__schema_rules_fn rules,
                         char **gbnf, struct ak__oai_error *err);

#endif /* AK_LLM_SERVER_TOOLS_H */
