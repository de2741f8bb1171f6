/* MatMul / MatMulV2 (2-D, transpose_x1/x2, optional bias) and
 * BatchMatMul / BatchMatMulV2 (rank >= 2, adj_x1/x2, numpy-broadcast batch
 * dims, optional bias on V2) on GEMM.  float32 and float64 call BLAS
 * directly; float16/bfloat16 widen to float32, multiply, round once. */
#include "kcommon.h"

#include <stdlib.h>

typedef struct {
    bool ta, tb, has_bias;
    int64_t m, n, k;
    int64_t nbatch;
    int bnd;                          /* batch rank */
    int64_t bdims[HRT_MAXDIM];
    int64_t astride[HRT_MAXDIM];      /* per batch dim, in matrices; 0 = broadcast */
    int64_t bstride[HRT_MAXDIM];
    bool fold;                        /* one GEMM over all batches (x2 shared, x1 not transposed) */
    aclDataType dt;
} mm_plan;

static const char *API = "aclopCompileAndExecute";

static void batch_offsets(const mm_plan *p, int64_t bi, int64_t *oa, int64_t *ob) {
    *oa = *ob = 0;
    for (int d = p->bnd - 1; d >= 0; d--) {
        int64_t q = bi % p->bdims[d];
        bi /= p->bdims[d];
        *oa += q * p->astride[d];
        *ob += q * p->bstride[d];
    }
}

