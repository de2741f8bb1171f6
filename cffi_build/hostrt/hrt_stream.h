/* Streams and tasks (stream.c): one worker thread and one FIFO queue per
 * stream, and the one way to put work on a stream (hrt_task_begin/commit). */
#ifndef AIOGE_HRT_STREAM_H
#define AIOGE_HRT_STREAM_H

#include "hrt_ctx.h"

typedef struct hrt_task hrt_task;

typedef aclError (*hrt_task_fn)(hrt_task *t);

enum { HRT_TASK_WORK = 0, HRT_TASK_MARKER = 1, HRT_TASK_WAIT = 2 };

struct hrt_task {
    hrt_task *next;
    hrt_task_fn run;
    void (*release)(hrt_task *t);   /* frees the task; NULL means free(t) */
    hrt_stream *stream;
    uint64_t seq;
    aclError injected;
    uint8_t kind;
    /* A stream capture may record the task and run it again at every replay (its run
     * reads only what the task holds, all of it alive until the task is released).
     * Tasks without it are refused while their stream captures. */
    bool replayable;
    /* Optional, for a replayable task whose every run needs a value taken when the replay
     * is enqueued (an event record's generation): arm at the enqueue, run_armed instead of
     * run. */
    uint64_t (*arm)(hrt_task *t, hrt_stream *replay_stream);
    aclError (*run_armed)(hrt_task *t, uint64_t armed);
};

/* A stream capture in progress (aclmdlRICaptureBegin .. End): the tasks put on the stream
 * meanwhile, in order, instead of running them.  Owned by capture.c, filled by stream.c
 * under the stream's lock. */
typedef struct hrt_capture {
    hrt_task **tasks;
    int n, cap;
    int mode;                   /* aclmdlRICaptureMode */
    int status;                 /* ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE or _INVALIDATED */
    aclError why;               /* what invalidated it */
    char why_msg[HRT_MSG_LEN];
    pthread_t thread;           /* the thread that began it */
    uint64_t id;                /* unique for the process (set by hrt_stream_capture_begin) */
    void *model;                /* the aclmdlRI it becomes (aclmdlRICaptureGetInfo gives it) */
    void (*discard)(struct hrt_capture *c);  /* frees it all (its stream destroyed mid-capture) */
} hrt_capture;

struct hrt_stream {
    hrt_context *ctx;
    bool is_default;
    int id;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    pthread_cond_t cv_done;
    hrt_task *head, *tail;
    atomic_int queued;          /* tasks in the queue, readable without mu (spin) */
    uint64_t submitted;
    atomic_uint_least64_t completed;
    int sync_waiters;
    bool stop;
    bool worker_idle;           /* worker is blocked waiting for work */
    bool worker_busy;           /* worker is running a task it took off the queue */
    bool inline_busy;           /* a caller is running a task inline (hrt_stream_submit) */
    atomic_int users;           /* API calls currently using the stream */
    /* error reported by the next stream synchronize (first since last sync) */
    aclError sticky_code;
    char sticky_msg[HRT_MSG_LEN];
    /* worker only: error of the work since the last event marker, and of the
     * last closed range (for markers with no work in between) */
    aclError range_code;
    char range_msg[HRT_MSG_LEN];
    aclError mark_code;
    char mark_msg[HRT_MSG_LEN];
    bool work_since_marker;
    /* injected failures, applied at enqueue time */
    int inject_left;
    aclError inject_code;
    uint64_t failure_mode;
    bool failure_mode_set;
    bool failed_stop;           /* STOP_ON_FAILURE tripped */
    /* event-loop notification (aiogeHostStreamSetNotifyFd) */
    int notify_fd;
    bool notify_armed;
    uint64_t notify_at;         /* armed for the task with this sequence number (0: the next event marker) */
    bool notifying;             /* the worker writes notify_fd without mu: SetNotifyFd waits it out */
    /* failed tasks kept for aiogeHostStreamTakeFailure once enabled (launch.c); guarded by mu */
    bool log_failures;
    struct hrt_failure *failures, *failures_tail;
    atomic_uint_least64_t n_failures;  /* failures logged, cumulative (readable without mu) */
    uint64_t unlogged_seq;      /* a task run by hrt_stream_run_now: its failure is not logged */
    /* the capture in progress, NULL if none (guarded by mu) */
    hrt_capture *capture;
    /* host callbacks */
    bool subscribed;
    uint64_t cb_thread;
    hrt_stream *next_in_ctx;
};

/* Resolve a stream argument (NULL = current context's default stream) and
 * check it belongs to the current context.  Returns 0 or an error code with
 * the message recorded under `api`.  On success the stream is pinned (it
 * cannot be destroyed) until hrt_stream_release(*out). */
aclError hrt_resolve_stream(aclrtStream s, hrt_stream **out, const char *api);
void hrt_stream_release(hrt_stream *s);
/* Enqueue a task; takes ownership.  Never fails once resolved.  Returns the
 * task's sequence number (the task itself may already have run and been
 * freed when this returns). */
uint64_t hrt_stream_enqueue(hrt_stream *s, hrt_task *t);
/* Enqueue a task, or, when `may_inline` and the stream has nothing queued or
 * running, run it at once on the calling thread (the stream's order is the
 * same either way: nothing is before it, and later tasks wait for it).  For
 * tasks known to take microseconds, where the worker's wake-up would cost
 * more than the work. */
