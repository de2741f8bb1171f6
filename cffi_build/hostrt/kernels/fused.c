/* aioge's fused host ops (produced by the graph engine's fusion pass; they
 * have no CANN equivalent and exist only in the host runtime):
 *
 *   _FusedElementwise(x0..xk-1) -> y : a register program over broadcast
 *       inputs.  attrs: ops (ListString, one opcode per step), srcs (ListInt,
 *       2 per step: source registers, -1 for a unary's second), params
 *       (ListFloat, 2 per step).  Registers 0..k-1 are the inputs; step i
 *       writes register k+i; y is the last register.
 *   _FusedMatMul(a, b, bias?) -> y : y = act(scale * op(a) @ op(b) + bias),
 *       numpy broadcasting over batch dims.  attrs: trans_a, trans_b (Int
 *       0/1), scale (Float), activation (String) + alpha / min / max.
 *
 * Activations: none Relu LeakyRelu(alpha) Sigmoid Tanh Gelu (erf) GeluTanh
 * Clip(min, max) Swish (x * sigmoid(x)) HardSwish (x * clip(x / 6 + 1/2, 0, 1)).  Everything computes in float32 (float64 for float64). */
#include "kcommon.h"
#include "kmath.h"

static const char *API = "aclopCompileAndExecute";

enum {
    E_RELU, E_LEAKY, E_SIGMOID, E_TANH, E_EXP, E_LOG, E_SQRT, E_ABS, E_NEG, E_RECIP, E_ERF, E_GELU, E_GELU_TANH,
    E_SOFTPLUS, E_ELU, E_SELU, E_SIGN, E_CLIP, E_SHRINK, E_SWISH, E_HARD_SWISH, E_NUNARY,
    E_ADD = 32, E_SUB, E_MUL, E_DIV, E_POW, E_MAX, E_MIN, E_PRELU, E_NONE = 64
};

static const struct {
    const char *name;
    int code;
} OPNAMES[] = {
    {"Relu", E_RELU}, {"LeakyRelu", E_LEAKY}, {"Sigmoid", E_SIGMOID}, {"Tanh", E_TANH}, {"Exp", E_EXP},
    {"Log", E_LOG}, {"Sqrt", E_SQRT}, {"Abs", E_ABS}, {"Neg", E_NEG}, {"Reciprocal", E_RECIP}, {"Erf", E_ERF},
    {"Gelu", E_GELU}, {"GeluTanh", E_GELU_TANH}, {"Softplus", E_SOFTPLUS}, {"Elu", E_ELU}, {"Selu", E_SELU},
    {"Sign", E_SIGN}, {"Clip", E_CLIP}, {"Shrink", E_SHRINK}, {"Swish", E_SWISH}, {"HardSwish", E_HARD_SWISH}, {"Add", E_ADD}, {"Sub", E_SUB}, {"Mul", E_MUL},
    {"Div", E_DIV}, {"Pow", E_POW}, {"Max", E_MAX}, {"Min", E_MIN}, {"PRelu", E_PRELU}, {"none", E_NONE},
};

static int opcode_of(const char *name) {
    for (size_t i = 0; i < sizeof OPNAMES / sizeof *OPNAMES; i++)
        if (strcmp(OPNAMES[i].name, name) == 0) return OPNAMES[i].code;
    return -1;
}

/* ---------------------------------------------------------- math, 2 types */
static inline float k_log1pf(float x) { return k_logf(1.0f + x); }
static inline float k_powf(float x, float y) { return powf(x, y); }
/* x ** y over a block where every y is y[0] (a broadcast exponent), if kmath.h has its short form */
#define DEF_POW_BLOCK(T, SUF, KSUF)                                                                           \
    static inline int pow_block_##SUF(const T *x, const T *y, T *o, int64_t n) {                        \
        int same = 1;                                                                                   \
        for (int64_t i = 1; i < n; i++) same &= y[i] == y[0];                                           \
        return n > 0 && same && k_pow_const_##KSUF(x, y[0], o, n);                                       \
    }
