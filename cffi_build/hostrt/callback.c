/* Host callbacks: aclrtSubscribeReport binds a user thread (by its
 * pthread_self() value) to a stream; aclrtLaunchCallback enqueues a task
 * that, when the stream reaches it, hands the callback to that thread's
 * report queue; the thread runs it inside aclrtProcessReport.  A BLOCK
 * callback holds the stream until it has returned. */
#include "hrt_callback.h"

#include <errno.h>
#include <stdlib.h>

typedef struct cb_record {
    aclrtCallback fn;
    void *user;
    bool block;
    bool done;       /* ran, or dropped */
    bool dropped;
    hrt_stream *stream;
    struct cb_record *next;
} cb_record;

typedef struct sub {
    uint64_t thread;
    hrt_stream *stream;
    int device;
    struct sub *next;
} sub;

typedef struct rq {  /* report queue of one subscribed thread */
    uint64_t thread;
    cb_record *head, *tail;
    struct rq *next;
} rq;

static pthread_mutex_t cb_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cb_cv; /* records queued / records done */
static pthread_once_t cb_once = PTHREAD_ONCE_INIT;
static sub *subs;
static rq *queues;
static int64_t n_subs;

static void cb_init(void) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cb_cv, &ca);
    pthread_condattr_destroy(&ca);
}

int64_t hrt_callback_subscriptions(void) {
    HRT_LOCK(&cb_mu, HRT_RANK_CALLBACK);
    int64_t n = n_subs;
    HRT_UNLOCK(&cb_mu);
    return n;
}

static rq *find_queue(uint64_t thread) {
    for (rq *q = queues; q; q = q->next)
        if (q->thread == thread) return q;
    return NULL;
}

static bool thread_subscribed(uint64_t thread) {
    for (sub *s = subs; s; s = s->next)
        if (s->thread == thread) return true;
    return false;
}

/* Drop records that can no longer run; wakes BLOCK waiters. */
static void drop_records_locked(uint64_t thread, hrt_stream *stream) {
    for (rq *q = queues; q; q = q->next) {
        if (thread && q->thread != thread) continue;
        cb_record **pp = &q->head;
        q->tail = NULL;
        while (*pp) {
            cb_record *r = *pp;
            if (!stream || r->stream == stream) {
                *pp = r->next;
                r->dropped = r->done = true;
                if (!r->block) free(r); /* nobody waits on it */
            } else {
                q->tail = r;
                pp = &r->next;
            }
        }
    }
    pthread_cond_broadcast(&cb_cv);
}

static void remove_empty_queue_locked(uint64_t thread) {
    if (thread_subscribed(thread)) return;
    drop_records_locked(thread, NULL);
    rq **pp = &queues;
    while (*pp && (*pp)->thread != thread) pp = &(*pp)->next;
    if (*pp) {
        rq *q = *pp;
        *pp = q->next;
        free(q);
    }
}

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
    pthread_once(&cb_once, cb_init);
    hrt_stream *s;
    aclError rc = hrt_resolve_stream(stream, &s, "aclrtSubscribeReport");
    if (rc) return rc;
    HRT_LOCK(&cb_mu, HRT_RANK_CALLBACK);
    for (sub *x = subs; x && !rc; x = x->next) {
        if (x->stream == s)
            rc = hrt_error(ACL_ERROR_REPEAT_SUBSCRIBE, "aclrtSubscribeReport", "stream %d is already subscribed", s->id);
        else if (x->thread == threadId && x->device != s->ctx->device)
            rc = hrt_error(ACL_ERROR_RT_THREAD_SUBSCRIBE, "aclrtSubscribeReport",
                           "thread %llu already serves device %d", (unsigned long long)threadId, x->device);
    }
    sub *n = NULL;
    if (!rc) {
        n = calloc(1, sizeof *n);
        rq *q = find_queue(threadId);
        if (n && !q) {
            q = calloc(1, sizeof *q);
            if (q) {
                q->thread = threadId;
                q->next = queues;
                queues = q;
            }
        }
        if (!n || !q) {
            free(n);
            rc = hrt_error(ACL_ERROR_BAD_ALLOC, "aclrtSubscribeReport", "out of host memory");
        }
    }
    if (!rc) {
        n->thread = threadId;
        n->stream = s;
        n->device = s->ctx->device;
        n->next = subs;
        subs = n;
        n_subs++;
        HRT_LOCK(&s->mu, HRT_RANK_STREAM);
        s->subscribed = true;
        s->cb_thread = threadId;
        HRT_UNLOCK(&s->mu);
    }
    HRT_UNLOCK(&cb_mu);
    hrt_stream_release(s);
    return rc;
}

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
    pthread_once(&cb_once, cb_init);
    hrt_stream *s;
    aclError rc = hrt_resolve_stream(stream, &s, "aclrtUnSubscribeReport");
    if (rc) return rc;
    HRT_LOCK(&cb_mu, HRT_RANK_CALLBACK);
    sub **pp = &subs;
    while (*pp && !((*pp)->stream == s && (*pp)->thread == threadId)) pp = &(*pp)->next;
    if (!*pp) {
        rc = hrt_error(ACL_ERROR_RT_STREAM_SUBSCRIBE, "aclrtUnSubscribeReport",
                       "stream %d is not subscribed by thread %llu", s->id, (unsigned long long)threadId);
    } else {
        sub *x = *pp;
        *pp = x->next;
        free(x);
        n_subs--;
        HRT_LOCK(&s->mu, HRT_RANK_STREAM);
        s->subscribed = false;
        HRT_UNLOCK(&s->mu);
        drop_records_locked(threadId, s);
        remove_empty_queue_locked(threadId);
    }
    HRT_UNLOCK(&cb_mu);
    hrt_stream_release(s);
    return rc;
}

