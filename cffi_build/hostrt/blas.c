/* GEMM: OpenBLAS loaded at run time (pip's build environment is not where
 * the scipy-openblas32 wheel lives at run time, so nothing is linked), with
 * a blocked C GEMM as the fallback when no library is available. */
#include "hrt.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc);
typedef void (*dgemm_fn)(int order, int ta, int tb, int m, int n, int k, double alpha, const double *a, int lda,
                         const double *b, int ldb, double beta, double *c, int ldc);
typedef void (*set_threads_fn)(int n);

/* kernels/gemm_small.c: small-M float32 GEMM on the pool (false from _small: out of memory) */
bool hrt_sgemm_small_ok(bool ta, int64_t m, int64_t n, int64_t k, float alpha, float beta);
bool hrt_sgemm_small(bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *c, int64_t ldc);

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;
static void *blas_handle;
static sgemm_fn p_sgemm;
static dgemm_fn p_dgemm;
static set_threads_fn p_set_threads;
static char blas_info[600] = "builtin C GEMM (no BLAS library loaded)";

static void *sym(void *h, const char *a, const char *b) {
    void *p = dlsym(h, a);
    return p ? p : (b ? dlsym(h, b) : NULL);
}

/* Load a CBLAS library; on failure describe why in err (nothing recorded). */
static aclError blas_load(const char *path, char *err, size_t cap) {
    if (!path || !*path) {
        snprintf(err, cap, "path is NULL or empty");
        return ACL_ERROR_INVALID_PARAM;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, cap, "cannot load BLAS library '%s': %s", path, dlerror());
        return ACL_ERROR_INVALID_FILE;
    }
    sgemm_fn s = (sgemm_fn)sym(h, "scipy_cblas_sgemm", "cblas_sgemm");
    dgemm_fn d = (dgemm_fn)sym(h, "scipy_cblas_dgemm", "cblas_dgemm");
    set_threads_fn t = (set_threads_fn)sym(h, "scipy_openblas_set_num_threads", "openblas_set_num_threads");
    if (!s || !d) {
        dlclose(h);
        snprintf(err, cap, "'%s' has no cblas_sgemm/cblas_dgemm", path);
        return ACL_ERROR_INVALID_FILE;
    }
    HRT_LOCK(&blas_mu, HRT_RANK_LEAF);
    /* the previous library stays loaded: kernels may be inside it right now */
    blas_handle = h;
    p_sgemm = s;
    p_dgemm = d;
    p_set_threads = t;
    snprintf(blas_info, sizeof blas_info, "cblas from %s", path);
    HRT_UNLOCK(&blas_mu);
    if (t) t(1); /* see hrt_sgemm: big GEMMs are split over the shared pool */
    return ACL_SUCCESS;
}

aclError aiogeHostSetBlasLibrary(const char *path) {
    char err[HRT_MSG_LEN];
    aclError rc = blas_load(path, err, sizeof err);
    return rc ? hrt_error(rc, "aiogeHostSetBlasLibrary", "%s", err) : ACL_SUCCESS;
}

const char *aiogeHostBlasInfo(void) { return blas_info; }

bool hrt_blas_loaded(void) { return p_sgemm != NULL; }

void hrt_blas_set_threads(int n) {
    (void)n; /* OpenBLAS stays single-threaded: parallelism is the pool's */
    if (p_set_threads) p_set_threads(1);
}

/* Called by aclInit: a library that does not load leaves the built-in GEMM
 * (and says why in the info) but no error text -- aclInit succeeded. */
void hrt_blas_init_from_env(void) {
    const char *p = hrt_env_get()->blas_library;
    if (!*p || p_sgemm) return;
    char err[HRT_MSG_LEN];
    if (blas_load(p, err, sizeof err) == ACL_SUCCESS) return;
    HRT_LOCK(&blas_mu, HRT_RANK_LEAF);
    if (!p_sgemm) snprintf(blas_info, sizeof blas_info, "builtin C GEMM (AIOGE_BLAS_LIBRARY: %s)", err);
    HRT_UNLOCK(&blas_mu);
}

