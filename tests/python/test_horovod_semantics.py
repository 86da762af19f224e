"""Horovod behaviours where accelkit follows Horovod's documented semantics exactly
(docs/horovod-compat.md): integer scale factors, int16/bool reductions, duplicate names,
grouped autograd, broadcast in process sets, optimizer state without gradients, sparse
handles, join, reducescatter with Adasum (one `ak launch -np 2` of
hvd_semantics_worker.py ops, one test per case); then the launcher variables of Open MPI
and MPICH (PMI), HOROVOD_HIERARCHICAL_ALLREDUCE, HOROVOD_AUTOTUNE and a stalled rank, each
in its own short job.

    AK_BIN=build/ak AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python \\
        python3 -m unittest -v tests/python/test_horovod_semantics.py
"""
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_horovod import ROOT, WorkerCases, add_case_tests, launch, rank_env  # noqa: E402

WORKER = HERE / "hvd_semantics_worker.py"

try:
    import torch  # noqa: F401
except ImportError:  # a machine without torch: scripts/setup installs it
    torch = None


def setUpModule():
    if torch is None:
        raise RuntimeError("torch is not installed: run scripts/setup (Debian python3-torch)")


class TestSemantics(WorkerCases):
    """One `ak launch -np 2` runs every case of hvd_semantics_worker.py."""

    WORKER = WORKER
    TIMEOUT = 120


if torch is not None:
    import hvd_semantics_worker  # noqa: E402
    add_case_tests(TestSemantics, hvd_semantics_worker)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the variables of every launcher accelkit discovers, removed so that only the ones a
# test sets describe the world
LAUNCHER_VARS = ["AK_RANK", "AK_WORLD_SIZE", "AK_LOCAL_RANK", "AK_LOCAL_SIZE",
                 "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
                 "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                 "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                 "SLURM_LOCALID", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                 "MPI_LOCALNRANKS", "AK_ELASTIC", "HOROVOD_ELASTIC"]


