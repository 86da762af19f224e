"""Horovod's PyTorch collective API on the accelkit training runtime (include/accelkit/train.h).

Every operation is enqueued on the runtime (ak_train_enqueue) under a name that must match
on every rank; the runtime's background thread negotiates, fuses and runs it. A handle is an
int (the runtime's handle); synchronize(handle) waits and returns the result, poll(handle)
says whether it is done. Tensors are CPU tensors handed over by data_ptr(); a tensor that is
not contiguous (or not on the CPU) is copied, and in-place operations copy the result back.
Everything the C side points to is kept alive in the handle's record until it completes.

Names: an op named by the caller goes to the runtime as "<kind>.<name>" (as in Horovod);
an unnamed op as "<kind>.noname.<N>" with one counter per kind and process set, so ranks
that issue the same unnamed ops in the same order agree on the names.
"""
import atexit
import ctypes
import math
import os
import sys
import threading
import warnings

import torch

from .. import _lib
from . import _ctypes_train as _ct
from ._ctypes_train import C

# ---- reduction ops (Horovod's numbering) -------------------------------------------------

Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
             Product: "Product"}
_AK_REDUCE = {Average: _ct.AK_REDUCE_AVG, Sum: _ct.AK_REDUCE_SUM, Min: _ct.AK_REDUCE_MIN,
              Max: _ct.AK_REDUCE_MAX, Product: _ct.AK_REDUCE_PROD,
              Adasum: _ct.AK_TRAIN_REDUCE_ADASUM}

_DTYPES = {
    torch.float32: _ct.AK_DTYPE_F32,
    torch.float16: _ct.AK_DTYPE_F16,
    torch.bfloat16: _ct.AK_DTYPE_BF16,
    torch.float64: _ct.AK_DTYPE_F64,
    torch.int8: _ct.AK_DTYPE_I8,
    torch.uint8: _ct.AK_DTYPE_U8,
    torch.int32: _ct.AK_DTYPE_I32,
    torch.int64: _ct.AK_DTYPE_I64,
}


# ---- errors -----------------------------------------------------------------------------

class HorovodInternalError(_lib.AccelkitError):
    """A collective failed inside the runtime (mismatch across ranks, a lost peer, a
    timeout). str() is the runtime's message; `status` the ak_status code. Re-exported as
    horovod.common.exceptions.HorovodInternalError."""

    def __init__(self, message="", status=_ct.AK_ERR_INTERNAL):
        if isinstance(message, BaseException):
            status = getattr(message, "status", status)
            message = str(message)
        super().__init__(status, message)


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod elastic's host-change signal: raised on every rank by State.commit() /
    check_host_updates() in an elastic job whose launcher's host set changed. skip_sync:
    hosts only left, so the ranks that stay need not sync the state after the reset."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


def _error(status, what=""):
    detail = _ct.last_error()
    msg = f"{_ct.status_name(status)}: {detail}" if detail else _ct.status_name(status)
    return HorovodInternalError(f"{what}{msg}", status)


def _check(status, what=""):
    if status != 0:
        raise _error(status, what)


class DuplicateNameError(HorovodInternalError, ValueError):
    """An op was submitted under the name of one still in flight on this rank. Horovod
    raises ValueError for it; this is also a HorovodInternalError for accelkit callers."""


_DUPLICATE_MARK = "same name as another tensor still being processed"


def _enqueue_error(status):
    """The error for a failed ak_train_enqueue(_group): a duplicate in-flight name is a
    ValueError naming the op, as in Horovod; anything else a HorovodInternalError."""
    err = _error(status)
    if status == _ct.AK_ERR_INVALID_ARG and _DUPLICATE_MARK in str(err):
        return DuplicateNameError(str(err), status)
    return err


# ---- process sets -----------------------------------------------------------------------

class ProcessSet:
    """A set of ranks that run collectives among themselves. Build it from a list of global
    ranks, then pass it to init(process_sets=[...]) or add_process_set(); pass it as
    `process_set=` to any operation. Ranks must be given identically on every rank."""

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        try:
            ranks = sorted(ranks_or_comm)
        except TypeError:
            raise ValueError("accelkit: a ProcessSet is built from a list of ranks (MPI "
                             "communicators are not supported: accelkit does not use MPI)")
        if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks")
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"ProcessSet ranks must be distinct: {ranks}")
        self.ranks = ranks

    def _info(self):
        if self.process_set_id is None:
            raise ValueError(f"{self} is not registered: pass it to hvd.init(process_sets=...) "
                             "or hvd.add_process_set()")
        rt = _runtime()
        r, n = ctypes.c_int(), ctypes.c_int()
        _check(C.ak_train_process_set_info(rt.train, self.process_set_id, ctypes.byref(r),
                                           ctypes.byref(n)), "process set: ")
        return r.value, n.value

    def size(self):
        """Number of ranks in the set."""
        return self._info()[1]

    def rank(self):
        """This process's rank inside the set; -1 when it is not a member."""
        return self._info()[0]

    def included(self):
        """Whether this process is a member."""
        return self.rank() >= 0

    def invalidate(self):
        self.process_set_id = None

    def __str__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks}, mpi_comm=None)"

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0
_process_sets = {0: global_process_set}  # id -> the first object registered with it


def _ps_id(process_set):
    if process_set is None:
        return 0
    if isinstance(process_set, int) and not isinstance(process_set, bool):
        return process_set
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"process_set must be a ProcessSet, not {type(process_set).__name__}")
    if process_set.process_set_id is None:
        raise ValueError(f"{process_set} is not registered (removed, or never added)")
    return process_set.process_set_id


