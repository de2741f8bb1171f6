/* "Device" memory: heap blocks tracked in a sorted table, so that every
 * pointer handed to the runtime can be classified (device / pinned host /
 * pageable host) and range-checked, exactly where a real device would
 * fault.  Each block is reference counted: the table holds one reference and
 * every queued task using the block holds one, so aclrtFree of a block that
 * queued work still uses defers the release instead of corrupting memory. */
#include "hrt_mem.h"
#include "hrt_stream.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    hrt_alloc **v;
    size_t n, cap;
} alloc_table;

static pthread_rwlock_t mem_lock = PTHREAD_RWLOCK_INITIALIZER;
static alloc_table dev_tab, host_tab;
static atomic_int_least64_t dev_live_blocks, dev_bytes, host_bytes;
static atomic_int_least64_t dev_used[HRT_MAX_DEVICES];
/* per device (AIOGE_HOST_DEVICE_MEMORY) */
static size_t capacity(void) { return hrt_env_get()->device_memory; }

/* index of the last block with base <= p, or -1 */
static ptrdiff_t tab_floor(const alloc_table *t, uintptr_t p) {
    ptrdiff_t lo = 0, hi = (ptrdiff_t)t->n - 1, ans = -1;
    while (lo <= hi) {
        ptrdiff_t mid = (lo + hi) / 2;
        if (t->v[mid]->base <= p) {
            ans = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return ans;
}

static hrt_alloc *tab_find(const alloc_table *t, const void *p, size_t len) {
    uintptr_t u = (uintptr_t)p;
    ptrdiff_t i = tab_floor(t, u);
    if (i < 0) return NULL;
    hrt_alloc *a = t->v[i];
    /* a zero-length range still has to start inside the block */
    if (u >= a->base + (a->size ? a->size : 1)) return NULL;
    if (len > a->size - (u - a->base)) return NULL;
    return a;
}

static bool tab_insert(alloc_table *t, hrt_alloc *a) {
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        hrt_alloc **nv = realloc(t->v, nc * sizeof *nv);
        if (!nv) return false;
        t->v = nv;
        t->cap = nc;
    }
    ptrdiff_t i = tab_floor(t, a->base) + 1;
    memmove(t->v + i + 1, t->v + i, (t->n - (size_t)i) * sizeof *t->v);
    t->v[i] = a;
    t->n++;
    return true;
}

static hrt_alloc *tab_remove_exact(alloc_table *t, const void *p) {
    ptrdiff_t i = tab_floor(t, (uintptr_t)p);
    if (i < 0 || t->v[i]->base != (uintptr_t)p) return NULL;
    hrt_alloc *a = t->v[i];
    memmove(t->v + i, t->v + i + 1, (t->n - (size_t)i - 1) * sizeof *t->v);
    t->n--;
    return a;
}

static void block_release(hrt_alloc *a) {
    if (a->device >= 0) {
        atomic_fetch_sub(&dev_used[a->device], (int64_t)a->charged);
        atomic_fetch_sub(&dev_bytes, (int64_t)a->charged);
        atomic_fetch_sub(&dev_live_blocks, 1);
    } else {
        atomic_fetch_sub(&host_bytes, (int64_t)a->charged);
    }
    free((void *)a->base);
    free(a);
}

void hrt_alloc_unref(hrt_alloc *a) {
    if (atomic_fetch_sub(&a->refs, 1) == 1) block_release(a);
}

hrt_alloc *hrt_device_lookup(const void *p, size_t len, bool ref) {
    HRT_RDLOCK(&mem_lock, HRT_RANK_LEAF);
    hrt_alloc *a = tab_find(&dev_tab, p, len);
    if (a && ref) atomic_fetch_add(&a->refs, 1);
    HRT_RWUNLOCK(&mem_lock);
    return a;
}

bool hrt_is_device_ptr(const void *p) { return hrt_device_lookup(p, 0, false) != NULL; }

bool hrt_is_pinned_ptr(const void *p) {
    HRT_RDLOCK(&mem_lock, HRT_RANK_LEAF);
    bool ok = tab_find(&host_tab, p, 0) != NULL;
    HRT_RWUNLOCK(&mem_lock);
    return ok;
}

int64_t hrt_memory_counter(int which) {
    switch (which) {
    case 0: return atomic_load(&dev_live_blocks);
    case 1: return atomic_load(&dev_bytes);
    case 2: {
        HRT_RDLOCK(&mem_lock, HRT_RANK_LEAF);
        int64_t n = (int64_t)host_tab.n;
        HRT_RWUNLOCK(&mem_lock);
        return n;
    }
    case 3: return atomic_load(&host_bytes);
    case 4: {
        HRT_RDLOCK(&mem_lock, HRT_RANK_LEAF);
        int64_t n = atomic_load(&dev_live_blocks) - (int64_t)dev_tab.n;
        HRT_RWUNLOCK(&mem_lock);
        return n;
    }
    }
    return 0;
}

static bool policy_ok(uint32_t p) {
    uint32_t base = p & 0xffu, flags = p & ~0xffu;
    return base <= ACL_MEM_MALLOC_NORMAL_ONLY_P2P &&
           (flags & ~(uint32_t)(ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH)) == 0;
}

static aclError dev_malloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy, size_t pad, const char *api) {
    if (!devPtr) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "devPtr is NULL");
    if (size == 0) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "size must be > 0");
    if (!policy_ok((uint32_t)policy)) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "unknown malloc policy %d", (int)policy);
    hrt_context *c = hrt_current_ctx();
    if (!c) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, api, "no current context in this thread");
    if (size > ((size_t)1 << 48)) return hrt_error(ACL_ERROR_RT_MEMORY_ALLOCATION, api, "size %zu is too large", size);
    size_t charged = ((size + 31) & ~(size_t)31) + pad;
    size_t cap = capacity();
    int64_t before = atomic_fetch_add(&dev_used[c->device], (int64_t)charged);
    if ((size_t)before + charged > cap) {
        atomic_fetch_sub(&dev_used[c->device], (int64_t)charged);
        return hrt_error(ACL_ERROR_RT_MEMORY_ALLOCATION, api,
                         "device %d out of memory: %zu bytes requested, %lld of %zu in use", c->device, size,
                         (long long)before, cap);
    }
    void *p = NULL;
    /* big blocks: 2 MiB aligned and backed by transparent huge pages, as numpy
     * does -- page faults otherwise dominate the first write of a fresh output */
    bool huge = size >= ((size_t)4 << 20);
    size_t align = huge ? ((size_t)2 << 20) : 64;
    size_t alloc = (size + align - 1) & ~(align - 1);
    hrt_alloc *a = calloc(1, sizeof *a);
    if (!a || posix_memalign(&p, align, alloc) != 0) {
        free(a);
        atomic_fetch_sub(&dev_used[c->device], (int64_t)charged);
        return hrt_error(ACL_ERROR_RT_MEMORY_ALLOCATION, api, "host allocator failed for %zu bytes", size);
    }
