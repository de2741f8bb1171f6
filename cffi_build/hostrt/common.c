/* Error text, the handle registry, clocks and a small byte buffer. */
#include "hrt_base.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- errors
 * aclGetRecentErrMsg semantics: per thread, newest message on top, cleared
 * on read, NULL when empty; the returned string stays valid until the next
 * call on the same thread. */
#define HRT_ERRBUF 4096
static __thread char tls_err[HRT_ERRBUF];
static __thread size_t tls_err_len;
static __thread char tls_err_out[HRT_ERRBUF];

void hrt_error_push(aclError code, const char *api, const char *msg) {
    char line[HRT_MSG_LEN + 128];
    int n = snprintf(line, sizeof line, "[PID: %d] %s(%d): %s\n", (int)getpid(), api ? api : "acl",
                     code, msg ? msg : "");
    if (n < 0) return;
    size_t ln = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    /* newest first; older text is truncated from the bottom */
    size_t keep = tls_err_len;
    if (ln + keep >= HRT_ERRBUF) keep = HRT_ERRBUF - 1 - ln;
    memmove(tls_err + ln, tls_err, keep);
    memcpy(tls_err, line, ln);
    tls_err_len = ln + keep;
    tls_err[tls_err_len] = 0;
}

aclError hrt_error(aclError code, const char *api, const char *fmt, ...) {
    char msg[HRT_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hrt_error_push(code, api, msg);
    return code;
}

const char *aclGetRecentErrMsg(void) {
    if (tls_err_len == 0) return NULL;
    /* drop the trailing newline of the last line */
    size_t n = tls_err_len;
    while (n && tls_err[n - 1] == '\n') n--;
    memcpy(tls_err_out, tls_err, n);
    tls_err_out[n] = 0;
    tls_err_len = 0;
    tls_err[0] = 0;
    return tls_err_out;
}

static __thread char tls_task_msg[HRT_MSG_LEN];

aclError hrt_task_fail(aclError code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_task_msg, sizeof tls_task_msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *hrt_task_fail_msg(void) { return tls_task_msg; }
void hrt_task_fail_clear(void) { tls_task_msg[0] = 0; }

/* ------------------------------------------------------- handle registry
 * Every handle given out (context, stream, event, desc, buffer, attr) is
 * registered, so a stale or foreign pointer is refused with a code instead
 * of being dereferenced.  Open addressing, linear probing, tombstones. */
typedef struct {
    uintptr_t key; /* 0 empty, 1 tombstone */
    int kind;
} hslot;

static pthread_mutex_t h_mu = PTHREAD_MUTEX_INITIALIZER;
static hslot *h_tab;
static size_t h_cap, h_used, h_live;
static int64_t h_counts[HRT_H_KINDS];

static inline size_t h_hash(uintptr_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static void h_rehash(size_t ncap) {
    hslot *old = h_tab;
    size_t ocap = h_cap;
    hslot *nt = calloc(ncap, sizeof(hslot));
    if (!nt) abort(); /* registry allocation failure: nothing sane to return */
    h_tab = nt;
    h_cap = ncap;
    h_used = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].key > 1) {
            size_t j = h_hash(old[i].key) & (ncap - 1);
            while (nt[j].key) j = (j + 1) & (ncap - 1);
            nt[j] = old[i];
            h_used++;
        }
    }
    free(old);
}

void hrt_handle_add(const void *p, hrt_kind kind) {
    uintptr_t k = (uintptr_t)p;
    HRT_LOCK(&h_mu, HRT_RANK_HANDLES);
    if ((h_used + 1) * 2 >= h_cap) h_rehash(h_cap ? (h_live * 4 > h_cap ? h_cap * 2 : h_cap) : 1024);
    size_t j = h_hash(k) & (h_cap - 1);
    while (h_tab[j].key > 1 && h_tab[j].key != k) j = (j + 1) & (h_cap - 1);
    if (h_tab[j].key != k) {
        if (h_tab[j].key == 0) h_used++;
        h_tab[j].key = k;
        h_live++;
        h_counts[kind]++;
    } else {
        h_counts[h_tab[j].kind]--;
        h_counts[kind]++;
    }
    h_tab[j].kind = kind;
    HRT_UNLOCK(&h_mu);
}

