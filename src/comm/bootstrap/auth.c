/* Authentication of comm connections (see auth.h): the job's key from the environment,
 * the handshake messages, the same-user check against the kernel's socket table, and
 * blocking client/server handshakes over a socket. HMAC-SHA256 and nonces come from
 * GnuTLS; the job secret from getrandom(). */
#include "comm/bootstrap/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/bootstrap/discover.h"
#include "core/check.h"
#include "core/le_bytes.h"

#define MAGIC_HELLO 0x31414b41u     /* "AKA1" */
#define MAGIC_CHALLENGE 0x32414b41u /* "AKA2" */
#define MAGIC_RESPONSE 0x33414b41u  /* "AKA3" */
#define MAGIC_RESULT 0x34414b41u    /* "AKA4" */
#define AUTH_VERSION 1

/* Same-user mode still runs the handshake (one code path, and the mode byte tells a
 * mismatch apart); its HMAC key is this fixed string, which proves nothing: the kernel's
 * socket table does the authenticating there. */
static const char same_user_key[] = "accelkit same-user loopback";

/* ---- the key ------------------------------------------------------------------------ */

static ak_status key_set(ak__auth_key *out, const char *bytes, size_t len, const char *from) {
    AK_ARG_CHECK(len >= AK_AUTH_SECRET_MIN && len <= AK_AUTH_SECRET_MAX,
                 "%s has %zu bytes; a job secret needs %d to %d (ak launch makes 64 hex "
                 "digits)", from, len, AK_AUTH_SECRET_MIN, AK_AUTH_SECRET_MAX);
    memset(out, 0, sizeof *out);
    memcpy(out->secret, bytes, len);
    out->len = len;
    return AK_OK;
}

ak_status ak__auth_key_from_secret(const char *secret, ak__auth_key *out) {
    AK_ARG_CHECK(secret && out, "ak__auth_key_from_secret: NULL argument");
    return key_set(out, secret, strlen(secret), "the job secret");
}

/* Reads the secret file: a regular file of this user that nobody else can read. */
static ak_status key_from_file(const char *path, ak__auth_key *out) {
    int fd;
    AK_SYSCHECK(fd, open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (fd < 0)
        return AK_FAIL(AK_ERR_IO, "AK_JOB_SECRET_FILE=%s: %s", path, strerror(errno));
    struct stat st;
    char buf[AK_AUTH_SECRET_MAX + 3];
    ak_status status = AK_OK;
    if (fstat(fd, &st) != 0)
        status = AK_FAIL(AK_ERR_IO, "AK_JOB_SECRET_FILE=%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        status = AK_FAIL(AK_ERR_INVALID_ARG, "AK_JOB_SECRET_FILE=%s is not a regular file", path);
    else if (st.st_uid != geteuid())
        status = AK_FAIL(AK_ERR_INVALID_ARG, "AK_JOB_SECRET_FILE=%s belongs to uid %u, not this "
                         "user (%u)", path, (unsigned)st.st_uid, (unsigned)geteuid());
    else if (st.st_mode & 077)
        status = AK_FAIL(AK_ERR_INVALID_ARG, "AK_JOB_SECRET_FILE=%s has mode %04o: group or "
                         "others may access it; chmod 600 it", path, (unsigned)(st.st_mode & 07777));
    size_t len = 0;
    while (status == AK_OK && len < sizeof buf) {
        ssize_t n;
        AK_SYSCHECK(n, read(fd, buf + len, sizeof buf - len));
        if (n < 0) status = AK_FAIL(AK_ERR_IO, "AK_JOB_SECRET_FILE=%s: %s", path, strerror(errno));
        if (n <= 0) break;
        len += (size_t)n;
    }
    close(fd);
    AK_CHECK(status);
    if (len > 0 && buf[len - 1] == '\n') len--;
    if (len > 0 && buf[len - 1] == '\r') len--;
    status = key_set(out, buf, len, "AK_JOB_SECRET_FILE");
    memset(buf, 0, sizeof buf);
    return status;
}

ak_status ak__auth_key_from_env(ak__auth_key *out) {
    AK_ARG_CHECK(out, "ak__auth_key_from_env: NULL output");
    const char *secret = ak__env("AK_JOB_SECRET"), *file = ak__env("AK_JOB_SECRET_FILE");
    if (secret) return key_set(out, secret, strlen(secret), "AK_JOB_SECRET");
    if (file) return key_from_file(file, out);
    memset(out, 0, sizeof *out);
    out->same_user = 1;
    return AK_OK;
}

ak_status ak__auth_generate_secret(char hex[65]) {
    AK_ARG_CHECK(hex, "ak__auth_generate_secret: NULL output");
    unsigned char raw[32];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n;
        AK_SYSCHECK(n, getrandom(raw + got, sizeof raw - got, 0));
        if (n < 0) return AK_FAIL(AK_ERR_IO, "job secret: getrandom: %s", strerror(errno));
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    memset(raw, 0, sizeof raw);
    return AK_OK;
}

static int is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a)) return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

