/* Recurrent cells: DynamicRNN (an LSTM layer) and DynamicGRUV2 (a GRU
 * layer), time-major, one direction, float32 (float16/bfloat16 through
 * float32 copies, float64 on its own GEMMs).
 *
 * DynamicRNN: x (T, B, I), w (I + H, 4H) with the gates in gate_order
 * "ijfo" or "ifjo", b (4H); optional seq_length, init_h / init_c (1, B, H);
 * outputs y, output_h, output_c and the gate values i, j, f, o, tanhc, all
 * (T, B, H).  c' = f*c + i*j (f biased by forget_bias, c' clipped to
 * +-cell_clip when cell_clip > 0), h' = o*tanh(c').
 * DynamicGRUV2: weight_input (I, 3H), weight_hidden (H, 3H) in gate_order
 * "zrh" or "rzh", optional bias_input / bias_hidden (3H), seq_length,
 * init_h; outputs y, output_h, update, reset, new, hidden_new.  reset_after:
 * n = tanh(xW_n + r*(hR_n + b_hn)) (else (r*h)R_n), h' = (1 - z)*n + z*h.
 * seq_length is a (T, B, H) mask (non-zero: a valid step) or int32 (B)
 * lengths; on a masked step y is 0 and the state carries over, so the last
 * step of output_h is each sequence's final state.  direction
 * "REDIRECTIONAL" runs the steps from last to first.
 *
 * The input projection of every step is one GEMM; each step adds one
 * (B, H) x (H, G*H) GEMM and vectorisable gate loops. */
#include "kcommon.h"

enum { RNN_LSTM, RNN_GRU };

typedef struct {
    int kind;
    int64_t T, B, I, H, G;
    bool reverse, ifjo, rzh, reset_after;
    double forget_bias, clip;
    int mask_kind; /* 0 none, 1 (T, B, H) mask, 2 (B) int32 lengths */
    aclDataType dt, mask_dt;
} rnn_plan;

static inline float sigf(float v) { return 1.0f / (1.0f + expf(-v)); }

static bool valid_at(const rnn_plan *p, const void *mask, int64_t t, int64_t b, int64_t h) {
    if (p->mask_kind == 0) return true;
    if (p->mask_kind == 2) return t < ((const int32_t *)mask)[b];
    int64_t at = (t * p->B + b) * p->H + h;
    if (p->mask_dt == ACL_INT32) return ((const int32_t *)mask)[at] != 0;
    if (p->mask_dt == ACL_FLOAT) return ((const float *)mask)[at] != 0.0f;
    return (((const uint16_t *)mask)[at] & 0x7fffu) != 0;
}

/* float32 copies of the inputs a non-float32 run needs (NULL when absent) */
static float *as_f32(const hrt_kernel *k, const void *src, aclDataType dt, int64_t n, bool *own) {
    *own = false;
    if (!src) return NULL;
    if (dt == ACL_FLOAT) return (float *)src;
    size_t bytes;
    if (__builtin_mul_overflow((size_t)n, sizeof(float), &bytes)) return NULL;
    float *d = k_scratch(k, bytes);
    if (!d) return NULL;
    if (dt == ACL_DOUBLE) {
        for (int64_t i = 0; i < n; i++) d[i] = (float)((const double *)src)[i];
    } else {
        k_to_f32(src, dt, d, n);
    }
    *own = true;
    return d;
}

static void from_f32(const float *s, aclDataType dt, void *d, int64_t n) {
    if (dt == ACL_DOUBLE) {
        for (int64_t i = 0; i < n; i++) ((double *)d)[i] = s[i];
    } else {
        k_from_f32(s, dt, d, n);
    }
}

