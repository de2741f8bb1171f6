/* "Device" memory (memory.c): tracked heap blocks, their lookup and their
 * task references. */
#ifndef AIOGE_HRT_MEM_H
#define AIOGE_HRT_MEM_H

#include "hrt_base.h"

typedef struct hrt_alloc {
    uintptr_t base;
    size_t size;          /* requested bytes: the valid range */
    size_t charged;       /* bytes counted against capacity */
    int device;           /* -1 for pinned host */
    atomic_int refs;      /* queued tasks using the block */
    bool freed;           /* aclrtFree'd while still referenced */
} hrt_alloc;

/* Find the device allocation containing [p, p+len); NULL if none.  With
 * `ref`, the block's task reference count is raised (drop it with
 * hrt_alloc_unref); this keeps a block aclrtFree'd by the user alive until
 * the queued work using it has run. */
hrt_alloc *hrt_device_lookup(const void *p, size_t len, bool ref);
bool hrt_is_device_ptr(const void *p);
bool hrt_is_pinned_ptr(const void *p);
void hrt_alloc_unref(hrt_alloc *a);
void hrt_memory_release_all(void);  /* aclFinalize */
int64_t hrt_memory_counter(int which);  /* 0 dev allocs, 1 dev bytes, 2 host allocs, 3 host bytes, 4 deferred */

#endif
