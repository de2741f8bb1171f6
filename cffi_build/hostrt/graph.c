/* Sunk graphs: a list of compiled kernels with operand placements, run as
 * one stream task per segment.  See aioge_graph.h. */
#include "hrt.h"

#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

static const char *API = "aiogeGraph";
static const char *API_NOW = "aiogeGraphExecuteHostNow";

typedef struct {
    hrt_kernel *k;
    int nin, nout;
    int32_t *loc;      /* nin + nout */
    int64_t *at;
    char name[64];
    void *packed;           /* input packed_in, a weight, packed once by aiogeGraphPackWeights (NULL: none) */
    const void *packed_src; /* the weight's device pointer: the packed copy is used while it is what the node
                             * reads (NULL: always) */
    int packed_in;
    bool packed_raw;        /* its packed runs may also read input packed_in as uploaded (hrt_pack_weight) */
    bool reads_dropped;     /* it reads a weight the graph dropped (aiogeGraphPackOnlyWeights): only packed */
} gnode;

typedef struct {
    gnode *nodes;
    int n, cap;
    int max_operands;
} gsegment;

struct aiogeGraph {
    atomic_int refs;   /* the handle + queued executions */
    int nin, nout, nseg;
    size_t *in_bytes, *out_bytes;
    bool *dropped;     /* per input: a weight read only through packed copies, not held (NULL: none) */
    size_t arena_bytes;
    gsegment *seg;
    /* executions from host memory: a running mean of the CPU time they take (ns; 0 until one ran) */
    atomic_uint_least64_t host_cpu_ns;
};

static void graph_unref(aiogeGraph *g) {
    if (atomic_fetch_sub(&g->refs, 1) != 1) return;
    for (int s = 0; s < g->nseg; s++) {
        for (int i = 0; i < g->seg[s].n; i++) {
            gnode *nd = &g->seg[s].nodes[i];
            if (nd->packed) nd->k->pack_free(nd->packed);
            hrt_kernel_unref(nd->k);
            free(nd->loc);
            free(nd->at);
        }
        free(g->seg[s].nodes);
    }
    free(g->seg);
    free(g->in_bytes);
    free(g->out_bytes);
    free(g->dropped);
    free(g);
}

/* Validate and take a reference (so a concurrent destroy cannot free it). */
static aiogeGraph *graph_get(aiogeGraph *g, aclError *rc) {
    if (!g) {
        *rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "graph is NULL");
        return NULL;
    }
    hrt_handles_lock();
    bool ok = hrt_handle_valid_locked(g, HRT_H_GRAPH);
    if (ok) atomic_fetch_add(&g->refs, 1);
    hrt_handles_unlock();
    if (!ok) {
        *rc = hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, API, "graph %p is not live", (void *)g);
        return NULL;
    }
    *rc = ACL_SUCCESS;
    return g;
}

aclError aiogeGraphCreate(aiogeGraph **graph, int32_t numInputs, const size_t inputBytes[], int32_t numOutputs,
                          const size_t outputBytes[], size_t arenaBytes, int32_t numSegments) {
    if (!graph) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "graph is NULL");
    if (numInputs < 0 || numOutputs < 0 || numInputs > 100000 || numOutputs > 100000)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "bad input/output counts %d/%d", numInputs, numOutputs);
    if ((numInputs && !inputBytes) || (numOutputs && !outputBytes))
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "inputBytes/outputBytes is NULL");
    if (numSegments < 1 || numSegments > 65536)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "numSegments %d is not in [1, 65536]", numSegments);
    if (arenaBytes > ((size_t)1 << 48)) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "arena of %zu bytes", arenaBytes);
    aiogeGraph *g = calloc(1, sizeof *g);
    if (!g) return hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
    g->in_bytes = calloc((size_t)numInputs + 1, sizeof(size_t));
    g->out_bytes = calloc((size_t)numOutputs + 1, sizeof(size_t));
    g->seg = calloc((size_t)numSegments, sizeof(gsegment));
    if (!g->in_bytes || !g->out_bytes || !g->seg) {
        free(g->in_bytes);
        free(g->out_bytes);
        free(g->seg);
        free(g);
        return hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
    }
    if (numInputs) memcpy(g->in_bytes, inputBytes, sizeof(size_t) * (size_t)numInputs);
    if (numOutputs) memcpy(g->out_bytes, outputBytes, sizeof(size_t) * (size_t)numOutputs);
    g->nin = numInputs;
    g->nout = numOutputs;
    g->nseg = numSegments;
    g->arena_bytes = arenaBytes;
    atomic_init(&g->refs, 1);
    hrt_handle_add(g, HRT_H_GRAPH);
    *graph = g;
    return ACL_SUCCESS;
}

aclError aiogeGraphDestroy(aiogeGraph *graph) {
    if (!graph) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "graph is NULL");
    if (!hrt_handle_remove(graph, HRT_H_GRAPH))
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, API, "graph %p is not live", (void *)graph);
    graph_unref(graph); /* queued executions keep it alive until they ran */
    return ACL_SUCCESS;
}

aclError aiogeGraphGetNodeCount(aiogeGraph *graph, int32_t segment, int32_t *count) {
    aclError rc;
    aiogeGraph *g = graph_get(graph, &rc);
    if (!g) return rc;
    if (!count || segment < 0 || segment >= g->nseg) rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "bad segment or count");
    else *count = g->seg[segment].n;
    graph_unref(g);
    return rc;
}

