/* aclopCompileAndExecute: validate, "compile" into a cached kernel, enqueue.
 *
 * The cache key is (op type, every input/output desc, const and host-placed
 * input values, attrs, compile-option generation), bounded LRU as in ACL
 * (aclopSetMaxOpQueueNum, default 20000) and in bytes of host memory the
 * kernels hold (AIOGE_OP_CACHE_BYTES / aiogeHostSetOpCacheBytes, default an
 * eighth of the device memory capacity).  A kernel is reference counted:
 * queued tasks keep an evicted kernel alive until they have run. */
#include "hrt_op.h"
#include "hrt_mem.h"
#include "hrt_stream.h"
#include "../aioge_host.h"

#include <stdio.h>
#include <stdlib.h>

static const char *API = "aclopCompileAndExecute";

/* ------------------------------------------------------------- registry */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static hrt_opdef *reg_head;

void hrt_register_op(hrt_opdef *def) {
    HRT_LOCK(&reg_mu, HRT_RANK_LEAF);
    def->next_registered = reg_head;
    reg_head = def;
    HRT_UNLOCK(&reg_mu);
}

int32_t aiogeHostListOps(const char *names[], int32_t capacity) {
    int32_t n = 0;
    HRT_LOCK(&reg_mu, HRT_RANK_LEAF);
    for (const hrt_opdef *d = reg_head; d; d = d->next_registered, n++)
        if (names && n < capacity) names[n] = d->name;
    HRT_UNLOCK(&reg_mu);
    return n;
}

/* AIOGE_HOST_CANN_ONLY=1 hides aioge's host-only op types ("_"-prefixed), so
 * a run takes exactly the ops a real Ascend has (the ascend-path tests). */
const hrt_opdef *hrt_find_op(const char *name) {
    if (hrt_env_get()->cann_only && name[0] == '_') return NULL;
    HRT_LOCK(&reg_mu, HRT_RANK_LEAF);
    hrt_opdef *d = reg_head;
    while (d && strcmp(d->name, name) != 0) d = d->next_registered;
    HRT_UNLOCK(&reg_mu);
    return d;
}

/* -------------------------------------------------------- compile options */
#define N_OPTS 17
static pthread_mutex_t opt_mu = PTHREAD_MUTEX_INITIALIZER;
static char *opt_values[N_OPTS];
static atomic_uint opt_generation;
static atomic_int compile_flag;

aclError aclSetCompileopt(aclCompileOpt opt, const char *value) {
    const char *api = "aclSetCompileopt";
    if (!value) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "value is NULL");
    if (opt == ACL_AUTO_TUNE_MODE)
        return hrt_error(ACL_ERROR_FEATURE_UNSUPPORTED, api, "ACL_AUTO_TUNE_MODE is no longer supported");
    if ((unsigned)opt >= N_OPTS) return hrt_error(ACL_ERROR_INTERNAL_ERROR, api, "unknown compile option %d", (int)opt);
    if (opt == ACL_PRECISION_MODE) {
        static const char *ok[] = {"force_fp32", "cube_fp16in_fp32out", "force_fp16", "allow_fp32_to_fp16",
                                   "must_keep_origin_dtype", "allow_mix_precision", "allow_mix_precision_fp16",
                                   "allow_mix_precision_bf16", "allow_fp32_to_bf16", "force_lowerprecision"};
        bool found = false;
        for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) found |= strcmp(ok[i], value) == 0;
        if (!found) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "unknown ACL_PRECISION_MODE value '%s'", value);
    }
    char *copy = strdup(value);
    if (!copy) return hrt_error(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    HRT_LOCK(&opt_mu, HRT_RANK_LEAF);
    free(opt_values[opt]);
    opt_values[opt] = copy;
    HRT_UNLOCK(&opt_mu);
    atomic_fetch_add(&opt_generation, 1);
    return ACL_SUCCESS;
}

size_t aclGetCompileoptSize(aclCompileOpt opt) {
    if ((unsigned)opt >= N_OPTS) return 0;
    HRT_LOCK(&opt_mu, HRT_RANK_LEAF);
    size_t n = opt_values[opt] ? strlen(opt_values[opt]) + 1 : 1;
    HRT_UNLOCK(&opt_mu);
    return n;
}

