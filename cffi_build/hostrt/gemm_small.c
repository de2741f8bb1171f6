/* float32 GEMM for small M (a batch of rows through a weight matrix: an MLP layer at batch 8-256,
 * a transformer's projections at 64-128 tokens): C[M, N] (+)= A[M, K] . op(B)[K, N].
 *
 * A is packed once per call into 6-row panels (M x K: small).  A work item is a block of up to four
 * 16-column panels of C; per K block of 256 rows it packs its panels' slices of op(B) (64 KB: rows
 * of B read 256 bytes at a time, or contiguous rows of B^T) and sweeps all of A's panels over each
 * slice, accumulating in C itself.  B is read once per call and packed slice by slice where it is used (reading B in
 * place strided by a power-of-two row length thrashed L1's sets: 0.5-0.75x OpenBLAS).  Items are
 * split over the pool. */
#include "kernels/kcommon.h"

#include "kernels/ukernel.h"

typedef struct {
    bool tb, acc0; /* acc0: beta == 1 (accumulate into C from the first K block) */
    int64_t m, n, k, lda, ldb, ldc, npan, per_item;
    const float *a, *b;
    float *c;
    const float *ap; /* A packed: per 6-row panel, K x MR */
} gs_ctx;

/* op(B) rows [k0, k0 + kc) of panels [p0, p1) -> bp: per panel kc x NR (columns past N zero) */
static void gs_pack(const gs_ctx *g, int64_t k0, int64_t kc, int64_t p0, int64_t p1, float *bp) {
    const int64_t j1 = p1 * NR < g->n ? p1 * NR : g->n, pstride = kc * NR;
    if (g->tb) { /* op(B)[k][j] = B[j][k]: contiguous rows of B */
        if (j1 < p1 * NR) memset(bp, 0, sizeof(float) * (size_t)((p1 - p0) * pstride));
        for (int64_t pp = p0; pp < p1; pp++) { /* 8 x 8 blocks transposed in registers */
            const int64_t c0 = pp * NR, nj = j1 - c0 < NR ? j1 - c0 : NR;
            float *d = bp + (pp - p0) * pstride;
            int64_t kk = 0;
            if (nj == NR)
                for (; kk + 8 <= kc; kk += 8)
                    for (int h = 0; h < 2; h++) {
                        v8f r[8];
                        for (int q = 0; q < 8; q++) r[q] = ld8(g->b + (c0 + 8 * h + q) * g->ldb + k0 + kk);
                        for (int q = 0; q < 8; q++) {
                            v8f o = {r[0][q], r[1][q], r[2][q], r[3][q], r[4][q], r[5][q], r[6][q], r[7][q]};
                            st8(d + (kk + q) * NR + 8 * h, o);
                        }
                    }
            for (; kk < kc; kk++)
                for (int64_t j = 0; j < nj; j++) d[kk * NR + j] = g->b[(c0 + j) * g->ldb + k0 + kk];
        }
        return;
    }
    for (int64_t kk = 0; kk < kc; kk++) {
        const float *br = g->b + (k0 + kk) * g->ldb;
        for (int64_t pp = p0; pp < p1; pp++) {
            float *d = bp + (pp - p0) * pstride + kk * NR;
            int64_t c0 = pp * NR, nj = g->n - c0 < NR ? g->n - c0 : NR;
            if (nj == NR) {
                memcpy(d, br + c0, sizeof(float) * NR);
            } else {
                memcpy(d, br + c0, sizeof(float) * (size_t)nj);
                memset(d + nj, 0, sizeof(float) * (size_t)(NR - nj));
            }
        }
    }
}

/* panels per work item: one K block of them packed is 64 KB (L2), and a row of B is read as 256
 * contiguous bytes per pack */
#define GS_PANELS 4

static void gs_items(void *vp, int64_t i0, int64_t i1) {
    const gs_ctx *g = vp;
    float bp[GS_PANELS * KC * NR] __attribute__((aligned(64)));
    float tile[MR * NR] __attribute__((aligned(32)));
    for (int64_t it = i0; it < i1; it++) {
        int64_t p0 = it * g->per_item, p1 = p0 + g->per_item < g->npan ? p0 + g->per_item : g->npan;
        for (int64_t k0 = 0; k0 < g->k; k0 += KC) {
            const int64_t kc = g->k - k0 < KC ? g->k - k0 : KC;
            const bool acc = k0 > 0 || g->acc0;
            gs_pack(g, k0, kc, p0, p1, bp);
            for (int64_t pp = p0; pp < p1; pp++) {
                const int64_t j0 = pp * NR, nj = g->n - j0 < NR ? g->n - j0 : NR;
                const float *b = bp + (pp - p0) * kc * NR;
                for (int64_t i = 0; i < g->m; i += MR) {
                    const int64_t mr = g->m - i < MR ? g->m - i : MR;
                    const float *a = g->ap + i * g->k + k0 * MR;
                    float *c = g->c + i * g->ldc + j0;
                    if (mr == MR && nj == NR) {
                        ukernel_ld(kc, a, b, c, g->ldc, acc);
                        continue;
                    }
                    if (acc)
                        for (int64_t r = 0; r < mr; r++) memcpy(tile + r * NR, c + r * g->ldc, sizeof(float) * (size_t)nj);
                    ukernel_ld(kc, a, b, tile, NR, acc);
                    for (int64_t r = 0; r < mr; r++) memcpy(c + r * g->ldc, tile + r * NR, sizeof(float) * (size_t)nj);
                }
            }
        }
    }
}

bool hrt_sgemm_small_ok(bool ta, int64_t m, int64_t n, int64_t k, float alpha, float beta) {
    return !ta && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) && m >= 16 && m <= 96 && n >= 128 && k >= 128;
}

/* false: out of host memory */
bool hrt_sgemm_small(bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *c, int64_t ldc) {
    const int64_t mpan = (m + MR - 1) / MR;
    float *ap = hrt_aligned_array(64, mpan * MR * k, sizeof(float));
    if (!ap) return false;
    for (int64_t ip = 0; ip < mpan; ip++) { /* A's 6-row panels, K x MR (rows past M zero) */
        float *d = ap + ip * MR * k;
        for (int64_t r = 0; r < MR; r++) {
            int64_t i = ip * MR + r;
            if (i < m) {
                const float *ar = a + i * lda;
                for (int64_t kk = 0; kk < k; kk++) d[kk * MR + r] = ar[kk];
            } else {
                for (int64_t kk = 0; kk < k; kk++) d[kk * MR + r] = 0.0f;
            }
        }
    }
    gs_ctx g = {tb, beta == 1.0f, m, n, k, lda, ldb, ldc, (n + NR - 1) / NR, GS_PANELS, a, b, c, ap};
    /* items of up to 4 panels; at least 4 items a thread when the columns allow */
    int64_t want = 4 * (int64_t)hrt_num_threads();
    while (g.per_item > 1 && (g.npan + g.per_item - 1) / g.per_item < want) g.per_item /= 2;
    int64_t items = (g.npan + g.per_item - 1) / g.per_item;
    hrt_parallel_for(items, 1, gs_items, &g);
    free(ap);
    return true;
}
