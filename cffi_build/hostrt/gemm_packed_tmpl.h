/* The packed-B kernels of gemm_small.c, one family per inclusion: PB_FN(name) names the family's
 * functions, PB_TARGET is its target attribute (empty: the build's own flags), PB_V / PB_VI its
 * float / int32 vector of PB_W lanes (8 or 16: a 16-column panel's row is NR / PB_W vectors) and
 * PB_MR its rows a micro-tile.  gemm_small.c includes it portable (8 x 6), with target("avx2,fma")
 * (8 x 6) and, on x86-64, twice at 16 x 14: target("avx512f,...") and the same source at
 * target("avx2,fma") (each 64-byte vector a pair of ymm), the second one there so that the
 * AVX-512 family's source runs on a CPU without AVX-512.  A family is picked at run time
 * (AIOGE_HOST_ISA).  No include guard: that is the point. */
#ifndef PB_PF
/* B's prefetch distance in K steps (a panel's row: one 64-byte line a step): the first row panel
 * to read a slice of B takes it from memory (a few rows, a B past L2: 0.85-0.9x the CPU time) */
#define PB_PF 16
#endif
#define PB_NV (NR / PB_W) /* vectors a row of a panel */

/* one vector of C through the scale / bias / Relu / Clip of the epilogue (b: its PB_W bias values,
 * NULL: none).  Relu: x > 0 ? x : (NaN ? x : 0), Clip: x < lo ? lo : (x > hi ? hi : x), as
 * k_act_tile (s - (PB_V){0}: s in every lane, -0 kept).  Through a pointer: a 64-byte vector passed by value changes the ABI without AVX-512 */
static inline __attribute__((always_inline)) PB_TARGET void PB_FN(epi_v)(const pb_epi *e, PB_V *v, const float *b) {
    PB_V x = *v;
    if (e->scaled) x *= e->scale;
    if (b) x += PB_LD(b);
    if (e->inl == K_ACT_INL_RELU) {
        PB_VI keep = (x > 0.0f) | (x != x);
        x = (PB_V)((PB_VI)x & keep);
    } else if (e->inl == K_ACT_INL_CLIP) {
        PB_VI over = x > e->hi;
        x = (PB_V)((over & (PB_VI)(e->hi - (PB_V){0})) | ((PB_VI)x & ~over));
        PB_VI under = x < e->lo;
        x = (PB_V)((under & (PB_VI)(e->lo - (PB_V){0})) | ((PB_VI)x & ~under));
    }
    *v = x;
}

/* an activation over R stored rows of NR floats (ldt apart), just written: one call a panel's rows
 * of a row block, each kind's loop over a row vectorised (16 floats: no remainder) */
static __attribute__((noinline)) PB_TARGET void PB_FN(act_tile)(int kind, float *t, int64_t ldt, int64_t R) {
#define PB_ACT_ROWS(K)                                                                                 \
    for (int64_t r = 0; r < R; r++) {                                                               \
        float *row = t + r * ldt;                                                                   \
        for (int j = 0; j < NR; j++) row[j] = pb_act1(K, row[j]);                                   \
    }
    switch (kind) {
    case K_ACT_INL_SIGMOID: PB_ACT_ROWS(K_ACT_INL_SIGMOID) break;
    case K_ACT_INL_TANH: PB_ACT_ROWS(K_ACT_INL_TANH) break;
    case K_ACT_INL_GELU: PB_ACT_ROWS(K_ACT_INL_GELU) break;
    case K_ACT_INL_SWISH: PB_ACT_ROWS(K_ACT_INL_SWISH) break;
    case K_ACT_INL_HARD_SWISH: PB_ACT_ROWS(K_ACT_INL_HARD_SWISH) break;
    default: PB_ACT_ROWS(K_ACT_INL_GELU_TANH) break;
    }
#undef PB_ACT_ROWS
}

/* t[R][NR] (+)= A[R][K] (rows lda apart, read in place) . B[K][NR] (a packed panel slice), R <= PB_MR
 * a constant once inlined: exactly R rows of multiply-adds (a ragged row panel wastes none).
 * R x PB_NV accumulators, PB_NV vectors of B, A's scalars broadcast (AVX-512: an FMA's memory
 * operand {1to16}) */
