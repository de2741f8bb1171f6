/* Pooling: MaxPoolV3, AvgPoolV2 (ksize/strides in data_format order,
 * padding_mode CALCULATED/SAME/VALID, pads [top, bottom, left, right],
 * global_pooling, ceil_mode; AvgPoolV2 exclusive and divisor_override) and
 * TF-style MaxPool / AvgPool (padding "SAME"/"VALID", default NHWC).
 *
 * NCHW works plane by plane: for each output row, every valid input row of
 * the window is folded into an accumulator row (vectorised over output
 * columns when the stride is 1); NHWC folds whole pixels vectorised over
 * channels.  Padding never contributes to a max; an average divides by
 * the number of valid elements (exclusive) or by the window clipped to the
 * padded extent (count_include_pad), as PyTorch/ONNX do.  ceil_mode drops
 * a last window that would start in the bottom/right padding.
 * float16/bfloat16 widen to float32; integers (max pool) compute exactly
 * in float64. */
#include "kcommon.h"
#include "kmath.h"

typedef struct {
    int64_t N, C, H, W, Ho, Wo;
    int64_t kh, kw, sh, sw, pt, pl, pb, pr;
    bool nhwc, is_max, exclusive;
    int64_t divisor;
    aclDataType dt;
    bool whole_rows;  /* NCHW, Wo == 1 and the window covers every column: reduce rows as one run */
    bool direct;      /* NCHW: per output row (pool_direct), not in separable whole-plane passes */
    bool prefetch;    /* direct, stride 2: planes of 128 KiB and up prefetch the next output row's input rows */
    int64_t *lohi;    /* NCHW: per kx, the output columns [lo, hi) whose window column is inside the row */
    int64_t edge_lo, edge_hi; /* NCHW: columns [edge_lo, edge_hi) have every kx inside the row */
    int32_t *count;   /* average: the divisor of each output of a plane (Ho x Wo) */
} pl_plan;

typedef struct {
    const pl_plan *p;
    const void *x;
    void *y;
    _Atomic int failed; /* a worker could not get its row buffers */
} pl_ctx;

/* NaN-propagating max as a bitwise select (kmath.h), so the row loops vectorise */
static inline float k_row_max_f32(const float *x, int64_t n) { return k_row_maxf(x, n); }
static inline double k_row_max_f64(const double *x, int64_t n) { return k_row_maxd(x, n); }
static inline float pmax_f32(float a, float b) { return k_maxf(a, b); }
static inline double pmax_f64(double a, double b) { return k_maxd(a, b); }

/* float32 NCHW at strides 1 and 2, directly: each plane's rows are folded per output row: the
 * window's input rows first (vertically, 8 columns a vector) into a scratch row whose border columns
 * hold the identity (-inf for a max, 0 for a sum; stride 2 stores the row split into its even and odd
 * columns), then 8 outputs take the kw taps of that row with no edge cases (one plain load a tap) and
 * are stored once, PV_ROWS output rows a block; rows outside the input are skipped (an average divides
 * by its count).  A max folds with vmaxps while an unordered compare of each value folded watches for
 * NaN; from the row where one shows, the plane folds with the NaN-propagating select (k_maxf's rule:
 * four instructions a fold in a dependency chain twice as long).  (A compare pass over the plane
 * before the folds, the whole plane's folded rows between the passes (out to L2) and stride 2's two
 * loads and three shuffles a tap: 1.2-1.6x this kernel's time.  Every tap of every window row from a
 * padded copy of the plane: 2-3x onnxruntime's CPU time on 3x3 stride 2.  The separable passes of
 * pool_plane, which now run only strides above 2 and float64, fold with a scalar max and per-row
 * calls.) */
#if K_VL == 8
#include <immintrin.h>

static inline k_vf pv_ld(const float *q) {
    k_vf v;
    memcpy(&v, q, sizeof v);
    return v;
}
/* NaN-propagating max as k_maxf(x, acc), lane-wise */
static inline k_vf pv_max(k_vf x, k_vf acc) {
    k_vi m = (x > acc) | (x != x);
    return (k_vf)((m & (k_vi)x) | (~m & (k_vi)acc));
}

/* the fold of a plane: a sum, a max of a plane without NaN (vmaxps: x > acc ? x : acc, one
 * instruction) or the NaN-propagating select above (four, in a chain twice as long) */
enum { PV_SUM, PV_MAX, PV_MAX_NAN };
static inline __attribute__((always_inline)) k_vf pv_op(int mode, k_vf x, k_vf acc) {
    if (mode == PV_SUM) return acc + x;
    if (mode == PV_MAX) return (k_vf)_mm256_max_ps((__m256)x, (__m256)acc);
    return pv_max(x, acc);
}

/* padded row width: every column a (rounded-up) row of output vectors reads, plus 8 of slack */
static int64_t pool_direct_wp(const pl_plan *p) {
    int64_t wo8 = (p->Wo + 7) / 8 * 8, need = (wo8 - 1) * p->sw + p->kw + 8, wp = p->pl + p->W;
    return ((need > wp ? need : wp) + 9) / 2 * 2; /* even: stride 2 splits each row in halves */
}

