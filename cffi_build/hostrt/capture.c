/* Stream capture (CANN's aclmdlRI* calls, acl_rt.h): record what is put on a stream once,
 * replay it as ONE stream task.
 *
 * aclmdlRICaptureBegin puts the stream in capture: from then on every way onto the
 * stream (stream.c) records a replayable task -- op launches, prepared launches, sunk
 * graphs, device/pinned copies, memsets, event records -- instead of running it, and
 * refuses anything else (host callbacks, pageable copies, waits for work outside the
 * capture), invalidating the capture.  aclmdlRICaptureEnd turns the recording into a model
 * (an aclmdlRI); aclmdlRIExecuteAsync enqueues one task that runs the recorded tasks back to
 * back on the stream's worker, as a sunk graph runs.  A recorded task keeps what it uses
 * alive (device allocations, kernels) until the model is destroyed and its last replay ran.
 *
 * Replays of one model run one at a time (its run_mu), whatever streams they are on: the
 * recorded tasks read and write the same buffers every time.  A failing task ends its
 * replay's work with an error naming the task; event records after it still complete
 * (carrying the error), so nothing waits forever. */
#include "hrt_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct hrt_model_ri {
    hrt_task **tasks;
    int n;
    int n_armed;              /* tasks with an arm hook (event records) */
    bool ended;               /* its capture ended: it can be replayed */
    int device;
    atomic_int refs;          /* the handle + queued replays */
    pthread_mutex_t run_mu;   /* HRT_RANK_REPLAY: one replay at a time */
    atomic_uint_least64_t replays;
    atomic_uint_least64_t cpu_ns;  /* CPU time the last replay took (0: none yet) */
} hrt_model_ri;

static uint64_t cpu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void release_tasks(hrt_task **tasks, int n) {
    for (int i = 0; i < n; i++) {
        if (tasks[i]->release) tasks[i]->release(tasks[i]);
        else free(tasks[i]);
    }
    free(tasks);
}

static void model_unref(hrt_model_ri *m) {
    if (atomic_fetch_sub(&m->refs, 1) != 1) return;
    release_tasks(m->tasks, m->n);
    pthread_mutex_destroy(&m->run_mu);
    free(m);
}

static void free_capture(hrt_capture *c) {
    release_tasks(c->tasks, c->n);
    free(c);
}

/* The capture's stream is gone mid-capture (its device reset): drop everything. */
static void discard_capture(hrt_capture *c) {
    hrt_model_ri *m = c->model;
    if (m && hrt_handle_remove(m, HRT_H_MODEL_RI)) model_unref(m);
    free_capture(c);
}

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
    const char *api = "aclmdlRICaptureBegin";
    if (mode != ACL_MODEL_RI_CAPTURE_MODE_GLOBAL && mode != ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL &&
        mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "unknown capture mode %d", (int)mode);
    hrt_stream *s;
    aclError rc = hrt_resolve_stream(stream, &s, api);
    if (rc) return rc;
    if (s->is_default) {
        hrt_stream_release(s);
        return hrt_error(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, api,
                         "the default stream cannot be captured: capture a stream made by aclrtCreateStream");
    }
    hrt_capture *c = calloc(1, sizeof *c);
    hrt_model_ri *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        hrt_stream_release(s);
        return hrt_error(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    }
    pthread_mutex_init(&m->run_mu, NULL);
    atomic_init(&m->refs, 1);
    m->device = s->ctx->device;
    c->mode = (int)mode;
    c->model = m;
    c->discard = discard_capture;
    hrt_handle_add(m, HRT_H_MODEL_RI); /* aclmdlRICaptureGetInfo gives it while the capture runs */
    rc = hrt_stream_capture_begin(s, c, api);
    if (rc) {
        hrt_handle_remove(m, HRT_H_MODEL_RI);
        model_unref(m);
        free(c);
    }
    hrt_stream_release(s);
    return rc;
}

aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status, aclmdlRI *modelRI) {
    const char *api = "aclmdlRICaptureGetInfo";
    if (!status) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "status is NULL");
    hrt_stream *s;
    aclError rc = hrt_resolve_stream(stream, &s, api);
    if (rc) return rc;
    void *model = NULL;
    *status = (aclmdlRICaptureStatus)hrt_stream_capture_status(s, &model);
    if (modelRI) *modelRI = model;
    hrt_stream_release(s);
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI) {
    const char *api = "aclmdlRICaptureEnd";
    if (!modelRI) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "modelRI is NULL");
    *modelRI = NULL;
    hrt_stream *s;
    aclError rc = hrt_resolve_stream(stream, &s, api);
    if (rc) return rc;
    hrt_capture *c;
    rc = hrt_stream_capture_end(s, &c, api);
    hrt_stream_release(s);
    if (rc) return rc;
    hrt_model_ri *m = c->model;
    if (c->status == ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED) {
        rc = hrt_error(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED, api, "the capture was invalidated: %s", c->why_msg);
        discard_capture(c);
        return rc;
    }
    m->tasks = c->tasks;
    m->n = c->n;
    for (int i = 0; i < m->n; i++) {
        m->tasks[i]->stream = NULL; /* a replay sets its own */
        if (m->tasks[i]->arm) m->n_armed++;
    }
    c->tasks = NULL;
    c->n = 0;
    free(c);
    m->ended = true;
    *modelRI = m;
    return ACL_SUCCESS;
}

