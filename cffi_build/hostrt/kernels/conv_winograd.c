/* float32 3x3 stride-1 convolution (NCHW, groups 1) by Winograd F(2x2, 3x3).
 *
 * Each 2x2 output tile comes from a 4x4 input tile: V = B^T d B, then for
 * each of the 16 positions xi an element-wise product with the transformed
 * filter U = G g G^T summed over input channels -- a GEMM per position,
 * M[xi] (Cout x tiles) = U[xi] (Cout x Cin) . V[xi] (Cin x tiles) -- and
 * Y = A^T M A.  That is 16 multiply-adds per 4 outputs per channel pair
 * instead of 36 (2.25x fewer).  F(2x2, 3x3) is used rather than F(4x4, 3x3)
 * because its transforms are exact in binary (0, +-1, 1/2): its float32
 * error stays within ~4x the direct convolution's (measured ~2e-6 vs 5e-7
 * for 128 channels of unit data), while F(4x4)'s reaches 2e-5.
 *
 * Work items are runs of 32 consecutive tiles (two 16-lane groups) of one
 * image.  The input is copied once into a zero-padded buffer split into 2
 * column phases, so tile tx's column c is element tx + c/2 of phase c%2:
 * the input transform of a run of tiles in one tile row reads 16 contiguous
 * streams and vectorises over tiles.  Per item: transform V for a block of
 * input channels into the micro-kernel's B-panel layout, run the 16 GEMMs
 * on the shared 6x16 micro-kernel (ukernel.h) against U packed once per run
 * (or once per model: hrt_conv2d_winograd_pack when a compiled model loads),
 * then the output transform with bias and activation, straight to y. */
#include "kcommon.h"
#include "ukernel.h"

#include <stdlib.h>

#define WG_LANES NR       /* tiles per lane group (one B panel) */
#define WG_GROUPS 2       /* lane groups per work item */
#define WG_CBLK 128       /* input channels per transform block (keeps V in L2) */

typedef struct {
    const k_conv_geom *g;
    const float *xph;    /* [N][C][2 phases][Hp][Wq] zero-padded input */
    const float *upack;  /* [16][mpan][C][MR] transformed filter (Cout rows padded to MR) */
    const float *bias;
    const k_act *act;
    float *y;
    int64_t Hp, Wq, th, tw, mpan, items_per_image;
    _Atomic int failed;
} wg_ctx;

/* a run of lanes of one group whose tiles lie in one tile row */
typedef struct {
    int64_t ty, tx0, lane, len;
} wg_seg;

static int wg_segments(const wg_ctx *c, int64_t t0, int64_t nt, wg_seg *seg) {
    int ns = 0;
    for (int64_t t = t0; t < t0 + nt;) {
        int64_t ty = t / c->tw, tx = t % c->tw;
        int64_t len = c->tw - tx < t0 + nt - t ? c->tw - tx : t0 + nt - t;
        seg[ns++] = (wg_seg){ty, tx, t - t0, len};
        t += len;
    }
    return ns;
}

/* 16 lanes as two vectors */
typedef struct {
    v8f lo, hi;
} v16;

static inline v16 ld16(const float *p) { return (v16){ld8(p), ld8(p + 8)}; }
static inline void st16(float *p, v16 v) {
    st8(p, v.lo);
    st8(p + 8, v.hi);
}
#define V16_OP(a, OP, b) ((v16){(a).lo OP(b).lo, (a).hi OP(b).hi})

/* d[r][c] (16 lanes each) of one lane group for channel plane xc: tile (ty, tx0 + l) reads padded row
 * 2ty + r, column 2(tx0 + l) + c = element tx0 + l + c/2 of phase c%2 */
