/* Shape and data movement: Reshape, Squeeze, Unsqueeze, ExpandDims,
 * Flatten, Identity (copies), Transpose/TransposeD, BroadcastTo(D),
 * Tile(D), Fill, Fills, ZerosLike, OnesLike.
 *
 * Value inputs that shape the output (Reshape.shape, Transpose.perm, ...)
 * must be const or host-placed: they are read at compile time and are part
 * of the cache key.  Everything here moves elements by size, so every
 * fixed-size dtype works.
 *
 * Transpose merges dims that stay neighbours, then either copies rows (the
 * innermost dim is kept) or runs a 32x32-blocked 2-D transpose between the
 * input's and the output's innermost dims for each outer index. */
#include "kcommon.h"

static aclError sized_dtype(const hrt_kernel *k, const hrt_tensor *t, const char *what) {
    size_t s = hrt_dtype_size(t->dtype);
    if (s != 1 && s != 2 && s != 4 && s != 8) return k_unsupported(k, what, t->dtype);
    return ACL_SUCCESS;
}

static aclError copy_finish(hrt_kernel *k, const int64_t *dims, int nd) {
    const hrt_tensor *x = &k->in[0];
    aclError rc = sized_dtype(k, x, "x");
    if (!rc) rc = k_expect_out_dtype(k, 0, x->dtype);
    if (!rc) rc = hrt_expect_same_shape(k, &k->out[0], dims, nd, 0);
    if (rc) return rc;
    k->run = k_copy_run;
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------- Reshape */
static aclError reshape_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    int64_t sh[HRT_MAXDIM];
    int n = 0;
    if (k->in[1].ndim > 1)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Reshape: shape must be a 1-D tensor");
    if ((rc = k_int_values(k, 1, sh, HRT_MAXDIM, &n))) return rc;
    int64_t axis, num_axes;
    if ((rc = hrt_attr_get_int(k, attrs, "axis", false, 0, &axis)) ||
        (rc = hrt_attr_get_int(k, attrs, "num_axes", false, -1, &num_axes)))
        return rc;
    if (axis < 0) axis += x->ndim + 1;
    if (axis < 0 || axis > x->ndim)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "Reshape: axis out of range");
    int64_t end = num_axes < 0 ? x->ndim : axis + num_axes;
    if (end > x->ndim || end < axis)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "Reshape: num_axes out of range");
    /* the replaced range [axis, end) of x */
    int64_t od[HRT_MAXDIM];
    int on = 0;
    if ((int64_t)axis + n + (x->ndim - end) > HRT_MAXDIM)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Reshape: result rank exceeds %d", HRT_MAXDIM);
    for (int i = 0; i < axis; i++) od[on++] = x->dims[i];
    int64_t sub = k_prod(x->dims, (int)axis, (int)end), known = 1;
    int infer = -1;
    for (int i = 0; i < n; i++) {
        int64_t v = sh[i];
        if (v == -1) {
            if (infer >= 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Reshape: more than one -1 in shape");
            infer = on;
            od[on++] = 1;
            continue;
        }
        if (v == 0) v = axis + i < x->ndim ? x->dims[axis + i] : 0; /* 0 copies the input dim (ONNX) */
        if (v < 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Reshape: negative dim %lld", (long long)v);
        od[on++] = v;
        known *= v;
    }
    if (infer >= 0) {
        if (known == 0 || sub % known)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Reshape: cannot infer -1 for %lld elements",
                             (long long)sub);
        od[infer] = sub / known;
        known = sub;
    }
    if (known != sub) {
        char a[128];
        hrt_shape_str(x->dims, x->ndim, a, sizeof a);
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Reshape: cannot reshape %s (%lld elements) with this shape",
                         a, (long long)x->numel);
    }
    for (int i = (int)end; i < x->ndim; i++) od[on++] = x->dims[i];
    return copy_finish(k, od, on);
}