static void widen(const uint16_t *src, float *dst, int64_t n, bool bf) {
    if (bf)
        for (int64_t i = 0; i < n; i++) dst[i] = hrt_bf16_to_f32(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = hrt_f16_to_f32(src[i]);
}

static void narrow(const float *src, uint16_t *dst, int64_t n, bool bf) {
    if (bf)
        for (int64_t i = 0; i < n; i++) dst[i] = hrt_f32_to_bf16(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = hrt_f32_to_f16(src[i]);
}

typedef struct {
    const void *p, *a, *b;
    void *c;
    float beta;
    bool dbl;
} mm_batch_ctx;

#define MM_RUN(NAME, T, GEMM)                                                                              \
    static void NAME##_batches(void *vp, int64_t b0, int64_t b1) {                                        \
        const mm_batch_ctx *x = vp;                                                                        \
        const mm_plan *p = x->p;                                                                           \
        const T *a = x->a, *b = x->b;                                                                      \
        T *c = x->c;                                                                                       \
        int64_t lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;                                      \
        int64_t asz = p->m * p->k, bsz = p->k * p->n, csz = p->m * p->n;                                   \
        for (int64_t bi = b0; bi < b1; bi++) {                                                             \
            int64_t oa, ob;                                                                                \
            batch_offsets(p, bi, &oa, &ob);                                                                \
            GEMM(p->ta, p->tb, p->m, p->n, p->k, 1, a + oa * asz, lda, b + ob * bsz, ldb, (T)x->beta,      \
                 c + bi * csz, p->n);                                                                      \
        }                                                                                                  \
    }                                                                                                      \
    static aclError NAME(const mm_plan *p, const T *a, const T *b, const T *bias, T *c) {                 \
        int64_t lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;                                      \
        int64_t rows = p->fold ? p->m * p->nbatch : p->m;                                                  \
        T beta = 0;                                                                                        \
        if (bias) {                                                                                        \
            for (int64_t r = 0; r < p->m * p->nbatch; r++) memcpy(c + r * p->n, bias, sizeof(T) * (size_t)p->n); \
            beta = 1;                                                                                      \
        }                                                                                                  \
        if (p->fold || p->nbatch == 1) return GEMM(p->fold ? false : p->ta, p->tb, rows, p->n, p->k, 1, a, lda, \
                                                   b, ldb, beta, c, p->n);                                 \
        mm_batch_ctx x = {p, a, b, c, (float)beta, false};                                                 \
        double mnk = (double)p->m * (double)p->n * (double)p->k;                                           \
        if (hrt_blas_loaded() && mnk < K_GEMM_SMALL) {                                                     \
            /* GEMMs too small for hrt_sgemm to tile: spread the batch over the pool */              \
            hrt_parallel_for(p->nbatch, (int64_t)(2e6 / (mnk + 1)) + 1, NAME##_batches, &x);               \
        } else {                                                                                           \
            NAME##_batches(&x, 0, p->nbatch);                                                              \
        }                                                                                                  \
        return ACL_SUCCESS;                                                                                \
    }
MM_RUN(mm_f32, float, hrt_sgemm)
MM_RUN(mm_f64, double, hrt_dgemm)

static aclError mm_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const mm_plan *p = k->plan;
    const void *bias = p->has_bias ? in[2] : NULL;
    if (p->dt == ACL_FLOAT) return mm_f32(p, in[0], in[1], bias, out[0]);
    if (p->dt == ACL_DOUBLE) return mm_f64(p, in[0], in[1], bias, out[0]);
    /* float16 / bfloat16 through float32 scratch */
    bool bf = p->dt == ACL_BF16;
    int64_t na = k->in[0].numel, nb = k->in[1].numel, nc = k->out[0].numel, nbias = p->has_bias ? p->n : 0;
    float *s = malloc(sizeof(float) * (size_t)(na + nb + nc + nbias + 1));
    if (!s) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory for float32 scratch", k->op_name);
    float *fa = s, *fb = s + na, *fc = fb + nb, *fbias = fc + nc;
    widen(in[0], fa, na, bf);
    widen(in[1], fb, nb, bf);
    if (nbias) widen(bias, fbias, nbias, bf);
    aclError rc = mm_f32(p, fa, fb, nbias ? fbias : NULL, fc);
    if (!rc) narrow(fc, out[0], nc, bf);
    free(s);
    return rc;
}

/* constant x2 packed once (graph.c): float32, one GEMM over every batch (2-D x1 may be transposed) */
static void *mm_pack(const hrt_kernel *k, int input, const void *data, size_t *bytes) {
    const mm_plan *p = k->plan;
    if (input != 1 || p->dt != ACL_FLOAT || (!p->fold && p->nbatch != 1) || k->in[1].numel != p->k * p->n)
        return NULL;
    hrt_sgemm_pb *pb = hrt_sgemm_pack_b_shared(p->tb, p->n, p->k, data, p->tb ? p->k : p->n);
    *bytes = hrt_sgemm_pb_bytes(pb);
    return pb;
}

/* mm_pack of a constant b that is one value repeated: op(B) read from one row of that value with
 * ldb 0 (hrt_sgemm_pack_b_fill_shared): mm_pack's panels without materialising b */
static void *mm_pack_fill(const hrt_kernel *k, int input, const void *value, size_t *bytes) {
    const mm_plan *p = k->plan;
    if (input != 1 || p->dt != ACL_FLOAT || (!p->fold && p->nbatch != 1) || k->in[1].numel != p->k * p->n) return NULL;
    hrt_sgemm_pb *pb = hrt_sgemm_pack_b_fill_shared(p->tb, p->n, p->k, value);
    *bytes = hrt_sgemm_pb_bytes(pb);
    return pb;
}

static void mm_pack_free(void *pb) { hrt_sgemm_pb_release(pb); }

static aclError mm_run_packed(const hrt_kernel *k, void *const *in, void *const *out, const void *packed) {
    const mm_plan *p = k->plan;
    const bool ta = p->ta && !p->fold; /* fold: x1 is never transposed */
    hrt_sgemm_ep ep = {1.0f, p->has_bias ? in[2] : NULL, NULL};
    return hrt_sgemm_packed(p->m * p->nbatch, ta, in[0], ta ? p->m : p->k, packed, p->tb, in[1], p->tb ? p->k : p->n,
                            &ep, out[0], p->n);
}

static aclError check_float_types(const hrt_kernel *k) {
    static const aclDataType ok[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    aclError rc = hrt_expect_dtype_in(k, &k->in[0], "x1", ok, 4);
    if (rc) return rc;
    for (int i = 1; i < k->n_in; i++) {
        if (k->in[i].absent) continue;
        if (k->in[i].dtype != k->in[0].dtype)
            return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, API, "%s: input %d is %s, x1 is %s", k->op_name, i,
                             hrt_dtype_name(k->in[i].dtype), hrt_dtype_name(k->in[0].dtype));
    }
    if (k->out[0].dtype != k->in[0].dtype)
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, API, "%s: output is %s, inputs are %s", k->op_name,
                         hrt_dtype_name(k->out[0].dtype), hrt_dtype_name(k->in[0].dtype));
    return ACL_SUCCESS;
}

