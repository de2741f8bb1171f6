/* float32 NCHW depthwise convolution (groups == C_in, any channel
 * multiplier) and grouped convolution with few input channels a group
 * (hrt_conv2d_dw_ok), a direct kernel in the manner of MLAS's depthwise kernels:
 * each plane is copied once into a zero-padded scratch plane split into `sw`
 * column phases (as conv_direct.c does), so every tap of an output row is one
 * contiguous vector load whatever the stride; an output row segment of 16
 * pixels accumulates all kh*kw taps in registers and is stored once with the
 * bias and the fused activation applied.  A grouped conv pads its group's
 * cin_g planes and its taps run over (ci, ky, kx), 4 output channels at once
 * (each input vector feeds 4 channels' accumulators).  The generic kernel in
 * conv_tmpl.h swept each output row once per tap with divisions per tap
 * (0.06-0.6x onnxruntime on MobileNet shapes). */
#include "kcommon.h"

#include "ukernel.h"

/* taps with precomputed offsets */
#define DW_TOFF_MAX 256
/* output channels a grouped item computes at once (dw_planes_co) */
#define DW_CO 4
/* Grouped (not depthwise) convs run here up to this many taps (cin_g * kh * kw), more run the
 * packed GEMM of conv_direct.c.  Measured (CPU time an op, A/B): 3x3 with 4-16 input channels a group
 * 1.1-2x faster here (ResNeXt's 128-512 channels, groups 32, 56x56-14x14); 32 a group at 7x7 1.2x
 * slower; 1x1 grouped and groups == 1 convs stay GEMMs (2x slower here), but for image stems (below). */
#define DW_GROUPED_MAX_TAPS 144
_Static_assert(DW_GROUPED_MAX_TAPS <= DW_TOFF_MAX, "grouped convs need every tap's offset");
/* Ungrouped convs with up to this many input channels (image stems: RGB, grey) run here too, as one
 * group: an im2col of K = 3 * 3 * 3 = 27 rows made the packed GEMM pay its packing for a handful of
 * FMAs a pixel.  Measured (node minimum, one thread, A/B, load 6): 3->32 3x3 s2 224x224 (MobileNet,
 * EfficientNet) 447-477 -> 361-363 us (onnxruntime 340), 3->16 s2 288-294 -> 201-210 us, 3->64 3x3
 * 224x224 4461 -> 2733 us; 4 input channels at 56x56 were 7% slower here, so 4+ stay GEMMs. */
#define DW_STEM_MAX_CIN 3

typedef struct {
    const k_conv_geom *g;
    const float *x, *w, *bias;
    float *y;
    const k_act *act;
    int64_t Hp, Wps; /* padded plane: Hp rows of sw phases x Wps columns */
    size_t scratch;  /* floats per worker */
    _Atomic int failed;
    int64_t cob;       /* output channels an item: DW_CO (dw_planes_co) or 1 */
    int64_t taps;      /* cin_g * kh * kw: the taps of one output plane, in OIHW filter order */
    int64_t gplane;    /* floats of one padded input plane (sw phases) */
    bool small;        /* taps <= DW_TOFF_MAX: toff holds every tap */
    int64_t toff[DW_TOFF_MAX]; /* per tap (ci, ky, kx): offset of column 0 in the padded planes, once per call */
} dw_ctx;

/* one input plane -> the interior of its padded plane, sw column phases of Hp x Wps (phase ph holds
 * padded columns ph, ph + sw, ...).  Only the interior is written: every plane of a call has the
 * same geometry, so the zero border written once per worker (dw_chunk) stays zero.  (Zeroing it
 * per plane cost more than the convolution itself on small planes: 960 channels at 7x7.) */
