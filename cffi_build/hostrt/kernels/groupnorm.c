/* InstanceNorm (x, gamma, beta; data_format, epsilon) and GroupNorm (x,
 * gamma, beta; num_groups, data_format, eps, is_training) on NCHW data:
 * y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c] with mean/var over
 * each (n, group) -- one channel per group for InstanceNorm -- and the
 * statistics as outputs 1 and 2.
 *
 * Two passes per group (mean, then the centred sum of squares: no
 * cancellation), float32 data accumulated in double; float16/bfloat16 go
 * through float32 blocks.  Groups are spread over the intra-op pool. */
#include "kcommon.h"

typedef struct {
    int64_t N, G, Cg, S; /* groups of Cg channels of S elements each */
    double eps;
    aclDataType dt;
} gn_plan;

typedef struct {
    const gn_plan *p;
    const char *x, *gamma, *beta;
    char *y, *mean, *var;
} gn_ctx;

static inline float ld_f(const char *base, aclDataType dt, int64_t i) {
    if (dt == ACL_FLOAT) return ((const float *)base)[i];
    if (dt == ACL_FLOAT16) return hrt_f16_to_f32(((const uint16_t *)base)[i]);
    return hrt_bf16_to_f32(((const uint16_t *)base)[i]);
}

static inline void st_f(char *base, aclDataType dt, int64_t i, float v) {
    if (dt == ACL_FLOAT) ((float *)base)[i] = v;
    else if (dt == ACL_FLOAT16) ((uint16_t *)base)[i] = hrt_f32_to_f16(v);
    else ((uint16_t *)base)[i] = hrt_f32_to_bf16(v);
}

static void gn_chunk(void *vp, int64_t b, int64_t e) {
    gn_ctx *c = vp;
    const gn_plan *p = c->p;
    int64_t len = p->Cg * p->S;
    size_t es = hrt_dtype_size(p->dt);
    float buf[K_BLOCK];
    for (int64_t ng = b; ng < e; ng++) {
        int64_t g = ng % p->G, base = ng * len;
        const char *x = c->x + (size_t)base * es;
        char *y = c->y + (size_t)base * es;
        double sum = 0, sq = 0, mean, var;
        if (p->dt == ACL_DOUBLE) {
            const double *xd = (const double *)x;
            for (int64_t i = 0; i < len; i++) sum += xd[i];
            mean = len ? sum / (double)len : 0;
            for (int64_t i = 0; i < len; i++) sq += (xd[i] - mean) * (xd[i] - mean);
        } else {
            for (int64_t i = 0; i < len; i += K_BLOCK) {
                int64_t m = len - i < K_BLOCK ? len - i : K_BLOCK;
                k_to_f32(x + (size_t)i * es, p->dt, buf, m);
                for (int64_t j = 0; j < m; j++) sum += buf[j];
            }
            mean = len ? sum / (double)len : 0;
            for (int64_t i = 0; i < len; i += K_BLOCK) {
                int64_t m = len - i < K_BLOCK ? len - i : K_BLOCK;
                k_to_f32(x + (size_t)i * es, p->dt, buf, m);
                for (int64_t j = 0; j < m; j++) sq += ((double)buf[j] - mean) * ((double)buf[j] - mean);
            }
        }
        var = len ? sq / (double)len : 0;
        double inv = 1.0 / sqrt(var + p->eps);
        for (int64_t cc = 0; cc < p->Cg; cc++) {
            int64_t ch = g * p->Cg + cc, off = cc * p->S;
            if (p->dt == ACL_DOUBLE) {
                double ga = ((const double *)c->gamma)[ch], be = ((const double *)c->beta)[ch];
                const double *xd = (const double *)x + off;
                double *yd = (double *)y + off;
                for (int64_t i = 0; i < p->S; i++) yd[i] = (xd[i] - mean) * inv * ga + be;
                continue;
            }
            float a = (float)(inv * ld_f(c->gamma, p->dt, ch));
            float s = (float)(ld_f(c->beta, p->dt, ch) - mean * inv * ld_f(c->gamma, p->dt, ch));
            if (p->dt == ACL_FLOAT) {
                const float *xf = (const float *)x + off;
                float *yf = (float *)y + off;
                for (int64_t i = 0; i < p->S; i++) yf[i] = xf[i] * a + s;
                continue;
            }
            for (int64_t i = 0; i < p->S; i += K_BLOCK) {
                int64_t m = p->S - i < K_BLOCK ? p->S - i : K_BLOCK;
                k_to_f32(x + (size_t)(off + i) * es, p->dt, buf, m);
                for (int64_t j = 0; j < m; j++) buf[j] = buf[j] * a + s;
                k_from_f32(buf, p->dt, y + (size_t)(off + i) * es, m);
            }
        }
        if (p->dt == ACL_DOUBLE) {
            ((double *)c->mean)[ng] = mean;
            ((double *)c->var)[ng] = var;
        } else {
            st_f(c->mean, p->dt, ng, (float)mean);
            st_f(c->var, p->dt, ng, (float)var);
        }
    }
}

