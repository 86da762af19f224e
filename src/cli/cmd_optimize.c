/* `ak optimize IN.onnx OUT.onnx [--level basic|extended|layout]`: runs the graph
 * optimizer on a model and writes the graph it leaves as an ONNX file, listing what it
 * changed. basic keeps to standard ONNX operators (the file runs anywhere, ONNX Runtime
 * included); extended and layout also write accelkit's fused operators, in the
 * "ai.accelkit" domain, which only accelkit reads. */
#include <stdio.h>
#include <string.h>

#include "accelkit/infer.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"

static size_t node_count(const ak_model *m) {
    ak_model_summary s;
    return ak_model_get_summary(m, &s) == AK_OK ? s.num_nodes : 0;
}

/* What the optimizer did, one line per pass or fused operator. */
static void print_changes(const ak_session *s) {
    ak_session_memory mem;
    if (ak_session_get_memory(s, &mem) == AK_OK && mem.num_folded)
        printf("  %-40s %zu\n", "nodes folded into constants", mem.num_folded);
    size_t count = 0;
    ak_session_optimizations(s, 0, NULL, NULL, &count);
    for (size_t i = 0; i < count; i++) {
        const char *what;
        size_t times;
        if (ak_session_optimizations(s, i, &what, &times, NULL) == AK_OK)
            printf("  %-40s %zu\n", what, times);
    }
    if (count == 0 && mem.num_folded == 0) printf("  (nothing to change)\n");
}

int ak_cli_optimize(int argc, char **argv) {
    int level = 0, first;
    const ak_opt opts[] = {
        {"level", 0, AK_OPT_ENUM, &level, "LEVEL", .def = "basic",
         .choices = "basic|extended|layout",
         .help = "basic: standard ONNX operators only (folding, dead and duplicate nodes, "
                 "Conv+BatchNormalization/Mul/Add, Identity/Transpose/Reshape pairs); "
                 "extended: also accelkit's fused operators (ai.accelkit domain); layout: also "
                 "the blocked-layout convolutions"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "optimize", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (argc - first != 2) return ak_cli_usage_error(&cmd, "want an input and an output model");
    const char *in = argv[first], *out = argv[first + 1];
    static const int levels[] = {AK_OPTIMIZE_BASIC, AK_OPTIMIZE_EXTENDED, AK_OPTIMIZE_ALL};
    ak_session_options so;
    ak_session_options_init(&so);
    so.optimize = levels[level];
    so.threads = 1; /* folding runs once; threads would only cost their start */
    ak_session *s;
    ak_status st = ak_session_create_from_file(in, &so, &s);
    if (st != AK_OK) return ak_cli_report(in, st);
    size_t before = node_count(ak_session_model(s));
    st = ak_session_save_optimized(s, out);
    if (st != AK_OK) {
        ak_session_free(s);
        return ak_cli_report(out, st);
    }
    ak_model *written;
    st = ak_onnx_load_file(out, &written); /* what was written reads back */
    if (st != AK_OK) {
        ak_session_free(s);
        return ak_cli_report(out, st);
    }
    printf("%s: %zu nodes -> %s: %zu nodes (level %s)\n", in, before, out, node_count(written),
           level == 0 ? "basic" : level == 1 ? "extended" : "layout");
    print_changes(s);
    ak_model_free(written);
    ak_session_free(s);
    return AK_EXIT_OK;
}
