"""ctypes binding of libaccelkit's ONNX sessions (include/accelkit/infer.h), under the
onnxruntime-compatible API of accelkit.onnxruntime:

    import accelkit.onnxruntime as ort                  # or: import accelkit
    sess = ort.InferenceSession("resnet50.onnx")         # accelkit.InferenceSession(path, threads=2)
    [logits] = sess.run(None, {"input": np.random.rand(1, 3, 224, 224).astype(np.float32)})

This module holds the native layer only: NativeSession (create from a path or bytes, run
with outputs copied or written into caller buffers, metadata, profiling) and the type
tables. Inputs are passed without a copy when C-contiguous; outputs of `run` are copied
into NumPy arrays owned by the caller (the session's own buffers are reused by the next
run), outputs of `run_into` are written by the engine straight into the caller's arrays.
"""
import ctypes
import threading

import numpy as np

from ._lib import check, lib

# ak_elem_type codes (the ONNX TensorProto.DataType numbers) <-> NumPy dtypes
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
          7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
          13: np.uint64}
CODES = {np.dtype(v): k for k, v in DTYPES.items()}
# ONNX type names as onnxruntime spells them, for every code a model may declare
ORT_TYPE = {1: "tensor(float)", 2: "tensor(uint8)", 3: "tensor(int8)", 4: "tensor(uint16)",
            5: "tensor(int16)", 6: "tensor(int32)", 7: "tensor(int64)", 8: "tensor(string)",
            9: "tensor(bool)", 10: "tensor(float16)", 11: "tensor(double)",
            12: "tensor(uint32)", 13: "tensor(uint64)", 14: "tensor(complex64)",
            15: "tensor(complex128)", 16: "tensor(bfloat16)", 17: "tensor(float8e4m3fn)",
            18: "tensor(float8e4m3fnuz)", 19: "tensor(float8e5m2)", 20: "tensor(float8e5m2fnuz)"}
_KIND_TYPE = {1: "seq", 2: "map", 3: "optional", 4: "sparse_tensor"}


class _Tensor(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("rank", ctypes.c_int),
                ("dims", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p)]


class _String(ctypes.Structure):  # ak_string: one element of a STRING tensor
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_size_t)]  # not NUL-terminated


STRING = 8  # AK_ELEM_STRING


def is_string_array(a):
    """NumPy str, bytes and object arrays travel as STRING tensors (UTF-8)."""
    return a.dtype.kind in "USO"


def _string_elements(a):
    """ak_string array of a's elements (str encoded as UTF-8, bytes as they are), in C
    order; the returned array keeps the encoded bytes alive."""
    flat = a.reshape(-1)
    c = (_String * max(1, flat.size))()
    keep = []
    for i, v in enumerate(flat):
        if isinstance(v, (str, np.str_)):
            v = v.encode("utf-8", "surrogateescape")
        elif not isinstance(v, (bytes, np.bytes_)):
            raise TypeError(f"string tensor element {i} is {type(v).__name__}, not str or bytes")
        buf = ctypes.create_string_buffer(bytes(v), max(1, len(v)))
        keep.append(buf)
        c[i].data, c[i].len = ctypes.addressof(buf), len(v)
    return c, keep


def _string_array(t, shape, count):
    """A NumPy object array of str (bytes where an element is not UTF-8) from a STRING
    ak_tensor, as onnxruntime returns string outputs."""
    els = ctypes.cast(t.data, ctypes.POINTER(_String))
    out = np.empty(count, dtype=object)
    for i in range(count):
        e = els[i]
        raw = ctypes.string_at(e.data, e.len) if e.len else b""
        try:
            out[i] = raw.decode("utf-8")
        except UnicodeDecodeError:
            out[i] = raw
    return out.reshape(shape)


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


class _Metadata(ctypes.Structure):
    _fields_ = [("domain", ctypes.c_char_p), ("description", ctypes.c_char_p),
                ("graph_description", ctypes.c_char_p), ("num_props", ctypes.c_size_t),
                ("num_overridable", ctypes.c_size_t)]


def _declare(name, argtypes, restype=ctypes.c_int):
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = argtypes, restype
    return fn


