/* Normalisations: SoftmaxV2, LogSoftmaxV2, LayerNorm, LayerNormV3, RmsNorm,
 * BatchNorm, LRN.
 *
 * Softmax views x as (outer O, axis R, inner I).  With I == 1 a row is
 * three sweeps over data that stays in L1/L2 (max; exp and sum, storing
 * the exps; scale), i.e. one pass over memory each way; with I > 1 the
 * same runs vectorised across the I inner elements.  LayerNorm/RmsNorm
 * work row by row (mean, then centred sum of squares, then the affine
 * output), again one read of x from memory.  float32 math uses the
 * vectorisable kmath.h exp/log; float16/bfloat16 widen a row at a time and
 * round once; float64 uses libm. */
#include "kcommon.h"

/* --------------------------------------------------------------- helpers */
static inline float row_max_f(const float *x, int64_t n) { return n ? k_row_maxf(x, n) : -__builtin_inff(); }

static inline float row_sum_f(const float *x, int64_t n) {
    float l[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) l[j] += x[i + j];
    float s = 0;
    for (int j = 0; j < 8; j++) s += l[j];
    for (; i < n; i++) s += x[i];
    return s;
}

/* y = exp(x - m) (kmath.h's vector exp), then the sum of y from L1 */
static inline float row_exp_sum_f(const float *restrict x, float m, float *restrict y, int64_t n) {
    K_VROW(x, y, n, v, k_vexpf(v - m));
    return row_sum_f(y, n);
}

/* sum of exp(x - m) without storing: exps of a block go through a stack buffer */
static inline float row_expsum_f(const float *x, float m, int64_t n) {
    float buf[256], s = 0;
    for (int64_t i = 0; i < n; i += 256) {
        int64_t c = n - i < 256 ? n - i : 256;
        s += row_exp_sum_f(x + i, m, buf, c);
    }
    return s;
}

/* sum of (x - m)^2 */
static inline float row_css_f(const float *x, float m, int64_t n) {
    float l[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float d = x[i + j] - m;
            l[j] += d * d;
        }
    float s = 0;
    for (int j = 0; j < 8; j++) s += l[j];
    for (; i < n; i++) {
        float d = x[i] - m;
        s += d * d;
    }
    return s;
}

/* ------------------------------------------------------------- softmax */
typedef struct {
    int64_t O, R, I;
    bool log;
    aclDataType in_dt, out_dt;
} sm_plan;

typedef struct {
    const sm_plan *p;
    const char *x;
    char *y;
} sm_ctx;

static void sm_row_f32(const float *x, float *y, int64_t R, bool lg) {
    float m = row_max_f(x, R);
    if (m == -__builtin_inff()) m = 0; /* all -inf: exp gives 0s, sum 0 -> NaN like numpy */
    if (lg) {
        float ls = k_logf(row_expsum_f(x, m, R)) + m;
        for (int64_t i = 0; i < R; i++) y[i] = x[i] - ls;
    } else {
        float s = row_exp_sum_f(x, m, y, R);
        float inv = 1.0f / s;
        for (int64_t i = 0; i < R; i++) y[i] *= inv;
    }
}

static void sm_row_f64(const double *x, double *y, int64_t R, int64_t I, bool lg) {
    for (int64_t i = 0; i < I; i++) {
        double m = -INFINITY;
        for (int64_t r = 0; r < R; r++) m = k_maxd(x[r * I + i], m);
        if (m == -INFINITY) m = 0;
        double s = 0;
        for (int64_t r = 0; r < R; r++) s += exp(x[r * I + i] - m);
        if (lg) {
            double ls = log(s) + m;
            for (int64_t r = 0; r < R; r++) y[r * I + i] = x[r * I + i] - ls;
        } else {
            for (int64_t r = 0; r < R; r++) y[r * I + i] = exp(x[r * I + i] - m) / s;
        }
    }
}

