/* nchwc_conv.c's hot code (the direct, pointwise, depthwise and padded-copy tiles, the strided
 * gather, the reorders around the Winograd conv), one NCHWc8 kernel family per inclusion
 * (nchwc_families.h: NCF, NC_TARGET).  No include guard: that is the point. */
/* The epilogue of a tile: + residual, Relu / Clip on the accumulators (k_act_tile's rules: NaN
 * passes), store; other activations on the stored floats (in L1). */
static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_store)(const nc_plan *p, v8f *acc, int nb, int np, const float *z,
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
static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_lanes)(const float *xk, const float *wk, int64_t ostride,
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
static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_tile_acc)(const nc_plan *p, const float *xn, const float *wt,
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
            for (int64_t kx = kx0; kx < kx1; kx++) NCF(nc_lanes)(xr + kx * p->dw * 8, wr + kx * 64, ostride, nb, np, xs, acc);
        }
    }
}

/* one tile of an output row, stored */
static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_tile)(const nc_plan *p, const float *xn, const float *wt,
                                                          int64_t ostride, const float *bias, const float *z, float *y,
                                                          int64_t ybs, int64_t iy0, int64_t ix0, int64_t ky0,
                                                          int64_t ky1, int64_t kx0, int64_t kx1, const int nb,
                                                          const int np, const int64_t xs) {
    v8f acc[NC_NB * NC_NP];
    NCF(nc_tile_acc)(p, xn, wt, ostride, bias, iy0, ix0, ky0, ky1, kx0, kx1, nb, np, xs, p->H * p->W * 8, p->W, acc);
    NCF(nc_store)(p, acc, nb, np, z, y, ybs);
}

/* depthwise tile: np pixels of one output row of a channel block */
static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_dw_tile)(const nc_plan *p, const float *xb, const float *wt,
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
    NCF(nc_store)(p, acc, 1, np, z, y, 0);
}

/* the taps [k0, k1) of a window starting at i0 (step d, k taps) that lie inside [0, n) */
static NC_TARGET inline void NCF(nc_clip)(int64_t i0, int64_t d, int64_t k, int64_t n, int64_t *k0, int64_t *k1) {
    int64_t a = 0, b = k;
    if (i0 < 0) a = (-i0 + d - 1) / d;
    if (i0 + (k - 1) * d >= n) b = i0 >= n ? 0 : (n - 1 - i0) / d + 1;
    if (b < a) b = a;
    *k0 = a;
    *k1 = b;
}

#define NC_TILE(NB, NP) NCF(nc_tile)(p, xn, wt, ostride, bias, zr, yr, ybs, iy0, ix0, ky0, ky1, kx0, kx1, NB, NP, xs)