#ifdef MADV_HUGEPAGE
    if (huge) madvise(p, alloc, MADV_HUGEPAGE);
#endif
    a->base = (uintptr_t)p;
    a->size = size;
    a->charged = charged;
    a->device = c->device;
    atomic_init(&a->refs, 1); /* the table's reference */
    HRT_WRLOCK(&mem_lock, HRT_RANK_LEAF);
    bool ok = tab_insert(&dev_tab, a);
    HRT_RWUNLOCK(&mem_lock);
    if (!ok) {
        free(p);
        free(a);
        atomic_fetch_sub(&dev_used[c->device], (int64_t)charged);
        return hrt_error(ACL_ERROR_RT_MEMORY_ALLOCATION, api, "out of host memory for the allocation table");
    }
    atomic_fetch_add(&dev_bytes, (int64_t)charged);
    atomic_fetch_add(&dev_live_blocks, 1);
    *devPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    return dev_malloc(devPtr, size, policy, 32, "aclrtMalloc");
}

aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    return dev_malloc(devPtr, size, policy, 0, "aclrtMallocAlign32");
}

aclError aclrtFree(void *devPtr) {
    if (!devPtr) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtFree", "devPtr is NULL");
    HRT_WRLOCK(&mem_lock, HRT_RANK_LEAF);
    hrt_alloc *a = tab_remove_exact(&dev_tab, devPtr);
    HRT_RWUNLOCK(&mem_lock);
    if (!a) {
        if (hrt_is_pinned_ptr(devPtr))
            return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtFree", "%p is pinned host memory: use aclrtFreeHost", devPtr);
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtFree", "%p is not the start of a device allocation", devPtr);
    }
    hrt_alloc_unref(a);
    return ACL_SUCCESS;
}

