/* aioge._native._launch: the prepared launch of aioge.op on the host runtime, as one C call.
 *
 * launch(enq, op_type, inputs, outputs, attrs, name) is Enqueue.run_prepared's transaction for the
 * case that needs nothing but the launch (aioge/runtime/stream.py): the stream's lock, the
 * prepared launch looked up in the device's cache by (op type, attr handle, dtype and shape of
 * each input and output), the device pointers gathered, the one call of aiogeHostLaunchExecute,
 * the Completion (Lane.submit_seq) and the readers and writer noted (note(), below, the one
 * definition Enqueue.note also calls).  It returns None, having launched nothing, for everything
 * else: a closed stream, a capture, no prepared launch yet, memory of another device or a pending
 * launch of another stream that Enqueue.order must wait for, anything not exactly the runtime's
 * types; the caller then runs the whole transaction in Python.
 *
 * Handles are cffi pointers; their address is read from the cdata object (CDataObject in cffi's
 * _cffi_backend.c: head, ctype, data), a layout cffi has kept since 1.0 and that tests/hostrt
 * checks against ffi.cast("uintptr_t", ...).  Tensor, DeviceMemory, Completion: __slots__ classes
 * whose slots are read through their member descriptors' offsets, for those exact types. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

typedef int64_t (*execute_fn)(void *launch, void *const ptrs[], const void *attr, void *stream);
typedef uint64_t (*progress_fn)(void *stream, uint64_t *failures);

typedef struct {
    PyObject_HEAD
    void *c_type;
    char *c_data;
    PyObject *c_weakreflist;
} CDataView;

#define MAX_TENSORS 64
#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

static execute_fn g_execute;
static progress_fn g_progress;
static PyTypeObject *g_cdata, *g_tensor, *g_memory, *g_completion, *g_enqueue;
static PyObject *g_raise_for, *g_trace;
static Py_ssize_t t_mem, t_dtype, t_shape;
static Py_ssize_t m_ptr, m_device, m_writer, m_readers, m_stream;
static Py_ssize_t c_done, c_lane, c_tseq, c_name, c_event, c_deps, c_start, c_device_ms, c_keep, c_what, c_seq,
    c_error, c_waiters;
static Py_ssize_t g_poll_every;
static Py_ssize_t e_stream, e_capture, e_cache, e_dev, e_lane, e_handle, e_lock;

static PyObject *s_lock, *s_stream, *s_capture, *s_cache, *s_dev, *s_lane, *s_handle, *s_closed, *s_no_attr,
    *s_prepared, *s_attr, *s_acquire, *s_release, *s_submit_seq, *s_readers, *s_writer, *s_lane_pub,
    *s_append, *s_notify, *s_poll, *s_hub, *s_timing, *s_enqueue, *s_locked;

/* the address a cffi pointer stands for; -1 (no exception) if `o` is no cdata */
static inline int cdata_address(PyObject *o, void **out) {
    if (!PyObject_TypeCheck(o, g_cdata))
        return -1;
    *out = ((CDataView *)o)->c_data;
    return 0;
}

/* a slot of an exact runtime type; NULL (no exception) when unset or of another type */
static inline PyObject *slot(PyObject *o, PyTypeObject *tp, Py_ssize_t off) {
    return Py_TYPE(o) == tp ? SLOT(o, off) : NULL;
}

/* an attribute of the Enqueue (a new reference): its slot when it is exactly the runtime's Enqueue */
static inline PyObject *enq_attr(PyObject *enq, Py_ssize_t off, PyObject *name) {
    if (Py_TYPE(enq) == g_enqueue) {
        PyObject *v = SLOT(enq, off);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(enq, name);
}

static inline void slot_set(PyObject *o, Py_ssize_t off, PyObject *v) {
    PyObject *old = SLOT(o, off);
    Py_INCREF(v);
    SLOT(o, off) = v;
    Py_XDECREF(old);
}

static int slot_offset(PyTypeObject *tp, const char *name, Py_ssize_t *out) {
    PyObject *d = PyDict_GetItemString(tp->tp_dict, name);
    if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", tp->tp_name, name);
        return -1;
    }
    PyMemberDef *def = ((PyMemberDescrObject *)d)->d_member;
    if (def->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s: not an object slot", tp->tp_name, name);
        return -1;
    }
    *out = def->offset;
    return 0;
}

/* ---- note: the one definition of the reader/writer notes ---------------------------------- */

/* `comp` (a launch of `stream`, on comp.lane) becomes the last reader of each of `reads` (every
 * stream's last read, the writer's own stream's too: a later write on another stream waits for
 * it) and the writer of each of `writes` (its readers forgotten, its stream the writer's). */
static int note_impl(PyObject *comp, PyObject *lane, PyObject *const *reads, Py_ssize_t n_reads,
                     PyObject *const *writes, Py_ssize_t n_writes, PyObject *stream) {
    for (Py_ssize_t i = 0; i < n_reads; i++) {
        PyObject *m = reads[i];
        PyObject *r = slot(m, g_memory, m_readers);
        if (r != NULL && PyDict_CheckExact(r)) {
            if (PyDict_SetItem(r, lane, comp) < 0)
                return -1;
        } else {
            r = PyObject_GetAttr(m, s_readers);
            if (r == NULL)
                return -1;
            int rc = PyObject_SetItem(r, lane, comp);
            Py_DECREF(r);
            if (rc < 0)
                return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n_writes; i++) {
        PyObject *m = writes[i];
        if (Py_TYPE(m) == g_memory) {
            slot_set(m, m_writer, comp);
            slot_set(m, m_stream, stream);
        } else if (PyObject_SetAttr(m, s_writer, comp) < 0 || PyObject_SetAttr(m, s_stream, stream) < 0) {
            return -1;
        }
        PyObject *r = Py_TYPE(m) == g_memory ? SLOT(m, m_readers) : NULL;
        if (r != NULL && PyDict_CheckExact(r)) {
            if (PyDict_GET_SIZE(r))
                PyDict_Clear(r);
        } else {
            r = PyObject_GetAttr(m, s_readers);
            if (r == NULL)
                return -1;
            int truth = PyObject_IsTrue(r);
            PyObject *res = truth > 0 ? PyObject_CallMethod(r, "clear", NULL) : (truth < 0 ? NULL : Py_None);
            Py_DECREF(r);
            if (res == NULL)
                return -1;
            if (res != Py_None)
                Py_DECREF(res);
        }
    }
    return 0;
}

static PyObject *py_note(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "note(comp, reads, writes, stream)");
        return NULL;
    }
    PyObject *reads = PySequence_Fast(args[1], "reads: a sequence");
    if (reads == NULL)
        return NULL;
    PyObject *writes = PySequence_Fast(args[2], "writes: a sequence");
    if (writes == NULL) {
        Py_DECREF(reads);
        return NULL;
    }
    PyObject *lane = slot(args[0], g_completion, c_lane);
    if (lane != NULL)
        Py_INCREF(lane);
    else
        lane = PyObject_GetAttr(args[0], s_lane_pub);
    int rc = lane == NULL ? -1 : note_impl(args[0], lane, PySequence_Fast_ITEMS(reads), PySequence_Fast_GET_SIZE(reads),
                                              PySequence_Fast_ITEMS(writes), PySequence_Fast_GET_SIZE(writes), args[3]);
    Py_XDECREF(lane);
    Py_DECREF(reads);
    Py_DECREF(writes);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- submit_seq: the Completion of a launch on a sequence-number lane ------------------------ */

/* the Lane's attributes submit_seq reads and writes: slots of the runtime's Lane, read by offset */
enum { L_PENDING, L_LAUNCHED, L_COMPLETED, L_LAST_TSEQ, L_FAILS_SEEN, L_FAILURES, L_HANDLE, L_LOCK, L_THREAD, L_IDLE,
       L_CV, N_LANE };
static const char *const lane_slots[N_LANE] = {"pending", "launched", "completed", "_last_tseq", "_fails_seen",
                                               "_failures", "_handle", "lock", "_thread", "_idle", "_cv"};
static PyObject *lane_names[N_LANE];
static Py_ssize_t lane_off[N_LANE];
static PyTypeObject *g_lane;

