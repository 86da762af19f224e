/* TCP transport: k nonblocking connections ("streams") per peer, messages striped; the
 * data path (connection setup: tcp_connect.c).
 *
 * Wire, per message: a 24-byte header (magic, tag, length; little-endian) on stream 0,
 * then the payload cut into chunks dealt round-robin over the streams (chunk i on stream
 * i % nstreams; the chunk size follows from the length, see chunk_of). Messages up to
 * 64 KiB use only stream 0, so a small message is one sendmsg (header + payload) and
 * one recvmsg on each side. Each stream carries its share of successive messages in
 * posting order, so both sides derive where every byte belongs from (length, nstreams)
 * alone; no per-chunk headers.
 *
 * Progress: ops wait in one FIFO per (peer, direction); each stream keeps a cursor to the
 * first op it still owes bytes to. A pass issues nonblocking sendmsg/recvmsg on every
 * stream with work (sends batch several queued messages into one sendmsg). Streams > 0
 * only read an op's payload once its header was checked on stream 0, so a mismatched
 * length can never make them read past the posted buffer. progress() spins with passes
 * for AK_COMM_SPIN_US (default 50 µs; small-message latency: ~5 µs instead of ~40 µs per
 * hop with an immediate sleep) and then sleeps in ppoll(). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "comm/transport/tcp_internal.h"
#include "core/check.h"
#include "core/le_bytes.h"
#include "core/params.h"

/* ---- striping arithmetic ----------------------------------------------------------- */

/* Striping unit of a message: small ones stay whole on stream 0 (one syscall each way);
 * larger ones are cut so that every stream gets a share, in chunks of at most TCP_CHUNK
 * (a multiple of 4 KiB, so each recvmsg lands on whole pages). Both sides derive it from
 * the length alone; a receiver uses its posted length, which stream 0's header check
 * confirms before any other stream reads. */
static size_t chunk_of(size_t bytes, int n) {
    if (bytes <= TCP_SMALL || n == 1) return TCP_CHUNK;
    size_t c = (bytes + (size_t)n - 1) / (size_t)n;
    c = (c + 4095) & ~(size_t)4095;
    return c < TCP_CHUNK ? c : TCP_CHUNK;
}

/* Bytes of a `bytes`-long message carried by stream s of n. */
static size_t stream_share(size_t bytes, int s, int n) {
    size_t chunk = chunk_of(bytes, n);
    size_t nchunks = (bytes + chunk - 1) / chunk;
    if ((size_t)s >= nchunks) return 0;
    size_t mine = (nchunks - 1 - (size_t)s) / (size_t)n + 1;
    size_t last = (size_t)s + (mine - 1) * (size_t)n;
    size_t total = mine * chunk;
    if (last == nchunks - 1) total -= nchunks * chunk - bytes;
    return total;
}

/* Message offset of position pos of stream s's share, and the contiguous run there. */
static size_t stream_run(size_t bytes, int s, int n, size_t pos, size_t *run) {
    size_t chunk = chunk_of(bytes, n);
    size_t k = pos / chunk, within = pos % chunk;
    size_t off = (k * (size_t)n + (size_t)s) * chunk + within;
    size_t left = bytes - off;
    *run = chunk - within < left ? chunk - within : left;
    return off;
}

/* Does stream s still owe bytes (or, on stream 0, header bytes) to op? */
static int stream_owes(const tcp_ctx *t, const ak__p2p *op, int s) {
    if (s == 0 && op->stage < TCP_HDR_BYTES) return 1;
    return op->stream_done[s] < stream_share(op->bytes, s, t->nstreams);
}

/* First op from op on that stream s owes something to. */
static ak__p2p *next_owed(const tcp_ctx *t, ak__p2p *op, int s) {
    while (op && !stream_owes(t, op, s)) op = op->next;
    return op;
}

