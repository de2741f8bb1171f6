/* Vectorisable float32 math for the kernels.
 *
 * The runtime is built with GCC's defaults (math-errno, trapping-math), so
 * GCC neither vectorises libm calls, nor inlines floorf/rintf, nor
 * if-converts a `c ? a : b` on floats.  These helpers use only arithmetic,
 * int<->float conversion, bit casts and comparisons taken as int values
 * (k_self: a bitwise select), which GCC vectorises at -O3.  Accuracy is
 * within a few ulp of glibc over the whole float range, with NaN, +-inf,
 * +-0 and subnormals handled like libm. */
#ifndef AIOGE_HRT_KMATH_H
#define AIOGE_HRT_KMATH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t k_fbits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static inline float k_bitsf(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static inline uint64_t k_dbits(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}
static inline double k_bitsd(uint64_t u) {
    double x;
    memcpy(&x, &u, 8);
    return x;
}
/* c ? a : b, branch-free (c is 0 or 1) */
static inline float k_self(int c, float a, float b) {
    uint32_t m = (uint32_t)0 - (uint32_t)c;
    return k_bitsf((k_fbits(a) & m) | (k_fbits(b) & ~m));
}
static inline double k_seld(int c, double a, double b) {
    uint64_t m = (uint64_t)0 - (uint64_t)c;
    return k_bitsd((k_dbits(a) & m) | (k_dbits(b) & ~m));
}
static inline int k_isnanf(float x) { return (k_fbits(x) & 0x7fffffffu) > 0x7f800000u; }
static inline int k_isnand(double x) { return (k_dbits(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
static inline float k_fabsf(float x) { return k_bitsf(k_fbits(x) & 0x7fffffffu); }
static inline double k_fabsd(double x) { return k_bitsd(k_dbits(x) & 0x7fffffffffffffffull); }
static inline float k_copysignf(float mag, float sgn) {
    return k_bitsf((k_fbits(mag) & 0x7fffffffu) | (k_fbits(sgn) & 0x80000000u));
}
static inline double k_copysignd(double mag, double sgn) {
    return k_bitsd((k_dbits(mag) & 0x7fffffffffffffffull) | (k_dbits(sgn) & 0x8000000000000000ull));
}
/* numpy maximum/minimum: NaN if either operand is NaN */
static inline float k_maxf(float x, float y) { return k_self(k_isnanf(x), x, k_self(x > y, x, y)); }
static inline float k_minf(float x, float y) { return k_self(k_isnanf(x), x, k_self(x < y, x, y)); }
static inline double k_maxd(double x, double y) { return k_seld(k_isnand(x), x, k_seld(x > y, x, y)); }
static inline double k_mind(double x, double y) { return k_seld(k_isnand(x), x, k_seld(x < y, x, y)); }
/* fmax-like (NaN ignored): for running max over data without NaN checks */
static inline float k_fmaxf(float x, float y) { return k_self(x > y, x, y); }

/* round half to even, floor, ceil, trunc: exact, sign of zero kept, NaN kept */
static inline float k_rintf(float x) {
    float a = k_fabsf(x);
    float r = (a + 8388608.0f) - 8388608.0f;
    return k_self(a < 8388608.0f, k_copysignf(r, x), x);
}
static inline float k_truncf(float x) {
    float a = k_fabsf(x);
    int small = a < 8388608.0f;
    float t = (float)(int32_t)k_self(small, a, 0.0f);
    return k_self(small, k_copysignf(t, x), x);
}
static inline float k_floorf(float x) {
    int small = k_fabsf(x) < 8388608.0f;
    float xs = k_self(small, x, 0.0f);
    int32_t i = (int32_t)xs;
    float t = (float)(i - ((float)i > xs));
    return k_self(small, k_copysignf(t, x), x);
}
static inline float k_ceilf(float x) {
    int small = k_fabsf(x) < 8388608.0f;
    float xs = k_self(small, x, 0.0f);
    int32_t i = (int32_t)xs;
    float t = (float)(i + ((float)i < xs));
    return k_self(small, k_copysignf(t, x), x);
}
static inline double k_rintd(double x) {
    double a = k_fabsd(x);
    double r = (a + 4503599627370496.0) - 4503599627370496.0;
    return k_seld(a < 4503599627370496.0, k_copysignd(r, x), x);
}

/* ---- the polynomials, once for the scalar functions and their vector forms below ----
 * Each is Horner's rule from its leading coefficient P0 (the caller declares P in its own type,
 * float or k_vf, so both run the same operations in the same order: bit-identical results). */
#define K_EXPF_P0 1.9875691500e-4f
#define K_EXPF_POLY(P, R)                 \
    do {                                  \
        P = P * (R) + 1.3981999507e-3f;   \
        P = P * (R) + 8.3334519073e-3f;   \
        P = P * (R) + 4.1665795894e-2f;   \
        P = P * (R) + 1.6666665459e-1f;   \
        P = P * (R) + 5.0000001201e-1f;   \
    } while (0)
#define K_ERFF_SMALL_P0 -6.02405138e-4f
#define K_ERFF_SMALL_POLY(P, S)           \
    do {                                  \
        P = P * (S) + 5.00076794e-3f;     \
        P = P * (S) - 2.67728503e-2f;     \
        P = P * (S) + 1.12820353e-1f;     \
        P = P * (S) - 3.76125235e-1f;     \
        P = P * (S) + 1.28379159e-1f;     \
    } while (0)
#define K_ERFF_BIG_Q0 1.95869639e-4f
#define K_ERFF_BIG_POLY(Q, U)             \
    do {                                  \
        Q = Q * (U) - 3.04207155e-3f;     \
        Q = Q * (U) + 2.22206768e-2f;     \
        Q = Q * (U) - 1.03915650e-1f;     \
        Q = Q * (U) - 6.37203321e-1f;     \
        Q = Q * (U) - 1.12766166e+0f;     \
        Q = Q * (U) - 1.99346447e-4f;     \
    } while (0)
#define K_TANHF_P0 -5.70498872745e-3f
#define K_TANHF_POLY(P, Z)                \
    do {                                  \
        P = P * (Z) + 2.06390887954e-2f;  \
        P = P * (Z) - 5.37397155531e-2f;  \
        P = P * (Z) + 1.33314422036e-1f;  \
        P = P * (Z) - 3.33332819422e-1f;  \
    } while (0)

/* exp: Cephes-style, ~1 ulp; overflow -> inf, underflow -> subnormal/0 */
static inline float k_expf(float x) {
    float xc = k_self(x < -104.0f, -104.0f, x);
    xc = k_self(xc > 89.0f, 89.0f, xc);
    float fn = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x*log2e) */
    float r = xc - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = K_EXPF_P0;
    K_EXPF_POLY(p, r);
    float y = p * (r * r) + r + 1.0f;
    int32_t n = (int32_t)fn;
    int32_t n1 = n >> 1, n2 = n - n1;
    y = y * k_bitsf((uint32_t)(n1 + 127) << 23);
    y = y * k_bitsf((uint32_t)(n2 + 127) << 23);
    return k_self(k_isnanf(x), x, y);
}

/* erf for float32, branch-free (both halves computed, one selected: the loops vectorise):
 * |x| <= 0.921875: x + x * P(x^2), P of degree 5 (relative error 1.7e-8 in exact arithmetic);
 * above: 1 - exp(Q(|x|)), Q of degree 6 fitted to log(erfc) on [0.921875, 3.925] (absolute
 * error 1.6e-9), |x| clamped to 3.925 where erf rounds to 1 in float32.  Least-squares fits
 * (float64, Chebyshev-spaced points); no division, unlike the erfc(t) * exp form it replaces
 * (2.7 -> ~1 ns per element on AVX2). */
static inline float k_erff(float x) {
    float t = k_fabsf(x), s = x * x;
    float p = K_ERFF_SMALL_P0;
    K_ERFF_SMALL_POLY(p, s);
    float small = x + x * p;
    float u = k_self(t < 3.925f, t, 3.925f);
    float q = K_ERFF_BIG_Q0;
    K_ERFF_BIG_POLY(q, u);
    float big = k_copysignf(1.0f - k_expf(q), x);
    return k_self(k_isnanf(x), x, k_self(t <= 0.921875f, small, big));
}

/* natural log: Cephes logf, ~1 ulp; log(0) = -inf, log(<0) = NaN */
static inline float k_logf(float x) {
    int sub = x < 1.17549435e-38f;
    float xs = x * k_self(sub, 8388608.0f, 1.0f); /* scale subnormals by 2^23 */
    uint32_t ix = k_fbits(xs);
    int32_t e = (int32_t)((ix >> 23) & 0xff) - 126 - 23 * sub;
    float m = k_bitsf((ix & 0x007fffffu) | 0x3f000000u); /* [0.5, 1) */
    int lo = m < 0.707106781186547524f;
    e = e - lo;
    m = m + m * (float)lo - 1.0f;
    float z = m * m;
    float p = 7.0376836292e-2f;
    p = p * m - 1.1514610310e-1f;
    p = p * m + 1.1676998740e-1f;
    p = p * m - 1.2420140846e-1f;
    p = p * m + 1.4249322787e-1f;
    p = p * m - 1.6668057665e-1f;
    p = p * m + 2.0000714765e-1f;
    p = p * m - 2.4999993993e-1f;
    p = p * m + 3.3333331174e-1f;
    float fe = (float)e;
    float y = p * m * z;
    y = y + fe * -2.12194440e-4f;
    y = y - 0.5f * z;
    y = m + y;
    y = y + fe * 0.693359375f;
    y = k_self(x == 0.0f, -__builtin_inff(), y);
    y = k_self(x < 0.0f, __builtin_nanf(""), y);
    y = k_self(x == __builtin_inff(), x, y);
    return k_self(k_isnanf(x), x, y);
}

/* tanh: odd polynomial near 0, 1 - 2/(e^2|x| + 1) elsewhere */
static inline float k_tanhf(float x) {
    float a = k_fabsf(x);
    float z = x * x;
    float p = K_TANHF_P0;
    K_TANHF_POLY(p, z);
    float small = k_copysignf(p * z * x + x, x);
    float e = k_expf(2.0f * k_self(a > 20.0f, 20.0f, a));
    float big = k_copysignf(1.0f - 2.0f / (e + 1.0f), x);
    return k_self(a < 0.625f, small, k_self(k_isnanf(x), x, big));
}

/* logistic: e^-|x| keeps full relative accuracy for negative x */
static inline float k_sigmoidf(float x) {
    float e = k_expf(-k_fabsf(x));
    float r = 1.0f / (1.0f + e);
    return k_self(x < 0.0f, e * r, k_self(k_isnanf(x), x, r));
}

/* Swish (SiLU): x * sigmoid(x) */
static inline float k_swishf(float x) { return x * k_sigmoidf(x); }
/* HardSwish: x * clip(x / 6 + 1/2, 0, 1), NaN kept */
static inline float k_hard_swishf(float x) {
    float g = x * (1.0f / 6.0f) + 0.5f;
    g = k_self(g < 0.0f, 0.0f, g);
    return x * k_self(g > 1.0f, 1.0f, g);
}

/* ---- row max/min with GCC vector extensions (NaN-propagating) ----
 * The lane pattern with k_maxf does not vectorise (GCC's SLP gives up on
 * the bitwise select), so these use explicit vector types: AVX width when
 * the build targets AVX, SSE width otherwise. */
#if defined(__AVX__)
#define K_VL 8
#else
#define K_VL 4
#endif
typedef float k_vf __attribute__((vector_size(4 * K_VL)));
typedef int32_t k_vi __attribute__((vector_size(4 * K_VL)));
typedef double k_vd __attribute__((vector_size(4 * K_VL)));
typedef int64_t k_vl __attribute__((vector_size(4 * K_VL)));

/* ---- vector forms of exp, sigmoid, tanh, erf (k_vf lanes) ----
 * The same polynomials, operations and order as the scalar functions above (results bit-identical
 * to them where GCC contracts both alike), written on GCC vector types so that the clamps are
 * min/max instructions and the selects one blend each: GCC's vectorisation of the scalar forms
 * turns every k_self into a compare and a chain of bitwise ops.  x86 min/max return their second
 * operand when either is NaN: k_vmaxf(c, x) keeps a NaN x, like the scalar k_self clamps.  Rows go
 * through K_VROW: whole vectors, then the tail as one zero-padded vector (every element of a row
 * gets the same operations wherever it sits). */
#if defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>
#endif
typedef uint32_t k_vu __attribute__((vector_size(4 * K_VL)));
#define K_VS(c) ((k_vf){0} + (float)(c)) /* c in every lane (c != -0) */
/* a > b ? a : b, b when either is NaN */
static inline k_vf k_vmaxf(k_vf a, k_vf b) {
#if defined(__AVX__)
    return (k_vf)_mm256_max_ps((__m256)a, (__m256)b);
#elif defined(__SSE2__)
    return (k_vf)_mm_max_ps((__m128)a, (__m128)b);
#else
    k_vi m = a > b;
    return (k_vf)(((k_vi)a & m) | ((k_vi)b & ~m));
#endif
}
/* a < b ? a : b, b when either is NaN */
static inline k_vf k_vminf(k_vf a, k_vf b) {
#if defined(__AVX__)
    return (k_vf)_mm256_min_ps((__m256)a, (__m256)b);
#elif defined(__SSE2__)
    return (k_vf)_mm_min_ps((__m128)a, (__m128)b);
#else
    k_vi m = a < b;
    return (k_vf)(((k_vi)a & m) | ((k_vi)b & ~m));
#endif
}
/* m ? a : b per lane, m a comparison's result (all ones or zero) */
static inline k_vf k_vself(k_vi m, k_vf a, k_vf b) {
#if defined(__AVX__)
    return (k_vf)_mm256_blendv_ps((__m256)b, (__m256)a, (__m256)m);
#elif defined(__SSE4_1__)
    return (k_vf)_mm_blendv_ps((__m128)b, (__m128)a, (__m128)m);
#else
    return (k_vf)(((k_vi)a & m) | ((k_vi)b & ~m));
#endif
}
static inline k_vf k_vfabsf(k_vf x) { return (k_vf)((k_vu)x & 0x7fffffffu); }
static inline k_vf k_vcopysignf(k_vf mag, k_vf sgn) {
    return (k_vf)(((k_vu)mag & 0x7fffffffu) | ((k_vu)sgn & 0x80000000u));
}
/* k_expf without its NaN select (a NaN x gives some NaN): for callers that select NaN themselves */
static inline k_vf k_vexpf_nn(k_vf x) {
    k_vf xc = k_vmaxf(K_VS(-104.0f), x);
    xc = k_vminf(K_VS(89.0f), xc);
    k_vf fn = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    k_vf r = xc - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    k_vf p = K_VS(K_EXPF_P0);
    K_EXPF_POLY(p, r);
    k_vf y = p * (r * r) + r + 1.0f;
    k_vu n = (k_vu)__builtin_convertvector(fn, k_vi);
    k_vu n1 = (k_vu)((k_vi)n >> 1), n2 = n - n1;
    y = y * (k_vf)((n1 + 127u) << 23);
    y = y * (k_vf)((n2 + 127u) << 23);
    return y;
}
static inline k_vf k_vexpf(k_vf x) { return k_vself(x != x, x, k_vexpf_nn(x)); }
static inline k_vf k_verff(k_vf x) {
    k_vf t = k_vfabsf(x), s = x * x;
    k_vf p = K_VS(K_ERFF_SMALL_P0);
    K_ERFF_SMALL_POLY(p, s);
    k_vf small = x + x * p;
    k_vf u = k_vminf(t, K_VS(3.925f)); /* NaN t: 3.925 */
    k_vf q = K_VS(K_ERFF_BIG_Q0);
    K_ERFF_BIG_POLY(q, u);
    k_vf big = k_vcopysignf(1.0f - k_vexpf_nn(q), x);
    return k_vself(x != x, x, k_vself(t <= 0.921875f, small, big));
}
static inline k_vf k_vtanhf(k_vf x) {
    k_vf a = k_vfabsf(x);
    k_vf z = x * x;
    k_vf p = K_VS(K_TANHF_P0);
    K_TANHF_POLY(p, z);
    k_vf small = k_vcopysignf(p * z * x + x, x);
    k_vf e = k_vexpf_nn(2.0f * k_vminf(a, K_VS(20.0f))); /* NaN a: 20 */
    k_vf big = k_vcopysignf(1.0f - 2.0f / (e + 1.0f), x);
    return k_vself(a < 0.625f, small, k_vself(x != x, x, big));
}
static inline k_vf k_vsigmoidf(k_vf x) {
    k_vf e = k_vexpf_nn(-k_vfabsf(x));
    k_vf r = 1.0f / (1.0f + e);
    return k_vself(x < 0.0f, e * r, k_vself(x != x, x, r));
}
static inline k_vf k_vswishf(k_vf x) { return x * k_vsigmoidf(x); }
/* Y[i] = EXPR for i < n, EXPR a k_vf expression of V (x[i] as a vector); y may be x */
#define K_VROW(X, Y, N, V, EXPR)                                                  \
    do {                                                                          \
        const float *kx_ = (X);                                                   \
        float *ky_ = (Y);                                                         \
        const int64_t kn_ = (N);                                                  \
        int64_t ki_ = 0;                                                          \
        for (; ki_ + K_VL <= kn_; ki_ += K_VL) {                                  \
            k_vf V, kr_;                                                          \
            memcpy(&V, kx_ + ki_, sizeof V);                                      \
            kr_ = (EXPR);                                                         \
            memcpy(ky_ + ki_, &kr_, sizeof kr_);                                  \
        }                                                                         \
        if (ki_ < kn_) {                                                          \
            k_vf V = {0}, kr_;                                                    \
            for (int64_t kj_ = 0; kj_ < kn_ - ki_; kj_++) V[kj_] = kx_[ki_ + kj_]; \
            kr_ = (EXPR);                                                         \
            for (int64_t kj_ = 0; kj_ < kn_ - ki_; kj_++) ky_[ki_ + kj_] = kr_[kj_]; \
        }                                                                         \
    } while (0)

#define K_ROW_EXT(NAME, T, VT, VI, L, CMP, SCALAR)                                  \
    static inline T NAME(const T *x, int64_t n) {                                   \
        VT acc;                                                                     \
        VI nan;                                                                     \
        int64_t i = 0;                                                              \
        if (n < (L)) {                                                              \
            T m = x[0];                                                             \
            for (i = 1; i < n; i++) m = SCALAR(x[i], m);                            \
            return m;                                                               \
        }                                                                           \
        memcpy(&acc, x, sizeof acc);                                                \
        nan = acc != acc;                                                           \
        for (i = (L); i + (L) <= n; i += (L)) {                                     \
            VT v;                                                                   \
            memcpy(&v, x + i, sizeof v);                                            \
            VI pick = v CMP acc;                                                    \
            nan |= v != v;                                                          \
            acc = (VT)(((VI)v & pick) | ((VI)acc & ~pick));                         \
        }                                                                           \
        T m = acc[0];                                                               \
        int any = nan[0] != 0;                                                      \
        for (int j = 1; j < (L); j++) {                                             \
            m = SCALAR(acc[j], m);                                                  \
            any |= nan[j] != 0;                                                     \
        }                                                                           \
        for (; i < n; i++) m = SCALAR(x[i], m);                                     \
        return any ? (T)__builtin_nan("") : m;                                      \
    }
/* first element of the row must exist (n >= 1) */
K_ROW_EXT(k_row_maxf, float, k_vf, k_vi, K_VL, >, k_maxf)
K_ROW_EXT(k_row_minf, float, k_vf, k_vi, K_VL, <, k_minf)
K_ROW_EXT(k_row_maxd, double, k_vd, k_vl, K_VL / 2, >, k_maxd)
K_ROW_EXT(k_row_mind, double, k_vd, k_vl, K_VL / 2, <, k_mind)

/* ---------------------------------------------------- pow by a constant
 * x ** y for a constant exponent with a short exact-enough form, as libm's
 * pow gives it (C99 Annex F special values: pow(x, 0) = 1 even for NaN,
 * pow(-0, 0.5) = +0, pow(-inf, 0.5) = +inf, pow(-0, -0.5) = +inf,
 * pow(-inf, -0.5) = +0, negative bases with a non-integer exponent NaN).
 * y = 2, 1, 0, -1 are correctly rounded; float32's 3 and -2 are computed in
 * double and round once; 0.5 is sqrt; -0.5 and float64's 3 and -2 round
 * twice (<= 1.5 ulp).  Returns 0, writing nothing, for any other y (the
 * caller runs libm's pow).  o may be x. */
#if defined(__AVX__)
#include <immintrin.h>
#endif

/* sqrt with pow's signs: sqrt(-0) = +0 (adding +0), sqrt(-inf) = +inf */
static inline float k_pow_halff(float x) {
    float r = __builtin_sqrtf(x) + 0.0f;
    return k_self(x == -__builtin_inff(), __builtin_inff(), r);
}
static inline double k_pow_halfd(double x) {
    double r = __builtin_sqrt(x) + 0.0;
    return k_seld(x == -__builtin_inf(), __builtin_inf(), r);
}

static inline int k_pow_const_f32(const float *x, float y, float *o, int64_t n) {
    int64_t i = 0;
    if (y == 2.0f) {
        for (; i < n; i++) o[i] = x[i] * x[i];
    } else if (y == 3.0f) {
        for (; i < n; i++) o[i] = (float)((double)x[i] * x[i] * x[i]);
    } else if (y == 1.0f) {
        if (o != x) memmove(o, x, sizeof(float) * (size_t)n);
    } else if (y == 0.0f) {
        for (; i < n; i++) o[i] = 1.0f;
    } else if (y == -1.0f) {
        for (; i < n; i++) o[i] = 1.0f / x[i];
    } else if (y == -2.0f) {
        for (; i < n; i++) o[i] = (float)(1.0 / ((double)x[i] * x[i]));
    } else if (y == 0.5f || y == -0.5f) {
        const bool inv = y < 0;
#if defined(__AVX__)
        const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-__builtin_inff());
        const __m256 one = _mm256_set1_ps(1.0f), big = _mm256_set1_ps(inv ? 0.0f : __builtin_inff());
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            __m256 r = _mm256_add_ps(_mm256_sqrt_ps(v), zero);
            if (inv) r = _mm256_div_ps(one, r);
            _mm256_storeu_ps(o + i, _mm256_blendv_ps(r, big, _mm256_cmp_ps(v, ninf, _CMP_EQ_OQ)));
        }
#endif
        for (; i < n; i++) o[i] = inv ? 1.0f / k_pow_halff(x[i]) : k_pow_halff(x[i]);
    } else {
        return 0;
    }
    return 1;
}

