"""Tests of the Horovod PyTorch API on accelkit (python/accelkit/torch, python/horovod).

Multi-rank tests start `ak launch -np 2` (the ak binary from AK_BIN, else build/ak) with
PYTHONPATH=python and AK_LIBRARY, running tests/python/hvd_worker.py; each rank writes its
results to a temporary folder. Needs torch (Debian python3-torch); skipped without it or
when the library was built without the training runtime.

    AK_BIN=build/ak AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python \\
        python3 -m unittest -v tests/python/test_horovod.py
"""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORKER = HERE / "hvd_worker.py"

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def setUpModule():
    if torch is None:
        raise unittest.SkipTest("torch is not installed (Debian: python3-torch)")
    from accelkit.torch import _ctypes_train
    if not _ctypes_train.available():
        raise unittest.SkipTest("libaccelkit was built without the training runtime")


def ak_bin():
    found = os.environ.get("AK_BIN")
    if found:
        return found
    for b in ("build", "build-release", "build-py"):
        if (ROOT / b / "ak").exists():
            return str(ROOT / b / "ak")
    return shutil.which("ak") or "ak"


def rank_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                      os.environ.get("PYTHONPATH")]))
    if not env.get("AK_LIBRARY"):
        from accelkit import _lib
        env["AK_LIBRARY"] = _lib.lib._name
    # an op that never completes (a runtime bug) fails instead of hanging the test
    env.setdefault("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "30")
    env.setdefault("AK_COMM_TIMEOUT", "30000")
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def launch(args, np=2, env=None, timeout=240, prefix=("launch",)):
    """Runs `ak launch -np N args...` in its own session; kills the whole group on a
    timeout. Returns (returncode, combined output)."""
    cmd = [ak_bin(), *prefix, "-np", str(np), *map(str, args)] if prefix else list(args)
    proc = subprocess.Popen(cmd, env=rank_env(env), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"timed out after {timeout}s: {' '.join(cmd)}\n{out[-4000:]}")
    return proc.returncode, out


# ---- in-process: the API surface --------------------------------------------------------

class TestApiSurface(unittest.TestCase):
    def test_horovod_names_exist(self):
        import horovod.torch as hvd
        names = """init shutdown is_initialized size rank local_size local_rank cross_size
            cross_rank is_homogeneous mpi_threads_supported mpi_enabled mpi_built gloo_enabled
            gloo_built nccl_built ddl_built ccl_built cuda_built rocm_built start_timeline
            stop_timeline allreduce allreduce_async allreduce_ allreduce_async_
            grouped_allreduce grouped_allreduce_async grouped_allreduce_
            grouped_allreduce_async_ sparse_allreduce_async allgather allgather_async
            grouped_allgather grouped_allgather_async broadcast broadcast_async broadcast_
            broadcast_async_ alltoall alltoall_async reducescatter reducescatter_async
            grouped_reducescatter grouped_reducescatter_async poll synchronize join barrier
            broadcast_parameters broadcast_optimizer_state broadcast_object allgather_object
            DistributedOptimizer Compression Average Sum Adasum Min Max Product ProcessSet
            add_process_set remove_process_set global_process_set SyncBatchNorm elastic
            FusedSGD FusedAdam FusedAdamW FusedLAMB""".split()
        missing = [n for n in names if not hasattr(hvd, n)]
        self.assertEqual(missing, [])
        self.assertEqual((hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product),
                         (0, 1, 2, 3, 4, 5))
        import horovod.torch.mpi_ops  # noqa: F401
        import horovod.common.util  # noqa: F401
        from horovod.common.exceptions import HorovodInternalError
        from accelkit import AccelkitError
        self.assertTrue(issubclass(HorovodInternalError, RuntimeError))
        self.assertTrue(issubclass(HorovodInternalError, AccelkitError))
        self.assertIs(HorovodInternalError, hvd.HorovodInternalError)

    def test_not_initialized(self):
        import horovod.torch as hvd
        self.assertFalse(hvd.is_initialized())
        with self.assertRaisesRegex(ValueError, "not been initialized"):
            hvd.size()
        with self.assertRaisesRegex(ValueError, "not been initialized"):
            hvd.allreduce(torch.ones(1))

    def test_compression_api(self):
        import horovod.torch as hvd
        t = torch.arange(4, dtype=torch.float32)
        c, ctx = hvd.Compression.fp16.compress(t)
        self.assertEqual(c.dtype, torch.float16)
        self.assertEqual(hvd.Compression.fp16.decompress(c, ctx).dtype, torch.float32)
        c, ctx = hvd.Compression.bf16.compress(t.double())
        self.assertEqual(c.dtype, torch.bfloat16)
        self.assertEqual(hvd.Compression.bf16.decompress(c, ctx).dtype, torch.float64)
        i = torch.arange(3)
        self.assertIs(hvd.Compression.fp16.compress(i)[0], i)
        self.assertIs(hvd.Compression.none.compress(t)[0], t)
        dgc = hvd.Compression.dgc(sparsity=0.99, momentum=0.5, warmup_steps=10)
        self.assertAlmostEqual(dgc._ak_dgc.sparsity, 0.99, places=6)
        self.assertEqual(dgc._ak_dgc.warmup_steps, 10)
        with self.assertRaises(ValueError):
            hvd.Compression.dgc(sparsity=1.5)

    def test_process_set_validation(self):
        import horovod.torch as hvd
        ps = hvd.ProcessSet([2, 0])
        self.assertEqual(ps.ranks, [0, 2])
        self.assertIsNone(ps.process_set_id)
        with self.assertRaises(ValueError):
            hvd.ProcessSet([0, 0])
        with self.assertRaises(ValueError):
            hvd.ProcessSet(object())
        with self.assertRaisesRegex(ValueError, "not registered"):
            ps.size()

    def test_unsupported_is_clear(self):
        import horovod
        import horovod.torch as hvd
        # accelkit extensions stay out of Horovod's namespace
        import accelkit.torch
        self.assertTrue(hasattr(accelkit.torch, "LocalSGD"))
        self.assertFalse(hasattr(hvd, "LocalSGD"))

    def test_fused_optimizer_arguments(self):
        import horovod.torch as hvd
        params = torch.nn.Linear(2, 2).parameters()
        with self.assertRaises(ValueError):
            hvd.FusedAdam(params, amsgrad=True)
        with self.assertRaises(ValueError):
            hvd.FusedSGD(torch.nn.Linear(2, 2).parameters(), lr=0.1, nesterov=True)
        opt = hvd.FusedAdamW(torch.nn.Linear(2, 2).parameters())
        self.assertIsInstance(opt, torch.optim.Optimizer)
        self.assertEqual(opt.defaults["weight_decay"], 1e-2)

    def test_struct_layout_matches_header(self):
        """ctypes mirrors against the C header: sizeof and every field offset."""
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if not cc:
            self.skipTest("no C compiler")
        from accelkit.torch import _ctypes_train as ct
        structs = {"ak_train_op": ct.TrainOp, "ak_optim_config": ct.OptimConfig,
                   "ak_dgc_config": ct.DgcConfig, "ak_train_config": ct.TrainConfig,
                   "ak_train_stats": ct.TrainStats}
        lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "accelkit/train.h"',
                 "int main(void) {"]
        for cname, py in structs.items():
            lines.append(f'printf("{cname} sizeof %zu\\n", sizeof({cname}));')
            for field, _ in py._fields_:
                lines.append(f'printf("{cname} {field} %zu\\n", offsetof({cname}, {field}));')
        lines.append("return 0; }")
        with tempfile.TemporaryDirectory() as tmp:
            src, exe = Path(tmp) / "layout.c", Path(tmp) / "layout"
            src.write_text("\n".join(lines))
            # accelkit/version.h is generated into the build folder's include/
            generated = Path(os.environ.get("AK_LIBRARY", ROOT / "build" / "x")).parent / "include"
            build = subprocess.run([cc, "-I", str(ROOT / "include"), "-I", str(generated),
                                    str(src), "-o", str(exe)], capture_output=True, text=True)
            self.assertEqual(build.returncode, 0, build.stderr)
            out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            cname, field, value = line.split()
            py = structs[cname]
            got = ctypes.sizeof(py) if field == "sizeof" else getattr(py, field).offset
            self.assertEqual(got, int(value), f"{cname}.{field}")


