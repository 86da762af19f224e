"""torch.distributed backend "accelkit": process groups whose collectives run on
libaccelkit's communicator (shared memory inside a host, TCP across hosts, algorithms
chosen by its cost model).

    import accelkit.torch.distributed          # registers the backend
    torch.distributed.init_process_group("accelkit")
    model = torch.nn.parallel.DistributedDataParallel(model)

Written in Python on torch's own ProcessGroup/Work pybind11 trampolines (torch 1.13 has
them: DDP's C++ Reducer calls back into these methods), not as a C++ extension; see
docs/training.md ("torch.distributed backend") for why and what is refused.

Each process group owns one libaccelkit communicator and one worker thread that runs its
operations in submission order (ctypes releases the GIL, so the backward pass keeps
computing while a bucket is reduced: DDP's overlap). Futures are completed on a second
thread so that a comm hook's `then` callback may itself wait for another operation.
Both threads are stopped and joined at interpreter exit (_shutdown_all), see there why.
"""
import atexit
import collections
import ctypes
import datetime
import os
import queue
import socket
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work

from . import _comm

BACKEND = "accelkit"
_R = dist.ReduceOp

# ---- launchers ------------------------------------------------------------------------


def _env_from_ak_launch():
    """`ak launch` names ranks with AK_* variables; torch's env:// rendezvous reads
    RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT. Fill those in (never overriding) so that
    init_process_group("accelkit") works unchanged under `ak launch`. torch's store takes
    the port after libaccelkit's own (AK_MASTER_PORT), which Horovod-API code may use."""
    env = os.environ
    if env.get("RANK") or not env.get("AK_RANK"):
        return
    env.setdefault("RANK", env["AK_RANK"])
    env.setdefault("WORLD_SIZE", env.get("AK_WORLD_SIZE", "1"))
    env.setdefault("LOCAL_RANK", env.get("AK_LOCAL_RANK", "0"))
    env.setdefault("LOCAL_WORLD_SIZE", env.get("AK_LOCAL_SIZE", "1"))
    env.setdefault("MASTER_ADDR", env.get("AK_MASTER_ADDR", "127.0.0.1"))
    env.setdefault("MASTER_PORT", str(int(env.get("AK_MASTER_PORT", "29500")) + 1))


def _keep_heap():
    """AK_TRAIN_KEEP_HEAP (default 1), as hvd.init() applies it (src/train/train_heap.c):
    glibc's malloc serves large blocks from the heap and keeps freed pages, so a step's
    gradient buckets and staging copies reuse the last step's pages instead of faulting in
    fresh ones. Skipped when the environment already configures malloc."""
    env = os.environ
    if env.get("AK_TRAIN_KEEP_HEAP", "1").strip() in ("0", ""):
        return False
    if any(env.get(v) for v in ("MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_",
                                "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")) or \
            "glibc.malloc." in env.get("GLIBC_TUNABLES", ""):
        return False
    try:
        libc = ctypes.CDLL(None)
        m_trim_threshold, m_top_pad, m_mmap_max = -1, -2, -4  # <malloc.h>
        return bool(libc.mallopt(m_mmap_max, 0) and libc.mallopt(m_trim_threshold, 2**31 - 1)
                    and libc.mallopt(m_top_pad, 64 << 20))
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return False


# ---- tensors --------------------------------------------------------------------------


