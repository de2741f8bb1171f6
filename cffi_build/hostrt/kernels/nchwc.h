/* Shared by the NCHWc8 kernels (nchwc.c, nchwc_conv.c, nchwc_dw.c); the 8x8 register transpose
 * between 8 channel planes and 8 blocked pixels is ukernel.h's uk_tr8. */
#ifndef AIOGE_HRT_NCHWC_H
#define AIOGE_HRT_NCHWC_H

#include "kcommon.h"
#include "ukernel.h"

typedef int32_t v8i __attribute__((vector_size(32)));

/* lanes of a where m is set, else b */
static inline v8f nc_sel(v8i m, v8f a, v8f b) { return (v8f)(((v8i)a & m) | ((v8i)b & ~m)); }

/* nchwc_dw.c: _NchwcConv2D's depthwise convs (a block's 8 channels in the lanes): the geometry of one conv (H, W: the input plane; kh x kw taps, strides sh, sw,
 * pads top / left) and its epilogue (the activation). */
typedef struct {
    int64_t H, W, Ho, Wo, kh, kw, sh, sw, pt, pl;
    bool has_act;
    k_act act;
} nc_dwl;

/* whether hrt_nchwc_dw_row takes this depthwise conv: kw 3 or 5, kh up to 7, column stride 1 or 2, no dilation */
bool hrt_nchwc_dw_ok(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw);
/* output row oy of one (image, block) plane: xb the input block [H][W][8], wt its packed filter
 * [kh][kw][8], bias (8 floats) and z (the residual row) optional, y the output row [Wo][8] */
void hrt_nchwc_dw_row(const nc_dwl *g, const float *xb, const float *wt, const float *bias, const float *z, float *y,
                      int64_t oy);

#endif
