/* The packed-B kernels of gemm_small.c, one family per inclusion: PB_FN(name) names the family's
 * functions and PB_TARGET is its target attribute (empty: the build's own flags).  gemm_small.c
 * includes it once portable and, on x86-64, once with target("avx2,fma"), and picks a family at run
 * time (AIOGE_HOST_ISA).  No include guard: that is the point. */
#ifndef PB_PF
/* B's prefetch distance in K steps (a panel's row: one 64-byte line a step): the first row panel
 * to read a slice of B takes it from memory (a few rows, a B past L2: 0.85-0.9x the CPU time) */
#define PB_PF 16
#endif
/* an activation over R stored rows of NR floats (ldt apart), just written: one call a panel's rows
 * of a row block, each kind's loop over a row vectorised (16 floats: two vectors, no remainder) */
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
    default: PB_ACT_ROWS(K_ACT_INL_GELU_TANH) break;
    }
#undef PB_ACT_ROWS
}

/* t[R][NR] (+)= A[R][K] (rows lda apart, read in place) . B[K][NR] (a packed panel slice), R <= MR a
 * constant once inlined: exactly R rows of multiply-adds (a ragged row panel wastes none) */
static inline __attribute__((always_inline)) PB_TARGET void PB_FN(uk_rows)(const int R, int64_t K, const float *restrict a, int64_t lda,
                                                          const float *restrict b, float *restrict t, int64_t ldt,
                                                          bool acc, const pb_epi *e, const float *bias) {
    v8f c[MR][2];
    for (int r = 0; r < R; r++) {
        if (acc) {
            c[r][0] = ld8(t + r * ldt);
            c[r][1] = ld8(t + r * ldt + 8);
        } else {
            c[r][0] = c[r][1] = (v8f){0};
        }
    }
    for (int64_t k = 0; k < K; k++, b += NR) {
        __builtin_prefetch(b + PB_PF * NR);
        v8f b0 = ld8(b), b1 = ld8(b + 8);
        PB_PIN(b0);
        PB_PIN(b1);
        for (int r = 0; r < R; r++) {
            const float s = a[r * lda + k];
            const v8f x = {s, s, s, s, s, s, s, s};
            c[r][0] += x * b0;
            c[r][1] += x * b1;
        }
    }
    if (e) /* the last K block: the epilogue on the accumulators, C written once */
        for (int r = 0; r < R; r++) {
            c[r][0] = pb_epi8(e, c[r][0], bias);
            c[r][1] = pb_epi8(e, c[r][1], bias ? bias + 8 : NULL);
        }
    for (int r = 0; r < R; r++) {
        st8(t + r * ldt, c[r][0]);
        st8(t + r * ldt + 8, c[r][1]);
    }
}

static PB_TARGET void PB_FN(uk_any)(int64_t mr, int64_t K, const float *a, int64_t lda, const float *b, float *t, int64_t ldt,
                                   bool acc, const pb_epi *e, const float *bias) {
    switch (mr) {
    case 1: PB_FN(uk_rows)(1, K, a, lda, b, t, ldt, acc, e, bias); break;
    case 2: PB_FN(uk_rows)(2, K, a, lda, b, t, ldt, acc, e, bias); break;
    case 3: PB_FN(uk_rows)(3, K, a, lda, b, t, ldt, acc, e, bias); break;
    case 4: PB_FN(uk_rows)(4, K, a, lda, b, t, ldt, acc, e, bias); break;
    case 5: PB_FN(uk_rows)(5, K, a, lda, b, t, ldt, acc, e, bias); break;
    default: PB_FN(uk_rows)(6, K, a, lda, b, t, ldt, acc, e, bias); break;
    }
}

/* one K block [k0, k0 + kc) of panel pp over rows [r0, r1), cut into npanel row panels of at most MR
 * as even as can be (8 rows: 4 + 4, not 6 + 2) */
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
    float tile[MR * NR] __attribute__((aligned(32))), bpad[NR];
    const int64_t rows = r1 - r0, npanel = (rows + MR - 1) / MR, base = rows / npanel, extra = rows % npanel;
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