/* ------------------------------------------------------ Squeeze & co */
static aclError squeeze_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    unsigned mask = 0;
    int n = 0;
    if ((rc = k_get_axes(k, attrs, "axis", -1, false, x->ndim, &mask, &n, NULL))) return rc;
    int64_t od[HRT_MAXDIM];
    int on = 0;
    for (int d = 0; d < x->ndim; d++) {
        bool drop = n ? ((mask >> d) & 1u) : x->dims[d] == 1;
        if (drop && x->dims[d] != 1)
            return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "Squeeze: dim %d has size %lld, not 1", d,
                             (long long)x->dims[d]);
        if (!drop) od[on++] = x->dims[d];
    }
    return copy_finish(k, od, on);
}

static aclError insert_axes(hrt_kernel *k, const int64_t *axes, int n, bool attr) {
    const hrt_tensor *x = &k->in[0];
    int on = x->ndim + n;
    if (on > HRT_MAXDIM)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: result rank %d exceeds %d", k->op_name, on, HRT_MAXDIM);
    unsigned mask = 0;
    for (int i = 0; i < n; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + on : axes[i];
        if (a < 0 || a >= on || (mask >> a) & 1u)
            return hrt_error(attr ? ACL_ERROR_OP_ATTR_NOT_MATCH : ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                             "%s: axis %lld is out of range or repeated for result rank %d", k->op_name,
                             (long long)axes[i], on);
        mask |= 1u << a;
    }
    int64_t od[HRT_MAXDIM];
    for (int d = 0, j = 0; d < on; d++) od[d] = (mask >> d) & 1u ? 1 : x->dims[j++];
    return copy_finish(k, od, on);
}

static aclError unsqueeze_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    int64_t axes[HRT_MAXDIM];
    int n = 0;
    if ((rc = k_attr_ints(k, attrs, "axes", false, -1, NULL, axes, HRT_MAXDIM, &n))) return rc;
    return insert_axes(k, axes, n, true);
}

static aclError expanddims_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    int64_t v[1];
    int n = 0;
    if ((rc = k_int_values(k, 1, v, 1, &n))) return rc;
    if (n != 1) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "ExpandDims: axis must hold one value");
    return insert_axes(k, v, 1, false);
}

static aclError flatten_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    int64_t axis;
    if ((rc = hrt_attr_get_int(k, attrs, "axis", false, 1, &axis))) return rc;
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis > x->ndim)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "Flatten: axis out of range for rank %d", x->ndim);
    int64_t od[2] = {k_prod(x->dims, 0, (int)axis), k_prod(x->dims, (int)axis, x->ndim)};
    return copy_finish(k, od, 2);
}

static aclError identity_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    return copy_finish(k, k->in[0].dims, k->in[0].ndim);
}

HRT_OP(reshape, "Reshape", reshape_compile)
HRT_OP(squeeze, "Squeeze", squeeze_compile)
HRT_OP(unsqueeze, "Unsqueeze", unsqueeze_compile)
HRT_OP(expanddims, "ExpandDims", expanddims_compile)
HRT_OP(flatten, "Flatten", flatten_compile)
HRT_OP(identity, "Identity", identity_compile)
HRT_OP(snapshot, "Snapshot", identity_compile)

/* ----------------------------------------------------------- Transpose */
typedef struct {
    int nd;
    int64_t od[HRT_MAXDIM];     /* output dims (merged) */
    int64_t ist[HRT_MAXDIM];    /* input stride of each output dim (elements) */
    int64_t ost[HRT_MAXDIM];    /* output strides */
    size_t esz;
    int mode;                   /* 0 copy, 1 rows, 2 blocked 2-D */
    int q;                      /* mode 2: output dim fed by the input's innermost dim */
    int64_t outer;              /* number of outer items */
} tr_plan;

typedef struct {
    const tr_plan *p;
    const char *x;
    char *y;
} tr_ctx;

#define TB 32

#define TR2D(T)                                                                                   \
    static void tr2d_##T(const T *x, int64_t xs_a, T *y, int64_t ys_b, int64_t na, int64_t nb) {   \
        /* y[b*ys_b + a] = x[a*xs_a + b] */                                                        \
        for (int64_t a0 = 0; a0 < na; a0 += TB)                                                    \
            for (int64_t b0 = 0; b0 < nb; b0 += TB) {                                              \
                int64_t a1 = a0 + TB < na ? a0 + TB : na, b1 = b0 + TB < nb ? b0 + TB : nb;        \
                for (int64_t b = b0; b < b1; b++)                                                  \
                    for (int64_t a = a0; a < a1; a++) y[b * ys_b + a] = x[a * xs_a + b];           \
            }                                                                                      \
    }
