/* Activations and float predicates added for ONNX: HardSigmoid (alpha,
 * beta), HardSwish, Mish, PRelu (x, weight: one slope per channel of axis 1,
 * or a single one), LogicalNot, IsNan, IsInf.
 *
 * float32 loops are branch-free so GCC vectorises them; float16/bfloat16
 * run the float32 loop on widened blocks and round once; float64 has its
 * own loops.  Work is split over the intra-op pool in K_GRAIN chunks. */
#include "kcommon.h"

typedef struct {
    int op;            /* AC_* */
    aclDataType dt;    /* x dtype */
    double a, b;       /* HardSigmoid alpha, beta */
    int64_t C, inner;  /* PRelu: channels, elements per channel run; C == 0: one slope */
} ac_plan;

enum { AC_HSIG, AC_HSWISH, AC_MISH, AC_NOT, AC_ISNAN, AC_ISINF };

static inline float mish_f(float x) {
    /* softplus without overflow: max(x, 0) + log1p(exp(-|x|)) */
    float sp = k_maxf(x, 0.0f) + log1pf(k_expf(-k_fabsf(x)));
    return x * k_tanhf(sp);
}

static void ac_f32(const ac_plan *p, const float *x, float *y, int64_t n) {
    const float a = (float)p->a, b = (float)p->b;
    switch (p->op) {
    case AC_HSIG:
        for (int64_t i = 0; i < n; i++) y[i] = k_minf(k_maxf(a * x[i] + b, 0.0f), 1.0f);
        break;
    case AC_HSWISH:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * k_minf(k_maxf(x[i] * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
        break;
    default:
        for (int64_t i = 0; i < n; i++) y[i] = mish_f(x[i]);
        break;
    }
}

static void ac_f64(const ac_plan *p, const double *x, double *y, int64_t n) {
    switch (p->op) {
    case AC_HSIG:
        for (int64_t i = 0; i < n; i++) y[i] = k_mind(k_maxd(p->a * x[i] + p->b, 0.0), 1.0);
        break;
    case AC_HSWISH:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * k_mind(k_maxd(x[i] / 6.0 + 0.5, 0.0), 1.0);
        break;
    default:
        for (int64_t i = 0; i < n; i++) {
            double sp = (x[i] > 0 ? x[i] : 0.0) + log1p(exp(-fabs(x[i])));
            y[i] = x[i] * tanh(sp);
        }
        break;
    }
}

typedef struct {
    const ac_plan *p;
    const char *x;
    char *y;
} ac_ctx;

static void ac_chunk(void *vp, int64_t b, int64_t e) {
    ac_ctx *c = vp;
    const ac_plan *p = c->p;
    if (p->dt == ACL_FLOAT) {
        ac_f32(p, (const float *)c->x + b, (float *)c->y + b, e - b);
    } else if (p->dt == ACL_DOUBLE) {
        ac_f64(p, (const double *)c->x + b, (double *)c->y + b, e - b);
    } else {
        float buf[K_BLOCK];
        for (int64_t i = b; i < e; i += K_BLOCK) {
            int64_t m = e - i < K_BLOCK ? e - i : K_BLOCK;
            k_to_f32(c->x + 2 * i, p->dt, buf, m);
            ac_f32(p, buf, buf, m);
            k_from_f32(buf, p->dt, c->y + 2 * i, m);
        }
    }
}

static void pred_chunk(void *vp, int64_t b, int64_t e) {
    ac_ctx *c = vp;
    const ac_plan *p = c->p;
    uint8_t *y = (uint8_t *)c->y;
    if (p->op == AC_NOT) {
        const uint8_t *x = (const uint8_t *)c->x;
        for (int64_t i = b; i < e; i++) y[i] = !x[i];
        return;
    }
    bool nan = p->op == AC_ISNAN;
    if (p->dt == ACL_FLOAT) {
        const uint32_t *x = (const uint32_t *)c->x;
        for (int64_t i = b; i < e; i++) {
            uint32_t m = x[i] & 0x7fffffffu;
            y[i] = nan ? m > 0x7f800000u : m == 0x7f800000u;
        }
    } else if (p->dt == ACL_DOUBLE) {
        const uint64_t *x = (const uint64_t *)c->x;
        for (int64_t i = b; i < e; i++) {
            uint64_t m = x[i] & 0x7fffffffffffffffull;
            y[i] = nan ? m > 0x7ff0000000000000ull : m == 0x7ff0000000000000ull;
        }
    } else {
        const uint16_t *x = (const uint16_t *)c->x;
        uint16_t inf = p->dt == ACL_FLOAT16 ? 0x7c00u : 0x7f80u;
        for (int64_t i = b; i < e; i++) {
            uint16_t m = x[i] & 0x7fffu;
            y[i] = nan ? m > inf : m == inf;
        }
    }
}

static aclError ac_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const ac_plan *p = k->plan;
    ac_ctx c = {p, in[0], out[0]};
    hrt_parallel_for(k->in[0].numel, K_GRAIN, p->op >= AC_NOT ? pred_chunk : ac_chunk, &c);
    return ACL_SUCCESS;
}

static aclError ac_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    int op = strcmp(k->op_name, "HardSigmoid") == 0  ? AC_HSIG
             : strcmp(k->op_name, "HardSwish") == 0  ? AC_HSWISH
             : strcmp(k->op_name, "Mish") == 0       ? AC_MISH
             : strcmp(k->op_name, "LogicalNot") == 0 ? AC_NOT
             : strcmp(k->op_name, "IsNan") == 0      ? AC_ISNAN
                                                     : AC_ISINF;
    if (op == AC_NOT ? x->dtype != ACL_BOOL : !k_is_float(x->dtype)) return k_unsupported(k, "x", x->dtype);
    if ((rc = k_expect_out_dtype(k, 0, op >= AC_NOT ? ACL_BOOL : x->dtype)) ||
        (rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0)))
        return rc;
    ac_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->op = op;
    p->dt = x->dtype;
    if (op == AC_HSIG && ((rc = hrt_attr_get_float(k, attrs, "alpha", false, 0.16666666, &p->a)) ||
                          (rc = hrt_attr_get_float(k, attrs, "beta", false, 0.5, &p->b)))) {
        free(p);
        return rc;
    }
    k->plan = p;
    k->plan_free = free;
    k->run = ac_run;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- PRelu */
