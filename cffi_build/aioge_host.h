/* aioge-specific entry points of the embedded host runtime.  They are kept
 * apart from the ACL names (prefix aiogeHost) and exist only in the host
 * runtime: a real libascendcl.so does not have them, so Python looks them up
 * by name and treats them as optional.  Same cdef rules as acl.h. */

typedef struct aiogeHostCounters {
    int64_t contexts;            /* live explicit + default contexts */
    int64_t streams;             /* live streams, default streams included */
    int64_t events;
    int64_t tensor_descs;
    int64_t data_buffers;
    int64_t attrs;
    int64_t device_allocations;  /* live aclrtMalloc blocks (freed-but-busy included) */
    int64_t device_bytes;        /* bytes charged against device capacity */
    int64_t host_allocations;    /* live aclrtMallocHost blocks */
    int64_t host_bytes;
    int64_t deferred_frees;      /* aclrtFree'd blocks still used by queued tasks */
    int64_t op_cache_hits;       /* cumulative */
    int64_t op_cache_misses;     /* cumulative */
    int64_t op_cache_entries;
    int64_t op_cache_evictions;  /* cumulative */
    int64_t tasks_executed;      /* cumulative, all streams */
    int64_t tasks_failed;        /* cumulative, all streams */
    int64_t subscriptions;       /* live (thread, stream) report subscriptions */
    int64_t graphs;              /* live aiogeGraph handles */
    int64_t op_cache_max_entries; /* the LRU bound (aclopSetMaxOpQueueNum, default 20000) */
    int64_t op_cache_bytes;      /* host memory the cached kernels hold */
    int64_t op_cache_max_bytes;  /* the LRU bound in bytes (AIOGE_OP_CACHE_BYTES, aiogeHostSetOpCacheBytes) */
    int64_t captured_models;     /* live aclmdlRI handles (stream captures, ended or not) */
} aiogeHostCounters;

/* Version of the host runtime's C sources; Python refuses a mismatch. */
int32_t aiogeHostVersion(void);
aclError aiogeHostGetCounters(aiogeHostCounters *counters);
/* Weights packed so far (aiogeGraphPackWeights), process-wide. */
int64_t aiogeHostPackedWeightCount(void);
/* Packed matrix weights held now, shared by every plan that packed the same weight: out[0] the
 * distinct packed weights, out[1] their bytes, out[2] packings saved by sharing so far. */
void aiogeHostSharedPackInfo(int64_t out[3]);
/* The matrix-product kernel family in use ("avx512", "avx2", "avx2-w16", "generic"), chosen by what
 * the CPU runs (AIOGE_HOST_ISA forces one; avx2-w16, the avx512 family's 16-lane source built for
 * AVX2, only so); Set changes it (NULL or "auto": the best supported; a family this CPU cannot run
 * is an error).  FamilyAt: the i-th family built in, best first (NULL past the last), *supported:
 * 1 if this CPU runs it. */
const char *aiogeHostKernelFamily(void);
/* The NCHWc8 kernels' family that goes with it ("avx512", "avx2", "generic"; avx2-w16: "avx2"). */
const char *aiogeHostNchwcKernelFamily(void);
const char *aiogeHostKernelFamilyAt(int i, int *supported);
aclError aiogeHostSetKernelFamily(const char *name);

/* Test hooks.  InjectFailure: the next `count` work tasks enqueued on the
 * stream fail with `code` (a runtime code such as 507015) instead of running.
 * LaunchDelay: a work task that sleeps `microseconds`.  LaunchGate: a task
 * that blocks the stream until aiogeHostOpenGate(*gate), or until
 * `timeout_ms` passes (then it fails with ACL_ERROR_RT_TASK_TIMEOUT), so a
 * forgotten gate can never hang a process. */
aclError aiogeHostInjectFailure(aclrtStream stream, int32_t count, aclError code);
aclError aiogeHostLaunchDelay(aclrtStream stream, uint64_t microseconds);
aclError aiogeHostLaunchGate(aclrtStream stream, int32_t timeout_ms, uint64_t *gate);
aclError aiogeHostOpenGate(uint64_t gate);

/* Completion notification for event loops (the host runtime's fast path):
 * once armed, the stream's worker writes 1 (8 bytes) to `fd` -- an eventfd
 * the loop watches -- after the next event marker it runs, then disarms.
 * SetNotifyFd(stream, -1) detaches; the caller closes the fd only after. */
