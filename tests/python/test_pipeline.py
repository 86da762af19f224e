"""Tests of accelkit.torch.parallel's pipeline parallelism and recompute
(python/accelkit/torch/parallel/{pipeline,recompute}.py) on the "accelkit"
torch.distributed backend.

Each test starts its ranks as separate processes on localhost with torchrun's variables
running tests/python/pp_worker.py, which checks its results itself against the
unpartitioned model (exit status 0 = all passed). Needs torch (Debian python3-torch): its
absence is a failure, not a skip.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python \\
        /usr/bin/python3 -m unittest -v tests/python/test_pipeline.py
"""
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import torchrun_ranks  # noqa: E402  (beside this file)

WORKER = HERE / "pp_worker.py"


setUpModule = torchrun_ranks.require_torch


def run_ranks(n, mode, timeout=120):
    """n ranks of pp_worker.py in `mode`; a schedule that deadlocks fails on the timeout."""
    return torchrun_ranks.run_ranks(WORKER, n, [mode], timeout)


class TestPipeline(torchrun_ranks.RanksTestCase):
    def test_pipeline_2(self):
        """pp=2: MLP under 1F1B with 4 and 8 micro-batches and with 1 (< stages), a GPT
        stack with hybrid recompute, the interleaved schedule (2 chunks per rank): loss
        and every gradient equal to the unpartitioned model's within 1e-5."""
        self.assert_ranks_ok(run_ranks(2, "pp"))

    def test_pipeline_4(self):
        self.assert_ranks_ok(run_ranks(4, "pp"))

    def test_recompute(self):
        """none / selective / full / hybrid:1: equal losses and gradients; bytes saved for
        backward strictly smaller from none to selective to hybrid:1 to full."""
        self.assert_ranks_ok(run_ranks(1, "recompute"))


if __name__ == "__main__":
    unittest.main()
