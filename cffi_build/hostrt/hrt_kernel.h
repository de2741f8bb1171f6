/* Kernel-facing header of the embedded host runtime: what an op's compile
 * and run functions may use -- errors, settings, attrs, tensor views, the op
 * registry, the intra-op pool, BLAS and half conversions.  Kernels include
 * this (through kernels/kcommon.h), never hrt.h: the runtime's streams,
 * handles, memory and locks are not theirs to touch. */
#ifndef AIOGE_HRT_KERNEL_H
#define AIOGE_HRT_KERNEL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <string.h>

#include "../acl.h"
#include "ckd.h"

#define HRT_MSG_LEN 512
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

/* ---------------------------------------------------------- environment */
/* The AIOGE_HOST_* settings, parsed once (env.c).  error is non-empty when a
 * variable is invalid; aclInit then fails with it. */
typedef struct hrt_env {
    int64_t device_count;     /* AIOGE_HOST_DEVICE_COUNT, 1 */
    size_t device_memory;     /* AIOGE_HOST_DEVICE_MEMORY, physical RAM */
    size_t op_cache_bytes;    /* AIOGE_OP_CACHE_BYTES, device_memory / 8: the op cache's bound in bytes */
    int64_t threads;          /* AIOGE_HOST_THREADS, 0 = online CPUs */
    int64_t worker_nice;      /* AIOGE_HOST_WORKER_NICE, 10 */
    int64_t pool_spin_us;     /* AIOGE_HOST_POOL_SPIN_US, 50 */
    int64_t spin_us;          /* AIOGE_HOST_SPIN_US, 20 */
    int64_t inline_bytes;     /* AIOGE_HOST_INLINE_BYTES, 64 KiB (0: never run inline) */
    int64_t inline_us;        /* AIOGE_HOST_INLINE_US, 200: CPU time a measured graph may take inline */
    bool cann_only;           /* AIOGE_HOST_CANN_ONLY, 0 */
    bool winograd;            /* AIOGE_HOST_WINOGRAD, 1 */
    char blas_library[1024];  /* AIOGE_BLAS_LIBRARY, "" */
    char error[HRT_MSG_LEN];
} hrt_env;
const hrt_env *hrt_env_get(void);

/* ---------------------------------------------------------------- attrs */
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
    size_t plan_bytes;          /* what the plan holds (packed weights, tables), set by compile; 0: small */
    /* optional: a constant input packed once (graph.c, aiogeGraphPackWeights) for run_packed;
     * pack returns NULL when the kernel has no use for it (then run is used) */
    void *(*pack)(const hrt_kernel *k, int input, const void *data, size_t *bytes);
    /* optional: pack of a constant input every element of which is *value (one element of its
     * dtype): the same packed copy as pack of that input materialised, without reading one
     * (aiogeGraphPackFillWeights); NULL: such an input is packed from its materialised bytes */
    void *(*pack_fill)(const hrt_kernel *k, int input, const void *value, size_t *bytes);
    void (*pack_free)(void *packed);
    aclError (*run_packed)(const hrt_kernel *k, void *const *in, void *const *out, const void *packed);
    int64_t iparam[8];          /* small per-op parameters */
    double fparam[4];
    /* cache bookkeeping (op.c) */
    atomic_int refs;
    uint64_t hash;
    uint8_t *key;
    size_t key_len;
    size_t bytes;               /* host memory the kernel holds: struct, key, views, value copies, plan */
    hrt_kernel *hnext, *lru_prev, *lru_next;
};

void hrt_register_op(hrt_opdef *def);

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

/* float32 op(B)[K, N] packed once into the micro-kernel's panels (gemm_small.c); NULL: no memory */
typedef struct hrt_sgemm_pb hrt_sgemm_pb;
hrt_sgemm_pb *hrt_sgemm_pack_b(bool tb, int64_t n, int64_t k, const float *b, int64_t ldb);
void hrt_sgemm_pb_free(hrt_sgemm_pb *pb);
size_t hrt_sgemm_pb_bytes(const hrt_sgemm_pb *pb);
/* packcache.c: the packed op(B) of a constant weight, shared by every plan packing the same weight
 * (layout, address and values); hrt_sgemm_pb_release drops one plan's reference (pack_free) */