# ---- two ranks: every case of hvd_worker.py ---------------------------------------------

class WorkerCases(unittest.TestCase):
    """Base of the suites where one `ak launch -np 2` of a worker script's "ops" mode runs
    every case of its CASES list and each rank writes {case: "ok" | "skipped" | error} to
    ops.<rank>.json; add_case_tests() then makes one test per case."""

    WORKER = None            # the worker script
    TIMEOUT = 300
    ENV = {}                 # extra environment of the job
    SKIPPED = {}             # case -> why a "skipped" result is expected

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hvd_ops_")
        try:
            cls.rc, cls.output = launch([sys.executable, cls.WORKER, "ops", cls.tmp],
                                        timeout=cls.TIMEOUT, env=cls.ENV)
        except AssertionError as e:
            cls.rc, cls.output = -1, str(e)
        cls.results = []
        for r in range(2):
            path = Path(cls.tmp) / f"ops.{r}.json"
            cls.results.append(json.loads(path.read_text()) if path.exists() else None)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_case(self, name):
        for r, res in enumerate(self.results):
            self.assertIsNotNone(res, f"rank {r} wrote no results (exit {self.rc}):\n"
                                      f"{self.output[-6000:]}")
            self.assertIn(name, res, f"rank {r} did not run {name}")
            if res[name] == "skipped":
                self.skipTest(self.SKIPPED.get(name, "skipped (HVD_SKIP)"))
            self.assertEqual(res[name], "ok", f"rank {r}, {name}:\n{res[name]}")


