"""onnxruntime.capi._pybind_state: the same exception classes."""
from .onnxruntime_pybind11_state import (  # noqa: F401
    EngineError, EPFail, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, ModelLoaded,
    NoModel, NoSuchFile, NotImplemented, RuntimeException)