static aclError rnn_run(const hrt_kernel *k, void *const *in, void *const *out) {
    const rnn_plan *p = k->plan;
    int64_t T = p->T, B = p->B, I = p->I, H = p->H, G = p->G, GH = G * H, TB = T * B;
    if (p->mask_kind == 2) {
        for (int64_t b = 0; b < B; b++) {
            int32_t len = ((const int32_t *)in[p->kind == RNN_LSTM ? 3 : 5])[b];
            if (len < 0 || len > T)
                return hrt_task_fail(ACL_ERROR_RT_AICORE_EXCEPTION, "%s: seq_length[%lld] = %d is outside [0, %lld]",
                                     k->op_name, (long long)b, len, (long long)T);
        }
    }
    /* scratch: the projections of every step (TB x GH), one step's recurrence (B x GH), h and c (B x H) */
    size_t n_proj, n_all, bytes;
    if (__builtin_mul_overflow((size_t)TB, (size_t)GH, &n_proj) ||
        __builtin_add_overflow(n_proj, (size_t)(B * GH + 2 * B * H), &n_all) ||
        __builtin_mul_overflow(n_all, sizeof(float), &bytes))
        return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: scratch size overflows", k->op_name);
    float *scratch = k_scratch(k, bytes);
    if (!scratch) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    float *proj = scratch, *rec = proj + n_proj, *h = rec + B * GH, *c = h + B * H;
    aclError rc = ACL_SUCCESS;
    bool own[8] = {false};
    float *x = NULL, *wi = NULL, *wh = NULL, *bi = NULL, *bh = NULL, *h0 = NULL, *c0 = NULL;
    const void *mask = p->mask_kind ? in[p->kind == RNN_LSTM ? 3 : 5] : NULL;
    x = as_f32(k, in[0], p->dt, TB * I, &own[0]);
    if (p->kind == RNN_LSTM) {
        wi = as_f32(k, in[1], p->dt, (I + H) * GH, &own[1]);
        wh = wi ? wi + I * GH : NULL;
        bi = as_f32(k, in[2], p->dt, GH, &own[2]);
        h0 = as_f32(k, in[4], p->dt, B * H, &own[3]);
        c0 = as_f32(k, in[5], p->dt, B * H, &own[4]);
    } else {
        wi = as_f32(k, in[1], p->dt, I * GH, &own[1]);
        wh = as_f32(k, in[2], p->dt, H * GH, &own[2]);
        bi = as_f32(k, in[3], p->dt, GH, &own[3]);
        bh = as_f32(k, in[4], p->dt, GH, &own[4]);
        h0 = as_f32(k, in[6], p->dt, B * H, &own[5]);
    }
    float *outs[8] = {NULL};
    int n_out = p->kind == RNN_LSTM ? 8 : 6;
    for (int j = 0; j < n_out; j++) {
        outs[j] = p->dt == ACL_FLOAT ? (float *)out[j] : k_scratch(k, sizeof(float) * (size_t)(TB * H));
        if (!outs[j]) rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    if (!x || !wi || !wh || rc) {
        rc = rc ? rc : hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of host memory", k->op_name);
        goto done;
    }
    /* proj = x @ W_in (+ bias) for every step */
    if ((rc = hrt_sgemm(false, false, TB, GH, I, 1.0f, x, I, wi, GH, 0.0f, proj, GH))) goto done;
    if (bi)
        for (int64_t r = 0; r < TB; r++)
            for (int64_t q = 0; q < GH; q++) proj[r * GH + q] += bi[q];
    for (int64_t q = 0; q < B * H; q++) {
        h[q] = h0 ? h0[q] : 0.0f;
        c[q] = c0 ? c0[q] : 0.0f;
    }
    for (int64_t s = 0; s < T; s++) {
        int64_t t = p->reverse ? T - 1 - s : s;
        if ((rc = hrt_sgemm(false, false, B, GH, H, 1.0f, h, H, wh, GH, 0.0f, rec, GH))) goto done;
        for (int64_t b = 0; b < B; b++) {
            const float *px = proj + (t * B + b) * GH, *pr = rec + b * GH;
            int64_t o0 = (t * B + b) * H;
            float *hb = h + b * H, *cb = c + b * H;
            if (p->kind == RNN_LSTM) {
                /* gate offsets in the packed weights: ijfo or ifjo */
                int64_t oi = 0, oj = p->ifjo ? 2 * H : H, of = p->ifjo ? H : 2 * H, oo = 3 * H;
                for (int64_t u = 0; u < H; u++) {
                    float gi = sigf(px[oi + u] + pr[oi + u]);
                    float gj = tanhf(px[oj + u] + pr[oj + u]);
                    float gf = sigf(px[of + u] + pr[of + u] + (float)p->forget_bias);
                    float go = sigf(px[oo + u] + pr[oo + u]);
                    float cn = gf * cb[u] + gi * gj;
                    if (p->clip > 0) cn = k_minf(k_maxf(cn, (float)-p->clip), (float)p->clip);
                    float tc = tanhf(cn), hn = go * tc;
                    bool ok = valid_at(p, mask, t, b, u);
                    outs[0][o0 + u] = ok ? hn : 0.0f;
                    if (ok) {
                        hb[u] = hn;
                        cb[u] = cn;
                    }
                    outs[1][o0 + u] = hb[u];
                    outs[2][o0 + u] = cb[u];
                    outs[3][o0 + u] = gi, outs[4][o0 + u] = gj, outs[5][o0 + u] = gf, outs[6][o0 + u] = go;
                    outs[7][o0 + u] = tc;
                }
            } else {
                int64_t oz = p->rzh ? H : 0, orr = p->rzh ? 0 : H, on = 2 * H;
                for (int64_t u = 0; u < H; u++) {
                    float bz = bh ? bh[oz + u] : 0.0f, br = bh ? bh[orr + u] : 0.0f, bn = bh ? bh[on + u] : 0.0f;
                    float z = sigf(px[oz + u] + pr[oz + u] + bz);
                    float r = sigf(px[orr + u] + pr[orr + u] + br);
                    float hnew = pr[on + u] + bn; /* h R_n + b_hn */
                    outs[2][o0 + u] = z, outs[3][o0 + u] = r, outs[5][o0 + u] = hnew;
                }
                if (!p->reset_after) { /* (r * h) R_n: one (1 x H) x (H x H) product for this row */
                    float *rh = outs[5] + o0; /* reuse: hidden_new becomes (r*h) R_n + b_hn */
                    for (int64_t u = 0; u < H; u++) rec[b * GH + u] = outs[3][o0 + u] * hb[u];
                    if ((rc = hrt_sgemm(false, false, 1, H, H, 1.0f, rec + b * GH, H, wh + on, GH, 0.0f, rh, H)))
                        goto done;
                    for (int64_t u = 0; u < H; u++) rh[u] += bh ? bh[on + u] : 0.0f;
                }
                for (int64_t u = 0; u < H; u++) {
                    float r = outs[3][o0 + u], z = outs[2][o0 + u], hn_lin = outs[5][o0 + u];
                    float n = tanhf(px[on + u] + (p->reset_after ? r * hn_lin : hn_lin));
                    float hn = (1.0f - z) * n + z * hb[u];
                    bool ok = valid_at(p, mask, t, b, u);
                    outs[4][o0 + u] = n;
                    outs[0][o0 + u] = ok ? hn : 0.0f;
                    if (ok) hb[u] = hn;
                    outs[1][o0 + u] = hb[u];
                }
            }
        }
    }
    if (p->dt != ACL_FLOAT)
        for (int j = 0; j < n_out; j++) from_f32(outs[j], p->dt, out[j], TB * H);
done:
    if (own[0]) free(x);
    if (own[1]) free(wi);
    if (p->kind == RNN_LSTM) {
        if (own[2]) free(bi);
        if (own[3]) free(h0);
        if (own[4]) free(c0);
    } else {
        if (own[2]) free(wh);
        if (own[3]) free(bi);
        if (own[4]) free(bh);
        if (own[5]) free(h0);
    }
    if (p->dt != ACL_FLOAT)
        for (int j = 0; j < n_out; j++) free(outs[j]);
    free(scratch);
    return rc;
}

static aclError expect_shape3(const hrt_kernel *k, const hrt_tensor *t, const char *what, int64_t a, int64_t b,
                              int64_t c) {
    int64_t want[3] = {a, b, c};
    bool ok = t->ndim == 3;
    for (int d = 0; ok && d < 3; d++) ok = t->dims[d] == want[d];
    if (!ok && t->ndim == 2 && a == 1) ok = t->dims[0] == b && t->dims[1] == c; /* (B, H) states */
    if (ok) return ACL_SUCCESS;
    char s[128];
    hrt_shape_str(t->dims, t->ndim, s, sizeof s);
    return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: %s has shape %s, expected (%lld, %lld, %lld)", k->op_name,
                     what, s, (long long)a, (long long)b, (long long)c);
}

