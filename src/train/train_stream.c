/* Training runtime, adaptive multi-stream fusion (AK_FUSION_STREAMS): several fused
 * allreduces in flight at once, each on its own channel.
 *
 * Each stream is a thread with its own communicator, a split of the global one (same
 * ranks, its own TCP connections and shared-memory segments, so two streams' messages
 * really travel side by side) and its own fusion scratch. The background thread no longer
 * runs allreduces itself: it cuts each cycle's negotiated allreduces into fused buffers
 * and queues them on the streams in turn (buffer k on stream k mod N), then goes on
 * negotiating while they travel. Every decision (what is fused, the buffer size, which
 * stream) follows from the negotiated response lists and a count of buffers dispatched
 * so far, which are the same on every rank; so each stream's communicator sees the same
 * sequence of collectives on every rank. Local timing decides nothing.
 *
 * Adaptive buffer size (AK_FUSION_ADAPTIVE=1): the allreduce bytes each cycle negotiates
 * (the gradients that arrived in it) feed a moving average, and a cycle's buffers hold
 * that average divided by the number of streams, so that what arrives in about one cycle
 * fills one buffer per stream and all streams carry a share; bounded below by
 * AK__STREAM_MIN_BYTES (smaller buffers cost more in per-message latency than overlap
 * gains) and above by the fusion threshold (HOROVOD_FUSION_THRESHOLD, or the point
 * HOROVOD_AUTOTUNE is trying). The average is computed from the responses, in the same
 * floating-point steps on every rank.
 *
 * Only the global process set's float and integer allreduces without DGC use the streams
 * (DGC keeps per-name state the background thread owns; other collectives and process
 * sets run on the background thread as before). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/hash.h"
#include "train/train_internal.h"

/* A buffer below this is not split further across streams. */
#define AK__STREAM_MIN_BYTES ((size_t)256 << 10)
/* Weight of the newest cycle in the moving average of arrivals. */
#define ARRIVAL_WEIGHT 0.25

/* ---- the stream threads ------------------------------------------------------------- */

static void job_free(ak__stream_job *j) {
    if (!j) return;
    for (int i = 0; i < j->m; i++) ak__sig_free(&j->r[i].sig);
    free(j->r);
    free(j);
}

/* Fails the job's entries (the stream or the runtime failed before or while running it). */
static void job_fail(ak_train *t, ak__stream_job *j, ak_status st, const char *msg) {
    for (int i = 0; i < j->m; i++)
        if (j->r[i].entry) ak__train_complete(t, j->r[i].entry, st, msg);
}

/* The first failure of any stream, kept for the background thread to act on. */
static void record_failure(ak_train *t, ak_status st, const char *msg) {
    pthread_mutex_lock(&t->lock);
    if (t->stream_failed == AK_OK) {
        t->stream_failed = st;
        snprintf(t->stream_msg, sizeof t->stream_msg, "%s", msg);
    }
    pthread_mutex_unlock(&t->lock);
}

/* AK_OK until a stream failed; else that status and message. A runtime that stopped for
 * another reason (shutdown, a stall) still runs what was queued: every rank queued the
 * same, and a peer may already be inside one of those collectives. */
static ak_status stream_failure(ak_train *t, char *msg, size_t cap) {
    pthread_mutex_lock(&t->lock);
    ak_status st = t->stream_failed;
    snprintf(msg, cap, "%s", t->stream_msg);
    pthread_mutex_unlock(&t->lock);
    return st;
}

static void note_in_flight(ak_train *t, int delta) {
    int now = atomic_fetch_add(&t->in_flight, delta) + delta;
    int peak = atomic_load(&t->in_flight_peak);
    while (now > peak && !atomic_compare_exchange_weak(&t->in_flight_peak, &peak, now)) {
    }
}

static void run_job(ak__stream *s, ak__stream_job *j) {
    ak_train *t = s->t;
    char msg[512];
    ak_status st = stream_failure(t, msg, sizeof msg);
    if (st != AK_OK) { /* a broken channel: the peers cannot run this one either */
        job_fail(t, j, st, msg);
        return;
    }
    note_in_flight(t, 1);
    st = ak__run_allreduce(t, &s->chan, j->r, j->m);
    note_in_flight(t, -1);
    if (st == AK_OK) return;
    snprintf(msg, sizeof msg, "fusion stream %d: %.480s", s->index, ak_last_error());
    record_failure(t, st, msg);
    job_fail(t, j, st, msg);
}

static void *stream_main(void *arg) {
    ak__stream *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->stop) pthread_cond_wait(&s->changed, &s->lock);
        ak__stream_job *j = s->head;
        if (j && !(s->head = j->next)) s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        if (!j) return NULL; /* stopped with an empty queue */
        run_job(s, j);
        job_free(j);
    }
}

/* ---- start and stop ------------------------------------------------------------------ */