DEF_POW_BLOCK(float, f, f32)
DEF_POW_BLOCK(double, d, f64)
static inline double swish_d(double x) { return x * (1 / (1 + exp(-x))); }
static inline double hard_swish_d(double x) {
    double g = x * (1.0 / 6) + 0.5;
    g = g < 0 ? 0 : g;
    return x * (g > 1 ? 1 : g);
}
#define DEF_MATH(T, SUF, EXP, LOG, SQRT, TANH, ERF, POW, LOG1P, SWISH, HARD_SWISH)                                      \
    static void unary_##SUF(int op, T *x, int64_t n, double p0, double p1) {                             \
        const T a = (T)p0, b = (T)p1;                                                                   \
        switch (op) {                                                                                   \
        case E_RELU: for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : (x[i] != x[i] ? x[i] : 0); break; \
        case E_LEAKY: for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0 ? a * x[i] : x[i]; break;         \
        case E_SIGMOID: for (int64_t i = 0; i < n; i++) x[i] = 1 / (1 + EXP(-x[i])); break;            \
        case E_TANH: for (int64_t i = 0; i < n; i++) x[i] = TANH(x[i]); break;                          \
        case E_EXP: for (int64_t i = 0; i < n; i++) x[i] = EXP(x[i]); break;                            \
        case E_LOG: for (int64_t i = 0; i < n; i++) x[i] = LOG(x[i]); break;                            \
        case E_SQRT: for (int64_t i = 0; i < n; i++) x[i] = SQRT(x[i]); break;                          \
        case E_ABS: for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0 ? -x[i] : x[i]; break;              \
        case E_NEG: for (int64_t i = 0; i < n; i++) x[i] = -x[i]; break;                                \
        case E_RECIP: for (int64_t i = 0; i < n; i++) x[i] = 1 / x[i]; break;                           \
        case E_ERF: for (int64_t i = 0; i < n; i++) x[i] = ERF(x[i]); break;                            \
        case E_GELU:                                                                                    \
            for (int64_t i = 0; i < n; i++) x[i] = (T)0.5 * x[i] * (1 + ERF(x[i] * (T)0.70710678118654752440)); \
            break;                                                                                      \
        case E_GELU_TANH:                                                                               \
            for (int64_t i = 0; i < n; i++) {                                                           \
                T v = x[i];                                                                             \
                x[i] = (T)0.5 * v * (1 + TANH((T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v))); \
            }                                                                                           \
            break;                                                                                      \
        case E_SOFTPLUS:                                                                                \
            for (int64_t i = 0; i < n; i++) {                                                           \
                T v = x[i];                                                                             \
                x[i] = (v > 0 ? v : 0) + LOG1P(EXP(-(v < 0 ? -v : v)));                                 \
            }                                                                                           \
            break;                                                                                      \
        case E_ELU: for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : a * (EXP(x[i]) - 1); break; \
        case E_SELU:                                                                                    \
            for (int64_t i = 0; i < n; i++) x[i] = b * (x[i] > 0 ? x[i] : a * (EXP(x[i]) - 1));         \
            break;                                                                                      \
        case E_SIGN:                                                                                    \
            for (int64_t i = 0; i < n; i++) x[i] = x[i] != x[i] ? x[i] : (T)((x[i] > 0) - (x[i] < 0));  \
            break;                                                                                      \
        case E_CLIP: for (int64_t i = 0; i < n; i++) x[i] = x[i] < a ? a : (x[i] > b ? b : x[i]); break; \
        case E_SHRINK: /* params: (bias, lambd) */                                                      \
            for (int64_t i = 0; i < n; i++) x[i] = x[i] < -b ? x[i] + a : (x[i] > b ? x[i] - a : 0);    \
            break;                                                                                      \
        case E_SWISH: for (int64_t i = 0; i < n; i++) x[i] = SWISH(x[i]); break;                        \
        case E_HARD_SWISH: for (int64_t i = 0; i < n; i++) x[i] = HARD_SWISH(x[i]); break;              \
        default: break;                                                                                 \
        }                                                                                               \
    }                                                                                                   \
    static void binary_##SUF(int op, const T *x, const T *y, T *o, int64_t n) {                          \
        switch (op) {                                                                                   \
        case E_ADD: for (int64_t i = 0; i < n; i++) o[i] = x[i] + y[i]; break;                          \
        case E_SUB: for (int64_t i = 0; i < n; i++) o[i] = x[i] - y[i]; break;                          \
        case E_MUL: for (int64_t i = 0; i < n; i++) o[i] = x[i] * y[i]; break;                          \
        case E_DIV: for (int64_t i = 0; i < n; i++) o[i] = x[i] / y[i]; break;                          \
        case E_POW: /* an exponent equal over the block: kmath.h's short forms */                       \
            if (!pow_block_##SUF(x, y, o, n))                                                           \
                for (int64_t i = 0; i < n; i++) o[i] = POW(x[i], y[i]);                                 \
            break;                                                                                      \
        case E_MAX:                                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = (x[i] != x[i] || y[i] != y[i]) ? x[i] + y[i] : (x[i] > y[i] ? x[i] : y[i]); \
            break;                                                                                      \
        case E_MIN:                                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = (x[i] != x[i] || y[i] != y[i]) ? x[i] + y[i] : (x[i] < y[i] ? x[i] : y[i]); \
            break;                                                                                      \
        case E_PRELU: for (int64_t i = 0; i < n; i++) o[i] = x[i] < 0 ? x[i] * y[i] : x[i]; break;      \
        default: break;                                                                                 \
        }                                                                                               \
    }

