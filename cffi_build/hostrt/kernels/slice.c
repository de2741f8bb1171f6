/* Slicing, gathering, padding: SliceD / Slice, StridedSlice (TF masks) /
 * StridedSliceD, GatherV2 (axis input, batch_dims) / Gather, PadV3
 * (constant/reflect/edge, paddings_contiguous, optional constant_values),
 * Pad / PadV2.
 *
 * Slices share one strided-copy engine: per output dim a start and a step
 * into the input; rows with step 1 in the last dim are memcpy'd.  Indices
 * of GatherV2 are checked at run time: an out-of-range index fails the
 * task (ACL_ERROR_RT_AICORE_EXCEPTION, as on a device) and nothing is read
 * out of bounds. */
#include "kcommon.h"

static aclError sized(const hrt_kernel *k, const hrt_tensor *t) {
    size_t s = hrt_dtype_size(t->dtype);
    if (s != 1 && s != 2 && s != 4 && s != 8) return k_unsupported(k, "x", t->dtype);
    return ACL_SUCCESS;
}

/* --------------------------------------------------- strided copy engine */
typedef struct {
    int nd;
    int64_t od[HRT_MAXDIM];
    int64_t start[HRT_MAXDIM], step[HRT_MAXDIM]; /* in input elements along each output dim */
    int64_t ist[HRT_MAXDIM];                     /* input strides of those dims */
    size_t esz;
    int64_t numel;
} sl_plan;

typedef struct {
    const sl_plan *p;
    const char *x;
    char *y;
} sl_ctx;

static void sl_rows(void *vp, int64_t b, int64_t e) {
    sl_ctx *c = vp;
    const sl_plan *p = c->p;
    int last = p->nd - 1;
    int64_t L = p->od[last];
    size_t es = p->esz;
    for (int64_t r = b; r < e; r++) {
        int64_t it = r, off = 0;
        for (int d = last - 1; d >= 0; d--) {
            int64_t q = it % p->od[d];
            it /= p->od[d];
            off += (p->start[d] + q * p->step[d]) * p->ist[d];
        }
        off += p->start[last] * p->ist[last];
        char *dst = c->y + (size_t)(r * L) * es;
        const char *src = c->x + (size_t)off * es;
        int64_t st = p->step[last] * p->ist[last];
        if (st == 1) {
            memcpy(dst, src, (size_t)L * es);
        } else {
            switch (es) {
            case 1: for (int64_t i = 0; i < L; i++) ((uint8_t *)dst)[i] = ((const uint8_t *)src)[i * st]; break;
            case 2: for (int64_t i = 0; i < L; i++) ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i * st]; break;
            case 4: for (int64_t i = 0; i < L; i++) ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i * st]; break;
            default: for (int64_t i = 0; i < L; i++) ((uint64_t *)dst)[i] = ((const uint64_t *)src)[i * st]; break;
            }
        }
    }
}

static aclError sl_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const sl_plan *p = k->plan;
    if (p->numel == 0) return ACL_SUCCESS;
    sl_ctx c = {p, in[0], out[0]};
    int64_t L = p->od[p->nd - 1];
    hrt_parallel_for(p->numel / L, K_GRAIN / L + 1, sl_rows, &c);
    return ACL_SUCCESS;
}

/* Build the plan from per-input-dim (begin, step, size) and the output
 * shape the op reports (which may drop or add size-1 dims). */
