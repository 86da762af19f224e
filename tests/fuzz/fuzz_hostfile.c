/* Fuzz: `ak launch`'s host lists — a hostfile (--hostfile: "host slots=N" or "host:N"
 * lines, '#' comments) and the -H "h1:2,h2:2" text. Any input is parsed or refused, never
 * a crash or an overflow of the fixed host table; an accepted plan has 1..MAX hosts, each
 * with a non-empty NUL-terminated name and at least one slot, and a slot total that fits
 * the launcher's int. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/launch.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_plan(const ak_launch_plan *p) {
    if (p->nhosts < 1 || p->nhosts > AK_LAUNCH_MAX_HOSTS) abort();
    int64_t total = 0; /* the launcher adds the slots up in an int */
    for (int h = 0; h < p->nhosts; h++) {
        const ak_launch_host *x = &p->hosts[h];
        if (x->slots < 1 || !memchr(x->name, '\0', sizeof x->name) || !x->name[0]) abort();
        total += x->slots;
    }
    if (total > INT32_MAX) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ak_launch_plan plan; /* 33 KiB: not on the stack */
    memset(&plan, 0, sizeof plan);
    if (ak_launch_read_hostfile(fuzz_write_file("hostfile", data, size), &plan) == 0)
        check_plan(&plan);
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    memset(&plan, 0, sizeof plan);
    if (ak_launch_parse_hosts(text, &plan) == 0) check_plan(&plan);
    free(text);
    return 0;
}
