/* Minimal HTTP/1.1 client (see http_client.h). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/check.h"
#include "llm/server/http_client.h"

#define MAX_HEAD 65536

ak_status ak__http_parse_url(const char *url, char *host, size_t host_cap, int *port) {
    AK_ARG_CHECK(url && host && port, "url is NULL");
    const char *p = url;
    if (!strncmp(p, "http://", 7)) p += 7;
    else AK_ARG_CHECK(strstr(p, "://") == NULL, "only http:// URLs are supported ('%s')", url);
    size_t n = strcspn(p, ":/");
    AK_ARG_CHECK(n > 0 && n < host_cap, "no host in '%s'", url);
    memcpy(host, p, n);
    host[n] = '\0';
    *port = 80;
    if (p[n] == ':') {
        char *end;
        long v = strtol(p + n + 1, &end, 10);
        AK_ARG_CHECK(end != p + n + 1 && v > 0 && v <= 65535 && (*end == '\0' || *end == '/'),
                     "bad port in '%s'", url);
        *port = (int)v;
    }
    return AK_OK;
}

/* ---- connection ---------------------------------------------------------------------- */

ak_status ak__http_connect(ak__http_conn *c, const char *host, int port, int timeout_ms) {
    memset(c, 0, sizeof *c);
    c->fd = -1;
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || !res)
        return AK_FAIL(AK_ERR_IO, "http: cannot resolve '%s': %s", host, gai_strerror(rc));
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        struct timeval tv = {(timeout_ms ? timeout_ms : 30000) / 1000,
                             ((timeout_ms ? timeout_ms : 30000) % 1000) * 1000};
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return AK_FAIL(AK_ERR_IO, "http: cannot connect to %s:%d: %s", host, port, strerror(errno));
    c->fd = fd;
    return AK_OK;
}

void ak__http_close(ak__http_conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    ak__bytes_free(&c->in);
    ak__bytes_free(&c->body);
}

static ak_status send_all(ak__http_conn *c, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return AK_FAIL(AK_ERR_IO, "http: send to %s:%d: %s", c->host, c->port, strerror(errno));
        p += k;
        n -= (size_t)k;
    }
    return AK_OK;
}

/* Receives more bytes; *eof = 1 when the peer closed. */
static ak_status fill(ak__http_conn *c, int *eof) {
    if (c->in_pos > 0 && c->in_pos == c->in.len) c->in.len = c->in_pos = 0;
    char buf[16384];
    ssize_t k;
    do k = recv(c->fd, buf, sizeof buf, 0);
    while (k < 0 && errno == EINTR);
    if (k < 0) {
        int timeout = errno == EAGAIN || errno == EWOULDBLOCK;
        return AK_FAIL(timeout ? AK_ERR_TIMEOUT : AK_ERR_IO, "http: receive from %s:%d: %s",
                       c->host, c->port, timeout ? "timed out" : strerror(errno));
    }
    *eof = k == 0;
    return ak__bytes_append(&c->in, buf, (size_t)k);
}

static size_t avail(const ak__http_conn *c) { return c->in.len - c->in_pos; }

/* A line ending in CRLF at the read position: its length without CRLF, or -1. */
static long line_at(const ak__http_conn *c) {
    const char *p = c->in.v + c->in_pos;
    for (size_t i = 0; i + 1 < avail(c); i++)
        if (p[i] == '\r' && p[i + 1] == '\n') return (long)i;
    return -1;
}

static ak_status need_line(ak__http_conn *c, long *len) {
    int eof = 0;
    while ((*len = line_at(c)) < 0) {
        if (avail(c) > MAX_HEAD)
            return AK_FAIL(AK_ERR_REMOTE, "http: a header line over %d bytes", MAX_HEAD);
        AK_CHECK(fill(c, &eof));
        if (eof)
            return AK_FAIL(AK_ERR_REMOTE, "http: %s:%d closed the connection", c->host, c->port);
    }
    return AK_OK;
}

/* ---- response head ------------------------------------------------------------------- */

static void header_line(ak__http_conn *c, const char *line, size_t len) {
    const char *colon = memchr(line, ':', len);
    if (!colon) return;
    size_t name = (size_t)(colon - line);
    const char *v = colon + 1;
    while (v < line + len && (*v == ' ' || *v == '\t')) v++;
    size_t vlen = (size_t)(line + len - v);
    if (name == 14 && !strncasecmp(line, "Content-Length", 14)) c->remaining = strtoll(v, NULL, 10);
    else if (name == 17 && !strncasecmp(line, "Transfer-Encoding", 17) && vlen >= 7 &&
             !strncasecmp(v, "chunked", 7))
        c->chunked = 1;
    else if (name == 10 && !strncasecmp(line, "Connection", 10) && vlen >= 5 &&
             !strncasecmp(v, "close", 5))
        c->keep_alive = 0;
}

static ak_status read_head(ak__http_conn *c, const char *method) {
    long len;
    AK_CHECK(need_line(c, &len));
    const char *line = c->in.v + c->in_pos;
    if (len < 12 || strncmp(line, "HTTP/1.", 7))
        return AK_FAIL(AK_ERR_REMOTE, "http: not an HTTP/1.x answer from %s:%d", c->host, c->port);
    c->status = atoi(line + 9);
    c->in_pos += (size_t)len + 2;
    c->remaining = -1;
    c->chunked = 0;
    c->keep_alive = 1;
    for (;;) {
        AK_CHECK(need_line(c, &len));
        line = c->in.v + c->in_pos;
        c->in_pos += (size_t)len + 2;
        if (len == 0) break;
        header_line(c, line, (size_t)len);
    }
    if (c->chunked) c->remaining = 0;
    c->body_done = !strcmp(method, "HEAD") || c->status == 204 || c->status == 304 ||
                   (!c->chunked && c->remaining == 0);
    return AK_OK;
}