/* one output row of nb (1 or NC_NB) output-channel blocks */
static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_row)(const nc_plan *p, const float *xn, const float *wt0,
                                                         int64_t ostride, const float *bias, const float *z0, float *y0,
                                                         int64_t ybs, int64_t oy, const int nb, const int64_t xs) {
    const int64_t iy0 = oy * p->sh - p->pt;
    int64_t ky0, ky1;
    NCF(nc_clip)(iy0, p->dh, p->kh, p->H, &ky0, &ky1);
    const float *wt = wt0;
    for (int64_t ox = 0; ox < p->Wo;) {
        const int64_t ix0 = ox * p->sw - p->pl;
        const float *zr = z0 ? z0 + ox * 8 : NULL;
        float *yr = y0 + ox * 8;
        if (ox < p->ox_lo || ox >= p->ox_hi) { /* border: one pixel, taps clipped */
            int64_t kx0, kx1;
            NCF(nc_clip)(ix0, p->dw, p->kw, p->W, &kx0, &kx1);
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

static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_dw_row)(const nc_plan *p, const float *xb, const float *wt,
                                                            const float *bias, const float *z0, float *y0, int64_t oy,
                                                            const int64_t xs) {
    const int64_t iy0 = oy * p->sh - p->pt;
    int64_t ky0, ky1;
    NCF(nc_clip)(iy0, p->dh, p->kh, p->H, &ky0, &ky1);
    for (int64_t ox = 0; ox < p->Wo;) {
        const int64_t ix0 = ox * p->sw - p->pl;
        const float *zr = z0 ? z0 + ox * 8 : NULL;
        float *yr = y0 + ox * 8;
        if (ox < p->ox_lo || ox >= p->ox_hi) {
            int64_t kx0, kx1;
            NCF(nc_clip)(ix0, p->dw, p->kw, p->W, &kx0, &kx1);
            NCF(nc_dw_tile)(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, kx0, kx1, 1, xs);
            ox++;
            continue;
        }
        const int64_t n = p->ox_hi - ox;
        switch (n >= NC_DWP ? NC_DWP : n) {
        case 8: NCF(nc_dw_tile)(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 8, xs); break;
        case 7: NCF(nc_dw_tile)(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 7, xs); break;
        case 6: NCF(nc_dw_tile)(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 6, xs); break;
        case 5: NCF(nc_dw_tile)(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 5, xs); break;
        case 4: NCF(nc_dw_tile)(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 4, xs); break;
        case 3: NCF(nc_dw_tile)(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 3, xs); break;
        case 2: NCF(nc_dw_tile)(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 2, xs); break;
        default: NCF(nc_dw_tile)(p, xb, wt, bias, zr, yr, iy0, ix0, ky0, ky1, 0, p->kw, 1, xs); break;
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

static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_pw_tile)(const nc_plan *p, const float *x, const float *wt,
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
    for (int64_t ib = 0; ib < nblk; ib++) NCF(nc_lanes)(x + ib * xps, wt + ib * 64, ostride, nb, np, xs, acc);
    if (last) NCF(nc_store)(p, acc, nb, np, z, y, ybs);
    else
        for (int j = 0; j < nb; j++)
            for (int q = 0; q < np; q++) st8(y + j * ybs + q * 8, acc[j * np + q]);
}

#define NC_PW(NB, NP) \
    NCF(nc_pw_tile)(p, xc + ox * xs, wc, ostride, xps, nblk, bias, first, last, z0 ? z0 + ox * 8 : NULL, y0 + ox * 8, ybs, NB, NP, xs)

/* one output row of nb output-channel blocks; xr: the row's first input pixel (block 0) */
static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_pw_row)(const nc_plan *p, const float *xr, const float *wt,
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
NC_TARGET void NCF(hrt_nc_conv)(void *vp, int64_t b, int64_t e) {
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
            if (p->dwl) NCF(hrt_nchwc_dw_row)(&p->dl, xb, wt, bias, z0, c->y + off, oy);
            else if (p->sw == 1) NCF(nc_dw_row)(p, xb, wt, bias, z0, c->y + off, oy, 8);
            else if (p->sw == 2) NCF(nc_dw_row)(p, xb, wt, bias, z0, c->y + off, oy, 16);
            else NCF(nc_dw_row)(p, xb, wt, bias, z0, c->y + off, oy, p->sw * 8);
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
            if (nb == NC_NB) NCF(nc_pw_row)(p, xn, wt, ostride, bias, z0, y0, ybs, NC_NB, 8);
            else NCF(nc_pw_row)(p, xn, wt, ostride, bias, z0, y0, ybs, 1, 8);
            continue;
        }
        if (nb == NC_NB) {
            if (p->sw == 1) NCF(nc_row)(p, xn, wt, ostride, bias, z0, y0, ybs, oy, NC_NB, 8);
            else if (p->sw == 2) NCF(nc_row)(p, xn, wt, ostride, bias, z0, y0, ybs, oy, NC_NB, 16);
            else NCF(nc_row)(p, xn, wt, ostride, bias, z0, y0, ybs, oy, NC_NB, p->sw * 8);
        } else {
            if (p->sw == 1) NCF(nc_row)(p, xn, wt, ostride, bias, z0, y0, ybs, oy, 1, 8);
            else NCF(nc_row)(p, xn, wt, ostride, bias, z0, y0, ybs, oy, 1, p->sw * 8);
        }
    }
}

/* items (image * block, output row): the row's strided input pixels, gathered */
NC_TARGET void NCF(hrt_nc_sub)(void *vp, int64_t b, int64_t e) {
    const nc_sub_ctx *c = vp;
    const nc_plan *p = c->p;
    for (int64_t it = b; it < e; it++) {
        const int64_t oy = it % p->sHo, nb = it / p->sHo;
        const float *src = c->x + (nb * p->sH + oy * p->ssh) * p->sW * 8;
        float *dst = c->xs + (nb * p->sHo + oy) * p->sWo * 8;
        for (int64_t ox = 0; ox < p->sWo; ox++) st8(dst + ox * 8, ld8(src + ox * p->ssw * 8));
    }
}

static NC_TARGET inline v8f NCF(nc_epi)(const nc_plan *p, v8f v) {
    const float lo = p->act.lo, hi = p->act.hi;
    const v8f zero = {0, 0, 0, 0, 0, 0, 0, 0}, vlo = {lo, lo, lo, lo, lo, lo, lo, lo}, vhi = {hi, hi, hi, hi, hi, hi, hi, hi};
    if (p->act.inl == K_ACT_INL_RELU) return nc_sel(v < zero, zero, v);
    if (p->act.inl == K_ACT_INL_CLIP) return nc_sel(v < vlo, vlo, nc_sel(v > vhi, vhi, v));
    return v;
}

/* items (image * block, row): NCHW -> blocked, + z, activation */
NC_TARGET void NCF(hrt_nc_block)(void *vp, int64_t b, int64_t e) {
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
                st8(dst + (ix + i) * 8, NCF(nc_epi)(p, v));
            }
        }
        for (; ix < W; ix++) {
            v8f v;
            for (int j = 0; j < 8; j++) v[j] = src[j * HW + ix];
            if (z) v += ld8(z + ix * 8);
            st8(dst + ix * 8, NCF(nc_epi)(p, v));
        }
        if (other) k_act_tile(&p->act, dst, W * 8);
    }
}

