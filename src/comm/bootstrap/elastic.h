/* Elastic jobs, the worker's side of the launcher's rendezvous (the launcher's side is
 * src/cli/launch_elastic.c; the protocol is in docs/elastic.md).
 *
 * An elastic `ak launch` serves a store (AK_ELASTIC_ADDR, AK_ELASTIC_PORT) and names each
 * worker it starts (AK_ELASTIC_ID). Every ak_comm_init of such a worker asks for a place
 * in the launcher's next round and waits until the launcher has formed it: all live
 * workers asked, at least --min-np of them. The answer is the round number, the worker's
 * rank and the world size, or "leave" for a worker the job no longer wants. */
#ifndef AK_COMM_BOOTSTRAP_ELASTIC_H
#define AK_COMM_BOOTSTRAP_ELASTIC_H

#include <stdint.h>

#include "accelkit/ak.h"
#include "comm/bootstrap/store.h"

/* Keys under the launcher's store, shared by both sides. */
#define AK_ELASTIC_KEY_READY "el/ready/%d"        /* worker id -> its request number */
#define AK_ELASTIC_KEY_REQUESTS "el/requests"     /* counter: bumped by every request */
#define AK_ELASTIC_KEY_ASSIGN "el/assign/%d/%lld" /* id, request -> "ROUND RANK SIZE HOSTS" or "leave WHY" */
#define AK_ELASTIC_KEY_HOSTS "el/hosts"           /* the host set's version, a counter */
#define AK_ELASTIC_KEY_HOSTS_CHANGE "el/hosts/%lld" /* version -> 1 hosts came, 2 left, 3 both */

typedef struct ak__elastic_place {
    int round, rank, size;
    char prefix[32]; /* the round's communicator prefix in the launcher's store */
} ak__elastic_place;

/* Parses the launcher's answer ("ROUND RANK SIZE HOSTS", NUL-terminated): 0 with place
 * and *hosts filled (rank < size, nothing after HOSTS), 1 for "leave...", -1 when it is
 * neither (fuzz_elastic feeds it any bytes). */
int ak__elastic_parse_answer(const char *text, ak__elastic_place *place, long long *hosts);

/* 1 when this process was started by an elastic launcher. */
int ak__elastic_enabled(void);

/* Joins the launcher's next round: *store is a new connection to the launcher's store
 * (the communicator's store for the round). A worker told to leave gets AK_ERR_REMOTE
 * with the launcher's reason and ak_elastic_status reports it removed. */
ak_status ak__elastic_join(int connect_timeout_ms, ak__elastic_place *place, ak__store **store);

#endif /* AK_COMM_BOOTSTRAP_ELASTIC_H */
