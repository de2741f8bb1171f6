/* float32 GEMM for small M (a batch of rows through a weight matrix: an MLP layer at batch 8-256,
 * a transformer's projections at 64-128 tokens): C[M, N] (+)= A[M, K] . op(B)[K, N].
 *
 * A is packed once per call into 6-row panels (M x K: small).  A work item is a block of up to four
 * 16-column panels of C; per K block of 256 rows it packs its panels' slices of op(B) (64 KB: rows
 * of B read 256 bytes at a time, or contiguous rows of B^T) and sweeps all of A's panels over each
 * slice, accumulating in C itself.  B is read once per call and packed slice by slice where it is used (reading B in
 * place strided by a power-of-two row length thrashed L1's sets: 0.5-0.75x OpenBLAS).  Items are
 * split over the pool. */
#include "kernels/kcommon.h"

#include "kernels/ukernel.h"
#include "kernels/nchwc.h"

typedef struct {
    bool tb, acc0; /* acc0: beta == 1 (accumulate into C from the first K block) */
    int64_t m, n, k, lda, ldb, ldc, npan, per_item;
    const float *a, *b;
    float *c;
    const float *ap; /* A packed: per 6-row panel, K x MR */
} gs_ctx;

/* op(B) rows [k0, k0 + kc) of panels [p0, p1) -> bp: per panel kc x NR (columns past N zero) */
static void gs_pack(const gs_ctx *g, int64_t k0, int64_t kc, int64_t p0, int64_t p1, float *bp) {
    const int64_t j1 = p1 * NR < g->n ? p1 * NR : g->n, pstride = kc * NR;
    if (g->tb) { /* op(B)[k][j] = B[j][k]: contiguous rows of B */
        if (j1 < p1 * NR) memset(bp, 0, sizeof(float) * (size_t)((p1 - p0) * pstride));
        for (int64_t pp = p0; pp < p1; pp++) { /* 8 x 8 blocks transposed in registers */
            const int64_t c0 = pp * NR, nj = j1 - c0 < NR ? j1 - c0 : NR;
            float *d = bp + (pp - p0) * pstride;
            int64_t kk = 0;
            if (nj == NR)
                for (; kk + 8 <= kc; kk += 8)
                    for (int h = 0; h < 2; h++) {
                        v8f r[8];
                        for (int q = 0; q < 8; q++) r[q] = ld8(g->b + (c0 + 8 * h + q) * g->ldb + k0 + kk);
                        for (int q = 0; q < 8; q++) {
                            v8f o = {r[0][q], r[1][q], r[2][q], r[3][q], r[4][q], r[5][q], r[6][q], r[7][q]};
                            st8(d + (kk + q) * NR + 8 * h, o);
                        }
                    }
            for (; kk < kc; kk++)
                for (int64_t j = 0; j < nj; j++) d[kk * NR + j] = g->b[(c0 + j) * g->ldb + k0 + kk];
        }
        return;
    }
    for (int64_t kk = 0; kk < kc; kk++) {
        const float *br = g->b + (k0 + kk) * g->ldb;
        for (int64_t pp = p0; pp < p1; pp++) {
            float *d = bp + (pp - p0) * pstride + kk * NR;
            int64_t c0 = pp * NR, nj = g->n - c0 < NR ? g->n - c0 : NR;
            if (nj == NR) {
                memcpy(d, br + c0, sizeof(float) * NR);
            } else {
                memcpy(d, br + c0, sizeof(float) * (size_t)nj);
                memset(d + nj, 0, sizeof(float) * (size_t)(NR - nj));
            }
        }
    }
}

/* panels per work item: one K block of them packed is 64 KB (L2), and a row of B is read as 256
 * contiguous bytes per pack */
#define GS_PANELS 4