aclError aclrtMallocHost(void **hostPtr, size_t size) {
    if (!hostPtr) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost", "hostPtr is NULL");
    if (size == 0) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost", "size must be > 0");
    if (size > ((size_t)1 << 48)) return hrt_error(ACL_ERROR_BAD_ALLOC, "aclrtMallocHost", "size %zu is too large", size);
    void *p = NULL;
    hrt_alloc *a = calloc(1, sizeof *a);
    if (!a || posix_memalign(&p, 64, (size + 63) & ~(size_t)63) != 0) {
        free(a);
        return hrt_error(ACL_ERROR_BAD_ALLOC, "aclrtMallocHost", "cannot allocate %zu bytes", size);
    }
    a->base = (uintptr_t)p;
    a->size = size;
    a->charged = size;
    a->device = -1;
    atomic_init(&a->refs, 1);
    HRT_WRLOCK(&mem_lock, HRT_RANK_LEAF);
    bool ok = tab_insert(&host_tab, a);
    HRT_RWUNLOCK(&mem_lock);
    if (!ok) {
        free(p);
        free(a);
        return hrt_error(ACL_ERROR_BAD_ALLOC, "aclrtMallocHost", "out of host memory for the allocation table");
    }
    atomic_fetch_add(&host_bytes, (int64_t)size);
    *hostPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtFreeHost(void *hostPtr) {
    if (!hostPtr) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost", "hostPtr is NULL");
    HRT_WRLOCK(&mem_lock, HRT_RANK_LEAF);
    hrt_alloc *a = tab_remove_exact(&host_tab, hostPtr);
    HRT_RWUNLOCK(&mem_lock);
    if (!a) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost", "%p was not returned by aclrtMallocHost", hostPtr);
    hrt_alloc_unref(a);
    return ACL_SUCCESS;
}

static hrt_alloc *host_lookup(const void *p, size_t len, bool ref) {
    HRT_RDLOCK(&mem_lock, HRT_RANK_LEAF);
    hrt_alloc *a = tab_find(&host_tab, p, len);
    if (a && ref) atomic_fetch_add(&a->refs, 1);
    HRT_RWUNLOCK(&mem_lock);
    return a;
}

void hrt_memory_release_all(void) {
    HRT_WRLOCK(&mem_lock, HRT_RANK_LEAF);
    for (size_t i = 0; i < dev_tab.n; i++) hrt_alloc_unref(dev_tab.v[i]);
    for (size_t i = 0; i < host_tab.n; i++) hrt_alloc_unref(host_tab.v[i]);
    dev_tab.n = host_tab.n = 0;
    HRT_RWUNLOCK(&mem_lock);
}

/* ---------------------------------------------------------------- copies */
typedef struct {
    hrt_alloc *a;   /* set when the endpoint is tracked (device or pinned) */
    bool device;
    bool pinned;
} endpoint;

static const char *kind_name(aclrtMemcpyKind k) {
    static const char *n[] = {"HOST_TO_HOST", "HOST_TO_DEVICE", "DEVICE_TO_HOST", "DEVICE_TO_DEVICE", "DEFAULT"};
    return (unsigned)k < 5 ? n[k] : "?";
}

/* Classify and range-check one endpoint; takes a reference when `ref`. */
static aclError classify(const void *p, size_t len, bool ref, endpoint *ep, const char *api, const char *what) {
    ep->a = NULL;
    ep->device = ep->pinned = false;
    hrt_alloc *a = hrt_device_lookup(p, 0, false);
    if (a) {
        ep->a = hrt_device_lookup(p, len, ref);
        if (!ep->a)
            return hrt_error(ACL_ERROR_INVALID_PARAM, api, "%s range [%p, +%zu) overruns its device allocation of %zu bytes",
                             what, p, len, a->size);
        ep->device = true;
        return ACL_SUCCESS;
    }
    hrt_alloc *h = host_lookup(p, 0, false);
    if (h) {
        ep->a = host_lookup(p, len, ref);
        if (!ep->a)
            return hrt_error(ACL_ERROR_INVALID_PARAM, api, "%s range [%p, +%zu) overruns its pinned host block of %zu bytes",
                             what, p, len, h->size);
        ep->pinned = true;
    }
    return ACL_SUCCESS;
}

static void ep_drop(endpoint *e) {
    if (e->a) hrt_alloc_unref(e->a);
    e->a = NULL;
}

/* Validate a copy and resolve DEFAULT.  On success references are held on
 * tracked endpoints only if `ref`. */
static aclError check_copy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind *kind, bool ref,
                           endpoint *d, endpoint *s, const char *api) {
    d->a = s->a = NULL;
    if (!dst || !src) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "%s is NULL", !dst ? "dst" : "src");
    if ((unsigned)*kind > ACL_MEMCPY_DEFAULT) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "unknown memcpy kind %d", (int)*kind);
    if (count > destMax)
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "count %zu exceeds destMax %zu", count, destMax);
    aclError rc = classify(dst, count, ref, d, api, "dst");
    if (!rc) rc = classify(src, count, ref, s, api, "src");
    if (rc) {
        ep_drop(d);
        ep_drop(s);
        return rc;
    }
    if (*kind == ACL_MEMCPY_DEFAULT) {
        *kind = s->device ? (d->device ? ACL_MEMCPY_DEVICE_TO_DEVICE : ACL_MEMCPY_DEVICE_TO_HOST)
                          : (d->device ? ACL_MEMCPY_HOST_TO_DEVICE : ACL_MEMCPY_HOST_TO_HOST);
    }
    bool want_sd = *kind == ACL_MEMCPY_DEVICE_TO_HOST || *kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    bool want_dd = *kind == ACL_MEMCPY_HOST_TO_DEVICE || *kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    if (s->device != want_sd || d->device != want_dd) {
        const char *bad = s->device != want_sd ? "src" : "dst";
        bool is_dev = s->device != want_sd ? s->device : d->device;
        ep_drop(d);
        ep_drop(s);
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "memcpy kind %s needs %s in %s memory, but %p is %s memory",
                         kind_name(*kind), bad, is_dev ? "host" : "device", bad[0] == 's' ? src : (const void *)dst,
                         is_dev ? "device" : "host");
    }
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind) {
    endpoint d, s;
    if (count == 0 && dst && src) return ACL_SUCCESS;
    aclError rc = hrt_capture_unsafe("aclrtMemcpy");
    if (rc) return rc;
    rc = check_copy(dst, destMax, src, count, &kind, true, &d, &s, "aclrtMemcpy");
    if (rc) return rc;
    memmove(dst, src, count); /* runs now: no implicit stream sync, as in ACL */
    ep_drop(&d);
    ep_drop(&s);
    return ACL_SUCCESS;
}

