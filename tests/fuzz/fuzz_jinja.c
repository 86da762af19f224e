/* Fuzz: any text given as a chat template is compiled or refused with a status, and a
 * compiled one renders a fixed conversation or refuses it — never a crash, a hang past
 * the interpreter's limits, or a status without a message. The input is split at the
 * first NUL: the template, then the messages JSON (a default conversation if none). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/llm.h"

static const char k_default_messages[] =
    "[{\"role\":\"system\",\"content\":\"sys\"},{\"role\":\"user\",\"content\":\"hi \xc3\xa9\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{\"name\":\"f\","
    "\"arguments\":{\"a\":1}}}]}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 2);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = text[size + 1] = '\0';
    size_t tlen = strlen(text);
    const char *messages = tlen < size ? text + tlen + 1 : k_default_messages;
    ak_chat_template *t = NULL;
    ak_status st = ak_chat_template_compile(text, &t);
    if (st != AK_OK) {
        if (!ak_last_error() || !ak_last_error()[0]) abort();
        free(text);
        return 0;
    }
    ak_chat_render_opts o = {messages, "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]",
                             NULL, 1, "<s>", "</s>", 1721952000};
    size_t len = 0;
    char buf[256];
    st = ak_chat_template_render(t, &o, buf, sizeof buf, &len);
    if (st != AK_OK && (!ak_last_error() || !ak_last_error()[0])) abort();
    /* the size protocol: OK only when it fits, NUL-terminated when there is room */
    if (st == AK_OK && (len > sizeof buf || (len < sizeof buf && strlen(buf) > len))) abort();
    ak_chat_template_free(t);
    free(text);
    return 0;
}