ak_status ak__auth_check_address(const ak__auth_key *key, const void *sockaddr,
                                 const char *what) {
    if (!key->same_user || (sockaddr && is_loopback(sockaddr))) return AK_OK;
    return AK_FAIL(AK_ERR_INVALID_ARG, "%s is not a loopback address and no job secret is set: "
                   "set AK_JOB_SECRET (or AK_JOB_SECRET_FILE) to the same secret for every "
                   "rank (ak launch does it), see docs/security.md", what);
}

/* ---- the messages ------------------------------------------------------------------- */

static int fresh_nonce(unsigned char *nonce) {
    return gnutls_rnd(GNUTLS_RND_NONCE, nonce, AK_AUTH_NONCE);
}

/* proof = HMAC-SHA256(key, label | role | mode | client nonce | server nonce) */
static int make_proof(const ak__auth_session *s, const char *label, unsigned char *mac) {
    unsigned char text[32 + 2 + 2 * AK_AUTH_NONCE] = {0};
    size_t n = strlen(label);
    memcpy(text, label, n); /* labels are shorter than 32 bytes; the rest stays zero */
    text[32] = (unsigned char)s->role;
    text[33] = (unsigned char)s->key->same_user;
    memcpy(text + 34, s->client_nonce, AK_AUTH_NONCE);
    memcpy(text + 34 + AK_AUTH_NONCE, s->server_nonce, AK_AUTH_NONCE);
    const void *key = s->key->same_user ? (const void *)same_user_key : s->key->secret;
    size_t key_len = s->key->same_user ? sizeof same_user_key - 1 : s->key->len;
    return gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, key_len, text, sizeof text, mac);
}