static void wg_gather(const wg_ctx *c, const float *xc, const wg_seg *seg, int ns, float d[16][WG_LANES]) {
    const int64_t Wq = c->Wq, odd = c->Hp * c->Wq;
    if (ns == 1 && seg[0].len == WG_LANES) { /* the common case: straight vector loads */
        const float *r = xc + (2 * seg[0].ty) * Wq + seg[0].tx0;
        for (int i = 0; i < 4; i++, r += Wq) {
            st16(d[i * 4 + 0], ld16(r));
            st16(d[i * 4 + 1], ld16(r + odd));
            st16(d[i * 4 + 2], ld16(r + 1));
            st16(d[i * 4 + 3], ld16(r + odd + 1));
        }
        return;
    }
    for (int s = 0; s < ns; s++) {
        const wg_seg sg = seg[s];
        const float *r = xc + (2 * sg.ty) * Wq + sg.tx0;
        for (int i = 0; i < 4; i++, r += Wq)
            for (int64_t l = 0; l < sg.len; l++) {
                d[i * 4 + 0][sg.lane + l] = r[l];
                d[i * 4 + 1][sg.lane + l] = r[odd + l];
                d[i * 4 + 2][sg.lane + l] = r[l + 1];
                d[i * 4 + 3][sg.lane + l] = r[odd + l + 1];
            }
    }
}

/* V (16 positions x [ci][16 lanes]) of one lane group for channels [c0, c0 + nc) */
static void wg_input(const wg_ctx *c, const float *xn, const wg_seg *seg, int ns, int64_t nt, int64_t c0, int64_t nc,
                     float *v, int64_t vstride) {
    const int64_t plane = 2 * c->Hp * c->Wq;
    float d[16][WG_LANES] __attribute__((aligned(64)));
    if (nt < WG_LANES) memset(d, 0, sizeof d); /* lanes past the last tile stay zero, not stale (denormal) data */
    for (int64_t ci = 0; ci < nc; ci++) {
        wg_gather(c, xn + (c0 + ci) * plane, seg, ns, d);
        v16 t[4][4];
        for (int j = 0; j < 4; j++) { /* B^T d */
            v16 d0 = ld16(d[0 + j]), d1 = ld16(d[4 + j]), d2 = ld16(d[8 + j]), d3 = ld16(d[12 + j]);
            t[0][j] = V16_OP(d0, -, d2);
            t[1][j] = V16_OP(d1, +, d2);
            t[2][j] = V16_OP(d2, -, d1);
            t[3][j] = V16_OP(d1, -, d3);
        }
        float *vc = v + ci * WG_LANES;
        for (int i = 0; i < 4; i++) { /* (B^T d) B */
            st16(vc + (i * 4 + 0) * vstride, V16_OP(t[i][0], -, t[i][2]));
            st16(vc + (i * 4 + 1) * vstride, V16_OP(t[i][1], +, t[i][2]));
            st16(vc + (i * 4 + 2) * vstride, V16_OP(t[i][2], -, t[i][1]));
            st16(vc + (i * 4 + 3) * vstride, V16_OP(t[i][1], -, t[i][3]));
        }
    }
}

