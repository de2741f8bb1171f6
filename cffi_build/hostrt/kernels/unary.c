/* Elementwise unary ops.
 *
 * One inner loop per (op, dtype) for float32, float64 and the integer
 * types; float16 and bfloat16 run the float32 loop on widened blocks and
 * round once.  float32 loops use the branch-free kmath.h functions so GCC
 * vectorises them (sin and cos call libm).  Ops with attrs read them at
 * compile time into k_unp.  Adding an op is a DEF line and a table row. */
#include "kcommon.h"

#if defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>
#endif

typedef struct {
    double a, b, c; /* op parameters (scale, shift, slope, ...) */
} k_unp;

typedef void (*k_un_fn)(const void *x, void *y, int64_t n, const k_unp *p);

#define DEF_UN(NAME, T, EXPR)                                                   \
    static void NAME(const void *px, void *py, int64_t n, const k_unp *p) {     \
        const T *xs = px;                                                       \
        T *ys = py;                                                             \
        const T pa = (T)p->a, pb = (T)p->b, pc = (T)p->c;                       \
        (void)pa, (void)pb, (void)pc;                                           \
        for (int64_t i = 0; i < n; i++) {                                       \
            T x = xs[i];                                                        \
            ys[i] = (T)(EXPR);                                                  \
        }                                                                       \
    }

/* float32 through kmath.h's vector forms: EXPR of the k_vf x */
#define DEF_UNV(NAME, EXPR)                                                     \
    static void NAME(const void *px, void *py, int64_t n, const k_unp *p) {     \
        const float pa = (float)p->a, pb = (float)p->b;                         \
        (void)pa, (void)pb;                                                     \
        K_VROW((const float *)px, (float *)py, n, x, (EXPR));                   \
    }

