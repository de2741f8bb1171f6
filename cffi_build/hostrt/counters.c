/* aiogeHostGetCounters: one read of every layer's counters (handles, memory,
 * op cache, tasks, callbacks).  The top of the runtime: nothing calls it. */
#include "hrt.h"

int32_t aiogeHostVersion(void) { return HRT_VERSION; }

aclError aiogeHostGetCounters(aiogeHostCounters *c) {
    if (!c) return hrt_error(ACL_ERROR_INVALID_PARAM, "aiogeHostGetCounters", "counters is NULL");
    c->contexts = hrt_handle_count(HRT_H_CONTEXT);
    c->streams = hrt_handle_count(HRT_H_STREAM);
    c->events = hrt_handle_count(HRT_H_EVENT);
    c->tensor_descs = hrt_handle_count(HRT_H_DESC);
    c->data_buffers = hrt_handle_count(HRT_H_BUFFER);
    c->attrs = hrt_handle_count(HRT_H_ATTR);
    c->device_allocations = hrt_memory_counter(0);
    c->device_bytes = hrt_memory_counter(1);
    c->host_allocations = hrt_memory_counter(2);
    c->host_bytes = hrt_memory_counter(3);
    c->deferred_frees = hrt_memory_counter(4);
    int64_t oc[7];
    hrt_opcache_snapshot(oc);
    c->op_cache_hits = oc[0];
    c->op_cache_misses = oc[1];
    c->op_cache_entries = oc[2];
    c->op_cache_evictions = oc[3];
    c->op_cache_max_entries = oc[4];
    c->op_cache_bytes = oc[5];
    c->op_cache_max_bytes = oc[6];
    c->tasks_executed = hrt_task_counter(0);
    c->tasks_failed = hrt_task_counter(1);
    c->subscriptions = hrt_callback_subscriptions();
    c->graphs = hrt_handle_count(HRT_H_GRAPH);
    c->captured_models = hrt_handle_count(HRT_H_MODEL_RI);
    return ACL_SUCCESS;
}
