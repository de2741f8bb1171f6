/* The blocked layout NCHWc8 of the graph engine's conv chains: the reorders in and out of it and
 * its pool (nchwc_conv.c holds _NchwcConv2D).  A float32 tensor of logical NCHW shape [N, C, H, W]
 * with C % 8 == 0 is stored as [N, C/8, H, W, 8]: channel c at block c / 8, lane c % 8.
 *
 * _ReorderToNchwc    x [N, C, H, W] -> y [N, C/8, H, W, 8]
 * _ReorderFromNchwc  x [N, C/8, H, W, 8] -> y [N, C, H, W]
 *   8 pixels of 8 channel planes transposed 8x8 in registers; rows of a block over the pool.
 * _NchwcPool2D       x [N, C/8, H, W, 8] -> y [N, C/8, Ho, Wo, 8]
 *   attrs: mode ("max" / "avg"), global (0/1: Ho = Wo = 1 over the whole plane, the window attrs
 *   ignored), kernel [kh, kw], strides [sh, sw] (default 1), pads [top, bottom, left, right]
 *   (default 0), dilations [dh, dw] (default 1), count_include_pad (0/1, avg).  Ho / Wo are y's and
 *   every window must end inside input + pads: (Ho - 1) * sh - pt + (kh - 1) * dh + 1 <= H + pb
 *   (ceil mode arrives as extra bottom / right padding).  A max takes the window's taps inside the
 *   input (NaN propagates); an average divides by them (count_include_pad 0) or by the taps inside
 *   input + pads (1).  A window with no tap inside the input gives -inf (max) or 0 (average).
 *   8 channels a vector: each tap is one vector load, no deinterleaving.  Windows 3 wide at strides
 *   1 and 2 and 2 wide at stride 2 (no column dilation) run their interior columns in tiles of 4-6
 *   output pixels: the tile's input columns reduced over the window's rows once, then each pixel
 *   over its columns (a 3x3 stride-2 max: 27 loads for 4 pixels, not 36); border columns and other
 *   windows a pixel at a time with the taps clipped. */
#include "kcommon.h"

#include "nchwc.h"

/* ---------------------------------------------------------------- reorders */
typedef struct {
    int64_t CB, H, W; /* blocks, plane */
    bool to;          /* NCHW -> NCHWc8 */
} nr_plan;

typedef struct {
    const nr_plan *p;
    const float *x;
    float *y;
} nr_ctx;

/* items: (image, block, row) */
static void nr_chunk(void *vp, int64_t b, int64_t e) {
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

static aclError nr_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const nr_plan *p = k->plan;
    const int64_t items = k->out[0].numel / (8 * (p->W ? p->W : 1));
    if (k->out[0].numel == 0) return ACL_SUCCESS;
    nr_ctx c = {p, in[0], out[0]};
    hrt_parallel_for(items, K_GRAIN / (8 * p->W) + 1, nr_chunk, &c);
    return ACL_SUCCESS;
}

static aclError nr_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    const bool to = strcmp(k->op_name, "_ReorderToNchwc") == 0;
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (!rc) rc = k_expect_same_dtype(k, 0, 1, ACL_FLOAT);
    if (!rc) rc = k_expect_out_dtype(k, 0, ACL_FLOAT);
    if (rc) return rc;
    const hrt_tensor *plain = to ? &k->in[0] : &k->out[0], *blk = to ? &k->out[0] : &k->in[0];
    char sp[128];
    hrt_shape_str(plain->dims, plain->ndim, sp, sizeof sp);
    if (plain->ndim != 4 || plain->dims[1] % 8)
        return hrt_error(to ? ACL_ERROR_OP_INPUT_NOT_MATCH : ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API,
                         "%s: the NCHW %s %s must be 4-D with channels a multiple of 8", k->op_name,
                         to ? "input" : "output", sp);
    const int64_t d[5] = {plain->dims[0], plain->dims[1] / 8, plain->dims[2], plain->dims[3], 8};
    bool same = blk->ndim == 5;
    for (int i = 0; same && i < 5; i++) same = blk->dims[i] == d[i];
    if (!same) {
        char sb[128], sw[128];
        hrt_shape_str(blk->dims, blk->ndim, sb, sizeof sb);
        hrt_shape_str(d, 5, sw, sizeof sw);
        return hrt_error(to ? ACL_ERROR_OP_OUTPUT_NOT_MATCH : ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                         "%s: the blocked %s %s must be %s for NCHW %s", k->op_name, to ? "output" : "input", sb, sw, sp);
    }
    nr_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    *p = (nr_plan){d[1], d[2], d[3], to};
    k->plan = p;
    k->plan_free = free;
    k->run = nr_run;
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------------- pool */
typedef struct {
    int64_t H, W, Ho, Wo, kh, kw, sh, sw, dh, dw, pt, pb, pl, pr;
    bool is_max, include_pad, global;
} np_plan;

