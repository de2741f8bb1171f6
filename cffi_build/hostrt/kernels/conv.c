/* Conv2D, Conv2DTranspose (input_size as const/host input) and
 * Conv2DTransposeD (input_size attr), NCHW and NHWC; the graph engine's
 * _FusedConv2D is Conv2D with an activation in the epilogue.
 *
 * Conv2D is im2col + GEMM per (image, group): NCHW computes
 * Y[Cout_g, Ho*Wo] = W[Cout_g, K] x col[K, Ho*Wo]; NHWC computes
 * Y[Ho*Wo, Cout_g] = col[Ho*Wo, K] x W^T with the output channels strided
 * in place.  A 1x1 stride-1 unpadded conv skips im2col (the input is the
 * GEMM operand).  Depthwise convs (groups == C_in) run a direct kernel
 * vectorised over output columns (NCHW) or channels (NHWC); float32 NCHW
 * depthwise convs, grouped ones with up to 144 taps (cin_g * kh * kw,
 * not 1x1) a group, and ungrouped ones with 1-3 input channels (image
 * stems) run the register-blocked conv_dw.c.  float32
 * convolutions other than 1x1 run conv_direct.c (a packed GEMM with the
 * im2col fused into the panel packing, split over the pool), except 3x3
 * stride-1 NCHW ones with 16+ channels, which run Winograd F(2x2, 3x3)
 * (conv_winograd.c, 2.25x fewer multiply-adds); the rest
 * (1x1, float64, transposed) run im2col + hrt_sgemm/hrt_dgemm, with
 * (image, group) items in parallel when each GEMM is small.
 *
 * Filters: the desc format says the layout -- NCHW = [Cout, Cin/g, kh, kw],
 * NHWC = [Cout, kh, kw, Cin/g], HWCN = [kh, kw, Cin/g, Cout]; ND means NCHW
 * for NCHW data and HWCN (TensorFlow) for NHWC data.  The filter is
 * repacked per run into the layout the kernel wants (it is small), except
 * a constant float32 OIHW filter in a compiled model whose kernel reads a
 * transformed copy: Winograd's U is computed once when the model loads
 * (cv_pack).
 * float16/bfloat16 widen to float32 and round once; float64 uses dgemm.
 * strides/dilations are 4 values in data_format order, pads are
 * [top, bottom, left, right]; groups (or ORT's "group"). */
#include "kcommon.h"

typedef struct {
    int64_t N, C, H, W;         /* input */
    int64_t Cout, Ho, Wo;       /* output */
    int64_t kh, kw, sh, sw, dh, dw, pt, pb, pl, pr;
    int64_t groups, cin_g, cout_g;
    bool nhwc, depthwise, transpose, has_bias;
    int wlayout;                /* source filter layout: 0 OIHW, 1 OHWI, 2 HWIO */
    aclDataType dt;
    int x_in, w_in, b_in;       /* input indices */
    k_act act;                  /* _FusedConv2D's activation (Conv2D: none) */
} cv_plan;

#define CT float
#define CGEMM hrt_sgemm
#define CN(x) x##_f32
#include "conv_tmpl.h"
#undef CT
#undef CGEMM
#undef CN
#define CT double
#define CGEMM hrt_dgemm
#define CN(x) x##_f64
#include "conv_tmpl.h"
#undef CT
#undef CGEMM
#undef CN

enum { WL_OIHW, WL_OHWI, WL_HWIO };

/* Filter element (o, i, ky, kx) offset in the source layout; o/i are the
 * "output"/"input" dims of the stored filter: for Conv2D (Cout, Cin_g), for
 * the transpose (Cin, Cout_g). */
static inline int64_t w_src_index(int layout, int64_t O, int64_t I, int64_t kh, int64_t kw, int64_t o, int64_t i,
                                  int64_t ky, int64_t kx) {
    switch (layout) {
    case WL_OIHW: return ((o * I + i) * kh + ky) * kw + kx;
    case WL_OHWI: return ((o * kh + ky) * kw + kx) * I + i;
    default: return ((ky * kw + kx) * I + i) * O + o; /* HWIO (HWCN) */
    }
}

