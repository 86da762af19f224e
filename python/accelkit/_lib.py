"""ctypes binding to libaccelkit: finds the shared library and declares the C calls."""
import ctypes
import ctypes.util
import os
from pathlib import Path


class AccelkitError(RuntimeError):
    """A failing accelkit call: `status` is the ak_status code, str() the message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


_PACKAGE_DIR = Path(__file__).resolve().parent


def bundled(relative):
    """Path of a file the wheel put inside the package ("lib/libaccelkit.so", "bin/ak"),
    or None: in the repository (PYTHONPATH=python) the package holds no native files."""
    path = _PACKAGE_DIR / relative
    return str(path) if path.exists() else None


def _candidates():
    """Where libaccelkit may be, in the order it is looked for: inside the installed
    package (pip install .), $AK_LIBRARY, this repository's build folders (in-repo use),
    then the system's library path (make install, make deb)."""
    yield bundled("lib/libaccelkit.so")
    env = os.environ.get("AK_LIBRARY")
    if env:
        yield env
    root = _PACKAGE_DIR.parents[1]  # python/accelkit -> repository root
    if (root / "CMakeLists.txt").exists():
        for build in ("build", "build-release"):
            yield str(root / build / "libaccelkit.so")
    found = ctypes.util.find_library("accelkit")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if not path:
            continue
        if os.path.exists(path) or "/" not in path:
            try:
                return ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path}: {e}")
        else:
            tried.append(f"{path}: not found")
    raise ImportError("cannot load libaccelkit (pip install accelkit's repository, set "
                      "AK_LIBRARY, or run `make`): " + ("; ".join(tried) or "none found"))


lib = _load()


class CpuInfo(ctypes.Structure):
    """Mirror of struct ak_cpu_info in include/accelkit/ak.h (keep in the same order)."""

    _fields_ = [
        ("vendor", ctypes.c_char * 16),
        ("brand", ctypes.c_char * 64),
        ("logical_cores", ctypes.c_int),
        ("has_sse42", ctypes.c_int), ("has_avx", ctypes.c_int), ("has_avx2", ctypes.c_int),
        ("has_fma", ctypes.c_int), ("has_f16c", ctypes.c_int),
        ("has_avx512f", ctypes.c_int), ("has_avx512bw", ctypes.c_int),
        ("has_avx512vl", ctypes.c_int), ("has_avx512dq", ctypes.c_int),
        ("has_avx512_bf16", ctypes.c_int), ("has_avx512_fp16", ctypes.c_int),
        ("has_avx512_vnni", ctypes.c_int),
        ("l1d_bytes", ctypes.c_size_t), ("l2_bytes", ctypes.c_size_t),
        ("l3_bytes", ctypes.c_size_t),
        ("best_isa", ctypes.c_int), ("active_isa", ctypes.c_int),
        ("family", ctypes.c_int), ("detected_family", ctypes.c_int),
    ]


def _declare(name, argtypes, restype=ctypes.c_int):
    fn = getattr(lib, name)
    fn.argtypes = argtypes
    fn.restype = restype
    return fn


_c_int_p = ctypes.POINTER(ctypes.c_int)
ak_status_str = _declare("ak_status_str", [ctypes.c_int], ctypes.c_char_p)
ak_last_error = _declare("ak_last_error", [], ctypes.c_char_p)
ak_init = _declare("ak_init", [])
ak_version = _declare("ak_version", [_c_int_p, _c_int_p, _c_int_p])
ak_cpu_get_info = _declare("ak_cpu_get_info", [ctypes.POINTER(CpuInfo)])
ak_isa_name = _declare("ak_isa_name", [ctypes.c_int], ctypes.c_char_p)
ak_cpu_family_name = _declare("ak_cpu_family_name", [ctypes.c_int], ctypes.c_char_p)
ak_measure_fma_peak = _declare("ak_measure_fma_peak",
                               [ctypes.c_int, ctypes.POINTER(ctypes.c_double)])
ak_measure_memcpy = _declare("ak_measure_memcpy",
                             [ctypes.c_size_t, ctypes.POINTER(ctypes.c_double)])


def check(status):
    """Raise AccelkitError for a non-zero ak_status."""
    if status != 0:
        detail = ak_last_error().decode(errors="replace")
        name = ak_status_str(status).decode()
        raise AccelkitError(status, f"{name}: {detail}")
