/* Benchmark results as JSON lines in a results folder (`ak bench ... --out DIR`, default
 * bench-results/), each line one engine's figures for one parameter set, in the common
 * envelope `ak report` reads (docs/report.md):
 *   {"schema":"accelkit.bench/1","benchmark":"kernels.sgemm","machine":{...},
 *    "accelkit":{"version","commit"},"peer":null|{"name","version"},
 *    "params":{...},"figures":{...},"timestamp":"2026-11-28T19:30:00Z"}
 * The shell and Python harnesses write the same lines through bench/results.py. */
#ifndef AK_CLI_BENCH_RESULTS_H
#define AK_CLI_BENCH_RESULTS_H

#include <stdio.h>

struct cJSON;

#define AK_BENCH_SCHEMA "accelkit.bench/1"
#define AK_BENCH_OUT_DEFAULT "bench-results"

typedef struct ak__bench_out {
    FILE *file;            /* NULL: writing is off (--out none) or failed */
    struct cJSON *machine; /* the envelope's "machine", shared by every line */
    char path[4096];
} ak__bench_out;

/* Opens DIR/STEM.jsonl for appending (DIR created if missing); dir "none" turns writing
 * off. fma_peak (GFLOP/s per core) and memory_gbps are the bench's own measurements, or
 * <= 0 to have them measured here. Returns 0, or an exit code after printing why. */
int ak__bench_out_open(ak__bench_out *out, const char *dir, const char *stem, double fma_peak,
                       double memory_gbps);
/* Appends one line; takes ownership of params and figures. peer NULL: accelkit's own
 * figures; otherwise the peer's name and version (NULL version: "unknown"). */
void ak__bench_out_add(ak__bench_out *out, const char *benchmark, const char *peer,
                       const char *peer_version, struct cJSON *params, struct cJSON *figures);
/* Closes the file (an error said on stderr). */
void ak__bench_out_close(ak__bench_out *out);

/* The accelkit commit this binary was configured from ("unknown" outside git). */
extern const char ak__build_commit[];

#endif /* AK_CLI_BENCH_RESULTS_H */