/* Check one operand's placement against the graph's sizes. */
static aclError check_loc(const aiogeGraph *g, const char *node, const char *what, int idx, int32_t loc, int64_t at,
                          const hrt_tensor *t, bool is_output) {
    switch (loc) {
    case AIOGE_LOC_ARENA:
        if (at < 0 || (uint64_t)at > g->arena_bytes || t->nbytes > g->arena_bytes - (size_t)at)
            return hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s': %s %d at arena offset %lld (+%zu) is outside the %zu-byte arena",
                             node, what, idx, (long long)at, t->nbytes, g->arena_bytes);
        return ACL_SUCCESS;
    case AIOGE_LOC_INPUT:
        if (is_output) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s': output %d cannot write a graph input", node, idx);
        if (at >= 0 && at < g->nin && g->dropped && g->dropped[at])
            return hrt_error(ACL_ERROR_INVALID_PARAM, API,
                             "node '%s': %s %d reads graph input %lld, a weight the graph holds only as packed copies "
                             "(aiogeGraphPackOnlyWeights)", node, what, idx, (long long)at);
        if (at < 0 || at >= g->nin || t->nbytes > g->in_bytes[at])
            return hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s': %s %d reads graph input %lld which is missing or too small",
                             node, what, idx, (long long)at);
        return ACL_SUCCESS;
    case AIOGE_LOC_OUTPUT:
        if (at < 0 || at >= g->nout || t->nbytes > g->out_bytes[at])
            return hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s': %s %d uses graph output %lld which is missing or too small",
                             node, what, idx, (long long)at);
        return ACL_SUCCESS;
    case AIOGE_LOC_CONST:
        if (is_output || !t->is_const)
            return hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s': %s %d is placed CONST but its desc has no const value",
                             node, what, idx);
        return ACL_SUCCESS;
    case AIOGE_LOC_ABSENT:
        if (is_output || !t->absent)
            return hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s': %s %d is placed ABSENT but its desc is not UNDEFINED",
                             node, what, idx);
        return ACL_SUCCESS;
    }
    return hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s': %s %d has unknown placement %d", node, what, idx, loc);
}

/* aiogeGraphAddNode keeps the views of a node of at most this many operands on the stack */
#define GRAPH_SMALL_NODE 16

/* aiogeGraphAddNode; descsLive: the descs are the caller's own, known live (aiogeGraphAddNodesByValue
 * makes them for the call, outside the handle registry), so only the attr is looked up */
static aclError add_node(aiogeGraph *graph, int32_t segment, const char *opType, const char *nodeName,
                         int32_t numInputs, const aclTensorDesc *const inputDesc[], const int32_t inputLoc[],
                         const int64_t inputAt[], int32_t numOutputs, const aclTensorDesc *const outputDesc[],
                         const int32_t outputLoc[], const int64_t outputAt[], const aclopAttr *attr, bool descsLive) {
    aclError rc;
    aiogeGraph *g = graph_get(graph, &rc);
    if (!g) return rc;
    const char *name = nodeName ? nodeName : "?";
    hrt_tensor views_small[GRAPH_SMALL_NODE], *views = NULL;
    const void *values_small[GRAPH_SMALL_NODE], **values = NULL;
    hrt_kernel *k = NULL;
    if (!opType) {
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s': opType is NULL", name);
        goto out;
    }
    if (segment < 0 || segment >= g->nseg || numInputs < 0 || numOutputs < 1 || numInputs > 4096 || numOutputs > 4096 ||
        (numInputs && (!inputDesc || !inputLoc || !inputAt)) || !outputDesc || !outputLoc || !outputAt) {
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s' (%s): bad segment, counts or NULL arrays", name, opType);
        goto out;
    }
    int n = numInputs + numOutputs;
    if (n <= GRAPH_SMALL_NODE) { /* the common node: its views on the stack, no allocation */
        memset(views_small, 0, sizeof *views * (size_t)n);
        memset(values_small, 0, sizeof values_small);
        views = views_small;
        values = values_small;
    } else {
        views = calloc((size_t)n, sizeof *views);
        values = calloc((size_t)(numInputs ? numInputs : 1), sizeof *values);
    }
    if (!views || !values) {
        rc = hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
        goto out;
    }
    bool live = true;
    if (attr || !descsLive) {
        hrt_handles_lock();
        live = !attr || hrt_handle_valid_locked(attr, HRT_H_ATTR);
        for (int i = 0; i < numInputs && live; i++)
            live = inputDesc[i] && (descsLive || hrt_handle_valid_locked(inputDesc[i], HRT_H_DESC));
        for (int j = 0; j < numOutputs && live; j++)
            live = outputDesc[j] && (descsLive || hrt_handle_valid_locked(outputDesc[j], HRT_H_DESC));
        hrt_handles_unlock();
    }
    if (!live) {
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s' (%s): a desc or the attr is NULL or not live", name, opType);
        goto out;
    }
    for (int i = 0; i < numInputs && !rc; i++) {
        rc = hrt_view_desc(opType, "input", i, inputDesc[i], &views[i], &values[i]);
        if (!rc) rc = check_loc(g, name, "input", i, inputLoc[i], inputAt[i], &views[i], false);
    }
    for (int j = 0; j < numOutputs && !rc; j++) {
        const void *unused;
        rc = hrt_view_desc(opType, "output", j, outputDesc[j], &views[numInputs + j], &unused);
        if (!rc && (views[numInputs + j].absent || views[numInputs + j].is_const))
            rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "node '%s': output %d must be a plain tensor", name, j);
        if (!rc) rc = check_loc(g, name, "output", j, outputLoc[j], outputAt[j], &views[numInputs + j], true);
    }
    if (!rc) rc = hrt_kernel_get(opType, numInputs, views, values, numOutputs, views + numInputs, attr, &k);
    if (rc) {
        hrt_error_push(rc, API, name); /* which node refused */
        goto out;
    }
    gsegment *sg = &g->seg[segment];
    if (sg->n == sg->cap) {
        int nc = sg->cap ? sg->cap * 2 : 16;
        gnode *nn = realloc(sg->nodes, sizeof *nn * (size_t)nc);
        if (!nn) {
            rc = hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
            goto out;
        }
        sg->nodes = nn;
        sg->cap = nc;
    }
    gnode *nd = &sg->nodes[sg->n];
    memset(nd, 0, sizeof *nd);
    nd->loc = malloc(sizeof(int32_t) * (size_t)n);
    nd->at = malloc(sizeof(int64_t) * (size_t)n);
    if (!nd->loc || !nd->at) {
        free(nd->loc);
        free(nd->at);
        rc = hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
        goto out;
    }
    if (numInputs) {
        memcpy(nd->loc, inputLoc, sizeof(int32_t) * (size_t)numInputs);
        memcpy(nd->at, inputAt, sizeof(int64_t) * (size_t)numInputs);
    }
    memcpy(nd->loc + numInputs, outputLoc, sizeof(int32_t) * (size_t)numOutputs);
    memcpy(nd->at + numInputs, outputAt, sizeof(int64_t) * (size_t)numOutputs);
    nd->k = k;
    k = NULL;
    nd->nin = numInputs;
    nd->nout = numOutputs;
    size_t name_len = strnlen(name, sizeof nd->name - 1); /* as snprintf "%s" would: cut to fit */
    memcpy(nd->name, name, name_len);
    nd->name[name_len] = '\0';
    if (n > sg->max_operands) sg->max_operands = n;
    sg->n++;
