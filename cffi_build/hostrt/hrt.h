/* Runtime header of the embedded host runtime (the "hrt"); the kernels'
 * part is hrt_kernel.h, which this includes.
 *
 * The runtime implements the ACL C ABI declared in ../acl.h on the CPU:
 * streams are worker threads with FIFO queues, events are stream markers,
 * device memory is tracked heap memory, and ops are C kernels found in a
 * registry and cached once "compiled".  No Python, no GIL: everything here
 * is plain C with pthreads. */
#ifndef AIOGE_HRT_H
#define AIOGE_HRT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>

#include "hrt_kernel.h"
#include "../aioge_host.h"
#include "../aioge_graph.h"

#define HRT_VERSION 2
#define HRT_MAX_DEVICES 64

/* Lock hierarchy.  A thread holding a lock may only take locks further down
 * this list, never one above it (so no two threads can wait on each other):
 *   1. hrt_rt_mu     (runtime.c)   devices, contexts, stream lists
 *   2. cb_mu         (callback.c)  host-callback subscriptions and records
 *   3. hrt_stream.mu (stream.c)    one stream's queue and error state
 *   4. event mu      (event.c)     one event's record/done generations
 *   5. h_mu          (common.c)    the live-handle registry
 * Leaves, held without taking any other lock: cache_mu, reg_mu, opt_mu
 * (op.c), pool_mu (pool.c), blas_mu (blas.c), gate_mu (stream.c); memory.c
 * uses atomics.  A kernel runs with no runtime lock held and takes only
 * pool_mu (through hrt_parallel_for).  Checked in CI by ThreadSanitizer's
 * lock-order-inversion detector (.ci/sanitize tsan). */

/* ------------------------------------------------------- handle registry */
typedef enum {
    HRT_H_CONTEXT = 1,
    HRT_H_STREAM,
    HRT_H_EVENT,
    HRT_H_DESC,
    HRT_H_BUFFER,
    HRT_H_ATTR,
    HRT_H_GRAPH,
    HRT_H_KINDS
} hrt_kind;

void hrt_handle_add(const void *p, hrt_kind kind);
bool hrt_handle_remove(const void *p, hrt_kind kind);   /* false if not live */
bool hrt_handle_valid(const void *p, hrt_kind kind);
/* Batch checks under one lock. */
void hrt_handles_lock(void);
void hrt_handles_unlock(void);
bool hrt_handle_valid_locked(const void *p, hrt_kind kind);
int64_t hrt_handle_count(hrt_kind kind);

/* ----------------------------------------------------------------- time */
uint64_t hrt_now_ns(void);
/* deadline for a timeout in ms (-1 = forever -> 0) */
void hrt_deadline(struct timespec *ts, int32_t timeout_ms);

/* -------------------------------------------------------------- memory */
typedef struct hrt_alloc {
    uintptr_t base;
    size_t size;          /* requested bytes: the valid range */
    size_t charged;       /* bytes counted against capacity */
    int device;           /* -1 for pinned host */
    atomic_int refs;      /* queued tasks using the block */
    bool freed;           /* aclrtFree'd while still referenced */
} hrt_alloc;

/* Find the device allocation containing [p, p+len); NULL if none.  With
 * `ref`, the block's task reference count is raised (drop it with
 * hrt_alloc_unref); this keeps a block aclrtFree'd by the user alive until
 * the queued work using it has run. */
hrt_alloc *hrt_device_lookup(const void *p, size_t len, bool ref);
bool hrt_is_device_ptr(const void *p);
bool hrt_is_pinned_ptr(const void *p);
void hrt_alloc_unref(hrt_alloc *a);
void hrt_memory_release_all(void);  /* aclFinalize */
int64_t hrt_memory_counter(int which);  /* 0 dev allocs, 1 dev bytes, 2 host allocs, 3 host bytes, 4 deferred */

/* ------------------------------------------------------ streams & tasks */
typedef struct hrt_stream hrt_stream;
typedef struct hrt_context hrt_context;
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
};

struct hrt_context {
    int device;
    bool is_default;
    hrt_stream *default_stream;
    hrt_stream *streams;        /* explicit streams (list via next_in_ctx) */
    hrt_context *next;          /* device's list of explicit contexts */
};

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
    /* host callbacks */
    bool subscribed;
    uint64_t cb_thread;
    hrt_stream *next_in_ctx;
};

/* Run the calling thread at background priority (AIOGE_HOST_WORKER_NICE,
 * default 10) so an event loop sharing the cores wakes up promptly. */