/* Repack into the kernel's layout: dst_layout as above; widen to CT (float or double). */
static void repack_w(const void *src, aclDataType dt, int src_layout, int dst_layout, int64_t O, int64_t I, int64_t kh,
                     int64_t kw, void *dst, bool dbl) {
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++)
            for (int64_t ky = 0; ky < kh; ky++)
                for (int64_t kx = 0; kx < kw; kx++) {
                    double v = k_load_d(src, dt, w_src_index(src_layout, O, I, kh, kw, o, i, ky, kx));
                    int64_t d = w_src_index(dst_layout, O, I, kh, kw, o, i, ky, kx);
                    if (dbl) ((double *)dst)[d] = v;
                    else ((float *)dst)[d] = (float)v;
                }
}

static aclError cv_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const cv_plan *p = k->plan;
    bool dbl = p->dt == ACL_DOUBLE, half = k_is_half(p->dt);
    size_t es = dbl ? 8 : 4;
    int64_t wO = p->transpose ? p->C : p->Cout, wI = p->transpose ? p->cout_g : p->cin_g;
    int64_t wn = wO * wI * p->kh * p->kw;
    int64_t xn = k->in[p->x_in].numel, yn = k->out[0].numel;
    /* kernel filter layout */
    int dst_layout;
    if (p->depthwise) dst_layout = p->nhwc ? WL_HWIO : WL_OIHW;
    else if (p->transpose) dst_layout = p->nhwc ? WL_OHWI : WL_OIHW;
    else dst_layout = p->nhwc ? WL_OHWI : WL_OIHW;
    bool need_w = half || p->wlayout != dst_layout;
    size_t scratch = (size_t)(need_w ? wn : 0) + (size_t)(half ? xn + yn + (p->has_bias ? p->Cout : 0) : 0);
    char *s = scratch ? k_scratch(k, es * scratch) : NULL;
    if (scratch && !s) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    const void *w = in[p->w_in], *x = in[p->x_in], *bias = p->has_bias ? in[p->b_in] : NULL;
    void *y = out[0];
    char *cur = s;
    if (need_w) {
        repack_w(in[p->w_in], p->dt, p->wlayout, dst_layout, wO, wI, p->kh, p->kw, cur, dbl);
        w = cur;
        cur += es * (size_t)wn;
    }
    if (half) {
        float *fx = (float *)cur, *fy = fx + xn, *fb = fy + yn;
        k_to_f32(x, p->dt, fx, xn);
        if (bias) {
            k_to_f32(bias, p->dt, fb, p->Cout);
            bias = fb;
        }
        x = fx;
        y = fy;
    }
    aclError rc;
    const k_conv_geom g = {p->N, p->C, p->H, p->W, p->Cout, p->Ho, p->Wo, p->kh, p->kw, p->sh, p->sw, p->dh, p->dw,
                           p->pt, p->pl, p->groups, p->cin_g, p->cout_g, p->nhwc};
    bool one_by_one = p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->pt == 0 && p->pl == 0 &&
                      p->Ho == p->H && p->Wo == p->W;
    if (dbl) {
        rc = p->transpose ? convt_run_t_f64(k, p, x, w, bias, y) : conv_run_t_f64(k, p, x, w, bias, y);
    } else if (!p->transpose && hrt_conv2d_dw_ok(&g)) { /* depthwise, few input channels a group, image stems */
        rc = hrt_conv2d_dw_f32(k, &g, x, w, bias, &p->act, y);
    } else if (!p->transpose && !p->depthwise && !one_by_one) {
        rc = hrt_conv2d_winograd_ok(&g) ? hrt_conv2d_winograd_f32(k, &g, x, w, bias, &p->act, y)
                                         : hrt_conv2d_direct_f32(k, &g, x, w, bias, &p->act, y);
    } else {
        rc = p->transpose ? convt_run_t_f32(k, p, x, w, bias, y) : conv_run_t_f32(k, p, x, w, bias, y);
        if (!rc) k_act_apply_parallel(&p->act, y, yn, false);
    }
    if (dbl && !rc) k_act_apply_parallel(&p->act, y, yn, true);
    if (!rc && half) k_from_f32(y, p->dt, out[0], yn);
    free(s);
    return rc;
}

