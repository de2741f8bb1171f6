/* The debug-build lock-order check (hrt_lock.h): a per-thread record of the
 * locks held.  Compiled to nothing unless HRT_DEBUG_LOCKS is defined.  It
 * depends on no other runtime file, so a test can build it alone. */
#include "hrt_lock.h"

#ifdef HRT_DEBUG_LOCKS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HELD 16

typedef struct {
    const void *mu;
    int rank;
    const char *name, *where;
} held_lock;

static __thread held_lock held[MAX_HELD];
static __thread int n_held;

static void die(const char *what) {
    fprintf(stderr, "aioge host runtime: lock order violation: %s (the lock hierarchy is written in hrt.h)\n", what);
    fflush(stderr);
    abort();
}

void hrt_lock_note(const void *mu, int rank, const char *name, const char *where) {
    char msg[512];
    for (int i = 0; i < n_held; i++) {
        if (held[i].rank < rank) continue;
        snprintf(msg, sizeof msg, "taking %s (rank %d) at %s while holding %s (rank %d, taken at %s)", name, rank,
                 where, held[i].name, held[i].rank, held[i].where);
        die(msg);
    }
    if (n_held == MAX_HELD) {
        snprintf(msg, sizeof msg, "taking %s at %s with %d locks held", name, where, n_held);
        die(msg);
    }
    held[n_held++] = (held_lock){mu, rank, name, where};
}

void hrt_unlock_note(const void *mu, const char *name, const char *where) {
    for (int i = n_held - 1; i >= 0; i--) {
        if (held[i].mu != mu) continue;
        memmove(&held[i], &held[i + 1], sizeof *held * (size_t)(n_held - i - 1));
        n_held--;
        return;
    }
    char msg[512];
    snprintf(msg, sizeof msg, "releasing %s at %s, which this thread does not hold", name, where);
    die(msg);
}

int hrt_locks_held(void) { return n_held; }

void hrt_locks_none(const char *what, const char *where) {
    if (!n_held) return;
    char msg[512];
    snprintf(msg, sizeof msg, "%s at %s while holding %s (rank %d, taken at %s)", what, where, held[n_held - 1].name,
             held[n_held - 1].rank, held[n_held - 1].where);
    die(msg);
}
#endif