def _ps_check_member(ps_id):
    if ps_id == 0:
        return
    r, _ = _process_sets[ps_id]._info() if ps_id in _process_sets else (0, 0)
    if r < 0:
        raise ValueError(f"this process (rank {rank()}) is not part of process set {ps_id}; "
                         "only its members may submit operations on it")


def add_process_set(process_set):
    """Registers a process set (a ProcessSet or a list of ranks); collective over all
    ranks, which must call it in the same order with the same ranks. Returns the
    ProcessSet."""
    rt = _runtime()
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"{process_set} is already registered")
    n = len(process_set.ranks)
    arr = (ctypes.c_int * max(n, 1))(*process_set.ranks)
    out = ctypes.c_int()
    _check(C.ak_train_add_process_set(rt.train, arr, n, ctypes.byref(out)), "add_process_set: ")
    process_set.process_set_id = out.value
    _process_sets.setdefault(out.value, process_set)
    return process_set


def remove_process_set(process_set):
    """Removes a registered process set (collective over all ranks). Returns False for the
    global set, True once removed; the ProcessSet object is invalidated."""
    rt = _runtime()
    ps_id = _ps_id(process_set)
    if ps_id == 0:
        return False
    _check(C.ak_train_remove_process_set(rt.train, ps_id), "remove_process_set: ")
    _process_sets.pop(ps_id, None)
    if isinstance(process_set, ProcessSet):
        process_set.invalidate()
    return True


def process_set_by_id(process_set_id):
    if process_set_id not in _process_sets:
        raise ValueError(f"No known process set with id {process_set_id}")
    return _process_sets[process_set_id]


# ---- runtime ----------------------------------------------------------------------------

class _Record:
    """What one user-facing handle waits for: runtime handles, the objects their pointers
    refer to, and how to build the result."""

    __slots__ = ("handles", "keep", "finish")

    def __init__(self, handles, keep, finish):
        self.handles, self.keep, self.finish = handles, keep, finish


class _Runtime:
    def __init__(self, train):
        self.train = train
        self.lock = threading.Lock()
        self.pending = {}
        self.counters = {}
        comm = ctypes.c_void_p()
        _check(C.ak_train_comm(train, ctypes.byref(comm)), "init: ")
        a, b = ctypes.c_int(), ctypes.c_int()
        _check(C.ak_comm_rank(comm, ctypes.byref(a)))
        self.rank = a.value
        _check(C.ak_comm_size(comm, ctypes.byref(a)))
        self.size = a.value
        _check(C.ak_comm_local(comm, ctypes.byref(a), ctypes.byref(b)))
        self.local_rank, self.local_size = a.value, b.value
        _check(C.ak_comm_hosts(comm, ctypes.byref(a), ctypes.byref(b)))
        self.cross_rank, self.cross_size = a.value, b.value
        self.homogeneous = None
        # the timeline HOROVOD_TIMELINE started in ak_train_init (rank 0), so that
        # stop_timeline() and start_timeline() know of it
        env = os.environ.get("HOROVOD_TIMELINE", "")
        self.timeline = (env if self.rank == 0 and env and env != "DYNAMIC"
                         and C.ak_trace_enabled() else None)


_rt = None
_init_lock = threading.Lock()
_atexit_registered = False

_HVD_LOG_LEVELS = {"trace": 5, "debug": 4, "info": 3, "warning": 2, "warn": 2, "error": 1,
                   "fatal": 1}


def _not_initialized():
    return ValueError("Horovod has not been initialized; use hvd.init().")


def _runtime():
    rt = _rt
    if rt is None:
        raise _not_initialized()
    return rt


def _leave_if_removed(status):
    """An elastic launcher that no longer wants this worker (its host left the job, or the
    job is at --max-np) answers its init with "leave": the worker ends with status 0, as
    Horovod's driver stops such workers."""
    removed = ctypes.c_int(0)
    try:
        asked = C.ak_elastic_status(None, None, ctypes.byref(removed))
    except ImportError:  # a library from before elastic jobs: never elastic
        return
    if asked == 0 and removed.value:
        sys.stderr.write(f"accelkit: {_ct.last_error()}; this worker exits\n")
        sys.stderr.flush()
        sys.exit(0)


def init(comm=None, process_sets=None):
    """Starts the runtime: joins the world described by the launcher (ak launch /
    horovodrun, torchrun, Open MPI, Slurm variables) and starts the background thread.
    A second call is a no-op. process_sets: ProcessSet objects to register now (or
    "dynamic", which accelkit always is)."""
    global _rt, _atexit_registered
    with _init_lock:
        if _rt is not None:
            return
        if comm is not None:
            try:
                ranks = sorted(int(r) for r in comm)
            except TypeError:
                raise NotImplementedError(
                    "accelkit: hvd.init(comm=<MPI communicator>) is not supported (accelkit "
                    "does not use MPI); launch the ranks you want with ak launch instead")
            world = int(os.environ.get("AK_WORLD_SIZE", os.environ.get("WORLD_SIZE", "0")) or 0)
            if world and ranks != list(range(world)):
                raise NotImplementedError(
                    "accelkit: hvd.init(comm=<subset of ranks>) is not supported; use "
                    "process sets (hvd.ProcessSet / hvd.add_process_set) instead")
        level = os.environ.get("HOROVOD_LOG_LEVEL", "").strip().lower()
        if level and not os.environ.get("AK_LOG") and level in _HVD_LOG_LEVELS:
            C.ak_log_set_level(_HVD_LOG_LEVELS[level])
        cfg = _ct.TrainConfig()
        train = ctypes.c_void_p()
        status = C.ak_train_init(ctypes.byref(cfg), ctypes.byref(train))
        if status != 0:
            _leave_if_removed(status)
            raise _error(status, "hvd.init: ")
        try:
            rt = _Runtime(train)
        except BaseException:
            C.ak_train_shutdown(train)
            raise
        _rt = rt
        global_process_set.ranks = list(range(rt.size))
        try:
            rt.homogeneous = _homogeneous(rt)
        except BaseException:
            _rt = None
            C.ak_train_shutdown(train)
            raise
        if not _atexit_registered:
            atexit.register(shutdown)
            _atexit_registered = True
    if process_sets is not None and process_sets != "dynamic":
        for ps in process_sets:
            add_process_set(ps)