typedef struct {
    hrt_task t;
    void *dst;
    const void *src;
    size_t n;
    endpoint d, s;
    void *staging; /* owned copy of a pageable source */
} copy_task;

static aclError run_copy(hrt_task *t) {
    copy_task *c = (copy_task *)t;
    memmove(c->dst, c->staging ? c->staging : c->src, c->n);
    return ACL_SUCCESS;
}

static void release_copy(hrt_task *t) {
    copy_task *c = (copy_task *)t;
    ep_drop(&c->d);
    ep_drop(&c->s);
    free(c->staging);
    free(c);
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
    const char *api = "aclrtMemcpyAsync";
    if (count == 0 && dst && src) return ACL_SUCCESS;
    hrt_stream *st;
    copy_task *c;
    aclError rc = hrt_task_begin(stream, api, sizeof *c, run_copy, &st, (void **)&c);
    if (rc) return rc;
    c->t.release = release_copy; /* from here on, cancelling drops the endpoints' references */
    rc = check_copy(dst, destMax, src, count, &kind, true, &c->d, &c->s, api);
    if (!rc && kind == ACL_MEMCPY_HOST_TO_HOST)
        rc = hrt_error(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, api, "asynchronous HOST_TO_HOST copies are not supported");
    int dev = st->ctx->device;
    if (!rc && ((c->d.device && c->d.a->device != dev) || (c->s.device && c->s.a->device != dev)))
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, api, "device memory of another device than stream %d's device %d", st->id, dev);
    /* Pageable host memory behaves synchronously, as in ACL: a pageable
     * source is staged now (the caller may reuse it on return); a pageable
     * destination makes the call return only once the copy has run. */
    bool src_pageable = !c->s.device && !c->s.pinned;
    bool dst_pageable = !c->d.device && !c->d.pinned;
    if (!rc && src_pageable) {
        c->staging = malloc(count);
        if (c->staging) memcpy(c->staging, src, count);
        else rc = hrt_error(ACL_ERROR_BAD_ALLOC, api, "out of host memory staging %zu bytes", count);
    }
    if (rc) {
        hrt_task_cancel(st, &c->t);
        return rc;
    }
    c->dst = dst;
    c->src = src;
    c->n = count;
    c->t.replayable = !src_pageable && !dst_pageable; /* device and pinned memory stay put across replays */
    return dst_pageable ? hrt_task_commit_sync(st, &c->t) : hrt_task_commit(st, &c->t, false);
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    if (!devPtr) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtMemset", "devPtr is NULL");
    if (count > maxCount) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtMemset", "count %zu exceeds maxCount %zu", count, maxCount);
    if (count == 0) return ACL_SUCCESS;
    aclError rc = hrt_capture_unsafe("aclrtMemset");
    if (rc) return rc;
    endpoint e;
    rc = classify(devPtr, count, true, &e, "aclrtMemset", "devPtr");
    if (rc) return rc;
    memset(devPtr, value & 0xff, count);
    ep_drop(&e);
    return ACL_SUCCESS;
}