static inline __attribute__((always_inline)) PB_TARGET void PB_FN(uk_rows)(const int R, int64_t K, const float *restrict a, int64_t lda,
                                                          const float *restrict b, float *restrict t, int64_t ldt,
                                                          bool acc, const pb_epi *e, const float *bias) {
    PB_V c[PB_MR][PB_NV];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < PB_NV; v++) c[r][v] = acc ? PB_LD(t + r * ldt + v * PB_W) : (PB_V){0};
    for (int64_t k = 0; k < K; k++, b += NR) {
        __builtin_prefetch(b + PB_PF * NR);
        PB_V bv[PB_NV];
        for (int v = 0; v < PB_NV; v++) {
            bv[v] = PB_LD(b + v * PB_W);
            PB_PIN(bv[v]);
        }
        for (int r = 0; r < R; r++) {
            const float s = a[r * lda + k];
            for (int v = 0; v < PB_NV; v++) c[r][v] += s * bv[v];
        }
    }
    if (e) /* the last K block: the epilogue on the accumulators, C written once */
        for (int r = 0; r < R; r++)
            for (int v = 0; v < PB_NV; v++) PB_FN(epi_v)(e, &c[r][v], bias ? bias + v * PB_W : NULL);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < PB_NV; v++) PB_ST(t + r * ldt + v * PB_W, c[r][v]);
}

static PB_TARGET void PB_FN(uk_any)(int64_t mr, int64_t K, const float *a, int64_t lda, const float *b, float *t, int64_t ldt,
                                   bool acc, const pb_epi *e, const float *bias) {
#define PB_UK(R)                                                                                       \
    case R: PB_FN(uk_rows)(R, K, a, lda, b, t, ldt, acc, e, bias); break;
    switch (mr) {
        PB_UK(1)
        PB_UK(2)
        PB_UK(3)
        PB_UK(4)
        PB_UK(5)
#if PB_MR > 6
        PB_UK(6)
        PB_UK(7)
        PB_UK(8)
        PB_UK(9)
        PB_UK(10)
        PB_UK(11)
        PB_UK(12)
        PB_UK(13)
#endif
#if PB_MR != 6 && PB_MR != 14
#error "gemm_packed_tmpl.h: PB_MR is 6 or 14 (uk_any's cases)"
#endif
    default: PB_FN(uk_rows)(PB_MR, K, a, lda, b, t, ldt, acc, e, bias); break;
    }
#undef PB_UK
}

/* one K block [k0, k0 + kc) of panel pp over rows [r0, r1), cut into npanel row panels of at most
 * PB_MR as even as can be (8 rows at 6: 4 + 4, not 6 + 2) */
static inline __attribute__((always_inline)) PB_TARGET void PB_FN(pb_step)(const pb_ctx *g, int64_t r0, int64_t npanel, int64_t base,
                                                           int64_t extra, int64_t k0, int64_t kc, int64_t pp, float *tile,
                                                           float *bpad) {
    const hrt_sgemm_pb *pb = g->pb;
    const bool acc = k0 > 0;
    const pb_epi *e = k0 + kc >= pb->k ? g->epi : NULL;
    const int64_t j0 = pp * NR, nj = pb->n - j0 < NR ? pb->n - j0 : NR;
    const float *b = pb->p + pp * pb->k * NR + k0 * NR, *bias = e && e->bias ? e->bias + j0 : NULL;
    if (bias && nj < NR) { /* the ragged last panel: its bias padded to NR */
        memcpy(bpad, bias, sizeof(float) * (size_t)nj);
        memset(bpad + nj, 0, sizeof(float) * (size_t)(NR - nj));
        bias = bpad;
    }
    int64_t i = r0;
    for (int64_t q = 0; q < npanel; q++) {
        const int64_t mr = base + (q < extra);
        const float *a = g->a + i * g->lda + k0;
        float *c = g->c + i * g->ldc + j0;
        if (nj == NR) {
            PB_FN(uk_any)(mr, kc, a, g->lda, b, c, g->ldc, acc, e, bias);
        } else {
            if (acc)
                for (int64_t r = 0; r < mr; r++) memcpy(tile + r * NR, c + r * g->ldc, sizeof(float) * (size_t)nj);
            PB_FN(uk_any)(mr, kc, a, g->lda, b, tile, NR, acc, e, bias);
            if (e && e->tile) PB_FN(act_tile)(e->tile, tile, NR, mr);
            for (int64_t r = 0; r < mr; r++) memcpy(c + r * g->ldc, tile + r * NR, sizeof(float) * (size_t)nj);
        }
        i += mr;
    }
    /* the panel's rows just stored (a 96-row block: 6 KB, in L1) through the activation at once */
    if (e && e->tile && nj == NR) PB_FN(act_tile)(e->tile, g->c + r0 * g->ldc + j0, g->ldc, i - r0);
}

