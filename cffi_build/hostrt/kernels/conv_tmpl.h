/* Convolution core, included by conv.c once per compute type:
 *   CT       element type (float or double)
 *   CGEMM    hrt_sgemm / hrt_dgemm
 *   CN(x)    name suffix
 * x, w (canonical layout, see conv.c), bias and y are CT arrays. */

/* ---- NCHW im2col: col[(ci,ky,kx), oy*Wo+ox] for one image/group ---- */
typedef struct {
    const cv_plan *p;
    const CT *x; /* image n, first channel of group g */
    CT *col;
} CN(i2c_ctx);

static void CN(im2col_nchw_rows)(void *vp, int64_t r0, int64_t r1) {
    const CN(i2c_ctx) *c = vp;
    const cv_plan *p = c->p;
    int64_t HoWo = p->Ho * p->Wo;
    for (int64_t r = r0; r < r1; r++) {
        int64_t ci = r / (p->kh * p->kw), ky = (r / p->kw) % p->kh, kx = r % p->kw;
        const CT *xp = c->x + ci * p->H * p->W;
        CT *dst = c->col + r * HoWo;
        for (int64_t oy = 0; oy < p->Ho; oy++) {
            CT *drow = dst + oy * p->Wo;
            int64_t iy = oy * p->sh - p->pt + ky * p->dh;
            if (iy < 0 || iy >= p->H) {
                memset(drow, 0, sizeof(CT) * (size_t)p->Wo);
                continue;
            }
            const CT *xrow = xp + iy * p->W;
            int64_t off = kx * p->dw - p->pl;
            /* valid ox: 0 <= ox*sw + off < W */
            int64_t lo = off >= 0 ? 0 : (-off + p->sw - 1) / p->sw;
            int64_t hi = p->W - off <= 0 ? 0 : (p->W - off + p->sw - 1) / p->sw;
            if (hi > p->Wo) hi = p->Wo;
            if (lo > hi) lo = hi;
            for (int64_t ox = 0; ox < lo; ox++) drow[ox] = 0;
            if (p->sw == 1) memcpy(drow + lo, xrow + lo + off, sizeof(CT) * (size_t)(hi - lo));
            else
                for (int64_t ox = lo; ox < hi; ox++) drow[ox] = xrow[ox * p->sw + off];
            for (int64_t ox = hi; ox < p->Wo; ox++) drow[ox] = 0;
        }
    }
}

/* ---- NHWC im2col: col[oy*Wo+ox, (ky,kx,ci)] ---- */
static void CN(im2col_nhwc_pix)(void *vp, int64_t q0, int64_t q1) {
    const CN(i2c_ctx) *c = vp;
    const cv_plan *p = c->p;
    int64_t K = p->kh * p->kw * p->cin_g;
    for (int64_t q = q0; q < q1; q++) {
        int64_t oy = q / p->Wo, ox = q % p->Wo;
        CT *dst = c->col + q * K;
        for (int64_t ky = 0; ky < p->kh; ky++) {
            int64_t iy = oy * p->sh - p->pt + ky * p->dh;
            for (int64_t kx = 0; kx < p->kw; kx++) {
                int64_t ix = ox * p->sw - p->pl + kx * p->dw;
                CT *d = dst + (ky * p->kw + kx) * p->cin_g;
                if (iy < 0 || iy >= p->H || ix < 0 || ix >= p->W) memset(d, 0, sizeof(CT) * (size_t)p->cin_g);
                else memcpy(d, c->x + (iy * p->W + ix) * p->C, sizeof(CT) * (size_t)p->cin_g);
            }
        }
    }
}

/* ---- depthwise, direct ---- */
typedef struct {
    const cv_plan *p;
    const CT *x, *w, *bias;
    CT *y;
} CN(dw_ctx);

