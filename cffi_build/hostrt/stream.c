/* Streams: one worker thread and one FIFO task queue each.
 *
 * Launch calls enqueue a task and return.  The worker runs tasks in order;
 * a task's failure is stored twice: as the stream's sticky error (returned
 * and cleared by the next stream synchronize) and as the error of the range
 * since the last event marker (carried by that event), so an error reaches
 * the synchronize of the stream and of the first event recorded after it. */
#include "hrt_stream.h"
#include "../aioge_host.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static atomic_int_least64_t n_tasks_executed, n_tasks_failed;
static atomic_int next_stream_id;
static atomic_int global_captures;          /* GLOBAL-mode captures in progress, any thread */
static _Thread_local int strict_captures;   /* non-RELAXED captures this thread began */

int64_t hrt_task_counter(int which) {
    return which == 0 ? atomic_load(&n_tasks_executed) : atomic_load(&n_tasks_failed);
}

static void copy_msg(char *dst, const char *src) {
    size_t n = strlen(src);
    if (n >= HRT_MSG_LEN) n = HRT_MSG_LEN - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* With s->mu held: keep a failed task's error for its own launch (completion by sequence number). */
static void log_failure(hrt_stream *s, uint64_t seq, aclError code, const char *msg) {
    if (!s->log_failures || seq == s->unlogged_seq) return; /* run_now: reported to its caller */
    hrt_failure *f = calloc(1, sizeof *f);
    if (f) {
        f->seq = seq;
        f->code = code;
        snprintf(f->msg, sizeof f->msg, "%s", msg ? msg : "");
        if (s->failures_tail) s->failures_tail->next = f;
        else s->failures = f;
        s->failures_tail = f;
    }
    /* counted even when the record could not be kept: the taker then sees a gap and reports a failure */
    atomic_fetch_add(&s->n_failures, 1);
}

void hrt_stream_free_failures(hrt_stream *s) {
    hrt_failure *f = s->failures;
    while (f) {
        hrt_failure *next = f->next;
        free(f);
        f = next;
    }
    s->failures = s->failures_tail = NULL;
}

static void record_failure(hrt_stream *s, hrt_task *t, aclError rc) {
    const char *m = hrt_task_fail_msg();
    char buf[HRT_MSG_LEN];
    if (!m || !*m) {
        snprintf(buf, sizeof buf, "task %llu on stream %d failed", (unsigned long long)t->seq, s->id);
        m = buf;
    }
    if (!s->range_code) {
        s->range_code = rc;
        copy_msg(s->range_msg, m);
    }
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    if (!s->sticky_code) {
        s->sticky_code = rc;
        copy_msg(s->sticky_msg, m);
    }
    if (s->failure_mode == ACL_STOP_ON_FAILURE) s->failed_stop = true;
    log_failure(s, t->seq, rc, m);
    HRT_UNLOCK(&s->mu);
    atomic_fetch_add(&n_tasks_failed, 1);
}

/* How long an idle worker polls for the next task before it sleeps: in a
 * burst of launches this saves a futex wake-up per launch. */
static uint64_t spin_ns(void) { return (uint64_t)hrt_env_get()->spin_us * 1000; }

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Called with s->mu held and the queue empty; returns with s->mu held. */
static void idle_wait(hrt_stream *s) {
    uint64_t budget = s->inline_busy ? 0 : spin_ns(); /* a queued task waits for the inline one: sleep */
    if (budget) {
        HRT_UNLOCK(&s->mu);
        uint64_t t0 = hrt_now_ns();
        /* yield rather than burn: on a busy machine the launching thread
         * (an event loop, say) gets the core */
        for (unsigned i = 1; !atomic_load_explicit(&s->queued, memory_order_acquire); i++) {
            if (i & 7) cpu_relax();
            else sched_yield();
            if (!(i & 63) && hrt_now_ns() - t0 > budget) break;
        }
        HRT_LOCK(&s->mu, HRT_RANK_STREAM);
        if (s->head || s->stop) return;
    }
    s->worker_idle = true;
    pthread_cond_wait(&s->cv_work, &s->mu);
    s->worker_idle = false;
}

/* Run a task taken off the queue (or inline), without s->mu; returns its sequence number. */
static uint64_t run_task(hrt_stream *s, hrt_task *t, bool skip, bool *marker) {
    aclError rc = ACL_SUCCESS;
    HRT_ASSERT_NO_LOCKS("running a task");
    hrt_task_fail_clear();
    if (t->injected) {
        rc = hrt_task_fail(t->injected, "injected failure (aiogeHostInjectFailure) of task %llu on stream %d",
                           (unsigned long long)t->seq, s->id);
    } else if (!skip) {
        rc = t->run(t);
    }
    if (t->kind == HRT_TASK_WORK) {
        atomic_fetch_add(&n_tasks_executed, 1);
        s->work_since_marker = true;
    }
    if (rc) record_failure(s, t, rc);
    uint64_t seq = t->seq;
    *marker = t->kind == HRT_TASK_MARKER;
    if (t->release) t->release(t);
    else free(t);
    return seq;
}

static void notify_write(int fd) {
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof one);
    (void)w;
}

