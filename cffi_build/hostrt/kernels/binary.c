/* Elementwise binary ops with numpy broadcasting.
 *
 * Each op is a table of inner loops, one per dtype; an inner loop runs over
 * the innermost (merged) dim with input strides 0 or 1, written so the
 * compiler vectorises each of the four stride cases.  float16/bfloat16
 * compute in float32 and round once, like numpy.  Integer arithmetic wraps
 * (the runtime is built with -fwrapv) and integer division by zero gives 0
 * instead of trapping.  Adding an op is one table entry below. */
#include "kcommon.h"

typedef void (*k_bin_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *o, int64_t n);

#define ID(x) (x)
#define F16LD(x) hrt_f16_to_f32(x)
#define F16ST(x) hrt_f32_to_f16(x)
#define BF16LD(x) hrt_bf16_to_f32(x)
#define BF16ST(x) hrt_f32_to_bf16(x)

#define DEF_BIN(NAME, T, OT, CT, LD, ST, EXPR)                                                          \
    static void NAME(const void *pa, int64_t sa, const void *pb, int64_t sb, void *po, int64_t n) {     \
        const T *a = pa, *b = pb;                                                                       \
        OT *o = po;                                                                                     \
        if (sa && sb) {                                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                           \
                CT x = LD(a[i]), y = LD(b[i]);                                                          \
                o[i] = ST(EXPR);                                                                        \
            }                                                                                           \
        } else if (sa) {                                                                                \
            CT y = LD(b[0]);                                                                            \
            for (int64_t i = 0; i < n; i++) {                                                           \
                CT x = LD(a[i]);                                                                        \
                o[i] = ST(EXPR);                                                                        \
            }                                                                                           \
        } else if (sb) {                                                                                \
            CT x = LD(a[0]);                                                                            \
            for (int64_t i = 0; i < n; i++) {                                                           \
                CT y = LD(b[i]);                                                                        \
                o[i] = ST(EXPR);                                                                        \
            }                                                                                           \
        } else {                                                                                        \
            CT x = LD(a[0]), y = LD(b[0]);                                                              \
            OT r = ST(EXPR);                                                                            \
            for (int64_t i = 0; i < n; i++) o[i] = r;                                                   \
        }                                                                                               \
    }

