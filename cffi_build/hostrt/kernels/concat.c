/* Concatenation and splitting: ConcatD / ConcatV2D (concat_dim attr),
 * Concat (concat_dim input first) / ConcatV2 (concat_dim input last), Pack
 * (stack on a new axis), SplitD / SplitVD (attrs), Split (split_dim input
 * first), SplitV (size_splits and split_dim inputs; one size may be -1).
 * For each outer index every piece is one contiguous run of bytes, copied
 * with memcpy; work is split over outer indices. */
#include "kcommon.h"

#define MAXPIECES 4096

typedef struct {
    int n;                 /* pieces (inputs for concat, outputs for split) */
    int64_t outer;         /* product of dims before the axis */
    size_t whole;          /* bytes of one outer slice of the big tensor */
    size_t *len, *off;     /* per piece: bytes per outer slice, offset within it */
    int first;             /* index of the first piece tensor among in/out */
    bool split;
} cs_plan;

static void cs_free(void *vp) {
    cs_plan *p = vp;
    free(p->len);
    free(p->off);
    free(p);
}

typedef struct {
    const cs_plan *p;
    void *const *in;
    void *const *out;
} cs_ctx;

static void cs_chunk(void *vp, int64_t b, int64_t e) {
    cs_ctx *c = vp;
    const cs_plan *p = c->p;
    for (int64_t o = b; o < e; o++)
        for (int i = 0; i < p->n; i++) {
            size_t l = p->len[i];
            if (!l) continue;
            if (p->split)
                memcpy((char *)c->out[i] + (size_t)o * l, (const char *)c->in[p->first] + (size_t)o * p->whole + p->off[i], l);
            else
                memcpy((char *)c->out[0] + (size_t)o * p->whole + p->off[i], (const char *)c->in[p->first + i] + (size_t)o * l, l);
        }
}

static aclError cs_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const cs_plan *p = k->plan;
    if (p->outer == 0 || p->whole == 0) return ACL_SUCCESS;
    cs_ctx c = {p, in, out};
    int64_t grain = (int64_t)((1u << 20) / (p->whole + 1)) + 1;
    hrt_parallel_for(p->outer, grain, cs_chunk, &c);
    return ACL_SUCCESS;
}

static cs_plan *cs_new(int n) {
    cs_plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n;
    p->len = calloc((size_t)(n ? n : 1), sizeof(size_t));
    p->off = calloc((size_t)(n ? n : 1), sizeof(size_t));
    if (!p->len || !p->off) {
        cs_free(p);
        return NULL;
    }
    return p;
}

/* ---------------------------------------------------------------- concat */
static aclError concat_common(hrt_kernel *k, int first, int n, int64_t axis, bool pack) {
    if (n < 1) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: needs at least one input", k->op_name);
    if (n > MAXPIECES) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: too many inputs", k->op_name);
    const hrt_tensor *x0 = &k->in[first];
    size_t es = hrt_dtype_size(x0->dtype);
    if (k_index(x0->dtype) < 0 && es != 2 && es != 4 && es != 8 && es != 1) return k_unsupported(k, "x", x0->dtype);
    int rank = x0->ndim + (pack ? 1 : 0);
    if (rank == 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: inputs must have rank >= 1", k->op_name);
    int ax;
    aclError rc = k_norm_axis(k, axis, rank, pack ? "axis" : "concat_dim", &ax);
    if (rc) return rc;
    if (rank > HRT_MAXDIM) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: rank too large", k->op_name);
    int64_t od[HRT_MAXDIM];
    for (int d = 0, j = 0; d < rank; d++) od[d] = (pack && d == ax) ? 0 : x0->dims[j++];
    if (!pack) od[ax] = 0;
    for (int i = 0; i < n; i++) {
        const hrt_tensor *t = &k->in[first + i];
        if (t->absent || t->dtype != x0->dtype)
            return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, K_API, "%s: input %d is %s, input %d is %s", k->op_name,
                             first + i, t->absent ? "absent" : hrt_dtype_name(t->dtype), first, hrt_dtype_name(x0->dtype));
        bool ok = t->ndim == x0->ndim;
        for (int d = 0; ok && d < t->ndim; d++) ok = (!pack && d == ax) || t->dims[d] == x0->dims[d];
        if (!ok) {
            char a[128], b[128];
            hrt_shape_str(t->dims, t->ndim, a, sizeof a);
            hrt_shape_str(x0->dims, x0->ndim, b, sizeof b);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: input %d has shape %s, which does not fit %s on axis %d",
                             k->op_name, first + i, a, b, ax);
        }
        od[ax] += pack ? 1 : t->dims[ax];
    }
    if ((rc = k_expect_out_dtype(k, 0, x0->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], od, rank, 0))) return rc;
    cs_plan *p = cs_new(n);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->first = first;
    p->outer = k_prod(od, 0, ax);
    size_t inner = (size_t)k_prod(od, ax + 1, rank) * es, off = 0;
    for (int i = 0; i < n; i++) {
        const hrt_tensor *t = &k->in[first + i];
        p->len[i] = (size_t)(pack ? 1 : t->dims[ax]) * inner;
        p->off[i] = off;
        off += p->len[i];
    }
    p->whole = off;
    k->plan = p;
    k->plan_free = cs_free;
    k->run = cs_run;
    return ACL_SUCCESS;
}