/* With s->mu held: task `seq` is done.  The notify fd is written under mu (it cannot be detached
 * meanwhile); or, `defer` (the worker), not: the fd is returned (else -1) with s->notifying set,
 * and the caller writes it after releasing mu, then clears s->notifying under mu (notify_done). */
static int task_done(hrt_stream *s, uint64_t seq, bool marker, bool defer) {
    atomic_store(&s->completed, seq);
    if (s->sync_waiters) pthread_cond_broadcast(&s->cv_done);
    if (s->notify_armed && s->notify_fd >= 0 && (s->notify_at ? seq >= s->notify_at : marker)) {
        s->notify_armed = false;
        s->notify_at = 0;
        if (defer) {
            s->notifying = true;
            return s->notify_fd;
        }
        notify_write(s->notify_fd);
    }
    return -1;
}

/* Called with s->mu held after task_done returned fd >= 0; returns with s->mu held.  The write
 * wakes the event loop, which runs at a higher priority than this worker and may preempt it at
 * once: under mu, the loop's next submit on this stream would wait for the preempted worker. */
static void notify_done(hrt_stream *s, int fd) {
    HRT_UNLOCK(&s->mu);
    notify_write(fd);
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    s->notifying = false;
    pthread_cond_broadcast(&s->cv_done); /* a SetNotifyFd waiting to detach the fd */
}

static void *stream_worker(void *arg) {
    hrt_stream *s = arg;
    char name[16];
    snprintf(name, sizeof name, "hrt-stream-%d", s->id);
    pthread_setname_np(pthread_self(), name);
    hrt_thread_background();
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    for (;;) {
        while ((!s->head || s->inline_busy) && !s->stop) idle_wait(s);
        hrt_task *t = s->head;
        if (!t) break; /* stop requested and queue drained */
        atomic_fetch_sub_explicit(&s->queued, 1, memory_order_relaxed);
        s->head = t->next;
        if (!s->head) s->tail = NULL;
        bool skip = s->failed_stop && t->kind == HRT_TASK_WORK;
        s->worker_busy = true;
        HRT_UNLOCK(&s->mu);

        bool marker;
        uint64_t seq = run_task(s, t, skip, &marker);

        HRT_LOCK(&s->mu, HRT_RANK_STREAM);
        s->worker_busy = false;
        int fd = task_done(s, seq, marker, true);
        if (fd >= 0) notify_done(s, fd);
    }
    HRT_UNLOCK(&s->mu);
    return NULL;
}