/* Constant time: the time taken says nothing about where a forged proof first differs. */
static int equal_secret(const unsigned char *a, const unsigned char *b, size_t n) {
    volatile unsigned char diff = 0;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

static const char *status_text(int status) {
    switch (status) {
    case AK_AUTH_BAD_HELLO: return "not an accelkit handshake of this version and role";
    case AK_AUTH_MODE_MISMATCH: return "one side has a job secret (AK_JOB_SECRET), the other none";
    case AK_AUTH_BAD_PROOF: return "wrong job secret (AK_JOB_SECRET differs)";
    case AK_AUTH_NOT_SAME_USER:
        return "no job secret and the peer is not a socket of this user on this host";
    default: return "unknown refusal";
    }
}

void ak__auth_refusal(int status, int challenge, unsigned char *msg) {
    size_t n = challenge ? AK_AUTH_CHALLENGE_BYTES : AK_AUTH_RESULT_BYTES;
    memset(msg, 0, n);
    ak__put_u32(msg, challenge ? MAGIC_CHALLENGE : MAGIC_RESULT);
    msg[4] = (unsigned char)status;
}

ak_status ak__auth_client_hello(ak__auth_session *s, unsigned char hello[AK_AUTH_HELLO_BYTES]) {
    memset(hello, 0, AK_AUTH_HELLO_BYTES);
    if (fresh_nonce(s->client_nonce) != 0)
        return AK_FAIL(AK_ERR_INTERNAL, "auth: GnuTLS could not make a nonce");
    ak__put_u32(hello, MAGIC_HELLO);
    hello[4] = AUTH_VERSION;
    hello[5] = (unsigned char)s->key->same_user;
    hello[6] = (unsigned char)s->role;
    memcpy(hello + 8, s->client_nonce, AK_AUTH_NONCE);
    return AK_OK;
}

const char *ak__auth_server_on_hello(ak__auth_session *s, const unsigned char *hello,
                                     unsigned char challenge[AK_AUTH_CHALLENGE_BYTES],
                                     int *status) {
    *status = AK_AUTH_BAD_HELLO;
    if (ak__get_u32(hello) != MAGIC_HELLO || hello[4] != AUTH_VERSION || hello[6] != s->role ||
        hello[5] > 1 || hello[7])
        return status_text(AK_AUTH_BAD_HELLO);
    if (hello[5] != s->key->same_user) {
        *status = AK_AUTH_MODE_MISMATCH;
        return status_text(*status);
    }
    memcpy(s->client_nonce, hello + 8, AK_AUTH_NONCE);
    *status = AK_AUTH_OK;
    memset(challenge, 0, AK_AUTH_CHALLENGE_BYTES);
    ak__put_u32(challenge, MAGIC_CHALLENGE);
    challenge[5] = (unsigned char)s->key->same_user;
    if (fresh_nonce(s->server_nonce) != 0 ||
        make_proof(s, "accelkit auth v1 server", challenge + 8 + AK_AUTH_NONCE) != 0) {
        *status = AK_AUTH_BAD_HELLO;
        return "GnuTLS could not make a nonce or an HMAC";
    }
    memcpy(challenge + 8, s->server_nonce, AK_AUTH_NONCE);
    return NULL;
}

const char *ak__auth_client_on_challenge(ak__auth_session *s, const unsigned char *challenge,
                                         unsigned char response[AK_AUTH_RESPONSE_BYTES]) {
    if (ak__get_u32(challenge) != MAGIC_CHALLENGE)
        return "the peer does not speak the accelkit handshake";
    if (challenge[4] != AK_AUTH_OK) return status_text(challenge[4]);
    memcpy(s->server_nonce, challenge + 8, AK_AUTH_NONCE);
    unsigned char expected[AK_AUTH_MAC];
    if (make_proof(s, "accelkit auth v1 server", expected) != 0) return "GnuTLS HMAC failed";
    if (!equal_secret(expected, challenge + 8 + AK_AUTH_NONCE, AK_AUTH_MAC))
        return "the peer's proof does not match: it does not know this job's secret "
               "(AK_JOB_SECRET differs)";
    memset(response, 0, AK_AUTH_RESPONSE_BYTES);
    ak__put_u32(response, MAGIC_RESPONSE);
    if (make_proof(s, "accelkit auth v1 client", response + 4) != 0) return "GnuTLS HMAC failed";
    return NULL;
}

const char *ak__auth_server_on_response(ak__auth_session *s, const unsigned char *response,
                                        unsigned char result[AK_AUTH_RESULT_BYTES]) {
    unsigned char expected[AK_AUTH_MAC];
    int good = ak__get_u32(response) == MAGIC_RESPONSE &&
               make_proof(s, "accelkit auth v1 client", expected) == 0 &&
               equal_secret(expected, response + 4, AK_AUTH_MAC);
    ak__auth_refusal(good ? AK_AUTH_OK : AK_AUTH_BAD_PROOF, 0, result);
    return good ? NULL : status_text(AK_AUTH_BAD_PROOF);
}

const char *ak__auth_client_on_result(const unsigned char *result) {
    if (ak__get_u32(result) != MAGIC_RESULT) return "the peer does not speak the accelkit handshake";
    return result[4] == AK_AUTH_OK ? NULL : status_text(result[4]);
}

/* ---- same-user mode: who owns the peer's socket ------------------------------------- */

/* An address as /proc/net/tcp{,6} prints it: the raw 32-bit words in hex, then the port. */
static void proc_format(const struct sockaddr *sa, int as_v4, char *out, size_t cap) {
    if (sa->sa_family == AF_INET || as_v4) {
        uint32_t a;
        unsigned port;
        if (sa->sa_family == AF_INET) {
            a = ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
            port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
        } else { /* IPv4-mapped IPv6 */
            memcpy(&a, ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr + 12, 4);
            port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
        }
        snprintf(out, cap, "%08X:%04X", (unsigned)a, port);
        return;
    }
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    uint32_t w[4];
    memcpy(w, s6->sin6_addr.s6_addr, sizeof w);
    snprintf(out, cap, "%08X%08X%08X%08X:%04X", (unsigned)w[0], (unsigned)w[1], (unsigned)w[2],
             (unsigned)w[3], ntohs(s6->sin6_port));
}

/* The uid owning the socket whose local end is `local` and remote end `remote`, found in
 * one of the kernel's tables; -1 when no such socket is on this host. */
static long long proc_socket_uid(const char *table, const char *local, const char *remote) {
    FILE *f = fopen(table, "re");
    if (!f) return -1;
    char line[512], l[64], r[64];
    unsigned long long uid;
    long long found = -1;
    while (found < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, " %*[0-9]: %63s %63s %*x %*s %*s %*s %llu", l, r, &uid) == 3 &&
            !strcasecmp(l, local) && !strcasecmp(r, remote))
            found = (long long)uid;
    fclose(f);
    return found;
}

