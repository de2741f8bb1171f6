/* Shared pieces of the kernels: a dense dtype index, numpy broadcasting
 * plans, float16/bfloat16 block conversion, axis/attr helpers, and chunked
 * parallel loops over an output. */
#ifndef AIOGE_HRT_KCOMMON_H
#define AIOGE_HRT_KCOMMON_H

#include "../hrt_kernel.h"
#include "kmath.h"

#include <math.h>
#include <stdlib.h>

#define K_API "aclopCompileAndExecute"

/* Dense index of the dtypes kernels implement. */
enum { K_F32, K_F16, K_BF16, K_F64, K_I8, K_U8, K_I16, K_I32, K_I64, K_BOOL, K_U16, K_U32, K_U64, K_NTYPES };

static inline int k_index(aclDataType dt) {
    switch (dt) {
    case ACL_FLOAT: return K_F32;
    case ACL_FLOAT16: return K_F16;
    case ACL_BF16: return K_BF16;
    case ACL_DOUBLE: return K_F64;
    case ACL_INT8: return K_I8;
    case ACL_UINT8: return K_U8;
    case ACL_INT16: return K_I16;
    case ACL_INT32: return K_I32;
    case ACL_INT64: return K_I64;
    case ACL_BOOL: return K_BOOL;
    case ACL_UINT16: return K_U16;
    case ACL_UINT32: return K_U32;
    case ACL_UINT64: return K_U64;
    default: return -1;
    }
}

static inline bool k_is_float(aclDataType dt) {
    return dt == ACL_FLOAT || dt == ACL_FLOAT16 || dt == ACL_BF16 || dt == ACL_DOUBLE;
}
static inline bool k_is_half(aclDataType dt) { return dt == ACL_FLOAT16 || dt == ACL_BF16; }

/* Elements per parallel chunk for cheap elementwise work (~50-100 us). */
#define K_GRAIN (1 << 16)
/* Elements per float32 scratch block when widening float16/bfloat16. */
#define K_BLOCK 512
/* Bound of window attrs (ksize, strides, pads, dilations): far beyond any
 * real image, small enough that no product of two overflows and no
 * per-window-column table is a giant allocation. */
#define K_MAX_WINDOW ((int64_t)1 << 20)

/* float16/bfloat16 <-> float32 for a run of elements (F16C when available).
 * k_to_f32 also accepts ACL_FLOAT (a copy) and ACL_DOUBLE (rounded). */
void k_to_f32(const void *src, aclDataType dt, float *dst, int64_t n);
void k_from_f32(const float *src, aclDataType dt, void *dst, int64_t n);
/* Load one element of any kernel dtype as double / store from double. */
double k_load_d(const void *p, aclDataType dt, int64_t i);
void k_store_d(void *p, aclDataType dt, int64_t i, double v);

/* A broadcast plan: the output index space with up to 3 inputs, dims of
 * size 1 dropped and neighbours with the same broadcast pattern merged. */
typedef struct {
    int nin;
    int ndim;
    int64_t numel;
    int64_t dims[HRT_MAXDIM];
    int64_t strides[3][HRT_MAXDIM];  /* element strides, 0 where broadcast */
} k_bcast;

/* numpy broadcast of n shapes into out; returns false if incompatible. */
bool k_broadcast_shape(const hrt_tensor *const *ins, int n, int64_t *out, int *out_ndim);
/* Build the plan for inputs broadcast to `out_dims`. */
void k_bcast_plan(k_bcast *p, const hrt_tensor *const *ins, int n, const int64_t *out_dims, int out_ndim);
/* Same, from raw shapes (dims[j], nd[j]). */
void k_bcast_plan_dims(k_bcast *p, const int64_t *const *dims, const int *nd, int n, const int64_t *out_dims,
                       int out_ndim);
/* Offsets of inputs for the flat output index `i` of the plan's outer space
 * (all dims but the last). */
static inline void k_bcast_offsets(const k_bcast *p, int64_t outer, int64_t *off) {
    for (int j = 0; j < p->nin; j++) off[j] = 0;
    for (int d = p->ndim - 2; d >= 0; d--) {
        int64_t q = outer % p->dims[d];
        outer /= p->dims[d];
        for (int j = 0; j < p->nin; j++) off[j] += q * p->strides[j][d];
    }
}