/* M == 1: panel pp's 16 outputs from its two sums through the epilogue */
static inline __attribute__((always_inline)) PB_TARGET void PB_FN(gemv_store)(const pb_ctx *g, int64_t pp, v8f s0, v8f s1) {
    const int64_t j0 = pp * NR, nj = g->pb->n - j0 < NR ? g->pb->n - j0 : NR;
    float *c = g->c + j0, out[NR];
    st8(out, s0);
    st8(out + 8, s1);
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

/* M == 1: one streaming pass over the packed panels, two panels at a time (two memory streams, each
 * broadcast of A used for both), 8 accumulators (2 K steps x 2 panels x 2 vectors) */
static PB_TARGET void PB_FN(pb_gemv)(void *vp, int64_t p0, int64_t p1) {
    const pb_ctx *g = vp;
    const hrt_sgemm_pb *pb = g->pb;
    const int64_t K = pb->k;
    const float *a = g->a;
    int64_t pp = p0;
    for (; pp + 2 <= p1; pp += 2) {
        const float *b = pb->p + pp * K * NR, *d = b + K * NR;
        v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};
        int64_t k = 0;
        for (; k + 2 <= K; k += 2, b += 2 * NR, d += 2 * NR) {
            v8f x0 = {a[k], a[k], a[k], a[k], a[k], a[k], a[k], a[k]};
            v8f x1 = {a[k + 1], a[k + 1], a[k + 1], a[k + 1], a[k + 1], a[k + 1], a[k + 1], a[k + 1]};
            s0 += x0 * ld8(b), s1 += x0 * ld8(b + 8);
            t0 += x0 * ld8(d), t1 += x0 * ld8(d + 8);
            s2 += x1 * ld8(b + NR), s3 += x1 * ld8(b + NR + 8);
            t2 += x1 * ld8(d + NR), t3 += x1 * ld8(d + NR + 8);
        }
        if (k < K) {
            v8f x = {a[k], a[k], a[k], a[k], a[k], a[k], a[k], a[k]};
            s0 += x * ld8(b), s1 += x * ld8(b + 8);
            t0 += x * ld8(d), t1 += x * ld8(d + 8);
        }
        PB_FN(gemv_store)(g, pp, s0 + s2, s1 + s3);
        PB_FN(gemv_store)(g, pp + 1, t0 + t2, t1 + t3);
    }
    for (; pp < p1; pp++) {
        const float *b = pb->p + pp * K * NR;
        v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
        int64_t k = 0;
        for (; k + 4 <= K; k += 4, b += 4 * NR) {
            v8f x0 = {a[k], a[k], a[k], a[k], a[k], a[k], a[k], a[k]};
            v8f x1 = {a[k + 1], a[k + 1], a[k + 1], a[k + 1], a[k + 1], a[k + 1], a[k + 1], a[k + 1]};
            v8f x2 = {a[k + 2], a[k + 2], a[k + 2], a[k + 2], a[k + 2], a[k + 2], a[k + 2], a[k + 2]};
            v8f x3 = {a[k + 3], a[k + 3], a[k + 3], a[k + 3], a[k + 3], a[k + 3], a[k + 3], a[k + 3]};
            s0 += x0 * ld8(b), s1 += x0 * ld8(b + 8);
            s2 += x1 * ld8(b + NR), s3 += x1 * ld8(b + NR + 8);
            s4 += x2 * ld8(b + 2 * NR), s5 += x2 * ld8(b + 2 * NR + 8);
            s6 += x3 * ld8(b + 3 * NR), s7 += x3 * ld8(b + 3 * NR + 8);
        }
        for (; k < K; k++, b += NR) {
            v8f x = {a[k], a[k], a[k], a[k], a[k], a[k], a[k], a[k]};
            s0 += x * ld8(b), s1 += x * ld8(b + 8);
        }
        PB_FN(gemv_store)(g, pp, (s0 + s2) + (s4 + s6), (s1 + s3) + (s5 + s7));
    }
}