/* Appends up to max_iov iovecs for op's remaining share on stream s; returns the count. */
static int payload_iov(const tcp_ctx *t, ak__p2p *op, int s, struct iovec *iov, int max_iov) {
    size_t share = stream_share(op->bytes, s, t->nstreams);
    size_t pos = op->stream_done[s];
    int n = 0;
    while (pos < share && n < max_iov) {
        size_t run;
        size_t off = stream_run(op->bytes, s, t->nstreams, pos, &run);
        iov[n].iov_base = (unsigned char *)op->buf + off;
        iov[n].iov_len = run;
        pos += run;
        n++;
    }
    return n;
}

/* ---- completion and failure -------------------------------------------------------- */

static void complete_op(tcp_ctx *t, ak__p2p *op, ak_status st) {
    op->status = st;
    op->complete = 1;
    t->pending--;
}

/* Pops finished ops off the head of q (they finish in order); returns how many. */
static int reap(tcp_ctx *t, tcp_queue *q) {
    int n = 0;
    while (q->head && !stream_owes(t, q->head, 0) && q->head->done_bytes == q->head->bytes) {
        ak__p2p *op = q->head;
        q->head = op->next;
        if (!q->head) q->tail = NULL;
        complete_op(t, op, AK_OK);
        n++;
    }
    return n;
}

static void fail_queue(tcp_ctx *t, tcp_queue *q, ak_status st) {
    for (ak__p2p *op = q->head, *next; op; op = next) {
        next = op->next;
        complete_op(t, op, st);
    }
    memset(q, 0, sizeof *q);
}

/* Completes every op of the peer with st, closes its sockets, and keeps st for later
 * posts to it. The message (already recorded by the caller) names the peer. */
static void fail_peer(tcp_ctx *t, tcp_peer *p, ak_status st) {
    if (p->failed == AK_OK) p->failed = st;
    fail_queue(t, &p->sends, p->failed);
    fail_queue(t, &p->recvs, p->failed);
    for (int s = 0; s < t->nstreams; s++) close_fd(&p->fds[s]);
}

static ak_status lost_peer(tcp_ctx *t, tcp_peer *p, int err) {
    ak_status st;
    if (err == 0 || err == ECONNRESET || err == EPIPE)
        st = AK_FAIL(AK_ERR_REMOTE, "tcp: rank %d closed the connection", p->rank);
    else if (err == ETIMEDOUT)
        st = AK_FAIL(AK_ERR_REMOTE, "tcp: rank %d stopped responding (connection timed out)",
                     p->rank);
    else
        st = AK_FAIL(AK_ERR_REMOTE, "tcp: connection to rank %d failed: %s", p->rank,
                     strerror(err));
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "tcp rank %d: lost rank %d (%s)", t->rank, p->rank,
                 err ? strerror(err) : "EOF");
    ak__transport_lost(t->lost, p->rank, AK_LOST_CLOSED);
    fail_peer(t, p, st);
    return st;
}

/* A mismatch makes the byte streams unparseable: fail the whole transport. */
static void fail_transport(tcp_ctx *t, ak_status st) {
    if (t->failed == AK_OK) t->failed = st;
    for (int i = 0; i < t->npeers; i++) fail_peer(t, &t->peers[i], st);
}

/* ---- sending ----------------------------------------------------------------------- */

static void encode_header(unsigned char *h, const ak__p2p *op) {
    ak__put_u32(h, TCP_MSG_MAGIC);
    ak__put_u32(h + 4, 0);
    ak__put_u64(h + 8, op->tag);
    ak__put_u64(h + 16, (uint64_t)op->bytes);
}

/* Builds the iovecs of one sendmsg on stream s: on stream 0 several queued messages
 * (header + share each), on other streams the share of successive messages. */
static int build_send_iov(tcp_ctx *t, tcp_peer *p, int s, struct iovec *iov) {
    int n = 0, batch = 0;
    for (ak__p2p *op = p->sends.cursor[s]; op && n < TCP_MAX_IOV; op = op->next) {
        if (!stream_owes(t, op, s)) continue;
        if (s == 0) {
            if (batch == TCP_SEND_BATCH) break;
            unsigned char *h = p->shdr[batch++];
            encode_header(h, op);
            if (op->stage < TCP_HDR_BYTES) {
                iov[n].iov_base = h + op->stage;
                iov[n].iov_len = TCP_HDR_BYTES - (size_t)op->stage;
                n++;
            }
        }
        n += payload_iov(t, op, s, iov + n, TCP_MAX_IOV - n);
    }
    return n;
}

