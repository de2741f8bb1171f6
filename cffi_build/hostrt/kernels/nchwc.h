/* Shared by the NCHWc8 kernels (nchwc.c, nchwc_conv.c): the 8x8 register transpose between 8
 * channel planes and 8 blocked pixels. */
#ifndef AIOGE_HRT_NCHWC_H
#define AIOGE_HRT_NCHWC_H

#include "ukernel.h"

typedef int32_t v8i __attribute__((vector_size(32)));

/* lanes of a where m is set, else b */
static inline v8f nc_sel(v8i m, v8f a, v8f b) { return (v8f)(((v8i)a & m) | ((v8i)b & ~m)); }

/* r[i][j] -> r[j][i] (8x8, in registers: unpacks, 128-bit lane shuffles, half swaps) */
static inline __attribute__((always_inline)) void nc_tr8(v8f r[8]) {
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

#endif