/* NCHW: one output plane (n, co) per item; vectorised over ox for stride 1 */
static void CN(dw_nchw)(void *vp, int64_t b, int64_t e) {
    const CN(dw_ctx) *c = vp;
    const cv_plan *p = c->p;
    int64_t mult = p->cout_g;
    for (int64_t it = b; it < e; it++) {
        int64_t n = it / p->Cout, co = it % p->Cout, ci = co / mult;
        const CT *xp = c->x + (n * p->C + ci) * p->H * p->W;
        const CT *wp = c->w + co * p->kh * p->kw;
        CT *yp = c->y + (n * p->Cout + co) * p->Ho * p->Wo;
        CT bv = c->bias ? c->bias[co] : 0;
        for (int64_t oy = 0; oy < p->Ho; oy++) {
            CT *yrow = yp + oy * p->Wo;
            for (int64_t ox = 0; ox < p->Wo; ox++) yrow[ox] = bv;
            for (int64_t ky = 0; ky < p->kh; ky++) {
                int64_t iy = oy * p->sh - p->pt + ky * p->dh;
                if (iy < 0 || iy >= p->H) continue;
                const CT *xrow = xp + iy * p->W;
                for (int64_t kx = 0; kx < p->kw; kx++) {
                    CT wv = wp[ky * p->kw + kx];
                    int64_t off = kx * p->dw - p->pl;
                    int64_t lo = off >= 0 ? 0 : (-off + p->sw - 1) / p->sw;
                    int64_t hi = p->W - off <= 0 ? 0 : (p->W - off + p->sw - 1) / p->sw;
                    if (hi > p->Wo) hi = p->Wo;
                    if (p->sw == 1) {
                        const CT *xs = xrow + off;
                        for (int64_t ox = lo; ox < hi; ox++) yrow[ox] += wv * xs[ox];
                    } else {
                        for (int64_t ox = lo; ox < hi; ox++) yrow[ox] += wv * xrow[ox * p->sw + off];
                    }
                }
            }
        }
    }
}

/* NHWC: one output row (n, oy) per item; vectorised over channels.
 * w is [kh, kw, Cout] (channel co = ci*mult + m). */
static void CN(dw_nhwc)(void *vp, int64_t b, int64_t e) {
    const CN(dw_ctx) *c = vp;
    const cv_plan *p = c->p;
    int64_t mult = p->cout_g, Cout = p->Cout;
    for (int64_t it = b; it < e; it++) {
        int64_t n = it / p->Ho, oy = it % p->Ho;
        for (int64_t ox = 0; ox < p->Wo; ox++) {
            CT *yv = c->y + ((n * p->Ho + oy) * p->Wo + ox) * Cout;
            if (c->bias) memcpy(yv, c->bias, sizeof(CT) * (size_t)Cout);
            else memset(yv, 0, sizeof(CT) * (size_t)Cout);
            for (int64_t ky = 0; ky < p->kh; ky++) {
                int64_t iy = oy * p->sh - p->pt + ky * p->dh;
                if (iy < 0 || iy >= p->H) continue;
                for (int64_t kx = 0; kx < p->kw; kx++) {
                    int64_t ix = ox * p->sw - p->pl + kx * p->dw;
                    if (ix < 0 || ix >= p->W) continue;
                    const CT *xv = c->x + ((n * p->H + iy) * p->W + ix) * p->C;
                    const CT *wv = c->w + (ky * p->kw + kx) * Cout;
                    if (mult == 1) {
                        for (int64_t ch = 0; ch < Cout; ch++) yv[ch] += wv[ch] * xv[ch];
                    } else {
                        for (int64_t ci = 0; ci < p->C; ci++)
                            for (int64_t m = 0; m < mult; m++) yv[ci * mult + m] += wv[ci * mult + m] * xv[ci];
                    }
                }
            }
        }
    }
}

/* ---- GEMM path: one (image, group) ---- */
typedef struct {
    const cv_plan *p;
    const CT *x, *w, *bias;
    CT *y, *col; /* col: per-worker scratch when items run in parallel */
    size_t col_elems;
    bool inner_parallel;
} CN(gm_ctx);

