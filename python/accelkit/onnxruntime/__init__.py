"""onnxruntime's Python API over accelkit: a script written for onnxruntime runs after
changing only its import,

    import accelkit.onnxruntime as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {sess.get_inputs()[0].name: x})

Providers: AccelkitExecutionProvider and CPUExecutionProvider (both name accelkit's CPU
engine); onnxruntime's other provider names warn and fall back to the CPU as onnxruntime
does for a provider its build lacks; unknown names are refused (ValueError). Settings
accelkit cannot honour are refused by name (see SessionOptions). docs/inference.md lists
what is covered."""
from .. import __version__
from ._options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, \
    SessionOptions
from ._session import AVAILABLE_PROVIDERS, KNOWN_PROVIDERS, InferenceSession, ModelMetadata
from ._values import IOBinding, OrtValue
from ..inference import NodeArg
from . import capi
from .capi.onnxruntime_pybind11_state import (  # noqa: F401
    EngineError, EPFail, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, ModelLoaded,
    NoModel, NoSuchFile, NotImplemented, RuntimeException)

__all__ = ["InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel",
           "ExecutionMode", "ExecutionOrder", "ModelMetadata", "NodeArg", "OrtValue",
           "IOBinding", "get_available_providers", "get_all_providers", "get_device",
           "set_default_logger_severity", "set_default_logger_verbosity", "capi",
           "__version__"]

_logger = {"severity": 2, "verbosity": 0}


def get_available_providers():
    return list(AVAILABLE_PROVIDERS)


def get_all_providers():
    """Every provider name onnxruntime knows (the ones not available here warn and fall
    back to the CPU when asked for)."""
    return list(KNOWN_PROVIDERS)


def get_device():
    return "CPU"


def set_default_logger_severity(severity):
    """Checked (0-4) and kept: accelkit reports through exceptions, not a log."""
    if not isinstance(severity, int) or not 0 <= severity <= 4:
        raise InvalidArgument(f"logger severity {severity!r} is not 0-4")
    _logger["severity"] = severity


def set_default_logger_verbosity(verbosity):
    if not isinstance(verbosity, int) or verbosity < 0:
        raise InvalidArgument(f"logger verbosity {verbosity!r} must be an int >= 0")
    _logger["verbosity"] = verbosity
