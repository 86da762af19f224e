/* Authentication of every comm connection (the rendezvous store, elastic rendezvous and
 * TCP transport): a mutual challenge-response over the per-job secret, so a process
 * without the secret is refused before it can read or write anything. docs/security.md
 * describes the threat model.
 *
 * The secret: AK_JOB_SECRET (at least 16 bytes, used as written), else the contents of
 * AK_JOB_SECRET_FILE (a regular file of this user that group and others cannot read,
 * one trailing newline ignored). `ak launch` makes one for every job. Without either,
 * the job runs in same-user mode: only loopback stores are allowed, and every peer must
 * be a socket of this host owned by this user, as the kernel's socket table
 * (/proc/net/tcp, /proc/net/tcp6) says; the handshake still runs, over a fixed key.
 *
 * Wire (every integer little-endian, sizes fixed):
 *   hello     client -> server  magic "AKA1" | version u8 | mode u8 | role u8 | 0 u8 |
 *                               client nonce [32]                               40 bytes
 *   challenge server -> client  magic "AKA2" | status u8 | mode u8 | 0 u16 |
 *                               server nonce [32] | server proof [32]           72 bytes
 *   response  client -> server  magic "AKA3" | client proof [32]                36 bytes
 *   result    server -> client  magic "AKA4" | status u8 | 0 [3]                 8 bytes
 * proof = HMAC-SHA256(secret, label | role | mode | client nonce | server nonce), the
 * label naming the side ("server" / "client"), so one side's proof never passes for the
 * other's. The server proves first; each side compares in constant time. A non-zero
 * status is a refusal (ak__auth_status), after which the server closes. The secret
 * never goes on the wire. */
#ifndef AK_COMM_BOOTSTRAP_AUTH_H
#define AK_COMM_BOOTSTRAP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"

#define AK_AUTH_SECRET_MIN 16
#define AK_AUTH_SECRET_MAX 256
#define AK_AUTH_NONCE 32
#define AK_AUTH_MAC 32
#define AK_AUTH_HELLO_BYTES 40
#define AK_AUTH_CHALLENGE_BYTES 72
#define AK_AUTH_RESPONSE_BYTES 36
#define AK_AUTH_RESULT_BYTES 8
/* how long a server waits for a connection's handshake before dropping it */
#define AK_AUTH_HANDSHAKE_MS 5000

/* What a connection authenticates for: a proof made for one never passes for another. */
enum { AK_AUTH_ROLE_STORE = 1, AK_AUTH_ROLE_TCP = 2 };

/* Refusal reasons carried in challenge / result status. */
enum {
    AK_AUTH_OK = 0,
    AK_AUTH_BAD_HELLO = 1,     /* not an accelkit hello, another version or role */
    AK_AUTH_MODE_MISMATCH = 2, /* one side has a job secret, the other none */
    AK_AUTH_BAD_PROOF = 3,     /* the proof does not match this side's secret */
    AK_AUTH_NOT_SAME_USER = 4, /* same-user mode: the peer is not this user's socket here */
};

typedef struct ak__auth_key {
    int same_user; /* no secret: peers must be local sockets of this user */
    size_t len;
    unsigned char secret[AK_AUTH_SECRET_MAX];
} ak__auth_key;

/* One side's state through a handshake. */
typedef struct ak__auth_session {
    const ak__auth_key *key;
    int role;
    unsigned char client_nonce[AK_AUTH_NONCE], server_nonce[AK_AUTH_NONCE];
} ak__auth_session;

/* The job's key from AK_JOB_SECRET / AK_JOB_SECRET_FILE (same-user mode when neither is
 * set). Fails naming the variable on a short secret or an unsafe file. */
ak_status ak__auth_key_from_env(ak__auth_key *out);
/* A key from an explicit secret (tests, the launcher). */
ak_status ak__auth_key_from_secret(const char *secret, ak__auth_key *out);
/* A fresh job secret: 32 bytes from getrandom() as 64 hex digits and a NUL. */
ak_status ak__auth_generate_secret(char hex[65]);
/* Same-user mode refuses an address that is not loopback (ak__store_serve and connect):
 * AK_OK when allowed, else AK_ERR_INVALID_ARG naming AK_JOB_SECRET. what: "store at X". */
ak_status ak__auth_check_address(const ak__auth_key *key, const void *sockaddr,
                                 const char *what);

/* The messages, without sockets (the store server's event loop drives them, the fuzz
 * targets feed them bytes). Each check returns NULL when the message is good, else why
 * not; a refusal's *status is the code to send. */
ak_status ak__auth_client_hello(ak__auth_session *s, unsigned char hello[AK_AUTH_HELLO_BYTES]);
const char *ak__auth_server_on_hello(ak__auth_session *s, const unsigned char *hello,
                                     unsigned char challenge[AK_AUTH_CHALLENGE_BYTES],
                                     int *status);
const char *ak__auth_client_on_challenge(ak__auth_session *s, const unsigned char *challenge,
                                         unsigned char response[AK_AUTH_RESPONSE_BYTES]);
const char *ak__auth_server_on_response(ak__auth_session *s, const unsigned char *response,
                                        unsigned char result[AK_AUTH_RESULT_BYTES]);
const char *ak__auth_client_on_result(const unsigned char *result);
/* A refusal's challenge or result message. */
void ak__auth_refusal(int status, int challenge, unsigned char *msg);

/* Same-user mode: NULL when the peer of fd is a socket of this user on this host, else
 * why not. With a secret: always NULL. */
const char *ak__auth_check_peer(int fd, const ak__auth_key *key);
/* "addr:port" of fd's peer, for logs. */
void ak__auth_peer_name(int fd, char *buf, size_t cap);

/* Blocking handshakes over a connected socket (blocking or not), bounded by deadline_ns
 * (ak_now_ns clock). what names the peer in errors ("store at 10.0.0.1:29500"). */
ak_status ak__auth_client(int fd, const ak__auth_key *key, int role, uint64_t deadline_ns,
                          const char *what);
/* The server side; a refusal is logged (peer address, reason) and returned as
 * AK_ERR_REMOTE. */
ak_status ak__auth_server(int fd, const ak__auth_key *key, int role, uint64_t deadline_ns,
                          const char *what);

#endif /* AK_COMM_BOOTSTRAP_AUTH_H */
