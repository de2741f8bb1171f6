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
 * (image, output-channel tile, output row) over the pool.  GCC vector types, the tiles compiled
 * once per kernel family (nchwc_conv_tmpl.h; nchwc.h: avx512, avx2, generic), the family chosen at
 * run time by the GEMM's switch. */
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
    bool virt;             /* stride 1 on small planes: a padded copy, rows run as one (the family's virt) */
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

typedef struct {
    const nc_plan *p;
    const float *x;
    float *xs;
} nc_sub_ctx;

typedef struct {
    const nc_plan *p;
    const float *src, *z;
    float *dst;
    int64_t H, W; /* the plane reordered */
} nc_wino_ctx;

#define NC_VS 4 /* strips an item */

typedef struct {
    const nc_plan *p;
    const float *x;
    float *xp;
} nc_pad_ctx;

/* the hot code (nchwc_conv_tmpl.h), once per kernel family */
#define NC_TMPL "nchwc_conv_tmpl.h"
#include "nchwc_families.h"

static aclError nc_virt(const hrt_kernel *k, nc_ctx *c);

static aclError nc_conv(const hrt_kernel *k, void *const *in, void *const *out, const float *wp) {
    const hrt_nchwc_fns *f = hrt_nchwc_family();
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
        hrt_parallel_for(rows, K_GRAIN / (8 * p->sWo) + 1, f->sub, &sc);
        c.x = xs;
    }
    const int64_t items = p->N * c.tiles * p->Ho;
    /* multiply-adds an item */
    const int64_t per = p->Wo * 8 * (p->dwise ? 1 : NC_NB * p->cibg * 8) * p->kh * p->kw + 1;
    hrt_parallel_for(items, (1 << 18) / per + 1, f->conv, &c);
    free(xs);
    return ACL_SUCCESS;
}

/* ---- 3x3 stride-1 convolutions by Winograd F(2x2, 3x3) (conv_winograd.c), which does 2.25x fewer
 * multiply-adds than the direct kernel (ResNet-18's 3x3 convs at 56x56 and 28x28: 2.1x the NCHW
 * time direct): the blocked input is reordered into NCHW scratch, the NCHW conv runs with the bias
 * and its filter transformed once (U, packed at load), and the output is reordered back with the
 * residual and the activation applied on the way (the reorders: ~2% of the conv's time). */
static aclError nc_wino(const hrt_kernel *k, void *const *in, void *const *out, const float *u) {
    const hrt_nchwc_fns *f = hrt_nchwc_family();
    const nc_plan *p = k->plan;
    const k_conv_geom *g = &p->g;
    const int64_t xn = g->N * g->C * g->H * g->W, yn = g->N * g->Cout * g->Ho * g->Wo;
    float *xs = k_scratch(k, sizeof(float) * (size_t)(xn + yn));
    if (!xs) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    float *ys = xs + xn;
    const nr_plan unblock = {p->CB, g->H, g->W, false};
    nr_ctx c = {&unblock, in[0], xs};
    hrt_parallel_for(g->N * p->CB * g->H, K_GRAIN / (8 * g->W) + 1, f->reorder, &c);
    aclError rc = hrt_conv2d_winograd_packed_f32(k, g, xs, u, p->has_bias ? in[2] : NULL, NULL, ys);
    if (!rc) {
        nc_wino_ctx d = {p, ys, p->has_z ? in[3] : NULL, out[0], g->Ho, g->Wo};
        hrt_parallel_for(g->N * p->COB * g->Ho, K_GRAIN / (8 * g->Wo) + 1, f->block, &d);
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
static aclError nc_virt(const hrt_kernel *k, nc_ctx *c) {
    const hrt_nchwc_fns *f = hrt_nchwc_family();
    const nc_plan *p = c->p;
    if (p->dwise) {
        const int64_t per = p->Ho * p->Wp * 8 * p->kh * p->kw + 1;
        hrt_parallel_for(p->N * p->COB, (1 << 18) / per + 1, f->dw_virt, c);
        if (c->failed) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
        return ACL_SUCCESS;
    }
    const int64_t blocks = p->N * p->CB;
    float *xp = k_scratch(k, sizeof(float) * (size_t)(blocks * p->nph * p->pps * 8));
    if (!xp) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    memset(xp, 0, sizeof(float) * (size_t)(blocks * p->nph * p->pps * 8));
    nc_pad_ctx pc = {p, c->x, xp};
    hrt_parallel_for(blocks * p->H, K_GRAIN / (8 * p->W) + 1, f->pad, &pc);
    c->x = xp;
    const int64_t nstrips = (p->Ho * p->Wp + NC_NP - 1) / NC_NP, nchunks = (nstrips + NC_VS - 1) / NC_VS;
    const int64_t per = NC_VS * NC_NP * 8 * NC_NB * p->cibg * 8 * p->kh * p->kw + 1;
    hrt_parallel_for(p->N * c->tiles * nchunks, (1 << 18) / per + 1, f->virt, c);
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
