"""OrtValue and IOBinding as onnxruntime has them, on CPU memory: an OrtValue wraps a NumPy
array (ortvalue_from_numpy shares the caller's array, no copy); an IOBinding keeps inputs
and outputs bound between runs, and an output bound to a caller's buffer (a preallocated
OrtValue or a buffer_ptr) is written there by the operator that computes it."""
import ctypes

import numpy as np

from ..inference import CODES, DTYPES, ORT_TYPE
from .capi.onnxruntime_pybind11_state import InvalidArgument


def _check_device(device_type, device_id=0):
    if str(device_type).lower() != "cpu" or int(device_id) != 0:
        raise InvalidArgument(f"device {device_type}:{device_id}: accelkit runs on the CPU "
                              "(device 'cpu', id 0) only")


def to_dtype(element_type):
    """A NumPy dtype from a NumPy type/dtype or an ONNX TensorProto type number."""
    if isinstance(element_type, (int, np.integer)) and not isinstance(element_type, bool):
        if int(element_type) not in DTYPES:
            raise InvalidArgument(f"element type {int(element_type)} "
                                  f"({ORT_TYPE.get(int(element_type), 'unknown')}) is not "
                                  "supported by accelkit")
        return np.dtype(DTYPES[int(element_type)])
    dtype = np.dtype(element_type)
    if dtype not in CODES:
        raise InvalidArgument(f"element type {dtype} is not supported by accelkit")
    return dtype


def array_at(ptr, dtype, shape):
    """A NumPy array over `ptr` (the caller's memory, no copy)."""
    shape = tuple(int(d) for d in shape)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if count == 0:
        return np.zeros(shape, dtype)
    if not ptr:
        raise InvalidArgument("buffer_ptr is NULL")
    buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(ptr))
    return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape)


class OrtValue:
    """A tensor in CPU memory (onnxruntime.OrtValue)."""

    def __init__(self, array, owner=None):
        self._array = array
        self._owner = owner  # what keeps the memory alive when `array` is a view

    @staticmethod
    def ortvalue_from_numpy(numpy_obj, device_type="cpu", device_id=0):
        """Wraps a NumPy array without copying (a copy only when it is not C-contiguous)."""
        _check_device(device_type, device_id)
        arr = np.asarray(numpy_obj)
        if arr.dtype not in CODES:
            raise InvalidArgument(f"element type {arr.dtype} is not supported by accelkit")
        return OrtValue(np.require(arr, requirements="C"))

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0):
        _check_device(device_type, device_id)
        return OrtValue(np.zeros(tuple(shape), to_dtype(element_type)))

    def numpy(self):
        """A copy of the data as a NumPy array."""
        return self._array.copy()

    def shape(self):
        return list(self._array.shape)

    def data_type(self):
        return ORT_TYPE[CODES[self._array.dtype]]

    def element_type(self):
        """The ONNX TensorProto type number."""
        return CODES[self._array.dtype]

    def device_name(self):
        return "cpu"

    def data_ptr(self):
        return self._array.ctypes.data

    def is_tensor(self):
        return True

    def is_sparse_tensor(self):
        return False

    def is_tensor_sequence(self):
        return False

    def has_value(self):
        return True

    def update_inplace(self, np_arr):
        """Copies np_arr (same shape and type) into this value's memory."""
        src = np.asarray(np_arr)
        if src.shape != self._array.shape or src.dtype != self._array.dtype:
            raise InvalidArgument(f"update_inplace: {src.dtype}{list(src.shape)} into "
                                  f"{self._array.dtype}{list(self._array.shape)}")
        np.copyto(self._array, src)

    def __repr__(self):
        return f"OrtValue({self.data_type()}, shape={self.shape()}, device=cpu)"


class IOBinding:
    """Inputs and outputs bound to a session between runs (session.io_binding())."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}    # name -> C-contiguous array (the caller's memory)
        self._outputs = {}   # name -> preallocated array, or None (the engine allocates)
        self._results = None

    # ---- inputs
    def bind_cpu_input(self, name, arr_on_cpu):
        self._inputs[name] = np.require(np.asarray(arr_on_cpu), requirements="C")

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        _check_device(device_type, device_id)
        self._inputs[name] = array_at(buffer_ptr, to_dtype(element_type), shape)

    def bind_ortvalue_input(self, name, ortvalue):
        self._inputs[name] = ortvalue._array

    def clear_binding_inputs(self):
        self._inputs.clear()

    def synchronize_inputs(self):
        """CPU memory needs no synchronisation."""

    # ---- outputs
    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None,
                    buffer_ptr=None):
        """Without buffer_ptr the engine allocates the output at each run; with it, the
        output is written into that memory (element_type and shape describe it)."""
        _check_device(device_type, device_id)
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise InvalidArgument(f"bind_output '{name}': a buffer_ptr needs element_type "
                                  "and shape")
        self._outputs[name] = array_at(buffer_ptr, to_dtype(element_type), shape)

    def bind_ortvalue_output(self, name, ortvalue):
        self._outputs[name] = ortvalue._array

    def clear_binding_outputs(self):
        self._outputs.clear()
        self._results = None

    def synchronize_outputs(self):
        """CPU memory needs no synchronisation."""

    def get_outputs(self):
        """The last run's outputs as OrtValues, in the order they were bound (those bound to
        a buffer are views of it)."""
        return [OrtValue(a) for a in self._results_or_fail()]

    def copy_outputs_to_cpu(self):
        """The last run's outputs as NumPy arrays (copies)."""
        return [a.copy() for a in self._results_or_fail()]

    def _results_or_fail(self):
        if self._results is None:
            return []
        return self._results

    # ---- used by InferenceSession.run_with_iobinding
    def _run(self, run_options):
        names = list(self._outputs)
        self._results = self._session._run_arrays(
            names, self._inputs, run_options, [self._outputs[n] for n in names])