/* one output row's window rows folded (vertically, 8 columns a vector) into the scratch row vr (its input
 * columns start at padded column pl).  Stride 1 stores the row as it is; stride 2 stores it split, the even
 * padded columns in vr[0, Wp/2) and the odd ones in vr[Wp/2, Wp), so each tap of the horizontal pass is one
 * plain load (16 columns folded, then deinterleaved: four shuffles, not two loads and three shuffles per
 * tap). */
static inline __attribute__((always_inline)) bool pool_vrow_f32(const pl_plan *p, const float *x0, int64_t nr, float *vr,
                                                                  int64_t Wp, int mode) {
    const int64_t W = p->W, pl = p->pl;
    const bool mx = p->is_max;
    __m256 u = _mm256_setzero_ps(); /* PV_MAX: a NaN among the values folded (vmaxps drops it) */
    bool un = false;
    if (nr <= 0) {
        const float id = mx ? -__builtin_inff() : 0.0f;
        if (p->sw == 2)
            for (int64_t j = 0; j < W; j++) vr[((pl + j) & 1) * (Wp / 2) + (pl + j) / 2] = id;
        else
            for (int64_t j = 0; j < W; j++) vr[pl + j] = id;
        return false;
    }
#define PV_VCOL(J)                                                                           \
    ({                                                                                       \
        k_vf a_ = pv_ld(x0 + (J));                                                           \
        if (mode == PV_MAX && nr == 1) u = _mm256_or_ps(u, _mm256_cmp_ps((__m256)a_, (__m256)a_, _CMP_UNORD_Q)); \
        for (int64_t iy = 1; iy < nr; iy++) {                                                \
            k_vf t_ = pv_ld(x0 + iy * W + (J));                                              \
            if (mode == PV_MAX) u = _mm256_or_ps(u, _mm256_cmp_ps((__m256)t_, (__m256)a_, _CMP_UNORD_Q)); \
            a_ = pv_op(mode, t_, a_);                                                        \
        }                                                                                    \
        a_;                                                                                  \
    })
    if (p->sw == 2) {
        float *ev = vr, *od = vr + Wp / 2;
        int64_t j = 0, done = 0; /* columns [0, done) stored */
        const int64_t j0 = pl & 1;   /* the first column at an even padded column */
        if (W - j0 >= 16) {
            const bool pf = p->prefetch;
            const int64_t sh = p->sh;
#define PV_S2(J)                                                                                                  \
    do {                                                                                                          \
        if (pf) /* the next output row's new input rows: a plane out of cache streams from memory */            \
            for (int64_t q = 0; q < sh; q++) __builtin_prefetch(x0 + (nr + q) * W + (J));                      \
        __m256 a = (__m256)PV_VCOL(J), b = (__m256)PV_VCOL((J) + 8);                                           \
        __m256 e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8)); \
        __m256 o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8)); \
        memcpy(ev + (pl + (J)) / 2, &e, sizeof e);                                                             \
        memcpy(od + (pl + (J)) / 2, &o, sizeof o);                                                             \
    } while (0)
            for (j = j0; j + 16 <= W; j += 16) PV_S2(j);
            done = j;
            const int64_t jl = W - 16 - ((pl + W - 16) & 1); /* the last 16 overlap the ones before (same parity) */
            if (jl + 16 > done) {
                PV_S2(jl);
                done = jl + 16;
            }
#undef PV_S2
            for (int64_t c = 0; c < j0; c++) { /* column 0 when pl is odd */
                float acc = x0[c];
                for (int64_t iy = 1; iy < nr; iy++) acc = mx ? pmax_f32(x0[iy * W + c], acc) : acc + x0[iy * W + c];
                od[(pl + c) / 2] = acc;
                un |= acc != acc;
            }
        }
        for (j = done; j < W; j++) {
            float acc = x0[j];
            for (int64_t iy = 1; iy < nr; iy++) acc = mx ? pmax_f32(x0[iy * W + j], acc) : acc + x0[iy * W + j];
            vr[((pl + j) & 1) * (Wp / 2) + (pl + j) / 2] = acc;
            un |= acc != acc;
        }
        return mode == PV_MAX && (un || _mm256_movemask_ps(u));
    }
    float *vi = vr + pl;
    int64_t j = 0;
    for (;; j += 8) { /* the last vector overlaps the one before: no scalar tail when W >= 8 */
        if (j + 8 > W) {
            if (j == W || W < 8) break;
            j = W - 8;
        }
        k_vf acc = PV_VCOL(j);
        memcpy(vi + j, &acc, sizeof acc);
        if (j + 8 == W) {
            j = W;
            break;
        }
    }
#undef PV_VCOL
    for (; j < W; j++) {
        float acc = x0[j];
        for (int64_t iy = 1; iy < nr; iy++) acc = mx ? pmax_f32(x0[iy * W + j], acc) : acc + x0[iy * W + j];
        vi[j] = acc;
        un |= acc != acc;
    }
    return mode == PV_MAX && (un || _mm256_movemask_ps(u));
}