hrt_stream *hrt_stream_new(hrt_context *ctx, bool is_default, aclError *rc) {
    hrt_stream *s = calloc(1, sizeof *s);
    if (!s) {
        *rc = hrt_error(ACL_ERROR_BAD_ALLOC, "aclrtCreateStream", "out of host memory");
        return NULL;
    }
    s->ctx = ctx;
    s->is_default = is_default;
    s->notify_fd = -1;
    s->id = atomic_fetch_add(&next_stream_id, 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv_work, &ca);
    pthread_cond_init(&s->cv_done, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&s->thread, NULL, stream_worker, s) != 0) {
        pthread_cond_destroy(&s->cv_work);
        pthread_cond_destroy(&s->cv_done);
        pthread_mutex_destroy(&s->mu);
        free(s);
        *rc = hrt_error(ACL_ERROR_RT_NO_STREAM_RESOURCE, "aclrtCreateStream", "cannot start a stream worker thread");
        return NULL;
    }
    hrt_handle_add(s, HRT_H_STREAM);
    *rc = ACL_SUCCESS;
    return s;
}

/* The handle must already be unregistered: no new user can appear. */
void hrt_stream_quiesce(hrt_stream *s) {
    while (atomic_load(&s->users) > 0) sched_yield();
}

void hrt_stream_join(hrt_stream *s) {
    hrt_stream_quiesce(s);
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    s->stop = true;
    pthread_cond_signal(&s->cv_work);
    HRT_UNLOCK(&s->mu);
    pthread_join(s->thread, NULL);
}

void hrt_stream_free(hrt_stream *s) {
    hrt_stream_free_failures(s);
    if (s->capture) { /* its device was reset mid-capture */
        if (s->capture->mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) atomic_fetch_sub(&global_captures, 1);
        if (s->capture->discard) s->capture->discard(s->capture);
    }
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

aclError hrt_resolve_stream(aclrtStream stream, hrt_stream **out, const char *api) {
    hrt_handles_lock();
    hrt_context *c = hrt_tls_ctx();
    if (!c || !hrt_handle_valid_locked(c, HRT_H_CONTEXT)) {
        hrt_handles_unlock();
        return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, api,
                         "no current context in this thread (call aclrtSetDevice or aclrtSetCurrentContext)");
    }
    hrt_stream *s = stream ? (hrt_stream *)stream : c->default_stream;
    if (!hrt_handle_valid_locked(s, HRT_H_STREAM)) {
        hrt_handles_unlock();
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, api, "stream %p is not a live stream", stream);
    }
    if (s->ctx != c) {
        hrt_handles_unlock();
        return hrt_error(ACL_ERROR_RT_STREAM_CONTEXT, api,
                         "stream %d belongs to another context than the current one", s->id);
    }
    atomic_fetch_add(&s->users, 1);
    hrt_handles_unlock();
    *out = s;
    return ACL_SUCCESS;
}

void hrt_stream_release(hrt_stream *s) { atomic_fetch_sub(&s->users, 1); }

/* ------------------------------------------------------------ stream capture */

static void release_task(hrt_task *t) {
    if (t->release) t->release(t);
    else free(t);
}

static void invalidate_locked(hrt_capture *c, aclError code, const char *msg) {
    if (c->status == ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED) return;
    c->status = ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED;
    c->why = code;
    copy_msg(c->why_msg, msg);
}

/* With s->mu held and s->capture set: record t in the capture (0), or refuse it -- with
 * `refuse` if non-zero, else by its kind -- invalidating the capture; a refused task is
 * left in *drop for the caller to release once it has unlocked. */
