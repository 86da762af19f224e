/* Bootstrap store over TCP, what its two sides share: the server (store_tcp_server.c:
 * one poll()-driven thread that holds every key in memory and parks blocking requests
 * until they can be answered) and the client (store_tcp_client.c: an ak__store whose
 * calls send one framed request and wait for its reply with a deadline).
 *
 * Wire format, every integer little-endian:
 *   request  magic u32 | op u8 | key_len u8 | flags u16 (0) | seq u32 | value_len u32 |
 *            arg i64 | timeout_ms i32 | key (key_len bytes, no NUL) | value (value_len)
 *   reply    magic u32 | status u8 | pad 3 (0) | seq u32 | value_len u32 | arg i64 |
 *            value (value_len)
 * op: SET (value), GET (waits up to timeout_ms; the reply carries the value), ADD (arg =
 * delta; the reply's arg = the new value), WAIT_GE (waits until the integer ≥ arg). The
 * status is an ak_status: AK_OK or AK_ERR_TIMEOUT (the server's own deadline passed).
 * Integers are stored as decimal text, exactly like the in-memory store.
 *
 * Before any request, the client and the server authenticate each other (auth.h, role
 * AK_AUTH_ROLE_STORE); the server answers nothing else until the handshake succeeds and
 * drops a connection that has not finished it within AK_AUTH_HANDSHAKE_MS.
 *
 * Each side validates what it reads (magic, op, lengths against AK_STORE_MAX_*, reserved
 * bytes zero, key without NUL) before allocating anything for it; the server drops a
 * client that sends a bad frame (logging its address and what was wrong) instead of
 * guessing where the next frame starts. */
#ifndef AK_COMM_BOOTSTRAP_STORE_TCP_H
#define AK_COMM_BOOTSTRAP_STORE_TCP_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "comm/bootstrap/store_impl.h"
#include "core/check.h"

#define WIRE_MAGIC 0x31534b41u /* "AKS1" */
#define REQ_HDR 28
#define REP_HDR 24

enum { OP_SET = 1, OP_GET = 2, OP_ADD = 3, OP_WAIT_GE = 4 };

/* A request as decoded from the wire (the server's socket loop and fuzz_store share the
 * decoder). */
typedef struct ak__store_request {
    int op;
    uint32_t seq;
    size_t key_len, value_len;
    int64_t arg;
    int32_t timeout_ms;
    char key[AK_STORE_MAX_KEY + 1];
} ak__store_request;

/* Decodes and checks a request header (REQ_HDR bytes): 0, or -1 with what is wrong in why
 * (the cap named for an oversized value). */
int ak__store_decode_header(const unsigned char *hdr, ak__store_request *rq, char *why,
                            size_t why_cap);
/* Checks and copies the key from the first key_len bytes of the body: 0 or -1 + why. */
int ak__store_decode_key(const unsigned char *body, ak__store_request *rq, char *why,
                         size_t why_cap);

/* close() is not retried on EINTR: Linux frees the descriptor anyway, and a retry could
 * close one another thread just opened. A failed close of a socket loses nothing. */
static inline void close_fd(int fd) {
    if (fd >= 0 && close(fd) != 0 && errno != EINTR)
        AK_LOG_DEBUG(AK_SUBSYS_COMM, "store: close(%d): %s", fd, strerror(errno));
}

static inline int64_t now_ms(void) { return (int64_t)(ak_now_ns() / 1000000u); }

/* Milliseconds left until deadline, clamped to what poll() takes. */
static inline int ms_left(int64_t deadline) {
    int64_t left = deadline - now_ms();
    if (left < 0) return 0;
    return left > 1000000000 ? 1000000000 : (int)left;
}

#endif /* AK_COMM_BOOTSTRAP_STORE_TCP_H */
