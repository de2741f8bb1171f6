/* Pooling: MaxPoolV3, AvgPoolV2 (ksize/strides in data_format order,
 * padding_mode CALCULATED/SAME/VALID, pads [top, bottom, left, right],
 * global_pooling, ceil_mode; AvgPoolV2 exclusive and divisor_override) and
 * TF-style MaxPool / AvgPool (padding "SAME"/"VALID", default NHWC).
 *
 * NCHW works plane by plane: for each output row, every valid input row of
 * the window is folded into an accumulator row (vectorised over output
 * columns when the stride is 1); NHWC folds whole pixels vectorised over
 * channels.  Padding never contributes to a max; an average divides by
 * the number of valid elements (exclusive) or by the window clipped to the
 * padded extent (count_include_pad), as PyTorch/ONNX do.  ceil_mode drops
 * a last window that would start in the bottom/right padding.
 * float16/bfloat16 widen to float32; integers (max pool) compute exactly
 * in float64. */
#include "kcommon.h"
#include "kmath.h"

typedef struct {
    int64_t N, C, H, W, Ho, Wo;
    int64_t kh, kw, sh, sw, pt, pl, pb, pr;
    bool nhwc, is_max, exclusive;
    int64_t divisor;
    aclDataType dt;
    bool whole_rows;  /* NCHW, Wo == 1 and the window covers every column: reduce rows as one run */
    int64_t *lohi;    /* NCHW: per kx, the output columns [lo, hi) whose window column is inside the row */
} pl_plan;

typedef struct {
    const pl_plan *p;
    const void *x;
    void *y;
    _Atomic int failed; /* a worker could not get its row buffers */
} pl_ctx;

/* NaN-propagating max as a bitwise select (kmath.h), so the row loops vectorise */
static inline float k_row_max_f32(const float *x, int64_t n) { return k_row_maxf(x, n); }
static inline double k_row_max_f64(const double *x, int64_t n) { return k_row_maxd(x, n); }
static inline float pmax_f32(float a, float b) { return k_maxf(a, b); }
static inline double pmax_f64(double a, double b) { return k_maxd(a, b); }

