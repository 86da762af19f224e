/* Inside the chat templates: rendering a compiled template from already parsed JSON
 * (the server hands over its request's "messages" and "tools" as they came). */
#ifndef AK_LLM_CHAT_CHAT_H
#define AK_LLM_CHAT_CHAT_H

#include <cjson/cJSON.h>

#include "accelkit/llm.h"

/* messages: a JSON array; tools, extra (an object of more variables): NULL for none.
 * *text is malloc'ed and NUL-terminated. */
ak_status ak__chat_template_render_json(const ak_chat_template *t, const cJSON *messages,
                                        const cJSON *tools, const cJSON *extra,
                                        int add_generation_prompt, const char *bos,
                                        const char *eos, int64_t now, char **text, size_t *len);

#endif /* AK_LLM_CHAT_CHAT_H */
