/* float32 convolution as a packed GEMM with a fused im2col.
 *
 * The GEMM micro-kernel computes a 6x16 tile of C from a K x 6 panel of A
 * and a K x 16 panel of B (12 vector accumulators, GCC vector extensions:
 * AVX2+FMA with -march=native, SSE pairs otherwise).  The im2col never
 * exists as a whole: each worker packs the panel it is about to multiply
 * straight from the input into an L1/L2-sized buffer.
 *
 *   NCHW: C[Cout_g, Ho*Wo] = W[Cout_g, K] x col[K, Ho*Wo]   (A = weights,
 *         packed once per run; B panels = 16 output pixels, gathered as one
 *         or two contiguous row segments per (ci, ky, kx) from a zero-padded
 *         copy of the input split into `sw` column phases, so strided convs
 *         pack with the same fixed-size copies as stride 1)
 *   NHWC: C[Ho*Wo, Cout_g] = col[Ho*Wo, K] x W^T             (A panels = 6
 *         output pixels, gathered as runs of C_in/g channels; B = weights)
 *
 * Work is split over pixel panels on the intra-op pool with small chunks,
 * so it balances when cores are shared (another stream, another process)
 * instead of waiting on a straggler as a statically split GEMM does.  Bias
 * and a fused activation (_FusedConv2D) run on each tile before it is
 * stored; only outputs too big for the caches use non-temporal stores. */
#include "kcommon.h"

#include "ukernel.h"

typedef k_conv_geom cd_geom;

typedef struct {
    const cd_geom *g;
    const float *x, *bias;
    float *y;
    const float *w;     /* NCHW: the OIHW filter, read in place ([Cout, K] row-major) */
    const float *wpack; /* NHWC: per group, ceil(cout_g/NR) panels of K x NR */
    int64_t K, npanels; /* pixel panels per (image, group) */
    int64_t qb, nqb;    /* NCHW: pixel panels per item, pixel blocks per (image, group) */
    int64_t mbp, nmb;   /* NCHW: filter panels (MR rows) per item, filter blocks per group */
    size_t scratch;     /* floats per worker */
    _Atomic int failed;
    const float *xpad;  /* NCHW: zero-padded copy of x split into sw column phases (Hp x Wps planes), or NULL */
    int64_t Hp, Wps;
    const int64_t *toff; /* NCHW padded: per tap (ky, kx), its offset in a channel's phases (no divisions per row) */
    const k_act *act;   /* fused activation, or NULL */
} cd_ctx;

/* NCHW B panel rows [k0, k0 + kc) of one pixel panel (q0, nq) from the zero-padded input split
 * into sw column phases (phase ph holds padded columns ph, ph + sw, ...), so output pixel ox of tap
 * kx reads column ox + (kx*dw)/sw of phase (kx*dw)%sw: every (ci, ky, kx) row of the panel is one
 * fixed 16-float copy per output row the panel touches (usually one or two), for any stride (a copy
 * may run past its segment; the next segment or row overwrites that, and the buffers have 16 floats
 * of slack).  Without a padded copy (1x1, stride 1, no pads) the panel is a run of each plane. */
static void pack_b_nchw(const cd_ctx *c, const float *xpg, int64_t q0, int64_t nq, int64_t k0, int64_t kc, float *bp) {
    const cd_geom *g = c->g;
    if (!c->xpad) {
        const int64_t HW = g->H * g->W;
        const float *src = xpg + k0 * HW + q0;
        for (int64_t k = 0; k < kc; k++, src += HW, bp += NR) {
            if (nq == NR) {
                memcpy(bp, src, sizeof(float) * NR);
            } else {
                memcpy(bp, src, sizeof(float) * (size_t)nq);
                memset(bp + nq, 0, sizeof(float) * (size_t)(NR - nq));
            }
        }
        return;
    }
    const float *src[NR];
    int64_t off[NR];
    int nseg = 0;
    const int64_t Wps = c->Wps;
    for (int64_t q = q0; q < q0 + nq;) {
        int64_t oy = q / g->Wo, ox = q % g->Wo;
        int64_t len = g->Wo - ox < q0 + nq - q ? g->Wo - ox : q0 + nq - q;
        src[nseg] = xpg + (oy * g->sh) * Wps + ox;
        off[nseg] = q - q0;
        nseg++;
        q += len;
    }
    const int64_t plane = g->sw * c->Hp * Wps, taps = g->kh * g->kw;
    int64_t ci = k0 / taps, t = k0 % taps;
    for (int64_t k = 0; k < kc; k++, bp += NR) {
        const int64_t at = ci * plane + c->toff[t];
        memcpy(bp + off[0], src[0] + at, sizeof(float) * NR);
        if (nseg > 1) memcpy(bp + off[1], src[1] + at, sizeof(float) * NR);
        for (int s = 2; s < nseg; s++) memcpy(bp + off[s], src[s] + at, sizeof(float) * NR);
        if (++t == taps) t = 0, ci++;
    }
}

