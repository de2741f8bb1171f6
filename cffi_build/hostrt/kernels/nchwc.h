/* Shared by the NCHWc8 kernels (nchwc.c, nchwc_conv.c, nchwc_dw.c); the 8x8 register transpose
 * between 8 channel planes and 8 blocked pixels is ukernel.h's uk_tr8.
 *
 * Kernel families: the hot code of the three files (reorder transposes, pool rows, conv tiles,
 * depthwise rows) lives in template headers (nchwc_pool_tmpl.h, nchwc_conv_tmpl.h,
 * nchwc_dw_tmpl.h), each file including its own once per family through nchwc_families.h: avx512
 * (the same 8-lane source with AVX-512F/VL: 32 vector registers), avx2 (AVX2 + FMA) and generic
 * (the build's own flags: SSE pairs in a portable build).  The family runs where the GEMM's family
 * switch (gemm_small.c: AIOGE_HOST_ISA, aiogeHostSetKernelFamily) says: hrt_nchwc_family(). */
#ifndef AIOGE_HRT_NCHWC_H
#define AIOGE_HRT_NCHWC_H

#include "kcommon.h"
#include "ukernel.h"

typedef int32_t v8i __attribute__((vector_size(32)));

/* lanes of a where m is set, else b */
static inline __attribute__((always_inline)) v8f nc_sel(v8i m, v8f a, v8f b) {
    return (v8f)(((v8i)a & m) | ((v8i)b & ~m));
}

/* nchwc_dw.c: _NchwcConv2D's depthwise convs (a block's 8 channels in the lanes): the geometry of one conv (H, W: the input plane; kh x kw taps, strides sh, sw,
 * pads top / left) and its epilogue (the activation). */
typedef struct {
    int64_t H, W, Ho, Wo, kh, kw, sh, sw, pt, pl;
    bool has_act;
    k_act act;
} nc_dwl;

/* whether a family's dw_row takes this depthwise conv: kw 3 or 5, kh up to 7, column stride 1 or 2, no dilation */
bool hrt_nchwc_dw_ok(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw);

/* The reorder between NCHW and NCHWc8 (a family's `reorder`): its plan and its work items'
 * context, (image * block, row) per item.  nchwc.c's reorder op runs it, and so does nchwc_conv.c's
 * Winograd route for its NCHW scratch input. */
typedef struct {
    int64_t CB, H, W; /* blocks, plane */
    bool to;          /* NCHW -> NCHWc8 */
} nr_plan;

typedef struct {
    const nr_plan *p;
    const float *x;
    float *y;
} nr_ctx;

/* One family's kernels: the pool's work functions of the ops' runs (nchwc.c: reorder, pool,
 * pool_global; nchwc_conv.c: the rest). */
typedef struct {
    const char *name;
    hrt_range_fn reorder, pool, pool_global;
    hrt_range_fn conv, sub, block, pad, virt, dw_virt;
} hrt_nchwc_fns;

#define NC_CAT_(a, b) a##_##b
#define NC_CAT(a, b) NC_CAT_(a, b)
/* the family's functions, declared: dw_row (nchwc_dw.c, called by conv's rows) and the table's */
#define NC_FAMILY_DECL(fam)                                                                            \
    void hrt_nchwc_dw_row_##fam(const nc_dwl *g, const float *xb, const float *wt, const float *bias, \
                                const float *z, float *y, int64_t oy);                                 \
    void hrt_nc_reorder_##fam(void *, int64_t, int64_t);                                               \
    void hrt_nc_pool_##fam(void *, int64_t, int64_t);                                                  \
    void hrt_nc_pool_global_##fam(void *, int64_t, int64_t);                                           \
    void hrt_nc_conv_##fam(void *, int64_t, int64_t);                                                  \
    void hrt_nc_sub_##fam(void *, int64_t, int64_t);                                                   \
    void hrt_nc_block_##fam(void *, int64_t, int64_t);                                                 \
    void hrt_nc_pad_##fam(void *, int64_t, int64_t);                                                   \
    void hrt_nc_virt_##fam(void *, int64_t, int64_t);                                                  \
    void hrt_nc_dw_virt_##fam(void *, int64_t, int64_t);                                               \
    extern const hrt_nchwc_fns hrt_nchwc_fns_##fam;
#define NC_FAMILY_TABLE(fam)                                                                           \
    const hrt_nchwc_fns hrt_nchwc_fns_##fam = {#fam,                                                   \
                                               hrt_nc_reorder_##fam,                                   \
                                               hrt_nc_pool_##fam,                                      \
                                               hrt_nc_pool_global_##fam,                               \
                                               hrt_nc_conv_##fam,                                      \
                                               hrt_nc_sub_##fam,                                       \
                                               hrt_nc_block_##fam,                                     \
                                               hrt_nc_pad_##fam,                                       \
                                               hrt_nc_virt_##fam,                                      \
                                               hrt_nc_dw_virt_##fam};

#if defined(__x86_64__) && defined(__GNUC__)
#define NC_HAVE_X86 1
NC_FAMILY_DECL(avx512)
NC_FAMILY_DECL(avx2)
#endif
NC_FAMILY_DECL(generic)

/* The 8-lane kernel family the runtime's one switch (gemm_small.c: AIOGE_HOST_ISA,
 * aiogeHostSetKernelFamily) names now, and the NCHWc8 kernels of it (nchwc.c). */
typedef enum { HRT_ISA_GENERIC, HRT_ISA_AVX2, HRT_ISA_AVX512 } hrt_isa;
hrt_isa hrt_kernel_isa(void);
const hrt_nchwc_fns *hrt_nchwc_family(void);

#endif
