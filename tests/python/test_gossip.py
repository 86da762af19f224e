"""Tests of accelkit.torch.GossipOptimizer (python/accelkit/torch/gossip.py): `ak launch`
jobs of 4 ranks (power of two: symmetric exponential pairs) and 3 ranks (directed
exponential ring, a rank left out of each random matching) run tests/python/gossip_worker.py;
every rank checks its parameters against a numpy simulation of all ranks, and gossip's
convergence against allreduce-SGD's.

    AK_BIN=build/ak AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python \\
        /usr/bin/python3 -m unittest -v tests/python/test_gossip.py
"""
import json
import sys
import tempfile
import unittest
from pathlib import Path

from test_horovod import launch

HERE = Path(__file__).resolve().parent


class TestGossip(unittest.TestCase):
    def run_ranks(self, np):
        with tempfile.TemporaryDirectory() as out:
            rc, log = launch([sys.executable, HERE / "gossip_worker.py", out], np=np,
                             timeout=120)
            self.assertEqual(rc, 0, log[-4000:])
            failed = {}
            for r in range(np):
                path = Path(out) / f"gossip.{r}.json"
                self.assertTrue(path.exists(), f"rank {r} wrote no results\n{log[-4000:]}")
                for name, res in json.loads(path.read_text()).items():
                    if res != "ok":
                        failed[f"rank {r}: {name}"] = res
            self.assertEqual(failed, {}, "\n".join(f"{k}\n{v}" for k, v in failed.items()))
            print(log[-1500:])

    def test_four_ranks(self):
        self.run_ranks(4)

    def test_three_ranks(self):
        self.run_ranks(3)


if __name__ == "__main__":
    unittest.main()
