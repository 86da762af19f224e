/* Shared-memory transport: ranks on one host (processes or threads) exchange messages
 * through single-producer/single-consumer ring buffers in POSIX shm segments.
 *
 * Layout. Every rank creates one segment, its *inbox*: a header page (owner pid, state,
 * a doorbell futex word), then one ring per peer that sends to it. A ring is nslots slots
 * of slot_bytes; head (slots published by the sender) and tail (slots released by the
 * receiver) sit on separate cache lines, and a metadata entry per slot carries the tag
 * and total length of the message that starts there. A message takes
 * max(1, ceil(len / slot_bytes)) slots, so a small one is header + payload in one slot.
 * The sender copies into free slots while the receiver copies out of full ones: two
 * copies, pipelined slot by slot.
 *
 * Rendezvous. The owner names its segment with 128 random bits (ak__shm_segment_name;
 * its pid there only serves crash recovery, ak__shm_sweep_dead) and publishes the name under "<prefix>/shm/<rank>". Peers only read
 * that key, map the segment and count themselves in `attached`; the last one to attach
 * unlinks the name, and the owner unlinks it too once all attached (or on failure), so
 * nothing stays in /dev/shm even when a rank crashes during set-up.
 *
 * Waiting. progress() spins for AK_SHM_SPIN_US after the last movement, then sleeps on
 * its own doorbell (a shared futex: segments are mapped by several processes) after
 * announcing it in `sleeping`; whoever moves a head or tail the sleeper may wait on rings
 * the bell, and only when the sleeper announced itself. Every 100 ms of stall the peers'
 * pids are checked (a dead or zombie pid = AK_ERR_REMOTE); a peer that destroyed or
 * failed its transport says so in its header's state word. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "comm/transport/transport.h"
#include "core/check.h"
#include "core/hash.h"

/* Ring geometry (the creator writes it into its segment; peers read it from there).
 * Compile-time knobs so a tuning build can override them with -D. */
#ifndef AK_SHM_SLOTS
#define AK_SHM_SLOTS 16 /* power of two */
#endif
#ifndef AK_SHM_SLOT_BYTES
#define AK_SHM_SLOT_BYTES (64 * 1024)
#endif
#ifndef AK_SHM_SPIN_US
#define AK_SHM_SPIN_US 30
#endif
#define SHM_LIVENESS_NS (100u * 1000000u) /* pid check period while stalled */
#define SHM_MAGIC 0x31766d68736b6120ull   /* " akshmv1" */
#define SHM_PAGE 4096u
#define SHM_LINE 64

enum { SEG_LIVE = 0, SEG_CLOSED = 1, SEG_FAILED = 2 /* + the ak_status, see seg_fail */ };

typedef struct msg_meta {
    uint64_t tag;
    uint64_t bytes; /* the whole message; meaningful in its first slot only */
} msg_meta;

/* One ring's control page; its slots live in the segment's data area. */
typedef struct ring_ctl {
    _Alignas(SHM_LINE) _Atomic uint32_t head; /* written by the sender only */
    _Alignas(SHM_LINE) _Atomic uint32_t tail; /* written by the receiver only */
    _Alignas(SHM_LINE) msg_meta meta[];       /* nslots entries */
} ring_ctl;

typedef struct seg_header {
    uint64_t magic;
    uint32_t nrings, nslots, slot_bytes;
    int32_t owner_rank, owner_pid;
    _Alignas(SHM_LINE) _Atomic uint32_t attached; /* futex word: peers that mapped it */
    _Alignas(SHM_LINE) _Atomic uint32_t state;    /* SEG_* */
    _Alignas(SHM_LINE) _Atomic uint32_t bell;     /* futex word the owner sleeps on */
    _Atomic uint32_t sleeping;                    /* the owner announced a futex wait */
    _Alignas(SHM_LINE) int32_t ring_rank[];       /* sender rank of each ring */
} seg_header;