TR2D(uint8_t)
TR2D(uint16_t)
TR2D(uint32_t)
TR2D(uint64_t)

/* input/output offsets of outer item `it` over all output dims except those in skip mask */
static void tr_offsets(const tr_plan *p, int64_t it, unsigned skip, int64_t *io, int64_t *oo) {
    *io = *oo = 0;
    for (int d = p->nd - 1; d >= 0; d--) {
        if ((skip >> d) & 1u) continue;
        int64_t q = it % p->od[d];
        it /= p->od[d];
        *io += q * p->ist[d];
        *oo += q * p->ost[d];
    }
}

static void tr_chunk(void *vp, int64_t b, int64_t e) {
    tr_ctx *c = vp;
    const tr_plan *p = c->p;
    int last = p->nd - 1;
    size_t es = p->esz;
    if (p->mode == 1) {
        size_t row = (size_t)p->od[last] * es;
        for (int64_t it = b; it < e; it++) {
            int64_t io, oo;
            tr_offsets(p, it, 1u << last, &io, &oo);
            memcpy(c->y + (size_t)oo * es, c->x + (size_t)io * es, row);
        }
        return;
    }
    /* mode 2: a = output innermost (input stride ist[last]), b = dim q (input stride 1) */
    unsigned skip = (1u << last) | (1u << p->q);
    int64_t na = p->od[last], nb = p->od[p->q], xs_a = p->ist[last], ys_b = p->ost[p->q];
    for (int64_t it = b; it < e; it++) {
        int64_t io, oo;
        tr_offsets(p, it, skip, &io, &oo);
        const char *xs = c->x + (size_t)io * es;
        char *ys = c->y + (size_t)oo * es;
        switch (es) {
        case 1: tr2d_uint8_t((const uint8_t *)xs, xs_a, (uint8_t *)ys, ys_b, na, nb); break;
        case 2: tr2d_uint16_t((const uint16_t *)xs, xs_a, (uint16_t *)ys, ys_b, na, nb); break;
        case 4: tr2d_uint32_t((const uint32_t *)xs, xs_a, (uint32_t *)ys, ys_b, na, nb); break;
        default: tr2d_uint64_t((const uint64_t *)xs, xs_a, (uint64_t *)ys, ys_b, na, nb); break;
        }
    }
}

static aclError tr_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const tr_plan *p = k->plan;
    if (k->out[0].numel == 0) return ACL_SUCCESS;
    if (p->mode == 0) return k_copy_run(k, in, out);
    tr_ctx c = {p, in[0], out[0]};
    int64_t per = p->mode == 1 ? p->od[p->nd - 1] : p->od[p->nd - 1] * p->od[p->q];
    hrt_parallel_for(p->outer, K_GRAIN / (per + 1) + 1, tr_chunk, &c);
    return ACL_SUCCESS;
}