aclError aclGetCompileopt(aclCompileOpt opt, char *value, size_t length) {
    const char *api = "aclGetCompileopt";
    if (!value) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "value is NULL");
    if ((unsigned)opt >= N_OPTS) return hrt_error(ACL_ERROR_INTERNAL_ERROR, api, "unknown compile option %d", (int)opt);
    HRT_LOCK(&opt_mu, HRT_RANK_LEAF);
    const char *v = opt_values[opt] ? opt_values[opt] : "";
    size_t need = strlen(v) + 1;
    aclError rc = ACL_SUCCESS;
    if (length < need) rc = hrt_error(ACL_ERROR_INVALID_PARAM, api, "length %zu < %zu needed", length, need);
    else memcpy(value, v, need);
    HRT_UNLOCK(&opt_mu);
    return rc;
}

aclError aclopSetCompileFlag(aclOpCompileFlag flag) {
    if (flag != ACL_OP_COMPILE_DEFAULT && flag != ACL_OP_COMPILE_FUZZ)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclopSetCompileFlag", "unknown compile flag %d", (int)flag);
    atomic_store(&compile_flag, (int)flag);
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- cache */
#define N_BUCKETS 4096
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static hrt_kernel *buckets[N_BUCKETS];
static hrt_kernel *lru_head, *lru_tail; /* head = most recent */
static int64_t cache_entries, cache_hits, cache_misses, cache_evictions;
static uint64_t cache_max = 20000;
static uint64_t cache_bytes, cache_max_bytes; /* 0 until first used: AIOGE_OP_CACHE_BYTES */

static uint64_t max_bytes_locked(void) {
    if (!cache_max_bytes) cache_max_bytes = hrt_env_get()->op_cache_bytes;
    return cache_max_bytes;
}

static int64_t clamp64(uint64_t v) { return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v; }

/* hits, misses, entries, evictions, bound, bytes, bound in bytes: one consistent snapshot */
void hrt_opcache_snapshot(int64_t out[7]) {
    HRT_LOCK(&cache_mu, HRT_RANK_LEAF);
    out[0] = cache_hits;
    out[1] = cache_misses;
    out[2] = cache_entries;
    out[3] = cache_evictions;
    out[4] = clamp64(cache_max);
    out[5] = clamp64(cache_bytes);
    out[6] = clamp64(max_bytes_locked());
    HRT_UNLOCK(&cache_mu);
}

static void kernel_free(hrt_kernel *k) {
    if (k->plan_free && k->plan) k->plan_free(k->plan);
    for (int i = 0; i < k->n_in; i++) free((void *)k->in[i].data);
    free(k->in);
    free(k->out);
    free(k->key);
    free(k);
}

void hrt_kernel_unref(hrt_kernel *k) {
    if (atomic_fetch_sub(&k->refs, 1) == 1) kernel_free(k);
}

static void lru_unlink(hrt_kernel *k) {
    if (k->lru_prev) k->lru_prev->lru_next = k->lru_next;
    else lru_head = k->lru_next;
    if (k->lru_next) k->lru_next->lru_prev = k->lru_prev;
    else lru_tail = k->lru_prev;
    k->lru_prev = k->lru_next = NULL;
}

static void lru_push_front(hrt_kernel *k) {
    k->lru_prev = NULL;
    k->lru_next = lru_head;
    if (lru_head) lru_head->lru_prev = k;
    lru_head = k;
    if (!lru_tail) lru_tail = k;
}

static void cache_remove_locked(hrt_kernel *k) {
    hrt_kernel **pp = &buckets[k->hash % N_BUCKETS];
    while (*pp && *pp != k) pp = &(*pp)->hnext;
    if (*pp) *pp = k->hnext;
    lru_unlink(k);
    cache_entries--;
    cache_bytes -= k->bytes;
    hrt_kernel_unref(k);
}

/* Within both bounds.  A kernel larger than the byte bound by itself is not
 * kept either: its launch still runs (the caller holds its own reference). */
static void cache_trim_locked(void) {
    uint64_t max_bytes = max_bytes_locked();
    while (((uint64_t)cache_entries > cache_max || cache_bytes > max_bytes) && lru_tail) {
        cache_remove_locked(lru_tail);
        cache_evictions++;
    }
}

aclError aclopSetMaxOpQueueNum(uint64_t maxOpNum) {
    if (maxOpNum == 0) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclopSetMaxOpQueueNum", "maxOpNum must be > 0");
    HRT_LOCK(&cache_mu, HRT_RANK_LEAF);
    cache_max = maxOpNum;
    cache_trim_locked();
    HRT_UNLOCK(&cache_mu);
    return ACL_SUCCESS;
}

aclError aiogeHostSetOpCacheBytes(uint64_t maxBytes) {
    if (maxBytes == 0) return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostSetOpCacheBytes", "maxBytes must be > 0");
    HRT_LOCK(&cache_mu, HRT_RANK_LEAF);
    cache_max_bytes = maxBytes;
    cache_trim_locked();
    HRT_UNLOCK(&cache_mu);
    return ACL_SUCCESS;
}

aclError aiogeHostResetOpCache(void) {
    HRT_LOCK(&cache_mu, HRT_RANK_LEAF);
    while (lru_head) cache_remove_locked(lru_head);
    HRT_UNLOCK(&cache_mu);
    return ACL_SUCCESS;
}

static bool same_values(const hrt_kernel *k, int nin, const hrt_tensor *in, const void *const *values);

/* Returns a referenced kernel or NULL. */
static hrt_kernel *cache_get(const uint8_t *key, size_t len, uint64_t h, int nin, const hrt_tensor *in,
                             const void *const *values) {
    HRT_LOCK(&cache_mu, HRT_RANK_LEAF);
    hrt_kernel *k = buckets[h % N_BUCKETS];
    while (k && !(k->hash == h && k->key_len == len && memcmp(k->key, key, len) == 0 && same_values(k, nin, in, values)))
        k = k->hnext;
    if (k) {
        cache_hits++;
        lru_unlink(k);
        lru_push_front(k);
        atomic_fetch_add(&k->refs, 1);
    } else {
        cache_misses++;
    }
    HRT_UNLOCK(&cache_mu);
    return k;
}

/* Insert a freshly compiled kernel (which holds one reference for the
 * caller); returns the kernel to use (an equal one may have won a race). */
static hrt_kernel *cache_put(hrt_kernel *k, const hrt_tensor *in, const void *const *values) {
    HRT_LOCK(&cache_mu, HRT_RANK_LEAF);
    hrt_kernel *e = buckets[k->hash % N_BUCKETS];
    while (e && !(e->hash == k->hash && e->key_len == k->key_len && memcmp(e->key, k->key, k->key_len) == 0 &&
                  same_values(e, k->n_in, in, values)))
        e = e->hnext;
    if (e) {
        atomic_fetch_add(&e->refs, 1);
        HRT_UNLOCK(&cache_mu);
        hrt_kernel_unref(k);
        return e;
    }
    atomic_fetch_add(&k->refs, 1); /* the cache's reference */
    k->hnext = buckets[k->hash % N_BUCKETS];
    buckets[k->hash % N_BUCKETS] = k;
    lru_push_front(k);
    cache_entries++;
    cache_bytes += k->bytes;
    cache_trim_locked();
    HRT_UNLOCK(&cache_mu);
    return k;
}

/* The prepared launches' lookup (launch.c; declared in hrt.h). */
bool hrt_kernel_touch(hrt_kernel *k) {
    int32_t counts[3]; /* the key: op type, NUL, {nin, nout, compile-option generation}, ... */
    memcpy(counts, k->key + strlen((const char *)k->key) + 1, sizeof counts);
    if (counts[2] != (int32_t)atomic_load(&opt_generation)) return false;
    HRT_LOCK(&cache_mu, HRT_RANK_LEAF);
    hrt_kernel *e = buckets[k->hash % N_BUCKETS];
    while (e && e != k && !(e->hash == k->hash && e->key_len == k->key_len && memcmp(e->key, k->key, k->key_len) == 0))
        e = e->hnext;
    if (e) { /* k, or an equal kernel compiled after k left */
        cache_hits++;
        lru_unlink(e);
        lru_push_front(e);
    } else { /* evicted or reset: a miss, and k goes back in (compiling again would give the same kernel) */
        cache_misses++;
        atomic_fetch_add(&k->refs, 1);
        k->hnext = buckets[k->hash % N_BUCKETS];
        buckets[k->hash % N_BUCKETS] = k;
        lru_push_front(k);
        cache_entries++;
        cache_bytes += k->bytes;
        cache_trim_locked();
    }
    HRT_UNLOCK(&cache_mu);
    return true;
}

/* ----------------------------------------------------- tensor views */
void hrt_shape_str(const int64_t *dims, int ndim, char *buf, size_t cap) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int i = 0; i < ndim && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static bool desc_is_absent(const aclTensorDesc *d) {
    return d->dtype == ACL_DT_UNDEFINED && d->ndims == 0 && d->format == ACL_FORMAT_UNDEFINED;
}

/* Fill a tensor view from a desc: rank, dims, element count, byte size. */
static aclError view_from_desc(const char *op, const char *what, int idx, const aclTensorDesc *d, hrt_tensor *t) {
    memset(t, 0, sizeof *t);
    t->dtype = d->dtype;
    t->format = d->format;
    if (d->ndims > HRT_MAXDIM)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: %s %d has rank %d; the host runtime supports rank <= %d",
                         op, what, idx, d->ndims, HRT_MAXDIM);
    t->ndim = d->ndims;
    int64_t n = 1;
    for (int i = 0; i < d->ndims; i++) {
        int64_t v = d->dims[i];
        if (v < 0)
            return hrt_error(ACL_ERROR_OP_UNSUPPORTED_DYNAMIC, API,
                             "%s: %s %d has dynamic dim %d (%lld); aclopCompileAndExecute needs fixed shapes", op, what,
                             idx, i, (long long)v);
        t->dims[i] = v;
        if (v && n > INT64_MAX / v)
            return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: %s %d element count overflows", op, what, idx);
        n *= v;
    }
    size_t es = hrt_dtype_size(d->dtype);
    if (es == 0)
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, API, "%s: %s %d has data type %s with no fixed element size",
                         op, what, idx, hrt_dtype_name(d->dtype));
    if ((uint64_t)n > SIZE_MAX / es || (uint64_t)n * es > ((uint64_t)1 << 48))
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: %s %d byte size overflows", op, what, idx);
    t->numel = n;
    t->nbytes = (size_t)n * es;
    return ACL_SUCCESS;
}

