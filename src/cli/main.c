/* `ak`: entry point and dispatch to the registered subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct cli_entry {
    const char *name, *usage, *summary;
    int (*run)(int argc, char **argv);
} cli_entry;

static const cli_entry commands[] = {
#define AK_CLI_COMMAND(name, usage, summary) {#name, usage, summary, ak_cli_##name},
#define AK_CLI_COMMAND_AS(name, fn, usage, summary) {#name, usage, summary, ak_cli_##fn},
#include "cli/commands.def"
#undef AK_CLI_COMMAND
#undef AK_CLI_COMMAND_AS
};

static const cli_entry bench_domains[] = {
#define AK_BENCH_DOMAIN(name, usage, summary) {#name, usage, summary, ak_bench_##name},
#include "cli/bench.def"
#undef AK_BENCH_DOMAIN
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void print_entries(FILE *out, const cli_entry *entries, size_t n) {
    for (size_t i = 0; i < n; i++) fprintf(out, "  %-10s %s\n", entries[i].name, entries[i].summary);
}

static void print_help(FILE *out) {
    fprintf(out,
            "ak %s: the accelkit command\n\n"
            "usage: ak <command> [options]   (ak <command> --help for its options)\n\n"
            "commands:\n",
            AK_VERSION_STRING);
    print_entries(out, commands, COUNT(commands));
    fprintf(out, "\nenvironment: `ak config` lists every AK_* variable.\n");
}

static int is_help(const char *arg) {
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 || strcmp(arg, "help") == 0;
}

static const cli_entry *find(const cli_entry *entries, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(entries[i].name, name) == 0) return &entries[i];
    return NULL;
}

int ak__cli_lookup(const char *name, const char **usage, const char **summary) {
    const cli_entry *e = NULL;
    if (strncmp(name, "bench ", 6) == 0) e = find(bench_domains, COUNT(bench_domains), name + 6);
    else e = find(commands, COUNT(commands), name);
    if (!e) return -1;
    *usage = e->usage, *summary = e->summary;
    return 0;
}

int ak_cli_bench(int argc, char **argv) {
    if (argc < 2 || is_help(argv[1])) {
        FILE *out = argc < 2 ? stderr : stdout;
        fprintf(out, "usage: ak bench <domain> [options]\n\ndomains:\n");
        print_entries(out, bench_domains, COUNT(bench_domains));
        fprintf(out, "  %-10s %s\n", "MODEL.onnx", ak__bench_model_summary);
        fprintf(out, "\n(ak bench <domain> --help lists its options)\n");
        return argc < 2 ? AK_EXIT_ERROR : AK_EXIT_OK;
    }
    const cli_entry *e = find(bench_domains, COUNT(bench_domains), argv[1]);
    size_t len = strlen(argv[1]);
    if (!e && len > 5 && strcmp(argv[1] + len - 5, ".onnx") == 0) /* ak bench MODEL.onnx */
        return ak_bench_model(argc, argv);
    if (!e) {
        fprintf(stderr, "ak bench: unknown domain '%s' (ak bench --help lists them)\n", argv[1]);
        return AK_EXIT_ERROR;
    }
    return e->run(argc - 1, argv + 1);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help(stderr);
        return AK_EXIT_ERROR;
    }
    if (is_help(argv[1])) {
        print_help(stdout);
        return AK_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) return ak_cli_version(argc - 1, argv + 1);
    const cli_entry *e = find(commands, COUNT(commands), argv[1]);
    if (!e) {
        fprintf(stderr, "ak: unknown command '%s' (ak --help lists them)\n", argv[1]);
        return AK_EXIT_ERROR;
    }
    return e->run(argc - 1, argv + 1);
}
