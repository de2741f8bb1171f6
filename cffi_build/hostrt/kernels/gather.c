/* Element-wise gathers and scatters: GatherElements (x, index; dim),
 * GatherNd (x, indices; negative_index_support), ScatterElements (data,
 * indices, updates; axis, reduction none/add/mul/max/min),
 * TensorScatterUpdate/Add/Mul/Max/Min (x, indices, updates), OneHot (x,
 * depth, on_value, off_value; axis) and NonZero (x; transpose, dtype).
 *
 * Every index is validated before anything is read or written (a bad one
 * fails the task with ACL_ERROR_RT_AICORE_EXCEPTION, as on a device); a
 * negative index counts from the end where ONNX allows it.  Data moves by
 * element size, so every fixed-size dtype works; reductions compute in the
 * dtype (float16/bfloat16 through float32). */
#include "kcommon.h"
#include "kelem.h"

static inline int64_t ld_index(const void *p, bool i64, int64_t i) {
    return i64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* The first index outside [-dim, dim) (or [0, dim) without negatives), or -1. */
static int64_t bad_index(const void *idx, bool i64, int64_t n, int64_t dim, bool neg_ok) {
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ld_index(idx, i64, i);
        if (v >= dim || v < (neg_ok ? -dim : 0)) return i;
    }
    return -1;
}

/* ---------------------------------------------------------- GatherElements */
typedef struct {
    int64_t O, D, DI, I, II; /* x: (O, D, I); index: (O, DI, II) with II <= I per dim (index dims <= x dims) */
    int nd, ax;
    int64_t xd[HRT_MAXDIM], id[HRT_MAXDIM];
    size_t esz;
    bool i64;
} ge_plan;

typedef struct {
    const ge_plan *p;
    const char *x;
    const void *idx;
    char *y;
} ge_ctx;

static void ge_chunk(void *vp, int64_t b, int64_t e) {
    ge_ctx *c = vp;
    const ge_plan *p = c->p;
    int64_t xst[HRT_MAXDIM];
    k_strides(p->xd, p->nd, xst);
    for (int64_t i = b; i < e; i++) {
        /* decompose the index position into coordinates; the axis coordinate comes from the index value */
        int64_t rem = i, off = 0;
        for (int d = p->nd - 1; d >= 0; d--) {
            int64_t q = rem % p->id[d];
            rem /= p->id[d];
            if (d == p->ax) {
                int64_t v = ld_index(c->idx, p->i64, i);
                q = v < 0 ? v + p->xd[d] : v;
            }
            off += q * xst[d];
        }
        k_cp_el(c->y + (size_t)i * p->esz, c->x + (size_t)off * p->esz, p->esz);
    }
}

static aclError ge_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const ge_plan *p = k->plan;
    int64_t n = k->in[1].numel;
    int64_t bad = bad_index(in[1], p->i64, n, p->xd[p->ax], true);
    if (bad >= 0)
        return hrt_task_fail(ACL_ERROR_RT_AICORE_EXCEPTION, "GatherElements: index %lld at position %lld is out of range for dim size %lld",
                             (long long)ld_index(in[1], p->i64, bad), (long long)bad, (long long)p->xd[p->ax]);
    ge_ctx c = {p, in[0], in[1], out[0]};
    hrt_parallel_for(n, K_GRAIN / 8, ge_chunk, &c);
    return ACL_SUCCESS;
}