/* A constant float32 NCHW filter (OIHW) packed once when a model loads (graph.c,
 * aiogeGraphPackWeights) into the layout its kernel reads: Winograd's transformed U.  Other
 * convolutions read the OIHW filter in place already (conv_direct.c, conv_dw.c). */
typedef struct {
    float *u;         /* Winograd: U = G w G^T, [16][Cout panels][Cin][MR] */
    hrt_sgemm_pb *pb; /* 1x1 on small planes: W^T packed for the packed product (hrt_conv2d_pointwise_f32) */
} cv_packed;

static k_conv_geom cv_geom(const cv_plan *p) {
    k_conv_geom g = {p->N, p->C, p->H, p->W, p->Cout, p->Ho, p->Wo, p->kh, p->kw, p->sh, p->sw, p->dh, p->dw,
                     p->pt, p->pl, p->groups, p->cin_g, p->cout_g, p->nhwc};
    return g;
}

static void *cv_pack(const hrt_kernel *k, int input, const void *data, size_t *bytes) {
    const cv_plan *p = k->plan;
    if (input != p->w_in || p->dt != ACL_FLOAT || p->transpose || p->nhwc || p->depthwise || p->wlayout != WL_OIHW)
        return NULL;
    k_conv_geom g = cv_geom(p);
    if (g.N == 0 || g.Ho == 0 || g.Wo == 0 || g.Cout == 0) return NULL;
    if (hrt_conv2d_pointwise_ok(&g)) {
        hrt_sgemm_pb *pb = hrt_sgemm_pack_b_shared(true, g.Cout, g.C, data, g.C);
        if (!pb) return NULL;
        cv_packed *pk = calloc(1, sizeof *pk);
        if (!pk) {
            hrt_sgemm_pb_release(pb);
            return NULL;
        }
        pk->pb = pb;
        *bytes = hrt_sgemm_pb_bytes(pb);
        return pk;
    }
    if (!hrt_conv2d_winograd_packed_ok(&g)) return NULL;
    cv_packed *pk = calloc(1, sizeof *pk);
    if (!pk) return NULL;
    pk->u = hrt_conv2d_winograd_pack(&g, data, bytes, false);
    if (!pk->u) {
        free(pk);
        return NULL;
    }
    hrt_packed_weight_counted();
    return pk;
}

static void cv_pack_free(void *vp) {
    cv_packed *pk = vp;
    if (!pk) return;
    free(pk->u);
    hrt_sgemm_pb_release(pk->pb);
    free(pk);
}

static aclError cv_run_packed(const hrt_kernel *k, void *const *in, void *const *out, const void *packed) {
    const cv_plan *p = k->plan;
    const cv_packed *pk = packed;
    k_conv_geom g = cv_geom(p);
    const float *bias = p->has_bias ? in[p->b_in] : NULL;
    if (pk->pb) return hrt_conv2d_pointwise_f32(k, &g, in[p->x_in], pk->pb, in[p->w_in], bias, &p->act, out[0]);
    return hrt_conv2d_winograd_packed_f32(k, &g, in[p->x_in], pk->u, p->has_bias ? in[p->b_in] : NULL, &p->act, out[0]);
}