static void gs_items(void *vp, int64_t i0, int64_t i1) {
    const gs_ctx *g = vp;
    float bp[GS_PANELS * KC * NR] __attribute__((aligned(64)));
    float tile[MR * NR] __attribute__((aligned(32)));
    for (int64_t it = i0; it < i1; it++) {
        int64_t p0 = it * g->per_item, p1 = p0 + g->per_item < g->npan ? p0 + g->per_item : g->npan;
        for (int64_t k0 = 0; k0 < g->k; k0 += KC) {
            const int64_t kc = g->k - k0 < KC ? g->k - k0 : KC;
            const bool acc = k0 > 0 || g->acc0;
            gs_pack(g, k0, kc, p0, p1, bp);
            for (int64_t pp = p0; pp < p1; pp++) {
                const int64_t j0 = pp * NR, nj = g->n - j0 < NR ? g->n - j0 : NR;
                const float *b = bp + (pp - p0) * kc * NR;
                for (int64_t i = 0; i < g->m; i += MR) {
                    const int64_t mr = g->m - i < MR ? g->m - i : MR;
                    const float *a = g->ap + i * g->k + k0 * MR;
                    float *c = g->c + i * g->ldc + j0;
                    if (mr == MR && nj == NR) {
                        ukernel_ld(kc, a, b, c, g->ldc, acc);
                        continue;
                    }
                    if (acc)
                        for (int64_t r = 0; r < mr; r++) memcpy(tile + r * NR, c + r * g->ldc, sizeof(float) * (size_t)nj);
                    ukernel_ld(kc, a, b, tile, NR, acc);
                    for (int64_t r = 0; r < mr; r++) memcpy(c + r * g->ldc, tile + r * NR, sizeof(float) * (size_t)nj);
                }
            }
        }
    }
}

bool hrt_sgemm_small_ok(bool ta, int64_t m, int64_t n, int64_t k, float alpha, float beta) {
    return !ta && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) && m >= 16 && m <= 96 && n >= 128 && k >= 128;
}

/* false: out of host memory */
bool hrt_sgemm_small(bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *c, int64_t ldc) {
    const int64_t mpan = (m + MR - 1) / MR;
    float *ap = hrt_aligned_array(64, mpan * MR * k, sizeof(float));
    if (!ap) return false;
    for (int64_t ip = 0; ip < mpan; ip++) { /* A's 6-row panels, K x MR (rows past M zero) */
        float *d = ap + ip * MR * k;
        for (int64_t r = 0; r < MR; r++) {
            int64_t i = ip * MR + r;
            if (i < m) {
                const float *ar = a + i * lda;
                for (int64_t kk = 0; kk < k; kk++) d[kk * MR + r] = ar[kk];
            } else {
                for (int64_t kk = 0; kk < k; kk++) d[kk * MR + r] = 0.0f;
            }
        }
    }
    gs_ctx g = {tb, beta == 1.0f, m, n, k, lda, ldb, ldc, (n + NR - 1) / NR, GS_PANELS, a, b, c, ap};
    /* items of up to 4 panels; at least 4 items a thread when the columns allow */
    int64_t want = 4 * (int64_t)hrt_num_threads();
    while (g.per_item > 1 && (g.npan + g.per_item - 1) / g.per_item < want) g.per_item /= 2;
    int64_t items = (g.npan + g.per_item - 1) / g.per_item;
    hrt_parallel_for(items, 1, gs_items, &g);
    free(ap);
    return true;
}

/* ------------------------------------------------------- constant B packed once
 * A weight op(B)[K, N] packed when a graph loads (graph.c, aiogeGraphPackWeights): per 16-column
 * panel, K x NR floats (columns past N zero), panel after panel.  A K block of a panel is the
 * contiguous kc x NR slice the micro-kernel reads, so a call packs nothing of B; A is read in place
 * (ukernel_a: MLAS's sgemm kernels read A unpacked too). */
struct hrt_sgemm_pb {
    int64_t n, k, npan;
    size_t bytes;
    float *p;
};

static _Atomic int64_t pb_packs; /* packings done (a test checks a model packs once) */

int64_t hrt_sgemm_pb_count(void) { return pb_packs; }

void hrt_packed_weight_counted(void) { pb_packs++; }

size_t hrt_sgemm_pb_bytes(const hrt_sgemm_pb *pb) { return pb ? pb->bytes : 0; }
int64_t hrt_sgemm_pb_n(const hrt_sgemm_pb *pb) { return pb->n; }
int64_t hrt_sgemm_pb_k(const hrt_sgemm_pb *pb) { return pb->k; }

void hrt_sgemm_pb_free(hrt_sgemm_pb *pb) {
    if (!pb) return;
    free(pb->p);
    free(pb);
}

typedef struct {
    gs_ctx g;
    float *p;
} pack_job;

/* panels per pool chunk: about 256 KB of packed B each (small weights: one chunk, no hand-off) */
#define PACK_GRAIN(k) ((int64_t)(65536 / ((k) * NR)) + 1)

static void pack_panels(void *vp, int64_t p0, int64_t p1) {
    const pack_job *j = vp;
    gs_pack(&j->g, 0, j->g.k, p0, p1, j->p + p0 * j->g.k * NR);
}

