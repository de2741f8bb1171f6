/* Cast (attr dst_type): every pair of the kernel dtypes.  Float to integer
 * saturates (NaN -> 0) instead of invoking C's undefined behaviour; integer
 * to integer wraps like numpy's astype. */
#include "kcommon.h"

/* The type list, twice: the preprocessor cannot nest one macro in itself. */
#define TYPE_LIST(X, ...)                      \
    X(f32, float, FL, __VA_ARGS__)             \
    X(f64, double, FL, __VA_ARGS__)            \
    X(f16, uint16_t, HF, __VA_ARGS__)          \
    X(bf16, uint16_t, BF, __VA_ARGS__)         \
    X(i8, int8_t, IN, __VA_ARGS__)             \
    X(u8, uint8_t, IN, __VA_ARGS__)            \
    X(i16, int16_t, IN, __VA_ARGS__)           \
    X(i32, int32_t, IN, __VA_ARGS__)           \
    X(i64, int64_t, IN, __VA_ARGS__)           \
    X(bool, uint8_t, BO, __VA_ARGS__)          \
    X(u16, uint16_t, IN, __VA_ARGS__)          \
    X(u32, uint32_t, IN, __VA_ARGS__)          \
    X(u64, uint64_t, UN, __VA_ARGS__)
#define TYPE_LIST2(X, ...)                     \
    X(f32, float, FL, __VA_ARGS__)             \
    X(f64, double, FL, __VA_ARGS__)            \
    X(f16, uint16_t, HF, __VA_ARGS__)          \
    X(bf16, uint16_t, BF, __VA_ARGS__)         \
    X(i8, int8_t, IN, __VA_ARGS__)             \
    X(u8, uint8_t, IN, __VA_ARGS__)            \
    X(i16, int16_t, IN, __VA_ARGS__)           \
    X(i32, int32_t, IN, __VA_ARGS__)           \
    X(i64, int64_t, IN, __VA_ARGS__)           \
    X(bool, uint8_t, BO, __VA_ARGS__)          \
    X(u16, uint16_t, IN, __VA_ARGS__)          \
    X(u32, uint32_t, IN, __VA_ARGS__)          \
    X(u64, uint64_t, UN, __VA_ARGS__)

/* load: to double for float kinds, to int64 for integer kinds */
#define LOAD_FL(v) ((double)(v))
#define LOAD_HF(v) ((double)hrt_f16_to_f32(v))
#define LOAD_BF(v) ((double)hrt_bf16_to_f32(v))
#define LOAD_IN(v) ((int64_t)(v))
#define LOAD_UN(v) ((uint64_t)(v)) /* uint64 keeps its top bit */
#define LOAD_BO(v) ((int64_t)((v) != 0))

#define SAT(NAME, T, LO, HI)                                       \
    static inline T NAME(double v) {                               \
        if (v != v) return 0;                                      \
        if (v <= (double)(LO)) return (T)(LO);                     \
        if (v >= (double)(HI)) return (T)(HI);                     \
        return (T)v;                                               \
    }
SAT(sat_i8, int8_t, INT8_MIN, INT8_MAX)
SAT(sat_u8, uint8_t, 0, UINT8_MAX)
SAT(sat_i16, int16_t, INT16_MIN, INT16_MAX)
SAT(sat_i32, int32_t, INT32_MIN, INT32_MAX)
SAT(sat_u16, uint16_t, 0, UINT16_MAX)
SAT(sat_u32, uint32_t, 0, UINT32_MAX)
static inline uint64_t sat_u64(double v) {
    if (v != v || v <= 0) return 0;
    if (v >= 18446744073709551616.0) return UINT64_MAX;
    return (uint64_t)v;
}
static inline int64_t sat_i64(double v) {
    if (v != v) return 0;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    return (int64_t)v;
}

#define STORE_FL(S, T, v) ((T)(v))
#define STORE_HF(S, T, v) hrt_f32_to_f16((float)(v))
#define STORE_BF(S, T, v) hrt_f32_to_bf16((float)(v))
#define STORE_IN(S, T, v) _Generic((v), double: sat_##S((double)(v)), default: (T)(v))
#define STORE_UN STORE_IN
#define STORE_BO(S, T, v) ((uint8_t)((v) != 0))

#define CAST_ONE(D, DT, DK, S, ST, SK)                                        \
    static void cast_##S##_##D(const void *px, void *py, int64_t n) {         \
        const ST *x = px;                                                     \
        DT *y = py;                                                           \
        for (int64_t i = 0; i < n; i++) y[i] = STORE_##DK(D, DT, LOAD_##SK(x[i])); \
    }
#define CAST_ROW(S, ST, SK, unused) TYPE_LIST2(CAST_ONE, S, ST, SK)
TYPE_LIST(CAST_ROW, 0)

typedef void (*cast_fn)(const void *, void *, int64_t);

#define FN_ENTRY(D, DT, DK, S) cast_##S##_##D,
#define FN_ROW(S, ST, SK, unused) {TYPE_LIST2(FN_ENTRY, S)},
/* rows and columns in TYPE_LIST order; ORDER maps them to K_* indices */
static const cast_fn CASTS[K_NTYPES][K_NTYPES] = {TYPE_LIST(FN_ROW, 0)};
static const int ORDER[K_NTYPES] = {K_F32, K_F64, K_F16, K_BF16, K_I8, K_U8, K_I16, K_I32, K_I64, K_BOOL, K_U16, K_U32, K_U64};

static int row_of(int kidx) {
    for (int i = 0; i < K_NTYPES; i++)
        if (ORDER[i] == kidx) return i;
    return -1;
}

typedef struct {
    cast_fn fn;
    size_t isz, osz;
    const char *x;
    char *y;
} cast_exec;

static void cast_chunk(void *vp, int64_t b, int64_t e) {
    cast_exec *c = vp;
    c->fn(c->x + (size_t)b * c->isz, c->y + (size_t)b * c->osz, e - b);
}

static aclError cast_run(const hrt_kernel *k, void *const *in, void *const *out) {
    cast_exec c = {(cast_fn)k->plan, hrt_dtype_size(k->in[0].dtype), hrt_dtype_size(k->out[0].dtype), in[0], out[0]};
    hrt_parallel_for(k->in[0].numel, K_GRAIN, cast_chunk, &c);
    return ACL_SUCCESS;
}

static aclError cast_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    int64_t dst;
    rc = hrt_attr_get_int(k, attrs, "dst_type", true, 0, &dst);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *y = &k->out[0];
    if (dst != y->dtype)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, "aclopCompileAndExecute", "Cast: dst_type %lld does not match output type %s",
                         (long long)dst, hrt_dtype_name(y->dtype));
    int si = row_of(k_index(x->dtype)), di = row_of(k_index(y->dtype));
    if (si < 0 || di < 0)
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, "aclopCompileAndExecute", "Cast: %s -> %s is not supported",
                         hrt_dtype_name(x->dtype), hrt_dtype_name(y->dtype));
    rc = hrt_expect_same_shape(k, y, x->dims, x->ndim, 0);
    if (rc) return rc;
    k->plan = (void *)CASTS[si][di];
    k->plan_free = NULL;
    k->run = cast_run;
    return ACL_SUCCESS;
}

HRT_OP(cast, "Cast", cast_compile)