#define POOL_IMPL(CT, SFX, NEG_INF)                                                                          \
    /* op over n contiguous values (n >= 1): independent lanes so the sum vectorises */                      \
    static CT plane_reduce_##SFX(const CT *x, int64_t n, bool is_max) {                                       \
        if (is_max) return k_row_max_##SFX(x, n);                                                              \
        CT acc[16] = {0};                                                                                     \
        int64_t i = 0;                                                                                        \
        for (; i + 16 <= n; i += 16)                                                                          \
            for (int j = 0; j < 16; j++) acc[j] += x[i + j];                                                  \
        CT s = 0;                                                                                             \
        for (int j = 0; j < 16; j++) s += acc[j];                                                             \
        for (; i < n; i++) s += x[i];                                                                         \
        return s;                                                                                             \
    }                                                                                                         \
    static void pool_nchw_##SFX(void *vp, int64_t b0, int64_t b1) {                                           \
        const pl_ctx *c = vp;                                                                                 \
        const pl_plan *p = c->p;                                                                              \
        const int64_t W = p->W, Wo = p->Wo;                                                                   \
        CT tbuf[2048], abuf[2048];                                                                            \
        CT *t = W <= 2048 ? tbuf : malloc(sizeof(CT) * (size_t)W);                                            \
        CT *a = Wo <= 2048 ? abuf : malloc(sizeof(CT) * (size_t)Wo);                                          \
        if (!t || !a) {                                                                                       \
            ((pl_ctx *)c)->failed = 1;                                                                        \
            goto done;                                                                                        \
        }                                                                                                     \
        for (int64_t pc = b0; pc < b1; pc++) {                                                                \
            const CT *xp = (const CT *)c->x + pc * p->H * W;                                                  \
            CT *yp = (CT *)c->y + pc * p->Ho * Wo;                                                            \
            for (int64_t oy = 0; oy < p->Ho; oy++) {                                                          \
                int64_t hs = oy * p->sh - p->pt, he = hs + p->kh;                                             \
                int64_t h0 = hs < 0 ? 0 : hs, h1 = he > p->H ? p->H : he;                                     \
                CT *yr = yp + oy * Wo;                                                                        \
                if (p->whole_rows) { /* every window spans whole rows: one contiguous reduction */          \
                    CT v = h1 > h0 ? plane_reduce_##SFX(xp + h0 * W, (h1 - h0) * W, p->is_max)                \
                                   : (p->is_max ? NEG_INF : 0);                                               \
                    a[0] = v;                                                                                 \
                } else {                                                                                      \
                    /* fold the window's rows into t (contiguous, vectorised), then slide along t */          \
                    const CT *rows = t;                                                                       \
                    if (h1 - h0 == 1) {                                                                       \
                        rows = xp + h0 * W;                                                                   \
                    } else if (h1 <= h0) {                                                                    \
                        for (int64_t x = 0; x < W; x++) t[x] = p->is_max ? NEG_INF : 0;                       \
                    } else {                                                                                  \
                        const CT *r0 = xp + h0 * W, *r1 = r0 + W;                                             \
                        if (p->is_max)                                                                        \
                            for (int64_t x = 0; x < W; x++) t[x] = pmax_##SFX(r1[x], r0[x]);                  \
                        else                                                                                  \
                            for (int64_t x = 0; x < W; x++) t[x] = r0[x] + r1[x];                             \
                        for (int64_t iy = h0 + 2; iy < h1; iy++) {                                            \
                            const CT *xr = xp + iy * W;                                                       \
                            if (p->is_max)                                                                    \
                                for (int64_t x = 0; x < W; x++) t[x] = pmax_##SFX(xr[x], t[x]);               \
                            else                                                                              \
                                for (int64_t x = 0; x < W; x++) t[x] += xr[x];                                \
                        }                                                                                     \
                    }                                                                                         \
                    for (int64_t ox = 0; ox < Wo; ox++) a[ox] = p->is_max ? NEG_INF : 0;                      \
                    for (int64_t kx = 0; kx < p->kw; kx++) {                                                  \
                        const int64_t off = kx - p->pl, lo = p->lohi[2 * kx], hi = p->lohi[2 * kx + 1];       \
                        const CT *tr = rows + off;                                                            \
                        if (p->is_max) {                                                                      \
                            if (p->sw == 1)                                                                   \
                                for (int64_t ox = lo; ox < hi; ox++) a[ox] = pmax_##SFX(tr[ox], a[ox]);       \
                            else if (p->sw == 2)                                                              \
                                for (int64_t ox = lo; ox < hi; ox++) a[ox] = pmax_##SFX(tr[2 * ox], a[ox]);   \
                            else                                                                              \
                                for (int64_t ox = lo; ox < hi; ox++) a[ox] = pmax_##SFX(tr[ox * p->sw], a[ox]); \
                        } else {                                                                              \
                            if (p->sw == 1)                                                                   \
                                for (int64_t ox = lo; ox < hi; ox++) a[ox] += tr[ox];                         \
                            else if (p->sw == 2)                                                              \
                                for (int64_t ox = lo; ox < hi; ox++) a[ox] += tr[2 * ox];                     \
                            else                                                                              \
                                for (int64_t ox = lo; ox < hi; ox++) a[ox] += tr[ox * p->sw];                 \
                        }                                                                                     \
                    }                                                                                         \
                }                                                                                             \
                if (p->is_max) {                                                                              \
                    memcpy(yr, a, sizeof(CT) * (size_t)Wo);                                                   \
                } else {                                                                                      \
                    int64_t hpad = (he > p->H + p->pb ? p->H + p->pb : he) - hs;                              \
                    for (int64_t ox = 0; ox < Wo; ox++) {                                                     \
                        int64_t ws = ox * p->sw - p->pl, we = ws + p->kw;                                     \
                        int64_t cnt;                                                                          \
                        if (p->divisor) cnt = p->divisor;                                                     \
                        else if (p->exclusive) cnt = (h1 - h0) * ((we > W ? W : we) - (ws < 0 ? 0 : ws));     \
                        else cnt = hpad * ((we > W + p->pr ? W + p->pr : we) - ws);                           \
                        yr[ox] = cnt > 0 ? a[ox] / (CT)cnt : (CT)0;                                           \
                    }                                                                                         \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    done:                                                                                                     \
        if (t && t != tbuf) free(t);                                                                          \
        if (a && a != abuf) free(a);                                                                          \
    }                                                                                                         \
    static void pool_nhwc_##SFX(void *vp, int64_t b0, int64_t b1) {                                           \
        const pl_ctx *c = vp;                                                                                 \
        const pl_plan *p = c->p;                                                                              \
        int64_t C = p->C;                                                                                     \
        for (int64_t it = b0; it < b1; it++) { /* (n, oy) */                                                  \
            int64_t n = it / p->Ho, oy = it % p->Ho;                                                          \
            int64_t hs = oy * p->sh - p->pt, he = hs + p->kh;                                                 \
            int64_t h0 = hs < 0 ? 0 : hs, h1 = he > p->H ? p->H : he;                                         \
            for (int64_t ox = 0; ox < p->Wo; ox++) {                                                          \
                int64_t ws = ox * p->sw - p->pl, we = ws + p->kw;                                             \
                int64_t w0 = ws < 0 ? 0 : ws, w1 = we > p->W ? p->W : we;                                     \
                CT *yv = (CT *)c->y + ((n * p->Ho + oy) * p->Wo + ox) * C;                                    \
                for (int64_t ch = 0; ch < C; ch++) yv[ch] = p->is_max ? NEG_INF : 0;                          \
                for (int64_t iy = h0; iy < h1; iy++)                                                          \
                    for (int64_t ix = w0; ix < w1; ix++) {                                                    \
                        const CT *xv = (const CT *)c->x + ((n * p->H + iy) * p->W + ix) * C;                  \
                        if (p->is_max)                                                                        \
                            for (int64_t ch = 0; ch < C; ch++) yv[ch] = pmax_##SFX(xv[ch], yv[ch]);           \
                        else                                                                                  \
                            for (int64_t ch = 0; ch < C; ch++) yv[ch] += xv[ch];                              \
                    }                                                                                         \
                if (!p->is_max) {                                                                             \
                    int64_t cnt;                                                                              \
                    if (p->divisor) cnt = p->divisor;                                                         \
                    else if (p->exclusive) cnt = (h1 - h0) * (w1 - w0);                                       \
                    else                                                                                      \
                        cnt = ((he > p->H + p->pb ? p->H + p->pb : he) - hs) *                                \
                              ((we > p->W + p->pr ? p->W + p->pr : we) - ws);                                 \
                    CT inv = cnt > 0 ? (CT)1 / (CT)cnt : (CT)0;                                               \
                    for (int64_t ch = 0; ch < C; ch++) yv[ch] *= inv;                                         \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }

POOL_IMPL(float, f32, -__builtin_inff())
POOL_IMPL(double, f64, -__builtin_inf())

static aclError pl_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const pl_plan *p = k->plan;
    int64_t xn = k->in[0].numel, yn = k->out[0].numel;
    if (yn == 0) return ACL_SUCCESS;
    bool f32 = p->dt == ACL_FLOAT || k_is_half(p->dt), f64 = p->dt == ACL_DOUBLE;
    void *x = in[0], *y = out[0], *s = NULL;
    if (!f32 && !f64) { /* integers: exact in float64 */
        s = k_scratch(k, sizeof(double) * (size_t)(xn + yn));
        if (!s) return ACL_ERROR_RT_MEMORY_ALLOCATION;
        double *dx = s;
        for (int64_t i = 0; i < xn; i++) dx[i] = k_load_d(in[0], p->dt, i);
        x = dx;
        y = dx + xn;
        f64 = true;
    } else if (f32 && p->dt != ACL_FLOAT) {
        s = k_scratch(k, sizeof(float) * (size_t)(xn + yn));
        if (!s) return ACL_ERROR_RT_MEMORY_ALLOCATION;
        k_to_f32(in[0], p->dt, s, xn);
        x = s;
        y = (float *)s + xn;
    }
    pl_ctx c = {p, x, y, 0};
    int64_t work = (p->nhwc ? p->kh * p->kw * p->Wo * p->C : p->Ho * (p->kh * p->W + p->kw * p->Wo)) + 1;
    int64_t items = p->nhwc ? p->N * p->Ho : p->N * p->C;
    if (f64) hrt_parallel_for(items, K_GRAIN / work + 1, p->nhwc ? pool_nhwc_f64 : pool_nchw_f64, &c);
    else hrt_parallel_for(items, K_GRAIN / work + 1, p->nhwc ? pool_nhwc_f32 : pool_nchw_f32, &c);
    if (c.failed) {
        free(s);
        return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    }
    if (s) {
        if (p->dt == ACL_FLOAT16 || p->dt == ACL_BF16) {
            k_from_f32(y, p->dt, out[0], yn);
        } else if (!k_is_float(p->dt)) {
            for (int64_t i = 0; i < yn; i++) k_store_d(out[0], p->dt, i, ((double *)y)[i]);
        }
        free(s);
    }
    return ACL_SUCCESS;
}

/* output size and padding for one spatial dim */
static aclError pl_dim(const hrt_kernel *k, int mode, bool ceil_mode, int64_t in, int64_t kk, int64_t s, int64_t *pb_,
                       int64_t *pe_, int64_t *out) {
    int64_t pb = *pb_, pe = *pe_, o;
    if (mode == 1) { /* SAME */
        o = (in + s - 1) / s;
        int64_t tot = (o - 1) * s + kk - in;
        if (tot < 0) tot = 0;
        pb = tot / 2;
        pe = tot - pb;
    } else if (mode == 2) { /* VALID */
        pb = pe = 0;
        if (in < kk) o = 0;
        else o = (in - kk) / s + 1;
    } else {
        int64_t span = in + pb + pe - kk;
        if (span < 0)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: window %lld is larger than the padded input %lld",
                             k->op_name, (long long)kk, (long long)(in + pb + pe));
        o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
        if (ceil_mode && (o - 1) * s >= in + pb) o--;
    }
    *pb_ = pb;
    *pe_ = pe;
    *out = o;
    return ACL_SUCCESS;
}

static void pl_free(void *vp) {
    pl_plan *p = vp;
    free(p->lohi);
    free(p);
}

static aclError pl_compile(hrt_kernel *k, const aclopAttr *attrs) {
    const char *nm = k->op_name;
    bool is_max = strncmp(nm, "MaxPool", 7) == 0, tf = strcmp(nm, "MaxPool") == 0 || strcmp(nm, "AvgPool") == 0;
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    static const aclDataType fl[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    static const aclDataType mx[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT8, ACL_UINT8, ACL_INT32, ACL_INT64};
    if ((rc = hrt_expect_dtype_in(k, x, "x", is_max ? mx : fl, is_max ? 8 : 4))) return rc;
    if ((rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    if (x->ndim != 4) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must be 4-D, got rank %d", nm, x->ndim);
    pl_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int nhwc;
    int64_t ks[4], st[4], pads[4] = {0, 0, 0, 0};
    static const int64_t zeros[4] = {0, 0, 0, 0};
    bool global = false, ceil_mode = false, exclusive = true;
    int64_t divisor = 0;
    int mode = 0;
    const char *pm = NULL;
    if ((rc = k_layout(k, attrs, x, tf ? "NHWC" : "NCHW", &nhwc))) goto fail;
    if ((rc = k_attr_ints(k, attrs, "ksize", true, 4, NULL, ks, 4, NULL))) goto fail;
    if ((rc = k_attr_ints(k, attrs, "strides", true, 4, NULL, st, 4, NULL))) goto fail;
    if (tf) {
        rc = hrt_attr_get_string(k, attrs, "padding", true, NULL, &pm);
    } else {
        rc = hrt_attr_get_string(k, attrs, "padding_mode", false, "CALCULATED", &pm);
        if (!rc) rc = k_attr_ints(k, attrs, "pads", false, 4, zeros, pads, 4, NULL);
        if (!rc) rc = hrt_attr_get_bool(k, attrs, "global_pooling", false, &global);
        if (!rc) rc = hrt_attr_get_bool(k, attrs, "ceil_mode", false, &ceil_mode);
        if (!rc && !is_max) rc = hrt_attr_get_bool(k, attrs, "exclusive", true, &exclusive);
        if (!rc && !is_max) rc = hrt_attr_get_int(k, attrs, "divisor_override", false, 0, &divisor);
    }
    if (rc) goto fail;
    if (strcmp(pm, "CALCULATED") == 0 && !tf) mode = 0;
    else if (strcmp(pm, "SAME") == 0) mode = 1;
    else if (strcmp(pm, "VALID") == 0) mode = 2;
    else {
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: padding mode '%s' is not supported (%s)", nm, pm,
                       tf ? "SAME, VALID" : "CALCULATED, SAME, VALID");
        goto fail;
    }
    p->nhwc = nhwc;
    p->N = x->dims[0];
    p->C = nhwc ? x->dims[3] : x->dims[1];
    p->H = nhwc ? x->dims[1] : x->dims[2];
    p->W = nhwc ? x->dims[2] : x->dims[3];
    int hi = nhwc ? 1 : 2, wi = nhwc ? 2 : 3;
    p->kh = ks[hi];
    p->kw = ks[wi];
    p->sh = st[hi];
    p->sw = st[wi];
    if (global) {
        p->kh = p->H;
        p->kw = p->W;
        p->sh = p->sw = 1;
        mode = 2;
    }
    if (p->kh < 1 || p->kw < 1 || p->sh < 1 || p->sw < 1 || pads[0] < 0 || pads[1] < 0 || pads[2] < 0 || pads[3] < 0) {
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: ksize and strides must be >= 1 and pads >= 0", nm);
        goto fail;
    }
    int64_t big = p->kh > p->kw ? p->kh : p->kw;
    for (int i = 0; i < 4; i++) big = pads[i] > big ? pads[i] : big;
    if (p->sh > big) big = p->sh;
    if (p->sw > big) big = p->sw;
    if (big > K_MAX_WINDOW) {
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: ksize, strides and pads must be <= %lld, got %lld", nm,
                       (long long)K_MAX_WINDOW, (long long)big);
        goto fail;
    }
    if (divisor < 0) {
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: divisor_override must be >= 0", nm);
        goto fail;
    }
    int64_t pt = pads[0], pb = pads[1], pl = pads[2], pr = pads[3];
    if ((rc = pl_dim(k, mode, ceil_mode, p->H, p->kh, p->sh, &pt, &pb, &p->Ho))) goto fail;
    if ((rc = pl_dim(k, mode, ceil_mode, p->W, p->kw, p->sw, &pl, &pr, &p->Wo))) goto fail;
    p->pt = pt;
    p->pl = pl;
    p->pb = pb;
    p->pr = pr;
    p->is_max = is_max;
    p->exclusive = exclusive;
    p->divisor = divisor;
    p->dt = x->dtype;
    int64_t od[4];
    if (nhwc) od[0] = p->N, od[1] = p->Ho, od[2] = p->Wo, od[3] = p->C;
    else od[0] = p->N, od[1] = p->C, od[2] = p->Ho, od[3] = p->Wo;
    if ((rc = hrt_expect_same_shape(k, &k->out[0], od, 4, 0))) goto fail;
    if (!nhwc) {
        p->whole_rows = p->Wo == 1 && p->kw - p->pl >= p->W;
        p->lohi = malloc(sizeof(int64_t) * 2 * (size_t)p->kw);
        if (!p->lohi) {
            rc = hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
            goto fail;
        }
        for (int64_t kx = 0; kx < p->kw; kx++) {
            int64_t off = kx - p->pl;
            int64_t lo = off >= 0 ? 0 : (-off + p->sw - 1) / p->sw;
            int64_t hi = p->W - off <= 0 ? 0 : (p->W - off + p->sw - 1) / p->sw;
            if (hi > p->Wo) hi = p->Wo;
            p->lohi[2 * kx] = lo;
            p->lohi[2 * kx + 1] = hi;
        }
    }
    k->plan = p;
    k->plan_free = pl_free;
    k->run = pl_run;
    return ACL_SUCCESS;
fail:
    pl_free(p);
    return rc;
}

HRT_OP(maxpoolv3, "MaxPoolV3", pl_compile)
HRT_OP(avgpoolv2, "AvgPoolV2", pl_compile)
HRT_OP(maxpool, "MaxPool", pl_compile)
HRT_OP(avgpool, "AvgPool", pl_compile)
