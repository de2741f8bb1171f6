/* Resize (x, roi, scales, sizes) with ONNX semantics: mode nearest /
 * linear / cubic, coordinate_transformation_mode half_pixel,
 * half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric,
 * tf_half_pixel_for_nn, tf_crop_and_resize (roi, extrapolation_value),
 * nearest_mode round_prefer_floor / round_prefer_ceil / floor / ceil,
 * cubic_coeff_a, exclude_outside, and (an aioge extension of CANN's attrs)
 * antialias.  Inputs are full rank; sizes gives the output shape, scales the
 * scale of the coordinate transform (both may be given: keep_aspect_ratio).
 *
 * Separable: at compile time every resized axis gets a table of taps
 * (input index, weight) per output position -- the computation of
 * aioge.graph.reference_resize.axis_taps, in double -- and at run time the
 * axes are interpolated one after the other between two scratch buffers,
 * the inner dims being the vector loop.  float32/float16/bfloat16 compute in
 * float32, float64 and integers in double (integers round half to even and
 * saturate).  Every size and tap count is overflow-checked. */
#include "kcommon.h"

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum { CT_HALF, CT_HALF_SYM, CT_PYTORCH, CT_ALIGN, CT_ASYM, CT_TF_NN, CT_CROP };
enum { NM_FLOOR_PREF, NM_CEIL_PREF, NM_FLOOR, NM_CEIL };

#define RS_MAX_TAPS (1 << 20)

typedef struct {
    int axis;
    int64_t in, out, n; /* taps per output position */
    int64_t *idx;       /* out * n */
    double *w;          /* out * n */
    uint8_t *extrap;    /* out */
} rs_axis;

typedef struct {
    int ndim, naxes;
    int64_t dims[HRT_MAXDIM], odims[HRT_MAXDIM];
    rs_axis ax[HRT_MAXDIM];
    size_t max_elems; /* largest intermediate */
    double extrap_value;
    aclDataType dt;
    bool dbl;
} rs_plan;

static void rs_free(void *vp) {
    rs_plan *p = vp;
    for (int i = 0; i < p->naxes; i++) {
        free(p->ax[i].idx);
        free(p->ax[i].w);
        free(p->ax[i].extrap);
    }
    free(p);
}

