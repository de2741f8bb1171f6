/* _NchwcConv2D: float32 2-D convolution in the blocked layout NCHWc8 (the graph engine's blocked
 * conv chains; nchwc.c holds the reorders and the pool).  A tensor of logical NCHW shape
 * [N, C, H, W] (C % 8 == 0) is stored as [N, C/8, H, W, 8]: channel c at block c / 8, lane c % 8.
 *
 * Inputs (x, w, b?, z?): x blocked [N, Cin/8, H, W, 8]; w the OIHW filter [Cout, Cin/groups, kh,
 * kw]; b an optional bias [Cout]; z an optional blocked residual [N, Cout/8, Ho, Wo, 8];
 * y = act(conv(x, w) + b + z), blocked [N, Cout/8, Ho, Wo, 8].  Attrs as _FusedConv2D's: strides
 * and dilations (4 values, NCHW order), pads [top, bottom, left, right], groups (or group),
 * activation (k_act_from_attrs) and its params.  groups: 1, depthwise (groups == Cin == Cout) or
 * grouped with Cin/groups and Cout/groups multiples of 8; anything else is refused at compile.
 *
 * A direct kernel in the manner of MLAS's MlasConvNchwcFloatKernel: the filter is packed into
 * [Cout/8][Cin_g/8][kh][kw][8 ic][8 oc] (once at model load for a constant filter: the pack hooks;
 * at compile for a filter the op holds as a const input; per run otherwise); an output tile is
 * NC_NB output-channel blocks x NC_NP pixels of one output row in NC_NB * NC_NP vector accumulators; for each input-channel block, tap and input lane one
 * input float is broadcast and multiplied with the NC_NB filter vectors.  Output columns whose
 * taps all lie inside the input row run the full tiles; the border columns run one pixel at a time
 * with their taps clipped (no padded copy of the input); rows outside the input are skipped per
 * tap row.  A 1x1 unpadded conv is one long row (the whole plane; a strided one's pixels gathered
 * into a scratch first).  Depthwise: the 8
 * channels of a block in the lanes, NC_DWP pixels a tile, one filter vector a tap.  Bias, the
 * residual and the activation run on the accumulators' tile as it is stored.  Work items are
 * (image, output-channel tile, output row) over the pool.  GCC vector types: AVX2+FMA with
 * -march=native, SSE pairs in a portable build (the same arithmetic order: results match). */
#include "kcommon.h"

#include "nchwc.h"

#define NC_NB 2  /* output-channel blocks a tile */
#define NC_NP 6  /* output pixels a tile (2 x 6 accumulators + 2 filter vectors + 1 broadcast) */
#define NC_DWP 8 /* depthwise: output pixels a tile */

typedef struct {
    int64_t N, CB, H, W;   /* input: blocks, plane (a 1x1 stride-1 unpadded conv: one row of H*W) */
    int64_t COB, Ho, Wo;   /* output */
    int64_t kh, kw, sh, sw, dh, dw, pt, pl;
    int64_t Cout, cin_g, groups;
    int64_t cibg, cobg;    /* blocks a group (depthwise: 1 and 1, a block's lanes are its channels) */
    int64_t ox_lo, ox_hi;  /* output columns [ox_lo, ox_hi) have every tap inside the input row */
    bool dwise, has_bias, has_z, has_act;
    k_act act;
    int64_t wn;            /* packed filter floats */
    float *wconst;         /* a constant filter of a single op (aioge.op's Const) packed at compile */
    bool wino;             /* 3x3 stride 1 where conv_winograd.c takes the NCHW conv: run there */
    bool pw;               /* 1x1 unpadded, groups 1 or grouped: nc_pw_row */
    bool sub;              /* pw strided: the input's strided pixels gathered, then one long row */
    int64_t sH, sW, ssh, ssw, sHo, sWo; /* sub: the input plane, strides, the output plane */
    bool virt;             /* stride 1 on small planes: a padded copy, rows run as one (nc_virt_chunk) */
    int64_t pb, pr, Hp, Wp, pps; /* virt: pads, a phase plane of the padded copy, floats / 8 a plane */
    int64_t nph;           /* virt: phase planes a block (sh * sw) */
    int64_t *toff;         /* virt (not depthwise): each tap's float offset in a block of the copy */
    k_conv_geom g;         /* the NCHW geometry (wino) */
    bool dwl;              /* depthwise that nchwc_dw.c takes (kw 3 or 5, no dilation): its rows */
    nc_dwl dl;
} nc_plan;

typedef struct {
    const nc_plan *p;
    const float *x, *w, *b, *z;
    float *y;
    int64_t tiles_g, tiles; /* output-channel tiles a group, in all */
    _Atomic int failed;     /* a worker could not get its scratch */
} nc_ctx;

/* w (OIHW) -> [Cout/8][cin_g/8][kh][kw][8 ic][8 oc], or depthwise [C/8][kh][kw][8] */
static void nc_pack_w(const nc_plan *p, const float *w, float *wp) {
    const int64_t kk = p->kh * p->kw;
    if (p->dwise) {
        for (int64_t cb = 0; cb < p->COB; cb++)
            for (int64_t t = 0; t < kk; t++)
                for (int64_t l = 0; l < 8; l++) wp[(cb * kk + t) * 8 + l] = w[(cb * 8 + l) * kk + t];
        return;
    }
    for (int64_t ob = 0; ob < p->COB; ob++)
        for (int64_t ib = 0; ib < p->cibg; ib++)
            for (int64_t t = 0; t < kk; t++) {
                float *d = wp + ((ob * p->cibg + ib) * kk + t) * 64;
                for (int64_t ic = 0; ic < 8; ic++)
                    for (int64_t oc = 0; oc < 8; oc++)
                        d[ic * 8 + oc] = w[((ob * 8 + oc) * p->cin_g + ib * 8 + ic) * kk + t];
            }
}

/* The epilogue of a tile: + residual, Relu / Clip on the accumulators (k_act_tile's rules: NaN
 * passes), store; other activations on the stored floats (in L1). */