/* strided (I > 1) float32: vectorised over the inner elements */
static void sm_cols_f32(const float *x, float *y, int64_t R, int64_t I, bool lg, float *m, float *s) {
    for (int64_t i = 0; i < I; i++) {
        m[i] = -__builtin_inff();
        s[i] = 0;
    }
    for (int64_t r = 0; r < R; r++)
        for (int64_t i = 0; i < I; i++) m[i] = k_maxf(x[r * I + i], m[i]);
    for (int64_t i = 0; i < I; i++) m[i] = k_self(m[i] == -__builtin_inff(), 0.0f, m[i]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t i = 0; i < I; i++) {
            float e = k_expf(x[r * I + i] - m[i]);
            if (!lg) y[r * I + i] = e;
            s[i] += e;
        }
    if (lg) {
        for (int64_t i = 0; i < I; i++) s[i] = k_logf(s[i]) + m[i];
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < I; i++) y[r * I + i] = x[r * I + i] - s[i];
    } else {
        for (int64_t i = 0; i < I; i++) s[i] = 1.0f / s[i];
        for (int64_t r = 0; r < R; r++)
            for (int64_t i = 0; i < I; i++) y[r * I + i] *= s[i];
    }
}

static void sm_chunk(void *vp, int64_t b, int64_t e) {
    sm_ctx *c = vp;
    const sm_plan *p = c->p;
    int64_t R = p->R, I = p->I, blk = R * I;
    size_t isz = hrt_dtype_size(p->in_dt), osz = hrt_dtype_size(p->out_dt);
    if (p->in_dt == ACL_DOUBLE) {
        for (int64_t o = b; o < e; o++)
            sm_row_f64((const double *)c->x + o * blk, (double *)c->y + o * blk, R, I, p->log);
        return;
    }
    bool widen = p->in_dt != ACL_FLOAT, narrow = p->out_dt != ACL_FLOAT;
    /* scratch: widened input block, f32 output block, column stats */
    size_t need = (size_t)((widen ? blk : 0) + (narrow ? blk : 0) + (I > 1 ? 2 * I : 0));
    float stack[4096];
    float *s = need <= 4096 ? stack : malloc(sizeof(float) * need);
    if (!s) return; /* reported by the caller's check */
    float *xw = s, *yw = s + (widen ? blk : 0), *st = yw + (narrow ? blk : 0);
    for (int64_t o = b; o < e; o++) {
        const float *x = (const float *)(c->x + (size_t)(o * blk) * isz);
        float *y = (float *)(c->y + (size_t)(o * blk) * osz);
        if (widen) {
            k_to_f32(x, p->in_dt, xw, blk);
            x = xw;
        }
        float *yo = narrow ? yw : y;
        if (I == 1) sm_row_f32(x, yo, R, p->log);
        else sm_cols_f32(x, yo, R, I, p->log, st, st + I);
        if (narrow) k_from_f32(yw, p->out_dt, y, blk);
    }
    if (s != stack) free(s);
}

static aclError sm_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const sm_plan *p = k->plan;
    if (k->out[0].numel == 0) return ACL_SUCCESS;
    sm_ctx c = {p, in[0], out[0]};
    int64_t per = p->R * p->I;
    /* the chunk mallocs big blocks; probe once so an OOM is an error, not silence */
    size_t need = (size_t)(2 * per + 2 * p->I);
    if (p->in_dt != ACL_DOUBLE && need > 4096) {
        void *probe = k_scratch(k, sizeof(float) * need);
        if (!probe) return ACL_ERROR_RT_MEMORY_ALLOCATION;
        free(probe);
    }
    hrt_parallel_for(p->O, K_GRAIN / (per + 1) + 1, sm_chunk, &c);
    return ACL_SUCCESS;
}