/* A const or host value bigger than this enters the key as its digest (and the lookup compares
 * the value itself with the kernel's own copy): a big weight is not copied twice more into keys. */
#define KEY_INLINE_BYTES 4096

static bool by_digest(const hrt_tensor *t, const void *value) { return value && t->nbytes > KEY_INLINE_BYTES; }

static void put_view_key(hrt_buf *b, const hrt_tensor *t, const void *value) {
    int32_t hdr[5] = {t->dtype, t->format, t->ndim, (t->absent ? 1 : 0) | (t->is_const ? 2 : 0) | (t->is_host ? 4 : 0), 0};
    hrt_buf_put(b, hdr, sizeof hdr);
    hrt_buf_put(b, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    if (by_digest(t, value)) {
        uint64_t digest[2] = {(uint64_t)t->nbytes, hrt_hash_bytes(value, t->nbytes, HRT_HASH_SEED)};
        hrt_buf_put(b, digest, sizeof digest);
    } else if (value) {
        hrt_buf_put(b, value, t->nbytes);
    }
}

/* The values a key holds only as digests are equal too (the kernel keeps its own copy of each). */
static bool same_values(const hrt_kernel *k, int nin, const hrt_tensor *in, const void *const *values) {
    if (k->n_in != nin) return false;
    for (int i = 0; i < nin; i++)
        if (by_digest(&in[i], values[i]) && (!k->in[i].data || memcmp(k->in[i].data, values[i], in[i].nbytes) != 0))
            return false;
    return true;
}

/* ----------------------------------------------------------- op tasks */
aclError hrt_kernel_run(const hrt_kernel *k, void *const *in, void *const *out) {
    if (k->n_in >= HRT_IN_SLOTS) return k->run(k, in, out);
    /* a kernel reads an optional trailing input as in[i] == NULL; when the
     * caller gave fewer inputs, in[i] would be the first output pointer */
    void *slots[HRT_IN_SLOTS] = {NULL};
    memcpy(slots, in, sizeof(void *) * (size_t)k->n_in);
    return k->run(k, slots, out);
}

size_t hrt_op_task_size(size_t n) { return sizeof(hrt_op_task) + (sizeof(void *) + sizeof(hrt_alloc *)) * (n ? n : 1); }

void hrt_op_task_init(hrt_op_task *o, size_t n) {
    o->t.run = hrt_op_task_run;
    o->t.release = hrt_op_task_release; /* cancelling drops the device blocks referenced so far */
    o->ptrs = (void **)(o + 1);
    o->allocs = (hrt_alloc **)(o->ptrs + (n ? n : 1));
}

aclError hrt_op_task_run(hrt_task *t) {
    hrt_op_task *o = (hrt_op_task *)t;
    return hrt_kernel_run(o->k, o->ptrs, o->ptrs + o->k->n_in);
}

void hrt_op_task_release(hrt_task *t) {
    hrt_op_task *o = (hrt_op_task *)t;
    for (int i = 0; i < o->nallocs; i++) hrt_alloc_unref(o->allocs[i]);
    if (o->k) hrt_kernel_unref(o->k); /* none yet when the launch is cancelled */
    free(o);
}

static hrt_kernel *compile_new(const char *opType, int nin, const hrt_tensor *in, const void *const *values, int nout,
                               const hrt_tensor *out, const aclopAttr *attr, hrt_buf *key, uint64_t h, aclError *rc) {
    const hrt_opdef *def = hrt_find_op(opType);
    if (!def) {
        *rc = hrt_error(ACL_ERROR_OP_NOT_FOUND, API, "op type '%s' is not supported by the aioge host runtime", opType);
        return NULL;
    }
    hrt_kernel *k = calloc(1, sizeof *k);
    if (!k) goto oom;
    k->op = def;
    k->op_name = def->name;
    k->n_in = nin;
    k->n_out = nout;
    atomic_init(&k->refs, 1);
    k->in = calloc((size_t)(nin ? nin : 1), sizeof *k->in);
    k->out = calloc((size_t)(nout ? nout : 1), sizeof *k->out);
    k->key = malloc(key->len);
    if (!k->in || !k->out || !k->key) goto oom_k;
    memcpy(k->key, key->p, key->len);
    k->key_len = key->len;
    k->hash = h;
    memcpy(k->in, in, sizeof *in * (size_t)nin);
    memcpy(k->out, out, sizeof *out * (size_t)nout);
    for (int i = 0; i < nin; i++) {
        k->in[i].data = NULL;
        /* a const or host-placed value -- even an empty one -- gets the kernel's own copy */
        if (values[i] || in[i].is_const || in[i].is_host) {
            void *copy = malloc(in[i].nbytes ? in[i].nbytes : 1);
            if (!copy) goto oom_k;
            if (in[i].nbytes) memcpy(copy, values[i], in[i].nbytes);
            k->in[i].data = copy;
        }
    }
    *rc = def->compile(k, attr);
    if (*rc) {
        kernel_free(k);
        return NULL;
    }
    if (!k->run) {
        kernel_free(k);
        *rc = hrt_error(ACL_ERROR_INTERNAL_ERROR, API, "%s: compile produced no kernel", opType);
        return NULL;
    }
    k->bytes = sizeof *k + k->key_len + sizeof *k->in * (size_t)(nin ? nin : 1) +
               sizeof *k->out * (size_t)(nout ? nout : 1) + k->plan_bytes;
    for (int i = 0; i < nin; i++)
        if (k->in[i].data) k->bytes += k->in[i].nbytes ? k->in[i].nbytes : 1;
    return k;
oom_k:
    kernel_free(k);
oom:
    *rc = hrt_error(ACL_ERROR_BAD_ALLOC, API, "%s: out of host memory", opType);
    return NULL;
}

aclError hrt_view_desc(const char *opType, const char *what, int idx, const aclTensorDesc *d, hrt_tensor *t,
                       const void **value) {
    *value = NULL;
    if (desc_is_absent(d)) {
        memset(t, 0, sizeof *t);
        t->dtype = ACL_DT_UNDEFINED;
        t->format = ACL_FORMAT_UNDEFINED;
        t->absent = true;
        return ACL_SUCCESS;
    }
    aclError rc = view_from_desc(opType, what, idx, d, t);
    if (rc) return rc;
    if (d->const_data) {
        if (d->const_len != t->nbytes)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: const %s %d holds %zu bytes, its desc needs %zu",
                             opType, what, idx, d->const_len, t->nbytes);
        t->is_const = true;
        *value = d->const_data;
    }
    return ACL_SUCCESS;
}