static aclError gather_elements_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *ix = &k->in[1];
    if (hrt_dtype_size(x->dtype) == 0) return k_unsupported(k, "x", x->dtype);
    if (ix->dtype != ACL_INT32 && ix->dtype != ACL_INT64) return k_unsupported(k, "index (int32 or int64)", ix->dtype);
    if (x->ndim != ix->ndim || x->ndim == 0)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "GatherElements: x and index must have the same rank >= 1");
    int64_t dim;
    int ax;
    if ((rc = hrt_attr_get_int(k, attrs, "dim", false, 0, &dim)) || (rc = k_norm_axis(k, dim, x->ndim, "dim", &ax)))
        return rc;
    for (int d = 0; d < x->ndim; d++)
        if (d != ax && ix->dims[d] > x->dims[d])
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "GatherElements: index dim %d (%lld) exceeds x's (%lld)",
                             d, (long long)ix->dims[d], (long long)x->dims[d]);
    if (x->dims[ax] == 0 && ix->numel)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "GatherElements: gathering from an empty dim");
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], ix->dims, ix->ndim, 0)))
        return rc;
    ge_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->nd = x->ndim;
    p->ax = ax;
    memcpy(p->xd, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    memcpy(p->id, ix->dims, sizeof(int64_t) * (size_t)ix->ndim);
    p->esz = hrt_dtype_size(x->dtype);
    p->i64 = ix->dtype == ACL_INT64;
    k->plan = p;
    k->plan_free = free;
    k->run = ge_run;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- GatherNd */
typedef struct {
    int64_t N, K, slice; /* index tuples, tuple length, elements per gathered slice */
    int64_t xd[HRT_MAXDIM], xst[HRT_MAXDIM];
    size_t esz;
    bool i64, neg_ok;
} gn_plan;

typedef struct {
    const gn_plan *p;
    const char *x;
    const void *idx;
    char *y;
} gn_ctx;

static void gn_chunk(void *vp, int64_t b, int64_t e) {
    gn_ctx *c = vp;
    const gn_plan *p = c->p;
    size_t row = (size_t)p->slice * p->esz;
    for (int64_t i = b; i < e; i++) {
        int64_t off = 0;
        for (int64_t j = 0; j < p->K; j++) {
            int64_t v = ld_index(c->idx, p->i64, i * p->K + j);
            off += (v < 0 ? v + p->xd[j] : v) * p->xst[j];
        }
        memcpy(c->y + (size_t)i * row, c->x + (size_t)off * p->esz, row);
    }
}

static aclError gn_check(const hrt_kernel *k, const void *idx, bool i64, int64_t n, int64_t K, const int64_t *dims,
                         bool neg_ok) {
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < K; j++) {
            int64_t v = ld_index(idx, i64, i * K + j);
            if (v >= dims[j] || v < (neg_ok ? -dims[j] : 0))
                return hrt_task_fail(ACL_ERROR_RT_AICORE_EXCEPTION,
                                     "%s: index %lld of tuple %lld is out of range for dim %lld of size %lld", k->op_name,
                                     (long long)v, (long long)i, (long long)j, (long long)dims[j]);
        }
    }
    return ACL_SUCCESS;
}

static aclError gn_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const gn_plan *p = k->plan;
    aclError rc = gn_check(k, in[1], p->i64, p->N, p->K, p->xd, p->neg_ok);
    if (rc) return rc;
    if (p->N == 0 || p->slice == 0) return ACL_SUCCESS;
    gn_ctx c = {p, in[0], in[1], out[0]};
    hrt_parallel_for(p->N, K_GRAIN / (p->slice + 1) + 1, gn_chunk, &c);
    return ACL_SUCCESS;
}

/* x (D0..Dk-1, rest...), indices (..., K): gathered shape (indices[:-1], x[K:]) */
static aclError nd_layout(const hrt_kernel *k, const hrt_tensor *x, const hrt_tensor *ix, int64_t *K) {
    if (ix->dtype != ACL_INT32 && ix->dtype != ACL_INT64) return k_unsupported(k, "indices (int32 or int64)", ix->dtype);
    if (ix->ndim == 0 || ix->dims[ix->ndim - 1] < 1 || ix->dims[ix->ndim - 1] > x->ndim)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: the last dim of indices must be in [1, rank of x = %d]",
                         k->op_name, x->ndim);
    *K = ix->dims[ix->ndim - 1];
    if (ix->ndim - 1 + x->ndim - *K > HRT_MAXDIM)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: result rank exceeds %d", k->op_name, HRT_MAXDIM);
    return ACL_SUCCESS;
}

