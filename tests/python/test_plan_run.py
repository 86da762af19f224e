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
import json
import os
import subprocess
import sys
import tempfile
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


def ak(*args, check=True):
    exe = os.environ.get("AK_BIN") or str(torchrun_ranks.ROOT / "build" / "ak")
    out = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError(f"ak {' '.join(map(str, args))} exited {out.returncode}:\n"
                             f"{out.stdout}{out.stderr}")
    return out


class TestPlanRunCli(unittest.TestCase):
    """ak sysinfo --cluster-json -> ak plan -> ak train on 2 ranks of a tiny model."""

    def test_sysinfo_plan_train(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            (d / "comm.txt").write_text("# from ak bench comm --calibrate\n"
                                        "intra_alpha_us 2.5\nintra_beta_gbps 3\n")
            cluster = ak("sysinfo", "--cluster-json", "--quick", "--ranks", 2,
                         "--comm-tuning", d / "comm.txt").stdout
            c = json.loads(cluster)
            self.assertEqual((c["devices_per_node"], c["intra_latency_us"], c["value_bytes"]),
                             (2, 2.5, 4))
            (d / "cluster.json").write_text(cluster)
            model = {"name": "tiny", "layers": 2, "hidden": 32, "heads": 4, "vocab": 64,
                     "seq_len": 16}
            (d / "m.json").write_text(json.dumps(model))
            plan = ak("plan", "--model", d / "m.json", "--cluster", d / "cluster.json",
                      "--gbs", 4, "--attention", "standard", "--offload", "none", "--json",
                      "--tp", 2, "--pp", 1, "--dp", 1, "--sp", "on").stdout
            (d / "plan.json").write_text(plan)
            p = json.loads(plan)["plans"][0]
            # fp32 weights: 4 bytes per parameter of this rank's half (tp=2)
            self.assertAlmostEqual(p["memory"]["weights_bytes"],
                                   4 * json.loads(plan)["params"] / 2, delta=4 * 64 * 32)
            env = dict(os.environ, AK_PYTHON=sys.executable)
            exe = os.environ.get("AK_BIN") or str(torchrun_ranks.ROOT / "build" / "ak")
            out = subprocess.run([exe, "train", "--plan", d / "plan.json", "--model",
                                  d / "m.json", "--steps", "2"], capture_output=True,
                                 text=True, timeout=120, env=env)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            for want in ("plan 0: tp=2 pp=1 dp=1", "step time   measured", "predicted",
                         "MFU         measured", "memory per rank"):
                self.assertIn(want, out.stdout)
            bad = ak("sysinfo", "--cluster-json", "--quick", check=False)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("--comm-tuning", bad.stderr)


if __name__ == "__main__":
    unittest.main()