const char *ak__auth_check_peer(int fd, const ak__auth_key *key) {
    if (!key->same_user) return NULL;
    struct sockaddr_storage me, peer;
    socklen_t lm = sizeof me, lp = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&me, &lm) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &lp) != 0)
        return "cannot read the connection's addresses";
    char l[64], r[64];
    long long uid = -1;
    int mapped = me.ss_family == AF_INET6 &&
                 IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&me)->sin6_addr);
    if (me.ss_family == AF_INET || mapped) { /* the peer's socket: local = peer, remote = me */
        proc_format((struct sockaddr *)&peer, 1, l, sizeof l);
        proc_format((struct sockaddr *)&me, 1, r, sizeof r);
        uid = proc_socket_uid("/proc/net/tcp", l, r);
    }
    if (uid < 0 && me.ss_family == AF_INET6) {
        proc_format((struct sockaddr *)&peer, 0, l, sizeof l);
        proc_format((struct sockaddr *)&me, 0, r, sizeof r);
        uid = proc_socket_uid("/proc/net/tcp6", l, r);
    }
    if (uid < 0) return status_text(AK_AUTH_NOT_SAME_USER);
    if (uid != (long long)geteuid()) return "no job secret and the peer's socket belongs to another user";
    return NULL;
}

void ak__auth_peer_name(int fd, char *buf, size_t cap) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getpeername(fd, (struct sockaddr *)&sa, &len) == 0) {
        if (sa.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
        } else if (sa.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
        }
    }
    snprintf(buf, cap, "%s:%u", host, port);
}

/* ---- blocking handshakes ------------------------------------------------------------ */

static int ms_until(uint64_t deadline_ns) {
    uint64_t now = ak_now_ns();
    if (now >= deadline_ns) return 0;
    uint64_t ms = (deadline_ns - now + 999999u) / 1000000u;
    return ms > 1000000000u ? 1000000000 : (int)ms;
}

/* Sends or receives exactly len bytes before the deadline. */
static ak_status exact_io(int fd, void *buf, size_t len, int sending, uint64_t deadline_ns,
                          const char *what) {
    unsigned char *p = buf;
    while (len > 0) {
        struct pollfd pfd = {fd, (short)(sending ? POLLOUT : POLLIN), 0};
        int rc;
        AK_SYSCHECK(rc, poll(&pfd, 1, ms_until(deadline_ns)));
        if (rc == 0)
            return AK_FAIL(AK_ERR_TIMEOUT, "auth: %s: no handshake before the deadline", what);
        ssize_t n;
        if (sending) AK_SYSCHECK(n, send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT));
        else AK_SYSCHECK(n, recv(fd, p, len, MSG_DONTWAIT));
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n <= 0)
            return AK_FAIL(AK_ERR_REMOTE, "auth: %s closed the connection during the handshake "
                           "(%s)", what, n == 0 ? "end of stream" : strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    return AK_OK;
}