static aclError gather_nd_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *ix = &k->in[1];
    if (hrt_dtype_size(x->dtype) == 0) return k_unsupported(k, "x", x->dtype);
    int64_t K;
    if ((rc = nd_layout(k, x, ix, &K))) return rc;
    int64_t od[HRT_MAXDIM];
    int on = 0;
    for (int d = 0; d < ix->ndim - 1; d++) od[on++] = ix->dims[d];
    for (int d = (int)K; d < x->ndim; d++) od[on++] = x->dims[d];
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], od, on, 0))) return rc;
    gn_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    if ((rc = hrt_attr_get_bool(k, attrs, "negative_index_support", false, &p->neg_ok))) {
        free(p);
        return rc;
    }
    p->K = K;
    p->N = k_prod(ix->dims, 0, ix->ndim - 1);
    p->slice = k_prod(x->dims, (int)K, x->ndim);
    memcpy(p->xd, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    k_strides(x->dims, x->ndim, p->xst);
    p->esz = hrt_dtype_size(x->dtype);
    p->i64 = ix->dtype == ACL_INT64;
    k->plan = p;
    k->plan_free = free;
    k->run = gn_run;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- scatters */
enum { RD_NONE, RD_ADD, RD_MUL, RD_MAX, RD_MIN };

static int reduction_of(const char *s) {
    if (strcmp(s, "none") == 0) return RD_NONE;
    if (strcmp(s, "add") == 0) return RD_ADD;
    if (strcmp(s, "mul") == 0) return RD_MUL;
    if (strcmp(s, "max") == 0) return RD_MAX;
    if (strcmp(s, "min") == 0) return RD_MIN;
    return -1;
}

#define K_COMBINE(T)                                                                 \
    do {                                                                             \
        T x, y, z;                                                                   \
        memcpy(&x, dst, sizeof x);                                                   \
        memcpy(&y, src, sizeof y);                                                   \
        z = red == RD_ADD ? (T)(x + y) : red == RD_MUL ? (T)(x * y) : red == RD_MAX ? (x > y ? x : y) \
                                                                                     : (x < y ? x : y); \
        memcpy(dst, &z, sizeof z);                                                   \
    } while (0)

/* dst = dst (red) src for one element of dtype dt; integers wrap (-fwrapv) */
static inline void combine(char *dst, const char *src, aclDataType dt, int red, size_t esz) {
    switch (red == RD_NONE ? ACL_DT_UNDEFINED : dt) {
    case ACL_DT_UNDEFINED: k_cp_el(dst, src, esz); break;
    case ACL_FLOAT: K_COMBINE(float); break;
    case ACL_DOUBLE: K_COMBINE(double); break;
    case ACL_INT8: K_COMBINE(int8_t); break;
    case ACL_UINT8: K_COMBINE(uint8_t); break;
    case ACL_INT16: K_COMBINE(int16_t); break;
    case ACL_INT32: K_COMBINE(int32_t); break;
    case ACL_INT64: K_COMBINE(int64_t); break;
    case ACL_UINT16: K_COMBINE(uint16_t); break;
    case ACL_UINT32: K_COMBINE(uint32_t); break;
    case ACL_UINT64: K_COMBINE(uint64_t); break;
    default: { /* float16 / bfloat16 */
        float x, y, z;
        k_to_f32(dst, dt, &x, 1);
        k_to_f32(src, dt, &y, 1);
        z = red == RD_ADD ? x + y : red == RD_MUL ? x * y : red == RD_MAX ? (x > y ? x : y) : (x < y ? x : y);
        k_from_f32(&z, dt, dst, 1);
    }
    }
}

typedef struct {
    int nd, ax, red;
    int64_t xd[HRT_MAXDIM], id[HRT_MAXDIM];
    size_t esz;
    aclDataType dt;
    bool i64;
} se_plan;

static aclError se_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const se_plan *p = k->plan;
    int64_t n = k->in[1].numel;
    int64_t bad = bad_index(in[1], p->i64, n, p->xd[p->ax], true);
    if (bad >= 0)
        return hrt_task_fail(ACL_ERROR_RT_AICORE_EXCEPTION, "ScatterElements: index %lld at position %lld is out of range for dim size %lld",
                             (long long)ld_index(in[1], p->i64, bad), (long long)bad, (long long)p->xd[p->ax]);
    if (out[0] != in[0]) k_parallel_memcpy(out[0], in[0], k->out[0].nbytes);
    int64_t xst[HRT_MAXDIM];
    k_strides(p->xd, p->nd, xst);
    const char *upd = in[2];
    char *y = out[0];
    /* sequential: duplicate indices must apply in order (the last write wins, reductions accumulate) */
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0;
        for (int d = p->nd - 1; d >= 0; d--) {
            int64_t q = rem % p->id[d];
            rem /= p->id[d];
            if (d == p->ax) {
                int64_t v = ld_index(in[1], p->i64, i);
                q = v < 0 ? v + p->xd[d] : v;
            }
            off += q * xst[d];
        }
        combine(y + (size_t)off * p->esz, upd + (size_t)i * p->esz, p->dt, p->red, p->esz);
    }
    return ACL_SUCCESS;
}