typedef struct {
    const np_plan *p;
    const float *x;
    float *y;
} np_ctx;

/* NaN-propagating max (k_maxf's rule: a NaN in m stays, a NaN in v is taken) */
static inline v8f np_max(v8f m, v8f v) {
    const v8i take = (v > m) | (v != v);
    return (v8f)(((v8i)v & take) | ((v8i)m & ~take));
}

/* the taps [k0, k1) of a window starting at i0 (step d, k taps) that lie inside [lo, hi) */
static inline void np_clip(int64_t i0, int64_t d, int64_t k, int64_t lo, int64_t hi, int64_t *k0, int64_t *k1) {
    int64_t a = 0, b = k;
    if (i0 < lo) a = (lo - i0 + d - 1) / d;
    if (i0 + (k - 1) * d >= hi) b = i0 >= hi ? 0 : (hi - 1 - i0) / d + 1;
    if (b < a) b = a;
    *k0 = a;
    *k1 = b;
}

/* one output pixel, its taps clipped to the input: a border column, or any pool the tiles below
 * do not take */
static inline void np_pixel(const np_plan *p, const float *xb, float *yr, int64_t ox, int64_t iy0, int64_t ky0,
                            int64_t ky1, int64_t py0, int64_t py1) {
    const v8f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    const v8f zero = {0, 0, 0, 0, 0, 0, 0, 0};
    const int64_t W = p->W, ix0 = ox * p->sw - p->pl;
    int64_t kx0, kx1;
    np_clip(ix0, p->dw, p->kw, 0, W, &kx0, &kx1);
    v8f a0 = p->is_max ? ninf : zero, a1 = a0;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *xr = xb + ((iy0 + ky * p->dh) * W + ix0) * 8;
        int64_t kx = kx0;
        if (p->is_max) {
            for (; kx + 2 <= kx1; kx += 2) {
                a0 = np_max(a0, ld8(xr + kx * p->dw * 8));
                a1 = np_max(a1, ld8(xr + (kx + 1) * p->dw * 8));
            }
            if (kx < kx1) a0 = np_max(a0, ld8(xr + kx * p->dw * 8));
        } else {
            for (; kx + 2 <= kx1; kx += 2) {
                a0 += ld8(xr + kx * p->dw * 8);
                a1 += ld8(xr + (kx + 1) * p->dw * 8);
            }
            if (kx < kx1) a0 += ld8(xr + kx * p->dw * 8);
        }
    }
    v8f r;
    if (p->is_max) r = np_max(a0, a1);
    else {
        int64_t n = (ky1 - ky0) * (kx1 - kx0);
        if (p->include_pad) {
            int64_t px0, px1;
            np_clip(ix0, p->dw, p->kw, -p->pl, W + p->pr, &px0, &px1);
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
static inline __attribute__((always_inline)) void np_tile(const float *x, int64_t rs, int64_t nr, v8f scale, float *y,
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
            col[j] = MX ? np_max(col[j], v) : col[j] + v;
        }
#pragma GCC unroll 8
    for (int q = 0; q < NP; q++) {
        v8f a = col[q * S];
#pragma GCC unroll 4
        for (int k = 1; k < KW; k++) a = MX ? np_max(a, col[q * S + k]) : a + col[q * S + k];
        st8(y + q * 8, MX ? a : a * scale);
    }
}

/* the interior columns [lo, hi) of an output row */
static inline __attribute__((always_inline)) void np_interior(const np_plan *p, const float *x0, int64_t nr, v8f scale,
                                                              float *yr, int64_t lo, int64_t hi, const bool MX,
                                                              const int KW, const int S) {
    const int NP = S == 1 ? 6 : 4; /* (NP - 1) * S + KW column vectors live: 8 or 9 */
    const int64_t rs = p->dh * p->W * 8;
    int64_t ox = lo;
    for (; ox + NP <= hi; ox += NP) np_tile(x0 + (ox * S - p->pl) * 8, rs, nr, scale, yr + ox * 8, MX, KW, S, NP);
    for (; ox < hi; ox++) np_tile(x0 + (ox * S - p->pl) * 8, rs, nr, scale, yr + ox * 8, MX, KW, S, 1);
}

/* items: (image * block, output row) */
static void np_chunk(void *vp, int64_t b, int64_t e) {
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
        np_clip(iy0, p->dh, p->kh, 0, H, &ky0, &ky1);
        np_clip(iy0, p->dh, p->kh, -p->pt, H + p->pb, &py0, &py1);
        for (int64_t ox = 0; ox < lo; ox++) np_pixel(p, xb, yr, ox, iy0, ky0, ky1, py0, py1);
        if (lo < hi) {
            const int64_t nr = ky1 - ky0, n = (p->include_pad ? py1 - py0 : nr) * p->kw;
            const float s = n ? 1.0f / (float)n : 0.0f;
            const v8f scale = {s, s, s, s, s, s, s, s};
            const float *x0 = xb + (iy0 + ky0 * p->dh) * W * 8;
            if (p->is_max) {
                if (kind == 1) np_interior(p, x0, nr, scale, yr, lo, hi, true, 3, 1);
                else if (kind == 2) np_interior(p, x0, nr, scale, yr, lo, hi, true, 3, 2);
                else np_interior(p, x0, nr, scale, yr, lo, hi, true, 2, 2);
            } else {
                if (kind == 1) np_interior(p, x0, nr, scale, yr, lo, hi, false, 3, 1);
                else if (kind == 2) np_interior(p, x0, nr, scale, yr, lo, hi, false, 3, 2);
                else np_interior(p, x0, nr, scale, yr, lo, hi, false, 2, 2);
            }
        }
        for (int64_t ox = hi; ox < Wo; ox++) np_pixel(p, xb, yr, ox, iy0, ky0, ky1, py0, py1);
    }
}

