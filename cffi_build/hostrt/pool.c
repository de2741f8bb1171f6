/* The intra-op thread pool shared by every stream.
 *
 * A kernel splits its work with hrt_parallel_for; the calling stream worker
 * always works on its own job, and the pool's threads help whichever job is
 * open.  With N threads configured there are N-1 helpers, so two streams
 * running big kernels at once share the cores instead of oversubscribing.
 * Jobs are split into at most 4*N chunks claimed dynamically, so a helper
 * that is descheduled (another stream, another process) does not hold the
 * job up: whoever is running takes the remaining chunks.
 *
 * GEMM threading: OpenBLAS runs single-threaded; big GEMMs are tiled over
 * this pool (blas.c), and batches of small GEMMs are spread over it by the
 * batched-matmul and convolution kernels -- one set of threads for all.
 *
 * Wake-ups: a sunk graph runs many kernels back to back, each splitting its
 * work; a condition-variable wake-up per kernel costs tens of microseconds
 * on a busy VM.  So an idle helper polls (yielding) for AIOGE_HOST_POOL_SPIN_US
 * (default 50) before it sleeps, and a caller waiting for the last chunks
 * polls the same way. */
#include "hrt_op.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct job {
    hrt_range_fn fn;
    void *ctx;
    int64_t n, nchunks;
    atomic_int_least64_t next;
    atomic_int_least64_t done; /* chunks finished */
    int active;         /* helpers inside the job (under pool_mu) */
    struct job *next_job;
} job;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;  /* work posted / target changed */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;  /* chunks finished */
static job *open_jobs;
static int pool_target;   /* total threads, caller included; 0 = not read yet */
static int pool_started;  /* helper threads started */
static atomic_uint jobs_posted;  /* bumped per job: what a polling helper watches */
static int sleepers;             /* helpers in pthread_cond_wait (under pool_mu) */
/* What the pool did, process-wide (hrt_pool_stats): jobs split, their chunks, the chunks helpers
 * ran, and the jobs that found a helper asleep (a condition-variable wake-up) */
static atomic_int_least64_t st_jobs, st_chunks, st_helper_chunks, st_woke;
static int64_t spin_ns(void) { return hrt_env_get()->pool_spin_us * 1000; }

/* Poll `cond` (a predicate on atomics) for up to the spin budget, yielding. */
#define SPIN_UNTIL(cond)                                                      \
    do {                                                                      \
        int64_t budget_ = spin_ns();                                          \
        if (budget_) {                                                        \
            uint64_t t0_ = hrt_now_ns();                                      \
            for (unsigned i_ = 1; !(cond); i_++) {                            \
                if (!(i_ & 7)) sched_yield();                                 \
                if (!(i_ & 63) && (int64_t)(hrt_now_ns() - t0_) > budget_) break; \
            }                                                                 \
        }                                                                     \
    } while (0)

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void run_chunk(job *j, int64_t c) {
    int64_t b = j->n * c / j->nchunks, e = j->n * (c + 1) / j->nchunks;
    if (e > b) j->fn(j->ctx, b, e);
}

static void *helper(void *arg) {
    int index = (int)(intptr_t)arg;
    char name[16];
    snprintf(name, sizeof name, "hrt-pool-%d", index);
    pthread_setname_np(pthread_self(), name);
    hrt_thread_background(); /* the stream workers' priority: device work yields to an event loop */
    HRT_LOCK(&pool_mu, HRT_RANK_LEAF);
    unsigned seen = atomic_load(&jobs_posted);
    bool polled = false;
    for (;;) {
        job *j = open_jobs;
        while (j && atomic_load(&j->next) >= j->nchunks) j = j->next_job;
        if (!j || index >= pool_target - 1) {
            if (!polled && index < pool_target - 1) { /* poll a while for the next kernel's job */
                HRT_UNLOCK(&pool_mu);
                SPIN_UNTIL(atomic_load(&jobs_posted) != seen);
                HRT_LOCK(&pool_mu, HRT_RANK_LEAF);
                polled = true;
                seen = atomic_load(&jobs_posted);
                continue;
            }
            sleepers++;
            pthread_cond_wait(&pool_cv, &pool_mu);
            sleepers--;
            polled = false;
            seen = atomic_load(&jobs_posted);
            continue;
        }
        polled = false;
        j->active++;
        HRT_UNLOCK(&pool_mu);
        int64_t finished = 0, c;
        while ((c = atomic_fetch_add(&j->next, 1)) < j->nchunks) {
            run_chunk(j, c);
            finished++;
        }
        HRT_LOCK(&pool_mu, HRT_RANK_LEAF);
        atomic_fetch_add(&j->done, finished);
        atomic_fetch_add_explicit(&st_helper_chunks, finished, memory_order_relaxed);
        j->active--;
        pthread_cond_broadcast(&done_cv);
        seen = atomic_load(&jobs_posted);
    }
    return NULL;
}

