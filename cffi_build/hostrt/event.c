/* Events: a record enqueues a marker task; the event is complete once the
 * marker of its latest record has run.  StreamWaitEvent enqueues a task on
 * the waiting stream that blocks that stream's worker (never the host) until
 * the marker has run.  Every wait refers to a marker enqueued earlier, so
 * waits can never form a cycle. */
#include "hrt_stream.h"

#include <errno.h>
#include <stdlib.h>

#define EV_KNOWN_FLAGS 0x7Fu
#define EV_PLAIN_FLAGS (ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE)

typedef struct hrt_event {
    uint32_t flags;
    atomic_int refs;           /* the handle + queued markers and waits */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t rec_gen;          /* records issued */
    uint64_t done_gen;         /* records whose marker has run */
    int stream_id;             /* stream of the latest record */
    uint64_t capture_id;       /* the stream capture that recorded it last (0: a plain record) */
    aclError code;             /* error of the work captured by the latest completed record */
    char msg[HRT_MSG_LEN];
    uint64_t time_ns;
} hrt_event;

static void ev_unref(hrt_event *e) {
    if (atomic_fetch_sub(&e->refs, 1) == 1) {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        free(e);
    }
}

/* Validate and take a reference in one step, so a concurrent destroy cannot
 * free the event under us. */
static hrt_event *ev_get(aclrtEvent event, const char *api, aclError *rc) {
    if (!event) {
        *rc = hrt_error(ACL_ERROR_INVALID_PARAM, api, "event is NULL");
        return NULL;
    }
    hrt_handles_lock();
    bool ok = hrt_handle_valid_locked(event, HRT_H_EVENT);
    if (ok) atomic_fetch_add(&((hrt_event *)event)->refs, 1);
    hrt_handles_unlock();
    if (!ok) {
        *rc = hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, api, "event %p is not a live event", event);
        return NULL;
    }
    *rc = ACL_SUCCESS;
    return event;
}

static aclError ev_create(aclrtEvent *event, uint32_t flags, const char *api) {
    if (!event) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "event is NULL");
    if (flags & ~EV_KNOWN_FLAGS) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "unknown event flag bits 0x%x", flags);
    if (!hrt_current_ctx()) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, api, "no current context in this thread");
    hrt_event *e = calloc(1, sizeof *e);
    if (!e) return hrt_error(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    e->flags = flags;
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    hrt_handle_add(e, HRT_H_EVENT);
    *event = e;
    return ACL_SUCCESS;
}

aclError aclrtCreateEvent(aclrtEvent *event) { return ev_create(event, EV_PLAIN_FLAGS, "aclrtCreateEvent"); }

aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag) {
    return ev_create(event, flag, "aclrtCreateEventWithFlag");
}

