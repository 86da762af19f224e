"""ctypes mirror of include/accelkit/train.h (the training runtime behind accelkit.torch).

Structures keep the C field order and types exactly; struct_size is ctypes.sizeof, so the
library can tell which version of a struct it was given. Functions are declared lazily
(declare()) so that importing accelkit.torch works against a library built without the
training runtime; hvd.init() then fails with a clear message instead.
"""
import ctypes

from .. import _lib

# ---- enums (values as in the C headers) -------------------------------------------------

# ak_dtype (include/accelkit/kernels.h)
AK_DTYPE_F32, AK_DTYPE_F16, AK_DTYPE_BF16, AK_DTYPE_F64 = 0, 1, 2, 3
AK_DTYPE_I8, AK_DTYPE_U8, AK_DTYPE_I32, AK_DTYPE_I64 = 4, 5, 6, 7

# ak_reduce_op
AK_REDUCE_SUM, AK_REDUCE_PROD, AK_REDUCE_MIN, AK_REDUCE_MAX, AK_REDUCE_AVG = 0, 1, 2, 3, 4
AK_TRAIN_REDUCE_ADASUM = 64  # include/accelkit/train.h

# ak_status (include/accelkit/ak.h)
AK_OK = 0
AK_ERR_INVALID_ARG = 1
AK_ERR_UNSUPPORTED = 2
AK_ERR_NO_MEMORY = 3
AK_ERR_IO = 4
AK_ERR_REMOTE = 5
AK_ERR_TIMEOUT = 6
AK_ERR_MISMATCH = 7
AK_ERR_INTERNAL = 9

# ak_optim_kind
AK_OPTIM_SGD, AK_OPTIM_ADAM, AK_OPTIM_ADAMW, AK_OPTIM_LAMB = 0, 1, 2, 3

# ak_train_compression
AK_COMPRESS_NONE, AK_COMPRESS_FP16, AK_COMPRESS_BF16, AK_COMPRESS_DGC = 0, 1, 2, 3

# ak_train_op_kind
AK_TRAIN_ALLREDUCE = 0
AK_TRAIN_ALLGATHER = 1
AK_TRAIN_BROADCAST = 2
AK_TRAIN_ALLTOALL = 3
AK_TRAIN_REDUCESCATTER = 4
AK_TRAIN_BARRIER = 5
AK_TRAIN_JOIN = 6

AK_TRAIN_MAX_DIMS = 8


# ---- structures -------------------------------------------------------------------------

class OptimConfig(ctypes.Structure):
    """struct ak_optim_config."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kind", ctypes.c_int),
        ("lr", ctypes.c_double),
        ("weight_decay", ctypes.c_double),
        ("momentum", ctypes.c_double),
        ("dampening", ctypes.c_double),
        ("nesterov", ctypes.c_int),
        ("beta1", ctypes.c_double),
        ("beta2", ctypes.c_double),
        ("eps", ctypes.c_double),
        ("grad_scale", ctypes.c_double),
    ]

    def __init__(self, **kw):
        # AK_OPTIM_CONFIG_INIT
        super().__init__(ctypes.sizeof(OptimConfig), AK_OPTIM_SGD, 1e-3, 0.0, 0.0, 0.0, 0,
                         0.9, 0.999, 1e-8, 1.0)
        for k, v in kw.items():
            setattr(self, k, v)


class DgcConfig(ctypes.Structure):
    """struct ak_dgc_config."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("sparsity", ctypes.c_float),
        ("warmup_start_sparsity", ctypes.c_float),
        ("warmup_steps", ctypes.c_int),
        ("momentum", ctypes.c_float),
        ("nesterov", ctypes.c_int),
        ("clip_norm", ctypes.c_float),
        ("sample_ratio", ctypes.c_float),
    ]

    def __init__(self, **kw):
        # AK_DGC_CONFIG_INIT
        super().__init__(ctypes.sizeof(DgcConfig), 0.999, 0.75, 0, 0.9, 0, 0.0, 0.01)
        for k, v in kw.items():
            setattr(self, k, v)


class TrainOp(ctypes.Structure):
    """struct ak_train_op. Every pointer must stay valid until the handle completes."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kind", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * AK_TRAIN_MAX_DIMS),
        ("input", ctypes.c_void_p),
        ("output", ctypes.c_void_p),
        ("op", ctypes.c_int),
        ("prescale", ctypes.c_double),
        ("postscale", ctypes.c_double),
        ("root", ctypes.c_int),
        ("splits", ctypes.POINTER(ctypes.c_int64)),
        ("process_set", ctypes.c_int),
        ("compression", ctypes.c_int),
        ("dgc", ctypes.POINTER(DgcConfig)),
        ("update", ctypes.POINTER(OptimConfig)),
        ("param", ctypes.c_void_p),
        ("state1", ctypes.c_void_p),
        ("state2", ctypes.c_void_p),
        ("step", ctypes.c_int64),
    ]

    def __init__(self):
        # AK_TRAIN_OP_INIT
        super().__init__()
        self.struct_size = ctypes.sizeof(TrainOp)
        self.kind = AK_TRAIN_ALLREDUCE
        self.dtype = AK_DTYPE_F32
        self.op = AK_REDUCE_SUM
        self.prescale = 1.0
        self.postscale = 1.0
        self.compression = AK_COMPRESS_NONE


class TrainConfig(ctypes.Structure):
    """struct ak_train_config."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("comm", ctypes.c_void_p),
        ("cycle_time_ms", ctypes.c_double),
        ("fusion_threshold", ctypes.c_int64),
        ("cache_capacity", ctypes.c_int),
        ("stall_check_s", ctypes.c_double),
        ("stall_shutdown_s", ctypes.c_double),
        ("timeline", ctypes.c_char_p),
        ("zero_blocks", ctypes.c_int),
        ("fusion_streams", ctypes.c_int),
        ("fusion_adaptive", ctypes.c_int),
    ]

    def __init__(self):
        # AK_TRAIN_CONFIG_INIT
        super().__init__(ctypes.sizeof(TrainConfig), None, 0.0, -1, -1, -1.0, -1.0, None, -1, 0, -1)


