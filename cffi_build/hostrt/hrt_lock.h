/* Taking the runtime's locks, with the lock hierarchy checked in debug builds.
 *
 * Every runtime lock has a rank (the hierarchy written in hrt.h).  A thread
 * may only take a lock of a higher rank than every lock it holds; the leaves
 * share the top rank, so holding one and taking any other lock is a
 * violation too.  Built with -DHRT_DEBUG_LOCKS (AIOGE_DEBUG_LOCKS=1 at build
 * time; .ci/sanitize's ASan build does it), each thread keeps a record of the
 * locks it holds (lock.c) and a lock taken out of order aborts the process,
 * before it blocks, with both locks and where they were taken.  In a normal
 * build the macros are the plain pthread calls.
 *
 * A pthread_cond_wait inside a held lock needs nothing: the thread holds the
 * same locks before and after, and takes none while it waits. */
#ifndef AIOGE_HRT_LOCK_H
#define AIOGE_HRT_LOCK_H

#include <pthread.h>

enum {
    HRT_RANK_LAUNCH = 0,    /* a prepared launch's mu (launch.c): taken with no lock held, compiles under it */
    HRT_RANK_REPLAY = 0,    /* a captured model's run_mu (capture.c), held while a replay runs its tasks */
    HRT_RANK_RUNTIME = 1,   /* rt_mu (runtime.c) */
    HRT_RANK_CALLBACK = 2,  /* cb_mu (callback.c) */
    HRT_RANK_STREAM = 3,    /* hrt_stream.mu (stream.c) */
    HRT_RANK_EVENT = 4,     /* hrt_event.mu (event.c) */
    HRT_RANK_HANDLES = 5,   /* h_mu (common.c) */
    HRT_RANK_LEAF = 6,      /* takes no other lock while held */
};

#ifdef HRT_DEBUG_LOCKS
#define HRT_LOCK_STR_(x) #x
#define HRT_LOCK_STR(x) HRT_LOCK_STR_(x)
#define HRT_LOCK_WHERE __FILE__ ":" HRT_LOCK_STR(__LINE__)
/* Check `rank` against the locks this thread holds (abort on a violation) and note it held. */
void hrt_lock_note(const void *mu, int rank, const char *name, const char *where);
/* Forget a lock this thread released (abort if it did not hold it). */
void hrt_unlock_note(const void *mu, const char *name, const char *where);
/* How many locks this thread holds (tests). */
int hrt_locks_held(void);
/* Abort if this thread holds any tracked lock (before running a task). */
void hrt_locks_none(const char *what, const char *where);
#define HRT_ASSERT_NO_LOCKS(what) hrt_locks_none((what), HRT_LOCK_WHERE)

#define HRT_LOCK_TAKE_(take, mu, rank)                                                                             \
    do {                                                                                                           \
        hrt_lock_note((mu), (rank), #mu, HRT_LOCK_WHERE);                                                          \
        take(mu);                                                                                                  \
    } while (0)
#define HRT_LOCK_GIVE_(give, mu)                                                                                   \
    do {                                                                                                           \
        give(mu);                                                                                                  \
        hrt_unlock_note((mu), #mu, HRT_LOCK_WHERE);                                                                \
    } while (0)
#define HRT_LOCK(mu, rank) HRT_LOCK_TAKE_(pthread_mutex_lock, mu, rank)
#define HRT_UNLOCK(mu) HRT_LOCK_GIVE_(pthread_mutex_unlock, mu)
#define HRT_RDLOCK(rw, rank) HRT_LOCK_TAKE_(pthread_rwlock_rdlock, rw, rank)
#define HRT_WRLOCK(rw, rank) HRT_LOCK_TAKE_(pthread_rwlock_wrlock, rw, rank)
#define HRT_RWUNLOCK(rw) HRT_LOCK_GIVE_(pthread_rwlock_unlock, rw)
#else
#define HRT_LOCK(mu, rank) pthread_mutex_lock(mu)
#define HRT_UNLOCK(mu) pthread_mutex_unlock(mu)
#define HRT_RDLOCK(rw, rank) pthread_rwlock_rdlock(rw)
#define HRT_WRLOCK(rw, rank) pthread_rwlock_wrlock(rw)
#define HRT_RWUNLOCK(rw) pthread_rwlock_unlock(rw)
#define HRT_ASSERT_NO_LOCKS(what) ((void)0)
#endif

#endif