static void CN(conv_one)(const CN(gm_ctx) *c, int64_t n, int64_t g, CT *col) {
    const cv_plan *p = c->p;
    int64_t HoWo = p->Ho * p->Wo, HW = p->H * p->W;
    int64_t K = p->cin_g * p->kh * p->kw;
    bool direct = p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->pt == 0 && p->pl == 0 && p->Ho == p->H &&
                  p->Wo == p->W;
    if (!p->nhwc) {
        const CT *xg = c->x + (n * p->C + g * p->cin_g) * HW;
        CT *yg = c->y + (n * p->Cout + g * p->cout_g) * HoWo;
        const CT *wg = c->w + g * p->cout_g * K;
        CT beta = 0;
        if (c->bias) {
            for (int64_t co = 0; co < p->cout_g; co++) {
                CT bv = c->bias[g * p->cout_g + co];
                CT *yr = yg + co * HoWo;
                for (int64_t q = 0; q < HoWo; q++) yr[q] = bv;
            }
            beta = 1;
        }
        const CT *B = xg;
        if (!direct) {
            CN(i2c_ctx) ic = {p, xg, col};
            if (c->inner_parallel) hrt_parallel_for(K, K_GRAIN / (HoWo + 1) + 1, CN(im2col_nchw_rows), &ic);
            else CN(im2col_nchw_rows)(&ic, 0, K);
            B = col;
        }
        CGEMM(false, false, p->cout_g, HoWo, K, 1, wg, K, B, HoWo, beta, yg, HoWo);
    } else {
        const CT *xn = c->x + n * HW * p->C;
        CT *yn = c->y + n * HoWo * p->Cout + g * p->cout_g;
        const CT *wg = c->w + g * p->cout_g * K; /* OHWI rows of group g */
        CT beta = 0;
        if (c->bias) {
            for (int64_t q = 0; q < HoWo; q++) memcpy(yn + q * p->Cout, c->bias + g * p->cout_g, sizeof(CT) * (size_t)p->cout_g);
            beta = 1;
        }
        const CT *A;
        int64_t lda;
        if (direct) {
            A = xn + g * p->cin_g;
            lda = p->C;
        } else {
            CN(i2c_ctx) ic = {p, xn + g * p->cin_g, col};
            if (c->inner_parallel) hrt_parallel_for(HoWo, K_GRAIN / (K + 1) + 1, CN(im2col_nhwc_pix), &ic);
            else CN(im2col_nhwc_pix)(&ic, 0, HoWo);
            A = col;
            lda = K;
        }
        CGEMM(false, true, HoWo, p->cout_g, K, 1, A, lda, wg, K, beta, yn, p->Cout);
    }
}

static void CN(conv_items)(void *vp, int64_t b, int64_t e) {
    const CN(gm_ctx) *c = vp;
    CT *col = c->col_elems ? malloc(sizeof(CT) * c->col_elems) : NULL;
    if (c->col_elems && !col) return; /* probed by the caller */
    for (int64_t it = b; it < e; it++) CN(conv_one)(c, it / c->p->groups, it % c->p->groups, col);
    free(col);
}

static aclError CN(conv_run_t)(const hrt_kernel *k, const cv_plan *p, const CT *x, const CT *w, const CT *bias, CT *y) {
    if (p->depthwise) {
        CN(dw_ctx) c = {p, x, w, bias, y};
        if (!p->nhwc) hrt_parallel_for(p->N * p->Cout, K_GRAIN / (p->Ho * p->Wo * p->kh * p->kw + 1) + 1, CN(dw_nchw), &c);
        else hrt_parallel_for(p->N * p->Ho, K_GRAIN / (p->Wo * p->Cout * p->kh * p->kw + 1) + 1, CN(dw_nhwc), &c);
        return ACL_SUCCESS;
    }
    int64_t HoWo = p->Ho * p->Wo, K = p->cin_g * p->kh * p->kw;
    bool direct = p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->pt == 0 && p->pl == 0 && p->Ho == p->H &&
                  p->Wo == p->W;
    size_t col_elems = direct ? 0 : (size_t)(K * HoWo);
    int64_t items = p->N * p->groups;
    double mnk = (double)p->cout_g * (double)HoWo * (double)K;
    CN(gm_ctx) c = {p, x, w, bias, y, NULL, col_elems, false};
    if (items > 1 && mnk < K_GEMM_SMALL && hrt_blas_loaded()) {
        /* many GEMMs too small for hrt_sgemm to tile: spread them over the pool */
        if (col_elems) {
            void *probe = k_scratch(k, sizeof(CT) * col_elems);
            if (!probe) return ACL_ERROR_RT_MEMORY_ALLOCATION;
            free(probe);
        }
        hrt_parallel_for(items, (int64_t)(4e6 / (mnk + 1)) + 1, CN(conv_items), &c);
        return ACL_SUCCESS;
    }
    /* big GEMMs: one at a time, im2col on the pool, hrt_sgemm tiles the GEMM over the pool */
    CT *col = col_elems ? k_scratch(k, sizeof(CT) * col_elems) : NULL;
    if (col_elems && !col) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    c.inner_parallel = true;
    for (int64_t it = 0; it < items; it++) CN(conv_one)(&c, it / p->groups, it % p->groups, col);
    free(col);
    return ACL_SUCCESS;
}