static aclError capture_take_locked(hrt_stream *s, hrt_task *t, aclError refuse, hrt_task **drop) {
    hrt_capture *c = s->capture;
    aclError rc = 0;
    if (c->status == ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED) {
        rc = hrt_error(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED, "stream capture",
                       "the capture on stream %d was invalidated earlier: %s", s->id, c->why_msg);
    } else if (refuse || !t->replayable) {
        if (!refuse) refuse = t->kind == HRT_TASK_WAIT ? ACL_ERROR_RT_CAPTURE_DEPENDENCY
                                                      : ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
        const char *what = refuse == ACL_ERROR_RT_CAPTURE_DEPENDENCY
                               ? "a wait for work outside the capture"
                               : refuse == ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC
                                     ? "a call that completes synchronously (pageable host memory)"
                                     : "work that cannot be replayed (host callbacks, host-memory graph I/O, "
                                       "timed runs, pageable copies)";
        char msg[HRT_MSG_LEN];
        snprintf(msg, sizeof msg, "stream %d is capturing and cannot record %s; the capture is invalidated",
                 s->id, what);
        rc = hrt_error(refuse, "stream capture", "%s", msg);
        invalidate_locked(c, refuse, msg);
    } else if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        hrt_task **tasks = realloc(c->tasks, sizeof *tasks * (size_t)cap);
        if (!tasks) {
            rc = hrt_error(ACL_ERROR_BAD_ALLOC, "stream capture", "out of host memory recording a task");
            invalidate_locked(c, rc, "out of host memory recording a task");
        } else {
            c->tasks = tasks;
            c->cap = cap;
        }
    }
    if (rc) {
        *drop = t;
        return rc;
    }
    t->next = NULL;
    t->stream = s;
    c->tasks[c->n++] = t;
    return 0;
}

/* If s captures: hand t to the capture (true, its result in *rc); else false. */
static bool capture_intercept(hrt_stream *s, hrt_task *t, aclError refuse, aclError *rc) {
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    if (!s->capture) {
        HRT_UNLOCK(&s->mu);
        return false;
    }
    hrt_task *drop = NULL;
    *rc = capture_take_locked(s, t, refuse, &drop);
    HRT_UNLOCK(&s->mu);
    if (drop) release_task(drop);
    return true;
}

aclError hrt_stream_capture_begin(hrt_stream *s, hrt_capture *c, const char *api) {
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    if (s->capture) {
        HRT_UNLOCK(&s->mu);
        return hrt_error(ACL_ERROR_RT_STREAM_CAPTURED, api, "stream %d is already capturing", s->id);
    }
    static atomic_uint_least64_t next_id;
    c->status = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
    c->thread = pthread_self();
    c->id = atomic_fetch_add(&next_id, 1) + 1;
    s->capture = c;
    HRT_UNLOCK(&s->mu);
    if (c->mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) atomic_fetch_add(&global_captures, 1);
    if (c->mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED) strict_captures++;
    return ACL_SUCCESS;
}

aclError hrt_stream_capture_end(hrt_stream *s, hrt_capture **out, const char *api) {
    *out = NULL;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    hrt_capture *c = s->capture;
    if (!c) {
        HRT_UNLOCK(&s->mu);
        return hrt_error(ACL_ERROR_RT_STREAM_NOT_CAPTURED, api, "stream %d is not capturing", s->id);
    }
    if (c->mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        HRT_UNLOCK(&s->mu);
        return hrt_error(ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD, api,
                         "the capture on stream %d was begun by another thread (only RELAXED captures end anywhere)",
                         s->id);
    }
    s->capture = NULL;
    HRT_UNLOCK(&s->mu);
    if (c->mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) atomic_fetch_sub(&global_captures, 1);
    if (c->mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED) strict_captures--;
    *out = c;
    return ACL_SUCCESS;
}

int hrt_stream_capture_status(hrt_stream *s, void **model) {
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    int status = s->capture ? s->capture->status : ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    *model = s->capture ? s->capture->model : NULL;
    HRT_UNLOCK(&s->mu);
    return status;
}

uint64_t hrt_stream_capture_id(hrt_stream *s) {
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    uint64_t id = s->capture ? s->capture->id : 0;
    HRT_UNLOCK(&s->mu);
    return id;
}

bool hrt_stream_capturing(hrt_stream *s) {
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    bool on = s->capture != NULL;
    HRT_UNLOCK(&s->mu);
    return on;
}

void hrt_stream_capture_invalidate(hrt_stream *s, aclError code, const char *msg) {
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    if (s->capture) invalidate_locked(s->capture, code, msg);
    HRT_UNLOCK(&s->mu);
}

aclError hrt_capture_unsafe(const char *api) {
    if (atomic_load(&global_captures) > 0 || strict_captures > 0)
        return hrt_error(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, api,
                         "not allowed while a stream capture is in progress (a GLOBAL capture in any thread, or a "
                         "THREAD_LOCAL or GLOBAL one begun by this thread; RELAXED captures allow it)");
    return ACL_SUCCESS;
}

