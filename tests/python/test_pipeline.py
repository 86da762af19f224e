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
import os
import signal
import socket
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORKER = HERE / "pp_worker.py"


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


def run_ranks(n, mode, timeout=120):
    """Starts n ranks of pp_worker.py; returns [(exit status, output)] per rank. A hang
    (a schedule that deadlocks) kills them all and fails."""
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                          os.environ.get("PYTHONPATH")]))
        env.setdefault("AK_COMM_TIMEOUT", "60000")
        procs.append(subprocess.Popen([sys.executable, str(WORKER), mode], env=env,
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
            raise AssertionError(f"ranks timed out after {timeout}s ({mode}):\n{out[-3000:]}")
        results.append((p.returncode, out))
    return results


class TestPipeline(unittest.TestCase):
    def assert_ranks_ok(self, results):
        for r, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {r} failed:\n{out[-4000:]}")

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