uint64_t hrt_stream_submit(hrt_stream *s, hrt_task *t, bool may_inline);
/* Run a WORK task now on the calling thread if the stream has nothing queued or
 * running (and is not stopped, nor stopped on a failure): returns true, the
 * task's result in *rc and, if it failed, its message in msg.  That failure is
 * the caller's to report: no later event marker reports it (the stream's
 * synchronize still does, as for every failed task).  Returns false, without
 * touching the task, when it must be enqueued instead. */
bool hrt_stream_run_now(hrt_stream *s, hrt_task *t, aclError *rc, char msg[HRT_MSG_LEN]);

/* The shared shape of an entry point that puts one task on a stream:
 *     rc = hrt_task_begin(stream, api, sizeof(my_task), run_fn, &s, (void **)&t);
 *     if (rc) return rc;          // stream resolved and pinned, task zeroed, t->t.run set
 *     ... fill t (or hrt_task_cancel(s, &t->t) and return an error) ...
 *     return hrt_task_commit(s, &t->t, may_inline);  // submit, unpin, ACL_SUCCESS
 * `size` covers the whole task struct, whose first member is the hrt_task.
 * hrt_task_cancel releases the task as the stream would (t->release if set,
 * so a task holding references can set release first and cancel any time).
 * hrt_task_commit_sync enqueues and returns once the task has run (a copy
 * into pageable memory, which ACL makes synchronous). */
aclError hrt_task_begin(aclrtStream stream, const char *api, size_t size, hrt_task_fn run, hrt_stream **s,
                        void **task);
aclError hrt_task_commit(hrt_stream *s, hrt_task *t, bool may_inline);
/* The same for a caller that pinned its stream itself (the context-free hooks of launch.c):
 * hrt_task_alloc makes the zeroed task (t->run set), hrt_task_commit_seq submits it, unpins
 * the stream and returns the task's sequence number. */
aclError hrt_task_alloc(const char *api, size_t size, hrt_task_fn run, void **task);
uint64_t hrt_task_commit_seq(hrt_stream *s, hrt_task *t, bool may_inline);
aclError hrt_task_commit_sync(hrt_stream *s, hrt_task *t);
void hrt_task_cancel(hrt_stream *s, hrt_task *t);

/* Wait until the task with sequence `seq` has run (no error reporting). */
void hrt_stream_wait_seq(hrt_stream *s, uint64_t seq);

/* Lifecycle (runtime.c creates streams and links them into their context).
 * Destroying one: unregister its handle, hrt_stream_quiesce (no API call uses
 * it any more), drop what refers to it (callbacks), then hrt_stream_free. */
hrt_stream *hrt_stream_new(hrt_context *ctx, bool is_default, aclError *rc);
void hrt_stream_quiesce(hrt_stream *s);
void hrt_stream_join(hrt_stream *s);   /* drains and joins the worker */
void hrt_stream_free(hrt_stream *s);   /* frees a joined stream */

/* A failed task of a stream that logs failures (aiogeHostStreamLogFailures): what
 * completion by sequence number reports to that task's own launch. */
typedef struct hrt_failure {
    struct hrt_failure *next;
    uint64_t seq;
    aclError code;
    char msg[HRT_MSG_LEN];
} hrt_failure;
/* Drop the logged failures (caller holds s->mu, or the stream is joined). */
void hrt_stream_free_failures(hrt_stream *s);

int64_t hrt_task_counter(int which);   /* 0 executed, 1 failed */

/* ---- stream capture: what stream.c does with tasks while its stream captures ----
 * Every way onto a stream (hrt_task_commit, _commit_sync, hrt_stream_submit, _enqueue,
 * _run_now) hands a task to the capture instead while one is in progress: a replayable
 * task is recorded; any other is released, invalidates the capture, and hrt_task_commit
 * returns the error.  Synchronizing or querying a capturing stream fails and invalidates. */
aclError hrt_stream_capture_begin(hrt_stream *s, hrt_capture *c, const char *api);
/* Detach the capture into *out: ACL_ERROR_RT_STREAM_NOT_CAPTURED if none, and
 * ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD (the capture goes on) when a GLOBAL or
 * THREAD_LOCAL capture is ended by another thread than the one that began it. */
aclError hrt_stream_capture_end(hrt_stream *s, hrt_capture **out, const char *api);
/* aclmdlRICaptureStatus of the stream, and the model of its capture (NULL if none). */
int hrt_stream_capture_status(hrt_stream *s, void **model);
bool hrt_stream_capturing(hrt_stream *s);
uint64_t hrt_stream_capture_id(hrt_stream *s);         /* the capture in progress; 0 if none */
/* Invalidate the stream's capture (if any) with this error: later calls report it. */
void hrt_stream_capture_invalidate(hrt_stream *s, aclError code, const char *msg);
/* A call that is unsafe while a capture is in progress (a synchronous copy or memset, a
 * device synchronize): ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT if a GLOBAL capture runs in any
 * thread or a non-RELAXED one in this thread, else 0. */
aclError hrt_capture_unsafe(const char *api);

#endif