static void wg_items(void *vp, int64_t it0, int64_t it1) {
    wg_ctx *c = vp;
    const k_conv_geom *g = c->g;
    const int64_t C = g->C, cblk = C < WG_CBLK ? C : WG_CBLK, mpan = c->mpan, ntiles = c->th * c->tw;
    /* V: [16][group][cblk][16], M: [16][group][mpan][MR][16] */
    /* floats between positions, padded by a cache line so the 16 position streams do not alias in L1 */
    const int64_t vstride = (int64_t)WG_GROUPS * cblk * WG_LANES + 16;
    const int64_t mstride = (int64_t)WG_GROUPS * mpan * MR * WG_LANES + 16;
    float *v = hrt_aligned_array(64, 16 * (vstride + mstride), sizeof(float));
    if (!v) {
        c->failed = 1;
        return;
    }
    float *m = v + 16 * vstride;
    for (int64_t it = it0; it < it1; it++) {
        int64_t n = it / c->items_per_image, t0 = (it % c->items_per_image) * WG_GROUPS * WG_LANES;
        wg_seg seg[WG_GROUPS][WG_LANES];
        int ns[WG_GROUPS], ngroups = 0;
        int64_t nts[WG_GROUPS];
        for (int gi = 0; gi < WG_GROUPS; gi++) {
            int64_t a = t0 + gi * WG_LANES, nt = ntiles - a < WG_LANES ? ntiles - a : WG_LANES;
            if (nt <= 0) break;
            ns[gi] = wg_segments(c, a, nt, seg[gi]);
            nts[gi] = nt;
            ngroups++;
        }
        const float *xn = c->xph + n * C * 2 * c->Hp * c->Wq;
        for (int64_t c0 = 0; c0 < C; c0 += cblk) {
            int64_t nc = C - c0 < cblk ? C - c0 : cblk;
            for (int gi = 0; gi < ngroups; gi++) {
                float *vg = v + gi * cblk * WG_LANES;
                wg_input(c, xn, seg[gi], ns[gi], nts[gi], c0, nc, vg, vstride);
            }
            for (int xi = 0; xi < 16; xi++)
                for (int64_t mp = 0; mp < mpan; mp++) {
                    const float *u = c->upack + (xi * mpan + mp) * C * MR + c0 * MR;
                    for (int gi = 0; gi < ngroups; gi++)
                        ukernel(nc, u, v + xi * vstride + gi * cblk * WG_LANES,
                                m + xi * mstride + (gi * mpan + mp) * MR * WG_LANES, c0 > 0);
                }
        }
        /* Y = A^T M A per output channel and tile, + bias, activation */
        for (int gi = 0; gi < ngroups; gi++)
            for (int64_t co = 0; co < g->Cout; co++) {
                const float *mc = m + (gi * mpan + co / MR) * MR * WG_LANES + (co % MR) * WG_LANES;
                float bv = c->bias ? c->bias[co] : 0.0f;
                v16 b = {{bv, bv, bv, bv, bv, bv, bv, bv}, {bv, bv, bv, bv, bv, bv, bv, bv}};
                v16 s0[4], s1[4];
                for (int j = 0; j < 4; j++) { /* A^T M */
                    v16 q0 = ld16(mc + j * mstride), q1 = ld16(mc + (4 + j) * mstride);
                    v16 q2 = ld16(mc + (8 + j) * mstride), q3 = ld16(mc + (12 + j) * mstride);
                    v16 a = V16_OP(q1, +, q2), d = V16_OP(q1, -, q2);
                    s0[j] = V16_OP(q0, +, a);
                    s1[j] = V16_OP(d, -, q3);
                }
                float out[4][WG_LANES] __attribute__((aligned(64)));
                v16 a0 = V16_OP(s0[1], +, s0[2]), d0 = V16_OP(s0[1], -, s0[2]);
                v16 a1 = V16_OP(s1[1], +, s1[2]), d1 = V16_OP(s1[1], -, s1[2]);
                st16(out[0], V16_OP(V16_OP(s0[0], +, a0), +, b));
                st16(out[1], V16_OP(V16_OP(d0, -, s0[3]), +, b));
                st16(out[2], V16_OP(V16_OP(s1[0], +, a1), +, b));
                st16(out[3], V16_OP(V16_OP(d1, -, s1[3]), +, b));
                if (c->act) k_act_tile(c->act, &out[0][0], 4 * WG_LANES);
                float *yc = c->y + (n * g->Cout + co) * g->Ho * g->Wo;
                for (int s = 0; s < ns[gi]; s++) {
                    const wg_seg sg = seg[gi][s];
                    bool full_w = 2 * (sg.tx0 + sg.len) <= g->Wo;
                    for (int u = 0; u < 2; u++) {
                        int64_t oy = 2 * sg.ty + u;
                        if (oy >= g->Ho) break;
                        float *yr = yc + oy * g->Wo + 2 * sg.tx0;
                        const float *e = out[2 * u] + sg.lane, *o = out[2 * u + 1] + sg.lane;
                        if (full_w) {
                            for (int64_t l = 0; l < sg.len; l++) {
                                yr[2 * l] = e[l];
                                yr[2 * l + 1] = o[l];
                            }
                        } else {
                            for (int64_t l = 0; l < sg.len; l++) {
                                yr[2 * l] = e[l];
                                if (2 * (sg.tx0 + l) + 1 < g->Wo) yr[2 * l + 1] = o[l];
                            }
                        }
                    }
                }
            }
    }
    free(v);
}