/* ---- transposed convolution (GEMM + col2im) ----
 * w canonical [Cin, Cout_g, kh, kw] (NCHW) or [Cin, kh, kw, Cout_g] (NHWC).
 * x is the (forward) output gradient-like input [N, Cin, H, W]; y [N, Cout, Ho, Wo]. */
typedef struct {
    const cv_plan *p;
    const CT *col;
    CT *yg;
} CN(c2i_ctx);

static void CN(col2im_nchw)(void *vp, int64_t c0, int64_t c1) {
    const CN(c2i_ctx) *c = vp;
    const cv_plan *p = c->p;
    int64_t HW = p->H * p->W;
    for (int64_t co = c0; co < c1; co++) {
        CT *yp = c->yg + co * p->Ho * p->Wo;
        for (int64_t ky = 0; ky < p->kh; ky++)
            for (int64_t kx = 0; kx < p->kw; kx++) {
                const CT *src = c->col + ((co * p->kh + ky) * p->kw + kx) * HW;
                for (int64_t iy = 0; iy < p->H; iy++) {
                    int64_t oy = iy * p->sh - p->pt + ky * p->dh;
                    if (oy < 0 || oy >= p->Ho) continue;
                    CT *yrow = yp + oy * p->Wo;
                    const CT *srow = src + iy * p->W;
                    for (int64_t ix = 0; ix < p->W; ix++) {
                        int64_t ox = ix * p->sw - p->pl + kx * p->dw;
                        if (ox >= 0 && ox < p->Wo) yrow[ox] += srow[ix];
                    }
                }
            }
    }
}

static aclError CN(convt_run_t)(const hrt_kernel *k, const cv_plan *p, const CT *x, const CT *w, const CT *bias, CT *y) {
    int64_t HW = p->H * p->W, HoWo = p->Ho * p->Wo;
    int64_t cin_g = p->cin_g, cout_g = p->cout_g;
    int64_t K2 = cout_g * p->kh * p->kw;
    CT *col = k_scratch(k, sizeof(CT) * (size_t)(K2 * HW));
    if (!col) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    for (int64_t n = 0; n < p->N; n++) {
        /* y = bias */
        for (int64_t co = 0; co < p->Cout; co++) {
            CT bv = bias ? bias[co] : 0;
            for (int64_t q = 0; q < HoWo; q++) {
                if (p->nhwc) y[(n * HoWo + q) * p->Cout + co] = bv;
                else y[(n * p->Cout + co) * HoWo + q] = bv;
            }
        }
        for (int64_t g = 0; g < p->groups; g++) {
            const CT *wg = w + g * cin_g * K2;
            if (!p->nhwc) {
                /* col[K2, HW] = wg^T [K2, cin_g] x X_g [cin_g, HW] */
                const CT *xg = x + (n * p->C + g * cin_g) * HW;
                CGEMM(true, false, K2, HW, cin_g, 1, wg, K2, xg, HW, 0, col, HW);
                CN(c2i_ctx) cc = {p, col, y + (n * p->Cout + g * cout_g) * HoWo};
                hrt_parallel_for(cout_g, K_GRAIN / (p->kh * p->kw * HW + 1) + 1, CN(col2im_nchw), &cc);
            } else {
                /* col[HW, K2] = X_g [HW, cin_g] (lda C) x wg [cin_g, K2]; K2 order (ky, kx, co) */
                const CT *xg = x + n * HW * p->C + g * cin_g;
                CGEMM(false, false, HW, K2, cin_g, 1, xg, p->C, wg, K2, 0, col, K2);
                for (int64_t iy = 0; iy < p->H; iy++)
                    for (int64_t ix = 0; ix < p->W; ix++) {
                        const CT *src = col + (iy * p->W + ix) * K2;
                        for (int64_t ky = 0; ky < p->kh; ky++) {
                            int64_t oy = iy * p->sh - p->pt + ky * p->dh;
                            if (oy < 0 || oy >= p->Ho) continue;
                            for (int64_t kx = 0; kx < p->kw; kx++) {
                                int64_t ox = ix * p->sw - p->pl + kx * p->dw;
                                if (ox < 0 || ox >= p->Wo) continue;
                                CT *yv = y + ((n * p->Ho + oy) * p->Wo + ox) * p->Cout + g * cout_g;
                                const CT *sv = src + (ky * p->kw + kx) * cout_g;
                                for (int64_t co = 0; co < cout_g; co++) yv[co] += sv[co];
                            }
                        }
                    }
            }
        }
    }
    free(col);
    return ACL_SUCCESS;
}