out:
    if (k) hrt_kernel_unref(k);
    if (views != views_small) free(views);
    if (values != values_small) free((void *)values);
    graph_unref(g);
    return rc;
}

aclError aiogeGraphAddNode(aiogeGraph *graph, int32_t segment, const char *opType, const char *nodeName,
                           int32_t numInputs, const aclTensorDesc *const inputDesc[], const int32_t inputLoc[],
                           const int64_t inputAt[], int32_t numOutputs, const aclTensorDesc *const outputDesc[],
                           const int32_t outputLoc[], const int64_t outputAt[], const aclopAttr *attr) {
    return add_node(graph, segment, opType, nodeName, numInputs, inputDesc, inputLoc, inputAt, numOutputs, outputDesc,
                    outputLoc, outputAt, attr, false);
}

/* The next NUL-terminated string of a NUL-separated list [*p, end); NULL past its end. */
static const char *next_string(const char **p, const char *end) {
    const char *s = *p;
    if (s >= end) return NULL;
    const char *z = memchr(s, '\0', (size_t)(end - s));
    if (!z) return NULL;
    *p = z + 1;
    return s;
}

/* aiogeGraphAddNodes; descsLive as add_node's */
static aclError add_nodes(aiogeGraph *graph, int32_t numNodes, const int32_t segment[], const char *opTypes,
                          size_t opTypesBytes, const char *nodeNames, size_t nodeNamesBytes, const int32_t numInputs[],
                          const int32_t numOutputs[], int64_t numOperands, const aclTensorDesc *const desc[],
                          const int32_t loc[], const int64_t at[], const aclopAttr *const attr[], int32_t *numAdded,
                          bool descsLive) {
    if (!numAdded) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "aiogeGraphAddNodes: numAdded is NULL");
    *numAdded = 0;
    if (numNodes == 0) return ACL_SUCCESS;
    if (numNodes < 0 || numOperands < 1 || !segment || !opTypes || !nodeNames || !numInputs || !numOutputs ||
        !desc || !loc || !at || !attr)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "aiogeGraphAddNodes: bad counts or NULL arrays");
    const char *tp = opTypes, *tend = opTypes + opTypesBytes;
    const char *np = nodeNames, *nend = nodeNames + nodeNamesBytes;
    int64_t k = 0; /* the node's first operand */
    for (int32_t i = 0; i < numNodes; i++) {
        const char *type = next_string(&tp, tend), *name = next_string(&np, nend);
        int32_t ni = numInputs[i], no = numOutputs[i];
        if (!type || !name || ni < 0 || no < 0 || (int64_t)ni + no > numOperands - k)
            return hrt_error(ACL_ERROR_INVALID_PARAM, API,
                             "aiogeGraphAddNodes: node %d: its op type, name or operands lie past the arrays", (int)i);
        aclError rc = add_node(graph, segment[i], type, name, ni, desc + k, loc + k, at + k, no, desc + k + ni,
                               loc + k + ni, at + k + ni, attr[i], descsLive);
        if (rc) return rc; /* its error names the node */
        k += (int64_t)ni + no;
        *numAdded = i + 1;
    }
    return ACL_SUCCESS;
}

aclError aiogeGraphAddNodes(aiogeGraph *graph, int32_t numNodes, const int32_t segment[], const char *opTypes,
                            size_t opTypesBytes, const char *nodeNames, size_t nodeNamesBytes,
                            const int32_t numInputs[], const int32_t numOutputs[], int64_t numOperands,
                            const aclTensorDesc *const desc[], const int32_t loc[], const int64_t at[],
                            const aclopAttr *const attr[], int32_t *numAdded) {
    return add_nodes(graph, numNodes, segment, opTypes, opTypesBytes, nodeNames, nodeNamesBytes, numInputs, numOutputs,
                     numOperands, desc, loc, at, attr, numAdded, false);
}