aclError hrt_kernel_get(const char *opType, int nin, const hrt_tensor *in, const void *const *values, int nout,
                        const hrt_tensor *out, const aclopAttr *attr, hrt_kernel **kout) {
    hrt_buf key;
    hrt_buf_init(&key);
    hrt_buf_put(&key, opType, strlen(opType) + 1);
    int32_t counts[3] = {nin, nout, (int32_t)atomic_load(&opt_generation)};
    hrt_buf_put(&key, counts, sizeof counts);
    for (int i = 0; i < nin; i++) put_view_key(&key, &in[i], values[i]);
    for (int j = 0; j < nout; j++) put_view_key(&key, &out[j], NULL);
    hrt_attr_encode(attr, &key);
    uint64_t h = hrt_hash_bytes(key.p, key.len, HRT_HASH_SEED);
    aclError rc = ACL_SUCCESS;
    hrt_kernel *k = cache_get(key.p, key.len, h, nin, in, values);
    if (!k) {
        k = compile_new(opType, nin, in, values, nout, out, attr, &key, h, &rc);
        if (k) k = cache_put(k, in, values);
    }
    hrt_buf_free(&key);
    *kout = k;
    return rc;
}

aclError aclopCompileAndExecute(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
                                const aclDataBuffer *const inputs[], int numOutputs,
                                const aclTensorDesc *const outputDesc[], aclDataBuffer *const outputs[],
                                const aclopAttr *attr, aclopEngineType engineType, aclopCompileType compileFlag,
                                const char *opPath, aclrtStream stream) {
    if (numInputs < 0 || numOutputs < 0)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "numInputs %d / numOutputs %d must be >= 0", numInputs, numOutputs);
    if (numInputs > 4096 || numOutputs > 4096)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "too many inputs/outputs (%d/%d)", numInputs, numOutputs);
    if (compileFlag != ACL_COMPILE_SYS && compileFlag != ACL_COMPILE_UNREGISTERED)
        return hrt_error(ACL_ERROR_API_NOT_SUPPORT, API, "unknown compileFlag %d", (int)compileFlag);
    if (!opType) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "opType is NULL");
    if ((unsigned)engineType > ACL_ENGINE_VECTOR)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: unknown engineType %d", opType, (int)engineType);
    if ((numInputs && (!inputDesc || !inputs)) || (numOutputs && (!outputDesc || !outputs)))
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: desc or buffer array is NULL", opType);

    /* handles: every desc, buffer and the attr must be live */
    hrt_handles_lock();
    const char *bad = NULL;
    int bad_i = 0;
    for (int i = 0; i < numInputs && !bad; i++) {
        if (!inputDesc[i] || !hrt_handle_valid_locked(inputDesc[i], HRT_H_DESC)) bad = "input desc", bad_i = i;
        else if (!inputs[i] || !hrt_handle_valid_locked(inputs[i], HRT_H_BUFFER)) bad = "input buffer", bad_i = i;
    }
    for (int i = 0; i < numOutputs && !bad; i++) {
        if (!outputDesc[i] || !hrt_handle_valid_locked(outputDesc[i], HRT_H_DESC)) bad = "output desc", bad_i = i;
        else if (!outputs[i] || !hrt_handle_valid_locked(outputs[i], HRT_H_BUFFER)) bad = "output buffer", bad_i = i;
    }
    if (!bad && attr && !hrt_handle_valid_locked(attr, HRT_H_ATTR)) bad = "attr", bad_i = 0;
    hrt_handles_unlock();
    if (bad) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: %s %d is NULL or not a live handle", opType, bad, bad_i);
    for (int i = 0; i < numInputs; i++)
        if (!inputs[i]->data && inputs[i]->size)
            return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: input buffer %d has NULL data and size %zu", opType, i,
                             inputs[i]->size);
    for (int i = 0; i < numOutputs; i++)
        if (!outputs[i]->data && outputs[i]->size)
            return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: output buffer %d has NULL data and size %zu", opType, i,
                             outputs[i]->size);
    /* all outputs empty: nothing to do (ACL returns success at once) */
    if (numOutputs > 0) {
        bool all_empty = true;
        for (int j = 0; j < numOutputs && all_empty; j++) {
            bool zero = false;
            for (int d = 0; d < outputDesc[j]->ndims; d++) zero |= outputDesc[j]->dims[d] == 0;
            all_empty = zero;
        }
        if (all_empty) return ACL_SUCCESS;
    }
    if (compileFlag == ACL_COMPILE_UNREGISTERED && !opPath)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: ACL_COMPILE_UNREGISTERED needs opPath", opType);

    size_t ntens = (size_t)numInputs + (size_t)numOutputs;
    hrt_stream *st;
    hrt_op_task *task;
    aclError rc = hrt_task_begin(stream, API, hrt_op_task_size(ntens), hrt_op_task_run, &st, (void **)&task);
    if (rc) return rc;
    hrt_op_task_init(task, ntens);
    int dev = st->ctx->device;

    hrt_tensor views_small[16];
    const void *values_small[16];
    hrt_tensor *views = ntens <= 16 ? views_small : malloc(sizeof(hrt_tensor) * ntens);
    const void **values = (size_t)numInputs <= 16 ? values_small : malloc(sizeof(void *) * (size_t)(numInputs ? numInputs : 1));
    hrt_kernel *k = NULL;
    if (!views || !values) {
        rc = hrt_error(ACL_ERROR_BAD_ALLOC, API, "%s: out of host memory", opType);
        goto done;
    }

    /* inputs */
    for (int i = 0; i < numInputs && !rc; i++) {
        const aclTensorDesc *d = inputDesc[i];
        const aclDataBuffer *b = inputs[i];
        hrt_tensor *t = &views[i];
        values[i] = NULL;
        if (desc_is_absent(d)) {
            memset(t, 0, sizeof *t);
            t->dtype = ACL_DT_UNDEFINED;
            t->format = ACL_FORMAT_UNDEFINED;
            t->absent = true;
            if (b->data)
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: optional input %d is UNDEFINED but its buffer is not NULL",
                               opType, i);
            task->ptrs[i] = NULL;
            continue;
        }
        rc = view_from_desc(opType, "input", i, d, t);
        if (rc) break;
        if (d->const_data) {
            if (d->const_len != t->nbytes) {
                rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: const input %d holds %zu bytes, its desc needs %zu",
                               opType, i, d->const_len, t->nbytes);
                break;
            }
            t->is_const = true;
            values[i] = d->const_data;
        } else if (d->memtype != ACL_MEMTYPE_DEVICE) {
            if (b->size < t->nbytes || (!b->data && t->nbytes)) {
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: host input %d buffer holds %zu bytes, its desc needs %zu",
                               opType, i, b->size, t->nbytes);
                break;
            }
            if (b->data && hrt_is_device_ptr(b->data)) {
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API,
                               "%s: input %d is placed on the host (aclSetTensorPlaceMent) but its buffer is device memory",
                               opType, i);
                break;
            }
            t->is_host = true;
            values[i] = b->data;
        } else if (t->nbytes) {
            if (b->size < t->nbytes) {
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: input %d buffer holds %zu bytes, its desc needs %zu", opType,
                               i, b->size, t->nbytes);
                break;
            }
            hrt_alloc *a = hrt_device_lookup(b->data, t->nbytes, true);
            if (!a) {
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API,
                               hrt_is_device_ptr(b->data) ? "%s: input %d [%p, +%zu) overruns its device allocation"
                                                          : "%s: input %d buffer %p (+%zu) is not device memory (aclrtMalloc)",
                               opType, i, b->data, t->nbytes);
                break;
            }
            task->allocs[task->nallocs++] = a;
            if (a->device != dev) {
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: input %d is memory of device %d, the stream is on device %d",
                               opType, i, a->device, dev);
                break;
            }
            task->ptrs[i] = b->data;
        } else {
            task->ptrs[i] = b->data;
        }
    }
    /* outputs */
    for (int j = 0; j < numOutputs && !rc; j++) {
        const aclTensorDesc *d = outputDesc[j];
        const aclDataBuffer *b = outputs[j];
        hrt_tensor *t = &views[numInputs + j];
        rc = view_from_desc(opType, "output", j, d, t);
        if (rc) break;
        if (d->const_data || d->memtype != ACL_MEMTYPE_DEVICE) {
            rc = hrt_error(ACL_ERROR_API_NOT_SUPPORT, API, "%s: output %d cannot be const or host-placed", opType, j);
            break;
        }
        if (t->nbytes) {
            if (b->size < t->nbytes) {
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: output %d buffer holds %zu bytes, its desc needs %zu",
                               opType, j, b->size, t->nbytes);
                break;
            }
            hrt_alloc *a = hrt_device_lookup(b->data, t->nbytes, true);
            if (!a) {
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API,
                               hrt_is_device_ptr(b->data) ? "%s: output %d [%p, +%zu) overruns its device allocation"
                                                          : "%s: output %d buffer %p (+%zu) is not device memory (aclrtMalloc)",
                               opType, j, b->data, t->nbytes);
                break;
            }
            task->allocs[task->nallocs++] = a;
            if (a->device != dev) {
                rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: output %d is memory of device %d, the stream is on device %d",
                               opType, j, a->device, dev);
                break;
            }
        }
        task->ptrs[numInputs + j] = b->data;
    }
    if (rc) goto done;
    rc = hrt_check_aliasing(opType, API, numInputs, numOutputs, views, task->ptrs);
    if (rc) goto done;
    rc = hrt_kernel_get(opType, numInputs, views, values, numOutputs, views + numInputs, attr, &k);
    if (rc) goto done;
    /* const and host-placed inputs run from the kernel's own copy */
    for (int i = 0; i < numInputs; i++)
        if (k->in[i].data) task->ptrs[i] = (void *)k->in[i].data;
    task->k = k;
    task->t.replayable = true;