static aclError sl_finish(hrt_kernel *k, const int64_t *begin, const int64_t *step, const int64_t *size,
                          const int64_t *out_dims, int out_nd) {
    const hrt_tensor *x = &k->in[0];
    aclError rc = sized(k, x);
    if (!rc) rc = k_expect_out_dtype(k, 0, x->dtype);
    if (!rc) rc = hrt_expect_same_shape(k, &k->out[0], out_dims, out_nd, 0);
    if (rc) return rc;
    sl_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int64_t ist[HRT_MAXDIM];
    k_strides(x->dims, x->ndim, ist);
    int nd = 0;
    p->numel = 1;
    for (int d = 0; d < x->ndim; d++) {
        p->numel *= size[d];
        p->od[nd] = size[d];
        p->start[nd] = begin[d];
        p->step[nd] = step[d];
        p->ist[nd] = ist[d];
        nd++;
    }
    if (nd == 0) { /* scalar */
        p->od[0] = 1;
        p->start[0] = 0;
        p->step[0] = 1;
        p->ist[0] = 1;
        nd = 1;
    }
    p->nd = nd;
    p->esz = hrt_dtype_size(x->dtype);
    k->plan = p;
    k->plan_free = free;
    k->run = sl_run;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- Slice */
static aclError slice_common(hrt_kernel *k, const int64_t *off, int noff, const int64_t *size, int nsize, bool attr) {
    const hrt_tensor *x = &k->in[0];
    aclError err = attr ? ACL_ERROR_OP_ATTR_NOT_MATCH : ACL_ERROR_OP_INPUT_NOT_MATCH;
    if (noff != x->ndim || nsize != x->ndim)
        return hrt_error(err, K_API, "%s: offsets/size have %d/%d values, x has rank %d", k->op_name, noff, nsize, x->ndim);
    int64_t b[HRT_MAXDIM], st[HRT_MAXDIM], sz[HRT_MAXDIM];
    for (int d = 0; d < x->ndim; d++) {
        int64_t D = x->dims[d], o = off[d], s = size[d];
        if (s == -1 && o >= 0 && o <= D) s = D - o;
        if (!ckd_range_ok(o, s, D)) /* o + s near INT64_MAX must not wrap past the check */
            return hrt_error(err, K_API, "%s: slice [%lld, +%lld) is out of range for dim %d of size %lld", k->op_name,
                             (long long)o, (long long)size[d], d, (long long)D);
        b[d] = o;
        st[d] = 1;
        sz[d] = s;
    }
    return sl_finish(k, b, st, sz, sz, x->ndim);
}

static aclError sliced_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    int64_t off[HRT_MAXDIM], size[HRT_MAXDIM];
    int no = 0, ns = 0;
    if ((rc = k_attr_ints(k, attrs, "offsets", true, -1, NULL, off, HRT_MAXDIM, &no)) ||
        (rc = k_attr_ints(k, attrs, "size", true, -1, NULL, size, HRT_MAXDIM, &ns)))
        return rc;
    return slice_common(k, off, no, size, ns, true);
}

static aclError slice_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 3, 3, 1);
    if (rc) return rc;
    int64_t off[HRT_MAXDIM], size[HRT_MAXDIM];
    int no = 0, ns = 0;
    if ((rc = k_int_values(k, 1, off, HRT_MAXDIM, &no)) || (rc = k_int_values(k, 2, size, HRT_MAXDIM, &ns)))
        return rc;
    return slice_common(k, off, no, size, ns, false);
}

HRT_OP(sliced, "SliceD", sliced_compile)
HRT_OP(slice, "Slice", slice_compile)

