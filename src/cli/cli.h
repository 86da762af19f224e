/* The `ak` command: subcommand registry and small helpers shared by subcommands.
 *
 * Each layer adds its subcommands as lines in commands.def (top level) or bench.def
 * (`ak bench <domain>`), and implements `int ak_cli_<name>(int argc, char **argv)`.
 * Exit codes: 0 success, 1 the check/measurement failed, 2 usage or runtime error. */
#ifndef AK_CLI_CLI_H
#define AK_CLI_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"

enum { AK_EXIT_OK = 0, AK_EXIT_FAIL = 1, AK_EXIT_ERROR = 2 };

#define AK_CLI_COMMAND(name, usage, summary) int ak_cli_##name(int argc, char **argv);
#define AK_CLI_COMMAND_AS(name, fn, usage, summary) int ak_cli_##fn(int argc, char **argv);
#include "cli/commands.def"
#undef AK_CLI_COMMAND
#undef AK_CLI_COMMAND_AS
#define AK_BENCH_DOMAIN(name, usage, summary) int ak_bench_##name(int argc, char **argv);
#include "cli/bench.def"
#undef AK_BENCH_DOMAIN

/* `ak bench MODEL.onnx` (not a named domain: the model path selects it). */
int ak_bench_model(int argc, char **argv);
extern const char ak__bench_model_summary[];

/* The subcommand being run ("compare", "bench kernels"; set by ak_cli_parse), which
 * every error message names; NULL before one is chosen. */
extern const char *ak__cli_current;
/* Usage and summary of a registered subcommand or "bench <domain>"; 0 when found. */
int ak__cli_lookup(const char *name, const char **usage, const char **summary);

/* Prints "ak SUBCOMMAND: <what>: <status>: <last error>" to stderr; returns AK_EXIT_ERROR. */
int ak_cli_report(const char *what, ak_status st);
/* Prints "ak SUBCOMMAND: <message>" to stderr; returns AK_EXIT_ERROR. */
int ak_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a whole non-negative decimal; 0 on success. */
int ak_cli_parse_size(const char *text, size_t *out);
/* Parses "MxNxK" (also with '×' or ','); 0 on success. */
int ak_cli_parse_shape3(const char *text, size_t out[3]);
/* JSON output: prints root unformatted on one line of stdout and frees it; 0 on success.
 * ak_cli_json_round adds a number rounded to `decimals` places (as "%.2f" printed it). */
struct cJSON;
int ak_cli_print_json(struct cJSON *root);
void ak_cli_json_round(struct cJSON *obj, const char *key, double value, int decimals);
/* A JSON string of text from a file (names in a model): bytes that are not valid UTF-8
 * become '?', so the output stays valid JSON; NULL text gives null. */
struct cJSON *ak_cli_json_text(const char *text);

double ak_cli_median(double *values, size_t n); /* sorts values in place */
/* Threads for benchmarks: AK_NUM_THREADS if set, else 1 (benchmarks default to one core
 * so figures compare with single-threaded peers). */
int ak_cli_bench_threads(void);

#endif /* AK_CLI_CLI_H */
