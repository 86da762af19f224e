"""Runs a test's ranks as local processes with torchrun's variables (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT), for the tests of the "accelkit" torch.distributed
backend and of accelkit.torch.parallel. A worker checks its own results and exits 0 when
all passed; a hang kills every rank and fails the test."""
import os
import signal
import socket
import subprocess
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def require_torch():
    """setUpModule of these tests: torch's absence is a failure, not a skip."""
    try:
        import torch  # noqa: F401  (only whether it imports)
    except ImportError:
        raise AssertionError("torch is not installed: apt-get install python3-torch "
                             "(scripts/setup installs it)") from None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(worker, n, args, timeout):
    """Starts n ranks of `worker` with `args`; returns [(exit status, output)] per rank."""
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                          os.environ.get("PYTHONPATH")]))
        env.setdefault("AK_COMM_TIMEOUT", "60000")
        procs.append(subprocess.Popen([sys.executable, str(worker), *map(str, args)], env=env,
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


class RanksTestCase(unittest.TestCase):
    def assert_ranks_ok(self, results):
        for r, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {r} failed:\n{out[-4000:]}")
