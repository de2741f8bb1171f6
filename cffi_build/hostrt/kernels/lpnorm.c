/* LpNormV2 (x; p, axes, keepdim, epsilon): max((sum |x|^p)^(1/p), epsilon)
 * over the axes (p = inf / -inf: max / min |x|), and ReduceLogSumExp (x,
 * axes; keep_dims, noop_with_empty_axes): max + log(sum exp(x - max)).
 *
 * The kept dims and the reduced dims are each merged where contiguous; every
 * output element walks its reduced elements with an odometer of strides
 * (the innermost reduced run is a plain strided loop) and accumulates in
 * double.  Outputs are spread over the intra-op pool. */
#include "kcommon.h"

typedef struct {
    int nk, nr;                              /* kept / reduced dims */
    int64_t kd[HRT_MAXDIM], ks[HRT_MAXDIM];  /* kept dims and their input strides */
    int64_t rd[HRT_MAXDIM], rs[HRT_MAXDIM];  /* reduced dims and their input strides */
    int64_t nred;
    double p, eps;
    bool lse;
    aclDataType dt;
} lp_plan;

typedef struct {
    const lp_plan *p;
    const char *x;
    char *y;
} lp_ctx;

static inline double lp_load(const char *x, aclDataType dt, int64_t i) {
    switch (dt) {
    case ACL_FLOAT: return ((const float *)x)[i];
    case ACL_DOUBLE: return ((const double *)x)[i];
    case ACL_FLOAT16: return hrt_f16_to_f32(((const uint16_t *)x)[i]);
    default: return hrt_bf16_to_f32(((const uint16_t *)x)[i]);
    }
}

/* Visit every reduced element of the output element at input offset `base`. */
#define LP_WALK(BODY)                                                                    \
    do {                                                                                 \
        int64_t idx[HRT_MAXDIM] = {0};                                                   \
        int64_t inner = p->nr ? p->rd[p->nr - 1] : 1, ist = p->nr ? p->rs[p->nr - 1] : 0; \
        int64_t outer = p->nred / (inner ? inner : 1), off = base;                      \
        for (int64_t q = 0; q < outer && inner; q++) {                                   \
            for (int64_t i = 0; i < inner; i++) {                                        \
                double v = lp_load(c->x, p->dt, off + i * ist);                          \
                BODY;                                                                    \
            }                                                                            \
            for (int d = p->nr - 2; d >= 0; d--) {                                       \
                off += p->rs[d];                                                         \
                if (++idx[d] < p->rd[d]) break;                                          \
                off -= p->rs[d] * p->rd[d];                                              \
                idx[d] = 0;                                                              \
            }                                                                            \
        }                                                                                \
    } while (0)

static void lp_chunk(void *vp, int64_t b, int64_t e) {
    lp_ctx *c = vp;
    const lp_plan *p = c->p;
    for (int64_t o = b; o < e; o++) {
        int64_t base = 0, rem = o;
        for (int d = p->nk - 1; d >= 0; d--) {
            base += (rem % p->kd[d]) * p->ks[d];
            rem /= p->kd[d];
        }
        double r;
        if (p->lse) {
            double m = -INFINITY, s = 0;
            LP_WALK(m = v > m ? v : m);
            if (!isfinite(m)) m = 0; /* all -inf (or an inf): let the sum decide */
            LP_WALK(s += exp(v - m));
            r = log(s) + m;
        } else if (isinf(p->p)) {
            double m = p->p > 0 ? 0.0 : INFINITY;
            LP_WALK(m = p->p > 0 ? (fabs(v) > m ? fabs(v) : m) : (fabs(v) < m ? fabs(v) : m));
            r = m;
        } else if (p->p == 2.0) {
            double s = 0;
            LP_WALK(s += v * v);
            r = sqrt(s);
        } else if (p->p == 1.0) {
            double s = 0;
            LP_WALK(s += fabs(v));
            r = s;
        } else {
            double s = 0;
            LP_WALK(s += pow(fabs(v), p->p));
            r = p->p == 0.0 ? s : pow(s, 1.0 / p->p);
        }
        if (!p->lse && r < p->eps) r = p->eps;
        switch (p->dt) {
        case ACL_FLOAT: ((float *)c->y)[o] = (float)r; break;
        case ACL_DOUBLE: ((double *)c->y)[o] = r; break;
        case ACL_FLOAT16: ((uint16_t *)c->y)[o] = hrt_f32_to_f16((float)r); break;
        default: ((uint16_t *)c->y)[o] = hrt_f32_to_bf16((float)r); break;
        }
    }
}

