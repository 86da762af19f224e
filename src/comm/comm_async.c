/* Async collectives: a progress thread per communicator runs queued calls in submission
 * order (the order every rank submits in), so several operations can be in flight while
 * the caller computes. Requests carry the status and error text back to the waiter. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm/comm_ops.h"
#include "core/check.h"

struct ak_comm_request {
    ak__coll call;
    _Atomic int done;
    ak_status status;
    char error[256];
    struct ak_comm_request *next;
    struct ak__async *owner;
};

struct ak__async {
    ak_comm *comm;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* queue grew, a request finished, or stop was asked */
    ak_comm_request *head, *tail;
    int stop;
};

static void finish(ak__async *a, ak_comm_request *r, ak_status st) {
    r->status = st;
    if (st != AK_OK) snprintf(r->error, sizeof r->error, "%s", ak_last_error());
    pthread_mutex_lock(&a->lock);
    atomic_store(&r->done, 1);
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
}

static void *progress_main(void *p) {
    ak__async *a = p;
    for (;;) {
        pthread_mutex_lock(&a->lock);
        while (!a->head && !a->stop) pthread_cond_wait(&a->changed, &a->lock);
        ak_comm_request *r = a->head;
        if (r && !(a->head = r->next)) a->tail = NULL;
        pthread_mutex_unlock(&a->lock);
        if (!r) return NULL; /* stop asked and the queue is drained */
        finish(a, r, ak__coll_run(a->comm, &r->call));
    }
}

static ak_status async_start(ak_comm *c) {
    ak__async *a = calloc(1, sizeof *a);
    if (!a) return AK_FAIL(AK_ERR_NO_MEMORY, "async: out of memory");
    a->comm = c;
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->changed, NULL);
    if (pthread_create(&a->thread, NULL, progress_main, a) != 0) {
        pthread_cond_destroy(&a->changed);
        pthread_mutex_destroy(&a->lock);
        free(a);
        return AK_FAIL(AK_ERR_NO_MEMORY, "async: cannot start the progress thread");
    }
    c->async = a;
    return AK_OK;
}

void ak__comm_async_stop(ak_comm *c) {
    ak__async *a = c->async;
    if (!a) return;
    pthread_mutex_lock(&a->lock);
    a->stop = 1;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->thread, NULL);
    pthread_cond_destroy(&a->changed);
    pthread_mutex_destroy(&a->lock);
    free(a);
    c->async = NULL;
}

ak_status ak__comm_async_submit(ak_comm *c, const ak__coll *call, ak_comm_request **req) {
    *req = NULL;
    if (!c->async) AK_CHECK(async_start(c));
    ak_comm_request *r = calloc(1, sizeof *r);
    if (!r) return AK_FAIL(AK_ERR_NO_MEMORY, "async: out of memory");
    r->call = *call;
    r->owner = c->async;
    ak__async *a = c->async;
    pthread_mutex_lock(&a->lock);
    if (a->tail) a->tail->next = r;
    else a->head = r;
    a->tail = r;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
    *req = r;
    return AK_OK;
}

ak_status ak_comm_test(ak_comm_request *req, int *done) {
    AK_ARG_CHECK(req && done, "ak_comm_test: NULL argument");
    *done = atomic_load(&req->done);
    return AK_OK;
}

ak_status ak_comm_wait(ak_comm_request *req) {
    AK_ARG_CHECK(req, "ak_comm_wait: NULL request");
    ak__async *a = req->owner;
    pthread_mutex_lock(&a->lock);
    while (!atomic_load(&req->done)) pthread_cond_wait(&a->changed, &a->lock);
    pthread_mutex_unlock(&a->lock);
    ak_status st = req->status;
    if (st != AK_OK) AK_FAIL(st, "%s", req->error); /* the error, on the waiting thread */
    free(req);
    return st;
}