/* a new reference to a Lane's attribute: its slot when it is exactly the runtime's Lane */
static inline PyObject *lane_get(PyObject *lane, int i) {
    if (Py_TYPE(lane) == g_lane) {
        PyObject *v = SLOT(lane, lane_off[i]);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(lane, lane_names[i]);
}

static inline int lane_put(PyObject *lane, int i, PyObject *v) {
    if (Py_TYPE(lane) == g_lane) {
        slot_set(lane, lane_off[i], v);
        return 0;
    }
    return PyObject_SetAttr(lane, lane_names[i], v);
}

/* a lane's attribute as an unsigned count (-1 with an exception) */
static int lane_count(PyObject *lane, int i, uint64_t *out) {
    PyObject *v = lane_get(lane, i);
    if (v == NULL)
        return -1;
    unsigned long long n = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (n == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = n;
    return 0;
}

/* Whether the launch numbered `tseq` of `lane`'s stream, with nothing pending before it on the
 * lane, has already run without a failure, and then counted completed by the lane: 1 (the caller
 * makes its Completion done, keeping nothing), 0 (no exception: it joins `pending` as any launch),
 * -1 with an exception.  A small launch on an idle stream runs inline on the caller's thread, so it
 * has run when aiogeHostLaunchExecute returns; awaiting its output then finds it done, no poll.
 * Only what Lane._take_finished_seq would conclude from the same progress, as if under the lane's
 * lock (a poll or lane thread inside it leaves the launch to them): nothing pending, the stream's completed count at `tseq`, no failure logged that the lane has not
 * taken (the count is read after the completed one, and the runtime logs a failure before its task
 * counts as completed) and none taken but not yet given to a completion.  Observed (a trace hub),
 * it stays pending: the observer sees it finish through Lane._finish. */
static int settle_at_once(PyObject *lane, PyObject *pending, int64_t tseq) {
    if (g_progress == NULL)
        return 0;
    Py_ssize_t len = PyObject_Length(pending);
    if (len != 0)
        return len < 0 ? -1 : 0;
    PyObject *tmp = PyObject_GetAttr(g_trace, s_hub);
    if (tmp == NULL)
        return -1;
    int observed = tmp != Py_None;
    Py_DECREF(tmp);
    if (observed)
        return 0;
    PyObject *h = lane_get(lane, L_HANDLE);
    if (h == NULL)
        return -1;
    void *stream_addr;
    int is_ptr = cdata_address(h, &stream_addr) == 0;
    Py_DECREF(h);
    if (!is_ptr || stream_addr == NULL)
        return 0;
    uint64_t fails = 0, done = g_progress(stream_addr, &fails);
    if (done < (uint64_t)tseq)
        return 0;
    /* nobody is inside the lane's lock: then none of its state is half-updated, and none can be
     * until this returns, the GIL held throughout (no Python code runs here, nothing releases it) */
    PyObject *lock = lane_get(lane, L_LOCK);
    if (lock == NULL)
        return -1;
    tmp = PyObject_CallMethodNoArgs(lock, s_locked);
    Py_DECREF(lock);
    if (tmp == NULL)
        return -1;
    int held = tmp != Py_False;
    Py_DECREF(tmp);
    if (held)
        return 0;
    uint64_t seen, completed;
    if (lane_count(lane, L_FAILS_SEEN, &seen) < 0)
        return -1;
    if (seen != fails)
        return 0;
    PyObject *taken = lane_get(lane, L_FAILURES);
    if (taken == NULL)
        return -1;
    len = PyObject_Length(taken);
    Py_DECREF(taken);
    if (len != 0)
        return len < 0 ? -1 : 0;
    if (lane_count(lane, L_COMPLETED, &completed) < 0)
        return -1;
    PyObject *v = PyLong_FromUnsignedLongLong(completed + 1);
    if (v == NULL)
        return -1;
    int rc = lane_put(lane, L_COMPLETED, v);
    Py_DECREF(v);
    if (rc < 0 || (v = PyLong_FromLongLong(tseq)) == NULL)
        return -1;
    rc = lane_put(lane, L_LAST_TSEQ, v);
    Py_DECREF(v);
    return rc < 0 ? -1 : 1;
}

/* Lane.submit_seq (scheduler.py; the prepared launches: no event, no observer): the caller holds
 * the stream's lock, which serialises every submit.  The lane counts the launch.  One that has
 * already run (settle_at_once) gets a Completion done at once, keeping nothing; any other's
 * Completion (every slot of Completion.__init__, checked by init()) joins the lane's pending
 * queue, a lane thread asleep on the condition is woken, and every 64th launch polls once the
 * queue is long. */
static PyObject *submit_seq_impl(PyObject *lane, PyObject *keep, PyObject *what, PyObject *name, int64_t tseq) {
    PyObject *comp = NULL, *pending = NULL, *tmp = NULL, *n_obj = NULL;
    long long n;
    if ((tmp = lane_get(lane, L_LAUNCHED)) == NULL)
        return NULL;
    n = PyLong_AsLongLong(tmp);
    Py_DECREF(tmp);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    n += 1;
    if ((n_obj = PyLong_FromLongLong(n)) == NULL || lane_put(lane, L_LAUNCHED, n_obj) < 0)
        goto fail;
    if ((comp = g_completion->tp_alloc(g_completion, 0)) == NULL)
        goto fail;
    PyObject *tseq_obj = PyLong_FromLongLong(tseq);
    if (tseq_obj == NULL)
        goto fail;
    SLOT(comp, c_lane) = Py_NewRef(lane);
    SLOT(comp, c_tseq) = tseq_obj;
    SLOT(comp, c_name) = Py_NewRef(name);
    SLOT(comp, c_event) = Py_NewRef(Py_None);
    SLOT(comp, c_deps) = Py_NewRef(Py_None);
    SLOT(comp, c_start) = Py_NewRef(Py_None);
    SLOT(comp, c_device_ms) = Py_NewRef(Py_None);
    SLOT(comp, c_what) = Py_NewRef(what);
    SLOT(comp, c_seq) = Py_NewRef(n_obj);
    SLOT(comp, c_error) = Py_NewRef(Py_None);
    SLOT(comp, c_waiters) = Py_NewRef(Py_None);
    if ((pending = lane_get(lane, L_PENDING)) == NULL)
        goto fail;
    int settled = settle_at_once(lane, pending, tseq);
    if (settled < 0)
        goto fail;
    SLOT(comp, c_keep) = Py_NewRef(settled ? Py_None : keep);
    SLOT(comp, c_done) = Py_NewRef(settled ? Py_True : Py_False);
    if (settled) {
        Py_DECREF(pending);
        Py_DECREF(n_obj);
        return comp;
    }
    if ((tmp = PyObject_CallMethodOneArg(pending, s_append, comp)) == NULL)
        goto fail;
    Py_DECREF(tmp);
    if ((tmp = lane_get(lane, L_THREAD)) == NULL)
        goto fail;
    int has_thread = tmp != Py_None;
    Py_DECREF(tmp);
    if (has_thread) {  // the lane thread may be asleep on the condition
        PyObject *lock = lane_get(lane, L_LOCK);
        if (lock == NULL)
            goto fail;
        if ((tmp = PyObject_CallMethodNoArgs(lock, s_acquire)) == NULL) {
            Py_DECREF(lock);
            goto fail;
        }
        Py_DECREF(tmp);
        int idle = -1;
        if ((tmp = lane_get(lane, L_IDLE)) != NULL) {
            idle = PyObject_IsTrue(tmp);
            Py_DECREF(tmp);
        }
        if (idle > 0) {
            PyObject *cv = lane_get(lane, L_CV);
            tmp = cv == NULL ? NULL : PyObject_CallMethodNoArgs(cv, s_notify);
            Py_XDECREF(cv);
            idle = tmp == NULL ? -1 : 0;
            Py_XDECREF(tmp);
        }
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        tmp = PyObject_CallMethodNoArgs(lock, s_release);
        Py_DECREF(lock);
        if (tmp == NULL) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            goto fail;
        }
        Py_DECREF(tmp);
        PyErr_Restore(et, ev, tb);
        if (idle < 0)
            goto fail;
    }
    if (!(n & 63)) {
        Py_ssize_t len = PyObject_Length(pending);
        if (len < 0)
            goto fail;
        if (len > g_poll_every) {
            if ((tmp = PyObject_CallMethodNoArgs(lane, s_poll)) == NULL)
                goto fail;
            Py_DECREF(tmp);
        }
    }
    Py_DECREF(pending);
    Py_DECREF(n_obj);
    return comp;
fail:
    Py_XDECREF(comp);
    Py_XDECREF(pending);
    Py_XDECREF(n_obj);
    return NULL;
}

static PyObject *py_submit_seq(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "submit_seq(lane, keep, what, name, tseq)");
        return NULL;
    }
    if (g_completion == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "aioge._native._launch: init() not called");
        return NULL;
    }
    long long tseq = PyLong_AsLongLong(args[4]);
    if (tseq == -1 && PyErr_Occurred())
        return NULL;
    return submit_seq_impl(args[0], args[1], args[2], args[3], tseq);
}