DEF_MATH(float, f, k_expf, k_logf, sqrtf, k_tanhf, k_erff, k_powf, k_log1pf, k_swishf, k_hard_swishf)
DEF_MATH(double, d, exp, log, sqrt, tanh, erf, pow, log1p, swish_d, hard_swish_d)

/* float32 y = op(x) (y may be x): the exp-based opcodes through kmath.h's vector forms (the same
 * formulas as unary_f's, bit-identical to them), the rest through unary_f on y */
static void unary_fv(int op, const float *x, float *y, int64_t n, double p0, double p1) {
    switch (op) {
    case E_SIGMOID: K_VROW(x, y, n, v, 1.0f / (1.0f + k_vexpf(-v))); break;
    case E_TANH: K_VROW(x, y, n, v, k_vtanhf(v)); break;
    case E_EXP: K_VROW(x, y, n, v, k_vexpf(v)); break;
    case E_ERF: K_VROW(x, y, n, v, k_verff(v)); break;
    case E_GELU: K_VROW(x, y, n, v, 0.5f * v * (1.0f + k_verff(v * (float)0.70710678118654752440))); break;
    case E_GELU_TANH:
        K_VROW(x, y, n, v, 0.5f * v * (1.0f + k_vtanhf((float)0.79788456080286535588 * (v + (float)0.044715 * v * v * v))));
        break;
    case E_SWISH: K_VROW(x, y, n, v, k_vswishf(v)); break;
    default:
        if (y != x) memcpy(y, x, sizeof(float) * (size_t)n);
        unary_f(op, y, n, p0, p1);
        break;
    }
}

/* Activation codes map onto the unary opcodes (E_NONE: nothing). */
static int activation_code(const char *name) {
    if (strcmp(name, "none") == 0) return E_NONE;
    int c = opcode_of(name);
    switch (c) {
    case E_RELU: case E_LEAKY: case E_SIGMOID: case E_TANH: case E_GELU: case E_GELU_TANH: case E_CLIP: case E_SWISH:
    case E_HARD_SWISH: return c;
    default: return -1;
    }
}

_Static_assert(E_NONE == K_ACT_NONE, "kcommon.h's K_ACT_NONE is fused.c's E_NONE");

aclError k_act_from_attrs(const hrt_kernel *k, const aclopAttr *attrs, k_act *act) {
    const char *name;
    double alpha, lo, hi;
    aclError rc = hrt_attr_get_string(k, attrs, "activation", false, "none", &name);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "alpha", false, 0.01, &alpha);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "min", false, -INFINITY, &lo);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "max", false, INFINITY, &hi);
    if (rc) return rc;
    if ((act->code = activation_code(name)) < 0)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, API, "%s: unknown activation '%s'", k->op_name, name);
    act->a = act->code == E_CLIP ? lo : alpha;
    act->b = hi;
    switch (act->code) {
    case E_RELU: act->inl = K_ACT_INL_RELU; break;
    case E_CLIP: act->inl = K_ACT_INL_CLIP; break;
    case E_SIGMOID: act->inl = K_ACT_INL_SIGMOID; break;
    case E_TANH: act->inl = K_ACT_INL_TANH; break;
    case E_GELU: act->inl = K_ACT_INL_GELU; break;
    case E_GELU_TANH: act->inl = K_ACT_INL_GELU_TANH; break;
    case E_SWISH: act->inl = K_ACT_INL_SWISH; break;
    case E_HARD_SWISH: act->inl = K_ACT_INL_HARD_SWISH; break;
    default: act->inl = 0; break;
    }
    act->lo = (float)lo;
    act->hi = (float)hi;
    act->apply_f32 = k_act_apply_f32;
    return ACL_SUCCESS;
}

void k_act_apply_f32(const k_act *act, float *x, int64_t n) {
    if (act->code != E_NONE) unary_fv(act->code, x, x, n, act->a, act->b);
}
void k_act_apply_f64(const k_act *act, double *x, int64_t n) {
    if (act->code != E_NONE) unary_d(act->code, x, n, act->a, act->b);
}

typedef struct {
    const k_act *act;
    void *x;
    bool dbl;
} act_par;

static void act_par_chunk(void *vp, int64_t b, int64_t e) {
    const act_par *c = vp;
    if (c->dbl) k_act_apply_f64(c->act, (double *)c->x + b, e - b);
    else k_act_apply_f32(c->act, (float *)c->x + b, e - b);
}

void k_act_apply_parallel(const k_act *act, void *x, int64_t n, bool dbl) {
    if (act->code == E_NONE || n <= 0) return;
    act_par c = {act, x, dbl};
    hrt_parallel_for(n, K_GRAIN, act_par_chunk, &c);
}