/* A capturing stream cannot be synchronized or queried: what it holds has not run. */
static aclError refuse_capturing_locked(hrt_stream *s, const char *api) {
    char msg[HRT_MSG_LEN];
    snprintf(msg, sizeof msg, "stream %d is capturing: its work has not run and cannot be waited for or queried "
                              "(%s); the capture is invalidated", s->id, api);
    invalidate_locked(s->capture, ACL_ERROR_RT_STREAM_CAPTURED, msg);
    return hrt_error(ACL_ERROR_RT_STREAM_CAPTURED, api, "%s", msg);
}

uint64_t hrt_stream_enqueue(hrt_stream *s, hrt_task *t) {
    t->next = NULL;
    t->stream = s;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    if (s->capture) { /* recorded, not run: it takes no number (it is done once what came before is) */
        hrt_task *drop = NULL;
        capture_take_locked(s, t, 0, &drop);
        uint64_t before = s->submitted;
        HRT_UNLOCK(&s->mu);
        if (drop) release_task(drop);
        return before;
    }
    if (t->kind == HRT_TASK_WORK && s->inject_left > 0) {
        t->injected = s->inject_code;
        s->inject_left--;
    }
    uint64_t seq = t->seq = ++s->submitted; /* the task may have run and gone once mu is released */
    if (s->tail) s->tail->next = t;
    else s->head = t;
    s->tail = t;
    atomic_fetch_add_explicit(&s->queued, 1, memory_order_release);
    bool wake = s->worker_idle;
    HRT_UNLOCK(&s->mu);
    if (wake) pthread_cond_signal(&s->cv_work);
    return seq;
}