# a library configured with -DAK_WITH_ONNX=OFF has no ak_session_* calls at all
if not hasattr(lib, "ak_session_create_from_file"):
    raise ImportError("accelkit.InferenceSession: this libaccelkit was built without the ONNX "
                      "engine (AK_WITH_ONNX=OFF); rebuild it with -DAK_WITH_ONNX=ON")

_vp, _pp, _cpp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_char_p)
_options_init = _declare("ak_session_options_init", [ctypes.POINTER(_Options)])
_load_file = _declare("ak_onnx_load_file", [ctypes.c_char_p, _pp])
_load_bytes = _declare("ak_onnx_load_bytes", [ctypes.c_char_p, ctypes.c_size_t,
                                              ctypes.c_char_p, _pp])
_model_free = _declare("ak_model_free", [_vp], None)
_create = _declare("ak_session_create", [_vp, ctypes.POINTER(_Options), _pp])
_free = _declare("ak_session_free", [_vp], None)
_summary = _declare("ak_model_get_summary", [_vp, ctypes.POINTER(_Summary)])
_metadata = _declare("ak_model_get_metadata", [_vp, ctypes.POINTER(_Metadata)])
_metadata_prop = _declare("ak_model_metadata_prop", [_vp, ctypes.c_size_t, _cpp, _cpp])
_input = _declare("ak_model_input", [_vp, ctypes.c_size_t, ctypes.POINTER(_ValueInfo)])
_output = _declare("ak_model_output", [_vp, ctypes.c_size_t, ctypes.POINTER(_ValueInfo)])
_overridable = _declare("ak_model_overridable", [_vp, ctypes.c_size_t,
                                                 ctypes.POINTER(_ValueInfo)])
_RUN_ARGS = [_vp, _cpp, ctypes.POINTER(_Tensor), ctypes.c_size_t, _cpp,
             ctypes.POINTER(_Tensor), ctypes.c_size_t]
_run = _declare("ak_session_run", _RUN_ARGS)
_run_into = _declare("ak_session_run_into", _RUN_ARGS)
_end_profiling = _declare("ak_session_end_profiling", [_vp, ctypes.c_char_p])
_save_optimized = _declare("ak_session_save_optimized", [_vp, ctypes.c_char_p])


class NodeArg:
    """What ORT's get_inputs()/get_outputs() return: name, type ("tensor(float)") and
    shape (ints for fixed dims, the symbol's name or None for others)."""

    def __init__(self, info):
        self.name = info.name.decode()
        if info.kind == 0:
            self.type = ORT_TYPE.get(info.type, "tensor(undefined)")
        else:  # sequences, maps, optionals: the engine refuses them at run; named as ORT does
            self.type = _KIND_TYPE.get(info.kind, "undefined")
        self.dtype = DTYPES.get(info.type) if info.kind == 0 else None
        self.type_code = info.type
        if info.rank < 0:
            self.shape = None
        else:
            self.shape = [info.dims[i] if info.dims[i] >= 0 else
                          (info.dim_names[i].decode() if info.dim_names[i] else None)
                          for i in range(info.rank)]

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def _text(p):
    return p.decode(errors="replace") if p else ""