/* ======================================================= _FusedElementwise */
#define EW_BLOCK 512
#define EW_MAX_REGS 64

typedef struct {
    int k, n;                       /* inputs, steps */
    int op[EW_MAX_REGS];
    int src[EW_MAX_REGS][2];
    double par[EW_MAX_REGS][2];
    int ndim;                       /* output rank (>= 1 after padding) */
    int64_t dims[HRT_MAXDIM];
    int64_t stride[EW_MAX_REGS][HRT_MAXDIM]; /* per input, 0 where broadcast */
    int64_t rows, inner;
    aclDataType dt;
} ew_plan;

typedef struct {
    const ew_plan *p;
    void *const *in;
    void *out;
} ew_exec;

static void ew_load_f(const void *src, int64_t off, int64_t s, float *dst, int64_t n, aclDataType dt) {
    if (dt == ACL_FLOAT) {
        const float *x = (const float *)src + off;
        if (s) memcpy(dst, x, sizeof(float) * (size_t)n);
        else for (int64_t i = 0; i < n; i++) dst[i] = x[0];
    } else {
        const uint16_t *x = (const uint16_t *)src + off;
        bool bf = dt == ACL_BF16;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = x[s ? i : 0];
            dst[i] = bf ? hrt_bf16_to_f32(h) : hrt_f16_to_f32(h);
        }
    }
}

static void ew_load_d(const void *src, int64_t off, int64_t s, double *dst, int64_t n) {
    const double *x = (const double *)src + off;
    if (s) memcpy(dst, x, sizeof(double) * (size_t)n);
    else for (int64_t i = 0; i < n; i++) dst[i] = x[0];
}

/* work units are (row, block of EW_BLOCK inner elements) pairs.  A register is a pointer: a
 * contiguous input of the unit's type is read where it is (other inputs are widened or broadcast
 * into a block of regs), a unary step reads its source register and writes its own, and a float32 /
 * float64 program's last step writes the output directly (an output that is also a same-shape input
 * is safe: every step reads element i before the last writes it). */
static void ew_units(void *vp, int64_t u0, int64_t u1) {
    ew_exec *x = vp;
    const ew_plan *p = x->p;
    int64_t nb = (p->inner + EW_BLOCK - 1) / EW_BLOCK;
    int nreg = p->k + p->n;
    bool dbl = p->dt == ACL_DOUBLE, direct_out = dbl || p->dt == ACL_FLOAT;
    size_t esz = dbl ? sizeof(double) : sizeof(float);
    char *regs = malloc(esz * EW_BLOCK * (size_t)nreg);
    if (!regs) return; /* cannot happen in practice; output left unwritten */
    const char *rp[EW_MAX_REGS];
    for (int64_t u = u0; u < u1; u++) {
        int64_t r = u / nb, c0 = (u % nb) * EW_BLOCK;
        /* input offsets of row r (outer dims = all but the last) */
        int64_t base[EW_MAX_REGS];
        for (int j = 0; j < p->k; j++) base[j] = 0;
        int64_t q = r;
        for (int d = p->ndim - 2; d >= 0; d--) {
            int64_t idx = q % p->dims[d];
            q /= p->dims[d];
            for (int j = 0; j < p->k; j++) base[j] += idx * p->stride[j][d];
        }
        {
            int64_t m = p->inner - c0 < EW_BLOCK ? p->inner - c0 : EW_BLOCK;
            int64_t o = r * p->inner + c0;
            for (int j = 0; j < p->k; j++) {
                int64_t s = p->stride[j][p->ndim - 1];
                char *dst = regs + esz * EW_BLOCK * (size_t)j;
                if (s && direct_out) {
                    rp[j] = (const char *)x->in[j] + esz * (size_t)(base[j] + c0 * s);
                    continue;
                }
                if (dbl) ew_load_d(x->in[j], base[j] + c0 * s, s ? 1 : 0, (double *)dst, m);
                else ew_load_f(x->in[j], base[j] + c0 * s, s ? 1 : 0, (float *)dst, m, p->dt);
                rp[j] = dst;
            }
            for (int i = 0; i < p->n; i++) {
                char *dst = direct_out && i == p->n - 1 ? (char *)x->out + esz * (size_t)o
                                                         : regs + esz * EW_BLOCK * (size_t)(p->k + i);
                const char *a = rp[p->src[i][0]];
                if (p->op[i] >= E_ADD) {
                    const char *b = rp[p->src[i][1]];
                    if (dbl) binary_d(p->op[i], (const double *)a, (const double *)b, (double *)dst, m);
                    else binary_f(p->op[i], (const float *)a, (const float *)b, (float *)dst, m);
                } else if (dbl) {
                    if (dst != a) memcpy(dst, a, esz * (size_t)m);
                    unary_d(p->op[i], (double *)dst, m, p->par[i][0], p->par[i][1]);
                } else {
                    unary_fv(p->op[i], (const float *)a, (float *)dst, m, p->par[i][0], p->par[i][1]);
                }
                rp[p->k + i] = dst;
            }
            if (!direct_out) {
                uint16_t *y = (uint16_t *)x->out + o;
                const float *f = (const float *)rp[nreg - 1];
                bool bf = p->dt == ACL_BF16;
                for (int64_t i = 0; i < m; i++) y[i] = bf ? hrt_f32_to_bf16(f[i]) : hrt_f32_to_f16(f[i]);
            }
        }
    }
    free(regs);
}

