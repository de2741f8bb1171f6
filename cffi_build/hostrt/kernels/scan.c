/* Scans and rearrangements: Cumsum (x, axis; exclusive, reverse), Tril /
 * Triu (diagonal), Range (start, limit, delta), ReverseSequence (x,
 * seq_lengths; seq_dim, batch_dim).
 *
 * Cumsum runs over (outer, axis, inner) with the inner dim as the vector
 * loop (float16/bfloat16 accumulate in float32); Tril/Triu copy row
 * prefixes/suffixes and zero the rest; ReverseSequence copies contiguous
 * runs.  Every length read at run time is validated before anything moves. */
#include "kcommon.h"

/* ------------------------------------------------------------------ Cumsum */
typedef struct {
    int64_t O, D, I;
    aclDataType dt;
    bool exclusive, reverse;
} cs_plan;

typedef struct {
    const cs_plan *p;
    const char *x;
    char *y;
} cs_ctx;

#define CS_LOOP(T, ACC)                                                                     \
    do {                                                                                    \
        const T *x = (const T *)c->x;                                                       \
        T *y = (T *)c->y;                                                                   \
        for (int64_t o = b; o < e; o++) {                                                   \
            for (int64_t i = 0; i < I; i += K_BLOCK) {                                      \
                int64_t m = I - i < K_BLOCK ? I - i : K_BLOCK;                              \
                ACC acc[K_BLOCK];                                                           \
                for (int64_t j = 0; j < m; j++) acc[j] = 0;                                 \
                for (int64_t s = 0; s < D; s++) {                                           \
                    int64_t d = p->reverse ? D - 1 - s : s;                                 \
                    size_t at = (size_t)((o * D + d) * I + i);                              \
                    if (p->exclusive) {                                                     \
                        for (int64_t j = 0; j < m; j++) {                                   \
                            ACC v = (ACC)x[at + j];                                         \
                            y[at + j] = (T)acc[j];                                          \
                            acc[j] += v;                                                    \
                        }                                                                   \
                    } else {                                                                \
                        for (int64_t j = 0; j < m; j++) y[at + j] = (T)(acc[j] += (ACC)x[at + j]); \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    } while (0)

static void cs_chunk(void *vp, int64_t b, int64_t e) {
    cs_ctx *c = vp;
    const cs_plan *p = c->p;
    int64_t D = p->D, I = p->I;
    switch (p->dt) {
    case ACL_FLOAT: CS_LOOP(float, float); break;
    case ACL_DOUBLE: CS_LOOP(double, double); break;
    case ACL_INT8: CS_LOOP(int8_t, int64_t); break;
    case ACL_UINT8: CS_LOOP(uint8_t, int64_t); break;
    case ACL_INT16: CS_LOOP(int16_t, int64_t); break;
    case ACL_INT32: CS_LOOP(int32_t, int64_t); break;
    case ACL_INT64: CS_LOOP(int64_t, int64_t); break;
    case ACL_UINT16: CS_LOOP(uint16_t, uint64_t); break;
    case ACL_UINT32: CS_LOOP(uint32_t, uint64_t); break;
    case ACL_UINT64: CS_LOOP(uint64_t, uint64_t); break;
    default: { /* float16 / bfloat16 through float32 */
        const char *x = c->x;
        char *y = c->y;
        float xs[K_BLOCK], acc[K_BLOCK], ys[K_BLOCK];
        for (int64_t o = b; o < e; o++) {
            for (int64_t i = 0; i < I; i += K_BLOCK) {
                int64_t m = I - i < K_BLOCK ? I - i : K_BLOCK;
                for (int64_t j = 0; j < m; j++) acc[j] = 0;
                for (int64_t s = 0; s < D; s++) {
                    int64_t d = p->reverse ? D - 1 - s : s;
                    size_t at = (size_t)((o * D + d) * I + i);
                    k_to_f32(x + 2 * at, p->dt, xs, m);
                    for (int64_t j = 0; j < m; j++) {
                        float v = xs[j];
                        if (p->exclusive) ys[j] = acc[j];
                        acc[j] += v;
                        if (!p->exclusive) ys[j] = acc[j];
                    }
                    k_from_f32(ys, p->dt, y + 2 * at, m);
                }
            }
        }
    }
    }
}

static aclError cs_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const cs_plan *p = k->plan;
    if (k->in[0].numel == 0) return ACL_SUCCESS;
    cs_ctx c = {p, in[0], out[0]};
    hrt_parallel_for(p->O, K_GRAIN / (p->D * p->I + 1) + 1, cs_chunk, &c);
    return ACL_SUCCESS;
}

static aclError cumsum_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    int di = k_index(x->dtype);
    if (di < 0 || di == K_BOOL) return k_unsupported(k, "x", x->dtype);
    int64_t v[1];
    int n = 0, ax = 0;
    if ((rc = k_int_values(k, 1, v, 1, &n))) return rc;
    if (n != 1) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Cumsum: axis must hold one value");
    if ((rc = k_norm_axis(k, v[0], x->ndim, "axis", &ax))) return rc;
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0)))
        return rc;
    cs_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    if ((rc = hrt_attr_get_bool(k, attrs, "exclusive", false, &p->exclusive)) ||
        (rc = hrt_attr_get_bool(k, attrs, "reverse", false, &p->reverse))) {
        free(p);
        return rc;
    }
    p->O = k_prod(x->dims, 0, ax);
    p->D = x->ndim ? x->dims[ax] : 1;
    p->I = k_prod(x->dims, ax + 1, x->ndim);
    p->dt = x->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = cs_run;
    return ACL_SUCCESS;
}