/* NCHW work split: blocks of up to QB_MAX pixel panels (a K block of them packed: <= 64 KB) */
#define QB_MAX 4

/* One NCHW work item: a block of qb pixel panels x a block of mbp filter panels of one (image,
 * group).  Per K block of KC rows the item packs its pixel panels once (<= 64 KB) and sweeps
 * its filter rows over them, read in place from the OIHW filter (ukernel_a), accumulating in the
 * output itself; bias starts the first K block, the activation runs on each tile after the last.
 * Small spatial sizes with big filters (inception's 7x7 and 14x14 layers) split the filter rows
 * instead of re-reading every filter row once per 16 pixels. */
static void cd_nchw_chunk(void *vp, int64_t b, int64_t e) {
    cd_ctx *c = vp;
    const cd_geom *g = c->g;
    const int64_t K = c->K, HoWo = g->Ho * g->Wo, mpan = (g->cout_g + MR - 1) / MR;
    /* on the stack (64 KB): a heap block this size is trimmed back to the OS on free and
     * page-faulted in again by the next chunk, which cost small convs more than their FLOPs */
    float bp[KC * QB_MAX * NR + NR] __attribute__((aligned(64)));
    float tile[MR * NR] __attribute__((aligned(32)));
    for (int64_t it = b; it < e; it++) { /* it = ((n * groups + grp) * nqb + qblock) * nmb + mblock */
        const int64_t mb = it % c->nmb, rest = it / c->nmb, qbi = rest % c->nqb, ng = rest / c->nqb;
        const int64_t grp = ng % g->groups, n = ng / g->groups;
        const int64_t p0 = qbi * c->qb, p1 = p0 + c->qb < c->npanels ? p0 + c->qb : c->npanels;
        const int64_t m_lo = mb * c->mbp, m_hi = m_lo + c->mbp < mpan ? m_lo + c->mbp : mpan;
        const float *xpg = c->xpad ? c->xpad + (n * g->C + grp * g->cin_g) * g->sw * c->Hp * c->Wps
                                   : c->x + (n * g->C + grp * g->cin_g) * g->H * g->W;
        float *yg = c->y + (n * g->Cout + grp * g->cout_g) * HoWo;
        const float *wg = c->w + grp * g->cout_g * K, *bg = c->bias ? c->bias + grp * g->cout_g : NULL;
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            const int64_t kc = K - k0 < KC ? K - k0 : KC;
            const bool acc = k0 > 0, last = k0 + kc >= K;
            for (int64_t pp = p0; pp < p1; pp++) {
                int64_t q0 = pp * NR, nq = HoWo - q0 < NR ? HoWo - q0 : NR;
                pack_b_nchw(c, xpg, q0, nq, k0, kc, bp + (pp - p0) * kc * NR);
            }
            for (int64_t mp = m_lo; mp < m_hi; mp++) {
                const int64_t m0 = mp * MR, mr = g->cout_g - m0 < MR ? g->cout_g - m0 : MR;
                const float *am = wg + m0 * K + k0, *bm = bg ? bg + m0 : NULL;
                for (int64_t pp = p0; pp < p1; pp++) {
                    const int64_t q0 = pp * NR, nq = HoWo - q0 < NR ? HoWo - q0 : NR;
                    float *cy = yg + m0 * HoWo + q0;
                    const float *bpp = bp + (pp - p0) * kc * NR;
                    if (mr == MR && nq == NR) {
                        ukernel_a(kc, am, K, mr, bpp, cy, HoWo, acc, bm);
                    } else {
                        if (acc)
                            for (int64_t r = 0; r < mr; r++) memcpy(tile + r * NR, cy + r * HoWo, sizeof(float) * (size_t)nq);
                        ukernel_a(kc, am, K, mr, bpp, tile, NR, acc, bm);
                        for (int64_t r = 0; r < mr; r++) memcpy(cy + r * HoWo, tile + r * NR, sizeof(float) * (size_t)nq);
                    }
                    if (last && c->act)
                        for (int64_t r = 0; r < mr; r++) k_act_tile(c->act, cy + r * HoWo, nq);
                }
            }
        }
    }
}