/* Shared tail: inner dims, bias, output shape. */
static aclError mm_finish(hrt_kernel *k, mm_plan *p, const int64_t *batch, int bnd) {
    const hrt_tensor *a = &k->in[0], *b = &k->in[1];
    int64_t m = p->ta ? a->dims[a->ndim - 1] : a->dims[a->ndim - 2];
    int64_t ka = p->ta ? a->dims[a->ndim - 2] : a->dims[a->ndim - 1];
    int64_t kb = p->tb ? b->dims[b->ndim - 1] : b->dims[b->ndim - 2];
    int64_t n = p->tb ? b->dims[b->ndim - 2] : b->dims[b->ndim - 1];
    if (ka != kb) {
        char sa[128], sb[128];
        hrt_shape_str(a->dims, a->ndim, sa, sizeof sa);
        hrt_shape_str(b->dims, b->ndim, sb, sizeof sb);
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: inner dims differ: x1 %s%s and x2 %s%s (%lld vs %lld)",
                         k->op_name, sa, p->ta ? " transposed" : "", sb, p->tb ? " transposed" : "", (long long)ka,
                         (long long)kb);
    }
    p->m = m;
    p->n = n;
    p->k = ka;
    if (k->n_in > 2 && !k->in[2].absent) {
        const hrt_tensor *bias = &k->in[2];
        if (bias->numel != n || bias->ndim > 2 || (bias->ndim == 2 && bias->dims[0] != 1))
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: bias must have shape [%lld]", k->op_name, (long long)n);
        p->has_bias = true;
    }
    if (k->n_in > 3 && !k->in[3].absent)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: offset_w (int8 quantisation) is not supported", k->op_name);
    int64_t dims[HRT_MAXDIM];
    for (int i = 0; i < bnd; i++) dims[i] = batch[i];
    if (bnd + 2 > HRT_MAXDIM) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: rank too large", k->op_name);
    dims[bnd] = m;
    dims[bnd + 1] = n;
    aclError rc = hrt_expect_same_shape(k, &k->out[0], dims, bnd + 2, 0);
    if (rc) return rc;
    p->dt = a->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = mm_run;
    k->pack = mm_pack;
    k->pack_fill = mm_pack_fill;
    k->pack_free = mm_pack_free;
    k->run_packed = mm_run_packed;
    return ACL_SUCCESS;
}

static aclError matmul_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool v2 = strcmp(k->op_name, "MatMulV2") == 0;
    aclError rc = hrt_expect_counts(k, 2, v2 ? 4 : 3, 1);
    if (!rc) rc = check_float_types(k);
    if (rc) return rc;
    if (k->in[0].ndim != 2 || k->in[1].ndim != 2)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: x1 and x2 must be 2-D (got rank %d and %d); use BatchMatMul",
                         k->op_name, k->in[0].ndim, k->in[1].ndim);
    mm_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
    rc = hrt_attr_get_bool(k, attrs, "transpose_x1", false, &p->ta);
    if (!rc) rc = hrt_attr_get_bool(k, attrs, "transpose_x2", false, &p->tb);
    if (!rc && v2) {
        int64_t off;
        rc = hrt_attr_get_int(k, attrs, "offset_x", false, 0, &off);
        if (!rc && off != 0)
            rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, API, "%s: offset_x must be 0 (quantisation is not supported)", k->op_name);
    }
    p->nbatch = 1;
    if (!rc) rc = mm_finish(k, p, NULL, 0);
    if (rc) free(p);
    return rc;
}

