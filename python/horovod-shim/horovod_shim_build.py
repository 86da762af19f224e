"""PEP 517 build backend of accelkit-horovod (python/horovod-shim/pyproject.toml): a wheel
of python/horovod, the Horovod compatibility package, requiring accelkit of the same
version. Offline like the accelkit backend, whose wheel writer it shares.

It refuses to build where a Horovod that is not this one is installed for the Python that
runs pip: installing would overwrite that Horovod's `horovod` package. pip runs backends
in an isolated environment that hides the installed packages, so the check asks a fresh
interpreter, started without pip's isolation variables.
"""
import os
import subprocess
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYTHON = os.path.dirname(_HERE)  # the repository's python/
sys.path.insert(0, os.path.join(_PYTHON, "build_backend"))

from accelkit_build import project_version  # noqa: E402
from wheel_writer import python_files, write_wheel  # noqa: E402

# Prints who provides `horovod` for this interpreter: "" (nobody), "accelkit" (a horovod
# package carrying accelkit's version label) or the distribution's name and version.
_PROBE = r"""
import importlib.metadata as md, importlib.util as iu
try:
    d = md.distribution("horovod")
    print(f"horovod {d.version} ({d.locate_file('')})")
except md.PackageNotFoundError:
    spec = iu.find_spec("horovod")
    if spec and spec.origin:
        print("accelkit" if "+accelkit" in open(spec.origin).read() else spec.origin)
"""


def _installed_horovod():
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONSAFEPATH")}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd="/",
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _refuse_over_real_horovod():
    found = _installed_horovod()
    if found and found != "accelkit":
        raise RuntimeError(f"accelkit-horovod: a real Horovod is installed ({found}); this "
                           "package would overwrite it. Uninstall it first (pip uninstall "
                           "horovod), or use accelkit.torch directly (import accelkit.torch "
                           "as hvd)")


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _refuse_over_real_horovod()
    version = project_version()
    return write_wheel(
        wheel_directory, "accelkit-horovod", version, "py3-none-any",
        python_files(os.path.join(_PYTHON, "horovod"), "horovod"),
        "Horovod's PyTorch API (horovod.torch, horovod.run) on accelkit",
        requires=[f"accelkit=={version}"])
