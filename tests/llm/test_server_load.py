"""bench/llm/server_load.py, the server load test: RealServer runs its short form against
`ak serve` on a small random model (200 connections for 25 s, malformed requests and
disconnects mixed in; every criterion of the tool must hold); ToolFails points it at
fake_oai_server.py in each of its broken modes and checks that the tool fails the run
and names the fault — so the load test can fail.
Environment: AK_BIN (the ak binary)."""
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "bench", "llm", "server_load.py")
AK = os.environ.get("AK_BIN", os.path.join(ROOT, "build", "ak"))


def run_tool(*args, timeout=300):
    p = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


class ToolFails(unittest.TestCase):
    """Each broken server makes the tool exit 1 with the fault named."""

    def fake(self, mode, expect):
        with tempfile.TemporaryDirectory() as d:
            portfile = os.path.join(d, "port")
            srv = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_oai_server.py"),
                                    mode, portfile])
            try:
                for _ in range(100):
                    if os.path.exists(portfile) and open(portfile).read():
                        break
                    time.sleep(0.05)
                port = open(portfile).read()
                rc, out = run_tool("--url", f"http://127.0.0.1:{port}/v1", "--pid", str(srv.pid),
                                   "--connections", "20", "--duration", "6",
                                   "--request-timeout", "10")
            finally:
                srv.kill()
                srv.wait()
        self.assertEqual(rc, 1, out)
        self.assertIn("server_load: FAIL", out)
        for e in expect:
            self.assertIn(e, out)
        return out

    def test_garbage_bodies(self):
        self.fake("garbage", ["request(s) failed", "body is not JSON"])

    def test_dropped_requests(self):
        self.fake("drop", ["request(s) failed"])

    def test_stream_without_done(self):
        self.fake("no_done", ["stream ended without data: [DONE]"])

    def test_health_failing(self):
        self.fake("health", ["/health failed", "HTTP 503"])

    def test_memory_growing(self):
        self.fake("leak", ["resident memory grew"])

    def test_malformed_accepted(self):
        self.fake("accept_bad", ["malformed", "answered wrongly", "HTTP 200"])


class RealServer(unittest.TestCase):
    """The short load against ak serve: must pass every criterion."""

    def test_short_load(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "tiny.gguf")
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "llm-make-model"),
                            "--dim", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                            "--ffn", "128", "--ctx", "256", "--seed", "5", "--type", "f32",
                            "--out", model], check=True, stdout=subprocess.DEVNULL)
            rc, out = run_tool("--ak", AK, "--model", model, "--connections", "200",
                               "--duration", "25", "--max-tokens", "8",
                               "--serve-arg=--chat-format=chatml", "--serve-arg=-t",
                               "--serve-arg=1", "--server-log", os.path.join(d, "server.log"))
            print(out)
            if rc != 0 and os.path.exists(os.path.join(d, "server.log")):
                print(open(os.path.join(d, "server.log")).read()[-3000:])
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