static aclError batch_matmul_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool v2 = strcmp(k->op_name, "BatchMatMulV2") == 0;
    aclError rc = hrt_expect_counts(k, 2, v2 ? 4 : 2, 1);
    if (!rc) rc = check_float_types(k);
    if (rc) return rc;
    const hrt_tensor *a = &k->in[0], *b = &k->in[1];
    if (a->ndim < 2 || b->ndim < 2)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: x1 and x2 must have rank >= 2 (got %d and %d)", k->op_name,
                         a->ndim, b->ndim);
    mm_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
    rc = hrt_attr_get_bool(k, attrs, "adj_x1", false, &p->ta);
    if (!rc) rc = hrt_attr_get_bool(k, attrs, "adj_x2", false, &p->tb);
    if (!rc && v2) {
        int64_t off;
        rc = hrt_attr_get_int(k, attrs, "offset_x", false, 0, &off);
        if (!rc && off != 0)
            rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, API, "%s: offset_x must be 0 (quantisation is not supported)", k->op_name);
    }
    if (rc) {
        free(p);
        return rc;
    }
    /* broadcast the batch dims */
    int an = a->ndim - 2, bn = b->ndim - 2, nd = an > bn ? an : bn;
    int64_t batch[HRT_MAXDIM];
    p->nbatch = 1;
    int64_t sa = 1, sb = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int ia = d - (nd - an), ib = d - (nd - bn);
        int64_t xa = ia >= 0 ? a->dims[ia] : 1, xb = ib >= 0 ? b->dims[ib] : 1;
        if (xa != xb && xa != 1 && xb != 1) {
            free(p);
            char s1[128], s2[128];
            hrt_shape_str(a->dims, a->ndim, s1, sizeof s1);
            hrt_shape_str(b->dims, b->ndim, s2, sizeof s2);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: batch dims of %s and %s do not broadcast", k->op_name, s1, s2);
        }
        batch[d] = xa == 1 ? xb : xa;
        p->astride[d] = xa == 1 ? 0 : sa;
        p->bstride[d] = xb == 1 ? 0 : sb;
        sa *= xa;
        sb *= xb;
        p->nbatch *= batch[d];
    }
    p->bnd = nd;
    memcpy(p->bdims, batch, sizeof(int64_t) * (size_t)nd);
    /* x2 shared by every batch and x1 stacked contiguously: one tall GEMM */
    bool b_shared = true, a_full = true;
    for (int d = 0; d < nd; d++) {
        b_shared &= p->bstride[d] == 0 || batch[d] == 1;
        a_full &= p->astride[d] != 0 || batch[d] == 1;
    }
    p->fold = nd > 0 && b_shared && a_full && !p->ta;
    rc = mm_finish(k, p, batch, nd);
    if (rc) free(p);
    return rc;
}

HRT_OP(matmul, "MatMul", matmul_compile)
HRT_OP(matmulv2, "MatMulV2", matmul_compile)
HRT_OP(batchmatmul, "BatchMatMul", batch_matmul_compile)
HRT_OP(batchmatmulv2, "BatchMatMulV2", batch_matmul_compile)

/* ------------------------------------------------------------------ GEMM
 * y = alpha * op(a) @ op(b) + beta * c, with c broadcast to [M, N] (ONNX
 * Gemm's unidirectional broadcast: [M,N], [N], [1,N], [M,1], [1] or a
 * scalar) and alpha/beta 1-element inputs (float32 or a's dtype; const,
 * host-placed or device).  beta == 0 ignores c, as BLAS does. */
typedef struct {
    bool ta, tb;
    int64_t m, n, k;
    int64_t c_rs, c_cs;   /* element strides of c over rows / cols (0 = broadcast) */
    aclDataType dt, alpha_dt, beta_dt;
} gemm_plan;

static double scalar_of(const void *p, aclDataType dt) { return k_load_d(p, dt, 0); }

static aclError gemm_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const gemm_plan *p = k->plan;
    double alpha = scalar_of(in[3], p->alpha_dt), beta = scalar_of(in[4], p->beta_dt);
    int64_t m = p->m, n = p->n, kk = p->k;
    int64_t lda = p->ta ? m : kk, ldb = p->tb ? kk : n;
    if (p->dt == ACL_DOUBLE) {
        const double *c = in[2];
        double *y = out[0];
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) y[i * n + j] = beta == 0 ? 0 : beta * c[i * p->c_rs + j * p->c_cs];
        return hrt_dgemm(p->ta, p->tb, m, n, kk, alpha, in[0], lda, in[1], ldb, 1.0, y, n);
    }
    bool half = p->dt != ACL_FLOAT;
    float *fa = NULL, *fb = NULL, *fy = out[0], *s = NULL;
    const float *a = in[0], *b = in[1];
    if (half) {
        s = k_scratch(k, sizeof(float) * (size_t)(m * kk + kk * n + m * n));
        if (!s) return ACL_ERROR_RT_MEMORY_ALLOCATION;
        fa = s;
        fb = fa + m * kk;
        fy = fb + kk * n;
        k_to_f32(in[0], p->dt, fa, m * kk);
        k_to_f32(in[1], p->dt, fb, kk * n);
        a = fa;
        b = fb;
    }
    float cbuf[K_BLOCK];
    for (int64_t i = 0; i < m; i++) {
        float *row = fy + i * n;
        if (beta == 0) {
            memset(row, 0, sizeof(float) * (size_t)n);
            continue;
        }
        const char *crow = (const char *)in[2] + (size_t)(i * p->c_rs) * hrt_dtype_size(p->dt);
        for (int64_t j0 = 0; j0 < n; j0 += K_BLOCK) {
            int64_t cnt = n - j0 < K_BLOCK ? n - j0 : K_BLOCK;
            if (p->c_cs) k_to_f32(crow + (size_t)j0 * hrt_dtype_size(p->dt), p->dt, cbuf, cnt);
            else {
                k_to_f32(crow, p->dt, cbuf, 1);
                for (int64_t j = 1; j < cnt; j++) cbuf[j] = cbuf[0];
            }
            for (int64_t j = 0; j < cnt; j++) row[j0 + j] = (float)beta * cbuf[j];
        }
    }
    aclError rc = hrt_sgemm(p->ta, p->tb, m, n, kk, (float)alpha, a, lda, b, ldb, 1.0f, fy, n);
    if (half) {
        if (!rc) k_from_f32(fy, p->dt, out[0], m * n);
        free(s);
    }
    return rc;
}