def shutdown():
    """Stops the runtime; pending operations complete with an error. init() may be called
    again afterwards."""
    global _rt
    with _init_lock:
        rt = _rt
        if rt is None:
            return
        _rt = None
        if rt.timeline is not None:
            try:
                C.ak_trace_stop()
            except Exception:
                pass
        C.ak_train_shutdown(rt.train)
        with rt.lock:
            rt.pending.clear()
        for ps_id, ps in list(_process_sets.items()):
            if ps_id != 0:
                ps.invalidate()
                del _process_sets[ps_id]


def is_initialized():
    return _rt is not None


def size():
    """Number of ranks in the world."""
    return _runtime().size


def rank():
    """This process's rank in the world."""
    return _runtime().rank


def local_size():
    """Number of ranks on this host."""
    return _runtime().local_size


def local_rank():
    """This process's index among the ranks of its host."""
    return _runtime().local_rank


def cross_size():
    """Number of hosts."""
    return _runtime().cross_size


def cross_rank():
    """Index of this process's host (hosts numbered by their lowest rank)."""
    return _runtime().cross_rank


def _homogeneous(rt):
    """Whether every host runs the same number of ranks: one allgather of the local sizes,
    run by init() where every rank takes part anyway (as Horovod decides it at init), so
    that is_homogeneous() is a local query any rank may make alone."""
    if rt.size == 1:
        return True
    sizes = synchronize(_allgather_async(torch.tensor([rt.local_size], dtype=torch.int64),
                                         "allgather.accelkit.init.local_sizes", 0))
    return bool((sizes == sizes[0]).all())


def is_homogeneous():
    """True when every host runs the same number of ranks (decided in init(); a local
    query)."""
    return _runtime().homogeneous


# What this build is made of, answered truthfully: accelkit has its own TCP and shared
# memory transports, no MPI, Gloo, NCCL, DDL, oneCCL, CUDA or ROCm.
def mpi_threads_supported():
    """accelkit does not use MPI; its runtime is thread-safe (any thread may enqueue)."""
    _runtime()
    return False


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a Chrome-trace timeline to file_path (rank 0 writes; events reach the
    file at least once a second, and it is a complete JSON document after stop_timeline or
    shutdown). A timeline already running (HOROVOD_TIMELINE, an earlier call, or AK_TRACE:
    the process has one trace writer) is stopped first, which completes its file."""
    rt = _runtime()
    if rt.rank == 0:
        if C.ak_trace_enabled():
            rt.timeline = None
            _check(C.ak_trace_stop(), "start_timeline: stopping the running timeline: ")
        _check(C.ak_trace_start(os.fsencode(file_path)), "start_timeline: ")
        rt.timeline = file_path


def stop_timeline():
    """Stops the timeline (also one HOROVOD_TIMELINE started) and completes its file."""
    rt = _runtime()
    if rt.timeline is not None:
        rt.timeline = None
        _check(C.ak_trace_stop(), "stop_timeline: ")


def stats():
    """accelkit extension: the runtime's counters since init (ak_train_stats) as a dict."""
    rt = _runtime()
    s = _ct.TrainStats()
    _check(C.ak_train_get_stats(rt.train, ctypes.byref(s)))
    return {name: getattr(s, name) for name, _ in _ct.TrainStats._fields_}


# ---- plumbing ---------------------------------------------------------------------------

def _op_name(kind, name, ps_id):
    if name is not None:
        return f"{kind}.{name}"
    rt = _runtime()
    key = (kind, ps_id)
    with rt.lock:
        n = rt.counters.get(key, 0)
        rt.counters[key] = n + 1
    return f"{kind}.noname.{n}" if ps_id == 0 else f"{kind}.set{ps_id}.noname.{n}"


def _reduce_op(op, average=None, default=Average):
    if average is not None:
        if op is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of them.")
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning, stacklevel=3)
        op = Average if average else Sum
    if op is None:
        op = default
    if op not in _AK_REDUCE:
        raise ValueError(f"unknown reduction op {op!r}")
    return op


def _staged(tensor):
    """(contiguous CPU tensor sharing nothing with autograd, whether it is a copy)."""
    t = tensor.detach()
    if t.is_sparse:
        raise ValueError("sparse tensors go through hvd.sparse_allreduce_async")
    copied = False
    if t.device.type != "cpu":
        t = t.cpu()
        copied = True
    if not t.is_contiguous():
        t = t.contiguous()
        copied = True
    return t, copied


# Reductions of dtypes the comm layer has no kernels for, with Horovod's results: int16
# travels widened (int32; int64 for Product, whose partial products need the room), the
# scale factors are applied here as Horovod applies them to int16 (each input scaled in
# double and truncated, the sum wrapped to int16, then scaled by postscale, divided by the
# set size for Average); bool travels as uint8 0/1, where Sum/Average/Max are a logical OR
# (C's bool of a non-zero sum) and Min/Product a logical AND, exact for any number of ranks.
_BOOL_OP = {Sum: Max, Average: Max, Max: Max, Min: Min, Product: Min}
_INT16_RANGE = (-32768, 32767)


