/* aioge's graph execution C API: a compiled graph that runs inside the
 * runtime as one stream task per segment (GE's "model sinking": no Python
 * and no GIL between nodes).  The host runtime implements it natively; on a
 * CANN machine a thin C++ shim over ge/ge_api.h can implement the same
 * calls.  Same cdef rules as acl.h.
 *
 * Build: aiogeGraphCreate with the byte sizes of the graph's inputs,
 * outputs and arena; aiogeGraphAddNode for each node in execution order
 * (each node is compiled at once through the single-op compile cache, and
 * its operands are placed: AIOGE_LOC_ARENA at an offset of the arena,
 * AIOGE_LOC_INPUT / AIOGE_LOC_OUTPUT at an index of the graph's
 * inputs/outputs, AIOGE_LOC_CONST from the desc's aclSetTensorConst value,
 * AIOGE_LOC_ABSENT for an omitted optional input).  Nodes belong to
 * segments (0 .. numSegments-1); a segment runs as one task on the stream
 * it is executed on, so independent segments can run on several streams
 * joined by events.  A built graph is immutable: any number of executions
 * may be in flight at once, each with its own arena. */

typedef struct aiogeGraph aiogeGraph;

#define AIOGE_LOC_ARENA 0
#define AIOGE_LOC_INPUT 1
#define AIOGE_LOC_OUTPUT 2
#define AIOGE_LOC_CONST 3
#define AIOGE_LOC_ABSENT 4

aclError aiogeGraphCreate(aiogeGraph **graph, int32_t numInputs, const size_t inputBytes[], int32_t numOutputs,
                          const size_t outputBytes[], size_t arenaBytes, int32_t numSegments);
aclError aiogeGraphAddNode(aiogeGraph *graph, int32_t segment, const char *opType, const char *nodeName,
                           int32_t numInputs, const aclTensorDesc *const inputDesc[], const int32_t inputLoc[],
                           const int64_t inputAt[], int32_t numOutputs, const aclTensorDesc *const outputDesc[],
                           const int32_t outputLoc[], const int64_t outputAt[], const aclopAttr *attr);
/* numNodes nodes, as aiogeGraphAddNode adds them one by one, in order: node i is in segment[i], of the
 * i-th op type and name (opTypes and nodeNames: NUL-terminated strings one after the other, opTypesBytes
 * and nodeNamesBytes bytes in all) with attr[i]; its numInputs[i] inputs and then its numOutputs[i]
 * outputs (desc, loc, at) follow the previous node's (numOperands in all).  Stops at the first node that
 * fails (the error names it); *numAdded: the nodes added before it. */
aclError aiogeGraphAddNodes(aiogeGraph *graph, int32_t numNodes, const int32_t segment[], const char *opTypes,
                            size_t opTypesBytes, const char *nodeNames, size_t nodeNamesBytes,
                            const int32_t numInputs[], const int32_t numOutputs[], int64_t numOperands,
                            const aclTensorDesc *const desc[], const int32_t loc[], const int64_t at[],
                            const aclopAttr *const attr[], int32_t *numAdded);
/* The same as aiogeGraphAddNodes, with the descs given by value instead of as handles: operand k
 * (loc[k], at[k]) has desc descIndex[k] of a table of numDescs descs, desc d being
 * aclCreateTensorDesc(dtype[d], ndim[d], its dims, format[d]) -- its dims the next ndim[d] of dims[]
 * (numDims in all), one desc after the other -- with, where constData[d] is not NULL, the const
 * value aclSetTensorConst(desc, constData[d], constBytes[d]).  The descs live for the call only
 * (the nodes keep what they need of them).  A desc that cannot be made, or an operand's desc index
 * outside the table, fails the call before any node is added (*numAdded -1: no node is to blame;
 * the error names the desc or the operand). */
aclError aiogeGraphAddNodesByValue(aiogeGraph *graph, int32_t numNodes, const int32_t segment[], const char *opTypes,
                                   size_t opTypesBytes, const char *nodeNames, size_t nodeNamesBytes,
                                   const int32_t numInputs[], const int32_t numOutputs[], int64_t numOperands,
                                   const int32_t descIndex[], const int32_t loc[], const int64_t at[], int32_t numDescs,
                                   const int32_t dtype[], const int32_t format[], const int32_t ndim[],
                                   const int64_t dims[], int64_t numDims, const void *const constData[],
                                   const size_t constBytes[], const aclopAttr *const attr[], int32_t *numAdded);
aclError aiogeGraphGetNodeCount(aiogeGraph *graph, int32_t segment, int32_t *count);
aclError aiogeGraphExecuteAsync(aiogeGraph *graph, int32_t segment, void *arena, int32_t numInputs,
                                void *const inputs[], int32_t numOutputs, void *const outputs[], aclrtStream stream);
aclError aiogeGraphDestroy(aiogeGraph *graph);

/* Weights packed once: inputs [first, first + count) are constants for the graph's life, at
 * devPtrs[w] with their values also in host memory at hostData[w].  Each node whose kernel has a
 * packed form of such an input (a float32 matrix product's B: the micro-kernel's panels) packs it
 * now, owned by the graph and freed with it, and reads the packed copy whenever the node's input is
 * devPtrs[w].  devPtrs NULL: the weights are packed before they are uploaded (if ever), and each
 * packed node reads its packed copy whatever its input.  Call after the nodes are added, before
 * executing.  Reports the packed bytes and the nodes packed (either pointer may be NULL). */