/* -------------------------------------------------------------- Tril / Triu */
typedef struct {
    int64_t M, R, C, diag;
    size_t esz;
    bool upper;
} tri_plan;

typedef struct {
    const tri_plan *p;
    const char *x;
    char *y;
} tri_ctx;

static void tri_rows(void *vp, int64_t b, int64_t e) {
    tri_ctx *c = vp;
    const tri_plan *p = c->p;
    size_t es = p->esz, row = (size_t)p->C * es;
    for (int64_t it = b; it < e; it++) { /* it = (matrix, row) */
        int64_t r = it % p->R;
        const char *src = c->x + (size_t)it * row;
        char *dst = c->y + (size_t)it * row;
        /* columns kept: tril c <= r + diag, triu c >= r + diag (clamped into [0, C]) */
        int64_t edge = r + p->diag;
        if (p->upper) {
            int64_t lo = edge < 0 ? 0 : edge > p->C ? p->C : edge;
            memset(dst, 0, (size_t)lo * es);
            memcpy(dst + (size_t)lo * es, src + (size_t)lo * es, (size_t)(p->C - lo) * es);
        } else {
            int64_t hi = edge + 1 < 0 ? 0 : edge + 1 > p->C ? p->C : edge + 1;
            memcpy(dst, src, (size_t)hi * es);
            memset(dst + (size_t)hi * es, 0, (size_t)(p->C - hi) * es);
        }
    }
}

static aclError tri_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const tri_plan *p = k->plan;
    int64_t rows = p->M * p->R;
    if (rows == 0 || p->C == 0) return ACL_SUCCESS;
    tri_ctx c = {p, in[0], out[0]};
    hrt_parallel_for(rows, K_GRAIN / p->C + 1, tri_rows, &c);
    return ACL_SUCCESS;
}

