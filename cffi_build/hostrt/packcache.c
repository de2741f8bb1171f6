/* Packed matrix weights shared by every plan that packs the same weight.
 *
 * A model compiled for many input shapes (dynamic shapes: a plan per sequence length) packs its
 * constant B once per plan; the packed panels depend only on op(B) -- its layout (tb, n, k, ldb)
 * and its values -- never on the shape of A.  So the kernels' pack hooks (matmul.c, fused.c) take
 * their panels from here: one packed copy per distinct weight, referenced by every plan that
 * packed it and freed when the last one lets go (aiogeGraphDestroy -> pack_free).
 *
 * An entry matches on the weight's layout, its host address and a 64-bit hash of all its bytes:
 * the same array handed to several plans (as the runtime's shared constants are) finds its panels
 * even when it lies at an address another weight used before.  pc_mu is a leaf. */
#include "hrt.h"

#include <stdlib.h>
#include <string.h>

typedef struct pc_entry {
    struct pc_entry *next;
    bool tb;
    int64_t n, k, ldb;
    const void *src;
    uint64_t hash;
    hrt_sgemm_pb *pb;
    int64_t refs;
} pc_entry;

static pthread_mutex_t pc_mu = PTHREAD_MUTEX_INITIALIZER;
static pc_entry *pc_list;
static _Atomic int64_t pc_shared_hits;

typedef struct {
    const float *b;
    int64_t rows, cols, ld, per; /* per: rows of one chunk */
    uint64_t *out;              /* a hash per chunk */
} hash_job;

static void hash_chunks(void *vp, int64_t c0, int64_t c1) {
    const hash_job *j = vp;
    for (int64_t c = c0; c < c1; c++) {
        uint64_t h = HRT_HASH_SEED ^ (uint64_t)c;
        int64_t r1 = (c + 1) * j->per < j->rows ? (c + 1) * j->per : j->rows;
        for (int64_t r = c * j->per; r < r1; r++) h = hrt_hash_bytes(j->b + r * j->ld, sizeof(float) * (size_t)j->cols, h);
        j->out[c] = h;
    }
}

/* A hash of the rows x cols floats (row stride ld): of each 1 MiB chunk of rows (chunks spread
 * over the pool: a 411 MB weight took 100 ms on one thread), then of the chunks' hashes in order.
 * The chunking depends on the shape only, so equal weights hash equal. */
static uint64_t hash_floats(const float *b, int64_t rows, int64_t cols, int64_t ld) {
    int64_t per = ((int64_t)1 << 18) / cols + 1, n = (rows + per - 1) / per;
    uint64_t one, *out = n > 1 ? malloc(sizeof(uint64_t) * (size_t)n) : &one;
    if (!out) { /* no memory for the chunk hashes: one chunk */
        per = rows;
        n = 1;
        out = &one;
    }
    hash_job j = {b, rows, cols, ld, per, out};
    hrt_parallel_for(n, 1, hash_chunks, &j);
    uint64_t h = n > 1 ? hrt_hash_bytes(out, sizeof(uint64_t) * (size_t)n, HRT_HASH_SEED) : out[0];
    if (out != &one) free(out);
    return h;
}

hrt_sgemm_pb *hrt_sgemm_pack_b_shared(bool tb, int64_t n, int64_t k, const float *b, int64_t ldb) {
    if (n <= 0 || k <= 0 || !b) return NULL;
    uint64_t h = tb ? hash_floats(b, n, k, ldb) : hash_floats(b, k, n, ldb); /* op(B) is [K, N] of B^T or B */
    HRT_LOCK(&pc_mu, HRT_RANK_LEAF);
    for (pc_entry *e = pc_list; e; e = e->next)
        if (e->tb == tb && e->n == n && e->k == k && e->ldb == ldb && e->src == b && e->hash == h) {
            e->refs++;
            HRT_UNLOCK(&pc_mu);
            atomic_fetch_add(&pc_shared_hits, 1);
            return e->pb;
        }
    HRT_UNLOCK(&pc_mu);
    /* packed outside the lock (megabytes: milliseconds); a concurrent packing of the same weight
     * keeps the first entry and frees its own copy */
    hrt_sgemm_pb *pb = hrt_sgemm_pack_b(tb, n, k, b, ldb);
    pc_entry *mine = pb ? calloc(1, sizeof *mine) : NULL;
    if (!mine) {
        hrt_sgemm_pb_free(pb);
        return NULL;
    }
    *mine = (pc_entry){NULL, tb, n, k, ldb, b, h, pb, 1};
    HRT_LOCK(&pc_mu, HRT_RANK_LEAF);
    for (pc_entry *e = pc_list; e; e = e->next)
        if (e->tb == tb && e->n == n && e->k == k && e->ldb == ldb && e->src == b && e->hash == h) {
            e->refs++;
            HRT_UNLOCK(&pc_mu);
            hrt_sgemm_pb_free(pb);
            free(mine);
            return e->pb;
        }
    mine->next = pc_list;
    pc_list = mine;
    HRT_UNLOCK(&pc_mu);
    return pb;
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