static aclError sm_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool lg = strcmp(k->op_name, "LogSoftmaxV2") == 0;
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *y = &k->out[0];
    static const aclDataType ok[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    if ((rc = hrt_expect_dtype_in(k, x, "x", ok, 4))) return rc;
    bool h2f = false;
    if (!lg && (rc = hrt_attr_get_bool(k, attrs, "half_to_float", false, &h2f))) return rc;
    aclDataType odt = (h2f && x->dtype == ACL_FLOAT16) ? ACL_FLOAT : x->dtype;
    if ((rc = k_expect_out_dtype(k, 0, odt))) return rc;
    if ((rc = hrt_expect_same_shape(k, y, x->dims, x->ndim, 0))) return rc;
    const int64_t *axes = NULL;
    int n = 0;
    if ((rc = hrt_attr_get_list_int(k, attrs, "axes", false, &axes, &n))) return rc;
    static const int64_t last[1] = {-1};
    if (!axes || n == 0) {
        axes = last;
        n = 1;
    }
    int lo = HRT_MAXDIM, hi = -1;
    unsigned mask = 0;
    for (int i = 0; i < n; i++) {
        int a;
        if ((rc = k_norm_axis(k, axes[i], x->ndim, "axes", &a))) return rc;
        if (x->ndim == 0) a = 0;
        mask |= 1u << a;
        if (a < lo) lo = a;
        if (a > hi) hi = a;
    }
    for (int a = lo; a <= hi; a++)
        if (!((mask >> a) & 1u))
            return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: axes must be contiguous", k->op_name);
    sm_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    if (x->ndim == 0) {
        p->O = p->R = p->I = 1;
    } else {
        p->O = k_prod(x->dims, 0, lo);
        p->R = k_prod(x->dims, lo, hi + 1);
        p->I = k_prod(x->dims, hi + 1, x->ndim);
    }
    p->log = lg;
    p->in_dt = x->dtype;
    p->out_dt = odt;
    k->plan = p;
    k->plan_free = free;
    k->run = sm_run;
    return ACL_SUCCESS;
}

HRT_OP(softmaxv2, "SoftmaxV2", sm_compile)
HRT_OP(logsoftmaxv2, "LogSoftmaxV2", sm_compile)

/* ---------------------------------------------------- LayerNorm, RmsNorm
 * Rows of R = prod(x.shape[begin_norm_axis:]) elements; gamma/beta cover
 * x.shape[begin_params_axis:] (index (o*R + j) mod G).  Stats outputs have
 * O elements: shape x.shape[:axis] + [1]*(rank-axis), or x.shape[:axis]. */
typedef struct {
    int64_t O, R, G;
    double eps;
    bool rms, v3, has_gamma, has_beta;
    int n_out;
    aclDataType dt, gdt, sdt[3];
} ln_plan;

typedef struct {
    const ln_plan *p;
    const char *x, *gamma, *beta;
    char *y, *mean, *var;
} ln_ctx;

static void ln_store_stat(const ln_plan *p, char *dst, int64_t o, double v) {
    if (dst) k_store_d(dst, p->sdt[0], o, v);
}
static void ln_store_stat2(const ln_plan *p, char *dst, int64_t o, double v) {
    if (dst) k_store_d(dst, p->sdt[1], o, v);
}