def _check(what, t):
    """A dense CPU tensor, contiguous (non-contiguous ones are copied: the caller copies
    results back with _put)."""
    if not isinstance(t, torch.Tensor):
        raise RuntimeError(f"accelkit {what}: expected a tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise RuntimeError(f"accelkit {what}: tensors must be on the CPU, got {t.device}")
    if t.layout != torch.strided:
        raise RuntimeError(f"accelkit {what}: {t.layout} tensors are not supported")
    return t if t.is_contiguous() else t.contiguous()


def _put(dst, src):
    """Copies a staged result back when the staging made a copy."""
    if dst.data_ptr() != src.data_ptr() or dst.stride() != src.stride():
        dst.copy_(src.view(dst.shape))


def _one(what, tensors):
    if len(tensors) != 1:
        raise RuntimeError(f"accelkit {what}: takes one tensor per rank (CPU), got "
                           f"{len(tensors)}")
    return tensors[0]


def _op_name(op):
    for name in ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR", "PREMUL_SUM"):
        if op == getattr(_R, name):
            return name
    return str(op)


_NATIVE_OPS = {"SUM": _comm.SUM, "PRODUCT": _comm.PROD, "MIN": _comm.MIN, "MAX": _comm.MAX,
               "AVG": _comm.AVG}
# bool as uint8: sum is "or" (as torch's sum of bools is true when any is), product "and"
_BOOL_OPS = {"SUM": _comm.MAX, "PRODUCT": _comm.MIN, "MIN": _comm.MIN, "MAX": _comm.MAX}
_BITWISE = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}
_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)


def _reduction(what, dtype, op):
    """How to reduce `dtype` with `op`: ("native", ak_op, wire_dtype) where wire_dtype is
    the dtype libaccelkit reduces (int16 is widened to int32: sums and products wrap the
    same way once narrowed back), or ("bitwise", fold) for BAND/BOR/BXOR, which
    libaccelkit does not have: allgather and fold locally."""
    name = _op_name(op)
    if name in _BITWISE:
        if dtype not in _INT_DTYPES:
            raise RuntimeError(f"accelkit {what}: ReduceOp.{name} needs an integer or bool "
                               f"tensor, got {dtype}")
        return ("bitwise", _BITWISE[name], None)
    if name == "PREMUL_SUM":
        raise RuntimeError(f"accelkit {what}: ReduceOp.PREMUL_SUM is not supported (torch "
                           "1.13 keeps its factor inside the NCCL-only op object)")
    if name not in _NATIVE_OPS:
        raise RuntimeError(f"accelkit {what}: unknown reduce op {name}")
    if name == "AVG" and not dtype.is_floating_point:
        raise RuntimeError(f"accelkit {what}: ReduceOp.AVG needs a floating-point tensor, "
                           f"got {dtype}")
    if dtype == torch.bool:
        return ("native", _BOOL_OPS[name], torch.uint8)
    if dtype == torch.int16:
        return ("native", _NATIVE_OPS[name], torch.int32)
    if dtype not in _comm.NATIVE_DTYPES:
        raise RuntimeError(f"accelkit {what}: {dtype} cannot be reduced (float32/64, "
                           "float16, bfloat16, int8/16/32/64, uint8 and bool can)")
    return ("native", _NATIVE_OPS[name], dtype)


def _wire(t, dtype):
    """t as a contiguous tensor of the reducing dtype (a view when it already is)."""
    if t.dtype == dtype:
        return t
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    return t.to(dtype)


def _unwire(dst, w):
    if w.data_ptr() != dst.data_ptr():
        dst.copy_(w.to(dst.dtype) if dst.dtype != torch.bool else w.view(torch.bool))


# ---- work ----------------------------------------------------------------------------


class AccelkitWork(Work):
    """An operation of an accelkit process group: wait() blocks until it ran (raising its
    error), get_future() completes with its result tensors."""

    def __init__(self, what, result):
        super().__init__()
        self._what = what
        self._result = result
        self._done = threading.Event()
        self._exc = None
        self._future = torch.futures.Future()

    def _finish(self, exc):
        self._exc = exc
        self._done.set()

    def _complete_future(self):
        if self._exc is None:
            self._future.set_result(self._result)
        else:
            self._future.set_exception(self._exc)

    def wait(self, timeout=None):
        secs = None
        if isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0:
            secs = timeout.total_seconds()
        if not self._done.wait(secs):
            raise RuntimeError(f"accelkit {self._what}: wait() timed out after {secs} s")
        if self._exc is not None:
            raise self._exc
        return True

    def get_future(self):
        return self._future

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        return self._done.is_set() and self._exc is None

    def exception(self):
        return self._exc

    def result(self):
        return self._result

    def synchronize(self):
        pass

    def source_rank(self):
        return getattr(self, "_source", -1)