def add_case_tests(suite, worker_module):
    """One test method on `suite` per case function of the worker's CASES."""
    for fn in worker_module.CASES:
        def test(self, name=fn.__name__):
            self.check_case(name)
        test.__doc__ = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
        setattr(suite, f"test_{fn.__name__}", test)


class TestTwoRanks(WorkerCases):
    """One `ak launch -np 2` runs every case of hvd_worker.py; one test per case."""

    WORKER = WORKER
    ENV = {"HVD_TEST_REINIT": os.environ.get("HVD_TEST_REINIT")}
    SKIPPED = {
        "reinit": "shutdown() then init() in one process: the new ak_comm_init races with "
                  "the peers' previous store and shared memory; set HVD_TEST_REINIT=1 to run it",
    }


def _add_case_tests():
    sys.path.insert(0, str(HERE))
    try:
        import hvd_worker
    except ImportError:  # torch missing: setUpModule skips everything
        return
    add_case_tests(TestTwoRanks, hvd_worker)


_add_case_tests()


class TestFusion(unittest.TestCase):
    def test_fusion_on_off_bit_identical(self):
        """HOROVOD_FUSION_THRESHOLD=0, the default and the default with three fusion streams
        (AK_FUSION_STREAMS=3) give bit-identical parameters."""
        with tempfile.TemporaryDirectory() as tmp:
            # None: unset, the default (128 MiB; one stream)
            for threshold, streams in (("0", None), (None, None), (None, "3")):
                rc, out = launch([sys.executable, WORKER, "fusion", tmp],
                                 env={"HOROVOD_FUSION_THRESHOLD": threshold,
                                      "AK_FUSION_STREAMS": streams}, timeout=120)
                self.assertEqual(rc, 0, out[-4000:])
            runs = {}
            for label in ("0", "default", "default.streams3"):
                runs[label] = [torch.load(Path(tmp) / f"fusion.{label}.{r}.pt") for r in range(2)]
        unfused, fused, streamed = runs["0"], runs["default"], runs["default.streams3"]
        for r in range(2):
            for a, b in zip(unfused[r]["params"], fused[r]["params"]):
                self.assertTrue(torch.equal(a, b), f"rank {r}: fused and unfused differ")
            for a, b in zip(streamed[r]["params"], fused[r]["params"]):
                self.assertTrue(torch.equal(a, b), f"rank {r}: 3 streams and 1 differ")
            for a, b in zip(fused[r]["params"], fused[0]["params"]):
                self.assertTrue(torch.equal(a, b), f"rank {r} differs from rank 0")
        self.assertEqual(unfused[0]["stats"]["fused_buffers"], 0, unfused[0]["stats"])
        self.assertGreater(fused[0]["stats"]["fused_buffers"], 0, fused[0]["stats"])
        self.assertLess(fused[0]["stats"]["collectives"], unfused[0]["stats"]["collectives"])

    def test_bad_fusion_streams_refused_by_name(self):
        """AK_FUSION_STREAMS out of 1-8 makes hvd.init() fail naming the variable."""
        rc, out = launch([sys.executable, "-c", "import horovod.torch as hvd; hvd.init()"],
                         env={"AK_FUSION_STREAMS": "9"}, timeout=60, prefix=None)
        self.assertNotEqual(rc, 0, out[-4000:])
        self.assertIn("AK_FUSION_STREAMS=9 is out of range", out)