static void ln_chunk(void *vp, int64_t b, int64_t e) {
    ln_ctx *c = vp;
    const ln_plan *p = c->p;
    int64_t R = p->R, G = p->G;
    size_t esz = hrt_dtype_size(p->dt);
    if (p->dt == ACL_DOUBLE) {
        for (int64_t o = b; o < e; o++) {
            const double *x = (const double *)c->x + o * R;
            double *y = (double *)c->y + o * R;
            double m = 0, ss = 0;
            if (!p->rms) {
                for (int64_t j = 0; j < R; j++) m += x[j];
                m /= (double)R;
            }
            for (int64_t j = 0; j < R; j++) ss += (x[j] - m) * (x[j] - m);
            double var = R ? ss / (double)R : 0, rstd = 1.0 / sqrt(var + p->eps);
            for (int64_t j = 0; j < R; j++) {
                int64_t gi = (o * R + j) % G;
                double g = p->has_gamma ? ((const double *)c->gamma)[gi] : 1.0;
                double bb = p->has_beta ? ((const double *)c->beta)[gi] : 0.0;
                y[j] = (x[j] - m) * rstd * g + bb;
            }
            if (p->rms) ln_store_stat(p, c->mean, o, rstd);
            else {
                ln_store_stat(p, c->mean, o, m);
                ln_store_stat2(p, c->var, o, p->v3 ? rstd : var);
            }
        }
        return;
    }
    bool wide = p->dt != ACL_FLOAT;
    float stack[3 * 2048];
    size_t need = (size_t)(wide ? 2 * R : 0) + (size_t)(G == R && p->gdt != ACL_FLOAT ? 2 * R : 0);
    float *s = need <= sizeof stack / sizeof *stack ? stack : malloc(sizeof(float) * (need ? need : 1));
    if (!s) return;
    float *xw = s, *yw = s + (wide ? R : 0);
    float *gw = yw + (wide ? R : 0), *bw = gw + R;
    const float *gam = (const float *)c->gamma, *bet = (const float *)c->beta;
    if (G == R && p->gdt != ACL_FLOAT) { /* widen gamma/beta once */
        if (p->has_gamma) k_to_f32(c->gamma, p->gdt, gw, R);
        if (p->has_beta) k_to_f32(c->beta, p->gdt, bw, R);
        gam = gw;
        bet = bw;
    }
    for (int64_t o = b; o < e; o++) {
        const float *x = (const float *)(c->x + (size_t)(o * R) * esz);
        float *y = (float *)(c->y + (size_t)(o * R) * esz);
        if (wide) {
            k_to_f32(x, p->dt, xw, R);
            x = xw;
        }
        float *yo = wide ? yw : y;
        float m = p->rms ? 0.0f : (R ? row_sum_f(x, R) / (float)R : 0.0f);
        float var = R ? row_css_f(x, m, R) / (float)R : 0.0f;
        float rstd = 1.0f / sqrtf(var + (float)p->eps);
        if (G == R) {
            if (p->has_gamma && p->has_beta)
                for (int64_t j = 0; j < R; j++) yo[j] = (x[j] - m) * rstd * gam[j] + bet[j];
            else if (p->has_gamma)
                for (int64_t j = 0; j < R; j++) yo[j] = (x[j] - m) * rstd * gam[j];
            else if (p->has_beta)
                for (int64_t j = 0; j < R; j++) yo[j] = (x[j] - m) * rstd + bet[j];
            else
                for (int64_t j = 0; j < R; j++) yo[j] = (x[j] - m) * rstd;
        } else {
            for (int64_t j = 0; j < R; j++) {
                int64_t gi = (o * R + j) % G;
                float g = p->has_gamma ? (float)k_load_d(c->gamma, p->gdt, gi) : 1.0f;
                float bb = p->has_beta ? (float)k_load_d(c->beta, p->gdt, gi) : 0.0f;
                yo[j] = (x[j] - m) * rstd * g + bb;
            }
        }
        if (wide) k_from_f32(yw, p->dt, y, R);
        if (p->rms) ln_store_stat(p, c->mean, o, rstd);
        else {
            ln_store_stat(p, c->mean, o, m);
            ln_store_stat2(p, c->var, o, p->v3 ? rstd : var);
        }
    }
    if (s != stack) free(s);
}

static aclError ln_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const ln_plan *p = k->plan;
    if (p->O * p->R == 0 && p->O == 0) return ACL_SUCCESS;
    int gi = 1, bi = p->rms ? -1 : 2;
    ln_ctx c = {p, in[0], p->has_gamma ? in[gi] : NULL, (bi > 0 && p->has_beta) ? in[bi] : NULL, out[0],
                p->n_out > 1 ? out[1] : NULL, p->n_out > 2 ? out[2] : NULL};
    if (p->dt != ACL_DOUBLE) {
        size_t need = (size_t)(4 * p->R);
        if (need > 3 * 2048) {
            void *probe = k_scratch(k, sizeof(float) * need);
            if (!probe) return ACL_ERROR_RT_MEMORY_ALLOCATION;
            free(probe);
        }
    }
    hrt_parallel_for(p->O, K_GRAIN / (p->R + 1) + 1, ln_chunk, &c);
    return ACL_SUCCESS;
}

static aclError check_stat_shape(const hrt_kernel *k, int j, const hrt_tensor *x, int axis) {
    int64_t d1[HRT_MAXDIM];
    for (int i = 0; i < x->ndim; i++) d1[i] = i < axis ? x->dims[i] : 1;
    const hrt_tensor *t = &k->out[j];
    bool ok = t->ndim == x->ndim, ok2 = t->ndim == axis;
    for (int i = 0; ok && i < x->ndim; i++) ok = t->dims[i] == d1[i];
    for (int i = 0; ok2 && i < axis; i++) ok2 = t->dims[i] == x->dims[i];
    if (ok || ok2) return ACL_SUCCESS;
    return hrt_expect_same_shape(k, t, d1, x->ndim, j);
}