/* rows [r0, r1) x panels [p0, p1).  A panel's kc x NR slice of B (16 KB) stays in L1 across the row
 * panels.  When the rows' whole A fits in L2 (PB_A_L2), panels outermost: B is read as one
 * sequential stream (a few rows: the product is bound by B's read from memory).  Otherwise K blocks
 * outermost, so the rows' kc-wide slice of A stays in L2 across the panels. */
static PB_TARGET void PB_FN(pb_block)(const pb_ctx *g, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
    const hrt_sgemm_pb *pb = g->pb;
    float tile[PB_MR * NR] __attribute__((aligned(64))), bpad[NR];
    const int64_t rows = r1 - r0, npanel = (rows + PB_MR - 1) / PB_MR, base = rows / npanel, extra = rows % npanel;
    if (rows * pb->k <= PB_A_L2) {
        for (int64_t pp = p0; pp < p1; pp++)
            for (int64_t k0 = 0; k0 < pb->k; k0 += KC)
                PB_FN(pb_step)(g, r0, npanel, base, extra, k0, pb->k - k0 < KC ? pb->k - k0 : KC, pp, tile, bpad);
    } else {
        for (int64_t k0 = 0; k0 < pb->k; k0 += KC)
            for (int64_t pp = p0; pp < p1; pp++)
                PB_FN(pb_step)(g, r0, npanel, base, extra, k0, pb->k - k0 < KC ? pb->k - k0 : KC, pp, tile, bpad);
    }
    const pb_epi *e = g->epi;
    if (e && e->post) { /* an activation not done per tile: the block's rows, still in cache */
        const int64_t c0 = p0 * NR, c1 = p1 * NR < pb->n ? p1 * NR : pb->n;
        for (int64_t r = r0; r < r1; r++) e->post->apply_f32(e->post, g->c + r * g->ldc + c0, c1 - c0);
    }
}

static PB_TARGET void PB_FN(pb_items)(void *vp, int64_t i0, int64_t i1) {
    const pb_ctx *g = vp;
    for (int64_t it = i0; it < i1; it++) {
        /* column group major: a group's panels of B, just read for one row block, are still in
         * cache for the next (128-256 x 768 x 3072, one thread: 0.91-0.93x the CPU time of row
         * block major), and a pool chunk of items holds rows of every block (96 + 32 rows: not
         * one thread on the 96) */
        const int64_t mblocks = (g->m + g->mc - 1) / g->mc, mb = it % mblocks, gi = it / mblocks;
        int64_t r0 = mb * g->mc, r1 = r0 + g->mc < g->m ? r0 + g->mc : g->m;
        int64_t p0 = gi * g->per_item, p1 = p0 + g->per_item < g->pb->npan ? p0 + g->per_item : g->pb->npan;
        PB_FN(pb_block)(g, r0, r1, p0, p1);
    }
}

