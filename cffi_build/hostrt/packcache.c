/* Packed matrix weights shared by every plan that packs the same weight.
 *
 * A model compiled for many input shapes (dynamic shapes: a plan per sequence length) packs its
 * constant B once per plan; the packed panels depend only on op(B) -- its layout (tb, n, k, ldb)
 * and its values -- never on the shape of A.  So the kernels' pack hooks (matmul.c, fused.c) take
 * their panels from here: one packed copy per distinct weight, referenced by every plan that
 * packed it and freed when the last one lets go (aiogeGraphDestroy -> pack_free).
 *
 * An entry matches on the weight's layout, its host address and its values: the same array handed
 * to several plans (as the runtime's shared constants are) finds its panels, and a weight that lies
 * at an address another weight used before, with the same layout, is compared with that entry's
 * panels (hrt_sgemm_pb_holds) before it takes them.  Only such a candidate is compared: a weight
 * no entry was packed from at its address is read once, to pack it (a 64-bit hash of every weight
 * read each one a second time: 11% of vgg19's compile).  pc_mu is a leaf: candidates are compared
 * outside it, each held by a reference meanwhile.
 *
 * hrt_pack_weight is the one entry of a graph's weight packing (graph.c): a weight the model's
 * bytes hold at an address not aligned to its element size (the importer views every weight where
 * it lies in the file) is copied into an aligned scratch for the pack hook alone, and an entry
 * packed from that scratch is keyed by the weight's own address (pc_alias), as if packed in place. */
#include "hrt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pc_entry {
    struct pc_entry *next;
    bool tb;
    int64_t n, k, ldb;
    const void *src;
    hrt_sgemm_pb *pb;
    int64_t refs;
} pc_entry;

static pthread_mutex_t pc_mu = PTHREAD_MUTEX_INITIALIZER;
/* the panels hrt_sgemm_pack_b_shared last handed to the calling thread (hrt_pack_weight's reads_raw) */
static __thread hrt_sgemm_pb *pc_handed;
static pc_entry *pc_list;
static _Atomic int64_t pc_shared_hits;

/* the calling thread's aligned scratch copy of a weight being packed: [copy, copy + bytes) is the
 * weight at orig (hrt_pack_weight); copy NULL: none */
static __thread struct {
    const char *copy, *orig;
    size_t bytes;
} pc_alias;

/* the address an entry of b is keyed by: b's own, or the weight's that b's scratch copy holds */
static const void *pc_key(const float *b) {
    const char *p = (const char *)b;
    if (pc_alias.copy && p >= pc_alias.copy && p < pc_alias.copy + pc_alias.bytes)
        return pc_alias.orig + (p - pc_alias.copy);
    return b;
}

/* the candidates compared at most: entries from one address and layout (more: packed anew) */
#define PC_TRIES 8

/* An entry holding op(B) as B is now, with a reference taken for the caller; NULL: none.
 * tried / ntried: entries already found to differ (not compared again). */
static pc_entry *pc_find(bool tb, int64_t n, int64_t k, const float *b, int64_t ldb, const pc_entry **tried, int *ntried) {
    const void *key = pc_key(b);
    for (;;) {
        pc_entry *cand = NULL;
        HRT_LOCK(&pc_mu, HRT_RANK_LEAF);
        for (pc_entry *e = pc_list; e && !cand; e = e->next) {
            if (e->tb != tb || e->n != n || e->k != k || e->ldb != ldb || e->src != key) continue;
            bool seen = false;
            for (int i = 0; i < *ntried; i++) seen |= tried[i] == e;
            if (!seen) cand = e;
        }
        if (cand) cand->refs++;
        HRT_UNLOCK(&pc_mu);
        if (!cand) return NULL;
        if (hrt_sgemm_pb_holds(cand->pb, tb, b, ldb)) return cand;
        hrt_sgemm_pb_release(cand->pb);
        if (*ntried == PC_TRIES) return NULL;
        tried[(*ntried)++] = cand;
    }
}

hrt_sgemm_pb *hrt_sgemm_pack_b_shared(bool tb, int64_t n, int64_t k, const float *b, int64_t ldb) {
    if (n <= 0 || k <= 0 || !b) return NULL;
    const pc_entry *tried[PC_TRIES];
    int ntried = 0;
    pc_entry *hit = pc_find(tb, n, k, b, ldb, tried, &ntried);
    if (hit) {
        atomic_fetch_add(&pc_shared_hits, 1);
        return pc_handed = hit->pb;
    }
    /* packed outside the lock (megabytes: milliseconds); a concurrent packing of the same weight
     * keeps the first entry and frees its own copy */
    hrt_sgemm_pb *pb = hrt_sgemm_pack_b(tb, n, k, b, ldb);
    pc_entry *mine = pb ? calloc(1, sizeof *mine) : NULL;
    if (!mine) {
        hrt_sgemm_pb_free(pb);
        return NULL;
    }
    *mine = (pc_entry){NULL, tb, n, k, ldb, pc_key(b), pb, 1};
    hit = pc_find(tb, n, k, b, ldb, tried, &ntried);
    if (hit) {
        hrt_sgemm_pb_free(pb);
        free(mine);
        return pc_handed = hit->pb;
    }
    HRT_LOCK(&pc_mu, HRT_RANK_LEAF);
    mine->next = pc_list;
    pc_list = mine;
    HRT_UNLOCK(&pc_mu);
    return pc_handed = pb;
}