/* attrs shared by Conv2D and the transposes */
static aclError cv_attrs(hrt_kernel *k, const aclopAttr *attrs, cv_plan *p) {
    int64_t st[4], pads[4], dil[4];
    static const int64_t ones[4] = {1, 1, 1, 1};
    aclError rc = k_attr_ints(k, attrs, "strides", true, 4, NULL, st, 4, NULL);
    if (!rc) rc = k_attr_ints(k, attrs, "pads", true, 4, NULL, pads, 4, NULL);
    if (!rc) rc = k_attr_ints(k, attrs, "dilations", false, 4, ones, dil, 4, NULL);
    if (rc) return rc;
    int64_t groups = 1;
    const hrt_attr_value *gv = hrt_attr_find(attrs, "groups");
    if (gv || !hrt_attr_find(attrs, "group")) rc = hrt_attr_get_int(k, attrs, "groups", false, 1, &groups);
    else rc = hrt_attr_get_int(k, attrs, "group", false, 1, &groups);
    if (rc) return rc;
    int64_t off_x;
    if ((rc = hrt_attr_get_int(k, attrs, "offset_x", false, 0, &off_x))) return rc;
    if (off_x != 0)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: offset_x must be 0 (int8 quantisation is not supported)",
                         k->op_name);
    int hi = p->nhwc ? 1 : 2, wi = p->nhwc ? 2 : 3;
    p->sh = st[hi];
    p->sw = st[wi];
    p->dh = dil[hi];
    p->dw = dil[wi];
    p->pt = pads[0];
    p->pb = pads[1];
    p->pl = pads[2];
    p->pr = pads[3];
    p->groups = groups;
    if (p->sh < 1 || p->sw < 1 || p->dh < 1 || p->dw < 1)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: strides and dilations must be >= 1", k->op_name);
    if (p->pt < 0 || p->pb < 0 || p->pl < 0 || p->pr < 0)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: pads must be >= 0", k->op_name);
    const int64_t vals[8] = {p->sh, p->sw, p->dh, p->dw, p->pt, p->pb, p->pl, p->pr};
    for (int i = 0; i < 8; i++)
        if (vals[i] > K_MAX_WINDOW)
            return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: strides, dilations and pads must be <= %lld, got %lld",
                             k->op_name, (long long)K_MAX_WINDOW, (long long)vals[i]);
    if (groups < 1) return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: groups must be >= 1", k->op_name);
    return ACL_SUCCESS;
}

static aclError cv_filter_layout(const hrt_kernel *k, const hrt_tensor *w, bool nhwc, int *layout) {
    switch (w->format) {
    case ACL_FORMAT_NCHW: *layout = WL_OIHW; return ACL_SUCCESS;
    case ACL_FORMAT_NHWC: *layout = WL_OHWI; return ACL_SUCCESS;
    case ACL_FORMAT_HWCN: *layout = WL_HWIO; return ACL_SUCCESS;
    case ACL_FORMAT_ND: case ACL_FORMAT_UNDEFINED: *layout = nhwc ? WL_HWIO : WL_OIHW; return ACL_SUCCESS;
    default:
        return hrt_error(ACL_ERROR_FORMAT_NOT_MATCH, K_API, "%s: filter format %s is not supported (NCHW, NHWC, HWCN, ND)",
                         k->op_name, hrt_format_name(w->format));
    }
}

/* dims of a filter in the given layout -> (O, I, kh, kw) */
static void w_dims(const hrt_tensor *w, int layout, int64_t *O, int64_t *I, int64_t *kh, int64_t *kw) {
    const int64_t *d = w->dims;
    if (layout == WL_OIHW) *O = d[0], *I = d[1], *kh = d[2], *kw = d[3];
    else if (layout == WL_OHWI) *O = d[0], *kh = d[1], *kw = d[2], *I = d[3];
    else *kh = d[0], *kw = d[1], *I = d[2], *O = d[3];
}

static aclError cv_common_types(hrt_kernel *k, int xi, int wi, int bi) {
    static const aclDataType ok[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    const hrt_tensor *x = &k->in[xi];
    aclError rc = hrt_expect_dtype_in(k, x, "x", ok, 4);
    if (rc) return rc;
    if ((rc = k_expect_same_dtype(k, wi, wi + 1, x->dtype))) return rc;
    if (bi < k->n_in && (rc = k_expect_same_dtype(k, bi, bi + 1, x->dtype))) return rc;
    if (bi + 1 < k->n_in && !k->in[bi + 1].absent)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: offset_w (int8 quantisation) is not supported",
                         k->op_name);
    if ((rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    if (x->ndim != 4 || k->in[wi].ndim != 4)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x and filter must be 4-D (got rank %d and %d)",
                         k->op_name, x->ndim, k->in[wi].ndim);
    return ACL_SUCCESS;
}

static aclError cv_finish(hrt_kernel *k, cv_plan *p) {
    int64_t od[4];
    if (p->nhwc) od[0] = p->N, od[1] = p->Ho, od[2] = p->Wo, od[3] = p->Cout;
    else od[0] = p->N, od[1] = p->Cout, od[2] = p->Ho, od[3] = p->Wo;
    aclError rc = hrt_expect_same_shape(k, &k->out[0], od, 4, 0);
    if (rc) return rc;
    if (p->has_bias) {
        const hrt_tensor *b = &k->in[p->b_in];
        if (b->numel != p->Cout || b->ndim != 1)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: bias must have shape [%lld]", k->op_name,
                             (long long)p->Cout);
    }
    return ACL_SUCCESS;
}

