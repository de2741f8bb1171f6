/* Reductions: ReduceSum/Mean/Max/Min/Prod/All/Any (axes as a const or
 * host-placed input) and their *D forms (axes as an attr), keep_dims,
 * noop_with_empty_axes; ArgMaxV2/ArgMin (dimension input) and ArgMaxD /
 * ArgMinD (dimension attr).
 *
 * Design: at compile time the reduced axes are canonicalised (size-1 dims
 * dropped, neighbours with the same status merged) into alternating kept
 * and reduced groups.  Each reduced group is one (outer O, reduced R,
 * inner I) step; several groups run innermost first through a scratch
 * buffer.  A step is either a row reduction (I == 1: a contiguous dot-like
 * loop with 8 independent lanes, which GCC vectorises) or a column
 * reduction (I > 1: accumulate rows of I elements, vectorised over I).
 * Work is split over outputs, or, when there are few outputs, over R into
 * per-thread partials that are combined at the end.  Floats accumulate in
 * float64 and integers in int64 (wrapping like numpy's dtype-preserving
 * sum); max/min propagate NaN like numpy.  float16/bfloat16 are widened
 * once. */
#include "kcommon.h"

enum { R_SUM, R_PROD, R_MAX, R_MIN };

typedef void (*red_row_fn)(const void *x, int64_t R, int64_t stride_o, int64_t o0, int64_t o1, void *acc);
typedef void (*red_col_fn)(const void *x, int64_t R, int64_t I, void *acc);

#define CSUM(a, b) ((a) + (b))
#define CPROD(a, b) ((a) * (b))
#define CIMAX(a, b) ((a) > (b) ? (a) : (b))
#define CIMIN(a, b) ((a) < (b) ? (a) : (b))

/* acc[o] = reduce over x[o*stride_o + r], r < R, for o in [o0, o1) */
#define DEF_ROW(NAME, T, ACC, INIT, COMB)                                                          \
    static void NAME(const void *px, int64_t R, int64_t so, int64_t o0, int64_t o1, void *pacc) {   \
        ACC *acc = pacc;                                                                          \
        for (int64_t o = o0; o < o1; o++) {                                                       \
            const T *x = (const T *)px + o * so;                                                  \
            ACC l[8] = {INIT, INIT, INIT, INIT, INIT, INIT, INIT, INIT};                          \
            int64_t i = 0;                                                                        \
            for (; i + 8 <= R; i += 8)                                                            \
                for (int j = 0; j < 8; j++) l[j] = COMB(l[j], (ACC)x[i + j]);                     \
            ACC r = INIT;                                                                         \
            for (int j = 0; j < 8; j++) r = COMB(r, l[j]);                                        \
            for (; i < R; i++) r = COMB(r, (ACC)x[i]);                                            \
            acc[o] = r;                                                                           \
        }                                                                                         \
    }

/* acc[i] = reduce over x[r*I + i], r < R (R may be 0: INIT) */
#define DEF_COL(NAME, T, ACC, INIT, COMB)                                                          \
    static void NAME(const void *px, int64_t R, int64_t I, void *pacc) {                          \
        const T *x = px;                                                                          \
        ACC *acc = pacc;                                                                          \
        if (R == 0) {                                                                             \
            for (int64_t i = 0; i < I; i++) acc[i] = INIT;                                        \
            return;                                                                               \
        }                                                                                         \
        for (int64_t i = 0; i < I; i++) acc[i] = (ACC)x[i];                                       \
        for (int64_t r = 1; r < R; r++) {                                                         \
            const T *row = x + r * I;                                                             \
            for (int64_t i = 0; i < I; i++) acc[i] = COMB(acc[i], (ACC)row[i]);                   \
        }                                                                                         \
    }

