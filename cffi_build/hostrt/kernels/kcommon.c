#include "kcommon.h"

#include <stdio.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif
#if defined(__F16C__) && defined(__AVX__)
#define K_HAVE_F16C 1
#endif

/* ------------------------------------------------------------ broadcast */
bool k_broadcast_shape(const hrt_tensor *const *ins, int n, int64_t *out, int *out_ndim) {
    int nd = 0;
    for (int j = 0; j < n; j++)
        if (ins[j]->ndim > nd) nd = ins[j]->ndim;
    for (int d = 0; d < nd; d++) {
        int64_t v = 1;
        for (int j = 0; j < n; j++) {
            int off = nd - ins[j]->ndim;
            if (d < off) continue;
            int64_t x = ins[j]->dims[d - off];
            if (x == 1) continue;
            if (v != 1 && v != x) return false;
            v = x;
        }
        out[d] = v;
    }
    *out_ndim = nd;
    return true;
}

void k_bcast_plan_dims(k_bcast *p, const int64_t *const *dims, const int *ndv, int n, const int64_t *out_dims,
                       int out_ndim) {
    memset(p, 0, sizeof *p);
    p->nin = n;
    /* full-rank strides per input */
    int64_t st[3][HRT_MAXDIM];
    for (int j = 0; j < n; j++) {
        int off = out_ndim - ndv[j];
        int64_t s = 1;
        for (int d = out_ndim - 1; d >= 0; d--) {
            int64_t x = d >= off ? dims[j][d - off] : 1;
            st[j][d] = x == 1 ? 0 : s;
            s *= x;
        }
    }
    p->numel = 1;
    for (int d = 0; d < out_ndim; d++) p->numel *= out_dims[d];
    int nd = 0;
    for (int d = 0; d < out_ndim; d++) {
        if (out_dims[d] == 1) continue;
        if (nd > 0) {
            /* merge with the previous kept dim if every input is contiguous across both */
            bool merge = true;
            for (int j = 0; j < n && merge; j++) {
                int64_t prev = p->strides[j][nd - 1], cur = st[j][d];
                merge = (prev == 0 && cur == 0) || (cur != 0 && prev == cur * out_dims[d]);
            }
            if (merge) {
                p->dims[nd - 1] *= out_dims[d];
                for (int j = 0; j < n; j++) p->strides[j][nd - 1] = st[j][d];
                continue;
            }
        }
        p->dims[nd] = out_dims[d];
        for (int j = 0; j < n; j++) p->strides[j][nd] = st[j][d];
        nd++;
    }
    if (nd == 0) { /* scalar output */
        p->dims[0] = 1;
        for (int j = 0; j < n; j++) p->strides[j][0] = 0;
        nd = 1;
    }
    p->ndim = nd;
}

void k_bcast_plan(k_bcast *p, const hrt_tensor *const *ins, int n, const int64_t *out_dims, int out_ndim) {
    const int64_t *dims[3];
    int nd[3];
    for (int j = 0; j < n; j++) {
        dims[j] = ins[j]->dims;
        nd[j] = ins[j]->ndim;
    }
    k_bcast_plan_dims(p, dims, nd, n, out_dims, out_ndim);
}

/* ---------------------------------------------------------- conversions */
void k_to_f32(const void *src, aclDataType dt, float *dst, int64_t n) {
    int64_t i = 0;
    if (dt == ACL_FLOAT) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
    } else if (dt == ACL_BF16) {
        const uint16_t *s = src;
        for (; i < n; i++) dst[i] = k_bitsf((uint32_t)s[i] << 16);
    } else if (dt == ACL_FLOAT16) {
        const uint16_t *s = src;
#ifdef K_HAVE_F16C
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
#endif
        for (; i < n; i++) dst[i] = hrt_f16_to_f32(s[i]);
    } else if (dt == ACL_DOUBLE) {
        const double *s = src;
        for (; i < n; i++) dst[i] = (float)s[i];
    }
}

