#!/usr/bin/env python3
"""Slow-header ("slowloris") test of `ak serve`: holds N sockets that trickle a request
header one byte per interval (reconnecting when the server closes them, as an attacker
would), while a client polls GET /health every poll interval on fresh connections.
Prints a JSON summary (health latency percentiles, failures, what the trickling sockets
saw) and exits 1 when the /health p99 is over --p99-ms or any /health poll failed.

Stdlib only. Either point it at a running server (--host/--port) or let it start one
(--ak AK --model MODEL [-- extra ak serve flags]).

  bench/llm/slow_headers.py --ak build/ak --model m.gguf --sockets 300 --seconds 20
"""
import argparse
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

HEADER = (b"GET /health HTTP/1.1\r\nHost: localhost\r\nUser-Agent: slow-headers\r\n"
          + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 40) for i in range(200)))


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, need)) if hard != resource.RLIM_INFINITY else max(soft, need)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(args, extra):
    port = args.port or free_port()
    cmd = [args.ak, "serve", args.model, "--host", args.host, "--port", str(port),
           "--access-log", "off"] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = proc.stdout.readline().decode(errors="replace")
    if "ak serve:" not in line:
        proc.kill()
        sys.exit("FAIL: ak serve did not start: %r" % line)
    return proc, port


def health_once(host, port, timeout):
    t0 = time.perf_counter()
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    dt = time.perf_counter() - t0
    if not data.startswith(b"HTTP/1.1 200"):
        raise RuntimeError("answer: %r" % data[:80])
    return dt


def poller(args, port, stop, out):
    while not stop.is_set():
        t = time.perf_counter()
        try:
            out["lat"].append(health_once(args.host, port, args.health_timeout))
        except Exception as e:  # a failed poll is a result, not a crash
            out["fail"].append(repr(e))
        rest = args.poll - (time.perf_counter() - t)
        if rest > 0:
            stop.wait(rest)


class Trickler:
    """N sockets, each sending its next header byte once per interval."""

    def __init__(self, args, port):
        self.args, self.port = args, port
        self.sel = selectors.DefaultSelector()
        self.socks = {}  # socket -> bytes sent
        self.stats = {"opened": 0, "connect_failed": 0, "closed_by_server": 0,
                      "answered_by_server": 0}

    def open_one(self):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect((self.args.host, self.port))
        except BlockingIOError:
            pass
        except OSError:
            self.stats["connect_failed"] += 1
            s.close()
            return
        self.socks[s] = 0
        self.sel.register(s, selectors.EVENT_READ)
        self.stats["opened"] += 1

    def drop(self, s, answered):
        self.sel.unregister(s)
        s.close()
        del self.socks[s]
        self.stats["answered_by_server" if answered else "closed_by_server"] += 1

    def tick(self):
        for s in list(self.socks):
            sent = self.socks[s]
            try:
                s.send(HEADER[sent % len(HEADER):sent % len(HEADER) + 1])
                self.socks[s] = sent + 1
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.drop(s, False)
        while len(self.socks) < self.args.sockets:
            before = len(self.socks)
            self.open_one()
            if len(self.socks) == before:
                break

    def poll(self, timeout):
        for key, _ in self.sel.select(timeout):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            self.drop(s, bool(data))

    def close(self):
        for s in list(self.socks):
            s.close()


def percentile(v, p):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ak", help="start this ak serve ...")
    ap.add_argument("--model", help="... with this model")
    ap.add_argument("--sockets", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between header bytes")
    ap.add_argument("--poll", type=float, default=0.05, help="seconds between /health polls")
    ap.add_argument("--health-timeout", type=float, default=5.0)
    ap.add_argument("--p99-ms", type=float, default=100.0)
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    limit = raise_nofile(args.sockets + 256)
    if limit < args.sockets + 64:
        sys.exit("FAIL: RLIMIT_NOFILE is %d, too low for %d sockets" % (limit, args.sockets))
    proc = None
    if args.ak:
        if not args.model:
            sys.exit("--ak needs --model")
        proc, port = start_server(args, extra)
    elif not args.port:
        sys.exit("give --port of a running server, or --ak and --model")
    else:
        port = args.port
    try:
        tr = Trickler(args, port)
        tr.tick()
        stop = threading.Event()
        out = {"lat": [], "fail": []}
        th = threading.Thread(target=poller, args=(args, port, stop, out))
        t_end = time.monotonic() + args.seconds
        th.start()
        next_tick = time.monotonic() + args.interval
        while time.monotonic() < t_end:
            tr.poll(max(0.0, min(next_tick, t_end) - time.monotonic()))
            if time.monotonic() >= next_tick:
                tr.tick()
                next_tick += args.interval
        held = len(tr.socks)
        stop.set()
        th.join()
        tr.close()
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    lat_ms = [x * 1e3 for x in out["lat"]]
    p99 = percentile(lat_ms, 99)
    summary = {
        "sockets": args.sockets, "seconds": args.seconds, "held_at_end": held,
        "trickle": tr.stats, "health_polls": len(lat_ms), "health_failures": len(out["fail"]),
        "health_ms": {"p50": percentile(lat_ms, 50), "p90": percentile(lat_ms, 90),
                      "p99": p99, "max": max(lat_ms) if lat_ms else None},
        "first_failures": out["fail"][:3],
    }
    print(json.dumps(summary, indent=1))
    ok = lat_ms and not out["fail"] and p99 < args.p99_ms
    if proc and proc.returncode not in (0, None):
        print("FAIL: ak serve exited with %s" % proc.returncode)
        ok = False
    print("PASS" if ok else "FAIL: /health p99 %s ms (limit %g), %d failures"
          % (p99, args.p99_ms, len(out["fail"])))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