static inline __attribute__((always_inline)) void nc_store(const nc_plan *p, v8f *acc, int nb, int np, const float *z,
                                                           float *y, int64_t ybs) {
    const int inl = p->act.inl;
    const float lo = p->act.lo, hi = p->act.hi;
    const v8f zero = {0, 0, 0, 0, 0, 0, 0, 0}, vlo = {lo, lo, lo, lo, lo, lo, lo, lo}, vhi = {hi, hi, hi, hi, hi, hi, hi, hi};
    for (int j = 0; j < nb; j++) {
        for (int q = 0; q < np; q++) {
            v8f v = acc[j * np + q];
            if (z) v += ld8(z + j * ybs + q * 8);
            if (inl == K_ACT_INL_RELU) v = nc_sel(v < zero, zero, v);
            else if (inl == K_ACT_INL_CLIP) v = nc_sel(v < vlo, vlo, nc_sel(v > vhi, vhi, v));
            st8(y + j * ybs + q * 8, v);
        }
        if (p->has_act && inl != K_ACT_INL_RELU && inl != K_ACT_INL_CLIP) k_act_tile(&p->act, y + j * ybs, (int64_t)np * 8);
    }
}

/* One input-channel block of a tile: for each of its 8 input lanes, the nb filter vectors (blocks
 * ostride floats apart) held in registers and multiplied with the lane's input float broadcast at
 * each of np pixels (xs floats apart) into nb x np accumulators.  Not unrolled: GCC's schedule of 8
 * unrolled lanes kept accumulators on the stack (~20% slower).  (A 4 x 3 tile, MLAS's pointwise
 * shape with the 3 broadcasts held and one filter vector at a time, measured no faster than 2 x 6 on
 * the 1x1 convs.) */
static inline __attribute__((always_inline)) void nc_lanes(const float *xk, const float *wk, int64_t ostride,
                                                           const int nb, const int np, const int64_t xs, v8f *acc) {
#pragma GCC unroll 1
    for (int ic = 0; ic < 8; ic++) {
        v8f wv[NC_NB];
        for (int j = 0; j < nb; j++) wv[j] = ld8(wk + j * ostride + ic * 8);
        for (int q = 0; q < np; q++) {
            const float s = xk[q * xs + ic];
            const v8f sv = {s, s, s, s, s, s, s, s};
            for (int j = 0; j < nb; j++) acc[j * np + q] += sv * wv[j];
        }
    }
}

/* The accumulators of one tile: nb output-channel blocks (filter wt, blocks ostride floats apart) x
 * np pixels of an output row, whose first pixel's window starts at input (iy0, ix0); taps
 * [ky0, ky1) x [kx0, kx1) (those inside the input).  xn: the group's first input block of the
 * image, blocks xps floats apart, rows xw pixels long; xs: the pixel stride (floats). */
static inline __attribute__((always_inline)) void nc_tile_acc(const nc_plan *p, const float *xn, const float *wt,
                                                              int64_t ostride, const float *bias, int64_t iy0,
                                                              int64_t ix0, int64_t ky0, int64_t ky1, int64_t kx0,
                                                              int64_t kx1, const int nb, const int np, const int64_t xs,
                                                              int64_t xps, int64_t xw, v8f *acc) {
    for (int j = 0; j < nb; j++) {
        v8f bv = {0, 0, 0, 0, 0, 0, 0, 0};
        if (bias) bv = ld8(bias + j * 8);
        for (int q = 0; q < np; q++) acc[j * np + q] = bv;
    }
    const int64_t kk = p->kh * p->kw;
    for (int64_t ib = 0; ib < p->cibg; ib++) {
        const float *xb = xn + ib * xps, *wb = wt + ib * kk * 64;
        for (int64_t ky = ky0; ky < ky1; ky++) {
            const float *xr = xb + ((iy0 + ky * p->dh) * xw + ix0) * 8, *wr = wb + ky * p->kw * 64;
            for (int64_t kx = kx0; kx < kx1; kx++) nc_lanes(xr + kx * p->dw * 8, wr + kx * 64, ostride, nb, np, xs, acc);
        }
    }
}

/* one tile of an output row, stored */
static inline __attribute__((always_inline)) void nc_tile(const nc_plan *p, const float *xn, const float *wt,
                                                          int64_t ostride, const float *bias, const float *z, float *y,
                                                          int64_t ybs, int64_t iy0, int64_t ix0, int64_t ky0,
                                                          int64_t ky1, int64_t kx0, int64_t kx1, const int nb,
                                                          const int np, const int64_t xs) {
    v8f acc[NC_NB * NC_NP];
    nc_tile_acc(p, xn, wt, ostride, bias, iy0, ix0, ky0, ky1, kx0, kx1, nb, np, xs, p->H * p->W * 8, p->W, acc);
    nc_store(p, acc, nb, np, z, y, ybs);
}

/* depthwise tile: np pixels of one output row of a channel block */
static inline __attribute__((always_inline)) void nc_dw_tile(const nc_plan *p, const float *xb, const float *wt,
                                                             const float *bias, const float *z, float *y, int64_t iy0,
                                                             int64_t ix0, int64_t ky0, int64_t ky1, int64_t kx0,
                                                             int64_t kx1, const int np, const int64_t xs) {
    v8f acc[NC_DWP];
    v8f bv = {0, 0, 0, 0, 0, 0, 0, 0};
    if (bias) bv = ld8(bias);
    for (int q = 0; q < np; q++) acc[q] = bv;
    const int64_t W = p->W;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *xr = xb + ((iy0 + ky * p->dh) * W + ix0) * 8, *wr = wt + ky * p->kw * 8;
        for (int64_t kx = kx0; kx < kx1; kx++) {
            const v8f wv = ld8(wr + kx * 8);
            const float *xk = xr + kx * p->dw * 8;
            for (int q = 0; q < np; q++) acc[q] += wv * ld8(xk + q * xs);
        }
    }
    nc_store(p, acc, 1, np, z, y, 0);
}

/* the taps [k0, k1) of a window starting at i0 (step d, k taps) that lie inside [0, n) */
static inline void nc_clip(int64_t i0, int64_t d, int64_t k, int64_t n, int64_t *k0, int64_t *k1) {
    int64_t a = 0, b = k;
    if (i0 < 0) a = (-i0 + d - 1) / d;
    if (i0 + (k - 1) * d >= n) b = i0 >= n ? 0 : (n - 1 - i0) / d + 1;
    if (b < a) b = a;
    *k0 = a;
    *k1 = b;
}

#define NC_TILE(NB, NP) nc_tile(p, xn, wt, ostride, bias, zr, yr, ybs, iy0, ix0, ky0, ky1, kx0, kx1, NB, NP, xs)