/* --------------------------------------------------------- StridedSlice */
static aclError strided_common(hrt_kernel *k, const aclopAttr *attrs, const int64_t *bg, const int64_t *en,
                               const int64_t *sp, int n, bool attr) {
    const hrt_tensor *x = &k->in[0];
    aclError err = attr ? ACL_ERROR_OP_ATTR_NOT_MATCH : ACL_ERROR_OP_INPUT_NOT_MATCH;
    int64_t bm, em, elm, nam, sam;
    aclError rc;
    if ((rc = hrt_attr_get_int(k, attrs, "begin_mask", false, 0, &bm)) ||
        (rc = hrt_attr_get_int(k, attrs, "end_mask", false, 0, &em)) ||
        (rc = hrt_attr_get_int(k, attrs, "ellipsis_mask", false, 0, &elm)) ||
        (rc = hrt_attr_get_int(k, attrs, "new_axis_mask", false, 0, &nam)) ||
        (rc = hrt_attr_get_int(k, attrs, "shrink_axis_mask", false, 0, &sam)))
        return rc;
    if (elm & (elm - 1)) return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: more than one ellipsis", k->op_name);
    /* walk the sparse spec, producing per input dim (begin, step, size) and the output shape */
    int64_t b[HRT_MAXDIM], st[HRT_MAXDIM], sz[HRT_MAXDIM], od[HRT_MAXDIM];
    int on = 0, d = 0;
    int n_real = 0; /* spec entries that consume an input dim (not new-axis, not ellipsis) */
    for (int i = 0; i < n; i++)
        if (!((elm >> i) & 1) && !((nam >> i) & 1)) n_real++;
    for (int i = 0; i < n || (elm == 0 && d < x->ndim); i++) {
        if (i >= n) { /* implicit trailing full dims */
            b[d] = 0, st[d] = 1, sz[d] = x->dims[d];
            od[on++] = x->dims[d];
            d++;
            continue;
        }
        if ((elm >> i) & 1) {
            int fill = x->ndim - n_real;
            for (int f = 0; f < fill && d < x->ndim; f++, d++) {
                b[d] = 0, st[d] = 1, sz[d] = x->dims[d];
                if (on >= HRT_MAXDIM) goto rank;
                od[on++] = x->dims[d];
            }
            continue;
        }
        if ((nam >> i) & 1) {
            if (on >= HRT_MAXDIM) goto rank;
            od[on++] = 1;
            continue;
        }
        if (d >= x->ndim)
            return hrt_error(err, K_API, "%s: the slice spec has more dims than x (rank %d)", k->op_name, x->ndim);
        int64_t D = x->dims[d], s = sp[i], lo, hi;
        if (s == 0) return hrt_error(err, K_API, "%s: strides must be non-zero", k->op_name);
        if ((sam >> i) & 1) {
            int64_t idx = bg[i] < 0 ? bg[i] + D : bg[i];
            if (idx < 0 || idx >= D)
                return hrt_error(err, K_API, "%s: index %lld is out of range for dim %d of size %lld", k->op_name,
                                 (long long)bg[i], d, (long long)D);
            b[d] = idx, st[d] = 1, sz[d] = 1;
            d++;
            continue;
        }
        if (s > 0) {
            lo = (bm >> i) & 1 ? 0 : bg[i];
            hi = (em >> i) & 1 ? D : en[i];
            if (lo < 0) lo += D;
            if (hi < 0) hi += D;
            lo = lo < 0 ? 0 : lo > D ? D : lo;
            hi = hi < 0 ? 0 : hi > D ? D : hi;
            /* ceil((hi - lo) / s) without forming hi - lo + s - 1 (s may be near INT64_MAX) */
            sz[d] = hi > lo ? (hi - lo - 1) / s + 1 : 0;
        } else {
            lo = (bm >> i) & 1 ? D - 1 : bg[i];
            hi = (em >> i) & 1 ? -1 : en[i];
            if (!((bm >> i) & 1) && lo < 0) lo += D;
            if (!((em >> i) & 1) && hi < 0) hi += D;
            lo = lo < -1 ? -1 : lo > D - 1 ? D - 1 : lo;
            hi = hi < -1 ? -1 : hi > D - 1 ? D - 1 : hi;
            /* ceil((lo - hi) / -s) without negating s (INT64_MIN has no negation) */
            sz[d] = lo > hi ? 1 - (lo - hi - 1) / s : 0;
        }
        b[d] = sz[d] ? lo : 0;
        st[d] = s;
        if (on >= HRT_MAXDIM) goto rank;
        od[on++] = sz[d];
        d++;
    }
    for (; d < x->ndim; d++) { /* with an ellipsis everything is covered; safety */
        b[d] = 0, st[d] = 1, sz[d] = x->dims[d];
        od[on++] = x->dims[d];
    }
    return sl_finish(k, b, st, sz, od, on);
rank:
    return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: result rank exceeds %d", k->op_name, HRT_MAXDIM);
}

static aclError stridedslice_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 3, 4, 1);
    if (rc) return rc;
    int64_t bg[HRT_MAXDIM], en[HRT_MAXDIM], sp[HRT_MAXDIM];
    int nb = 0, ne = 0, ns = 0;
    if ((rc = k_int_values(k, 1, bg, HRT_MAXDIM, &nb)) || (rc = k_int_values(k, 2, en, HRT_MAXDIM, &ne)))
        return rc;
    if (k->n_in > 3 && !k->in[3].absent) {
        if ((rc = k_int_values(k, 3, sp, HRT_MAXDIM, &ns))) return rc;
    } else {
        ns = nb;
        for (int i = 0; i < nb; i++) sp[i] = 1;
    }
    if (nb != ne || nb != ns)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "StridedSlice: begin/end/strides lengths differ (%d/%d/%d)", nb,
                         ne, ns);
    return strided_common(k, attrs, bg, en, sp, nb, false);
}

static aclError stridedsliced_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    int64_t bg[HRT_MAXDIM], en[HRT_MAXDIM], sp[HRT_MAXDIM];
    int nb = 0, ne = 0, ns = 0;
    if ((rc = k_attr_ints(k, attrs, "begin", true, -1, NULL, bg, HRT_MAXDIM, &nb)) ||
        (rc = k_attr_ints(k, attrs, "end", true, -1, NULL, en, HRT_MAXDIM, &ne)) ||
        (rc = k_attr_ints(k, attrs, "strides", true, -1, NULL, sp, HRT_MAXDIM, &ns)))
        return rc;
    if (nb != ne || nb != ns)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "StridedSliceD: begin/end/strides lengths differ (%d/%d/%d)",
                         nb, ne, ns);
    return strided_common(k, attrs, bg, en, sp, nb, true);
}

