/* Aliasing between the buffers of one op launch.
 *
 * An output that shares bytes with an input is only correct when the kernel
 * reads each element before it writes the same element and nothing else:
 * elementwise ops (and the copy ops, which skip the copy) running in place
 * on the very same tensor.  That is the in-place contract of CANN's
 * elementwise and scatter ops; every other kernel (MatMul, Conv2D,
 * Transpose, reversed slices, reductions, norms ...) reads inputs after it
 * started writing, so an overlap gives wrong numbers with no error.  Those
 * launches, any partial overlap, and outputs that overlap each other are
 * refused here with ACL_ERROR_INVALID_PARAM before anything is enqueued.
 * aioge/_aliasing.py applies the same table before a launch on any backend. */
#include "hrt_op.h"

#include <stdlib.h>

/* Op types whose kernel may write its output over an input of the same
 * dtype and element count (sorted, for bsearch). */
static const char *const INPLACE[] = {
    "Abs", "Add", "AddV2", "Ceil", "ClipByValue", "Cos", "Div", "Erf", "Exp", "ExpandDims", "FastGelu", "Fills",
    "Flatten", "Floor", "FloorMod", "Gelu", "GeluV2", "HardSigmoid", "HardSwish", "Identity", "Inv", "LeakyRelu",
    "Log", "LogicalAnd", "LogicalNot", "LogicalOr", "Maximum", "Minimum", "Mish", "Mod", "Mul", "Neg", "OnesLike",
    "PRelu", "Pow", "RealDiv", "Reciprocal", "Relu", "Reshape", "Round", "Rsqrt", "Select", "SelectV2", "Sigmoid",
    "Sign", "Sin", "Snapshot", "Softplus", "Sqrt", "Square", "SquaredDifference", "Squeeze", "Sub", "Swish", "Tanh",
    "Unsqueeze", "ZerosLike", "_FusedElementwise",
};
/* Scatter ops update their data input (0) in place; their indices and
 * updates must not overlap the output. */
static const char *const INPLACE_DATA[] = {
    "ScatterElements", "TensorScatterAdd", "TensorScatterMax", "TensorScatterMin", "TensorScatterMul",
    "TensorScatterUpdate",
};

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static bool listed(const char *const *names, size_t n, const char *op) {
    return bsearch(&op, names, n, sizeof *names, cmp_name) != NULL;
}

bool hrt_op_inplace(const char *op, int input) {
    if (listed(INPLACE, sizeof INPLACE / sizeof *INPLACE, op)) return true;
    return input == 0 && listed(INPLACE_DATA, sizeof INPLACE_DATA / sizeof *INPLACE_DATA, op);
}

/* A device-resident, non-empty tensor of the launch (host/const values are the kernel's own copies). */
static bool on_device(const hrt_tensor *t, const void *p) { return p && t->nbytes && !t->absent && !t->is_const && !t->is_host; }

static bool overlap(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}

aclError hrt_check_aliasing(const char *opType, const char *api, int nin, int nout, const hrt_tensor *views,
                            void *const *ptrs) {
    for (int j = 0; j < nout; j++) {
        const hrt_tensor *o = &views[nin + j];
        const void *op = ptrs[nin + j];
        if (!on_device(o, op)) continue;
        for (int q = 0; q < j; q++) {
            const hrt_tensor *o2 = &views[nin + q];
            if (on_device(o2, ptrs[nin + q]) && overlap(op, o->nbytes, ptrs[nin + q], o2->nbytes))
                return hrt_error(ACL_ERROR_INVALID_PARAM, api, "%s: outputs %d and %d overlap in memory", opType, q, j);
        }
        for (int i = 0; i < nin; i++) {
            const hrt_tensor *x = &views[i];
            if (!on_device(x, ptrs[i]) || !overlap(op, o->nbytes, ptrs[i], x->nbytes)) continue;
            bool same = ptrs[i] == op && x->nbytes == o->nbytes && x->dtype == o->dtype;
            if (!same)
                return hrt_error(ACL_ERROR_INVALID_PARAM, api,
                                 "%s: output %d partially overlaps input %d in memory (an in-place launch must use the "
                                 "same tensor)",
                                 opType, j, i);
            if (!hrt_op_inplace(opType, i))
                return hrt_error(ACL_ERROR_INVALID_PARAM, api,
                                 "%s: output %d is input %d, and %s cannot run in place (its kernel reads the input "
                                 "after writing the output); use a separate output tensor",
                                 opType, j, i, opType);
        }
    }
    return ACL_SUCCESS;
}
