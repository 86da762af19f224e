"""onnxruntime's exception classes (onnxruntime.capi.onnxruntime_pybind11_state), raised
by accelkit.onnxruntime with onnxruntime's message layout:

    [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Invalid input name: x

Each derives from accelkit.AccelkitError (a RuntimeError), so code catching either works.
`code` is onnxruntime's status number; `status` the ak_status behind it (0 when the error
was found in Python)."""
from accelkit._lib import AccelkitError


class OrtError(AccelkitError):
    """Base of the classes below (onnxruntime has none; its classes derive from Exception)."""
    code, code_name = 1, "FAIL"

    def __init__(self, message, status=0):
        super().__init__(status, f"[ONNXRuntimeError] : {self.code} : {self.code_name} : "
                                 f"{message}")


def _kind(name, code, code_name):
    return type(name, (OrtError,), {"code": code, "code_name": code_name,
                                    "__doc__": f"onnxruntime's {code_name} ({code})."})


Fail = _kind("Fail", 1, "FAIL")
InvalidArgument = _kind("InvalidArgument", 2, "INVALID_ARGUMENT")
NoSuchFile = _kind("NoSuchFile", 3, "NO_SUCHFILE")
NoModel = _kind("NoModel", 4, "NO_MODEL")
EngineError = _kind("EngineError", 5, "ENGINE_ERROR")
RuntimeException = _kind("RuntimeException", 6, "RUNTIME_EXCEPTION")
InvalidProtobuf = _kind("InvalidProtobuf", 7, "INVALID_PROTOBUF")
ModelLoaded = _kind("ModelLoaded", 8, "MODEL_LOADED")
NotImplemented = _kind("NotImplemented", 9, "NOT_IMPLEMENTED")  # noqa: A001 (ORT's name)
InvalidGraph = _kind("InvalidGraph", 10, "INVALID_GRAPH")
EPFail = _kind("EPFail", 11, "EP_FAIL")

# ak_status (include/accelkit/ak.h) -> the class raised for it
_BY_STATUS = {1: InvalidArgument, 2: NotImplemented, 3: RuntimeException, 4: Fail, 5: Fail,
              6: Fail, 7: InvalidArgument, 8: InvalidGraph, 9: RuntimeException}


def from_accelkit(err, context=""):
    """The onnxruntime exception for an AccelkitError from libaccelkit; `context` is put
    before its message as onnxruntime does ("Load model from m.onnx failed:")."""
    cls = _BY_STATUS.get(err.status, Fail)
    text = str(err)
    if err.status == 8 and "protobuf" in text:
        cls = InvalidProtobuf
    return cls(context + text, err.status)
