/* The single-op launch fast path (aiogeHostLaunch*) and completion by stream
 * sequence numbers (aiogeHostStream*), declared in ../aioge_host.h.
 *
 * A prepared launch holds what aclopCompileAndExecute works out on every call
 * from descriptors and attrs -- the tensor views, and once compiled, a
 * reference to the cached kernel -- so a launch is one call that checks the
 * device pointers it is given, counts as a cache lookup, and enqueues.
 *
 * Every task enqueued on a stream gets the next sequence number (stream.c)
 * and tasks complete in order, so "launch N has run" is "the stream's
 * completed count >= N": no event is recorded per launch.  A failed task is
 * kept (with its sequence number) for the caller to take once enabled, so its
 * error reaches exactly the launch it belongs to.
 *
 * A launch's task is op.c's (hrt_op_task), made and submitted through stream.c's
 * hrt_task_alloc/hrt_task_commit_seq on a stream these context-free hooks pin
 * themselves.
 *
 * Locks (hrt_lock.h): a prepared launch's mu (HRT_RANK_LAUNCH) is taken with no
 * runtime lock held and takes cache_mu/reg_mu (through op.c); sw_mu is a leaf. */
#include "hrt.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *API = "aiogeHostLaunchExecute";

struct aiogeLaunch {
    pthread_mutex_t mu;
    char *op;
    int nin, nout;
    bool all_empty;         /* every output is empty: nothing to run (as aclopCompileAndExecute) */
    size_t bytes;           /* of every tensor: decides running inline */
    hrt_kernel *k;          /* compiled on first execute; guarded by mu */
    hrt_tensor *views;      /* inputs then outputs */
};

/* --------------------------------------------------------- preparing */
aclError aiogeHostLaunchPrepare(aiogeLaunch **launch, const char *opType, int32_t numInputs,
                                const aclTensorDesc *const inputDesc[], int32_t numOutputs,
                                const aclTensorDesc *const outputDesc[]) {
    const char *api = "aiogeHostLaunchPrepare";
    if (!launch || !opType) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "launch or opType is NULL");
    *launch = NULL;
    if (numInputs < 0 || numOutputs < 0 || numInputs > 4096 || numOutputs > 4096)
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "%s: %d inputs / %d outputs", opType, numInputs, numOutputs);
    if ((numInputs && !inputDesc) || (numOutputs && !outputDesc))
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "%s: desc array is NULL", opType);
    hrt_handles_lock();
    const char *bad = NULL;
    int bad_i = 0;
    for (int i = 0; i < numInputs && !bad; i++)
        if (!inputDesc[i] || !hrt_handle_valid_locked(inputDesc[i], HRT_H_DESC)) bad = "input desc", bad_i = i;
    for (int j = 0; j < numOutputs && !bad; j++)
        if (!outputDesc[j] || !hrt_handle_valid_locked(outputDesc[j], HRT_H_DESC)) bad = "output desc", bad_i = j;
    hrt_handles_unlock();
    if (bad) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "%s: %s %d is NULL or not a live handle", opType, bad, bad_i);

    aiogeLaunch *l = calloc(1, sizeof *l);
    size_t n = (size_t)numInputs + (size_t)numOutputs;
    if (l) l->views = calloc(n ? n : 1, sizeof *l->views);
    if (l) l->op = strdup(opType);
    if (!l || !l->views || !l->op) {
        if (l) {
            free(l->views);
            free(l->op);
        }
        free(l);
        return hrt_error(ACL_ERROR_BAD_ALLOC, api, "%s: out of host memory", opType);
    }
    l->nin = numInputs;
    l->nout = numOutputs;
    aclError rc = ACL_SUCCESS;
    for (int i = 0; i < numInputs + numOutputs && !rc; i++) {
        bool in = i < numInputs;
        const aclTensorDesc *d = in ? inputDesc[i] : outputDesc[i - numInputs];
        const void *value;
        rc = hrt_view_desc(opType, in ? "input" : "output", in ? i : i - numInputs, d, &l->views[i], &value);
        if (!rc && (value || d->memtype != ACL_MEMTYPE_DEVICE || (!in && l->views[i].absent)))
            rc = hrt_error(ACL_ERROR_API_NOT_SUPPORT, api,
                           "%s: %s %d is const, host-placed or absent: a prepared launch takes device tensors "
                           "(and absent optional inputs); use aclopCompileAndExecute",
                           opType, in ? "input" : "output", in ? i : i - numInputs);
    }
    if (rc) {
        free(l->views);
        free(l->op);
        free(l);
        return rc;
    }
    for (int i = 0; i < numInputs + numOutputs; i++) l->bytes += l->views[i].nbytes;
    l->all_empty = numOutputs > 0;
    for (int j = 0; j < numOutputs && l->all_empty; j++) {
        const hrt_tensor *t = &l->views[numInputs + j];
        bool zero = false;
        for (int d = 0; d < t->ndim; d++) zero |= t->dims[d] == 0;
        l->all_empty = zero;
    }
    pthread_mutex_init(&l->mu, NULL);
    hrt_handle_add(l, HRT_H_LAUNCH);
    *launch = l;
    return ACL_SUCCESS;
}