static aclError ew_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const ew_plan *p = k->plan;
    if (p->rows * p->inner == 0) return ACL_SUCCESS;
    ew_exec x = {p, in, out[0]};
    int64_t nb = (p->inner + EW_BLOCK - 1) / EW_BLOCK;
    int64_t per_unit = (p->inner < EW_BLOCK ? p->inner : EW_BLOCK) * (p->n + 1);
    hrt_parallel_for(p->rows * nb, K_GRAIN / (per_unit ? per_unit : 1) + 1, ew_units, &x);
    return ACL_SUCCESS;
}

static aclError ew_compile(hrt_kernel *k, const aclopAttr *attrs) {
    if (k->n_out != 1) return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, API, "%s: expects 1 output", k->op_name);
    if (k->n_in < 1 || k->n_in >= EW_MAX_REGS)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: expects 1 to %d inputs", k->op_name, EW_MAX_REGS - 1);
    const hrt_tensor *y = &k->out[0];
    static const aclDataType floats[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    aclError rc = hrt_expect_dtype_in(k, y, "output", floats, 4);
    if (rc) return rc;
    for (int j = 0; j < k->n_in; j++) {
        if (k->in[j].absent || k->in[j].dtype != y->dtype)
            return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, API, "%s: input %d must be %s", k->op_name, j,
                             hrt_dtype_name(y->dtype));
    }
    const hrt_attr_value *ops = hrt_attr_find(attrs, "ops");
    const int64_t *srcs;
    const float *pars;
    int nsrc = 0, npar = 0;
    if (!ops || ops->type != HRT_ATTR_LIST_STRING)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, API, "%s: attr 'ops' (ListString) is required", k->op_name);
    rc = hrt_attr_get_list_int(k, attrs, "srcs", true, &srcs, &nsrc);
    if (!rc) rc = hrt_attr_get_list_float(k, attrs, "params", true, &pars, &npar);
    if (rc) return rc;
    int n = ops->n;
    if (n < 1 || k->n_in + n > EW_MAX_REGS || nsrc != 2 * n || npar != 2 * n)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, API, "%s: %d steps need 2 srcs and 2 params each (got %d, %d)",
                         k->op_name, n, nsrc, npar);
    ew_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
    p->k = k->n_in;
    p->n = n;
    p->dt = y->dtype;
    for (int i = 0; i < n; i++) {
        int op = opcode_of(ops->v.ls[i]);
        int reg = p->k + i;
        bool binary = op >= E_ADD && op < E_NONE;
        if (op < 0 || op == E_NONE || srcs[2 * i] < 0 || srcs[2 * i] >= reg || (binary && (srcs[2 * i + 1] < 0 || srcs[2 * i + 1] >= reg))) {
            free(p);
            return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, API, "%s: step %d ('%s') has a bad opcode or source register",
                             k->op_name, i, ops->v.ls[i]);
        }
        p->op[i] = op;
        p->src[i][0] = (int)srcs[2 * i];
        p->src[i][1] = binary ? (int)srcs[2 * i + 1] : -1;
        p->par[i][0] = pars[2 * i];
        p->par[i][1] = pars[2 * i + 1];
    }
    /* every input broadcasts to the output */
    p->ndim = y->ndim ? y->ndim : 1;
    for (int d = 0; d < p->ndim; d++) p->dims[d] = y->ndim ? y->dims[d] : 1;
    for (int j = 0; j < p->k; j++) {
        const hrt_tensor *t = &k->in[j];
        int off = p->ndim - t->ndim;
        if (off < 0) {
            free(p);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: input %d has a higher rank than the output", k->op_name, j);
        }
        int64_t s = 1;
        for (int d = p->ndim - 1; d >= 0; d--) {
            int64_t x = d >= off ? t->dims[d - off] : 1;
            if (x != 1 && x != p->dims[d]) {
                free(p);
                return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: input %d does not broadcast to the output", k->op_name, j);
            }
            p->stride[j][d] = x == 1 ? 0 : s;
            s *= x;
        }
    }
    /* merge neighbouring dims where every input is contiguous (or broadcast)
     * across both, so the inner loop runs long: [N,C,H,W] + [C,1,1] -> [N,C,HW] */
    int nd = 0;
    for (int d = 0; d < p->ndim; d++) {
        if (p->dims[d] == 1 && p->ndim > 1) continue;
        if (nd > 0) {
            bool merge = true;
            for (int j = 0; j < p->k && merge; j++) {
                int64_t prev = p->stride[j][nd - 1], cur = p->stride[j][d];
                merge = (prev == 0 && cur == 0) || (cur != 0 && prev == cur * p->dims[d]);
            }
            if (merge) {
                p->dims[nd - 1] *= p->dims[d];
                for (int j = 0; j < p->k; j++) p->stride[j][nd - 1] = p->stride[j][d];
                continue;
            }
        }
        p->dims[nd] = p->dims[d];
        for (int j = 0; j < p->k; j++) p->stride[j][nd] = p->stride[j][d];
        nd++;
    }
    if (nd == 0) { /* every dim is 1 */
        p->dims[0] = 1;
        for (int j = 0; j < p->k; j++) p->stride[j][0] = 0;
        nd = 1;
    }
    p->ndim = nd;
    p->inner = p->dims[nd - 1];
    p->rows = 1;
    for (int d = 0; d < nd - 1; d++) p->rows *= p->dims[d];
    k->plan = p;
    k->plan_free = free;
    k->run = ew_run;
    return ACL_SUCCESS;
}