static aclError transpose_finish(hrt_kernel *k, const int64_t *perm, int n, bool attr) {
    const hrt_tensor *x = &k->in[0];
    aclError rc = sized_dtype(k, x, "x");
    if (rc) return rc;
    if (n != x->ndim)
        return hrt_error(attr ? ACL_ERROR_OP_ATTR_NOT_MATCH : ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                         "%s: perm has %d values, x has rank %d", k->op_name, n, x->ndim);
    unsigned seen = 0;
    int pm[HRT_MAXDIM];
    for (int i = 0; i < n; i++) {
        int64_t a = perm[i] < 0 ? perm[i] + n : perm[i];
        if (a < 0 || a >= n || (seen >> a) & 1u)
            return hrt_error(attr ? ACL_ERROR_OP_ATTR_NOT_MATCH : ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                             "%s: perm is not a permutation of 0..%d", k->op_name, n - 1);
        seen |= 1u << a;
        pm[i] = (int)a;
    }
    int64_t od[HRT_MAXDIM];
    for (int i = 0; i < n; i++) od[i] = x->dims[pm[i]];
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], od, n, 0))) return rc;
    /* merge: drop size-1 dims, fuse input-adjacent dims that stay adjacent */
    int64_t ist_full[HRT_MAXDIM];
    k_strides(x->dims, x->ndim, ist_full);
    tr_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int m = 0;
    int prev_axis = -2;
    for (int i = 0; i < n; i++) {
        int a = pm[i];
        if (x->dims[a] == 1) continue;
        if (m > 0 && prev_axis >= 0) {
            /* previous kept output dim came from input axis prev_axis; fuse if a follows it
             * (all input axes between them have size 1) */
            bool adj = a > prev_axis;
            for (int j = prev_axis + 1; adj && j < a; j++) adj = x->dims[j] == 1;
            if (adj) {
                p->od[m - 1] *= x->dims[a];
                p->ist[m - 1] = ist_full[a];
                prev_axis = a;
                continue;
            }
        }
        p->od[m] = x->dims[a];
        p->ist[m] = ist_full[a];
        prev_axis = a;
        m++;
    }
    p->esz = hrt_dtype_size(x->dtype);
    if (m <= 1) {
        p->mode = 0;
    } else {
        p->nd = m;
        k_strides(p->od, m, p->ost);
        int last = m - 1;
        if (p->ist[last] == 1) {
            p->mode = 1;
            p->outer = k->out[0].numel / p->od[last];
        } else {
            p->mode = 2;
            p->q = -1;
            for (int i = 0; i < m; i++)
                if (p->ist[i] == 1) p->q = i;
            p->outer = k->out[0].numel / (p->od[last] * p->od[p->q]);
        }
        bool ident = true;
        for (int i = 0; i < m && ident; i++) ident = p->ist[i] == p->ost[i];
        if (ident) p->mode = 0;
    }
    k->plan = p;
    k->plan_free = free;
    k->run = tr_run;
    return ACL_SUCCESS;
}

static aclError transpose_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    int64_t perm[HRT_MAXDIM];
    int n = 0;
    if ((rc = k_int_values(k, 1, perm, HRT_MAXDIM, &n))) return rc;
    return transpose_finish(k, perm, n, false);
}

static aclError transposed_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    int64_t perm[HRT_MAXDIM];
    int n = 0;
    if ((rc = k_attr_ints(k, attrs, "perm", true, -1, NULL, perm, HRT_MAXDIM, &n))) return rc;
    return transpose_finish(k, perm, n, true);
}

HRT_OP(transpose, "Transpose", transpose_compile)
HRT_OP(transposed, "TransposeD", transposed_compile)

/* ----------------------------------------------------------- BroadcastTo */
typedef struct {
    k_bcast plan;
    size_t esz;
} bc_plan;

typedef struct {
    const bc_plan *p;
    const char *x;
    char *y;
} bc_ctx;

static void bc_rows(void *vp, int64_t b, int64_t e) {
    bc_ctx *c = vp;
    const k_bcast *pl = &c->p->plan;
    size_t es = c->p->esz;
    int64_t inner = pl->dims[pl->ndim - 1], s = pl->strides[0][pl->ndim - 1];
    for (int64_t r = b; r < e; r++) {
        int64_t off[3];
        k_bcast_offsets(pl, r, off);
        char *dst = c->y + (size_t)(r * inner) * es;
        const char *src = c->x + (size_t)off[0] * es;
        if (s) memcpy(dst, src, (size_t)inner * es);
        else k_fill(dst, src, es, inner);
    }
}

static aclError bc_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const bc_plan *p = k->plan;
    if (p->plan.numel == 0) return ACL_SUCCESS;
    bc_ctx c = {p, in[0], out[0]};
    int64_t inner = p->plan.dims[p->plan.ndim - 1];
    hrt_parallel_for(p->plan.numel / inner, K_GRAIN / inner + 1, bc_rows, &c);
    return ACL_SUCCESS;
}

