/* aclInit/aclFinalize, virtual devices, contexts and counters. */
#include "hrt.h"

#include <stdio.h>
#include <stdlib.h>

pthread_mutex_t hrt_rt_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    int set_count;            /* aclrtSetDevice calls not yet reset */
    hrt_context *default_ctx;
    hrt_context *contexts;    /* explicit contexts */
} hrt_device;

static int rt_init_count;
static int rt_ndevices;
static hrt_device rt_devices[HRT_MAX_DEVICES];
static __thread hrt_context *tls_ctx;

bool hrt_runtime_initialized(void) { return rt_init_count > 0; }

aclError aclInit(const char *configPath) {
    if (configPath && *configPath) {
        FILE *f = fopen(configPath, "rb");
        if (!f) return hrt_error(ACL_ERROR_INVALID_FILE, "aclInit", "cannot open config file '%s'", configPath);
        fclose(f);
    }
    const hrt_env *env = hrt_env_get();
    if (env->error[0]) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclInit", "%s", env->error);
    pthread_mutex_lock(&hrt_rt_mu);
    if (rt_init_count > 0) {
        rt_init_count++;
        pthread_mutex_unlock(&hrt_rt_mu);
        return ACL_ERROR_REPEAT_INITIALIZE;
    }
    rt_ndevices = (int)env->device_count;
    memset(rt_devices, 0, sizeof rt_devices);
    rt_init_count = 1;
    pthread_mutex_unlock(&hrt_rt_mu);
    hrt_blas_init_from_env();
    return ACL_SUCCESS;
}

static void ctx_destroy_locked(hrt_context *c);

aclError aclFinalize(void) {
    pthread_mutex_lock(&hrt_rt_mu);
    if (rt_init_count == 0) {
        pthread_mutex_unlock(&hrt_rt_mu);
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
    pthread_mutex_unlock(&hrt_rt_mu);
    hrt_memory_release_all();
    aiogeHostResetOpCache(); /* compiled ops die with the runtime, as in ACL */
    tls_ctx = NULL;
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

int hrt_device_count(void) { return rt_ndevices; }

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

/* Caller holds hrt_rt_mu.  Streams are drained before they are freed. */
static void ctx_destroy_locked(hrt_context *c) {
    hrt_handle_remove(c, HRT_H_CONTEXT);
    while (c->streams) {
        hrt_stream *s = c->streams;
        c->streams = s->next_in_ctx;
        hrt_handle_remove(s, HRT_H_STREAM);
        hrt_stream_free(s);
    }
    hrt_handle_remove(c->default_stream, HRT_H_STREAM);
    hrt_stream_free(c->default_stream);
    /* any thread still pointing at it will get CONTEXT_NULL-like failures via
     * the registry check in hrt_current_ctx */
    if (tls_ctx == c) tls_ctx = NULL;
    free(c);
}

hrt_context *hrt_tls_ctx(void) { return tls_ctx; }

hrt_context *hrt_current_ctx(void) {
    hrt_context *c = tls_ctx;
    if (c && !hrt_handle_valid(c, HRT_H_CONTEXT)) {
        tls_ctx = NULL;
        return NULL;
    }
    return c;
}

static aclError check_device(int32_t id, const char *api) {
    if (!rt_init_count) return hrt_error(ACL_ERROR_UNINITIALIZE, api, "aclInit has not been called");
    if (id < 0 || id >= rt_ndevices)
        return hrt_error(ACL_ERROR_RT_INVALID_DEVICEID, api, "device id %d is out of range [0, %d)", id, rt_ndevices);
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
    pthread_mutex_lock(&hrt_rt_mu);
    aclError rc = check_device(deviceId, "aclrtSetDevice");
    if (!rc) {
        hrt_device *d = &rt_devices[deviceId];
        if (!d->default_ctx) d->default_ctx = ctx_new_locked(deviceId, true, &rc);
        if (d->default_ctx) {
            d->set_count++;
            tls_ctx = d->default_ctx;
        }
    }
    pthread_mutex_unlock(&hrt_rt_mu);
    return rc;
}

aclError aclrtResetDevice(int32_t deviceId) {
    pthread_mutex_lock(&hrt_rt_mu);
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
    pthread_mutex_unlock(&hrt_rt_mu);
    return rc;
}

aclError aclrtGetDevice(int32_t *deviceId) {
    if (!deviceId) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice", "deviceId is NULL");
    hrt_context *c = hrt_current_ctx();
    if (!c) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetDevice", "no current context in this thread");
    *deviceId = c->device;
    return ACL_SUCCESS;
}

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId) {
    if (!context) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtCreateContext", "context is NULL");
    pthread_mutex_lock(&hrt_rt_mu);
    aclError rc = check_device(deviceId, "aclrtCreateContext");
    hrt_context *c = NULL;
    if (!rc) c = ctx_new_locked(deviceId, false, &rc);
    if (c) {
        c->next = rt_devices[deviceId].contexts;
        rt_devices[deviceId].contexts = c;
        tls_ctx = c;
        *context = c;
    }
    pthread_mutex_unlock(&hrt_rt_mu);
    return rc;
}

aclError aclrtDestroyContext(aclrtContext context) {
    if (!context) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext", "context is NULL");
    pthread_mutex_lock(&hrt_rt_mu);
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
    pthread_mutex_unlock(&hrt_rt_mu);
    return rc;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
    if (!context) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext", "context is NULL");
    if (!hrt_handle_valid(context, HRT_H_CONTEXT))
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtSetCurrentContext", "context %p is not live", context);
    tls_ctx = context;
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext *context) {
    if (!context) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext", "context is NULL");
    hrt_context *c = hrt_current_ctx();
    if (!c) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetCurrentContext", "no current context in this thread");
    *context = c;
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
    pthread_mutex_lock(&s->mu);
    l->seq[l->n] = s->submitted;
    pthread_mutex_unlock(&s->mu);
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
    hrt_context *c = hrt_current_ctx();
    if (!c) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, "aclrtSynchronizeDevice", "no current context in this thread");
    stream_list l = {0};
    pthread_mutex_lock(&hrt_rt_mu);
    hrt_device *d = &rt_devices[c->device];
    bool ok = list_add_ctx(&l, d->default_ctx);
    for (hrt_context *x = d->contexts; x && ok; x = x->next) ok = list_add_ctx(&l, x);
    pthread_mutex_unlock(&hrt_rt_mu);
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
        pthread_mutex_lock(&s->mu);
        if (s->sticky_code && !first) {
            first = s->sticky_code;
            hrt_error_push(first, "aclrtSynchronizeDevice", s->sticky_msg);
        }
        s->sticky_code = 0;
        pthread_mutex_unlock(&s->mu);
    }
    free(l.v);
    free(l.seq);
    return first;
}