static hslot *h_find(uintptr_t k) {
    if (!h_cap || k <= 1) return NULL;
    size_t j = h_hash(k) & (h_cap - 1);
    while (h_tab[j].key) {
        if (h_tab[j].key == k) return &h_tab[j];
        j = (j + 1) & (h_cap - 1);
    }
    return NULL;
}

bool hrt_handle_remove(const void *p, hrt_kind kind) {
    HRT_LOCK(&h_mu, HRT_RANK_HANDLES);
    hslot *s = h_find((uintptr_t)p);
    bool ok = s && s->kind == (int)kind;
    if (ok) {
        s->key = 1;
        h_live--;
        h_counts[kind]--;
    }
    HRT_UNLOCK(&h_mu);
    return ok;
}

bool hrt_handle_valid_locked(const void *p, hrt_kind kind) {
    hslot *s = h_find((uintptr_t)p);
    return s && s->kind == (int)kind;
}

bool hrt_handle_valid(const void *p, hrt_kind kind) {
    HRT_LOCK(&h_mu, HRT_RANK_HANDLES);
    bool ok = hrt_handle_valid_locked(p, kind);
    HRT_UNLOCK(&h_mu);
    return ok;
}

void hrt_handles_lock(void) { HRT_LOCK(&h_mu, HRT_RANK_HANDLES); }
void hrt_handles_unlock(void) { HRT_UNLOCK(&h_mu); }

int64_t hrt_handle_count(hrt_kind kind) {
    HRT_LOCK(&h_mu, HRT_RANK_HANDLES);
    int64_t n = h_counts[kind];
    HRT_UNLOCK(&h_mu);
    return n;
}

/* ----------------------------------------------------------------- hash */
static inline uint64_t hash_mix(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

uint64_t hrt_hash_bytes(const void *data, size_t n, uint64_t h) {
    const uint8_t *p = data;
    h ^= n;
    if (n >= 32) {
        /* four independent lanes of 8 bytes each, folded into one: a long key (one holding const
         * values) hashes at about four words per multiply latency instead of one */
        uint64_t l[4] = {h, h ^ 0x9e3779b97f4a7c15ull, h ^ 0xc2b2ae3d27d4eb4full, h ^ 0x165667b19e3779f9ull};
        while (n >= 32) {
            uint64_t w[4];
            memcpy(w, p, 32);
            for (int i = 0; i < 4; i++) l[i] = hash_mix(l[i], w[i]);
            p += 32;
            n -= 32;
        }
        h = hash_mix(hash_mix(hash_mix(hash_mix(h, l[0]), l[1]), l[2]), l[3]);
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h;
}

/* ----------------------------------------------------------------- time */
uint64_t hrt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void hrt_deadline(struct timespec *ts, int32_t timeout_ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* --------------------------------------------------------------- buffer */
void hrt_buf_init(hrt_buf *b) {
    b->p = b->inline_;
    b->len = 0;
    b->cap = sizeof b->inline_;
}

void hrt_buf_put(hrt_buf *b, const void *data, size_t n) {
    if (b->len + n > b->cap) {
        size_t ncap = b->cap * 2;
        while (ncap < b->len + n) ncap *= 2;
        uint8_t *np = malloc(ncap);
        if (!np) abort();
        memcpy(np, b->p, b->len);
        if (b->p != b->inline_) free(b->p);
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

void hrt_buf_free(hrt_buf *b) {
    if (b->p != b->inline_) free(b->p);
    b->p = b->inline_;
    b->len = 0;
}
