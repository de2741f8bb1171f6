/* Prepared launches and completion by sequence numbers (launch.c): what the
 * rest of the runtime calls.  Above the streams: launch.c calls stream.c and
 * op.c, and runtime.c calls this when it destroys a stream. */
#ifndef AIOGE_HRT_LAUNCH_H
#define AIOGE_HRT_LAUNCH_H

#include "hrt_stream.h"

/* A stream being destroyed, its worker joined (everything it had ran): the
 * waits other streams have queued on its sequence numbers return at once. */
void hrt_launch_stream_gone(hrt_stream *s);

#endif