/* ---- launch --------------------------------------------------------------------------------- */

/* the memory of a Tensor (a new reference), its address in *ptr; NULL (no exception): not plain */
static PyObject *tensor_memory(PyObject *x, void **ptr) {
    PyObject *m = slot(x, g_tensor, t_mem);
    if (m == NULL || Py_TYPE(m) != g_memory)
        return NULL;
    PyObject *p = SLOT(m, m_ptr);
    if (p == NULL || cdata_address(p, ptr) < 0)
        return NULL;
    Py_INCREF(m);
    return m;
}

/* nothing for Enqueue.order to wait for: memory of this device whose writer is done or of this
 * lane (and, written, no read pending on another lane) */
static int plain(PyObject *m, PyObject *dev, PyObject *lane, int written) {
    if (SLOT(m, m_device) != dev)
        return 0;
    PyObject *w = SLOT(m, m_writer);
    if (w == NULL)
        return 0;
    if (w != Py_None) {
        PyObject *done = slot(w, g_completion, c_done);
        if (done == NULL)
            return 0;
        if (done != Py_True && SLOT(w, c_lane) != lane)
            return 0;
    }
    if (written) {
        PyObject *r = SLOT(m, m_readers);
        if (r == NULL || !PyDict_CheckExact(r))
            return 0;
        Py_ssize_t n = PyDict_GET_SIZE(r);
        if (n > 1)
            return 0;
        if (n == 1) {
            int has = PyDict_Contains(r, lane);
            if (has <= 0) {
                PyErr_Clear();
                return 0;
            }
        }
    }
    return 1;
}

/* the transaction under the stream's lock: a new reference to the Completion, Py_None (a new
 * reference) when the Python path must run it, NULL with an exception when the launch was refused */
static PyObject *launch_locked(PyObject *enq, PyObject *op_type, PyObject *inputs, PyObject *outputs,
                               PyObject *attrs, PyObject *name) {
    PyObject *res = NULL, *stream = NULL, *cache = NULL, *attr_h = NULL, *key = NULL, *prepared = NULL;
    PyObject *dev = NULL, *lane = NULL, *handle = NULL, *keep = NULL;
    PyObject *tmp;
    void *ptrs[MAX_TENSORS];
    void *prep_addr, *attr_addr, *stream_addr;
    Py_ssize_t n_in = PySequence_Fast_GET_SIZE(inputs), n_out = PySequence_Fast_GET_SIZE(outputs);
    PyObject **xin = PySequence_Fast_ITEMS(inputs), **xout = PySequence_Fast_ITEMS(outputs);

#define PYTHON_PATH()                                                                                                 \
    do {                                                                                                              \
        res = Py_NewRef(Py_None);                                                                                     \
        goto done;                                                                                                    \
    } while (0)
#define GET(var, obj, nm)                                                                                             \
    do {                                                                                                              \
        if ((var = PyObject_GetAttr(obj, nm)) == NULL)                                                                \
            goto done;                                                                                                \
    } while (0)
#define GET_ENQ(var, off, nm)                                                                                         \
    do {                                                                                                              \
        if ((var = enq_attr(enq, off, nm)) == NULL)                                                                   \
            goto done;                                                                                                \
    } while (0)

    if (n_in + n_out > MAX_TENSORS)
        PYTHON_PATH();
    GET_ENQ(stream, e_stream, s_stream);
    GET(tmp, stream, s_closed);
    int closed = PyObject_IsTrue(tmp);
    Py_DECREF(tmp);
    if (closed)
        PYTHON_PATH();
    GET_ENQ(tmp, e_capture, s_capture);
    Py_DECREF(tmp);
    if (tmp != Py_None)
        PYTHON_PATH();
    GET_ENQ(cache, e_cache, s_cache);
    int has_attrs = attrs == Py_None ? 0 : PyObject_IsTrue(attrs);
    if (has_attrs < 0)
        goto done;
    if (has_attrs) {
        if ((attr_h = PyObject_CallMethodOneArg(cache, s_attr, attrs)) == NULL)
            goto done;
    } else {
        GET(attr_h, cache, s_no_attr);
    }
    if (cdata_address(attr_h, &attr_addr) < 0)
        PYTHON_PATH();  // no_attr not made yet

    Py_ssize_t n_key = 2 + 2 * n_out;
    for (Py_ssize_t i = 0; i < n_in; i++)
        n_key += xin[i] == Py_None ? 1 : 2;
    if ((key = PyTuple_New(n_key)) == NULL)
        goto done;
    PyTuple_SET_ITEM(key, 0, Py_NewRef(op_type));
    PyTuple_SET_ITEM(key, 1, Py_NewRef(attr_h));
    Py_ssize_t k = 2;
    for (Py_ssize_t i = 0; i < n_in + n_out; i++) {
        PyObject *x = i < n_in ? xin[i] : xout[i - n_in];
        if (x == Py_None && i < n_in) {
            PyTuple_SET_ITEM(key, k++, Py_NewRef(Py_None));
            continue;
        }
        PyObject *dt = slot(x, g_tensor, t_dtype), *shape = slot(x, g_tensor, t_shape);
        if (dt == NULL || shape == NULL)
            PYTHON_PATH();
        PyTuple_SET_ITEM(key, k++, Py_NewRef(dt));
        PyTuple_SET_ITEM(key, k++, Py_NewRef(shape));
    }
    GET(prepared, cache, s_prepared);
    if (!PyDict_CheckExact(prepared))
        PYTHON_PATH();
    PyObject *prep = PyDict_GetItemWithError(prepared, key);  // borrowed
    if (prep == NULL) {
        if (PyErr_Occurred())
            goto done;
        PYTHON_PATH();  // made by the Python path
    }
    if (cdata_address(prep, &prep_addr) < 0)
        PYTHON_PATH();

    GET_ENQ(dev, e_dev, s_dev);
    GET_ENQ(lane, e_lane, s_lane);
    GET_ENQ(handle, e_handle, s_handle);
    if (cdata_address(handle, &stream_addr) < 0)
        PYTHON_PATH();
    Py_ssize_t n_reads = 0;
    for (Py_ssize_t i = 0; i < n_in; i++)
        n_reads += xin[i] != Py_None;
    /* what the completion keeps alive until the launch ran: the memory read, then written */
    if ((keep = PyTuple_New(n_reads + n_out)) == NULL)
        goto done;
    PyObject **mem = &PyTuple_GET_ITEM(keep, 0);
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < n_in; i++) {
        if (xin[i] == Py_None) {
            ptrs[i] = NULL;
            continue;
        }
        PyObject *m = tensor_memory(xin[i], &ptrs[i]);
        if (m == NULL || !plain(m, dev, lane, 0)) {
            Py_XDECREF(m);
            PYTHON_PATH();
        }
        mem[j++] = m;
    }
    for (Py_ssize_t i = 0; i < n_out; i++) {
        PyObject *m = tensor_memory(xout[i], &ptrs[n_in + i]);
        if (m == NULL || !plain(m, dev, lane, 1)) {
            Py_XDECREF(m);
            PYTHON_PATH();
        }
        mem[j++] = m;
    }

    int64_t seq;
    Py_BEGIN_ALLOW_THREADS
    seq = g_execute(prep_addr, ptrs, attr_addr, stream_addr);
    Py_END_ALLOW_THREADS
    if (seq < 0) {
        tmp = PyObject_CallFunction(g_raise_for, "LO", (long long)-seq, op_type);
        Py_XDECREF(tmp);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_SystemError, "raise_for returned");
        goto done;
    }
    PyObject *comp = submit_seq_impl(lane, keep, op_type, name, seq);
    if (comp == NULL)
        goto done;
    if (note_impl(comp, lane, mem, n_reads, mem + n_reads, n_out, stream) < 0) {
        Py_DECREF(comp);
        goto done;
    }
    res = comp;
done:
    Py_XDECREF(stream);
    Py_XDECREF(cache);
    Py_XDECREF(attr_h);
    Py_XDECREF(key);
    Py_XDECREF(prepared);
    Py_XDECREF(dev);
    Py_XDECREF(lane);
    Py_XDECREF(handle);
    Py_XDECREF(keep);
    return res;
#undef PYTHON_PATH
#undef GET
#undef GET_ENQ
}

