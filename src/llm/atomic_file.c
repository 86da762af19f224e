/* Write-to-temporary-then-rename files (see atomic_file.h). */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/atomic_file.h"

static void release_names(ak__atomic_file *a) {
    free(a->path);
    free(a->tmp_path);
    a->path = a->tmp_path = NULL;
}

ak_status ak__atomic_open(ak__atomic_file *a, const char *path) {
    memset(a, 0, sizeof *a);
    size_t n = strlen(path);
    a->path = strdup(path);
    a->tmp_path = malloc(n + 5);
    if (!a->path || !a->tmp_path) {
        release_names(a);
        return AK_FAIL(AK_ERR_NO_MEMORY, "out of memory for the path '%s'", path);
    }
    memcpy(a->tmp_path, path, n);
    memcpy(a->tmp_path + n, ".tmp", 5);
    if (!(a->f = fopen(a->tmp_path, "wb"))) {
        ak_status st = AK_FAIL(AK_ERR_IO, "cannot create '%s'", a->tmp_path);
        release_names(a);
        return st;
    }
    setvbuf(a->f, NULL, _IOFBF, 1 << 20);
    return AK_OK;
}

ak_status ak__atomic_write(ak__atomic_file *a, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, a->f) != n)
        return AK_FAIL(AK_ERR_IO, "writing '%s' failed (disk full?)", a->tmp_path);
    return AK_OK;
}

ak_status ak__atomic_commit(ak__atomic_file *a) {
    ak_status st = AK_OK;
    FILE *f = a->f;
    a->f = NULL;
    if (fclose(f) != 0)
        st = AK_FAIL(AK_ERR_IO, "writing '%s' failed (disk full?)", a->tmp_path);
    else if (rename(a->tmp_path, a->path) != 0)
        st = AK_FAIL(AK_ERR_IO, "cannot rename '%s' to '%s'", a->tmp_path, a->path);
    if (st != AK_OK) remove(a->tmp_path);
    release_names(a);
    return st;
}

void ak__atomic_abort(ak__atomic_file *a) {
    if (a->f) fclose(a->f);
    a->f = NULL;
    if (a->tmp_path) remove(a->tmp_path);
    release_names(a);
}

ak_status ak__atomic_commit_tensors(ak__atomic_file *a, const char *format,
                                    const char *short_tensor, uint64_t done, uint64_t size) {
    if (short_tensor)
        return AK_FAIL(AK_ERR_INVALID_ARG, "%s '%s': tensor '%s' has %llu of %llu bytes", format,
                       a->path, short_tensor, (unsigned long long)done, (unsigned long long)size);
    return ak__atomic_commit(a);
}
