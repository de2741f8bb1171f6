/* The embedded host runtime (the "hrt"): every runtime header, and the
 * layering and lock hierarchy that hold them together.
 *
 * The runtime implements the ACL C ABI declared in ../acl.h on the CPU:
 * streams are worker threads with FIFO queues, events are stream markers,
 * device memory is tracked heap memory, and ops are C kernels found in a
 * registry and cached once "compiled".  No Python, no GIL: everything here
 * is plain C with pthreads.
 *
 * Files, bottom up: a file calls only files on lines above it (the call
 * graph from the objects' symbols: `python tools/c_call_graph.py`; a cycle
 * fails tests/runtime/test_c_layers.py).  Each prototype is in its owner's
 * header, named on the right:
 *   common.c env.c lock.c   errors, settings (hrt_kernel.h); handles, clocks,
 *                           buffers (hrt_base.h); the lock check (hrt_lock.h)
 *   thread.c ctx.c alias.c  worker priority (hrt_base.h); the thread's current
 *                           context (hrt_ctx.h); launch aliasing (hrt_op.h)
 *   pool.c stream.c         intra-op pool (hrt_kernel.h, hrt_op.h); streams,
 *                           tasks and the one enqueue helper (hrt_stream.h)
 *   gemm_small.c            the packed and small-M float32 GEMM kernels, chosen
 *                           by the CPU's ISA at run time (hrt_kernel.h)
 *   blas.c memory.c event.c callback.c capture.c
 *                           GEMM (hrt_kernel.h, hrt_op.h); device memory and
 *                           async copies (hrt_mem.h); events; host callbacks
 *                           (hrt_callback.h); stream capture, aclmdlRI*
 *                           (its state in hrt_stream.h)
 *   desc.c                  tensor descs and attrs (hrt_kernel.h, hrt_op.h)
 *   op.c                    op registry, kernel cache, aclopCompileAndExecute
 *                           (hrt_kernel.h, hrt_op.h)
 *   kernels/ graph.c runtime.c counters.c
 *                           the kernels (they see only hrt_kernel.h); sunk
 *                           graphs; aclInit/aclFinalize, devices, contexts and
 *                           their streams; aiogeHostGetCounters
 * The public entry points are declared in ../acl.h, ../aioge_host.h and
 * ../aioge_graph.h.
 *
 * Lock hierarchy.  A thread holding a lock may only take locks further down
 * this list, never one above it (so no two threads can wait on each other):
 *   0. run_mu        (capture.c)   one captured model's replays; held while a replay runs
 *                                  its recorded tasks, which take what tasks take
 *   1. rt_mu         (runtime.c)   devices, contexts, stream lists
 *   2. cb_mu         (callback.c)  host-callback subscriptions and records
 *   3. hrt_stream.mu (stream.c)    one stream's queue and error state
 *   4. event mu      (event.c)     one event's record/done generations
 *   5. h_mu          (common.c)    the live-handle registry
 * Leaves, held without taking any other lock: cache_mu, reg_mu, opt_mu
 * (op.c), mem_lock (memory.c, a rwlock), pool_mu (pool.c), blas_mu (blas.c),
 * gate_mu (stream.c), sw_mu (launch.c).  A prepared launch's mu (launch.c) is
 * taken with no runtime lock held and holds only leaves and h_mu (compiling its
 * kernel); like blas_mu it is a plain pthread lock, not tracked.  A task (a kernel, say) runs with no runtime lock held
 * and takes only pool_mu (through hrt_parallel_for).  The ranks are in
 * hrt_lock.h; a debug build (-DHRT_DEBUG_LOCKS, on in .ci/sanitize's ASan
 * build) aborts on a lock taken out of order or a task started with a lock
 * held (blas_mu, in kern's blas.c, is a plain pthread lock: not tracked), and ThreadSanitizer's lock-order-inversion detector
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
#include "hrt_launch.h"
#include "../aioge_host.h"
#include "../aioge_graph.h"

#define HRT_VERSION 2

#endif