/* the transaction under the enqueue's lock (launch_locked); inputs and outputs are fast sequences */
static PyObject *launch_fast(PyObject *enq, PyObject *op_type, PyObject *inputs, PyObject *outputs, PyObject *attrs,
                             PyObject *name) {
    PyObject *res = NULL;
    PyObject *lock = enq_attr(enq, e_lock, s_lock);
    if (lock == NULL)
        return NULL;
    PyObject *r = PyObject_CallMethodNoArgs(lock, s_acquire);
    if (r != NULL) {
        Py_DECREF(r);
        res = launch_locked(enq, op_type, inputs, outputs, attrs, name);
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        r = PyObject_CallMethodNoArgs(lock, s_release);
        if (r == NULL) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            Py_CLEAR(res);
        } else {
            Py_DECREF(r);
            PyErr_Restore(et, ev, tb);
        }
    }
    Py_DECREF(lock);
    return res;
}

static PyObject *py_launch(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "launch(enq, op_type, inputs, outputs, attrs, name)");
        return NULL;
    }
    if (g_execute == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "aioge._native._launch: init() not called");
        return NULL;
    }
    if (!PyUnicode_CheckExact(args[1]))
        Py_RETURN_NONE;
    PyObject *inputs = PySequence_Fast(args[2], "inputs: a sequence");
    if (inputs == NULL)
        return NULL;
    PyObject *outputs = PySequence_Fast(args[3], "outputs: a sequence");
    if (outputs == NULL) {
        Py_DECREF(inputs);
        return NULL;
    }
    PyObject *res = launch_fast(args[0], args[1], inputs, outputs, args[4], args[5]);
    Py_DECREF(inputs);
    Py_DECREF(outputs);
    return res;
}

/* op(op_type, inputs, outputs, attrs, stream) -> [output] | None: aioge.op's prepared launch for
 * one given output Tensor and device Tensor (or absent) inputs, none of them the output's memory,
 * on `stream` or (None) the stream of the first input when that one is open, unobserved (no
 * trace hub, not a timing stream): launch() on the stream's Enqueue.  None, nothing launched, for
 * anything else (launch.op then decides as for every launch). */
static PyObject *py_op(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "op(op_type, inputs, outputs, attrs, stream)");
        return NULL;
    }
    if (g_execute == NULL || g_trace == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "aioge._native._launch: init() not called");
        return NULL;
    }
    PyObject *op_type = args[0], *inputs = args[1], *outputs = args[2], *attrs = args[3], *stream = args[4];
    if (!PyUnicode_CheckExact(op_type) || !(PyList_CheckExact(inputs) || PyTuple_CheckExact(inputs)) ||
        !(PyList_CheckExact(outputs) || PyTuple_CheckExact(outputs)) || PySequence_Fast_GET_SIZE(outputs) != 1)
        Py_RETURN_NONE;
    PyObject *y = PySequence_Fast_GET_ITEM(outputs, 0);
    PyObject *out_mem = slot(y, g_tensor, t_mem);
    if (out_mem == NULL || out_mem == Py_None)
        Py_RETURN_NONE;
    Py_ssize_t n_in = PySequence_Fast_GET_SIZE(inputs);
    PyObject **xin = PySequence_Fast_ITEMS(inputs);
    for (Py_ssize_t i = 0; i < n_in; i++) {
        if (xin[i] == Py_None)
            continue;
        PyObject *m = slot(xin[i], g_tensor, t_mem);
        if (m == NULL || m == out_mem)
            Py_RETURN_NONE;
    }
    PyObject *s;
    if (stream == Py_None) {
        if (n_in == 0 || xin[0] == Py_None)
            Py_RETURN_NONE;
        PyObject *m = slot(xin[0], g_tensor, t_mem);
        if (m == NULL || Py_TYPE(m) != g_memory || SLOT(m, m_ptr) == NULL || SLOT(m, m_ptr) == Py_None)
            Py_RETURN_NONE;
        s = SLOT(m, m_stream);
        if (s == NULL)
            Py_RETURN_NONE;
    } else {
        s = stream;
    }
    Py_INCREF(s);
    Py_INCREF(y);  // the caller's list may change while the launch runs without the GIL
    PyObject *res = NULL, *enq = NULL, *tmp;
    int flag;
    if ((tmp = PyObject_GetAttr(s, s_closed)) == NULL)
        goto done;
    flag = PyObject_IsTrue(tmp);
    Py_DECREF(tmp);
    if (flag) {
        res = flag < 0 ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    if ((tmp = PyObject_GetAttr(g_trace, s_hub)) == NULL)
        goto done;
    flag = tmp != Py_None;
    Py_DECREF(tmp);
    if (!flag) {
        if ((tmp = PyObject_GetAttr(s, s_timing)) == NULL)
            goto done;
        flag = PyObject_IsTrue(tmp);
        Py_DECREF(tmp);
        if (flag < 0)
            goto done;
    }
    if (flag) {  // observed
        res = Py_NewRef(Py_None);
        goto done;
    }
    if ((enq = PyObject_GetAttr(s, s_enqueue)) == NULL)
        goto done;
    PyObject *comp = launch_fast(enq, op_type, inputs, outputs, attrs, Py_None);
    if (comp == NULL || comp == Py_None) {
        res = comp;
        goto done;
    }
    Py_DECREF(comp);
    res = PyList_New(1);
    if (res != NULL)
        PyList_SET_ITEM(res, 0, Py_NewRef(y));
done:
    Py_DECREF(s);
    Py_DECREF(y);
    Py_XDECREF(enq);
    return res;
}

/* the slots of a Completion, every one set by Completion.__init__ and by submit_seq_impl */
static const char *const completion_slots[] = {"_done", "_error", "_waiters", "deps", "device_ms", "event", "keep",
                                               "lane", "name", "seq", "start", "tseq", "what"};
#define N_COMPLETION_SLOTS ((Py_ssize_t)(sizeof completion_slots / sizeof completion_slots[0]))

/* init(execute_address, cdata_type, raise_for, Tensor, DeviceMemory, Completion, poll_every, trace, Enqueue,
 *      progress_address, Lane): `trace` is the module whose `hub` (not None: an observer) op() checks;
 * the addresses are aiogeHostLaunchExecute's and aiogeHostStreamProgress's */
