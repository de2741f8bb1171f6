/* TopKV2 (x, k; dim, largest, sorted): the k largest (or smallest) values
 * along one dim and their int32/int64 indices, sorted, equal values keeping
 * the lower index first (onnxruntime's order).
 *
 * Each row (the dim, for one outer/inner position) is loaded once into a
 * key array (double keys for floats, int64 for integers: exact); small k
 * keeps a sorted top-k list by insertion, large k merge-sorts the row's
 * positions (stable).  Rows are spread over the intra-op pool. */
#include "kcommon.h"
#include "kelem.h"

#define TK_INSERT_MAX 32

typedef struct {
    int64_t O, D, I, k;
    aclDataType dt, it;
    bool largest;
    size_t esz;
} tk_plan;

typedef struct {
    const tk_plan *p;
    const char *x;
    char *v;
    char *idx;
    atomic_int rc; /* a chunk that could not get its scratch */
} tk_ctx;

/* a before b: better key, or equal key and lower position */
#define TK_BEFORE(ka, ia, kb, ib, largest) ((largest ? (ka) > (kb) : (ka) < (kb)) || ((ka) == (kb) && (ia) < (ib)))

#define TK_SELECT(KT)                                                                                  \
    static void tk_select_##KT(const KT *key, int64_t D, int64_t k, bool largest, int64_t *out, int64_t *tmp) { \
        if (k <= TK_INSERT_MAX) {                                                                      \
            int64_t n = 0;                                                                             \
            for (int64_t i = 0; i < D; i++) {                                                          \
                if (n == k && !TK_BEFORE(key[i], i, key[out[n - 1]], out[n - 1], largest)) continue;  \
                int64_t j = n < k ? n++ : n - 1;                                                       \
                while (j > 0 && TK_BEFORE(key[i], i, key[out[j - 1]], out[j - 1], largest)) {         \
                    out[j] = out[j - 1];                                                               \
                    j--;                                                                               \
                }                                                                                      \
                out[j] = i;                                                                            \
            }                                                                                          \
            return;                                                                                    \
        }                                                                                              \
        /* bottom-up merge sort of the positions (stable), then the first k */                        \
        int64_t *a = out, *b = tmp;                                                                    \
        for (int64_t i = 0; i < D; i++) a[i] = i;                                                      \
        for (int64_t w = 1; w < D; w *= 2) {                                                           \
            for (int64_t lo = 0; lo < D; lo += 2 * w) {                                                \
                int64_t mid = lo + w < D ? lo + w : D, hi = lo + 2 * w < D ? lo + 2 * w : D;           \
                int64_t i = lo, j = mid, o = lo;                                                       \
                while (i < mid && j < hi)                                                              \
                    b[o++] = TK_BEFORE(key[a[j]], a[j], key[a[i]], a[i], largest) ? a[j++] : a[i++];   \
                while (i < mid) b[o++] = a[i++];                                                       \
                while (j < hi) b[o++] = a[j++];                                                        \
            }                                                                                          \
            int64_t *t = a;                                                                            \
            a = b;                                                                                     \
            b = t;                                                                                     \
        }                                                                                              \
        if (a != out) memcpy(out, a, sizeof(int64_t) * (size_t)k);                                     \
    }
TK_SELECT(double)
TK_SELECT(int64_t)