aclError hrt_task_alloc(const char *api, size_t size, hrt_task_fn run, void **task) {
    hrt_task *t = calloc(1, size);
    *task = t;
    if (!t) return hrt_error(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    t->run = run;
    return ACL_SUCCESS;
}

aclError hrt_task_begin(aclrtStream stream, const char *api, size_t size, hrt_task_fn run, hrt_stream **s,
                        void **task) {
    *task = NULL;
    aclError rc = hrt_resolve_stream(stream, s, api);
    if (rc) return rc;
    rc = hrt_task_alloc(api, size, run, task);
    if (rc) hrt_stream_release(*s);
    return rc;
}

aclError hrt_task_commit(hrt_stream *s, hrt_task *t, bool may_inline) {
    aclError rc = ACL_SUCCESS;
    if (!capture_intercept(s, t, 0, &rc)) hrt_stream_submit(s, t, may_inline);
    hrt_stream_release(s);
    return rc;
}

uint64_t hrt_task_commit_seq(hrt_stream *s, hrt_task *t, bool may_inline) {
    uint64_t seq = hrt_stream_submit(s, t, may_inline); /* submit hands it to a capture in progress */
    hrt_stream_release(s);
    return seq;
}

aclError hrt_task_commit_sync(hrt_stream *s, hrt_task *t) {
    aclError rc;
    if (capture_intercept(s, t, ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC, &rc)) {
        hrt_stream_release(s);
        return rc;
    }
    hrt_stream_wait_seq(s, hrt_stream_enqueue(s, t));
    hrt_stream_release(s);
    return ACL_SUCCESS;
}

void hrt_task_cancel(hrt_stream *s, hrt_task *t) {
    if (t->release) t->release(t);
    else free(t);
    hrt_stream_release(s);
}

uint64_t hrt_stream_submit(hrt_stream *s, hrt_task *t, bool may_inline) {
    if (!may_inline) return hrt_stream_enqueue(s, t);
    t->next = NULL;
    t->stream = s;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    if (s->head || s->worker_busy || s->inline_busy || s->stop || s->capture) {
        HRT_UNLOCK(&s->mu);
        return hrt_stream_enqueue(s, t);
    }
    if (t->kind == HRT_TASK_WORK && s->inject_left > 0) {
        t->injected = s->inject_code;
        s->inject_left--;
    }
    t->seq = ++s->submitted;
    bool skip = s->failed_stop && t->kind == HRT_TASK_WORK;
    s->inline_busy = true; /* the worker takes nothing queued meanwhile: it stays behind this task */
    HRT_UNLOCK(&s->mu);

    bool marker;
    uint64_t seq = run_task(s, t, skip, &marker);

    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    s->inline_busy = false;
    task_done(s, seq, marker, false);
    bool wake = s->head != NULL;
    HRT_UNLOCK(&s->mu);
    if (wake) pthread_cond_signal(&s->cv_work);
    return seq;
}

bool hrt_stream_run_now(hrt_stream *s, hrt_task *t, aclError *rc, char msg[HRT_MSG_LEN]) {
    t->next = NULL;
    t->stream = s;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    if (s->head || s->worker_busy || s->inline_busy || s->stop || s->failed_stop || s->capture) {
        HRT_UNLOCK(&s->mu);
        return false;
    }
    if (t->kind == HRT_TASK_WORK && s->inject_left > 0) {
        t->injected = s->inject_code;
        s->inject_left--;
    }
    t->seq = ++s->submitted;
    s->unlogged_seq = t->seq; /* its failure is the caller's: no completion takes it (launch.c) */
    s->inline_busy = true;
    HRT_UNLOCK(&s->mu);

    /* the range before this task is closed by no marker of ours: keep it aside,
     * so this task's failure is its caller's alone and an earlier one stays for
     * the next marker */
    aclError before = s->range_code;
    char before_msg[HRT_MSG_LEN];
    if (before) memcpy(before_msg, s->range_msg, HRT_MSG_LEN);
    s->range_code = 0;
    bool marker;
    uint64_t seq = run_task(s, t, false, &marker);
    *rc = s->range_code;
    if (*rc) memcpy(msg, s->range_msg, HRT_MSG_LEN);
    s->range_code = before;
    if (before) memcpy(s->range_msg, before_msg, HRT_MSG_LEN);

    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    s->inline_busy = false;
    task_done(s, seq, marker, false);
    bool wake = s->head != NULL;
    HRT_UNLOCK(&s->mu);
    if (wake) pthread_cond_signal(&s->cv_work);
    return true;
}

void hrt_stream_wait_seq(hrt_stream *s, uint64_t seq) {
    if (atomic_load(&s->completed) >= seq) return;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    s->sync_waiters++;
    while (atomic_load(&s->completed) < seq) pthread_cond_wait(&s->cv_done, &s->mu);
    s->sync_waiters--;
    HRT_UNLOCK(&s->mu);
}

/* ------------------------------------------------------------- the API */
static aclError stream_sync(hrt_stream *s, int32_t timeout_ms, const char *api) {
    aclError rc = ACL_SUCCESS;
    if (pthread_equal(pthread_self(), s->thread))
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "a task cannot synchronize its own stream");
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    if (s->capture) {
        rc = refuse_capturing_locked(s, api);
        HRT_UNLOCK(&s->mu);
        return rc;
    }
    uint64_t target = s->submitted;
    if (atomic_load(&s->completed) < target) {
        struct timespec dl;
        if (timeout_ms >= 0) hrt_deadline(&dl, timeout_ms);
        s->sync_waiters++;
        while (atomic_load(&s->completed) < target) {
            if (timeout_ms < 0) {
                pthread_cond_wait(&s->cv_done, &s->mu);
            } else if (pthread_cond_timedwait(&s->cv_done, &s->mu, &dl) == ETIMEDOUT &&
                       atomic_load(&s->completed) < target) {
                rc = ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
                break;
            }
        }
        s->sync_waiters--;
    }
    if (rc) {
        HRT_UNLOCK(&s->mu);
        return hrt_error(rc, api, "stream %d did not complete within %d ms", s->id, timeout_ms);
    }
    if (s->sticky_code) {
        rc = s->sticky_code;
        hrt_error_push(rc, api, s->sticky_msg);
        s->sticky_code = 0;
        s->failed_stop = false;
    }
    HRT_UNLOCK(&s->mu);
    return rc;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
    hrt_stream *s;
    aclError rc = hrt_resolve_stream(stream, &s, "aclrtSynchronizeStream");
    if (rc) return rc;
    rc = stream_sync(s, -1, "aclrtSynchronizeStream");
    hrt_stream_release(s);
    return rc;
}

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
    if (timeout < -1)
        return hrt_error(ACL_ERROR_RT_PARAM_INVALID, "aclrtSynchronizeStreamWithTimeout",
                         "timeout %d ms is invalid (use -1 or >= 0)", timeout);
    hrt_stream *s;
    aclError rc = hrt_resolve_stream(stream, &s, "aclrtSynchronizeStreamWithTimeout");
    if (rc) return rc;
    rc = stream_sync(s, timeout, "aclrtSynchronizeStreamWithTimeout");
    hrt_stream_release(s);
    return rc;
}