/* pool_vrow_f32 with the window's row count a constant for the common windows (the fold unrolled) */
static inline __attribute__((always_inline)) bool pool_vrow_nr(const pl_plan *p, const float *x0, int64_t nr, float *vr,
                                                                 int64_t Wp, int mode) {
    switch (nr) {
    case 2: return pool_vrow_f32(p, x0, 2, vr, Wp, mode);
    case 3: return pool_vrow_f32(p, x0, 3, vr, Wp, mode);
    default: return pool_vrow_f32(p, x0, nr, vr, Wp, mode);
    }
}

/* the kw taps over the folded rows, 8 outputs a register, each stored once */
static inline __attribute__((always_inline)) void pool_hpass_f32(const pl_plan *p, float *yp, const float *vr, int64_t Wp,
                                                                   int64_t oy0, int64_t oy1, int64_t kw, int mode) {
    const int64_t Wo = p->Wo, sw = p->sw;
    const bool mx = p->is_max;
    for (int64_t oy = oy0; oy < oy1; oy++) {
        float *yr = yp + oy * Wo;
        const float *r = vr + (oy - oy0) * Wp;
        /* below the plane's last row a short last vector is stored whole when the next row, which
         * overwrites the rest, is long enough to hold it (else it would reach the next plane, another
         * thread's, or past the output's end) */
        const bool spill = oy + 1 < p->Ho;
        for (int64_t ox = 0; ox < Wo; ox += 8) {
            k_vf acc;
            if (sw == 1) {
                acc = pv_ld(r + ox);
                for (int64_t kx = 1; kx < kw; kx++) acc = pv_op(mode, pv_ld(r + ox + kx), acc);
            } else {
                acc = pv_ld(r + ox); /* padded column 2 ox + kx: the even or odd half, at ox + kx / 2 */
                for (int64_t kx = 1; kx < kw; kx++) acc = pv_op(mode, pv_ld(r + (kx & 1) * (Wp / 2) + ox + kx / 2), acc);
            }
            const int64_t n = Wo - ox < 8 && !(spill && ox + 8 <= 2 * Wo) ? Wo - ox : 8;
            /* a short vector's lanes [0, n) by masked loads and stores (a loop over its lanes kept the
             * register on the stack, a store and a reload for every vector, and called memcpy) */
            const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            if (!mx) {
                k_vi c;
                if (n == 8) memcpy(&c, p->count + oy * Wo + ox, sizeof c); /* fixed size: no call */
                else
                    c = (k_vi)_mm256_blendv_epi8(_mm256_set1_epi32(1),
                                                  _mm256_maskload_epi32((const int *)p->count + oy * Wo + ox, in), in);
                acc = acc / __builtin_convertvector(c, k_vf);
                acc = (k_vf)((k_vi)acc & (c > 0)); /* an empty window: 0 */
            }
            if (n == 8) memcpy(yr + ox, &acc, sizeof acc);
            else _mm256_maskstore_ps(yr + ox, in, (__m256)acc);
        }
    }
}

/* the taps with the window's column count a constant for the common windows (unrolled) */
static inline __attribute__((always_inline)) void pool_hpass_kw(const pl_plan *p, float *yp, const float *vr, int64_t Wp,
                                                                  int64_t oy0, int64_t oy1, int mode) {
    switch (p->kw) {
    case 2: pool_hpass_f32(p, yp, vr, Wp, oy0, oy1, 2, mode); break;
    case 3: pool_hpass_f32(p, yp, vr, Wp, oy0, oy1, 3, mode); break;
    default: pool_hpass_f32(p, yp, vr, Wp, oy0, oy1, p->kw, mode);
    }
}

enum { PV_ROWS = 8 }; /* output rows a block: their folded rows stay in L1 between the two passes */

/* a plane in blocks of PV_ROWS output rows: every output row's window rows folded first (vertical), then the kw
 * taps over the folded rows (the taps' unaligned loads read stores that have retired: folding and tapping a row
 * at a time made each tap wait on a store it straddled; a whole plane's folded rows went out to L2 between the
 * passes).  A max folds with vmaxps and an unordered compare of what it folds (no pass over the plane before);
 * the row where a NaN shows is folded again, and the rows after it and the taps are folded, with the
 * NaN-propagating select. */
static void pool_direct_f32(const pl_plan *p, const float *xp, float *yp, float *vr, int64_t Wp) {
    const int64_t H = p->H, W = p->W;
    bool nan = false;
    for (int64_t b0 = 0; b0 < p->Ho; b0 += PV_ROWS) {
        const int64_t b1 = b0 + PV_ROWS < p->Ho ? b0 + PV_ROWS : p->Ho;
        for (int64_t oy = b0; oy < b1; oy++) {
            int64_t hs = oy * p->sh - p->pt, he = hs + p->kh;
            int64_t h0 = hs < 0 ? 0 : hs, h1 = he > H ? H : he;
            const float *x0 = xp + h0 * W;
            float *v = vr + (oy - b0) * Wp;
            if (!p->is_max) pool_vrow_nr(p, x0, h1 - h0, v, Wp, PV_SUM);
            else if (nan || (nan = pool_vrow_nr(p, x0, h1 - h0, v, Wp, PV_MAX)))
                pool_vrow_f32(p, x0, h1 - h0, v, Wp, PV_MAX_NAN);
        }
        if (!p->is_max) pool_hpass_kw(p, yp, vr, Wp, b0, b1, PV_SUM);
        else if (nan) pool_hpass_kw(p, yp, vr, Wp, b0, b1, PV_MAX_NAN);
        else pool_hpass_kw(p, yp, vr, Wp, b0, b1, PV_MAX);
    }
}