static aclError broadcast_finish(hrt_kernel *k, const int64_t *shape, int n, bool attr) {
    const hrt_tensor *x = &k->in[0];
    aclError rc = sized_dtype(k, x, "x");
    if (rc) return rc;
    bool ok = n >= x->ndim;
    for (int i = 0; ok && i < x->ndim; i++) {
        int64_t xd = x->dims[x->ndim - 1 - i], sd = shape[n - 1 - i];
        ok = xd == sd || xd == 1;
    }
    for (int i = 0; ok && i < n; i++) ok = shape[i] >= 0;
    if (!ok) {
        char a[128], b[128];
        hrt_shape_str(x->dims, x->ndim, a, sizeof a);
        hrt_shape_str(shape, n, b, sizeof b);
        return hrt_error(attr ? ACL_ERROR_OP_ATTR_NOT_MATCH : ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                         "%s: cannot broadcast %s to %s", k->op_name, a, b);
    }
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], shape, n, 0))) return rc;
    bc_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    const hrt_tensor *ins[1] = {x};
    k_bcast_plan(&p->plan, ins, 1, shape, n);
    p->esz = hrt_dtype_size(x->dtype);
    k->plan = p;
    k->plan_free = free;
    k->run = bc_run;
    return ACL_SUCCESS;
}

static aclError broadcastto_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    int64_t sh[HRT_MAXDIM];
    int n = 0;
    if ((rc = k_int_values(k, 1, sh, HRT_MAXDIM, &n))) return rc;
    return broadcast_finish(k, sh, n, false);
}

static aclError broadcasttod_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    int64_t sh[HRT_MAXDIM];
    int n = 0;
    if ((rc = k_attr_ints(k, attrs, "shape", true, -1, NULL, sh, HRT_MAXDIM, &n))) return rc;
    return broadcast_finish(k, sh, n, true);
}

HRT_OP(broadcastto, "BroadcastTo", broadcastto_compile)
HRT_OP(broadcasttod, "BroadcastToD", broadcasttod_compile)

/* ------------------------------------------------------------------ Tile */
typedef struct {
    int nd;
    int64_t xd[HRT_MAXDIM], od[HRT_MAXDIM], xst[HRT_MAXDIM];
    size_t esz;
} tile_plan;

typedef struct {
    const tile_plan *p;
    const char *x;
    char *y;
} tile_ctx;

static void tile_rows(void *vp, int64_t b, int64_t e) {
    tile_ctx *c = vp;
    const tile_plan *p = c->p;
    int last = p->nd - 1;
    size_t es = p->esz, xrow = (size_t)p->xd[last] * es;
    int64_t rep = p->od[last] / (p->xd[last] ? p->xd[last] : 1);
    for (int64_t r = b; r < e; r++) {
        int64_t it = r, off = 0;
        for (int d = last - 1; d >= 0; d--) {
            int64_t q = it % p->od[d];
            it /= p->od[d];
            off += (q % p->xd[d]) * p->xst[d];
        }
        char *dst = c->y + (size_t)(r * p->od[last]) * es;
        const char *src = c->x + (size_t)off * es;
        if (p->xd[last] == 1) k_fill(dst, src, es, p->od[last]);
        else
            for (int64_t m = 0; m < rep; m++) memcpy(dst + (size_t)m * xrow, src, xrow);
    }
}

static aclError tile_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const tile_plan *p = k->plan;
    int64_t n = k->out[0].numel;
    if (n == 0) return ACL_SUCCESS;
    tile_ctx c = {p, in[0], out[0]};
    int64_t inner = p->od[p->nd - 1];
    hrt_parallel_for(n / inner, K_GRAIN / inner + 1, tile_rows, &c);
    return ACL_SUCCESS;
}

static aclError tile_finish(hrt_kernel *k, const int64_t *mult, int n, bool attr) {
    const hrt_tensor *x = &k->in[0];
    aclError rc = sized_dtype(k, x, "x");
    if (rc) return rc;
    if (n < x->ndim)
        return hrt_error(attr ? ACL_ERROR_OP_ATTR_NOT_MATCH : ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                         "%s: multiples has %d values, x has rank %d", k->op_name, n, x->ndim);
    tile_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int nd = n > 0 ? n : 1;
    p->nd = nd;
    for (int i = 0; i < nd; i++) {
        int xi = i - (n - x->ndim);
        p->xd[i] = (n == 0) ? 1 : (xi >= 0 ? x->dims[xi] : 1);
        int64_t m = n == 0 ? 1 : mult[i];
        if (m < 0 || ckd_mul(&p->od[i], p->xd[i], m)) { /* a wrapped product could match the output */
            free(p);
            return hrt_error(attr ? ACL_ERROR_OP_ATTR_NOT_MATCH : ACL_ERROR_OP_INPUT_NOT_MATCH, K_API,
                             m < 0 ? "%s: multiples must be >= 0" : "%s: multiples overflow the result shape",
                             k->op_name);
        }
    }
    k_strides(p->xd, nd, p->xst);
    p->esz = hrt_dtype_size(x->dtype);
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], p->od, n, 0))) {
        free(p);
        return rc;
    }
    k->plan = p;
    k->plan_free = free;
    k->run = tile_run;
    return ACL_SUCCESS;
}