static aclError reduction_attr(const hrt_kernel *k, const aclopAttr *attrs, aclDataType dt, int *red) {
    const char *s;
    aclError rc = hrt_attr_get_string(k, attrs, "reduction", false, "none", &s);
    if (rc) return rc;
    *red = reduction_of(s);
    if (*red < 0)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: reduction '%s' (none, add, mul, max, min)", k->op_name, s);
    if (*red != RD_NONE && (dt == ACL_BOOL || k_index(dt) < 0)) return k_unsupported(k, "data (for a reduction)", dt);
    return ACL_SUCCESS;
}

static aclError scatter_elements_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 3, 3, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *ix = &k->in[1], *u = &k->in[2];
    if (hrt_dtype_size(x->dtype) == 0) return k_unsupported(k, "data", x->dtype);
    if (ix->dtype != ACL_INT32 && ix->dtype != ACL_INT64) return k_unsupported(k, "indices (int32 or int64)", ix->dtype);
    if (ix->ndim != x->ndim || u->ndim != x->ndim || x->ndim == 0)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "ScatterElements: data, indices, updates need one rank >= 1");
    int64_t axis;
    int ax, red;
    if ((rc = hrt_attr_get_int(k, attrs, "axis", false, 0, &axis)) || (rc = k_norm_axis(k, axis, x->ndim, "axis", &ax)) ||
        (rc = reduction_attr(k, attrs, x->dtype, &red)))
        return rc;
    for (int d = 0; d < x->ndim; d++)
        if (ix->dims[d] != u->dims[d] || (d != ax && ix->dims[d] > x->dims[d]))
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "ScatterElements: indices/updates do not fit data at dim %d", d);
    if (x->dims[ax] == 0 && ix->numel)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "ScatterElements: scattering into an empty axis");
    if ((rc = k_expect_same_dtype(k, 2, 3, x->dtype)) || (rc = k_expect_out_dtype(k, 0, x->dtype)) ||
        (rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0)))
        return rc;
    se_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->nd = x->ndim;
    p->ax = ax;
    p->red = red;
    memcpy(p->xd, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    memcpy(p->id, ix->dims, sizeof(int64_t) * (size_t)ix->ndim);
    p->esz = hrt_dtype_size(x->dtype);
    p->dt = x->dtype;
    p->i64 = ix->dtype == ACL_INT64;
    k->plan = p;
    k->plan_free = free;
    k->run = se_run;
    return ACL_SUCCESS;
}

typedef struct {
    gn_plan g;
    int red;
    aclDataType dt;
} ts_plan;

static aclError ts_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const ts_plan *p = k->plan;
    aclError rc = gn_check(k, in[1], p->g.i64, p->g.N, p->g.K, p->g.xd, true);
    if (rc) return rc;
    if (out[0] != in[0]) k_parallel_memcpy(out[0], in[0], k->out[0].nbytes);
    const char *u = in[2];
    char *y = out[0];
    size_t es = p->g.esz;
    for (int64_t i = 0; i < p->g.N; i++) { /* in order: duplicates behave as in the reference */
        int64_t off = 0;
        for (int64_t j = 0; j < p->g.K; j++) {
            int64_t v = ld_index(in[1], p->g.i64, i * p->g.K + j);
            off += (v < 0 ? v + p->g.xd[j] : v) * p->g.xst[j];
        }
        char *dst = y + (size_t)off * es;
        const char *src = u + (size_t)(i * p->g.slice) * es;
        if (p->red == RD_NONE) {
            memcpy(dst, src, (size_t)p->g.slice * es);
        } else {
            for (int64_t e = 0; e < p->g.slice; e++) combine(dst + (size_t)e * es, src + (size_t)e * es, p->dt, p->red, es);
        }
    }
    return ACL_SUCCESS;
}