/* one output row of nb (1 or NC_NB) output-channel blocks */
static inline __attribute__((always_inline)) void nc_row(const nc_plan *p, const float *xn, const float *wt0,
                                                         int64_t ostride, const float *bias, const float *z0, float *y0,
                                                         int64_t ybs, int64_t oy, const int nb, const int64_t xs) {
    const int64_t iy0 = oy * p->sh - p->pt;
    int64_t ky0, ky1;
    nc_clip(iy0, p->dh, p->kh, p->H, &ky0, &ky1);
    const float *wt = wt0;
    for (int64_t ox = 0; ox < p->Wo;) {
        const int64_t ix0 = ox * p->sw - p->pl;
        const float *zr = z0 ? z0 + ox * 8 : NULL;
        float *yr = y0 + ox * 8;
        if (ox < p->ox_lo || ox >= p->ox_hi) { /* border: one pixel, taps clipped */
            int64_t kx0, kx1;
            nc_clip(ix0, p->dw, p->kw, p->W, &kx0, &kx1);
            NC_TILE(nb, 1);
            ox++;
            continue;
        }
        const int64_t kx0 = 0, kx1 = p->kw, n = p->ox_hi - ox;
        if (n >= NC_NP) {
            NC_TILE(nb, NC_NP);
            ox += NC_NP;
            continue;
        }
        switch (n) {
        case 5: NC_TILE(nb, 5); break;
        case 4: NC_TILE(nb, 4); break;
        case 3: NC_TILE(nb, 3); break;
        case 2: NC_TILE(nb, 2); break;
        default: NC_TILE(nb, 1); break;
        }
        ox += n;
    }
}

static inline __attribute__((always_inline)) void nc_dw_row(const nc_plan *p, const float *xb, const float *wt,
                                                            const float *bias, const float *z0, float *y0, int64_t oy,
                                                            const int64_t xs) {
    const int64_t iy0 = oy * p->sh - p->pt;
    int64_t ky0, ky1;
    nc_clip(iy0, p->dh, p->kh, p->H, &ky0, &ky1);
    for (int64_t ox = 0; ox < p->Wo;) {
        const int64_t ix0 = ox * p->sw - p->pl;
        const float *zr = z0 ? z0 + ox * 8 : NULL;
        float *yr = y0 + ox * 8;
        if (ox < p->ox_lo || ox >= p->ox_hi) {
            int64_t kx0, kx1;
            nc_clip(ix0, p->dw, p->kw, p->W, &kx0, &kx1);
            nc_dw_tile(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, kx0, kx1, 1, xs);
            ox++;
            continue;
        }
        const int64_t n = p->ox_hi - ox;
        switch (n >= NC_DWP ? NC_DWP : n) {
        case 8: nc_dw_tile(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 8, xs); break;
        case 7: nc_dw_tile(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 7, xs); break;
        case 6: nc_dw_tile(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 6, xs); break;
        case 5: nc_dw_tile(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 5, xs); break;
        case 4: nc_dw_tile(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 4, xs); break;
        case 3: nc_dw_tile(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 3, xs); break;
        case 2: nc_dw_tile(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 2, xs); break;
        default: nc_dw_tile(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 1, xs); break;
        }
        ox += n >= NC_DWP ? NC_DWP : n;
    }
}

/* ---- 1x1 unpadded convs (pointwise): a tile is a plain loop over the input-channel blocks (no
 * tap loops: the generic tile's clipped-tap loop nest kept accumulators on the stack), and the
 * input channels run in passes of about NC_KB blocks (MLAS's input-channel blocking): the tile's
 * filter panel of a pass (NC_NB x NC_KB x 64 floats, 8 KB) stays in L1 over the row's strips,
 * where the whole panel (36 KB at 576 channels, 80 KB at 1280) was streamed from L2 each strip.
 * A pass accumulates into the output row; the bias starts the first, the residual and the
 * activation end the last. */
#define NC_KB 16 /* input-channel blocks a pass, at most (128 channels) */

static inline __attribute__((always_inline)) void nc_pw_tile(const nc_plan *p, const float *x, const float *wt,
                                                             int64_t ostride, int64_t xps, int64_t nblk,
                                                             const float *bias, bool first, bool last, const float *z,
                                                             float *y, int64_t ybs, const int nb, const int np,
                                                             const int64_t xs) {
    v8f acc[NC_NB * NC_NP];
    for (int j = 0; j < nb; j++) {
        v8f bv = {0, 0, 0, 0, 0, 0, 0, 0};
        if (bias) bv = ld8(bias + j * 8);
        for (int q = 0; q < np; q++) acc[j * np + q] = first ? bv : ld8(y + j * ybs + q * 8);
    }
    for (int64_t ib = 0; ib < nblk; ib++) nc_lanes(x + ib * xps, wt + ib * 64, ostride, nb, np, xs, acc);
    if (last) nc_store(p, acc, nb, np, z, y, ybs);
    else
        for (int j = 0; j < nb; j++)
            for (int q = 0; q < np; q++) st8(y + j * ybs + q * 8, acc[j * np + q]);
}

#define NC_PW(NB, NP) \
    nc_pw_tile(p, xc + ox * xs, wc, ostride, xps, nblk, bias, first, last, z0 ? z0 + ox * 8 : NULL, y0 + ox * 8, ybs, NB, NP, xs)

/* one output row of nb output-channel blocks; xr: the row's first input pixel (block 0) */
static inline __attribute__((always_inline)) void nc_pw_row(const nc_plan *p, const float *xr, const float *wt,
                                                            int64_t ostride, const float *bias, const float *z0,
                                                            float *y0, int64_t ybs, const int nb, const int64_t xs) {
    const int64_t xps = p->H * p->W * 8, cib = p->cibg, npass = (cib + NC_KB - 1) / NC_KB;
    const int64_t per = (cib + npass - 1) / npass; /* even passes: 40 blocks as 14 + 14 + 12 */
    for (int64_t cb0 = 0; cb0 < cib; cb0 += per) {
        const int64_t nblk = cib - cb0 < per ? cib - cb0 : per;
        const bool first = cb0 == 0, last = cb0 + nblk >= cib;
        const float *xc = xr + cb0 * xps, *wc = wt + cb0 * 64;
        int64_t ox = 0;
        for (; ox + NC_NP <= p->Wo; ox += NC_NP) NC_PW(nb, NC_NP);
        switch (p->Wo - ox) {
        case 5: NC_PW(nb, 5); break;
        case 4: NC_PW(nb, 4); break;
        case 3: NC_PW(nb, 3); break;
        case 2: NC_PW(nb, 2); break;
        case 1: NC_PW(nb, 1); break;
        default: break;
        }
    }
}

