/* Contexts and the calling thread's current context (ctx.c).  A context's
 * device, default stream and list of explicit streams are created and torn
 * down by runtime.c under its runtime lock; ctx.c only answers "which context
 * is current on this thread" and checks that it is still live. */
#ifndef AIOGE_HRT_CTX_H
#define AIOGE_HRT_CTX_H

#include "hrt_base.h"

typedef struct hrt_stream hrt_stream;
typedef struct hrt_context hrt_context;

struct hrt_context {
    int device;
    bool is_default;
    hrt_stream *default_stream;
    hrt_stream *streams;        /* explicit streams (list via next_in_ctx) */
    hrt_context *next;          /* device's list of explicit contexts */
};

/* Current context of this thread (NULL if none, or if it was destroyed). */
hrt_context *hrt_current_ctx(void);
hrt_context *hrt_tls_ctx(void);         /* raw, unvalidated */
void hrt_set_current_ctx(hrt_context *c);

#endif
