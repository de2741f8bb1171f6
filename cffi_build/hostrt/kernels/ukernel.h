/* The float32 GEMM micro-kernel of the convolutions (conv_direct.c,
 * conv_winograd.c): a 6x16 tile of C from a K x 6 panel of A and a K x 16
 * panel of B in 12 vector accumulators (GCC vector extensions: AVX2+FMA
 * with -march=native, SSE pairs otherwise). */
#ifndef AIOGE_HRT_UKERNEL_H
#define AIOGE_HRT_UKERNEL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#define MR 6
#define NR 16
#define KC 256 /* K block: a K x NR panel slice of B (16 KB) stays in L1 across the M panels */

typedef float v8f __attribute__((vector_size(32)));

/* r[i][j] -> r[j][i], 8x8 floats in registers (unpacks, 128-bit lane shuffles, half swaps): the
 * depthwise kernel's channels-in-lanes route and the NCHWc8 reorders */
static inline __attribute__((always_inline)) void uk_tr8(v8f r[8]) {
    v8f t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = __builtin_shufflevector(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 1] = __builtin_shufflevector(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[i + 2] = __builtin_shufflevector(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 3] = __builtin_shufflevector(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

static inline v8f ld8(const float *p) {
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void st8(float *p, v8f v) { memcpy(p, &v, sizeof v); }

/* t[MR][NR] (+)= A[K][MR] . B[K][NR], from packed panels, rows of t ldt floats apart */
static inline __attribute__((always_inline)) void ukernel_ld(int64_t K, const float *restrict a, const float *restrict b,
                                                             float *restrict t, int64_t ldt, bool acc) {
    v8f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
    v8f c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
    if (acc) {
        c00 = ld8(t + 0 * ldt), c01 = ld8(t + 0 * ldt + 8), c10 = ld8(t + 1 * ldt), c11 = ld8(t + 1 * ldt + 8);
        c20 = ld8(t + 2 * ldt), c21 = ld8(t + 2 * ldt + 8), c30 = ld8(t + 3 * ldt), c31 = ld8(t + 3 * ldt + 8);
        c40 = ld8(t + 4 * ldt), c41 = ld8(t + 4 * ldt + 8), c50 = ld8(t + 5 * ldt), c51 = ld8(t + 5 * ldt + 8);
    }
    for (int64_t k = 0; k < K; k++) {
        v8f b0 = ld8(b), b1 = ld8(b + 8);
        v8f a0 = {a[0], a[0], a[0], a[0], a[0], a[0], a[0], a[0]};
        c00 += a0 * b0;
        c01 += a0 * b1;
        v8f a1 = {a[1], a[1], a[1], a[1], a[1], a[1], a[1], a[1]};
        c10 += a1 * b0;
        c11 += a1 * b1;
        v8f a2 = {a[2], a[2], a[2], a[2], a[2], a[2], a[2], a[2]};
        c20 += a2 * b0;
        c21 += a2 * b1;
        v8f a3 = {a[3], a[3], a[3], a[3], a[3], a[3], a[3], a[3]};
        c30 += a3 * b0;
        c31 += a3 * b1;
        v8f a4 = {a[4], a[4], a[4], a[4], a[4], a[4], a[4], a[4]};
        c40 += a4 * b0;
        c41 += a4 * b1;
        v8f a5 = {a[5], a[5], a[5], a[5], a[5], a[5], a[5], a[5]};
        c50 += a5 * b0;
        c51 += a5 * b1;
        a += MR;
        b += NR;
    }
    st8(t + 0 * ldt, c00), st8(t + 0 * ldt + 8, c01);
    st8(t + 1 * ldt, c10), st8(t + 1 * ldt + 8, c11);
    st8(t + 2 * ldt, c20), st8(t + 2 * ldt + 8, c21);
    st8(t + 3 * ldt, c30), st8(t + 3 * ldt + 8, c31);
    st8(t + 4 * ldt, c40), st8(t + 4 * ldt + 8, c41);
    st8(t + 5 * ldt, c50), st8(t + 5 * ldt + 8, c51);
}

/* the tile into a contiguous MR x NR block */
static void ukernel(int64_t K, const float *restrict a, const float *restrict b, float *restrict t, bool acc) {
    ukernel_ld(K, a, b, t, NR, acc);
}

/* The same tile with A read in place (MLAS's sgemm kernels read A unpacked too): row i of the K x MR
 * panel is a + i*lda (rows >= mr repeat row mr-1; their results are never stored), so a row-major
 * [M, K] operand -- a conv's OIHW filter -- needs no packing.  !acc: start from bias[i] (NULL: 0)
 * instead of t.  t is a tile with rows ldt floats apart. */
static void ukernel_a(int64_t K, const float *restrict a, int64_t lda, int64_t mr, const float *restrict b,
                      float *restrict t, int64_t ldt, bool acc, const float *bias) {
    const float *a0 = a, *a1 = mr > 1 ? a0 + lda : a0, *a2 = mr > 2 ? a1 + lda : a1;
    const float *a3 = mr > 3 ? a2 + lda : a2, *a4 = mr > 4 ? a3 + lda : a3, *a5 = mr > 5 ? a4 + lda : a4;
    v8f c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (acc) {
        c00 = ld8(t + 0 * ldt), c01 = ld8(t + 0 * ldt + 8), c10 = ld8(t + 1 * ldt), c11 = ld8(t + 1 * ldt + 8);
        c20 = ld8(t + 2 * ldt), c21 = ld8(t + 2 * ldt + 8), c30 = ld8(t + 3 * ldt), c31 = ld8(t + 3 * ldt + 8);
        c40 = ld8(t + 4 * ldt), c41 = ld8(t + 4 * ldt + 8), c50 = ld8(t + 5 * ldt), c51 = ld8(t + 5 * ldt + 8);
    } else {
        float bv[MR] = {0, 0, 0, 0, 0, 0};
        if (bias)
            for (int64_t i = 0; i < MR; i++) bv[i] = bias[i < mr ? i : mr - 1];
        c00 = c01 = (v8f){bv[0], bv[0], bv[0], bv[0], bv[0], bv[0], bv[0], bv[0]};
        c10 = c11 = (v8f){bv[1], bv[1], bv[1], bv[1], bv[1], bv[1], bv[1], bv[1]};
        c20 = c21 = (v8f){bv[2], bv[2], bv[2], bv[2], bv[2], bv[2], bv[2], bv[2]};
        c30 = c31 = (v8f){bv[3], bv[3], bv[3], bv[3], bv[3], bv[3], bv[3], bv[3]};
        c40 = c41 = (v8f){bv[4], bv[4], bv[4], bv[4], bv[4], bv[4], bv[4], bv[4]};
        c50 = c51 = (v8f){bv[5], bv[5], bv[5], bv[5], bv[5], bv[5], bv[5], bv[5]};
    }
    for (int64_t k = 0; k < K; k++) {
        v8f b0 = ld8(b), b1 = ld8(b + 8);
        v8f x0 = {a0[k], a0[k], a0[k], a0[k], a0[k], a0[k], a0[k], a0[k]};
        c00 += x0 * b0;
        c01 += x0 * b1;
        v8f x1 = {a1[k], a1[k], a1[k], a1[k], a1[k], a1[k], a1[k], a1[k]};
        c10 += x1 * b0;
        c11 += x1 * b1;
        v8f x2 = {a2[k], a2[k], a2[k], a2[k], a2[k], a2[k], a2[k], a2[k]};
        c20 += x2 * b0;
        c21 += x2 * b1;
        v8f x3 = {a3[k], a3[k], a3[k], a3[k], a3[k], a3[k], a3[k], a3[k]};
        c30 += x3 * b0;
        c31 += x3 * b1;
        v8f x4 = {a4[k], a4[k], a4[k], a4[k], a4[k], a4[k], a4[k], a4[k]};
        c40 += x4 * b0;
        c41 += x4 * b1;
        v8f x5 = {a5[k], a5[k], a5[k], a5[k], a5[k], a5[k], a5[k], a5[k]};
        c50 += x5 * b0;
        c51 += x5 * b1;
        b += NR;
    }
    st8(t + 0 * ldt, c00), st8(t + 0 * ldt + 8, c01);
    st8(t + 1 * ldt, c10), st8(t + 1 * ldt + 8, c11);
    st8(t + 2 * ldt, c20), st8(t + 2 * ldt + 8, c21);
    st8(t + 3 * ldt, c30), st8(t + 3 * ldt + 8, c31);
    st8(t + 4 * ldt, c40), st8(t + 4 * ldt + 8, c41);
    st8(t + 5 * ldt, c50), st8(t + 5 * ldt + 8, c51);
}

#endif