class TrainStats(ctypes.Structure):
    """struct ak_train_stats."""

    _fields_ = [(n, ctypes.c_uint64) for n in (
        "cycles", "negotiations", "cache_hits", "fused_buffers", "collectives",
        "negotiate_ns", "fusion_copy_ns", "comm_ns", "update_ns", "negotiate_cpu_ns",
        "zero_bytes_elided")]


# ---- functions --------------------------------------------------------------------------

_vp = ctypes.c_void_p
_ip = ctypes.POINTER(ctypes.c_int)
_i64p = ctypes.POINTER(ctypes.c_int64)
_fp = ctypes.c_void_p  # float * (pointers from tensor.data_ptr())

_SIGNATURES = {
    "ak_train_init": ([ctypes.POINTER(TrainConfig), ctypes.POINTER(_vp)], ctypes.c_int),
    "ak_train_shutdown": ([_vp], None),
    "ak_train_comm": ([_vp, ctypes.POINTER(_vp)], ctypes.c_int),
    "ak_train_enqueue": ([_vp, ctypes.POINTER(TrainOp), _i64p], ctypes.c_int),
    "ak_train_enqueue_group": ([_vp, ctypes.POINTER(TrainOp), ctypes.c_int, _i64p], ctypes.c_int),
    "ak_train_poll": ([_vp, ctypes.c_int64, _ip], ctypes.c_int),
    "ak_train_wait": ([_vp, ctypes.c_int64], ctypes.c_int),
    "ak_train_output": ([_vp, ctypes.c_int64, ctypes.POINTER(_vp), _ip, _i64p], ctypes.c_int),
    "ak_train_received_splits": ([_vp, ctypes.c_int64, ctypes.POINTER(_i64p), _ip], ctypes.c_int),
    "ak_train_release": ([_vp, ctypes.c_int64], ctypes.c_int),
    "ak_train_join": ([_vp, ctypes.c_int, _ip], ctypes.c_int),
    "ak_train_barrier": ([_vp, ctypes.c_int], ctypes.c_int),
    "ak_train_add_process_set": ([_vp, _ip, ctypes.c_int, _ip], ctypes.c_int),
    "ak_train_remove_process_set": ([_vp, ctypes.c_int], ctypes.c_int),
    "ak_train_process_set_info": ([_vp, ctypes.c_int, _ip, _ip], ctypes.c_int),
    "ak_train_get_stats": ([_vp, ctypes.POINTER(TrainStats)], ctypes.c_int),
    "ak_optim_step": ([ctypes.POINTER(OptimConfig), ctypes.c_int64, _fp, _fp, _fp, _fp,
                       ctypes.c_size_t], ctypes.c_int),
    "ak_comm_rank": ([_vp, _ip], ctypes.c_int),
    "ak_comm_size": ([_vp, _ip], ctypes.c_int),
    "ak_comm_local": ([_vp, _ip, _ip], ctypes.c_int),
    "ak_comm_hosts": ([_vp, _ip, _ip], ctypes.c_int),
    "ak_trace_start": ([ctypes.c_char_p], ctypes.c_int),
    "ak_trace_stop": ([], ctypes.c_int),
    "ak_trace_enabled": ([], ctypes.c_int),
    "ak_log_set_level": ([ctypes.c_int], ctypes.c_int),
    "ak_elastic_status": ([_ip, _ip, _ip], ctypes.c_int),
    "ak_elastic_hosts_changed": ([_ip, _ip], ctypes.c_int),
}


class _Functions:
    """Attribute access declares the C function on first use; a missing symbol raises
    ImportError naming it (a library built before the training runtime)."""

    def __getattr__(self, name):
        if name not in _SIGNATURES:
            raise AttributeError(name)
        try:
            fn = getattr(_lib.lib, name)
        except AttributeError:
            raise ImportError(
                f"libaccelkit at {_lib.lib._name} has no {name}: it was built without the "
                "training runtime (rebuild accelkit, or point AK_LIBRARY at a newer build)"
            ) from None
        fn.argtypes, fn.restype = _SIGNATURES[name]
        setattr(self, name, fn)
        return fn


C = _Functions()


def available(name="ak_train_init"):
    """True when the loaded library exports `name`."""
    return hasattr(_lib.lib, name)


def last_error():
    return _lib.ak_last_error().decode(errors="replace")


def status_name(status):
    return _lib.ak_status_str(status).decode()
