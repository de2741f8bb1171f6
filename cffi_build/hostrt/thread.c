/* What every runtime thread (stream workers, pool helpers) does first. */
#include "hrt_base.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void hrt_thread_background(void) {
    int nice_value = (int)hrt_env_get()->worker_nice;
    if (nice_value > 0) setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice_value);
}