void k_from_f32(const float *src, aclDataType dt, void *dst, int64_t n) {
    int64_t i = 0;
    if (dt == ACL_FLOAT) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
    } else if (dt == ACL_BF16) {
        uint16_t *d = dst;
        for (; i < n; i++) {
            uint32_t x = k_fbits(src[i]);
            uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
            uint32_t nan = (x & 0x7fffffffu) > 0x7f800000u;
            uint32_t m = 0u - nan;
            d[i] = (uint16_t)((((x >> 16) | 0x40u) & m) | (r & ~m));
        }
    } else if (dt == ACL_FLOAT16) {
        uint16_t *d = dst;
#ifdef K_HAVE_F16C
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
        for (; i < n; i++) d[i] = hrt_f32_to_f16(src[i]);
    } else if (dt == ACL_DOUBLE) {
        double *d = dst;
        for (; i < n; i++) d[i] = src[i];
    }
}

double k_load_d(const void *p, aclDataType dt, int64_t i) {
    switch (dt) {
    case ACL_FLOAT: return ((const float *)p)[i];
    case ACL_DOUBLE: return ((const double *)p)[i];
    case ACL_FLOAT16: return hrt_f16_to_f32(((const uint16_t *)p)[i]);
    case ACL_BF16: return hrt_bf16_to_f32(((const uint16_t *)p)[i]);
    case ACL_INT8: return ((const int8_t *)p)[i];
    case ACL_UINT8: return ((const uint8_t *)p)[i];
    case ACL_BOOL: return ((const uint8_t *)p)[i] != 0;
    case ACL_INT16: return ((const int16_t *)p)[i];
    case ACL_INT32: return ((const int32_t *)p)[i];
    case ACL_INT64: return (double)((const int64_t *)p)[i];
    case ACL_UINT16: return ((const uint16_t *)p)[i];
    case ACL_UINT32: return ((const uint32_t *)p)[i];
    case ACL_UINT64: return (double)((const uint64_t *)p)[i];
    default: return 0;
    }
}

void k_store_d(void *p, aclDataType dt, int64_t i, double v) {
    switch (dt) {
    case ACL_FLOAT: ((float *)p)[i] = (float)v; break;
    case ACL_DOUBLE: ((double *)p)[i] = v; break;
    case ACL_FLOAT16: ((uint16_t *)p)[i] = hrt_f32_to_f16((float)v); break;
    case ACL_BF16: ((uint16_t *)p)[i] = hrt_f32_to_bf16((float)v); break;
    case ACL_INT8: ((int8_t *)p)[i] = (int8_t)(int64_t)v; break;
    case ACL_UINT8: ((uint8_t *)p)[i] = (uint8_t)(int64_t)v; break;
    case ACL_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case ACL_INT16: ((int16_t *)p)[i] = (int16_t)(int64_t)v; break;
    case ACL_INT32: ((int32_t *)p)[i] = (int32_t)(int64_t)v; break;
    case ACL_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case ACL_UINT16: ((uint16_t *)p)[i] = (uint16_t)(int64_t)v; break;
    case ACL_UINT32: ((uint32_t *)p)[i] = (uint32_t)(int64_t)v; break;
    case ACL_UINT64: ((uint64_t *)p)[i] = v < 0 ? (uint64_t)(int64_t)v : v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v; break;
    default: break;
    }
}

/* ------------------------------------------------------ compile helpers */
aclError k_norm_axis(const hrt_kernel *k, int64_t axis, int ndim, const char *what, int *out) {
    int n = ndim > 0 ? ndim : 1;
    if (axis < -n || axis >= n)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: %s %lld is out of range for rank %d", k->op_name, what,
                         (long long)axis, ndim);
    *out = (int)(axis < 0 ? axis + n : axis);
    return ACL_SUCCESS;
}

