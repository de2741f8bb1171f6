#include "kcommon.h"

bool k_broadcast_shape(const hrt_tensor *const *ins, int n, int64_t *out, int *out_ndim) {
    int nd = 0;
    for (int j = 0; j < n; j++)
        if (ins[j]->ndim > nd) nd = ins[j]->ndim;
    for (int d = 0; d < nd; d++) {
        int64_t v = 1;
        for (int j = 0; j < n; j++) {
            int off = nd - ins[j]->ndim;
            if (d < off) continue;
            int64_t x = ins[j]->dims[d - off];
            if (x == 1) continue;
            if (v != 1 && v != x) return false;
            v = x;
        }
        /* a zero-size dim wins over 1 (numpy: 0 broadcasts with 1 only) */
        for (int j = 0; j < n; j++) {
            int off = nd - ins[j]->ndim;
            if (d >= off && ins[j]->dims[d - off] == 0) {
                if (v != 1 && v != 0) return false;
                v = 0;
            }
        }
        out[d] = v;
    }
    *out_ndim = nd;
    return true;
}

void k_bcast_plan(k_bcast *p, const hrt_tensor *const *ins, int n, const int64_t *out_dims, int out_ndim) {
    memset(p, 0, sizeof *p);
    p->nin = n;
    /* full-rank strides per input */
    int64_t st[3][HRT_MAXDIM];
    for (int j = 0; j < n; j++) {
        int off = out_ndim - ins[j]->ndim;
        int64_t s = 1;
        for (int d = out_ndim - 1; d >= 0; d--) {
            int64_t x = d >= off ? ins[j]->dims[d - off] : 1;
            st[j][d] = (x == 1 && out_dims[d] != 1) ? 0 : s;
            if (x == 1) st[j][d] = 0;
            s *= x;
        }
    }
    p->numel = 1;
    for (int d = 0; d < out_ndim; d++) p->numel *= out_dims[d];
    int nd = 0;
    for (int d = 0; d < out_ndim; d++) {
        if (out_dims[d] == 1) continue;
        if (nd > 0) {
            /* merge with the previous kept dim if every input is contiguous across both */
            bool merge = true;
            for (int j = 0; j < n && merge; j++) {
                int64_t prev = p->strides[j][nd - 1], cur = st[j][d];
                merge = (prev == 0 && cur == 0) || (cur != 0 && prev == cur * out_dims[d]);
            }
            if (merge) {
                p->dims[nd - 1] *= out_dims[d];
                for (int j = 0; j < n; j++) p->strides[j][nd - 1] = st[j][d];
                continue;
            }
        }
        p->dims[nd] = out_dims[d];
        for (int j = 0; j < n; j++) p->strides[j][nd] = st[j][d];
        nd++;
    }
    if (nd == 0) { /* scalar output */
        p->dims[0] = 1;
        for (int j = 0; j < n; j++) p->strides[j][0] = 0;
        nd = 1;
    }
    p->ndim = nd;
}
