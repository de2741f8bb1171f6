/* The embedded host runtime (the "hrt"): every runtime header, and the
 * layering and lock hierarchy that hold them together.
 *
 * The runtime implements the ACL C ABI declared in ../acl.h on the CPU:
 * streams are worker threads with FIFO queues, events are stream markers,
 * device memory is tracked heap memory, and ops are C kernels found in a
 * registry and cached once "compiled".  No Python, no GIL: everything here
 * is plain C with pthreads.
 *
 * Files, bottom up; a file calls only files below it (checked by
 * tests/runtime/test_c_layers.py with tools/c_call_graph.py), and each
 * prototype is in its owner's header:
 *   hrt_kernel.h  errors, settings (common.c, env.c), attrs, op registry,
 *                 pool, BLAS: all a kernel (kernels/, through kcommon.h) sees
 *   hrt_base.h    handles, clocks, buffers (common.c); thread.c; lock.c
 *   hrt_ctx.h     the thread's current context (ctx.c)
 *   hrt_op.h      desc.c, alias.c, pool.c, blas.c, op.c, kernels/
 *   hrt_mem.h     memory.c (the synchronous half calls no stream)
 *   hrt_stream.h  stream.c: tasks and the one enqueue helper
 *   hrt_callback.h  callback.c;  event.c; memory.c's async copies; op.c's launch
 *   graph.c       sunk graphs (../aioge_graph.h)
 *   runtime.c     aclInit/aclFinalize, devices, contexts and their streams
 *   counters.c    aiogeHostGetCounters: reads every layer's counters
 * The public entry points are declared in ../acl.h, ../aioge_host.h and
 * ../aioge_graph.h.
 *
 * Lock hierarchy.  A thread holding a lock may only take locks further down
 * this list, never one above it (so no two threads can wait on each other):
 *   1. rt_mu         (runtime.c)   devices, contexts, stream lists
 *   2. cb_mu         (callback.c)  host-callback subscriptions and records
 *   3. hrt_stream.mu (stream.c)    one stream's queue and error state
 *   4. event mu      (event.c)     one event's record/done generations
 *   5. h_mu          (common.c)    the live-handle registry
 * Leaves, held without taking any other lock: cache_mu, reg_mu, opt_mu
 * (op.c), mem_lock (memory.c, a rwlock), pool_mu (pool.c), blas_mu (blas.c),
 * gate_mu (stream.c).  A kernel runs with no runtime lock held and takes only
 * pool_mu (through hrt_parallel_for).  The ranks are in hrt_lock.h; a debug
 * build (-DHRT_DEBUG_LOCKS, on in .ci/sanitize's ASan build) aborts on a lock
 * taken out of order, and ThreadSanitizer's lock-order-inversion detector
 * checks it too (.ci/sanitize tsan). */
#ifndef AIOGE_HRT_H
#define AIOGE_HRT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>

#include "hrt_kernel.h"
#include "hrt_base.h"
#include "hrt_ctx.h"
#include "hrt_op.h"
#include "hrt_mem.h"
#include "hrt_stream.h"
#include "hrt_callback.h"
#include "../aioge_host.h"
#include "../aioge_graph.h"

#define HRT_VERSION 2

#endif