aclError aiogeHostLaunchDestroy(aiogeLaunch *launch) {
    if (!launch) return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostLaunchDestroy", "launch is NULL");
    if (!hrt_handle_remove(launch, HRT_H_LAUNCH))
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, "aiogeHostLaunchDestroy", "launch %p is not live",
                         (void *)launch);
    if (launch->k) hrt_kernel_unref(launch->k); /* queued tasks hold their own references */
    pthread_mutex_destroy(&launch->mu);
    free(launch->views);
    free(launch->op);
    free(launch);
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------- executing */
/* A launch whose tensors total at most this many bytes runs on the caller's
 * thread when its stream is idle (hrt_stream_submit): it takes less time than
 * waking the stream's worker would.  AIOGE_HOST_INLINE_BYTES bounds it (0:
 * never), and so does a fixed 16 KiB, so a launch inline stays in the
 * microseconds whatever the op. */
#define LAUNCH_INLINE_MAX 16384

static size_t inline_limit(void) {
    size_t env = (size_t)hrt_env_get()->inline_bytes;
    return env < LAUNCH_INLINE_MAX ? env : LAUNCH_INLINE_MAX;
}

static hrt_stream *pin_stream(aclrtStream stream, const char *api, aclError *rc);
/* The kernel to run, referenced for the task: compiled on first use (a cache
 * lookup, counted as aclopCompileAndExecute counts it), later a use of the
 * same kernel counted as a hit (or a miss putting it back once evicted), and
 * compiled anew when compile options changed. */
static aclError kernel_for(aiogeLaunch *l, const aclopAttr *attr, hrt_kernel **out) {
    aclError rc = ACL_SUCCESS;
    HRT_LOCK(&l->mu, HRT_RANK_LAUNCH);
    if (l->k && !hrt_kernel_touch(l->k)) {
        hrt_kernel_unref(l->k);
        l->k = NULL;
    }
    if (!l->k) {
        const void *values_small[16] = {NULL};
        const void **values = l->nin <= 16 ? values_small : calloc((size_t)l->nin, sizeof(void *));
        if (!values) rc = hrt_error(ACL_ERROR_BAD_ALLOC, API, "%s: out of host memory", l->op);
        else rc = hrt_kernel_get(l->op, l->nin, l->views, values, l->nout, l->views + l->nin, attr, &l->k);
        if (values != values_small) free((void *)values);
    }
    if (!rc) {
        atomic_fetch_add(&l->k->refs, 1);
        *out = l->k;
    }
    HRT_UNLOCK(&l->mu);
    return rc;
}