ak_status ak__http_begin(ak__http_conn *c, const char *method, const char *path,
                         const char *body, size_t len) {
    AK_ARG_CHECK(c && c->fd >= 0, "http: not connected");
    ak__bytes req = {NULL, 0, 0};
    ak_status st = ak__bytes_appendf(&req,
                                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: accelkit\r\n"
                                     "Accept: */*\r\n",
                                     method, path, c->host, c->port);
    if (st == AK_OK && body)
        st = ak__bytes_appendf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                               len);
    if (st == AK_OK) st = ak__bytes_append(&req, "\r\n", 2);
    if (st == AK_OK && body) st = ak__bytes_append(&req, body, len);
    if (st == AK_OK) st = send_all(c, req.v, req.len);
    ak__bytes_free(&req);
    c->body.len = c->body_pos = 0;
    return st == AK_OK ? read_head(c, method) : st;
}

/* ---- body ---------------------------------------------------------------------------- */

/* The next chunk's size line (and the trailer after the last chunk). */
static ak_status chunk_header(ak__http_conn *c) {
    long len;
    AK_CHECK(need_line(c, &len));
    char *end;
    long long size = strtoll(c->in.v + c->in_pos, &end, 16);
    if (end == c->in.v + c->in_pos || size < 0)
        return AK_FAIL(AK_ERR_REMOTE, "http: bad chunk size");
    c->in_pos += (size_t)len + 2;
    if (size > 0) {
        c->remaining = size;
        return AK_OK;
    }
    do { /* trailer fields until the empty line */
        AK_CHECK(need_line(c, &len));
        c->in_pos += (size_t)len + 2;
    } while (len > 0);
    c->body_done = 1;
    return AK_OK;
}

/* Appends some decoded body bytes to `out` (at least one unless the body ended). */
static ak_status read_some(ak__http_conn *c, ak__bytes *out) {
    int eof = 0;
    while (!c->body_done) {
        if (c->chunked && c->remaining == 0) {
            AK_CHECK(chunk_header(c));
            continue;
        }
        size_t n = avail(c);
        if (c->remaining >= 0 && (int64_t)n > c->remaining) n = (size_t)c->remaining;
        if (n > 0) {
            AK_CHECK(ak__bytes_append(out, c->in.v + c->in_pos, n));
            c->in_pos += n;
            if (c->remaining > 0) c->remaining -= (int64_t)n;
            if (c->chunked && c->remaining == 0) { /* the CRLF after the data */
                long len;
                AK_CHECK(need_line(c, &len));
                c->in_pos += (size_t)len + 2;
            } else if (!c->chunked && c->remaining == 0)
                c->body_done = 1;
            return AK_OK;
        }
        AK_CHECK(fill(c, &eof));
        if (eof) {
            if (c->remaining > 0 || c->chunked)
                return AK_FAIL(AK_ERR_REMOTE, "http: %s:%d closed the connection mid-body", c->host,
                               c->port);
            c->body_done = 1;
        }
    }
    return AK_OK;
}

ak_status ak__http_read_all(ak__http_conn *c, ak__bytes *out) {
    AK_CHECK(ak__bytes_append(out, "", 0));
    while (!c->body_done) AK_CHECK(read_some(c, out));
    return AK_OK;
}

/* An event block "...\n\n" in the decoded body: its length, or -1. */
static long event_end(const ak__http_conn *c) {
    const char *p = c->body.v + c->body_pos;
    size_t n = c->body.len - c->body_pos;
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == '\n' && p[i + 1] == '\n') return (long)i;
    return -1;
}

/* Joins the data: lines of one event block into out. */
static ak_status event_data(const char *p, size_t n, ak__bytes *out) {
    size_t i = 0;
    int first = 1;
    while (i < n) {
        size_t e = i;
        while (e < n && p[e] != '\n') e++;
        size_t len = e - i;
        if (len && p[e - 1] == '\r') len--;
        if (len >= 5 && !strncmp(p + i, "data:", 5)) {
            size_t skip = len > 5 && p[i + 5] == ' ' ? 6 : 5;
            if (!first) AK_CHECK(ak__bytes_append(out, "\n", 1));
            AK_CHECK(ak__bytes_append(out, p + i + skip, len - skip));
            first = 0;
        }
        i = e + 1;
    }
    return AK_OK;
}

ak_status ak__http_next_event(ak__http_conn *c, ak__bytes *out, int *done) {
    out->len = 0;
    AK_CHECK(ak__bytes_append(out, "", 0));
    *done = 0;
    for (;;) {
        long end = event_end(c);
        if (end >= 0) {
            const char *p = c->body.v + c->body_pos;
            c->body_pos += (size_t)end + 2;
            AK_CHECK(event_data(p, (size_t)end, out));
            if (out->len) return AK_OK;
            continue; /* a comment or an empty block */
        }
        if (c->body_done) {
            *done = 1;
            return AK_OK;
        }
        if (c->body_pos == c->body.len) c->body.len = c->body_pos = 0;
        AK_CHECK(read_some(c, &c->body));
    }
}

ak_status ak__http_request(const char *host, int port, const char *method, const char *path,
                           const char *body, size_t len, int *status, ak__bytes *out) {
    ak__http_conn c;
    ak_status st = ak__http_connect(&c, host, port, 0);
    if (st == AK_OK) st = ak__http_begin(&c, method, path, body, len);
    if (st == AK_OK) st = ak__http_read_all(&c, out);
    if (st == AK_OK && status) *status = c.status;
    ak__http_close(&c);
    return st;
}