HRT_OP(fused_elementwise, "_FusedElementwise", ew_compile)

/* ============================================================ _FusedMatMul */
typedef struct {
    bool ta, tb, has_bias;
    int64_t m, n, kk, nbatch;
    int bnd;
    int64_t bdims[HRT_MAXDIM], astride[HRT_MAXDIM], bstride[HRT_MAXDIM];
    double scale, alpha, lo, hi;
    int act;
    k_act kact; /* the same activation for the packed product's epilogue */
    aclDataType dt;
} fmm_plan;

typedef struct {
    const fmm_plan *p;
    void *y;
} act_exec;

static void act_rows(void *vp, int64_t r0, int64_t r1) {
    act_exec *x = vp;
    const fmm_plan *p = x->p;
    double a = p->act == E_CLIP ? p->lo : p->alpha, b = p->hi;
    if (p->dt == ACL_DOUBLE) unary_d(p->act, (double *)x->y + r0 * p->n, (r1 - r0) * p->n, a, b);
    else {
        float *y = (float *)x->y + r0 * p->n;
        unary_fv(p->act, y, y, (r1 - r0) * p->n, a, b);
    }
}

typedef struct {
    const fmm_plan *p;
    const void *a, *b;
    void *c;
    double beta;
    aclError rc;
} fmm_batch_ctx;

static void fmm_batches(void *vp, int64_t b0, int64_t b1) {
    fmm_batch_ctx *x = vp;
    const fmm_plan *p = x->p;
    int64_t lda = p->ta ? p->m : p->kk, ldb = p->tb ? p->kk : p->n;
    int64_t asz = p->m * p->kk, bsz = p->kk * p->n, csz = p->m * p->n;
    for (int64_t bi = b0; bi < b1; bi++) {
        int64_t oa = 0, ob = 0, q = bi;
        for (int d = p->bnd - 1; d >= 0; d--) {
            int64_t idx = q % p->bdims[d];
            q /= p->bdims[d];
            oa += idx * p->astride[d];
            ob += idx * p->bstride[d];
        }
        aclError rc;
        if (p->dt == ACL_DOUBLE)
            rc = hrt_dgemm(p->ta, p->tb, p->m, p->n, p->kk, p->scale, (const double *)x->a + oa * asz, lda,
                           (const double *)x->b + ob * bsz, ldb, x->beta, (double *)x->c + bi * csz, p->n);
        else
            rc = hrt_sgemm(p->ta, p->tb, p->m, p->n, p->kk, (float)p->scale, (const float *)x->a + oa * asz, lda,
                           (const float *)x->b + ob * bsz, ldb, (float)x->beta, (float *)x->c + bi * csz, p->n);
        if (rc) x->rc = rc;
    }
}

