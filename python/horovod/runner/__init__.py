"""horovod.run on accelkit: run a Python function on N processes and get its return values.

    import horovod
    def train(lr):
        import horovod.torch as hvd
        hvd.init()
        ...
        return hvd.rank(), loss
    results = horovod.run(train, args=(0.1,), np=2)        # [(0, ...), (1, ...)]

The function and its arguments are pickled (by value with cloudpickle when it is
installed — Debian: python3-cloudpickle —, else by reference: a function of the calling
script's __main__ is found again as multiprocessing's spawn finds it, by running the
script in each worker under the name __mp_main__, so its `if __name__ == "__main__":`
block does not run again). The processes are started by `ak launch` with the same hosts,
ssh port and elastic options horovodrun takes; each worker (horovod/runner/_worker.py)
calls the function and writes its pickled return value, and run() returns them in rank
order (the rank the worker had when the function returned). A failed job raises
RuntimeError with the launcher's exit code, as Horovod's run does.

Options about MPI, Gloo, network interfaces, output files, identity files and start
timeouts have no counterpart in accelkit's launcher: they are accepted and warned about.
"""
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings

try:  # Horovod's own choice: functions and closures by value
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - depends on the machine
    _pickler = pickle

_PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_IGNORED = ("start_timeout", "ssh_identity_file", "disable_cache", "output_filename", "verbose",
            "use_gloo", "use_mpi", "mpi_args", "network_interface")


def _ak_binary():
    """$AK_BIN, else the ak inside the pip-installed accelkit package, else build*/ak in
    this repository, else ak on PATH (as scripts/horovodrun)."""
    if os.environ.get("AK_BIN"):
        return os.environ["AK_BIN"]
    from accelkit._lib import bundled
    if bundled("bin/ak"):
        return bundled("bin/ak")
    root = os.path.dirname(_PYTHON_DIR)
    if os.path.exists(os.path.join(root, "CMakeLists.txt")):  # in the repository
        for build in sorted(d for d in os.listdir(root) if d.startswith("build")):
            path = os.path.join(root, build, "ak")
            if os.access(path, os.X_OK):
                return path
    found = shutil.which("ak")
    if not found:
        raise RuntimeError("horovod.run: cannot find accelkit's ak binary (build accelkit, or "
                           "set AK_BIN)")
    return found


def _launch_flags(num_proc, min_np, max_np, slots, reset_limit, cooldown_range, hosts,
                  hostfile, ssh_port):
    flags = ["-np", str(num_proc)]
    if hosts and hostfile:
        raise ValueError("Argument hosts and hostfile only allow one provided.")
    if hosts:
        flags += ["-H", hosts]
    if hostfile:
        flags += ["--hostfile", hostfile]
    if ssh_port:
        flags += ["-p", str(ssh_port)]
    for name, value in (("--min-np", min_np), ("--max-np", max_np), ("--slots-per-host", slots),
                        ("--reset-limit", reset_limit)):
        if value is not None:
            flags += [name, str(value)]
    if cooldown_range:
        flags += ["--blacklist-cooldown-range", *map(str, cooldown_range)]
    return flags


def _write_payload(folder, func, args, kwargs):
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    if _pickler is pickle and getattr(func, "__module__", None) == "__main__" and not main_file:
        raise ValueError("horovod.run: a function defined interactively (no script file) "
                         "needs cloudpickle to reach the workers: install python3-cloudpickle, "
                         "or define it in a module")
    with open(os.path.join(folder, "payload.pkl"), "wb") as f:
        pickle.dump({"main_file": os.path.abspath(main_file) if main_file else None,
                     "by_value": _pickler is not pickle,
                     "call": _pickler.dumps((func, tuple(args), dict(kwargs or {})))}, f)


def _worker_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PYTHON_DIR, env.get("PYTHONPATH")]))
    if not env.get("AK_LIBRARY") and "accelkit._lib" in sys.modules:
        env["AK_LIBRARY"] = sys.modules["accelkit._lib"].lib._name
    return env


def _collect(folder):
    results = {}
    for name in os.listdir(folder):
        if name.startswith("result.") and name.endswith(".pkl"):
            with open(os.path.join(folder, name), "rb") as f:
                results[int(name.split(".")[1])] = pickle.load(f)
    return [results[r] for r in sorted(results)]


def run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None, max_num_proc=None,
        slots=None, reset_limit=None, cooldown_range=None, hosts=None, hostfile=None,
        start_timeout=None, ssh_port=None, ssh_identity_file=None, disable_cache=None,
        output_filename=None, verbose=None, use_gloo=None, use_mpi=None, mpi_args=None,
        network_interface=None, executable=None, np=None, min_np=None, max_np=None):
    """Runs func(*args, **kwargs) in num_proc processes started by `ak launch` and returns
    the list of their return values, indexed by rank. Horovod's signature; np, min_np and
    max_np are its deprecated spellings."""
    if np is not None and num_proc == 1:
        num_proc = np
    min_num_proc = min_num_proc if min_num_proc is not None else min_np
    max_num_proc = max_num_proc if max_num_proc is not None else max_np
    given = {k: v for k, v in locals().items() if k in _IGNORED and v not in (None, False)}
    if given:
        warnings.warn(f"horovod.run on accelkit ignores {', '.join(sorted(given))} (no "
                      "counterpart in ak launch)")
    flags = _launch_flags(num_proc, min_num_proc, max_num_proc, slots, reset_limit,
                          cooldown_range, hosts, hostfile, ssh_port)
    folder = tempfile.mkdtemp(prefix="horovod-run-")
    try:
        _write_payload(folder, func, args, kwargs)
        cmd = [_ak_binary(), "launch", *flags, "--", executable or sys.executable, "-m",
               "horovod.runner._worker", folder]
        rc = subprocess.call(cmd, env=_worker_env())
        if rc != 0:
            raise RuntimeError(f"horovod.run: the job failed: `ak launch` exited with {rc}")
        return _collect(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