static aclError lp_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const lp_plan *p = k->plan;
    int64_t n = k->out[0].numel;
    if (n == 0) return ACL_SUCCESS;
    lp_ctx c = {p, in[0], out[0]};
    hrt_parallel_for(n, K_GRAIN / (p->nred + 1) + 1, lp_chunk, &c);
    return ACL_SUCCESS;
}

static aclError lp_common(hrt_kernel *k, unsigned mask, bool keep) {
    const hrt_tensor *x = &k->in[0];
    aclError rc;
    int64_t od[HRT_MAXDIM], st[HRT_MAXDIM];
    int on = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!(mask >> d & 1u)) od[on++] = x->dims[d];
        else if (keep) od[on++] = 1;
    }
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], od, on, 0))) return rc;
    lp_plan *p = k->plan;
    k_strides(x->dims, x->ndim, st);
    p->nred = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (mask >> d & 1u) {
            p->rd[p->nr] = x->dims[d], p->rs[p->nr++] = st[d];
            p->nred *= x->dims[d];
        } else {
            p->kd[p->nk] = x->dims[d], p->ks[p->nk++] = st[d];
        }
    }
    p->dt = x->dtype;
    k->run = lp_run;
    return ACL_SUCCESS;
}

static aclError lpnorm_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    if (!k_is_float(x->dtype)) return k_unsupported(k, "x", x->dtype);
    unsigned mask;
    int count;
    bool keep, present;
    double pv, eps;
    if ((rc = k_get_axes(k, attrs, "axes", -1, false, x->ndim, &mask, &count, &present)) ||
        (rc = hrt_attr_get_bool(k, attrs, "keepdim", false, &keep)) ||
        (rc = hrt_attr_get_float(k, attrs, "p", false, 2.0, &pv)) ||
        (rc = hrt_attr_get_float(k, attrs, "epsilon", false, 1e-12, &eps)))
        return rc;
    if (count == 0) mask = x->ndim >= 32 ? 0xffffffffu : (1u << x->ndim) - 1u; /* no axes: all of them */
    if (pv != pv || pv < 0) return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "LpNormV2: p must be >= 0 (or inf)");
    lp_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->p = pv;
    p->eps = eps;
    k->plan = p;
    k->plan_free = free;
    return lp_common(k, mask, keep);
}

static aclError rlse_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    if (!k_is_float(x->dtype)) return k_unsupported(k, "x", x->dtype);
    unsigned mask;
    int count;
    bool keep, noop;
    if ((rc = k_get_axes(k, attrs, "axes", 1, true, x->ndim, &mask, &count, NULL)) ||
        (rc = hrt_attr_get_bool(k, attrs, "keep_dims", false, &keep)) ||
        (rc = hrt_attr_get_bool(k, attrs, "noop_with_empty_axes", false, &noop)))
        return rc;
    if (count == 0 && !noop) mask = x->ndim >= 32 ? 0xffffffffu : (1u << x->ndim) - 1u;
    lp_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->lse = true;
    k->plan = p;
    k->plan_free = free;
    return lp_common(k, mask, keep);
}

HRT_OP(lpnormv2, "LpNormV2", lpnorm_compile)
HRT_OP(reducelogsumexp, "ReduceLogSumExp", rlse_compile)