aclError k_get_axes(const hrt_kernel *k, const aclopAttr *attrs, const char *name, int input, bool required,
                    int ndim, unsigned *mask, int *count, bool *present) {
    int64_t vals[64];
    int n = 0;
    bool have = false;
    aclError rc;
    if (input >= 0) {
        if (input >= k->n_in || k->in[input].absent) {
            if (required)
                return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: input %d (%s) is required", k->op_name, input,
                                 name);
        } else {
            if (k->in[input].ndim > 1)
                return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: %s must be a scalar or 1-D tensor", k->op_name,
                                 name);
            rc = k_int_values(k, input, vals, 64, &n);
            if (rc) return rc;
            have = true;
        }
    } else {
        const int64_t *li = NULL;
        rc = hrt_attr_get_list_int(k, attrs, name, required, &li, &n);
        if (rc) return rc;
        if (li) {
            if (n > 64) return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: too many %s", k->op_name, name);
            memcpy(vals, li, sizeof(int64_t) * (size_t)n);
            have = true;
        } else {
            n = 0;
        }
    }
    unsigned m = 0;
    for (int i = 0; i < n; i++) {
        int a;
        int nn = ndim > 0 ? ndim : 1;
        if (vals[i] < -nn || vals[i] >= nn) {
            return hrt_error(input >= 0 ? ACL_ERROR_OP_INPUT_NOT_MATCH : ACL_ERROR_OP_ATTR_NOT_MATCH, K_API,
                             "%s: %s value %lld is out of range for rank %d", k->op_name, name, (long long)vals[i], ndim);
        }
        a = (int)(vals[i] < 0 ? vals[i] + nn : vals[i]);
        if (m & (1u << a))
            return hrt_error(input >= 0 ? ACL_ERROR_OP_INPUT_NOT_MATCH : ACL_ERROR_OP_ATTR_NOT_MATCH, K_API,
                             "%s: %s repeats axis %d", k->op_name, name, a);
        m |= 1u << a;
    }
    if (ndim == 0) m = 0; /* axis 0 / -1 of a scalar: nothing to reduce */
    *mask = m;
    *count = n;
    if (present) *present = have;
    return ACL_SUCCESS;
}

aclError k_int_values(const hrt_kernel *k, int input, int64_t *vals, int max, int *n) {
    const hrt_tensor *t = &k->in[input];
    if (t->numel == 0 && (t->dtype == ACL_INT32 || t->dtype == ACL_INT64)) {
        *n = 0;
        return ACL_SUCCESS;
    }
    return hrt_tensor_int_values(k, input, vals, max, n);
}

aclError k_expect_out_dtype(const hrt_kernel *k, int j, aclDataType want) {
    if (k->out[j].dtype == want) return ACL_SUCCESS;
    return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, K_API, "%s: output %d must be %s, got %s", k->op_name, j,
                     hrt_dtype_name(want), hrt_dtype_name(k->out[j].dtype));
}

aclError k_expect_same_dtype(const hrt_kernel *k, int from, int to, aclDataType dt) {
    for (int i = from; i < to && i < k->n_in; i++) {
        if (k->in[i].absent) continue;
        if (k->in[i].dtype != dt)
            return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, K_API, "%s: input %d is %s, expected %s", k->op_name, i,
                             hrt_dtype_name(k->in[i].dtype), hrt_dtype_name(dt));
    }
    return ACL_SUCCESS;
}

aclError k_unsupported(const hrt_kernel *k, const char *what, aclDataType dt) {
    return hrt_error(ACL_ERROR_UNSUPPORTED_DATA_TYPE, K_API, "%s: data type %s of %s is not supported", k->op_name,
                     hrt_dtype_name(dt), what);
}

aclError k_attr_ints(const hrt_kernel *k, const aclopAttr *a, const char *name, bool required, int n,
                     const int64_t *def, int64_t *out, int max, int *got) {
    const int64_t *li = NULL;
    int cnt = 0;
    aclError rc = hrt_attr_get_list_int(k, a, name, required, &li, &cnt);
    if (rc) return rc;
    if (!li) {
        if (def && n > 0) memcpy(out, def, sizeof(int64_t) * (size_t)n);
        if (got) *got = def ? n : 0;
        return ACL_SUCCESS;
    }
    if ((n >= 0 && cnt != n) || cnt > max)
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: attr '%s' must have %d values, got %d", k->op_name, name,
                         n >= 0 ? n : max, cnt);
    memcpy(out, li, sizeof(int64_t) * (size_t)cnt);
    if (got) *got = cnt;
    return ACL_SUCCESS;
}