class TestLauncherVariables(unittest.TestCase):
    """hvd.rank()/size()/local_rank() from an MPI launcher's variables when accelkit's own
    are absent: processes started directly, as mpirun / mpiexec would."""

    def run_world(self, per_rank):
        base = {k: None for k in LAUNCHER_VARS}
        base.update({"AK_MASTER_ADDR": "127.0.0.1", "AK_MASTER_PORT": str(free_port())})
        procs = []
        for r in range(2):
            env = rank_env({**base, **per_rank(r)})
            procs.append(subprocess.Popen([sys.executable, str(WORKER), "world"], env=env,
                                          cwd=ROOT, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outs = []
        for p in procs:
            try:
                outs.append(p.communicate(timeout=60)[0])
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise AssertionError("a rank did not finish within 60 s")
            self.assertEqual(p.returncode, 0, outs[-1][-3000:])
        return outs

    def test_open_mpi_variables(self):
        outs = self.run_world(lambda r: {
            "OMPI_COMM_WORLD_RANK": str(1 - r), "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_LOCAL_RANK": str(1 - r), "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
        for r in range(2):
            self.assertIn(f"world rank={1 - r} size=2 local_rank={1 - r} local_size=2", outs[r])

    def test_mpich_pmi_variables(self):
        outs = self.run_world(lambda r: {"PMI_RANK": str(r), "PMI_SIZE": "2",
                                         "MPI_LOCALRANKID": str(r), "MPI_LOCALNRANKS": "2"})
        for r in range(2):
            self.assertIn(f"world rank={r} size=2 local_rank={r} local_size=2", outs[r])


HIER_SCRIPT = """
import ctypes, torch, horovod.torch as hvd
from accelkit import _lib
from accelkit.torch import mpi_ops, _ctypes_train as ct
hvd.init()
comm = ctypes.c_void_p()
ct.C.ak_train_comm(mpi_ops._rt.train, ctypes.byref(comm))
choose = _lib.lib.ak_comm_choose_algo
choose.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)]
algo = ctypes.c_int()
assert choose(comm, 1 << 20, ctypes.byref(algo)) == 0
total = hvd.allreduce(torch.arange(6.0), op=hvd.Sum)
print("algo", algo.value, "sum", total.tolist())
"""


class TestHierarchicalAllreduce(unittest.TestCase):
    def algo_of(self, env):
        rc, out = launch([sys.executable, "-c", HIER_SCRIPT], env=env, timeout=60)
        self.assertEqual(rc, 0, out[-3000:])
        self.assertIn("sum [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]", out)
        return int(out.split("algo ")[1].split()[0])

    def test_variable_selects_the_hierarchical_algorithm(self):
        hierarchical = 6  # AK_COMM_ALGO_HIER_PIPE
        self.assertEqual(self.algo_of({"HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
                                       "AK_COMM_ALGO": None}), hierarchical)
        self.assertNotEqual(self.algo_of({"HOROVOD_HIERARCHICAL_ALLREDUCE": None,
                                          "AK_COMM_ALGO": None}), hierarchical)
        # an explicit AK_COMM_ALGO wins
        self.assertEqual(self.algo_of({"HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
                                       "AK_COMM_ALGO": "ring"}), 1)


AUTOTUNE_SCRIPT = """
import torch, horovod.torch as hvd
hvd.init()
ts = [torch.full((1000 * (i + 1),), float(hvd.rank() + 1)) for i in range(4)]
for step in range(120):
    outs = [hvd.synchronize(hvd.allreduce_async(t, name=f"g{i}", op=hvd.Sum))
            for i, t in enumerate(ts)]
    assert all(torch.equal(o, torch.full_like(o, 3.0)) for o in outs), step
print("trained")
"""

AUTOTUNE_HEADER = ("hierarchical_allreduce,hierarchical_allgather,torus_allreduce,"
                   "cache_enabled,cycle_time_ms,tensor_fusion_threshold,score")


class TestAutotune(unittest.TestCase):
    def run_tuned(self, extra):
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "autotune.csv"
            env = {"HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": str(log),
                   "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
                   "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
                   "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "5", **extra}
            rc, out = launch([sys.executable, "-c", AUTOTUNE_SCRIPT], env=env, timeout=90)
            self.assertEqual(rc, 0, out[-3000:])
            self.assertIn("trained", out)
            lines = log.read_text().splitlines()
        self.assertEqual(lines[0], AUTOTUNE_HEADER)
        rows = [[float(x) for x in line.split(",")] for line in lines[1:]]
        self.assertEqual(len(rows), 6, lines)  # 5 scored points, then the chosen one
        return rows

    def test_search_logs_points_and_keeps_the_best(self):
        rows = self.run_tuned({"HOROVOD_CYCLE_TIME": None, "HOROVOD_FUSION_THRESHOLD": None})
        scored, chosen = rows[:-1], rows[-1]
        points = {(r[4], r[5]) for r in scored}
        self.assertGreaterEqual(len(points), 4, "the search did not move")
        best = max(scored, key=lambda r: r[6])
        self.assertEqual(chosen, best)
        for r in scored:
            self.assertTrue(1 <= r[4] <= 100 and 0 <= r[5] <= 64, r)
            self.assertGreater(r[6], 0, r)

    def test_a_set_variable_fixes_its_dimension(self):
        rows = self.run_tuned({"HOROVOD_CYCLE_TIME": "2", "HOROVOD_FUSION_THRESHOLD": None})
        self.assertEqual({r[4] for r in rows}, {2.0})
        self.assertGreater(len({r[5] for r in rows}), 1)


class TestStalledRank(unittest.TestCase):
    def test_every_rank_fails_naming_the_op_and_the_missing_rank(self):
        """Rank 1 stops submitting (alive): with a 1 s check and a 2 s shutdown time rank 0
        fails within about 2 s, and rank 1's next op fails with the same reason; both name
        the op and the missing rank, and neither waits for the transport timeout."""
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = launch([sys.executable, WORKER, "stall", tmp], timeout=60,
                             env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "1",
                                  "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "2",
                                  "AK_COMM_TIMEOUT": "60000", "STALL_SLEEP": "4"})
            texts = []
            for r in range(2):
                path = Path(tmp) / f"stall.{r}.txt"
                self.assertTrue(path.exists(), f"rank {r} wrote nothing:\n{out[-3000:]}")
                texts.append(path.read_text())
        for r, text in enumerate(texts):
            self.assertIn("'allreduce.step.2'", text, f"rank {r}: {text}")
            self.assertIn("waited", text)
            self.assertIn("for ranks [1]", text, f"rank {r}: {text}")
        seconds = float(texts[0].split("s ", 1)[0])
        self.assertLess(seconds, 5.0, texts[0])  # 2 s shutdown time + cycles, not 60 s


if __name__ == "__main__":
    unittest.main()
