"""Elastic jobs end to end: `ak launch` in elastic mode running tests/python/elastic_worker.py
(hvd.elastic.TorchState + hvd.elastic.run) while workers die, hosts come and hosts go.

Every batch's global data are fixed, so each job's final parameters must equal plain
single-process training on the same batches, whatever worlds the job went through.
Other hosts are names that a stand-in ssh (first on PATH) runs on this machine, as
tests/cli/test_cli.sh does. Needs torch; skipped without it.

    AK_BIN=build/ak AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python \\
        python3 -m unittest -v tests/python/test_elastic.py
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import test_horovod
from test_horovod import launch

HERE = Path(__file__).resolve().parent
WORKER = HERE / "elastic_worker.py"

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def setUpModule():
    test_horovod.setUpModule()


def reference_params():
    """Single-process training on the whole of every batch (elastic_worker's model)."""
    sys.path.insert(0, str(HERE))
    import elastic_worker as w
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for b in range(w.BATCHES):
        x, y = w.global_batch(b)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().flatten().tolist() for p in model.parameters()]


class TestElasticLaunch(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ak-elastic-")
        self.fake = os.path.join(self.dir, "bin")
        os.mkdir(self.fake)
        with open(os.path.join(self.fake, "ssh"), "w") as f:  # runs the command line here
            f.write('#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift 2; done\nshift\n'
                    'cd /\nexec setsid -w sh -c "$*"\n')
        os.chmod(os.path.join(self.fake, "ssh"), 0o755)

    def run_job(self, flags, scenario, arg="", timeout=180, env=None):
        env = {"PATH": self.fake + os.pathsep + os.environ["PATH"], **(env or {})}
        return launch([*flags, "--", sys.executable, str(WORKER), self.dir, scenario, arg],
                      np=flags_np(flags), env=env, timeout=timeout)

    def results(self):
        return read_results(self.dir)

    def assert_trained_like_reference(self, results, out):
        ref = reference_params()
        for r in results.values():
            self.assertEqual(r["batch"], 14, out[-3000:])
            for got, want in zip(r["params"], ref):
                for a, b in zip(got, want):
                    self.assertAlmostEqual(a, b, delta=1e-5 * max(1.0, abs(b)), msg=out[-3000:])

    def discovery(self, hosts):
        path = os.path.join(self.dir, "hosts")
        with open(path, "w") as f:
            f.write("\n".join(hosts) + "\n")
        return path

    def test_a_lost_worker_leaves_the_others_training(self):
        rc, out = self.run_job(["--min-np", "2", "-H", "localhost:3", "-np", "3"], "kill", "2")
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("worker 2 exited with 7", out)
        res = self.results()
        self.assertEqual(sorted(res), [0, 1], out[-3000:])
        for r in res.values():
            self.assertEqual(r["size"], 2)
            self.assertEqual(r["sizes"][:5], [3] * 5)
            self.assertEqual(set(r["sizes"][5:]), {2})
            self.assertEqual(r["resets"], 1)
        self.assert_trained_like_reference(res, out)

    def test_a_lost_worker_with_the_fused_overlapped_optimizer(self):
        """The runtime applies FusedSGD's updates as gradients arrive: a reset must drop
        the old runtime's handles and half-applied step bookkeeping."""
        rc, out = self.run_job(["--min-np", "2", "-H", "localhost:3", "-np", "3"], "kill", "1",
                               env={"ELASTIC_FUSED": "1"})
        self.assertEqual(rc, 0, out[-4000:])
        res = self.results()
        self.assertEqual(sorted(res), [0, 2], out[-3000:])
        self.assert_trained_like_reference(res, out)

    def test_a_failed_host_comes_back_after_its_cooldown(self):
        """A worker on nodeb fails: nodeb gets no workers for 1 s, then a replacement; it
        joins if training is still going, or is told to leave if it has ended. Either way
        the job succeeds with the reference parameters."""
        hosts = self.discovery(["localhost:2", "nodeb:1"])
        rc, out = self.run_job(["--host-discovery-script", f"cat {hosts}", "--min-np", "2",
                                "--blacklist-cooldown-range", "1", "1"], "kill", "2",
                               env={"ELASTIC_BATCH_SLEEP": "0.4"})
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("worker 2 exited with 7; no new workers on its host nodeb for 1 s", out)
        self.assertIn("host nodeb's cooldown is over", out)
        res = self.results()
        self.assertIn(0, res, out[-3000:])
        self.assertIn(1, res, out[-3000:])
        if 3 in res:  # the replacement made it into a round: synced from rank 0
            self.assertEqual(res[3]["size"], 3)
        self.assert_trained_like_reference(res, out)

    def test_losing_rank_0_keeps_the_state(self):
        """Rank 0 holds no rendezvous (the launcher does); worker 1 becomes rank 0 with the
        committed state and syncs it to the others."""
        rc, out = self.run_job(["--min-np", "2", "-H", "localhost:3", "-np", "3"], "kill", "0")
        self.assertEqual(rc, 0, out[-4000:])
        res = self.results()
        self.assertEqual(sorted(res), [1, 2], out[-3000:])
        self.assertEqual([res[1]["rank"], res[2]["rank"]], [0, 1])
        self.assert_trained_like_reference(res, out)

    def test_a_discovered_host_joins(self):
        hosts = self.discovery(["localhost:2"])
        script = os.path.join(self.dir, "discover.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\ncat {hosts}\n")
        os.chmod(script, 0o755)
        rc, out = self.run_job(["--host-discovery-script", script, "--min-np", "2",
                                "--max-np", "3"], "grow", hosts)
        self.assertEqual(rc, 0, out[-4000:])
        res = self.results()
        self.assertEqual(sorted(res), [0, 1, 2], out[-3000:])
        self.assertEqual(res[2]["size"], 3)
        self.assertEqual(res[0]["rank"], 0)  # the new worker did not take rank 0
        for r in res.values():
            self.assertEqual(r["sizes"][:4], [2] * 4)  # synced from rank 0 on joining
            self.assertEqual(set(r["sizes"][4:]), {3})
        self.assert_trained_like_reference(res, out)

    def test_a_removed_host_leaves(self):
        hosts = self.discovery(["localhost:2", "nodeb:1"])
        rc, out = self.run_job(["--host-discovery-script", f"cat {hosts}", "--min-np", "2"],
                               "shrink", hosts)
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("took worker 2 out of the job", out)
        res = self.results()
        self.assertEqual(sorted(res), [0, 1], out[-3000:])
        for r in res.values():
            self.assertEqual(r["sizes"][:4], [3] * 4)
            self.assertEqual(set(r["sizes"][4:]), {2})
        self.assert_trained_like_reference(res, out)

    def test_reset_limit_0_forbids_any_change(self):
        rc, out = self.run_job(["--min-np", "2", "-np", "3", "--reset-limit", "0"], "kill", "2",
                               timeout=60)
        self.assertEqual(rc, 7, out[-4000:])
        self.assertIn("the job re-formed 0 times, its --reset-limit; stopping", out)
        self.assertEqual(self.results(), {})

    def test_below_min_np_the_job_stops_at_the_timeout(self):
        rc, out = self.run_job(["--min-np", "2", "-np", "2", "--elastic-timeout", "3"], "kill", "1",
                               timeout=60)
        self.assertEqual(rc, 7, out[-4000:])
        self.assertIn("too few workers to form a round (1 worker(s), --min-np 2", out)
        self.assertEqual(self.results(), {})

    def test_a_signal_to_the_launcher_stops_every_worker(self):
        pids = os.path.join(self.dir, "pids")
        cmd = [test_horovod.ak_bin(), "launch", "-np", "2", "--min-np", "1", "--", "sh", "-c",
               f"echo $$ >> {pids}; exec sleep 60"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        for _ in range(100):
            if len(read_words(pids)) == 2:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, out)
        self.assertIn("stopped by signal 15", out)
        for pid in read_words(pids):
            with self.assertRaises(ProcessLookupError, msg=f"worker {pid} outlived the job"):
                os.kill(int(pid), 0)

    def test_bad_flags_are_refused(self):
        rc, out = launch(["--min-np", "3", "--max-np", "2", "true"], np=2, timeout=30)
        self.assertEqual(rc, 2)
        self.assertIn("--min-np 3 is more than --max-np 2", out)
        rc, out = launch(["--blacklist-cooldown-range", "9", "3", "true"], np=2, timeout=30)
        self.assertNotEqual(rc, 0)
        self.assertIn("for --blacklist-cooldown-range: want MIN MAX", out)


class TestElasticAcrossHosts(unittest.TestCase):
    """Hosts as network namespaces on a bridge (as scripts/netns-cluster makes them): the
    launcher runs in the first, a stand-in ssh runs a host's workers in its namespace, so
    workers talk TCP across hosts and reach the launcher at its bridge address. Needs root
    and iproute2; skipped otherwise."""

    HOSTS = 3

    def setUp(self):
        if os.geteuid() != 0 or not shutil.which("ip"):
            self.skipTest("needs root and ip(8) for network namespaces")
        self.dir = tempfile.mkdtemp(prefix="ak-elastic-ns-")
        self.tag = f"ake{os.getpid() % 100000}"
        self.net = f"10.232.{os.getpid() % 250}"
        self.addCleanup(self.teardown_net)
        try:
            self.setup_net()
        except subprocess.CalledProcessError as e:
            self.skipTest(f"cannot create network namespaces: {e}")
        self.fake = os.path.join(self.dir, "bin")
        os.mkdir(self.fake)
        cases = "".join(f'  {self.addr(h)}) ns={self.tag}h{h} ;;\n' for h in range(self.HOSTS))
        with open(os.path.join(self.fake, "ssh"), "w") as f:
            f.write('#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift 2; done\n'
                    f'case "$1" in\n{cases}  *) echo "no host $1" >&2; exit 255 ;;\nesac\n'
                    'shift\ncd /\nexec ip netns exec "$ns" setsid -w sh -c "$*"\n')
        os.chmod(os.path.join(self.fake, "ssh"), 0o755)

    def addr(self, h):
        return f"{self.net}.{h + 1}"

    def ip(self, *args):
        subprocess.run(["ip", *args], check=True, capture_output=True)

    def setup_net(self):
        self.ip("link", "add", f"{self.tag}br", "type", "bridge")
        self.ip("link", "set", f"{self.tag}br", "up")
        for h in range(self.HOSTS):
            ns, outer, inner = f"{self.tag}h{h}", f"{self.tag}v{h}", f"{self.tag}i{h}"
            self.ip("netns", "add", ns)
            self.ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            self.ip("link", "set", inner, "netns", ns)
            self.ip("link", "set", outer, "master", f"{self.tag}br", "up")
            self.ip("-n", ns, "link", "set", "lo", "up")
            self.ip("-n", ns, "addr", "add", f"{self.addr(h)}/24", "dev", inner)
            self.ip("-n", ns, "link", "set", inner, "up")

    def teardown_net(self):
        for h in range(self.HOSTS):
            subprocess.run(["ip", "netns", "del", f"{self.tag}h{h}"], capture_output=True)
            subprocess.run(["ip", "link", "del", f"{self.tag}v{h}"], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{self.tag}br"], capture_output=True)

    def test_plain_launch_across_namespaces(self):
        """Not elastic: ranks on two hosts find each other without AK_COMM_BIND_ADDR (each
        publishes the address its store connection leaves from, not 127.0.0.1)."""
        env = {"PATH": self.fake + os.pathsep + os.environ["PATH"], "AK_COMM_BIND_ADDR": None}
        code = ("import torch, horovod.torch as hvd; hvd.init(); "
                "x = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum); "
                "print('sum', hvd.size(), hvd.cross_size(), x.tolist())")
        cmd = ["ip", "netns", "exec", f"{self.tag}h0", test_horovod.ak_bin(), "launch", "-np", "2",
               "-H", f"{self.addr(0)}:1,{self.addr(1)}:1", "--", sys.executable, "-c", code]
        rc, out = launch(cmd, env=env, timeout=120, prefix=())
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("[1] sum 2 2 [3.0, 3.0, 3.0]", out)

    def test_a_host_joins_across_namespaces(self):
        hosts = os.path.join(self.dir, "hosts")
        with open(hosts, "w") as f:
            f.write(f"{self.addr(0)}:1\n{self.addr(1)}:1\n")
        env = {"PATH": self.fake + os.pathsep + os.environ["PATH"]}
        cmd = ["ip", "netns", "exec", f"{self.tag}h0", test_horovod.ak_bin(), "launch",
               "--host-discovery-script", f"cat {hosts}", "--min-np", "2", "--max-np", "3",
               "--", sys.executable, str(WORKER), self.dir, "grow", hosts, f"{self.addr(2)}:1"]
        rc, out = launch(cmd, env=env, timeout=180, prefix=())
        self.assertEqual(rc, 0, out[-4000:])
        self.assertIn("round 1: 3 worker(s)", out)
        res = read_results(self.dir)
        self.assertEqual(sorted(res), [0, 1, 2], out[-3000:])
        for r in res.values():
            self.assertEqual(set(r["sizes"][4:]), {3})
        TestElasticLaunch.assert_trained_like_reference(self, res, out)


def read_results(folder):
    """worker id -> what that worker wrote on finishing (elastic_worker.py)."""
    out = {}
    for path in glob.glob(os.path.join(folder, "worker.*.json")):
        with open(path) as f:
            r = json.load(f)
        out[r["id"]] = r
    return out


def read_words(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().split()


def flags_np(flags):
    """launch() puts -np first; the flags here carry their own -np when they need one."""
    return int(flags[flags.index("-np") + 1]) if "-np" in flags else 1


if __name__ == "__main__":
    unittest.main()
