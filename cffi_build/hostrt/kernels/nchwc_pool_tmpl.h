/* nchwc.c's reorder transposes and pool rows, one NCHWc8 kernel family per inclusion
 * (nchwc_families.h: NCF, NC_TARGET).  No include guard: that is the point. */
/* items: (image, block, row) */
NC_TARGET void NCF(hrt_nc_reorder)(void *vp, int64_t b, int64_t e) {
    const nr_ctx *c = vp;
    const nr_plan *p = c->p;
    const int64_t H = p->H, W = p->W, HW = H * W;
    for (int64_t it = b; it < e; it++) {
        const int64_t iy = it % H, nb = it / H; /* nb = n * CB + cb */
        const int64_t plane0 = nb * 8 * HW + iy * W; /* channel 0 of the block, row iy, in NCHW */
        const int64_t blk0 = (nb * HW + iy * W) * 8; /* pixel (iy, 0) of the block in NCHWc8 */
        int64_t ix = 0;
        if (p->to) {
            const float *src = c->x + plane0;
            float *dst = c->y + blk0;
            for (; ix + 8 <= W; ix += 8) {
                v8f r[8];
                for (int j = 0; j < 8; j++) r[j] = ld8(src + j * HW + ix);
                uk_tr8(r);
                for (int i = 0; i < 8; i++) st8(dst + (ix + i) * 8, r[i]);
            }
            for (; ix < W; ix++)
                for (int j = 0; j < 8; j++) dst[ix * 8 + j] = src[j * HW + ix];
        } else {
            const float *src = c->x + blk0;
            float *dst = c->y + plane0;
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
}

/* NaN-propagating max (k_maxf's rule: a NaN in m stays, a NaN in v is taken) */
static NC_TARGET inline v8f NCF(np_max)(v8f m, v8f v) {
    const v8i take = (v > m) | (v != v);
    return (v8f)(((v8i)v & take) | ((v8i)m & ~take));
}

/* the taps [k0, k1) of a window starting at i0 (step d, k taps) that lie inside [lo, hi) */
static NC_TARGET inline void NCF(np_clip)(int64_t i0, int64_t d, int64_t k, int64_t lo, int64_t hi, int64_t *k0, int64_t *k1) {
    int64_t a = 0, b = k;
    if (i0 < lo) a = (lo - i0 + d - 1) / d;
    if (i0 + (k - 1) * d >= hi) b = i0 >= hi ? 0 : (hi - 1 - i0) / d + 1;
    if (b < a) b = a;
    *k0 = a;
    *k1 = b;
}

/* one output pixel, its taps clipped to the input: a border column, or any pool the tiles below
 * do not take */
static NC_TARGET inline void NCF(np_pixel)(const np_plan *p, const float *xb, float *yr, int64_t ox, int64_t iy0, int64_t ky0,
                            int64_t ky1, int64_t py0, int64_t py1) {
    const v8f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    const v8f zero = {0, 0, 0, 0, 0, 0, 0, 0};
    const int64_t W = p->W, ix0 = ox * p->sw - p->pl;
    int64_t kx0, kx1;
    NCF(np_clip)(ix0, p->dw, p->kw, 0, W, &kx0, &kx1);
    v8f a0 = p->is_max ? ninf : zero, a1 = a0;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *xr = xb + ((iy0 + ky * p->dh) * W + ix0) * 8;
        int64_t kx = kx0;
        if (p->is_max) {
            for (; kx + 2 <= kx1; kx += 2) {
                a0 = NCF(np_max)(a0, ld8(xr + kx * p->dw * 8));
                a1 = NCF(np_max)(a1, ld8(xr + (kx + 1) * p->dw * 8));
            }
            if (kx < kx1) a0 = NCF(np_max)(a0, ld8(xr + kx * p->dw * 8));
        } else {
            for (; kx + 2 <= kx1; kx += 2) {
                a0 += ld8(xr + kx * p->dw * 8);
                a1 += ld8(xr + (kx + 1) * p->dw * 8);
            }
            if (kx < kx1) a0 += ld8(xr + kx * p->dw * 8);
        }
    }
    v8f r;
    if (p->is_max) r = NCF(np_max)(a0, a1);
    else {
        int64_t n = (ky1 - ky0) * (kx1 - kx0);
        if (p->include_pad) {
            int64_t px0, px1;
            NCF(np_clip)(ix0, p->dw, p->kw, -p->pl, W + p->pr, &px0, &px1);
            n = (py1 - py0) * (px1 - px0);
        }
        const float s = n ? 1.0f / (float)n : 0.0f;
        r = (a0 + a1) * (v8f){s, s, s, s, s, s, s, s};
        if (!n) r = zero;
    }
    st8(yr + ox * 8, r);
}

/* NP interior pixels (every column tap inside the row; no dilation): the window's (NP - 1) * S + KW
 * columns reduced over the nr rows (rs floats apart) once, then each pixel over its KW columns: a
 * 3x3 stride-2 max loads 27 vectors for 4 pixels where a pixel at a time loaded 36 */
static NC_TARGET inline __attribute__((always_inline)) void NCF(np_tile)(const float *x, int64_t rs, int64_t nr, v8f scale, float *y,
                                                          const bool MX, const int KW, const int S, const int NP) {
    const v8f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    const v8f zero = {0, 0, 0, 0, 0, 0, 0, 0};
    v8f col[9]; /* (NP - 1) * S + KW of them */
#pragma GCC unroll 16
    for (int j = 0; j < (NP - 1) * S + KW; j++) col[j] = MX ? ninf : zero;
    for (int64_t r = 0; r < nr; r++)
#pragma GCC unroll 16
        for (int j = 0; j < (NP - 1) * S + KW; j++) {
            const v8f v = ld8(x + r * rs + j * 8);
            col[j] = MX ? NCF(np_max)(col[j], v) : col[j] + v;
        }
#pragma GCC unroll 8
    for (int q = 0; q < NP; q++) {
        v8f a = col[q * S];
#pragma GCC unroll 4
        for (int k = 1; k < KW; k++) a = MX ? NCF(np_max)(a, col[q * S + k]) : a + col[q * S + k];
        st8(y + q * 8, MX ? a : a * scale);
    }
}

/* the interior columns [lo, hi) of an output row */
static NC_TARGET inline __attribute__((always_inline)) void NCF(np_interior)(const np_plan *p, const float *x0, int64_t nr, v8f scale,
                                                              float *yr, int64_t lo, int64_t hi, const bool MX,
                                                              const int KW, const int S) {
    const int NP = S == 1 ? 6 : 4; /* (NP - 1) * S + KW column vectors live: 8 or 9 */
    const int64_t rs = p->dh * p->W * 8;
    int64_t ox = lo;
    for (; ox + NP <= hi; ox += NP) NCF(np_tile)(x0 + (ox * S - p->pl) * 8, rs, nr, scale, yr + ox * 8, MX, KW, S, NP);
    for (; ox < hi; ox++) NCF(np_tile)(x0 + (ox * S - p->pl) * 8, rs, nr, scale, yr + ox * 8, MX, KW, S, 1);
}

/* items: (image * block, output row) */
NC_TARGET void NCF(hrt_nc_pool)(void *vp, int64_t b, int64_t e) {
    const np_ctx *c = vp;
    const np_plan *p = c->p;
    const int64_t H = p->H, W = p->W, Ho = p->Ho, Wo = p->Wo;
    /* interior columns: ox * sw - pl >= 0 and ox * sw - pl + (kw - 1) * dw <= W - 1 */
    int64_t lo = (p->pl + p->sw - 1) / p->sw, last = W - 1 + p->pl - (p->kw - 1) * p->dw;
    int64_t hi = last < 0 ? 0 : last / p->sw + 1;
    if (hi > Wo) hi = Wo;
    if (lo > hi) lo = hi;
    /* the tiles: 3 wide at strides 1 and 2, 2 wide at stride 2 (ResNet's, Inception's, the 2x2 pools) */
    const int kind = p->dw != 1 ? 0 : p->kw == 3 && p->sw == 1 ? 1 : p->kw == 3 && p->sw == 2 ? 2 : p->kw == 2 && p->sw == 2 ? 3 : 0;
    if (!kind) lo = hi = Wo;
    for (int64_t it = b; it < e; it++) {
        const int64_t oy = it % Ho, nb = it / Ho;
        const float *xb = c->x + nb * H * W * 8;
        float *yr = c->y + (nb * Ho + oy) * Wo * 8;
        const int64_t iy0 = oy * p->sh - p->pt;
        int64_t ky0, ky1, py0, py1;
        NCF(np_clip)(iy0, p->dh, p->kh, 0, H, &ky0, &ky1);
        NCF(np_clip)(iy0, p->dh, p->kh, -p->pt, H + p->pb, &py0, &py1);
        for (int64_t ox = 0; ox < lo; ox++) NCF(np_pixel)(p, xb, yr, ox, iy0, ky0, ky1, py0, py1);
        if (lo < hi) {
            const int64_t nr = ky1 - ky0, n = (p->include_pad ? py1 - py0 : nr) * p->kw;
            const float s = n ? 1.0f / (float)n : 0.0f;
            const v8f scale = {s, s, s, s, s, s, s, s};
            const float *x0 = xb + (iy0 + ky0 * p->dh) * W * 8;
            if (p->is_max) {
                if (kind == 1) NCF(np_interior)(p, x0, nr, scale, yr, lo, hi, true, 3, 1);
                else if (kind == 2) NCF(np_interior)(p, x0, nr, scale, yr, lo, hi, true, 3, 2);
                else NCF(np_interior)(p, x0, nr, scale, yr, lo, hi, true, 2, 2);
            } else {
                if (kind == 1) NCF(np_interior)(p, x0, nr, scale, yr, lo, hi, false, 3, 1);
                else if (kind == 2) NCF(np_interior)(p, x0, nr, scale, yr, lo, hi, false, 3, 2);
                else NCF(np_interior)(p, x0, nr, scale, yr, lo, hi, false, 2, 2);
            }
        }
        for (int64_t ox = hi; ox < Wo; ox++) NCF(np_pixel)(p, xb, yr, ox, iy0, ky0, ky1, py0, py1);
    }
}

/* global: items are (image, block) planes */
NC_TARGET void NCF(hrt_nc_pool_global)(void *vp, int64_t b, int64_t e) {
    const np_ctx *c = vp;
    const np_plan *p = c->p;
    const int64_t HW = p->H * p->W;
    const v8f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (int64_t it = b; it < e; it++) {
        const float *xb = c->x + it * HW * 8;
        v8f a[4];
        for (int i = 0; i < 4; i++) a[i] = p->is_max ? ninf : (v8f){0, 0, 0, 0, 0, 0, 0, 0};
        int64_t q = 0;
        if (p->is_max) {
            for (; q + 4 <= HW; q += 4)
                for (int i = 0; i < 4; i++) a[i] = NCF(np_max)(a[i], ld8(xb + (q + i) * 8));
            for (; q < HW; q++) a[0] = NCF(np_max)(a[0], ld8(xb + q * 8));
            st8(c->y + it * 8, NCF(np_max)(NCF(np_max)(a[0], a[1]), NCF(np_max)(a[2], a[3])));
        } else {
            for (; q + 4 <= HW; q += 4)
                for (int i = 0; i < 4; i++) a[i] += ld8(xb + (q + i) * 8);
            for (; q < HW; q++) a[0] += ld8(xb + q * 8);
            const float s = HW ? 1.0f / (float)HW : 0.0f;
            st8(c->y + it * 8, ((a[0] + a[1]) + (a[2] + a[3])) * (v8f){s, s, s, s, s, s, s, s});
        }
    }
}

