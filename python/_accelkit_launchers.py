"""The `ak` and `horovodrun` commands of the pip package (console-script entry points).

They run the native files the wheel put inside the accelkit package: accelkit/bin/ak
(libaccelkit linked in) and accelkit/bin/horovodrun (scripts/horovodrun, which turns
horovodrun's flags into `ak launch`). This module sits beside the package rather than in
it because importing accelkit loads libaccelkit and checks the AK_* environment: `ak`
must report a bad AK_ISA itself, as the installed binary does, not as a Python traceback.
"""
import importlib.util
import os
import sys


def _bundled(name):
    spec = importlib.util.find_spec("accelkit")  # finds the package without importing it
    folder = spec.submodule_search_locations[0] if spec else None
    path = os.path.join(folder, "bin", name) if folder else None
    if not path or not os.access(path, os.X_OK):
        sys.exit(f"{name}: accelkit's {name} is not installed with the package (expected at "
                 f"{path}); reinstall it with pip install")
    return path


def ak():
    path = _bundled("ak")
    os.execv(path, [path, *sys.argv[1:]])


def horovodrun():
    os.environ.setdefault("AK_BIN", _bundled("ak"))
    script = _bundled("horovodrun")
    os.execv("/bin/sh", ["horovodrun", script, *sys.argv[1:]])