int64_t aiogeHostLaunchExecute(aiogeLaunch *launch, void *const ptrs[], const aclopAttr *attr, aclrtStream stream) {
    if (!launch) return -(int64_t)hrt_error(ACL_ERROR_INVALID_PARAM, API, "launch is NULL");
    hrt_handles_lock();
    bool ok = hrt_handle_valid_locked(launch, HRT_H_LAUNCH);
    bool attr_ok = !attr || hrt_handle_valid_locked(attr, HRT_H_ATTR);
    hrt_handles_unlock();
    if (!ok) return -(int64_t)hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, API, "launch %p is not live", (void *)launch);
    aiogeLaunch *l = launch;
    if (!attr_ok) return -(int64_t)hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: attr is not a live handle", l->op);
    int n = l->nin + l->nout;
    if (n && !ptrs) return -(int64_t)hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: ptrs is NULL", l->op);
    aclError rc;
    hrt_stream *st = pin_stream(stream, API, &rc);
    if (!st) return -(int64_t)rc;
    if (l->all_empty) { /* nothing runs: done once everything before it is */
        HRT_LOCK(&st->mu, HRT_RANK_STREAM);
        uint64_t seq = st->submitted;
        HRT_UNLOCK(&st->mu);
        hrt_stream_release(st);
        return (int64_t)seq;
    }
    hrt_op_task *task;
    rc = hrt_task_alloc(API, hrt_op_task_size((size_t)n), hrt_op_task_run, (void **)&task);
    if (rc) {
        hrt_stream_release(st);
        return -(int64_t)rc;
    }
    hrt_op_task_init(task, (size_t)n);
    int dev = st->ctx->device;
    for (int i = 0; i < n && !rc; i++) {
        const hrt_tensor *t = &l->views[i];
        bool in = i < l->nin;
        int idx = in ? i : i - l->nin;
        const char *what = in ? "input" : "output";
        if (t->absent) {
            if (ptrs[i])
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: optional input %d is UNDEFINED but its pointer is not NULL",
                               l->op, idx);
            task->ptrs[i] = NULL;
            continue;
        }
        task->ptrs[i] = ptrs[i];
        if (!t->nbytes) continue;
        hrt_alloc *a = hrt_device_lookup(ptrs[i], t->nbytes, true);
        if (!a) {
            rc = hrt_error(ACL_ERROR_INVALID_PARAM, API,
                           ptrs[i] && hrt_is_device_ptr(ptrs[i]) ? "%s: %s %d [%p, +%zu) overruns its device allocation"
                                                                 : "%s: %s %d pointer %p (+%zu) is not device memory (aclrtMalloc)",
                           l->op, what, idx, ptrs[i], t->nbytes);
            break;
        }
        task->allocs[task->nallocs++] = a;
        if (a->device != dev)
            rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: %s %d is memory of device %d, the stream is on device %d",
                           l->op, what, idx, a->device, dev);
    }
    if (!rc) rc = hrt_check_aliasing(l->op, API, l->nin, l->nout, l->views, task->ptrs);
    if (!rc) rc = kernel_for(l, attr, &task->k);
    if (rc) {
        hrt_task_cancel(st, &task->t);
        return -(int64_t)rc;
    }
    task->t.replayable = true;
    return (int64_t)hrt_task_commit_seq(st, &task->t, l->bytes <= inline_limit());
}

/* ------------------------------------------------- sequence numbers */
/* Validate and pin a stream without needing the caller's context: these
 * hooks serve completion drivers on any thread.  NULL (a default stream) is
 * refused: its context would be the caller's. */
static hrt_stream *pin_stream(aclrtStream stream, const char *api, aclError *rc) {
    if (!stream) {
        *rc = hrt_error(ACL_ERROR_INVALID_PARAM, api, "stream is NULL (these hooks take an explicit stream)");
        return NULL;
    }
    hrt_handles_lock();
    bool ok = hrt_handle_valid_locked(stream, HRT_H_STREAM);
    if (ok) atomic_fetch_add(&((hrt_stream *)stream)->users, 1);
    hrt_handles_unlock();
    if (!ok) {
        *rc = hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, api, "stream %p is not a live stream", stream);
        return NULL;
    }
    *rc = ACL_SUCCESS;
    return stream;
}