/* For a call that reads or sets a stream's state: resolve, pin and lock it
 * (NULL with the error in *rc); stream_unlock undoes both. */
static hrt_stream *stream_lock(aclrtStream stream, const char *api, aclError *rc) {
    hrt_stream *s;
    *rc = hrt_resolve_stream(stream, &s, api);
    if (*rc) return NULL;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    return s;
}

static void stream_unlock(hrt_stream *s) {
    HRT_UNLOCK(&s->mu);
    hrt_stream_release(s);
}

aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status) {
    if (!status) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery", "status is NULL");
    aclError err;
    hrt_stream *s = stream_lock(stream, "aclrtStreamQuery", &err);
    if (!s) return err;
    if (s->capture) {
        err = refuse_capturing_locked(s, "aclrtStreamQuery");
        stream_unlock(s);
        return err;
    }
    bool done = atomic_load(&s->completed) >= s->submitted;
    err = s->sticky_code;
    if (err) hrt_error_push(err, "aclrtStreamQuery", s->sticky_msg);
    stream_unlock(s);
    if (err) return err;
    *status = done ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode) {
    if (mode != ACL_CONTINUE_ON_FAILURE && mode != ACL_STOP_ON_FAILURE)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtSetStreamFailureMode", "unknown failure mode %llu",
                         (unsigned long long)mode);
    aclError rc;
    hrt_stream *s = stream_lock(stream, "aclrtSetStreamFailureMode", &rc);
    if (!s) return rc;
    s->failure_mode = mode;
    s->failure_mode_set = true;
    stream_unlock(s);
    return ACL_SUCCESS;
}

/* ---------------------------------------------------- loop notification */
aclError aiogeHostStreamSetNotifyFd(aclrtStream stream, int32_t fd) {
    if (fd < -1) return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostStreamSetNotifyFd", "fd %d is invalid", fd);
    aclError rc;
    hrt_stream *s = stream_lock(stream, "aiogeHostStreamSetNotifyFd", &rc);
    if (!s) return rc;
    while (s->notifying) pthread_cond_wait(&s->cv_done, &s->mu); /* the caller may close the old fd next */
    s->notify_fd = fd;
    s->notify_armed = false;
    stream_unlock(s);
    return ACL_SUCCESS;
}