static aclError conv2d_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 4, 1);
    if (!rc) rc = cv_common_types(k, 0, 1, 2);
    if (rc) return rc;
    cv_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    const hrt_tensor *x = &k->in[0], *w = &k->in[1];
    int nhwc;
    if ((rc = k_layout(k, attrs, x, "NHWC", &nhwc))) goto fail;
    p->nhwc = nhwc;
    if ((rc = cv_attrs(k, attrs, p)) || (rc = cv_filter_layout(k, w, nhwc, &p->wlayout))) goto fail;
    p->N = x->dims[0];
    p->C = nhwc ? x->dims[3] : x->dims[1];
    p->H = nhwc ? x->dims[1] : x->dims[2];
    p->W = nhwc ? x->dims[2] : x->dims[3];
    int64_t O, I;
    w_dims(w, p->wlayout, &O, &I, &p->kh, &p->kw);
    p->Cout = O;
    p->cin_g = I;
    if (p->kh < 1 || p->kw < 1) {
        rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Conv2D: the filter has an empty spatial dim");
        goto fail;
    }
    if (p->C % p->groups || O % p->groups || I * p->groups != p->C) {
        char sx[128], sw[128];
        hrt_shape_str(x->dims, 4, sx, sizeof sx);
        hrt_shape_str(w->dims, 4, sw, sizeof sw);
        rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                       "Conv2D: filter %s does not fit x %s with groups %lld (need Cin/groups = %lld input channels)", sw,
                       sx, (long long)p->groups, (long long)(p->C / p->groups));
        goto fail;
    }
    p->cout_g = O / p->groups;
    int64_t eh = p->dh * (p->kh - 1) + 1, ew = p->dw * (p->kw - 1) + 1;
    if (p->H + p->pt + p->pb < eh || p->W + p->pl + p->pr < ew) {
        rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Conv2D: the (dilated) kernel %lldx%lld is larger than the padded input",
                       (long long)eh, (long long)ew);
        goto fail;
    }
    p->Ho = (p->H + p->pt + p->pb - eh) / p->sh + 1;
    p->Wo = (p->W + p->pl + p->pr - ew) / p->sw + 1;
    /* one output row (column) reads the same window whatever the stride: the
     * direct kernel's padded copy has `stride` column phases, so normalise it */
    if (p->Ho == 1) p->sh = 1;
    if (p->Wo == 1) p->sw = 1;
    p->depthwise = p->groups == p->C && p->cin_g == 1 && p->groups > 1;
    p->has_bias = k->n_in > 2 && !k->in[2].absent;
    p->x_in = 0;
    p->w_in = 1;
    p->b_in = 2;
    p->dt = x->dtype;
    p->act.code = K_ACT_NONE;
    if (k->op_name[0] == '_' && (rc = k_act_from_attrs(k, attrs, &p->act))) goto fail;
    if ((rc = cv_finish(k, p))) goto fail;
    k->plan = p;
    k->plan_free = free;
    k->run = cv_run;
    k->pack = cv_pack;
    k->pack_free = cv_pack_free;
    k->run_packed = cv_run_packed;
    return ACL_SUCCESS;
fail:
    free(p);
    return rc;
}