aclError aiogeGraphPackWeights(aiogeGraph *graph, int32_t first, int32_t count, const void *const hostData[],
                               void *const devPtrs[], size_t *packedBytes, int32_t *packedNodes);

/* Before aiogeGraphPackWeights: pack the nodes whose first packable weight (inputs [first, first +
 * count)) is a fill -- fillValues[w] non-NULL: weight w is that one element (of its dtype) repeated
 * -- and whose kernel packs such a weight from its value alone (the same packed copy as from its
 * bytes); each runs from its pack as aiogeGraphPackWeights would have set it up (no device copy
 * is compared with).  Sets needHost[w] = 1 for the fills the nodes left to aiogeGraphPackWeights
 * read (pass their bytes there; a fill not needed there may be passed NULL), 0 for the others.
 * Reports the packed bytes and nodes (either pointer may be NULL). */
aclError aiogeGraphPackFillWeights(aiogeGraph *graph, int32_t first, int32_t count, const void *const fillValues[],
                                   uint8_t needHost[], size_t *packedBytes, int32_t *packedNodes);

/* After aiogeGraphPackWeights: which of the weights [first, first + count) the graph reads only
 * through packed copies -- some node reads it, and every node reading it packed it (or found its
 * shared packed copy) and runs from the pack alone -- sets packOnly[w] = 1 for those (0 for the
 * others) and forgets them: the caller need not upload them, an execution passes NULL for them (any
 * other pointer is refused) and their input bytes count 0; a node added later that reads one is
 * refused.  Reports their bytes in *droppedBytes (may be NULL).  Call before executing. */
aclError aiogeGraphPackOnlyWeights(aiogeGraph *graph, int32_t first, int32_t count, uint8_t packOnly[],
                                   size_t *droppedBytes);

/* An execution from and to host memory in one task: the same as
 * aiogeGraphExecuteAsync, and the task first copies hostInputs[i] (when not
 * NULL; the graph's inputBytes[i] bytes of host memory) into inputs[i], and
 * after the nodes copies outputs[j] into hostOutputs[j] (when not NULL).  A
 * failed execution writes no host output.  Either array may be NULL, not
 * both; the caller keeps the host memory alive (and unchanged) until the task
 * has run.  One enqueue instead of one per copy: the cheap way to serve
 * small requests.  nodeTimes (NULL: untimed) times every node as aiogeGraphExecuteTimedAsync
 * does (`capacity` entries, at least 2 * the segment's node count). */
aclError aiogeGraphExecuteHostAsync(aiogeGraph *graph, int32_t segment, void *arena, int32_t numInputs,
                                    void *const inputs[], const void *const hostInputs[], int32_t numOutputs,
                                    void *const outputs[], void *const hostOutputs[], aclrtStream stream,
                                    uint64_t nodeTimes[], int32_t capacity);

/* The same execution, run now on the calling thread if it can be: when the graph
 * is cheap enough (its earlier runs took at most AIOGE_HOST_INLINE_US of CPU
 * time; one that never ran: inputs, outputs and arena within
 * AIOGE_HOST_INLINE_BYTES) and the stream has nothing queued or running, the
 * call runs it, sets *ran = 1 and returns the execution's own result (a failed
 * node's code, its message in aclGetRecentErrMsg; the stream's next
 * synchronize reports it too, as for any failed task).  Otherwise it enqueues
 * nothing and returns ACL_SUCCESS with *ran = 0 (the stream is busy) or -1
 * (the graph is too costly to run on the caller's thread): the caller enqueues
 * it with aiogeGraphExecuteHostAsync.  The synchronous path of small
 * executions: no event, no wake-up, no completion to wait for.  nodeTimes as for
 * aiogeGraphExecuteHostAsync (a profiler times the same route as an unprofiled run). */
aclError aiogeGraphExecuteHostNow(aiogeGraph *graph, int32_t segment, void *arena, int32_t numInputs,
                                  void *const inputs[], const void *const hostInputs[], int32_t numOutputs,
                                  void *const outputs[], void *const hostOutputs[], aclrtStream stream,
                                  uint64_t nodeTimes[], int32_t capacity, int32_t *ran);

/* Per-node timing, for profilers (untimed executions pay nothing): the same
 * as aiogeGraphExecuteAsync, and the task also writes node i's start and end
 * time to nodeTimes[2*i] and nodeTimes[2*i+1], in ns of CLOCK_MONOTONIC (the
 * clock of Python's time.monotonic_ns()).  nodeTimes is host memory of
 * `capacity` entries, at least 2 * aiogeGraphGetNodeCount(segment), that the
 * caller keeps alive until the task has run; a node that did not run (an
 * earlier one failed) keeps 0, 0. */
aclError aiogeGraphExecuteTimedAsync(aiogeGraph *graph, int32_t segment, void *arena, int32_t numInputs,
                                     void *const inputs[], int32_t numOutputs, void *const outputs[],
                                     aclrtStream stream, uint64_t nodeTimes[], int32_t capacity);
