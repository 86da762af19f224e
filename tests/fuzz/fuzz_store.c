/* Fuzz: what a comm store server decodes from the wire. The input is a stranger's or a
 * broken peer's bytes: first the handshake messages (a hello, a response; then the same
 * bytes read as a challenge and a result, as a client would), then request frames as an
 * authenticated client would send them, each header decoded and checked against the caps
 * and each body's key checked, the way the server's socket loop does (store_tcp_server.c).
 * Decoded requests are applied to an in-memory store. Every outcome must be a clean
 * refusal or a request within the caps: never a crash, a leak or an allocation of a
 * claimed size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/store.h"
#include "comm/bootstrap/store_tcp.h"

/* The handshake, server and client side, on the first bytes of the input. */
static void fuzz_handshake(const uint8_t *data, size_t size) {
    static ak__auth_key key;
    if (!key.len && ak__auth_key_from_secret("fuzzing-secret-0123456789abcdef", &key) != AK_OK)
        abort();
    unsigned char msg[AK_AUTH_CHALLENGE_BYTES], reply[AK_AUTH_CHALLENGE_BYTES];
    memset(msg, 0, sizeof msg);
    memcpy(msg, data, size < sizeof msg ? size : sizeof msg);
    ak__auth_session server = {.key = &key, .role = AK_AUTH_ROLE_STORE};
    int status = -1;
    const char *why = ak__auth_server_on_hello(&server, msg, reply, &status);
    if (!why && status != AK_AUTH_OK) abort();
    if (why && status == AK_AUTH_OK) abort();
    /* nobody forges a proof: a fuzzed response must be refused */
    if (!why && !ak__auth_server_on_response(&server, msg, reply)) abort();
    ak__auth_session client = {.key = &key, .role = AK_AUTH_ROLE_STORE};
    if (!ak__auth_client_on_challenge(&client, msg, reply) && msg[4] != AK_AUTH_OK) abort();
    (void)ak__auth_client_on_result(msg);
}

/* Applies a decoded request to the in-memory store (no waits). */
static void apply(ak__store *store, const ak__store_request *rq, const uint8_t *value) {
    char buf[64];
    size_t len;
    int64_t after;
    switch (rq->op) {
    case OP_SET: (void)ak__store_set(store, rq->key, value, rq->value_len); break;
    case OP_GET: (void)ak__store_get(store, rq->key, buf, sizeof buf, &len, 0); break;
    case OP_ADD: (void)ak__store_add(store, rq->key, rq->arg, &after); break;
    case OP_WAIT_GE: (void)ak__store_wait_ge(store, rq->key, rq->arg, 0); break;
    default: abort(); /* the decoder let an unknown op through */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0 && data[0] & 1) { /* half the inputs start with a handshake */
        fuzz_handshake(data + 1, size - 1);
        size_t skip = size - 1 < AK_AUTH_HELLO_BYTES ? size - 1 : AK_AUTH_HELLO_BYTES;
        data += 1 + skip, size -= 1 + skip;
    }
    static int quiet;
    if (!quiet) quiet = 1, ak_log_set_level(AK_LOG_OFF);
    ak__store *store = NULL;
    if (ak__store_create_memory(&store) != AK_OK) abort();
    while (size >= REQ_HDR) {
        ak__store_request rq;
        char why[128];
        if (ak__store_decode_header(data, &rq, why, sizeof why) != 0) {
            if (!why[0]) abort(); /* a refusal must say why */
            break;                /* the server drops the client here */
        }
        if (rq.key_len < 1 || rq.key_len > AK_STORE_MAX_KEY || rq.value_len > AK_STORE_MAX_VALUE ||
            (rq.op != OP_SET && rq.value_len))
            abort();
        data += REQ_HDR, size -= REQ_HDR;
        if (size < rq.key_len + rq.value_len) break; /* the server waits for more bytes */
        if (ak__store_decode_key(data, &rq, why, sizeof why) != 0) break;
        if (strlen(rq.key) != rq.key_len) abort();
        apply(store, &rq, data + rq.key_len);
        data += rq.key_len + rq.value_len, size -= rq.key_len + rq.value_len;
    }
    ak__store_free(store);
    return 0;
}