uint64_t aiogeHostStreamSubmitted(aclrtStream stream) {
    aclError rc;
    hrt_stream *s = pin_stream(stream, "aiogeHostStreamSubmitted", &rc);
    if (!s) return 0;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    uint64_t n = s->submitted;
    HRT_UNLOCK(&s->mu);
    hrt_stream_release(s);
    return n;
}

uint64_t aiogeHostStreamProgress(aclrtStream stream, uint64_t *failures) {
    aclError rc;
    hrt_stream *s = pin_stream(stream, "aiogeHostStreamProgress", &rc);
    if (!s) return 0;
    /* completed first: a failure is logged before its task counts as completed */
    uint64_t done = atomic_load(&s->completed);
    if (failures) *failures = atomic_load(&s->n_failures);
    hrt_stream_release(s);
    return done;
}

aclError aiogeHostStreamWaitCompleted(aclrtStream stream, uint64_t seq, int32_t timeout_ms) {
    const char *api = "aiogeHostStreamWaitCompleted";
    if (timeout_ms < -1) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "timeout %d ms is invalid", timeout_ms);
    aclError rc;
    hrt_stream *s = pin_stream(stream, api, &rc);
    if (!s) return rc;
    if (pthread_equal(pthread_self(), s->thread)) {
        hrt_stream_release(s);
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "a task cannot wait for its own stream");
    }
    if (atomic_load(&s->completed) < seq) {
        struct timespec dl;
        if (timeout_ms >= 0) hrt_deadline(&dl, timeout_ms);
        HRT_LOCK(&s->mu, HRT_RANK_STREAM);
        s->sync_waiters++;
        while (atomic_load(&s->completed) < seq) {
            if (timeout_ms < 0) {
                pthread_cond_wait(&s->cv_done, &s->mu);
            } else if (pthread_cond_timedwait(&s->cv_done, &s->mu, &dl) == ETIMEDOUT &&
                       atomic_load(&s->completed) < seq) {
                rc = ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
                break;
            }
        }
        s->sync_waiters--;
        HRT_UNLOCK(&s->mu);
    }
    uint64_t id = (uint64_t)s->id;
    hrt_stream_release(s);
    if (rc) return hrt_error(rc, api, "stream %llu did not reach task %llu within %d ms", (unsigned long long)id,
                             (unsigned long long)seq, timeout_ms);
    return ACL_SUCCESS;
}

aclError aiogeHostStreamArmNotifyAt(aclrtStream stream, uint64_t seq) {
    aclError rc;
    hrt_stream *s = pin_stream(stream, "aiogeHostStreamArmNotifyAt", &rc);
    if (!s) return rc;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    if (s->notify_fd >= 0) {
        if (atomic_load(&s->completed) >= seq) { /* reached already: notify now */
            uint64_t one = 1;
            ssize_t w = write(s->notify_fd, &one, sizeof one);
            (void)w;
            s->notify_armed = false;
            s->notify_at = 0;
        } else {
            s->notify_armed = true;
            s->notify_at = seq ? seq : 1;
        }
    }
    HRT_UNLOCK(&s->mu);
    hrt_stream_release(s);
    return ACL_SUCCESS;
}

/* ----------------------------------------------------------- failures */
aclError aiogeHostStreamLogFailures(aclrtStream stream, int32_t enable) {
    aclError rc;
    hrt_stream *s = pin_stream(stream, "aiogeHostStreamLogFailures", &rc);
    if (!s) return rc;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    s->log_failures = enable != 0;
    if (!enable) hrt_stream_free_failures(s);
    HRT_UNLOCK(&s->mu);
    hrt_stream_release(s);
    return ACL_SUCCESS;
}

