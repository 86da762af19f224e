/* Shared-memory direct allreduce for the ranks of one host (processes, not threads).
 *
 * The ring over the shm transport moves every byte twice per step (sender copies into a
 * ring slot, receiver copies out) and runs 2(l−1) steps. Here all l local ranks map one
 * staging segment and read each other's data in place instead.
 *
 * Segment: a header (geometry, a failure word, a futex doorbell), one control line per
 * rank (128-byte separated: sequence counter, tag of its current call, rounds used,
 * pid), then for every rank two staging halves of `chunk` bytes. Rounds alternate
 * halves, so a rank may fill round R+1 while a slower peer still reads round R: a peer
 * that announced round R has finished reading round R−1, which used the same half.
 *
 * Large buffers (S bytes, above SD_SMALL_BYTES), in rounds of at most `chunk` bytes:
 *   1. rank i copies the blocks j ≠ i of its chunk (ak__block_range over l) into its
 *      half at their own offsets, then publishes "arrived" (seq += 1);
 *   2. once all arrived, rank i reduces block i from every rank's half (its own block i
 *      straight from its buffer) into block i of its own half, in rank order, and
 *      publishes "reduced" (seq += 1);
 *   3. once all reduced, rank i copies every block j from rank j's half to recvbuf.
 *   Data is staged from sendbuf and lands in recvbuf (equal when in place), so an
 *   out-of-place call needs no sendbuf → recvbuf copy first.
 *   Per rank: copies in (l−1)/l·S, reads S and writes S/l reducing, copies out S; of
 *   that, (l−1)/l·S is read from peers in step 2 and again in step 3. Two waits a round.
 * Small buffers (≤ SD_SMALL_BYTES): each rank copies all of it into its half, publishes,
 *   and once all arrived reduces every rank's half, in rank order, into its own buffer:
 *   one wait, S copied in and (l−1)·S read from peers; every rank computes the same bits.
 *
 * Waiting: a rank waits for every peer's counter to reach a target: a short pause spin,
 * then sched_yield() up to SD_SPIN_US (a peer sharing the core runs at once), then a
 * shared futex on the doorbell after announcing itself as a sleeper (publishers ring it
 * only when someone sleeps). Every wait ends after config.timeout_ms (AK_ERR_TIMEOUT);
 * every 100 ms it checks the pids of late peers (dead or zombie: AK_ERR_REMOTE) and
 * always the failure word, which a failing or freeing rank sets so peers stop at once.
 * Each arrival carries the call's tag: ranks that disagree fail with AK_ERR_MISMATCH.
 *
 * Set-up is lazy and collective on the first call: local rank 0 creates the segment
 * (named like the shm transport's: ak__shm_segment_name, random; posix_fallocate, then
 * MAP_POPULATE) and publishes its name under "<prefix>/shm_direct"; the others map it;
 * the name is unlinked once all mapped, so nothing stays in /dev/shm. *c->shm_direct
 * is the mapping itself: ak__shm_direct_free unmaps it.
 *
 * Threads of one process (comm->threads_local) are not served: their mem transport
 * already copies directly between buffers, and pid checks cannot tell a dead thread. */
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm/algo/algo.h"
#include "core/check.h"
#include "core/hash.h"
#include "kernels/dispatch.h"

/* Compile-time knobs (a tuning build may override them with -D). */
#ifndef AK_SHM_DIRECT_CHUNK
#define AK_SHM_DIRECT_CHUNK (1u << 20) /* staging bytes per rank per half */
#endif
#ifndef AK_SHM_DIRECT_SMALL
#define AK_SHM_DIRECT_SMALL (16u * 1024) /* one-phase path up to this size */
#endif
#ifndef AK_SHM_DIRECT_SPIN_US
#define AK_SHM_DIRECT_SPIN_US 30
#endif
#define SD_SEGMENT_MAX ((size_t)256 << 20) /* staging cap: the chunk shrinks for many ranks */
/* pause-spin checks before yielding (a few µs): with 16, 8-byte latency was 2 µs
 * instead of 0.2 µs in 2 of 3 runs, each yield being a syscall */
