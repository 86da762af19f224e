/* Fuzz: what an elastic worker decodes from its launcher's rendezvous: the answer to its
 * request for a place ("ROUND RANK SIZE HOSTS" or "leave WHY", read from the store into
 * a 256-byte buffer and cut there, as elastic.c does). Any bytes must give a place that
 * holds together (0 <= rank < size, round and host version not negative, the prefix
 * naming the round), "leave", or a refusal: never a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bootstrap/elastic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char val[256];
    size_t n = size < sizeof val - 1 ? size : sizeof val - 1;
    memcpy(val, data, n);
    val[n] = '\0';
    ak__elastic_place place;
    long long hosts = -1;
    memset(&place, 0, sizeof place);
    int parsed = ak__elastic_parse_answer(val, &place, &hosts);
    if (parsed == 1 && strncmp(val, "leave", 5) != 0) abort();
    if (parsed == 0) {
        if (place.size < 1 || place.rank < 0 || place.rank >= place.size || place.round < 0 ||
            hosts < 0)
            abort();
        char prefix[32];
        snprintf(prefix, sizeof prefix, "e%d", place.round);
        if (strcmp(prefix, place.prefix) != 0) abort();
    }
    if (parsed < -1 || parsed > 1) abort();
    return 0;
}