static void dw_pad(const dw_ctx *c, const float *src, float *dst) {
    const k_conv_geom *g = c->g;
    const int64_t sw = g->sw, Wps = c->Wps, plane = c->Hp * Wps, W = g->W;
    if (sw == 1) {
        for (int64_t iy = 0; iy < g->H; iy++) {
            const float *sr = src + iy * W;
            float *dr = dst + (iy + g->pt) * Wps + g->pl;
            if (W <= 16) /* short rows: no call per row */
                for (int64_t j = 0; j < W; j++) dr[j] = sr[j];
            else
                memcpy(dr, sr, sizeof(float) * (size_t)W);
        }
        return;
    }
    /* phases outside, rows inside: a phase's column range once a plane (two 64-bit divisions per row
     * and phase were most of a stride-2 depthwise conv's time) */
    for (int64_t ph = 0; ph < sw; ph++) {
        /* columns j with 0 <= j*sw + ph - pl < W: [lo, hi); [lo, hv): 8-column steps that stay in the row */
        const int64_t lo = g->pl - ph <= 0 ? 0 : (g->pl - ph + sw - 1) / sw;
        int64_t hi = (W + g->pl - ph + sw - 1) / sw;
        if (hi > Wps) hi = Wps;
        int64_t hv = lo;
        if (sw == 2)
            while (hv + 8 <= hi && (hv + 7) * 2 + ph - g->pl + 1 < W) hv += 8;
        for (int64_t iy = 0; iy < g->H; iy++) {
            const float *s0 = src + iy * W + ph - g->pl;
            float *dr = dst + ph * plane + (iy + g->pt) * Wps;
            int64_t j = lo;
            for (; j < hv; j += 8) { /* sw == 2: deinterleave 8 columns at a time */
                v8f u = ld8(s0 + 2 * j), v = ld8(s0 + 2 * j + 8);
                st8(dr + j, __builtin_shufflevector(u, v, 0, 2, 4, 6, 8, 10, 12, 14));
            }
            for (; j < hi; j++) dr[j] = s0[j * sw];
        }
    }
}

/* 4 output rows (input rows rstep floats apart) in vectors of 8 x nv (1 or 2) outputs: every tap
 * of a block accumulates in registers; the last block of a row may read into the padded plane's
 * slack and stores only its Wo - ox outputs. */
static inline __attribute__((always_inline)) void dw_rows4(const float *xr, int64_t rstep, const int64_t *toff,
                                                           int64_t taps, const float *wk, float bv, float *yr,
                                                           int64_t Wo, int nv) {
    for (int64_t ox = 0; ox < Wo; ox += 8 * nv) {
        v8f init = {bv, bv, bv, bv, bv, bv, bv, bv};
        v8f a0 = init, a1 = init, b0 = init, b1 = init, c0 = init, c1 = init, d0 = init, d1 = init;
        for (int64_t t = 0; t < taps; t++) {
            const float wv = wk[t];
            const v8f wb = {wv, wv, wv, wv, wv, wv, wv, wv};
            const float *s = xr + toff[t] + ox;
            a0 += wb * ld8(s);
            b0 += wb * ld8(s + rstep);
            c0 += wb * ld8(s + 2 * rstep);
            d0 += wb * ld8(s + 3 * rstep);
            if (nv == 2) {
                a1 += wb * ld8(s + 8);
                b1 += wb * ld8(s + rstep + 8);
                c1 += wb * ld8(s + 2 * rstep + 8);
                d1 += wb * ld8(s + 3 * rstep + 8);
            }
        }
        const int64_t n = Wo - ox < 8 * nv ? Wo - ox : 8 * nv;
        v8f out[8] = {a0, a1, b0, b1, c0, c1, d0, d1};
        for (int r = 0; r < 4; r++) {
            float *yo = yr + r * Wo + ox;
            if (n == 16) {
                st8(yo, out[2 * r]);
                st8(yo + 8, out[2 * r + 1]);
            } else {
                float tile[16];
                st8(tile, out[2 * r]);
                st8(tile + 8, out[2 * r + 1]);
                memcpy(yo, tile, sizeof(float) * (size_t)n);
            }
        }
    }
}

/* One output plane from its padded input plane.  Rows of 16 outputs (two
 * vectors) accumulate every tap in registers; the ragged end of a row is
 * computed the same way into a 16-float tile and copied. */