/* items: (image, output-channel tile, output row) */
static void nc_chunk(void *vp, int64_t b, int64_t e) {
    const nc_ctx *c = vp;
    const nc_plan *p = c->p;
    const int64_t HW8 = p->H * p->W * 8, ybs = p->Ho * p->Wo * 8, kk = p->kh * p->kw;
    for (int64_t it = b; it < e; it++) {
        const int64_t oy = it % p->Ho, t = it / p->Ho % c->tiles, n = it / p->Ho / c->tiles;
        if (p->dwise) {
            const int64_t cb = t;
            const size_t off = (size_t)(((n * p->COB + cb) * p->Ho + oy) * p->Wo * 8);
            const float *xb = c->x + (n * p->CB + cb) * HW8, *wt = c->w + cb * kk * 8, *bias = c->b ? c->b + cb * 8 : NULL;
            const float *z0 = c->z ? c->z + off : NULL;
            if (p->dwl) hrt_nchwc_dw_row(&p->dl, xb, wt, bias, z0, c->y + off, oy);
            else if (p->sw == 1) nc_dw_row(p, xb, wt, bias, z0, c->y + off, oy, 8);
            else if (p->sw == 2) nc_dw_row(p, xb, wt, bias, z0, c->y + off, oy, 16);
            else nc_dw_row(p, xb, wt, bias, z0, c->y + off, oy, p->sw * 8);
            continue;
        }
        const int64_t g = t / c->tiles_g, ob0 = g * p->cobg + t % c->tiles_g * NC_NB;
        const int64_t nb = g * p->cobg + p->cobg - ob0 < NC_NB ? g * p->cobg + p->cobg - ob0 : NC_NB;
        const float *xn = c->x + (n * p->CB + g * p->cibg) * HW8;
        const int64_t ostride = p->cibg * kk * 64;
        const float *wt = c->w + ob0 * ostride, *bias = c->b ? c->b + ob0 * 8 : NULL;
        const size_t off = (size_t)(((n * p->COB + ob0) * p->Ho + oy) * p->Wo * 8);
        const float *z0 = c->z ? c->z + off : NULL;
        float *y0 = c->y + off;
        /* the pixel stride a compile-time constant for strides 1 and 2: the tile's broadcasts then
         * address its input pixels from one register (a runtime stride kept 48 addresses on the stack) */
        if (p->pw) { /* one row of stride 1 (a strided 1x1's pixels gathered first: p->sub) */
            if (nb == NC_NB) nc_pw_row(p, xn, wt, ostride, bias, z0, y0, ybs, NC_NB, 8);
            else nc_pw_row(p, xn, wt, ostride, bias, z0, y0, ybs, 1, 8);
            continue;
        }
        if (nb == NC_NB) {
            if (p->sw == 1) nc_row(p, xn, wt, ostride, bias, z0, y0, ybs, oy, NC_NB, 8);
            else if (p->sw == 2) nc_row(p, xn, wt, ostride, bias, z0, y0, ybs, oy, NC_NB, 16);
            else nc_row(p, xn, wt, ostride, bias, z0, y0, ybs, oy, NC_NB, p->sw * 8);
        } else {
            if (p->sw == 1) nc_row(p, xn, wt, ostride, bias, z0, y0, ybs, oy, 1, 8);
            else nc_row(p, xn, wt, ostride, bias, z0, y0, ybs, oy, 1, p->sw * 8);
        }
    }
}

static aclError nc_virt(const hrt_kernel *k, nc_ctx *c);

typedef struct {
    const nc_plan *p;
    const float *x;
    float *xs;
} nc_sub_ctx;

/* items (image * block, output row): the row's strided input pixels, gathered */
static void nc_sub_chunk(void *vp, int64_t b, int64_t e) {
    const nc_sub_ctx *c = vp;
    const nc_plan *p = c->p;
    for (int64_t it = b; it < e; it++) {
        const int64_t oy = it % p->sHo, nb = it / p->sHo;
        const float *src = c->x + (nb * p->sH + oy * p->ssh) * p->sW * 8;
        float *dst = c->xs + (nb * p->sHo + oy) * p->sWo * 8;
        for (int64_t ox = 0; ox < p->sWo; ox++) st8(dst + ox * 8, ld8(src + ox * p->ssw * 8));
    }
}

static aclError nc_conv(const hrt_kernel *k, void *const *in, void *const *out, const float *wp) {
    const nc_plan *p = k->plan;
    nc_ctx c = {p, in[0], wp, p->has_bias ? in[2] : NULL, p->has_z ? in[3] : NULL, out[0], 0, 0};
    if (p->dwise) c.tiles = p->COB;
    else {
        c.tiles_g = (p->cobg + NC_NB - 1) / NC_NB;
        c.tiles = p->groups * c.tiles_g;
    }
    if (p->virt) return nc_virt(k, &c);
    float *xs = NULL;
    if (p->sub) { /* a strided 1x1 reads 1 pixel of 2 (of 4 rows' worth): gathered once, full tiles after */
        const int64_t rows = p->N * p->CB * p->sHo;
        if (!(xs = k_scratch(k, sizeof(float) * (size_t)(rows * p->sWo * 8)))) return ACL_ERROR_RT_MEMORY_ALLOCATION;
        nc_sub_ctx sc = {p, c.x, xs};
        hrt_parallel_for(rows, K_GRAIN / (8 * p->sWo) + 1, nc_sub_chunk, &sc);
        c.x = xs;
    }
    const int64_t items = p->N * c.tiles * p->Ho;
    /* multiply-adds an item */
    const int64_t per = p->Wo * 8 * (p->dwise ? 1 : NC_NB * p->cibg * 8) * p->kh * p->kw + 1;
    hrt_parallel_for(items, (1 << 18) / per + 1, nc_chunk, &c);
    free(xs);
    return ACL_SUCCESS;
}

/* ---- 3x3 stride-1 convolutions by Winograd F(2x2, 3x3) (conv_winograd.c), which does 2.25x fewer
 * multiply-adds than the direct kernel (ResNet-18's 3x3 convs at 56x56 and 28x28: 2.1x the NCHW
 * time direct): the blocked input is reordered into NCHW scratch, the NCHW conv runs with the bias
 * and its filter transformed once (U, packed at load), and the output is reordered back with the
 * residual and the activation applied on the way (the reorders: ~2% of the conv's time). */
typedef struct {
    const nc_plan *p;
    const float *src, *z;
    float *dst;
    int64_t H, W; /* the plane reordered */
} nc_wino_ctx;