static aclError gemm_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 5, 5, 1);
    if (rc) return rc;
    static const aclDataType ok[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    const hrt_tensor *a = &k->in[0], *b = &k->in[1], *c = &k->in[2], *al = &k->in[3], *be = &k->in[4];
    if ((rc = hrt_expect_dtype_in(k, a, "a", ok, 4))) return rc;
    if ((rc = k_expect_same_dtype(k, 1, 3, a->dtype)) || (rc = k_expect_out_dtype(k, 0, a->dtype))) return rc;
    for (int i = 3; i < 5; i++) {
        const hrt_tensor *t = &k->in[i];
        if (t->dtype != ACL_FLOAT && t->dtype != a->dtype)
            return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, API, "GEMM: %s must be float32 or %s, got %s",
                             i == 3 ? "alpha" : "beta", hrt_dtype_name(a->dtype), hrt_dtype_name(t->dtype));
        if (t->numel != 1)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "GEMM: %s must hold one value, got %lld",
                             i == 3 ? "alpha" : "beta", (long long)t->numel);
    }
    if (a->ndim != 2 || b->ndim != 2)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "GEMM: a and b must be 2-D (got rank %d and %d)", a->ndim,
                         b->ndim);
    gemm_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
    rc = hrt_attr_get_bool(k, attrs, "transpose_a", false, &p->ta);
    if (!rc) rc = hrt_attr_get_bool(k, attrs, "transpose_b", false, &p->tb);
    if (rc) goto fail;
    p->m = p->ta ? a->dims[1] : a->dims[0];
    p->k = p->ta ? a->dims[0] : a->dims[1];
    int64_t kb = p->tb ? b->dims[1] : b->dims[0];
    p->n = p->tb ? b->dims[0] : b->dims[1];
    if (kb != p->k) {
        rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "GEMM: inner dims differ (%lld vs %lld)", (long long)p->k,
                       (long long)kb);
        goto fail;
    }
    /* c broadcast to [M, N] */
    int64_t cr = 1, cc = 1;
    if (c->ndim == 2) {
        cr = c->dims[0];
        cc = c->dims[1];
    } else if (c->ndim == 1) {
        cc = c->dims[0];
    } else if (c->ndim > 2) {
        cr = -1;
    }
    if (cr < 0 || (cr != 1 && cr != p->m) || (cc != 1 && cc != p->n)) {
        char sc[128];
        hrt_shape_str(c->dims, c->ndim, sc, sizeof sc);
        rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "GEMM: c %s does not broadcast to [%lld,%lld]", sc,
                       (long long)p->m, (long long)p->n);
        goto fail;
    }
    p->c_rs = cr == 1 ? 0 : cc;
    p->c_cs = cc == 1 ? 0 : 1;
    int64_t dims[2] = {p->m, p->n};
    if ((rc = hrt_expect_same_shape(k, &k->out[0], dims, 2, 0))) goto fail;
    p->dt = a->dtype;
    p->alpha_dt = al->dtype;
    p->beta_dt = be->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = gemm_run;
    return ACL_SUCCESS;
fail:
    free(p);
    return rc;
}

HRT_OP(gemm, "GEMM", gemm_compile)