def _scale_int16(x, factor):
    """x * factor as Horovod scales an int16: in double, truncated (saturated to int16)."""
    if factor == 1.0:
        return x
    return torch.trunc(x.double() * factor).clamp(*_INT16_RANGE).to(x.dtype)


def _reducible(t, op, prescale, postscale, ps_id):
    """(tensor to send, op, prescale, postscale to run, restore) for t reduced with op;
    restore(result) turns the result into t's dtype (None: t's dtype has kernels)."""
    if t.dtype == torch.bool:
        if op == Adasum:
            raise TypeError("Adasum needs float32 or float64 tensors, not torch.bool")
        if prescale != 1.0 or postscale != 1.0:
            raise ValueError("prescale_factor/postscale_factor are not implemented for "
                             "torch.bool tensors (accelkit reduces bool as logical OR/AND)")
        return t.to(torch.uint8), _BOOL_OP[op], 1.0, 1.0, lambda out: out.to(torch.bool)
    if t.dtype != torch.int16:
        return t, op, prescale, postscale, None
    if op == Adasum:
        raise TypeError("Adasum needs float32 or float64 tensors, not torch.int16")
    wide = torch.int64 if op == Product else torch.int32
    factor = postscale / _set_size(ps_id) if op == Average else postscale

    def restore(out):
        return _scale_int16(out.to(torch.int16), factor)

    return (_scale_int16(t, prescale).to(wide), Sum if op == Average else op, 1.0, 1.0,
            restore)


def _wire(t, reduce):
    """(tensor as sent, ak dtype): unsupported dtypes travel as bytes for data movement."""
    d = _DTYPES.get(t.dtype)
    if d is not None:
        return t, d
    if reduce:
        raise TypeError(f"accelkit cannot reduce tensors of dtype {t.dtype} (supported: "
                        "float32, float16, bfloat16, float64, int8, uint8, int16, int32, "
                        "int64, bool)")
    # a trailing dimension of one element becomes the element's bytes: dim 0 keeps its rows
    return t.reshape(list(t.shape) + [1]).view(torch.uint8), _ct.AK_DTYPE_U8


def _fill_shape(op, shape, keep_dim0):
    shape = list(shape)
    if len(shape) > _ct.AK_TRAIN_MAX_DIMS:
        shape = [shape[0], math.prod(shape[1:])] if keep_dim0 else [math.prod(shape)]
    op.ndim = len(shape)
    for i, s in enumerate(shape):
        op.shape[i] = s


def _new_op(kind, name, ps_id, t, dtype, keep_dim0=False):
    op = _ct.TrainOp()
    op.kind = kind
    bname = name.encode()
    op.name = bname
    op.dtype = dtype
    _fill_shape(op, t.shape, keep_dim0)
    op.input = t.data_ptr() if t.numel() else None
    op.process_set = ps_id
    return op, bname


def _submit(ops, keep, finish, group=False):
    """Enqueues ops (one by one, or as one group) and registers the record. Returns the
    user-facing handle (the first runtime handle)."""
    rt = _runtime()
    handles = []
    if group:
        arr = (_ct.TrainOp * len(ops))(*ops)
        outs = (ctypes.c_int64 * len(ops))()
        keep.append(arr)
        status = C.ak_train_enqueue_group(rt.train, arr, len(ops), outs)
        if status != 0:
            raise _enqueue_error(status)
        # the runtime may give one handle for the group or one per op
        for h in outs:
            if h > 0 and h not in handles:
                handles.append(h)
    else:
        for op in ops:
            h = ctypes.c_int64()
            status = C.ak_train_enqueue(rt.train, ctypes.byref(op), ctypes.byref(h))
            if status != 0:
                err = _enqueue_error(status)
                if handles:  # already running: their buffers stay alive until shutdown
                    with rt.lock:
                        rt.pending[handles[0]] = _Record(handles, [keep, ops], lambda *a: None)
                raise err
            handles.append(h.value)
    keep.append(ops)
    rec = _Record(handles, keep, finish)
    with rt.lock:
        rt.pending[handles[0]] = rec
    return handles[0]


def _output(rt, h, dtype, shape=None):
    """Copies a completed op's runtime-allocated result into a new tensor."""
    data, ndim = ctypes.c_void_p(), ctypes.c_int()
    dims = (ctypes.c_int64 * _ct.AK_TRAIN_MAX_DIMS)()
    _check(C.ak_train_output(rt.train, h, ctypes.byref(data), ctypes.byref(ndim), dims))
    dims = [dims[i] for i in range(ndim.value)]
    out = torch.empty(dims if shape is None else shape, dtype=dtype)
    nbytes = out.numel() * out.element_size()
    if nbytes != math.prod(dims) * out.element_size():
        raise HorovodInternalError(f"runtime output has shape {dims}, expected {list(out.shape)}")
    if nbytes:
        ctypes.memmove(out.data_ptr(), data.value, nbytes)
    return out


def poll(handle):
    """True when the operation behind handle has completed (synchronize will not block)."""
    rt = _runtime()
    with rt.lock:
        rec = rt.pending.get(handle)
    if rec is None:
        raise ValueError(f"unknown or already synchronized handle {handle}")
    done = ctypes.c_int()
    for h in rec.handles:
        _check(C.ak_train_poll(rt.train, h, ctypes.byref(done)))
        if not done.value:
            return False
    return True