/* global: items are (image, block) planes */
static void np_global_chunk(void *vp, int64_t b, int64_t e) {
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
                for (int i = 0; i < 4; i++) a[i] = np_max(a[i], ld8(xb + (q + i) * 8));
            for (; q < HW; q++) a[0] = np_max(a[0], ld8(xb + q * 8));
            st8(c->y + it * 8, np_max(np_max(a[0], a[1]), np_max(a[2], a[3])));
        } else {
            for (; q + 4 <= HW; q += 4)
                for (int i = 0; i < 4; i++) a[i] += ld8(xb + (q + i) * 8);
            for (; q < HW; q++) a[0] += ld8(xb + q * 8);
            const float s = HW ? 1.0f / (float)HW : 0.0f;
            st8(c->y + it * 8, ((a[0] + a[1]) + (a[2] + a[3])) * (v8f){s, s, s, s, s, s, s, s});
        }
    }
}

static aclError np_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const np_plan *p = k->plan;
    if (k->out[0].numel == 0) return ACL_SUCCESS;
    np_ctx c = {p, in[0], out[0]};
    const int64_t planes = k->out[0].dims[0] * k->out[0].dims[1];
    if (p->global) {
        hrt_parallel_for(planes, K_GRAIN / (8 * p->H * p->W + 1) + 1, np_global_chunk, &c);
        return ACL_SUCCESS;
    }
    const int64_t per = p->Wo * 8 * p->kh * p->kw + 1;
    hrt_parallel_for(planes * p->Ho, K_GRAIN / per + 1, np_chunk, &c);
    return ACL_SUCCESS;
}

