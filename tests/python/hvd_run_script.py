"""A script that calls horovod.run, for test_horovod.TestHorovodRun: its functions live in
__main__, so the workers must find them by running this file as __mp_main__ (or get them
by value from cloudpickle); the block below must not run again in the workers.

    PYTHONPATH=python AK_LIBRARY=build/libaccelkit.so python3 tests/python/hvd_run_script.py
"""
import os

import horovod


def rank_sum(scale):
    import torch
    import horovod.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
    return {"rank": hvd.rank(), "size": hvd.size(), "value": total * scale,
            "pid": os.getpid()}


def fails_on_rank_1():
    if os.environ.get("AK_RANK") == "1":
        raise ValueError("rank 1 fails on purpose")
    return "rank 0 done"


if __name__ == "__main__":
    results = horovod.run(rank_sum, args=(10,), np=2)
    print("results", [(r["rank"], r["size"], r["value"]) for r in results],
          "distinct pids", len({r["pid"] for r in results} | {os.getpid()}))
    try:
        horovod.run(fails_on_rank_1, num_proc=2)
        print("no error")
    except RuntimeError as e:
        print("error", e)