typedef struct {
    const k_conv_geom *g;
    const float *x;
    float *xph;
    int64_t Hp, Wq;
} wg_pad_ctx;

/* plane p of x -> its 2 column phases of the zero-padded Hp x 2Wq plane */
static void wg_pad(void *vp, int64_t b, int64_t e) {
    const wg_pad_ctx *c = vp;
    const k_conv_geom *g = c->g;
    for (int64_t p = b; p < e; p++) {
        const float *src = c->x + p * g->H * g->W;
        for (int ph = 0; ph < 2; ph++) {
            float *dst = c->xph + (p * 2 + ph) * c->Hp * c->Wq;
            for (int64_t r = 0; r < c->Hp; r++) {
                float *dr = dst + r * c->Wq;
                int64_t iy = r - g->pt;
                if (iy < 0 || iy >= g->H) {
                    memset(dr, 0, sizeof(float) * (size_t)c->Wq);
                    continue;
                }
                const float *sr = src + iy * g->W;
                for (int64_t j = 0; j < c->Wq; j++) {
                    int64_t ix = 2 * j + ph - g->pl;
                    dr[j] = ix >= 0 && ix < g->W ? sr[ix] : 0.0f;
                }
            }
        }
    }
}

typedef struct {
    const float *w;
    float *upack;
    int64_t C, Cout, mpan;
} wg_filter_ctx;

/* U = G g G^T for output channels [co0, co1) (rows past Cout are zero), packed as [xi][co panel][ci][MR] */
static void wg_filter(void *vp, int64_t co0, int64_t co1) {
    const wg_filter_ctx *c = vp;
    const int64_t C = c->C, mpan = c->mpan;
    for (int64_t co = co0; co < co1; co++)
        for (int64_t ci = 0; ci < C; ci++) {
            double u[4][4] = {{0}};
            if (co < c->Cout) {
                const float *f = c->w + (co * C + ci) * 9;
                double t[4][3];
                for (int j = 0; j < 3; j++) { /* G g */
                    t[0][j] = f[j];
                    t[1][j] = 0.5 * ((double)f[j] + f[3 + j] + f[6 + j]);
                    t[2][j] = 0.5 * ((double)f[j] - f[3 + j] + f[6 + j]);
                    t[3][j] = f[6 + j];
                }
                for (int i = 0; i < 4; i++) { /* (G g) G^T */
                    u[i][0] = t[i][0];
                    u[i][1] = 0.5 * (t[i][0] + t[i][1] + t[i][2]);
                    u[i][2] = 0.5 * (t[i][0] - t[i][1] + t[i][2]);
                    u[i][3] = t[i][2];
                }
            }
            for (int xi = 0; xi < 16; xi++)
                c->upack[((xi * mpan + co / MR) * C + ci) * MR + co % MR] = (float)u[xi / 4][xi % 4];
        }
}

/* AIOGE_HOST_WINOGRAD: 0 = never (the direct convolution), unset/other = where eligible */
static bool wg_enabled(void) { return hrt_env_get()->winograd; }

bool hrt_conv2d_winograd_ok(const k_conv_geom *g) {
    /* below ~128 tiles or 32 input channels the transforms and the filter packing outweigh the saving
     * (measured: 32 channels at 14x14 ran 2x slower, 64+ channels at 28x28+ 1.2-2x faster) */
    int64_t tiles = g->N * ((g->Ho + 1) / 2) * ((g->Wo + 1) / 2);
    return wg_enabled() && !g->nhwc && g->groups == 1 && g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 &&
           g->dh == 1 && g->dw == 1 && g->C >= 32 && g->Cout >= 16 && tiles >= 128;
}

