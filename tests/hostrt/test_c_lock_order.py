"""The debug-build lock-order check of the C host runtime (cffi_build/hostrt/hrt_lock.h, lock.c).

A small C program takes locks through the runtime's HRT_LOCK macros; built with
-DHRT_DEBUG_LOCKS, a lock taken out of the documented order aborts with a message
naming both locks; built without it, the macros are the plain pthread calls.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import ROOT

HOSTRT = ROOT / "cffi_build" / "hostrt"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

PROGRAM = r"""
#include "hrt_lock.h"
#include <stdio.h>
#include <string.h>

static pthread_mutex_t rt = PTHREAD_MUTEX_INITIALIZER, st = PTHREAD_MUTEX_INITIALIZER,
                       st2 = PTHREAD_MUTEX_INITIALIZER, leaf = PTHREAD_MUTEX_INITIALIZER,
                       leaf2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;

static void *other_thread(void *arg) {  /* its own record: the main thread's locks do not count */
    (void)arg;
    HRT_LOCK(&rt, HRT_RANK_RUNTIME);
    HRT_UNLOCK(&rt);
    return NULL;
}

static int held(void) {
#ifdef HRT_DEBUG_LOCKS
    return hrt_locks_held();
#else
    return -1;
#endif
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "ordered")) {
        HRT_LOCK(&rt, HRT_RANK_RUNTIME);
        HRT_LOCK(&st, HRT_RANK_STREAM);
        HRT_WRLOCK(&rw, HRT_RANK_LEAF);
        HRT_RWUNLOCK(&rw);
        HRT_UNLOCK(&rt);  /* not in LIFO order: fine */
        HRT_RDLOCK(&rw, HRT_RANK_LEAF);
        HRT_RWUNLOCK(&rw);
        HRT_UNLOCK(&st);
        HRT_LOCK(&leaf, HRT_RANK_LEAF);
        HRT_UNLOCK(&leaf);
        HRT_LOCK(&st, HRT_RANK_STREAM);
        pthread_t t;
        pthread_create(&t, NULL, other_thread, NULL);
        pthread_join(t, NULL);
        HRT_UNLOCK(&st);
        printf("ok %d\n", held());
        return 0;
    }
    if (!strcmp(c, "inverted")) {  /* a stream lock, then the runtime lock above it */
        HRT_LOCK(&st, HRT_RANK_STREAM);
        HRT_LOCK(&rt, HRT_RANK_RUNTIME);
        HRT_UNLOCK(&rt);
        HRT_UNLOCK(&st);
    } else if (!strcmp(c, "two_streams")) {
        HRT_LOCK(&st, HRT_RANK_STREAM);
        HRT_LOCK(&st2, HRT_RANK_STREAM);
        HRT_UNLOCK(&st2);
        HRT_UNLOCK(&st);
    } else if (!strcmp(c, "leaf_then_lock")) {
        HRT_LOCK(&leaf, HRT_RANK_LEAF);
        HRT_LOCK(&leaf2, HRT_RANK_LEAF);
        HRT_UNLOCK(&leaf2);
        HRT_UNLOCK(&leaf);
    } else if (!strcmp(c, "unheld")) {
        HRT_UNLOCK(&leaf);
    } else if (!strcmp(c, "task_under_lock")) {
        HRT_ASSERT_NO_LOCKS("running a task");  /* nothing held: fine */
        HRT_LOCK(&st, HRT_RANK_STREAM);
        HRT_ASSERT_NO_LOCKS("running a task");
        HRT_UNLOCK(&st);
    }
    printf("ran %s\n", c);
    return 0;
}
"""


def _build(tmp_path: Path, debug: bool) -> Path:
    src = tmp_path / "locks.c"
    src.write_text(PROGRAM)
    exe = tmp_path / ("locks_debug" if debug else "locks_plain")
    flags = ["-DHRT_DEBUG_LOCKS"] if debug else []
    cmd = ["gcc", "-std=gnu11", "-pthread", "-Wall", "-Werror", *flags, f"-I{HOSTRT}"]
    subprocess.run([*cmd, str(src), str(HOSTRT / "lock.c"), "-o", str(exe)], check=True)
    return exe


@pytest.fixture(scope="module")
def debug_exe(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("locks"), debug=True)


def _run(exe: Path, case: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), case], capture_output=True, text=True, timeout=60)


def test_documented_order_passes(debug_exe):
    out = _run(debug_exe, "ordered")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "0"]  # every lock released is forgotten


@pytest.mark.parametrize(
    ("case", "taking", "holding"),
    [
        ("inverted", "&rt (rank 1)", "&st (rank 3"),
        ("two_streams", "&st2 (rank 3)", "&st (rank 3"),
        ("leaf_then_lock", "&leaf2 (rank 6)", "&leaf (rank 6"),
    ],
)
def test_out_of_order_lock_aborts_with_both_locks_named(debug_exe, case, taking, holding):
    out = _run(debug_exe, case)
    assert out.returncode < 0  # SIGABRT, before the second lock is taken
    assert "lock order violation" in out.stderr
    assert f"taking {taking}" in out.stderr and f"while holding {holding}" in out.stderr
    assert "locks.c:" in out.stderr  # where each was taken
    assert "hrt.h" in out.stderr
    assert "ran" not in out.stdout


def test_releasing_an_unheld_lock_aborts(debug_exe):
    out = _run(debug_exe, "unheld")
    assert out.returncode < 0
    assert "releasing &leaf" in out.stderr


def test_task_started_under_a_lock_aborts(debug_exe):
    out = _run(debug_exe, "task_under_lock")
    assert out.returncode < 0
    assert "running a task at " in out.stderr and "while holding &st (rank 3" in out.stderr


def test_normal_build_compiles_the_check_out(tmp_path):
    exe = _build(tmp_path, debug=False)
    for case in ("inverted", "task_under_lock"):  # no record, no abort: plain pthread calls
        out = _run(exe, case)
        assert out.returncode == 0 and out.stdout.strip() == f"ran {case}"
    if shutil.which("nm"):
        syms = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
        assert "hrt_lock_note" not in syms
