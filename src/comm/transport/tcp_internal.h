/* TCP transport, what its data path (tcp.c) and its connection setup (tcp_connect.c)
 * share: the wire constants and the transport's state. */
#ifndef AK_COMM_TRANSPORT_TCP_INTERNAL_H
#define AK_COMM_TRANSPORT_TCP_INTERNAL_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

#include "comm/transport/transport.h"

#define TCP_MSG_MAGIC 0x314b4154u   /* "TAK1" */
#define TCP_HELLO_MAGIC 0x484b4154u /* "TAKH" */
#define TCP_HDR_BYTES 24
#define TCP_CHUNK ((size_t)512 << 10)   /* largest striping unit */
#define TCP_SMALL ((size_t)64 << 10)    /* messages up to this stay on stream 0 */
#define TCP_SOCKBUF (4 << 20)           /* SO_SNDBUF / SO_RCVBUF request */
#define TCP_MAX_IOV 64
#define TCP_SEND_BATCH 16               /* messages per sendmsg on stream 0 */
#define TCP_ADDR_MAX 128

typedef struct tcp_queue {
    ak__p2p *head, *tail;
    ak__p2p *cursor[AK_COMM_MAX_STREAMS]; /* first op the stream still owes bytes to */
} tcp_queue;

typedef struct tcp_peer {
    int rank;
    int fds[AK_COMM_MAX_STREAMS];
    tcp_queue sends, recvs;
    ak_status failed;                          /* AK_OK while usable */
    unsigned char rhdr[TCP_HDR_BYTES];         /* header of recvs.cursor[0], as read */
    unsigned char shdr[TCP_SEND_BATCH][TCP_HDR_BYTES]; /* headers of a send batch */
} tcp_peer;

typedef struct tcp_ctx {
    int rank, world_size, nstreams, npeers;
    tcp_peer *peers;     /* [npeers] */
    int *peer_index;     /* [world_size]: index into peers, -1 when not a peer */
    struct pollfd *pfds; /* [npeers * nstreams], reused by every progress call */
    ak_status failed;    /* set by a mismatch: the whole transport is unusable */
    int pending;         /* ops queued and not complete */
    unsigned long moves; /* syscalls that moved bytes: stall detection */
    uint64_t stall_ns;   /* progress(< 0) gives up after this long without movement */
    ak__lost *lost;      /* setup->lost */
} tcp_ctx;

static inline void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* The transport's operations (tcp.c); tcp_connect.c hands them out once connected. */
extern const ak__transport_i ak__tcp_vtable;
/* Closes every socket and frees t (NULL: nothing). */
void ak__tcp_ctx_free(tcp_ctx *t);

#endif /* AK_COMM_TRANSPORT_TCP_INTERNAL_H */
