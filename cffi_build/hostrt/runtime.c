/* aclInit/aclFinalize, virtual devices, contexts and the streams they own,
 * and the runtime-wide thread count.  The top of the runtime's lifecycle: it
 * creates and tears down what the layers below run (streams, memory, the op
 * cache, BLAS); none of them calls back here. */
#include "hrt.h"

#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t rt_mu = PTHREAD_MUTEX_INITIALIZER; /* devices, contexts, stream lists */

typedef struct {
    int set_count;            /* aclrtSetDevice calls not yet reset */
    hrt_context *default_ctx;
    hrt_context *contexts;    /* explicit contexts */
} hrt_device;

static int rt_init_count;
static int rt_ndevices;
static hrt_device rt_devices[HRT_MAX_DEVICES];
aclError aclInit(const char *configPath) {
    if (configPath && *configPath) {
        FILE *f = fopen(configPath, "rb");
        if (!f) return hrt_error(ACL_ERROR_INVALID_FILE, "aclInit", "cannot open config file '%s'", configPath);
        fclose(f);
    }
    const hrt_env *env = hrt_env_get();
    if (env->error[0]) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclInit", "%s", env->error);
    HRT_LOCK(&rt_mu, HRT_RANK_RUNTIME);
    if (rt_init_count > 0) {
        rt_init_count++;
        HRT_UNLOCK(&rt_mu);
        return ACL_ERROR_REPEAT_INITIALIZE;
    }
    rt_ndevices = (int)env->device_count;
    memset(rt_devices, 0, sizeof rt_devices);
    rt_init_count = 1;
    HRT_UNLOCK(&rt_mu);
    hrt_blas_init_from_env();
    return ACL_SUCCESS;
}

static void ctx_destroy_locked(hrt_context *c);

