/* Admission control and request deadlines of the HTTP server: a connection limit per
 * client address, a cap on all connections with a few slots kept for /health, and a
 * deadline for receiving a whole request (header and body) that trickled bytes do not
 * push back. Wired into libmicrohttpd through its accept-policy and connection-notify
 * callbacks; a watchdog thread closes the sockets that miss their deadline. */
#ifndef AK_LLM_SERVER_NET_GUARD_H
#define AK_LLM_SERVER_NET_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "llm/server/access_log.h"
#include "llm/server/metrics.h"

typedef struct ak__guard ak__guard;

typedef struct ak__guard_options {
    int32_t max_connections;     /* connections for any request */
    int32_t reserved_health;     /* more, only for GET /health, once the above are taken */
    int32_t max_per_client;      /* connections per client address (0 = no limit) */
    int limit_loopback;          /* apply it to loopback clients too (else they are exempt:
                                    a local reverse proxy is every client at once) */
    double request_timeout_s;    /* header + body of a request within this (and idle
                                    keep-alive connections are closed after it) */
} ak__guard_options;

ak_status ak__guard_create(const ak__guard_options *o, ak__metrics *m, ak__access_log *log,
                           ak__guard **out);
/* Stops the watchdog and frees (after the daemon stopped). */
void ak__guard_free(ak__guard *g);
/* The connection limit to give libmicrohttpd: above ours, so it never refuses first. */
unsigned ak__guard_mhd_limit(const ak__guard *g);

/* MHD_OPTION_ACCEPT_POLICY / MHD_OPTION_NOTIFY_CONNECTION callbacks (cls = the guard). */
enum MHD_Result ak__guard_accept(void *cls, const struct sockaddr *addr, socklen_t len);
void ak__guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code);

/* The request line arrived (its clock runs from the connection's last idle moment). */
void ak__guard_request_line(struct MHD_Connection *c);
/* The whole request is in: no deadline while it is answered. */
void ak__guard_request_received(struct MHD_Connection *c);
/* The answer went out: the next request on the connection gets a fresh deadline. */
void ak__guard_request_done(struct MHD_Connection *c);
/* Whether the connection sits on a slot kept for /health. */
int ak__guard_on_reserved_slot(struct MHD_Connection *c);
/* The client's address as text ("-" if unknown); valid while the connection is. */
const char *ak__guard_client(struct MHD_Connection *c);

#endif /* AK_LLM_SERVER_NET_GUARD_H */