static void dw_plane(const dw_ctx *c, const float *xp, const float *wk, float bv, float *yp) {
    const k_conv_geom *g = c->g;
    const int64_t kw = g->kw, Wo = g->Wo, Wps = c->Wps, sw = g->sw, dh = g->dh, dw = g->dw;
    const int64_t plane = c->Hp * Wps, sh = g->sh;
    const int64_t *toff = c->toff;
    const int64_t taps = c->taps; /* kh * kw unless grouped (then small) */
    const bool small = c->small;
    int64_t oy0 = 0;
    if (small) { /* blocks of 4 output rows: 4-8 independent accumulators hide the FMA latency */
        oy0 = g->Ho / 4 * 4;
        for (int64_t oy = 0; oy < oy0; oy += 4) {
            if (Wo > 8) dw_rows4(xp + oy * sh * Wps, sh * Wps, toff, taps, wk, bv, yp + oy * Wo, Wo, 2);
            else dw_rows4(xp + oy * sh * Wps, sh * Wps, toff, taps, wk, bv, yp + oy * Wo, Wo, 1);
        }
    }
    for (int64_t oy = oy0; oy < g->Ho; oy++) {
        const float *xr = xp + oy * sh * Wps;
        float *yr = yp + oy * Wo;
        for (int64_t ox = 0; ox < Wo; ox += 16) {
            v8f a0 = {bv, bv, bv, bv, bv, bv, bv, bv}, a1 = a0;
            if (Wo - ox <= 8) { /* the ragged end of a row: one vector */
                for (int64_t t = 0; t < taps; t++) {
                    int64_t off;
                    if (small) off = toff[t];
                    else {
                        int64_t ky = t / kw, col = (t % kw) * dw;
                        off = (col % sw) * plane + ky * dh * Wps + col / sw;
                    }
                    float wv = wk[t];
                    v8f wb = {wv, wv, wv, wv, wv, wv, wv, wv};
                    a0 += wb * ld8(xr + off + ox);
                }
            } else
            for (int64_t t = 0; t < taps; t++) {
                int64_t off;
                if (small) off = toff[t];
                else {
                    int64_t ky = t / kw, col = (t % kw) * dw;
                    off = (col % sw) * plane + ky * dh * Wps + col / sw;
                }
                float wv = wk[t];
                v8f wb = {wv, wv, wv, wv, wv, wv, wv, wv};
                const float *s = xr + off + ox;
                a0 += wb * ld8(s);
                a1 += wb * ld8(s + 8);
            }
            if (Wo - ox >= 16) {
                st8(yr + ox, a0);
                st8(yr + ox + 8, a1);
            } else {
                float tile[16];
                st8(tile, a0);
                st8(tile + 8, a1);
                memcpy(yr + ox, tile, sizeof(float) * (size_t)(Wo - ox));
            }
        }
    }
    /* the activation once a plane, not once a row: on small planes (7 or 14 pixels a row) a call per
     * row cost as much as the convolution (Relu, 960ch 7x7: 386 -> 208 us CPU a run) */
    if (c->act) k_act_apply_f32(c->act, yp, g->Ho * Wo);
}

/* DW_CO output planes of one group at once (cout_g a multiple of DW_CO, taps in toff): each input
 * vector loaded serves DW_CO channels (6 loads per 8 FMAs instead of 9: grouped convs read the
 * cin_g input planes once per DW_CO channels).  wk: the first channel's taps (the next ones follow
 * `taps` floats apart), yp: its output plane (the next ones follow). */
static void dw_planes_co(const dw_ctx *c, const float *xp, const float *wk, const float *bias, float *yp) {
    const k_conv_geom *g = c->g;
    const int64_t Wo = g->Wo, Wps = c->Wps, sh = g->sh, taps = c->taps, HoWo = g->Ho * Wo;
    const int64_t *toff = c->toff;
    for (int64_t oy = 0; oy < g->Ho; oy++) {
        const float *xr = xp + oy * sh * Wps;
        for (int64_t ox = 0; ox < Wo; ox += 16) {
            v8f a[DW_CO][2];
            for (int j = 0; j < DW_CO; j++) {
                const float bv = bias ? bias[j] : 0.0f;
                a[j][0] = a[j][1] = (v8f){bv, bv, bv, bv, bv, bv, bv, bv};
            }
            for (int64_t t = 0; t < taps; t++) {
                const float *s = xr + toff[t] + ox;
                const v8f v0 = ld8(s), v1 = ld8(s + 8);
                for (int j = 0; j < DW_CO; j++) {
                    const float wv = wk[j * taps + t];
                    const v8f wb = {wv, wv, wv, wv, wv, wv, wv, wv};
                    a[j][0] += wb * v0;
                    a[j][1] += wb * v1;
                }
            }
            const int64_t n = Wo - ox < 16 ? Wo - ox : 16;
            for (int j = 0; j < DW_CO; j++) {
                float *yo = yp + j * HoWo + oy * Wo + ox;
                if (n == 16) {
                    st8(yo, a[j][0]);
                    st8(yo + 8, a[j][1]);
                } else {
                    float tile[16];
                    st8(tile, a[j][0]);
                    st8(tile + 8, a[j][1]);
                    memcpy(yo, tile, sizeof(float) * (size_t)n);
                }
            }
        }
    }
    if (c->act)
        for (int j = 0; j < DW_CO; j++) k_act_apply_f32(c->act, yp + j * HoWo, HoWo);
}

