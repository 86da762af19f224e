/* `ak launch -np N [-H h1:s1,h2:s2 | --hostfile F] [-p SSH_PORT] [--no-prefix] [--] cmd ...`
 * and, elastic, [--min-np N] [--max-np N] [--host-discovery-script S] [--slots-per-host N]
 * [--elastic-timeout S] [--reset-limit N] [--blacklist-cooldown-range MIN MAX]
 * (horovodrun's spellings accepted: -np, -H/--hosts, --hostfile, -p/--ssh-port, the
 * elastic ones, and the long ones as --name=value too). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/launch.h"

static int usage(const char *why) {
    fprintf(stderr, "ak launch: %s\nusage: ak launch -np N [-H host1:slots,host2:slots | "
                    "--hostfile FILE] [-p SSH_PORT] [-x VAR]... [--no-prefix] [--] command [args...]\n"
                    "  elastic: [--min-np N] [--max-np N] [--host-discovery-script SCRIPT]\n"
                    "    [--slots-per-host N] [--elastic-timeout S] [--reset-limit N]\n"
                    "    [--blacklist-cooldown-range MIN MAX] (see docs/elastic.md)\n"
                    "  remote ranks get the environment (less the login session's own variables) in this\n"
                    "  directory; -x VAR forwards a session variable too, -x VAR=VALUE sets one\n", why);
    return AK_EXIT_ERROR;
}

/* The option's name in out; for "--name=value" returns the value, else NULL. */
static char *split_option(char *arg, char *out, size_t cap) {
    char *eq = strchr(arg, '=');
    if (strncmp(arg, "--", 2) != 0 || !eq || (size_t)(eq - arg) >= cap) {
        snprintf(out, cap, "%s", arg);
        return NULL;
    }
    memcpy(out, arg, (size_t)(eq - arg));
    out[eq - arg] = '\0';
    return eq + 1;
}

/* An option's value: the part after '=' or the next argument. */
#define VALUE() (inline_value ? inline_value : argv[++i])

int ak_cli_launch(int argc, char **argv) {
    static ak_launch_plan plan; /* large (host table): not on the stack */
    memset(&plan, 0, sizeof plan);
    plan.elastic.reset_limit = -1; /* unlimited; 0 = no change of membership at all */
    plan.prefix_output = 1;
    size_t v;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        char a[64];
        char *inline_value = split_option(argv[i], a, sizeof a); /* --num-proc=4 */
        int has_value = inline_value || i + 1 < argc;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if ((!strcmp(a, "-np") || !strcmp(a, "-n") || !strcmp(a, "--num-proc")) && has_value) {
            if (ak_cli_parse_size(VALUE(), &v) || v < 1 || v > 512) return usage("-np wants 1..512");
            plan.np = (int)v;
        } else if ((!strcmp(a, "-H") || !strcmp(a, "--hosts")) && has_value) {
            if (ak_launch_parse_hosts(VALUE(), &plan)) return usage("bad -H host list");
        } else if ((!strcmp(a, "--hostfile") || !strcmp(a, "-hostfile")) && has_value) {
            if (ak_launch_read_hostfile(VALUE(), &plan)) return usage("cannot read the hostfile");
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--ssh-port")) && has_value) {
            if (ak_cli_parse_size(VALUE(), &v) || v < 1 || v > 65535) return usage("bad ssh port");
            plan.ssh_port = (int)v;
        } else if (!strcmp(a, "-x") && has_value) { /* -x NAME or, as mpirun takes it, -x NAME=VALUE */
            if (plan.nexport == AK_LAUNCH_MAX_EXPORTS) return usage("too many -x variables");
            char *name = VALUE(), *value = strchr(name, '=');
            if (value) *value++ = '\0', setenv(name, value, 1);
            plan.export_vars[plan.nexport++] = name;
        } else if ((!strcmp(a, "--min-np") || !strcmp(a, "--min-num-proc")) && has_value) {
            if (ak_cli_parse_size(VALUE(), &v) || v < 1 || v > 512) return usage("--min-np wants 1..512");
            plan.elastic.min_np = (int)v, plan.elastic.enabled = 1;
        } else if ((!strcmp(a, "--max-np") || !strcmp(a, "--max-num-proc")) && has_value) {
            if (ak_cli_parse_size(VALUE(), &v) || v < 1 || v > 512) return usage("--max-np wants 1..512");
            plan.elastic.max_np = (int)v, plan.elastic.enabled = 1;
        } else if (!strcmp(a, "--host-discovery-script") && has_value) {
            plan.elastic.discovery = VALUE(), plan.elastic.enabled = 1;
        } else if (!strcmp(a, "--slots-per-host") && has_value) {
            if (ak_cli_parse_size(VALUE(), &v) || v < 1 || v > 512)
                return usage("--slots-per-host wants 1..512");
            plan.elastic.slots_per_host = (int)v;
        } else if (!strcmp(a, "--elastic-timeout") && has_value) {
            if (ak_cli_parse_size(VALUE(), &v) || v < 1 || v > 86400)
                return usage("--elastic-timeout wants 1..86400 s");
            plan.elastic.timeout_s = (int)v;
        } else if (!strcmp(a, "--reset-limit") && has_value) {
            if (ak_cli_parse_size(VALUE(), &v) || v > 1000000) return usage("bad --reset-limit");
            plan.elastic.reset_limit = (int)v;
        } else if (!strcmp(a, "--blacklist-cooldown-range") && i + 2 < argc) {
            size_t lo, hi;
            if (ak_cli_parse_size(argv[i + 1], &lo) || ak_cli_parse_size(argv[i + 2], &hi) || lo > hi ||
                hi > 86400)
                return usage("--blacklist-cooldown-range wants MIN MAX seconds, MIN <= MAX");
            plan.elastic.cooldown_min_s = (int)lo, plan.elastic.cooldown_max_s = (int)hi, i += 2;
        } else if (!strcmp(a, "--no-prefix")) {
            plan.prefix_output = 0;
        } else {
            char why[128];
            snprintf(why, sizeof why, "unknown option or missing value: '%.64s'", argv[i]);
            return usage(why);
        }
    }
    if (plan.np == 0 && plan.elastic.discovery) plan.np = plan.elastic.min_np ? plan.elastic.min_np : 1;
    if (plan.np == 0) return usage("-np is required");
    if (i >= argc) return usage("no command to run");
    plan.argv = argv + i;
    if (!plan.elastic.enabled) return ak_launch_run(&plan);
    const char *t = getenv("HOROVOD_ELASTIC_TIMEOUT");
    if (!plan.elastic.timeout_s && t && ak_cli_parse_size(t, &v) == 0 && v >= 1 && v <= 86400)
        plan.elastic.timeout_s = (int)v;
    return ak_launch_run_elastic(&plan);
}