static aclError fmm_gemm(const fmm_plan *p, const void *a, const void *b, const void *bias, void *c) {
    bool dbl = p->dt == ACL_DOUBLE;
    size_t es = dbl ? 8 : 4;
    double beta = 0;
    if (bias) {
        for (int64_t r = 0; r < p->m * p->nbatch; r++) memcpy((char *)c + (size_t)(r * p->n) * es, bias, es * (size_t)p->n);
        beta = 1;
    }
    fmm_batch_ctx x = {p, a, b, c, beta, ACL_SUCCESS};
    /* x2 shared by every batch and x1 stacked contiguously: one tall GEMM */
    bool b_shared = true, a_full = true;
    for (int d = 0; d < p->bnd; d++) {
        b_shared &= p->bstride[d] == 0 || p->bdims[d] == 1;
        a_full &= p->astride[d] != 0 || p->bdims[d] == 1;
    }
    double mnk = (double)p->m * (double)p->n * (double)p->kk;
    if (p->nbatch > 1 && b_shared && a_full && !p->ta) {
        fmm_plan tall = *p;
        tall.m = p->m * p->nbatch;
        tall.nbatch = 1;
        tall.bnd = 0;
        x.p = &tall;
        fmm_batches(&x, 0, 1);
        x.p = p;
    } else if (p->nbatch > 1 && hrt_blas_loaded() && mnk < K_GEMM_SMALL) {
        /* small GEMMs run single-threaded in OpenBLAS: spread the batch over the pool */
        hrt_parallel_for(p->nbatch, (int64_t)(2e6 / (mnk + 1)) + 1, fmm_batches, &x);
    } else {
        fmm_batches(&x, 0, p->nbatch);
    }
    if (x.rc) return x.rc;
    if (p->act != E_NONE) {
        act_exec ax = {p, c};
        hrt_parallel_for(p->m * p->nbatch, K_GRAIN / (p->n ? p->n : 1) + 1, act_rows, &ax);
    }
    return ACL_SUCCESS;
}

static void widen16(const uint16_t *s, float *d, int64_t n, bool bf) {
    for (int64_t i = 0; i < n; i++) d[i] = bf ? hrt_bf16_to_f32(s[i]) : hrt_f16_to_f32(s[i]);
}

static aclError fmm_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const fmm_plan *p = k->plan;
    const void *bias = p->has_bias ? in[2] : NULL;
    if (p->dt == ACL_FLOAT || p->dt == ACL_DOUBLE) return fmm_gemm(p, in[0], in[1], bias, out[0]);
    bool bf = p->dt == ACL_BF16;
    int64_t na = k->in[0].numel, nb = k->in[1].numel, nc = k->out[0].numel, nbias = p->has_bias ? p->n : 0;
    float *s = malloc(sizeof(float) * (size_t)(na + nb + nc + nbias + 1));
    if (!s) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    widen16(in[0], s, na, bf);
    widen16(in[1], s + na, nb, bf);
    if (nbias) widen16(bias, s + na + nb + nc, nbias, bf);
    fmm_plan q = *p;
    q.dt = ACL_FLOAT;
    aclError rc = fmm_gemm(&q, s, s + na, nbias ? s + na + nb + nc : NULL, s + na + nb);
    uint16_t *y = out[0];
    for (int64_t i = 0; !rc && i < nc; i++) y[i] = bf ? hrt_f32_to_bf16(s[na + nb + i]) : hrt_f32_to_f16(s[na + nb + i]);
    free(s);
    return rc;
}

/* constant b packed once (graph.c): float32, b shared by every batch and one GEMM over them (a
 * stacked untransposed, or one matrix, transposed or not) */
static bool fmm_tall(const fmm_plan *p) {
    bool b_shared = true, a_full = true;
    for (int d = 0; d < p->bnd; d++) {
        b_shared &= p->bstride[d] == 0 || p->bdims[d] == 1;
        a_full &= p->astride[d] != 0 || p->bdims[d] == 1;
    }
    return b_shared && ((a_full && !p->ta) || p->nbatch == 1);
}

static void *fmm_pack(const hrt_kernel *k, int input, const void *data, size_t *bytes) {
    const fmm_plan *p = k->plan;
    if (input != 1 || p->dt != ACL_FLOAT || !fmm_tall(p) || k->in[1].numel != p->kk * p->n) return NULL;
    hrt_sgemm_pb *pb = hrt_sgemm_pack_b_shared(p->tb, p->n, p->kk, data, p->tb ? p->kk : p->n);
    *bytes = hrt_sgemm_pb_bytes(pb);
    return pb;
}

/* fmm_pack of a constant b that is one value repeated: op(B) read from one row of that value with
 * ldb 0 (hrt_sgemm_pack_b_fill_shared): fmm_pack's panels without materialising b */
static void *fmm_pack_fill(const hrt_kernel *k, int input, const void *value, size_t *bytes) {
    const fmm_plan *p = k->plan;
    if (input != 1 || p->dt != ACL_FLOAT || !fmm_tall(p) || k->in[1].numel != p->kk * p->n) return NULL;
    hrt_sgemm_pb *pb = hrt_sgemm_pack_b_fill_shared(p->tb, p->n, p->kk, value);
    *bytes = hrt_sgemm_pb_bytes(pb);
    return pb;
}