#define DEF_UN_SINTS(OP, EXPR)             \
    DEF_UN(OP##_i8, int8_t, EXPR)          \
    DEF_UN(OP##_i16, int16_t, EXPR)        \
    DEF_UN(OP##_i32, int32_t, EXPR)        \
    DEF_UN(OP##_i64, int64_t, EXPR)
#define SINT_FNS(OP) [K_I8] = OP##_i8, [K_I16] = OP##_i16, [K_I32] = OP##_i32, [K_I64] = OP##_i64

static inline double gelu_tanh_d(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static inline double sigmoid_d(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }
static inline float sign_f(float x) { return k_self(k_isnanf(x), x, (float)(x > 0.0f) - (float)(x < 0.0f)); }
static inline double sign_d(double x) { return x != x ? x : (double)(x > 0.0) - (double)(x < 0.0); }
static inline float round_dec_f(float x, float s, int neg) {
    return neg ? k_rintf(x / s) * s : k_rintf(x * s) / s;
}
static inline double round_dec_d(double x, double s, int neg) { return neg ? nearbyint(x / s) * s : nearbyint(x * s) / s; }

/* float32 */
DEF_UN(neg_f32, float, -x)
DEF_UN(abs_f32, float, k_fabsf(x))
DEF_UNV(exp_f32, k_vexpf(pa * x + pb))
DEF_UN(log_f32, float, k_logf(pb + pa * x) * pc)
DEF_UN(reciprocal_f32, float, 1.0f / x)
DEF_UN(square_f32, float, x * x)
DEF_UN(relu_f32, float, k_self(k_isnanf(x) | (x > 0.0f), x, 0.0f))
DEF_UN(leaky_f32, float, k_self(x > 0.0f, x, x * pa))
DEF_UNV(sigmoid_f32, k_vsigmoidf(x))
DEF_UNV(tanh_f32, k_vtanhf(x))
DEF_UNV(gelu_f32, x * k_vsigmoidf(1.5957691216057308f * (x + 0.044715f * x * x * x)))
DEF_UNV(gelu_erf_f32, 0.5f * x * (1.0f + k_verff(x * 0.70710678118654752f)))
DEF_UNV(fastgelu_f32, x * k_vsigmoidf(1.702f * x))
DEF_UNV(swish_f32, x * k_vsigmoidf(pa * x))
DEF_UNV(erf_f32, k_verff(x))
DEF_UN(sin_f32, float, sinf(x))
DEF_UN(cos_f32, float, cosf(x))
DEF_UN(floor_f32, float, k_floorf(x))
DEF_UN(ceil_f32, float, k_ceilf(x))
DEF_UN(round_f32, float, k_rintf(x))
DEF_UN(roundd_f32, float, round_dec_f(x, pa, pb != 0))
DEF_UN(sign_f32, float, sign_f(x))
DEF_UN(softplus_f32, float, k_maxf(x, 0.0f) + k_logf(1.0f + k_expf(-k_fabsf(x))))
DEF_UN(isnan_f32, float, (float)k_isnanf(x))

static void sqrt_f32(const void *px, void *py, int64_t n, const k_unp *p) {
    (void)p;
    const float *x = px;
    float *y = py;
    int64_t i = 0;
#if defined(__AVX__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
#elif defined(__SSE2__)
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
    for (; i < n; i++) y[i] = sqrtf(x[i]);
}

static void rsqrt_f32(const void *px, void *py, int64_t n, const k_unp *p) {
    (void)p;
    const float *x = px;
    float *y = py;
    int64_t i = 0;
#if defined(__AVX__)
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_div_ps(one, _mm256_sqrt_ps(_mm256_loadu_ps(x + i))));
#elif defined(__SSE2__)
    const __m128 one = _mm_set1_ps(1.0f);
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_div_ps(one, _mm_sqrt_ps(_mm_loadu_ps(x + i))));
#endif
    for (; i < n; i++) y[i] = 1.0f / sqrtf(x[i]);
}

/* float64 (libm) */
DEF_UN(neg_f64, double, -x)
DEF_UN(abs_f64, double, k_fabsd(x))
DEF_UN(exp_f64, double, exp(pa * x + pb))
DEF_UN(log_f64, double, log(pb + pa * x) * pc)
DEF_UN(sqrt_f64, double, sqrt(x))
DEF_UN(rsqrt_f64, double, 1.0 / sqrt(x))
DEF_UN(reciprocal_f64, double, 1.0 / x)
DEF_UN(square_f64, double, x * x)
DEF_UN(relu_f64, double, k_seld(k_isnand(x) | (x > 0.0), x, 0.0))
DEF_UN(leaky_f64, double, k_seld(x > 0.0, x, x * pa))
DEF_UN(sigmoid_f64, double, sigmoid_d(x))
DEF_UN(tanh_f64, double, tanh(x))
DEF_UN(gelu_f64, double, gelu_tanh_d(x))
DEF_UN(gelu_erf_f64, double, 0.5 * x * (1.0 + erf(x * 0.70710678118654752)))
DEF_UN(fastgelu_f64, double, x * sigmoid_d(1.702 * x))
DEF_UN(swish_f64, double, x * sigmoid_d(pa * x))
DEF_UN(erf_f64, double, erf(x))
DEF_UN(sin_f64, double, sin(x))
DEF_UN(cos_f64, double, cos(x))
DEF_UN(floor_f64, double, floor(x))
DEF_UN(ceil_f64, double, ceil(x))
DEF_UN(round_f64, double, k_rintd(x))
DEF_UN(roundd_f64, double, round_dec_d(x, pa, pb != 0))
DEF_UN(sign_f64, double, sign_d(x))
DEF_UN(softplus_f64, double, (x > 0 ? x : 0.0) + log1p(exp(-fabs(x))))

/* integers */
DEF_UN_SINTS(neg, -x)
DEF_UN_SINTS(abs, x < 0 ? -x : x)
DEF_UN_SINTS(square, x * x)
DEF_UN_SINTS(sign, (x > 0) - (x < 0))
DEF_UN_SINTS(relu, x > 0 ? x : 0)
DEF_UN(square_u8, uint8_t, x * x)
DEF_UN(ident_u8, uint8_t, x)
DEF_UN(sign_u8, uint8_t, x > 0)

typedef aclError (*k_un_params_fn)(const hrt_kernel *k, const aclopAttr *a, k_unp *p, k_un_fn *f32, k_un_fn *f64);

typedef struct {
    const char *name;
    k_un_fn fns[K_NTYPES];
    k_un_params_fn params;
} un_op;

static aclError base_scale_shift(const hrt_kernel *k, const aclopAttr *a, double *lnb, double *scale, double *shift) {
    double base;
    aclError rc = hrt_attr_get_float(k, a, "base", false, -1.0, &base);
    if (!rc) rc = hrt_attr_get_float(k, a, "scale", false, 1.0, scale);
    if (!rc) rc = hrt_attr_get_float(k, a, "shift", false, 0.0, shift);
    if (rc) return rc;
    if (base == -1.0) {
        *lnb = 1.0;
    } else if (base > 0.0 && base != 1.0) {
        *lnb = log(base);
    } else {
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: base must be -1 (e) or > 0 and != 1, got %g", k->op_name,
                         base);
    }
    return ACL_SUCCESS;
}

/* Exp: y = base ^ (shift + scale * x) = e ^ (ln(base) * (shift + scale * x)) */
static aclError exp_params(const hrt_kernel *k, const aclopAttr *a, k_unp *p, k_un_fn *f32, k_un_fn *f64) {
    (void)f32, (void)f64;
    double lnb = 1, scale = 1, shift = 0;
    aclError rc = base_scale_shift(k, a, &lnb, &scale, &shift);
    p->a = lnb * scale;
    p->b = lnb * shift;
    return rc;
}

/* Log: y = log_base(shift + scale * x) = ln(shift + scale * x) / ln(base) */
static aclError log_params(const hrt_kernel *k, const aclopAttr *a, k_unp *p, k_un_fn *f32, k_un_fn *f64) {
    (void)f32, (void)f64;
    double lnb = 1, scale = 1, shift = 0;
    aclError rc = base_scale_shift(k, a, &lnb, &scale, &shift);
    p->a = scale;
    p->b = shift;
    p->c = 1.0 / lnb;
    return rc;
}

static aclError leaky_params(const hrt_kernel *k, const aclopAttr *a, k_unp *p, k_un_fn *f32, k_un_fn *f64) {
    (void)f32, (void)f64;
    return hrt_attr_get_float(k, a, "negative_slope", false, 0.0, &p->a);
}

static aclError swish_params(const hrt_kernel *k, const aclopAttr *a, k_unp *p, k_un_fn *f32, k_un_fn *f64) {
    (void)f32, (void)f64;
    return hrt_attr_get_float(k, a, "scale", false, 1.0, &p->a);
}

static aclError round_params(const hrt_kernel *k, const aclopAttr *a, k_unp *p, k_un_fn *f32, k_un_fn *f64) {
    int64_t d;
    aclError rc = hrt_attr_get_int(k, a, "decimals", false, 0, &d);
    if (rc) return rc;
    if (d < -30 || d > 30)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: decimals %lld out of range [-30, 30]", k->op_name,
                         (long long)d);
    if (d != 0) {
        p->a = pow(10.0, (double)(d < 0 ? -d : d));
        p->b = d < 0;
        *f32 = roundd_f32;
        *f64 = roundd_f64;
    }
    return ACL_SUCCESS;
}

static aclError gelu_v2_params(const hrt_kernel *k, const aclopAttr *a, k_unp *p, k_un_fn *f32, k_un_fn *f64) {
    (void)p;
    const char *ap;
    aclError rc = hrt_attr_get_string(k, a, "approximate", false, "none", &ap);
    if (rc) return rc;
    if (strcmp(ap, "none") == 0) {
        *f32 = gelu_erf_f32;
        *f64 = gelu_erf_f64;
    } else if (strcmp(ap, "tanh") == 0) {
        *f32 = gelu_f32;
        *f64 = gelu_f64;
    } else {
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: approximate must be 'none' or 'tanh', got '%s'",
                         k->op_name, ap);
    }
    return ACL_SUCCESS;
}