static PyObject *py_init(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "init(execute_address, cdata_type, raise_for, Tensor, DeviceMemory, "
                                         "Completion, poll_every, trace, Enqueue, progress_address, Lane)");
        return NULL;
    }
    void *fn = PyLong_AsVoidPtr(args[0]);
    if (fn == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "init: a NULL execute address");
        return NULL;
    }
    void *progress = PyLong_AsVoidPtr(args[9]);
    if (progress == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "init: a NULL progress address");
        return NULL;
    }
    for (int i = 1; i < 6; i++)
        if (i != 2 && !PyType_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "init: argument %d is not a type", i);
            return NULL;
        }
    Py_ssize_t poll_every = PyLong_AsSsize_t(args[6]);
    if (poll_every == -1 && PyErr_Occurred())
        return NULL;
    PyTypeObject *tensor = (PyTypeObject *)args[3], *memory = (PyTypeObject *)args[4],
                 *completion = (PyTypeObject *)args[5];
    /* a Completion made here has every slot Completion.__init__ sets: no more, no fewer */
    PyObject *declared = PyObject_GetAttrString((PyObject *)completion, "__slots__");
    if (declared == NULL)
        return NULL;
    PyObject *have = PySet_New(declared);
    Py_DECREF(declared);
    if (have == NULL)
        return NULL;
    Py_ssize_t n_have = PySet_GET_SIZE(have);
    Py_DECREF(have);
    if (n_have != N_COMPLETION_SLOTS || completion->tp_dictoffset != 0) {
        PyErr_Format(PyExc_TypeError, "init: %s has %zd slots (or a __dict__), _launch.c sets %zd",
                     completion->tp_name, n_have, N_COMPLETION_SLOTS);
        return NULL;
    }
    Py_ssize_t co[N_COMPLETION_SLOTS];
    for (Py_ssize_t i = 0; i < N_COMPLETION_SLOTS; i++)
        if (slot_offset(completion, completion_slots[i], &co[i]) < 0)
            return NULL;
    if (!PyType_Check(args[8])) {
        PyErr_SetString(PyExc_TypeError, "init: argument 8 is not a type");
        return NULL;
    }
    if (!PyType_Check(args[10])) {
        PyErr_SetString(PyExc_TypeError, "init: argument 10 is not a type");
        return NULL;
    }
    PyTypeObject *lane_type = (PyTypeObject *)args[10];
    Py_ssize_t lo[N_LANE];
    for (int i = 0; i < N_LANE; i++)
        if (slot_offset(lane_type, lane_slots[i], &lo[i]) < 0)
            return NULL;
    PyTypeObject *enqueue = (PyTypeObject *)args[8];
    Py_ssize_t eo[7];
    if (slot_offset(enqueue, "stream", &eo[0]) < 0 || slot_offset(enqueue, "capture", &eo[1]) < 0 ||
        slot_offset(enqueue, "cache", &eo[2]) < 0 || slot_offset(enqueue, "_dev", &eo[3]) < 0 ||
        slot_offset(enqueue, "_lane", &eo[4]) < 0 || slot_offset(enqueue, "handle", &eo[5]) < 0 ||
        slot_offset(enqueue, "lock", &eo[6]) < 0)
        return NULL;
    Py_ssize_t o[8];
    if (slot_offset(tensor, "_mem", &o[0]) < 0 || slot_offset(tensor, "dtype", &o[1]) < 0 ||
        slot_offset(tensor, "shape", &o[2]) < 0 || slot_offset(memory, "ptr", &o[3]) < 0 ||
        slot_offset(memory, "device", &o[4]) < 0 || slot_offset(memory, "writer", &o[5]) < 0 ||
        slot_offset(memory, "readers", &o[6]) < 0 || slot_offset(memory, "stream", &o[7]) < 0)
        return NULL;
    t_mem = o[0], t_dtype = o[1], t_shape = o[2];
    m_ptr = o[3], m_device = o[4], m_writer = o[5], m_readers = o[6], m_stream = o[7];
    c_done = co[0], c_error = co[1], c_waiters = co[2], c_deps = co[3], c_device_ms = co[4], c_event = co[5];
    c_keep = co[6], c_lane = co[7], c_name = co[8], c_seq = co[9], c_start = co[10], c_tseq = co[11], c_what = co[12];
    g_poll_every = poll_every;
    e_stream = eo[0], e_capture = eo[1], e_cache = eo[2], e_dev = eo[3], e_lane = eo[4], e_handle = eo[5];
    e_lock = eo[6];
    memcpy(lane_off, lo, sizeof lo);
    Py_XSETREF(g_lane, (PyTypeObject *)Py_NewRef(lane_type));
    Py_XSETREF(g_enqueue, (PyTypeObject *)Py_NewRef(enqueue));
    Py_XSETREF(g_cdata, (PyTypeObject *)Py_NewRef(args[1]));
    Py_XSETREF(g_raise_for, Py_NewRef(args[2]));
    Py_XSETREF(g_trace, Py_NewRef(args[7]));
    Py_XSETREF(g_tensor, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(g_memory, (PyTypeObject *)Py_NewRef(memory));
    Py_XSETREF(g_completion, (PyTypeObject *)Py_NewRef(completion));
    g_execute = (execute_fn)fn;
    g_progress = (progress_fn)progress;
    Py_RETURN_NONE;
}

/* address(cdata) -> int: the address launch() reads from a cffi pointer (tests compare it with cffi's) */
static PyObject *py_address(PyObject *mod, PyObject *o) {
    void *p;
    if (g_cdata == NULL || cdata_address(o, &p) < 0) {
        PyErr_SetString(PyExc_TypeError, "address: not a cffi pointer (or init() not called)");
        return NULL;
    }
    return PyLong_FromVoidPtr(p);
}

/* ring(fd): add 1 to an eventfd, holding the GIL.  The thread that wakes a loop this way keeps the
   GIL until it blocks: os.eventfd_write would release it for the write, the woken loop would take
   it, and the thread would then wait for the loop to hand it back before it could go on to block. */
static PyObject *py_ring(PyObject *mod, PyObject *arg) {
    long fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    uint64_t one = 1;
    if (write((int)fd, &one, sizeof one) < 0 && errno != EAGAIN) /* EAGAIN: the count is full, a wake is due */
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* ---- node_table: CompiledGraph._load's node table (aioge/runtime/graphs/executable.py) ----------------
 *
 * node_table(ops, nchw_ops, codes, normalize, formats, node_batch, const_batch_bytes) walks a Layout's
 * placed ops once and returns the batches acl.graph_add_nodes_by_value takes, as a list of
 * (segments, op_types, names, (n_in, n_out), (index, locs, ats), (dtypes, formats, ndims, dims, consts),
 * attrs): the integer arrays as memoryviews ('i' int32, 'q' int64), the strings, consts and attrs as
 * lists.  Per batch, one desc per distinct (dtype, shape) of the non-const operands (apart for the
 * 4-D operands of an op in nchw_ops, described NCHW), one for an absent operand, and one per const
 * operand (its value; None where it has no bytes).  A batch ends after node_batch nodes or where its
 * const values pass const_batch_bytes.  codes maps a numpy dtype to its ACL code (a const value's
 * dtype not in it: codes[normalize(dtype)]); formats is (ND, NCHW, UNDEFINED dtype, UNDEFINED format).
 * Errors (a dtype without a code, an operand not a 3-tuple) propagate as Python raised them. */
static PyObject *s_op_type, *s_name, *s_segment, *s_inputs, *s_outputs, *s_attrs, *s_dtype, *s_shape, *s_nbytes;

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} tbuf;

static int tbuf_put(tbuf *b, const void *src, Py_ssize_t n) {
    if (b->len + n > b->cap) {
        Py_ssize_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->len + n) nc *= 2;
        char *q = PyMem_Realloc(b->p, (size_t)nc);
        if (q == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static int tbuf_i32(tbuf *b, long long v) {
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "node_table: a value does not fit int32_t");
        return -1;
    }
    int32_t x = (int32_t)v;
    return tbuf_put(b, &x, sizeof x);
}

static int tbuf_i64(tbuf *b, long long v) {
    int64_t x = (int64_t)v;
    return tbuf_put(b, &x, sizeof x);
}

/* the buffer as a memoryview of `fmt` items (the buffer is emptied) */
static PyObject *tbuf_view(tbuf *b, const char *fmt) {
    PyObject *bytes = PyBytes_FromStringAndSize(b->p ? b->p : "", b->len);
    b->len = 0;
    if (bytes == NULL) return NULL;
    PyObject *mv = PyMemoryView_FromObject(bytes);
    Py_DECREF(bytes);
    if (mv == NULL) return NULL;
    PyObject *cast = PyObject_CallMethod(mv, "cast", "s", fmt);
    Py_DECREF(mv);
    return cast;
}

enum { T_SEG, T_NIN, T_NOUT, T_INDEX, T_LOC, T_AT, T_DT, T_FMT, T_ND, T_DIMS, T_N };

typedef struct {
    tbuf b[T_N];
    PyObject *types, *names, *consts, *attrs; /* lists */
    PyObject *made, *made_nchw;               /* (dtype, shape) -> desc index */
    long long none_desc;                       /* the absent operand's desc, -1: none yet */
    int32_t ndescs;
    Py_ssize_t nodes;
    long long const_bytes;
} ntable;

static int ntable_lists(ntable *t) {
    t->types = PyList_New(0);
    t->names = PyList_New(0);
    t->consts = PyList_New(0);
    t->attrs = PyList_New(0);
    return t->types && t->names && t->consts && t->attrs ? 0 : -1;
}

static void ntable_drop_lists(ntable *t) {
    Py_CLEAR(t->types);
    Py_CLEAR(t->names);
    Py_CLEAR(t->consts);
    Py_CLEAR(t->attrs);
}

/* the table starts anew (after a batch) */
static int ntable_reset(ntable *t) {
    ntable_drop_lists(t);
    if (ntable_lists(t) < 0) return -1;
    for (int i = 0; i < T_N; i++) t->b[i].len = 0;
    PyDict_Clear(t->made);
    PyDict_Clear(t->made_nchw);
    t->none_desc = -1;
    t->ndescs = 0;
    t->nodes = 0;
    t->const_bytes = 0;
    return 0;
}

/* aiogeGraphAddNodesByValue (cffi_build/aioge_graph.h), its opaque pointers as void * */
typedef int32_t (*add_by_value_fn)(void *graph, int32_t numNodes, const int32_t segment[], const char *opTypes,
                                   size_t opTypesBytes, const char *nodeNames, size_t nodeNamesBytes,
                                   const int32_t numInputs[], const int32_t numOutputs[], int64_t numOperands,
                                   const int32_t descIndex[], const int32_t loc[], const int64_t at[], int32_t numDescs,
                                   const int32_t dtype[], const int32_t format[], const int32_t ndim[],
                                   const int64_t dims[], int64_t numDims, const void *const constData[],
                                   const size_t constBytes[], const void *const attr[], int32_t *numAdded);