static void fmm_pack_free(void *pb) { hrt_sgemm_pb_release(pb); }

static aclError fmm_run_packed(const hrt_kernel *k, void *const *in, void *const *out, const void *packed) {
    const fmm_plan *p = k->plan;
    /* scale, bias and the activation in the product's store: y written once */
    hrt_sgemm_ep ep = {(float)p->scale, p->has_bias ? in[2] : NULL, &p->kact};
    return hrt_sgemm_packed(p->m * p->nbatch, p->ta, in[0], p->ta ? p->m : p->kk, packed, p->tb, in[1],
                            p->tb ? p->kk : p->n, &ep, out[0], p->n);
}

static aclError fmm_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 3, 1);
    if (rc) return rc;
    const hrt_tensor *a = &k->in[0], *b = &k->in[1], *y = &k->out[0];
    static const aclDataType floats[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    if ((rc = hrt_expect_dtype_in(k, a, "a", floats, 4))) return rc;
    if (b->dtype != a->dtype || y->dtype != a->dtype || (k->n_in > 2 && !k->in[2].absent && k->in[2].dtype != a->dtype))
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, API, "%s: every operand must be %s", k->op_name,
                         hrt_dtype_name(a->dtype));
    if (a->ndim < 2 || b->ndim < 2)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: operands must have rank >= 2", k->op_name);
    fmm_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
    int64_t ta, tb;
    const char *act;
    rc = hrt_attr_get_int(k, attrs, "trans_a", false, 0, &ta);
    if (!rc) rc = hrt_attr_get_int(k, attrs, "trans_b", false, 0, &tb);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "scale", false, 1.0, &p->scale);
    if (!rc) rc = hrt_attr_get_string(k, attrs, "activation", false, "none", &act);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "alpha", false, 0.01, &p->alpha);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "min", false, -INFINITY, &p->lo);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "max", false, INFINITY, &p->hi);
    if (!rc && (p->act = activation_code(act)) < 0)
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, API, "%s: unknown activation '%s'", k->op_name, act);
    if (!rc) rc = k_act_from_attrs(k, attrs, &p->kact);
    if (rc) {
        free(p);
        return rc;
    }
    p->ta = ta != 0;
    p->tb = tb != 0;
    p->dt = a->dtype;
    p->m = p->ta ? a->dims[a->ndim - 1] : a->dims[a->ndim - 2];
    int64_t ka = p->ta ? a->dims[a->ndim - 2] : a->dims[a->ndim - 1];
    int64_t kb = p->tb ? b->dims[b->ndim - 1] : b->dims[b->ndim - 2];
    p->n = p->tb ? b->dims[b->ndim - 2] : b->dims[b->ndim - 1];
    p->kk = ka;
    if (ka != kb) {
        free(p);
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: inner dims differ (%lld vs %lld)", k->op_name,
                         (long long)ka, (long long)kb);
    }
    if (k->n_in > 2 && !k->in[2].absent) {
        if (k->in[2].numel != p->n) {
            long long want = (long long)p->n;
            free(p);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: bias must have %lld elements", k->op_name, want);
        }
        p->has_bias = true;
    }
    int an = a->ndim - 2, bn = b->ndim - 2, nd = an > bn ? an : bn;
    int64_t sa = 1, sb = 1, dims[HRT_MAXDIM];
    p->nbatch = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int ia = d - (nd - an), ib = d - (nd - bn);
        int64_t xa = ia >= 0 ? a->dims[ia] : 1, xb = ib >= 0 ? b->dims[ib] : 1;
        if (xa != xb && xa != 1 && xb != 1) {
            free(p);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, API, "%s: batch dims do not broadcast", k->op_name);
        }
        p->bdims[d] = xa == 1 ? xb : xa;
        p->astride[d] = xa == 1 ? 0 : sa;
        p->bstride[d] = xb == 1 ? 0 : sb;
        sa *= xa;
        sb *= xb;
        p->nbatch *= p->bdims[d];
        dims[d] = p->bdims[d];
    }
    p->bnd = nd;
    dims[nd] = p->m;
    dims[nd + 1] = p->n;
    rc = hrt_expect_same_shape(k, y, dims, nd + 2, 0);
    if (rc) {
        free(p);
        return rc;
    }
    k->plan = p;
    k->plan_free = free;
    k->run = fmm_run;
    k->pack = fmm_pack;
    k->pack_fill = fmm_pack_fill;
    k->pack_free = fmm_pack_free;
    k->run_packed = fmm_run_packed;
    return ACL_SUCCESS;
}

HRT_OP(fused_matmul, "_FusedMatMul", fmm_compile)
