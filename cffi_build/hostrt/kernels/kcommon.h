/* Shared pieces of the kernels: a dense dtype index, numpy broadcasting
 * plans, and chunked parallel loops over an output. */
#ifndef AIOGE_HRT_KCOMMON_H
#define AIOGE_HRT_KCOMMON_H

#include "../hrt.h"

#include <math.h>
#include <stdlib.h>

/* Dense index of the dtypes kernels implement. */
enum { K_F32, K_F16, K_BF16, K_F64, K_I8, K_U8, K_I16, K_I32, K_I64, K_BOOL, K_NTYPES };

static inline int k_index(aclDataType dt) {
    switch (dt) {
    case ACL_FLOAT: return K_F32;
    case ACL_FLOAT16: return K_F16;
    case ACL_BF16: return K_BF16;
    case ACL_DOUBLE: return K_F64;
    case ACL_INT8: return K_I8;
    case ACL_UINT8: return K_U8;
    case ACL_INT16: return K_I16;
    case ACL_INT32: return K_I32;
    case ACL_INT64: return K_I64;
    case ACL_BOOL: return K_BOOL;
    default: return -1;
    }
}

static inline bool k_is_float(aclDataType dt) {
    return dt == ACL_FLOAT || dt == ACL_FLOAT16 || dt == ACL_BF16 || dt == ACL_DOUBLE;
}

/* Elements per parallel chunk for cheap elementwise work (~50-100 us). */
#define K_GRAIN (1 << 16)

/* A broadcast plan: the output index space with up to 3 inputs, dims of
 * size 1 dropped and neighbours with the same broadcast pattern merged. */
typedef struct {
    int nin;
    int ndim;
    int64_t numel;
    int64_t dims[HRT_MAXDIM];
    int64_t strides[3][HRT_MAXDIM];  /* element strides, 0 where broadcast */
} k_bcast;

/* numpy broadcast of n shapes into out; returns false if incompatible. */
bool k_broadcast_shape(const hrt_tensor *const *ins, int n, int64_t *out, int *out_ndim);
/* Build the plan for inputs broadcast to `out_dims`. */
void k_bcast_plan(k_bcast *p, const hrt_tensor *const *ins, int n, const int64_t *out_dims, int out_ndim);
/* Offsets of inputs for the flat output index `i` of the plan's outer space
 * (all dims but the last). */
static inline void k_bcast_offsets(const k_bcast *p, int64_t outer, int64_t *off) {
    for (int j = 0; j < p->nin; j++) off[j] = 0;
    for (int d = p->ndim - 2; d >= 0; d--) {
        int64_t q = outer % p->dims[d];
        outer /= p->dims[d];
        for (int j = 0; j < p->nin; j++) off[j] += q * p->strides[j][d];
    }
}

/* Row-major contiguous strides (in elements) of a shape. */
static inline void k_strides(const int64_t *dims, int ndim, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

#endif