static inline int k_pow_const_f64(const double *x, double y, double *o, int64_t n) {
    int64_t i = 0;
    if (y == 2.0) {
        for (; i < n; i++) o[i] = x[i] * x[i];
    } else if (y == 3.0) {
        for (; i < n; i++) o[i] = x[i] * x[i] * x[i];
    } else if (y == 1.0) {
        if (o != x) memmove(o, x, sizeof(double) * (size_t)n);
    } else if (y == 0.0) {
        for (; i < n; i++) o[i] = 1.0;
    } else if (y == -1.0) {
        for (; i < n; i++) o[i] = 1.0 / x[i];
    } else if (y == -2.0) {
        for (; i < n; i++) o[i] = 1.0 / (x[i] * x[i]);
    } else if (y == 0.5 || y == -0.5) {
        const bool inv = y < 0;
#if defined(__AVX__)
        const __m256d zero = _mm256_setzero_pd(), ninf = _mm256_set1_pd(-__builtin_inf());
        const __m256d one = _mm256_set1_pd(1.0), big = _mm256_set1_pd(inv ? 0.0 : __builtin_inf());
        for (; i + 4 <= n; i += 4) {
            __m256d v = _mm256_loadu_pd(x + i);
            __m256d r = _mm256_add_pd(_mm256_sqrt_pd(v), zero);
            if (inv) r = _mm256_div_pd(one, r);
            _mm256_storeu_pd(o + i, _mm256_blendv_pd(r, big, _mm256_cmp_pd(v, ninf, _CMP_EQ_OQ)));
        }
#endif
        for (; i < n; i++) o[i] = inv ? 1.0 / k_pow_halfd(x[i]) : k_pow_halfd(x[i]);
    } else {
        return 0;
    }
    return 1;
}

#endif
