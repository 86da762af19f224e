/* `ak launch -np N [-H h1:s1,h2:s2 | --hostfile F] [-p SSH_PORT] [--no-prefix] [--] cmd ...`
 * (horovodrun's spellings accepted: -np, -H/--hosts, --hostfile, -p/--ssh-port, and the
 * long ones as --name=value too). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/launch.h"

static int usage(const char *why) {
    fprintf(stderr, "ak launch: %s\nusage: ak launch -np N [-H host1:slots,host2:slots | "
                    "--hostfile FILE] [-p SSH_PORT] [-x VAR]... [--no-prefix] [--] command [args...]\n"
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
        } else if (!strcmp(a, "--no-prefix")) {
            plan.prefix_output = 0;
        } else {
            char why[128];
            snprintf(why, sizeof why, "unknown option or missing value: '%.64s'", argv[i]);
            return usage(why);
        }
    }
    if (plan.np == 0) return usage("-np is required");
    if (i >= argc) return usage("no command to run");
    plan.argv = argv + i;
    return ak_launch_run(&plan);
}