#define SD_PAUSE_SPINS 256
#define SD_LIVENESS_NS (100u * 1000000u)
#define SD_MAGIC 0x31746469726b6120ull      /* " akridt1" */
#define SD_PAGE 4096u
#define SD_LINE 128 /* two cache lines: the adjacent-line prefetcher pulls pairs */

typedef void (*sd_reduce_fn)(void *dst, const void *a, const void *b, size_t n);

/* One rank's control line; only that rank writes it. */
typedef struct sd_rank {
    _Alignas(SD_LINE) _Atomic uint64_t seq; /* phases published */
    uint64_t tag[2]; /* tag of the call of its latest round on each half: a peer may
                      * already write the next round's while I still check this one's */
    uint64_t rounds;                        /* staging rounds used: the half is rounds & 1 */
    int32_t pid;
} sd_rank;

typedef struct sd_header {
    uint64_t magic;
    uint64_t bytes; /* the whole mapping */
    uint32_t nranks;
    uint32_t chunk; /* bytes per rank per half, a multiple of SD_PAGE */
    _Alignas(SD_LINE) _Atomic uint32_t attached; /* futex word: ranks that mapped it */
    _Alignas(SD_LINE) _Atomic uint32_t failed;   /* 0, or see fail_word */
    _Alignas(SD_LINE) _Atomic uint32_t bell;     /* futex word sleepers wait on */
    _Atomic uint32_t sleepers;
    sd_rank ranks[]; /* [nranks] */
} sd_header;

/* ---- geometry ---------------------------------------------------------------------- */

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static size_t sd_data_offset(uint32_t nranks) {
    return round_up(sizeof(sd_header) + nranks * sizeof(sd_rank), SD_PAGE);
}

static size_t sd_bytes(uint32_t nranks, uint32_t chunk) {
    return sd_data_offset(nranks) + 2u * nranks * (size_t)chunk;
}

static unsigned char *sd_half(sd_header *h, int rank, uint64_t round) {
    size_t i = 2u * (size_t)rank + (size_t)(round & 1);
    return (unsigned char *)h + sd_data_offset(h->nranks) + i * h->chunk;
}

/* The chunk for l ranks: AK_SHM_DIRECT_CHUNK unless that exceeds the segment cap. */
static uint32_t sd_chunk_for(int l) {
    size_t chunk = AK_SHM_DIRECT_CHUNK, cap = SD_SEGMENT_MAX / (2u * (size_t)l);
    if (chunk > cap) chunk = cap;
    chunk = chunk / SD_PAGE * SD_PAGE;
    if (chunk < round_up(AK_SHM_DIRECT_SMALL, SD_PAGE)) chunk = round_up(AK_SHM_DIRECT_SMALL, SD_PAGE);
    return (uint32_t)chunk;
}

/* ---- doorbell ------------------------------------------------------------------------ */

static void ring_bell(sd_header *h) {
    atomic_fetch_add(&h->bell, 1);
    ak__shared_futex_wake_all(&h->bell);
}

/* Publishes this rank's next phase. The seq_cst fence pairs with the one a sleeper
 * issues between announcing itself and re-checking, so one of the two sees the other. */
static uint64_t sd_publish(sd_header *h, int me) {
    uint64_t s = atomic_load_explicit(&h->ranks[me].seq, memory_order_relaxed) + 1;
    atomic_store_explicit(&h->ranks[me].seq, s, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&h->sleepers, memory_order_relaxed)) ring_bell(h);
    return s;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ---- failure ------------------------------------------------------------------------- */

/* failed word: (status << 16) | (rank + 1); status 0 = that rank freed its communicator */
static uint32_t fail_word(int rank, ak_status st) {
    return ((uint32_t)st << 16) | (uint32_t)(rank + 1);
}

/* Records the failure and tells the peers through the failure word (first one wins). */
static ak_status sd_fail(const ak__algo_ctx *c, sd_header *h, ak_status st, const char *fmt, ...)
    AK_PRINTF(4, 5);