ak_status ak__auth_client(int fd, const ak__auth_key *key, int role, uint64_t deadline_ns,
                          const char *what) {
    ak__auth_session s = {.key = key, .role = role};
    unsigned char hello[AK_AUTH_HELLO_BYTES], challenge[AK_AUTH_CHALLENGE_BYTES];
    unsigned char response[AK_AUTH_RESPONSE_BYTES], result[AK_AUTH_RESULT_BYTES];
    const char *why = ak__auth_check_peer(fd, key);
    if (why) return AK_FAIL(AK_ERR_REMOTE, "auth: %s refused: %s", what, why);
    AK_CHECK(ak__auth_client_hello(&s, hello));
    AK_CHECK(exact_io(fd, hello, sizeof hello, 1, deadline_ns, what));
    AK_CHECK(exact_io(fd, challenge, sizeof challenge, 0, deadline_ns, what));
    why = ak__auth_client_on_challenge(&s, challenge, response);
    if (why) return AK_FAIL(AK_ERR_REMOTE, "auth: %s: %s", what, why);
    AK_CHECK(exact_io(fd, response, sizeof response, 1, deadline_ns, what));
    AK_CHECK(exact_io(fd, result, sizeof result, 0, deadline_ns, what));
    why = ak__auth_client_on_result(result);
    if (why) return AK_FAIL(AK_ERR_REMOTE, "auth: %s refused this process: %s", what, why);
    return AK_OK;
}

/* Logs a refused peer and sends it the refusal (best effort: it may be gone). */
static ak_status refuse(int fd, int status, int challenge, const char *why, const char *what) {
    char peer[INET6_ADDRSTRLEN + 8];
    ak__auth_peer_name(fd, peer, sizeof peer);
    AK_LOG_WARN(AK_SUBSYS_COMM, "auth: %s refused a connection from %s: %s", what, peer, why);
    unsigned char msg[AK_AUTH_CHALLENGE_BYTES];
    ak__auth_refusal(status, challenge, msg);
    ssize_t n;
    AK_SYSCHECK(n, send(fd, msg, challenge ? AK_AUTH_CHALLENGE_BYTES : AK_AUTH_RESULT_BYTES,
                        MSG_NOSIGNAL | MSG_DONTWAIT));
    (void)n;
    return AK_FAIL(AK_ERR_REMOTE, "auth: %s refused a connection from %s: %s", what, peer, why);
}

ak_status ak__auth_server(int fd, const ak__auth_key *key, int role, uint64_t deadline_ns,
                          const char *what) {
    ak__auth_session s = {.key = key, .role = role};
    unsigned char hello[AK_AUTH_HELLO_BYTES], challenge[AK_AUTH_CHALLENGE_BYTES];
    unsigned char response[AK_AUTH_RESPONSE_BYTES], result[AK_AUTH_RESULT_BYTES];
    int status;
    AK_CHECK(exact_io(fd, hello, sizeof hello, 0, deadline_ns, what));
    const char *why = ak__auth_check_peer(fd, key);
    if (why) return refuse(fd, AK_AUTH_NOT_SAME_USER, 1, why, what);
    why = ak__auth_server_on_hello(&s, hello, challenge, &status);
    if (why) return refuse(fd, status, 1, why, what);
    AK_CHECK(exact_io(fd, challenge, sizeof challenge, 1, deadline_ns, what));
    AK_CHECK(exact_io(fd, response, sizeof response, 0, deadline_ns, what));
    why = ak__auth_server_on_response(&s, response, result);
    if (why) return refuse(fd, AK_AUTH_BAD_PROOF, 0, why, what);
    return exact_io(fd, result, sizeof result, 1, deadline_ns, what);
}