typedef struct shm_peer {
    int rank;
    pid_t pid;
    seg_header *seg; /* the peer's inbox (mapped) */
    size_t seg_bytes;
    ring_ctl *out_ctl; /* my ring in the peer's inbox */
    unsigned char *out_data;
    ring_ctl *in_ctl; /* the peer's ring in my inbox */
    unsigned char *in_data;
    ak__p2p *send_head, *send_tail, *recv_head, *recv_tail;
} shm_peer;

typedef struct shm_ctx {
    int rank, world_size, npeers, timeout_ms;
    int *peer_index; /* world_size entries: rank -> index in peers, -1 = not a peer */
    shm_peer *peers;
    seg_header *own;
    size_t own_bytes;
    int own_linked;
    char own_name[128];
    uint32_t nslots, slot_bytes;
    int npending;
    uint64_t last_move_ns, last_live_ns;
    ak_status failed;
    char failed_msg[256];
    ak__lost *lost; /* setup->lost */
} shm_ctx;

/* ---- segment geometry ------------------------------------------------------------------ */

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static size_t header_bytes(uint32_t nrings) {
    return round_up(sizeof(seg_header) + nrings * sizeof(int32_t), SHM_PAGE);
}

static size_t ctl_bytes(uint32_t nslots) {
    return round_up(sizeof(ring_ctl) + nslots * sizeof(msg_meta), SHM_PAGE);
}

static size_t segment_bytes(uint32_t nrings, uint32_t nslots, uint32_t slot_bytes) {
    return header_bytes(nrings) + nrings * (ctl_bytes(nslots) + (size_t)nslots * slot_bytes);
}

static ring_ctl *seg_ring(seg_header *h, uint32_t i) {
    return (ring_ctl *)((char *)h + header_bytes(h->nrings) + i * ctl_bytes(h->nslots));
}

static unsigned char *seg_data(seg_header *h, uint32_t i) {
    size_t data0 = header_bytes(h->nrings) + h->nrings * ctl_bytes(h->nslots);
    return (unsigned char *)h + data0 + (size_t)i * h->nslots * h->slot_bytes;
}

/* ---- futex doorbells ---------------------------------------------------------------- */

/* Not FUTEX_*_PRIVATE: the word is in a mapping shared between processes. Errors
 * (EAGAIN: the word moved, ETIMEDOUT, EINTR) all mean "look again", which callers do. */
void ak__shared_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

void ak__shared_futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void ring_bell(seg_header *h) {
    atomic_fetch_add(&h->bell, 1);
    ak__shared_futex_wake_all(&h->bell);
}

/* Called after publishing a head or tail: wakes the segment owner if it sleeps. The
 * seq_cst fence pairs with the one in sleep_on_bell (store sleeping; fence; re-check). */
static inline void wake_if_sleeping(seg_header *h) {
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&h->sleeping, memory_order_relaxed)) ring_bell(h);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ---- failure ------------------------------------------------------------------------ */

static void complete_queue(ak__p2p **head, ak__p2p **tail, ak_status st, int *npending) {
    for (ak__p2p *op = *head; op; op = op->next) {
        op->status = st;
        op->complete = 1;
        (*npending)--;
    }
    *head = *tail = NULL;
}

/* Fails the transport: every pending op completes with st, later calls return it, and
 * peers learn it from our state word (so they stop waiting on us at once). */
static ak_status fail_transport(shm_ctx *c, ak_status st, const char *fmt, ...) AK_PRINTF(3, 4);
static ak_status fail_transport(shm_ctx *c, ak_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->failed_msg, sizeof c->failed_msg, fmt, ap);
    va_end(ap);
    c->failed = st;
    for (int i = 0; i < c->npeers; i++) {
        shm_peer *p = &c->peers[i];
        complete_queue(&p->send_head, &p->send_tail, st, &c->npending);
        complete_queue(&p->recv_head, &p->recv_tail, st, &c->npending);
    }
    atomic_store(&c->own->state, SEG_FAILED + (uint32_t)st);
    for (int i = 0; i < c->npeers; i++) ring_bell(c->peers[i].seg);
    return AK_FAIL(st, "%s", c->failed_msg);
}