static void dw_chunk(void *vp, int64_t b, int64_t e) {
    dw_ctx *c = vp;
    const k_conv_geom *g = c->g;
    float *xp = calloc(c->scratch, sizeof(float)); /* the zero border of every padded plane */
    if (!xp) {
        c->failed = 1;
        return;
    }
    const int64_t mult = g->cout_g, taps = c->taps, HW = g->H * g->W, HoWo = g->Ho * g->Wo;
    int64_t padded = -1;
    const int64_t cob = c->cob;
    for (int64_t it = b; it < e; it++) { /* it = n * Cout / cob + co / cob */
        int64_t n = it * cob / g->Cout, co = it * cob % g->Cout, grp = co / mult, src = n * g->C + grp * g->cin_g;
        if (src != padded) { /* the cout_g output channels of a group share its cin_g padded planes */
            for (int64_t ci = 0; ci < g->cin_g; ci++) dw_pad(c, c->x + (src + ci) * HW, xp + ci * c->gplane);
            padded = src;
        }
        float *yp = c->y + (n * g->Cout + co) * HoWo;
        if (cob == DW_CO) dw_planes_co(c, xp, c->w + co * taps, c->bias ? c->bias + co : NULL, yp);
        else dw_plane(c, xp, c->w + co * taps, c->bias ? c->bias[co] : 0.0f, yp);
    }
    free(xp);
}

/* ---- depthwise on small planes: 8 channels in the lanes of a vector ----
 * Output rows narrower than 16 fill a fraction of the row kernel's vectors and pay its per-plane
 * and per-row costs (padding, ragged tiles, the activation call) for a handful of pixels: 960
 * channels at 2x2 took ~50 ns a channel, 2.6x onnxruntime's NCHWc kernel.  Here 8 channels (a
 * channel block) are transposed 8x8 in registers into a zero-padded [Hp][Wp][8] block (its border
 * written once per worker: every block of a call has the same geometry), the output pixels
 * accumulate their taps 4 at a time as whole vectors (one vector of the 8 channels' weights a tap,
 * strides and dilations as offsets, no gathers), and the [Ho*Wo][8] tile goes through the
 * activation and is transposed back into the 8 output planes.  One thread, node minimum against
 * the row kernel: 960ch 2x2 52 -> 13 us, 576ch 4x4 s2 47 -> 8 us, 192ch 8x8 20 -> 11 us, 960ch 7x7
 * 115 -> 43 us, 672ch 5x5 14x14 265 -> 170 us, 96ch 32x32 s2 44 -> 31 us; rows of 16+ at stride 1
 * stay with the row kernel (32ch 32x32: 24 vs 27 us here). */
#define DW_LANES_MAX_WO 16 /* stride 1: output rows narrower than this; strided: any width */
#define DW_LANES_MAX_PLANE 4096 /* padded pixels (Hp * Wp) a block: 128 KB */

typedef struct {
    const k_conv_geom *g;
    const float *x, *w, *bias;
    float *y;
    const k_act *act;
    int64_t Hp, Wp, taps, cblocks;
    _Atomic int failed;
} dwl_ctx;


