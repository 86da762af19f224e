"""One process of horovod.run (see horovod/runner/__init__.py): loads the pickled call from
FOLDER/payload.pkl, runs it and writes the return value to FOLDER/result.RANK.pkl.

    python3 -m horovod.runner._worker FOLDER
"""
import os
import pickle
import runpy
import sys
import types


def _adopt_main(main_file):
    """Makes the calling script's functions findable as __main__.name, as multiprocessing's
    spawn does: the script runs here under the name __mp_main__, so its
    `if __name__ == "__main__":` block (the one that called horovod.run) does not."""
    module = types.ModuleType("__mp_main__")
    module.__dict__.update(runpy.run_path(main_file, run_name="__mp_main__"))
    module.__file__ = main_file
    sys.modules["__mp_main__"] = sys.modules["__main__"] = module


def _rank():
    """The rank this process ends with: the runtime's if the function left it running (an
    elastic job may have renumbered it), else the launcher's."""
    hvd = sys.modules.get("accelkit.torch.mpi_ops")
    if hvd is not None and hvd.is_initialized():
        return hvd.rank()
    return int(os.environ.get("AK_RANK") or os.environ.get("AK_ELASTIC_ID") or 0)


def main():
    folder = sys.argv[1]
    with open(os.path.join(folder, "payload.pkl"), "rb") as f:
        payload = pickle.load(f)
    if not payload["by_value"] and payload["main_file"]:
        _adopt_main(payload["main_file"])
    func, args, kwargs = pickle.loads(payload["call"])
    result = func(*args, **kwargs)
    rank = _rank()
    tmp = os.path.join(folder, f".result.{rank}.{os.getpid()}")
    with open(tmp, "wb") as f:
        pickle.dump(result, f)
    os.replace(tmp, os.path.join(folder, f"result.{rank}.pkl"))


if __name__ == "__main__":
    main()
