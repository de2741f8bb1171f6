/* Internal header of the embedded host runtime (the "hrt").
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
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <pthread.h>
#include <string.h>

#include "../acl.h"
#include "../aioge_host.h"
#include "../aioge_graph.h"

#define HRT_VERSION 2
#define HRT_MSG_LEN 512
#define HRT_MAX_DEVICES 64
#define HRT_MAXDIM 8          /* rank limit of kernel tensors */

#define HRT_LIKELY(x) __builtin_expect(!!(x), 1)
#define HRT_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---------------------------------------------------------------- errors */
/* Record `code` with a formatted message as the calling thread's recent error
 * (what aclGetRecentErrMsg returns) and return `code`. */
aclError hrt_error(aclError code, const char *api, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Push an already formatted message (e.g. an async error carried by a stream). */
void hrt_error_push(aclError code, const char *api, const char *msg);
/* For kernels running on a stream worker: set the failure text of the task
 * being run and return `code`; the worker stores it in the stream. */
aclError hrt_task_fail(aclError code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *hrt_task_fail_msg(void);
void hrt_task_fail_clear(void);

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

enum {
    HRT_ATTR_BOOL = 1, HRT_ATTR_INT, HRT_ATTR_FLOAT, HRT_ATTR_STRING, HRT_ATTR_DTYPE,
    HRT_ATTR_LIST_BOOL, HRT_ATTR_LIST_INT, HRT_ATTR_LIST_FLOAT, HRT_ATTR_LIST_STRING
};

typedef struct hrt_attr_value {
    char *name;
    int type;
    int n;                 /* list length */
    union {
        int64_t i;
        double f;
        char *s;
        int64_t *li;       /* ListInt and ListBool (0/1) */
        float *lf;
        char **ls;
    } v;
} hrt_attr_value;

struct aclopAttr {
    int n, cap;
    hrt_attr_value *items;  /* sorted by name */
};

const hrt_attr_value *hrt_attr_find(const aclopAttr *a, const char *name);
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
size_t hrt_dtype_size(aclDataType dt);   /* 0 for unknown/unsized */
const char *hrt_dtype_name(aclDataType dt);
const char *hrt_format_name(aclFormat f);

/* ------------------------------------------------------------ op layer */
typedef struct hrt_tensor {
    aclDataType dtype;
    aclFormat format;
    int ndim;
    int64_t dims[HRT_MAXDIM];
    int64_t numel;
    size_t nbytes;
    const void *data;     /* const or host-placed value, owned by the kernel */
    bool is_const;
    bool is_host;
    bool absent;          /* optional input left out */
} hrt_tensor;

typedef struct hrt_kernel hrt_kernel;
/* Run a compiled kernel.  in[i] is NULL for absent inputs; const and
 * host-placed inputs point at the kernel's own copy of the value. */
typedef aclError (*hrt_run_fn)(const hrt_kernel *k, void *const *in, void *const *out);

typedef struct hrt_opdef {
    const char *name;
    /* Validate k->in/k->out against the op's signature and shape rule, parse
     * attrs, set k->run (and k->plan).  Errors: hrt_error(...) codes. */
    aclError (*compile)(hrt_kernel *k, const aclopAttr *attrs);
    struct hrt_opdef *next_registered;
} hrt_opdef;

struct hrt_kernel {
    const hrt_opdef *op;
    const char *op_name;
    int n_in, n_out;
    hrt_tensor *in, *out;
    hrt_run_fn run;
    void *plan;
    void (*plan_free)(void *plan);
    int64_t iparam[8];          /* small per-op parameters */
    double fparam[4];
    /* cache bookkeeping (op.c) */
    atomic_int refs;
    uint64_t hash;
    uint8_t *key;
    size_t key_len;
    hrt_kernel *hnext, *lru_prev, *lru_next;
};

/* A tensor view of a desc given without a buffer (absent, const, or device). */
aclError hrt_view_desc(const char *opType, const char *what, int idx, const aclTensorDesc *d, hrt_tensor *t,
                       const void **value);
/* The compiled kernel for fully described tensors, from the cache or newly
 * compiled (errors recorded); returns it referenced. */
aclError hrt_kernel_get(const char *opType, int nin, const hrt_tensor *in, const void *const *values, int nout,
                        const hrt_tensor *out, const aclopAttr *attr, hrt_kernel **k);

void hrt_register_op(hrt_opdef *def);
const hrt_opdef *hrt_find_op(const char *name);
void hrt_kernel_unref(hrt_kernel *k);

/* Define and register an op in one statement at file scope. */
#define HRT_OP(ident, opname, compile_fn)                                      \
    static hrt_opdef hrt_opdef_##ident = {opname, compile_fn, NULL};           \
    __attribute__((constructor)) static void hrt_register_##ident(void) {      \
        hrt_register_op(&hrt_opdef_##ident);                                   \
    }

/* Helpers for compile functions (they record the error message). */
aclError hrt_expect_counts(const hrt_kernel *k, int min_in, int max_in, int n_out);
aclError hrt_expect_same_shape(const hrt_kernel *k, const hrt_tensor *got, const int64_t *dims,
                               int ndim, int out_index);
aclError hrt_expect_dtype_in(const hrt_kernel *k, const hrt_tensor *t, const char *what,
                             const aclDataType *allowed, int n_allowed);
aclError hrt_attr_get_bool(const hrt_kernel *k, const aclopAttr *a, const char *name, bool def, bool *out);
aclError hrt_attr_get_int(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required,
                          int64_t def, int64_t *out);
aclError hrt_attr_get_float(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required,
                            double def, double *out);
aclError hrt_attr_get_string(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required,
                             const char *def, const char **out);
/* ListInt: *out points into the attr (valid during compile only), n set. */
aclError hrt_attr_get_list_int(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required,
                               const int64_t **out, int *n);
aclError hrt_attr_get_list_float(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required,
                                 const float **out, int *n);
/* Read an integer tensor value (const or host-placed int32/int64 input). */
aclError hrt_tensor_int_values(const hrt_kernel *k, int input, int64_t *vals, int max, int *n);
void hrt_shape_str(const int64_t *dims, int ndim, char *buf, size_t cap);

/* ------------------------------------------------------ parallel helper */
typedef void (*hrt_range_fn)(void *ctx, int64_t begin, int64_t end);
/* Split [0, n) into chunks of at least `grain` and run them on the shared
 * intra-op pool; the caller works too.  Runs inline when small. */
void hrt_parallel_for(int64_t n, int64_t grain, hrt_range_fn fn, void *ctx);
int hrt_num_threads(void);

/* ---------------------------------------------------------------- BLAS */
/* C = alpha * op(A) * op(B) + beta * C, row-major, with leading dimensions.
 * Fails (task error set) only when the fallback cannot allocate. */
aclError hrt_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
aclError hrt_dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
               int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);
void hrt_blas_init_from_env(void);

/* -------------------------------------------------------------- half */
static inline float hrt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400u));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t hrt_f32_to_f16(float f) { /* round to nearest even */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);       /* overflow -> inf */
    if (ax < 0x38800000u) {                                          /* subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        /* value = m * 2^(e-150); the half subnormal unit is 2^-24 */
        int s2 = 126 - (int)e; /* 14..24 bits to drop */
        uint32_t q = m >> s2;
        uint32_t rem = m & ((1u << s2) - 1), half = 1u << (s2 - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax + 0xc8000fffu + ((ax >> 13) & 1u); /* rebias exp by -112<<23, round */
    return (uint16_t)(sign | (r >> 13));
}

static inline float hrt_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t hrt_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

#endif