void hrt_thread_background(void);

/* Current context of this thread (NULL if none). */
hrt_context *hrt_current_ctx(void);
hrt_context *hrt_tls_ctx(void);         /* raw, unvalidated */
/* Resolve a stream argument (NULL = current context's default stream) and
 * check it belongs to the current context.  Returns 0 or an error code with
 * the message recorded under `api`.  On success the stream is pinned (it
 * cannot be destroyed) until hrt_stream_release(*out). */
aclError hrt_resolve_stream(aclrtStream s, hrt_stream **out, const char *api);
void hrt_stream_release(hrt_stream *s);
/* Enqueue a task; takes ownership.  Never fails once resolved. */
void hrt_stream_enqueue(hrt_stream *s, hrt_task *t);
/* Enqueue a task, or, when `may_inline` and the stream has nothing queued or
 * running, run it at once on the calling thread (the stream's order is the
 * same either way: nothing is before it, and later tasks wait for it).  For
 * tasks known to take microseconds, where the worker's wake-up would cost
 * more than the work. */
void hrt_stream_submit(hrt_stream *s, hrt_task *t, bool may_inline);
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
 *     hrt_task_commit(s, &t->t, may_inline);  // submit, unpin, ACL_SUCCESS
 * `size` covers the whole task struct, whose first member is the hrt_task. */
aclError hrt_task_begin(aclrtStream stream, const char *api, size_t size, hrt_task_fn run, hrt_stream **s,
                        void **task);
aclError hrt_task_commit(hrt_stream *s, hrt_task *t, bool may_inline);
void hrt_task_cancel(hrt_stream *s, hrt_task *t);
/* Wait until the task with sequence `seq` has run (no error reporting). */
void hrt_stream_wait_seq(hrt_stream *s, uint64_t seq);
hrt_stream *hrt_stream_new(hrt_context *ctx, bool is_default, aclError *rc);
void hrt_stream_free(hrt_stream *s);   /* drains, joins, frees */
bool hrt_runtime_initialized(void);
extern pthread_mutex_t hrt_rt_mu;      /* guards devices, contexts, stream lists */

/* ------------------------------------------------------------ callbacks */
aclError hrt_callbacks_stream_gone(hrt_stream *s);

/* ---------------------------------------------------------- descriptors */
struct aclDataBuffer {
    void *data;
    size_t size;
};

struct aclTensorDesc {
    aclDataType dtype;
    aclFormat format;
    aclMemType memtype;
    int ndims;
    int64_t *dims;
    char *name;
    void *const_data;
    size_t const_len;
};

/* Append a canonical byte encoding of the attrs to a key buffer. */
typedef struct hrt_buf {
    uint8_t *p;
    size_t len, cap;
    uint8_t inline_[1024];
} hrt_buf;
void hrt_buf_init(hrt_buf *b);
void hrt_buf_put(hrt_buf *b, const void *data, size_t n);
void hrt_buf_free(hrt_buf *b);
void hrt_attr_encode(const aclopAttr *a, hrt_buf *b);
void hrt_attr_free(aclopAttr *a);

/* ------------------------------------------------ op layer (runtime side) */
/* A tensor view of a desc given without a buffer (absent, const, or device). */
aclError hrt_view_desc(const char *opType, const char *what, int idx, const aclTensorDesc *d, hrt_tensor *t,
                       const void **value);
/* The compiled kernel for fully described tensors, from the cache or newly
 * compiled (errors recorded); returns it referenced. */
aclError hrt_kernel_get(const char *opType, int nin, const hrt_tensor *in, const void *const *values, int nout,
                        const hrt_tensor *out, const aclopAttr *attr, hrt_kernel **k);

/* Run a compiled kernel; inputs past k->n_in read as NULL (absent) up to
 * HRT_IN_SLOTS, so a kernel may test optional inputs the caller left off. */
#define HRT_IN_SLOTS 16
aclError hrt_kernel_run(const hrt_kernel *k, void *const *in, void *const *out);

/* Aliasing of one launch's buffers (alias.c): refuse outputs that overlap
 * each other or an input, unless the op runs in place on that very input. */
bool hrt_op_inplace(const char *op, int input);
aclError hrt_check_aliasing(const char *opType, const char *api, int nin, int nout, const hrt_tensor *views,
                            void *const *ptrs);

const hrt_opdef *hrt_find_op(const char *name);
void hrt_kernel_unref(hrt_kernel *k);
void hrt_blas_init_from_env(void);  /* aclInit */

#endif
