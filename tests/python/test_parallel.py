"""Tests of accelkit.torch.parallel (python/accelkit/torch/parallel): tensor/sequence
parallel layers and ZeRO on the "accelkit" torch.distributed backend.

Each test starts its ranks as separate processes on localhost with torchrun's variables
running tests/python/tp_worker.py, which checks its results itself against the
unpartitioned model (exit status 0 = all passed). Needs torch (Debian python3-torch): its
absence is a failure, not a skip.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python \\
        /usr/bin/python3 -m unittest -v tests/python/test_parallel.py
"""
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import torchrun_ranks  # noqa: E402  (beside this file)

WORKER = HERE / "tp_worker.py"


setUpModule = torchrun_ranks.require_torch


def run_ranks(n, args, timeout=180):
    """n ranks of tp_worker.py with `args`: [(exit status, output)] per rank."""
    return torchrun_ranks.run_ranks(WORKER, n, args, timeout)


class TestParallel(torchrun_ranks.RanksTestCase):
    def test_tensor_parallel_2(self):
        """MLP and GPT block at tp=2, with/without overlap and sequence parallelism: loss
        and gathered gradients equal to the unpartitioned model within 1e-5."""
        self.assert_ranks_ok(run_ranks(2, ["tp"]))

    def test_tensor_parallel_4(self):
        self.assert_ranks_ok(run_ranks(4, ["tp"]))

    def test_zero_2(self):
        """ZeroOptimizer stages 0-3 (Adam, SGD with momentum): 10 steps' losses equal to
        the single-process model within 1e-5; stage 3 holds <= 1.1/N of stage 0's bytes."""
        self.assert_ranks_ok(run_ranks(2, ["zero"]))

    def test_zero_4(self):
        self.assert_ranks_ok(run_ranks(4, ["zero"]))

    def test_tp2_zero_dp2(self):
        """A TP MLP at tp=2 trained by ZeroOptimizer over dp=2 (stages 0-3) against the
        single-process MLP on the global batch."""
        self.assert_ranks_ok(run_ranks(4, ["hybrid"]))


if __name__ == "__main__":
    unittest.main()