#define FL(OP) [K_F32] = OP##_f32, [K_F16] = OP##_f32, [K_BF16] = OP##_f32, [K_F64] = OP##_f64

static const un_op UN_OPS[] = {
    {"Neg", {FL(neg), SINT_FNS(neg)}, NULL},
    {"Abs", {FL(abs), SINT_FNS(abs), [K_U8] = ident_u8}, NULL},
    {"Exp", {FL(exp)}, exp_params},
    {"Log", {FL(log)}, log_params},
    {"Sqrt", {FL(sqrt)}, NULL},
    {"Rsqrt", {FL(rsqrt)}, NULL},
    {"Reciprocal", {FL(reciprocal)}, NULL},
    {"Inv", {FL(reciprocal)}, NULL},
    {"Square", {FL(square), SINT_FNS(square), [K_U8] = square_u8}, NULL},
    {"Relu", {FL(relu), SINT_FNS(relu), [K_U8] = ident_u8}, NULL},
    {"LeakyRelu", {FL(leaky)}, leaky_params},
    {"Sigmoid", {FL(sigmoid)}, NULL},
    {"Tanh", {FL(tanh)}, NULL},
    {"Gelu", {FL(gelu)}, NULL},
    {"GeluV2", {FL(gelu_erf)}, gelu_v2_params},
    {"FastGelu", {FL(fastgelu)}, NULL},
    {"Swish", {FL(swish)}, swish_params},
    {"Erf", {FL(erf)}, NULL},
    {"Sin", {FL(sin)}, NULL},
    {"Cos", {FL(cos)}, NULL},
    {"Floor", {FL(floor)}, NULL},
    {"Ceil", {FL(ceil)}, NULL},
    {"Round", {FL(round)}, round_params},
    {"Sign", {FL(sign), SINT_FNS(sign), [K_U8] = sign_u8}, NULL},
    {"Softplus", {FL(softplus)}, NULL},
};