static void pool_direct_chunk(void *vp, int64_t b0, int64_t b1) {
    pl_ctx *c = vp;
    const pl_plan *p = c->p;
    const int64_t Wp = pool_direct_wp(p);
    const size_t n = (size_t)(PV_ROWS * Wp + 8);
    float stackbuf[4096]; /* a block's folded rows: no heap block per chunk for rows up to ~500 columns */
    float *vr = n <= 4096 ? stackbuf : malloc(sizeof(float) * n);
    if (!vr) {
        c->failed = 1;
        return;
    }
    const float id = p->is_max ? -__builtin_inff() : 0.0f;
    for (size_t i = 0; i < n; i++) vr[i] = id; /* the border columns stay the identity */
    for (int64_t pc = b0; pc < b1; pc++)
        pool_direct_f32(p, (const float *)c->x + pc * p->H * p->W, (float *)c->y + pc * p->Ho * p->Wo, vr, Wp);
    if (vr != stackbuf) free(vr);
}

/* plane_reduce_f32's sum in its order (lanes j and 8 + j of two vectors are its accumulators acc[j], then
 * added left to right, then the tail): the same bits, the 16 accumulators in two registers (the generic
 * loop kept them on the stack: 1.4x this time on 7x7 global average pools) */
static float pv_plane_sum(const float *x, int64_t n) {
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_add_ps(a, _mm256_loadu_ps(x + i));
        b = _mm256_add_ps(b, _mm256_loadu_ps(x + i + 8));
    }
    float t[16], s = 0;
    _mm256_storeu_ps(t, a);
    _mm256_storeu_ps(t + 8, b);
    for (int j = 0; j < 16; j++) s += t[j];
    for (; i < n; i++) s += x[i];
    return s;
}
#endif

#if K_VL == 8
#define pool_sum_f32 pv_plane_sum
#else
#define pool_sum_f32(x, n) 0.0f /* not reached: K_VL == 8 only */
#endif