static aclError ln_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool rms = strcmp(k->op_name, "RmsNorm") == 0, v3 = strcmp(k->op_name, "LayerNormV3") == 0;
    int max_in = rms ? 2 : 3, max_out = rms ? 2 : 3;
    if (k->n_in < 1 || k->n_in > max_in)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: expects 1 to %d inputs, got %d", k->op_name, max_in,
                         k->n_in);
    if (k->n_out < 1 || k->n_out > max_out)
        return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "%s: expects 1 to %d outputs, got %d", k->op_name, max_out,
                         k->n_out);
    const hrt_tensor *x = &k->in[0];
    if (x->absent) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x is absent", k->op_name);
    static const aclDataType ok[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    aclError rc = hrt_expect_dtype_in(k, x, "x", ok, 4);
    if (rc) return rc;
    if ((rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    for (int j = 1; j < k->n_out; j++)
        if (k->out[j].dtype != x->dtype && k->out[j].dtype != ACL_FLOAT)
            return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, K_API, "%s: output %d must be %s or float32, got %s",
                             k->op_name, j, hrt_dtype_name(x->dtype), hrt_dtype_name(k->out[j].dtype));
    if ((rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0))) return rc;
    double eps;
    int64_t bna = 0, bpa = 0;
    const hrt_tensor *g = k->n_in > 1 && !k->in[1].absent ? &k->in[1] : NULL;
    const hrt_tensor *bt = !rms && k->n_in > 2 && !k->in[2].absent ? &k->in[2] : NULL;
    if (rms) {
        rc = hrt_attr_get_float(k, attrs, "epsilon", false, 1e-6, &eps);
        bna = bpa = g ? x->ndim - g->ndim : x->ndim - 1;
        if (!rc && g && g->ndim > x->ndim)
            rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "RmsNorm: gamma has higher rank than x");
    } else {
        rc = hrt_attr_get_float(k, attrs, "epsilon", false, v3 ? 1e-5 : 1e-7, &eps);
        if (!rc) rc = hrt_attr_get_int(k, attrs, "begin_norm_axis", false, 0, &bna);
        if (!rc) rc = hrt_attr_get_int(k, attrs, "begin_params_axis", false, 0, &bpa);
    }
    if (rc) return rc;
    int na, pa;
    if (x->ndim == 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must have rank >= 1", k->op_name);
    if ((rc = k_norm_axis(k, bna, x->ndim, "begin_norm_axis", &na))) return rc;
    if ((rc = k_norm_axis(k, bpa, x->ndim, "begin_params_axis", &pa))) return rc;
    int64_t G = k_prod(x->dims, pa, x->ndim);
    for (int i = 0; i < 2; i++) {
        const hrt_tensor *t = i ? bt : g;
        if (!t) continue;
        if (t->dtype != x->dtype && t->dtype != ACL_FLOAT)
            return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, K_API, "%s: %s is %s, x is %s", k->op_name,
                             i ? "beta" : "gamma", hrt_dtype_name(t->dtype), hrt_dtype_name(x->dtype));
        if (t->numel != G) {
            char s1[128], s2[128];
            hrt_shape_str(t->dims, t->ndim, s1, sizeof s1);
            hrt_shape_str(x->dims + pa, x->ndim - pa, s2, sizeof s2);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: %s has shape %s, expected %s", k->op_name,
                             i ? "beta" : "gamma", s1, s2);
        }
    }
    if (g && bt && g->dtype != bt->dtype)
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, K_API, "%s: gamma and beta have different types", k->op_name);
    for (int j = 1; j < k->n_out; j++)
        if ((rc = check_stat_shape(k, j, x, na))) return rc;
    ln_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->O = k_prod(x->dims, 0, na);
    p->R = k_prod(x->dims, na, x->ndim);
    p->G = G ? G : 1;
    p->eps = eps;
    p->rms = rms;
    p->v3 = v3;
    p->has_gamma = g != NULL;
    p->has_beta = bt != NULL;
    p->n_out = k->n_out;
    p->dt = x->dtype;
    for (int j = 1; j < 3; j++) p->sdt[j - 1] = j < k->n_out ? k->out[j].dtype : x->dtype;
    p->gdt = g ? g->dtype : bt ? bt->dtype : x->dtype;
    if (p->dt == ACL_DOUBLE && p->gdt != ACL_DOUBLE && (g || bt)) {
        free(p);
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, K_API, "%s: float64 x needs float64 gamma/beta", k->op_name);
    }
    k->plan = p;
    k->plan_free = free;
    k->run = ln_run;
    return ACL_SUCCESS;
}