static aclError check_n(const hrt_kernel *k, const aclopAttr *attrs, int n) {
    int64_t N;
    aclError rc = hrt_attr_get_int(k, attrs, "N", false, n, &N);
    if (rc) return rc;
    /* N defaults to 1 in the IR but callers often leave it: only a given, wrong N is an error */
    if (hrt_attr_find(attrs, "N") && N != n)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: attr N is %lld but %d tensors were given", k->op_name,
                         (long long)N, n);
    return ACL_SUCCESS;
}

static aclError concatd_compile(hrt_kernel *k, const aclopAttr *attrs) {
    if (k->n_out != 1) return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "%s: expects 1 output", k->op_name);
    int64_t axis;
    aclError rc = hrt_attr_get_int(k, attrs, "concat_dim", true, 0, &axis);
    if (!rc) rc = check_n(k, attrs, k->n_in);
    if (rc) return rc;
    return concat_common(k, 0, k->n_in, axis, false);
}

static aclError concat_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool v2 = strcmp(k->op_name, "ConcatV2") == 0;
    if (k->n_out != 1) return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "%s: expects 1 output", k->op_name);
    if (k->n_in < 2) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: expects concat_dim and inputs", k->op_name);
    int di = v2 ? k->n_in - 1 : 0;
    int64_t v[1];
    int n = 0;
    aclError rc = k_int_values(k, di, v, 1, &n);
    if (!rc && n != 1) rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: concat_dim must hold one value", k->op_name);
    if (!rc) rc = check_n(k, attrs, k->n_in - 1);
    if (rc) return rc;
    return concat_common(k, v2 ? 0 : 1, k->n_in - 1, v[0], false);
}

static aclError pack_compile(hrt_kernel *k, const aclopAttr *attrs) {
    if (k->n_out != 1) return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "Pack: expects 1 output");
    int64_t axis;
    aclError rc = hrt_attr_get_int(k, attrs, "axis", false, 0, &axis);
    if (!rc) rc = check_n(k, attrs, k->n_in);
    if (rc) return rc;
    return concat_common(k, 0, k->n_in, axis, true);
}

HRT_OP(concatd, "ConcatD", concatd_compile)
HRT_OP(concatv2d, "ConcatV2D", concatd_compile)
HRT_OP(concat, "Concat", concat_compile)
HRT_OP(concatv2, "ConcatV2", concat_compile)
HRT_OP(pack, "Pack", pack_compile)

