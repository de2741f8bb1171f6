/* Checked integer arithmetic and aligned allocation for the host runtime.
 *
 * The runtime is built with -fwrapv, so a signed overflow does not trap: it
 * wraps, and a wrapped value that then sizes a buffer, bounds a copy or
 * divides is a heap overrun or a SIGFPE.  Every integer that comes from a
 * caller (an attr, a shape, an offset, a size) goes through these helpers
 * before it does any of that.  Each returns true when the exact result does
 * not fit (the C23 <stdckdint.h> convention), so call sites read
 *     if (ckd_mul(&n, a, b)) return hrt_error(..., "overflows");
 */
#ifndef AIOGE_HRT_CKD_H
#define AIOGE_HRT_CKD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#ifndef ckd_add
#define ckd_add(r, a, b) __builtin_add_overflow((a), (b), (r))
#define ckd_sub(r, a, b) __builtin_sub_overflow((a), (b), (r))
#define ckd_mul(r, a, b) __builtin_mul_overflow((a), (b), (r))
#endif

/* Product of n int64 values into *out; true on overflow or a negative factor. */
static inline bool ckd_prod_i64(int64_t *out, const int64_t *v, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (v[i] < 0 || ckd_mul(&p, p, v[i])) return true;
    *out = p;
    return false;
}

/* `count` elements of `esz` bytes as a size_t; true on overflow or count < 0. */
static inline bool ckd_bytes(size_t *out, int64_t count, size_t esz) {
    if (count < 0) return true;
    return ckd_mul(out, (size_t)count, esz);
}

/* True when [off, off + len) lies inside [0, limit) (no wrap, all >= 0). */
static inline bool ckd_range_ok(int64_t off, int64_t len, int64_t limit) {
    int64_t end;
    return off >= 0 && len >= 0 && !ckd_add(&end, off, len) && end <= limit;
}

/* Round `n` up to a multiple of `align` (a power of two); true on overflow. */
static inline bool ckd_round_up(size_t *out, size_t n, size_t align) {
    size_t r;
    if (ckd_add(&r, n, align - 1)) return true;
    *out = r & ~(align - 1);
    return false;
}

/* aligned_alloc with the size rounded up to a multiple of the alignment (C11
 * requires it; glibc tolerates other sizes, ASan and strict allocators do
 * not) and never of size 0.  NULL on overflow or out of memory. */
static inline void *hrt_aligned_alloc(size_t align, size_t n) {
    size_t r;
    if (ckd_round_up(&r, n ? n : 1, align)) return NULL;
    return aligned_alloc(align, r);
}

/* Same, for `count` elements of `esz` bytes (count < 0 or overflow -> NULL). */
static inline void *hrt_aligned_array(size_t align, int64_t count, size_t esz) {
    size_t n;
    if (ckd_bytes(&n, count, esz)) return NULL;
    return hrt_aligned_alloc(align, n);
}

/* hrt_aligned_array(64, ...) for an array written once and read often (packed weights): from
 * 4 MiB up, 2 MiB aligned and backed by transparent huge pages, as big device blocks are
 * (memory.c) -- page faults otherwise dominate its first write (411 MB: 139 -> 48 ms); from 2 MiB
 * up, 2 MiB aligned and its whole 2 MiB pages backed by huge pages, the rest by small ones (not
 * rounded up: an array of 2.2 MB would hold 4; a shufflenet's 2.2 MB of packed panels written in
 * 0.15 rather than 1.1 ms of page faults) */
static inline void *hrt_big_array(int64_t count, size_t esz) {
    size_t n;
    const size_t huge = (size_t)2 << 20;
    if (ckd_bytes(&n, count, esz)) return NULL;
    if (n < huge) {
        void *p = hrt_aligned_alloc(64, n);
#ifdef MADV_POPULATE_WRITE
        /* from 64 KiB up, its whole pages made present in one call (the first write faults in none
         * of them: a third less than one page fault each) */
        const uintptr_t page = 4096, a = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + n) & ~(page - 1);
        if (p && n >= ((size_t)64 << 10) && e > a) madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#endif
        return p;
    }
    if (n < 2 * huge) {
        void *p = NULL;
        if (posix_memalign(&p, huge, n)) return NULL;
#ifdef MADV_HUGEPAGE
        madvise(p, n & ~(huge - 1), MADV_HUGEPAGE);
#endif
        return p;
    }
    void *p = hrt_aligned_alloc(huge, n);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, n, MADV_HUGEPAGE); /* (rounded up to 2 MiB by hrt_aligned_alloc) */
#endif
    return p;
}

#endif
