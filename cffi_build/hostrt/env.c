/* The host runtime's environment settings, read once and validated.
 *
 * Every AIOGE_HOST_* variable (and AIOGE_BLAS_LIBRARY) is parsed exactly
 * once, under pthread_once, into an immutable struct that any thread may read
 * afterwards: the settings used to be read lazily into plain statics by
 * whichever thread got there first (a data race).  A value that does not
 * parse or is out of range is not silently replaced by the default: aclInit
 * fails with ACL_ERROR_INVALID_PARAM and a message naming the variable. */
#include "hrt_base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static hrt_env env;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void bad(const char *name, const char *value, const char *want) {
    if (env.error[0]) return; /* the first bad variable is the one reported */
    snprintf(env.error, sizeof env.error, "environment variable %s='%s' is invalid: %s", name, value, want);
}

/* An integer in [lo, hi]; unset or empty leaves *out (the default). */
static void int_var(const char *name, int64_t lo, int64_t hi, int64_t *out) {
    const char *s = getenv(name);
    if (!s || !*s) return;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (errno || end == s || *end || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "expected an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        bad(name, s, want);
        return;
    }
    *out = v;
}

static void bool_var(const char *name, bool *out) {
    const char *s = getenv(name);
    if (!s || !*s) return;
    if (strcmp(s, "0") == 0) *out = false;
    else if (strcmp(s, "1") == 0) *out = true;
    else bad(name, s, "expected 0 or 1");
}

/* A byte size: a positive number with an optional k/M/G/T suffix and B. */
static void size_var(const char *name, size_t *out) {
    const char *s = getenv(name);
    if (!s || !*s) return;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if ((*end == 'b' || *end == 'B') && end[1] == 0) end++;
    double bytes = v * mul;
    if (errno || end == s || *end || !(bytes >= 1) || bytes > 1.8e19) {
        bad(name, s, "expected a positive size such as 512M or 8G");
        return;
    }
    *out = (size_t)bytes;
}

static void read_env(void) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    env.device_memory = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : (size_t)8 << 30;
    env.device_count = 1;
    env.threads = 0;
    env.worker_nice = 10;
    env.pool_spin_us = 50;
    env.spin_us = 20;
    env.inline_bytes = 65536;
    env.inline_us = 200;
    env.cann_only = false;
    env.winograd = true;
    int_var("AIOGE_HOST_DEVICE_COUNT", 1, HRT_MAX_DEVICES, &env.device_count);
    size_var("AIOGE_HOST_DEVICE_MEMORY", &env.device_memory);
    env.op_cache_bytes = env.device_memory / 8 ? env.device_memory / 8 : 1;
    size_var("AIOGE_OP_CACHE_BYTES", &env.op_cache_bytes);
    int_var("AIOGE_HOST_THREADS", 0, 4096, &env.threads);
    int_var("AIOGE_HOST_WORKER_NICE", -20, 19, &env.worker_nice);
    int_var("AIOGE_HOST_POOL_SPIN_US", 0, 10 * 1000 * 1000, &env.pool_spin_us);
    int_var("AIOGE_HOST_SPIN_US", 0, 10 * 1000 * 1000, &env.spin_us);
    int_var("AIOGE_HOST_INLINE_BYTES", 0, (int64_t)1 << 40, &env.inline_bytes);
    int_var("AIOGE_HOST_INLINE_US", 0, 10 * 1000 * 1000, &env.inline_us);
    bool_var("AIOGE_HOST_CANN_ONLY", &env.cann_only);
    bool_var("AIOGE_HOST_WINOGRAD", &env.winograd);
    const char *blas = getenv("AIOGE_BLAS_LIBRARY");
    if (blas && *blas) snprintf(env.blas_library, sizeof env.blas_library, "%s", blas);
}

const hrt_env *hrt_env_get(void) {
    pthread_once(&env_once, read_env);
    return &env;
}