#define DEF_RED(T, TN, ACC, MAXF, MINF)                                     \
    DEF_ROW(row_sum_##TN, T, ACC, 0, CSUM)                                  \
    DEF_ROW(row_prod_##TN, T, ACC, 1, CPROD)                                \
    DEF_ROW(row_max_##TN, T, ACC, (ACC)x[0], MAXF)                          \
    DEF_ROW(row_min_##TN, T, ACC, (ACC)x[0], MINF)                          \
    DEF_COL(col_sum_##TN, T, ACC, 0, CSUM)                                  \
    DEF_COL(col_prod_##TN, T, ACC, 1, CPROD)                                \
    DEF_COL(col_max_##TN, T, ACC, 0, MAXF)                                  \
    DEF_COL(col_min_##TN, T, ACC, 0, MINF)

DEF_RED(float, f32v, double, k_maxd, k_mind)
DEF_RED(double, f64v, double, k_maxd, k_mind)
/* float rows: explicit-vector max/min (exact, NaN-propagating) */
#define VROW(NAME, T, FN)                                                                           \
    static void NAME(const void *px, int64_t R, int64_t so, int64_t o0, int64_t o1, void *pacc) {    \
        double *acc = pacc;                                                                        \
        for (int64_t o = o0; o < o1; o++) acc[o] = R ? (double)FN((const T *)px + o * so, R) : 0;  \
    }
VROW(row_max_f32, float, k_row_maxf)
VROW(row_min_f32, float, k_row_minf)
VROW(row_max_f64, double, k_row_maxd)
VROW(row_min_f64, double, k_row_mind)
#define row_sum_f32 row_sum_f32v
#define row_prod_f32 row_prod_f32v
#define row_sum_f64 row_sum_f64v
#define row_prod_f64 row_prod_f64v
#define col_sum_f32 col_sum_f32v
#define col_prod_f32 col_prod_f32v
#define col_max_f32 col_max_f32v
#define col_min_f32 col_min_f32v
#define col_sum_f64 col_sum_f64v
#define col_prod_f64 col_prod_f64v
#define col_max_f64 col_max_f64v
#define col_min_f64 col_min_f64v
DEF_RED(int8_t, i8, int64_t, CIMAX, CIMIN)
DEF_RED(uint8_t, u8, int64_t, CIMAX, CIMIN)
DEF_RED(int16_t, i16, int64_t, CIMAX, CIMIN)
DEF_RED(int32_t, i32, int64_t, CIMAX, CIMIN)
DEF_RED(int64_t, i64, int64_t, CIMAX, CIMIN)

/* [source kind][op]: source kinds f32, f64, i8, u8, i16, i32, i64 */
enum { S_F32, S_F64, S_I8, S_U8, S_I16, S_I32, S_I64, S_N };
#define ROWS(TN) {row_sum_##TN, row_prod_##TN, row_max_##TN, row_min_##TN}
#define COLS(TN) {col_sum_##TN, col_prod_##TN, col_max_##TN, col_min_##TN}
static const red_row_fn ROW_FNS[S_N][4] = {ROWS(f32), ROWS(f64), ROWS(i8), ROWS(u8), ROWS(i16), ROWS(i32), ROWS(i64)};
static const red_col_fn COL_FNS[S_N][4] = {COLS(f32), COLS(f64), COLS(i8), COLS(u8), COLS(i16), COLS(i32), COLS(i64)};
static const size_t S_SIZE[S_N] = {4, 8, 1, 1, 2, 4, 8};

static int src_kind(aclDataType dt) {
    switch (dt) {
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: return S_F32;
    case ACL_DOUBLE: return S_F64;
    case ACL_INT8: return S_I8;
    case ACL_UINT8: case ACL_BOOL: return S_U8;
    case ACL_INT16: return S_I16;
    case ACL_INT32: return S_I32;
    case ACL_INT64: return S_I64;
    default: return -1;
    }
}

typedef struct {
    int64_t O, R, I;
} red_step;

typedef struct {
    int op;             /* R_SUM.. */
    bool mean, copy;    /* copy: no axes reduced (noop) */
    int nsteps;
    red_step steps[HRT_MAXDIM];
    int src;            /* source kind of the input (after widening halves) */
    bool integer;       /* accumulate in int64 */
    int64_t count;      /* reduced element count (mean) */
    int64_t out_numel;
    aclDataType in_dt, out_dt;
} red_plan;

static void combine(int op, bool integer, void *dst, const void *src, int64_t n) {
    if (integer) {
        int64_t *d = dst;
        const int64_t *s = src;
        for (int64_t i = 0; i < n; i++) {
            int64_t a = d[i], b = s[i];
            d[i] = op == R_SUM ? a + b : op == R_PROD ? a * b : op == R_MAX ? CIMAX(a, b) : CIMIN(a, b);
        }
    } else {
        double *d = dst;
        const double *s = src;
        if (op == R_SUM) for (int64_t i = 0; i < n; i++) d[i] += s[i];
        else if (op == R_PROD) for (int64_t i = 0; i < n; i++) d[i] *= s[i];
        else if (op == R_MAX) for (int64_t i = 0; i < n; i++) d[i] = k_maxd(d[i], s[i]);
        else for (int64_t i = 0; i < n; i++) d[i] = k_mind(d[i], s[i]);
    }
}

typedef struct {
    const red_step *st;
    int op, kind;
    const char *src;
    char *dst;        /* O*I accumulators */
    char *parts;      /* P partial buffers of O*I each (R split) */
    int64_t nparts;
} step_ctx;

/* split over outputs: o ranges */
static void step_outer(void *vp, int64_t b, int64_t e) {
    step_ctx *c = vp;
    const red_step *st = c->st;
    size_t ssz = S_SIZE[c->kind];
    if (st->I == 1) {
        ROW_FNS[c->kind][c->op](c->src, st->R, st->R, b, e, c->dst);
    } else {
        for (int64_t o = b; o < e; o++)
            COL_FNS[c->kind][c->op](c->src + (size_t)(o * st->R * st->I) * ssz, st->R, st->I, c->dst + (size_t)(o * st->I) * 8);
    }
}

/* split over R: part p reduces rows [R*p/P, R*(p+1)/P) of every output */
static void step_parts(void *vp, int64_t b, int64_t e) {
    step_ctx *c = vp;
    const red_step *st = c->st;
    size_t ssz = S_SIZE[c->kind];
    for (int64_t p = b; p < e; p++) {
        int64_t r0 = st->R * p / c->nparts, r1 = st->R * (p + 1) / c->nparts;
        char *acc = c->parts + (size_t)(p * st->O * st->I) * 8;
        for (int64_t o = 0; o < st->O; o++) {
            const char *base = c->src + (size_t)((o * st->R + r0) * st->I) * ssz;
            if (st->I == 1) ROW_FNS[c->kind][c->op](base, r1 - r0, 0, 0, 1, acc + (size_t)o * 8);
            else COL_FNS[c->kind][c->op](base, r1 - r0, st->I, acc + (size_t)(o * st->I) * 8);
        }
    }
}

static void run_step(const red_step *st, int op, int kind, bool integer, const void *src, void *dst, void *parts,
                     int64_t nparts) {
    step_ctx c = {st, op, kind, src, dst, parts, nparts};
    if (nparts > 1) {
        hrt_parallel_for(nparts, 1, step_parts, &c);
        int64_t n = st->O * st->I;
        memcpy(dst, parts, (size_t)n * 8);
        for (int64_t p = 1; p < nparts; p++) combine(op, integer, dst, (char *)parts + (size_t)(p * n) * 8, n);
    } else {
        int64_t per = st->R * st->I + 1;
        hrt_parallel_for(st->O, K_GRAIN / per + 1, step_outer, &c);
    }
}

static int64_t parts_for(const red_step *st) {
    int threads = hrt_num_threads();
    int64_t work = st->O * st->R * st->I;
    if (threads <= 1 || st->O >= 2 * threads || work < 2 * K_GRAIN || st->R < 16) return 1;
    int64_t p = work / K_GRAIN;
    if (p > 4 * threads) p = 4 * threads;
    if (p > st->R) p = st->R;
    return p < 2 ? 1 : p;
}

typedef struct {
    const void *src;
    void *dst;
    aclDataType dt;
} widen_ctx;

static void widen_chunk(void *vp, int64_t b, int64_t e) {
    widen_ctx *w = vp;
    k_to_f32((const char *)w->src + (size_t)b * 2, w->dt, (float *)w->dst + b, e - b);
}

typedef struct {
    const red_plan *p;
    const void *acc;
    void *out;
} store_ctx;

static void store_chunk(void *vp, int64_t b, int64_t e) {
    store_ctx *s = vp;
    const red_plan *p = s->p;
    if (p->integer) {
        const int64_t *a = s->acc;
        for (int64_t i = b; i < e; i++) {
            int64_t v = a[i];
            switch (p->out_dt) {
            case ACL_INT8: ((int8_t *)s->out)[i] = (int8_t)v; break;
            case ACL_UINT8: ((uint8_t *)s->out)[i] = (uint8_t)v; break;
            case ACL_BOOL: ((uint8_t *)s->out)[i] = v != 0; break;
            case ACL_INT16: ((int16_t *)s->out)[i] = (int16_t)v; break;
            case ACL_INT32: ((int32_t *)s->out)[i] = (int32_t)v; break;
            default: ((int64_t *)s->out)[i] = v; break;
            }
        }
        return;
    }
    const double *a = s->acc;
    double div = p->mean ? (double)p->count : 1.0;
    if (p->out_dt == ACL_DOUBLE) {
        double *o = s->out;
        for (int64_t i = b; i < e; i++) o[i] = a[i] / div;
    } else if (p->out_dt == ACL_FLOAT) {
        float *o = s->out;
        for (int64_t i = b; i < e; i++) o[i] = (float)(a[i] / div);
    } else {
        float buf[K_BLOCK];
        for (int64_t i = b; i < e; i += K_BLOCK) {
            int64_t m = e - i < K_BLOCK ? e - i : K_BLOCK;
            for (int64_t j = 0; j < m; j++) buf[j] = (float)(a[i + j] / div);
            k_from_f32(buf, p->out_dt, (char *)s->out + (size_t)i * 2, m);
        }
    }
}

static aclError red_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const red_plan *p = k->plan;
    if (p->copy) return k_copy_run(k, in, out);
    if (p->out_numel == 0) return ACL_SUCCESS;
    const void *src = in[0];
    void *wide = NULL;
    if (k_is_half(p->in_dt)) {
        wide = k_scratch(k, sizeof(float) * (size_t)k->in[0].numel);
        if (!wide) return ACL_ERROR_RT_MEMORY_ALLOCATION;
        widen_ctx w = {in[0], wide, p->in_dt};
        hrt_parallel_for(k->in[0].numel, K_GRAIN, widen_chunk, &w);
        src = wide;
    }
    /* scratch: two accumulator buffers for the step ping-pong + partials */
    int64_t max_oi = 0, max_parts = 0;
    for (int s = 0; s < p->nsteps; s++) {
        int64_t oi = p->steps[s].O * p->steps[s].I;
        if (oi > max_oi) max_oi = oi;
        int64_t np = parts_for(&p->steps[s]);
        if (np > 1 && np * oi > max_parts) max_parts = np * oi;
    }
    char *buf = k_scratch(k, (size_t)(2 * max_oi + max_parts) * 8);
    if (!buf) {
        free(wide);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    char *acc[2] = {buf, buf + (size_t)max_oi * 8};
    char *parts = buf + (size_t)(2 * max_oi) * 8;
    int kind = p->src;
    int acc_kind = p->integer ? S_I64 : S_F64;
    for (int s = 0; s < p->nsteps; s++) {
        const red_step *st = &p->steps[s];
        run_step(st, p->op, s == 0 ? kind : acc_kind, p->integer, s == 0 ? src : acc[(s - 1) & 1], acc[s & 1], parts,
                 parts_for(st));
    }
    store_ctx sc = {p, acc[(p->nsteps - 1) & 1], out[0]};
    hrt_parallel_for(p->out_numel, K_GRAIN, store_chunk, &sc);
    free(buf);
    free(wide);
    return ACL_SUCCESS;
}

typedef struct {
    const char *name;
    int op;
    bool mean, is_d, logical;
} red_def;

static const red_def RED_DEFS[] = {
    {"ReduceSum", R_SUM, false, false, false},   {"ReduceSumD", R_SUM, false, true, false},
    {"ReduceMean", R_SUM, true, false, false},   {"ReduceMeanD", R_SUM, true, true, false},
    {"ReduceMax", R_MAX, false, false, false},   {"ReduceMaxD", R_MAX, false, true, false},
    {"ReduceMin", R_MIN, false, false, false},   {"ReduceMinD", R_MIN, false, true, false},
    {"ReduceProd", R_PROD, false, false, false}, {"ReduceProdD", R_PROD, false, true, false},
    {"ReduceAll", R_MIN, false, false, true},    {"ReduceAllD", R_MIN, false, true, true},
    {"ReduceAny", R_MAX, false, false, true},    {"ReduceAnyD", R_MAX, false, true, true},
};

/* Canonical groups of a reduction: sizes and reduced flags. */
static int canon_groups(const hrt_tensor *x, unsigned mask, int64_t *g, bool *red) {
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (x->dims[d] == 1) continue;
        bool r = (mask >> d) & 1u;
        if (n > 0 && red[n - 1] == r) {
            g[n - 1] *= x->dims[d];
        } else {
            g[n] = x->dims[d];
            red[n] = r;
            n++;
        }
    }
    return n;
}

static aclError red_compile(hrt_kernel *k, const aclopAttr *attrs) {
    const red_def *def = NULL;
    for (size_t i = 0; i < sizeof RED_DEFS / sizeof *RED_DEFS; i++)
        if (strcmp(RED_DEFS[i].name, k->op_name) == 0) def = &RED_DEFS[i];
    aclError rc = def->is_d ? hrt_expect_counts(k, 1, 1, 1) : hrt_expect_counts(k, 1, 2, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *y = &k->out[0];
    /* dtypes */
    int kind = src_kind(x->dtype);
    if (def->logical) {
        if (x->dtype != ACL_BOOL) return k_unsupported(k, "x (must be bool)", x->dtype);
    } else if (kind < 0 || x->dtype == ACL_BOOL || (def->mean && !k_is_float(x->dtype))) {
        return k_unsupported(k, "x", x->dtype);
    }
    if ((rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    bool keep = false, noop;
    rc = hrt_attr_get_bool(k, attrs, "keep_dims", false, &keep);
    if (!rc) rc = hrt_attr_get_bool(k, attrs, "noop_with_empty_axes", !def->is_d, &noop);
    if (rc) return rc;
    unsigned mask = 0;
    int naxes = 0;
    if (def->is_d) rc = k_get_axes(k, attrs, "axes", -1, true, x->ndim, &mask, &naxes, NULL);
    else rc = k_get_axes(k, attrs, "axes", 1, false, x->ndim, &mask, &naxes, NULL);
    if (rc) return rc;
    bool copy = false;
    if (naxes == 0) {
        if (noop) copy = true;
        else mask = x->ndim ? (1u << x->ndim) - 1u : 0;
    }
    /* output shape */
    int64_t od[HRT_MAXDIM];
    int ond = 0;
    int64_t count = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (!copy && ((mask >> d) & 1u)) {
            count *= x->dims[d];
            if (keep) od[ond++] = 1;
        } else {
            od[ond++] = x->dims[d];
        }
    }
    if ((rc = hrt_expect_same_shape(k, y, od, ond, 0))) return rc;
    if (!copy && count == 0 && (def->op == R_MAX || def->op == R_MIN) && !def->logical && y->numel > 0)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: reduction over a zero-size axis has no identity",
                         k->op_name);
    red_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->op = def->op;
    p->mean = def->mean;
    p->copy = copy;
    p->src = kind;
    p->integer = !k_is_float(x->dtype);
    p->count = count;
    p->out_numel = y->numel;
    p->in_dt = x->dtype;
    p->out_dt = y->dtype;
    if (!copy) {
        int64_t g[HRT_MAXDIM];
        bool red[HRT_MAXDIM];
        int n = canon_groups(x, mask, g, red);
        if (x->numel == 0) {
            /* zero-size reduced dim: one step with R = 0 gives the identity */
            p->nsteps = 1;
            p->steps[0] = (red_step){y->numel, 0, 1};
        } else {
            /* innermost reduced group first; merge the neighbours it separated */
            while (1) {
                int j = -1;
                for (int i = n - 1; i >= 0; i--)
                    if (red[i]) {
                        j = i;
                        break;
                    }
                if (j < 0) break;
                red_step st = {1, g[j], 1};
                for (int i = 0; i < j; i++) st.O *= g[i];
                for (int i = j + 1; i < n; i++) st.I *= g[i];
                p->steps[p->nsteps++] = st;
                /* remove group j, merge kept neighbours */
                if (j > 0 && j + 1 < n && !red[j - 1] && !red[j + 1]) {
                    g[j - 1] *= g[j + 1];
                    for (int i = j; i + 2 < n; i++) {
                        g[i] = g[i + 2];
                        red[i] = red[i + 2];
                    }
                    n -= 2;
                } else {
                    for (int i = j; i + 1 < n; i++) {
                        g[i] = g[i + 1];
                        red[i] = red[i + 1];
                    }
                    n -= 1;
                }
            }
            if (p->nsteps == 0) p->copy = true; /* only size-1 dims reduced */
        }
    }
    k->plan = p;
    k->plan_free = free;
    k->run = red_run;
    return ACL_SUCCESS;
}

HRT_OP(reducesum, "ReduceSum", red_compile)
HRT_OP(reducesumd, "ReduceSumD", red_compile)
HRT_OP(reducemean, "ReduceMean", red_compile)
HRT_OP(reducemeand, "ReduceMeanD", red_compile)
HRT_OP(reducemax, "ReduceMax", red_compile)
HRT_OP(reducemaxd, "ReduceMaxD", red_compile)
HRT_OP(reducemin, "ReduceMin", red_compile)
HRT_OP(reducemind, "ReduceMinD", red_compile)
HRT_OP(reduceprod, "ReduceProd", red_compile)
HRT_OP(reduceprodd, "ReduceProdD", red_compile)
HRT_OP(reduceall, "ReduceAll", red_compile)
HRT_OP(reducealld, "ReduceAllD", red_compile)
HRT_OP(reduceany, "ReduceAny", red_compile)
HRT_OP(reduceanyd, "ReduceAnyD", red_compile)

/* ---------------------------------------------------------- ArgMax/ArgMin
 * First index of the max/min along one axis (numpy: a NaN wins, first
 * one).  Output int32 or int64 (attr dtype, default int32), shape x without
 * the axis. */
typedef struct {
    int64_t O, R, I;
    bool is_max;
    aclDataType in_dt, out_dt;
} arg_plan;

typedef struct {
    const arg_plan *p;
    const void *x;
    void *y;
} arg_ctx;

static inline bool arg_better_d(double v, double best, bool is_max) {
    if (best != best) return false;
    if (v != v) return true;
    return is_max ? v > best : v < best;
}

static void arg_chunk(void *vp, int64_t b, int64_t e) {
    arg_ctx *c = vp;
    const arg_plan *p = c->p;
    float fb[K_BLOCK];
    for (int64_t oi = b; oi < e; oi++) {
        int64_t o = oi / p->I, i = oi % p->I;
        int64_t base = o * p->R * p->I + i;
        int64_t bi = 0;
        if (p->in_dt == ACL_FLOAT || k_is_half(p->in_dt) || p->in_dt == ACL_DOUBLE) {
            double best = 0;
            for (int64_t r = 0; r < p->R; r++) {
                double v;
                int64_t idx = base + r * p->I;
                if (p->in_dt == ACL_FLOAT) v = ((const float *)c->x)[idx];
                else if (p->in_dt == ACL_DOUBLE) v = ((const double *)c->x)[idx];
                else {
                    k_to_f32((const uint16_t *)c->x + idx, p->in_dt, fb, 1);
                    v = fb[0];
                }
                if (r == 0 || arg_better_d(v, best, p->is_max)) {
                    best = v;
                    bi = r;
                }
            }
        } else {
            int64_t best = 0;
            for (int64_t r = 0; r < p->R; r++) {
                int64_t idx = base + r * p->I, v;
                switch (p->in_dt) {
                case ACL_INT8: v = ((const int8_t *)c->x)[idx]; break;
                case ACL_UINT8: case ACL_BOOL: v = ((const uint8_t *)c->x)[idx]; break;
                case ACL_INT16: v = ((const int16_t *)c->x)[idx]; break;
                case ACL_INT32: v = ((const int32_t *)c->x)[idx]; break;
                default: v = ((const int64_t *)c->x)[idx]; break;
                }
                if (r == 0 || (p->is_max ? v > best : v < best)) {
                    best = v;
                    bi = r;
                }
            }
        }
        if (p->out_dt == ACL_INT32) ((int32_t *)c->y)[oi] = (int32_t)bi;
        else ((int64_t *)c->y)[oi] = bi;
    }
}

static aclError arg_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const arg_plan *p = k->plan;
    arg_ctx c = {p, in[0], out[0]};
    hrt_parallel_for(p->O * p->I, K_GRAIN / (p->R + 1) + 1, arg_chunk, &c);
    return ACL_SUCCESS;
}

static aclError arg_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool is_d = strcmp(k->op_name, "ArgMaxD") == 0 || strcmp(k->op_name, "ArgMinD") == 0;
    bool is_max = strncmp(k->op_name, "ArgMax", 6) == 0;
    aclError rc = hrt_expect_counts(k, is_d ? 1 : 2, is_d ? 1 : 2, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0], *y = &k->out[0];
    if (src_kind(x->dtype) < 0) return k_unsupported(k, "x", x->dtype);
    int64_t axis;
    if (is_d) {
        rc = hrt_attr_get_int(k, attrs, "dimension", true, 0, &axis);
    } else {
        int64_t v[1];
        int n = 0;
        rc = k_int_values(k, 1, v, 1, &n);
        if (!rc && n != 1)
            rc = hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: dimension must hold one value", k->op_name);
        axis = v[0];
    }
    if (rc) return rc;
    if (x->ndim == 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must have rank >= 1", k->op_name);
    int ax;
    if ((rc = k_norm_axis(k, axis, x->ndim, "dimension", &ax))) return rc;
    if (x->dims[ax] == 0)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: the reduced axis has size 0", k->op_name);
    int64_t dt;
    if ((rc = hrt_attr_get_int(k, attrs, "dtype", false, ACL_INT32, &dt))) return rc;
    if (dt != ACL_INT32 && dt != ACL_INT64)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: dtype must be int32 (3) or int64 (9), got %lld",
                         k->op_name, (long long)dt);
    if ((rc = k_expect_out_dtype(k, 0, (aclDataType)dt))) return rc;
    int64_t od[HRT_MAXDIM];
    int ond = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != ax) od[ond++] = x->dims[d];
    if ((rc = hrt_expect_same_shape(k, y, od, ond, 0))) return rc;
    arg_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->O = k_prod(x->dims, 0, ax);
    p->R = x->dims[ax];
    p->I = k_prod(x->dims, ax + 1, x->ndim);
    p->is_max = is_max;
    p->in_dt = x->dtype;
    p->out_dt = y->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = arg_run;
    return ACL_SUCCESS;
}

HRT_OP(argmaxv2, "ArgMaxV2", arg_compile)
HRT_OP(argmin, "ArgMin", arg_compile)
HRT_OP(argmaxd, "ArgMaxD", arg_compile)
HRT_OP(argmind, "ArgMinD", arg_compile)