hrt_sgemm_pb *hrt_sgemm_pack_b(bool tb, int64_t n, int64_t k, const float *b, int64_t ldb) {
    if (n <= 0 || k <= 0 || !b) return NULL;
    hrt_sgemm_pb *pb = calloc(1, sizeof *pb);
    if (!pb) return NULL;
    pb->n = n;
    pb->k = k;
    pb->npan = (n + NR - 1) / NR;
    pb->p = hrt_big_array(pb->npan * k * NR, sizeof(float));
    if (!pb->p) {
        free(pb);
        return NULL;
    }
    pb->bytes = sizeof(float) * (size_t)(pb->npan * k * NR);
    /* gs_pack over the whole K (its layout: k x NR per panel), panel ranges spread over the pool:
     * B's rows are read contiguously across a range's panels (one panel at a time read a 64-byte
     * line per row of B: 411 MB of vgg19's first FC packed at 0.9 GB/s) */
    pack_job j = {{tb, false, 0, n, k, 0, ldb, 0, pb->npan, 1, NULL, b, NULL, NULL}, pb->p};
    hrt_parallel_for(pb->npan, PACK_GRAIN(k), pack_panels, &j);
    atomic_fetch_add(&pb_packs, 1);
    return pb;
}

/* Whether pb holds op(B) as B is now (tb / b / ldb as hrt_sgemm_pack_b took them): the panels
 * compared with B's values bit for bit (NaNs too), panel ranges over the pool.  The pack cache
 * (packcache.c) asks it only of an entry packed from the same address and layout, so a compile
 * that finds no such entry reads its weights once, to pack them. */
typedef struct {
    const hrt_sgemm_pb *pb;
    bool tb;
    const float *b;
    int64_t ldb;
    _Atomic bool differs;
} same_job;

static void same_panels(void *vp, int64_t p0, int64_t p1) {
    same_job *j = vp;
    const hrt_sgemm_pb *pb = j->pb;
    const int64_t k = pb->k;
    for (int64_t pp = p0; pp < p1 && !atomic_load_explicit(&j->differs, memory_order_relaxed); pp++) {
        const int64_t c0 = pp * NR, nj = pb->n - c0 < NR ? pb->n - c0 : NR;
        const float *d = pb->p + pp * k * NR;
        bool same = true;
        if (j->tb) { /* op(B)[kk][c0 + jj] = B[c0 + jj][kk]: nj rows of B read side by side */
            for (int64_t kk = 0; kk < k && same; kk++)
                for (int64_t jj = 0; jj < nj; jj++) {
                    uint32_t x, y;
                    memcpy(&x, d + kk * NR + jj, sizeof x);
                    memcpy(&y, j->b + (c0 + jj) * j->ldb + kk, sizeof y);
                    same &= x == y;
                }
        } else {
            for (int64_t kk = 0; kk < k && same; kk++) same = !memcmp(d + kk * NR, j->b + kk * j->ldb + c0, sizeof(float) * (size_t)nj);
        }
        if (!same) atomic_store_explicit(&j->differs, true, memory_order_relaxed);
    }
}

bool hrt_sgemm_pb_holds(const hrt_sgemm_pb *pb, bool tb, const float *b, int64_t ldb) {
    same_job j = {pb, tb, b, ldb, false};
    hrt_parallel_for(pb->npan, PACK_GRAIN(pb->k), same_panels, &j);
    return !atomic_load(&j.differs);
}

/* the epilogue as the kernels read it: scale and bias on the accumulators, Relu / Clip (inl) too;
 * tile: Sigmoid / Tanh / Gelu / GeluTanh / Swish / HardSwish (K_ACT_INL_*), run over each stored MR x NR tile while it is
 * in L1 (PB_FN(act_tile)); post: another activation (LeakyRelu), run over a block's stored rows */
typedef struct {
    bool scaled;
    float scale;
    const float *bias;
    int inl, tile;
    float lo, hi;
    const k_act *act, *post;
} pb_epi;

/* the activations as the Sigmoid / Tanh / Gelu ops compute them (unary.c: kmath.h's functions), one
 * element: over a tile's 16-float rows GCC vectorises them.  The tanh Gelu as x * sigmoid(2z), as
 * the Gelu op, not 0.5 x (1 + tanh(z)): one exp and no tanh polynomial (16 x 32 x 128 + bias, one
 * thread: 6.7 -> 5.6-6.0 us a call, the product alone 1.9) */
