/* The calling thread's current context (aclrtSetCurrentContext and friends).
 * Contexts themselves are made and destroyed by runtime.c; a thread may
 * still point at a destroyed one, so every read checks the registry. */
#include "hrt_ctx.h"

static __thread hrt_context *tls_ctx;

hrt_context *hrt_tls_ctx(void) { return tls_ctx; }

void hrt_set_current_ctx(hrt_context *c) { tls_ctx = c; }

hrt_context *hrt_current_ctx(void) {
    hrt_context *c = tls_ctx;
    if (c && !hrt_handle_valid(c, HRT_H_CONTEXT)) {
        tls_ctx = NULL;
        return NULL;
    }
    return c;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
    if (!context) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext", "context is NULL");
    if (!hrt_handle_valid(context, HRT_H_CONTEXT))
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclrtSetCurrentContext", "context %p is not live", context);
    tls_ctx = context;
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext *context) {
    if (!context) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext", "context is NULL");
    hrt_context *c = hrt_current_ctx();
    if (!c) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetCurrentContext", "no current context in this thread");
    *context = c;
    return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t *deviceId) {
    if (!deviceId) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice", "deviceId is NULL");
    hrt_context *c = hrt_current_ctx();
    if (!c) return hrt_error(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetDevice", "no current context in this thread");
    *deviceId = c->device;
    return ACL_SUCCESS;
}