aclError aclrtDestroyEvent(aclrtEvent event) {
    if (!event) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent", "event is NULL");
    if (!hrt_handle_remove(event, HRT_H_EVENT))
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyEvent", "event %p is not live", event);
    ev_unref(event); /* queued markers keep it alive until they have run */
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------- the marker */
typedef struct {
    hrt_task t;
    hrt_event *e;
    uint64_t gen;
} ev_task;

static aclError run_marker(hrt_task *t) {
    ev_task *m = (ev_task *)t;
    hrt_stream *s = t->stream;
    hrt_event *e = m->e;
    uint64_t now = hrt_now_ns();
    if (s->work_since_marker) { /* close the range */
        s->mark_code = s->range_code;
        memcpy(s->mark_msg, s->range_msg, HRT_MSG_LEN);
        s->range_code = 0;
        s->work_since_marker = false;
    }
    HRT_LOCK(&e->mu, HRT_RANK_EVENT);
    if (m->gen > e->done_gen) {
        e->done_gen = m->gen;
        e->time_ns = now;
        e->code = s->mark_code;
        if (s->mark_code) memcpy(e->msg, s->mark_msg, HRT_MSG_LEN);
        pthread_cond_broadcast(&e->cv);
    }
    HRT_UNLOCK(&e->mu);
    return ACL_SUCCESS;
}

/* A record captured by a stream capture: each replay records the event anew, numbered when
 * the replay is enqueued (so a synchronize after it waits for it) and marked when it runs. */
static uint64_t arm_marker(hrt_task *t, hrt_stream *replay_stream) {
    hrt_event *e = ((ev_task *)t)->e;
    HRT_LOCK(&e->mu, HRT_RANK_EVENT);
    uint64_t gen = ++e->rec_gen;
    e->stream_id = replay_stream->id;
    e->capture_id = 0; /* a replay's record is a plain one: waits on it wait */
    HRT_UNLOCK(&e->mu);
    return gen;
}

static aclError run_marker_armed(hrt_task *t, uint64_t gen) {
    ((ev_task *)t)->gen = gen; /* replays of one capture run one at a time */
    return run_marker(t);
}

static void release_ev_task(hrt_task *t) {
    ev_unref(((ev_task *)t)->e);
    free(t);
}

/* hrt_task_begin for a task about event `e`: the reference on e taken by
 * ev_get moves into the task (and is dropped if the stream does not resolve). */
static aclError ev_task_begin(hrt_event *e, aclrtStream stream, const char *api, hrt_task_fn run, uint8_t kind,
                              hrt_stream **s, ev_task **m) {
    aclError rc = hrt_task_begin(stream, api, sizeof **m, run, s, (void **)m);
    if (rc) {
        ev_unref(e);
        return rc;
    }
    (*m)->t.release = release_ev_task;
    (*m)->t.kind = kind;
    (*m)->e = e;
    return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    aclError rc;
    hrt_event *e = ev_get(event, "aclrtRecordEvent", &rc);
    if (!e) return rc;
    hrt_stream *s;
    ev_task *m;
    rc = ev_task_begin(e, stream, "aclrtRecordEvent", run_marker, HRT_TASK_MARKER, &s, &m);
    if (rc) return rc;
    uint64_t capture = hrt_stream_capture_id(s);
    HRT_LOCK(&e->mu, HRT_RANK_EVENT);
    e->capture_id = capture;
    if (!capture) {
        m->gen = ++e->rec_gen;
        e->stream_id = s->id;
    }
    HRT_UNLOCK(&e->mu);
    if (capture) { /* recorded by the capture: numbered by each replay */
        m->t.replayable = true;
        m->t.arm = arm_marker;
        m->t.run_armed = run_marker_armed;
    }
    return hrt_task_commit(s, &m->t, true); /* a marker on an idle stream: nothing to wait for */
}

static aclError run_noop(hrt_task *t) {
    (void)t;
    return ACL_SUCCESS;
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
    aclError rc;
    hrt_event *e = ev_get(event, "aclrtResetEvent", &rc);
    if (!e) return rc;
    if (!(e->flags & ACL_EVENT_SYNC)) {
        ev_unref(e);
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtResetEvent", "event was created without ACL_EVENT_SYNC");
    }
    hrt_stream *s;
    ev_task *m;
    /* A reset orders after the stream's prior work; its state change (back
     * to "not recorded") happens when the stream reaches it. */
    rc = ev_task_begin(e, stream, "aclrtResetEvent", run_noop, HRT_TASK_MARKER, &s, &m);
    if (rc) return rc;
    m->t.replayable = true;
    return hrt_task_commit(s, &m->t, false);
}

static bool ev_done_locked(hrt_event *e) { return e->done_gen >= e->rec_gen; }

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status) {
    if (!status) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus", "status is NULL");
    aclError rc;
    hrt_event *e = ev_get(event, "aclrtQueryEventStatus", &rc);
    if (!e) return rc;
    HRT_LOCK(&e->mu, HRT_RANK_EVENT);
    *status = ev_done_locked(e) ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    HRT_UNLOCK(&e->mu);
    ev_unref(e);
    return ACL_SUCCESS;
}

aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status) {
    if (!status) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtQueryEvent", "status is NULL");
    aclError rc;
    hrt_event *e = ev_get(event, "aclrtQueryEvent", &rc);
    if (!e) return rc;
    HRT_LOCK(&e->mu, HRT_RANK_EVENT);
    *status = ev_done_locked(e) ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
    HRT_UNLOCK(&e->mu);
    ev_unref(e);
    return ACL_SUCCESS;
}

static aclError ev_sync(aclrtEvent event, int32_t timeout_ms, const char *api) {
    aclError rc;
    hrt_event *e = ev_get(event, api, &rc);
    if (!e) return rc;
    HRT_LOCK(&e->mu, HRT_RANK_EVENT);
    uint64_t target = e->rec_gen;
    struct timespec dl;
    if (timeout_ms >= 0) hrt_deadline(&dl, timeout_ms);
    while (e->done_gen < target) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&e->cv, &e->mu);
        } else if (pthread_cond_timedwait(&e->cv, &e->mu, &dl) == ETIMEDOUT && e->done_gen < target) {
            rc = ACL_ERROR_RT_EVENT_SYNC_TIMEOUT;
            break;
        }
    }
    if (!rc && e->code) {
        rc = e->code;
        hrt_error_push(rc, api, e->msg);
    }
    HRT_UNLOCK(&e->mu);
    ev_unref(e);
    if (rc == ACL_ERROR_RT_EVENT_SYNC_TIMEOUT)
        hrt_error(rc, api, "event %p did not complete within %d ms", event, timeout_ms);
    return rc;
}