static double cubic_w(double x, double a) {
    x = fabs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

static double src_coord(int ct, double y, double scale, int64_t in, int64_t out, double r0, double r1) {
    double out_w = scale * (double)in;
    switch (ct) {
    case CT_ALIGN: return out_w == 1 ? 0.0 : y * (double)(in - 1) / (out_w - 1);
    case CT_ASYM: return y / scale;
    case CT_TF_NN: return (y + 0.5) / scale;
    case CT_CROP:
        if (out_w == 1) return (r1 - r0) * (double)(in - 1) / 2 + r0 * (double)(in - 1);
        return y * (r1 - r0) * (double)(in - 1) / (out_w - 1) + r0 * (double)(in - 1);
    case CT_PYTORCH: return out_w == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    case CT_HALF_SYM: return (double)in / 2 * (1 - (double)out / out_w) + (y + 0.5) / scale - 0.5;
    default: return (y + 0.5) / scale - 0.5;
    }
}

static aclError build_taps(const hrt_kernel *k, rs_axis *a, int mode, int ct, int nm, double scale, double r0, double r1,
                           double cubic_a, bool exclude, bool antialias) {
    double s = antialias && scale < 1.0 ? scale : 1.0;
    double support = mode == RS_LINEAR ? 1.0 : 2.0;
    int64_t start = 0, n = 1;
    if (mode != RS_NEAREST) {
        double st = floor(-support / s) + 1;
        if (!(st > -(double)RS_MAX_TAPS))
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Resize: the antialias filter of axis %d is too wide",
                             a->axis);
        start = (int64_t)st;
        n = 2 - 2 * start;
    }
    size_t cnt, bytes_i, bytes_w;
    if (__builtin_mul_overflow((size_t)a->out, (size_t)n, &cnt) || __builtin_mul_overflow(cnt, sizeof(int64_t), &bytes_i) ||
        __builtin_mul_overflow(cnt, sizeof(double), &bytes_w))
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Resize: the tap table of axis %d overflows", a->axis);
    a->n = n;
    a->idx = malloc(bytes_i ? bytes_i : 1);
    a->w = malloc(bytes_w ? bytes_w : 1);
    a->extrap = calloc((size_t)(a->out ? a->out : 1), 1);
    if (!a->idx || !a->w || !a->extrap) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    for (int64_t j = 0; j < a->out; j++) {
        double x = src_coord(ct, (double)j, scale, a->in, a->out, r0, r1);
        if (ct == CT_CROP && (x < 0 || x > (double)(a->in - 1))) a->extrap[j] = 1;
        if (!(x > -9.0e15 && x < 9.0e15)) x = 0; /* NaN/huge coordinates (degenerate scales): clamp, never UB */
        double x0 = floor(x);
        double ratio = x == x0 ? 1.0 : x - x0;
        int64_t left = (int64_t)(x == x0 ? x0 - 1 : x0);
        int64_t *ii = a->idx + j * n;
        double *ww = a->w + j * n, tot = 0;
        if (mode == RS_NEAREST) {
            bool right = nm == NM_FLOOR_PREF ? ratio > 0.5 : nm == NM_CEIL_PREF ? ratio >= 0.5 : nm == NM_FLOOR ? ratio == 1.0 : true;
            ii[0] = left + right;
            ww[0] = 1.0;
        } else {
            for (int64_t t = 0; t < n; t++) {
                double d = ((double)(start + t) - ratio) * s;
                ii[t] = left + start + t;
                ww[t] = mode == RS_LINEAR ? (fabs(d) < 1 ? 1 - fabs(d) : 0.0) : cubic_w(d, cubic_a);
                tot += ww[t];
            }
            if (antialias && tot != 0)
                for (int64_t t = 0; t < n; t++) ww[t] /= tot;
        }
        if (exclude) {
            double sum = 0;
            for (int64_t t = 0; t < n; t++) {
                if (ii[t] < 0 || ii[t] >= a->in) ww[t] = 0;
                sum += ww[t];
            }
            if (sum != 0)
                for (int64_t t = 0; t < n; t++) ww[t] /= sum;
        }
        for (int64_t t = 0; t < n; t++) ii[t] = ii[t] < 0 ? 0 : ii[t] >= a->in ? a->in - 1 : ii[t];
    }
    return ACL_SUCCESS;
}

typedef struct {
    const rs_axis *a;
    int64_t outer, inner;
    const void *src;
    void *dst;
    bool dbl;
    double ev;
} rs_pass;

static void pass_chunk(void *vp, int64_t b, int64_t e) {
    rs_pass *c = vp;
    const rs_axis *a = c->a;
    int64_t in = a->in, out = a->out, n = a->n, I = c->inner;
    for (int64_t r = b; r < e; r++) { /* r = (outer, j) */
        int64_t o = r / out, j = r % out;
        const int64_t *ii = a->idx + j * n;
        const double *ww = a->w + j * n;
        if (c->dbl) {
            double *y = (double *)c->dst + (size_t)((o * out + j) * I);
            const double *x = (const double *)c->src + (size_t)(o * in * I);
            if (a->extrap[j]) {
                for (int64_t i = 0; i < I; i++) y[i] = c->ev;
                continue;
            }
            for (int64_t i = 0; i < I; i++) y[i] = 0;
            for (int64_t t = 0; t < n; t++) {
                if (ww[t] == 0) continue;
                const double *xs = x + (size_t)(ii[t] * I);
                double w = ww[t];
                for (int64_t i = 0; i < I; i++) y[i] += w * xs[i];
            }
        } else {
            float *y = (float *)c->dst + (size_t)((o * out + j) * I);
            const float *x = (const float *)c->src + (size_t)(o * in * I);
            if (a->extrap[j]) {
                for (int64_t i = 0; i < I; i++) y[i] = (float)c->ev;
                continue;
            }
            for (int64_t i = 0; i < I; i++) y[i] = 0;
            for (int64_t t = 0; t < n; t++) {
                if (ww[t] == 0) continue;
                const float *xs = x + (size_t)(ii[t] * I);
                float w = (float)ww[t];
                for (int64_t i = 0; i < I; i++) y[i] += w * xs[i];
            }
        }
    }
}