def synchronize(handle):
    """Waits for the operation and returns its result; raises HorovodInternalError with
    the runtime's message when it failed."""
    rt = _runtime()
    with rt.lock:
        rec = rt.pending.pop(handle, None)
    if rec is None:
        raise ValueError(f"unknown or already synchronized handle {handle}")
    err = None
    try:
        for h in rec.handles:
            status = C.ak_train_wait(rt.train, h)
            if status != 0 and err is None:
                err = _error(status)
        if err is not None:
            raise err
        return rec.finish(rt, rec.handles)
    finally:
        for h in rec.handles:
            C.ak_train_release(rt.train, h)


def _check_included(ps_id):
    if ps_id != 0:
        _ps_check_member(ps_id)


# ---- allreduce --------------------------------------------------------------------------

def _wire_compression(compression):
    """The runtime's wire compression for a Compressor, or None for a Python one."""
    if compression is None:
        return _ct.AK_COMPRESS_NONE, None
    cls = compression if isinstance(compression, type) else type(compression)
    wire = cls.__dict__.get("_ak_wire")
    if wire is None:
        return None, None
    return wire, getattr(compression, "_ak_dgc", None)


def _enqueue_allreduce(tensors, outputs, names, op, prescale, postscale, ps_id, wire, dgc,
                       group=False, updates=None, single=False):
    """Allreduce of tensors (in place where outputs[i] is True). updates[i]: (config,
    param, state1, state2, step) to run on the update thread after tensor i lands."""
    ops, keep, results = [], [], []
    for i, tensor in enumerate(tensors):
        src, copied = _staged(tensor)
        src, op_i, pre_i, post_i, restore = _reducible(src, op, prescale, postscale, ps_id)
        red = _AK_REDUCE[op_i]
        _, dtype = _wire(src, reduce=True)
        in_place = bool(outputs[i])
        out = src if in_place else torch.empty_like(src)
        o, bname = _new_op(_ct.AK_TRAIN_ALLREDUCE, names[i], ps_id, src, dtype)
        o.output = out.data_ptr() if out.numel() else None
        o.op = red
        o.prescale = float(pre_i)
        o.postscale = float(post_i)
        if wire and dtype == _ct.AK_DTYPE_F32:
            o.compression = wire
            if dgc is not None:
                o.dgc = ctypes.pointer(dgc)
                keep.append(dgc)
        if updates is not None and updates[i] is not None:
            cfg, param, s1, s2, step = updates[i]
            o.update = ctypes.pointer(cfg)
            o.param = param.data_ptr()
            o.state1 = s1.data_ptr() if s1 is not None else None
            o.state2 = s2.data_ptr() if s2 is not None else None
            o.step = int(step)
            keep += [cfg, param, s1, s2]
        ops.append(o)
        keep += [bname, src, out]
        results.append((tensor, out, in_place, copied or restore is not None, restore))

    def finish(rt, handles):
        outs = []
        for tensor, out, in_place, copied, restore in results:
            if restore is not None:
                out = restore(out)
            if in_place:
                if copied:
                    tensor.detach().copy_(out.view(tensor.shape))
                outs.append(tensor)
            else:
                outs.append(out.to(device=tensor.device, dtype=tensor.dtype))
        return outs[0] if single else outs

    return _submit(ops, keep, finish, group=group)


def _allreduce_async(tensor, in_place, name, op, prescale, postscale, process_set,
                     compression=None):
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    wire, dgc = _wire_compression(compression)
    return _enqueue_allreduce([tensor], [in_place], [_op_name("allreduce", name, ps_id)], op,
                              prescale, postscale, ps_id, wire or 0, dgc, single=True)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an out-of-place allreduce; synchronize(handle) returns the result."""
    op = _reduce_op(op, average)
    return _allreduce_async(tensor, False, name, op, prescale_factor, postscale_factor,
                            process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce; synchronize(handle) returns tensor, reduced."""
    op = _reduce_op(op, average)
    return _allreduce_async(tensor, True, name, op, prescale_factor, postscale_factor,
                            process_set)


class _AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set, compression):
        ctx.args = (op, prescale, postscale, process_set)
        return synchronize(_allreduce_async(tensor, False, name, op, prescale, postscale,
                                            process_set, compression))

    @staticmethod
    def backward(ctx, grad):
        op, prescale, postscale, process_set = ctx.args
        g = allreduce(grad, op=op, prescale_factor=prescale, postscale_factor=postscale,
                      process_set=process_set)
        return g, None, None, None, None, None, None


def _needs_grad(tensor):
    return torch.is_grad_enabled() and tensor.requires_grad