hrt_sgemm_pb *hrt_sgemm_pack_b_shared(bool tb, int64_t n, int64_t k, const float *b, int64_t ldb);
void hrt_sgemm_pb_release(hrt_sgemm_pb *pb);
/* packcache.c: hrt_sgemm_pack_b_shared of a B every element of which is the float *value (its
 * panels packed from one row of it; shared as B's would be, keyed by value's address) */
hrt_sgemm_pb *hrt_sgemm_pack_b_fill_shared(bool tb, int64_t n, int64_t k, const void *value);
/* packcache.c: k->pack(k, input, data, bytes) of a graph's weight (nbytes at data, any address):
 * data not aligned to its element size is packed from an aligned copy.  *reads_raw: whether
 * run_packed with this pack may still read the weight as uploaded (a product's panels that
 * hrt_sgemm_packed hands to BLAS from the unpacked op(B) at some sizes); false: only the pack */
void *hrt_pack_weight(const hrt_kernel *k, int input, const void *data, size_t nbytes, size_t *bytes, bool *reads_raw);
/* packcache.c: k->pack_fill(k, input, value, bytes) of a graph's weight that is *value repeated
 * (NULL where the kernel has no pack_fill or no use for it); *reads_raw as hrt_pack_weight's */
void *hrt_pack_weight_fill(const hrt_kernel *k, int input, const void *value, size_t *bytes, bool *reads_raw);
int64_t hrt_sgemm_pb_count(void); /* packings so far (process-wide) */
int64_t hrt_sgemm_pb_n(const hrt_sgemm_pb *pb);
int64_t hrt_sgemm_pb_k(const hrt_sgemm_pb *pb);
/* gemm_small.c: whether pb is op(B) packed as B holds it now (the same values, bit for bit) */
bool hrt_sgemm_pb_holds(const hrt_sgemm_pb *pb, bool tb, const float *b, int64_t ldb);
void hrt_packed_weight_counted(void); /* another kernel's weight packed: counted with them */
/* The epilogue a packed product applies as it stores C, so C is written once:
 * C = act(scale * A . op(B) + bias).  bias: N floats or NULL; act: a kernel's k_act (kcommon.h) or
 * NULL; Relu and Clip run on the accumulators, Sigmoid / Tanh / Gelu / GeluTanh on each stored tile while in L1,
 * the others on the stored rows while in cache. */
struct k_act;
typedef struct hrt_sgemm_ep {
    float scale;
    const float *bias;
    const struct k_act *act;
} hrt_sgemm_ep;
/* C[M, N] = op(A)[M, K] . op(B) (A row-major, lda; ta: A is [K, M], transposed into scratch for the
 * packed kernels), through ep (NULL: none); tb / b / ldb: op(B) unpacked, which some big shapes read
 * instead (blas.c: it routes them to OpenBLAS) */
aclError hrt_sgemm_packed(int64_t m, bool ta, const float *a, int64_t lda, const hrt_sgemm_pb *pb, bool tb, const float *b,
                          int64_t ldb, const hrt_sgemm_ep *ep, float *c, int64_t ldc);
/* ep applied to C[M, N] in place over the pool (the unpacked route's epilogue) */
void hrt_sgemm_ep_apply(const hrt_sgemm_ep *ep, int64_t m, int64_t n, float *c, int64_t ldc);
/* gemm_small.c: whether OpenBLAS on the unpacked op(B) measured faster for this product, and the
 * packed product itself */
bool hrt_sgemm_packed_prefers_blas(int64_t m, const hrt_sgemm_pb *pb);
aclError hrt_sgemm_packed_run(int64_t m, bool ta, const float *a, int64_t lda, const hrt_sgemm_pb *pb, const hrt_sgemm_ep *ep,
                              float *c, int64_t ldc);

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