/* items (image * block, row): blocked -> NCHW */
static void nc_unblock_chunk(void *vp, int64_t b, int64_t e) {
    const nc_wino_ctx *c = vp;
    const int64_t H = c->H, W = c->W, HW = H * W;
    for (int64_t it = b; it < e; it++) {
        const int64_t iy = it % H, nb = it / H;
        const float *src = c->src + (nb * HW + iy * W) * 8;
        float *dst = c->dst + nb * 8 * HW + iy * W;
        int64_t ix = 0;
        for (; ix + 8 <= W; ix += 8) {
            v8f r[8];
            for (int i = 0; i < 8; i++) r[i] = ld8(src + (ix + i) * 8);
            uk_tr8(r);
            for (int j = 0; j < 8; j++) st8(dst + j * HW + ix, r[j]);
        }
        for (; ix < W; ix++)
            for (int j = 0; j < 8; j++) dst[j * HW + ix] = src[ix * 8 + j];
    }
}

static inline v8f nc_epi(const nc_plan *p, v8f v) {
    const float lo = p->act.lo, hi = p->act.hi;
    const v8f zero = {0, 0, 0, 0, 0, 0, 0, 0}, vlo = {lo, lo, lo, lo, lo, lo, lo, lo}, vhi = {hi, hi, hi, hi, hi, hi, hi, hi};
    if (p->act.inl == K_ACT_INL_RELU) return nc_sel(v < zero, zero, v);
    if (p->act.inl == K_ACT_INL_CLIP) return nc_sel(v < vlo, vlo, nc_sel(v > vhi, vhi, v));
    return v;
}

/* items (image * block, row): NCHW -> blocked, + z, activation */
static void nc_block_chunk(void *vp, int64_t b, int64_t e) {
    const nc_wino_ctx *c = vp;
    const nc_plan *p = c->p;
    const int64_t H = c->H, W = c->W, HW = H * W;
    const bool other = p->has_act && p->act.inl != K_ACT_INL_RELU && p->act.inl != K_ACT_INL_CLIP;
    for (int64_t it = b; it < e; it++) {
        const int64_t iy = it % H, nb = it / H;
        const float *src = c->src + nb * 8 * HW + iy * W, *z = c->z ? c->z + (nb * HW + iy * W) * 8 : NULL;
        float *dst = c->dst + (nb * HW + iy * W) * 8;
        int64_t ix = 0;
        for (; ix + 8 <= W; ix += 8) {
            v8f r[8];
            for (int j = 0; j < 8; j++) r[j] = ld8(src + j * HW + ix);
            uk_tr8(r);
            for (int i = 0; i < 8; i++) {
                v8f v = r[i];
                if (z) v += ld8(z + (ix + i) * 8);
                st8(dst + (ix + i) * 8, nc_epi(p, v));
            }
        }
        for (; ix < W; ix++) {
            v8f v;
            for (int j = 0; j < 8; j++) v[j] = src[j * HW + ix];
            if (z) v += ld8(z + ix * 8);
            st8(dst + ix * 8, nc_epi(p, v));
        }
        if (other) k_act_tile(&p->act, dst, W * 8);
    }
}

static aclError nc_wino(const hrt_kernel *k, void *const *in, void *const *out, const float *u) {
    const nc_plan *p = k->plan;
    const k_conv_geom *g = &p->g;
    const int64_t xn = g->N * g->C * g->H * g->W, yn = g->N * g->Cout * g->Ho * g->Wo;
    float *xs = k_scratch(k, sizeof(float) * (size_t)(xn + yn));
    if (!xs) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    float *ys = xs + xn;
    nc_wino_ctx c = {p, in[0], NULL, xs, g->H, g->W};
    hrt_parallel_for(g->N * p->CB * g->H, K_GRAIN / (8 * g->W) + 1, nc_unblock_chunk, &c);
    aclError rc = hrt_conv2d_winograd_packed_f32(k, g, xs, u, p->has_bias ? in[2] : NULL, NULL, ys);
    if (!rc) {
        nc_wino_ctx d = {p, ys, p->has_z ? in[3] : NULL, out[0], g->Ho, g->Wo};
        hrt_parallel_for(g->N * p->COB * g->Ho, K_GRAIN / (8 * g->Wo) + 1, nc_block_chunk, &d);
    }
    free(xs);
    return rc;
}

/* ---- convs on small planes (output rows of up to 32 pixels): a border pixel's clipped tile is one
 * pixel wide and streams the filter for 2 x 8 multiply-adds a vector (from L2 when the filter is big:
 * 512 channels at 7x7 spent most of the time in the 2 border columns of 7), and a row's last strip
 * is short.  So the image is copied once into a zero-padded scratch (Hp x Wp blocks, NCHWc8) in
 * which output pixel (oy, ox) reads from pixel oy * Wp + ox: the output rows, Wp wide, run as one
 * long row of full strips; the Wp - Wo columns past each row are computed and dropped (2 of 9 at
 * 7x7, 2 of 16 at 14x14).  Strided: the padded image is split into sh x sw phase planes (padded
 * pixel (py, px) to plane (py % sh, px % sw) at (py / sh, px / sw)), each ceil(Hpad / sh) x
 * ceil(Wpad / sw) = Hp x Wp, so that tap (ky, kx) of output pixel (oy, ox) reads one plane at
 * (oy + ky * dh / sh, ox + kx * dw / sw): a stride-1 conv again, on contiguous pixels, every tile
 * full (a 3x3 stride-2 conv's one-pixel border tiles and row remainders were 15-20% of its time). */
#define NC_VS 4 /* strips an item */

typedef struct {
    const nc_plan *p;
    const float *x;
    float *xp;
} nc_pad_ctx;

/* items (image * block, input row): the row into the padded copy (its phase planes) */
static void nc_pad_chunk(void *vp, int64_t b, int64_t e) {
    const nc_pad_ctx *c = vp;
    const nc_plan *p = c->p;
    for (int64_t it = b; it < e; it++) {
        const int64_t iy = it % p->H, nb = it / p->H, py = iy + p->pt;
        const float *src = c->x + (nb * p->H + iy) * p->W * 8;
        if (p->nph == 1) {
            memcpy(c->xp + (nb * p->pps + py * p->Wp + p->pl) * 8, src, sizeof(float) * (size_t)(p->W * 8));
            continue;
        }
        float *rows = c->xp + ((nb * p->sh + py % p->sh) * p->sw * p->pps + py / p->sh * p->Wp) * 8;
        for (int64_t ph = 0; ph < p->sw; ph++) { /* column phase: padded columns ph, ph + sw, ... */
            float *d = rows + ph * p->pps * 8;
            for (int64_t pc = 0, ix = ph - p->pl; pc < p->Wp; pc++, ix += p->sw)
                if (ix >= 0 && ix < p->W) st8(d + pc * 8, ld8(src + ix * 8));
        }
    }
}

