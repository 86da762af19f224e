/* TLS for the server (see server_extras.h): the PEM certificate and key read into memory
 * for libmicrohttpd's GnuTLS support (MHD_OPTION_HTTPS_MEM_CERT / _KEY). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "core/check.h"
#include "llm/server/server_extras.h"

#define MAX_PEM_BYTES (1u << 20)

static ak_status read_pem(const char *path, const char *what, char **out) {
    FILE *f = fopen(path, "rb");
    if (!f) return AK_FAIL(AK_ERR_IO, "cannot read the TLS %s %s", what, path);
    char *buf = malloc(MAX_PEM_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_PEM_BYTES + 1, f) : 0;
    fclose(f);
    if (!buf) return AK_FAIL(AK_ERR_NO_MEMORY, "TLS %s", what);
    if (n <= MAX_PEM_BYTES) buf[n] = '\0';
    if (n == 0 || n > MAX_PEM_BYTES || !strstr(buf, "-----BEGIN ")) {
        free(buf);
        return AK_FAIL(AK_ERR_INVALID_ARG, "the TLS %s %s is not a PEM file (or over %u bytes)",
                       what, path, MAX_PEM_BYTES);
    }
    *out = buf;
    return AK_OK;
}

ak_status ak__tls_load(ak__tls *t, const char *cert_file, const char *key_file) {
    memset(t, 0, sizeof *t);
    if (!cert_file && !key_file) return AK_OK;
    if (!cert_file || !key_file)
        return AK_FAIL(AK_ERR_INVALID_ARG, "TLS needs both a certificate and a key "
                       "(--ssl-cert and --ssl-key)");
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "this libmicrohttpd was built without TLS (GnuTLS)");
    AK_CHECK(read_pem(cert_file, "certificate", &t->cert));
    return read_pem(key_file, "key", &t->key);
}

void ak__tls_free(ak__tls *t) {
    free(t->cert);
    if (t->key) memset(t->key, 0, strlen(t->key)); /* the private key leaves no copy behind */
    free(t->key);
    memset(t, 0, sizeof *t);
}