/* items (image * block, input row): the row into the padded copy (its phase planes) */
NC_TARGET void NCF(hrt_nc_pad)(void *vp, int64_t b, int64_t e) {
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
static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_virt_acc)(const nc_plan *p, const float *xn, const float *wt,
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
        for (int64_t t = 0; t < kk; t++) NCF(nc_lanes)(xb + p->toff[t], wb + t * 64, ostride, nb, NC_NP, 8, acc);
    }
}

/* a strip of NC_NP virtual pixels from m0: the ones inside an output row stored, + z, activation */
static NC_TARGET inline __attribute__((always_inline)) void NCF(nc_store_virt)(const nc_plan *p, const v8f *acc, int nb, int64_t m0,
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
            st8(y + off + j * ybs, NCF(nc_epi)(p, v));
            if (other) k_act_tile(&p->act, y + off + j * ybs, 8);
        }
    }
}

/* items: (image, output-channel tile, NC_VS strips); c->x: the padded copy */
NC_TARGET void NCF(hrt_nc_virt)(void *vp, int64_t b, int64_t e) {
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
            if (nb == NC_NB) NCF(nc_virt_acc)(p, xn, wt, ostride, bias, m0, NC_NB, xps, acc);
            else NCF(nc_virt_acc)(p, xn, wt, ostride, bias, m0, 1, xps, acc);
            NCF(nc_store_virt)(p, acc, nb, m0, c->z, c->y, n, ob0);
        }
    }
}

/* depthwise, the same way: items are (image, block) planes, each copied into the worker's padded
 * block, NC_DWP virtual pixels a strip (a 5x5 conv at 7x7 had 4 of 7 columns in one-pixel tiles) */
NC_TARGET void NCF(hrt_nc_dw_virt)(void *vp, int64_t b, int64_t e) {
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
                st8(c->y + off, NCF(nc_epi)(p, v));
                if (other) k_act_tile(&p->act, c->y + off, 8);
            }
        }
    }
    free(xp);
}

#undef NC_TILE
#undef NC_PW