/* Row-major contiguous strides (in elements) of a shape. */
static inline void k_strides(const int64_t *dims, int ndim, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

static inline int64_t k_prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

/* ------------------------------------------------------- compile helpers */
/* Normalise axis into [0, ndim) (numpy rules); error names the op and what. */
aclError k_norm_axis(const hrt_kernel *k, int64_t axis, int ndim, const char *what, int *out);
/* Read a list of axes from attr `name` (input < 0) or from const/host input
 * `input`; normalise, reject duplicates; sets a bitmask of reduced dims.
 * `present` (optional) tells whether the list was given at all. */
aclError k_get_axes(const hrt_kernel *k, const aclopAttr *attrs, const char *name, int input, bool required,
                    int ndim, unsigned *mask, int *count, bool *present);
/* hrt_tensor_int_values, except that a zero-element input gives n = 0 (an
 * empty value list has no bytes, so the runtime cannot mark it const). */
aclError k_int_values(const hrt_kernel *k, int input, int64_t *vals, int max, int *n);
/* Require an output dtype. */
aclError k_expect_out_dtype(const hrt_kernel *k, int j, aclDataType want);
/* Require every present input in [from, to) to have dtype `dt`. */
aclError k_expect_same_dtype(const hrt_kernel *k, int from, int to, aclDataType dt);
/* Error: unsupported (op, dtype). */
aclError k_unsupported(const hrt_kernel *k, const char *what, aclDataType dt);
/* A ListInt attr with exactly n values (n < 0: any); copies into out. */
aclError k_attr_ints(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required, int n,
                     const int64_t *def, int64_t *out, int max, int *got);
/* The spatial layout of a 4-D tensor: 0 NCHW, 1 NHWC.  The desc format wins
 * when it is NCHW/NHWC; with ND the data_format attr (or `def`) decides; an
 * explicit attr that contradicts the desc is ACL_ERROR_FORMAT_NOT_MATCH. */
aclError k_layout(const hrt_kernel *k, const aclopAttr *a, const hrt_tensor *t, const char *def, int *nhwc);

/* ------------------------------------------------------- shared kernels */
/* Copy kernel (input 0 -> output 0, same byte size): Identity, Reshape, ... */
aclError k_copy_run(const hrt_kernel *k, void *const *in, void *const *out);
void k_parallel_memcpy(void *dst, const void *src, size_t n);
/* Fill `n` elements of size `esz` with the bytes at `val`. */
void k_fill(void *dst, const void *val, size_t esz, int64_t n);

/* OpenBLAS runs single-threaded and hrt_sgemm tiles GEMMs of at least this
 * many multiply-adds over the pool itself (blas.c, PAR_MIN_MACS); below it a
 * GEMM runs on the calling thread, so kernels with many such GEMMs (batched
 * matmul, grouped convolution) spread them over the pool instead. */
#define K_GEMM_SMALL ((double)(1 << 21))
bool hrt_blas_loaded(void);

/* 2-D convolution geometry shared by conv.c and conv_direct.c */
typedef struct {
    int64_t N, C, H, W, Cout, Ho, Wo, kh, kw, sh, sw, dh, dw, pt, pl, groups, cin_g, cout_g;
    bool nhwc;
} k_conv_geom;
/* An activation fused into a kernel's epilogue (fused.c): the `activation`
 * attr of aioge's fused ops (none, Relu, LeakyRelu (alpha), Sigmoid, Tanh,
 * Gelu, GeluTanh, Clip (min, max), Swish, HardSwish), applied in place. */
typedef struct k_act {
    int code;    /* K_ACT_NONE: nothing to do */
    double a, b; /* LeakyRelu: alpha; Clip: min, max */
    int inl;     /* set by k_act_from_attrs: K_ACT_INL_RELU / _CLIP (lo, hi), _SWISH / _HARD_SWISH, which
                  * k_act_tile inlines; K_ACT_INL_SIGMOID ... _HARD_SWISH, which the packed GEMM inlines */
    float lo, hi;
    /* k_act_apply_f32, set by k_act_from_attrs: how the layers below the kernels (the packed
     * GEMM's epilogue, gemm_small.c) apply it without calling up into the kernels */
    void (*apply_f32)(const struct k_act *act, float *x, int64_t n);
} k_act;
#define K_ACT_NONE 64
#define K_ACT_INL_RELU 1
#define K_ACT_INL_CLIP 2
#define K_ACT_INL_SIGMOID 3
#define K_ACT_INL_TANH 4
#define K_ACT_INL_GELU 5
#define K_ACT_INL_GELU_TANH 6
#define K_ACT_INL_SWISH 7
#define K_ACT_INL_HARD_SWISH 8
/* Read activation/alpha/min/max from attrs (absent: none). */
aclError k_act_from_attrs(const hrt_kernel *k, const aclopAttr *attrs, k_act *act);
void k_act_apply_f32(const k_act *act, float *x, int64_t n);
void k_act_apply_f64(const k_act *act, double *x, int64_t n);
/* k_act_apply_f32 for a kernel's output tile (8-64 floats, once per tile): Relu, Clip, Swish and
 * HardSwish inline, the rest through act->apply_f32 (so the packed GEMM below the kernels may use it too).  act from
 * k_act_from_attrs (a zeroed one: nothing to apply). */
static inline void k_act_tile(const k_act *act, float *x, int64_t n) {
    if (act->inl == K_ACT_INL_RELU) {
        for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : (x[i] != x[i] ? x[i] : 0);
    } else if (act->inl == K_ACT_INL_CLIP) {
        const float lo = act->lo, hi = act->hi;
        for (int64_t i = 0; i < n; i++) x[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);
    } else if (act->inl == K_ACT_INL_HARD_SWISH) { /* k_hard_swishf: whole tiles vectorise */
        for (int64_t i = 0; i < n; i++) x[i] = k_hard_swishf(x[i]);
    } else if (act->inl == K_ACT_INL_SWISH) { /* kmath.h's vector form, bit-identical to k_swishf */
        K_VROW(x, x, n, v, k_vswishf(v));
    } else if (act->apply_f32) {
        act->apply_f32(act, x, n);
    }
}
/* Same, split over the intra-op pool. */
void k_act_apply_parallel(const k_act *act, void *x, int64_t n, bool dbl);

/* float32 conv as a packed GEMM with fused im2col (conv_direct.c); w is
 * OIHW for NCHW and OHWI for NHWC, bias may be NULL; act (may be NULL) runs
 * on each output tile before it is stored. */
aclError hrt_conv2d_direct_f32(const hrt_kernel *k, const k_conv_geom *g, const float *x, const float *w,
                               const float *bias, const k_act *act, float *y);
/* 3x3 stride-1 NCHW float32 conv by Winograd F(2x2, 3x3) (conv_winograd.c);
 * _ok: the geometry qualifies (and AIOGE_HOST_WINOGRAD is not 0); w is OIHW. */
bool hrt_conv2d_winograd_ok(const k_conv_geom *g);
aclError hrt_conv2d_winograd_f32(const hrt_kernel *k, const k_conv_geom *g, const float *x, const float *w,
                                 const float *bias, const k_act *act, float *y);
/* the same in two steps: U = G w G^T transformed and packed (once, when a model loads; NULL: no
 * memory), then convolutions reading it */
bool hrt_conv2d_winograd_packed_ok(const k_conv_geom *g); /* eligible with U packed at load */
float *hrt_conv2d_winograd_pack(const k_conv_geom *g, const float *w, size_t *bytes, bool parallel);
aclError hrt_conv2d_winograd_packed_f32(const hrt_kernel *k, const k_conv_geom *g, const float *x,
                                        const float *upack, const float *bias, const k_act *act, float *y);

/* 1x1 NCHW float32 conv (groups 1) on small planes as the packed product C[N*Ho*Wo, Cout] =
 * X^T . W^T with W^T packed once (pb, hrt_sgemm_pack_b_shared(true, Cout, Cin, w, Cin)) and bias +
 * activation in its epilogue (conv_direct.c); _ok: the geometry runs there; w: the OIHW filter
 * (the unpacked route of hrt_sgemm_packed). */
bool hrt_conv2d_pointwise_ok(const k_conv_geom *g);
aclError hrt_conv2d_pointwise_f32(const hrt_kernel *k, const k_conv_geom *g, const float *x, const hrt_sgemm_pb *pb,
                                  const float *w, const float *bias, const k_act *act, float *y);

/* NCHW float32 depthwise conv (groups == C_in, any multiplier) and grouped
 * conv with few input channels a group by a direct register-blocked kernel
 * (conv_dw.c); _ok: the geometry runs there; w is OIHW. */
bool hrt_conv2d_dw_ok(const k_conv_geom *g);
aclError hrt_conv2d_dw_f32(const hrt_kernel *k, const k_conv_geom *g, const float *x, const float *w,
                           const float *bias, const k_act *act, float *y);

/* Outputs at least this big are written with non-temporal stores (they do
 * not fit in cache anyway; streaming saves the read-for-ownership). */
#define K_STREAM_BYTES ((size_t)16 << 20)
/* Copy n floats with streaming stores where the target allows (x86 AVX),
 * ending with a store fence; a plain memcpy elsewhere. */
void k_stream_store_f32(float *dst, const float *src, int64_t n);

/* A scratch buffer from malloc; NULL sets the task failure text. */
void *k_scratch(const hrt_kernel *k, size_t bytes);

#endif