/* --- NHWC: A panel of MR output pixels (flattened), K = (ky, kx, ci) --- */
static void pack_a_nhwc(const cd_geom *g, const float *xn, int64_t grp, int64_t q0, int64_t nq, float *ap) {
    int64_t K = g->kh * g->kw * g->cin_g;
    if (nq < MR)
        for (int64_t k = 0; k < K; k++)
            for (int64_t p = nq; p < MR; p++) ap[k * MR + p] = 0.0f;
    for (int64_t p = 0; p < nq; p++) {
        int64_t q = q0 + p, oy = q / g->Wo, ox = q % g->Wo;
        for (int64_t ky = 0; ky < g->kh; ky++) {
            int64_t iy = oy * g->sh - g->pt + ky * g->dh;
            for (int64_t kx = 0; kx < g->kw; kx++) {
                int64_t ix = ox * g->sw - g->pl + kx * g->dw;
                float *d = ap + ((ky * g->kw + kx) * g->cin_g) * MR + p;
                if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W) {
                    for (int64_t ci = 0; ci < g->cin_g; ci++) d[ci * MR] = 0.0f;
                } else {
                    const float *xv = xn + (iy * g->W + ix) * g->C + grp * g->cin_g;
                    for (int64_t ci = 0; ci < g->cin_g; ci++) d[ci * MR] = xv[ci];
                }
            }
        }
    }
}

static void cd_nhwc_chunk(void *vp, int64_t b, int64_t e) {
    cd_ctx *c = vp;
    const cd_geom *g = c->g;
    int64_t K = c->K, HoWo = g->Ho * g->Wo, npan = (g->cout_g + NR - 1) / NR;
    float *ap = hrt_aligned_alloc(64, sizeof(float) * (c->scratch + (size_t)(npan * MR * NR)));
    if (!ap) {
        c->failed = 1;
        return;
    }
    float *tiles = ap + c->scratch;
    for (int64_t it = b; it < e; it++) {
        int64_t panel = it % c->npanels, ng = it / c->npanels, grp = ng % g->groups, n = ng / g->groups;
        int64_t q0 = panel * MR, nq = HoWo - q0 < MR ? HoWo - q0 : MR;
        const float *xn = c->x + n * g->H * g->W * g->C;
        pack_a_nhwc(g, xn, grp, q0, nq, ap);
        const float *wg = c->wpack + grp * npan * NR * K;
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            int64_t kc = K - k0 < KC ? K - k0 : KC;
            for (int64_t np = 0; np < npan; np++)
                ukernel(kc, ap + k0 * MR, wg + np * NR * K + k0 * NR, tiles + np * MR * NR, k0 > 0);
        }
        for (int64_t np = 0; np < npan; np++) {
            float *t = tiles + np * MR * NR;
            int64_t c0 = np * NR, nc = g->cout_g - c0 < NR ? g->cout_g - c0 : NR;
            if (c->bias) {
                const float *bv = c->bias + grp * g->cout_g + c0;
                for (int64_t p = 0; p < nq; p++)
                    for (int64_t j = 0; j < nc; j++) t[p * NR + j] += bv[j];
            }
            if (c->act) k_act_tile(c->act, t, nq * NR);
            for (int64_t p = 0; p < nq; p++) {
                float *yv = c->y + (n * HoWo + q0 + p) * g->Cout + grp * g->cout_g + c0;
                memcpy(yv, t + p * NR, sizeof(float) * (size_t)nc);
            }
        }
    }
    free(ap);
}

typedef struct {
    const cd_geom *g;
    const float *x;
    float *xp;
    int64_t Hp, Wp, Wps;
} pad_ctx;