def allreduce(tensor, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces tensor over the ranks (default: average) and returns the result; the input
    is unchanged. Differentiable (the gradient is allreduced the same way)."""
    from .compression import Compression
    op = _reduce_op(op, average)
    compression = Compression.none if compression is None else compression
    if op == Adasum and compression is not Compression.none:
        raise ValueError("accelkit's Adasum reduces float32/float64 uncompressed; use "
                         "compression=hvd.Compression.none")
    wire, _ = _wire_compression(compression)
    if wire is None or (wire and tensor.dtype != torch.float32):
        t, ctx = compression.compress(tensor)
        r = allreduce(t, name=name, op=op, prescale_factor=prescale_factor,
                      postscale_factor=postscale_factor, process_set=process_set)
        return compression.decompress(r, ctx)
    if _needs_grad(tensor):
        return _AllreduceFn.apply(tensor, name, op, prescale_factor, postscale_factor,
                                  process_set, compression)
    return synchronize(_allreduce_async(tensor, False, name, op, prescale_factor,
                                        postscale_factor, process_set, compression))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _grouped_names(kind, name, ps_id, n):
    base = _op_name(kind, name, ps_id)
    return [f"{base}.{i}" for i in range(n)]


def _grouped_allreduce_async(tensors, in_place, name, op, prescale, postscale, process_set,
                             compression=None, names=None, updates=None):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped allreduce of an empty list")
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    wire, dgc = _wire_compression(compression)
    if names is None:
        names = _grouped_names("grouped_allreduce", name, ps_id, len(tensors))
    return _enqueue_allreduce(tensors, [in_place] * len(tensors), names, op, prescale,
                              postscale, ps_id, wire or 0, dgc, group=True, updates=updates)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts allreduces of a list of tensors negotiated and run together; synchronize
    returns the list of results."""
    op = _reduce_op(op, average)
    return _grouped_allreduce_async(tensors, False, name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    op = _reduce_op(op, average)
    return _grouped_allreduce_async(tensors, True, name, op, prescale_factor,
                                    postscale_factor, process_set)


class _GroupedAllreduceFn(torch.autograd.Function):
    """Differentiable grouped allreduce: the gradients are grouped-allreduced with the same
    op and scale factors (as Horovod defines it)."""

    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, compression, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(synchronize(_grouped_allreduce_async(
            tensors, False, name, op, prescale, postscale, process_set, compression)))

    @staticmethod
    def backward(ctx, *grads):
        op, prescale, postscale, process_set = ctx.args
        g = grouped_allreduce([x.contiguous() for x in grads], op=op,
                              prescale_factor=prescale, postscale_factor=postscale,
                              process_set=process_set)
        return (None,) * 6 + tuple(g)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Allreduces of a list of tensors negotiated and run together; returns the list of
    results. Differentiable when an input requires grad."""
    from .compression import Compression
    op = _reduce_op(op, average)
    compression = Compression.none if compression is None else compression
    tensors = list(tensors)
    wire, _ = _wire_compression(compression)
    if wire is not None and any(_needs_grad(t) for t in tensors):
        return list(_GroupedAllreduceFn.apply(name, op, prescale_factor, postscale_factor,
                                              process_set, compression, *tensors))
    if wire is None:
        pairs = [compression.compress(t) for t in tensors]
        outs = synchronize(_grouped_allreduce_async([p[0] for p in pairs], False, name, op,
                                                    prescale_factor, postscale_factor,
                                                    process_set))
        return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]
    return synchronize(_grouped_allreduce_async(tensors, False, name, op, prescale_factor,
                                                postscale_factor, process_set, compression))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Allreduce of a sparse COO tensor by allgathering indices and values; synchronize
    returns the coalesced sparse result (Average divides by the set size)."""
    op = _reduce_op(op, None)
    if op not in (Average, Sum):
        raise ValueError("sparse allreduce supports only Average and Sum")
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    t = tensor.detach().coalesce()
    base = _op_name("sparse_allreduce", name, ps_id)
    idx = t.indices().t().contiguous()
    vals = t.values().contiguous()
    h1 = _allgather_async(idx, base + ".indices", ps_id)
    h2 = _allgather_async(vals, base + ".values", ps_id)
    rt = _runtime()
    with rt.lock:
        r1, r2 = rt.pending.pop(h1), rt.pending.pop(h2)
    n = process_set.size() if isinstance(process_set, ProcessSet) else size()

    def finish(rt, handles):
        gi = r1.finish(rt, [handles[0]])
        gv = r2.finish(rt, [handles[1]])
        out = torch.sparse_coo_tensor(gi.t(), gv, t.shape).coalesce()
        if op == Average:
            out = out / n
        return out

    rec = _Record([r1.handles[0], r2.handles[0]], [r1.keep, r2.keep], finish)
    with rt.lock:
        rt.pending[h1] = rec
    return _SparseHandle(h1)


class _SparseHandle(int):
    """sparse_allreduce_async's handle: Horovod returns a function that waits and gives the
    result; this one is that function and also a handle synchronize() and poll() take."""

    def __call__(self):
        return synchronize(int(self))


# ---- allgather --------------------------------------------------------------------------

def _allgather_async(tensor, full_name, ps_id):
    src, _ = _staged(tensor)
    orig_dtype, orig_shape = src.dtype, list(src.shape)
    if src.dim() == 0:
        src = src.reshape(1)
        orig_shape = [1]
    w, dtype = _wire(src, reduce=False)
    op, bname = _new_op(_ct.AK_TRAIN_ALLGATHER, full_name, ps_id, w, dtype, keep_dim0=True)
    device = tensor.device

    def finish(rt, handles):
        out = _output(rt, handles[0], w.dtype)
        rows = out.shape[0] if out.dim() else 0
        if w.dtype != orig_dtype:
            out = out.view(orig_dtype)
        out = out.reshape([rows] + orig_shape[1:])
        return out.to(device) if device.type != "cpu" else out

    return _submit([op], [bname, src, w], finish)


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating tensor from every rank along dim 0 (dim 0 may differ)."""
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    return _allgather_async(tensor, _op_name("allgather", name, ps_id), ps_id)


class _AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim0 = tensor.shape[0] if tensor.dim() else 1
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=Average, process_set=ctx.process_set)
        dims = allgather(torch.tensor([ctx.dim0], dtype=torch.int64),
                         process_set=ctx.process_set)
        r = _set_rank(_ps_id(ctx.process_set))
        offset = int(dims[:r].sum())
        return reduced.narrow(0, offset, ctx.dim0), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenation of tensor from every rank along dim 0. Differentiable."""
    if _needs_grad(tensor):
        return _AllgatherFn.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    names = _grouped_names("grouped_allgather", name, ps_id, len(tensors))
    return _compose([_allgather_async(t, n, ps_id) for t, n in zip(tensors, names)])


class _GroupedAllgatherFn(torch.autograd.Function):
    """Differentiable grouped allgather: each gradient is averaged over the ranks (one
    grouped allreduce) and this rank's rows are returned, as for allgather."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dim0s = [t.shape[0] if t.dim() else 1 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        ps = ctx.process_set
        reduced = grouped_allreduce([g.contiguous() for g in grads], op=Average,
                                    process_set=ps)
        dims = allgather(torch.tensor([ctx.dim0s], dtype=torch.int64), process_set=ps)
        r = _set_rank(_ps_id(ps))
        offsets = dims[:r].sum(0).tolist() if r else [0] * len(grads)
        return (None, None) + tuple(g.narrow(0, int(o), d)
                                    for g, o, d in zip(reduced, offsets, ctx.dim0s))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor, negotiated together. Differentiable."""
    tensors = list(tensors)
    if any(_needs_grad(t) for t in tensors):
        return list(_GroupedAllgatherFn.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def _compose(user_handles):
    """One handle whose result is the list of the results of several records."""
    rt = _runtime()
    with rt.lock:
        recs = [rt.pending.pop(h) for h in user_handles]
    spans, handles = [], []
    for r in recs:
        spans.append((len(handles), len(handles) + len(r.handles)))
        handles += r.handles

    def finish(rt, hs):
        return [r.finish(rt, hs[a:b]) for r, (a, b) in zip(recs, spans)]

    rec = _Record(handles, [r.keep for r in recs], finish)
    with rt.lock:
        rt.pending[handles[0]] = rec
    return handles[0]


# ---- broadcast --------------------------------------------------------------------------

def _broadcast_async(tensor, root_rank, name, process_set, in_place):
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    src, copied = _staged(tensor)
    # the runtime broadcasts in place; an out-of-place broadcast works on a copy
    buf = src if in_place else src.clone()
    w, dtype = _wire(buf, reduce=False)
    op, bname = _new_op(_ct.AK_TRAIN_BROADCAST, _op_name("broadcast", name, ps_id), ps_id,
                        w, dtype)
    op.output = op.input
    op.root = _set_root(ps_id, root_rank)

    def finish(rt, handles):
        if in_place:
            if copied:
                tensor.detach().copy_(buf)
            return tensor
        return buf.to(tensor.device) if tensor.device.type != "cpu" else buf

    return _submit([op], [bname, src, buf, w], finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an out-of-place broadcast from root_rank; synchronize returns the result."""
    return _broadcast_async(tensor, root_rank, name, process_set, False)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast from root_rank."""
    return _broadcast_async(tensor, root_rank, name, process_set, True)


class _BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        # as Horovod: the gradient averaged over the set reaches the root (a world rank)
        reduced = allreduce(grad.contiguous(), op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            reduced = reduced * 0
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor on every rank (a new tensor). Differentiable."""
    if _needs_grad(tensor):
        return _BroadcastFn.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites tensor with root_rank's; returns tensor."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- alltoall ---------------------------------------------------------------------------

def _set_size(ps_id):
    if ps_id == 0:
        return size()
    return _process_sets[ps_id].size()


def _set_rank(ps_id):
    """This process's rank inside the process set (its world rank for the global set)."""
    if ps_id == 0:
        return rank()
    return _process_sets[ps_id].rank()


def _set_root(ps_id, root_rank):
    """The set-relative index of root_rank, a world rank as in Horovod (inside a process
    set too); a root outside the set is refused naming both."""
    root_rank = int(root_rank)
    if ps_id == 0:
        return root_rank
    ranks = _process_sets[ps_id].ranks
    if root_rank not in ranks:
        raise ValueError(f"broadcast root_rank {root_rank} is not a member of process set "
                         f"{ps_id} (ranks {ranks}); root_rank is a global rank")
    return ranks.index(root_rank)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall: rows of dim 0 go to each rank as `splits` says (even when None).
    synchronize returns (output, received_splits)."""
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    n = _set_size(ps_id)
    src, _ = _staged(tensor)
    if src.dim() == 0:
        raise ValueError("alltoall needs a tensor with at least one dimension")
    rows = src.shape[0]
    if splits is None:
        if rows % n:
            raise ValueError(f"alltoall without splits needs dim 0 ({rows}) divisible by the "
                             f"number of ranks ({n})")
        split_list = [rows // n] * n
    else:
        if isinstance(splits, torch.Tensor):
            split_list = [int(x) for x in splits.reshape(-1).tolist()]
        else:
            split_list = [int(x) for x in splits]
        if len(split_list) != n:
            raise ValueError(f"alltoall splits has {len(split_list)} entries, the process set "
                             f"has {n} ranks")
        if any(s < 0 for s in split_list) or sum(split_list) != rows:
            raise ValueError(f"alltoall splits {split_list} must be >= 0 and sum to dim 0 "
                             f"({rows})")
    orig_dtype, orig_shape = src.dtype, list(src.shape)
    w, dtype = _wire(src, reduce=False)
    c_splits = (ctypes.c_int64 * n)(*split_list)
    op, bname = _new_op(_ct.AK_TRAIN_ALLTOALL, _op_name("alltoall", name, ps_id), ps_id, w,
                        dtype, keep_dim0=True)
    op.splits = ctypes.cast(c_splits, ctypes.POINTER(ctypes.c_int64))
    device = tensor.device

    def finish(rt, handles):
        out = _output(rt, handles[0], w.dtype)
        ptr, cnt = ctypes.POINTER(ctypes.c_int64)(), ctypes.c_int()
        _check(C.ak_train_received_splits(rt.train, handles[0], ctypes.byref(ptr),
                                          ctypes.byref(cnt)))
        received = torch.tensor([ptr[i] for i in range(cnt.value)], dtype=torch.int64)
        total = int(received.sum())
        if w.dtype != orig_dtype:
            out = out.view(orig_dtype)
        out = out.reshape([total] + orig_shape[1:])
        if device.type != "cpu":
            out = out.to(device)
        return out, received

    return _submit([op], [bname, src, w, c_splits], finish)


class _AlltoallFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        out, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received, ctx.process_set = received, process_set
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _):
        g, _ = alltoall(grad, splits=ctx.received, process_set=ctx.process_set)
        return g, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters rows of dim 0 to the ranks (splits: rows per rank, even when None) and
    gathers what they send. Returns the output, and (output, received_splits) when
    splits were given. Differentiable."""
    if _needs_grad(tensor):
        out, received = _AlltoallFn.apply(tensor, splits, name, process_set)
    else:
        out, received = synchronize(alltoall_async(tensor, splits, name, process_set))
    return out if splits is None else (out, received)


# ---- reducescatter ----------------------------------------------------------------------

def _reducescatter_async(tensor, full_name, op, ps_id, prescale, postscale):
    if op == Adasum:
        raise NotImplementedError(
            "Reducescatter does not support Adasum (as in Horovod); use Sum or Average")
    src, _ = _staged(tensor)
    if src.dim() == 0:
        raise ValueError("reducescatter needs a tensor with at least one dimension")
    src, op, prescale, postscale, restore = _reducible(src, op, prescale, postscale, ps_id)
    _, dtype = _wire(src, reduce=True)
    o, bname = _new_op(_ct.AK_TRAIN_REDUCESCATTER, full_name, ps_id, src, dtype,
                       keep_dim0=True)
    o.op = _AK_REDUCE[op]
    o.prescale, o.postscale = float(prescale), float(postscale)
    shape1 = list(src.shape[1:])
    device = tensor.device

    def finish(rt, handles):
        out = _output(rt, handles[0], src.dtype)
        rows = out.shape[0] if out.dim() else 0
        out = out.reshape([rows] + shape1)
        if restore is not None:
            out = restore(out)
        return out.to(device) if device.type != "cpu" else out

    return _submit([o], [bname, src], finish)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reduce-scatter: the reduction over ranks, dim 0 split as evenly as possible
    (the first dim0 % size ranks get one row more); synchronize returns this rank's part."""
    op = _reduce_op(op, None)
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    return _reducescatter_async(tensor, _op_name("reducescatter", name, ps_id), op, ps_id,
                                prescale_factor, postscale_factor)


class _ReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale, postscale):
        ctx.op, ctx.process_set = op, process_set
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale,
                                               postscale))

    @staticmethod
    def backward(ctx, grad):
        g = allgather(grad, process_set=ctx.process_set)
        if ctx.op == Average:
            ps = ctx.process_set
            g = g / (ps.size() if isinstance(ps, ProcessSet) else size())
        return g, None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's rows of the reduction of tensor over the ranks. Differentiable."""
    from .compression import Compression
    compression = Compression.none if compression is None else compression
    op = _reduce_op(op, None)
    wire, _ = _wire_compression(compression)
    if wire != _ct.AK_COMPRESS_NONE:  # the runtime compresses allreduce only
        t, ctx = compression.compress(tensor)
        r = reducescatter(t, name=name, op=op, process_set=process_set,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor)
        return compression.decompress(r, ctx)
    if _needs_grad(tensor):
        return _ReducescatterFn.apply(tensor, name, op, process_set, prescale_factor,
                                      postscale_factor)
    return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                           postscale_factor))


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set, prescale_factor=1.0,
                                postscale_factor=1.0):
    op = _reduce_op(op, None)
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    names = _grouped_names("grouped_reducescatter", name, ps_id, len(tensors))
    return _compose([_reducescatter_async(t, n, op, ps_id, prescale_factor, postscale_factor)
                     for t, n in zip(tensors, names)])