hrt_sgemm_pb *hrt_sgemm_pack_b_fill_shared(bool tb, int64_t n, int64_t k, const void *value) {
    if (n <= 0 || k <= 0 || !value) return NULL;
    /* every row of B the same: one row of the value, read with ldb 0, packs the same panels as B */
    const int64_t row = tb ? k : n;
    float *b = malloc(sizeof(float) * (size_t)row);
    if (!b) return NULL;
    float v;
    memcpy(&v, value, sizeof v);
    for (int64_t i = 0; i < row; i++) b[i] = v;
    /* keyed by the value's address (as a scratch copy is by its weight's): the nodes reading one
     * weight find the panels the first packed */
    pc_alias.copy = (const char *)b;
    pc_alias.orig = value;
    pc_alias.bytes = sizeof(float) * (size_t)row;
    hrt_sgemm_pb *pb = hrt_sgemm_pack_b_shared(tb, n, k, b, 0);
    pc_alias.copy = NULL;
    free(b);
    return pb;
}

/* Whether a product packed into pb may read its unpacked op(B) at run time: hrt_sgemm_packed hands
 * a product to BLAS from the unpacked op(B) where that measured faster (large M and panels; a
 * portable build's generic family: any size, and the family may change at run time) */
static bool pb_reads_raw(const hrt_sgemm_pb *pb) {
#if !defined(__AVX2__)
    (void)pb;
    return true;
#else
    return hrt_sgemm_packed_prefers_blas(INT64_MAX, pb);
#endif
}

/* k->pack, and whether the node's run_packed may still read the weight as uploaded: a kernel's pack
 * that holds a product's panels (hrt_sgemm_pack_b_shared on this thread) may, when pb_reads_raw says
 * so; its other packs (Winograd's U, the NCHWc filter blocks) are all its packed runs read */
static void *pack_hook(const hrt_kernel *k, int input, const void *data, size_t *bytes, bool *reads_raw) {
    pc_handed = NULL;
    void *p = k->pack(k, input, data, bytes);
    *reads_raw = p && pc_handed && pb_reads_raw(pc_handed);
    pc_handed = NULL;
    return p;
}

void *hrt_pack_weight_fill(const hrt_kernel *k, int input, const void *value, size_t *bytes, bool *reads_raw) {
    *reads_raw = false;
    if (!k->pack_fill) return NULL;
    pc_handed = NULL;
    void *p = k->pack_fill(k, input, value, bytes);
    *reads_raw = p && pc_handed && pb_reads_raw(pc_handed);
    pc_handed = NULL;
    return p;
}

void *hrt_pack_weight(const hrt_kernel *k, int input, const void *data, size_t nbytes, size_t *bytes, bool *reads_raw) {
    size_t esz = input < k->n_in ? hrt_dtype_size(k->in[input].dtype) : 0;
    if (esz < 2 || ((uintptr_t)data & (esz - 1)) == 0 || esz & (esz - 1)) return pack_hook(k, input, data, bytes, reads_raw);
    /* not aligned to its element size: the hooks read it as typed elements (vector loads, and a
     * compiler may assume the alignment), so they are handed an aligned copy, freed once packed
     * (a packed weight never points into its source) */
    void *copy = hrt_aligned_alloc(64, nbytes);
    if (!copy) return NULL; /* not packed: the node runs from the weight as uploaded */
    memcpy(copy, data, nbytes);
    pc_alias.copy = copy;
    pc_alias.orig = data;
    pc_alias.bytes = nbytes;
    void *p = pack_hook(k, input, copy, bytes, reads_raw);
    pc_alias.copy = NULL;
    free(copy);
    return p;
}

void hrt_sgemm_pb_release(hrt_sgemm_pb *pb) {
    if (!pb) return;
    HRT_LOCK(&pc_mu, HRT_RANK_LEAF);
    pc_entry **pp = &pc_list;
    while (*pp && (*pp)->pb != pb) pp = &(*pp)->next;
    pc_entry *e = *pp;
    bool last = e && --e->refs == 0;
    if (last) *pp = e->next;
    HRT_UNLOCK(&pc_mu);
    if (!e) { /* not from the cache */
        hrt_sgemm_pb_free(pb);
        return;
    }
    if (last) {
        hrt_sgemm_pb_free(pb);
        free(e);
    }
}

void aiogeHostSharedPackInfo(int64_t out[3]) {
    int64_t entries = 0, bytes = 0;
    HRT_LOCK(&pc_mu, HRT_RANK_LEAF);
    for (pc_entry *e = pc_list; e; e = e->next) {
        entries++;
        bytes += (int64_t)hrt_sgemm_pb_bytes(e->pb);
    }
    HRT_UNLOCK(&pc_mu);
    out[0] = entries;
    out[1] = bytes;
    out[2] = atomic_load(&pc_shared_hits);
}