aclError aiogeHostStreamArmNotify(aclrtStream stream) {
    aclError rc;
    hrt_stream *s = stream_lock(stream, "aiogeHostStreamArmNotify", &rc);
    if (!s) return rc;
    s->notify_armed = s->notify_fd >= 0;
    stream_unlock(s);
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ test hooks */
aclError aiogeHostInjectFailure(aclrtStream stream, int32_t count, aclError code) {
    if (count < 0 || code == 0)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostInjectFailure", "count must be >= 0 and code non-zero");
    aclError rc;
    hrt_stream *s = stream_lock(stream, "aiogeHostInjectFailure", &rc);
    if (!s) return rc;
    s->inject_left = count;
    s->inject_code = code;
    stream_unlock(s);
    return ACL_SUCCESS;
}

typedef struct {
    hrt_task t;
    uint64_t us;
} delay_task;

static aclError run_delay(hrt_task *t) {
    uint64_t us = ((delay_task *)t)->us;
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
    return ACL_SUCCESS;
}

aclError aiogeHostLaunchDelay(aclrtStream stream, uint64_t microseconds) {
    if (microseconds > 3600ull * 1000000ull)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostLaunchDelay", "delay above one hour");
    hrt_stream *s;
    delay_task *t;
    aclError rc = hrt_task_begin(stream, "aiogeHostLaunchDelay", sizeof *t, run_delay, &s, (void **)&t);
    if (rc) return rc;
    t->us = microseconds;
    return hrt_task_commit(s, &t->t, false);
}

/* Gates: a task that blocks its stream until opened (or timed out). */
typedef struct gate {
    uint64_t id;
    bool open;
    int refs; /* the task + the table */
    struct gate *next;
} gate;

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv;
static pthread_once_t gate_once = PTHREAD_ONCE_INIT;
static gate *gates;
static uint64_t next_gate_id = 1;

static void gate_init(void) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&gate_cv, &ca);
    pthread_condattr_destroy(&ca);
}

typedef struct {
    hrt_task t;
    gate *g;
    int32_t timeout_ms;
} gate_task;

static aclError run_gate(hrt_task *t) {
    gate_task *gt = (gate_task *)t;
    struct timespec dl;
    hrt_deadline(&dl, gt->timeout_ms);
    aclError rc = ACL_SUCCESS;
    HRT_LOCK(&gate_mu, HRT_RANK_LEAF);
    while (!gt->g->open) {
        if (pthread_cond_timedwait(&gate_cv, &gate_mu, &dl) == ETIMEDOUT && !gt->g->open) {
            rc = hrt_task_fail(ACL_ERROR_RT_TASK_TIMEOUT, "gate %llu was not opened within %d ms",
                               (unsigned long long)gt->g->id, gt->timeout_ms);
            break;
        }
    }
    /* unlink: the gate is spent */
    gate **pp = &gates;
    while (*pp && *pp != gt->g) pp = &(*pp)->next;
    if (*pp) *pp = gt->g->next;
    HRT_UNLOCK(&gate_mu);
    free(gt->g);
    return rc;
}

aclError aiogeHostLaunchGate(aclrtStream stream, int32_t timeout_ms, uint64_t *gate_id) {
    pthread_once(&gate_once, gate_init);
    if (!gate_id || timeout_ms <= 0)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostLaunchGate", "gate is NULL or timeout_ms <= 0");
    hrt_stream *s;
    gate_task *t;
    aclError rc = hrt_task_begin(stream, "aiogeHostLaunchGate", sizeof *t, run_gate, &s, (void **)&t);
    if (rc) return rc;
    gate *g = calloc(1, sizeof *g);
    if (!g) {
        hrt_task_cancel(s, &t->t);
        return hrt_error(ACL_ERROR_BAD_ALLOC, "aiogeHostLaunchGate", "out of host memory");
    }
    HRT_LOCK(&gate_mu, HRT_RANK_LEAF);
    g->id = next_gate_id++;
    g->next = gates;
    gates = g;
    HRT_UNLOCK(&gate_mu);
    t->g = g;
    t->timeout_ms = timeout_ms;
    *gate_id = g->id;
    return hrt_task_commit(s, &t->t, false);
}

aclError aiogeHostOpenGate(uint64_t id) {
    pthread_once(&gate_once, gate_init);
    HRT_LOCK(&gate_mu, HRT_RANK_LEAF);
    gate *g = gates;
    while (g && g->id != id) g = g->next;
    if (g) {
        g->open = true;
        pthread_cond_broadcast(&gate_cv);
    }
    HRT_UNLOCK(&gate_mu);
    if (!g) return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostOpenGate", "gate %llu is not pending", (unsigned long long)id);
    return ACL_SUCCESS;
}
