/* A minimal HTTP/1.1 client over POSIX sockets for `ak bench llm --concurrency` and the
 * server tests (libcurl is not a dependency): one request at a time per connection,
 * Content-Length and chunked bodies, and server-sent events read one at a time. */
#ifndef AK_LLM_SERVER_HTTP_CLIENT_H
#define AK_LLM_SERVER_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"
#include "llm/server/detok.h"

typedef struct ak__http_conn {
    int fd;
    char host[256];
    int port;
    ak__bytes in;        /* received, not yet consumed */
    size_t in_pos;
    /* the response being read */
    int status;
    int chunked;
    int64_t remaining;   /* Content-Length left, or of the current chunk; -1 = to EOF */
    int body_done;
    int keep_alive;
    ak__bytes body;      /* decoded body bytes not yet consumed (SSE) */
    size_t body_pos;
} ak__http_conn;

/* Parses "http://host:port[/...]" (the path is ignored); port defaults to 80. */
ak_status ak__http_parse_url(const char *url, char *host, size_t host_cap, int *port);

/* Connects; every later read or write gives up after timeout_ms (0 = 30 s). */
ak_status ak__http_connect(ak__http_conn *c, const char *host, int port, int timeout_ms);
void ak__http_close(ak__http_conn *c);

/* Sends a request (body may be NULL) and reads the status line and headers. */
ak_status ak__http_begin(ak__http_conn *c, const char *method, const char *path,
                         const char *body, size_t len);
/* Reads the rest of the body into `out` (appended). */
ak_status ak__http_read_all(ak__http_conn *c, ak__bytes *out);
/* Next server-sent event's data (`out` reset first); *done = 1 at the end of the body. */
ak_status ak__http_next_event(ak__http_conn *c, ak__bytes *out, int *done);

/* One whole request on a fresh connection. */
ak_status ak__http_request(const char *host, int port, const char *method, const char *path,
                           const char *body, size_t len, int *status, ak__bytes *out);

#endif /* AK_LLM_SERVER_HTTP_CLIENT_H */