HRT_OP(stridedslice, "StridedSlice", stridedslice_compile)
HRT_OP(stridedsliced, "StridedSliceD", stridedsliced_compile)

/* --------------------------------------------------------------- Gather */
typedef struct {
    int64_t B, O, D, J, I; /* batch, outer (between batch and axis), axis size, indices per batch, inner */
    size_t esz;
    bool idx64, neg_ok;
} ga_plan;

typedef struct {
    const ga_plan *p;
    const char *x;
    const void *idx;
    char *y;
} ga_ctx;

static inline int64_t ga_index(const ga_plan *p, const void *idx, int64_t i) {
    int64_t v = p->idx64 ? ((const int64_t *)idx)[i] : ((const int32_t *)idx)[i];
    return v < 0 ? v + p->D : v;
}

static void ga_chunk(void *vp, int64_t b, int64_t e) {
    ga_ctx *c = vp;
    const ga_plan *p = c->p;
    size_t row = (size_t)p->I * p->esz;
    for (int64_t it = b; it < e; it++) { /* it = (bb, o, j) */
        int64_t j = it % p->J, bo = it / p->J, o = bo % p->O, bb = bo / p->O;
        int64_t src = ga_index(p, c->idx, bb * p->J + j);
        memcpy(c->y + (size_t)it * row, c->x + (size_t)((bb * p->O + o) * p->D + src) * row, row);
    }
}

static aclError ga_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const ga_plan *p = k->plan;
    int64_t nidx = p->B * p->J;
    /* validate every index first: nothing out of bounds is ever read */
    for (int64_t i = 0; i < nidx; i++) {
        int64_t raw = p->idx64 ? ((const int64_t *)in[1])[i] : ((const int32_t *)in[1])[i];
        if (raw >= p->D || raw < (p->neg_ok ? -p->D : 0))
            return hrt_task_fail(ACL_ERROR_RT_AICORE_EXCEPTION,
                                 "%s: index %lld at position %lld is out of range for axis size %lld%s", k->op_name,
                                 (long long)raw, (long long)i, (long long)p->D,
                                 p->neg_ok ? "" : " (negative indices need negative_index_support)");
    }
    int64_t items = p->B * p->O * p->J;
    if (items == 0 || p->I == 0) return ACL_SUCCESS;
    ga_ctx c = {p, in[0], in[1], out[0]};
    hrt_parallel_for(items, K_GRAIN / (p->I + 1) + 1, ga_chunk, &c);
    return ACL_SUCCESS;
}

static aclError gather_common(hrt_kernel *k, int64_t axis, int64_t batch_dims, bool neg_ok) {
    const hrt_tensor *x = &k->in[0], *ix = &k->in[1];
    aclError rc = sized(k, x);
    if (rc) return rc;
    if (ix->dtype != ACL_INT32 && ix->dtype != ACL_INT64) return k_unsupported(k, "indices (int32 or int64)", ix->dtype);
    if (x->ndim == 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must have rank >= 1", k->op_name);
    int ax;
    if ((rc = k_norm_axis(k, axis, x->ndim, "axis", &ax))) return rc;
    if (batch_dims < 0) batch_dims += ix->ndim;
    if (batch_dims < 0 || batch_dims > ix->ndim || batch_dims > ax)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: batch_dims %lld is out of range", k->op_name,
                         (long long)batch_dims);
    for (int d = 0; d < batch_dims; d++)
        if (x->dims[d] != ix->dims[d])
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: batch dim %d differs between x and indices", k->op_name, d);
    int64_t od[HRT_MAXDIM];
    int on = 0;
    if (x->ndim - 1 + ix->ndim - batch_dims > HRT_MAXDIM)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: result rank exceeds %d", k->op_name, HRT_MAXDIM);
    for (int d = 0; d < ax; d++) od[on++] = x->dims[d];
    for (int d = (int)batch_dims; d < ix->ndim; d++) od[on++] = ix->dims[d];
    for (int d = ax + 1; d < x->ndim; d++) od[on++] = x->dims[d];
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], od, on, 0))) return rc;
    if (x->dims[ax] == 0 && ix->numel > 0)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: gathering from an empty axis", k->op_name);
    ga_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->B = k_prod(x->dims, 0, (int)batch_dims);
    p->O = k_prod(x->dims, (int)batch_dims, ax);
    p->D = x->dims[ax];
    p->J = k_prod(ix->dims, (int)batch_dims, ix->ndim);
    p->I = k_prod(x->dims, ax + 1, x->ndim);
    p->esz = hrt_dtype_size(x->dtype);
    p->idx64 = ix->dtype == ACL_INT64;
    p->neg_ok = neg_ok;
    k->plan = p;
    k->plan_free = free;
    k->run = ga_run;
    return ACL_SUCCESS;
}