/* a strip of NC_NP virtual pixels from m0 of the padded copy (blocks xps floats apart) */
static inline __attribute__((always_inline)) void nc_virt_acc(const nc_plan *p, const float *xn, const float *wt,
                                                              int64_t ostride, const float *bias, int64_t m0,
                                                              const int nb, int64_t xps, v8f *acc) {
    for (int j = 0; j < nb; j++) {
        v8f bv = {0, 0, 0, 0, 0, 0, 0, 0};
        if (bias) bv = ld8(bias + j * 8);
        for (int q = 0; q < NC_NP; q++) acc[j * NC_NP + q] = bv;
    }
    const int64_t kk = p->kh * p->kw;
    for (int64_t ib = 0; ib < p->cibg; ib++) {
        const float *xb = xn + ib * xps + m0 * 8, *wb = wt + ib * kk * 64;
        for (int64_t t = 0; t < kk; t++) nc_lanes(xb + p->toff[t], wb + t * 64, ostride, nb, NC_NP, 8, acc);
    }
}

/* a strip of NC_NP virtual pixels from m0: the ones inside an output row stored, + z, activation */
static inline __attribute__((always_inline)) void nc_store_virt(const nc_plan *p, const v8f *acc, int nb, int64_t m0,
                                                                const float *z, float *y, int64_t n, int64_t ob0) {
    const int64_t mtot = p->Ho * p->Wp, ybs = p->Ho * p->Wo * 8;
    const bool other = p->has_act && p->act.inl != K_ACT_INL_RELU && p->act.inl != K_ACT_INL_CLIP;
    for (int q = 0; q < NC_NP; q++) {
        const int64_t m = m0 + q;
        if (m >= mtot) break;
        const int64_t oy = m / p->Wp, ox = m - oy * p->Wp;
        if (ox >= p->Wo) continue;
        const int64_t off = ((n * p->COB + ob0) * p->Ho + oy) * p->Wo * 8 + ox * 8;
        for (int j = 0; j < nb; j++) {
            v8f v = acc[j * NC_NP + q];
            if (z) v += ld8(z + off + j * ybs);
            st8(y + off + j * ybs, nc_epi(p, v));
            if (other) k_act_tile(&p->act, y + off + j * ybs, 8);
        }
    }
}

/* items: (image, output-channel tile, NC_VS strips); c->x: the padded copy */
static void nc_virt_chunk(void *vp, int64_t b, int64_t e) {
    const nc_ctx *c = vp;
    const nc_plan *p = c->p;
    const int64_t nstrips = (p->Ho * p->Wp + NC_NP - 1) / NC_NP, nchunks = (nstrips + NC_VS - 1) / NC_VS;
    const int64_t kk = p->kh * p->kw, ostride = p->cibg * kk * 64, xps = p->nph * p->pps * 8;
    for (int64_t it = b; it < e; it++) {
        const int64_t ch = it % nchunks, t = it / nchunks % c->tiles, n = it / nchunks / c->tiles;
        const int64_t g = t / c->tiles_g, ob0 = g * p->cobg + t % c->tiles_g * NC_NB;
        const int nb = g * p->cobg + p->cobg - ob0 < NC_NB ? (int)(g * p->cobg + p->cobg - ob0) : NC_NB;
        const float *xn = c->x + (n * p->CB + g * p->cibg) * xps;
        const float *wt = c->w + ob0 * ostride, *bias = c->b ? c->b + ob0 * 8 : NULL;
        const int64_t s1 = ch * NC_VS + NC_VS < nstrips ? ch * NC_VS + NC_VS : nstrips;
        for (int64_t st = ch * NC_VS; st < s1; st++) {
            v8f acc[NC_NB * NC_NP];
            const int64_t m0 = st * NC_NP;
            if (nb == NC_NB) nc_virt_acc(p, xn, wt, ostride, bias, m0, NC_NB, xps, acc);
            else nc_virt_acc(p, xn, wt, ostride, bias, m0, 1, xps, acc);
            nc_store_virt(p, acc, nb, m0, c->z, c->y, n, ob0);
        }
    }
}

/* depthwise, the same way: items are (image, block) planes, each copied into the worker's padded
 * block, NC_DWP virtual pixels a strip (a 5x5 conv at 7x7 had 4 of 7 columns in one-pixel tiles) */
static void nc_dw_virt_chunk(void *vp, int64_t b, int64_t e) {
    nc_ctx *c = vp;
    const nc_plan *p = c->p;
    const int64_t Wp = p->Wp, mtot = p->Ho * Wp, kk = p->kh * p->kw, kw = p->kw;
    const int64_t dyo = p->dh * Wp * 8, dxo = p->dw * 8;
    const bool other = p->has_act && p->act.inl != K_ACT_INL_RELU && p->act.inl != K_ACT_INL_CLIP;
    float *xp = hrt_aligned_alloc(64, sizeof(float) * (size_t)(p->pps * 8));
    if (!xp) {
        c->failed = 1;
        return;
    }
    memset(xp, 0, sizeof(float) * (size_t)(p->pps * 8)); /* the border: items write the interior only */
    for (int64_t it = b; it < e; it++) {
        const int64_t n = it / p->COB, cb = it % p->COB;
        const float *src = c->x + (n * p->CB + cb) * p->H * p->W * 8;
        for (int64_t iy = 0; iy < p->H; iy++)
            memcpy(xp + ((iy + p->pt) * Wp + p->pl) * 8, src + iy * p->W * 8, sizeof(float) * (size_t)(p->W * 8));
        const float *wt = c->w + cb * kk * 8;
        v8f bv = {0, 0, 0, 0, 0, 0, 0, 0};
        if (c->b) bv = ld8(c->b + cb * 8);
        const int64_t plane = (n * p->COB + cb) * p->Ho * p->Wo * 8;
        for (int64_t m0 = 0; m0 < mtot; m0 += NC_DWP) {
            v8f acc[NC_DWP];
            for (int q = 0; q < NC_DWP; q++) acc[q] = bv;
            for (int64_t ky = 0; ky < p->kh; ky++)
                for (int64_t kx = 0; kx < kw; kx++) {
                    const v8f wv = ld8(wt + (ky * kw + kx) * 8);
                    const float *xk = xp + m0 * 8 + ky * dyo + kx * dxo;
                    for (int q = 0; q < NC_DWP; q++) acc[q] += wv * ld8(xk + q * 8);
                }
            for (int q = 0; q < NC_DWP; q++) {
                const int64_t m = m0 + q;
                if (m >= mtot) break;
                const int64_t oy = m / Wp, ox = m - oy * Wp;
                if (ox >= p->Wo) continue;
                const int64_t off = plane + (oy * p->Wo + ox) * 8;
                v8f v = acc[q];
                if (c->z) v += ld8(c->z + off);
                st8(c->y + off, nc_epi(p, v));
                if (other) k_act_tile(&p->act, c->y + off, 8);
            }
        }
    }
    free(xp);
}