ak_status ak__streams_start(ak_train *t) {
    if (t->nstreams <= 0) return AK_OK;
    t->streams = calloc((size_t)t->nstreams, sizeof *t->streams);
    if (!t->streams) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory for fusion streams");
    for (int i = 0; i < t->nstreams; i++) {
        ak__stream *s = &t->streams[i];
        s->t = t;
        s->index = i;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->changed, NULL);
    }
    for (int i = 0; i < t->nstreams; i++) {
        ak__stream *s = &t->streams[i];
        /* same ranks, same order: a communicator with connections of its own */
        AK_CHECK(ak_comm_split(t->comm, 0, t->rank, &s->chan.comm));
        s->chan.size = t->size;
        s->chan.sc = &s->sc;
        if (pthread_create(&s->thread, NULL, stream_main, s) != 0)
            return AK_FAIL(AK_ERR_INTERNAL, "train: cannot start fusion stream %d", i);
        s->started = 1;
    }
    return AK_OK;
}

void ak__streams_stop(ak_train *t) {
    if (!t->streams) return;
    for (int i = 0; i < t->nstreams; i++) {
        ak__stream *s = &t->streams[i];
        pthread_mutex_lock(&s->lock);
        s->stop = 1;
        pthread_cond_signal(&s->changed);
        pthread_mutex_unlock(&s->lock);
    }
    for (int i = 0; i < t->nstreams; i++) {
        ak__stream *s = &t->streams[i];
        if (s->started) pthread_join(s->thread, NULL);
        for (ak__stream_job *j = s->head, *next; j; j = next) { /* never started */
            next = j->next;
            job_fail(t, j, AK_ERR_REMOTE, "the training runtime was shut down");
            job_free(j);
        }
        ak_comm_free(s->chan.comm);
        ak__scratch_free(&s->sc);
        pthread_cond_destroy(&s->changed);
        pthread_mutex_destroy(&s->lock);
    }
    free(t->streams);
    t->streams = NULL;
}

/* ---- the background thread's side ---------------------------------------------------- */

int ak__streams_take(const ak_train *t, const ak__pset *p, const ak__signature *s) {
    return t->streams && p->id == 0 && s->kind == AK_TRAIN_ALLREDUCE &&
           s->compression != AK_COMPRESS_DGC;
}

static size_t response_bytes(const ak__response *r) {
    size_t es = 0;
    ak_dtype_size(r->sig.dtype, &es);
    return ak__sig_elements(&r->sig) * es;
}

size_t ak__streams_buffer_bytes(ak_train *t, const ak__pset *p, const ak__response *r, int n) {
    /* only the global set's lists: every rank runs those (not other sets') */
    if (!t->streams || p->id != 0) return t->fusion_threshold;
    if (!t->fusion_adaptive) return t->stream_buffer = t->fusion_threshold;
    double arrived = 0;
    for (int i = 0; i < n; i++)
        if (!r[i].error && r[i].sig.kind == AK_TRAIN_ALLREDUCE) arrived += (double)response_bytes(&r[i]);
    if (arrived > 0)
        t->arrival_ema = t->arrival_ema > 0
                             ? (1 - ARRIVAL_WEIGHT) * t->arrival_ema + ARRIVAL_WEIGHT * arrived
                             : arrived;
    double share = t->arrival_ema / t->nstreams;
    size_t bytes = share > (double)AK__STREAM_MIN_BYTES ? (size_t)share : AK__STREAM_MIN_BYTES;
    if (bytes > t->fusion_threshold) bytes = t->fusion_threshold;
    t->stream_buffer = bytes;
    return bytes;
}

/* Deep copies of g[0..m): the job outlives the cycle's response list. */
static ak_status job_create(const ak__response *g, int m, ak__stream_job **out) {
    ak__stream_job *j = calloc(1, sizeof *j);
    if (j) j->r = calloc((size_t)m, sizeof *j->r);
    if (!j || !j->r) {
        free(j);
        return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory queuing a fused allreduce");
    }
    for (int i = 0; i < m; i++) {
        memcpy(j->r[i].name, g[i].name, sizeof j->r[i].name);
        j->r[i].entry = g[i].entry;
        j->m = i + 1;
        ak_status st = ak__sig_copy(&j->r[i].sig, &g[i].sig);
        if (st != AK_OK) {
            j->r[i].entry = NULL;
            for (int k = 0; k < i; k++) j->r[k].entry = NULL; /* the caller still owns them */
            job_free(j);
            return st;
        }
    }
    *out = j;
    return AK_OK;
}

/* Folds a dispatch decision into the digest the tests compare across ranks. */
static void digest_dispatch(ak_train *t, int stream, const ak__response *g, int m) {
    uint64_t h = ak__fnv1a64(t->fusion_digest, &stream, sizeof stream);
    h = ak__fnv1a64(h, &m, sizeof m);
    h = ak__fnv1a64(h, &t->stream_buffer, sizeof t->stream_buffer);
    for (int i = 0; i < m; i++) h = ak__fnv1a64(h, g[i].name, strlen(g[i].name) + 1);
    t->fusion_digest = h;
}

ak_status ak__streams_dispatch(ak_train *t, ak__response *g, int m) {
    ak__stream_job *j = NULL;
    AK_CHECK(job_create(g, m, &j));
    int k = (int)(t->stream_next++ % (uint64_t)t->nstreams);
    digest_dispatch(t, k, g, m);
    ak__stream *s = &t->streams[k];
    pthread_mutex_lock(&s->lock);
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    pthread_cond_signal(&s->changed);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < m; i++) g[i].entry = NULL; /* the stream's now */
    return AK_OK;
}

ak_status ak__streams_failed(ak_train *t, char *msg, size_t cap) {
    return t->streams ? stream_failure(t, msg, cap) : AK_OK;
}