/* Credits `moved` bytes to op's header (stream 0) and share on stream s; returns the rest. */
static size_t credit(tcp_ctx *t, ak__p2p *op, int s, size_t moved) {
    if (s == 0 && op->stage < TCP_HDR_BYTES) {
        size_t h = TCP_HDR_BYTES - (size_t)op->stage;
        if (h > moved) h = moved;
        op->stage += (int)h;
        moved -= h;
    }
    size_t left = stream_share(op->bytes, s, t->nstreams) - op->stream_done[s];
    if (left > moved) left = moved;
    op->stream_done[s] += left;
    op->done_bytes += left;
    return moved - left;
}

static void advance_sends(tcp_ctx *t, tcp_peer *p, int s, size_t moved) {
    ak__p2p *op = p->sends.cursor[s];
    while (op) {
        moved = credit(t, op, s, moved);
        if (stream_owes(t, op, s)) break;
        op = next_owed(t, op->next, s);
    }
    p->sends.cursor[s] = op;
}

/* One nonblocking sendmsg on stream s. Returns 1 if bytes moved, 0 if none, or -1 after
 * failing the peer. */
static int send_stream(tcp_ctx *t, tcp_peer *p, int s, ak_status *st) {
    struct iovec iov[TCP_MAX_IOV];
    int n = build_send_iov(t, p, s, iov);
    if (n == 0) return 0;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t rc;
    AK_SYSCHECK(rc, sendmsg(p->fds[s], &mh, MSG_NOSIGNAL | MSG_DONTWAIT));
    if (rc < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        *st = lost_peer(t, p, errno);
        return -1;
    }
    advance_sends(t, p, s, (size_t)rc);
    t->moves++;
    return 1;
}

/* ---- receiving --------------------------------------------------------------------- */

/* Checks the fully read header of op against what was posted. */
static ak_status check_header(const tcp_peer *p, const ak__p2p *op) {
    uint32_t magic = ak__get_u32(p->rhdr);
    uint64_t tag = ak__get_u64(p->rhdr + 8), len = ak__get_u64(p->rhdr + 16);
    if (magic != TCP_MSG_MAGIC)
        return AK_FAIL(AK_ERR_REMOTE, "tcp: corrupt stream from rank %d (bad magic 0x%08x)",
                       p->rank, magic);
    if (tag != op->tag || len != (uint64_t)op->bytes)
        return AK_FAIL(AK_ERR_MISMATCH,
                       "tcp: message from rank %d does not match the posted receive: "
                       "expected tag %llu length %zu, got tag %llu length %llu",
                       p->rank, (unsigned long long)op->tag, op->bytes,
                       (unsigned long long)tag, (unsigned long long)len);
    return AK_OK;
}

/* Stream 0 reads the header and the payload share of one op per recvmsg. Payload bytes
 * read before the header is checked stay inside the posted buffer, and a bad header
 * fails the transport, so reading them optimistically is safe. */
static int build_recv_iov(tcp_ctx *t, tcp_peer *p, int s, struct iovec *iov) {
    ak__p2p *op = p->recvs.cursor[s];
    if (!op) return 0;
    int n = 0;
    if (s == 0) {
        if (op->stage < TCP_HDR_BYTES) {
            iov[n].iov_base = p->rhdr + op->stage;
            iov[n].iov_len = TCP_HDR_BYTES - (size_t)op->stage;
            n++;
        }
        return n + payload_iov(t, op, 0, iov + n, TCP_MAX_IOV - n);
    }
    /* other streams: successive ops whose header stream 0 has already checked */
    for (; op && n < TCP_MAX_IOV && op->stage == TCP_HDR_BYTES; op = op->next)
        if (stream_owes(t, op, s)) n += payload_iov(t, op, s, iov + n, TCP_MAX_IOV - n);
    return n;
}