static aclError nc_virt(const hrt_kernel *k, nc_ctx *c) {
    const nc_plan *p = c->p;
    if (p->dwise) {
        const int64_t per = p->Ho * p->Wp * 8 * p->kh * p->kw + 1;
        hrt_parallel_for(p->N * p->COB, (1 << 18) / per + 1, nc_dw_virt_chunk, c);
        if (c->failed) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
        return ACL_SUCCESS;
    }
    const int64_t blocks = p->N * p->CB;
    float *xp = k_scratch(k, sizeof(float) * (size_t)(blocks * p->nph * p->pps * 8));
    if (!xp) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    memset(xp, 0, sizeof(float) * (size_t)(blocks * p->nph * p->pps * 8));
    nc_pad_ctx pc = {p, c->x, xp};
    hrt_parallel_for(blocks * p->H, K_GRAIN / (8 * p->W) + 1, nc_pad_chunk, &pc);
    c->x = xp;
    const int64_t nstrips = (p->Ho * p->Wp + NC_NP - 1) / NC_NP, nchunks = (nstrips + NC_VS - 1) / NC_VS;
    const int64_t per = NC_VS * NC_NP * 8 * NC_NB * p->cibg * 8 * p->kh * p->kw + 1;
    hrt_parallel_for(p->N * c->tiles * nchunks, (1 << 18) / per + 1, nc_virt_chunk, c);
    free(xp);
    return ACL_SUCCESS;
}

/* the packed filter: U (wino) or the blocked filter */
static float *nc_pack_filter(const nc_plan *p, const float *w, size_t *bytes, bool parallel) {
    if (p->wino) return hrt_conv2d_winograd_pack(&p->g, w, bytes, parallel);
    float *wp = hrt_big_array(p->wn, sizeof(float));
    if (wp) nc_pack_w(p, w, wp);
    if (bytes) *bytes = sizeof(float) * (size_t)p->wn;
    return wp;
}

static aclError nc_run_with(const hrt_kernel *k, void *const *in, void *const *out, const float *packed) {
    const nc_plan *p = k->plan;
    if (p->N == 0 || p->COB == 0 || p->Ho == 0 || p->Wo == 0) return ACL_SUCCESS;
    return p->wino ? nc_wino(k, in, out, packed) : nc_conv(k, in, out, packed);
}

static aclError nc_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const nc_plan *p = k->plan;
    if (p->wconst) return nc_run_with(k, in, out, p->wconst);
    float *wp = nc_pack_filter(p, in[1], NULL, true);
    if (!wp) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    aclError rc = nc_run_with(k, in, out, wp);
    free(wp);
    return rc;
}

static void *nc_pack(const hrt_kernel *k, int input, const void *data, size_t *bytes) {
    const nc_plan *p = k->plan;
    if (input != 1 || p->wconst) return NULL; /* wconst: packed at compile already */
    float *wp = nc_pack_filter(p, data, bytes, false);
    if (wp) hrt_packed_weight_counted();
    return wp;
}

static void nc_pack_free(void *packed) { free(packed); }

static void nc_plan_free(void *vp) {
    nc_plan *p = vp;
    free(p->wconst);
    free(p->toff);
    free(p);
}

static aclError nc_run_packed(const hrt_kernel *k, void *const *in, void *const *out, const void *packed) {
    return nc_run_with(k, in, out, packed);
}

static aclError nc_shape_error(const hrt_kernel *k, const char *why) {
    char sx[128], sw[128];
    hrt_shape_str(k->in[0].dims, k->in[0].ndim, sx, sizeof sx);
    hrt_shape_str(k->in[1].dims, k->in[1].ndim, sw, sizeof sw);
    return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x %s, filter %s: %s", k->op_name, sx, sw, why);
}

