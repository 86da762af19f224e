"""Tests of accelkit.torch.parallel.build (python/accelkit/torch/parallel/{model,build}.py):
the reference decoder, described in the planner's model JSON, trained under plans of
tensor / sequence / pipeline (1F1B and interleaved) / data parallelism with ZeRO 0-3 and
each recompute mode, on the "accelkit" torch.distributed backend; every step's loss
equals the single-process model's within 1e-4 relative (10 steps, fixed seeds).

Each test starts its ranks as local processes with torchrun's variables running
tests/python/plan_run_worker.py, which checks its results itself. This file runs a
representative subset ("quick", in make test); AK_PLAN_RUN_MODE=full runs every
combination (make test-parallel-matrix). Needs torch (Debian python3-torch): its absence
is a failure, not a skip.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python \\
        /usr/bin/python3 -m unittest -v tests/python/test_plan_run.py
"""
import os
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import torchrun_ranks  # noqa: E402  (beside this file)

WORKER = HERE / "plan_run_worker.py"
MODE = os.environ.get("AK_PLAN_RUN_MODE", "quick")

setUpModule = torchrun_ranks.require_torch


def run_ranks(n, timeout=600):
    return torchrun_ranks.run_ranks(WORKER, n, [MODE], timeout)


class TestPlanRun(torchrun_ranks.RanksTestCase):
    def test_1_rank(self):
        """The plan tp=pp=dp=1 and the refusals (offload, dropout, experts, unknown key)."""
        self.assert_ranks_ok(run_ranks(1))

    def test_2_ranks(self):
        self.assert_ranks_ok(run_ranks(2))

    def test_4_ranks(self):
        self.assert_ranks_ok(run_ranks(4))


if __name__ == "__main__":
    unittest.main()