static aclError tensor_scatter_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 3, 3, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *ix = &k->in[1], *u = &k->in[2];
    if (hrt_dtype_size(x->dtype) == 0) return k_unsupported(k, "x", x->dtype);
    int red = strcmp(k->op_name, "TensorScatterAdd") == 0   ? RD_ADD
              : strcmp(k->op_name, "TensorScatterMul") == 0 ? RD_MUL
              : strcmp(k->op_name, "TensorScatterMax") == 0 ? RD_MAX
              : strcmp(k->op_name, "TensorScatterMin") == 0 ? RD_MIN
                                                             : RD_NONE;
    if (red != RD_NONE && (x->dtype == ACL_BOOL || k_index(x->dtype) < 0)) return k_unsupported(k, "x", x->dtype);
    int64_t K;
    if ((rc = nd_layout(k, x, ix, &K))) return rc;
    int64_t want[HRT_MAXDIM];
    int wn = 0;
    for (int d = 0; d < ix->ndim - 1; d++) want[wn++] = ix->dims[d];
    for (int d = (int)K; d < x->ndim; d++) want[wn++] = x->dims[d];
    bool ok = u->ndim == wn;
    for (int d = 0; ok && d < wn; d++) ok = u->dims[d] == want[d];
    if (!ok) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: updates do not fit indices and x", k->op_name);
    if ((rc = k_expect_same_dtype(k, 2, 3, x->dtype)) || (rc = k_expect_out_dtype(k, 0, x->dtype)) ||
        (rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0)))
        return rc;
    ts_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->g.K = K;
    p->g.N = k_prod(ix->dims, 0, ix->ndim - 1);
    p->g.slice = k_prod(x->dims, (int)K, x->ndim);
    memcpy(p->g.xd, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    k_strides(x->dims, x->ndim, p->g.xst);
    p->g.esz = hrt_dtype_size(x->dtype);
    p->g.i64 = ix->dtype == ACL_INT64;
    p->red = red;
    p->dt = x->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = ts_run;
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------------ OneHot */
typedef struct {
    int64_t O, depth, I; /* output (O, depth, I): indices (O, I) */
    size_t esz;
    aclDataType idt;
} oh_plan;

typedef struct {
    const oh_plan *p;
    const void *idx;
    const char *on, *off;
    char *y;
} oh_ctx;

static void oh_chunk(void *vp, int64_t b, int64_t e) {
    oh_ctx *c = vp;
    const oh_plan *p = c->p;
    size_t es = p->esz;
    for (int64_t o = b; o < e; o++) {
        char *blk = c->y + (size_t)(o * p->depth * p->I) * es;
        k_fill(blk, c->off, es, p->depth * p->I);
        for (int64_t i = 0; i < p->I; i++) {
            int64_t at = o * p->I + i, v;
            if (p->idt == ACL_UINT8) v = ((const uint8_t *)c->idx)[at];
            else v = ld_index(c->idx, p->idt == ACL_INT64, at);
            if (v >= 0 && v < p->depth) memcpy(blk + (size_t)(v * p->I + i) * es, c->on, es); /* else: all off */
        }
    }
}

static aclError oh_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const oh_plan *p = k->plan;
    if (k->out[0].numel == 0) return ACL_SUCCESS;
    oh_ctx c = {p, in[0], in[2], in[3], out[0]};
    hrt_parallel_for(p->O, K_GRAIN / (p->depth * p->I + 1) + 1, oh_chunk, &c);
    return ACL_SUCCESS;
}

static aclError onehot_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 4, 4, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *on = &k->in[2], *off = &k->in[3], *y = &k->out[0];
    if (x->dtype != ACL_UINT8 && x->dtype != ACL_INT32 && x->dtype != ACL_INT64) return k_unsupported(k, "x", x->dtype);
    if (hrt_dtype_size(on->dtype) == 0) return k_unsupported(k, "on_value", on->dtype);
    if (on->numel != 1 || off->numel != 1)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "OneHot: on_value and off_value must hold one value");
    int64_t dv[1];
    int n = 0;
    if ((rc = k_int_values(k, 1, dv, 1, &n))) return rc;
    if (n != 1 || dv[0] < 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "OneHot: depth must be one value >= 0");
    if (x->ndim + 1 > HRT_MAXDIM) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "OneHot: rank exceeds %d", HRT_MAXDIM);
    int64_t axis;
    int ax;
    if ((rc = hrt_attr_get_int(k, attrs, "axis", false, -1, &axis)) || (rc = k_norm_axis(k, axis, x->ndim + 1, "axis", &ax)))
        return rc;
    int64_t od[HRT_MAXDIM];
    for (int d = 0, s = 0; d <= x->ndim; d++) od[d] = d == ax ? dv[0] : x->dims[s++];
    if ((rc = k_expect_same_dtype(k, 3, 4, on->dtype)) || (rc = k_expect_out_dtype(k, 0, on->dtype)) ||
        (rc = hrt_expect_same_shape(k, y, od, x->ndim + 1, 0)))
        return rc; /* the output desc's size (checked by the runtime) bounds depth * numel */
    oh_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->O = k_prod(x->dims, 0, ax);
    p->depth = dv[0];
    p->I = k_prod(x->dims, ax, x->ndim);
    p->esz = hrt_dtype_size(on->dtype);
    p->idt = x->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = oh_run;
    return ACL_SUCCESS;
}