/* plane p of x -> rows [pt, pt + H) x cols [pl, pl + W) of an Hp x Wp zero
 * plane, stored as sw column phases of Hp x Wps.  Stride 2: each row padded once, then split into
 * its two phases 16 columns a step with vector shuffles (an element-wise split took 13% of a 3->64
 * 3x3 stride-2 conv at 224x224) */
static void pad_planes(void *vp, int64_t b, int64_t e) {
    const pad_ctx *c = vp;
    const cd_geom *g = c->g;
    const int64_t sw = g->sw;
    float row[2048] __attribute__((aligned(32))); /* stride 2: one padded row, then split with vector shuffles */
    const bool split2 = sw == 2 && 2 * c->Wps + 16 <= 2048;
    for (int64_t p = b; p < e; p++) {
        const float *src = c->x + p * g->H * g->W;
        if (split2) {
            float *d0 = c->xp + p * 2 * c->Hp * c->Wps, *d1 = d0 + c->Hp * c->Wps;
            const int64_t Wps = c->Wps, pl = g->pl, W = g->W;
            for (int64_t r = 0; r < c->Hp; r++, d0 += Wps, d1 += Wps) {
                const int64_t iy = r - g->pt;
                if (iy < 0 || iy >= g->H) {
                    memset(d0, 0, sizeof(float) * (size_t)Wps);
                    memset(d1, 0, sizeof(float) * (size_t)Wps);
                    continue;
                }
                memset(row, 0, sizeof(float) * (size_t)pl);
                memcpy(row + pl, src + iy * W, sizeof(float) * (size_t)W); /* pl + W <= Wp <= 2 * Wps */
                memset(row + pl + W, 0, sizeof(float) * (size_t)(2 * Wps + 16 - pl - W));
                int64_t j = 0;
                for (; j + 8 <= Wps; j += 8) {
                    v8f a = ld8(row + 2 * j), b2 = ld8(row + 2 * j + 8);
                    st8(d0 + j, __builtin_shufflevector(a, b2, 0, 2, 4, 6, 8, 10, 12, 14));
                    st8(d1 + j, __builtin_shufflevector(a, b2, 1, 3, 5, 7, 9, 11, 13, 15));
                }
                for (; j < Wps; j++) d0[j] = row[2 * j], d1[j] = row[2 * j + 1];
            }
            continue;
        }
        for (int64_t ph = 0; ph < sw; ph++) {
            float *dst = c->xp + (p * sw + ph) * c->Hp * c->Wps;
            for (int64_t r = 0; r < c->Hp; r++) {
                float *dr = dst + r * c->Wps;
                int64_t iy = r - g->pt;
                if (iy < 0 || iy >= g->H) {
                    memset(dr, 0, sizeof(float) * (size_t)c->Wps);
                    continue;
                }
                const float *sr = src + iy * g->W;
                if (sw == 1) {
                    memset(dr, 0, sizeof(float) * (size_t)g->pl);
                    memcpy(dr + g->pl, sr, sizeof(float) * (size_t)g->W);
                    memset(dr + g->pl + g->W, 0, sizeof(float) * (size_t)(c->Wps - g->pl - g->W));
                    continue;
                }
                for (int64_t j = 0; j < c->Wps; j++) {
                    int64_t ix = j * sw + ph - g->pl;
                    dr[j] = ix >= 0 && ix < g->W ? sr[ix] : 0.0f;
                }
            }
        }
    }
}

static void cd_nchw_split(cd_ctx *c, int64_t N, int64_t groups, int64_t cout_g, int64_t K) {
    const int64_t mpan = (cout_g + MR - 1) / MR;
    c->nqb = (c->npanels + QB_MAX - 1) / QB_MAX;
    c->qb = (c->npanels + c->nqb - 1) / c->nqb;
    c->nqb = (c->npanels + c->qb - 1) / c->qb;
    /* too few pixel blocks to balance the pool (at least 4 items a thread): split the filter rows too,
     * down to items of ~0.25 MFLOP */
    const int64_t base = N * groups * c->nqb, want = 4 * (int64_t)hrt_num_threads();
    const double item_flops = 2.0 * MR * NR * (double)K * (double)c->qb * (double)mpan;
    int64_t nmb = 1;
    if (base < want) {
        nmb = (want + base - 1) / base;
        int64_t cap = (int64_t)(item_flops / 250000.0);
        if (nmb > cap) nmb = cap;
        if (nmb > mpan) nmb = mpan;
        if (nmb < 1) nmb = 1;
    }
    c->mbp = (mpan + nmb - 1) / nmb;
    c->nmb = (mpan + c->mbp - 1) / c->mbp;
}