/* The peer said it left (destroyed its transport) or failed. */
static ak_status peer_left(shm_ctx *c, shm_peer *p, uint32_t state) {
    ak__transport_lost(c->lost, p->rank, state == SEG_CLOSED ? AK_LOST_CLOSED : AK_LOST_FAILED);
    if (state == SEG_CLOSED)
        return fail_transport(c, AK_ERR_REMOTE, "shm: rank %d (pid %d) closed its transport",
                              p->rank, (int)p->pid);
    ak_status st = (ak_status)(state - SEG_FAILED);
    return fail_transport(c, st == AK_ERR_MISMATCH ? st : AK_ERR_REMOTE,
                          "shm: rank %d (pid %d) failed: %s", p->rank, (int)p->pid,
                          ak_status_str(st));
}

int ak__pid_gone(pid_t pid) {
    if (pid == getpid()) return 0; /* threads of one process: the state word tells */
    if (kill(pid, 0) == -1 && errno == ESRCH) return 1;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd;
    AK_SYSCHECK(fd, open(path, O_RDONLY | O_CLOEXEC));
    if (fd < 0) return errno == ENOENT;
    ssize_t n;
    AK_SYSCHECK(n, read(fd, buf, sizeof buf - 1));
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

static ak_status check_liveness(shm_ctx *c) {
    for (int i = 0; i < c->npeers; i++) {
        shm_peer *p = &c->peers[i];
        if (!p->send_head && !p->recv_head) continue;
        if (ak__pid_gone(p->pid)) {
            ak__transport_lost(c->lost, p->rank, AK_LOST_GONE);
            return fail_transport(c, AK_ERR_REMOTE, "shm: rank %d (pid %d) is gone", p->rank,
                                  (int)p->pid);
        }
    }
    return AK_OK;
}

/* ---- data movement ------------------------------------------------------------------ */

static void finish_op(shm_ctx *c, ak__p2p **head, ak__p2p **tail) {
    ak__p2p *op = *head;
    *head = op->next;
    if (!*head) *tail = NULL;
    op->next = NULL;
    op->status = AK_OK;
    op->complete = 1;
    c->npending--;
}

static ak_status mismatch(shm_ctx *c, shm_peer *p, const ak__p2p *op, const msg_meta *m) {
    return fail_transport(c, AK_ERR_MISMATCH,
                          "shm: rank %d expected tag %" PRIu64 " (%zu bytes) from rank %d, "
                          "which sent tag %" PRIu64 " (%" PRIu64 " bytes)",
                          c->rank, op->tag, op->bytes, p->rank, m->tag, m->bytes);
}

/* Copies full slots of the peer's ring into the posted receives, in order. */
static ak_status advance_recv(shm_ctx *c, shm_peer *p, int *moved) {
    if (!p->recv_head) return AK_OK;
    ring_ctl *r = p->in_ctl;
    uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    while (p->recv_head) {
        ak__p2p *op = p->recv_head;
        if (tail == head) {
            uint32_t state = atomic_load_explicit(&p->seg->state, memory_order_acquire);
            head = atomic_load_explicit(&r->head, memory_order_acquire);
            if (tail != head) continue;
            return state == SEG_LIVE ? AK_OK : peer_left(c, p, state); /* drained first */
        }
        uint32_t slot = tail & (c->nslots - 1);
        if (op->stage == 0) {
            const msg_meta *m = &r->meta[slot];
            if (m->tag != op->tag || m->bytes != op->bytes) return mismatch(c, p, op, m);
            op->stage = 1;
        }
        size_t n = op->bytes - op->done_bytes;
        if (n > c->slot_bytes) n = c->slot_bytes;
        const unsigned char *src = p->in_data + (size_t)slot * c->slot_bytes;
        if (n) memcpy((char *)op->buf + op->done_bytes, src, n);
        op->done_bytes += n;
        atomic_store_explicit(&r->tail, ++tail, memory_order_release);
        wake_if_sleeping(p->seg); /* the sender may wait for a free slot */
        *moved = 1;
        if (op->done_bytes == op->bytes) finish_op(c, &p->recv_head, &p->recv_tail);
    }
    return AK_OK;
}

/* Copies the posted sends into free slots of my ring in the peer's inbox, in order. */
static ak_status advance_send(shm_ctx *c, shm_peer *p, int *moved) {
    if (!p->send_head) return AK_OK;
    uint32_t state = atomic_load_explicit(&p->seg->state, memory_order_acquire);
    if (state != SEG_LIVE) return peer_left(c, p, state);
    ring_ctl *r = p->out_ctl;
    uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    while (p->send_head) {
        ak__p2p *op = p->send_head;
        if (head - tail == c->nslots) {
            tail = atomic_load_explicit(&r->tail, memory_order_acquire);
            if (head - tail == c->nslots) return AK_OK;
        }
        uint32_t slot = head & (c->nslots - 1);
        if (op->stage == 0) {
            r->meta[slot].tag = op->tag;
            r->meta[slot].bytes = op->bytes;
            op->stage = 1;
        }
        size_t n = op->bytes - op->done_bytes;
        if (n > c->slot_bytes) n = c->slot_bytes;
        unsigned char *dst = p->out_data + (size_t)slot * c->slot_bytes;
        if (n) memcpy(dst, (const char *)op->buf + op->done_bytes, n);
        op->done_bytes += n;
        atomic_store_explicit(&r->head, ++head, memory_order_release);
        wake_if_sleeping(p->seg); /* the receiver may wait for data */
        *moved = 1;
        if (op->done_bytes == op->bytes) finish_op(c, &p->send_head, &p->send_tail);
    }
    return AK_OK;
}

static ak_status advance_all(shm_ctx *c, int *moved) {
    for (int i = 0; i < c->npeers && c->npending; i++) {
        AK_CHECK(advance_recv(c, &c->peers[i], moved));
        AK_CHECK(advance_send(c, &c->peers[i], moved));
    }
    return AK_OK;
}

/* Announces the sleep, re-checks (a peer may have moved just before it saw the
 * announcement), then waits on the bell for at most ns. */
static ak_status sleep_on_bell(shm_ctx *c, uint64_t ns) {
    seg_header *h = c->own;
    uint32_t seen = atomic_load(&h->bell);
    atomic_store(&h->sleeping, 1);
    atomic_thread_fence(memory_order_seq_cst);
    int moved = 0;
    ak_status st = advance_all(c, &moved);
    if (st == AK_OK && !moved && c->npending) ak__shared_futex_wait(&h->bell, seen, ns);
    atomic_store(&h->sleeping, 0);
    if (moved) c->last_move_ns = ak_now_ns();
    return st;
}

/* ---- vtable ------------------------------------------------------------------------- */

static ak_status refail(shm_ctx *c) { return AK_FAIL(c->failed, "%s", c->failed_msg); }

static ak_status shm_post(void *ctx, ak__p2p *op) {
    shm_ctx *c = ctx;
    AK_ARG_CHECK(op && (op->buf || op->bytes == 0), "shm post: NULL op or buffer");
    AK_ARG_CHECK(op->peer >= 0 && op->peer < c->world_size && c->peer_index[op->peer] >= 0,
                 "shm post: rank %d is not a peer of this transport", op->peer);
    op->complete = 0;
    op->status = AK_OK;
    op->done_bytes = 0;
    op->stage = 0;
    op->next = NULL;
    if (c->failed) {
        op->status = c->failed;
        op->complete = 1;
        return refail(c);
    }
    shm_peer *p = &c->peers[c->peer_index[op->peer]];
    ak__p2p **head = op->is_send ? &p->send_head : &p->recv_head;
    ak__p2p **tail = op->is_send ? &p->send_tail : &p->recv_tail;
    if (*tail) (*tail)->next = op;
    else *head = op;
    *tail = op;
    if (c->npending++ == 0) c->last_move_ns = ak_now_ns(); /* the stall clock starts now */
    return AK_OK;
}

/* The peer a stalled transport waits on: the first one it expects data from, else the
 * first one whose ring it cannot write to (so the error can name the rank that stopped). */
static const shm_peer *stalled_peer(const shm_ctx *c) {
    for (int i = 0; i < c->npeers; i++)
        if (c->peers[i].recv_head) return &c->peers[i];
    for (int i = 0; i < c->npeers; i++)
        if (c->peers[i].send_head) return &c->peers[i];
    return NULL;
}

/* One idle step of progress: timeout, liveness, spin or sleep. Returns 1 to keep going. */
static int idle_step(shm_ctx *c, uint64_t now, uint64_t spin_from, uint64_t deadline,
                     ak_status *st) {
    if (c->timeout_ms > 0 && now - c->last_move_ns > (uint64_t)c->timeout_ms * 1000000u) {
        const shm_peer *p = stalled_peer(c);
        if (!p) {
            *st = fail_transport(c, AK_ERR_TIMEOUT, "shm: rank %d: no progress for %d ms",
                                 c->rank, c->timeout_ms);
            return 0;
        }
        ak__transport_lost(c->lost, p->rank, AK_LOST_CLOSED); /* it let us wait */
        *st = fail_transport(c, AK_ERR_TIMEOUT, "shm: rank %d: no progress for %d ms waiting "
                             "for rank %d", c->rank, c->timeout_ms, p->rank);
        return 0;
    }
    if (now - c->last_move_ns >= SHM_LIVENESS_NS && now - c->last_live_ns >= SHM_LIVENESS_NS) {
        c->last_live_ns = now;
        if ((*st = check_liveness(c)) != AK_OK) return 0;
    }
    if (now >= deadline) return 0;
    if (now - spin_from < (uint64_t)AK_SHM_SPIN_US * 1000u) {
        /* yield rather than pause: a peer sharing this core then runs at once */
        sched_yield();
        return 1;
    }
    uint64_t ns = deadline - now;
    if (ns > SHM_LIVENESS_NS) ns = SHM_LIVENESS_NS;
    *st = sleep_on_bell(c, ns);
    return *st == AK_OK;
}

/* timeout_us < 0 waits until every posted op completes (or the stall limit). */
static ak_status shm_progress(void *ctx, int timeout_us) {
    shm_ctx *c = ctx;
    if (c->failed) return refail(c);
    uint64_t start = ak_now_ns();
    uint64_t deadline = timeout_us < 0 ? UINT64_MAX : start + (uint64_t)timeout_us * 1000u;
    for (;;) {
        int moved = 0;
        AK_CHECK(advance_all(c, &moved));
        if (!c->npending) return AK_OK;
        uint64_t now = ak_now_ns();
        if (moved) {
            c->last_move_ns = now;
            if (timeout_us >= 0 && now >= deadline) return AK_OK; /* bounded even while moving */
            continue;
        }
        ak_status st = AK_OK;
        uint64_t spin_from = c->last_move_ns > start ? c->last_move_ns : start;
        if (!idle_step(c, now, spin_from, deadline, &st) || !c->npending) return st;
    }
}

static void shm_destroy(void *ctx) {
    shm_ctx *c = ctx;
    if (!c) return;
    if (c->own) {
        if (!c->failed) atomic_store(&c->own->state, SEG_CLOSED);
        for (int i = 0; i < c->npeers; i++)
            if (c->peers[i].seg) ring_bell(c->peers[i].seg);
        munmap(c->own, c->own_bytes);
    }
    if (c->own_linked) shm_unlink(c->own_name);
    for (int i = 0; c->peers && i < c->npeers; i++)
        if (c->peers[i].seg) munmap(c->peers[i].seg, c->peers[i].seg_bytes);
    free(c->peers);
    free(c->peer_index);
    free(c);
}

static const ak__transport_i shm_vtable = {"shm", shm_post, shm_progress, shm_destroy};

/* ---- set-up ------------------------------------------------------------------------- */

/* ---- segment names and crash recovery -------------------------------------------------
 * Segments are unlinked as soon as every peer mapped them, so only a creator (or a peer)
 * killed during set-up can leave a name in /dev/shm. The creator's pid in the name lets
 * the next creation on the host remove those: a pid that is gone in the same pid
 * namespace (its inode in the name) cannot finish the set-up any more. */

static unsigned long long pid_namespace(void) {
    struct stat sb;
    return stat("/proc/self/ns/pid", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
}

ak_status ak__shm_segment_name(char *name, size_t cap, const char *kind) {
    uint64_t rnd[2];
    size_t got = 0;
    while (got < sizeof rnd) {
        ssize_t n = getrandom((char *)rnd + got, sizeof rnd - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return AK_FAIL(AK_ERR_IO, "shm: no randomness for a segment name (getrandom: %s)",
                           strerror(errno));
        got += (size_t)n;
    }
    int len = snprintf(name, cap, "/accelkit-%s-%llu-%d-%016" PRIx64 "%016" PRIx64, kind,
                       pid_namespace(), (int)getpid(), rnd[0], rnd[1]);
    if (len < 0 || (size_t)len >= cap) return AK_FAIL(AK_ERR_INTERNAL, "shm: name too long");
    return AK_OK;
}

void ak__shm_sweep_dead(void) {
    unsigned long long ns = pid_namespace();
    DIR *d = ns ? opendir("/dev/shm") : NULL;
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char kind[16], path[300];
        unsigned long long their_ns;
        int pid;
        struct stat sb;
        if (strncmp(e->d_name, "accelkit-", 9) ||
            sscanf(e->d_name + 9, "%15[a-z]-%llu-%d-", kind, &their_ns, &pid) != 3 ||
            their_ns != ns || pid <= 0 || pid == getpid())
            continue;
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        if (stat(path, &sb) || sb.st_uid != geteuid() || !ak__pid_gone((pid_t)pid)) continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        if (shm_unlink(name) == 0)
            AK_LOG_INFO(AK_SUBSYS_COMM, "shm: removed %s, left by pid %d (gone)", name, pid);
    }
    closedir(d);
}

static ak_status map_fd(int fd, size_t bytes, const char *name, void **out) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
        return AK_FAIL(AK_ERR_IO, "shm: mmap of %s (%zu bytes): %s", name, bytes, strerror(errno));
    *out = p;
    return AK_OK;
}

/* Reserves the pages (posix_fallocate, so a full /dev/shm is an error here and not a
 * SIGBUS later) and maps them. */
static ak_status create_segment(shm_ctx *c, const char *prefix) {
    (void)prefix; /* the name is random; the store key under prefix tells peers */
    ak__shm_sweep_dead();
    AK_CHECK(ak__shm_segment_name(c->own_name, sizeof c->own_name, "r"));
    int fd;
    AK_SYSCHECK(fd, shm_open(c->own_name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    if (fd < 0) return AK_FAIL(AK_ERR_IO, "shm: shm_open %s: %s", c->own_name, strerror(errno));
    c->own_linked = 1;
    c->own_bytes = segment_bytes((uint32_t)c->npeers, c->nslots, c->slot_bytes);
    int rc;
    do rc = posix_fallocate(fd, 0, (off_t)c->own_bytes);
    while (rc == EINTR);
    ak_status st = rc ? AK_FAIL(AK_ERR_IO, "shm: reserving %zu bytes for %s: %s", c->own_bytes,
                                c->own_name, strerror(rc))
                      : map_fd(fd, c->own_bytes, c->own_name, (void **)&c->own);
    close(fd);
    AK_CHECK(st);
    seg_header *h = c->own; /* fresh pages are zero: counters, state and bell start at 0 */
    h->nrings = (uint32_t)c->npeers;
    h->nslots = c->nslots;
    h->slot_bytes = c->slot_bytes;
    h->owner_rank = c->rank;
    h->owner_pid = (int32_t)getpid();
    for (int i = 0; i < c->npeers; i++) h->ring_rank[i] = c->peers[i].rank;
    atomic_thread_fence(memory_order_release);
    h->magic = SHM_MAGIC; /* peers map only after the store key exists, so this is seen */
    return AK_OK;
}

static ak_status check_peer_header(const seg_header *h, size_t bytes, const char *name,
                                   int peer) {
    if (bytes < SHM_PAGE || h->magic != SHM_MAGIC || h->owner_rank != peer ||
        bytes != segment_bytes(h->nrings, h->nslots, h->slot_bytes) || h->nslots == 0 ||
        (h->nslots & (h->nslots - 1)))
        return AK_FAIL(AK_ERR_INTERNAL, "shm: %s is not rank %d's segment", name, peer);
    return AK_OK;
}

/* Maps the inbox of peer p and finds my ring in it; the last peer to attach unlinks. */
static ak_status attach_peer(shm_ctx *c, shm_peer *p, const char *name) {
    int fd;
    AK_SYSCHECK(fd, shm_open(name, O_RDWR | O_CLOEXEC, 0));
    if (fd < 0) return AK_FAIL(AK_ERR_IO, "shm: rank %d opening rank %d's %s: %s", c->rank,
                               p->rank, name, strerror(errno));
    struct stat sb;
    ak_status st = fstat(fd, &sb) == 0 ? AK_OK
                   : AK_FAIL(AK_ERR_IO, "shm: fstat %s: %s", name, strerror(errno));
    if (st == AK_OK) st = map_fd(fd, (size_t)sb.st_size, name, (void **)&p->seg);
    close(fd);
    AK_CHECK(st);
    p->seg_bytes = (size_t)sb.st_size;
    seg_header *h = p->seg;
    AK_CHECK(check_peer_header(h, p->seg_bytes, name, p->rank));
    if (h->nslots != c->nslots || h->slot_bytes != c->slot_bytes)
        return AK_FAIL(AK_ERR_MISMATCH, "shm: rank %d uses %u x %u-byte slots, rank %d %u x %u",
                       p->rank, h->nslots, h->slot_bytes, c->rank, c->nslots, c->slot_bytes);
    uint32_t ring = h->nrings;
    for (uint32_t i = 0; i < h->nrings; i++)
        if (h->ring_rank[i] == c->rank) ring = i;
    if (ring == h->nrings)
        return AK_FAIL(AK_ERR_MISMATCH, "shm: rank %d does not list rank %d as a peer",
                       p->rank, c->rank);
    p->pid = (pid_t)h->owner_pid;
    p->out_ctl = seg_ring(h, ring);
    p->out_data = seg_data(h, ring);
    if (atomic_fetch_add(&h->attached, 1) + 1 == h->nrings) shm_unlink(name);
    ak__shared_futex_wake_all(&h->attached);
    return AK_OK;
}

static ak_status attach_all(shm_ctx *c, const char *prefix, ak__store *store) {
    for (int i = 0; i < c->npeers; i++) {
        shm_peer *p = &c->peers[i];
        char key[AK_STORE_MAX_KEY + 1], name[sizeof c->own_name];
        snprintf(key, sizeof key, "%s/shm/%d", prefix, p->rank);
        size_t len = 0;
        AK_CHECK(ak__store_get(store, key, name, sizeof name - 1, &len, c->timeout_ms));
        if (len >= sizeof name)
            return AK_FAIL(AK_ERR_INTERNAL, "shm: segment name of rank %d too long", p->rank);
        name[len] = '\0';
        AK_CHECK(attach_peer(c, p, name));
    }
    return AK_OK;
}

/* Waits until every peer mapped my segment, then removes its name. */
static ak_status wait_attached(shm_ctx *c) {
    uint64_t deadline = ak_now_ns() + (uint64_t)c->timeout_ms * 1000000u;
    uint32_t n;
    while ((n = atomic_load(&c->own->attached)) < (uint32_t)c->npeers) {
        uint64_t now = ak_now_ns();
        if (now >= deadline)
            return AK_FAIL(AK_ERR_TIMEOUT, "shm: rank %d: %u of %d peers attached in %d ms",
                           c->rank, n, c->npeers, c->timeout_ms);
        ak__shared_futex_wait(&c->own->attached, n, deadline - now);
    }
    shm_unlink(c->own_name); /* ENOENT is fine: the last peer already did */
    c->own_linked = 0;
    return AK_OK;
}

static ak_status init_ctx(shm_ctx *c, const ak__transport_setup *s) {
    c->rank = s->rank;
    c->world_size = s->world_size;
    c->npeers = s->npeers;
    c->timeout_ms = s->timeout_ms > 0 ? s->timeout_ms : 30000;
    c->lost = s->lost;
    c->nslots = AK_SHM_SLOTS;
    c->slot_bytes = AK_SHM_SLOT_BYTES;
    c->peer_index = malloc((size_t)s->world_size * sizeof *c->peer_index);
    c->peers = calloc((size_t)(s->npeers ? s->npeers : 1), sizeof *c->peers);
    if (!c->peer_index || !c->peers) return AK_FAIL(AK_ERR_NO_MEMORY, "shm: out of memory");
    for (int r = 0; r < s->world_size; r++) c->peer_index[r] = -1;
    for (int i = 0; i < s->npeers; i++) {
        int r = s->peers[i];
        AK_ARG_CHECK(r >= 0 && r < s->world_size && r != s->rank && c->peer_index[r] < 0,
                     "shm: bad peer rank %d", r);
        c->peer_index[r] = i;
        c->peers[i].rank = r;
    }
    return AK_OK;
}

ak_status ak__shm_transport_create(const ak__transport_setup *setup, ak__transport *out) {
    AK_ARG_CHECK(setup && out && setup->store && setup->prefix, "shm: NULL argument");
    AK_ARG_CHECK(setup->world_size > 0 && setup->rank >= 0 && setup->rank < setup->world_size,
                 "shm: rank %d of %d", setup->rank, setup->world_size);
    AK_ARG_CHECK(setup->npeers >= 0 && setup->npeers < setup->world_size &&
                     (setup->peers || setup->npeers == 0),
                 "shm: %d peers in a world of %d", setup->npeers, setup->world_size);
    shm_ctx *c = calloc(1, sizeof *c);
    if (!c) return AK_FAIL(AK_ERR_NO_MEMORY, "shm: out of memory");
    ak_status st;
    char key[AK_STORE_MAX_KEY + 1];
    AK_CHECK_GOTO(st, init_ctx(c, setup));
    AK_CHECK_GOTO(st, create_segment(c, setup->prefix));
    for (int i = 0; i < c->npeers; i++) c->peers[i].in_ctl = seg_ring(c->own, (uint32_t)i);
    for (int i = 0; i < c->npeers; i++) c->peers[i].in_data = seg_data(c->own, (uint32_t)i);
    snprintf(key, sizeof key, "%s/shm/%d", setup->prefix, c->rank);
    AK_CHECK_GOTO(st, ak__store_set(setup->store, key, c->own_name, strlen(c->own_name)));
    AK_CHECK_GOTO(st, attach_all(c, setup->prefix, setup->store));
    AK_CHECK_GOTO(st, wait_attached(c));
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "shm: rank %d connected to %d peers (%u x %u-byte slots)",
                 c->rank, c->npeers, c->nslots, c->slot_bytes);
    out->vt = &shm_vtable;
    out->ctx = c;
    return AK_OK;
fail:
    c->failed = st; /* peers that attached see a failed segment, not a closed one */
    if (c->own) atomic_store(&c->own->state, SEG_FAILED + (uint32_t)st);
    shm_destroy(c);
    return st;
}