done:
    if (views != views_small) free(views);
    if (values != values_small) free((void *)values);
    if (rc) {
        hrt_task_cancel(st, &task->t);
        return rc;
    }
    return hrt_task_commit(st, &task->t, false);
}

/* ----------------------------------------------- helpers for compile fns */
aclError hrt_expect_counts(const hrt_kernel *k, int min_in, int max_in, int n_out) {
    if (k->n_in < min_in || k->n_in > max_in) {
        if (min_in == max_in)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: expects %d inputs, got %d", k->op_name, min_in, k->n_in);
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: expects %d to %d inputs, got %d", k->op_name, min_in,
                         max_in, k->n_in);
    }
    if (n_out >= 0 && k->n_out != n_out)
        return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, API, "%s: expects %d outputs, got %d", k->op_name, n_out, k->n_out);
    for (int i = 0; i < k->n_in && i < min_in; i++)
        if (k->in[i].absent)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: required input %d is absent", k->op_name, i);
    return ACL_SUCCESS;
}

aclError hrt_expect_same_shape(const hrt_kernel *k, const hrt_tensor *got, const int64_t *dims, int ndim, int out_index) {
    bool same = got->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = got->dims[i] == dims[i];
    if (same) return ACL_SUCCESS;
    char a[128], b[128];
    hrt_shape_str(got->dims, got->ndim, a, sizeof a);
    hrt_shape_str(dims, ndim, b, sizeof b);
    return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, API, "%s: output %d has shape %s, the op produces %s", k->op_name,
                     out_index, a, b);
}

