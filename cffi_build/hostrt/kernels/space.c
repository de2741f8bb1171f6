/* DepthToSpace (block_size, mode DCR/CRD, data_format) and SpaceToDepth
 * (block_size, data_format) on 4-D NCHW or NHWC tensors of any dtype.
 *
 * DepthToSpace DCR: y[n, c, h*b + i, w*b + j] = x[n, (i*b + j)*C + c, h, w]
 * (C = output channels); CRD: x[n, c*b*b + i*b + j, h, w].  SpaceToDepth is
 * the inverse of DCR.  NCHW works row by row of the output; NHWC copies
 * contiguous channel runs.  block_size * block_size is overflow-checked. */
#include "kcommon.h"
#include "kelem.h"

typedef struct {
    int64_t N, C, H, W, b; /* the depth side: (N, C*b*b, H, W); the space side: (N, C, H*b, W*b) */
    size_t esz;
    bool nhwc, crd, to_space;
} sp_plan;

typedef struct {
    const sp_plan *p;
    const char *x;
    char *y;
} sp_ctx;

/* channel of the depth side holding (c, i, j) */
static inline int64_t sp_depth_ch(const sp_plan *p, int64_t c, int64_t i, int64_t j) {
    return p->crd ? (c * p->b + i) * p->b + j : (i * p->b + j) * p->C + c;
}

static void sp_rows(void *vp, int64_t lo, int64_t hi) {
    sp_ctx *c = vp;
    const sp_plan *p = c->p;
    int64_t b = p->b, C = p->C, H = p->H, W = p->W, Cd = C * b * b;
    size_t es = p->esz;
    for (int64_t r = lo; r < hi; r++) {
        if (!p->nhwc) { /* r = (n, c, oh) over the space side's rows */
            int64_t oh = r % (H * b), nc = r / (H * b), ch = nc % C, n = nc / C;
            int64_t h = oh / b, i = oh % b;
            char *srow = (p->to_space ? c->y : (char *)c->x) + (size_t)(r * W * b) * es; /* space-side row */
            for (int64_t j = 0; j < b; j++) {
                int64_t dc = sp_depth_ch(p, ch, i, j);
                char *drow = (p->to_space ? (char *)c->x : c->y) + (size_t)(((n * Cd + dc) * H + h) * W) * es;
                for (int64_t w = 0; w < W; w++) {
                    char *sp_el = srow + (size_t)(w * b + j) * es, *dp_el = drow + (size_t)w * es;
                    if (p->to_space) k_cp_el(sp_el, dp_el, es);
                    else k_cp_el(dp_el, sp_el, es);
                }
            }
        } else { /* r = (n, oh, ow) over the space side's pixels: one channel run of C each */
            int64_t ow = r % (W * b), nh = r / (W * b), oh = nh % (H * b), n = nh / (H * b);
            int64_t h = oh / b, i = oh % b, w = ow / b, j = ow % b;
            char *spx = (p->to_space ? c->y : (char *)c->x) + (size_t)(r * C) * es;
            char *dpx = (p->to_space ? (char *)c->x : c->y) + (size_t)(((n * H + h) * W + w) * Cd) * es;
            if (!p->crd) {
                char *run = dpx + (size_t)((i * b + j) * C) * es;
                if (p->to_space) memcpy(spx, run, (size_t)C * es);
                else memcpy(run, spx, (size_t)C * es);
            } else {
                for (int64_t ch = 0; ch < C; ch++) {
                    char *d = dpx + (size_t)((ch * b + i) * b + j) * es, *s = spx + (size_t)ch * es;
                    if (p->to_space) k_cp_el(s, d, es);
                    else k_cp_el(d, s, es);
                }
            }
        }
    }
}

static aclError sp_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const sp_plan *p = k->plan;
    if (k->out[0].numel == 0) return ACL_SUCCESS;
    sp_ctx c = {p, in[0], out[0]};
    int64_t rows = p->nhwc ? p->N * p->H * p->b * p->W * p->b : p->N * p->C * p->H * p->b;
    int64_t per = p->nhwc ? p->C : p->W * p->b;
    hrt_parallel_for(rows, K_GRAIN / (per + 1) + 1, sp_rows, &c);
    return ACL_SUCCESS;
}

static aclError sp_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    bool to_space = strcmp(k->op_name, "DepthToSpace") == 0;
    if (hrt_dtype_size(x->dtype) == 0) return k_unsupported(k, "x", x->dtype);
    if (x->ndim != 4) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must be 4-D", k->op_name);
    int64_t b, bb;
    const char *mode = "DCR";
    int nhwc;
    if ((rc = hrt_attr_get_int(k, attrs, "block_size", true, 0, &b)) || (rc = k_layout(k, attrs, x, "NHWC", &nhwc)))
        return rc;
    if (to_space && (rc = hrt_attr_get_string(k, attrs, "mode", false, "DCR", &mode))) return rc;
    if (b < 1 || __builtin_mul_overflow(b, b, &bb))
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: block_size must be >= 1, got %lld", k->op_name, (long long)b);
    if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: mode must be DCR or CRD, got '%s'", k->op_name, mode);
    int64_t n = x->dims[0], ch = x->dims[nhwc ? 3 : 1], h = x->dims[nhwc ? 1 : 2], w = x->dims[nhwc ? 2 : 3];
    sp_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int64_t od[4];
    if (to_space) {
        if (ch % bb) goto bad;
        p->C = ch / bb, p->H = h, p->W = w;
        /* the output's size is the input's: no overflow in h*b, w*b beyond what the desc holds */
        if (__builtin_mul_overflow(h, b, &od[nhwc ? 1 : 2]) || __builtin_mul_overflow(w, b, &od[nhwc ? 2 : 3])) goto bad;
        od[0] = n, od[nhwc ? 3 : 1] = p->C;
    } else {
        if (h % b || w % b) goto bad;
        p->C = ch, p->H = h / b, p->W = w / b;
        if (__builtin_mul_overflow(ch, bb, &od[nhwc ? 3 : 1])) goto bad;
        od[0] = n, od[nhwc ? 1 : 2] = p->H, od[nhwc ? 2 : 3] = p->W;
    }
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], od, 4, 0))) {
        free(p);
        return rc;
    }
    p->N = n;
    p->b = b;
    p->esz = hrt_dtype_size(x->dtype);
    p->nhwc = nhwc;
    p->crd = strcmp(mode, "CRD") == 0;
    p->to_space = to_space;
    k->plan = p;
    k->plan_free = free;
    k->run = sp_run;
    return ACL_SUCCESS;
bad:
    free(p);
    return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x does not fit block_size %lld", k->op_name, (long long)b);
}

HRT_OP(depthtospace, "DepthToSpace", sp_compile)
HRT_OP(spacetodepth, "SpaceToDepth", sp_compile)