static void dwl_chunk(void *vp, int64_t b, int64_t e) {
    dwl_ctx *c = vp;
    const k_conv_geom *g = c->g;
    const int64_t Hp = c->Hp, Wp = c->Wp, taps = c->taps, kh = g->kh, kw = g->kw, Ho = g->Ho, Wo = g->Wo;
    const int64_t HoWo = Ho * Wo, H = g->H, W = g->W, HW = H * W, mult = g->cout_g;
    const int64_t rstep = g->sh * Wp * 8, cstep = g->sw * 8, dyo = g->dh * Wp * 8, dxo = g->dw * 8;
    const size_t nbuf = (size_t)(8 * (Hp * Wp + HoWo + taps));
    float *buf = hrt_aligned_alloc(64, sizeof(float) * nbuf + sizeof(int64_t) * (size_t)(HoWo + HW));
    if (!buf) {
        c->failed = 1;
        return;
    }
    memset(buf, 0, sizeof(float) * nbuf);
    float *tile = buf + 8 * Hp * Wp, *wt = tile + 8 * HoWo;
    int64_t *po = (int64_t *)(buf + nbuf); /* per output pixel: its first tap's offset in the block */
    for (int64_t oy = 0; oy < Ho; oy++)
        for (int64_t ox = 0; ox < Wo; ox++) po[oy * Wo + ox] = oy * rstep + ox * cstep;
    float *interior = buf + (g->pt * Wp + g->pl) * 8;
    int64_t *pin = po + HoWo; /* per input pixel: its offset in the block's interior */
    for (int64_t iy = 0; iy < H; iy++)
        for (int64_t ix = 0; ix < W; ix++) pin[iy * W + ix] = (iy * Wp + ix) * 8;
    for (int64_t it = b; it < e; it++) {
        const int64_t n = it / c->cblocks, c0 = it % c->cblocks * 8, nc = g->Cout - c0 < 8 ? g->Cout - c0 : 8;
        /* lanes past nc read the block's last channel again: their outputs are not stored */
        const float *src[8];
        for (int64_t j = 0; j < 8; j++) {
            const int64_t cj = c0 + (j < nc ? j : nc - 1);
            const float *wj = c->w + cj * taps;
            src[j] = c->x + (n * g->C + cj / mult) * HW;
            for (int64_t t = 0; t < taps; t++) wt[t * 8 + j] = wj[t];
        }
        int64_t p = 0;
        for (; p + 8 <= HW; p += 8) { /* 8 pixels of the 8 planes, transposed into 8 pixels' vectors */
            v8f r[8];
            for (int j = 0; j < 8; j++) r[j] = ld8(src[j] + p);
            uk_tr8(r);
            for (int i = 0; i < 8; i++) st8(interior + pin[p + i], r[i]);
        }
        for (; p < HW; p++)
            for (int j = 0; j < 8; j++) interior[pin[p] + j] = src[j][p];
        v8f bv = {0, 0, 0, 0, 0, 0, 0, 0};
        if (c->bias)
            for (int64_t j = 0; j < nc; j++) bv[j] = c->bias[c0 + j];
        /* the output pixels 4 at a time (4 independent accumulators hide the FMA latency); a ragged
         * last group is the plane's last 4 pixels again (recomputing some: the same values) */
        for (int64_t q0 = 0; q0 < HoWo; q0 += 4) {
            if (HoWo < 4) {
                for (int64_t q = 0; q < HoWo; q++) {
                    v8f acc = bv;
                    for (int64_t ky = 0; ky < kh; ky++) {
                        const float *row = buf + po[q] + ky * dyo, *wr = wt + ky * kw * 8;
                        for (int64_t kx = 0; kx < kw; kx++) acc += ld8(wr + kx * 8) * ld8(row + kx * dxo);
                    }
                    st8(tile + q * 8, acc);
                }
                break;
            }
            const int64_t q = q0 + 4 <= HoWo ? q0 : HoWo - 4;
            const float *x0 = buf + po[q], *x1 = buf + po[q + 1], *x2 = buf + po[q + 2], *x3 = buf + po[q + 3];
            v8f a0 = bv, a1 = bv, a2 = bv, a3 = bv;
            for (int64_t ky = 0; ky < kh; ky++) {
                const float *wr = wt + ky * kw * 8;
                const int64_t ro = ky * dyo;
                for (int64_t kx = 0; kx < kw; kx++) {
                    const v8f wv = ld8(wr + kx * 8);
                    const int64_t o = ro + kx * dxo;
                    a0 += wv * ld8(x0 + o);
                    a1 += wv * ld8(x1 + o);
                    a2 += wv * ld8(x2 + o);
                    a3 += wv * ld8(x3 + o);
                }
            }
            st8(tile + q * 8, a0);
            st8(tile + q * 8 + 8, a1);
            st8(tile + q * 8 + 16, a2);
            st8(tile + q * 8 + 24, a3);
        }
        if (c->act) k_act_tile(c->act, tile, HoWo * 8);
        float *yb = c->y + (n * g->Cout + c0) * HoWo;
        int64_t q = 0;
        for (; q + 8 <= HoWo; q += 8) { /* 8 pixels' vectors transposed into 8 runs of the planes */
            v8f r[8];
            for (int i = 0; i < 8; i++) r[i] = ld8(tile + (q + i) * 8);
            uk_tr8(r);
            for (int64_t j = 0; j < nc; j++) st8(yb + j * HoWo + q, r[j]);
        }
        for (; q < HoWo; q++)
            for (int64_t j = 0; j < nc; j++) yb[j * HoWo + q] = tile[q * 8 + j];
    }
    free(buf);
}

