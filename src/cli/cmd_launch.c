/* `ak launch -np N [-H h1:s1,h2:s2 | --hostfile F] [-p SSH_PORT] [--no-prefix] [--] cmd ...`
 * and, elastic, [--min-np N] [--max-np N] [--host-discovery-script S] [--slots-per-host N]
 * [--elastic-timeout S] [--reset-limit N] [--blacklist-cooldown-range MIN MAX]
 * (horovodrun's spellings accepted: -np, -H/--hosts, --hostfile, -p/--ssh-port, the
 * elastic ones, and the long ones as --name=value too). Options end at the command. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/launch.h"

/* Flag values as parsed, before they become the plan (ranges checked by the table). */
typedef struct launch_args {
    ak_launch_plan *plan;
    long np, ssh_port, min_np, max_np, slots_per_host, timeout_s, reset_limit;
    const char *hosts, *hostfile, *discovery;
    int no_prefix;
} launch_args;

/* -x NAME forwards a session variable to remote ranks; -x NAME=VALUE sets it too (as
 * mpirun takes it). */
static const char *parse_export(void *dest, char *value, ak_opt_more *more) {
    ak_launch_plan *plan = dest;
    (void)more;
    if (plan->nexport == AK_LAUNCH_MAX_EXPORTS) return "too many -x variables";
    char *eq = strchr(value, '=');
    if (eq == value) return "want NAME or NAME=VALUE";
    if (eq) *eq = '\0', setenv(value, eq + 1, 1);
    plan->export_vars[plan->nexport++] = value;
    return NULL;
}

/* --blacklist-cooldown-range MIN MAX: the flag's value and the argument after it. */
static const char *parse_cooldown(void *dest, char *value, ak_opt_more *more) {
    ak_launch_elastic *e = dest;
    char *max_text = ak_opt_take(more);
    long lo, hi;
    if (!max_text || ak_cli_parse_long(value, 0, 86400, &lo) || ak_cli_parse_long(max_text, 0, 86400, &hi) || lo > hi)
        return "want MIN MAX seconds, 0 <= MIN <= MAX <= 86400";
    e->cooldown_min_s = (int)lo, e->cooldown_max_s = (int)hi;
    return NULL;
}

static const char k_notes[] =
    "remote ranks get the environment (less the login session's own variables) in this\n"
    "directory. Elastic jobs (--min-np, --max-np, --host-discovery-script): docs/elastic.md.\n"
    "horovodrun's spellings are accepted: -np, -H/--hosts, --hostfile, -p/--ssh-port.";

/* Turns the parsed flags into the plan; AK_CLI_CONTINUE or a usage error. */
static int build_plan(const ak_cli_cmd *cmd, const launch_args *a, ak_launch_plan *plan) {
    if (a->hosts && ak_launch_parse_hosts(a->hosts, plan))
        return ak_cli_usage_error(cmd, "bad -H host list '%s' (want host1:slots,host2:slots)", a->hosts);
    if (a->hostfile && ak_launch_read_hostfile(a->hostfile, plan))
        return ak_cli_usage_error(cmd, "cannot read the hostfile '%s'", a->hostfile);
    plan->np = (int)a->np;
    plan->ssh_port = (int)a->ssh_port;
    plan->prefix_output = !a->no_prefix;
    plan->elastic.min_np = (int)a->min_np;
    plan->elastic.max_np = (int)a->max_np;
    plan->elastic.discovery = a->discovery;
    plan->elastic.slots_per_host = (int)a->slots_per_host;
    plan->elastic.timeout_s = (int)a->timeout_s;
    plan->elastic.reset_limit = (int)a->reset_limit;
    plan->elastic.enabled = a->min_np || a->max_np || a->discovery;
    if (plan->np == 0 && plan->elastic.discovery) plan->np = plan->elastic.min_np ? plan->elastic.min_np : 1;
    if (plan->np == 0) return ak_cli_usage_error(cmd, "-np is required");
    return AK_CLI_CONTINUE;
}

int ak_cli_launch(int argc, char **argv) {
    static ak_launch_plan plan; /* large (host table): not on the stack */
    memset(&plan, 0, sizeof plan);
    launch_args a = {.plan = &plan, .reset_limit = -1}; /* -1: unlimited; 0: no change at all */
    const ak_opt opts[] = {
        {"np|num-proc", 'n', AK_OPT_INT, &a.np, "N", .help = "number of ranks (required unless a discovery script gives them)", .min = 1, .max = 512},
        {"hosts", 'H', AK_OPT_STRING, &a.hosts, "HOST:SLOTS,...", .help = "hosts and their slots, filled in order (default: all ranks here)"},
        {"hostfile", 0, AK_OPT_STRING, &a.hostfile, "FILE", .help = "hosts, one a line: 'host slots=N' or 'host:N', '#' comments"},
        {"ssh-port", 'p', AK_OPT_INT, &a.ssh_port, "PORT", .help = "ssh port of remote hosts (default: ssh's)", .min = 1, .max = 65535},
        {NULL, 'x', AK_OPT_CUSTOM, &plan, "VAR[=VALUE]", "forward a session variable to remote ranks too; VAR=VALUE also sets it (repeatable)", .parse = parse_export},
        {"no-prefix", 0, AK_OPT_FLAG, &a.no_prefix, .help = "do not start each output line with \"[rank] \""},
        {"min-np|min-num-proc", 0, AK_OPT_INT, &a.min_np, "N", .help = "elastic: fewest ranks the job runs with", .min = 1, .max = 512},
        {"max-np|max-num-proc", 0, AK_OPT_INT, &a.max_np, "N", .help = "elastic: most ranks (default: -np, or unbounded with a discovery script)", .min = 1, .max = 512},
        {"host-discovery-script", 0, AK_OPT_STRING, &a.discovery, "SCRIPT", .help = "elastic: prints the available hosts, one 'host[:slots]' a line"},
        {"slots-per-host", 0, AK_OPT_INT, &a.slots_per_host, "N", .help = "elastic: slots of discovered hosts without ':slots'", .min = 1, .max = 512},
        {"elastic-timeout", 0, AK_OPT_INT, &a.timeout_s, "S", .help = "elastic: seconds to wait for enough hosts (default: HOROVOD_ELASTIC_TIMEOUT, else 600)", .min = 1, .max = 86400},
        {"reset-limit", 0, AK_OPT_INT, &a.reset_limit, "N", .help = "elastic: membership changes allowed after the first round (default: unlimited)", .min = 0, .max = 1000000},
        {"blacklist-cooldown-range", 0, AK_OPT_CUSTOM, &plan.elastic, "MIN MAX", "elastic: a failed host is left out for MIN..MAX seconds (default: for good)", .parse = parse_cooldown},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "launch", .opts = opts, .flags = AK_CMD_OPTIONS_FIRST, .notes = k_notes};
    int first, rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if ((rc = build_plan(&cmd, &a, &plan)) != AK_CLI_CONTINUE) return rc;
    if (first >= argc) return ak_cli_usage_error(&cmd, "no command to run");
    plan.argv = argv + first;
    if (ak_launch_job_secret() != 0) return 2;
    if (!plan.elastic.enabled) return ak_launch_run(&plan);
    const char *t = getenv("HOROVOD_ELASTIC_TIMEOUT");
    long v;
    if (!plan.elastic.timeout_s && t && ak_cli_parse_long(t, 1, 86400, &v) == 0) plan.elastic.timeout_s = (int)v;
    return ak_launch_run_elastic(&plan);
}