/* One op over the float types (f32, f16, bf16, f64). */
#define DEF_BIN_FLOATS(OP, EXPR)                                          \
    DEF_BIN(OP##_f32, float, float, float, ID, ID, EXPR)                  \
    DEF_BIN(OP##_f64, double, double, double, ID, ID, EXPR)               \
    DEF_BIN(OP##_f16, uint16_t, uint16_t, float, F16LD, F16ST, EXPR)      \
    DEF_BIN(OP##_bf16, uint16_t, uint16_t, float, BF16LD, BF16ST, EXPR)

#define DEF_BIN_INTS(OP, EXPR) DEF_BIN_SINTS(OP, EXPR) DEF_BIN(OP##_u8, uint8_t, uint8_t, uint8_t, ID, ID, EXPR)
#define DEF_BIN_SINTS(OP, EXPR)                                           \
    DEF_BIN(OP##_i8, int8_t, int8_t, int8_t, ID, ID, EXPR)                \
    DEF_BIN(OP##_i16, int16_t, int16_t, int16_t, ID, ID, EXPR)            \
    DEF_BIN(OP##_i32, int32_t, int32_t, int32_t, ID, ID, EXPR)            \
    DEF_BIN(OP##_i64, int64_t, int64_t, int64_t, ID, ID, EXPR)

/* comparisons: bool (uint8) out */
#define DEF_CMP(OP, EXPR)                                                          \
    DEF_BIN(OP##_f32, float, uint8_t, float, ID, ID, EXPR)                         \
    DEF_BIN(OP##_f64, double, uint8_t, double, ID, ID, EXPR)                       \
    DEF_BIN(OP##_f16, uint16_t, uint8_t, float, F16LD, ID, EXPR)                   \
    DEF_BIN(OP##_bf16, uint16_t, uint8_t, float, BF16LD, ID, EXPR)                 \
    DEF_BIN(OP##_i8, int8_t, uint8_t, int8_t, ID, ID, EXPR)                        \
    DEF_BIN(OP##_u8, uint8_t, uint8_t, uint8_t, ID, ID, EXPR)                      \
    DEF_BIN(OP##_i16, int16_t, uint8_t, int16_t, ID, ID, EXPR)                     \
    DEF_BIN(OP##_i32, int32_t, uint8_t, int32_t, ID, ID, EXPR)                     \
    DEF_BIN(OP##_i64, int64_t, uint8_t, int64_t, ID, ID, EXPR)                     \
    DEF_BIN(OP##_bool, uint8_t, uint8_t, uint8_t, ID, ID, EXPR)

#define FLOAT_FNS(OP) [K_F32] = OP##_f32, [K_F64] = OP##_f64, [K_F16] = OP##_f16, [K_BF16] = OP##_bf16
#define INT_FNS(OP) [K_I8] = OP##_i8, [K_U8] = OP##_u8, [K_I16] = OP##_i16, [K_I32] = OP##_i32, [K_I64] = OP##_i64
#define CMP_FNS(OP) FLOAT_FNS(OP), INT_FNS(OP), [K_BOOL] = OP##_bool

/* NaN-propagating max/min, as numpy.maximum/minimum */
#define MAXE ((x != x) ? x : (x > y ? x : y))
#define MINE ((x != x) ? x : (x < y ? x : y))
/* integer division truncates (C, ONNX); x/0 -> 0; MIN/-1 wraps */
#define IDIV (y == 0 ? 0 : (y == -1 ? -x : x / y))

DEF_BIN_FLOATS(add, x + y)
DEF_BIN_INTS(add, x + y)
DEF_BIN_FLOATS(sub, x - y)
DEF_BIN_INTS(sub, x - y)
DEF_BIN_FLOATS(mul, x * y)
DEF_BIN_INTS(mul, x * y)
DEF_BIN_FLOATS(div, x / y)
DEF_BIN_SINTS(div, IDIV)
DEF_BIN(div_u8, uint8_t, uint8_t, uint8_t, ID, ID, (y == 0 ? 0 : x / y))
DEF_BIN_FLOATS(max, MAXE)
DEF_BIN_INTS(max, MAXE)
DEF_BIN_FLOATS(min, MINE)
DEF_BIN_INTS(min, MINE)
DEF_BIN(pow_f32, float, float, float, ID, ID, powf(x, y))
DEF_BIN(pow_f64, double, double, double, ID, ID, pow(x, y))
DEF_BIN(pow_f16, uint16_t, uint16_t, float, F16LD, F16ST, powf(x, y))
DEF_BIN(pow_bf16, uint16_t, uint16_t, float, BF16LD, BF16ST, powf(x, y))
DEF_CMP(eq, x == y)
DEF_CMP(lt, x < y)
DEF_CMP(gt, x > y)
DEF_CMP(le, x <= y)
DEF_CMP(ge, x >= y)
DEF_CMP(ne, x != y)

/* integer power by squaring; negative exponents give 0 except for |x| == 1 */
#define DEF_IPOW(NAME, T)                                                                        \
    static inline T NAME##_scalar(T x, T y) {                                                    \
        if (y < 0) return x == 1 ? 1 : (x == (T)-1 ? ((y & 1) ? (T)-1 : 1) : 0);                 \
        T r = 1;                                                                                 \
        while (y) {                                                                              \
            if (y & 1) r = (T)(r * x);                                                           \
            x = (T)(x * x);                                                                      \
            y >>= 1;                                                                             \
        }                                                                                        \
        return r;                                                                                \
    }                                                                                            \
    DEF_BIN(NAME, T, T, T, ID, ID, NAME##_scalar(x, y))
DEF_IPOW(pow_i8, int8_t)
DEF_IPOW(pow_u8, uint8_t)
DEF_IPOW(pow_i16, int16_t)
DEF_IPOW(pow_i32, int32_t)
DEF_IPOW(pow_i64, int64_t)

typedef struct {
    const char *name;
    k_bin_fn fns[K_NTYPES];
    bool bool_out;
} bin_op;

static const bin_op BIN_OPS[] = {
    {"Add", {FLOAT_FNS(add), INT_FNS(add)}, false},
    {"AddV2", {FLOAT_FNS(add), INT_FNS(add)}, false},
    {"Sub", {FLOAT_FNS(sub), INT_FNS(sub)}, false},
    {"Mul", {FLOAT_FNS(mul), INT_FNS(mul)}, false},
    {"RealDiv", {FLOAT_FNS(div)}, false},
    {"Div", {FLOAT_FNS(div), INT_FNS(div)}, false},
    {"Maximum", {FLOAT_FNS(max), INT_FNS(max)}, false},
    {"Minimum", {FLOAT_FNS(min), INT_FNS(min)}, false},
    {"Pow", {FLOAT_FNS(pow), INT_FNS(pow)}, false},
    {"Equal", {CMP_FNS(eq)}, true},
    {"NotEqual", {CMP_FNS(ne)}, true},
    {"Less", {CMP_FNS(lt)}, true},
    {"LessEqual", {CMP_FNS(le)}, true},
    {"Greater", {CMP_FNS(gt)}, true},
    {"GreaterEqual", {CMP_FNS(ge)}, true},
};

typedef struct {
    k_bcast plan;
    k_bin_fn fn;
    size_t isz, osz;
} bin_plan;

typedef struct {
    const bin_plan *p;
    const char *a, *b;
    char *o;
} bin_exec;

/* single merged dim: chunks of the flat range */
static void bin_flat(void *vp, int64_t b, int64_t e) {
    bin_exec *x = vp;
    const k_bcast *pl = &x->p->plan;
    int64_t sa = pl->strides[0][0], sb = pl->strides[1][0];
    x->p->fn(x->a + (size_t)(b * sa) * x->p->isz, sa, x->b + (size_t)(b * sb) * x->p->isz, sb,
             x->o + (size_t)b * x->p->osz, e - b);
}

/* rows of the outer index space */
static void bin_rows(void *vp, int64_t b, int64_t e) {
    bin_exec *x = vp;
    const k_bcast *pl = &x->p->plan;
    int64_t inner = pl->dims[pl->ndim - 1];
    int64_t sa = pl->strides[0][pl->ndim - 1], sb = pl->strides[1][pl->ndim - 1];
    for (int64_t r = b; r < e; r++) {
        int64_t off[3];
        k_bcast_offsets(pl, r, off);
        x->p->fn(x->a + (size_t)off[0] * x->p->isz, sa, x->b + (size_t)off[1] * x->p->isz, sb,
                 x->o + (size_t)(r * inner) * x->p->osz, inner);
    }
}

static aclError bin_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const bin_plan *p = k->plan;
    if (p->plan.numel == 0) return ACL_SUCCESS;
    bin_exec x = {p, in[0], in[1], out[0]};
    if (p->plan.ndim == 1) {
        hrt_parallel_for(p->plan.numel, K_GRAIN, bin_flat, &x);
    } else {
        int64_t inner = p->plan.dims[p->plan.ndim - 1];
        hrt_parallel_for(p->plan.numel / inner, K_GRAIN / inner + 1, bin_rows, &x);
    }
    return ACL_SUCCESS;
}

static aclError bin_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    const bin_op *op = NULL;
    for (size_t i = 0; i < sizeof BIN_OPS / sizeof *BIN_OPS; i++)
        if (strcmp(BIN_OPS[i].name, k->op_name) == 0) op = &BIN_OPS[i];
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    const hrt_tensor *a = &k->in[0], *b = &k->in[1], *y = &k->out[0];
    if (a->dtype != b->dtype)
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, "aclopCompileAndExecute", "%s: inputs have different data types (%s, %s)",
                         k->op_name, hrt_dtype_name(a->dtype), hrt_dtype_name(b->dtype));
    int di = k_index(a->dtype);
    if (di < 0 || !op->fns[di])
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, "aclopCompileAndExecute", "%s: data type %s is not supported",
                         k->op_name, hrt_dtype_name(a->dtype));
    aclDataType want = op->bool_out ? ACL_BOOL : a->dtype;
    if (y->dtype != want)
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, "aclopCompileAndExecute", "%s: output must be %s, got %s", k->op_name,
                         hrt_dtype_name(want), hrt_dtype_name(y->dtype));
    const hrt_tensor *ins[2] = {a, b};
    int64_t dims[HRT_MAXDIM];
    int nd;
    if (!k_broadcast_shape(ins, 2, dims, &nd)) {
        char sa[128], sb[128];
        hrt_shape_str(a->dims, a->ndim, sa, sizeof sa);
        hrt_shape_str(b->dims, b->ndim, sb, sizeof sb);
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, "aclopCompileAndExecute", "%s: shapes %s and %s do not broadcast",
                         k->op_name, sa, sb);
    }
    rc = hrt_expect_same_shape(k, y, dims, nd, 0);
    if (rc) return rc;
    bin_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, "aclopCompileAndExecute", "out of host memory");
    k_bcast_plan(&p->plan, ins, 2, dims, nd);
    p->fn = op->fns[di];
    p->isz = hrt_dtype_size(a->dtype);
    p->osz = hrt_dtype_size(y->dtype);
    k->plan = p;
    k->plan_free = free;
    k->run = bin_run;
    return ACL_SUCCESS;
}

HRT_OP(add, "Add", bin_compile)
HRT_OP(addv2, "AddV2", bin_compile)
HRT_OP(sub, "Sub", bin_compile)
HRT_OP(mul, "Mul", bin_compile)
HRT_OP(realdiv, "RealDiv", bin_compile)
HRT_OP(div, "Div", bin_compile)
HRT_OP(maximum, "Maximum", bin_compile)
HRT_OP(minimum, "Minimum", bin_compile)
HRT_OP(pow, "Pow", bin_compile)
HRT_OP(equal, "Equal", bin_compile)
HRT_OP(notequal, "NotEqual", bin_compile)
HRT_OP(less, "Less", bin_compile)
HRT_OP(lessequal, "LessEqual", bin_compile)
HRT_OP(greater, "Greater", bin_compile)
HRT_OP(greaterequal, "GreaterEqual", bin_compile)
