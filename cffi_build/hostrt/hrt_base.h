/* The bottom of the host runtime: the handle registry, clocks and a byte
 * buffer (common.c) and the worker threads' priority (thread.c).  Errors and
 * settings, which kernels use too, are in hrt_kernel.h.  Nothing here calls
 * up into streams, memory or ops. */
#ifndef AIOGE_HRT_BASE_H
#define AIOGE_HRT_BASE_H

#include "hrt_kernel.h"
#include "hrt_lock.h"

#include <time.h>

#define HRT_MAX_DEVICES 64

/* ------------------------------------------------ handle registry (common.c) */
typedef enum {
    HRT_H_CONTEXT = 1,
    HRT_H_STREAM,
    HRT_H_EVENT,
    HRT_H_DESC,
    HRT_H_BUFFER,
    HRT_H_ATTR,
    HRT_H_GRAPH,
    HRT_H_LAUNCH,   /* aiogeLaunch (launch.c) */
    HRT_H_MODEL_RI, /* aclmdlRI, a captured stream (capture.c) */
    HRT_H_KINDS
} hrt_kind;

void hrt_handle_add(const void *p, hrt_kind kind);
bool hrt_handle_remove(const void *p, hrt_kind kind);   /* false if not live */
bool hrt_handle_valid(const void *p, hrt_kind kind);
/* Batch checks under one lock. */
void hrt_handles_lock(void);
void hrt_handles_unlock(void);
bool hrt_handle_valid_locked(const void *p, hrt_kind kind);
int64_t hrt_handle_count(hrt_kind kind);

/* ----------------------------------------------------------- hash (common.c) */
/* A 64-bit hash of n bytes, continuing from h (HRT_HASH_SEED to start; chain calls to hash
 * several pieces): the op cache's keys, the shared packed weights' values */
#define HRT_HASH_SEED 0x9e3779b97f4a7c15ull
uint64_t hrt_hash_bytes(const void *data, size_t n, uint64_t h);

/* ----------------------------------------------------------- time (common.c) */
uint64_t hrt_now_ns(void);
/* deadline for a timeout in ms (-1 = forever -> 0) */
void hrt_deadline(struct timespec *ts, int32_t timeout_ms);

/* ------------------------------------------------------- buffer (common.c) */
/* A growable byte buffer with inline storage (cache keys). */
typedef struct hrt_buf {
    uint8_t *p;
    size_t len, cap;
    uint8_t inline_[1024];
} hrt_buf;
void hrt_buf_init(hrt_buf *b);
void hrt_buf_put(hrt_buf *b, const void *data, size_t n);
void hrt_buf_free(hrt_buf *b);

/* ------------------------------------------------------------- thread.c */
/* Run the calling thread at background priority (AIOGE_HOST_WORKER_NICE,
 * default 10) so an event loop sharing the cores wakes up promptly. */
void hrt_thread_background(void);

#endif