typedef struct {
    const ac_plan *p;
    const char *x, *w;
    char *y;
} pr_ctx;

static void pr_rows(void *vp, int64_t b, int64_t e) {
    pr_ctx *c = vp;
    const ac_plan *p = c->p;
    int64_t inner = p->inner;
    float xs[K_BLOCK], ys[K_BLOCK];
    for (int64_t r = b; r < e; r++) { /* r = (n, channel) */
        int64_t ch = p->C ? r % p->C : 0;
        int64_t base = r * inner;
        if (p->dt == ACL_DOUBLE) {
            const double *x = (const double *)c->x + base;
            double *y = (double *)c->y + base, s = ((const double *)c->w)[ch];
            for (int64_t i = 0; i < inner; i++) y[i] = x[i] >= 0 ? x[i] : x[i] * s;
            continue;
        }
        float s;
        k_to_f32(c->w + (size_t)ch * hrt_dtype_size(p->dt), p->dt, &s, 1);
        for (int64_t i = 0; i < inner; i += K_BLOCK) {
            int64_t m = inner - i < K_BLOCK ? inner - i : K_BLOCK;
            const float *xp = xs;
            float *yp = ys;
            if (p->dt == ACL_FLOAT) {
                xp = (const float *)c->x + base + i;
                yp = (float *)c->y + base + i;
            } else {
                k_to_f32(c->x + 2 * (base + i), p->dt, xs, m);
            }
            for (int64_t j = 0; j < m; j++) yp[j] = k_self(xp[j] >= 0.0f, xp[j], xp[j] * s);
            if (p->dt != ACL_FLOAT) k_from_f32(ys, p->dt, c->y + 2 * (base + i), m);
        }
    }
}

static aclError pr_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const ac_plan *p = k->plan;
    if (p->inner == 0) return ACL_SUCCESS;
    pr_ctx c = {p, in[0], in[1], out[0]};
    hrt_parallel_for(k->in[0].numel / p->inner, K_GRAIN / p->inner + 1, pr_rows, &c);
    return ACL_SUCCESS;
}

static aclError prelu_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *w = &k->in[1];
    if (!k_is_float(x->dtype)) return k_unsupported(k, "x", x->dtype);
    if ((rc = k_expect_same_dtype(k, 1, 2, x->dtype)) || (rc = k_expect_out_dtype(k, 0, x->dtype)) ||
        (rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0)))
        return rc;
    int64_t C = x->ndim > 1 ? x->dims[1] : 1;
    if (w->numel != 1 && (w->numel != C || w->ndim > 1))
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                         "PRelu: weight must hold one slope or one per channel (%lld), got %lld values", (long long)C,
                         (long long)w->numel);
    ac_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->dt = x->dtype;
    p->C = w->numel == 1 ? 0 : C;
    p->inner = x->ndim > 1 ? k_prod(x->dims, 2, x->ndim) : x->numel;
    if (w->numel == 1) p->inner = x->numel; /* one run over everything */
    k->plan = p;
    k->plan_free = free;
    k->run = pr_run;
    return ACL_SUCCESS;
}

HRT_OP(hardsigmoid, "HardSigmoid", ac_compile)
HRT_OP(hardswish, "HardSwish", ac_compile)
HRT_OP(mish, "Mish", ac_compile)
HRT_OP(logicalnot, "LogicalNot", ac_compile)
HRT_OP(isnan, "IsNan", ac_compile)
HRT_OP(isinf, "IsInf", ac_compile)
HRT_OP(prelu, "PRelu", prelu_compile)
