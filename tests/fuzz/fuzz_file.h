/* Fuzz helper: the parsers that only take a path (hostfiles, tensor files, HF folders,
 * GGUF models) get the fuzz input written to a file in a private directory made once per
 * process (on /dev/shm when it exists, so an iteration costs no disk I/O) and removed at
 * exit. Also the targets' shared check that a refusal carries a message. Header-only;
 * aborts when the file system itself fails (not a finding). */
#ifndef AK_FUZZ_FILE_H
#define AK_FUZZ_FILE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelkit/ak.h"

static char fuzz_dir_path[256];
static char fuzz_file_names[8][64];
static int fuzz_file_count;

static inline void fuzz_dir_cleanup(void) {
    char path[1024];
    for (int i = 0; i < fuzz_file_count; i++) {
        snprintf(path, sizeof path, "%s/%s", fuzz_dir_path, fuzz_file_names[i]);
        unlink(path);
    }
    rmdir(fuzz_dir_path);
}

/* The private directory, made on first use. */
static inline const char *fuzz_dir(void) {
    if (fuzz_dir_path[0]) return fuzz_dir_path;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/ak-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir_path)) abort();
    atexit(fuzz_dir_cleanup);
    return fuzz_dir_path;
}

/* Writes `size` bytes as `name` in the private directory (replacing it); returns its
 * path in a static buffer per name slot. */
static inline const char *fuzz_write_file(const char *name, const void *data, size_t size) {
    static char paths[8][512];
    int slot = 0;
    while (slot < fuzz_file_count && strcmp(fuzz_file_names[slot], name)) slot++;
    if (slot == fuzz_file_count) {
        if (slot == 8 || strlen(name) >= sizeof fuzz_file_names[0]) abort();
        snprintf(fuzz_file_names[slot], sizeof fuzz_file_names[slot], "%s", name);
        fuzz_file_count++;
    }
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(paths[slot], "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) abort();
    return paths[slot];
}

/* Removes `name` from the private directory (an optional file left out this time). */
static inline void fuzz_remove_file(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    unlink(path);
}

/* A refusal must carry a message; with AK_FUZZ_VERBOSE=1 it is printed, to see how far
 * the seeds get (AK_FUZZ_VERBOSE=1 ./fuzz_x -runs=0 corpus/fuzz_x). */
static inline void fuzz_refused(const char *step) {
    static int verbose = -1;
    if (verbose < 0) verbose = getenv("AK_FUZZ_VERBOSE") != NULL;
    const char *msg = ak_last_error();
    if (!msg || !msg[0]) abort();
    if (verbose) fprintf(stderr, "fuzz: %s refused: %s\n", step, msg);
}

/* With AK_FUZZ_VERBOSE=1: a step that succeeded. */
static inline void fuzz_accepted(const char *step) {
    if (getenv("AK_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: %s accepted\n", step);
}

#endif /* AK_FUZZ_FILE_H */
