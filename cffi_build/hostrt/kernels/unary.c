/* Elementwise unary ops.  One inner loop per (op, dtype); float16 and
 * bfloat16 compute in float32 and round once.  Ops with attrs read them at
 * compile time into k_unp.  Adding an op is a DEF line and a table row. */
#include "kcommon.h"

typedef struct {
    float a, b, c; /* op parameters (alpha, scale, ...) */
} k_unp;

typedef void (*k_un_fn)(const void *x, void *y, int64_t n, const k_unp *p);

#define ID(x) (x)
#define F16LD(x) hrt_f16_to_f32(x)
#define F16ST(x) hrt_f32_to_f16(x)
#define BF16LD(x) hrt_bf16_to_f32(x)
#define BF16ST(x) hrt_f32_to_bf16(x)

#define DEF_UN(NAME, T, CT, LD, ST, EXPR)                                       \
    static void NAME(const void *px, void *py, int64_t n, const k_unp *p) {     \
        const T *xs = px;                                                       \
        T *ys = py;                                                             \
        const CT pa = (CT)p->a, pb = (CT)p->b, pc = (CT)p->c;                   \
        (void)pa, (void)pb, (void)pc;                                           \
        for (int64_t i = 0; i < n; i++) {                                       \
            CT x = LD(xs[i]);                                                   \
            ys[i] = ST(EXPR);                                                   \
        }                                                                       \
    }

#define DEF_UN_FLOATS(OP, EXPR)                              \
    DEF_UN(OP##_f32, float, float, ID, ID, EXPR)             \
    DEF_UN(OP##_f64, double, double, ID, ID, EXPR)           \
    DEF_UN(OP##_f16, uint16_t, float, F16LD, F16ST, EXPR)    \
    DEF_UN(OP##_bf16, uint16_t, float, BF16LD, BF16ST, EXPR)

#define DEF_UN_SINTS(OP, EXPR)                               \
    DEF_UN(OP##_i8, int8_t, int8_t, ID, ID, EXPR)            \
    DEF_UN(OP##_i16, int16_t, int16_t, ID, ID, EXPR)         \
    DEF_UN(OP##_i32, int32_t, int32_t, ID, ID, EXPR)         \
    DEF_UN(OP##_i64, int64_t, int64_t, ID, ID, EXPR)

#define FLOAT_FNS(OP) [K_F32] = OP##_f32, [K_F64] = OP##_f64, [K_F16] = OP##_f16, [K_BF16] = OP##_bf16
#define SINT_FNS(OP) [K_I8] = OP##_i8, [K_I16] = OP##_i16, [K_I32] = OP##_i32, [K_I64] = OP##_i64

DEF_UN_FLOATS(relu, (x > 0 ? x : (x != x ? x : 0)))
DEF_UN_SINTS(relu, (x > 0 ? x : 0))
DEF_UN(relu_u8, uint8_t, uint8_t, ID, ID, x)

typedef aclError (*k_un_params_fn)(const hrt_kernel *k, const aclopAttr *a, k_unp *p);

typedef struct {
    const char *name;
    k_un_fn fns[K_NTYPES];
    k_un_params_fn params;
} un_op;

static const un_op UN_OPS[] = {
    {"Relu", {FLOAT_FNS(relu), SINT_FNS(relu), [K_U8] = relu_u8}, NULL},
};

typedef struct {
    k_un_fn fn;
    k_unp p;
    size_t esz;
} un_plan;

typedef struct {
    const un_plan *p;
    const char *x;
    char *y;
} un_exec;

static void un_chunk(void *vp, int64_t b, int64_t e) {
    un_exec *u = vp;
    u->p->fn(u->x + (size_t)b * u->p->esz, u->y + (size_t)b * u->p->esz, e - b, &u->p->p);
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
    if (di < 0 || !op->fns[di])
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, "aclopCompileAndExecute", "%s: data type %s is not supported",
                         k->op_name, hrt_dtype_name(x->dtype));
    if (y->dtype != x->dtype)
        return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, "aclopCompileAndExecute", "%s: output must be %s, got %s",
                         k->op_name, hrt_dtype_name(x->dtype), hrt_dtype_name(y->dtype));
    rc = hrt_expect_same_shape(k, y, x->dims, x->ndim, 0);
    if (rc) return rc;
    un_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, "aclopCompileAndExecute", "out of host memory");
    p->fn = op->fns[di];
    p->esz = hrt_dtype_size(x->dtype);
    if (op->params && (rc = op->params(k, attrs, &p->p))) {
        free(p);
        return rc;
    }
    k->plan = p;
    k->plan_free = free;
    k->run = un_run;
    return ACL_SUCCESS;
}

HRT_OP(relu, "Relu", un_compile)