class TestTimeline(unittest.TestCase):
    """A timeline started by HOROVOD_TIMELINE: stop_timeline() ends it, start_timeline()
    switches files instead of raising, and a killed rank 0 leaves its events on disk."""

    def run_case(self, what, tmp):
        rc, out = launch([sys.executable, WORKER, "timeline", tmp], timeout=120,
                         env={"HOROVOD_TIMELINE": str(Path(tmp) / "env.json"),
                              "HVD_TIMELINE_CASE": what})
        seen = []
        for r in range(2):
            path = Path(tmp) / f"timeline.{r}.json"
            self.assertTrue(path.exists(), f"rank {r} wrote nothing (exit {rc}):\n{out[-4000:]}")
            seen.append(json.loads(path.read_text()))
            self.assertEqual(seen[r]["calls"], "ok", f"rank {r}")
        return rc, out, seen[0]

    def test_stop_ends_the_variables_timeline(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, seen = self.run_case("stop", tmp)
            self.assertEqual(rc, 0, out[-4000:])
            text = seen["env.json"]
            events = json.loads(text)["traceEvents"]  # complete before shutdown
            names = {e["name"] for e in events}
            self.assertIn("allreduce.env_op", names)
            after = (Path(tmp) / "env.json").read_text()
            self.assertNotIn("untraced_op", after)

    def test_start_switches_and_a_killed_rank_keeps_its_events(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, seen = self.run_case("switch", tmp)
            self.assertNotEqual(rc, 0, "rank 0 was killed: ak launch should say so")
            names = {e["name"] for e in json.loads(seen["env.json"])["traceEvents"]}
            self.assertIn("allreduce.env_op", names)
            self.assertNotIn("allreduce.api_op", names)
            text = (Path(tmp) / "api.json").read_text()
            # killed: the events are there, only the closing brackets are missing
            self.assertFalse(text.rstrip().endswith("]}"), text[-200:])
            names = {e["name"] for e in json.loads(text + "\n]}\n")["traceEvents"]}
            self.assertIn("allreduce.api_op", names)


class TestOneRank(unittest.TestCase):
    def test_adasum_on_one_rank_is_plain_averaging(self):
        # as in Horovod: with one rank DistributedOptimizer(op=Adasum) is the plain one
        script = ("import torch, horovod.torch as hvd; hvd.init(); m = torch.nn.Linear(3, 1); "
                  "opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.5), "
                  "named_parameters=m.named_parameters(), op=hvd.Adasum); "
                  "w = m.weight.detach().clone(); m(torch.ones(2, 3)).sum().backward(); "
                  "opt.step(); print('delta', (w - m.weight).sum().item())")
        rc, out = launch([sys.executable, "-c", script], np=1, timeout=60)
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("delta 3.0", out)  # 3 weights, gradient 2 each, lr 0.5


class TestRankFailure(unittest.TestCase):
    def test_killed_rank_gives_an_error_not_a_hang(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = launch([sys.executable, WORKER, "kill", tmp], timeout=120)
            self.assertNotEqual(rc, 0, "ak launch reported success although rank 1 was killed")
            path = Path(tmp) / "kill.0.txt"
            self.assertTrue(path.exists(), f"the survivor wrote nothing:\n{out[-4000:]}")
            text = path.read_text()
        first, later = text.split("\nlater: ")
        self.assertTrue(first.startswith("error after"), text)
        self.assertLess(float(first.split()[2].rstrip("s:")), 40.0, text)
        self.assertTrue(later.startswith("error:"), text)


class TestExamples(unittest.TestCase):
    def test_mnist_like_two_ranks(self):
        rc, out = launch([sys.executable, "examples/train_mnist_like.py", "--steps", "12",
                          "--batch-size", "32", "--log-interval", "6"], timeout=120)
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("samples/s", out)
        self.assertIn("[0] step    12  loss", out)

    def test_mnist_like_one_rank(self):
        rc, out = launch([sys.executable, "examples/train_mnist_like.py", "--steps", "3",
                          "--batch-size", "16", "--fp16-allreduce"], np=1, timeout=120)
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("ranks 1", out)

    def test_resnet_fused_two_ranks(self):
        rc, out = launch([sys.executable, "examples/train_resnet.py", "--steps", "2",
                          "--batch-size", "4", "--image-size", "32", "--num-classes", "10",
                          "--fused", "--log-interval", "1"], timeout=180)
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("samples/s", out)

    def test_horovod_run(self):
        """horovod.run from a script: functions of __main__ reach the workers, results come
        back in rank order, a failing rank raises RuntimeError in the caller."""
        rc, out = launch([sys.executable, str(HERE / "hvd_run_script.py")],
                         env={"AK_BIN": ak_bin()}, timeout=120, prefix=())
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("results [(0, 2, 30.0), (1, 2, 30.0)] distinct pids 3", out)
        self.assertIn("error horovod.run: the job failed: `ak launch` exited with 1", out)
        self.assertIn("rank 1 fails on purpose", out)

    def test_horovodrun_script(self):
        env = {"AK_BIN": ak_bin(), "HOROVOD_AUTOTUNE": None, "AK_COMM_ALGO": None,
               "HOROVOD_HIERARCHICAL_ALLREDUCE": None}
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "tune.csv"
            rc, out = launch([str(ROOT / "scripts" / "horovodrun"), "-np", "2",
                              "--fusion-threshold-mb", "1", "--hierarchical-allreduce",
                              "--autotune", "--autotune-log-file", str(log),
                              sys.executable, "-c",
                              "import os, horovod.torch as hvd; hvd.init(); e = os.environ; "
                              "print('size', hvd.size(), e['HOROVOD_FUSION_THRESHOLD'], "
                              "e['HOROVOD_HIERARCHICAL_ALLREDUCE'], e['HOROVOD_AUTOTUNE'])"],
                             env=env, timeout=60, prefix=())
            self.assertEqual(rc, 0, out[-4000:])
            self.assertIn("[1] size 2 1048576 1 1", out)
            self.assertTrue(log.read_text().startswith("hierarchical_allreduce,"))


if __name__ == "__main__":
    unittest.main()
