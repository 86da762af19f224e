/* The C writer of benchmark results lines (bench_results.h): the envelope around each
 * engine's figures, appended to DIR/STEM.jsonl. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "accelkit/kernels.h"
#include "cli/bench_results.h"
#include "cli/cli.h"

#ifndef AK_BUILD_COMMIT
#define AK_BUILD_COMMIT "unknown"
#endif
const char ak__build_commit[] = AK_BUILD_COMMIT;

/* mkdir -p for a relative or absolute folder. */
static int make_dirs(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return -1;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(path, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static cJSON *machine_json(double fma_peak, double memory_gbps) {
    ak_cpu_info cpu;
    if (ak_cpu_get_info(&cpu) != AK_OK) memset(&cpu, 0, sizeof cpu);
    if (fma_peak <= 0) ak_measure_fma_peak(50, &fma_peak);
    if (memory_gbps <= 0) ak_measure_memcpy((size_t)16 << 20, &memory_gbps);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "cpu", cpu.brand[0] ? cpu.brand : "unknown");
    cJSON_AddNumberToObject(m, "cores", cpu.logical_cores);
    cJSON_AddStringToObject(m, "isa", ak_isa_name(cpu.active_isa));
    cJSON_AddStringToObject(m, "family", ak_cpu_family_name(cpu.family));
    ak_cli_json_round(m, "fma_peak_gflops_per_core", fma_peak, 2);
    ak_cli_json_round(m, "memory_gbps", memory_gbps, 2);
    return m;
}

int ak__bench_out_open(ak__bench_out *out, const char *dir, const char *stem, double fma_peak,
                       double memory_gbps) {
    memset(out, 0, sizeof *out);
    if (!dir || !strcmp(dir, "none")) return 0;
    if (make_dirs(dir) != 0) return ak_cli_error("--out %s: cannot create it: %s", dir, strerror(errno));
    snprintf(out->path, sizeof out->path, "%s/%s.jsonl", dir, stem);
    out->file = fopen(out->path, "a");
    if (!out->file) return ak_cli_error("--out: cannot write %s: %s", out->path, strerror(errno));
    out->machine = machine_json(fma_peak, memory_gbps);
    return 0;
}

void ak__bench_out_add(ak__bench_out *out, const char *benchmark, const char *peer,
                       const char *peer_version, cJSON *params, cJSON *figures) {
    if (!out->file) {
        cJSON_Delete(params), cJSON_Delete(figures);
        return;
    }
    char stamp[32];
    time_t now = time(NULL);
    struct tm utc;
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &utc));
    cJSON *line = cJSON_CreateObject();
    cJSON_AddStringToObject(line, "schema", AK_BENCH_SCHEMA);
    cJSON_AddStringToObject(line, "benchmark", benchmark);
    cJSON_AddItemToObject(line, "machine", cJSON_Duplicate(out->machine, 1));
    cJSON *ak = cJSON_AddObjectToObject(line, "accelkit");
    cJSON_AddStringToObject(ak, "version", AK_VERSION_STRING);
    cJSON_AddStringToObject(ak, "commit", ak__build_commit);
    if (peer) {
        cJSON *p = cJSON_AddObjectToObject(line, "peer");
        cJSON_AddStringToObject(p, "name", peer);
        cJSON_AddStringToObject(p, "version", peer_version ? peer_version : "unknown");
    } else {
        cJSON_AddNullToObject(line, "peer");
    }
    cJSON_AddItemToObject(line, "params", params ? params : cJSON_CreateObject());
    cJSON_AddItemToObject(line, "figures", figures ? figures : cJSON_CreateObject());
    cJSON_AddStringToObject(line, "timestamp", stamp);
    char *text = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    if (text) fprintf(out->file, "%s\n", text);
    cJSON_free(text);
}

void ak__bench_out_close(ak__bench_out *out) {
    if (!out->file) return;
    /* nothing said on success: --json output stays JSON, even with 2>&1 */
    if (fclose(out->file) != 0) ak_cli_error("--out: writing %s failed", out->path);
    cJSON_Delete(out->machine);
    out->file = NULL;
}
