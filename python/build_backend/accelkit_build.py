"""PEP 517 build backend of the accelkit pip package (pyproject.toml at the repository
root names it, with backend-path, and requires nothing: `pip install .` works offline).

build_wheel builds libaccelkit and ak with CMake (Release, no tests) into build-pip/ of
the repository, or takes them from an existing build folder named by $AK_BUILD_DIR, and
writes accelkit-VERSION-py3-none-PLATFORM.whl holding
  accelkit/ (with accelkit.torch)      python/accelkit
  accelkit/lib/libaccelkit.so          found first by accelkit's loader
  accelkit/bin/ak, bin/horovodrun      run by the `ak` and `horovodrun` entry points
  _accelkit_launchers.py               those entry points
Extra CMake options (e.g. -DAK_WITH_LLM=OFF) come from $AK_CMAKE_ARGS. The Horovod
compatibility package is a distribution of its own: python/horovod-shim.
"""
import os
import re
import shlex
import shutil
import subprocess
import sysconfig

from wheel_writer import python_files, write_wheel

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SUMMARY = "accelkit: CPU kernels, collectives, Horovod-compatible training, ONNX and LLM inference"


def project_version():
    """project(accelkit VERSION x.y.z) in CMakeLists.txt: one version for C and Python."""
    with open(os.path.join(_ROOT, "CMakeLists.txt")) as f:
        found = re.search(r"project\(accelkit VERSION ([0-9.]+)", f.read())
    if not found:
        raise RuntimeError("accelkit build backend: no project(accelkit VERSION ...) in "
                           "CMakeLists.txt")
    return found.group(1)


def _run(cmd):
    print("accelkit build backend:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _cmake_build():
    """Configures and builds libaccelkit and ak in build-pip/; returns that folder."""
    build = os.path.join(_ROOT, "build-pip")
    if not shutil.which("cmake"):
        raise RuntimeError("accelkit build backend: cmake not found (scripts/setup installs "
                           "the build dependencies), or set AK_BUILD_DIR to a build folder")
    configure = ["cmake", "-S", _ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                 "-DAK_BUILD_TESTS=OFF"]
    if shutil.which("ninja") and not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        configure += ["-G", "Ninja"]
    configure += shlex.split(os.environ.get("AK_CMAKE_ARGS", ""))
    _run(configure)
    _run(["cmake", "--build", build, "--target", "accelkit", "ak", "-j", str(os.cpu_count() or 2)])
    return build


def _native_files():
    """(wheel path, disk path) of the library, ak and horovodrun."""
    build = os.environ.get("AK_BUILD_DIR") or _cmake_build()
    library = os.path.realpath(os.path.join(build, "libaccelkit.so"))  # the versioned file
    ak = os.path.join(build, "ak")
    for path in (library, ak):
        if not os.path.exists(path):
            raise RuntimeError(f"accelkit build backend: {path} does not exist (build {build} "
                               "first, or unset AK_BUILD_DIR to let the backend build it)")
    return [("accelkit/lib/libaccelkit.so", library), ("accelkit/bin/ak", ak),
            ("accelkit/bin/horovodrun", os.path.join(_ROOT, "scripts", "horovodrun"))]


def _platform_tag():
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


# ---- PEP 517 hooks --------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    python = os.path.join(_ROOT, "python")
    files = python_files(os.path.join(python, "accelkit"), "accelkit")
    files.append(("_accelkit_launchers.py", os.path.join(python, "_accelkit_launchers.py")))
    files += _native_files()
    return write_wheel(
        wheel_directory, "accelkit", project_version(), f"py3-none-{_platform_tag()}", files,
        _SUMMARY,
        extras={"inference": ["numpy"], "torch": ["torch", "numpy"]},
        console_scripts={"ak": "_accelkit_launchers:ak",
                         "horovodrun": "_accelkit_launchers:horovodrun"})