/* the strings of `list` one after the other, each NUL-terminated and cut at its first NUL (as a C string
 * of it would be) */
static int put_strings(tbuf *b, PyObject *list) {
    b->len = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        Py_ssize_t n;
        const char *u = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(list, i), &n);
        if (u == NULL || tbuf_put(b, u, (Py_ssize_t)strlen(u) + 1) < 0) return -1;
    }
    return 0;
}

/* one Py_buffer per array argument of add_table */
typedef struct {
    Py_buffer v[10];
    int n;
} views;

static void views_release(views *vs) {
    for (int i = 0; i < vs->n; i++) PyBuffer_Release(&vs->v[i]);
    vs->n = 0;
}

/* the bytes of an int32/int64 memoryview (node_table's): its item count, -1 on error */
static Py_ssize_t view_items(views *vs, PyObject *o, Py_ssize_t itemsize, const void **p) {
    Py_buffer *v = &vs->v[vs->n];
    if (PyObject_GetBuffer(o, v, PyBUF_SIMPLE) < 0) return -1;
    vs->n++;
    if (v->len % itemsize) {
        PyErr_SetString(PyExc_ValueError, "add_table: an array's bytes are not whole items");
        return -1;
    }
    *p = v->buf;
    return v->len / itemsize;
}

/* add_table(graph, function, segments, op_types, names, n_in, n_out, index, locs, ats, dtypes, formats, ndims,
 * dims, consts, attrs, address) -> None | (rc, numAdded): node_table's batch added to the graph by one call of
 * aiogeGraphAddNodesByValue at `function` (the GIL released for it): the arrays' bytes as they are, the op
 * types and names NUL-separated (each cut at its first NUL, as a C string of it would be), each const
 * value's bytes where it is (`address(value)` where it has no buffer-protocol format: bfloat16), the attr
 * handles' addresses. */
static PyObject *py_add_table(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "add_table(graph, function, segments, op_types, names, n_in, n_out, index, "
                                         "locs, ats, dtypes, formats, ndims, dims, consts, attrs, address)");
        return NULL;
    }
    if (g_cdata == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "add_table: init() not called");
        return NULL;
    }
    void *graph = PyLong_AsVoidPtr(args[0]);
    add_by_value_fn fn = (add_by_value_fn)PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (fn == NULL) {
        PyErr_SetString(PyExc_ValueError, "add_table: a NULL function");
        return NULL;
    }
    PyObject *types_l = args[3], *names_l = args[4], *consts = args[14], *attrs = args[15], *address = args[16];
    if (!PyList_Check(types_l) || !PyList_Check(names_l) || !PyList_Check(consts) || !PyList_Check(attrs)) {
        PyErr_SetString(PyExc_TypeError, "add_table: op_types, names, consts and attrs are lists");
        return NULL;
    }
    views vs = {.n = 0};
    tbuf types = {0}, names = {0}, ptrs = {0}, sizes = {0}, attr = {0};
    PyObject *ret = NULL;
    const void *seg = NULL, *nin = NULL, *nout = NULL, *index = NULL, *locs = NULL, *ats = NULL, *dts = NULL,
               *fmts = NULL, *nds = NULL, *dims = NULL;
    Py_ssize_t nodes = view_items(&vs, args[2], 4, &seg);
    if (nodes < 0) goto done;
    Py_ssize_t c_nin = view_items(&vs, args[5], 4, &nin), c_nout = view_items(&vs, args[6], 4, &nout);
    if (c_nin < 0 || c_nout < 0) goto done;
    Py_ssize_t n_ops = view_items(&vs, args[7], 4, &index), c_locs = view_items(&vs, args[8], 4, &locs);
    if (n_ops < 0 || c_locs < 0) goto done;
    Py_ssize_t c_ats = view_items(&vs, args[9], 8, &ats);
    if (c_ats < 0) goto done;
    Py_ssize_t n_descs = view_items(&vs, args[10], 4, &dts), c_fmts = view_items(&vs, args[11], 4, &fmts);
    if (n_descs < 0 || c_fmts < 0) goto done;
    Py_ssize_t c_nds = view_items(&vs, args[12], 4, &nds), n_dims = view_items(&vs, args[13], 8, &dims);
    if (c_nds < 0 || n_dims < 0) goto done;
    if (c_nin != nodes || c_nout != nodes || PyList_GET_SIZE(types_l) != nodes || PyList_GET_SIZE(names_l) != nodes ||
        PyList_GET_SIZE(attrs) != nodes || c_locs != n_ops || c_ats != n_ops || c_fmts != n_descs ||
        c_nds != n_descs || PyList_GET_SIZE(consts) != n_descs || nodes > INT32_MAX || n_descs > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "add_table: the arrays' lengths do not match");
        goto done;
    }
    if (put_strings(&types, types_l) < 0 || put_strings(&names, names_l) < 0) goto done;
    for (Py_ssize_t d = 0; d < n_descs; d++) {
        PyObject *c = PyList_GET_ITEM(consts, d);
        void *p = NULL;
        size_t nbytes = 0;
        if (c != Py_None) {
            Py_buffer view;
            if (PyObject_GetBuffer(c, &view, PyBUF_SIMPLE) == 0) {
                p = view.buf;
                PyBuffer_Release(&view); /* the value stays alive in consts */
            } else {
                if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError) &&
                    !PyErr_ExceptionMatches(PyExc_BufferError))
                    goto done;
                PyErr_Clear();
                PyObject *a = PyObject_CallOneArg(address, c);
                if (a == NULL) goto done;
                p = PyLong_AsVoidPtr(a);
                Py_DECREF(a);
                if (p == NULL && PyErr_Occurred()) goto done;
            }
            PyObject *nb = PyObject_GetAttr(c, s_nbytes);
            if (nb == NULL) goto done;
            nbytes = PyLong_AsSize_t(nb);
            Py_DECREF(nb);
            if (nbytes == (size_t)-1 && PyErr_Occurred()) goto done;
        }
        if (tbuf_put(&ptrs, &p, sizeof p) < 0 || tbuf_put(&sizes, &nbytes, sizeof nbytes) < 0) goto done;
    }
    for (Py_ssize_t i = 0; i < nodes; i++) {
        void *h;
        if (cdata_address(PyList_GET_ITEM(attrs, i), &h) < 0) {
            PyErr_SetString(PyExc_TypeError, "add_table: an attr handle is not a cffi pointer");
            goto done;
        }
        if (tbuf_put(&attr, &h, sizeof h) < 0) goto done;
    }
    int32_t rc, added = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = fn(graph, (int32_t)nodes, seg, types.p, (size_t)types.len, names.p, (size_t)names.len, nin, nout, n_ops,
            index, locs, ats, (int32_t)n_descs, dts, fmts, nds, n_dims ? dims : NULL, n_dims,
            (const void *const *)ptrs.p, (const size_t *)sizes.p, (const void *const *)attr.p, &added);
    Py_END_ALLOW_THREADS
    ret = rc ? Py_BuildValue("(ii)", (int)rc, (int)added) : Py_NewRef(Py_None);
done:
    views_release(&vs);
    PyMem_Free(types.p);
    PyMem_Free(names.p);
    PyMem_Free(ptrs.p);
    PyMem_Free(sizes.p);
    PyMem_Free(attr.p);
    return ret;
}

/* the batch so far, appended to `out`; the table starts anew */
static int ntable_emit(ntable *t, PyObject *out) {
    static const char *fmt[T_N] = {"i", "i", "i", "i", "i", "q", "i", "i", "i", "q"};
    PyObject *v[T_N] = {NULL};
    PyObject *batch = NULL;
    int rc = -1;
    for (int i = 0; i < T_N; i++)
        if ((v[i] = tbuf_view(&t->b[i], fmt[i])) == NULL) goto done;
    batch = Py_BuildValue("(OOO(OO)(OOO)(OOOOO)O)", v[T_SEG], t->types, t->names, v[T_NIN], v[T_NOUT], v[T_INDEX],
                          v[T_LOC], v[T_AT], v[T_DT], v[T_FMT], v[T_ND], v[T_DIMS], t->consts, t->attrs);
    if (batch == NULL || PyList_Append(out, batch) < 0 || ntable_reset(t) < 0) goto done;
    rc = 0;
done:
    for (int i = 0; i < T_N; i++) Py_XDECREF(v[i]);
    Py_XDECREF(batch);
    return rc;
}

