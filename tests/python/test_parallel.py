"""Tests of accelkit.torch.parallel (python/accelkit/torch/parallel): tensor/sequence
parallel layers and ZeRO on the "accelkit" torch.distributed backend.

Each test starts its ranks as separate processes on localhost with torchrun's variables
running tests/python/tp_worker.py, which checks its results itself against the
unpartitioned model (exit status 0 = all passed). Needs torch (Debian python3-torch): its
absence is a failure, not a skip.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python \\
        /usr/bin/python3 -m unittest -v tests/python/test_parallel.py
"""
import os
import signal
import socket
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORKER = HERE / "tp_worker.py"


def setUpModule():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise AssertionError("torch is not installed: apt-get install python3-torch "
                             "(scripts/setup installs it)") from None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(n, args, timeout=180):
    """Starts n ranks of tp_worker.py; returns [(exit status, output)] per rank."""
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                          os.environ.get("PYTHONPATH")]))
        env.setdefault("AK_COMM_TIMEOUT", "60000")
        procs.append(subprocess.Popen([sys.executable, str(WORKER), *map(str, args)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, start_new_session=True))
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                try:
                    os.killpg(q.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            out, _ = p.communicate()
            raise AssertionError(f"ranks timed out after {timeout}s ({args}):\n{out[-3000:]}")
        results.append((p.returncode, out))
    return results


class TestParallel(unittest.TestCase):
    def assert_ranks_ok(self, results):
        for r, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {r} failed:\n{out[-4000:]}")

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