/* U for the geometry's filter (OIHW), [16][mpan][C][MR]; NULL: no memory */
float *hrt_conv2d_winograd_pack(const k_conv_geom *g, const float *w, size_t *bytes, bool parallel) {
    const int64_t C = g->C, Cout = g->Cout, mpan = (Cout + MR - 1) / MR;
    float *upack = hrt_aligned_array(64, 16 * mpan * C * MR, sizeof(float));
    if (!upack) return NULL;
    wg_filter_ctx fc = {w, upack, C, Cout, mpan};
    if (parallel) hrt_parallel_for(mpan * MR, K_GRAIN / (40 * C + 1) + 1, wg_filter, &fc);
    else wg_filter(&fc, 0, mpan * MR);
    if (bytes) *bytes = sizeof(float) * (size_t)(16 * mpan * C * MR);
    return upack;
}

/* the convolution with U transformed already (hrt_conv2d_winograd_pack) */
aclError hrt_conv2d_winograd_packed_f32(const hrt_kernel *k, const k_conv_geom *gg, const float *x,
                                        const float *upack, const float *bias, const k_act *act, float *y) {
    const k_conv_geom g = *gg;
    const int64_t C = g.C, Cout = g.Cout, mpan = (Cout + MR - 1) / MR;
    const int64_t th = (g.Ho + 1) / 2, tw = (g.Wo + 1) / 2;
    if (g.N == 0 || th == 0 || tw == 0 || Cout == 0) return ACL_SUCCESS;
    const int64_t Hp = 2 * th + 2, Wq = tw + 1;
    float *xph = hrt_aligned_array(64, g.N * C * 2 * Hp * Wq + 16, sizeof(float));
    if (!xph) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    wg_pad_ctx pc = {&g, x, xph, Hp, Wq};
    hrt_parallel_for(g.N * C, K_GRAIN / (2 * Hp * Wq + 1) + 1, wg_pad, &pc);
    wg_ctx c = {&g, xph, upack, bias, act && act->code != K_ACT_NONE ? act : NULL, y, Hp, Wq, th, tw, mpan, 0, 0};
    const int64_t per_item = WG_GROUPS * WG_LANES;
    c.items_per_image = (th * tw + per_item - 1) / per_item;
    hrt_parallel_for(g.N * c.items_per_image, 1, wg_items, &c);
    free(xph);
    if (c.failed) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    return ACL_SUCCESS;
}

/* With U transformed once at load Winograd takes less CPU than the direct kernel from 32 input
 * channels whatever the spatial size (graph A/B, load 6-7: 256ch 14x14 1.32x, 512ch 7x7 1.35x,
 * 64ch 14x14 1.80x less CPU), but below ~128 tiles it has too few work items for the pool (512ch
 * 7x7: one) and its latency on an idle machine got worse (resnet50 71 -> 92 ms, load 1): the same
 * geometries as without packing, until the work split is finer. */
bool hrt_conv2d_winograd_packed_ok(const k_conv_geom *g) { return hrt_conv2d_winograd_ok(g); }

aclError hrt_conv2d_winograd_f32(const hrt_kernel *k, const k_conv_geom *gg, const float *x, const float *w,
                                 const float *bias, const k_act *act, float *y) {
    if (gg->N == 0 || gg->Ho == 0 || gg->Wo == 0 || gg->Cout == 0) return ACL_SUCCESS;
    float *upack = hrt_conv2d_winograd_pack(gg, w, NULL, true);
    if (!upack) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    aclError rc = hrt_conv2d_winograd_packed_f32(k, gg, x, upack, bias, act, y);
    free(upack);
    return rc;
}
