/* Fuzz: the text parsers behind AK_LOG, AK_LOG_SUBSYS and AK_ISA must accept or reject
 * any string with a status, never crash, and agree with themselves on accepted input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/ak.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    ak_log_level level;
    uint32_t mask;
    ak_isa isa;
    if (ak_log_parse_level(text, &level) == AK_OK && (level < AK_LOG_OFF || level > AK_LOG_TRACE))
        abort();
    if (ak_log_parse_subsystems(text, &mask) == AK_OK && (mask & ~(uint32_t)AK_SUBSYS_ALL)) abort();
    if (ak_isa_parse(text, &isa) == AK_OK && (unsigned)isa >= AK_ISA_COUNT_) abort();
    if (ak_last_error() == NULL) abort();
    free(text);
    return 0;
}