static aclError tri_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    if (k_index(x->dtype) < 0 && hrt_dtype_size(x->dtype) == 0) return k_unsupported(k, "x", x->dtype);
    if (x->ndim < 2) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must have rank >= 2", k->op_name);
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0)))
        return rc;
    int64_t diag;
    if ((rc = hrt_attr_get_int(k, attrs, "diagonal", false, 0, &diag))) return rc;
    tri_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->R = x->dims[x->ndim - 2];
    p->C = x->dims[x->ndim - 1];
    p->M = k_prod(x->dims, 0, x->ndim - 2);
    /* a diagonal beyond the matrix behaves like the matrix's edge: clamp so r + diag cannot overflow */
    int64_t lim = p->R + p->C + 1;
    p->diag = diag > lim ? lim : diag < -lim ? -lim : diag;
    p->esz = hrt_dtype_size(x->dtype);
    p->upper = strcmp(k->op_name, "Triu") == 0;
    k->plan = p;
    k->plan_free = free;
    k->run = tri_run;
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------------- Range */
static aclError range_count(const hrt_kernel *k, const void *const *v, aclDataType dt, int64_t *n, double *f) {
    if (dt == ACL_INT32 || dt == ACL_INT64) {
        int64_t s = dt == ACL_INT32 ? *(const int32_t *)v[0] : *(const int64_t *)v[0];
        int64_t l = dt == ACL_INT32 ? *(const int32_t *)v[1] : *(const int64_t *)v[1];
        int64_t d = dt == ACL_INT32 ? *(const int32_t *)v[2] : *(const int64_t *)v[2];
        if (d == 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Range: delta must not be 0");
        int64_t span;
        if (__builtin_sub_overflow(l, s, &span))
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Range: limit - start overflows");
        /* ceil(span / d) without overflow: span and d as 128-bit */
        __int128 q = (__int128)span / d, r = (__int128)span % d;
        if (r != 0 && ((r > 0) == (d > 0))) q += 1;
        *n = q > 0 ? (int64_t)(q > INT64_MAX ? INT64_MAX : q) : 0;
        f[0] = (double)s;
        f[1] = (double)d;
        return ACL_SUCCESS;
    }
    double s = dt == ACL_FLOAT ? *(const float *)v[0] : *(const double *)v[0];
    double l = dt == ACL_FLOAT ? *(const float *)v[1] : *(const double *)v[1];
    double d = dt == ACL_FLOAT ? *(const float *)v[2] : *(const double *)v[2];
    if (!(d != 0) || s != s || l != l || d != d)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Range: delta must be non-zero and the bounds finite");
    double c = ceil((l - s) / d);
    if (!(c < 9.2e18)) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Range: too many elements");
    *n = c > 0 ? (int64_t)c : 0;
    f[0] = s;
    f[1] = d;
    return ACL_SUCCESS;
}

static aclError range_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const void *v[3] = {in[0], in[1], in[2]};
    int64_t n = 0;
    double f[2];
    aclDataType dt = k->in[0].dtype;
    if (range_count(k, v, dt, &n, f))
        return hrt_task_fail(ACL_ERROR_RT_AICORE_EXCEPTION, "%s", "Range: bad start/limit/delta values");
    if (n != k->out[0].numel)
        return hrt_task_fail(ACL_ERROR_RT_AICORE_EXCEPTION, "Range: the values give %lld elements, the output holds %lld",
                             (long long)n, (long long)k->out[0].numel);
    if (dt == ACL_INT32 || dt == ACL_INT64) {
        int64_t s = dt == ACL_INT32 ? *(const int32_t *)v[0] : *(const int64_t *)v[0];
        int64_t d = dt == ACL_INT32 ? *(const int32_t *)v[2] : *(const int64_t *)v[2];
        for (int64_t i = 0; i < n; i++) { /* wraps like the reference for out-of-range ends (-fwrapv) */
            int64_t val = s + i * d;
            if (dt == ACL_INT32) ((int32_t *)out[0])[i] = (int32_t)val;
            else ((int64_t *)out[0])[i] = val;
        }
    } else if (dt == ACL_FLOAT) {
        float s = (float)f[0], d = (float)f[1];
        for (int64_t i = 0; i < n; i++) ((float *)out[0])[i] = s + (float)i * d;
    } else {
        for (int64_t i = 0; i < n; i++) ((double *)out[0])[i] = f[0] + (double)i * f[1];
    }
    return ACL_SUCCESS;
}

static aclError range_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 3, 3, 1);
    if (rc) return rc;
    aclDataType dt = k->in[0].dtype;
    if (dt != ACL_FLOAT && dt != ACL_DOUBLE && dt != ACL_INT32 && dt != ACL_INT64) return k_unsupported(k, "start", dt);
    for (int i = 0; i < 3; i++)
        if (k->in[i].numel != 1)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Range: input %d must hold one value", i);
    if ((rc = k_expect_same_dtype(k, 1, 3, dt)) || (rc = k_expect_out_dtype(k, 0, dt))) return rc;
    if (k->out[0].ndim != 1) return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "Range: the output must be 1-D");
    if (k->in[0].data && k->in[1].data && k->in[2].data) { /* const bounds: check the output size now */
        const void *v[3] = {k->in[0].data, k->in[1].data, k->in[2].data};
        int64_t n;
        double f[2];
        if ((rc = range_count(k, v, dt, &n, f))) return rc;
        if (n != k->out[0].numel)
            return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "Range: %lld elements, the output holds %lld",
                             (long long)n, (long long)k->out[0].numel);
    }
    k->run = range_run;
    return ACL_SUCCESS;
}

