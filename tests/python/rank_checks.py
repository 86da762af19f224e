"""Checks for one rank of the accelkit.torch.parallel tests (tp_worker.py, pp_worker.py):
each failed check is printed with the rank and kept, and run_modes exits 1 when any
failed, after every rank has finished (so one rank's failure cannot leave others hanging
at a collective the test still expects)."""
import sys

import torch.distributed as dist

FAILURES = []
TOL = 1e-5


def check(ok, msg):
    if not ok:
        FAILURES.append(msg)
        print(f"[rank {dist.get_rank()}] FAIL {msg}", flush=True)


def rel(a, b):
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


def check_close(what, got, want):
    """got within TOL of want, relative by norm (same shape; None is a failure)."""
    check(got is not None, f"{what}: no value")
    if got is None:
        return
    check(got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}")
    if got.shape == want.shape:
        r = rel(got, want)
        check(r <= TOL, f"{what}: relative error {r:.3g} > {TOL}")


def run_modes(worker, modes):
    """The worker's main: the mode named by argv[1] on the "accelkit" backend."""
    import torch

    import accelkit.torch.distributed  # noqa: F401  (registers the "accelkit" backend)
    torch.set_num_threads(1)
    dist.init_process_group("accelkit")
    mode = sys.argv[1]
    if mode not in modes:
        sys.exit(f"{worker}: unknown mode {mode}")
    modes[mode]()
    dist.barrier()
    print(f"[rank {dist.get_rank()}] {len(FAILURES)} failures", flush=True)
    dist.destroy_process_group()
    sys.exit(1 if FAILURES else 0)