#define POOL_IMPL(CT, SFX, NEG_INF)                                                                          \
    /* op over n contiguous values (n >= 1): independent lanes so the sum vectorises */                      \
    static CT plane_reduce_##SFX(const CT *x, int64_t n, bool is_max) {                                       \
        if (is_max) return k_row_max_##SFX(x, n);                                                              \
        if (K_VL == 8 && sizeof(CT) == sizeof(float)) return (CT)pool_sum_f32((const float *)(const void *)x, n); \
        CT acc[16] = {0};                                                                                     \
        int64_t i = 0;                                                                                        \
        for (; i + 16 <= n; i += 16)                                                                          \
            for (int j = 0; j < 16; j++) acc[j] += x[i + j];                                                  \
        CT s = 0;                                                                                             \
        for (int j = 0; j < 16; j++) s += acc[j];                                                             \
        for (; i < n; i++) s += x[i];                                                                         \
        return s;                                                                                             \
    }                                                                                                         \
    static inline void fill_##SFX(CT *x, int64_t n, CT v) {                                                 \
        for (int64_t i = 0; i < n; i++) x[i] = v;                                                             \
    }                                                                                                         \
    /* y[i] = op(y[i], x[i]) for i in [0, n) */                                                               \
    static inline void fold_##SFX(CT *restrict y, const CT *restrict x, int64_t n, bool is_max) {              \
        if (is_max)                                                                                           \
            for (int64_t i = 0; i < n; i++) y[i] = pmax_##SFX(x[i], y[i]);                                    \
        else                                                                                                  \
            for (int64_t i = 0; i < n; i++) y[i] += x[i];                                                     \
    }                                                                                                         \
    /* y[ox] = op(y[ox], t[ox * sw + off]) for ox in [lo, hi) */                                              \
    static inline void fold_strided_##SFX(CT *restrict y, const CT *restrict t, int64_t lo, int64_t hi,        \
                                          int64_t sw, int64_t off, bool is_max) {                             \
        const CT *tr = t + off;                                                                               \
        if (sw == 1) fold_##SFX(y + lo, tr + lo, hi - lo, is_max);                                            \
        else if (is_max && sw == 2)                                                                           \
            for (int64_t ox = lo; ox < hi; ox++) y[ox] = pmax_##SFX(tr[2 * ox], y[ox]);                       \
        else if (sw == 2)                                                                                     \
            for (int64_t ox = lo; ox < hi; ox++) y[ox] += tr[2 * ox];                                         \
        else if (is_max)                                                                                      \
            for (int64_t ox = lo; ox < hi; ox++) y[ox] = pmax_##SFX(tr[ox * sw], y[ox]);                      \
        else                                                                                                  \
            for (int64_t ox = lo; ox < hi; ox++) y[ox] += tr[ox * sw];                                        \
    }                                                                                                         \
    /* y[i] = op over taps t < nt of src[i + t * tstep + toff] for i in [0, n), where tap t is valid for   \
     * i in [lo_t, hi_t) = [max(0, -(t*tstep+toff)) rounded up to rstep, ...): the identity elsewhere.        \
     * Blocks of 512 outputs keep the accumulator in L1 across the taps. */                                   \
    static void fold_taps_##SFX(CT *restrict y, const CT *restrict src, int64_t n, int64_t src_n, int64_t nt, \
                                int64_t tstep, int64_t toff, int64_t rstep, bool mx, CT id) {                 \
        for (int64_t b0 = 0; b0 < n; b0 += 512) {                                                             \
            int64_t b1 = b0 + 512 < n ? b0 + 512 : n;                                                         \
            fill_##SFX(y + b0, b1 - b0, id);                                                                  \
            for (int64_t t = 0; t < nt; t++) {                                                                \
                int64_t off = t * tstep + toff;                                                               \
                int64_t lo = off < 0 ? (-off + rstep - 1) / rstep * rstep : 0;                                \
                int64_t hi = src_n - off;                                                                     \
                if (rstep > 1) hi = hi <= 0 ? 0 : hi / rstep * rstep;                                        \
                if (lo < b0) lo = b0;                                                                         \
                if (hi > b1) hi = b1;                                                                         \
                if (lo < hi) fold_##SFX(y + lo, src + lo + off, hi - lo, mx);                                 \
            }                                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
    /* One plane, in whole-plane passes where the strides allow (short rows made per-row loops cost more      \
     * than the arithmetic): V = the window rows folded (Ho x W), Y = V's window columns folded, then the    \
     * average's division.  A pass over a run of rows reads a shifted copy of the same plane. */             \
    static void pool_plane_##SFX(const pl_plan *p, const CT *xp, CT *yp, CT *v) {                             \
        const int64_t H = p->H, W = p->W, Ho = p->Ho, Wo = p->Wo;                                             \
        const bool mx = p->is_max;                                                                            \
        const CT id = mx ? NEG_INF : 0;                                                                       \
        if (p->whole_rows) { /* every window spans whole rows: one contiguous reduction per output */        \
            for (int64_t oy = 0; oy < Ho; oy++) {                                                             \
                int64_t hs = oy * p->sh - p->pt, he = hs + p->kh;                                             \
                int64_t h0 = hs < 0 ? 0 : hs, h1 = he > H ? H : he;                                           \
                yp[oy] = h1 > h0 ? plane_reduce_##SFX(xp + h0 * W, (h1 - h0) * W, mx) : id;                   \
            }                                                                                                 \
        } else {                                                                                              \
            /* rows: V[oy] = op over the window's valid input rows (whole rows: valid ranges are row-aligned) */ \
            if (p->sh == 1) {                                                                                 \
                fold_taps_##SFX(v, xp, Ho * W, H * W, p->kh, W, -p->pt * W, W, mx, id);                       \
            } else {                                                                                          \
                for (int64_t oy = 0; oy < Ho; oy++) {                                                         \
                    int64_t hs = oy * p->sh - p->pt, he = hs + p->kh;                                         \
                    int64_t h0 = hs < 0 ? 0 : hs, h1 = he > H ? H : he;                                       \
                    if (h1 <= h0) {                                                                           \
                        fill_##SFX(v + oy * W, W, id);                                                        \
                        continue;                                                                             \
                    }                                                                                         \
                    memcpy(v + oy * W, xp + h0 * W, sizeof(CT) * (size_t)W);                                  \
                    for (int64_t iy = h0 + 1; iy < h1; iy++) fold_##SFX(v + oy * W, xp + iy * W, W, mx);      \
                }                                                                                             \
            }                                                                                                 \
            /* columns: Y[oy][ox] = op over kx of V[oy][ox * sw + kx - pl], valid columns only */            \
            if (p->sw == 1 && Wo == W) {                                                                      \
                /* whole plane; the few edge columns whose window leaves the row read a neighbour row        \
                 * there, so they are recomputed below */                                                     \
                fold_taps_##SFX(yp, v, Ho * W, Ho * W, p->kw, 1, -p->pl, 1, mx, id);                          \
                for (int64_t oy = 0; oy < Ho; oy++)                                                           \
                    for (int64_t ox = 0; ox < Wo; ox++) {                                                     \
                        if (ox == p->edge_lo && ox < p->edge_hi) ox = p->edge_hi;                             \
                        if (ox >= Wo) break;                                                                  \
                        CT acc = id;                                                                          \
                        for (int64_t kx = 0; kx < p->kw; kx++) {                                              \
                            int64_t ix = ox + kx - p->pl;                                                     \
                            if (ix < 0 || ix >= W) continue;                                                  \
                            CT t = v[oy * W + ix];                                                            \
                            acc = mx ? pmax_##SFX(t, acc) : acc + t;                                          \
                        }                                                                                     \
                        yp[oy * Wo + ox] = acc;                                                               \
                    }                                                                                         \
            } else {                                                                                          \
                fill_##SFX(yp, Ho * Wo, id);                                                                  \
                for (int64_t oy = 0; oy < Ho; oy++)                                                           \
                    for (int64_t kx = 0; kx < p->kw; kx++)                                                    \
                        fold_strided_##SFX(yp + oy * Wo, v + oy * W, p->lohi[2 * kx], p->lohi[2 * kx + 1],     \
                                           p->sw, kx - p->pl, mx);                                            \
            }                                                                                                 \
        }                                                                                                     \
        if (!mx)                                                                                              \
            for (int64_t i = 0; i < Ho * Wo; i++) yp[i] = p->count[i] > 0 ? yp[i] / (CT)p->count[i] : (CT)0;  \
    }                                                                                                         \
    static void pool_nchw_##SFX(void *vp, int64_t b0, int64_t b1) {                                           \
        pl_ctx *c = vp;                                                                                       \
        const pl_plan *p = c->p;                                                                              \
        CT *v = malloc(sizeof(CT) * (size_t)(p->Ho * p->W + 1));                                              \
        if (!v) {                                                                                             \
            c->failed = 1;                                                                                    \
            return;                                                                                           \
        }                                                                                                     \
        for (int64_t pc = b0; pc < b1; pc++)                                                                  \
            pool_plane_##SFX(p, (const CT *)c->x + pc * p->H * p->W, (CT *)c->y + pc * p->Ho * p->Wo, v);     \
        free(v);                                                                                              \
    }                                                                                                         \
    static void pool_nhwc_##SFX(void *vp, int64_t b0, int64_t b1) {                                           \
        const pl_ctx *c = vp;                                                                                 \
        const pl_plan *p = c->p;                                                                              \
        int64_t C = p->C;                                                                                     \
        for (int64_t it = b0; it < b1; it++) { /* (n, oy) */                                                  \
            int64_t n = it / p->Ho, oy = it % p->Ho;                                                          \
            int64_t hs = oy * p->sh - p->pt, he = hs + p->kh;                                                 \
            int64_t h0 = hs < 0 ? 0 : hs, h1 = he > p->H ? p->H : he;                                         \
            for (int64_t ox = 0; ox < p->Wo; ox++) {                                                          \
                int64_t ws = ox * p->sw - p->pl, we = ws + p->kw;                                             \
                int64_t w0 = ws < 0 ? 0 : ws, w1 = we > p->W ? p->W : we;                                     \
                CT *yv = (CT *)c->y + ((n * p->Ho + oy) * p->Wo + ox) * C;                                    \
                for (int64_t ch = 0; ch < C; ch++) yv[ch] = p->is_max ? NEG_INF : 0;                          \
                for (int64_t iy = h0; iy < h1; iy++)                                                          \
                    for (int64_t ix = w0; ix < w1; ix++) {                                                    \
                        const CT *xv = (const CT *)c->x + ((n * p->H + iy) * p->W + ix) * C;                  \
                        if (p->is_max)                                                                        \
                            for (int64_t ch = 0; ch < C; ch++) yv[ch] = pmax_##SFX(xv[ch], yv[ch]);           \
                        else                                                                                  \
                            for (int64_t ch = 0; ch < C; ch++) yv[ch] += xv[ch];                              \
                    }                                                                                         \
                if (!p->is_max) {                                                                             \
                    int64_t cnt;                                                                              \
                    if (p->divisor) cnt = p->divisor;                                                         \
                    else if (p->exclusive) cnt = (h1 - h0) * (w1 - w0);                                       \
                    else                                                                                      \
                        cnt = ((he > p->H + p->pb ? p->H + p->pb : he) - hs) *                                \
                              ((we > p->W + p->pr ? p->W + p->pr : we) - ws);                                 \
                    CT inv = cnt > 0 ? (CT)1 / (CT)cnt : (CT)0;                                               \
                    for (int64_t ch = 0; ch < C; ch++) yv[ch] *= inv;                                         \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }

POOL_IMPL(float, f32, -__builtin_inff())
POOL_IMPL(double, f64, -__builtin_inf())

static aclError pl_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const pl_plan *p = k->plan;
    int64_t xn = k->in[0].numel, yn = k->out[0].numel;
    if (yn == 0) return ACL_SUCCESS;
    bool f32 = p->dt == ACL_FLOAT || k_is_half(p->dt), f64 = p->dt == ACL_DOUBLE;
    void *x = in[0], *y = out[0], *s = NULL;
    if (!f32 && !f64) { /* integers: exact in float64 */
        s = k_scratch(k, sizeof(double) * (size_t)(xn + yn));
        if (!s) return ACL_ERROR_RT_MEMORY_ALLOCATION;
        double *dx = s;
        for (int64_t i = 0; i < xn; i++) dx[i] = k_load_d(in[0], p->dt, i);
        x = dx;
        y = dx + xn;
        f64 = true;
    } else if (f32 && p->dt != ACL_FLOAT) {
        s = k_scratch(k, sizeof(float) * (size_t)(xn + yn));
        if (!s) return ACL_ERROR_RT_MEMORY_ALLOCATION;
        k_to_f32(in[0], p->dt, s, xn);
        x = s;
        y = (float *)s + xn;
    }
    pl_ctx c = {p, x, y, 0};
    int64_t work = (p->nhwc ? p->kh * p->kw * p->Wo * p->C : p->Ho * (p->kh * p->W + p->kw * p->Wo)) + 1;
    int64_t items = p->nhwc ? p->N * p->Ho : p->N * p->C;
    if (f64) hrt_parallel_for(items, K_GRAIN / work + 1, p->nhwc ? pool_nhwc_f64 : pool_nchw_f64, &c);
#if K_VL == 8
    else if (p->direct) hrt_parallel_for(items, K_GRAIN / (p->Ho * p->Wo * p->kh * p->kw / 4 + p->H * p->W + 1) + 1,
                                         pool_direct_chunk, &c);
#endif
    else hrt_parallel_for(items, K_GRAIN / work + 1, p->nhwc ? pool_nhwc_f32 : pool_nchw_f32, &c);
    if (c.failed) {
        free(s);
        return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
    }
    if (s) {
        if (p->dt == ACL_FLOAT16 || p->dt == ACL_BF16) {
            k_from_f32(y, p->dt, out[0], yn);
        } else if (!k_is_float(p->dt)) {
            for (int64_t i = 0; i < yn; i++) k_store_d(out[0], p->dt, i, ((double *)y)[i]);
        }
        free(s);
    }
    return ACL_SUCCESS;
}

/* output size and padding for one spatial dim */
static aclError pl_dim(const hrt_kernel *k, int mode, bool ceil_mode, int64_t in, int64_t kk, int64_t s, int64_t *pb_,
                       int64_t *pe_, int64_t *out) {
    int64_t pb = *pb_, pe = *pe_, o;
    if (mode == 1) { /* SAME */
        o = (in + s - 1) / s;
        int64_t tot = (o - 1) * s + kk - in;
        if (tot < 0) tot = 0;
        pb = tot / 2;
        pe = tot - pb;
    } else if (mode == 2) { /* VALID */
        pb = pe = 0;
        if (in < kk) o = 0;
        else o = (in - kk) / s + 1;
    } else {
        int64_t span = in + pb + pe - kk;
        if (span < 0)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: window %lld is larger than the padded input %lld",
                             k->op_name, (long long)kk, (long long)(in + pb + pe));
        o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
        if (ceil_mode && (o - 1) * s >= in + pb) o--;
    }
    *pb_ = pb;
    *pe_ = pe;
    *out = o;
    return ACL_SUCCESS;
}