static aclError rnn_compile(hrt_kernel *k, const aclopAttr *attrs) {
    bool lstm = strcmp(k->op_name, "DynamicRNN") == 0;
    aclError rc = hrt_expect_counts(k, 3, lstm ? 10 : 7, lstm ? 8 : 6);
    if (rc) return rc;
    const hrt_tensor *x = &k->in[0];
    if (!k_is_float(x->dtype)) return k_unsupported(k, "x", x->dtype);
    if (x->ndim != 3) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: x must be (T, B, I)", k->op_name);
    int64_t T = x->dims[0], B = x->dims[1], I = x->dims[2], H, G = lstm ? 4 : 3;
    const hrt_tensor *w = &k->in[1];
    if (w->ndim != 2 || w->dims[1] % G)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: weights must be 2-D with %lld gates", k->op_name,
                         (long long)G);
    H = w->dims[1] / G;
    if (lstm ? w->dims[0] != I + H : w->dims[0] != I)
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: weight rows %lld do not fit input size %lld", k->op_name,
                         (long long)w->dims[0], (long long)I);
    if (!lstm && (k->in[2].ndim != 2 || k->in[2].dims[0] != H || k->in[2].dims[1] != G * H))
        return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "DynamicGRUV2: weight_hidden must be (%lld, %lld)",
                         (long long)H, (long long)(G * H));
    for (int i = 1; i < k->n_in; i++)
        if (!k->in[i].absent && i != (lstm ? 3 : 5) && (rc = k_expect_same_dtype(k, i, i + 1, x->dtype))) return rc;
    int bias_in[2] = {lstm ? 2 : 3, lstm ? -1 : 4};
    for (int j = 0; j < 2; j++) {
        int i = bias_in[j];
        if (i >= 0 && i < k->n_in && !k->in[i].absent && k->in[i].numel != G * H)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: bias input %d must hold %lld values", k->op_name, i,
                             (long long)(G * H));
    }
    if (lstm && k->in[2].absent) return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "DynamicRNN: b is required");
    int states[2] = {lstm ? 4 : 6, lstm ? 5 : -1};
    for (int j = 0; j < 2; j++) {
        int i = states[j];
        if (i >= 0 && i < k->n_in && !k->in[i].absent && (rc = expect_shape3(k, &k->in[i], "an initial state", 1, B, H)))
            return rc;
    }
    for (int i = 6; lstm && i < k->n_in; i++)
        if (!k->in[i].absent)
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "DynamicRNN: wci/wcf/wco/mask are not supported");
    rnn_plan *p = calloc(1, sizeof *p);
    if (!p) return hrt_error(ACL_ERROR_BAD_ALLOC, K_API, "out of host memory");
    int si = lstm ? 3 : 5;
    if (si < k->n_in && !k->in[si].absent) {
        const hrt_tensor *m = &k->in[si];
        if (m->dtype == ACL_INT32 && m->ndim == 1 && m->dims[0] == B) {
            p->mask_kind = 2;
        } else if (m->ndim == 3 && m->dims[0] == T && m->dims[1] == B && m->dims[2] == H &&
                   (m->dtype == ACL_FLOAT || m->dtype == ACL_FLOAT16 || m->dtype == ACL_INT32)) {
            p->mask_kind = 1;
        } else {
            free(p);
            return hrt_error(ACL_ERROR_OP_INPUT_NOT_MATCH, K_API, "%s: seq_length must be a (T, B, H) mask or (B) int32",
                             k->op_name);
        }
        p->mask_dt = m->dtype;
    }
    const char *dir, *order, *act, *cell;
    bool use_peep = false, time_major, reset_after = true;
    int64_t depth, nproj;
    double keep_prob;
    rc = hrt_attr_get_string(k, attrs, "direction", false, "UNIDIRECTIONAL", &dir);
    if (!rc) rc = hrt_attr_get_string(k, attrs, "gate_order", false, lstm ? "ijfo" : "zrh", &order);
    if (!rc) rc = hrt_attr_get_string(k, attrs, "activation", false, "tanh", &act);
    if (!rc) rc = hrt_attr_get_bool(k, attrs, "time_major", true, &time_major);
    if (!rc) rc = hrt_attr_get_int(k, attrs, "cell_depth", false, 1, &depth);
    if (!rc) rc = hrt_attr_get_int(k, attrs, "num_proj", false, 0, &nproj);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "keep_prob", false, 1.0, &keep_prob);
    if (!rc) rc = hrt_attr_get_float(k, attrs, "cell_clip", false, -1.0, &p->clip);
    if (!rc && lstm) rc = hrt_attr_get_string(k, attrs, "cell_type", false, "LSTM", &cell);
    if (!rc && lstm) rc = hrt_attr_get_bool(k, attrs, "use_peephole", false, &use_peep);
    if (!rc && lstm) rc = hrt_attr_get_float(k, attrs, "forget_bias", false, 0.0, &p->forget_bias);
    if (!rc && !lstm) rc = hrt_attr_get_bool(k, attrs, "reset_after", true, &reset_after);
    if (rc) {
        free(p);
        return rc;
    }
    const char *bad = NULL;
    if (strcmp(dir, "UNIDIRECTIONAL") != 0 && strcmp(dir, "REDIRECTIONAL") != 0) bad = "direction";
    else if (lstm && strcmp(order, "ijfo") != 0 && strcmp(order, "ifjo") != 0) bad = "gate_order";
    else if (!lstm && strcmp(order, "zrh") != 0 && strcmp(order, "rzh") != 0) bad = "gate_order";
    else if (strcmp(act, "tanh") != 0) bad = "activation (only tanh)";
    else if (!time_major) bad = "time_major (only true)";
    else if (depth != 1 || nproj != 0 || use_peep || keep_prob != 1.0) bad = "cell_depth/num_proj/use_peephole/keep_prob";
    else if (lstm && strcmp(cell, "LSTM") != 0) bad = "cell_type (only LSTM)";
    if (bad) {
        free(p);
        return hrt_error(ACL_ERROR_OP_ATTR_NOT_MATCH, K_API, "%s: unsupported %s", k->op_name, bad);
    }
    for (int j = 0; j < k->n_out; j++) {
        int64_t od[3] = {T, B, H};
        if ((rc = k_expect_out_dtype(k, j, x->dtype)) || (rc = hrt_expect_same_shape(k, &k->out[j], od, 3, j))) {
            free(p);
            return rc;
        }
    }
    p->kind = lstm ? RNN_LSTM : RNN_GRU;
    p->T = T, p->B = B, p->I = I, p->H = H, p->G = G;
    p->reverse = strcmp(dir, "REDIRECTIONAL") == 0;
    p->ifjo = strcmp(order, "ifjo") == 0;
    p->rzh = strcmp(order, "rzh") == 0;
    p->reset_after = reset_after;
    p->dt = x->dtype;
    k->plan = p;
    k->plan_free = free;
    k->run = rnn_run;
    return ACL_SUCCESS;
}

HRT_OP(dynamicrnn, "DynamicRNN", rnn_compile)
HRT_OP(dynamicgruv2, "DynamicGRUV2", rnn_compile)