static aclError np_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (!rc) rc = k_expect_same_dtype(k, 0, 1, ACL_FLOAT);
    if (!rc) rc = k_expect_out_dtype(k, 0, ACL_FLOAT);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *y = &k->out[0];
    char sx[128], sy[128];
    hrt_shape_str(x->dims, x->ndim, sx, sizeof sx);
    hrt_shape_str(y->dims, y->ndim, sy, sizeof sy);
    if (x->ndim != 5 || x->dims[4] != 8)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x %s must be blocked [N, C/8, H, W, 8]", k->op_name,
                         sx);
    if (y->ndim != 5 || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1] || y->dims[4] != 8)
        return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "%s: y %s must be blocked [N, C/8, Ho, Wo, 8] for x %s",
                         k->op_name, sy, sx);
    const char *mode;
    int64_t global = 0, cip = 0, ks[2] = {1, 1}, st[2], pads[4], dil[2];
    static const int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
    if ((rc = hrt_attr_get_string(k, attrs, "mode", true, NULL, &mode))) return rc;
    if (strcmp(mode, "max") && strcmp(mode, "avg"))
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: mode must be \"max\" or \"avg\", got \"%s\"", k->op_name,
                         mode);
    if ((rc = hrt_attr_get_int(k, attrs, "global", false, 0, &global))) return rc;
    if ((rc = hrt_attr_get_int(k, attrs, "count_include_pad", false, 0, &cip))) return rc;
    if ((global != 0 && global != 1) || (cip != 0 && cip != 1))
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: global and count_include_pad must be 0 or 1",
                         k->op_name);
    if (!global) rc = k_attr_ints(k, attrs, "kernel", true, 2, NULL, ks, 2, NULL);
    if (!rc) rc = k_attr_ints(k, attrs, "strides", false, 2, ones, st, 2, NULL);
    if (!rc) rc = k_attr_ints(k, attrs, "pads", false, 4, zeros, pads, 4, NULL);
    if (!rc) rc = k_attr_ints(k, attrs, "dilations", false, 2, ones, dil, 2, NULL);
    if (rc) return rc;
    np_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    *p = (np_plan){.H = x->dims[2], .W = x->dims[3], .Ho = y->dims[2], .Wo = y->dims[3], .is_max = mode[0] == 'm',
                   .include_pad = cip, .global = global};
    if (global) {
        if (p->Ho != 1 || p->Wo != 1) {
            free(p);
            return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "%s: a global pool's y %s must be [N, C/8, 1, 1, 8]",
                             k->op_name, sy);
        }
    } else {
        const int64_t v[10] = {ks[0], ks[1], st[0], st[1], dil[0], dil[1], pads[0], pads[1], pads[2], pads[3]};
        for (int i = 0; i < 10; i++)
            if (v[i] < (i < 6 ? 1 : 0) || v[i] > K_MAX_WINDOW) {
                free(p);
                return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API,
                                 "%s: kernel, strides and dilations must be in [1, %lld], pads in [0, %lld]", k->op_name,
                                 (long long)K_MAX_WINDOW, (long long)K_MAX_WINDOW);
            }
        p->kh = ks[0], p->kw = ks[1], p->sh = st[0], p->sw = st[1], p->dh = dil[0], p->dw = dil[1];
        p->pt = pads[0], p->pb = pads[1], p->pl = pads[2], p->pr = pads[3];
        const bool fits = p->Ho >= 1 && p->Wo >= 1 &&
                          (p->Ho - 1) * p->sh - p->pt + (p->kh - 1) * p->dh + 1 <= p->H + p->pb &&
                          (p->Wo - 1) * p->sw - p->pl + (p->kw - 1) * p->dw + 1 <= p->W + p->pr;
        if (!fits) {
            free(p);
            return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API,
                             "%s: y %s does not fit x %s: every window must end inside the input and its pads",
                             k->op_name, sy, sx);
        }
    }
    k->plan = p;
    k->plan_free = free;
    k->run = np_run;
    return ACL_SUCCESS;
}

HRT_OP(reorder_to_nchwc, "_ReorderToNchwc", nr_compile)
HRT_OP(reorder_from_nchwc, "_ReorderFromNchwc", nr_compile)
HRT_OP(nchwc_pool2d, "_NchwcPool2D", np_compile)