aclError aiogeGraphAddNodesByValue(aiogeGraph *graph, int32_t numNodes, const int32_t segment[], const char *opTypes,
                                   size_t opTypesBytes, const char *nodeNames, size_t nodeNamesBytes,
                                   const int32_t numInputs[], const int32_t numOutputs[], int64_t numOperands,
                                   const int32_t descIndex[], const int32_t loc[], const int64_t at[], int32_t numDescs,
                                   const int32_t dtype[], const int32_t format[], const int32_t ndim[],
                                   const int64_t dims[], int64_t numDims, const void *const constData[],
                                   const size_t constBytes[], const aclopAttr *const attr[], int32_t *numAdded) {
    const char *api = "aiogeGraphAddNodesByValue";
    if (!numAdded) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: numAdded is NULL", api);
    *numAdded = 0;
    if (numNodes == 0) return ACL_SUCCESS;
    if (numDescs < 1 || numOperands < 1 || numDims < 0 || !descIndex || !dtype || !format || !ndim ||
        (numDims && !dims) || !constData || !constBytes)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: bad counts or NULL arrays", api);
    /* the descs, made once per table entry as aclCreateTensorDesc + aclSetTensorConst would make them (the
     * same checks and errors) but in one block, outside the handle registry, viewing the caller's dims and
     * const values (alive through the call; a kernel copies the const values it keeps) */
    aclTensorDesc *table = calloc((size_t)numDescs, sizeof *table);
    const aclTensorDesc **desc = malloc(sizeof *desc * (size_t)numOperands);
    aclError rc = ACL_SUCCESS;
    if (!table || !desc) {
        rc = hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
        goto out;
    }
    int64_t k = 0; /* the desc's first dim */
    for (int32_t d = 0; d < numDescs; d++) {
        if (ndim[d] < 0 || ndim[d] > numDims - k) {
            rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: desc %d: its dims lie past the array", api, (int)d);
            *numAdded = -1;
            goto out;
        }
        const int64_t *dd = ndim[d] ? dims + k : NULL;
        if (!hrt_desc_args_ok((aclDataType)dtype[d], ndim[d], dd, (aclFormat)format[d])) {
            rc = ACL_ERROR_INVALID_PARAM; /* hrt_desc_args_ok said why */
            hrt_error_push(rc, API, api);
            *numAdded = -1;
            goto out;
        }
        aclTensorDesc *t = &table[d];
        t->dtype = (aclDataType)dtype[d];
        t->format = (aclFormat)format[d];
        t->ndims = ndim[d];
        t->dims = (int64_t *)dd; /* read only */
        t->memtype = ACL_MEMTYPE_DEVICE;
        k += ndim[d];
        if (constData[d]) {
            rc = hrt_desc_const_ok(constData[d], constBytes[d]);
            if (rc) {
                *numAdded = -1;
                goto out;
            }
            t->const_data = (void *)constData[d]; /* read only */
            t->const_len = constBytes[d];
        }
    }
    for (int64_t j = 0; j < numOperands; j++) {
        if (descIndex[j] < 0 || descIndex[j] >= numDescs) {
            rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s: operand %lld: desc %d is not in the table", api,
                           (long long)j, (int)descIndex[j]);
            *numAdded = -1;
            goto out;
        }
        desc[j] = &table[descIndex[j]];
    }
    rc = add_nodes(graph, numNodes, segment, opTypes, opTypesBytes, nodeNames, nodeNamesBytes, numInputs, numOutputs,
                   numOperands, desc, loc, at, attr, numAdded, true);
out:
    free(table);
    free((void *)desc);
    return rc;
}

/* A graph's weight packing (aiogeGraphPackWeights): per node to pack, its first weight input the
 * kernel packs (the inputs in order). */
typedef struct {
    aiogeGraph *g;
    int32_t first, count;
    const void *const *host;
    void *const *dev;
    gnode **todo;     /* the nodes to pack, in graph order */
    size_t *bytes;    /* per todo node: its packed bytes (0: not packed) */
    int *order;       /* the todo nodes packed over the pool, largest weight first */
    int npar;
    atomic_int next;  /* the next of order to take */
} pack_job;

static int64_t pack_weight_of(const pack_job *J, const gnode *nd, int j) {
    int64_t w = nd->at[j] - J->first;
    if (nd->loc[j] != AIOGE_LOC_INPUT || w < 0 || w >= J->count || !J->host[w] || (J->dev && !J->dev[w])) return -1;
    if (J->g->dropped && J->g->dropped[nd->at[j]]) return -1;
    return w;
}

static void pack_node(pack_job *J, int t) {
    gnode *nd = J->todo[t];
    for (int j = 0; j < nd->nin; j++) {
        int64_t w = pack_weight_of(J, nd, j);
        if (w < 0) continue;
        size_t bytes = 0;
        bool raw = true;
        void *p = hrt_pack_weight(nd->k, j, J->host[w], J->g->in_bytes[nd->at[j]], &bytes, &raw);
        if (!p) continue;
        nd->packed = p;
        nd->packed_src = J->dev ? J->dev[w] : NULL;
        nd->packed_in = j;
        nd->packed_raw = raw;
        J->bytes[t] = bytes;
        return;
    }
}

static void pack_range(void *ctx, int64_t begin, int64_t end) {
    (void)begin;
    (void)end;
    pack_job *J = ctx; /* each thread takes the next node until none is left */
    int i;
    while ((i = atomic_fetch_add(&J->next, 1)) < J->npar) pack_node(J, J->order[i]);
}

typedef struct {
    uintptr_t key; /* a weight's host address, or its bytes' complement (largest first) */
    int t;         /* its todo node */
} pack_key;

static int pack_key_cmp(const void *x, const void *y) {
    const pack_key *a = x, *b = y;
    return a->key != b->key ? (a->key < b->key ? -1 : 1) : (a->t > b->t) - (a->t < b->t);
}

/* the weights are packed over the pool when they add up to this much (less: on the calling thread) */
#define PACK_PARALLEL_BYTES ((size_t)1 << 20)

