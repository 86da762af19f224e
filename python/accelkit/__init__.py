"""accelkit: Python entry point to libaccelkit (ctypes).

    import accelkit
    accelkit.__version__      # "0.1.0"
    accelkit.sysinfo()        # CPU, ISA, cores, caches, measured FP32 peak and memcpy GB/s
    accelkit.InferenceSession("model.onnx", threads=2).run(None, {"input": x})  # ORT-style
"""
import ctypes

from ._lib import AccelkitError, CpuInfo, check
from . import _lib

__all__ = ["AccelkitError", "InferenceSession", "version", "sysinfo", "__version__"]


def version():
    """The library's version as a string "major.minor.patch"."""
    major, minor, patch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    check(_lib.ak_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch)))
    return f"{major.value}.{minor.value}.{patch.value}"


check(_lib.ak_init())  # surface a bad AK_* setting at import, with its message
__version__ = version()

_FEATURES = ("sse42", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512dq", "avx512_bf16", "avx512_fp16", "avx512_vnni")


def sysinfo(measure=True, peak_millis=200):
    """What `ak sysinfo` shows, as a dict. measure=False skips the timed probes."""
    info = CpuInfo()
    check(_lib.ak_cpu_get_info(ctypes.byref(info)))
    result = {
        "version": __version__,
        "vendor": info.vendor.decode(),
        "brand": info.brand.decode(),
        "cores": info.logical_cores,
        "features": [f for f in _FEATURES if getattr(info, "has_" + f)],
        "best_isa": _lib.ak_isa_name(info.best_isa).decode(),
        "active_isa": _lib.ak_isa_name(info.active_isa).decode(),
        "family": _lib.ak_cpu_family_name(info.family).decode(),
        "l1d_bytes": info.l1d_bytes,
        "l2_bytes": info.l2_bytes,
        "l3_bytes": info.l3_bytes,
    }
    if measure:
        peak, bw = ctypes.c_double(), ctypes.c_double()
        check(_lib.ak_measure_fma_peak(peak_millis, ctypes.byref(peak)))
        check(_lib.ak_measure_memcpy(16 << 20, ctypes.byref(bw)))
        result["fma_peak_gflops_per_core"] = peak.value
        result["memcpy_gbps"] = bw.value
    return result


def __getattr__(name):
    # numpy is needed by inference only: import it when InferenceSession is first used
    if name == "InferenceSession":  # onnxruntime's, which also takes threads=, optimize=...
        from .onnxruntime import InferenceSession
        return InferenceSession
    raise AttributeError(f"module 'accelkit' has no attribute {name!r}")