aclError aclFinalize(void) {
    HRT_LOCK(&rt_mu, HRT_RANK_RUNTIME);
    if (rt_init_count == 0) {
        HRT_UNLOCK(&rt_mu);
        return hrt_error(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize", "aclFinalize called without aclInit");
    }
    /* Tear down what the application left: drain and destroy every stream,
     * context and device allocation. */
    for (int d = 0; d < rt_ndevices; d++) {
        hrt_device *dev = &rt_devices[d];
        while (dev->contexts) {
            hrt_context *c = dev->contexts;
            dev->contexts = c->next;
            ctx_destroy_locked(c);
        }
        if (dev->default_ctx) ctx_destroy_locked(dev->default_ctx);
        dev->default_ctx = NULL;
        dev->set_count = 0;
    }
    rt_init_count = 0;
    HRT_UNLOCK(&rt_mu);
    hrt_memory_release_all();
    aiogeHostResetOpCache(); /* compiled ops die with the runtime, as in ACL */
    hrt_set_current_ctx(NULL);
    return ACL_SUCCESS;
}

aclError aclrtGetVersion(int32_t *major, int32_t *minor, int32_t *patch) {
    if (!major || !minor || !patch) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion", "null output pointer");
    *major = 1;
    *minor = 10;
    *patch = 0;
    return ACL_SUCCESS;
}

aclError aclrtGetRunMode(aclrtRunMode *mode) {
    if (!mode) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode", "runMode is NULL");
    *mode = ACL_HOST;
    return ACL_SUCCESS;
}

const char *aclrtGetSocName(void) { return "AiogeHostCPU"; }

aclError aclrtGetDeviceCount(uint32_t *count) {
    if (!count) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount", "count is NULL");
    *count = (uint32_t)(rt_init_count ? rt_ndevices : (int)hrt_env_get()->device_count);
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ threads */
aclError aiogeHostSetNumThreads(int32_t n) {
    if (n < 1 || n > 1024) return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostSetNumThreads", "n must be in [1, 1024]");
    hrt_pool_set_threads(n);
    hrt_blas_set_threads(n);
    return ACL_SUCCESS;
}

int32_t aiogeHostGetNumThreads(void) { return hrt_num_threads(); }

/* ------------------------------------------------------------ contexts */
static hrt_context *ctx_new_locked(int device, bool is_default, aclError *rc) {
    hrt_context *c = calloc(1, sizeof *c);
    if (!c) {
        *rc = hrt_error(ACL_ERROR_BAD_ALLOC, "aclrtCreateContext", "out of host memory");
        return NULL;
    }
    c->device = device;
    c->is_default = is_default;
    c->default_stream = hrt_stream_new(c, true, rc);
    if (!c->default_stream) {
        free(c);
        return NULL;
    }
    hrt_handle_add(c, HRT_H_CONTEXT);
    return c;
}

/* For an unregistered stream: wait for the API calls still using it, drop
 * its callback subscriptions (waking a BLOCK callback its worker may be in),
 * then drain and join it. */
static void stream_destroy(hrt_stream *s) {
    hrt_stream_quiesce(s);
    hrt_callbacks_stream_gone(s);
    hrt_stream_join(s);
    hrt_launch_stream_gone(s); /* waits of other streams on it: everything it had ran */
    hrt_stream_free(s);
}

/* Caller holds rt_mu.  Streams are drained before they are freed. */
static void ctx_destroy_locked(hrt_context *c) {
    hrt_handle_remove(c, HRT_H_CONTEXT);
    while (c->streams) {
        hrt_stream *s = c->streams;
        c->streams = s->next_in_ctx;
        hrt_handle_remove(s, HRT_H_STREAM);
        stream_destroy(s);
    }
    hrt_handle_remove(c->default_stream, HRT_H_STREAM);
    stream_destroy(c->default_stream);
    /* any thread still pointing at it will get CONTEXT_NULL-like failures via
     * the registry check in hrt_current_ctx */
    if (hrt_tls_ctx() == c) hrt_set_current_ctx(NULL);
    free(c);
}

static aclError check_device(int32_t id, const char *api) {
    if (!rt_init_count) return hrt_error(ACL_ERROR_UNINITIALIZE, api, "aclInit has not been called");
    if (id < 0 || id >= rt_ndevices)
        return hrt_error(ACL_ERROR_RT_INVALID_DEVICEID, api, "device id %d is out of range [0, %d)", id, rt_ndevices);
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
    HRT_LOCK(&rt_mu, HRT_RANK_RUNTIME);
    aclError rc = check_device(deviceId, "aclrtSetDevice");
    if (!rc) {
        hrt_device *d = &rt_devices[deviceId];
        if (!d->default_ctx) d->default_ctx = ctx_new_locked(deviceId, true, &rc);
        if (d->default_ctx) {
            d->set_count++;
            hrt_set_current_ctx(d->default_ctx);
        }
    }
    HRT_UNLOCK(&rt_mu);
    return rc;
}

aclError aclrtResetDevice(int32_t deviceId) {
    HRT_LOCK(&rt_mu, HRT_RANK_RUNTIME);
    aclError rc = check_device(deviceId, "aclrtResetDevice");
    if (!rc) {
        hrt_device *d = &rt_devices[deviceId];
        if (d->set_count == 0) {
            rc = hrt_error(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice",
                           "device %d was not set by aclrtSetDevice", deviceId);
        } else if (--d->set_count == 0) {
            ctx_destroy_locked(d->default_ctx);
            d->default_ctx = NULL;
        }
    }
    HRT_UNLOCK(&rt_mu);
    return rc;
}

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId) {
    if (!context) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtCreateContext", "context is NULL");
    HRT_LOCK(&rt_mu, HRT_RANK_RUNTIME);
    aclError rc = check_device(deviceId, "aclrtCreateContext");
    hrt_context *c = NULL;
    if (!rc) c = ctx_new_locked(deviceId, false, &rc);
    if (c) {
        c->next = rt_devices[deviceId].contexts;
        rt_devices[deviceId].contexts = c;
        hrt_set_current_ctx(c);
        *context = c;
    }
    HRT_UNLOCK(&rt_mu);
    return rc;
}

aclError aclrtDestroyContext(aclrtContext context) {
    if (!context) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext", "context is NULL");
    HRT_LOCK(&rt_mu, HRT_RANK_RUNTIME);
    hrt_context *c = context;
    aclError rc = ACL_SUCCESS;
    if (!hrt_handle_valid(c, HRT_H_CONTEXT)) {
        rc = hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyContext", "context %p is not live", context);
    } else if (c->is_default) {
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext",
                       "a device's default context is released by aclrtResetDevice");
    } else {
        hrt_context **pp = &rt_devices[c->device].contexts;
        while (*pp && *pp != c) pp = &(*pp)->next;
        if (*pp) *pp = c->next;
        ctx_destroy_locked(c);
    }
    HRT_UNLOCK(&rt_mu);
    return rc;
}

/* ------------------------------------------------------------- streams */
aclError aclrtCreateStream(aclrtStream *stream) {
    if (!stream) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream", "stream is NULL");
    HRT_LOCK(&rt_mu, HRT_RANK_RUNTIME);
    hrt_context *c = hrt_current_ctx();
    if (!c) {
        HRT_UNLOCK(&rt_mu);
        return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, "aclrtCreateStream", "no current context in this thread");
    }
    aclError rc;
    hrt_stream *s = hrt_stream_new(c, false, &rc);
    if (s) {
        s->next_in_ctx = c->streams;
        c->streams = s;
        *stream = s;
    }
    HRT_UNLOCK(&rt_mu);
    return rc;
}

aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag) {
    if (priority > 7)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig", "priority %u is not in [0, 7]", priority);
    if (flag & ~(uint32_t)(ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC))
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtCreateStreamWithConfig", "unsupported stream flag 0x%x", flag);
    return aclrtCreateStream(stream);
}

aclError aclrtDestroyStream(aclrtStream stream) {
    if (!stream) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream", "stream is NULL");
    HRT_LOCK(&rt_mu, HRT_RANK_RUNTIME);
    hrt_stream *s = stream;
    if (!hrt_handle_valid(s, HRT_H_STREAM)) {
        HRT_UNLOCK(&rt_mu);
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtDestroyStream", "stream %p is not live", stream);
    }
    if (s->is_default) {
        HRT_UNLOCK(&rt_mu);
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream", "the default stream cannot be destroyed");
    }
    if (pthread_equal(pthread_self(), s->thread)) {
        HRT_UNLOCK(&rt_mu);
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream", "a stream cannot destroy itself from its own task");
    }
    if (hrt_stream_capturing(s)) {
        HRT_UNLOCK(&rt_mu);
        return hrt_error(ACL_ERROR_RT_STREAM_CAPTURED, "aclrtDestroyStream",
                         "stream %d is capturing: end the capture first (aclmdlRICaptureEnd)", s->id);
    }
    hrt_stream **pp = &s->ctx->streams;
    while (*pp && *pp != s) pp = &(*pp)->next_in_ctx;
    if (*pp) *pp = s->next_in_ctx;
    hrt_handle_remove(s, HRT_H_STREAM);
    HRT_UNLOCK(&rt_mu);
    stream_destroy(s); /* waits for the queued tasks */
    return ACL_SUCCESS;
}

typedef struct {
    hrt_stream **v;
    uint64_t *seq;
    int n, cap;
} stream_list;

static bool list_add(stream_list *l, hrt_stream *s) {
    if (l->n == l->cap) {
        int ncap = l->cap ? l->cap * 2 : 16;
        hrt_stream **nv = realloc(l->v, sizeof(*nv) * (size_t)ncap);
        uint64_t *ns = nv ? realloc(l->seq, sizeof(*ns) * (size_t)ncap) : NULL;
        if (nv) l->v = nv;
        if (!ns) return false;
        l->seq = ns;
        l->cap = ncap;
    }
    HRT_LOCK(&s->mu, HRT_RANK_STREAM);
    l->seq[l->n] = s->submitted;
    HRT_UNLOCK(&s->mu);
    l->v[l->n++] = s;
    return true;
}

static bool list_add_ctx(stream_list *l, hrt_context *c) {
    if (!c) return true;
    if (!list_add(l, c->default_stream)) return false;
    for (hrt_stream *s = c->streams; s; s = s->next_in_ctx)
        if (!list_add(l, s)) return false;
    return true;
}

aclError aclrtSynchronizeDevice(void) {
    aclError unsafe = hrt_capture_unsafe("aclrtSynchronizeDevice");
    if (unsafe) return unsafe;
    hrt_context *c = hrt_current_ctx();
    if (!c) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, "aclrtSynchronizeDevice", "no current context in this thread");
    stream_list l = {0};
    HRT_LOCK(&rt_mu, HRT_RANK_RUNTIME);
    hrt_device *d = &rt_devices[c->device];
    bool ok = list_add_ctx(&l, d->default_ctx);
    for (hrt_context *x = d->contexts; x && ok; x = x->next) ok = list_add_ctx(&l, x);
    HRT_UNLOCK(&rt_mu);
    aclError first = ACL_SUCCESS;
    if (!ok) {
        first = hrt_error(ACL_ERROR_BAD_ALLOC, "aclrtSynchronizeDevice", "out of host memory");
        l.n = 0;
    }
    /* Waiting happens without the runtime lock; destroying a stream while
     * another thread synchronizes its device is forbidden by ACL as well. */
    for (int i = 0; i < l.n; i++) {
        hrt_stream *s = l.v[i];
        hrt_stream_wait_seq(s, l.seq[i]);
        HRT_LOCK(&s->mu, HRT_RANK_STREAM);
        if (s->sticky_code && !first) {
            first = s->sticky_code;
            hrt_error_push(first, "aclrtSynchronizeDevice", s->sticky_msg);
        }
        s->sticky_code = 0;
        HRT_UNLOCK(&s->mu);
    }
    free(l.v);
    free(l.seq);
    return first;
}
