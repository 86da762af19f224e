"""ctypes binding to libaccelkit's communicator (include/accelkit/comm.h) for the
torch.distributed backend: one ak_comm per process group, called with torch tensors.

Every call here is blocking and runs on the process group's worker thread (ctypes drops
the GIL during the call, so Python - the backward pass of DDP - keeps running). A failing
call raises RuntimeError naming the torch operation and libaccelkit's message.
"""
import ctypes

import torch

from ... import _lib

# ak_dtype (include/accelkit/kernels.h)
F32, F16, BF16, F64, I8, U8, I32, I64 = range(8)
# ak_reduce_op
SUM, PROD, MIN, MAX, AVG = range(5)

# torch dtypes libaccelkit reduces natively
NATIVE_DTYPES = {
    torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16, torch.float64: F64,
    torch.int8: I8, torch.uint8: U8, torch.int32: I32, torch.int64: I64,
}


class Config(ctypes.Structure):
    """struct ak_comm_config (field order and types as in comm.h)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("store_addr", ctypes.c_char_p),
        ("store_port", ctypes.c_int),
        ("host_id", ctypes.c_char_p),
        ("nstreams", ctypes.c_int),
        ("transport", ctypes.c_int),
        ("algo", ctypes.c_int),
        ("timeout_ms", ctypes.c_int),
        ("tuning_file", ctypes.c_char_p),
    ]


_vp = ctypes.c_void_p
_sz = ctypes.c_size_t
_int = ctypes.c_int
_szp = ctypes.POINTER(ctypes.c_size_t)

_SIGNATURES = {
    "ak_comm_init": ([ctypes.POINTER(Config), ctypes.POINTER(_vp)]),
    "ak_comm_allreduce": ([_vp, _vp, _vp, _sz, _int, _int]),
    "ak_comm_reduce": ([_vp, _vp, _vp, _sz, _int, _int, _int]),
    "ak_comm_broadcast": ([_vp, _vp, _sz, _int, _int]),
    "ak_comm_allgather": ([_vp, _vp, _vp, _sz, _int]),
    "ak_comm_allgatherv": ([_vp, _vp, _sz, _vp, _szp, _szp, _int]),
    "ak_comm_reduce_scatter": ([_vp, _vp, _vp, _sz, _int, _int]),
    "ak_comm_alltoall": ([_vp, _vp, _vp, _sz, _int]),
    "ak_comm_alltoallv": ([_vp, _vp, _szp, _szp, _vp, _szp, _szp, _int]),
    "ak_comm_gather": ([_vp, _vp, _vp, _sz, _int, _int]),
    "ak_comm_scatter": ([_vp, _vp, _vp, _sz, _int, _int]),
    "ak_comm_barrier": ([_vp]),
    "ak_comm_send": ([_vp, _vp, _sz, _int, _int]),
    "ak_comm_recv": ([_vp, _vp, _sz, _int, _int]),
}

_C = {}


def _fn(name):
    fn = _C.get(name)
    if fn is None:
        fn = getattr(_lib.lib, name)
        fn.argtypes, fn.restype = _SIGNATURES[name], ctypes.c_int
        _C[name] = fn
    return fn


def _free():
    fn = _lib.lib.ak_comm_free
    fn.argtypes, fn.restype = [_vp], None
    return fn


def error_text(status):
    _lib.lib.ak_last_error.restype = ctypes.c_char_p
    _lib.lib.ak_status_str.restype = ctypes.c_char_p
    _lib.lib.ak_status_str.argtypes = [ctypes.c_int]
    detail = (_lib.lib.ak_last_error() or b"").decode(errors="replace")
    name = _lib.lib.ak_status_str(status).decode()
    return f"{name}: {detail}" if detail else name


def _sizes(values):
    return (ctypes.c_size_t * len(values))(*values)


class Comm:
    """One libaccelkit communicator. Calls take contiguous CPU tensors (the process group
    checks and stages them) and raise RuntimeError("accelkit <op>: ...") on failure."""

    def __init__(self, rank, size, addr, port, timeout_ms):
        cfg = Config(ctypes.sizeof(Config), rank, size, addr.encode(), port, None, 0, 0, 0,
                     timeout_ms, None)
        self._ptr = _vp()
        st = _fn("ak_comm_init")(ctypes.byref(cfg), ctypes.byref(self._ptr))
        if st != 0:
            raise RuntimeError(f"accelkit init_process_group: {error_text(st)}")

    def close(self):
        if self._ptr:
            _free()(self._ptr)
            self._ptr = _vp()

    def _call(self, what, name, *args):
        if not self._ptr:
            raise RuntimeError(f"accelkit {what}: the process group was shut down")
        st = _fn(name)(self._ptr, *args)
        if st != 0:
            raise RuntimeError(f"accelkit {what}: {error_text(st)}")

    # reductions take the tensor's native dtype; data movement goes as bytes
    def allreduce(self, what, t, op):
        self._call(what, "ak_comm_allreduce", t.data_ptr(), t.data_ptr(), t.numel(),
                   NATIVE_DTYPES[t.dtype], op)

    def reduce(self, what, t, op, root):
        self._call(what, "ak_comm_reduce", t.data_ptr(), t.data_ptr(), t.numel(),
                   NATIVE_DTYPES[t.dtype], op, root)

    def reduce_scatter(self, what, inp, out, op):
        self._call(what, "ak_comm_reduce_scatter", inp.data_ptr(), out.data_ptr(), out.numel(),
                   NATIVE_DTYPES[out.dtype], op)

    def broadcast(self, what, t, root):
        self._call(what, "ak_comm_broadcast", t.data_ptr(), _nbytes(t), U8, root)

    def allgather(self, what, inp, out):
        self._call(what, "ak_comm_allgather", inp.data_ptr(), out.data_ptr(), _nbytes(inp), U8)

    def allgatherv(self, what, inp, out, counts, displs):
        self._call(what, "ak_comm_allgatherv", inp.data_ptr(), _nbytes(inp), out.data_ptr(),
                   _sizes(counts), _sizes(displs), U8)

    def alltoallv(self, what, inp, scounts, sdispls, out, rcounts, rdispls):
        self._call(what, "ak_comm_alltoallv", inp.data_ptr(), _sizes(scounts), _sizes(sdispls),
                   out.data_ptr(), _sizes(rcounts), _sizes(rdispls), U8)

    def gather(self, what, inp, out, root):
        self._call(what, "ak_comm_gather", inp.data_ptr(), out.data_ptr() if out is not None else None,
                   _nbytes(inp), U8, root)

    def scatter(self, what, inp, out, root):
        self._call(what, "ak_comm_scatter", inp.data_ptr() if inp is not None else None,
                   out.data_ptr(), _nbytes(out), U8, root)

    def barrier(self, what):
        self._call(what, "ak_comm_barrier")

    def send(self, what, t, peer):
        self._call(what, "ak_comm_send", t.data_ptr(), _nbytes(t), U8, peer)

    def recv(self, what, t, peer):
        self._call(what, "ak_comm_recv", t.data_ptr(), _nbytes(t), U8, peer)


def _nbytes(t):
    return t.numel() * t.element_size()