HRT_OP(layernorm, "LayerNorm", ln_compile)
HRT_OP(layernormv3, "LayerNormV3", ln_compile)
HRT_OP(rmsnorm, "RmsNorm", ln_compile)

/* ------------------------------------------------------------ BatchNorm
 * x 4-D (NCHW or NHWC) or 2-D [N, C]; scale/offset/mean/variance [C].
 * Inference (is_training false): y = (x - mean) * scale / sqrt(var + eps)
 * + offset; batch_mean/batch_variance/reserve_space_1/2 echo mean and
 * variance.  Training: batch statistics over N, H, W (biased variance to
 * normalise, Bessel-corrected in batch_variance), blended with the given
 * running mean/variance by exponential_avg_factor. */
typedef struct {
    int64_t N, C, HW;
    bool nhwc, training;
    double eps, factor;
    bool has_mean, has_var;
    int n_out;
    aclDataType dt;
} bn_plan;

static aclError bn_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const bn_plan *p = k->plan;
    int64_t N = p->N, C = p->C, HW = p->HW;
    double *st = k_scratch(k, sizeof(double) * (size_t)(6 * C + 1));
    if (!st) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    double *mean = st, *var = st + C, *a = st + 2 * C, *bb = st + 3 * C, *omean = st + 4 * C, *ovar = st + 5 * C;
    aclDataType pdt = k->in[1].dtype;
    if (p->training) {
        for (int64_t c = 0; c < C; c++) mean[c] = var[c] = 0;
        int64_t cnt = N * HW;
        /* two passes in float64 */
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < HW; s++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t idx = p->nhwc ? (n * HW + s) * C + c : (n * C + c) * HW + s;
                    mean[c] += k_load_d(in[0], p->dt, idx);
                }
        for (int64_t c = 0; c < C; c++) mean[c] = cnt ? mean[c] / (double)cnt : 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < HW; s++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t idx = p->nhwc ? (n * HW + s) * C + c : (n * C + c) * HW + s;
                    double d = k_load_d(in[0], p->dt, idx) - mean[c];
                    var[c] += d * d;
                }
        for (int64_t c = 0; c < C; c++) {
            double biased = cnt ? var[c] / (double)cnt : 0, unb = cnt > 1 ? var[c] / (double)(cnt - 1) : biased;
            double f = p->factor;
            omean[c] = p->has_mean && f != 1.0 ? (1 - f) * k_load_d(in[3], pdt, c) + f * mean[c] : mean[c];
            ovar[c] = p->has_var && f != 1.0 ? (1 - f) * k_load_d(in[4], pdt, c) + f * unb : unb;
            var[c] = biased;
        }
    } else {
        for (int64_t c = 0; c < C; c++) {
            mean[c] = omean[c] = k_load_d(in[3], pdt, c);
            var[c] = ovar[c] = k_load_d(in[4], pdt, c);
        }
    }
    for (int64_t c = 0; c < C; c++) {
        a[c] = k_load_d(in[1], pdt, c) / sqrt(var[c] + p->eps);
        bb[c] = k_load_d(in[2], pdt, c) - mean[c] * a[c];
    }
    if (p->dt == ACL_FLOAT) {
        const float *x = in[0];
        float *y = out[0];
        float af[4096], bf[4096];
        bool small = C <= 4096;
        if (small)
            for (int64_t c = 0; c < C; c++) {
                af[c] = (float)a[c];
                bf[c] = (float)bb[c];
            }
        for (int64_t n = 0; n < N; n++) {
            if (p->nhwc && small) {
                for (int64_t s = 0; s < HW; s++) {
                    const float *xr = x + (n * HW + s) * C;
                    float *yr = y + (n * HW + s) * C;
                    for (int64_t c = 0; c < C; c++) yr[c] = xr[c] * af[c] + bf[c];
                }
            } else if (!p->nhwc) {
                for (int64_t c = 0; c < C; c++) {
                    const float *xr = x + (n * C + c) * HW;
                    float *yr = y + (n * C + c) * HW;
                    float av = (float)a[c], bv = (float)bb[c];
                    for (int64_t s = 0; s < HW; s++) yr[s] = xr[s] * av + bv;
                }
            } else {
                for (int64_t s = 0; s < HW; s++)
                    for (int64_t c = 0; c < C; c++) {
                        int64_t idx = (n * HW + s) * C + c;
                        y[idx] = x[idx] * (float)a[c] + (float)bb[c];
                    }
            }
        }
    } else {
        int64_t total = N * C * HW;
        for (int64_t idx = 0; idx < total; idx++) {
            int64_t c = p->nhwc ? idx % C : (idx / HW) % C;
            k_store_d(out[0], p->dt, idx, k_load_d(in[0], p->dt, idx) * a[c] + bb[c]);
        }
    }
    /* statistics outputs */
    for (int j = 1; j < p->n_out && j < 5; j++) {
        const double *src = j == 1 ? omean : j == 2 ? ovar : j == 3 ? mean : var;
        for (int64_t c = 0; c < C; c++) k_store_d(out[j], k->out[j].dtype, c, src[c]);
    }
    if (p->n_out > 5 && k->out[5].nbytes) memset(out[5], 0, k->out[5].nbytes);
    free(st);
    return ACL_SUCCESS;
}

