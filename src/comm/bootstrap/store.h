/* Bootstrap key-value store: how ranks find each other before any transport exists.
 *
 * Rank 0 serves a TCP store (a thread of its process); every rank, rank 0 included, is
 * a client. Threads of one process (ak_comm_init_local) share an in-memory store instead.
 * Keys are strings (≤ 255 bytes), values are bytes (≤ 1 MiB). get waits until the key
 * exists; every wait has a timeout, and a lost server fails calls with AK_ERR_REMOTE.
 * Every TCP connection is authenticated with the job secret first (auth.h). */
#ifndef AK_COMM_BOOTSTRAP_STORE_H
#define AK_COMM_BOOTSTRAP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"

#define AK_STORE_MAX_KEY 255
#define AK_STORE_MAX_VALUE ((size_t)1 << 20)

typedef struct ak__store ak__store;
typedef struct ak__store_server ak__store_server;

/* Starts serving on bind_addr:port (port 0 = any free port; *bound_port receives it;
 * NULL or "" bind_addr = every interface). Reads the job's key (AK_JOB_SECRET...) once.
 * Fails with AK_ERR_IO naming the address when it cannot bind (port in use), and with
 * AK_ERR_INVALID_ARG when the key is unusable or, without a secret, the address is not
 * loopback. */
ak_status ak__store_serve(const char *bind_addr, int port, int *bound_port,
                          ak__store_server **out);
/* Stops the server thread and closes its clients. NULL is a no-op. */
void ak__store_server_stop(ak__store_server *server);
/* Clients connected now, as the server thread last counted them (0 for NULL). */
size_t ak__store_server_clients(ak__store_server *server);

/* Connects to a server, retrying until timeout_ms (the server may start later), and
 * runs the handshake: a server that does not know the job secret, or refuses this
 * process, fails the call with AK_ERR_REMOTE saying why. */
ak_status ak__store_connect(const char *addr, int port, int timeout_ms, ak__store **out);
/* An in-process store; share it between threads with ak__store_retain. */
ak_status ak__store_create_memory(ak__store **out);
ak__store *ak__store_retain(ak__store *store);
/* Drops a reference (closes the connection of a TCP client). NULL is a no-op. */
void ak__store_free(ak__store *store);

ak_status ak__store_set(ak__store *store, const char *key, const void *value, size_t len);
/* Waits until key exists, then copies up to cap bytes; *len = its full length. */
ak_status ak__store_get(ak__store *store, const char *key, void *buf, size_t cap, size_t *len,
                        int timeout_ms);
/* This process's IPv4 address as the store's server sees it (the interface toward the
 * server: where peers on other hosts can reach it too); "127.0.0.1" for an in-process
 * store. */
ak_status ak__store_local_address(ak__store *store, char *buf, size_t cap);
/* Atomically adds delta to the integer under key (absent = 0); *after = the new value. */
ak_status ak__store_add(ak__store *store, const char *key, int64_t delta, int64_t *after);
/* Waits until the integer under key is ≥ value. */
ak_status ak__store_wait_ge(ak__store *store, const char *key, int64_t value, int timeout_ms);

#endif /* AK_COMM_BOOTSTRAP_STORE_H */