static inline __attribute__((always_inline)) float pb_act1(int kind, float x) {
    switch (kind) {
    case K_ACT_INL_SIGMOID: return k_sigmoidf(x);
    case K_ACT_INL_TANH: return k_tanhf(x);
    case K_ACT_INL_GELU: return 0.5f * x * (1.0f + k_erff(x * 0.70710678118654752f));
    case K_ACT_INL_SWISH: return k_swishf(x);
    case K_ACT_INL_HARD_SWISH: return k_hard_swishf(x);
    default: return x * k_sigmoidf(1.5957691216057308f * (x + 0.044715f * x * x * x));
    }
}

typedef struct {
    int64_t m, lda, ldc, mc, per_item, ngroups;
    const pb_epi *epi; /* NULL: plain product */
    const float *a;
    const hrt_sgemm_pb *pb;
    float *c;
} pb_ctx;

/* floats of A (rows x K, 128 KB) that stay in L2 while a block's panels stream past: a block that
 * small runs panel by panel (pb_block).  8 x 768 x 3072 and 8 x 3072 x 768 took 0.75-0.85x the CPU
 * time of K blocks outermost (with PB_PF), 64-128 rows unchanged. */
#define PB_A_L2 (32 * 1024)

/* the kernel families' vectors: 8 lanes (AVX2, SSE pairs in a portable build) and 16 (AVX-512, or
 * pairs of ymm in the avx2-w16 family); loaded and stored through memcpy (any alignment) */
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
#define PB_LD(p) __extension__({ PB_V v_; memcpy(&v_, (p), sizeof v_); v_; })
#define PB_ST(p, v)                                                                                    \
    do {                                                                                               \
        PB_V v_ = (v);                                                                                 \
        memcpy((p), &v_, sizeof v_);                                                                   \
    } while (0)

static bool pb_epi_of(const hrt_sgemm_ep *ep, pb_epi *e) {
    if (!ep) return false;
    const k_act *act = ep->act && ep->act->code != K_ACT_NONE ? ep->act : NULL;
    const int inl = act ? act->inl : 0;
    const bool tile = inl >= K_ACT_INL_SIGMOID && inl <= K_ACT_INL_HARD_SWISH;
    *e = (pb_epi){ep->scale != 1.0f, ep->scale, ep->bias, tile ? 0 : inl, tile ? inl : 0, act ? act->lo : 0.0f,
                  act ? act->hi : 0.0f, act, act && !inl ? act : NULL};
    return e->scaled || e->bias || e->act;
}

typedef struct {
    const pb_epi *e;
    int64_t n, ldc;
    float *c;
} epi_rows_ctx;

static void epi_rows(void *vp, int64_t r0, int64_t r1) {
    const epi_rows_ctx *x = vp;
    const pb_epi *e = x->e;
    for (int64_t r = r0; r < r1; r++) {
        float *row = x->c + r * x->ldc;
        if (e->scaled)
            for (int64_t j = 0; j < x->n; j++) row[j] *= e->scale;
        if (e->bias)
            for (int64_t j = 0; j < x->n; j++) row[j] += e->bias[j];
        if (e->act) k_act_tile(e->act, row, x->n);
    }
}

void hrt_sgemm_ep_apply(const hrt_sgemm_ep *ep, int64_t m, int64_t n, float *c, int64_t ldc) {
    pb_epi e;
    if (m <= 0 || n <= 0 || !pb_epi_of(ep, &e)) return;
    epi_rows_ctx x = {&e, n, ldc, c};
    hrt_parallel_for(m, K_GRAIN / n + 1, epi_rows, &x);
}

/* PB_PIN(v): v stays in a register.  Without it GCC folds the B panel's two loads into every
 * multiply-add as a memory operand (R rows: 2R loads a K step instead of 2), and a 4-row kernel
 * was bound by loads instead of multiply-adds.  (A 64-byte vector has no register without
 * AVX-512: avx2-w16 leaves it to the compiler.) */