aclError aiogeGraphPackWeights(aiogeGraph *graph, int32_t first, int32_t count, const void *const hostData[],
                               void *const devPtrs[], size_t *packedBytes, int32_t *packedNodes) {
    aclError rc;
    aiogeGraph *g = graph_get(graph, &rc);
    if (!g) return rc;
    if (first < 0 || count < 0 || first > g->nin || count > g->nin - first || (count && !hostData)) {
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "aiogeGraphPackWeights: bad weight range [%d, +%d) of %d inputs",
                       (int)first, (int)count, g->nin);
        goto out;
    }
    pack_job J = {.g = g, .first = first, .count = count, .host = hostData, .dev = devPtrs};
    size_t cap = 1;
    for (int s = 0; s < g->nseg; s++) cap += (size_t)g->seg[s].n;
    pack_key *keys = malloc(sizeof *keys * cap);
    bool *later = calloc(cap, sizeof *later); /* per todo node: packed after the pool's, on this thread */
    J.todo = malloc(sizeof *J.todo * cap);
    J.bytes = calloc(cap, sizeof *J.bytes);
    J.order = malloc(sizeof *J.order * cap);
    if (!keys || !later || !J.todo || !J.bytes || !J.order) {
        rc = hrt_error(ACL_ERROR_RT_MEMORY_ALLOCATION, API, "aiogeGraphPackWeights: out of host memory");
        goto done;
    }
    int n = 0;
    size_t bytes_in = 0;
    for (int s = 0; s < g->nseg; s++)
        for (int i = 0; i < g->seg[s].n; i++) {
            gnode *nd = &g->seg[s].nodes[i];
            if (nd->packed || !nd->k->pack) continue;
            for (int j = 0; j < nd->nin; j++) {
                int64_t w = pack_weight_of(&J, nd, j);
                if (w < 0) continue;
                keys[n] = (pack_key){(uintptr_t)hostData[w], n};
                bytes_in += g->in_bytes[nd->at[j]];
                J.todo[n++] = nd;
                break;
            }
        }
    /* Over the pool when there is enough to pack (the filters of a resnet18 in the NCHWc8 layout:
     * 22 of its 25 ms of compile on one thread): each thread takes the next node, the largest
     * weights first.  The nodes whose weight another node also reads are packed after them, in
     * graph order, on this thread, as on one thread: the first packs it, the others find its
     * shared copy (packed once) rather than race to pack it too. */
    int threads = bytes_in >= PACK_PARALLEL_BYTES && n > 1 ? hrt_num_threads() : 1;
    if (threads > 1) {
        qsort(keys, (size_t)n, sizeof *keys, pack_key_cmp);
        for (int i = 0; i < n; i++)
            if ((i > 0 && keys[i - 1].key == keys[i].key) || (i + 1 < n && keys[i + 1].key == keys[i].key))
                later[keys[i].t] = true;
        int m = 0;
        for (int t = 0; t < n; t++) {
            if (later[t]) continue;
            const gnode *nd = J.todo[t];
            size_t sz = 0;
            for (int j = 0; j < nd->nin && !sz; j++)
                if (pack_weight_of(&J, nd, j) >= 0) sz = g->in_bytes[nd->at[j]];
            keys[m++] = (pack_key){~(uintptr_t)sz, t};
        }
        qsort(keys, (size_t)m, sizeof *keys, pack_key_cmp);
        for (int i = 0; i < m; i++) J.order[i] = keys[i].t;
        J.npar = m;
        atomic_init(&J.next, 0);
        hrt_parallel_for(threads < m ? threads : m, 1, pack_range, &J);
    }
    for (int t = 0; t < n; t++)
        if (threads <= 1 || later[t]) pack_node(&J, t);
    size_t total = 0;
    int32_t nodes = 0;
    for (int t = 0; t < n; t++) {
        total += J.bytes[t];
        nodes += J.todo[t]->packed != NULL;
    }
    if (packedBytes) *packedBytes = total;
    if (packedNodes) *packedNodes = nodes;
done:
    free(keys);
    free(later);
    free(J.todo);
    free(J.bytes);
    free(J.order);
out:
    graph_unref(g);
    return rc;
}

aclError aiogeGraphPackFillWeights(aiogeGraph *graph, int32_t first, int32_t count, const void *const fillValues[],
                                   uint8_t needHost[], size_t *packedBytes, int32_t *packedNodes) {
    aclError rc;
    aiogeGraph *g = graph_get(graph, &rc);
    if (!g) return rc;
    if (first < 0 || count < 0 || first > g->nin || count > g->nin - first || (count && (!fillValues || !needHost))) {
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "aiogeGraphPackFillWeights: bad weight range [%d, +%d) of %d inputs",
                       (int)first, (int)count, g->nin);
        goto out;
    }
    memset(needHost, 0, (size_t)count);
    size_t total = 0;
    int32_t nodes = 0;
    for (int s = 0; s < g->nseg; s++)
        for (int i = 0; i < g->seg[s].n; i++) {
            gnode *nd = &g->seg[s].nodes[i];
            if (nd->packed || !nd->k->pack) continue;
            /* as aiogeGraphPackWeights would pack it (its first weight input the kernel packs): here
             * when that is a fill this kernel packs as one; else left to aiogeGraphPackWeights, and
             * every fill it reads needs its bytes there */
            bool left = false;
            for (int j = 0; j < nd->nin; j++) {
                int64_t w = nd->at[j] - first;
                if (nd->loc[j] != AIOGE_LOC_INPUT || w < 0 || w >= count) continue;
                if (g->dropped && g->dropped[nd->at[j]]) continue;
                size_t bytes = 0;
                bool raw = true;
                void *p = fillValues[w] ? hrt_pack_weight_fill(nd->k, j, fillValues[w], &bytes, &raw) : NULL;
                if (!p) {
                    left = true;
                    break;
                }
                nd->packed = p;
                nd->packed_src = NULL;
                nd->packed_in = j;
                nd->packed_raw = raw;
                total += bytes;
                nodes++;
                break;
            }
            if (!left) continue;
            for (int j = 0; j < nd->nin; j++) {
                int64_t w = nd->at[j] - first;
                if (nd->loc[j] == AIOGE_LOC_INPUT && w >= 0 && w < count && fillValues[w]) needHost[w] = 1;
            }
        }
    if (packedBytes) *packedBytes = total;
    if (packedNodes) *packedNodes = nodes;
out:
    graph_unref(g);
    return rc;
}

