/* _NchwcConv2D's depthwise convs with 3- or 5-wide filters and no dilation, on any plane
 * (nchwc_conv.c routes them here; its padded-copy route keeps the others): NCHWc8, a block's 8
 * channels in a vector's lanes, one output row of one (image, block) plane a call.
 *
 * The manner of MLAS's MlasConvDepthwiseFloatKernel, with input reuse across taps: a tile is
 * DW_P output pixels of a row in DW_P vector accumulators; for each filter row the kw filter
 * vectors are loaded once, then each input pixel the tile's window spans ((DW_P - 1) * S + kw of
 * them) is loaded once and multiply-added into every accumulator whose window holds it (kw / S of
 * them).  A 3x3 stride-1 tile thus does 24 multiply-adds for 13 loads, where a load per
 * multiply-add (the generic depthwise tile) bound the kernel on loads.  kw and the stride are
 * compile-time (3 / 5 x 1 / 2), so the tile is straight-line code on registers: DW_P + kw + 1
 * vectors.
 *
 * Borders with no per-pixel clipping: rows outside the input are skipped per filter row; a tile
 * whose window leaves the row on either side (the first, the last, a row's short remainder) is
 * run on a copy of its window (kh rows of (DW_P - 1) * S + kw pixels, zeros outside the input,
 * on the stack) and stores only its pixels inside the output row.  Bias starts the accumulators;
 * the residual and Relu / Clip run on them as they are stored, other activations on the stored
 * row (in L1).  The pool's work items are consecutive output rows of a plane (nchwc_conv.c's
 * nc_chunk), so the kh input rows a row reads stay in L1 for the next one. */
#include "kcommon.h"

#include "nchwc.h"

#define DW_P 8      /* output pixels a tile */
#define DW_KHMAX 7  /* filter rows, at most */

bool hrt_nchwc_dw_ok(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw) {
    return (kw == 3 || kw == 5) && kh >= 1 && kh <= DW_KHMAX && sh >= 1 && (sw == 1 || sw == 2) &&
           dh == 1 && dw == 1;
}

/* the tile's accumulators (NP output pixels): x its window's first pixel, nr filter rows (w) over
 * input rows rs floats apart */
static inline __attribute__((always_inline)) void dw_acc(const float *x, int64_t rs, const float *w, int64_t nr, v8f bv,
                                                         const int KW, const int S, const int NP, v8f *acc) {
#pragma GCC unroll 8
    for (int q = 0; q < NP; q++) acc[q] = bv;
    for (int64_t r = 0; r < nr; r++) {
        const float *xr = x + r * rs, *wr = w + r * KW * 8;
        v8f wv[5];
#pragma GCC unroll 5
        for (int k = 0; k < KW; k++) wv[k] = ld8(wr + k * 8);
#pragma GCC unroll 19
        for (int j = 0; j < (NP - 1) * S + KW; j++) {
            v8f v = ld8(xr + j * 8);
#ifdef __AVX__ /* one load an input pixel, reused by its taps (GCC folded a reload into each) */
            __asm__("" : "+x"(v));
#endif
#pragma GCC unroll 8
            for (int q = 0; q < NP; q++) {
                const int k = j - q * S;
                if (k >= 0 && k < KW) acc[q] += wv[k] * v;
            }
        }
    }
}

/* + residual, Relu / Clip, store NP pixels */
static inline __attribute__((always_inline)) void dw_store(const nc_dwl *g, const v8f *acc, const int NP, const float *z,
                                                           float *y) {
    const int inl = g->act.inl;
    const float lo = g->act.lo, hi = g->act.hi;
    const v8f zero = {0, 0, 0, 0, 0, 0, 0, 0}, vlo = {lo, lo, lo, lo, lo, lo, lo, lo}, vhi = {hi, hi, hi, hi, hi, hi, hi, hi};
#pragma GCC unroll 8
    for (int q = 0; q < NP; q++) {
        v8f v = acc[q];
        if (z) v += ld8(z + q * 8);
        if (inl == K_ACT_INL_RELU) v = nc_sel(v < zero, zero, v);
        else if (inl == K_ACT_INL_CLIP) v = nc_sel(v < vlo, vlo, nc_sel(v > vhi, vhi, v));
        st8(y + q * 8, v);
    }
}