static aclError gatherv2_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 3, 3, 1);
    if (rc) return rc;
    int64_t v[1], bd;
    int n = 0;
    bool neg;
    if ((rc = k_int_values(k, 2, v, 1, &n))) return rc;
    if (n != 1) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "GatherV2: axis must hold one value");
    if ((rc = hrt_attr_get_int(k, attrs, "batch_dims", false, 0, &bd)) ||
        (rc = hrt_attr_get_bool(k, attrs, "negative_index_support", false, &neg)))
        return rc;
    return gather_common(k, v[0], bd, neg);
}

static aclError gather_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    int64_t bd;
    if ((rc = hrt_attr_get_int(k, attrs, "batch_dims", false, 0, &bd))) return rc;
    return gather_common(k, bd, bd, false);
}

HRT_OP(gatherv2, "GatherV2", gatherv2_compile)
HRT_OP(gather, "Gather", gather_compile)

/* ------------------------------------------------------------------ Pad */
enum { PAD_CONST, PAD_REFLECT, PAD_EDGE, PAD_SYMMETRIC };

typedef struct {
    int nd, mode;
    int64_t xd[HRT_MAXDIM], od[HRT_MAXDIM], before[HRT_MAXDIM], xst[HRT_MAXDIM];
    size_t esz;
    bool has_value;
    int value_in;
} pad_plan;

typedef struct {
    const pad_plan *p;
    const char *x;
    const void *val;
    char *y;
} pad_ctx;

/* input index for output index o along a dim, or -1 (constant) */
static inline int64_t pad_src(const pad_plan *p, int d, int64_t o) {
    int64_t D = p->xd[d], i = o - p->before[d];
    if (i >= 0 && i < D) return i;
    if (p->mode == PAD_CONST || D == 0) return -1;
    if (p->mode == PAD_EDGE) return i < 0 ? 0 : D - 1;
    if (D == 1) return 0;
    if (p->mode == PAD_REFLECT) {
        int64_t per = 2 * (D - 1);
        int64_t m = ((i % per) + per) % per;
        return m < D ? m : per - m;
    }
    /* symmetric */
    int64_t per = 2 * D;
    int64_t m = ((i % per) + per) % per;
    return m < D ? m : per - 1 - m;
}

static void pad_rows(void *vp, int64_t b, int64_t e) {
    pad_ctx *c = vp;
    const pad_plan *p = c->p;
    int last = p->nd - 1;
    size_t es = p->esz;
    int64_t L = p->od[last];
    for (int64_t r = b; r < e; r++) {
        int64_t it = r, off = 0;
        bool fill = false;
        for (int d = last - 1; d >= 0; d--) {
            int64_t q = it % p->od[d];
            it /= p->od[d];
            int64_t s = pad_src(p, d, q);
            if (s < 0) fill = true;
            else off += s * p->xst[d];
        }
        char *dst = c->y + (size_t)(r * L) * es;
        if (fill) {
            k_fill(dst, c->val, es, L);
            continue;
        }
        const char *src = c->x + (size_t)off * es;
        int64_t lo = p->before[last], D = p->xd[last];
        /* direct copy range [a, bnd) of the output row */
        int64_t a = lo < 0 ? 0 : lo > L ? L : lo;
        int64_t bnd = lo + D < a ? a : lo + D > L ? L : lo + D;
        if (p->mode == PAD_CONST) {
            k_fill(dst, c->val, es, a);
            if (bnd > a) memcpy(dst + (size_t)a * es, src + (size_t)(a - lo) * es, (size_t)(bnd - a) * es);
            k_fill(dst + (size_t)bnd * es, c->val, es, L - bnd);
        } else {
            for (int64_t o = 0; o < L; o++) memcpy(dst + (size_t)o * es, src + (size_t)pad_src(p, last, o) * es, es);
        }
    }
}