static aclError bn_compile(hrt_kernel *k, const aclopAttr *attrs) {
    if (k->n_in < 3 || k->n_in > 5)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "BatchNorm: expects 3 to 5 inputs, got %d", k->n_in);
    if (k->n_out < 1 || k->n_out > 6)
        return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "BatchNorm: expects 1 to 6 outputs, got %d", k->n_out);
    aclError rc = hrt_expect_counts(k, 3, 5, -1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    static const aclDataType ok[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    if ((rc = hrt_expect_dtype_in(k, x, "x", ok, 4))) return rc;
    if ((rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    if (x->ndim != 4 && x->ndim != 2)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "BatchNorm: x must be 4-D (NCHW/NHWC) or 2-D, got rank %d",
                         x->ndim);
    bn_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int nhwc = 1;
    if (x->ndim == 4) rc = k_layout(k, attrs, x, "NHWC", &nhwc);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "epsilon", false, 1e-4, &p->eps);
    if (!rc) rc = hrt_attr_get_bool(k, attrs, "is_training", true, &p->training);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "exponential_avg_factor", false, 1.0, &p->factor);
    if (rc) goto fail;
    p->nhwc = nhwc;
    p->N = x->dims[0];
    p->C = x->ndim == 2 ? x->dims[1] : nhwc ? x->dims[3] : x->dims[1];
    p->HW = x->ndim == 2 ? 1 : nhwc ? x->dims[1] * x->dims[2] : x->dims[2] * x->dims[3];
    p->has_mean = k->n_in > 3 && !k->in[3].absent;
    p->has_var = k->n_in > 4 && !k->in[4].absent;
    if (!p->training && (!p->has_mean || !p->has_var)) {
        rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "BatchNorm: inference (is_training=false) needs mean and variance");
        goto fail;
    }
    aclDataType pdt = k->in[1].dtype;
    if (pdt != ACL_FLOAT && pdt != x->dtype) {
        rc = k_unsupported(k, "scale", pdt);
        goto fail;
    }
    for (int i = 1; i < k->n_in; i++) {
        const hrt_tensor *t = &k->in[i];
        if (t->absent) continue;
        if (t->dtype != pdt) {
            rc = hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, K_API, "BatchNorm: input %d is %s, scale is %s", i,
                           hrt_dtype_name(t->dtype), hrt_dtype_name(pdt));
            goto fail;
        }
        if (t->ndim != 1 || t->dims[0] != p->C) {
            rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "BatchNorm: input %d must have shape [%lld]", i,
                           (long long)p->C);
            goto fail;
        }
    }
    if ((rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0))) goto fail;
    for (int j = 1; j < k->n_out && j < 5; j++) {
        int64_t d[1] = {p->C};
        if ((rc = hrt_expect_same_shape(k, &k->out[j], d, 1, j))) goto fail;
        if (k->out[j].dtype != pdt && k->out[j].dtype != x->dtype) {
            rc = k_unsupported(k, "statistics output", k->out[j].dtype);
            goto fail;
        }
    }
    p->n_out = k->n_out;
    p->dt = x->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = bn_run;
    return ACL_SUCCESS;