static ak_status advance_recvs(tcp_ctx *t, tcp_peer *p, int s, size_t moved) {
    ak__p2p *op = p->recvs.cursor[s];
    while (op) {
        int had_header = op->stage == TCP_HDR_BYTES;
        moved = credit(t, op, s, moved);
        if (s == 0 && !had_header && op->stage == TCP_HDR_BYTES) {
            ak_status st = check_header(p, op);
            if (st != AK_OK) return st;
        }
        if (stream_owes(t, op, s)) break;
        op = next_owed(t, op->next, s);
    }
    p->recvs.cursor[s] = op;
    return AK_OK;
}

static int recv_stream(tcp_ctx *t, tcp_peer *p, int s, ak_status *st) {
    struct iovec iov[TCP_MAX_IOV];
    int n = build_recv_iov(t, p, s, iov);
    if (n == 0) return 0;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t rc;
    AK_SYSCHECK(rc, recvmsg(p->fds[s], &mh, MSG_DONTWAIT));
    if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (rc <= 0) {
        *st = lost_peer(t, p, rc == 0 ? 0 : errno);
        return -1;
    }
    t->moves++;
    ak_status hs = advance_recvs(t, p, s, (size_t)rc);
    if (hs != AK_OK) {
        fail_transport(t, hs);
        *st = hs;
        return -1;
    }
    return 1;
}

/* ---- progress ---------------------------------------------------------------------- */

/* The peer's first failure, or the transport's, is what progress reports. */
static ak_status sticky_status(const tcp_ctx *t) {
    if (t->failed != AK_OK) return t->failed;
    for (int i = 0; i < t->npeers; i++)
        if (t->peers[i].failed != AK_OK) return t->peers[i].failed;
    return AK_OK;
}

/* One nonblocking sweep over every stream with work; *completed counts finished ops. */
static ak_status pass(tcp_ctx *t, int *completed) {
    ak_status st = AK_OK;
    for (int i = 0; i < t->npeers; i++) {
        tcp_peer *p = &t->peers[i];
        for (int s = 0; s < t->nstreams && p->failed == AK_OK; s++) {
            /* keep going while the kernel accepts bytes: fewer trips through ppoll */
            while (p->sends.cursor[s] && send_stream(t, p, s, &st) > 0) {
            }
            while (p->recvs.cursor[s] && recv_stream(t, p, s, &st) > 0) {
            }
        }
        if (p->failed == AK_OK) *completed += reap(t, &p->sends) + reap(t, &p->recvs);
    }
    return st;
}

/* Fills pfds with the streams that wait for the kernel; returns the count. */
static int gather_pollfds(tcp_ctx *t) {
    int n = 0;
    for (int i = 0; i < t->npeers; i++) {
        tcp_peer *p = &t->peers[i];
        if (p->failed != AK_OK) continue;
        for (int s = 0; s < t->nstreams; s++) {
            short ev = 0;
            if (p->sends.cursor[s]) ev |= POLLOUT;
            ak__p2p *r = p->recvs.cursor[s];
            if (r && (s == 0 || r->stage == TCP_HDR_BYTES)) ev |= POLLIN;
            if (!ev) continue;
            t->pfds[n].fd = p->fds[s];
            t->pfds[n].events = ev;
            t->pfds[n].revents = 0;
            n++;
        }
    }
    return n;
}

static ak_status sleep_for_io(tcp_ctx *t, uint64_t wait_ns) {
    int n = gather_pollfds(t);
    struct timespec ts = {(time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u)};
    int rc = ppoll(t->pfds, (nfds_t)n, &ts, NULL);
    if (rc < 0 && errno != EINTR) return AK_FAIL(AK_ERR_IO, "tcp: poll: %s", strerror(errno));
    return AK_OK;
}

/* Names a peer that still owes this rank data, for the stall message. */
static int stalled_peer(const tcp_ctx *t) {
    for (int i = 0; i < t->npeers; i++)
        if (t->peers[i].recvs.head || t->peers[i].sends.head) return t->peers[i].rank;
    return -1;
}