aclError hrt_callbacks_stream_gone(hrt_stream *s) {
    pthread_once(&cb_once, cb_init);
    HRT_LOCK(&cb_mu, HRT_RANK_CALLBACK);
    sub **pp = &subs;
    while (*pp) {
        if ((*pp)->stream == s) {
            sub *x = *pp;
            uint64_t th = x->thread;
            *pp = x->next;
            free(x);
            n_subs--;
            drop_records_locked(th, s);
            remove_empty_queue_locked(th);
        } else {
            pp = &(*pp)->next;
        }
    }
    HRT_UNLOCK(&cb_mu);
    return ACL_SUCCESS;
}

typedef struct {
    hrt_task t;
    aclrtCallback fn;
    void *user;
    bool block;
} cb_task;

static aclError run_callback(hrt_task *t) {
    cb_task *c = (cb_task *)t;
    hrt_stream *s = t->stream;
    HRT_LOCK(&cb_mu, HRT_RANK_CALLBACK);
    sub *x = subs;
    while (x && x->stream != s) x = x->next;
    rq *q = x ? find_queue(x->thread) : NULL;
    cb_record *r = q ? calloc(1, sizeof *r) : NULL;
    if (!r) {
        HRT_UNLOCK(&cb_mu);
        return hrt_task_fail(ACL_ERROR_RT_STREAM_NO_CB_REG, "callback on stream %d: no thread is subscribed any more", s->id);
    }
    r->fn = c->fn;
    r->user = c->user;
    r->block = c->block;
    r->stream = s;
    if (q->tail) q->tail->next = r;
    else q->head = r;
    q->tail = r;
    pthread_cond_broadcast(&cb_cv);
    aclError rc = ACL_SUCCESS;
    if (c->block) {
        while (!r->done) pthread_cond_wait(&cb_cv, &cb_mu);
        if (r->dropped)
            rc = hrt_task_fail(ACL_ERROR_RT_STREAM_NO_CB_REG, "blocking callback on stream %d dropped: unsubscribed", s->id);
        free(r);
    }
    HRT_UNLOCK(&cb_mu);
    return rc;
}

aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType, aclrtStream stream) {
    pthread_once(&cb_once, cb_init);
    const char *api = "aclrtLaunchCallback";
    if (!fn) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "fn is NULL");
    if (blockType != ACL_CALLBACK_BLOCK && blockType != ACL_CALLBACK_NO_BLOCK)
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "unknown blockType %d", (int)blockType);
    hrt_stream *s;
    cb_task *t;
    aclError rc = hrt_task_begin(stream, api, sizeof *t, run_callback, &s, (void **)&t);
    if (rc) return rc;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    bool subscribed = s->subscribed;
    HRT_UNLOCK(&s->mu);
    if (!subscribed) {
        int id = s->id;
        hrt_task_cancel(s, &t->t);
        return hrt_error(ACL_ERROR_RT_STREAM_NO_CB_REG, api, "stream %d has no subscribed report thread", id);
    }
    t->fn = fn;
    t->user = userData;
    t->block = blockType == ACL_CALLBACK_BLOCK;
    return hrt_task_commit(s, &t->t, false);
}

aclError aclrtProcessReport(int32_t timeout) {
    pthread_once(&cb_once, cb_init);
    const char *api = "aclrtProcessReport";
    if (timeout == 0 || timeout < -1)
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "timeout %d is invalid (use -1 or > 0 ms)", timeout);
    if (!hrt_current_ctx()) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, api, "no current context in this thread");
    uint64_t self = (uint64_t)pthread_self();
    struct timespec dl;
    if (timeout > 0) hrt_deadline(&dl, timeout);
    HRT_LOCK(&cb_mu, HRT_RANK_CALLBACK);
    rq *q;
    for (;;) {
        q = find_queue(self);
        if (!q) {
            HRT_UNLOCK(&cb_mu);
            return hrt_error(ACL_ERROR_RT_THREAD_SUBSCRIBE, api, "thread %llu is not subscribed to any stream",
                             (unsigned long long)self);
        }
        if (q->head) break;
        int w = timeout < 0 ? pthread_cond_wait(&cb_cv, &cb_mu) : pthread_cond_timedwait(&cb_cv, &cb_mu, &dl);
        if (w == ETIMEDOUT) {
            q = find_queue(self);
            if (q && q->head) break;
            HRT_UNLOCK(&cb_mu);
            return hrt_error(ACL_ERROR_RT_REPORT_TIMEOUT, api, "no callback arrived within %d ms", timeout);
        }
    }
    cb_record *r = q->head;
    q->head = r->next;
    if (!q->head) q->tail = NULL;
    HRT_UNLOCK(&cb_mu);
    r->fn(r->user);
    HRT_LOCK(&cb_mu, HRT_RANK_CALLBACK);
    if (r->block) {
        r->done = true;
        pthread_cond_broadcast(&cb_cv);
    } else {
        free(r);
    }
    HRT_UNLOCK(&cb_mu);
    return ACL_SUCCESS;
}
