/* The op layer as the runtime above it (launch, graphs, aclInit) sees it:
 * tensor descs and attrs (desc.c), the kernel cache (op.c), the aliasing
 * check (alias.c), and the set-up of the compute libraries kernels use
 * (pool.c, blas.c).  What kernels themselves may use is hrt_kernel.h. */
#ifndef AIOGE_HRT_OP_H
#define AIOGE_HRT_OP_H

#include "hrt_base.h"
#include "hrt_mem.h"
#include "hrt_stream.h"

/* --------------------------------------------------------------- desc.c */
struct aclDataBuffer {
    void *data;
    size_t size;
};

struct aclTensorDesc {
    aclDataType dtype;
    aclFormat format;
    aclMemType memtype;
    int ndims;
    int64_t *dims;
    char *name;
    void *const_data;
    size_t const_len;
};

/* aclCreateTensorDesc's checks of its arguments (false: the error is recorded, as that call records it) */
bool hrt_desc_args_ok(aclDataType dataType, int numDims, const int64_t *dims, aclFormat format);
/* aclSetTensorConst's checks of a const value (of a desc known live) */
aclError hrt_desc_const_ok(const void *dataBuffer, size_t length);

/* Append a canonical byte encoding of the attrs to a key buffer. */
void hrt_attr_encode(const aclopAttr *a, hrt_buf *b);
void hrt_attr_free(aclopAttr *a);

/* ----------------------------------------------------------------- op.c */
/* A tensor view of a desc given without a buffer (absent, const, or device). */
aclError hrt_view_desc(const char *opType, const char *what, int idx, const aclTensorDesc *d, hrt_tensor *t,
                       const void **value);
/* The compiled kernel for fully described tensors, from the cache or newly
 * compiled (errors recorded); returns it referenced. */
aclError hrt_kernel_get(const char *opType, int nin, const hrt_tensor *in, const void *const *values, int nout,
                        const hrt_tensor *out, const aclopAttr *attr, hrt_kernel **k);

/* Run a compiled kernel; inputs past k->n_in read as NULL (absent) up to
 * HRT_IN_SLOTS, so a kernel may test optional inputs the caller left off. */
#define HRT_IN_SLOTS 16
aclError hrt_kernel_run(const hrt_kernel *k, void *const *in, void *const *out);
const hrt_opdef *hrt_find_op(const char *name);

/* The task of one op launch, aclopCompileAndExecute's and a prepared launch's (launch.c)
 * alike: a referenced kernel, the launch's pointers (inputs then outputs) and the device
 * blocks they lie in, referenced until the task is released.  Allocated with room for `n`
 * pointers and blocks right after it (hrt_op_task_size); run by hrt_op_task_run, released
 * (kernel and blocks unreferenced, the task freed) by hrt_op_task_release. */
typedef struct {
    hrt_task t;
    hrt_kernel *k;
    int nallocs;
    void **ptrs;
    hrt_alloc **allocs;
} hrt_op_task;
size_t hrt_op_task_size(size_t n);
/* hrt_task_begin / hrt_task_alloc's fill: run, release and the arrays set */
void hrt_op_task_init(hrt_op_task *o, size_t n);
aclError hrt_op_task_run(hrt_task *t);
void hrt_op_task_release(hrt_task *t);
void hrt_kernel_unref(hrt_kernel *k);
/* Another launch of the compiled kernel `k` (launch.c), counted as the cache
 * lookup of aclopCompileAndExecute: a hit making it most recent, or -- once it
 * left the cache -- a miss that puts it back.  False when compile options
 * changed since it was compiled (compile anew with hrt_kernel_get). */
bool hrt_kernel_touch(hrt_kernel *k);
/* hits, misses, entries, evictions, bound: one consistent snapshot */
void hrt_opcache_snapshot(int64_t out[7]);

/* -------------------------------------------------------------- alias.c */
/* Aliasing of one launch's buffers: refuse outputs that overlap each other
 * or an input, unless the op runs in place on that very input. */
bool hrt_op_inplace(const char *op, int input);
aclError hrt_check_aliasing(const char *opType, const char *api, int nin, int nout, const hrt_tensor *views,
                            void *const *ptrs);

/* ------------------------------------------------------- pool.c, blas.c */
void hrt_pool_set_threads(int n);   /* aiogeHostSetNumThreads; n in [1, 1024] */
void hrt_blas_set_threads(int n);
void hrt_blas_init_from_env(void);  /* aclInit */

#endif