#define PB_W 8
#define PB_V v8f
#define PB_VI v8i
#define PB_MR MR
#define PB_TARGET
#define PB_FN(x) x##_generic
#define PB_PIN(v) ((void)0)
#include "gemm_packed_tmpl.h"
#undef PB_TARGET
#undef PB_FN
#undef PB_PIN
#if defined(__x86_64__) && defined(__GNUC__)
#define PB_HAVE_X86 1
#define PB_TARGET __attribute__((target("avx2,fma")))
#define PB_FN(x) x##_avx2
#define PB_PIN(v) __asm__("" : "+x"(v))
#include "gemm_packed_tmpl.h"
#undef PB_TARGET
#undef PB_FN
#undef PB_PIN
#undef PB_W
#undef PB_V
#undef PB_VI
#undef PB_MR
/* 16 lanes: a panel's row is one zmm, so a K step is 1 load of B + 14 FMAs, each with its row's
 * scalar of A as a {1to16} memory operand: 14 accumulators + B = 15 of the 32 registers, the rest
 * the compiler's.  14 rows: well past the 8 accumulators two FMA pipes of latency 4 need, and 15
 * loads a 14 FMAs (2 loads and 2 FMAs a cycle: near FMA bound); more rows would be more streams of
 * A (each row read in place) and more of a ragged row panel wasted.  A 96-row block: 7 panels of
 * 13-14 rows. */
#define PB_W 16
#define PB_V v16f
#define PB_VI v16i
#define PB_MR 14
#define PB_TARGET __attribute__((target("avx512f,avx2,fma")))
#define PB_FN(x) x##_avx512
#define PB_PIN(v) __asm__("" : "+v"(v))
#include "gemm_packed_tmpl.h"
#undef PB_TARGET
#undef PB_FN
#undef PB_PIN
/* the same 16 x 14 source at avx2: only reachable by name (AIOGE_HOST_ISA=avx2-w16,
 * aiogeHostSetKernelFamily), so that a CPU without AVX-512 runs and tests the avx512 family's code */
#define PB_TARGET __attribute__((target("avx2,fma")))
#define PB_FN(x) x##_w16
#define PB_PIN(v) ((void)0)
#include "gemm_packed_tmpl.h"
#undef PB_TARGET
#undef PB_FN
#undef PB_PIN
#endif
#undef PB_W
#undef PB_V
#undef PB_VI
#undef PB_MR

/* Kernel families, best first; AIOGE_HOST_ISA=avx512|avx2|avx2-w16|generic forces one (an
 * unsupported or unknown name: the best the CPU has), aiogeHostSetKernelFamily changes it at run
 * time (tests).  avx2-w16 comes after avx2 (what it needs, avx2 has): never the default.  One switch
 * for the whole runtime: a family names the NCHWc8 kernels' family too (isa; nchwc.c asks). */
typedef struct {
    const char *name;
    hrt_range_fn items, gemv;
    hrt_isa isa; /* the 8-lane kernels' family (kernels/nchwc.h's NCHWc8 kernels): avx2-w16 runs avx2's */
} pb_family;

static const pb_family pb_families[] = {
#ifdef PB_HAVE_X86
    {"avx512", pb_items_avx512, pb_gemv_avx512, HRT_ISA_AVX512},
    {"avx2", pb_items_avx2, pb_gemv_avx2, HRT_ISA_AVX2},
    {"avx2-w16", pb_items_w16, pb_gemv_w16, HRT_ISA_AVX2},
#endif
    {"generic", pb_items_generic, pb_gemv_generic, HRT_ISA_GENERIC},
};
#define PB_NFAM ((int)(sizeof pb_families / sizeof pb_families[0]))

/* a family's code runs on this CPU (the avx512 family's zmm instructions run nowhere else) */
static bool pb_supported(const pb_family *f) {
#ifdef PB_HAVE_X86
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (f->items == pb_items_avx512) return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
    if (f->items == pb_items_avx2 || f->items == pb_items_w16) return avx2;
#endif
    (void)f;
    return true;
}

/* the family named `name` if the CPU runs it; NULL/""/"auto" or no match: the best supported */
static const pb_family *pb_choose(const char *name, bool *found) {
    *found = false;
    if (name && *name && strcmp(name, "auto") != 0)
        for (int i = 0; i < PB_NFAM; i++)
            if (strcmp(pb_families[i].name, name) == 0 && pb_supported(&pb_families[i])) {
                *found = true;
                return &pb_families[i];
            }
    for (int i = 0; i < PB_NFAM; i++)
        if (pb_supported(&pb_families[i])) return &pb_families[i];
    return &pb_families[PB_NFAM - 1];
}

static _Atomic(const pb_family *) pb_fam;

static const pb_family *pb_family_now(void) {
    const pb_family *f = atomic_load_explicit(&pb_fam, memory_order_acquire);
    if (!f) {
        bool found;
        f = pb_choose(getenv("AIOGE_HOST_ISA"), &found);
        atomic_store_explicit(&pb_fam, f, memory_order_release);
    }
    return f;
}

const char *aiogeHostKernelFamily(void) { return pb_family_now()->name; }