/* --------------------------------------------------------- ReverseSequence */
typedef struct {
    int64_t P0, D1, P1, D2, P2; /* dims around the two special axes (the first, D1, comes first) */
    bool seq_first;             /* D1 is the sequence axis */
    int64_t S, B;
    size_t esz;
    bool len64;
} rs_plan;

typedef struct {
    const rs_plan *p;
    const char *x;
    const void *lens;
    char *y;
} rs_ctx;

static void rs_chunk(void *vp, int64_t b, int64_t e) {
    rs_ctx *c = vp;
    const rs_plan *p = c->p;
    size_t run = (size_t)p->P2 * p->esz;
    for (int64_t it = b; it < e; it++) { /* it = (p0, d1, p1, d2) */
        int64_t d2 = it % p->D2, r = it / p->D2;
        int64_t p1 = r % p->P1;
        r /= p->P1;
        int64_t d1 = r % p->D1, p0 = r / p->D1;
        int64_t t = p->seq_first ? d1 : d2, bb = p->seq_first ? d2 : d1;
        int64_t len = p->len64 ? ((const int64_t *)c->lens)[bb] : ((const int32_t *)c->lens)[bb];
        int64_t src_t = t < len ? len - 1 - t : t;
        int64_t sd1 = p->seq_first ? src_t : d1, sd2 = p->seq_first ? d2 : src_t;
        size_t so = (size_t)((((p0 * p->D1 + sd1) * p->P1 + p1) * p->D2 + sd2) * p->P2) * p->esz;
        memcpy(c->y + (size_t)it * run, c->x + so, run);
    }
}

static aclError rs_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const rs_plan *p = k->plan;
    for (int64_t i = 0; i < p->B; i++) {
        int64_t len = p->len64 ? ((const int64_t *)in[1])[i] : ((const int32_t *)in[1])[i];
        if (len < 0 || len > p->S)
            return hrt_task_fail(ACL_ERROR_RT_AICORE_EXCEPTION, "ReverseSequence: seq_lengths[%lld] = %lld is outside [0, %lld]",
                                 (long long)i, (long long)len, (long long)p->S);
    }
    int64_t items = p->P0 * p->D1 * p->P1 * p->D2;
    if (items == 0 || p->P2 == 0) return ACL_SUCCESS;
    rs_ctx c = {p, in[0], in[1], out[0]};
    hrt_parallel_for(items, K_GRAIN / (p->P2 + 1) + 1, rs_chunk, &c);
    return ACL_SUCCESS;
}

static aclError revseq_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *l = &k->in[1];
    if (hrt_dtype_size(x->dtype) == 0) return k_unsupported(k, "x", x->dtype);
    if (l->dtype != ACL_INT32 && l->dtype != ACL_INT64) return k_unsupported(k, "seq_lengths", l->dtype);
    int64_t sdv, bdv;
    int sd, bd;
    if ((rc = hrt_attr_get_int(k, attrs, "seq_dim", true, 0, &sdv)) ||
        (rc = hrt_attr_get_int(k, attrs, "batch_dim", false, 0, &bdv)))
        return rc;
    if ((rc = k_norm_axis(k, sdv, x->ndim, "seq_dim", &sd)) || (rc = k_norm_axis(k, bdv, x->ndim, "batch_dim", &bd)))
        return rc;
    if (sd == bd) return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "ReverseSequence: seq_dim equals batch_dim");
    if (l->ndim != 1 || l->dims[0] != x->dims[bd])
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "ReverseSequence: seq_lengths must hold one length per batch");
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0)))
        return rc;
    rs_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int a = sd < bd ? sd : bd, b = sd < bd ? bd : sd;
    p->P0 = k_prod(x->dims, 0, a);
    p->D1 = x->dims[a];
    p->P1 = k_prod(x->dims, a + 1, b);
    p->D2 = x->dims[b];
    p->P2 = k_prod(x->dims, b + 1, x->ndim);
    p->seq_first = sd < bd;
    p->S = x->dims[sd];
    p->B = x->dims[bd];
    p->esz = hrt_dtype_size(x->dtype);
    p->len64 = l->dtype == ACL_INT64;
    k->plan = p;
    k->plan_free = free;
    k->run = rs_run;
    return ACL_SUCCESS;
}

HRT_OP(cumsum, "Cumsum", cumsum_compile)
HRT_OP(tril, "Tril", tri_compile)
HRT_OP(triu, "Triu", tri_compile)
HRT_OP(range, "Range", range_compile)
HRT_OP(reversesequence, "ReverseSequence", revseq_compile)