# torch 1.13's trampoline does not own the Python object: C++ callers (DDP's Reducer,
# _broadcast_coalesced) hold only the C++ part, and a Work whose Python object died would
# fall back to the base class' wait(), which never returns. Recent works are kept here.
_KEEP_WORKS = 8192


class ProcessGroupAccelkit(ProcessGroup):
    """A torch ProcessGroup over one libaccelkit communicator."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._store = store
        self._timeout = timeout
        self._p2p_stash = collections.defaultdict(collections.deque)
        self._mb_seq = 0
        self._comm = _comm.Comm(rank, size, *self._rendezvous(store, rank), _ms(timeout))
        _keep_heap()
        self._works = collections.deque(maxlen=_KEEP_WORKS)
        self._jobs = queue.Queue()
        self._done = queue.Queue()
        self._worker = threading.Thread(target=self._run_jobs, name="accelkit-pg", daemon=True)
        self._completer = threading.Thread(target=self._run_completions,
                                           name="accelkit-pg-futures", daemon=True)
        self._worker.start()
        self._completer.start()
        _LIVE_GROUPS.add(self)

    @staticmethod
    def _rendezvous(store, rank):
        """The address of this group's libaccelkit store: its rank 0 picks a free port on
        the interface toward MASTER_ADDR and publishes it in torch's store."""
        if rank == 0:
            master = os.environ.get("MASTER_ADDR", "127.0.0.1")
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                try:
                    s.connect((socket.gethostbyname(master), 9))
                    addr = s.getsockname()[0]
                except OSError:
                    addr = "127.0.0.1"
            with socket.socket() as s:
                s.bind((addr, 0))
                port = s.getsockname()[1]
            store.set("accelkit/store", f"{addr}:{port}")
        addr, port = store.get("accelkit/store").decode().rsplit(":", 1)
        return addr, int(port)

    def getBackendName(self):
        return BACKEND

    def name(self):
        return BACKEND

    # -- plumbing --

    def _submit(self, what, result, fn):
        work = AccelkitWork(what, result)
        self._works.append(work)
        self._jobs.put((work, fn))
        return work

    def _run_jobs(self):
        failed = None
        while True:
            work, fn = self._jobs.get()
            if work is None:
                break
            try:
                if failed is not None:
                    raise RuntimeError(f"accelkit {work._what}: the process group failed "
                                       f"earlier ({failed})")
                fn()
                work._finish(None)
            except Exception as e:  # surfaced by wait() / the future
                exc = e if isinstance(e, RuntimeError) else RuntimeError(
                    f"accelkit {work._what}: {e}")
                if failed is None and _comm_failed(exc):
                    failed = str(exc)
                work._finish(exc)
            self._done.put(work)

    def _run_completions(self):
        while True:
            work = self._done.get()
            if work is None:
                break
            work._complete_future()

    def shutdown(self, timeout_s=None):
        """Runs the queued operations, completes their futures, stops both threads and
        closes the communicator. With a timeout, a thread still busy after it is left
        running and the communicator stays open (it may still be in use)."""
        if self not in _LIVE_GROUPS:
            return
        _LIVE_GROUPS.discard(self)
        self._jobs.put((None, None))
        self._worker.join(timeout_s)
        self._done.put(None)  # after the worker's last completion: FIFO drains them first
        self._completer.join(timeout_s)
        if not self._worker.is_alive():
            self._comm.close()

    # -- reductions --

    def _allreduce_flat(self, what, t, op):
        """In-place allreduce of a contiguous tensor."""
        kind, how, wire = _reduction(what, t.dtype, op)
        if kind == "bitwise":
            gathered = torch.empty((self.size(),) + tuple(t.shape), dtype=t.dtype)
            self._comm.allgather(what, t, gathered)
            acc = gathered[0].clone()
            for r in range(1, self.size()):
                acc = how(acc, gathered[r])
            t.copy_(acc)
            return
        w = _wire(t, wire)
        self._comm.allreduce(what, w, how)
        _unwire(t, w)

    def allreduce(self, tensors, opts=None):
        what = "allreduce"
        op = opts.reduceOp if opts is not None else _R.SUM
        t = _one(what, tensors)
        staged = _check(what, t)
        _reduction(what, t.dtype, op)  # refuse before queueing

        def run():
            self._allreduce_flat(what, staged, op)
            _put(t, staged)
        return self._submit(what, tensors, run)

    def allreduce_coalesced(self, tensors, opts=None):
        what = "allreduce_coalesced"
        op = opts.reduceOp if opts is not None else _R.SUM
        for t in tensors:
            _check(what, t)
            _reduction(what, t.dtype, op)
        if len({t.dtype for t in tensors}) > 1:
            raise RuntimeError(f"accelkit {what}: all tensors must have one dtype, got "
                               f"{sorted({str(t.dtype) for t in tensors})}")

        def run():
            flat = torch.cat([t.reshape(-1) for t in tensors])
            self._allreduce_flat(what, flat, op)
            off = 0
            for t in tensors:
                t.copy_(flat[off:off + t.numel()].view(t.shape))
                off += t.numel()
        return self._submit(what, tensors, run)

    def reduce(self, tensors, opts=None):
        what = "reduce"
        op, root = opts.reduceOp, opts.rootRank
        t = _one(what, tensors)
        staged = _check(what, t)
        kind, how, wire = _reduction(what, t.dtype, op)

        def run():
            if kind == "native" and wire == t.dtype:
                self._comm.reduce(what, staged, how, root)
                if self.rank() == root:
                    _put(t, staged)
            else:
                tmp = staged.clone()
                self._allreduce_flat(what, tmp, op)
                if self.rank() == root:
                    t.copy_(tmp)
        return self._submit(what, tensors, run)

    def _reduce_scatter_flat(self, what, inp, out, op):
        kind, how, wire = _reduction(what, out.dtype, op)
        if kind == "native" and wire == out.dtype:
            self._comm.reduce_scatter(what, inp, out, how)
        else:
            tmp = inp.clone()
            self._allreduce_flat(what, tmp, op)
            n = out.numel()
            out.copy_(tmp[self.rank() * n:(self.rank() + 1) * n].view(out.shape))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        what = "reduce_scatter"
        op = opts.reduceOp if opts is not None else _R.SUM
        out = _one(what, output_tensors)
        inputs = _one(what, input_tensors)
        if len(inputs) != self.size():
            raise RuntimeError(f"accelkit {what}: needs {self.size()} input tensors, got "
                               f"{len(inputs)}")
        for x in inputs:
            _check(what, x)
            if x.numel() != out.numel() or x.dtype != out.dtype:
                raise RuntimeError(f"accelkit {what}: every input must match the output "
                                   f"({out.numel()} x {out.dtype}), got {x.numel()} x {x.dtype}")
        _reduction(what, out.dtype, op)

        def run():
            inp = torch.cat([x.reshape(-1) for x in inputs])
            staged = _check(what, out)
            self._reduce_scatter_flat(what, inp, staged, op)
            _put(out, staged)
        return self._submit(what, output_tensors, run)

    def _reduce_scatter_base(self, output, input, opts=None):
        what = "_reduce_scatter_base"
        op = opts.reduceOp if opts is not None else _R.SUM
        staged_in, staged_out = _check(what, input), _check(what, output)
        if input.numel() != output.numel() * self.size() or input.dtype != output.dtype:
            raise RuntimeError(f"accelkit {what}: input must hold world size x output "
                               f"elements of one dtype ({input.numel()} {input.dtype} vs "
                               f"{output.numel()} {output.dtype} x {self.size()})")
        _reduction(what, output.dtype, op)

        def run():
            self._reduce_scatter_flat(what, staged_in.reshape(-1), staged_out, op)
            _put(output, staged_out)
        return self._submit(what, [output], run)

    # -- data movement --

    def broadcast(self, tensors, opts=None):
        what = "broadcast"
        root = opts.rootRank if opts is not None else 0
        t = _one(what, tensors)
        staged = _check(what, t)

        def run():
            self._comm.broadcast(what, staged, root)
            _put(t, staged)
        return self._submit(what, tensors, run)

    def _allgather_into(self, what, inp, outs):
        """Gathers inp from every rank into the list outs (one tensor per rank)."""
        if len(outs) != self.size():
            raise RuntimeError(f"accelkit {what}: needs {self.size()} output tensors, got "
                               f"{len(outs)}")
        sizes = [o.numel() * o.element_size() for o in outs]
        if sizes[self.rank()] != inp.numel() * inp.element_size():
            raise RuntimeError(f"accelkit {what}: this rank's output ({sizes[self.rank()]} "
                               f"bytes) does not match its input ({inp.numel() * inp.element_size()} bytes)")
        flat = torch.empty(sum(sizes), dtype=torch.uint8)
        if len(set(sizes)) == 1:
            self._comm.allgather(what, inp, flat)
        else:
            displs = [sum(sizes[:r]) for r in range(len(sizes))]
            self._comm.allgatherv(what, inp, flat, sizes, displs)
        off = 0
        for o, n in zip(outs, sizes):
            o.copy_(flat[off:off + n].view(o.dtype).view(o.shape))
            off += n

    def allgather(self, output_tensors, input_tensors, opts=None):
        what = "allgather"
        inp = _check(what, _one(what, input_tensors))
        outs = _one(what, output_tensors)
        for o in outs:
            _check(what, o)
            if o.dtype != inp.dtype:
                raise RuntimeError(f"accelkit {what}: output dtype {o.dtype} differs from "
                                   f"the input's {inp.dtype}")
        return self._submit(what, output_tensors, lambda: self._allgather_into(what, inp, outs))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        what = "allgather_coalesced"
        inputs = [_check(what, t) for t in input_list]
        for outs in output_lists:
            if len(outs) != len(inputs):
                raise RuntimeError(f"accelkit {what}: each output list needs "
                                   f"{len(inputs)} tensors, got {len(outs)}")

        def run():
            for i, inp in enumerate(inputs):
                self._allgather_into(what, inp, [outs[i] for outs in output_lists])
        return self._submit(what, output_lists, run)

    def _allgather_base(self, output, input, opts=None):
        what = "_allgather_base"
        staged_in, staged_out = _check(what, input), _check(what, output)
        if output.numel() != input.numel() * self.size() or input.dtype != output.dtype:
            raise RuntimeError(f"accelkit {what}: output must hold world size x input "
                               f"elements of one dtype ({output.numel()} {output.dtype} vs "
                               f"{input.numel()} {input.dtype} x {self.size()})")

        def run():
            self._comm.allgather(what, staged_in, staged_out)
            _put(output, staged_out)
        return self._submit(what, [output], run)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        what = "alltoall_base"
        staged_in, staged_out = _check(what, input), _check(what, output)
        n = self.size()

        def layout(t, splits, which):
            rows = t.shape[0] if t.dim() > 0 else 1
            row_bytes = (t.numel() // rows if rows else 0) * t.element_size()
            if not splits:
                if rows % n:
                    raise RuntimeError(f"accelkit {what}: {which} dim 0 ({rows}) is not "
                                       f"divisible by the world size {n}")
                splits = [rows // n] * n
            if len(splits) != n or sum(splits) != rows:
                raise RuntimeError(f"accelkit {what}: {which} split sizes {list(splits)} "
                                   f"must be {n} numbers summing to dim 0 ({rows})")
            counts = [s * row_bytes for s in splits]
            return counts, [sum(counts[:r]) for r in range(n)]
        sc, sd = layout(input, list(input_split_sizes), "input")
        rc, rd = layout(output, list(output_split_sizes), "output")
        if input.dtype != output.dtype:
            raise RuntimeError(f"accelkit {what}: input {input.dtype} and output "
                               f"{output.dtype} differ")

        def run():
            self._comm.alltoallv(what, staged_in, sc, sd, staged_out, rc, rd)
            _put(output, staged_out)
        return self._submit(what, [output], run)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        what = "alltoall"
        n = self.size()
        if len(output_tensors) != n or len(input_tensors) != n:
            raise RuntimeError(f"accelkit {what}: needs {n} input and {n} output tensors")
        ins = [_check(what, t) for t in input_tensors]
        for t in output_tensors:
            _check(what, t)

        def run():
            sc = [t.numel() * t.element_size() for t in ins]
            rc = [t.numel() * t.element_size() for t in output_tensors]
            send = torch.cat([t.reshape(-1).view(torch.uint8) for t in ins])
            recv = torch.empty(sum(rc), dtype=torch.uint8)
            self._comm.alltoallv(what, send, sc, [sum(sc[:r]) for r in range(n)],
                                 recv, rc, [sum(rc[:r]) for r in range(n)])
            off = 0
            for t, c in zip(output_tensors, rc):
                t.copy_(recv[off:off + c].view(t.dtype).view(t.shape))
                off += c
        return self._submit(what, output_tensors, run)

    def gather(self, output_tensors, input_tensors, opts=None):
        what = "gather"
        root = opts.rootRank
        inp = _check(what, _one(what, input_tensors))
        outs = None
        if self.rank() == root:
            outs = _one(what, output_tensors)
            if len(outs) != self.size():
                raise RuntimeError(f"accelkit {what}: the root needs {self.size()} output "
                                   f"tensors, got {len(outs)}")
            for o in outs:
                if o.numel() != inp.numel() or o.dtype != inp.dtype:
                    raise RuntimeError(f"accelkit {what}: outputs must match the input "
                                       f"({inp.numel()} x {inp.dtype})")

        def run():
            flat = torch.empty(inp.numel() * inp.element_size() * self.size(),
                               dtype=torch.uint8) if outs is not None else None
            self._comm.gather(what, inp, flat, root)
            if outs is not None:
                for r, o in enumerate(outs):
                    o.copy_(flat.view(inp.dtype).view(self.size(), -1)[r].view(o.shape))
        return self._submit(what, output_tensors, run)

    def scatter(self, output_tensors, input_tensors, opts=None):
        what = "scatter"
        root = opts.rootRank
        out = _one(what, output_tensors)
        staged = _check(what, out)
        ins = None
        if self.rank() == root:
            ins = _one(what, input_tensors)
            if len(ins) != self.size():
                raise RuntimeError(f"accelkit {what}: the root needs {self.size()} input "
                                   f"tensors, got {len(ins)}")
            for x in ins:
                if x.numel() != out.numel() or x.dtype != out.dtype:
                    raise RuntimeError(f"accelkit {what}: inputs must match the output "
                                       f"({out.numel()} x {out.dtype})")

        def run():
            flat = torch.cat([x.reshape(-1) for x in ins]) if ins is not None else None
            self._comm.scatter(what, flat, staged, root)
            _put(out, staged)
        return self._submit(what, output_tensors, run)

    def barrier(self, opts=None):
        what = "barrier"
        return self._submit(what, [], lambda: self._comm.barrier(what))

    # -- point to point: a header (tag, bytes) then the payload; a message whose tag is
    # not the one awaited is kept until a recv asks for it --

    def send(self, tensors, dst, tag=0):
        what = "send"
        t = _check(what, _one(what, tensors))

        def run():
            header = torch.tensor([int(tag), t.numel() * t.element_size()], dtype=torch.int64)
            self._comm.send(what, header, dst)
            self._comm.send(what, t, dst)
        return self._submit(what, tensors, run)

    def recv(self, tensors, src, tag=0):
        what = "recv"
        t = _one(what, tensors)
        staged = _check(what, t)
        nbytes = t.numel() * t.element_size()

        def run():
            stash = self._p2p_stash[(src, int(tag))]
            if stash:
                payload = stash.popleft()
            else:
                while True:
                    header = torch.empty(2, dtype=torch.int64)
                    self._comm.recv(what, header, src)
                    got_tag, size = int(header[0]), int(header[1])
                    payload = torch.empty(size, dtype=torch.uint8)
                    self._comm.recv(what, payload, src)
                    if got_tag == int(tag):
                        break
                    self._p2p_stash[(src, got_tag)].append(payload)
            if payload.numel() != nbytes:
                raise RuntimeError(f"accelkit {what}: rank {src} sent {payload.numel()} bytes "
                                   f"with tag {tag}, the receiving tensor holds {nbytes}")
            staged.reshape(-1).view(torch.uint8).copy_(payload)
            _put(t, staged)
        work = self._submit(what, tensors, run)
        work._source = src
        return work

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("accelkit recv: receiving from any source is not supported; "
                           "name the source rank")

    # -- monitored barrier: through torch's store, so the rank(s) that did not arrive are
    # named --

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        what = "monitored_barrier"
        timeout = timeout or self._timeout
        self._mb_seq += 1
        key = f"accelkit/mb/{self._mb_seq}"
        self._store.set(f"{key}/{self.rank()}", b"1")
        if self.rank() != 0:
            try:
                self._store.wait([f"{key}/done"], timeout)
            except RuntimeError as e:
                raise RuntimeError(f"accelkit {what}: rank 0 did not release the barrier "
                                   f"within {timeout}: {e}") from None
            return
        missing = []
        for r in range(1, self.size()):
            try:
                self._store.wait([f"{key}/{r}"], timeout if not missing else
                                 datetime.timedelta(milliseconds=1))
            except RuntimeError:
                missing.append(r)
                if not wait_all_ranks:
                    break
        if missing:
            raise RuntimeError(f"accelkit {what}: rank(s) {missing} did not join within "
                               f"{timeout}")
        self._store.set(f"{key}/done", b"1")


# Groups whose threads run. torch 1.13's destroy_process_group() only forgets a group, so
# they are stopped at exit: the completer thread completes futures through torch's C++
# Future.set_result, which releases the GIL and takes it back on return. Were the
# interpreter already finalizing at that moment (the main thread's wait() returns as soon
# as the operation ran, and the script may exit right then), taking the GIL back ends the
# thread with pthread_exit, whose forced unwind through torch's noexcept C++ frames is
# std::terminate: "terminate called without an active exception", exit status 134.
# atexit handlers run before finalization starts, so joining the threads here closes that.
_LIVE_GROUPS = set()
_EXIT_JOIN_S = 10.0  # per thread; an operation still blocked after that is abandoned


def _shutdown_all():
    for pg in list(_LIVE_GROUPS):
        pg.shutdown(_EXIT_JOIN_S)


atexit.register(_shutdown_all)


def _comm_failed(exc):
    """libaccelkit communicators that failed stay failed; remember it so later operations
    say so instead of waiting for their own timeout."""
    text = str(exc)
    return any(s in text for s in ("AK_ERR_TIMEOUT", "AK_ERR_REMOTE", "timeout", "lost",
                                   "timed out"))


def _ms(timeout):
    if isinstance(timeout, datetime.timedelta):
        ms = int(timeout.total_seconds() * 1000)
        return ms if 0 < ms < 2**31 else 0
    return 0


def _create(store, rank, size, timeout):
    return ProcessGroupAccelkit(store, rank, size, timeout)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch 1.13's dist.monitored_barrier refuses every backend but gloo; this is the
    same call for accelkit groups (group None: the default group)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


def _register():
    if BACKEND.upper() not in getattr(dist.Backend, "_plugins", {}):
        dist.Backend.register_backend(BACKEND, _create)


_env_from_ak_launch()
_register()

__all__ = ["ProcessGroupAccelkit", "AccelkitWork", "monitored_barrier", "BACKEND"]