static aclError gn_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const gn_plan *p = k->plan;
    int64_t groups = p->N * p->G;
    if (groups == 0) return ACL_SUCCESS;
    gn_ctx c = {p, in[0], in[1], in[2], out[0], out[1], out[2]};
    hrt_parallel_for(groups, K_GRAIN / (p->Cg * p->S + 1) + 1, gn_chunk, &c);
    return ACL_SUCCESS;
}

static aclError norm_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool group = strcmp(k->op_name, "GroupNorm") == 0;
    aclError rc = hrt_expect_counts(k, 3, 3, 3);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    if (!k_is_float(x->dtype)) return k_unsupported(k, "x", x->dtype);
    if (x->ndim != 4) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must be 4-D NCHW", k->op_name);
    const char *df;
    if ((rc = hrt_attr_get_string(k, attrs, "data_format", false, group ? "NCHW" : "NDHWC", &df))) return rc;
    if (strcmp(df, "NCHW") != 0 && strcmp(df, "ND") != 0)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: data_format '%s' is not supported (NCHW)", k->op_name, df);
    double eps;
    int64_t G = x->dims[1];
    if (group) {
        bool training;
        if ((rc = hrt_attr_get_int(k, attrs, "num_groups", true, 0, &G)) ||
            (rc = hrt_attr_get_float(k, attrs, "eps", false, 1e-4, &eps)) ||
            (rc = hrt_attr_get_bool(k, attrs, "is_training", true, &training)))
            return rc;
        if (G < 1 || x->dims[1] % G)
            return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "GroupNorm: num_groups %lld does not divide %lld channels",
                             (long long)G, (long long)x->dims[1]);
    } else if ((rc = hrt_attr_get_float(k, attrs, "epsilon", false, 1e-6, &eps))) {
        return rc;
    }
    if (!(eps >= 0)) return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: epsilon must be >= 0", k->op_name);
    for (int i = 1; i < 3; i++)
        if (k->in[i].numel != x->dims[1])
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: input %d must hold one value per channel (%lld)",
                             k->op_name, i, (long long)x->dims[1]);
    if ((rc = k_expect_same_dtype(k, 1, 3, x->dtype)) || (rc = k_expect_out_dtype(k, 0, x->dtype)) ||
        (rc = k_expect_out_dtype(k, 1, x->dtype)) || (rc = k_expect_out_dtype(k, 2, x->dtype)) ||
        (rc = hrt_expect_same_shape(k, &k->out[0], x->dims, 4, 0)))
        return rc;
    for (int j = 1; j < 3; j++)
        if (k->out[j].numel != x->dims[0] * G)
            return hrt_error(ACL_ERROR_OP_OUTPUT_NOT_MATCH, K_API, "%s: output %d must hold N x groups = %lld values",
                             k->op_name, j, (long long)(x->dims[0] * G));
    gn_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    p->N = x->dims[0];
    p->G = G;
    p->Cg = x->dims[1] / G;
    p->S = x->dims[2] * x->dims[3];
    p->eps = eps;
    p->dt = x->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = gn_run;
    return ACL_SUCCESS;
}

HRT_OP(instancenorm, "InstanceNorm", norm_compile)
HRT_OP(groupnorm, "GroupNorm", norm_compile)
