"""onnxruntime.capi's importable names: the exception classes (onnxruntime_pybind11_state
and its alias _pybind_state), so `from onnxruntime.capi.onnxruntime_pybind11_state import
Fail` keeps working after the import is changed to accelkit.onnxruntime."""