/* Entry point used by conv.c: w in OIHW (NCHW) or OHWI (NHWC) layout. */
aclError hrt_conv2d_direct_f32(const hrt_kernel *k, const k_conv_geom *gg, const float *x, const float *w,
                               const float *bias, const k_act *act, float *y) {
    const k_conv_geom g = *gg;
    bool nhwc = g.nhwc;
    int64_t K = g.cin_g * g.kh * g.kw, HoWo = g.Ho * g.Wo;
    if (HoWo == 0 || g.N == 0 || g.Cout == 0) return ACL_SUCCESS;
    cd_ctx c = {.g = &g, .x = x, .bias = bias, .y = y, .w = w, .K = K, .act = act && act->code != K_ACT_NONE ? act : NULL};
    float *wp = NULL, *xpad = NULL;
    int64_t *toff = NULL;
    if (nhwc) { /* pack the weights: per group, panels of K x NR */
        int64_t pan = (g.cout_g + NR - 1) / NR;
        size_t wbytes = (sizeof(float) * (size_t)(g.groups * pan * NR * K) + 63) & ~(size_t)63;
        wp = hrt_aligned_alloc(64, wbytes);
        if (!wp) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
        for (int64_t grp = 0; grp < g.groups; grp++)
            for (int64_t p = 0; p < pan; p++) {
                float *dst = wp + (grp * pan + p) * NR * K;
                for (int64_t kk = 0; kk < K; kk++)
                    for (int64_t j = 0; j < NR; j++) {
                        int64_t co = p * NR + j;
                        dst[kk * NR + j] = co < g.cout_g ? w[(grp * g.cout_g + co) * K + kk] : 0.0f;
                    }
            }
        c.wpack = wp;
        c.npanels = (HoWo + MR - 1) / MR;
        c.scratch = (size_t)(K * MR);
        int64_t items = g.N * g.groups * c.npanels;
        /* ~ 2*MR*NR*K*pan flops per item: chunks of ~20-40 us, so small convs (a few MFLOP) use every core */
        int64_t per = 2 * MR * NR * K * pan + 1;
        hrt_parallel_for(items, (int64_t)(1000000 / per) + 1, cd_nhwc_chunk, &c);
        free(wp);
    } else {
        bool plain = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.Ho == g.H &&
                     g.Wo == g.W; /* the input planes are the GEMM operand: no padded copy */
        if (!plain) {
            /* zero-padded copy covering every input row/col any output reads */
            int64_t hr = (g.Ho - 1) * g.sh + (g.kh - 1) * g.dh + 1, wr = (g.Wo - 1) * g.sw + (g.kw - 1) * g.dw + 1;
            c.Hp = hr > g.H + g.pt ? hr : g.H + g.pt;
            int64_t Wp = wr > g.W + g.pl ? wr : g.W + g.pl;
            c.Wps = (Wp + g.sw - 1) / g.sw;
            size_t n = (size_t)(g.N * g.C * g.sw * c.Hp * c.Wps) + 2 * NR;
            xpad = hrt_aligned_array(64, (int64_t)n, sizeof(float));
            if (!xpad) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
            pad_ctx pc = {&g, x, xpad, c.Hp, Wp, c.Wps};
            hrt_parallel_for(g.N * g.C, K_GRAIN / (g.sw * c.Hp * c.Wps + 1) + 1, pad_planes, &pc);
            memset(xpad + (n - 2 * NR), 0, sizeof(float) * 2 * NR);
            c.xpad = xpad;
            toff = malloc(sizeof(int64_t) * (size_t)(g.kh * g.kw));
            if (!toff) {
                free(xpad);
                return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
            }
            for (int64_t ky = 0; ky < g.kh; ky++)
                for (int64_t kx = 0; kx < g.kw; kx++) {
                    int64_t col = kx * g.dw;
                    toff[ky * g.kw + kx] = ky * g.dh * c.Wps + (col % g.sw) * c.Hp * c.Wps + col / g.sw;
                }
            c.toff = toff;
        }
        c.npanels = (HoWo + NR - 1) / NR;
        cd_nchw_split(&c, g.N, g.groups, g.cout_g, K);
        int64_t items = g.N * g.groups * c.nqb * c.nmb;
        hrt_parallel_for(items, 1, cd_nchw_chunk, &c);
        free(xpad);
        free(toff);
    }
    if (c.failed) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    return ACL_SUCCESS;
}

