/* nchwc_dw.c's depthwise rows, one NCHWc8 kernel family per inclusion (nchwc_families.h: NCF,
 * NC_TARGET, NC_PIN).  No include guard: that is the point. */
/* the tile's accumulators (NP output pixels): x its window's first pixel, nr filter rows (w) over
 * input rows rs floats apart */
static NC_TARGET inline __attribute__((always_inline)) void NCF(dw_acc)(const float *x, int64_t rs, const float *w, int64_t nr, v8f bv,
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
            NC_PIN(v); /* one load an input pixel, reused by its taps (GCC folded a reload into each) */
#pragma GCC unroll 8
            for (int q = 0; q < NP; q++) {
                const int k = j - q * S;
                if (k >= 0 && k < KW) acc[q] += wv[k] * v;
            }
        }
    }
}

/* + residual, Relu / Clip, store NP pixels */
static NC_TARGET inline __attribute__((always_inline)) void NCF(dw_store)(const nc_dwl *g, const v8f *acc, const int NP, const float *z,
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
static NC_TARGET inline __attribute__((always_inline)) void NCF(dw_tile)(const nc_dwl *g, const float *xr, const float *wr, int64_t nr,
                                                          v8f bv, const float *z, float *y, int64_t ox, const int KW,
                                                          const int S, const int NP) {
    v8f acc[DW_P];
    NCF(dw_acc)(xr + (ox * S - g->pl) * 8, g->W * 8, wr, nr, bv, KW, S, NP, acc);
    NCF(dw_store)(g, acc, NP, z ? z + ox * 8 : NULL, y + ox * 8);
}

/* a border pixel: its taps inside the row only */
static NC_TARGET inline __attribute__((always_inline)) void NCF(dw_border)(const nc_dwl *g, const float *xr, const float *wr, int64_t nr,
                                                            v8f bv, const float *z, float *y, int64_t ox, const int KW,
                                                            const int S) {
    const int64_t ix0 = ox * S - g->pl;
    const int k0 = ix0 < 0 ? (int)-ix0 : 0, k1 = g->W - ix0 < KW ? (int)(g->W - ix0) : KW;
    v8f acc = bv;
    for (int64_t r = 0; r < nr; r++)
        for (int k = k0; k < k1; k++) acc += ld8(wr + (r * KW + k) * 8) * ld8(xr + r * g->W * 8 + (ix0 + k) * 8);
    NCF(dw_store)(g, &acc, 1, z ? z + ox * 8 : NULL, y + ox * 8);
}

static NC_TARGET inline __attribute__((always_inline)) void NCF(dw_row)(const nc_dwl *g, const float *xb, const float *wt,
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
    for (; ox < lo; ox++) NCF(dw_border)(g, xr, wr, nr, bv, z, y, ox, KW, S);
    for (; ox + DW_P <= hi; ox += DW_P) NCF(dw_tile)(g, xr, wr, nr, bv, z, y, ox, KW, S, DW_P);
    switch (hi - ox) {
    case 7: NCF(dw_tile)(g, xr, wr, nr, bv, z, y, ox, KW, S, 7); break;
    case 6: NCF(dw_tile)(g, xr, wr, nr, bv, z, y, ox, KW, S, 6); break;
    case 5: NCF(dw_tile)(g, xr, wr, nr, bv, z, y, ox, KW, S, 5); break;
    case 4: NCF(dw_tile)(g, xr, wr, nr, bv, z, y, ox, KW, S, 4); break;
    case 3: NCF(dw_tile)(g, xr, wr, nr, bv, z, y, ox, KW, S, 3); break;
    case 2: NCF(dw_tile)(g, xr, wr, nr, bv, z, y, ox, KW, S, 2); break;
    case 1: NCF(dw_tile)(g, xr, wr, nr, bv, z, y, ox, KW, S, 1); break;
    default: break;
    }
    for (ox = hi; ox < Wo; ox++) NCF(dw_border)(g, xr, wr, nr, bv, z, y, ox, KW, S);
    if (g->has_act && g->act.inl != K_ACT_INL_RELU && g->act.inl != K_ACT_INL_CLIP) k_act_tile(&g->act, y, Wo * 8);
}

NC_TARGET void NCF(hrt_nchwc_dw_row)(const nc_dwl *g, const float *xb, const float *wt, const float *bias, const float *z, float *y,
                      int64_t oy) {
    if (g->kw == 3) {
        if (g->sw == 1) NCF(dw_row)(g, xb, wt, bias, z, y, oy, 3, 1);
        else NCF(dw_row)(g, xb, wt, bias, z, y, oy, 3, 2);
    } else {
        if (g->sw == 1) NCF(dw_row)(g, xb, wt, bias, z, y, oy, 5, 1);
        else NCF(dw_row)(g, xb, wt, bias, z, y, oy, 5, 2);
    }
}