/* Whether weight input `in` is read only through packed copies: some node reads it, and every
 * operand placed at it is a node's packed input whose packed runs read nothing else of it. */
static bool pack_only(const aiogeGraph *g, int64_t in) {
    bool read = false;
    for (int s = 0; s < g->nseg; s++)
        for (int i = 0; i < g->seg[s].n; i++) {
            const gnode *nd = &g->seg[s].nodes[i];
            for (int j = 0; j < nd->nin; j++) {
                if (nd->loc[j] != AIOGE_LOC_INPUT || nd->at[j] != in) continue;
                if (!nd->packed || nd->packed_in != j || nd->packed_raw) return false;
                read = true;
            }
        }
    return read;
}

aclError aiogeGraphPackOnlyWeights(aiogeGraph *graph, int32_t first, int32_t count, uint8_t packOnly[],
                                   size_t *droppedBytes) {
    aclError rc;
    aiogeGraph *g = graph_get(graph, &rc);
    if (!g) return rc;
    if (first < 0 || count < 0 || first > g->nin || count > g->nin - first || (count && !packOnly)) {
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "aiogeGraphPackOnlyWeights: bad weight range [%d, +%d) of %d inputs",
                       (int)first, (int)count, g->nin);
        goto out;
    }
    if (!g->dropped && count) {
        g->dropped = calloc((size_t)g->nin, sizeof *g->dropped);
        if (!g->dropped) {
            rc = hrt_error(ACL_ERROR_BAD_ALLOC, API, "aiogeGraphPackOnlyWeights: out of host memory");
            goto out;
        }
    }
    size_t total = 0;
    for (int32_t w = 0; w < count; w++) {
        int64_t in = (int64_t)first + w;
        bool drop = g->dropped[in] || (g->in_bytes[in] > 0 && pack_only(g, in));
        packOnly[w] = drop;
        if (!drop || g->dropped[in]) continue;
        /* forgotten: every reader runs its packed copy, whatever pointer an execution passes */
        for (int s = 0; s < g->nseg; s++)
            for (int i = 0; i < g->seg[s].n; i++) {
                gnode *nd = &g->seg[s].nodes[i];
                if (nd->packed && nd->loc[nd->packed_in] == AIOGE_LOC_INPUT && nd->at[nd->packed_in] == in) {
                    nd->packed_src = NULL;
                    nd->reads_dropped = true;
                }
            }
        total += g->in_bytes[in];
        g->in_bytes[in] = 0;
        g->dropped[in] = true;
    }
    if (droppedBytes) *droppedBytes = total;
out:
    graph_unref(g);
    return rc;
}

/* ------------------------------------------------------------ execution */
typedef struct {
    hrt_task t;
    aiogeGraph *g;
    int seg;
    void *arena;
    void **inputs, **outputs;
    int nallocs;
    hrt_alloc **allocs;
    uint64_t *times;   /* aiogeGraphExecuteTimedAsync: 2 per node, else NULL */
    const void **host_in; /* aiogeGraphExecuteHostAsync: copied into inputs[i] first (NULL: none) */
    void **host_out;      /* ... and outputs[j] copied out after the nodes (NULL: none) */
} graph_task;

/* hrt_kernel_run with the node's packed weight */
static aclError run_packed(const gnode *nd, void **ptrs) {
    const hrt_kernel *k = nd->k;
    if (k->n_in >= HRT_IN_SLOTS) return k->run_packed(k, ptrs, ptrs + nd->nin, nd->packed);
    void *slots[HRT_IN_SLOTS] = {NULL};
    memcpy(slots, ptrs, sizeof(void *) * (size_t)k->n_in);
    return k->run_packed(k, slots, ptrs + nd->nin, nd->packed);
}

/* The node loop, specialised twice: `timed` is a constant in each caller, so
 * the untimed task has no timing code at all. */
static inline __attribute__((always_inline)) aclError run_nodes(graph_task *gt, bool timed) {
    const gsegment *sg = &gt->g->seg[gt->seg];
    void *small[64];
    void **ptrs = sg->max_operands <= 64 ? small : malloc(sizeof(void *) * (size_t)sg->max_operands);
    if (!ptrs) return hrt_task_fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "graph: out of host memory");
    aclError rc = ACL_SUCCESS;
    for (int i = 0; i < sg->n && !rc; i++) {
        const gnode *nd = &sg->nodes[i];
        int n = nd->nin + nd->nout;
        for (int j = 0; j < n; j++) {
            int64_t at = nd->at[j];
            switch (nd->loc[j]) {
            case AIOGE_LOC_ARENA: ptrs[j] = (char *)gt->arena + at; break;
            case AIOGE_LOC_INPUT: ptrs[j] = gt->inputs[at]; break;
            case AIOGE_LOC_OUTPUT: ptrs[j] = gt->outputs[at]; break;
            case AIOGE_LOC_CONST: ptrs[j] = (void *)nd->k->in[j].data; break;
            default: ptrs[j] = NULL; break;
            }
        }
        hrt_task_fail_clear();
        if (timed) gt->times[2 * i] = hrt_now_ns();
        if (nd->packed && (!nd->packed_src || ptrs[nd->packed_in] == nd->packed_src)) rc = run_packed(nd, ptrs);
        else if (nd->reads_dropped) /* never: such a node always runs its packed copy */
            rc = hrt_task_fail(ACL_ERROR_INVALID_PARAM, "reads a weight the graph holds only as packed copies");
        else rc = hrt_kernel_run(nd->k, ptrs, ptrs + nd->nin);
        if (timed) gt->times[2 * i + 1] = hrt_now_ns();
        if (rc) {
            char inner[HRT_MSG_LEN];
            snprintf(inner, sizeof inner, "%s", hrt_task_fail_msg());
            hrt_task_fail(rc, "graph node %d '%s' (%s) failed: %s", i, nd->name, nd->k->op_name, inner);
        }
    }
    if (ptrs != small) free(ptrs);
    return rc;
}

