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
 *   windows a pixel at a time with the taps clipped.
 * The reorder and pool rows are compiled once per kernel family (nchwc_pool_tmpl.h; nchwc.h), the
 * family's table picked at each run (hrt_nchwc_family). */
#include "kcommon.h"

#include "nchwc.h"

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

/* the hot code (nchwc_pool_tmpl.h), once per kernel family; the families' tables (nchwc.h) */
#define NC_TMPL "nchwc_pool_tmpl.h"
#include "nchwc_families.h"

#ifdef NC_HAVE_X86
NC_FAMILY_TABLE(avx512)
NC_FAMILY_TABLE(avx2)
#endif
NC_FAMILY_TABLE(generic)

const hrt_nchwc_fns *hrt_nchwc_family(void) {
    switch (hrt_kernel_isa()) {
#ifdef NC_HAVE_X86
    case HRT_ISA_AVX512: return &hrt_nchwc_fns_avx512;
    case HRT_ISA_AVX2: return &hrt_nchwc_fns_avx2;
#endif
    default: return &hrt_nchwc_fns_generic;
    }
}

static aclError nr_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const nr_plan *p = k->plan;
    const int64_t items = k->out[0].numel / (8 * (p->W ? p->W : 1));
    if (k->out[0].numel == 0) return ACL_SUCCESS;
    nr_ctx c = {p, in[0], out[0]};
    hrt_parallel_for(items, K_GRAIN / (8 * p->W) + 1, hrt_nchwc_family()->reorder, &c);
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

static aclError np_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const np_plan *p = k->plan;
    if (k->out[0].numel == 0) return ACL_SUCCESS;
    np_ctx c = {p, in[0], out[0]};
    const int64_t planes = k->out[0].dims[0] * k->out[0].dims[1];
    if (p->global) {
        hrt_parallel_for(planes, K_GRAIN / (8 * p->H * p->W + 1) + 1, hrt_nchwc_family()->pool_global, &c);
        return ACL_SUCCESS;
    }
    const int64_t per = p->Wo * 8 * p->kh * p->kw + 1;
    hrt_parallel_for(planes * p->Ho, K_GRAIN / per + 1, hrt_nchwc_family()->pool, &c);
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