aclError hrt_expect_dtype_in(const hrt_kernel *k, const hrt_tensor *t, const char *what, const aclDataType *allowed,
                             int n_allowed) {
    for (int i = 0; i < n_allowed; i++)
        if (t->dtype == allowed[i]) return ACL_SUCCESS;
    return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, API, "%s: %s has unsupported data type %s", k->op_name, what,
                     hrt_dtype_name(t->dtype));
}

static const hrt_attr_value *attr_typed(const hrt_kernel *k, const aclopAttr *a, const char *name, int t1, int t2,
                                        bool required, const char *tname, aclError *rc) {
    *rc = ACL_SUCCESS;
    const hrt_attr_value *v = hrt_attr_find(a, name);
    if (!v) {
        if (required)
            *rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, API, "%s: required attr '%s' (%s) is missing", k->op_name, name, tname);
        return NULL;
    }
    if (v->type != t1 && v->type != t2) {
        *rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, API, "%s: attr '%s' must be %s", k->op_name, name, tname);
        return NULL;
    }
    return v;
}

aclError hrt_attr_get_bool(const hrt_kernel *k, const aclopAttr *a, const char *name, bool def, bool *out) {
    aclError rc;
    const hrt_attr_value *v = attr_typed(k, a, name, HRT_ATTR_BOOL, HRT_ATTR_BOOL, false, "Bool", &rc);
    *out = v ? v->v.i != 0 : def;
    return rc;
}