class _GroupedReducescatterFn(torch.autograd.Function):
    """Differentiable grouped reducescatter: the gradients are allgathered (divided by the
    set size for Average), as for reducescatter."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale, postscale, *tensors):
        ctx.op, ctx.process_set = op, process_set
        return tuple(synchronize(grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale, postscale)))

    @staticmethod
    def backward(ctx, *grads):
        ps = ctx.process_set
        gathered = grouped_allgather([g.contiguous() for g in grads], process_set=ps)
        if ctx.op == Average:
            n = _set_size(_ps_id(ps))
            gathered = [g / n for g in gathered]
        return (None,) * 5 + tuple(gathered)


def grouped_reducescatter(tensors, name=None, compression=None, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each tensor, negotiated together. Differentiable."""
    op = _reduce_op(op, None)
    tensors = list(tensors)
    if any(_needs_grad(t) for t in tensors):
        return list(_GroupedReducescatterFn.apply(name, op, process_set, prescale_factor,
                                                  postscale_factor, *tensors))
    return synchronize(grouped_reducescatter_async(tensors, name, op, process_set,
                                                   prescale_factor, postscale_factor))


# ---- join, barrier ----------------------------------------------------------------------

def join(device=-1):
    """Declares that this rank has no more data: until every rank has joined it takes part
    in the others' allreduces with zeros. Returns the rank that joined last."""
    rt = _runtime()
    last = ctypes.c_int(-1)
    _check(C.ak_train_join(rt.train, 0, ctypes.byref(last)), "join: ")
    return last.value


def barrier(process_set=global_process_set):
    """Blocks until every rank of the process set has reached it."""
    rt = _runtime()
    ps_id = _ps_id(process_set)
    _check_included(ps_id)
    _check(C.ak_train_barrier(rt.train, ps_id), "barrier: ")