static void ensure_started_locked(void) {
    if (!pool_target) {
        int n = (int)hrt_env_get()->threads;
        pool_target = n > 0 ? n : online_cpus();
    }
    while (pool_started < pool_target - 1) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int ok = pthread_create(&t, &at, helper, (void *)(intptr_t)pool_started) == 0;
        pthread_attr_destroy(&at);
        if (!ok) break; /* run with fewer helpers */
        pool_started++;
    }
}

int hrt_num_threads(void) {
    HRT_LOCK(&pool_mu, HRT_RANK_LEAF);
    ensure_started_locked();
    int n = pool_target;
    HRT_UNLOCK(&pool_mu);
    return n;
}

void hrt_pool_set_threads(int n) {
    HRT_LOCK(&pool_mu, HRT_RANK_LEAF);
    if (!pool_target) ensure_started_locked();
    pool_target = n;
    ensure_started_locked();
    pthread_cond_broadcast(&pool_cv);
    HRT_UNLOCK(&pool_mu);
}

void hrt_parallel_for(int64_t n, int64_t grain, hrt_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t want = (n + grain - 1) / grain;
    HRT_LOCK(&pool_mu, HRT_RANK_LEAF);
    ensure_started_locked();
    int threads = pool_target;
    HRT_UNLOCK(&pool_mu);
    if (want <= 1 || threads <= 1) {
        fn(ctx, 0, n);
        return;
    }
    job j;
    j.fn = fn;
    j.ctx = ctx;
    j.n = n;
    j.nchunks = want < (int64_t)threads * 4 ? want : (int64_t)threads * 4;
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    j.active = 0;
    HRT_LOCK(&pool_mu, HRT_RANK_LEAF);
    j.next_job = open_jobs;
    open_jobs = &j;
    atomic_fetch_add(&jobs_posted, 1);
    atomic_fetch_add_explicit(&st_jobs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&st_chunks, j.nchunks, memory_order_relaxed);
    if (sleepers) {
        atomic_fetch_add_explicit(&st_woke, 1, memory_order_relaxed);
        pthread_cond_broadcast(&pool_cv);
    }
    HRT_UNLOCK(&pool_mu);

    int64_t finished = 0, c;
    while ((c = atomic_fetch_add(&j.next, 1)) < j.nchunks) {
        run_chunk(&j, c);
        finished++;
    }
    atomic_fetch_add(&j.done, finished);
    SPIN_UNTIL(atomic_load(&j.done) >= j.nchunks); /* helpers finishing their last chunks */
    HRT_LOCK(&pool_mu, HRT_RANK_LEAF);
    job **pp = &open_jobs;
    while (*pp && *pp != &j) pp = &(*pp)->next_job;
    if (*pp) *pp = j.next_job;
    /* the job lives on this stack: wait until no helper is inside it */
    while (atomic_load(&j.done) < j.nchunks || j.active > 0) pthread_cond_wait(&done_cv, &pool_mu);
    HRT_UNLOCK(&pool_mu);
}

/* out: jobs split over the pool, their chunks, the chunks the helpers ran (the rest: the callers),
 * the jobs that had to wake a sleeping helper -- how much of the kernels a second core took
 * (benchmarks/bench_graph.py --matmul prints the helpers' share) */
void hrt_pool_stats(int64_t out[4]) {
    out[0] = atomic_load_explicit(&st_jobs, memory_order_relaxed);
    out[1] = atomic_load_explicit(&st_chunks, memory_order_relaxed);
    out[2] = atomic_load_explicit(&st_helper_chunks, memory_order_relaxed);
    out[3] = atomic_load_explicit(&st_woke, memory_order_relaxed);
}