/* NP interior pixels from ox */
static inline __attribute__((always_inline)) void dw_tile(const nc_dwl *g, const float *xr, const float *wr, int64_t nr,
                                                          v8f bv, const float *z, float *y, int64_t ox, const int KW,
                                                          const int S, const int NP) {
    v8f acc[DW_P];
    dw_acc(xr + (ox * S - g->pl) * 8, g->W * 8, wr, nr, bv, KW, S, NP, acc);
    dw_store(g, acc, NP, z ? z + ox * 8 : NULL, y + ox * 8);
}

/* a border pixel: its taps inside the row only */
static inline __attribute__((always_inline)) void dw_border(const nc_dwl *g, const float *xr, const float *wr, int64_t nr,
                                                            v8f bv, const float *z, float *y, int64_t ox, const int KW,
                                                            const int S) {
    const int64_t ix0 = ox * S - g->pl;
    const int k0 = ix0 < 0 ? (int)-ix0 : 0, k1 = g->W - ix0 < KW ? (int)(g->W - ix0) : KW;
    v8f acc = bv;
    for (int64_t r = 0; r < nr; r++)
        for (int k = k0; k < k1; k++) acc += ld8(wr + (r * KW + k) * 8) * ld8(xr + r * g->W * 8 + (ix0 + k) * 8);
    dw_store(g, &acc, 1, z ? z + ox * 8 : NULL, y + ox * 8);
}

static inline __attribute__((always_inline)) void dw_row(const nc_dwl *g, const float *xb, const float *wt,
                                                         const float *bias, const float *z, float *y, int64_t oy,
                                                         const int KW, const int S) {
    const int64_t W = g->W, Wo = g->Wo, kh = g->kh, iy0 = oy * g->sh - g->pt;
    int64_t ky0 = iy0 < 0 ? -iy0 : 0, ky1 = g->H - iy0 < kh ? g->H - iy0 : kh;
    if (ky1 < ky0) ky1 = ky0;
    v8f bv = {0, 0, 0, 0, 0, 0, 0, 0};
    if (bias) bv = ld8(bias);
    const float *xr = xb + (iy0 + ky0) * W * 8, *wr = wt + ky0 * KW * 8;
    const int64_t nr = ky1 - ky0;
    /* interior columns [lo, hi): every tap inside the row */
    int64_t lo = (g->pl + S - 1) / S, hi = W - KW + g->pl < 0 ? 0 : (W - KW + g->pl) / S + 1;
    if (hi > Wo) hi = Wo;
    if (lo > hi) lo = hi;
    int64_t ox = 0;
    for (; ox < lo; ox++) dw_border(g, xr, wr, nr, bv, z, y, ox, KW, S);
    for (; ox + DW_P <= hi; ox += DW_P) dw_tile(g, xr, wr, nr, bv, z, y, ox, KW, S, DW_P);
    switch (hi - ox) {
    case 7: dw_tile(g, xr, wr, nr, bv, z, y, ox, KW, S, 7); break;
    case 6: dw_tile(g, xr, wr, nr, bv, z, y, ox, KW, S, 6); break;
    case 5: dw_tile(g, xr, wr, nr, bv, z, y, ox, KW, S, 5); break;
    case 4: dw_tile(g, xr, wr, nr, bv, z, y, ox, KW, S, 4); break;
    case 3: dw_tile(g, xr, wr, nr, bv, z, y, ox, KW, S, 3); break;
    case 2: dw_tile(g, xr, wr, nr, bv, z, y, ox, KW, S, 2); break;
    case 1: dw_tile(g, xr, wr, nr, bv, z, y, ox, KW, S, 1); break;
    default: break;
    }
    for (ox = hi; ox < Wo; ox++) dw_border(g, xr, wr, nr, bv, z, y, ox, KW, S);
    if (g->has_act && g->act.inl != K_ACT_INL_RELU && g->act.inl != K_ACT_INL_CLIP) k_act_tile(&g->act, y, Wo * 8);
}

void hrt_nchwc_dw_row(const nc_dwl *g, const float *xb, const float *wt, const float *bias, const float *z, float *y,
                      int64_t oy) {
    if (g->kw == 3) {
        if (g->sw == 1) dw_row(g, xb, wt, bias, z, y, oy, 3, 1);
        else dw_row(g, xb, wt, bias, z, y, oy, 3, 2);
    } else {
        if (g->sw == 1) dw_row(g, xb, wt, bias, z, y, oy, 5, 1);
        else dw_row(g, xb, wt, bias, z, y, oy, 5, 2);
    }
}