/* ---------------------------------------------------------- fallback GEMM
 * Row-major C[m,n] = alpha*op(A)[m,k]*op(B)[k,n] + beta*C.  op(B) is packed
 * into a contiguous k-by-n panel first so the inner loop is a vectorisable
 * axpy over n; rows of C are split over the pool. */
#define FALLBACK_GEMM(NAME, T)                                                                                 \
    typedef struct {                                                                                           \
        bool ta;                                                                                               \
        int64_t m, n, k, lda, ldc;                                                                             \
        T alpha, beta;                                                                                         \
        const T *a, *bp;                                                                                       \
        T *c;                                                                                                  \
    } NAME##_ctx;                                                                                              \
    static void NAME##_rows(void *vp, int64_t r0, int64_t r1) {                                                \
        NAME##_ctx *x = vp;                                                                                    \
        for (int64_t i = r0; i < r1; i++) {                                                                    \
            T *crow = x->c + i * x->ldc;                                                                       \
            if (x->beta == 0) {                                                                                \
                for (int64_t j = 0; j < x->n; j++) crow[j] = 0;                                                \
            } else if (x->beta != 1) {                                                                         \
                for (int64_t j = 0; j < x->n; j++) crow[j] *= x->beta;                                         \
            }                                                                                                  \
            for (int64_t p = 0; p < x->k; p++) {                                                               \
                T av = x->alpha * (x->ta ? x->a[p * x->lda + i] : x->a[i * x->lda + p]);                       \
                const T *brow = x->bp + p * x->n;                                                              \
                for (int64_t j = 0; j < x->n; j++) crow[j] += av * brow[j];                                    \
            }                                                                                                  \
        }                                                                                                      \
    }                                                                                                          \
    static aclError NAME(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T *a, int64_t lda,  \
                         const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {                                 \
        T *bp = malloc(sizeof(T) * (size_t)(k && n ? k * n : 1));                                               \
        if (!bp) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "GEMM: out of host memory");             \
        for (int64_t p = 0; p < k; p++)                                                                        \
            for (int64_t j = 0; j < n; j++) bp[p * n + j] = tb ? b[j * ldb + p] : b[p * ldb + j];              \
        NAME##_ctx x = {ta, m, n, k, lda, ldc, alpha, beta, a, bp, c};                                         \
        int64_t per_row = n * k + 1;                                                                           \
        hrt_parallel_for(m, (1 << 16) / per_row + 1, NAME##_rows, &x);                                         \
        free(bp);                                                                                              \
        return ACL_SUCCESS;                                                                                    \
    }

FALLBACK_GEMM(fallback_sgemm, float)
FALLBACK_GEMM(fallback_dgemm, double)

static bool fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

/* OpenBLAS runs single-threaded; a big GEMM is cut into tiles of C (rows of
 * op(A), or columns of op(B)) that run on the shared intra-op pool.  Letting
 * OpenBLAS thread itself oversubscribes the cores as soon as the pool or a
 * second stream is busy too, and its spinning workers then stall everything
 * (measured: a 3-conv model went from 4.7 ms to 130 ms). */
#define PAR_MIN_MACS (1 << 21)

typedef struct {
    bool ta, tb, rows, dbl;
    int64_t m, n, k, lda, ldb, ldc, tile;
    double alpha, beta;
    const void *a, *b;
    void *c;
} par_gemm;

static void par_tiles(void *vp, int64_t t0, int64_t t1) {
    const par_gemm *g = vp;
    size_t es = g->dbl ? 8 : 4;
    for (int64_t t = t0; t < t1; t++) {
        int64_t lo = t * g->tile, hi = lo + g->tile, lim = g->rows ? g->m : g->n;
        if (hi > lim) hi = lim;
        if (hi <= lo) continue;
        const char *a = g->a, *b = g->b;
        char *c = g->c;
        int64_t m = g->m, n = g->n;
        if (g->rows) {
            a += es * (size_t)(g->ta ? lo : lo * g->lda);
            c += es * (size_t)(lo * g->ldc);
            m = hi - lo;
        } else {
            b += es * (size_t)(g->tb ? lo * g->ldb : lo);
            c += es * (size_t)lo;
            n = hi - lo;
        }
        int ta = g->ta ? TRANS : NO_TRANS, tb = g->tb ? TRANS : NO_TRANS;
        if (g->dbl)
            p_dgemm(ROW_MAJOR, ta, tb, (int)m, (int)n, (int)g->k, g->alpha, (const double *)a, (int)g->lda,
                    (const double *)b, (int)g->ldb, g->beta, (double *)c, (int)g->ldc);
        else
            p_sgemm(ROW_MAJOR, ta, tb, (int)m, (int)n, (int)g->k, (float)g->alpha, (const float *)a, (int)g->lda,
                    (const float *)b, (int)g->ldb, (float)g->beta, (float *)c, (int)g->ldc);
    }
}

/* Run on the pool if worth it; false when the caller should call BLAS directly. */
static bool gemm_on_pool(bool dbl, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                         int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    int threads = hrt_num_threads();
    if (threads <= 1 || (double)m * (double)n * (double)k < PAR_MIN_MACS) return false;
    bool rows = m >= n;
    int64_t extent = rows ? m : n;
    int64_t tiles = (int64_t)threads * 2, tile = (extent + tiles - 1) / tiles;
    tile = (tile + 15) / 16 * 16; /* whole SIMD panels */
    if (tile < 32) tile = 32;
    if (tile >= extent) return false;
    par_gemm g = {ta, tb, rows, dbl, m, n, k, lda, ldb, ldc, tile, alpha, beta, a, b, c};
    hrt_parallel_for((extent + tile - 1) / tile, 1, par_tiles, &g);
    return true;
}

/* GEMV (m == 1: a fully connected layer on one sample): memory-bound on op(B), so one pass over B
 * split over the pool by output columns.  sgemm with m == 1 packed all of B first (alexnet's
 * 9216x4096 fc6: ~90 ms against ~10 ms for one streaming pass). */
typedef struct {
    bool tb;
    int64_t n, k, as, ldb;
    float alpha, beta;
    const float *a, *b;
    float *c;
} gemv_ctx;

typedef float gv8 __attribute__((vector_size(32)));

static inline gv8 gv_ld(const float *p) {
    gv8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void gemv_cols(void *vp, int64_t j0, int64_t j1) {
    const gemv_ctx *g = vp;
    if (g->tb) { /* op(B)[k, j] = B[j, k]: a dot product per output, contiguous rows of B */
        for (int64_t j = j0; j < j1; j++) {
            const float *br = g->b + j * g->ldb;
            gv8 s0 = {0}, s1 = {0};
            int64_t kk = 0;
            if (g->as == 1)
                for (; kk + 16 <= g->k; kk += 16) {
                    s0 += gv_ld(g->a + kk) * gv_ld(br + kk);
                    s1 += gv_ld(g->a + kk + 8) * gv_ld(br + kk + 8);
                }
            s0 += s1;
            float acc = 0;
            for (int i = 0; i < 8; i++) acc += s0[i];
            for (; kk < g->k; kk++) acc += g->a[kk * g->as] * br[kk];
            g->c[j] = g->alpha * acc + (g->beta != 0 ? g->beta * g->c[j] : 0.0f);
        }
        return;
    }
    /* op(B) = B [k, n]: blocks of up to 1024 columns (an L1-resident accumulator) sweep every row
     * of B, so each row segment read is long and contiguous (prefetch-friendly) */
    float acc[1024];
    for (int64_t b0 = j0; b0 < j1; b0 += 1024) {
        int64_t w = j1 - b0 < 1024 ? j1 - b0 : 1024;
        memset(acc, 0, sizeof(float) * (size_t)w);
        const float *br = g->b + b0;
        for (int64_t kk = 0; kk < g->k; kk++, br += g->ldb) {
            float av = g->a[kk * g->as];
            for (int64_t q = 0; q < w; q++) acc[q] += av * br[q];
        }
        for (int64_t q = 0; q < w; q++)
            g->c[b0 + q] = g->alpha * acc[q] + (g->beta != 0 ? g->beta * g->c[b0 + q] : 0.0f);
    }
}

aclError hrt_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
               const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (m == 0 || n == 0) return ACL_SUCCESS;
    if (m == 1 && k > 0 && (double)n * (double)k >= 65536.0) {
        gemv_ctx g = {tb, n, k, ta ? lda : 1, ldb, alpha, beta, a, b, c};
        /* grain: ~64K multiply-adds per chunk, whole 64-column blocks */
        int64_t grain = ((1 << 16) / k + 64) / 64 * 64;
        hrt_parallel_for(n, grain, gemv_cols, &g);
        return ACL_SUCCESS;
    }
    if (hrt_sgemm_small_ok(ta, m, n, k, alpha, beta) &&
        hrt_sgemm_small(tb, m, n, k, a, lda, b, ldb, beta, c, ldc))
        return ACL_SUCCESS;
    sgemm_fn f = p_sgemm;
    bool ok = f && fits_int(m) && fits_int(n) && fits_int(k) && fits_int(lda) && fits_int(ldb) && fits_int(ldc) && k > 0;
    if (ok && gemm_on_pool(false, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return ACL_SUCCESS;
    if (ok)
        f(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
          (int)ldb, beta, c, (int)ldc);
    else
        return fallback_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return ACL_SUCCESS;
}

aclError hrt_dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double *a, int64_t lda,
               const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
    if (m == 0 || n == 0) return ACL_SUCCESS;
    dgemm_fn f = p_dgemm;
    bool ok = f && fits_int(m) && fits_int(n) && fits_int(k) && fits_int(lda) && fits_int(ldb) && fits_int(ldc) && k > 0;
    if (ok && gemm_on_pool(true, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return ACL_SUCCESS;
    if (ok)
        f(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
          (int)ldb, beta, c, (int)ldc);
    else
        return fallback_dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return ACL_SUCCESS;
}

/* The packed product (gemm_small.c), or OpenBLAS on the unpacked op(B) for the shapes where that
 * measured faster: the routing lives here, so gemm_small.c never calls back into this file. */
aclError hrt_sgemm_packed(int64_t m, bool ta, const float *a, int64_t lda, const hrt_sgemm_pb *pb, bool tb, const float *b,
                          int64_t ldb, const hrt_sgemm_ep *ep, float *c, int64_t ldc) {
    if (m <= 0) return ACL_SUCCESS;
    if (hrt_sgemm_packed_prefers_blas(m, pb) && hrt_blas_loaded()) {
        const int64_t n = hrt_sgemm_pb_n(pb);
        float beta = 0.0f;
        if (ep && ep->bias) { /* C = scale * A . op(B) + bias: the bias as BLAS's beta * C */
            for (int64_t r = 0; r < m; r++) memcpy(c + r * ldc, ep->bias, sizeof(float) * (size_t)n);
            beta = 1.0f;
        }
        aclError rc = hrt_sgemm(ta, tb, m, n, hrt_sgemm_pb_k(pb), ep ? ep->scale : 1.0f, a, lda, b, ldb, beta, c, ldc);
        if (!rc && ep && ep->act) {
            hrt_sgemm_ep act_only = {1.0f, NULL, ep->act};
            hrt_sgemm_ep_apply(&act_only, m, n, c, ldc);
        }
        return rc;
    }
    return hrt_sgemm_packed_run(m, ta, a, lda, pb, ep, c, ldc);
}
