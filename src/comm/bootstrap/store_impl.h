/* Internal: the store's implementation interface (store.c dispatches through it;
 * store.c implements the in-memory store, store_tcp_server.c and store_tcp_client.c the TCP server and client). */
#ifndef AK_COMM_BOOTSTRAP_STORE_IMPL_H
#define AK_COMM_BOOTSTRAP_STORE_IMPL_H

#include <stdatomic.h>

#include "comm/bootstrap/store.h"

typedef struct ak__store_ops {
    ak_status (*set)(ak__store *s, const char *key, const void *value, size_t len);
    ak_status (*get)(ak__store *s, const char *key, void *buf, size_t cap, size_t *len,
                     int timeout_ms);
    ak_status (*add)(ak__store *s, const char *key, int64_t delta, int64_t *after);
    ak_status (*wait_ge)(ak__store *s, const char *key, int64_t value, int timeout_ms);
    void (*destroy)(ak__store *s);
    /* this end's IPv4 address toward the server; NULL: an in-process store */
    ak_status (*local_address)(ak__store *s, char *buf, size_t cap);
} ak__store_ops;

/* Every store implementation starts with this header. */
struct ak__store {
    const ak__store_ops *ops;
    _Atomic int refs;
};

#endif /* AK_COMM_BOOTSTRAP_STORE_IMPL_H */