hrt_isa hrt_kernel_isa(void) { return pb_family_now()->isa; }

const char *aiogeHostNchwcKernelFamily(void) {
    static const char *const names[] = {"generic", "avx2", "avx512"};
    return names[pb_family_now()->isa];
}

const char *aiogeHostKernelFamilyAt(int i, int *supported) {
    if (i < 0 || i >= PB_NFAM) return NULL;
    if (supported) *supported = pb_supported(&pb_families[i]);
    return pb_families[i].name;
}

aclError aiogeHostSetKernelFamily(const char *name) {
    bool found;
    const pb_family *f = pb_choose(name, &found);
    if (name && *name && strcmp(name, "auto") != 0 && !found)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostSetKernelFamily",
                         "kernel family '%s' is unknown or this CPU cannot run it", name);
    atomic_store_explicit(&pb_fam, f, memory_order_release);
    return ACL_SUCCESS;
}

/* Above this many rows and bytes of B the unpacked route (OpenBLAS over B in place, tiled on the
 * pool) is taken: the packed kernel's row blocks each stream all of B, and a B far past L2 read
 * again per 96 rows lost to OpenBLAS's blocking (512 x 768 x 3072: 1.25x the CPU time) while
 * 512 x 784 x 512 (1.6 MB) gained (0.88x). */
#define PB_BIG_M 96
#define PB_BIG_B_BYTES (4 << 20)

/* C[M, N] = epilogue(A[M, K] . op(B)) from B packed by hrt_sgemm_pack_b (A not transposed);
 * b / tb / ldb: op(B) unpacked, for the big shapes above */
bool hrt_sgemm_packed_prefers_blas(int64_t m, const hrt_sgemm_pb *pb) {
    bool unpacked = m > PB_BIG_M && pb->bytes > PB_BIG_B_BYTES;
#if !defined(__AVX2__)
    /* a portable build's own vector code (SSE pairs) measured 13-50x the AVX2 family's CPU time:
     * where that is the family, OpenBLAS (which picks its kernels at run time) does the product */
    unpacked |= pb_family_now()->items == pb_items_generic;
#endif
    return unpacked;
}

aclError hrt_sgemm_packed_run(int64_t m, bool ta, const float *a, int64_t lda, const hrt_sgemm_pb *pb, const hrt_sgemm_ep *ep,
                              float *c, int64_t ldc) {
    if (m <= 0) return ACL_SUCCESS;
    if (ta) { /* A[K, M] -> row-major [M, K] scratch (M x K: small next to the product) */
        const int64_t k = pb->k;
        float *at = malloc(sizeof(float) * (size_t)(m * k));
        if (!at) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "packed GEMM: out of host memory for op(A)");
        for (int64_t kk = 0; kk < k; kk++)
            for (int64_t i = 0; i < m; i++) at[i * k + kk] = a[kk * lda + i];
        aclError rc = hrt_sgemm_packed_run(m, false, at, k, pb, ep, c, ldc);
        free(at);
        return rc;
    }
    const pb_family *f = pb_family_now();
    pb_epi epi;
    pb_ctx g = {m, lda, ldc, m, 1, pb->npan, pb_epi_of(ep, &epi) ? &epi : NULL, a, pb, c};
    const int64_t threads = hrt_num_threads();
    if (m == 1) {
        /* ~64K multiply-adds a chunk */
        int64_t grain = (1 << 16) / (pb->k * NR) + 1;
        hrt_parallel_for(pb->npan, grain, f->gemv, &g);
        return ACL_SUCCESS;
    }
    /* row blocks of up to 96 rows (their kc-wide slice of A: 96 KB, L2), column groups of up to 8
     * panels; at least 4 items a thread when the shape allows */
    g.mc = m <= 96 ? m : 96;
    int64_t mblocks = (m + g.mc - 1) / g.mc;
    g.per_item = 8;
    while (g.per_item > 1 && mblocks * ((pb->npan + g.per_item - 1) / g.per_item) < 4 * threads) g.per_item /= 2;
    g.ngroups = (pb->npan + g.per_item - 1) / g.per_item;
    /* grain: ~1M multiply-adds a chunk */
    double per = (double)g.mc * (double)(g.per_item * NR) * (double)pb->k;
    int64_t grain = (int64_t)((1 << 20) / per) + 1;
    hrt_parallel_for(mblocks * g.ngroups, grain, f->items, &g);
    return ACL_SUCCESS;
}

int64_t aiogeHostPackedWeightCount(void) { return hrt_sgemm_pb_count(); }