static ak_status sd_fail(const ak__algo_ctx *c, sd_header *h, ak_status st, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    uint32_t live = 0;
    atomic_compare_exchange_strong(&h->failed, &live, fail_word(c->local_rank, st));
    ring_bell(h);
    return AK_FAIL(st, "shm direct: rank %d: %s", c->rank, msg);
}

/* A peer set the failure word: its own mismatch stays a mismatch, the rest is remote. */
static ak_status sd_peer_failed(const ak__algo_ctx *c, sd_header *h, uint32_t word) {
    int who = c->same_host_ranks[(int)(word & 0xffffu) - 1];
    ak_status st = (ak_status)(word >> 16);
    /* the communicator reads who's record to name the rank actually lost (comm.c) */
    ak__transport_lost(c->lost, who, st == AK_OK ? AK_LOST_CLOSED : AK_LOST_FAILED);
    if (st == AK_OK)
        return AK_FAIL(AK_ERR_REMOTE, "shm direct: rank %d: rank %d freed its communicator",
                       c->rank, who);
    (void)h;
    return AK_FAIL(st == AK_ERR_MISMATCH ? st : AK_ERR_REMOTE,
                   "shm direct: rank %d: rank %d failed: %s", c->rank, who, ak_status_str(st));
}

/* ---- waiting ------------------------------------------------------------------------- */

/* Index of the first peer whose counter is below target, or -1 when all reached it. */
static int sd_first_late(sd_header *h, uint64_t target) {
    for (uint32_t r = 0; r < h->nranks; r++)
        if (atomic_load_explicit(&h->ranks[r].seq, memory_order_acquire) < target) return (int)r;
    return -1;
}

static ak_status sd_check_peers(const ak__algo_ctx *c, sd_header *h, uint64_t target) {
    for (uint32_t r = 0; r < h->nranks; r++) {
        if (atomic_load_explicit(&h->ranks[r].seq, memory_order_acquire) >= target) continue;
        pid_t pid = (pid_t)h->ranks[r].pid;
        if (ak__pid_gone(pid)) {
            ak__transport_lost(c->lost, c->same_host_ranks[r], AK_LOST_GONE);
            return sd_fail(c, h, AK_ERR_REMOTE, "rank %d (pid %d) is gone",
                           c->same_host_ranks[r], (int)pid);
        }
    }
    return AK_OK;
}

/* Announces the sleep, re-checks (a publisher may have missed the announcement), then
 * sleeps on the bell for at most ns. */