/* timeout_us ≥ 0: returns once an op completed, nothing is pending, or the time passed.
 * timeout_us < 0: returns once nothing is pending, or with AK_ERR_TIMEOUT after the
 * setup's timeout without a byte moving (a peer that stopped sending or reading). */
static ak_status tcp_progress(void *ctx, int timeout_us) {
    tcp_ctx *t = ctx;
    ak_status sticky = sticky_status(t);
    if (sticky != AK_OK) {
        /* a peer is gone: still move the others' data, but never wait */
        int ignored = 0;
        (void)pass(t, &ignored);
        return sticky;
    }
    int until_idle = timeout_us < 0;
    uint64_t start = ak_now_ns(), last_move = start;
    uint64_t spin_ns = (uint64_t)ak__param_int(AK_PARAM_COMM_SPIN_US) * 1000u;
    uint64_t limit = until_idle ? t->stall_ns : (uint64_t)timeout_us * 1000u;
    for (;;) {
        int completed = 0;
        unsigned long moves = t->moves;
        ak_status st = pass(t, &completed);
        if (st != AK_OK) return st;
        if (t->pending == 0 || (completed && !until_idle)) return sticky_status(t);
        uint64_t now = ak_now_ns();
        if (until_idle && t->moves != moves) last_move = now;
        uint64_t spent = now - (until_idle ? last_move : start);
        if (spent >= limit) {
            if (!until_idle) return AK_OK;
            return AK_FAIL(AK_ERR_TIMEOUT, "tcp: no data moved for %llu ms (waiting on rank %d)",
                           (unsigned long long)(t->stall_ns / 1000000u), stalled_peer(t));
        }
        if (now - start < spin_ns) {
            /* the peer may share this core (more ranks than cores, or the scheduler has
             * not spread them yet): let it run instead of burning the whole spin */
            sched_yield();
            continue;
        }
        AK_CHECK(sleep_for_io(t, limit - spent < 1000000000u ? limit - spent : 1000000000u));
    }
}

/* ---- posting ----------------------------------------------------------------------- */

static void enqueue(tcp_ctx *t, tcp_queue *q, ak__p2p *op) {
    if (q->tail)
        q->tail->next = op;
    else
        q->head = op;
    q->tail = op;
    for (int s = 0; s < t->nstreams; s++)
        if (!q->cursor[s] && stream_owes(t, op, s)) q->cursor[s] = op;
}

static ak_status tcp_post(void *ctx, ak__p2p *op) {
    tcp_ctx *t = ctx;
    AK_ARG_CHECK(op && (op->buf || op->bytes == 0), "tcp post: NULL op or buffer");
    AK_ARG_CHECK(op->peer >= 0 && op->peer < t->world_size && t->peer_index[op->peer] >= 0,
                 "tcp post: rank %d is not a peer of this transport", op->peer);
    tcp_peer *p = &t->peers[t->peer_index[op->peer]];
    op->complete = 0;
    op->status = AK_OK;
    op->done_bytes = 0;
    memset(op->stream_done, 0, sizeof op->stream_done);
    op->stage = 0;
    op->next = NULL;
    t->pending++;
    if (p->failed != AK_OK) {
        complete_op(t, op, p->failed);
        return AK_FAIL(p->failed, "tcp: rank %d is unreachable (%s earlier)", p->rank,
                       ak_status_str(p->failed));
    }
    enqueue(t, op->is_send ? &p->sends : &p->recvs, op);
    return AK_OK;
}

void ak__tcp_ctx_free(tcp_ctx *t) {
    if (!t) return;
    for (int i = 0; t->peers && i < t->npeers; i++)
        for (int s = 0; s < t->nstreams; s++) close_fd(&t->peers[i].fds[s]);
    free(t->peers);
    free(t->peer_index);
    free(t->pfds);
    free(t);
}

static void tcp_destroy(void *ctx) { ak__tcp_ctx_free(ctx); }

const ak__transport_i ak__tcp_vtable = {
    .name = "tcp",
    .post = tcp_post,
    .progress = tcp_progress,
    .destroy = tcp_destroy,
};