aclError aiogeHostStreamSetNotifyFd(aclrtStream stream, int32_t fd);
aclError aiogeHostStreamArmNotify(aclrtStream stream);

/* Op compile cache: drop every entry (counters keep their totals). */
aclError aiogeHostResetOpCache(void);
/* Op compile cache: its bound in bytes of host memory held by cached kernels
 * (default AIOGE_OP_CACHE_BYTES, else an eighth of the device memory capacity);
 * least recently used kernels are evicted at once to fit.  0 is refused. */
aclError aiogeHostSetOpCacheBytes(uint64_t maxBytes);

/* The registered op types: fills names[0 .. min(count, capacity)) with
 * static strings (names may be NULL when capacity is 0); returns count. */
int32_t aiogeHostListOps(const char *names[], int32_t capacity);

/* BLAS: load a CBLAS library at run time (the scipy-openblas32 wheel's, whose
 * symbols carry a scipy_ prefix, or any plain cblas).  Without one, GEMM-based
 * kernels use the built-in C GEMM.  Info describes what is in use. */
aclError aiogeHostSetBlasLibrary(const char *path);
const char *aiogeHostBlasInfo(void);

/* Intra-op worker threads shared by every stream (default: online CPUs). */
aclError aiogeHostSetNumThreads(int32_t n);
int32_t aiogeHostGetNumThreads(void);

/* Prepared single-op launches: the launch fast path (launch.c).  Prepare
 * checks the descs once (device tensors and absent optional inputs only:
 * const and host-placed inputs go through aclopCompileAndExecute); Execute
 * enqueues the op on `stream` with one device pointer per input and output
 * (NULL for an absent input) and the attrs, doing what aclopCompileAndExecute
 * does for those descs -- the same checks, cache lookup (compiled on first
 * use, counted per launch) and task -- and returns the task's stream
 * sequence number (>= 0; launches whose outputs are all empty enqueue
 * nothing and return the stream's latest) or -code when refused.  Execute
 * needs no current context (the stream must be explicit); a launch of at most
 * 16 KiB of tensors (and AIOGE_HOST_INLINE_BYTES) runs on the caller's thread
 * when the stream is idle, in stream order as any task. */
typedef struct aiogeLaunch aiogeLaunch;
aclError aiogeHostLaunchPrepare(aiogeLaunch **launch, const char *opType, int32_t numInputs,
                                const aclTensorDesc *const inputDesc[], int32_t numOutputs,
                                const aclTensorDesc *const outputDesc[]);
int64_t aiogeHostLaunchExecute(aiogeLaunch *launch, void *const ptrs[], const aclopAttr *attr, aclrtStream stream);
aclError aiogeHostLaunchDestroy(aiogeLaunch *launch);

/* Completion by stream sequence numbers.  Every task enqueued on a stream
 * (launch, copy, marker, wait) gets the next sequence number, 1, 2, ...;
 * tasks complete in order.  These take an explicit stream and need no
 * current context.  Submitted: the latest number given out.  Progress: how
 * many tasks completed, and in *failures (may be NULL) how many failures were
 * logged so far.  WaitCompleted: block until task `seq` completed
 * (timeout_ms -1: forever; ACL_ERROR_RT_STREAM_SYNC_TIMEOUT otherwise).
 * ArmNotifyAt: write the notify fd once task `seq` completed (at once if it
 * has), then disarm.  LogFailures: keep each failed task (sequence number,
 * code, message) until taken with TakeFailure (1: one taken, 0: none), in
 * order; disabling drops what was kept.  WaitSeq: make `stream` wait (on the
 * device) until task `seq` of `other` completed; both must belong to the
 * current context. */
uint64_t aiogeHostStreamSubmitted(aclrtStream stream);
uint64_t aiogeHostStreamProgress(aclrtStream stream, uint64_t *failures);
aclError aiogeHostStreamWaitCompleted(aclrtStream stream, uint64_t seq, int32_t timeout_ms);
aclError aiogeHostStreamArmNotifyAt(aclrtStream stream, uint64_t seq);
aclError aiogeHostStreamLogFailures(aclrtStream stream, int32_t enable);
int32_t aiogeHostStreamTakeFailure(aclrtStream stream, uint64_t *seq, aclError *code, char *msg, size_t capacity);
aclError aiogeHostStreamWaitSeq(aclrtStream stream, aclrtStream other, uint64_t seq);