static aclError pad_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const pad_plan *p = k->plan;
    int64_t n = k->out[0].numel;
    if (n == 0) return ACL_SUCCESS;
    uint64_t zero = 0;
    pad_ctx c = {p, in[0], p->has_value ? in[p->value_in] : &zero, out[0]};
    int64_t L = p->od[p->nd - 1];
    hrt_parallel_for(n / L, K_GRAIN / L + 1, pad_rows, &c);
    return ACL_SUCCESS;
}

static aclError pad_common(hrt_kernel *k, const aclopAttr *attrs, bool v3, int value_in) {
    const hrt_tensor *x = &k->in[0];
    aclError rc = sized(k, x);
    if (rc) return rc;
    int64_t pv[2 * HRT_MAXDIM];
    int n = 0;
    if ((rc = k_int_values(k, 1, pv, 2 * HRT_MAXDIM, &n))) return rc;
    bool contiguous = true;
    const char *mode = "constant";
    if (v3 && ((rc = hrt_attr_get_string(k, attrs, "mode", false, "constant", &mode)) ||
               (rc = hrt_attr_get_bool(k, attrs, "paddings_contiguous", true, &contiguous))))
        return rc;
    int nd = x->ndim;
    if (n != 2 * nd)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: paddings has %d values, x has rank %d (needs %d)",
                         k->op_name, n, nd, 2 * nd);
    pad_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    if (strcmp(mode, "constant") == 0) p->mode = PAD_CONST;
    else if (strcmp(mode, "reflect") == 0) p->mode = PAD_REFLECT;
    else if (strcmp(mode, "edge") == 0) p->mode = PAD_EDGE;
    else if (strcmp(mode, "symmetric") == 0) p->mode = PAD_SYMMETRIC;
    else {
        free(p);
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: mode '%s' is not supported (constant, reflect, edge, symmetric)",
                         k->op_name, mode);
    }
    int64_t od[HRT_MAXDIM];
    for (int d = 0; d < nd; d++) {
        int64_t b = contiguous ? pv[2 * d] : pv[d], e = contiguous ? pv[2 * d + 1] : pv[nd + d];
        int64_t D = x->dims[d];
        bool bad = ckd_add(&od[d], D, b) || ckd_add(&od[d], od[d], e) || od[d] < 0 || b < -D || e < -D;
        if (p->mode == PAD_REFLECT && (b >= D || e >= D) && (b > 0 || e > 0)) bad = true;
        if (p->mode == PAD_SYMMETRIC && (b > D || e > D)) bad = true;
        if (p->mode != PAD_CONST && D == 0 && (b > 0 || e > 0)) bad = true;
        if (bad) {
            free(p);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: paddings (%lld, %lld) do not fit dim %d of size %lld in mode %s",
                             k->op_name, (long long)b, (long long)e, d, (long long)D, mode);
        }
        p->before[d] = b;
        p->xd[d] = D;
        p->od[d] = od[d];
    }
    if (nd == 0) {
        p->xd[0] = p->od[0] = 1;
        nd = 1;
    }
    p->nd = nd;
    k_strides(p->xd, nd, p->xst);
    p->esz = hrt_dtype_size(x->dtype);
    if (value_in >= 0 && value_in < k->n_in && !k->in[value_in].absent) {
        const hrt_tensor *v = &k->in[value_in];
        if (v->dtype != x->dtype || v->numel != 1) {
            free(p);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: constant_values must be one %s value", k->op_name,
                             hrt_dtype_name(x->dtype));
        }
        p->has_value = true;
        p->value_in = value_in;
    }
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], od, x->ndim, 0))) {
        free(p);
        return rc;
    }
    k->plan = p;
    k->plan_free = free;
    k->run = pad_run;
    return ACL_SUCCESS;
}

static aclError padv3_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 3, 1);
    if (rc) return rc;
    return pad_common(k, attrs, true, 2);
}

static aclError pad_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool v2 = strcmp(k->op_name, "PadV2") == 0;
    aclError rc = hrt_expect_counts(k, v2 ? 3 : 2, v2 ? 3 : 2, 1);
    if (rc) return rc;
    return pad_common(k, attrs, false, v2 ? 2 : -1);
}

HRT_OP(padv3, "PadV3", padv3_compile)
HRT_OP(pad, "Pad", pad_compile)
HRT_OP(padv2, "PadV2", pad_compile)