static int as_ll(PyObject *o, long long *out) {
    *out = PyLong_AsLongLong(o);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* the desc of a (dtype, shape) operand, made on first use in `m` */
static int plain_desc(ntable *t, PyObject *m, PyObject *kind, PyObject *codes, int32_t fmt, long long *idx) {
    PyObject *i = PyDict_GetItemWithError(m, kind);
    if (i != NULL) return as_ll(i, idx);
    if (PyErr_Occurred()) return -1;
    PyObject *dt = PyTuple_GET_ITEM(kind, 0), *shape = PyTuple_GET_ITEM(kind, 1);
    PyObject *code = PyObject_GetItem(codes, dt);
    if (code == NULL) return -1;
    long long c;
    int bad = as_ll(code, &c);
    Py_DECREF(code);
    if (bad) return -1;
    PyObject *dims = PySequence_Fast(shape, "node_table: a shape is not a sequence");
    if (dims == NULL) return -1;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(dims);
    for (Py_ssize_t d = 0; d < nd; d++) {
        long long x;
        if (as_ll(PySequence_Fast_GET_ITEM(dims, d), &x) < 0 || tbuf_i64(&t->b[T_DIMS], x) < 0) {
            Py_DECREF(dims);
            return -1;
        }
    }
    Py_DECREF(dims);
    *idx = t->ndescs;
    PyObject *pi = PyLong_FromLong(t->ndescs);
    if (pi == NULL) return -1;
    bad = PyDict_SetItem(m, kind, pi);
    Py_DECREF(pi);
    if (bad || tbuf_i32(&t->b[T_DT], c) < 0 || tbuf_i32(&t->b[T_FMT], fmt) < 0 || tbuf_i32(&t->b[T_ND], nd) < 0 ||
        PyList_Append(t->consts, Py_None) < 0)
        return -1;
    t->ndescs++;
    return 0;
}

/* the desc of a const operand (its value): one of its own */
static int const_desc(ntable *t, PyObject *value, PyObject *codes, PyObject *normalize, int32_t fmt, long long *idx) {
    int rc = -1;
    PyObject *dt = NULL, *code = NULL, *shape = NULL, *dims = NULL, *nb = NULL;
    long long c, nbytes;
    if ((dt = PyObject_GetAttr(value, s_dtype)) == NULL) goto done;
    /* codes.get(dtype): a dtype of the table is its own normal form */
    code = Py_XNewRef(PyDict_Check(codes) ? PyDict_GetItemWithError(codes, dt) : PyObject_GetItem(codes, dt));
    if (code == NULL) {
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_KeyError)) goto done;
        PyErr_Clear();
        PyObject *norm = PyObject_CallOneArg(normalize, dt);
        if (norm == NULL) goto done;
        code = PyObject_GetItem(codes, norm);
        Py_DECREF(norm);
        if (code == NULL) goto done;
    }
    if (as_ll(code, &c) < 0) goto done;
    if ((shape = PyObject_GetAttr(value, s_shape)) == NULL) goto done;
    if ((dims = PySequence_Fast(shape, "node_table: a shape is not a sequence")) == NULL) goto done;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(dims);
    for (Py_ssize_t d = 0; d < nd; d++) {
        long long x;
        if (as_ll(PySequence_Fast_GET_ITEM(dims, d), &x) < 0 || tbuf_i64(&t->b[T_DIMS], x) < 0) goto done;
    }
    if ((nb = PyObject_GetAttr(value, s_nbytes)) == NULL || as_ll(nb, &nbytes) < 0) goto done;
    if (tbuf_i32(&t->b[T_DT], c) < 0 || tbuf_i32(&t->b[T_FMT], fmt) < 0 || tbuf_i32(&t->b[T_ND], nd) < 0 ||
        PyList_Append(t->consts, nbytes ? value : Py_None) < 0)
        goto done;
    t->const_bytes += nbytes;
    *idx = t->ndescs++;
    rc = 0;
done:
    Py_XDECREF(dt);
    Py_XDECREF(code);
    Py_XDECREF(shape);
    Py_XDECREF(dims);
    Py_XDECREF(nb);
    return rc;
}

/* one operand (kind, loc, at) of an op: its desc index, loc and at appended */
static int put_operand(ntable *t, PyObject *operand, bool output, bool nchw, PyObject *codes, PyObject *normalize,
                       const int32_t f[4]) {
    if (!PyTuple_Check(operand) || PyTuple_GET_SIZE(operand) != 3) {
        PyErr_SetString(PyExc_TypeError, "node_table: an operand is not a (kind, loc, at) tuple");
        return -1;
    }
    PyObject *kind = PyTuple_GET_ITEM(operand, 0);
    long long idx, loc, at;
    if (PyTuple_CheckExact(kind)) {
        if (PyTuple_GET_SIZE(kind) != 2) {
            PyErr_SetString(PyExc_ValueError, "node_table: an operand's kind is not a (dtype, shape) tuple");
            return -1;
        }
        PyObject *shape = PyTuple_GET_ITEM(kind, 1);
        Py_ssize_t nd = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : PyObject_Length(shape);
        if (nd < 0) return -1;
        bool as_nchw = nchw && nd == 4;
        if (plain_desc(t, as_nchw ? t->made_nchw : t->made, kind, codes, as_nchw ? f[1] : f[0], &idx) < 0) return -1;
    } else if (output) {
        PyErr_SetString(PyExc_TypeError, "node_table: an output's kind is not a (dtype, shape) tuple");
        return -1;
    } else if (kind == Py_None) {
        if (t->none_desc < 0) {
            if (tbuf_i32(&t->b[T_DT], f[2]) < 0 || tbuf_i32(&t->b[T_FMT], f[3]) < 0 || tbuf_i32(&t->b[T_ND], 0) < 0 ||
                PyList_Append(t->consts, Py_None) < 0)
                return -1;
            t->none_desc = t->ndescs++;
        }
        idx = t->none_desc;
    } else if (const_desc(t, kind, codes, normalize, f[0], &idx) < 0) {
        return -1;
    }
    if (as_ll(PyTuple_GET_ITEM(operand, 1), &loc) < 0 || as_ll(PyTuple_GET_ITEM(operand, 2), &at) < 0) return -1;
    if (tbuf_i32(&t->b[T_INDEX], idx) < 0 || tbuf_i32(&t->b[T_LOC], loc) < 0 || tbuf_i64(&t->b[T_AT], at) < 0)
        return -1;
    return 0;
}

static PyObject *py_node_table(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "node_table(ops, nchw_ops, codes, normalize, formats, node_batch, const_batch_bytes)");
        return NULL;
    }
    PyObject *nchw_ops = args[1], *codes = args[2], *normalize = args[3];
    int32_t f[4];
    long long node_batch, const_batch;
    if (!PyTuple_Check(args[4]) || PyTuple_GET_SIZE(args[4]) != 4) {
        PyErr_SetString(PyExc_TypeError, "node_table: formats is (ND, NCHW, UNDEFINED dtype, UNDEFINED format)");
        return NULL;
    }
    for (int i = 0; i < 4; i++) {
        long long x;
        if (as_ll(PyTuple_GET_ITEM(args[4], i), &x) < 0) return NULL;
        f[i] = (int32_t)x;
    }
    if (as_ll(args[5], &node_batch) < 0 || as_ll(args[6], &const_batch) < 0) return NULL;
    PyObject *ops = PySequence_Fast(args[0], "node_table: ops is not a sequence");
    if (ops == NULL) return NULL;
    ntable t;
    memset(&t, 0, sizeof t);
    t.none_desc = -1;
    PyObject *out = PyList_New(0);
    t.made = PyDict_New();
    t.made_nchw = PyDict_New();
    if (out == NULL || t.made == NULL || t.made_nchw == NULL || ntable_lists(&t) < 0) goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ops);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PySequence_Fast_GET_ITEM(ops, i);
        PyObject *type = NULL, *name = NULL, *seg = NULL, *ins = NULL, *outs = NULL, *attrs = NULL;
        int ok = 0;
        long long segment;
        if ((type = PyObject_GetAttr(op, s_op_type)) == NULL || (name = PyObject_GetAttr(op, s_name)) == NULL ||
            (seg = PyObject_GetAttr(op, s_segment)) == NULL || (attrs = PyObject_GetAttr(op, s_attrs)) == NULL)
            goto op_done;
        if ((ins = PyObject_GetAttr(op, s_inputs)) == NULL || (outs = PyObject_GetAttr(op, s_outputs)) == NULL)
            goto op_done;
        PyObject *fi = PySequence_Fast(ins, "node_table: an op's inputs are not a sequence");
        if (fi == NULL) goto op_done;
        Py_SETREF(ins, fi);
        PyObject *fo = PySequence_Fast(outs, "node_table: an op's outputs are not a sequence");
        if (fo == NULL) goto op_done;
        Py_SETREF(outs, fo);
        int nchw = PySequence_Contains(nchw_ops, type);
        if (nchw < 0) goto op_done;
        Py_ssize_t ni = PySequence_Fast_GET_SIZE(ins), no = PySequence_Fast_GET_SIZE(outs);
        for (Py_ssize_t j = 0; j < ni; j++)
            if (put_operand(&t, PySequence_Fast_GET_ITEM(ins, j), false, nchw, codes, normalize, f) < 0) goto op_done;
        for (Py_ssize_t j = 0; j < no; j++)
            if (put_operand(&t, PySequence_Fast_GET_ITEM(outs, j), true, nchw, codes, normalize, f) < 0) goto op_done;
        if (as_ll(seg, &segment) < 0 || tbuf_i32(&t.b[T_SEG], segment) < 0 || PyList_Append(t.types, type) < 0 ||
            PyList_Append(t.names, name) < 0 || tbuf_i32(&t.b[T_NIN], ni) < 0 || tbuf_i32(&t.b[T_NOUT], no) < 0 ||
            PyList_Append(t.attrs, attrs) < 0)
            goto op_done;
        t.nodes++;
        ok = 1;
    op_done:
        Py_XDECREF(type);
        Py_XDECREF(name);
        Py_XDECREF(seg);
        Py_XDECREF(ins);
        Py_XDECREF(outs);
        Py_XDECREF(attrs);
        if (!ok) goto fail;
        if ((t.const_bytes > const_batch || t.nodes >= node_batch) && ntable_emit(&t, out) < 0) goto fail;
    }
    if (t.nodes && ntable_emit(&t, out) < 0) goto fail;
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_DECREF(ops);
    Py_XDECREF(t.made);
    Py_XDECREF(t.made_nchw);
    ntable_drop_lists(&t);
    for (int i = 0; i < T_N; i++) PyMem_Free(t.b[i].p);
    return out;
}

