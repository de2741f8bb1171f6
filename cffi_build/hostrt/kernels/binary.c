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

#define DEF_BIN(NAME, T, OT, EXPR)                                                                      \
    static void NAME(const void *pa, int64_t sa, const void *pb, int64_t sb, void *po, int64_t n) {     \
        const T *a = pa, *b = pb;                                                                       \
        OT *o = po;                                                                                     \
        if (sa && sb) {                                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                           \
                T x = a[i], y = b[i];                                                                   \
                o[i] = (OT)(EXPR);                                                                      \
            }                                                                                           \
        } else if (sa) {                                                                                \
            T y = b[0];                                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                           \
                T x = a[i];                                                                             \
                o[i] = (OT)(EXPR);                                                                      \
            }                                                                                           \
        } else if (sb) {                                                                                \
            T x = a[0];                                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                           \
                T y = b[i];                                                                             \
                o[i] = (OT)(EXPR);                                                                      \
            }                                                                                           \
        } else {                                                                                        \
            T x = a[0], y = b[0];                                                                       \
            OT r = (OT)(EXPR);                                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = r;                                                   \
        }                                                                                               \
    }

/* float32 and float64; float16/bfloat16 run the float32 loop on widened
 * blocks (bin_call) and round once. */
#define DEF_BIN_FLOATS(OP, EXPR)                 \
    DEF_BIN(OP##_f32, float, float, EXPR)        \
    DEF_BIN(OP##_f64, double, double, EXPR)

#define DEF_BIN_INTS(OP, EXPR) DEF_BIN_SINTS(OP, EXPR) DEF_BIN_UINTS(OP, EXPR)
#define DEF_BIN_UINTS(OP, EXPR)                  \
    DEF_BIN(OP##_u8, uint8_t, uint8_t, EXPR)     \
    DEF_BIN(OP##_u16, uint16_t, uint16_t, EXPR)  \
    DEF_BIN(OP##_u32, uint32_t, uint32_t, EXPR)  \
    DEF_BIN(OP##_u64, uint64_t, uint64_t, EXPR)
#define DEF_BIN_SINTS(OP, EXPR)                  \
    DEF_BIN(OP##_i8, int8_t, int8_t, EXPR)       \
    DEF_BIN(OP##_i16, int16_t, int16_t, EXPR)    \
    DEF_BIN(OP##_i32, int32_t, int32_t, EXPR)    \
    DEF_BIN(OP##_i64, int64_t, int64_t, EXPR)

/* comparisons: bool (uint8) out */
#define DEF_CMP(OP, EXPR)                              \
    DEF_BIN(OP##_f32, float, uint8_t, EXPR)            \
    DEF_BIN(OP##_f64, double, uint8_t, EXPR)           \
    DEF_BIN(OP##_i8, int8_t, uint8_t, EXPR)            \
    DEF_BIN(OP##_u8, uint8_t, uint8_t, EXPR)           \
    DEF_BIN(OP##_i16, int16_t, uint8_t, EXPR)          \
    DEF_BIN(OP##_i32, int32_t, uint8_t, EXPR)          \
    DEF_BIN(OP##_i64, int64_t, uint8_t, EXPR)          \
    DEF_BIN(OP##_u16, uint16_t, uint8_t, EXPR)         \
    DEF_BIN(OP##_u32, uint32_t, uint8_t, EXPR)         \
    DEF_BIN(OP##_u64, uint64_t, uint8_t, EXPR)         \
    DEF_BIN(OP##_bool, uint8_t, uint8_t, EXPR)

/* half types use the f32 loop: the table entry for K_F16/K_BF16 is it */
#define FLOAT_FNS(OP) [K_F32] = OP##_f32, [K_F64] = OP##_f64, [K_F16] = OP##_f32, [K_BF16] = OP##_f32
#define INT_FNS(OP)                                                                                \
    [K_I8] = OP##_i8, [K_U8] = OP##_u8, [K_I16] = OP##_i16, [K_I32] = OP##_i32, [K_I64] = OP##_i64, \
    [K_U16] = OP##_u16, [K_U32] = OP##_u32, [K_U64] = OP##_u64
#define CMP_FNS(OP) FLOAT_FNS(OP), INT_FNS(OP), [K_BOOL] = OP##_bool

/* integer max/min (floats use the NaN-propagating k_maxf/k_minf) */
#define IMAX (x > y ? x : y)
#define IMIN (x < y ? x : y)
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
DEF_BIN_UINTS(div, (y == 0 ? 0 : x / y))
DEF_BIN(max_f32, float, float, k_maxf(x, y))
DEF_BIN(max_f64, double, double, k_maxd(x, y))
DEF_BIN_INTS(max, IMAX)
DEF_BIN(min_f32, float, float, k_minf(x, y))
DEF_BIN(min_f64, double, double, k_mind(x, y))
DEF_BIN_INTS(min, IMIN)
/* Pow: an exponent broadcast over the row (LayerNorm's x ** 2, gelu's x ** 3,
 * x ** 0.5, x ** -1 ...) takes kmath.h's short forms; anything else libm's pow */
DEF_BIN(pow_libm_f32, float, float, powf(x, y))
DEF_BIN(pow_libm_f64, double, double, pow(x, y))
static void pow_f32(const void *pa, int64_t sa, const void *pb, int64_t sb, void *po, int64_t n) {
    if (sa && !sb && k_pow_const_f32(pa, *(const float *)pb, po, n)) return;
    pow_libm_f32(pa, sa, pb, sb, po, n);
}
static void pow_f64(const void *pa, int64_t sa, const void *pb, int64_t sb, void *po, int64_t n) {
    if (sa && !sb && k_pow_const_f64(pa, *(const double *)pb, po, n)) return;
    pow_libm_f64(pa, sa, pb, sb, po, n);
}
DEF_BIN(sqdiff_f32, float, float, (x - y) * (x - y))
DEF_BIN(sqdiff_f64, double, double, (x - y) * (x - y))
DEF_BIN_INTS(sqdiff, (x - y) * (x - y))
DEF_BIN(land_bool, uint8_t, uint8_t, (x != 0) & (y != 0))
DEF_BIN(lor_bool, uint8_t, uint8_t, (x != 0) | (y != 0))
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
    DEF_BIN(NAME, T, T, NAME##_scalar(x, y))
DEF_IPOW(pow_i8, int8_t)
DEF_IPOW(pow_u8, uint8_t)
DEF_IPOW(pow_u16, uint16_t)
DEF_IPOW(pow_u32, uint32_t)
DEF_IPOW(pow_u64, uint64_t)
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
    {"SquaredDifference", {FLOAT_FNS(sqdiff), INT_FNS(sqdiff)}, false},
    {"LogicalAnd", {[K_BOOL] = land_bool}, false},
    {"LogicalOr", {[K_BOOL] = lor_bool}, false},
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
    aclDataType half;   /* ACL_FLOAT16/ACL_BF16: widen blocks; else ACL_DT_UNDEFINED */
    bool bool_out;
    bool stream;        /* big float32 output: compute blocks in L1, stream them out */
} bin_plan;

typedef struct {
    const bin_plan *p;
    const char *a, *b;
    char *o;
} bin_exec;

/* One run of the inner loop; half types go through float32 blocks. */
static void bin_call(const bin_plan *p, const char *a, int64_t sa, const char *b, int64_t sb, char *o, int64_t n) {
    if (p->half == ACL_DT_UNDEFINED) {
        p->fn(a, sa, b, sb, o, n);
        return;
    }
    float fa[K_BLOCK], fb[K_BLOCK], fo[K_BLOCK];
    if (!sa) k_to_f32(a, p->half, fa, 1);
    if (!sb) k_to_f32(b, p->half, fb, 1);
    for (int64_t i = 0; i < n; i += K_BLOCK) {
        int64_t m = n - i < K_BLOCK ? n - i : K_BLOCK;
        if (sa) k_to_f32(a + 2 * i, p->half, fa, m);
        if (sb) k_to_f32(b + 2 * i, p->half, fb, m);
        if (p->bool_out) {
            p->fn(fa, sa, fb, sb, o + i, m);
        } else {
            p->fn(fa, sa, fb, sb, fo, m);
            k_from_f32(fo, p->half, o + 2 * i, m);
        }
    }
}

/* single merged dim: chunks of the flat range */
static void bin_flat(void *vp, int64_t b, int64_t e) {
    bin_exec *x = vp;
    const k_bcast *pl = &x->p->plan;
    int64_t sa = pl->strides[0][0], sb = pl->strides[1][0];
    if (x->p->stream) {
        float buf[2048];
        for (int64_t i = b; i < e; i += 2048) {
            int64_t m = e - i < 2048 ? e - i : 2048;
            x->p->fn(x->a + (size_t)(i * sa) * 4, sa, x->b + (size_t)(i * sb) * 4, sb, buf, m);
            k_stream_store_f32((float *)x->o + i, buf, m);
        }
        return;
    }
    bin_call(x->p, x->a + (size_t)(b * sa) * x->p->isz, sa, x->b + (size_t)(b * sb) * x->p->isz, sb,
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
        bin_call(x->p, x->a + (size_t)off[0] * x->p->isz, sa, x->b + (size_t)off[1] * x->p->isz, sb,
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
        return k_unsupported(k, "x1", a->dtype);
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
    p->half = k_is_half(a->dtype) ? a->dtype : ACL_DT_UNDEFINED;
    p->bool_out = op->bool_out;
    p->stream = (a->dtype == ACL_FLOAT && !op->bool_out && y->nbytes >= K_STREAM_BYTES);
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
HRT_OP(sqdiff, "SquaredDifference", bin_compile)
HRT_OP(land, "LogicalAnd", bin_compile)
HRT_OP(lor, "LogicalOr", bin_compile)
HRT_OP(equal, "Equal", bin_compile)
HRT_OP(notequal, "NotEqual", bin_compile)
HRT_OP(less, "Less", bin_compile)
HRT_OP(lessequal, "LessEqual", bin_compile)
HRT_OP(greater, "Greater", bin_compile)
HRT_OP(greaterequal, "GreaterEqual", bin_compile)