aclError k_layout(const hrt_kernel *k, const aclopAttr *a, const hrt_tensor *t, const char *def, int *nhwc) {
    const char *df = NULL;
    aclError rc = hrt_attr_get_string(k, a, "data_format", false, NULL, &df);
    if (rc) return rc;
    int from_attr = -1;
    if (df) {
        if (strcmp(df, "NCHW") == 0) from_attr = 0;
        else if (strcmp(df, "NHWC") == 0) from_attr = 1;
        else
            return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: data_format '%s' is not supported (NCHW or NHWC)",
                             k->op_name, df);
    }
    int from_desc = t->format == ACL_FORMAT_NCHW ? 0 : t->format == ACL_FORMAT_NHWC ? 1 : -1;
    if (from_desc < 0 && t->format != ACL_FORMAT_ND && t->format != ACL_FORMAT_UNDEFINED)
        return hrt_error(ACL_ERROR_FORMAT_NOT_MATCH, K_API, "%s: input format %s is not supported (NCHW, NHWC or ND)",
                         k->op_name, hrt_format_name(t->format));
    if (from_desc >= 0 && from_attr >= 0 && from_desc != from_attr)
        return hrt_error(ACL_ERROR_FORMAT_NOT_MATCH, K_API, "%s: input format %s contradicts data_format '%s'",
                         k->op_name, hrt_format_name(t->format), df);
    if (from_desc >= 0) *nhwc = from_desc;
    else if (from_attr >= 0) *nhwc = from_attr;
    else *nhwc = strcmp(def, "NHWC") == 0;
    return ACL_SUCCESS;
}

/* ------------------------------------------------------- shared kernels */
typedef struct {
    char *dst;
    const char *src;
} cp_ctx;

static void cp_chunk(void *vp, int64_t b, int64_t e) {
    cp_ctx *c = vp;
    memcpy(c->dst + b, c->src + b, (size_t)(e - b));
}

void k_parallel_memcpy(void *dst, const void *src, size_t n) {
    if (!n || dst == src) return;
    cp_ctx c = {dst, src};
    hrt_parallel_for((int64_t)n, 1 << 20, cp_chunk, &c);
}

aclError k_copy_run(const hrt_kernel *k, void *const *in, void *const *out) {
    k_parallel_memcpy(out[0], in[0], k->out[0].nbytes);
    return ACL_SUCCESS;
}

void k_fill(void *dst, const void *val, size_t esz, int64_t n) {
    if (n <= 0) return;
    switch (esz) {
    case 1: memset(dst, *(const uint8_t *)val, (size_t)n); return;
    case 2: {
        uint16_t v;
        memcpy(&v, val, 2);
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = v;
        return;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, val, 4);
        uint32_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = v;
        return;
    }
    case 8: {
        uint64_t v;
        memcpy(&v, val, 8);
        uint64_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = v;
        return;
    }
    default:
        for (int64_t i = 0; i < n; i++) memcpy((char *)dst + (size_t)i * esz, val, esz);
    }
}

void k_stream_store_f32(float *dst, const float *src, int64_t n) {
#if defined(__AVX__)
    int64_t i = 0;
    while (i < n && ((uintptr_t)(dst + i) & 31u)) {
        dst[i] = src[i];
        i++;
    }
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
    for (; i < n; i++) dst[i] = src[i];
    _mm_sfence();
#else
    memcpy(dst, src, sizeof(float) * (size_t)n);
#endif
}

void *k_scratch(const hrt_kernel *k, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory for %zu bytes of scratch", k->op_name, bytes);
    return p;
}
