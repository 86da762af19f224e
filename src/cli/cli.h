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
#include "cli/commands.def"
#undef AK_CLI_COMMAND
#define AK_BENCH_DOMAIN(name, usage, summary) int ak_bench_##name(int argc, char **argv);
#include "cli/bench.def"
#undef AK_BENCH_DOMAIN

/* `ak bench MODEL.onnx` (not a named domain: the model path selects it). */
int ak_bench_model(int argc, char **argv);

/* Prints "ak: <what>: <status>: <last error>" to stderr and returns AK_EXIT_ERROR. */
int ak_cli_report(const char *what, ak_status st);
/* Parses a whole non-negative decimal; 0 on success. */
int ak_cli_parse_size(const char *text, size_t *out);
/* Parses "MxNxK" (also with '×' or ','); 0 on success. */
int ak_cli_parse_shape3(const char *text, size_t out[3]);
double ak_cli_median(double *values, size_t n); /* sorts values in place */
/* Threads for benchmarks: AK_NUM_THREADS if set, else 1 (benchmarks default to one core
 * so figures compare with single-threaded peers). */
int ak_cli_bench_threads(void);

#endif /* AK_CLI_CLI_H */
