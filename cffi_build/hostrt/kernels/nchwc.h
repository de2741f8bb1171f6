/* Shared by the NCHWc8 kernels (nchwc.c, nchwc_conv.c); the 8x8 register transpose between 8
 * channel planes and 8 blocked pixels is ukernel.h's uk_tr8. */
#ifndef AIOGE_HRT_NCHWC_H
#define AIOGE_HRT_NCHWC_H

#include "ukernel.h"

typedef int32_t v8i __attribute__((vector_size(32)));

/* lanes of a where m is set, else b */
static inline v8f nc_sel(v8i m, v8f a, v8f b) { return (v8f)(((v8i)a & m) | ((v8i)b & ~m)); }

#endif