fail:
    free(p);
    return rc;
}

HRT_OP(batchnorm, "BatchNorm", bn_compile)

/* ------------------------------------------------------------------ LRN
 * Across channels (TF/CANN): y = x / (bias + alpha * sum_{|c'-c|<=r} x^2)^beta.
 * (ONNX LRN maps to alpha/size, depth_radius = (size-1)/2.) */
typedef struct {
    int64_t N, C, HW;
    bool nhwc;
    int64_t r;
    double bias, alpha, beta;
    aclDataType dt;
} lrn_plan;

typedef struct {
    const lrn_plan *p;
    const void *x;
    void *y;
} lrn_ctx;

static void lrn_chunk(void *vp, int64_t b, int64_t e) {
    lrn_ctx *c = vp;
    const lrn_plan *p = c->p;
    for (int64_t ns = b; ns < e; ns++) { /* one (n, spatial) column of C channels */
        int64_t n = ns / p->HW, s = ns % p->HW;
        for (int64_t ch = 0; ch < p->C; ch++) {
            double sum = 0;
            int64_t lo = ch - p->r < 0 ? 0 : ch - p->r, hi = ch + p->r >= p->C ? p->C - 1 : ch + p->r;
            for (int64_t q = lo; q <= hi; q++) {
                int64_t idx = p->nhwc ? (n * p->HW + s) * p->C + q : (n * p->C + q) * p->HW + s;
                double v = k_load_d(c->x, p->dt, idx);
                sum += v * v;
            }
            int64_t idx = p->nhwc ? (n * p->HW + s) * p->C + ch : (n * p->C + ch) * p->HW + s;
            double v = k_load_d(c->x, p->dt, idx);
            k_store_d(c->y, p->dt, idx, v / pow(p->bias + p->alpha * sum, p->beta));
        }
    }
}

static aclError lrn_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const lrn_plan *p = k->plan;
    lrn_ctx c = {p, in[0], out[0]};
    /* r <= C and C < 2^48 (compile), so the window product cannot wrap to 0 */
    int64_t window = (p->C ? p->C : 1) * (2 * p->r + 2);
    hrt_parallel_for(p->N * p->HW, K_GRAIN / window + 1, lrn_chunk, &c);
    return ACL_SUCCESS;
}

static aclError lrn_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    static const aclDataType ok[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    if ((rc = hrt_expect_dtype_in(k, x, "x", ok, 4)) || (rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    if (x->ndim != 4) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "LRN: x must be 4-D, got rank %d", x->ndim);
    if ((rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0))) return rc;
    lrn_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int nhwc = 0;
    const char *region;
    rc = k_layout(k, attrs, x, "NCHW", &nhwc);
    if (!rc) rc = hrt_attr_get_int(k, attrs, "depth_radius", false, 5, &p->r);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "bias", false, 1.0, &p->bias);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "alpha", false, 1.0, &p->alpha);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "beta", false, 0.5, &p->beta);
    if (!rc) rc = hrt_attr_get_string(k, attrs, "norm_region", false, "ACROSS_CHANNELS", &region);
    if (!rc && strcmp(region, "ACROSS_CHANNELS") != 0)
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "LRN: norm_region '%s' is not supported (ACROSS_CHANNELS)", region);
    if (!rc && p->r < 0) rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "LRN: depth_radius must be >= 0");
    if (rc) {
        free(p);
        return rc;
    }
    p->nhwc = nhwc;
    p->N = x->dims[0];
    p->C = nhwc ? x->dims[3] : x->dims[1];
    p->HW = nhwc ? x->dims[1] * x->dims[2] : x->dims[2] * x->dims[3];
    /* a radius past the channel count covers every channel: clamp it, so
     * depth_radius = 2^63-1 neither wraps the window size nor the bounds */
    if (p->r > p->C) p->r = p->C;
    p->dt = x->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = lrn_run;
    return ACL_SUCCESS;
}

HRT_OP(lrn, "LRN", lrn_compile)