/* ---- 1x1 NCHW convolutions on small planes, the filter packed once ----
 * C[N*Ho*Wo, Cout] = X^T[N*Ho*Wo, Cin] . W^T through the packed product (gemm_small.c), W^T packed
 * when the model loads (conv.c, cv_pack), the bias and the activation in the product's epilogue; the
 * input pixels are gathered pixel-major into scratch and C is transposed back into the output planes.
 * On small planes the filter is most of the bytes a 1x1 conv touches: the GEMM the other way round
 * (W[Cout, Cin] x X[Cin, HoWo], OpenBLAS) packed all of W again every call, and vectorised over a
 * handful of pixels; here W^T is streamed once, 16 output channels a vector pair. */
/* Pixels (N*Ho*Wo) up to which a 1x1 conv runs here.  mobilenet_v2 / efficientnet_b0 at 64x64, one
 * thread, the 1x1 convs' node times by the largest plane routed here: 4-16 pixels and 64 alike,
 * 256 1.3x and 1024 1.8x those (transposing the input and output planes costs more than packing
 * W again once the planes are as big as the filter). */
#define PW_MAX_PIXELS 64
bool hrt_conv2d_pointwise_ok(const k_conv_geom *g) {
    return !g->nhwc && g->groups == 1 && g->kh == 1 && g->kw == 1 && g->N * g->Ho * g->Wo <= PW_MAX_PIXELS;
}

aclError hrt_conv2d_pointwise_f32(const hrt_kernel *k, const k_conv_geom *g, const float *x, const hrt_sgemm_pb *pb,
                                  const float *w, const float *bias, const k_act *act, float *y) {
    const int64_t HoWo = g->Ho * g->Wo, m = g->N * HoWo, Cin = g->C, Cout = g->Cout, HW = g->H * g->W;
    if (m == 0 || Cout == 0) return ACL_SUCCESS;
    float *a = malloc(sizeof(float) * (size_t)(m * (Cin + Cout)));
    if (!a) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    float *c = a + m * Cin;
    /* A[q, ci] = x[n, ci, oy * sh - pt, ox * sw - pl] (0 outside the input) */
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t ci = 0; ci < Cin; ci++) {
            const float *xp = x + (n * Cin + ci) * HW;
            float *ap = a + n * HoWo * Cin + ci;
            for (int64_t oy = 0; oy < g->Ho; oy++) {
                const int64_t iy = oy * g->sh - g->pt;
                float *ar = ap + oy * g->Wo * Cin;
                if (iy < 0 || iy >= g->H) {
                    for (int64_t ox = 0; ox < g->Wo; ox++) ar[ox * Cin] = 0.0f;
                    continue;
                }
                const float *xr = xp + iy * g->W;
                for (int64_t ox = 0; ox < g->Wo; ox++) {
                    const int64_t ix = ox * g->sw - g->pl;
                    ar[ox * Cin] = ix >= 0 && ix < g->W ? xr[ix] : 0.0f;
                }
            }
        }
    hrt_sgemm_ep ep = {1.0f, bias, act && act->code != K_ACT_NONE ? act : NULL};
    aclError rc = hrt_sgemm_packed(m, false, a, Cin, pb, true, w, Cin, &ep, c, Cout);
    if (!rc)
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t q = 0; q < HoWo; q++) {
                const float *cr = c + (n * HoWo + q) * Cout;
                float *yq = y + n * Cout * HoWo + q;
                for (int64_t co = 0; co < Cout; co++) yq[co * HoWo] = cr[co];
            }
    free(a);
    return rc;
}