typedef struct {
    hrt_task t;
    void *p;
    int value;
    size_t n;
    hrt_alloc *a;
} set_task;

static aclError run_set(hrt_task *t) {
    set_task *s = (set_task *)t;
    memset(s->p, s->value, s->n);
    return ACL_SUCCESS;
}

static void release_set(hrt_task *t) {
    hrt_alloc_unref(((set_task *)t)->a);
    free(t);
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
    const char *api = "aclrtMemsetAsync";
    if (!devPtr) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "devPtr is NULL");
    if (count > maxCount) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "count %zu exceeds maxCount %zu", count, maxCount);
    if (count == 0) return ACL_SUCCESS;
    hrt_stream *st;
    set_task *t;
    aclError rc = hrt_task_begin(stream, api, sizeof *t, run_set, &st, (void **)&t);
    if (rc) return rc;
    t->a = hrt_device_lookup(devPtr, count, true);
    if (!t->a) {
        hrt_task_cancel(st, &t->t);
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "[%p, +%zu) is not inside a device allocation", devPtr, count);
    }
    t->t.release = release_set;
    t->t.replayable = true;
    t->p = devPtr;
    t->value = value & 0xff;
    t->n = count;
    return hrt_task_commit(st, &t->t, false);
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_, size_t *total) {
    if (!free_ || !total) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo", "free or total is NULL");
    if ((unsigned)attr > ACL_HBM_MEM_P2P_NORMAL)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo", "unknown memory attribute %d", (int)attr);
    hrt_context *c = hrt_current_ctx();
    if (!c) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetMemInfo", "no current context in this thread");
    size_t cap = capacity();
    int64_t used = atomic_load(&dev_used[c->device]);
    *total = cap;
    *free_ = (size_t)used >= cap ? 0 : cap - (size_t)used;
    return ACL_SUCCESS;
}