static void sd_sleep(sd_header *h, uint64_t target, uint64_t ns) {
    uint32_t seen = atomic_load(&h->bell);
    atomic_fetch_add(&h->sleepers, 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (sd_first_late(h, target) >= 0 && !atomic_load(&h->failed))
        ak__shared_futex_wait(&h->bell, seen, ns);
    atomic_fetch_sub(&h->sleepers, 1);
}

/* The slow part of a wait: yield, then sleep, with the timeout and liveness checks. */
static ak_status sd_wait_slow(const ak__algo_ctx *c, sd_header *h, uint64_t target) {
    uint64_t start = ak_now_ns(), last_live = start;
    uint64_t limit = (uint64_t)c->timeout_ms * 1000000u;
    while (sd_first_late(h, target) >= 0) {
        uint32_t word = atomic_load_explicit(&h->failed, memory_order_acquire);
        if (word) return sd_peer_failed(c, h, word);
        uint64_t now = ak_now_ns();
        if (c->timeout_ms > 0 && now - start > limit) {
            int late = sd_first_late(h, target);
            if (late < 0) break;
            ak__transport_lost(c->lost, c->same_host_ranks[late], AK_LOST_CLOSED);
            return sd_fail(c, h, AK_ERR_TIMEOUT, "rank %d did not arrive within %d ms",
                           c->same_host_ranks[late], c->timeout_ms);
        }
        if (now - last_live >= SD_LIVENESS_NS) {
            last_live = now;
            AK_CHECK(sd_check_peers(c, h, target));
        }
        if (now - start < (uint64_t)AK_SHM_DIRECT_SPIN_US * 1000u) {
            sched_yield();
            continue;
        }
        uint64_t ns = SD_LIVENESS_NS;
        if (c->timeout_ms > 0 && limit - (now - start) < ns) ns = limit - (now - start) + 1;
        sd_sleep(h, target, ns);
    }
    return AK_OK;
}

/* Waits until every local rank published phase `target`. */
static ak_status sd_wait(const ak__algo_ctx *c, sd_header *h, uint64_t target) {
    for (int i = 0; i < SD_PAUSE_SPINS; i++) {
        if (sd_first_late(h, target) < 0) return AK_OK;
        cpu_relax();
    }
    return sd_wait_slow(c, h, target);
}

/* After an arrival wait: every peer must be in the same call (same tag). */
static ak_status sd_check_tags(const ak__algo_ctx *c, sd_header *h, uint64_t tag, int half) {
    for (uint32_t r = 0; r < h->nranks; r++)
        if (h->ranks[r].tag[half] != tag)
            return sd_fail(c, h, AK_ERR_MISMATCH,
                           "rank %d is in another collective (tag %" PRIu64 ", mine %" PRIu64
                           "): count, dtype or op differ",
                           c->same_host_ranks[r], h->ranks[r].tag[half], tag);
    return AK_OK;
}

/* Publishes this rank's arrival for `tag`, waits for everyone's, checks the tags. */
static ak_status sd_arrive(const ak__algo_ctx *c, sd_header *h, uint64_t tag, uint64_t round) {
    int half = (int)(round & 1);
    h->ranks[c->local_rank].tag[half] = tag; /* published by the release in sd_publish */
    uint64_t s = sd_publish(h, c->local_rank);
    AK_CHECK(sd_wait(c, h, s));
    return sd_check_tags(c, h, tag, half);
}

/* ---- the two paths -------------------------------------------------------------------- */

/* Round of the small path: everyone reduces everything from every rank's half. */
static ak_status sd_small(const ak__algo_ctx *c, sd_header *h, const void *src, void *dst, size_t count,
                          size_t es, sd_reduce_fn fn, uint64_t tag) {
    int me = c->local_rank, l = (int)h->nranks;
    uint64_t round = h->ranks[me].rounds++;
    memcpy(sd_half(h, me, round), src, count * es);
    AK_CHECK(sd_arrive(c, h, tag, round));
    fn(dst, sd_half(h, 0, round), sd_half(h, 1, round), count);
    for (int r = 2; r < l; r++) fn(dst, dst, sd_half(h, r, round), count);
    return AK_OK;
}

/* Copies the blocks other ranks reduce (all but mine) into my half. */
static void sd_stage(const sd_header *h, int me, unsigned char *half, const unsigned char *src,
                     size_t n, size_t es) {
    size_t off, len;
    ak__block_range(n, (int)h->nranks, me, &off, &len);
    memcpy(half, src, off * es);
    memcpy(half + (off + len) * es, src + (off + len) * es, (n - off - len) * es);
}

/* One round of the large path over n elements: src and dst are my chunk of sendbuf and
 * recvbuf (they may be the same: src's block is read before dst's is written). */
static ak_status sd_round(const ak__algo_ctx *c, sd_header *h, const unsigned char *src, unsigned char *dst,
                          size_t n, size_t es, sd_reduce_fn fn, uint64_t tag) {
    int me = c->local_rank, l = (int)h->nranks;
    uint64_t round = h->ranks[me].rounds++;
    unsigned char *mine = sd_half(h, me, round);
    sd_stage(h, me, mine, src, n, es);
    AK_CHECK(sd_arrive(c, h, tag, round));
    size_t off, len;
    ak__block_range(n, l, me, &off, &len);
    size_t b = off * es;
    /* rank order, my own block from my buffer: it was never staged */
    const unsigned char *a0 = me == 0 ? src + b : sd_half(h, 0, round) + b;
    const unsigned char *a1 = me == 1 ? src + b : sd_half(h, 1, round) + b;
    fn(mine + b, a0, a1, len);
    for (int r = 2; r < l; r++) fn(mine + b, mine + b, r == me ? src + b : sd_half(h, r, round) + b, len);
    AK_CHECK(sd_wait(c, h, sd_publish(h, me)));
    for (int j = 0; j < l; j++) {
        ak__block_range(n, l, j, &off, &len);
        memcpy(dst + off * es, sd_half(h, j, round) + off * es, len * es);
    }
    return AK_OK;
}

/* ---- set-up ---------------------------------------------------------------------------- */

static ak_status sd_map(int fd, size_t bytes, const char *name, sd_header **out) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
        return AK_FAIL(AK_ERR_IO, "shm direct: mmap of %s (%zu bytes): %s", name, bytes,
                       strerror(errno));
    *out = p;
    return AK_OK;
}