class NativeSession:
    """One ak_session over a model loaded from a path or from bytes (the session owns the
    model). threads: intra-op threads (0 = all cores); profile: record node times for
    end_profiling; fold_constants / optimize: the engine's graph passes."""

    def __init__(self, path_or_bytes, threads=0, profile=False, fold_constants=True,
                 optimize=True):
        self._s = self._m = None
        # an ak_session runs one call at a time; onnxruntime lets threads share a session
        # (ctypes drops the GIL during the call), so runs queue here
        self._lock = threading.Lock()
        opts = _Options()
        check(_options_init(ctypes.byref(opts)))
        opts.threads, opts.fold_constants = threads, int(fold_constants)
        opts.optimize = int(optimize)
        opts.profile = 1 if profile else -1
        model = ctypes.c_void_p()
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
            check(_load_bytes(data, len(data), None, ctypes.byref(model)))
        else:
            check(_load_file(str(path_or_bytes).encode(), ctypes.byref(model)))
        self._m = model
        sess = ctypes.c_void_p()
        check(_create(self._m, ctypes.byref(opts), ctypes.byref(sess)))
        self._s = sess
        s = _Summary()
        check(_summary(self._m, ctypes.byref(s)))
        self.summary = s
        self.inputs = [self._info(_input, i) for i in range(s.num_inputs)]
        self.outputs = [self._info(_output, i) for i in range(s.num_outputs)]
        md = _Metadata()
        check(_metadata(self._m, ctypes.byref(md)))
        self.overridable = [self._info(_overridable, i) for i in range(md.num_overridable)]
        self.metadata = {"producer_name": _text(s.producer_name),
                         "producer_version": _text(s.producer_version),
                         "graph_name": _text(s.graph_name), "version": s.model_version,
                         "domain": _text(md.domain), "description": _text(md.description),
                         "graph_description": _text(md.graph_description),
                         "custom_metadata_map": self._props(md.num_props)}

    def _info(self, fn, i):
        info = _ValueInfo()
        check(fn(self._m, i, ctypes.byref(info)))
        return NodeArg(info)

    def _props(self, n):
        props = {}
        for i in range(n):
            k, v = ctypes.c_char_p(), ctypes.c_char_p()
            check(_metadata_prop(self._m, i, ctypes.byref(k), ctypes.byref(v)))
            props[_text(k.value)] = _text(v.value)
        return props

    @staticmethod
    def _tensors(arrays):
        """ak_tensor array viewing `arrays` (C-contiguous, known dtypes); the returned
        keep-alive list must outlive the call."""
        c = (_Tensor * max(1, len(arrays)))()
        keep = []
        for t, a in zip(c, arrays):
            dims = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
            keep.append(dims)
            if is_string_array(a):
                els, strings = _string_elements(a)
                keep += [els, strings]
                t.type, t.rank, t.dims = STRING, a.ndim, dims
                t.data = ctypes.cast(els, ctypes.c_void_p)
                continue
            t.type, t.rank, t.dims, t.data = CODES[a.dtype], a.ndim, dims, a.ctypes.data
        return c, keep

    @staticmethod
    def _names(names):
        return (ctypes.c_char_p * max(1, len(names)))(*[n.encode() for n in names])

    def run(self, input_names, arrays, output_names, out_buffers=None):
        """Runs once. arrays: C-contiguous NumPy arrays for input_names. out_buffers: None,
        or per output a C-contiguous array the engine writes into (None: a new array).
        Returns the outputs as NumPy arrays (the caller's buffers where given)."""
        ins, keep_in = self._tensors(arrays)
        outs = (_Tensor * max(1, len(output_names)))()
        keep_out = []
        if out_buffers is not None:
            for t, b in zip(outs, out_buffers):
                if b is None:
                    continue
                dims = (ctypes.c_int64 * max(1, b.ndim))(*b.shape)
                keep_out.append(dims)
                t.type, t.rank, t.dims, t.data = CODES[b.dtype], b.ndim, dims, b.ctypes.data
        call = _run if out_buffers is None else _run_into
        with self._lock:  # the session's buffers stay valid until its next run
            check(call(self._s, self._names(input_names), ins, len(arrays),
                       self._names(output_names), outs, len(output_names)))
            result = []
            for i, t in enumerate(outs[:len(output_names)]):
                given = out_buffers[i] if out_buffers is not None else None
                result.append(given if given is not None else self._copy_out(t))
        del keep_in, keep_out
        return result

    @staticmethod
    def _copy_out(t):
        shape = tuple(t.dims[i] for i in range(t.rank))
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if t.type == STRING:
            return _string_array(t, shape, count)
        dtype = np.dtype(DTYPES[t.type])
        if count == 0:
            return np.zeros(shape, dtype)
        buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(t.data)
        return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape).copy()

    def end_profiling(self, path):
        with self._lock:
            check(_end_profiling(self._s, str(path).encode()))

    def save_optimized(self, path):
        """Writes the graph this session runs (folded, optimized) as an ONNX file."""
        with self._lock:
            check(_save_optimized(self._s, str(path).encode()))

    def __del__(self):
        if getattr(self, "_s", None):
            _free(self._s)
            self._s = None
        if getattr(self, "_m", None):
            _model_free(self._m)
            self._m = None


def __getattr__(name):
    # the ORT-style session lives in accelkit.onnxruntime (imported on first use here, as
    # accelkit.onnxruntime imports this module)
    if name == "InferenceSession":
        from .onnxruntime import InferenceSession
        return InferenceSession
    raise AttributeError(f"module 'accelkit.inference' has no attribute {name!r}")
