/* `ak launch -np N [-H h1:s1,h2:s2 | --hostfile F] [-p SSH_PORT] [--no-prefix] [--] cmd ...`
 * (horovodrun's spellings accepted: -np, -H/--hosts, --hostfile, -p/--ssh-port). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/launch.h"

static int usage(const char *why) {
    fprintf(stderr, "ak launch: %s\nusage: ak launch -np N [-H host1:slots,host2:slots | "
                    "--hostfile FILE] [-p SSH_PORT] [-x VAR]... [--no-prefix] [--] command [args...]\n"
                    "  remote ranks get AK_*, HOROVOD_*, OMP_*, PYTHONPATH, LD_LIBRARY_PATH and each -x VAR\n", why);
    return AK_EXIT_ERROR;
}

int ak_cli_launch(int argc, char **argv) {
    static ak_launch_plan plan; /* large (host table): not on the stack */
    memset(&plan, 0, sizeof plan);
    plan.prefix_output = 1;
    size_t v;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if ((!strcmp(a, "-np") || !strcmp(a, "-n") || !strcmp(a, "--num-proc")) && has_value) {
            if (ak_cli_parse_size(argv[++i], &v) || v < 1 || v > 512) return usage("-np wants 1..512");
            plan.np = (int)v;
        } else if ((!strcmp(a, "-H") || !strcmp(a, "--hosts")) && has_value) {
            if (ak_launch_parse_hosts(argv[++i], &plan)) return usage("bad -H host list");
        } else if ((!strcmp(a, "--hostfile") || !strcmp(a, "-hostfile")) && has_value) {
            if (ak_launch_read_hostfile(argv[++i], &plan)) return usage("cannot read the hostfile");
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--ssh-port")) && has_value) {
            if (ak_cli_parse_size(argv[++i], &v) || v < 1 || v > 65535) return usage("bad ssh port");
            plan.ssh_port = (int)v;
        } else if (!strcmp(a, "-x") && has_value) {
            if (plan.nexport == AK_LAUNCH_MAX_EXPORTS) return usage("too many -x variables");
            plan.export_vars[plan.nexport++] = argv[++i];
        } else if (!strcmp(a, "--no-prefix")) {
            plan.prefix_output = 0;
        } else {
            return usage("unknown option");
        }
    }
    if (plan.np == 0) return usage("-np is required");
    if (i >= argc) return usage("no command to run");
    plan.argv = argv + i;
    return ak_launch_run(&plan);
}