/* Local rank 0: creates, reserves (a full /dev/shm fails here, not as SIGBUS later),
 * maps and fills the header; magic last, peers map only after the store key exists. */
static ak_status sd_create(const ak__algo_ctx *c, char *name, size_t cap, sd_header **out) {
    ak__shm_sweep_dead(); /* segments of ranks killed during an earlier set-up */
    AK_CHECK(ak__shm_segment_name(name, cap, "sd"));
    uint32_t chunk = sd_chunk_for(c->local_size);
    size_t bytes = sd_bytes((uint32_t)c->local_size, chunk);
    int fd, rc;
    AK_SYSCHECK(fd, shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    if (fd < 0) return AK_FAIL(AK_ERR_IO, "shm direct: shm_open %s: %s", name, strerror(errno));
    do rc = posix_fallocate(fd, 0, (off_t)bytes);
    while (rc == EINTR);
    ak_status st = rc ? AK_FAIL(AK_ERR_IO, "shm direct: reserving %zu bytes for %s: %s", bytes,
                                name, strerror(rc))
                      : sd_map(fd, bytes, name, out);
    close(fd);
    if (st != AK_OK) return shm_unlink(name), st;
    sd_header *h = *out; /* fresh pages are zero: counters and words start at 0 */
    h->bytes = bytes;
    h->nranks = (uint32_t)c->local_size;
    h->chunk = chunk;
    atomic_thread_fence(memory_order_release);
    h->magic = SD_MAGIC;
    return AK_OK;
}

static ak_status sd_open(const ak__algo_ctx *c, const char *name, sd_header **out) {
    int fd;
    AK_SYSCHECK(fd, shm_open(name, O_RDWR | O_CLOEXEC, 0));
    if (fd < 0) return AK_FAIL(AK_ERR_IO, "shm direct: rank %d opening %s: %s", c->rank, name,
                               strerror(errno));
    struct stat sb;
    ak_status st = fstat(fd, &sb) == 0 ? AK_OK
                   : AK_FAIL(AK_ERR_IO, "shm direct: fstat %s: %s", name, strerror(errno));
    if (st == AK_OK) st = sd_map(fd, (size_t)sb.st_size, name, out);
    close(fd);
    AK_CHECK(st);
    sd_header *h = *out;
    if ((size_t)sb.st_size < SD_PAGE || h->magic != SD_MAGIC || h->bytes != (size_t)sb.st_size ||
        h->nranks != (uint32_t)c->local_size || h->bytes != sd_bytes(h->nranks, h->chunk)) {
        munmap(h, (size_t)sb.st_size);
        *out = NULL;
        return AK_FAIL(AK_ERR_MISMATCH, "shm direct: %s is not this host's segment", name);
    }
    return AK_OK;
}

/* Everyone waits until all mapped (so every pid is known), then the name goes. */
static ak_status sd_attach(const ak__algo_ctx *c, sd_header *h, const char *name) {
    h->ranks[c->local_rank].pid = (int32_t)getpid();
    if (atomic_fetch_add(&h->attached, 1) + 1 == h->nranks) shm_unlink(name);
    ak__shared_futex_wake_all(&h->attached);
    uint64_t deadline = ak_now_ns() + (uint64_t)c->timeout_ms * 1000000u;
    uint32_t n;
    while ((n = atomic_load(&h->attached)) < h->nranks) {
        uint64_t now = ak_now_ns();
        if (now >= deadline) {
            shm_unlink(name); /* ENOENT is fine */
            return AK_FAIL(AK_ERR_TIMEOUT, "shm direct: rank %d: %u of %u ranks mapped in %d ms",
                           c->rank, n, h->nranks, c->timeout_ms);
        }
        ak__shared_futex_wait(&h->attached, n, deadline - now);
    }
    return AK_OK;
}

/* Collective among the host's ranks: rank 0 creates, the others map; an empty name
 * published by rank 0 says its creation failed. */
static ak_status sd_setup(const ak__algo_ctx *c, sd_header **out) {
    char key[AK_STORE_MAX_KEY + 1], name[128];
    snprintf(key, sizeof key, "%s/shm_direct", c->prefix);
    ak_status st = AK_OK;
    *out = NULL;
    if (c->local_rank == 0) {
        st = sd_create(c, name, sizeof name, out);
        ak_status st2 = ak__store_set(c->store, key, st == AK_OK ? name : "", st == AK_OK ? strlen(name) : 0);
        if (st == AK_OK) st = st2;
    } else {
        size_t len = 0;
        AK_CHECK(ak__store_get(c->store, key, name, sizeof name - 1, &len, c->timeout_ms));
        if (len == 0 || len >= sizeof name)
            return AK_FAIL(AK_ERR_REMOTE, "shm direct: rank %d: rank %d could not create the "
                           "segment", c->rank, c->same_host_ranks[0]);
        name[len] = '\0';
        st = sd_open(c, name, out);
    }
    if (st == AK_OK) st = sd_attach(c, *out, name);
    else if (c->local_rank == 0 && *out) shm_unlink(name);
    if (st != AK_OK && *out) munmap(*out, (*out)->bytes), *out = NULL;
    return st;
}

/* ---- entry points ---------------------------------------------------------------------- */

ak_status ak__allreduce_shm_direct(const ak__algo_ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                                   ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    if (c->threads_local || c->host_count != 1 || c->local_size != c->size)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "shm direct: needs processes of one host");
    if ((unsigned)op >= AK_REDUCE_AVG || (unsigned)dt >= AK_DTYPE_COUNT_)
        return AK_FAIL(AK_ERR_INVALID_ARG, "shm direct: op %d dtype %d", (int)op, (int)dt);
    size_t es = 0;
    AK_CHECK(ak_dtype_size(dt, &es));
    if (count == 0 || c->size == 1) return AK_OK;
    if (!*c->shm_direct) AK_CHECK(sd_setup(c, (sd_header **)c->shm_direct));
    sd_header *h = *c->shm_direct;
    sd_reduce_fn fn = ak__kernels_active()->reduce[op][dt];
    if (count * es <= AK_SHM_DIRECT_SMALL)
        return sd_small(c, h, sendbuf, recvbuf, count, es, fn, tag);
    size_t per = h->chunk / es;
    for (size_t done = 0; done < count; done += per) {
        size_t n = count - done < per ? count - done : per;
        AK_CHECK(sd_round(c, h, (const unsigned char *)sendbuf + done * es,
                          (unsigned char *)recvbuf + done * es, n, es, fn, tag));
    }
    return AK_OK;
}

void ak__shm_direct_free(const ak__algo_ctx *c) {
    sd_header *h = c ? *c->shm_direct : NULL;
    if (!h) return;
    uint32_t live = 0; /* a freed rank will not come back: peers still waiting stop now */
    atomic_compare_exchange_strong(&h->failed, &live, fail_word(c->local_rank, AK_OK));
    ring_bell(h);
    munmap(h, h->bytes);
    *c->shm_direct = NULL;
}