aclError aclrtSynchronizeEvent(aclrtEvent event) { return ev_sync(event, -1, "aclrtSynchronizeEvent"); }

aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout) {
    if (timeout < -1)
        return hrt_error(ACL_ERROR_RT_PARAM_INVALID, "aclrtSynchronizeEventWithTimeout",
                         "timeout %d ms is invalid (use -1 or >= 0)", timeout);
    return ev_sync(event, timeout, "aclrtSynchronizeEventWithTimeout");
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent) {
    const char *api = "aclrtEventElapsedTime";
    if (!ms) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "ms is NULL");
    aclError rc;
    hrt_event *a = ev_get(startEvent, api, &rc);
    if (!a) return rc;
    hrt_event *b = ev_get(endEvent, api, &rc);
    if (!b) {
        ev_unref(a);
        return rc;
    }
    uint64_t ta = 0, tb = 0;
    HRT_LOCK(&a->mu, HRT_RANK_EVENT);
    bool a_ok = a->rec_gen && ev_done_locked(a), a_time = a->flags & ACL_EVENT_TIME_LINE;
    ta = a->time_ns;
    HRT_UNLOCK(&a->mu);
    HRT_LOCK(&b->mu, HRT_RANK_EVENT);
    bool b_ok = b->rec_gen && ev_done_locked(b), b_time = b->flags & ACL_EVENT_TIME_LINE;
    tb = b->time_ns;
    HRT_UNLOCK(&b->mu);
    ev_unref(a);
    ev_unref(b);
    if (!a_time || !b_time)
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "both events need ACL_EVENT_TIME_LINE for timing");
    if (!a_ok || !b_ok)
        return hrt_error(ACL_ERROR_RT_EVENT_NOT_COMPLETE, api, "both events must be recorded and complete");
    *ms = (float)((double)((int64_t)(tb - ta)) / 1e6);
    return ACL_SUCCESS;
}

aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp) {
    const char *api = "aclrtEventGetTimestamp";
    if (!timestamp) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "timestamp is NULL");
    aclError rc;
    hrt_event *e = ev_get(event, api, &rc);
    if (!e) return rc;
    HRT_LOCK(&e->mu, HRT_RANK_EVENT);
    bool ok = e->rec_gen && ev_done_locked(e);
    uint64_t t = e->time_ns;
    HRT_UNLOCK(&e->mu);
    ev_unref(e);
    if (!ok) return hrt_error(ACL_ERROR_RT_EVENT_NOT_COMPLETE, api, "the event must be recorded and complete");
    *timestamp = t / 1000; /* us, as ACL gives it */
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------- device wait */
static aclError run_wait(hrt_task *t) {
    ev_task *w = (ev_task *)t;
    hrt_event *e = w->e;
    HRT_LOCK(&e->mu, HRT_RANK_EVENT);
    while (e->done_gen < w->gen) pthread_cond_wait(&e->cv, &e->mu);
    HRT_UNLOCK(&e->mu);
    return ACL_SUCCESS;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    aclError rc;
    hrt_event *e = ev_get(event, "aclrtStreamWaitEvent", &rc);
    if (!e) return rc;
    if (!(e->flags & ACL_EVENT_SYNC)) {
        ev_unref(e);
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent",
                         "event was created without ACL_EVENT_SYNC and cannot be waited on");
    }
    hrt_stream *s;
    ev_task *w;
    rc = ev_task_begin(e, stream, "aclrtStreamWaitEvent", run_wait, HRT_TASK_WAIT, &s, &w);
    if (rc) return rc;
    uint64_t capture = hrt_stream_capture_id(s);
    HRT_LOCK(&e->mu, HRT_RANK_EVENT);
    w->gen = e->rec_gen;
    bool done = ev_done_locked(e);
    /* in a capture, a record of the same capture is before this wait in the stream's own order */
    bool inside = capture && e->capture_id == capture;
    HRT_UNLOCK(&e->mu);
    if (w->gen == 0 || inside || (capture && done)) { /* nothing to wait for */
        hrt_task_cancel(s, &w->t);
        return ACL_SUCCESS;
    }
    return hrt_task_commit(s, &w->t, false); /* capturing: a dependency outside the capture, refused */
}