static aclError convt_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool is_d = strcmp(k->op_name, "Conv2DTransposeD") == 0;
    int xi = is_d ? 0 : 1;
    aclError rc = hrt_expect_counts(k, xi + 2, xi + 4, 1);
    if (!rc) rc = cv_common_types(k, xi, xi + 1, xi + 2);
    if (rc) return rc;
    int64_t isz[4];
    if (is_d) {
        rc = k_attr_ints(k, attrs, "input_size", true, 4, NULL, isz, 4, NULL);
    } else {
        int n = 0;
        rc = k_int_values(k, 0, isz, 4, &n);
        if (!rc && n != 4)
            rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: input_size must hold 4 values", k->op_name);
    }
    if (rc) return rc;
    cv_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    const hrt_tensor *x = &k->in[xi], *w = &k->in[xi + 1];
    int nhwc;
    if ((rc = k_layout(k, attrs, x, "NHWC", &nhwc))) goto fail;
    p->nhwc = nhwc;
    p->transpose = true;
    if ((rc = cv_attrs(k, attrs, p)) || (rc = cv_filter_layout(k, w, nhwc, &p->wlayout))) goto fail;
    int64_t opad[4];
    static const int64_t zeros[4] = {0, 0, 0, 0};
    int got = 0;
    if ((rc = k_attr_ints(k, attrs, "output_padding", false, 4, zeros, opad, 4, &got))) goto fail;
    p->N = x->dims[0];
    p->C = nhwc ? x->dims[3] : x->dims[1];
    p->H = nhwc ? x->dims[1] : x->dims[2];
    p->W = nhwc ? x->dims[2] : x->dims[3];
    int64_t O, I;
    w_dims(w, p->wlayout, &O, &I, &p->kh, &p->kw);
    /* stored filter: O = Cin (of x), I = Cout / groups */
    if (p->kh < 1 || p->kw < 1) {
        rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: the filter has an empty spatial dim", k->op_name);
        goto fail;
    }
    if (O != p->C || p->C % p->groups) {
        char sx[128], sw[128];
        hrt_shape_str(x->dims, 4, sx, sizeof sx);
        hrt_shape_str(w->dims, 4, sw, sizeof sw);
        rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: filter %s does not fit x %s with groups %lld", k->op_name,
                       sw, sx, (long long)p->groups);
        goto fail;
    }
    p->cin_g = p->C / p->groups;
    p->cout_g = I;
    p->Cout = I * p->groups;
    p->Ho = nhwc ? isz[1] : isz[2];
    p->Wo = nhwc ? isz[2] : isz[3];
    int64_t ic = nhwc ? isz[3] : isz[1];
    int hi = nhwc ? 1 : 2, wi = nhwc ? 2 : 3;
    int64_t base_h = (p->H - 1) * p->sh - p->pt - p->pb + p->dh * (p->kh - 1) + 1;
    int64_t base_w = (p->W - 1) * p->sw - p->pl - p->pr + p->dw * (p->kw - 1) + 1;
    bool bad = isz[0] != p->N || ic != p->Cout || p->Ho < base_h || p->Wo < base_w || p->Ho - base_h >= p->sh + p->dh ||
               p->Wo - base_w >= p->sw + p->dw;
    if (got && (p->Ho - base_h != opad[hi] || p->Wo - base_w != opad[wi])) bad = true;
    if (bad) {
        rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                       "%s: input_size [%lld,%lld,%lld,%lld] does not match x, filter and attrs (spatial %lldx%lld + output_padding)",
                       k->op_name, (long long)isz[0], (long long)isz[1], (long long)isz[2], (long long)isz[3],
                       (long long)base_h, (long long)base_w);
        goto fail;
    }
    p->has_bias = k->n_in > xi + 2 && !k->in[xi + 2].absent;
    p->x_in = xi;
    p->w_in = xi + 1;
    p->b_in = xi + 2;
    p->dt = x->dtype;
    p->act.code = K_ACT_NONE;
    if ((rc = cv_finish(k, p))) goto fail;
    k->plan = p;
    k->plan_free = free;
    k->run = cv_run;
    return ACL_SUCCESS;
fail:
    free(p);
    return rc;
}

HRT_OP(conv2d, "Conv2D", conv2d_compile)
/* host-only, from the graph engine: Conv2D (same inputs and attrs) + an
 * `activation` (k_act_from_attrs) applied to each output tile as it is stored */
HRT_OP(fused_conv2d, "_FusedConv2D", conv2d_compile)
HRT_OP(conv2dtranspose, "Conv2DTranspose", convt_compile)
HRT_OP(conv2dtransposed, "Conv2DTransposeD", convt_compile)