/* ------------------------------------------------------------- counters */
void hrt_opcache_snapshot(int64_t out[5]);
int64_t hrt_task_counter(int which);
int64_t hrt_callback_subscriptions(void);

int32_t aiogeHostVersion(void) { return HRT_VERSION; }

aclError aiogeHostGetCounters(aiogeHostCounters *c) {
    if (!c) return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostGetCounters", "counters is NULL");
    c->contexts = hrt_handle_count(HRT_H_CONTEXT);
    c->streams = hrt_handle_count(HRT_H_STREAM);
    c->events = hrt_handle_count(HRT_H_EVENT);
    c->tensor_descs = hrt_handle_count(HRT_H_DESC);
    c->data_buffers = hrt_handle_count(HRT_H_BUFFER);
    c->attrs = hrt_handle_count(HRT_H_ATTR);
    c->device_allocations = hrt_memory_counter(0);
    c->device_bytes = hrt_memory_counter(1);
    c->host_allocations = hrt_memory_counter(2);
    c->host_bytes = hrt_memory_counter(3);
    c->deferred_frees = hrt_memory_counter(4);
    int64_t oc[5];
    hrt_opcache_snapshot(oc);
    c->op_cache_hits = oc[0];
    c->op_cache_misses = oc[1];
    c->op_cache_entries = oc[2];
    c->op_cache_evictions = oc[3];
    c->op_cache_max_entries = oc[4];
    c->tasks_executed = hrt_task_counter(0);
    c->tasks_failed = hrt_task_counter(1);
    c->subscriptions = hrt_callback_subscriptions();
    c->graphs = hrt_handle_count(HRT_H_GRAPH);
    return ACL_SUCCESS;
}
