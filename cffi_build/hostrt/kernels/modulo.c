/* Mod (the remainder of truncated division: C's fmod, the dividend's sign)
 * and FloorMod (the remainder of floor division: the divisor's sign), with
 * numpy broadcasting.  Integer x % 0 gives 0 and x % -1 gives 0 (no trap for
 * INT_MIN % -1); float16/bfloat16 compute in float32 blocks. */
#include "kcommon.h"

typedef void (*md_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *o, int64_t n, bool floor_mod);

#define DEF_IMOD(NAME, T)                                                                                      \
    static void NAME(const void *pa, int64_t sa, const void *pb, int64_t sb, void *po, int64_t n, bool fm) { \
        const T *a = pa, *b = pb;                                                                              \
        T *o = po;                                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                                      \
            T x = a[i * sa], y = b[i * sb];                                                                    \
            T r = (y == 0 || (y < 0 && y == (T)-1)) ? (T)0 : (T)(x % y); /* INT_MIN % -1 traps */            \
            if (fm && r != 0 && ((r < 0) != (y < 0))) r = (T)(r + y);                                          \
            o[i] = r;                                                                                          \
        }                                                                                                      \
    }
DEF_IMOD(mod_i8, int8_t)
DEF_IMOD(mod_u8, uint8_t)
DEF_IMOD(mod_i16, int16_t)
DEF_IMOD(mod_i32, int32_t)
DEF_IMOD(mod_i64, int64_t)
DEF_IMOD(mod_u16, uint16_t)
DEF_IMOD(mod_u32, uint32_t)
DEF_IMOD(mod_u64, uint64_t)

static void mod_f32(const void *pa, int64_t sa, const void *pb, int64_t sb, void *po, int64_t n, bool fm) {
    const float *a = pa, *b = pb;
    float *o = po;
    for (int64_t i = 0; i < n; i++) {
        float x = a[i * sa], y = b[i * sb], r = fmodf(x, y);
        if (fm && r != 0.0f && ((r < 0.0f) != (y < 0.0f))) r += y;
        o[i] = r;
    }
}

static void mod_f64(const void *pa, int64_t sa, const void *pb, int64_t sb, void *po, int64_t n, bool fm) {
    const double *a = pa, *b = pb;
    double *o = po;
    for (int64_t i = 0; i < n; i++) {
        double x = a[i * sa], y = b[i * sb], r = fmod(x, y);
        if (fm && r != 0.0 && ((r < 0.0) != (y < 0.0))) r += y;
        o[i] = r;
    }
}

typedef struct {
    k_bcast plan;
    md_fn fn;
    size_t esz;
    aclDataType half;
    bool floor_mod;
} md_plan;

typedef struct {
    const md_plan *p;
    const char *a, *b;
    char *o;
} md_ctx;

static void md_call(const md_plan *p, const char *a, int64_t sa, const char *b, int64_t sb, char *o, int64_t n) {
    if (p->half == ACL_DT_UNDEFINED) {
        p->fn(a, sa, b, sb, o, n, p->floor_mod);
        return;
    }
    float fa[K_BLOCK], fb[K_BLOCK], fo[K_BLOCK];
    for (int64_t i = 0; i < n; i += K_BLOCK) {
        int64_t m = n - i < K_BLOCK ? n - i : K_BLOCK;
        for (int64_t j = 0; j < m; j++) {
            k_to_f32(a + 2 * (i + j) * sa, p->half, fa + j, 1);
            k_to_f32(b + 2 * (i + j) * sb, p->half, fb + j, 1);
        }
        mod_f32(fa, 1, fb, 1, fo, m, p->floor_mod);
        k_from_f32(fo, p->half, o + 2 * i, m);
    }
}

static void md_rows(void *vp, int64_t b, int64_t e) {
    md_ctx *c = vp;
    const md_plan *p = c->p;
    const k_bcast *pl = &p->plan;
    int nd = pl->ndim;
    int64_t inner = pl->dims[nd - 1];
    for (int64_t r = b; r < e; r++) {
        int64_t off[3];
        k_bcast_offsets(pl, r, off);
        md_call(p, c->a + (size_t)off[0] * p->esz, pl->strides[0][nd - 1], c->b + (size_t)off[1] * p->esz,
                pl->strides[1][nd - 1], c->o + (size_t)(r * inner) * p->esz, inner);
    }
}

static aclError md_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const md_plan *p = k->plan;
    if (p->plan.numel == 0) return ACL_SUCCESS;
    md_ctx c = {p, in[0], in[1], out[0]};
    int64_t inner = p->plan.dims[p->plan.ndim - 1];
    hrt_parallel_for(p->plan.numel / inner, K_GRAIN / inner + 1, md_rows, &c);
    return ACL_SUCCESS;
}

static aclError md_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    const hrt_tensor *a = &k->in[0];
    static const md_fn fns[K_NTYPES] = {[K_F32] = mod_f32, [K_F16] = mod_f32, [K_BF16] = mod_f32, [K_F64] = mod_f64,
                                        [K_I8] = mod_i8,   [K_U8] = mod_u8,   [K_I16] = mod_i16,  [K_I32] = mod_i32,
                                        [K_I64] = mod_i64, [K_U16] = mod_u16, [K_U32] = mod_u32, [K_U64] = mod_u64};
    int di = k_index(a->dtype);
    if (di < 0 || !fns[di]) return k_unsupported(k, "x1", a->dtype);
    if ((rc = k_expect_same_dtype(k, 1, 2, a->dtype)) || (rc = k_expect_out_dtype(k, 0, a->dtype))) return rc;
    const hrt_tensor *ins[2] = {a, &k->in[1]};
    int64_t dims[HRT_MAXDIM];
    int nd;
    if (!k_broadcast_shape(ins, 2, dims, &nd))
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x1 and x2 do not broadcast", k->op_name);
    if ((rc = hrt_expect_same_shape(k, &k->out[0], dims, nd, 0))) return rc;
    md_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    k_bcast_plan(&p->plan, ins, 2, dims, nd);
    p->fn = fns[di];
    p->esz = hrt_dtype_size(a->dtype);
    p->half = k_is_half(a->dtype) ? a->dtype : ACL_DT_UNDEFINED;
    p->floor_mod = strcmp(k->op_name, "FloorMod") == 0;
    k->plan = p;
    k->plan_free = free;
    k->run = md_run;
    return ACL_SUCCESS;
}

HRT_OP(mod, "Mod", md_compile)
HRT_OP(floormod, "FloorMod", md_compile)