typedef struct {
    k_un_fn fn;
    k_unp p;
    size_t esz;
    aclDataType half; /* widen float16/bfloat16 blocks, else ACL_DT_UNDEFINED */
    bool stream;      /* big float32 output */
} un_plan;

typedef struct {
    const un_plan *p;
    const char *x;
    char *y;
} un_exec;

static void un_chunk(void *vp, int64_t b, int64_t e) {
    un_exec *u = vp;
    const un_plan *p = u->p;
    if (p->half == ACL_DT_UNDEFINED && !p->stream) {
        p->fn(u->x + (size_t)b * p->esz, u->y + (size_t)b * p->esz, e - b, &p->p);
        return;
    }
    if (p->stream) { /* big float32 output: compute in L1, stream out */
        float sb[2048];
        for (int64_t i = b; i < e; i += 2048) {
            int64_t m = e - i < 2048 ? e - i : 2048;
            p->fn(u->x + (size_t)i * 4, sb, m, &p->p);
            k_stream_store_f32((float *)u->y + i, sb, m);
        }
        return;
    }
    float buf[K_BLOCK];
    for (int64_t i = b; i < e; i += K_BLOCK) {
        int64_t m = e - i < K_BLOCK ? e - i : K_BLOCK;
        k_to_f32(u->x + 2 * i, p->half, buf, m);
        p->fn(buf, buf, m, &p->p);
        k_from_f32(buf, p->half, u->y + 2 * i, m);
    }
}

static aclError un_run(const hrt_kernel *k, void *const *in, void *const *out) {
    un_exec u = {k->plan, in[0], out[0]};
    hrt_parallel_for(k->in[0].numel, K_GRAIN, un_chunk, &u);
    return ACL_SUCCESS;
}

static aclError un_compile(hrt_kernel *k, const aclopAttr *attrs) {
    const un_op *op = NULL;
    for (size_t i = 0; i < sizeof UN_OPS / sizeof *UN_OPS; i++)
        if (strcmp(UN_OPS[i].name, k->op_name) == 0) op = &UN_OPS[i];
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *y = &k->out[0];
    int di = k_index(x->dtype);
    if (di < 0 || !op->fns[di]) return k_unsupported(k, "x", x->dtype);
    if ((rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    rc = hrt_expect_same_shape(k, y, x->dims, x->ndim, 0);
    if (rc) return rc;
    un_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    k_un_fn f32 = op->fns[K_F32], f64 = op->fns[K_F64];
    p->fn = op->fns[di];
    p->esz = hrt_dtype_size(x->dtype);
    p->half = k_is_half(x->dtype) ? x->dtype : ACL_DT_UNDEFINED;
    if (op->params && (rc = op->params(k, attrs, &p->p, &f32, &f64))) {
        free(p);
        return rc;
    }
    p->stream = x->dtype == ACL_FLOAT && y->nbytes >= K_STREAM_BYTES;
    if (k_is_half(x->dtype) || x->dtype == ACL_FLOAT) p->fn = f32;
    else if (x->dtype == ACL_DOUBLE) p->fn = f64;
    k->plan = p;
    k->plan_free = free;
    k->run = un_run;
    return ACL_SUCCESS;
}

HRT_OP(neg, "Neg", un_compile)
HRT_OP(abs, "Abs", un_compile)
HRT_OP(exp, "Exp", un_compile)
HRT_OP(log, "Log", un_compile)
HRT_OP(sqrt, "Sqrt", un_compile)
HRT_OP(rsqrt, "Rsqrt", un_compile)
HRT_OP(reciprocal, "Reciprocal", un_compile)
HRT_OP(inv, "Inv", un_compile)
HRT_OP(square, "Square", un_compile)
HRT_OP(relu, "Relu", un_compile)
HRT_OP(leakyrelu, "LeakyRelu", un_compile)
HRT_OP(sigmoid, "Sigmoid", un_compile)
HRT_OP(tanh, "Tanh", un_compile)
HRT_OP(gelu, "Gelu", un_compile)
HRT_OP(geluv2, "GeluV2", un_compile)
HRT_OP(fastgelu, "FastGelu", un_compile)
HRT_OP(swish, "Swish", un_compile)
HRT_OP(erf, "Erf", un_compile)
HRT_OP(sin, "Sin", un_compile)
HRT_OP(cos, "Cos", un_compile)
HRT_OP(floor, "Floor", un_compile)
HRT_OP(ceil, "Ceil", un_compile)
HRT_OP(round, "Round", un_compile)
HRT_OP(sign, "Sign", un_compile)
HRT_OP(softplus, "Softplus", un_compile)