static aclError rs_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const rs_plan *p = k->plan;
    int64_t n_in = k->in[0].numel, n_out = k->out[0].numel;
    if (n_out == 0) return ACL_SUCCESS;
    size_t es = p->dbl ? sizeof(double) : sizeof(float), bytes;
    if (__builtin_mul_overflow(p->max_elems, es, &bytes))
        return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "Resize: scratch size overflows");
    char *buf = k_scratch(k, bytes * 2);
    if (!buf) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    void *cur = buf, *nxt = buf + bytes;
    /* load x into the working precision */
    if (p->dt == ACL_DOUBLE) {
        memcpy(cur, in[0], sizeof(double) * (size_t)n_in);
    } else if (p->dbl) {
        for (int64_t i = 0; i < n_in; i++) ((double *)cur)[i] = k_load_d(in[0], p->dt, i);
    } else {
        k_to_f32(in[0], p->dt, cur, n_in);
    }
    int64_t dims[HRT_MAXDIM];
    memcpy(dims, p->dims, sizeof dims);
    for (int q = 0; q < p->naxes; q++) {
        const rs_axis *a = &p->ax[q];
        rs_pass c = {a, k_prod(dims, 0, a->axis), k_prod(dims, a->axis + 1, p->ndim), cur, nxt, p->dbl, p->extrap_value};
        hrt_parallel_for(c.outer * a->out, K_GRAIN / (c.inner * a->n + 1) + 1, pass_chunk, &c);
        dims[a->axis] = a->out;
        void *t = cur;
        cur = nxt;
        nxt = t;
    }
    if (p->dt == ACL_DOUBLE) {
        memcpy(out[0], cur, sizeof(double) * (size_t)n_out);
    } else if (p->dbl) {
        bool ints = true;
        for (int64_t i = 0; i < n_out; i++) {
            double v = ((double *)cur)[i];
            if (ints) {
                double lo = p->dt == ACL_UINT8 ? 0 : p->dt == ACL_INT8 ? -128 : p->dt == ACL_INT16 ? -32768
                          : p->dt == ACL_INT32 ? -2147483648.0 : -9.2233720368547758e18;  /* saturate */
                double hi = p->dt == ACL_UINT8 ? 255 : p->dt == ACL_INT8 ? 127 : p->dt == ACL_INT16 ? 32767
                          : p->dt == ACL_INT32 ? 2147483647.0 : 9.2233720368547748e18;
                v = nearbyint(v);
                v = v != v ? 0 : v < lo ? lo : v > hi ? hi : v;
            }
            k_store_d(out[0], p->dt, i, v);
        }
    } else {
        k_from_f32(cur, p->dt, out[0], n_out);
    }
    free(buf);
    return ACL_SUCCESS;
}