static aclError run_graph(hrt_task *t) { return run_nodes((graph_task *)t, false); }

/* Whether an execution from host memory may run on the caller's thread (when its stream is idle):
 * when it costs less than handing it to the stream's worker would.  A graph that ran before
 * decides by the CPU time its runs took (AIOGE_HOST_INLINE_US, default 200 us): a measure of how
 * long it holds the caller, unlike wall time not inflated by a busy machine.  One that never ran
 * decides by size: inputs, outputs and arena within AIOGE_HOST_INLINE_BYTES (default 64 KiB;
 * 0 turns running inline off altogether). */
static bool inline_ok(const aiogeGraph *g) {
    const hrt_env *env = hrt_env_get();
    if (env->inline_bytes == 0) return false;
    uint64_t cpu = atomic_load_explicit(&((aiogeGraph *)g)->host_cpu_ns, memory_order_relaxed);
    if (cpu) return cpu <= (uint64_t)env->inline_us * 1000u;
    size_t total = g->arena_bytes;
    for (int i = 0; i < g->nin; i++) total += g->in_bytes[i];
    for (int j = 0; j < g->nout; j++) total += g->out_bytes[j];
    return total <= (size_t)env->inline_bytes;
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The figure falls at once to a cheaper run and rises by 1/8 of a costlier one: a first run's
 * cold caches and page faults do not exile a cheap graph, and a costly graph, costly on every
 * run, gets there in a few.  Benign races: the figure is advice. */
static void note_cpu(aiogeGraph *g, uint64_t ns) {
    if (ns == 0) ns = 1;
    uint64_t old = atomic_load_explicit(&g->host_cpu_ns, memory_order_relaxed);
    atomic_store_explicit(&g->host_cpu_ns, !old || ns < old ? ns : old + (ns - old) / 8, memory_order_relaxed);
}

/* Copies in, the nodes, copies out: one task, so an execution from host memory costs one
 * enqueue and one wake-up of the stream's worker instead of one per copy.  Specialised like
 * run_nodes: `timed` is a constant in each caller. */
static inline __attribute__((always_inline)) aclError run_host(graph_task *gt, bool timed) {
    aiogeGraph *g = gt->g;
    uint64_t t0 = thread_cpu_ns();
    for (int i = 0; i < g->nin; i++)
        if (gt->host_in[i] && g->in_bytes[i]) memcpy(gt->inputs[i], gt->host_in[i], g->in_bytes[i]);
    aclError rc = run_nodes(gt, timed);
    if (rc) return rc; /* outputs of a failed execution are never handed back */
    for (int j = 0; j < g->nout; j++)
        if (gt->host_out[j] && g->out_bytes[j]) memcpy(gt->host_out[j], gt->outputs[j], g->out_bytes[j]);
    note_cpu(g, thread_cpu_ns() - t0);
    return ACL_SUCCESS;
}
static aclError run_graph_host(hrt_task *t) { return run_host((graph_task *)t, false); }
static aclError run_graph_host_timed(hrt_task *t) { return run_host((graph_task *)t, true); }
static aclError run_graph_timed(hrt_task *t) { return run_nodes((graph_task *)t, true); }

static void release_graph_task(hrt_task *t) {
    graph_task *gt = (graph_task *)t;
    for (int i = 0; i < gt->nallocs; i++) hrt_alloc_unref(gt->allocs[i]);
    graph_unref(gt->g);
    free(gt);
}

/* Device memory of the stream's device holding at least `need` bytes. */
static aclError take_block(graph_task *gt, void *p, size_t need, int dev, const char *what, int idx) {
    if (need == 0) return ACL_SUCCESS;
    if (!p) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s %d is NULL but needs %zu bytes", what, idx, need);
    hrt_alloc *a = hrt_device_lookup(p, need, true);
    if (!a)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s %d (%p, %zu bytes) is not inside a device allocation", what, idx,
                         p, need);
    gt->allocs[gt->nallocs++] = a;
    if (a->device != dev)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "%s %d is memory of device %d, the stream is on device %d", what, idx,
                         a->device, dev);
    return ACL_SUCCESS;
}

/* `ran` NULL: enqueue the execution.  Else run it now on the calling thread if its stream is idle
 * (*ran = 1, the execution's own result returned), or enqueue nothing (*ran = 0). */