/* M == 1: panel pp's 16 outputs from its PB_NV sums through the epilogue */
static inline __attribute__((always_inline)) PB_TARGET void PB_FN(gemv_store)(const pb_ctx *g, int64_t pp, const PB_V *s) {
    const int64_t j0 = pp * NR, nj = g->pb->n - j0 < NR ? g->pb->n - j0 : NR;
    float *c = g->c + j0, out[NR] __attribute__((aligned(64)));
    for (int v = 0; v < PB_NV; v++) PB_ST(out + v * PB_W, s[v]);
    const pb_epi *e = g->epi;
    if (e) {
        if (e->scaled)
            for (int64_t j = 0; j < nj; j++) out[j] *= e->scale;
        if (e->bias)
            for (int64_t j = 0; j < nj; j++) out[j] += e->bias[j0 + j];
        if (e->tile) PB_FN(act_tile)(e->tile, out, NR, 1);
        else if (e->act) k_act_tile(e->act, out, nj);
    }
    memcpy(c, out, sizeof(float) * (size_t)nj);
}

/* s[0] = the sum of s[0..U) (a pairwise tree), for each of the PB_NV vectors */
#define PB_SUM(s, U)                                                                                   \
    for (int h = (U) / 2; h >= 1; h /= 2)                                                              \
        for (int u = 0; u < h; u++)                                                                    \
            for (int v = 0; v < PB_NV; v++) s[u][v] += s[u + h][v]

/* M == 1: one streaming pass over the packed panels, two panels at a time (two memory streams, each
 * broadcast of A used for both), 8 accumulators (PB_G2 K steps x 2 panels x PB_NV vectors); a last
 * odd panel alone with 8 (PB_G1 K steps x PB_NV) */
#define PB_G2 (4 / PB_NV)
#define PB_G1 (8 / PB_NV)
static PB_TARGET void PB_FN(pb_gemv)(void *vp, int64_t p0, int64_t p1) {
    const pb_ctx *g = vp;
    const hrt_sgemm_pb *pb = g->pb;
    const int64_t K = pb->k;
    const float *a = g->a;
    int64_t pp = p0;
    for (; pp + 2 <= p1; pp += 2) {
        const float *b = pb->p + pp * K * NR, *d = b + K * NR;
        PB_V s[PB_G2][PB_NV], t[PB_G2][PB_NV];
        for (int u = 0; u < PB_G2; u++)
            for (int v = 0; v < PB_NV; v++) s[u][v] = t[u][v] = (PB_V){0};
        int64_t k = 0;
        for (; k + PB_G2 <= K; k += PB_G2, b += PB_G2 * NR, d += PB_G2 * NR)
            for (int u = 0; u < PB_G2; u++) {
                const float x = a[k + u];
                for (int v = 0; v < PB_NV; v++) {
                    s[u][v] += x * PB_LD(b + u * NR + v * PB_W);
                    t[u][v] += x * PB_LD(d + u * NR + v * PB_W);
                }
            }
        for (; k < K; k++, b += NR, d += NR)
            for (int v = 0; v < PB_NV; v++) {
                s[0][v] += a[k] * PB_LD(b + v * PB_W);
                t[0][v] += a[k] * PB_LD(d + v * PB_W);
            }
        PB_SUM(s, PB_G2);
        PB_SUM(t, PB_G2);
        PB_FN(gemv_store)(g, pp, s[0]);
        PB_FN(gemv_store)(g, pp + 1, t[0]);
    }
    for (; pp < p1; pp++) {
        const float *b = pb->p + pp * K * NR;
        PB_V s[PB_G1][PB_NV];
        for (int u = 0; u < PB_G1; u++)
            for (int v = 0; v < PB_NV; v++) s[u][v] = (PB_V){0};
        int64_t k = 0;
        for (; k + PB_G1 <= K; k += PB_G1, b += PB_G1 * NR)
            for (int u = 0; u < PB_G1; u++)
                for (int v = 0; v < PB_NV; v++) s[u][v] += a[k + u] * PB_LD(b + u * NR + v * PB_W);
        for (; k < K; k++, b += NR)
            for (int v = 0; v < PB_NV; v++) s[0][v] += a[k] * PB_LD(b + v * PB_W);
        PB_SUM(s, PB_G1);
        PB_FN(gemv_store)(g, pp, s[0]);
    }
}
#undef PB_SUM
#undef PB_G1
#undef PB_G2
#undef PB_NV