int32_t aiogeHostStreamTakeFailure(aclrtStream stream, uint64_t *seq, aclError *code, char *msg, size_t capacity) {
    aclError rc;
    if (!seq || !code) return 0;
    hrt_stream *s = pin_stream(stream, "aiogeHostStreamTakeFailure", &rc);
    if (!s) return 0;
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    hrt_failure *f = s->failures;
    if (f) {
        s->failures = f->next;
        if (!s->failures) s->failures_tail = NULL;
    }
    HRT_UNLOCK(&s->mu);
    hrt_stream_release(s);
    if (!f) return 0;
    *seq = f->seq;
    *code = f->code;
    if (msg && capacity) snprintf(msg, capacity, "%s", f->msg);
    free(f);
    return 1;
}

/* ------------------------------------------------- cross-stream waits */
/* A task on one stream that holds it until another stream completed task
 * `seq`.  The other stream is not pinned while the task waits in the queue
 * (destroying it must not wait for this stream to get there): the task is
 * registered, and a stream being freed marks the tasks waiting for it as
 * satisfied (it has run everything by then). */
typedef struct seqwait {
    hrt_task t;
    hrt_stream *other;
    uint64_t seq;
    bool gone;
    struct seqwait *prev, *next;
} seqwait;

static pthread_mutex_t sw_mu = PTHREAD_MUTEX_INITIALIZER;
static seqwait *sw_list;

static aclError run_seqwait(hrt_task *t) {
    seqwait *w = (seqwait *)t;
    HRT_LOCK(&sw_mu, HRT_RANK_LEAF);
    hrt_stream *o = w->gone ? NULL : w->other;
    if (o) atomic_fetch_add(&o->users, 1);
    HRT_UNLOCK(&sw_mu);
    if (o) {
        hrt_stream_wait_seq(o, w->seq);
        hrt_stream_release(o);
    }
    return ACL_SUCCESS;
}

static void release_seqwait(hrt_task *t) {
    seqwait *w = (seqwait *)t;
    HRT_LOCK(&sw_mu, HRT_RANK_LEAF);
    if (w->prev) w->prev->next = w->next;
    else sw_list = w->next;
    if (w->next) w->next->prev = w->prev;
    HRT_UNLOCK(&sw_mu);
    free(w);
}

void hrt_launch_stream_gone(hrt_stream *s) {
    HRT_LOCK(&sw_mu, HRT_RANK_LEAF);
    for (seqwait *w = sw_list; w; w = w->next)
        if (w->other == s) w->gone = true;
    HRT_UNLOCK(&sw_mu);
    /* a wait that pinned it before: it returns at once (everything ran) */
    while (atomic_load(&s->users) > 0) sched_yield();
    hrt_stream_free_failures(s);
}

aclError aiogeHostStreamWaitSeq(aclrtStream stream, aclrtStream other, uint64_t seq) {
    const char *api = "aiogeHostStreamWaitSeq";
    if (!other || other == stream) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "other is NULL or the stream itself");
    hrt_stream *s;
    aclError rc = hrt_resolve_stream(stream, &s, api);
    if (rc) return rc;
    hrt_stream *o;
    rc = hrt_resolve_stream(other, &o, api);
    if (rc) {
        hrt_stream_release(s);
        return rc;
    }
    if (atomic_load(&o->completed) < seq) {
        seqwait *w = calloc(1, sizeof *w);
        if (!w) {
            rc = hrt_error(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
        } else {
            w->t.run = run_seqwait;
            w->t.release = release_seqwait;
            w->t.kind = HRT_TASK_WAIT;
            w->other = o;
            w->seq = seq;
            HRT_LOCK(&sw_mu, HRT_RANK_LEAF);
            w->next = sw_list;
            if (sw_list) sw_list->prev = w;
            sw_list = w;
            HRT_UNLOCK(&sw_mu);
            hrt_stream_enqueue(s, &w->t);
        }
    }
    hrt_stream_release(o);
    hrt_stream_release(s);
    return rc;
}