static aclError tile_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    int64_t m[HRT_MAXDIM];
    int n = 0;
    if ((rc = k_int_values(k, 1, m, HRT_MAXDIM, &n))) return rc;
    return tile_finish(k, m, n, false);
}

static aclError tiled_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    int64_t m[HRT_MAXDIM];
    int n = 0;
    if ((rc = k_attr_ints(k, attrs, "multiples", true, -1, NULL, m, HRT_MAXDIM, &n))) return rc;
    return tile_finish(k, m, n, true);
}

HRT_OP(tile, "Tile", tile_compile)
HRT_OP(tiled, "TileD", tiled_compile)

/* ------------------------------------------------------------------ Fill */
typedef struct {
    uint8_t value[8];
    size_t esz;
    bool from_input;
} fill_plan;

typedef struct {
    const void *val;
    size_t esz;
    char *y;
} fill_ctx;

static void fill_chunk(void *vp, int64_t b, int64_t e) {
    fill_ctx *c = vp;
    k_fill(c->y + (size_t)b * c->esz, c->val, c->esz, e - b);
}

static aclError fill_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const fill_plan *p = k->plan;
    int64_t n = k->out[0].numel;
    if (n == 0) return ACL_SUCCESS;
    fill_ctx c = {p->from_input ? in[1] : p->value, p->esz, out[0]};
    hrt_parallel_for(n, 1 << 18, fill_chunk, &c);
    return ACL_SUCCESS;
}

static aclError fill_plan_new(hrt_kernel *k, aclDataType dt, double v, bool from_input) {
    if (k_index(dt) < 0) return k_unsupported(k, "y", dt);
    fill_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->esz = hrt_dtype_size(dt);
    p->from_input = from_input;
    if (!from_input) k_store_d(p->value, dt, 0, v);
    k->plan = p;
    k->plan_free = free;
    k->run = fill_run;
    return ACL_SUCCESS;
}

static aclError fill_compile(hrt_kernel *k, const aclopAttr *attrs) {
    (void)attrs;
    aclError rc = hrt_expect_counts(k, 2, 2, 1);
    if (rc) return rc;
    int64_t dims[HRT_MAXDIM];
    int n = 0;
    if (k->in[0].ndim > 1) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Fill: dims must be 1-D");
    if ((rc = k_int_values(k, 0, dims, HRT_MAXDIM, &n))) return rc;
    for (int i = 0; i < n; i++)
        if (dims[i] < 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Fill: dims must be >= 0");
    const hrt_tensor *v = &k->in[1];
    if (v->numel != 1) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Fill: value must hold one element");
    if ((rc = k_expect_out_dtype(k, 0, v->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], dims, n, 0))) return rc;
    return fill_plan_new(k, v->dtype, 0, true);
}

static aclError fills_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    double v = 0;
    if (strcmp(k->op_name, "Fills") == 0) rc = hrt_attr_get_float(k, attrs, "value", true, 0, &v);
    else v = strcmp(k->op_name, "OnesLike") == 0 ? 1.0 : 0.0;
    if (rc) return rc;
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], x->dims, x->ndim, 0)))
        return rc;
    return fill_plan_new(k, x->dtype, v, false);
}

HRT_OP(fill, "Fill", fill_compile)
HRT_OP(fills, "Fills", fills_compile)
HRT_OP(zeroslike, "ZerosLike", fills_compile)
HRT_OP(oneslike, "OnesLike", fills_compile)