/* ----------------------------------------------------------------- split */
static aclError split_common(hrt_kernel *k, int xi, int64_t axis, const int64_t *sizes, int nsizes, int64_t num_split,
                             bool attr_sizes) {
    const hrt_tensor *x = &k->in[xi];
    int n = k->n_out;
    if (num_split < 1 || num_split != n || n > MAXPIECES)
        return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "%s: num_split is %lld but %d outputs were given", k->op_name,
                         (long long)num_split, n);
    if (x->ndim == 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must have rank >= 1", k->op_name);
    int ax;
    aclError rc = k_norm_axis(k, axis, x->ndim, "split_dim", &ax);
    if (rc) return rc;
    int64_t D = x->dims[ax];
    int64_t *sz = calloc((size_t)n, sizeof(int64_t));
    if (!sz) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    aclError err = ACL_ERROR_OP_INPUT_NOT_MATCH;
    if (attr_sizes) err = ACL_ERROR_OP_ATTR_NOT_MATCH;
    if (!sizes) {
        if (D % n) {
            free(sz);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: dim %d of size %lld does not split into %d", k->op_name,
                             ax, (long long)D, n);
        }
        for (int i = 0; i < n; i++) sz[i] = D / n;
    } else {
        if (nsizes != n) {
            free(sz);
            return hrt_error(err, K_API, "%s: size_splits has %d values for %d outputs", k->op_name, nsizes, n);
        }
        int infer = -1;
        int64_t tot = 0;
        for (int i = 0; i < n; i++) {
            if (sizes[i] == -1 && infer < 0) {
                infer = i;
                continue;
            }
            if (sizes[i] < 0) {
                free(sz);
                return hrt_error(err, K_API, "%s: bad size_splits value %lld", k->op_name, (long long)sizes[i]);
            }
            sz[i] = sizes[i];
            if (ckd_add(&tot, tot, sizes[i])) { /* wrapped sums could add up to D */
                free(sz);
                return hrt_error(err, K_API, "%s: size_splits overflow", k->op_name);
            }
        }
        if (infer >= 0) sz[infer] = D - tot, tot = D;
        if (tot != D || (infer >= 0 && sz[infer] < 0)) {
            free(sz);
            return hrt_error(err, K_API, "%s: size_splits add up to %lld, dim %d has %lld", k->op_name, (long long)tot, ax,
                             (long long)D);
        }
    }
    size_t es = hrt_dtype_size(x->dtype);
    cs_plan *p = cs_new(n);
    if (!p) {
        free(sz);
        return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    }
    p->split = true;
    p->first = xi;
    p->outer = k_prod(x->dims, 0, ax);
    size_t inner = (size_t)k_prod(x->dims, ax + 1, x->ndim) * es, off = 0;
    for (int i = 0; i < n && !rc; i++) {
        int64_t od[HRT_MAXDIM];
        memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
        od[ax] = sz[i];
        rc = k_expect_out_dtype(k, i, x->dtype);
        if (!rc) rc = hrt_expect_same_shape(k, &k->out[i], od, x->ndim, i);
        p->len[i] = (size_t)sz[i] * inner;
        p->off[i] = off;
        off += p->len[i];
    }
    free(sz);
    if (rc) {
        cs_free(p);
        return rc;
    }
    p->whole = off;
    k->plan = p;
    k->plan_free = cs_free;
    k->run = cs_run;
    return ACL_SUCCESS;
}

static aclError splitd_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, -1);
    if (rc) return rc;
    int64_t axis, num;
    if ((rc = hrt_attr_get_int(k, attrs, "split_dim", true, 0, &axis)) ||
        (rc = hrt_attr_get_int(k, attrs, "num_split", true, 0, &num)))
        return rc;
    return split_common(k, 0, axis, NULL, 0, num, false);
}

static aclError split_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 2, -1);
    if (rc) return rc;
    int64_t v[1], num;
    int n = 0;
    if ((rc = k_int_values(k, 0, v, 1, &n))) return rc;
    if (n != 1) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "Split: split_dim must hold one value");
    if ((rc = hrt_attr_get_int(k, attrs, "num_split", true, 0, &num))) return rc;
    return split_common(k, 1, v[0], NULL, 0, num, false);
}

static aclError splitv_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 3, 3, -1);
    if (rc) return rc;
    int64_t sizes[MAXPIECES], v[1], num;
    int ns = 0, n = 0;
    if ((rc = k_int_values(k, 1, sizes, MAXPIECES, &ns))) return rc;
    if ((rc = k_int_values(k, 2, v, 1, &n))) return rc;
    if (n != 1) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "SplitV: split_dim must hold one value");
    if ((rc = hrt_attr_get_int(k, attrs, "num_split", true, 0, &num))) return rc;
    return split_common(k, 0, v[0], sizes, ns, num, false);
}

static aclError splitvd_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 1, 1, -1);
    if (rc) return rc;
    const int64_t *sizes = NULL;
    int ns = 0;
    int64_t axis, num;
    if ((rc = hrt_attr_get_list_int(k, attrs, "size_splits", true, &sizes, &ns)) ||
        (rc = hrt_attr_get_int(k, attrs, "split_dim", true, 0, &axis)) ||
        (rc = hrt_attr_get_int(k, attrs, "num_split", true, 0, &num)))
        return rc;
    return split_common(k, 0, axis, sizes, ns, num, true);
}

HRT_OP(splitd, "SplitD", splitd_compile)
HRT_OP(split, "Split", split_compile)
HRT_OP(splitv, "SplitV", splitv_compile)
HRT_OP(splitvd, "SplitVD", splitvd_compile)
