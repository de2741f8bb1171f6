/* Host callbacks (callback.c), as the runtime above sees them. */
#ifndef AIOGE_HRT_CALLBACK_H
#define AIOGE_HRT_CALLBACK_H

#include "hrt_stream.h"

/* A stream is being destroyed (its handle is gone and no API call uses it):
 * drop its subscriptions and pending records, waking BLOCK callbacks, before
 * its worker is joined. */
aclError hrt_callbacks_stream_gone(hrt_stream *s);
int64_t hrt_callback_subscriptions(void);

#endif