static aclError execute(aiogeGraph *graph, int32_t segment, void *arena, int32_t numInputs, void *const inputs[],
                        int32_t numOutputs, void *const outputs[], aclrtStream stream, uint64_t *times,
                        int32_t capacity, const void *const hostIn[], void *const hostOut[], int32_t *ran) {
    aclError rc;
    aiogeGraph *g = graph_get(graph, &rc);
    if (!g) return rc;
    if (segment < 0 || segment >= g->nseg || numInputs != g->nin || numOutputs != g->nout ||
        (numInputs && !inputs) || (numOutputs && !outputs)) {
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "execute: segment %d of %d, %d/%d inputs, %d/%d outputs", segment,
                       g->nseg, numInputs, g->nin, numOutputs, g->nout);
        graph_unref(g);
        return rc;
    }
    if (times && (capacity < 0 || (int64_t)capacity < 2 * (int64_t)g->seg[segment].n)) {
        rc = hrt_error(ACL_ERROR_INVALID_PARAM, API, "execute timed: nodeTimes holds %d entries, segment %d needs %d",
                       capacity, segment, 2 * g->seg[segment].n);
        graph_unref(g);
        return rc;
    }
    hrt_stream *st;
    rc = hrt_resolve_stream(stream, &st, "aiogeGraphExecuteAsync");
    if (rc) {
        graph_unref(g);
        return rc;
    }
    bool host = hostIn || hostOut;
    int nptr = g->nin + g->nout;
    size_t host_ptrs = host ? (size_t)nptr : 0;
    graph_task *gt = calloc(1, sizeof *gt + sizeof(void *) * ((size_t)nptr + host_ptrs) +
                                   sizeof(hrt_alloc *) * (size_t)(nptr + 1));
    if (!gt) {
        hrt_stream_release(st);
        graph_unref(g);
        return hrt_error(ACL_ERROR_BAD_ALLOC, API, "out of host memory");
    }
    gt->inputs = (void **)(gt + 1);
    gt->outputs = gt->inputs + g->nin;
    gt->host_in = host ? (const void **)(gt->outputs + g->nout) : NULL;
    gt->host_out = host ? (void **)(gt->host_in + g->nin) : NULL;
    gt->allocs = (hrt_alloc **)(gt->outputs + g->nout + host_ptrs);
    gt->g = g; /* the reference taken by graph_get moves into the task */
    gt->seg = segment;
    gt->arena = arena;
    int dev = st->ctx->device;
    rc = take_block(gt, arena, g->arena_bytes, dev, "arena", 0);
    for (int i = 0; i < g->nin && !rc; i++) {
        gt->inputs[i] = inputs[i];
        if (g->dropped && g->dropped[i] && inputs[i])
            rc = hrt_error(ACL_ERROR_INVALID_PARAM, API,
                           "input %d is a weight the graph holds only as packed copies (aiogeGraphPackOnlyWeights): "
                           "pass NULL for it", i);
        else rc = take_block(gt, inputs[i], g->in_bytes[i], dev, "input", i);
    }
    for (int j = 0; j < g->nout && !rc; j++) {
        gt->outputs[j] = outputs[j];
        rc = take_block(gt, outputs[j], g->out_bytes[j], dev, "output", j);
    }
    for (int i = 0; host && i < g->nin; i++) gt->host_in[i] = hostIn ? hostIn[i] : NULL;
    for (int j = 0; host && j < g->nout; j++) gt->host_out[j] = hostOut ? hostOut[j] : NULL;
    if (rc) {
        release_graph_task(&gt->t);
        hrt_stream_release(st);
        return rc;
    }
    gt->times = times;
    if (times) memset(times, 0, sizeof(uint64_t) * 2 * (size_t)g->seg[segment].n);
    gt->t.run = host ? (times ? run_graph_host_timed : run_graph_host) : times ? run_graph_timed : run_graph;
    gt->t.release = release_graph_task;
    gt->t.replayable = !host && !times; /* host I/O and node times point into one call's buffers */
    if (ran) {
        char msg[HRT_MSG_LEN];
        *ran = 0;
        rc = ACL_SUCCESS;
        if (hrt_stream_run_now(st, &gt->t, &rc, msg)) { /* the task is released */
            *ran = 1;
            if (rc) hrt_error_push(rc, API_NOW, msg);
        } else {
            release_graph_task(&gt->t);
        }
        hrt_stream_release(st);
        return rc;
    }
    return hrt_task_commit(st, &gt->t, host && inline_ok(g)); /* refused while capturing unless replayable */
}

aclError aiogeGraphExecuteAsync(aiogeGraph *graph, int32_t segment, void *arena, int32_t numInputs,
                                void *const inputs[], int32_t numOutputs, void *const outputs[], aclrtStream stream) {
    return execute(graph, segment, arena, numInputs, inputs, numOutputs, outputs, stream, NULL, 0, NULL, NULL, NULL);
}

aclError aiogeGraphExecuteHostAsync(aiogeGraph *graph, int32_t segment, void *arena, int32_t numInputs,
                                    void *const inputs[], const void *const hostInputs[], int32_t numOutputs,
                                    void *const outputs[], void *const hostOutputs[], aclrtStream stream,
                                    uint64_t nodeTimes[], int32_t capacity) {
    if (!hostInputs && !hostOutputs)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API, "execute from host: hostInputs and hostOutputs are both NULL");
    return execute(graph, segment, arena, numInputs, inputs, numOutputs, outputs, stream, nodeTimes, capacity,
                   hostInputs, hostOutputs, NULL);
}

aclError aiogeGraphExecuteHostNow(aiogeGraph *graph, int32_t segment, void *arena, int32_t numInputs,
                                  void *const inputs[], const void *const hostInputs[], int32_t numOutputs,
                                  void *const outputs[], void *const hostOutputs[], aclrtStream stream,
                                  uint64_t nodeTimes[], int32_t capacity, int32_t *ran) {
    if (!ran) return hrt_error(ACL_ERROR_INVALID_PARAM, API_NOW, "ran is NULL");
    *ran = 0;
    if (!hostInputs && !hostOutputs)
        return hrt_error(ACL_ERROR_INVALID_PARAM, API_NOW, "hostInputs and hostOutputs are both NULL");
    aclError rc;
    aiogeGraph *g = graph_get(graph, &rc);
    if (!g) return rc;
    bool small = inline_ok(g);
    graph_unref(g);
    if (!small) {
        *ran = -1; /* too long to hold the caller's thread: enqueue it instead */
        return ACL_SUCCESS;
    }
    return execute(graph, segment, arena, numInputs, inputs, numOutputs, outputs, stream, nodeTimes, capacity,
                   hostInputs, hostOutputs, ran);
}

aclError aiogeGraphExecuteTimedAsync(aiogeGraph *graph, int32_t segment, void *arena, int32_t numInputs,
                                     void *const inputs[], int32_t numOutputs, void *const outputs[],
                                     aclrtStream stream, uint64_t nodeTimes[], int32_t capacity) {
    if (!nodeTimes) return hrt_error(ACL_ERROR_INVALID_PARAM, API, "execute timed: nodeTimes is NULL");
    return execute(graph, segment, arena, numInputs, inputs, numOutputs, outputs, stream, nodeTimes, capacity, NULL,
                   NULL, NULL);
}