static aclError nchwc_conv_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 4, 1);
    if (!rc) rc = k_expect_same_dtype(k, 0, k->n_in, ACL_FLOAT);
    if (!rc) rc = k_expect_out_dtype(k, 0, ACL_FLOAT);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *w = &k->in[1];
    if (x->ndim != 5 || x->dims[4] != 8 || w->ndim != 4)
        return nc_shape_error(k, "x must be blocked [N, C/8, H, W, 8] and the filter OIHW [Cout, Cin/groups, kh, kw]");
    int64_t st[4], pads[4], dil[4], groups = 1;
    static const int64_t ones[4] = {1, 1, 1, 1};
    rc = k_attr_ints(k, attrs, "strides", true, 4, NULL, st, 4, NULL);
    if (!rc) rc = k_attr_ints(k, attrs, "pads", true, 4, NULL, pads, 4, NULL);
    if (!rc) rc = k_attr_ints(k, attrs, "dilations", false, 4, ones, dil, 4, NULL);
    if (rc) return rc;
    if (hrt_attr_find(attrs, "groups") || !hrt_attr_find(attrs, "group"))
        rc = hrt_attr_get_int(k, attrs, "groups", false, 1, &groups);
    else rc = hrt_attr_get_int(k, attrs, "group", false, 1, &groups);
    if (rc) return rc;
    const int64_t vals[4] = {st[2], st[3], dil[2], dil[3]};
    for (int i = 0; i < 4; i++)
        if (vals[i] < 1 || vals[i] > K_MAX_WINDOW)
            return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: strides and dilations must be in [1, %lld]",
                             k->op_name, (long long)K_MAX_WINDOW);
    for (int i = 0; i < 4; i++)
        if (pads[i] < 0 || pads[i] > K_MAX_WINDOW)
            return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: pads must be in [0, %lld]", k->op_name,
                             (long long)K_MAX_WINDOW);
    if (groups < 1) return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: groups must be >= 1", k->op_name);
    k_act act;
    if ((rc = k_act_from_attrs(k, attrs, &act))) return rc;
    const int64_t N = x->dims[0], Cin = x->dims[1] * 8, H = x->dims[2], W = x->dims[3];
    const int64_t Cout = w->dims[0], cin_g = w->dims[1], kh = w->dims[2], kw = w->dims[3];
    if (kh < 1 || kw < 1) return nc_shape_error(k, "the filter has an empty spatial dim");
    if (Cin % groups || cin_g * groups != Cin || Cout % groups)
        return nc_shape_error(k, "the filter does not fit x with these groups (need Cin/groups input channels)");
    const int64_t cout_g = Cout / groups;
    const bool dw = groups > 1 && groups == Cin && Cout == Cin && cin_g == 1;
    if (Cout % 8 || (!dw && (cin_g % 8 || cout_g % 8)))
        return nc_shape_error(k, "NCHWc8 needs Cout % 8 == 0 and, but for depthwise (groups == Cin == Cout), "
                                 "Cin/groups and Cout/groups multiples of 8");
    const int64_t sh = st[2], sw = st[3], dh = dil[2], dwd = dil[3];
    const int64_t eh = dh * (kh - 1) + 1, ew = dwd * (kw - 1) + 1;
    if (H + pads[0] + pads[1] < eh || W + pads[2] + pads[3] < ew)
        return nc_shape_error(k, "the (dilated) kernel is larger than the padded input");
    const int64_t Ho = (H + pads[0] + pads[1] - eh) / sh + 1, Wo = (W + pads[2] + pads[3] - ew) / sw + 1;
    const int64_t od[5] = {N, Cout / 8, Ho, Wo, 8};
    if ((rc = hrt_expect_same_shape(k, &k->out[0], od, 5, 0))) return rc;
    const bool has_bias = k->n_in > 2 && !k->in[2].absent, has_z = k->n_in > 3 && !k->in[3].absent;
    if (has_bias && (k->in[2].ndim != 1 || k->in[2].dims[0] != Cout))
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: bias must have shape [%lld]", k->op_name,
                         (long long)Cout);
    if (has_z) {
        const hrt_tensor *z = &k->in[3];
        bool same = z->ndim == 5;
        for (int i = 0; same && i < 5; i++) same = z->dims[i] == od[i];
        if (!same) {
            char sz[128], sy[128];
            hrt_shape_str(z->dims, z->ndim, sz, sizeof sz);
            hrt_shape_str(od, 5, sy, sizeof sy);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: the residual z %s must have the output's shape %s",
                             k->op_name, sz, sy);
        }
    }
    nc_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    *p = (nc_plan){.N = N, .CB = Cin / 8, .H = H, .W = W, .COB = Cout / 8, .Ho = Ho, .Wo = Wo, .kh = kh, .kw = kw,
                   .sh = sh, .sw = sw, .dh = dh, .dw = dwd, .pt = pads[0], .pl = pads[2], .Cout = Cout,
                   .cin_g = cin_g, .groups = groups, .cibg = dw ? 1 : cin_g / 8, .cobg = dw ? 1 : cout_g / 8,
                   .dwise = dw, .has_bias = has_bias, .has_z = has_z, .has_act = act.code != K_ACT_NONE, .act = act};
    p->wn = dw ? Cout * kh * kw : Cout * cin_g * kh * kw;
    if (kh == 1 && kw == 1 && sh == 1 && sw == 1 && pads[0] == 0 && pads[1] == 0 && pads[2] == 0 && pads[3] == 0) {
        p->W = p->Wo = H * W; /* one row: long pixel strips on small planes */
        p->H = p->Ho = 1;
    }
    p->pw = !dw && kh == 1 && kw == 1 && pads[0] == 0 && pads[1] == 0 && pads[2] == 0 && pads[3] == 0;
    if (p->pw && (sh > 1 || sw > 1)) { /* the strided pixels gathered at run: a stride-1 1x1 on Ho x Wo */
        p->sub = true;
        p->sH = H, p->sW = W, p->ssh = sh, p->ssw = sw, p->sHo = Ho, p->sWo = Wo;
        p->H = p->Ho = p->sh = p->sw = 1;
        p->W = p->Wo = Ho * Wo;
    }
    /* interior columns: ox * sw - pl >= 0 and ox * sw - pl + (kw - 1) * dw <= W - 1 */
    p->ox_lo = (p->pl + p->sw - 1) / p->sw;
    const int64_t last = p->W - 1 + p->pl - (kw - 1) * dwd;
    p->ox_hi = last < 0 ? 0 : last / p->sw + 1;
    if (p->ox_hi > p->Wo) p->ox_hi = p->Wo;
    if (p->ox_lo > p->ox_hi) p->ox_lo = p->ox_hi;
    p->g = (k_conv_geom){N, Cin, H, W, Cout, Ho, Wo, kh, kw, sh, sw, dh, dwd, pads[0], pads[2], groups, cin_g, cout_g, false};
    p->wino = groups == 1 && hrt_conv2d_winograd_ok(&p->g);
    p->pb = pads[1];
    p->pr = pads[3];
    p->virt = !p->wino && kw > 1 && Wo <= 32 && (!dw || (sh == 1 && sw == 1 && !hrt_nchwc_dw_ok(kh, kw, sh, sw, dh, dwd)));
    if (p->virt) {
        p->nph = sh * sw;
        p->Hp = (H + pads[0] + pads[1] + sh - 1) / sh;
        p->Wp = (W + pads[2] + pads[3] + sw - 1) / sw;
        p->pps = p->Hp * p->Wp + NC_NP + 2 + (kw - 1) * dwd; /* slack: the last strip's reads */
        if (!dw && !(p->toff = malloc(sizeof(int64_t) * (size_t)(kh * kw)))) {
            free(p);
            return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
        }
        for (int64_t ky = 0; !dw && ky < kh; ky++)
            for (int64_t kx = 0; kx < kw; kx++) {
                const int64_t ey = ky * dh, ex = kx * dwd;
                p->toff[ky * kw + kx] = ((ey % sh * sw + ex % sw) * p->pps + ey / sh * p->Wp + ex / sw) * 8;
            }
    }
    p->dwl = dw && !p->virt && hrt_nchwc_dw_ok(kh, kw, sh, sw, dh, dwd);
    p->dl = (nc_dwl){H, W, Ho, Wo, kh, kw, sh, sw, pads[0], pads[2], act.code != K_ACT_NONE, act};
    if (w->is_const && w->data) {
        size_t bytes = 0;
        if (!(p->wconst = nc_pack_filter(p, w->data, &bytes, false))) {
            free(p->toff);
            free(p);
            return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
        }
        k->plan_bytes = bytes;
    }
    k->plan = p;
    k->plan_free = nc_plan_free;
    k->run = nc_run;
    k->pack = nc_pack;
    k->pack_free = nc_pack_free;
    k->run_packed = nc_run_packed;
    return ACL_SUCCESS;
}

HRT_OP(nchwc_conv2d, "_NchwcConv2D", nchwc_conv_compile)
