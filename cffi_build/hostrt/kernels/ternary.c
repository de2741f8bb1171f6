/* Three-input elementwise ops with numpy broadcasting: Select, SelectV2
 * (condition, x1, x2) and ClipByValue (x, clip_value_min, clip_value_max).
 * The inner loop runs over the innermost merged dim with strides 0 or 1;
 * Select copies elements by size (any dtype), ClipByValue computes in the
 * dtype (float16/bfloat16 through float32 blocks, exact). */
#include "kcommon.h"

typedef void (*k_tern_fn)(const void *a, int64_t sa, const void *b, int64_t sb, const void *c, int64_t sc, void *o,
                          int64_t n);

#define DEF_SEL(NAME, T)                                                                                         \
    static void NAME(const void *pa, int64_t sa, const void *pb, int64_t sb, const void *pc, int64_t sc, void *po, \
                     int64_t n) {                                                                                \
        const uint8_t *c = pa;                                                                                   \
        const T *x = pb, *y = pc;                                                                                \
        T *o = po;                                                                                               \
        if (sa && sb && sc) {                                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                                    \
                T u = x[i], v = y[i];                                                                            \
                o[i] = c[i] ? u : v;                                                                             \
            }                                                                                                    \
        } else {                                                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                                    \
                T u = x[i * sb], v = y[i * sc];                                                                  \
                o[i] = c[i * sa] ? u : v;                                                                        \
            }                                                                                                    \
        }                                                                                                        \
    }
DEF_SEL(sel1, uint8_t)
DEF_SEL(sel2, uint16_t)
DEF_SEL(sel4, uint32_t)
DEF_SEL(sel8, uint64_t)

#define DEF_CLIP(NAME, T, EXPR)                                                                                  \
    static void NAME(const void *pa, int64_t sa, const void *pb, int64_t sb, const void *pc, int64_t sc, void *po, \
                     int64_t n) {                                                                                \
        const T *xs = pa, *ls = pb, *hs = pc;                                                                    \
        T *o = po;                                                                                               \
        if (sa && !sb && !sc) {                                                                                  \
            T lo = ls[0], hi = hs[0];                                                                            \
            for (int64_t i = 0; i < n; i++) {                                                                    \
                T x = xs[i];                                                                                     \
                o[i] = EXPR;                                                                                     \
            }                                                                                                    \
        } else {                                                                                                 \
            for (int64_t i = 0; i < n; i++) {                                                                    \
                T x = xs[i * sa], lo = ls[i * sb], hi = hs[i * sc];                                              \
                o[i] = EXPR;                                                                                     \
            }                                                                                                    \
        }                                                                                                        \
    }
#define ICLIP(T) DEF_CLIP(clip_##T, T, (x < lo ? lo : x) > hi ? hi : (x < lo ? lo : x))
DEF_CLIP(clip_f32, float, k_minf(k_maxf(x, lo), hi))
DEF_CLIP(clip_f64, double, k_mind(k_maxd(x, lo), hi))
ICLIP(int8_t)
ICLIP(uint8_t)
ICLIP(int16_t)
ICLIP(int32_t)
ICLIP(int64_t)

typedef struct {
    k_bcast plan;
    k_tern_fn fn;
    size_t sz[3], osz;
    aclDataType half; /* clip of float16/bfloat16 */
} tern_plan;

typedef struct {
    const tern_plan *p;
    const char *in[3];
    char *o;
} tern_exec;

static void tern_call(const tern_plan *p, const char *a, int64_t sa, const char *b, int64_t sb, const char *c,
                      int64_t sc, char *o, int64_t n) {
    if (p->half == ACL_DT_UNDEFINED) {
        p->fn(a, sa, b, sb, c, sc, o, n);
        return;
    }
    float fa[K_BLOCK], fb[K_BLOCK], fc[K_BLOCK], fo[K_BLOCK];
    if (!sa) k_to_f32(a, p->half, fa, 1);
    if (!sb) k_to_f32(b, p->half, fb, 1);
    if (!sc) k_to_f32(c, p->half, fc, 1);
    for (int64_t i = 0; i < n; i += K_BLOCK) {
        int64_t m = n - i < K_BLOCK ? n - i : K_BLOCK;
        if (sa) k_to_f32(a + 2 * i, p->half, fa, m);
        if (sb) k_to_f32(b + 2 * i, p->half, fb, m);
        if (sc) k_to_f32(c + 2 * i, p->half, fc, m);
        p->fn(fa, sa, fb, sb, fc, sc, fo, m);
        k_from_f32(fo, p->half, o + 2 * i, m);
    }
}

static void tern_rows(void *vp, int64_t b, int64_t e) {
    tern_exec *x = vp;
    const tern_plan *p = x->p;
    const k_bcast *pl = &p->plan;
    int nd = pl->ndim;
    int64_t inner = pl->dims[nd - 1];
    for (int64_t r = b; r < e; r++) {
        int64_t off[3];
        k_bcast_offsets(pl, r, off);
        tern_call(p, x->in[0] + (size_t)off[0] * p->sz[0], pl->strides[0][nd - 1], x->in[1] + (size_t)off[1] * p->sz[1],
                  pl->strides[1][nd - 1], x->in[2] + (size_t)off[2] * p->sz[2], pl->strides[2][nd - 1],
                  x->o + (size_t)(r * inner) * p->osz, inner);
    }
}