aclError hrt_attr_get_int(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required, int64_t def,
                          int64_t *out) {
    aclError rc;
    const hrt_attr_value *v = attr_typed(k, a, name, HRT_ATTR_INT, HRT_ATTR_DTYPE, required, "Int", &rc);
    *out = v ? v->v.i : def;
    return rc;
}

aclError hrt_attr_get_float(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required, double def,
                            double *out) {
    aclError rc;
    const hrt_attr_value *v = attr_typed(k, a, name, HRT_ATTR_FLOAT, HRT_ATTR_FLOAT, required, "Float", &rc);
    *out = v ? v->v.f : def;
    return rc;
}

aclError hrt_attr_get_string(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required, const char *def,
                             const char **out) {
    aclError rc;
    const hrt_attr_value *v = attr_typed(k, a, name, HRT_ATTR_STRING, HRT_ATTR_STRING, required, "String", &rc);
    *out = v ? v->v.s : def;
    return rc;
}

aclError hrt_attr_get_list_int(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required,
                               const int64_t **out, int *n) {
    aclError rc;
    const hrt_attr_value *v = attr_typed(k, a, name, HRT_ATTR_LIST_INT, HRT_ATTR_LIST_INT, required, "ListInt", &rc);
    if (v) {
        *out = v->v.li;
        *n = v->n;
    }
    return rc;
}

aclError hrt_attr_get_list_float(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required,
                                 const float **out, int *n) {
    aclError rc;
    const hrt_attr_value *v = attr_typed(k, a, name, HRT_ATTR_LIST_FLOAT, HRT_ATTR_LIST_FLOAT, required, "ListFloat", &rc);
    if (v) {
        *out = v->v.lf;
        *n = v->n;
    }
    return rc;
}

aclError hrt_tensor_int_values(const hrt_kernel *k, int input, int64_t *vals, int max, int *n) {
    const hrt_tensor *t = &k->in[input];
    if (!t->data)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API,
                         "%s: input %d must be a const or host-placed tensor (its values shape the op)", k->op_name, input);
    if (t->dtype != ACL_INT32 && t->dtype != ACL_INT64)
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, API, "%s: input %d must be int32 or int64, got %s", k->op_name,
                         input, hrt_dtype_name(t->dtype));
    if (t->numel > max)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: input %d has %lld values, at most %d allowed", k->op_name,
                         input, (long long)t->numel, max);
    for (int64_t i = 0; i < t->numel; i++)
        vals[i] = t->dtype == ACL_INT32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
    *n = (int)t->numel;
    return ACL_SUCCESS;
}