/* ----------------------------------------------------------------- NonZero */
static inline bool nz_at(const char *x, aclDataType dt, int64_t i) {
    switch (dt) {
    case ACL_FLOAT: return ((const float *)x)[i] != 0.0f; /* NaN is non-zero, -0.0 is zero */
    case ACL_DOUBLE: return ((const double *)x)[i] != 0.0;
    case ACL_FLOAT16:
    case ACL_BF16: return (((const uint16_t *)x)[i] & 0x7fffu) != 0;
    case ACL_INT16:
    case ACL_UINT16: return ((const int16_t *)x)[i] != 0;
    case ACL_UINT32:
    case ACL_INT32: return ((const int32_t *)x)[i] != 0;
    case ACL_UINT64:
    case ACL_INT64: return ((const int64_t *)x)[i] != 0;
    default: return ((const uint8_t *)x)[i] != 0;
    }
}

static aclError nz_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const hrt_tensor *x = &k->in[0];
    int64_t count = 0, n = x->numel, cols = k->out[0].dims[1];
    const char *xs = in[0];
    for (int64_t i = 0; i < n; i++) count += nz_at(xs, x->dtype, i);
    if (count != cols)
        return hrt_task_fail(ACL_ERROR_RT_AICORE_EXCEPTION, "NonZero: %lld non-zero elements, the output holds %lld",
                             (long long)count, (long long)cols);
    bool i64 = k->out[0].dtype == ACL_INT64;
    int64_t j = 0, coord[HRT_MAXDIM] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (nz_at(xs, x->dtype, i)) {
            for (int d = 0; d < x->ndim; d++) {
                if (i64) ((int64_t *)out[0])[d * cols + j] = coord[d];
                else ((int32_t *)out[0])[d * cols + j] = (int32_t)coord[d];
            }
            j++;
        }
        for (int d = x->ndim - 1; d >= 0; d--) {
            if (++coord[d] < x->dims[d]) break;
            coord[d] = 0;
        }
    }
    return ACL_SUCCESS;
}

static aclError nonzero_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *y = &k->out[0];
    if (k_index(x->dtype) < 0) return k_unsupported(k, "x", x->dtype);
    bool tr;
    int64_t dt;
    if ((rc = hrt_attr_get_bool(k, attrs, "transpose", false, &tr)) ||
        (rc = hrt_attr_get_int(k, attrs, "dtype", false, ACL_INT64, &dt)))
        return rc;
    if (tr) return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "NonZero: transpose=true is not supported");
    if (dt != ACL_INT32 && dt != ACL_INT64)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "NonZero: dtype must be int32 or int64");
    if ((rc = k_expect_out_dtype(k, 0, (aclDataType)dt))) return rc;
    if (y->ndim != 2 || y->dims[0] != x->ndim)
        return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "NonZero: the output must be (rank of x, count)");
    k->run = nz_run;
    return ACL_SUCCESS;
}

HRT_OP(gatherelements, "GatherElements", gather_elements_compile)
HRT_OP(gathernd, "GatherNd", gather_nd_compile)
HRT_OP(scatterelements, "ScatterElements", scatter_elements_compile)
HRT_OP(tensorscatterupdate, "TensorScatterUpdate", tensor_scatter_compile)
HRT_OP(tensorscatteradd, "TensorScatterAdd", tensor_scatter_compile)
HRT_OP(tensorscattermul, "TensorScatterMul", tensor_scatter_compile)
HRT_OP(tensorscattermax, "TensorScatterMax", tensor_scatter_compile)
HRT_OP(tensorscattermin, "TensorScatterMin", tensor_scatter_compile)
HRT_OP(onehot, "OneHot", onehot_compile)
HRT_OP(nonzero, "NonZero", nonzero_compile)