static void tern_flat(void *vp, int64_t b, int64_t e) {
    tern_exec *x = vp;
    const tern_plan *p = x->p;
    const k_bcast *pl = &p->plan;
    int64_t s0 = pl->strides[0][0], s1 = pl->strides[1][0], s2 = pl->strides[2][0];
    tern_call(p, x->in[0] + (size_t)(b * s0) * p->sz[0], s0, x->in[1] + (size_t)(b * s1) * p->sz[1], s1,
              x->in[2] + (size_t)(b * s2) * p->sz[2], s2, x->o + (size_t)b * p->osz, e - b);
}

static aclError tern_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const tern_plan *p = k->plan;
    if (p->plan.numel == 0) return ACL_SUCCESS;
    tern_exec x = {p, {in[0], in[1], in[2]}, out[0]};
    if (p->plan.ndim == 1) {
        hrt_parallel_for(p->plan.numel, K_GRAIN, tern_flat, &x);
    } else {
        int64_t inner = p->plan.dims[p->plan.ndim - 1];
        hrt_parallel_for(p->plan.numel / inner, K_GRAIN / inner + 1, tern_rows, &x);
    }
    return ACL_SUCCESS;
}

static aclError tern_finish(hrt_kernel *k, const hrt_tensor *const *ins, k_tern_fn fn, aclDataType half) {
    int64_t dims[HRT_MAXDIM];
    int nd;
    if (!k_broadcast_shape(ins, 3, dims, &nd)) {
        char s0[128], s1[128], s2[128];
        hrt_shape_str(ins[0]->dims, ins[0]->ndim, s0, sizeof s0);
        hrt_shape_str(ins[1]->dims, ins[1]->ndim, s1, sizeof s1);
        hrt_shape_str(ins[2]->dims, ins[2]->ndim, s2, sizeof s2);
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: shapes %s, %s and %s do not broadcast", k->op_name, s0,
                         s1, s2);
    }
    aclError rc = hrt_expect_same_shape(k, &k->out[0], dims, nd, 0);
    if (rc) return rc;
    tern_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    k_bcast_plan(&p->plan, ins, 3, dims, nd);
    p->fn = fn;
    for (int j = 0; j < 3; j++) p->sz[j] = hrt_dtype_size(ins[j]->dtype);
    p->osz = hrt_dtype_size(k->out[0].dtype);
    p->half = half;
    k->plan = p;
    k->plan_free = free;
    k->run = tern_run;
    return ACL_SUCCESS;
}

static aclError select_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 3, 3, 1);
    if (rc) return rc;
    const hrt_tensor *c = &k->in[0], *x = &k->in[1], *y = &k->in[2];
    if (c->dtype != ACL_BOOL) return k_unsupported(k, "condition (must be bool)", c->dtype);
    if (k_index(x->dtype) < 0) return k_unsupported(k, "x1", x->dtype);
    if ((rc = k_expect_same_dtype(k, 2, 3, x->dtype)) || (rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    static const k_tern_fn by_size[9] = {[1] = sel1, [2] = sel2, [4] = sel4, [8] = sel8};
    hrt_tensor cv = *c;
    /* Select (TF): a rank-1 condition picks whole rows of x1/x2 */
    if (strcmp(k->op_name, "Select") == 0 && c->ndim == 1 && x->ndim > 1 && c->dims[0] == x->dims[0]) {
        cv.ndim = x->ndim;
        for (int d = 1; d < x->ndim; d++) cv.dims[d] = 1;
    }
    const hrt_tensor *ins[3] = {&cv, x, y};
    return tern_finish(k, ins, by_size[hrt_dtype_size(x->dtype)], ACL_DT_UNDEFINED);
}

static aclError clip_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 3, 3, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    static const k_tern_fn fns[K_NTYPES] = {[K_F32] = clip_f32, [K_F16] = clip_f32, [K_BF16] = clip_f32,
                                            [K_F64] = clip_f64, [K_I8] = clip_int8_t, [K_U8] = clip_uint8_t,
                                            [K_I16] = clip_int16_t, [K_I32] = clip_int32_t, [K_I64] = clip_int64_t};
    int di = k_index(x->dtype);
    if (di < 0 || !fns[di]) return k_unsupported(k, "x", x->dtype);
    if ((rc = k_expect_same_dtype(k, 1, 3, x->dtype)) || (rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    const hrt_tensor *ins[3] = {x, &k->in[1], &k->in[2]};
    return tern_finish(k, ins, fns[di], k_is_half(x->dtype) ? x->dtype : ACL_DT_UNDEFINED);
}

HRT_OP(select, "Select", select_compile)
HRT_OP(selectv2, "SelectV2", select_compile)
HRT_OP(clipbyvalue, "ClipByValue", clip_compile)