static int lookup(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

static aclError float_values(const hrt_kernel *k, int i, double *out, int max, int *n) {
    const hrt_tensor *t = &k->in[i];
    if (!t->data)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Resize: input %d must be a const (it shapes the op)", i);
    if (t->dtype != ACL_FLOAT && t->dtype != ACL_DOUBLE && t->dtype != ACL_FLOAT16)
        return k_unsupported(k, i == 1 ? "roi" : "scales", t->dtype);
    if (t->numel > max) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Resize: input %d has too many values", i);
    for (int64_t j = 0; j < t->numel; j++) out[j] = k_load_d(t->data, t->dtype, j);
    *n = (int)t->numel;
    return ACL_SUCCESS;
}

static aclError resize_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 4, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    int di = k_index(x->dtype);
    if (di < 0 || di >= K_BOOL) return k_unsupported(k, "x", x->dtype); /* bool, uint16/32/64 */
    if ((rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    int nd = x->ndim;
    const char *mode_s, *ct_s, *nm_s;
    double cubic_a, ev;
    int64_t excl, anti = 0;
    if ((rc = hrt_attr_get_string(k, attrs, "mode", false, "nearest", &mode_s)) ||
        (rc = hrt_attr_get_string(k, attrs, "coordinate_transformation_mode", false, "half_pixel", &ct_s)) ||
        (rc = hrt_attr_get_string(k, attrs, "nearest_mode", false, "round_prefer_floor", &nm_s)) ||
        (rc = hrt_attr_get_float(k, attrs, "cubic_coeff_a", false, -0.75, &cubic_a)) ||
        (rc = hrt_attr_get_float(k, attrs, "extrapolation_value", false, 0.0, &ev)) ||
        (rc = hrt_attr_get_int(k, attrs, "exclude_outside", false, 0, &excl)) ||
        (rc = hrt_attr_get_int(k, attrs, "antialias", false, 0, &anti)))
        return rc;
    static const char *const MODES[] = {"nearest", "linear", "cubic"};
    static const char *const CTS[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const NMS[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    int mode = lookup(mode_s, MODES, 3), ct = lookup(ct_s, CTS, 7), nm = lookup(nm_s, NMS, 4);
    if (mode < 0 || ct < 0 || nm < 0 || (anti && mode == RS_NEAREST))
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "Resize: bad mode/coordinate_transformation_mode/nearest_mode");
    double roi[2 * HRT_MAXDIM], scales[HRT_MAXDIM];
    int64_t sizes[HRT_MAXDIM];
    int nr = 0, ns = 0, nz = 0;
    bool has_roi = k->n_in > 1 && !k->in[1].absent && k->in[1].numel;
    bool has_sc = k->n_in > 2 && !k->in[2].absent && k->in[2].numel;
    bool has_sz = k->n_in > 3 && !k->in[3].absent && k->in[3].numel;
    if (has_roi && (rc = float_values(k, 1, roi, 2 * HRT_MAXDIM, &nr))) return rc;
    if (has_sc && (rc = float_values(k, 2, scales, HRT_MAXDIM, &ns))) return rc;
    if (has_sz && (rc = k_int_values(k, 3, sizes, HRT_MAXDIM, &nz))) return rc;
    if ((has_roi && nr != 2 * nd) || (has_sc && ns != nd) || (has_sz && nz != nd) || (!has_sc && !has_sz) ||
        (ct == CT_CROP && !has_roi))
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                         "Resize: roi (2 x rank), scales or sizes (rank values each) do not fit rank %d", nd);
    int64_t od[HRT_MAXDIM];
    double sc[HRT_MAXDIM];
    for (int d = 0; d < nd; d++) {
        if (has_sc && !(scales[d] > 0 && scales[d] < 1e12))
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Resize: scales[%d] = %g is not a positive scale", d,
                             scales[d]);
        if (has_sz) {
            if (sizes[d] < 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Resize: negative sizes[%d]", d);
            od[d] = sizes[d];
            sc[d] = has_sc ? scales[d] : x->dims[d] ? (double)sizes[d] / (double)x->dims[d] : 1.0;
        } else {
            double o = floor((double)x->dims[d] * (double)(float)scales[d]);
            if (!(o < 9.0e18)) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Resize: the output overflows");
            od[d] = (int64_t)o;
            sc[d] = (double)(float)scales[d];
        }
    }
    if ((rc = hrt_expect_same_shape(k, &k->out[0], od, nd, 0))) return rc; /* the desc bounds every size below */
    rs_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    k->plan = p;
    k->plan_free = rs_free;
    p->ndim = nd;
    memcpy(p->dims, x->dims, sizeof(int64_t) * (size_t)nd);
    memcpy(p->odims, od, sizeof(int64_t) * (size_t)nd);
    p->extrap_value = ev;
    p->dt = x->dtype;
    p->dbl = x->dtype == ACL_DOUBLE || !k_is_float(x->dtype);
    int64_t cur[HRT_MAXDIM];
    memcpy(cur, x->dims, sizeof cur);
    size_t biggest = (size_t)(x->numel > k->out[0].numel ? x->numel : k->out[0].numel);
    for (int d = 0; d < nd; d++) {
        double r0 = has_roi ? roi[d] : 0.0, r1 = has_roi ? roi[nd + d] : 1.0;
        bool identity = od[d] == x->dims[d] && sc[d] == 1.0 && (ct != CT_CROP || (r0 == 0.0 && r1 == 1.0));
        if (identity) continue;
        if (x->dims[d] == 0)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Resize: cannot resize the empty axis %d", d);
        rs_axis *a = &p->ax[p->naxes++];
        a->axis = d;
        a->in = x->dims[d];
        a->out = od[d];
        if ((rc = build_taps(k, a, mode, ct, nm, sc[d], r0, r1, cubic_a, excl != 0, anti != 0))) return rc;
        cur[d] = od[d];
        size_t n = 1; /* an intermediate mixes resized and original dims: it can exceed both ends */
        for (int q = 0; q < nd; q++)
            if (__builtin_mul_overflow(n, (size_t)cur[q], &n))
                return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Resize: an intermediate size overflows");
        if (n > biggest) biggest = n;
    }
    p->max_elems = biggest;
    k->run = rs_run;
    return ACL_SUCCESS;
}

HRT_OP(resize, "Resize", resize_compile)