/* ---- attr_key: descs._attr_key, the cache key of an attr set ------------------------------------------
 *
 * attr_key(attrs, kind_of) -> tuple: the (name, kind, normalised value) of every attr, sorted by name; an exact
 * int, float, str or bool is ("Int" | "Float" | "String" | "Bool", itself), an exact list or tuple of exact
 * ints ("ListInt", a tuple of them), anything else (name, *kind_of(value)) (descs._attr_kind). */
static PyObject *k_int, *k_float, *k_string, *k_bool, *k_list_int;

static PyObject *py_attr_key(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "attr_key(attrs: dict, kind_of)");
        return NULL;
    }
    PyObject *attrs = args[0], *kind_of = args[1];
    PyObject *key = PyList_New(PyDict_GET_SIZE(attrs));
    if (key == NULL) return NULL;
    Py_ssize_t pos = 0, i = 0;
    PyObject *name, *v;
    while (PyDict_Next(attrs, &pos, &name, &v)) {
        PyObject *item = NULL, *kind = NULL;
        if (PyLong_CheckExact(v)) kind = k_int;
        else if (PyFloat_CheckExact(v)) kind = k_float;
        else if (PyUnicode_CheckExact(v)) kind = k_string;
        else if (PyBool_Check(v)) kind = k_bool;
        if (kind != NULL) {
            item = PyTuple_Pack(3, name, kind, v);
        } else {
            int ints = PyList_CheckExact(v) || PyTuple_CheckExact(v);
            Py_ssize_t n = ints ? PySequence_Fast_GET_SIZE(v) : 0;
            for (Py_ssize_t j = 0; j < n && ints; j++) ints = PyLong_CheckExact(PySequence_Fast_GET_ITEM(v, j));
            if (ints) {
                PyObject *t = PyList_CheckExact(v) ? PyList_AsTuple(v) : Py_NewRef(v);
                if (t != NULL) {
                    item = PyTuple_Pack(3, name, k_list_int, t);
                    Py_DECREF(t);
                }
            } else {
                PyObject *kv = PyObject_CallOneArg(kind_of, v);
                if (kv != NULL) {
                    if (PyTuple_CheckExact(kv) && PyTuple_GET_SIZE(kv) == 2)
                        item = PyTuple_Pack(3, name, PyTuple_GET_ITEM(kv, 0), PyTuple_GET_ITEM(kv, 1));
                    else
                        PyErr_SetString(PyExc_TypeError, "attr_key: kind_of did not return a (kind, value) tuple");
                    Py_DECREF(kv);
                }
            }
        }
        if (item == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        PyList_SET_ITEM(key, i++, item);
    }
    if (i != PyList_GET_SIZE(key)) { /* the dict changed size while we walked it */
        PyErr_SetString(PyExc_RuntimeError, "attr_key: the attrs changed during the call");
        Py_DECREF(key);
        return NULL;
    }
    if (PyList_Sort(key) < 0) {
        Py_DECREF(key);
        return NULL;
    }
    PyObject *t = PyList_AsTuple(key);
    Py_DECREF(key);
    return t;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))py_init, METH_FASTCALL, "Bind the runtime's types and entry point."},
    {"op", (PyCFunction)(void (*)(void))py_op, METH_FASTCALL,
     "aioge.op's prepared launch into one given output: [output], or None (launch.op decides)."},
    {"launch", (PyCFunction)(void (*)(void))py_launch, METH_FASTCALL,
     "A prepared launch needing nothing else: its Completion, or None (the Python path runs it)."},
    {"submit_seq", (PyCFunction)(void (*)(void))py_submit_seq, METH_FASTCALL,
     "submit_seq(lane, keep, what, name, tseq): the Completion of a launch on a sequence-number lane."},
    {"note", (PyCFunction)(void (*)(void))py_note, METH_FASTCALL,
     "note(comp, reads, writes, stream): the launch's reader and writer notes."},
    {"address", (PyCFunction)py_address, METH_O, "The address of a cffi pointer."},
    {"ring", (PyCFunction)py_ring, METH_O, "ring(fd): add 1 to an eventfd without releasing the GIL."},
    {"node_table", (PyCFunction)(void (*)(void))py_node_table, METH_FASTCALL,
     "A layout's placed ops as the batches of acl.graph_add_nodes_by_value."},
    {"attr_key", (PyCFunction)(void (*)(void))py_attr_key, METH_FASTCALL,
     "The cache key of an attr set: its (name, kind, normalised value) sorted by name."},
    {"add_table", (PyCFunction)(void (*)(void))py_add_table, METH_FASTCALL,
     "node_table's batch added to a graph by one call of aiogeGraphAddNodesByValue."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "aioge._native._launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__launch(void) {
    struct {
        PyObject **var;
        const char *s;
    } names[] = {
        {&s_lock, "lock"},         {&s_stream, "stream"},     {&s_capture, "capture"},   {&s_cache, "cache"},
        {&s_dev, "_dev"},          {&s_lane, "_lane"},        {&s_handle, "handle"},     {&s_closed, "_closed"},
        {&s_no_attr, "no_attr"},   {&s_prepared, "prepared"}, {&s_attr, "attr"},         {&s_acquire, "acquire"},
        {&s_release, "release"},   {&s_submit_seq, "submit_seq"}, {&s_readers, "readers"}, {&s_writer, "writer"}, {&s_lane_pub, "lane"},
        {&s_append, "append"}, {&s_notify, "notify"}, {&s_poll, "poll"}, {&s_hub, "hub"}, {&s_timing, "timing"},
        {&s_enqueue, "_enqueue"}, {&s_locked, "locked"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].var = PyUnicode_InternFromString(names[i].s)) == NULL)
            return NULL;
    struct {
        PyObject **var;
        const char *s;
    } table_names[] = {
        {&s_op_type, "op_type"}, {&s_name, "name"},   {&s_segment, "segment"}, {&s_inputs, "inputs"}, {&s_outputs, "outputs"},
        {&s_attrs, "attrs"},     {&k_int, "Int"},       {&k_float, "Float"},     {&k_string, "String"},
        {&k_bool, "Bool"},       {&k_list_int, "ListInt"}, {&s_dtype, "dtype"}, {&s_shape, "shape"},     {&s_nbytes, "nbytes"},
    };
    for (size_t i = 0; i < sizeof table_names / sizeof table_names[0]; i++)
        if ((*table_names[i].var = PyUnicode_InternFromString(table_names[i].s)) == NULL)
            return NULL;
    for (int i = 0; i < N_LANE; i++)
        if ((lane_names[i] = PyUnicode_InternFromString(lane_slots[i])) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
