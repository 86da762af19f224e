"""ONNX inference with ONNX Runtime's Python interface, over libaccelkit (ctypes).

    import accelkit, numpy as np
    sess = accelkit.InferenceSession("resnet50.onnx", threads=2)
    [logits] = sess.run(None, {"input": np.random.rand(1, 3, 224, 224).astype(np.float32)})
    sess.get_inputs()[0].name, sess.get_inputs()[0].shape   # "input", [1, 3, 224, 224]

Outputs are copied into NumPy arrays owned by the caller (the session's own buffers are
reused by the next run). Inputs are passed without a copy when C-contiguous.
"""
import ctypes

import numpy as np

from ._lib import check, lib

# ak_elem_type codes (the ONNX TensorProto.DataType numbers) <-> NumPy dtypes
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
           7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
           13: np.uint64}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items()}
_ORT_TYPE = {1: "tensor(float)", 2: "tensor(uint8)", 3: "tensor(int8)", 4: "tensor(uint16)",
             5: "tensor(int16)", 6: "tensor(int32)", 7: "tensor(int64)", 9: "tensor(bool)",
             10: "tensor(float16)", 11: "tensor(double)", 12: "tensor(uint32)",
             13: "tensor(uint64)"}


class _Tensor(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("rank", ctypes.c_int),
                ("dims", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p)]


class _ValueInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int), ("type", ctypes.c_int),
                ("rank", ctypes.c_int), ("dims", ctypes.POINTER(ctypes.c_int64)),
                ("dim_names", ctypes.POINTER(ctypes.c_char_p))]


class _Options(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("profile", ctypes.c_int),
                ("fold_constants", ctypes.c_int), ("optimize", ctypes.c_int)]


class _Summary(ctypes.Structure):
    _fields_ = [("ir_version", ctypes.c_int64), ("model_version", ctypes.c_int64),
                ("producer_name", ctypes.c_char_p), ("producer_version", ctypes.c_char_p),
                ("graph_name", ctypes.c_char_p), ("num_opsets", ctypes.c_size_t),
                ("num_inputs", ctypes.c_size_t), ("num_outputs", ctypes.c_size_t),
                ("num_nodes", ctypes.c_size_t), ("num_subgraph_nodes", ctypes.c_size_t),
                ("num_op_types", ctypes.c_size_t), ("num_initializers", ctypes.c_size_t),
                ("num_params", ctypes.c_uint64), ("param_bytes", ctypes.c_uint64)]


def _declare(name, argtypes):
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return fn


# a library configured with -DAK_WITH_ONNX=OFF has no ak_session_* calls at all
if not hasattr(lib, "ak_session_create_from_file"):
    raise ImportError("accelkit.InferenceSession: this libaccelkit was built without the ONNX "
                      "engine (AK_WITH_ONNX=OFF); rebuild it with -DAK_WITH_ONNX=ON")

_vp, _pp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
_options_init = _declare("ak_session_options_init", [ctypes.POINTER(_Options)])
_create = _declare("ak_session_create_from_file", [ctypes.c_char_p, ctypes.POINTER(_Options), _pp])
_model = getattr(lib, "ak_session_model")
_model.argtypes, _model.restype = [_vp], _vp
_free = getattr(lib, "ak_session_free")
_free.argtypes, _free.restype = [_vp], None
_summary = _declare("ak_model_get_summary", [_vp, ctypes.POINTER(_Summary)])
_input = _declare("ak_model_input", [_vp, ctypes.c_size_t, ctypes.POINTER(_ValueInfo)])
_output = _declare("ak_model_output", [_vp, ctypes.c_size_t, ctypes.POINTER(_ValueInfo)])
_run = _declare("ak_session_run", [_vp, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(_Tensor),
                                   ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                   ctypes.POINTER(_Tensor), ctypes.c_size_t])


class NodeArg:
    """What ORT's get_inputs()/get_outputs() return: name, type ("tensor(float)") and
    shape (ints for fixed dims, the symbol's name or None for others)."""

    def __init__(self, info):
        self.name = info.name.decode()
        self.type = _ORT_TYPE.get(info.type, "tensor(undefined)")
        self.dtype = _DTYPES.get(info.type)
        if info.rank < 0:
            self.shape = None
        else:
            self.shape = [info.dims[i] if info.dims[i] >= 0 else
                          (info.dim_names[i].decode() if info.dim_names[i] else None)
                          for i in range(info.rank)]

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class InferenceSession:
    """An ONNX model prepared for running (onnxruntime.InferenceSession's interface)."""

    def __init__(self, path, threads=0, profile=False, fold_constants=True, optimize=True):
        opts = _Options()
        check(_options_init(ctypes.byref(opts)))
        opts.threads, opts.fold_constants = threads, int(fold_constants)
        opts.optimize = int(optimize)
        opts.profile = 1 if profile else -1
        self._s = ctypes.c_void_p()
        check(_create(str(path).encode(), ctypes.byref(opts), ctypes.byref(self._s)))
        m, s = _model(self._s), _Summary()
        check(_summary(m, ctypes.byref(s)))
        self._inputs = [self._info(_input, m, i) for i in range(s.num_inputs)]
        self._outputs = [self._info(_output, m, i) for i in range(s.num_outputs)]

    @staticmethod
    def _info(fn, model, i):
        info = _ValueInfo()
        check(fn(model, i, ctypes.byref(info)))
        return NodeArg(info)

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: input_feed maps input names to arrays; returns a list of arrays
        for output_names (None = every output, in the model's order)."""
        del run_options  # accepted for ORT compatibility
        names = list(output_names) if output_names else [o.name for o in self._outputs]
        # np.require keeps 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)
        arrays = [np.require(a, requirements="C") for a in input_feed.values()]
        c_inputs = (_Tensor * max(1, len(arrays)))()
        keep = []
        for t, a in zip(c_inputs, arrays):
            if a.dtype not in _CODES:
                raise TypeError(f"unsupported input dtype {a.dtype}")
            dims = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
            keep.append(dims)
            t.type, t.rank, t.dims, t.data = _CODES[a.dtype], a.ndim, dims, a.ctypes.data
        in_names = (ctypes.c_char_p * max(1, len(arrays)))(*[k.encode() for k in input_feed])
        out_names = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
        outs = (_Tensor * len(names))()
        check(_run(self._s, in_names, c_inputs, len(arrays), out_names, outs, len(names)))
        return [self._copy_out(t) for t in outs]

    @staticmethod
    def _copy_out(t):
        shape = tuple(t.dims[i] for i in range(t.rank))
        dtype = np.dtype(_DTYPES[t.type])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count == 0:
            return np.zeros(shape, dtype)
        buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(t.data)
        return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape).copy()

    def __del__(self):
        if getattr(self, "_s", None):
            _free(self._s)
            self._s = None