static void tk_rows(void *vp, int64_t b, int64_t e) {
    tk_ctx *c = vp;
    const tk_plan *p = c->p;
    int64_t D = p->D, I = p->I, k = p->k;
    bool ints = !k_is_float(p->dt);
    /* scratch: keys (D) + positions (D) + merge buffer (D) */
    size_t need = sizeof(double) * (size_t)D + 2 * sizeof(int64_t) * (size_t)D;
    char *scratch = malloc(need ? need : 1);
    if (!scratch) {
        atomic_store(&c->rc, ACL_ERROR_RT_MEMORY_ALLOCATION);
        return;
    }
    double *kd = (double *)scratch;
    int64_t *ki = (int64_t *)scratch; /* integer keys share the key area (same size) */
    int64_t *pos = (int64_t *)(scratch + sizeof(double) * (size_t)D), *tmp = pos + D;
    for (int64_t r = b; r < e; r++) {
        int64_t o = r / I, in = r % I, base = o * D * I + in;
        for (int64_t d = 0; d < D; d++) {
            int64_t at = base + d * I;
            if (ints) {
                switch (p->dt) {
                case ACL_INT8: ki[d] = ((const int8_t *)c->x)[at]; break;
                case ACL_UINT8: ki[d] = ((const uint8_t *)c->x)[at]; break;
                case ACL_INT16: ki[d] = ((const int16_t *)c->x)[at]; break;
                case ACL_INT32: ki[d] = ((const int32_t *)c->x)[at]; break;
                case ACL_UINT16: ki[d] = ((const uint16_t *)c->x)[at]; break;
                case ACL_UINT32: ki[d] = ((const uint32_t *)c->x)[at]; break;
                /* flipping the top bit maps uint64 order onto int64 order */
                case ACL_UINT64: ki[d] = (int64_t)(((const uint64_t *)c->x)[at] ^ ((uint64_t)1 << 63)); break;
                default: ki[d] = ((const int64_t *)c->x)[at]; break;
                }
            } else {
                kd[d] = k_load_d(c->x, p->dt, at);
            }
        }
        if (ints) tk_select_int64_t(ki, D, k, p->largest, pos, tmp);
        else tk_select_double(kd, D, k, p->largest, pos, tmp);
        for (int64_t j = 0; j < k; j++) {
            int64_t src = base + pos[j] * I, dst = (o * k + j) * I + in;
            k_cp_el(c->v + (size_t)dst * p->esz, c->x + (size_t)src * p->esz, p->esz);
            if (p->it == ACL_INT64) ((int64_t *)c->idx)[dst] = pos[j];
            else ((int32_t *)c->idx)[dst] = (int32_t)pos[j];
        }
    }
    free(scratch);
}

static aclError tk_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const tk_plan *p = k->plan;
    int64_t rows = p->O * p->I;
    if (rows == 0 || p->k == 0) return ACL_SUCCESS;
    tk_ctx c = {p, in[0], out[0], out[1], ACL_SUCCESS};
    hrt_parallel_for(rows, K_GRAIN / (p->D * 8 + 1) + 1, tk_rows, &c);
    int rc = atomic_load(&c.rc);
    if (rc) return hrt_task_fail(rc, "TopKV2: out of host memory for a row of %lld", (long long)p->D);
    return ACL_SUCCESS;
}

static aclError topk_compile(hrt_kernel *k, const aclopAttr *attrs) {
    aclError rc = hrt_expect_counts(k, 2, 2, 2);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    int di = k_index(x->dtype);
    if (di < 0 || di == K_BOOL) return k_unsupported(k, "x", x->dtype);
    if (x->ndim == 0) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "TopKV2: x must have rank >= 1");
    int64_t kv[1], dim;
    int n = 0, ax;
    bool largest, sorted;
    if ((rc = k_int_values(k, 1, kv, 1, &n))) return rc;
    if ((rc = hrt_attr_get_int(k, attrs, "dim", false, -1, &dim)) || (rc = k_norm_axis(k, dim, x->ndim, "dim", &ax)) ||
        (rc = hrt_attr_get_bool(k, attrs, "largest", true, &largest)) ||
        (rc = hrt_attr_get_bool(k, attrs, "sorted", true, &sorted)))
        return rc;
    if (n != 1 || kv[0] < 0 || kv[0] > x->dims[ax])
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "TopKV2: k must be one value in [0, %lld]",
                         (long long)x->dims[ax]);
    int64_t od[HRT_MAXDIM];
    memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    od[ax] = kv[0];
    aclDataType it = k->out[1].dtype;
    if (it != ACL_INT32 && it != ACL_INT64) return k_unsupported(k, "indices (int32 or int64)", it);
    if ((rc = k_expect_out_dtype(k, 0, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[0], od, x->ndim, 0)) ||
        (rc = hrt_expect_same_shape(k, &k->out[1], od, x->ndim, 1)))
        return rc;
    tk_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->O = k_prod(x->dims, 0, ax);
    p->D = x->dims[ax];
    p->I = k_prod(x->dims, ax + 1, x->ndim);
    p->k = kv[0];
    p->dt = x->dtype;
    p->it = it;
    p->largest = largest;
    p->esz = hrt_dtype_size(x->dtype);
    (void)sorted; /* the result is always sorted (a valid order for sorted=false too) */
    k->plan = p;
    k->plan_free = free;
    k->run = tk_run;
    return ACL_SUCCESS;
}

HRT_OP(topkv2, "TopKV2", topk_compile)