static void pl_free(void *vp) {
    pl_plan *p = vp;
    free(p->lohi);
    free(p->count);
    free(p);
}

static aclError pl_compile(hrt_kernel *k, const aclopAttr *attrs) {
    const char *nm = k->op_name;
    bool is_max = strncmp(nm, "MaxPool", 7) == 0, tf = strcmp(nm, "MaxPool") == 0 || strcmp(nm, "AvgPool") == 0;
    aclError rc = hrt_expect_counts(k, 1, 1, 1);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    static const aclDataType fl[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE};
    static const aclDataType mx[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT8, ACL_UINT8, ACL_INT32, ACL_INT64};
    if ((rc = hrt_expect_dtype_in(k, x, "x", is_max ? mx : fl, is_max ? 8 : 4))) return rc;
    if ((rc = k_expect_out_dtype(k, 0, x->dtype))) return rc;
    if (x->ndim != 4) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must be 4-D, got rank %d", nm, x->ndim);
    pl_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int nhwc;
    int64_t ks[4], st[4], pads[4] = {0, 0, 0, 0};
    static const int64_t zeros[4] = {0, 0, 0, 0};
    bool global = false, ceil_mode = false, exclusive = true;
    int64_t divisor = 0;
    int mode = 0;
    const char *pm = NULL;
    if ((rc = k_layout(k, attrs, x, tf ? "NHWC" : "NCHW", &nhwc))) goto fail;
    if ((rc = k_attr_ints(k, attrs, "ksize", true, 4, NULL, ks, 4, NULL))) goto fail;
    if ((rc = k_attr_ints(k, attrs, "strides", true, 4, NULL, st, 4, NULL))) goto fail;
    if (tf) {
        rc = hrt_attr_get_string(k, attrs, "padding", true, NULL, &pm);
    } else {
        rc = hrt_attr_get_string(k, attrs, "padding_mode", false, "CALCULATED", &pm);
        if (!rc) rc = k_attr_ints(k, attrs, "pads", false, 4, zeros, pads, 4, NULL);
        if (!rc) rc = hrt_attr_get_bool(k, attrs, "global_pooling", false, &global);
        if (!rc) rc = hrt_attr_get_bool(k, attrs, "ceil_mode", false, &ceil_mode);
        if (!rc && !is_max) rc = hrt_attr_get_bool(k, attrs, "exclusive", true, &exclusive);
        if (!rc && !is_max) rc = hrt_attr_get_int(k, attrs, "divisor_override", false, 0, &divisor);
    }
    if (rc) goto fail;
    if (strcmp(pm, "CALCULATED") == 0 && !tf) mode = 0;
    else if (strcmp(pm, "SAME") == 0) mode = 1;
    else if (strcmp(pm, "VALID") == 0) mode = 2;
    else {
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: padding mode '%s' is not supported (%s)", nm, pm,
                       tf ? "SAME, VALID" : "CALCULATED, SAME, VALID");
        goto fail;
    }
    p->nhwc = nhwc;
    p->N = x->dims[0];
    p->C = nhwc ? x->dims[3] : x->dims[1];
    p->H = nhwc ? x->dims[1] : x->dims[2];
    p->W = nhwc ? x->dims[2] : x->dims[3];
    int hi = nhwc ? 1 : 2, wi = nhwc ? 2 : 3;
    p->kh = ks[hi];
    p->kw = ks[wi];
    p->sh = st[hi];
    p->sw = st[wi];
    if (global) {
        p->kh = p->H;
        p->kw = p->W;
        p->sh = p->sw = 1;
        mode = 2;
    }
    if (p->kh < 1 || p->kw < 1 || p->sh < 1 || p->sw < 1 || pads[0] < 0 || pads[1] < 0 || pads[2] < 0 || pads[3] < 0) {
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: ksize and strides must be >= 1 and pads >= 0", nm);
        goto fail;
    }
    int64_t big = p->kh > p->kw ? p->kh : p->kw;
    for (int i = 0; i < 4; i++) big = pads[i] > big ? pads[i] : big;
    if (p->sh > big) big = p->sh;
    if (p->sw > big) big = p->sw;
    if (big > K_MAX_WINDOW) {
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: ksize, strides and pads must be <= %lld, got %lld", nm,
                       (long long)K_MAX_WINDOW, (long long)big);
        goto fail;
    }
    if (divisor < 0) {
        rc = hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: divisor_override must be >= 0", nm);
        goto fail;
    }
    int64_t pt = pads[0], pb = pads[1], pl = pads[2], pr = pads[3];
    if ((rc = pl_dim(k, mode, ceil_mode, p->H, p->kh, p->sh, &pt, &pb, &p->Ho))) goto fail;
    if ((rc = pl_dim(k, mode, ceil_mode, p->W, p->kw, p->sw, &pl, &pr, &p->Wo))) goto fail;
    p->pt = pt;
    p->pl = pl;
    p->pb = pb;
    p->pr = pr;
    p->is_max = is_max;
    p->exclusive = exclusive;
    p->divisor = divisor;
    p->dt = x->dtype;
    int64_t od[4];
    if (nhwc) od[0] = p->N, od[1] = p->Ho, od[2] = p->Wo, od[3] = p->C;
    else od[0] = p->N, od[1] = p->C, od[2] = p->Ho, od[3] = p->Wo;
    if ((rc = hrt_expect_same_shape(k, &k->out[0], od, 4, 0))) goto fail;
    if (!nhwc) {
        p->whole_rows = p->Wo == 1 && p->kw - p->pl >= p->W;
        p->lohi = malloc(sizeof(int64_t) * 2 * (size_t)p->kw);
        if (!p->lohi) {
            rc = hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
            goto fail;
        }
        p->edge_lo = 0;
        p->edge_hi = p->Wo;
        for (int64_t kx = 0; kx < p->kw; kx++) {
            int64_t off = kx - p->pl;
            int64_t lo = off >= 0 ? 0 : (-off + p->sw - 1) / p->sw;
            int64_t hi = p->W - off <= 0 ? 0 : (p->W - off + p->sw - 1) / p->sw;
            if (hi > p->Wo) hi = p->Wo;
            p->lohi[2 * kx] = lo;
            p->lohi[2 * kx + 1] = hi;
            if (lo > p->edge_lo) p->edge_lo = lo;
            if (hi < p->edge_hi) p->edge_hi = hi;
        }
        if (p->edge_hi < p->edge_lo) p->edge_hi = p->edge_lo;
        p->direct = !p->whole_rows && K_VL == 8 && (p->sw == 2 || p->sw == 1);
        p->prefetch = p->H * p->W >= 32768;
        if (!is_max) {
            p->count = malloc(sizeof(int32_t) * (size_t)(p->Ho * p->Wo + 1));
            if (!p->count) {
                rc = hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
                goto fail;
            }
            for (int64_t oy = 0; oy < p->Ho; oy++) {
                int64_t hs = oy * p->sh - p->pt, he = hs + p->kh;
                int64_t h0 = hs < 0 ? 0 : hs, h1 = he > p->H ? p->H : he;
                int64_t hpad = (he > p->H + p->pb ? p->H + p->pb : he) - hs;
                for (int64_t ox = 0; ox < p->Wo; ox++) {
                    int64_t ws = ox * p->sw - p->pl, we = ws + p->kw, cnt;
                    if (p->divisor) cnt = p->divisor;
                    else if (p->exclusive) cnt = (h1 - h0) * ((we > p->W ? p->W : we) - (ws < 0 ? 0 : ws));
                    else cnt = hpad * ((we > p->W + p->pr ? p->W + p->pr : we) - ws);
                    p->count[oy * p->Wo + ox] = cnt > INT32_MAX ? INT32_MAX : (int32_t)cnt;
                }
            }
        }
    }
    k->plan = p;
    k->plan_free = pl_free;
    k->run = pl_run;
    return ACL_SUCCESS;
fail:
    pl_free(p);
    return rc;
}

HRT_OP(maxpoolv3, "MaxPoolV3", pl_compile)
HRT_OP(avgpoolv2, "AvgPoolV2", pl_compile)
HRT_OP(maxpool, "MaxPool", pl_compile)
HRT_OP(avgpool, "AvgPool", pl_compile)