/* Validate a model handle and take a reference (NULL and the error in *rc if it is not live). */
static hrt_model_ri *model_get(aclmdlRI modelRI, const char *api, aclError *rc) {
    if (!modelRI) {
        *rc = hrt_error(ACL_ERROR_INVALID_PARAM, api, "modelRI is NULL");
        return NULL;
    }
    hrt_handles_lock();
    bool ok = hrt_handle_valid_locked(modelRI, HRT_H_MODEL_RI);
    if (ok) atomic_fetch_add(&((hrt_model_ri *)modelRI)->refs, 1);
    hrt_handles_unlock();
    if (!ok) {
        *rc = hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, api, "modelRI %p is not a live model", modelRI);
        return NULL;
    }
    *rc = ACL_SUCCESS;
    return modelRI;
}

typedef struct {
    hrt_task t;
    hrt_model_ri *m;
    uint64_t replay;     /* its number, from 1 */
    uint64_t armed[];    /* one value per armed task, taken at the enqueue */
} replay_task;

static aclError run_replay(hrt_task *t) {
    replay_task *r = (replay_task *)t;
    hrt_model_ri *m = r->m;
    hrt_stream *s = t->stream;
    aclError failed = ACL_SUCCESS;
    char msg[HRT_MSG_LEN] = "";
    HRT_LOCK(&m->run_mu, HRT_RANK_REPLAY);
    uint64_t t0 = cpu_now_ns();
    for (int i = 0, k = 0; i < m->n; i++) {
        hrt_task *x = m->tasks[i];
        x->stream = s;
        if (x->run_armed) { /* an event record: runs even after a failure, and carries it */
            if (failed && !s->range_code) {
                s->range_code = failed;
                snprintf(s->range_msg, sizeof s->range_msg, "%s", msg);
                s->work_since_marker = true;
            }
            x->run_armed(x, r->armed[k++]);
            continue;
        }
        if (failed) continue;
        if (x->kind != HRT_TASK_WORK) { /* a reset: an ordering point only */
            x->run(x);
            continue;
        }
        hrt_task_fail_clear();
        aclError rc = x->run(x);
        s->work_since_marker = true;
        if (rc) {
            const char *why = hrt_task_fail_msg();
            snprintf(msg, sizeof msg, "replay %llu of captured model %p: task %d of %d failed: %s",
                     (unsigned long long)r->replay, (void *)m, i + 1, m->n, why && *why ? why : "(no message)");
            failed = rc;
        }
    }
    uint64_t spent = cpu_now_ns() - t0;
    atomic_store(&m->cpu_ns, spent ? spent : 1);
    HRT_UNLOCK(&m->run_mu);
    if (failed) return hrt_task_fail(failed, "%s", msg);
    return ACL_SUCCESS;
}

static void release_replay(hrt_task *t) {
    model_unref(((replay_task *)t)->m);
    free(t);
}

aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
    const char *api = "aclmdlRIExecuteAsync";
    aclError rc;
    hrt_model_ri *m = model_get(modelRI, api, &rc);
    if (!m) return rc;
    if (!m->ended) {
        model_unref(m);
        return hrt_error(ACL_ERROR_RT_MODEL_CAPTURED, api, "model %p is still being captured (aclmdlRICaptureEnd)",
                         modelRI);
    }
    hrt_stream *s;
    replay_task *r;
    rc = hrt_task_begin(stream, api, sizeof *r + sizeof(uint64_t) * (size_t)m->n_armed, run_replay, &s, (void **)&r);
    if (rc) {
        model_unref(m);
        return rc;
    }
    r->m = m; /* the reference moves into the task */
    r->t.release = release_replay;
    if (s->ctx->device != m->device) {
        hrt_task_cancel(s, &r->t);
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "model %p was captured on device %d, the stream is on device %d",
                         modelRI, m->device, s->ctx->device);
    }
    if (hrt_stream_capturing(s)) { /* not a replayable task: refused, before its event records are numbered */
        hrt_stream_capture_invalidate(s, ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                                      "a captured model was replayed into a capturing stream");
        hrt_task_cancel(s, &r->t);
        return hrt_error(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, api,
                         "the stream is capturing: a replay cannot be captured; the capture is invalidated");
    }
    r->replay = atomic_fetch_add(&m->replays, 1) + 1;
    for (int i = 0, k = 0; i < m->n; i++)
        if (m->tasks[i]->arm) r->armed[k++] = m->tasks[i]->arm(m->tasks[i], s);
    /* a replay whose last run took at most AIOGE_HOST_INLINE_US of CPU time runs on the caller's
     * thread when the stream is idle, as a cheap sunk graph does: less time than waking the
     * worker (AIOGE_HOST_INLINE_BYTES=0 turns running inline off) */
    const hrt_env *env = hrt_env_get();
    uint64_t cpu = atomic_load(&m->cpu_ns);
    bool may_inline = env->inline_bytes && cpu && cpu <= (uint64_t)env->inline_us * 1000u;
    return hrt_task_commit(s, &r->t, may_inline);
}

aclError aclmdlRIDestroy(aclmdlRI modelRI) {
    const char *api = "aclmdlRIDestroy";
    aclError rc;
    hrt_model_ri *m = model_get(modelRI, api, &rc);
    if (!m) return rc;
    bool ended = m->ended;
    if (!ended) {
        model_unref(m);
        return hrt_error(ACL_ERROR_RT_MODEL_CAPTURED, api, "model %p is still being captured (aclmdlRICaptureEnd)",
                         modelRI);
    }
    if (!hrt_handle_remove(m, HRT_H_MODEL_RI)) { /* destroyed concurrently */
        model_unref(m);
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, api, "modelRI %p is not a live model", modelRI);
    }
    model_unref(m); /* model_get's */
    model_unref(m); /* the handle's: queued replays keep it until they ran */
    return ACL_SUCCESS;
}