/* the padded block's size when the lanes kernel takes the conv, else 0 */
static int64_t dwl_plane(const k_conv_geom *g, int64_t *Hp, int64_t *Wp) {
    if (g->cin_g != 1 || (g->Wo >= DW_LANES_MAX_WO && g->sw == 1) || g->kh * g->kw > DW_TOFF_MAX) return 0;
    const int64_t hr = (g->Ho - 1) * g->sh + (g->kh - 1) * g->dh + 1, wr = (g->Wo - 1) * g->sw + (g->kw - 1) * g->dw + 1;
    *Hp = hr > g->H + g->pt ? hr : g->H + g->pt;
    *Wp = wr > g->W + g->pl ? wr : g->W + g->pl;
    return *Hp * *Wp <= DW_LANES_MAX_PLANE ? *Hp * *Wp : 0;
}

bool hrt_conv2d_dw_ok(const k_conv_geom *g) {
    if (g->nhwc) return false;
    const bool few_taps = g->kh * g->kw > 1 && g->cout_g % DW_CO == 0 && g->cin_g * g->kh * g->kw <= DW_GROUPED_MAX_TAPS;
    if (g->groups == 1) return g->cin_g <= DW_STEM_MAX_CIN && few_taps;
    return g->cin_g == 1 || few_taps;
}

/* Entry point used by conv.c: w is OIHW ([Cout, 1, kh, kw]). */
aclError hrt_conv2d_dw_f32(const hrt_kernel *k, const k_conv_geom *g, const float *x, const float *w,
                           const float *bias, const k_act *act, float *y) {
    if (g->N == 0 || g->Cout == 0 || g->Ho == 0 || g->Wo == 0) return ACL_SUCCESS;
    const k_act *fact = act && act->code != K_ACT_NONE ? act : NULL;
    int64_t lHp, lWp;
    if (dwl_plane(g, &lHp, &lWp)) {
        dwl_ctx l = {g, x, w, bias, y, fact, lHp, lWp, g->kh * g->kw, (g->Cout + 7) / 8, 0};
        const int64_t per = 8 * (lHp * lWp + g->Ho * g->Wo * (g->kh * g->kw + 2)) + 1;
        hrt_parallel_for(g->N * l.cblocks, K_GRAIN / per + 1, dwl_chunk, &l);
        if (l.failed) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
        return ACL_SUCCESS;
    }
    dw_ctx c = {g, x, w, bias, y, fact, 0, 0, 0, 0};
    /* every padded row/col an output reads, plus 16 columns of slack for the last vector of a row */
    int64_t hr = (g->Ho - 1) * g->sh + (g->kh - 1) * g->dh + 1;
    int64_t wr = ((g->Wo + 15) / 16 * 16 - 1) * g->sw + (g->kw - 1) * g->dw + 1;
    c.Hp = hr > g->H + g->pt ? hr : g->H + g->pt;
    int64_t Wp = wr > g->W + g->pl ? wr : g->W + g->pl;
    c.Wps = (Wp + g->sw - 1) / g->sw + 1;
    c.gplane = g->sw * c.Hp * c.Wps;
    c.scratch = (size_t)(g->cin_g * c.gplane) + 16;
    c.taps = g->cin_g * g->kh * g->kw;
    c.small = c.taps <= DW_TOFF_MAX;
    if (c.small)
        for (int64_t ci = 0; ci < g->cin_g; ci++)
            for (int64_t ky = 0; ky < g->kh; ky++)
                for (int64_t kx = 0; kx < g->kw; kx++) {
                    int64_t col = kx * g->dw;
                    c.toff[(ci * g->kh + ky) * g->kw + kx] =
                        ci * c.gplane + (col % g->sw) * c.Hp * c.Wps + ky * g->dh * c.Wps + col / g->sw;
                }
    c.cob = c.small && g->cout_g % DW_CO == 0 ? DW_CO : 1;
    int64_t per = g->Ho * g->Wo * c.taps * c.cob + c.gplane + 1;
    hrt_parallel_for(g->N * g->Cout / c.cob, K_GRAIN / per + 1, dw_chunk, &c);
    if (c.failed) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    return ACL_SUCCESS;
}
