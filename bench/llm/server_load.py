#!/usr/bin/env python3
"""Bounded load test of `ak serve` (or any OpenAI-compatible server given by --url/--pid).
Standard library only (asyncio).

Starts `ak serve MODEL` (or attaches to --url with --pid), then for --duration seconds keeps
--connections client connections busy, each running one request after another on a fresh
connection:
  - well-formed completions and chat completions, streaming and not;
  - streams the client abandons after the first event (a disconnect mid-stream);
  - malformed requests: bad JSON, wrong field types, an oversized body, garbage bytes
    (and garbage starting with a NUL byte), headers sent halfway and the socket closed;
while /health is polled every --health-interval seconds on its own connection and the
server's resident memory (VmRSS of /proc/PID/status) is sampled every second.
--slow-headers N also holds N sockets that trickle a request header one byte a second
for the whole run (reopened when the server closes them).

The run passes only if all of these hold (each failure is printed with what was seen):
  1. every well-formed request that the client did not abandon got 200 and a valid body
     (JSON with choices; a stream of `data:` JSON events ending with `data: [DONE]`, or
     with a clean error event `data: {"error": ...}`);
  2. every malformed request got a 4xx answer or had its connection closed — never a 2xx
     or a 5xx, never a hang past --request-timeout (garbage bytes may also get an answer
     that is not HTTP);
  3. every /health poll answered 200 within --health-timeout;
  4. resident memory grew at most --max-rss-growth (5 %) over the last minute of the run
     (the last half of a run shorter than two minutes): the median of the window's last
     quarter of samples against the median of its first quarter;
  5. the server process is still alive at the end.
Exit status: 0 pass, 1 a criterion failed, 2 the run could not start.
--json FILE writes every figure measured (request counts by kind and outcome, latencies,
/health p50/p99, RSS samples).
"""
import argparse
import asyncio
import json
import os
import random
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
from urllib.parse import urlsplit

PROMPTS = ["Once upon a time", "The quick brown fox", "In the beginning", "Hello, my name is",
           "List three colours:", "A long time ago in a galaxy"]


# ---- HTTP over asyncio streams ----------------------------------------------------------

class Target:
    def __init__(self, url):
        u = urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.base = u.path.rstrip("/")  # ".../v1" or ""
        if self.base.endswith("/v1"):
            self.base = self.base[:-3]


def http_request(target, method, path, body=b"", headers=()):
    head = [f"{method} {target.base}{path} HTTP/1.1", f"Host: {target.host}:{target.port}",
            "Connection: close"]
    if body or method == "POST":
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    head += list(headers)
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def parse_response(raw):
    """(status, headers dict, body bytes) of a whole HTTP/1.1 response; ValueError if
    it is not one."""
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        raise ValueError(f"no end of headers in {len(raw)} bytes")
    lines = raw[:end].decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        raise ValueError(f"bad status line {lines[0][:60]!r}")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    body = raw[end + 4:]
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    elif "content-length" in headers:
        n = int(headers["content-length"])
        if len(body) < n:
            raise ValueError(f"body of {len(body)} bytes, Content-Length {n}")
        body = body[:n]
    return int(m.group(1)), headers, body


def dechunk(data):
    out, i = bytearray(), 0
    while True:
        j = data.find(b"\r\n", i)
        if j < 0:
            raise ValueError("chunked body cut short (no chunk size)")
        size = int(data[i:j].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        if j + 2 + size > len(data):
            raise ValueError("chunked body cut short (chunk data)")
        out += data[j + 2:j + 2 + size]
        i = j + 2 + size + 2


async def exchange(target, payload, timeout, read_limit=None):
    """Sends payload on a new connection and reads until EOF (or read_limit bytes);
    returns the bytes read."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(target.host, target.port), timeout)
    try:
        writer.write(payload)
        await writer.drain()
        chunks, total = [], 0
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise asyncio.TimeoutError()
            data = await asyncio.wait_for(reader.read(65536), left)
            if not data:
                break
            chunks.append(data)
            total += len(data)
            if read_limit is not None and total >= read_limit:
                break
        return b"".join(chunks)
    finally:
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 1)
        except (OSError, asyncio.TimeoutError):
            pass


# ---- the checks of a well-formed answer -------------------------------------------------

def check_json_body(kind, status, body):
    if status != 200:
        return f"HTTP {status}: {body[:160]!r}"
    try:
        obj = json.loads(body)
    except ValueError as e:
        return f"body is not JSON ({e}): {body[:160]!r}"
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if not isinstance(choices, list) or not choices:
        return f"no choices in {body[:160]!r}"
    c = choices[0]
    if kind == "chat":
        ok = isinstance(c.get("message"), dict) and isinstance(c["message"].get("content"), str)
    else:
        ok = isinstance(c.get("text"), str)
    if not ok or c.get("finish_reason") not in ("stop", "length"):
        return f"bad choice {json.dumps(c)[:160]}"
    return None


def check_stream_body(status, headers, body):
    if status != 200:
        return f"HTTP {status}: {body[:160]!r}"
    if "text/event-stream" not in headers.get("content-type", ""):
        return f"content-type {headers.get('content-type')!r}, not text/event-stream"
    events = [e for e in body.decode("utf-8", "replace").split("\n\n") if e.strip()]
    if not events:
        return "empty stream"
    for n, ev in enumerate(events):
        if not ev.startswith("data: "):
            return f"event {n} is not a data: line: {ev[:120]!r}"
        data = ev[6:]
        if data == "[DONE]":
            return None if n == len(events) - 1 else "events after [DONE]"
        try:
            obj = json.loads(data)
        except ValueError:
            return f"event {n} is not JSON: {data[:120]!r}"
        if isinstance(obj, dict) and "error" in obj:
            # a clean error event ends the stream
            return None if n == len(events) - 1 else "events after an error event"
        if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
            return f"event {n} has no choices: {data[:120]!r}"
    return f"stream ended without data: [DONE] after {len(events)} events"


# ---- the load -----------------------------------------------------------------------------

class Stats:
    def __init__(self):
        self.counts = {}        # (kind, outcome) -> n
        self.failures = []      # well-formed requests that failed: (kind, why)
        self.bad_malformed = [] # malformed requests answered wrongly: (kind, why)
        self.latency = {}       # kind -> [seconds] of successful well-formed requests
        self.health_ms, self.health_fail = [], []
        self.rss = []           # (seconds since start, kB)
        self.slow_reopened = 0
        self.slow_held_max = 0

    def count(self, kind, outcome):
        self.counts[(kind, outcome)] = self.counts.get((kind, outcome), 0) + 1


def well_formed(kind, stream, model, max_tokens, rng):
    prompt = rng.choice(PROMPTS)
    body = {"max_tokens": max_tokens, "stream": stream, "temperature": rng.choice([0, 0.8])}
    if model:
        body["model"] = model
    if kind == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", json.dumps(body).encode()
    body["prompt"] = prompt
    return "/v1/completions", json.dumps(body).encode()


# nul_start: garbage whose first byte is NUL — libmicrohttpd waits for more on such a connection
# (found by this tool): only the request deadline of ak serve ends it, so it is its own kind
MALFORMED = ["bad_json", "wrong_types", "oversized", "garbage", "nul_start", "half_headers"]


def malformed_payload(target, kind, rng, max_body):
    if kind == "bad_json":
        return http_request(target, "POST", "/v1/completions", b'{"prompt": "x", "max_tokens": ')
    if kind == "wrong_types":
        body = rng.choice([b'{"prompt": 12, "max_tokens": "many"}',
                           b'{"messages": "hello", "max_tokens": 4}',
                           b'{"prompt": "x", "max_tokens": 4, "stream": "yes"}',
                           b'[1, 2, 3]'])
        path = "/v1/chat/completions" if b"messages" in body else "/v1/completions"
        return http_request(target, "POST", path, body)
    if kind == "oversized":
        filler = b"a" * (max_body + 1024)
        return http_request(target, "POST", "/v1/completions",
                            b'{"prompt": "' + filler + b'", "max_tokens": 4}')
    if kind in ("garbage", "nul_start"):
        first = b"\x00" if kind == "nul_start" else bytes([rng.randint(1, 255)])
        return first + bytes(rng.getrandbits(8) for _ in range(rng.randint(16, 512))) + b"\r\n\r\n"
    # half_headers: the request line and part of the headers, then the client closes
    return http_request(target, "POST", "/v1/completions", b"{}")[:rng.randint(10, 40)]


async def one_malformed(target, kind, rng, args, stats):
    payload = malformed_payload(target, kind, rng, args.max_body)
    if kind == "half_headers":
        try:
            _, w = await asyncio.wait_for(asyncio.open_connection(target.host, target.port),
                                          args.request_timeout)
            w.write(payload)
            await w.drain()
            w.close()
            stats.count(kind, "sent")
        except (OSError, asyncio.TimeoutError) as e:
            stats.count(kind, "connect_error")
            stats.bad_malformed.append((kind, f"could not connect: {e!r}"))
        return
    try:
        raw = await exchange(target, payload, args.request_timeout)
    except asyncio.TimeoutError:
        stats.count(kind, "timeout")
        stats.bad_malformed.append((kind, f"no answer within {args.request_timeout} s"))
        return
    except OSError:
        stats.count(kind, "closed")  # the server may close on garbage or an oversized body
        return
    if not raw:
        stats.count(kind, "closed")
        return
    try:
        status, _, body = parse_response(raw)
    except ValueError as e:
        stats.count(kind, "unparsable")
        if kind not in ("garbage", "nul_start"):  # garbage may get anything but 2xx/5xx
            stats.bad_malformed.append((kind, f"unparsable answer: {e}"))
        return
    stats.count(kind, str(status))
    if not 400 <= status < 500:
        stats.bad_malformed.append((kind, f"HTTP {status}: {body[:120]!r}"))


async def one_well_formed(target, kind, stream, disconnect, rng, args, stats, model):
    path, body = well_formed(kind, stream, model, rng.randint(1, args.max_tokens), rng)
    label = f"{kind}_{'stream' if stream else 'json'}" + ("_disconnect" if disconnect else "")
    t0 = time.monotonic()
    try:
        raw = await exchange(target, http_request(target, "POST", path, body),
                             args.request_timeout, read_limit=1 if disconnect else None)
    except asyncio.TimeoutError:
        stats.count(label, "timeout")
        if not disconnect:
            stats.failures.append((label, f"no complete answer within {args.request_timeout} s"))
        return
    except OSError as e:
        stats.count(label, "connection_error")
        stats.failures.append((label, f"connection error: {e!r}"))
        return
    if disconnect:
        stats.count(label, "abandoned" if raw else "empty")
        if not raw:
            stats.failures.append((label, "connection closed before any byte"))
        return
    try:
        status, headers, payload = parse_response(raw)
        why = (check_stream_body(status, headers, payload) if stream
               else check_json_body(kind, status, payload))
    except ValueError as e:
        why = f"unparsable answer: {e}"
        status = 0
    if why:
        stats.count(label, f"fail_{status}")
        stats.failures.append((label, why))
    else:
        stats.count(label, "ok")
        stats.latency.setdefault(label, []).append(time.monotonic() - t0)


async def client(target, idx, deadline, args, stats, model):
    rng = random.Random(args.seed * 100003 + idx)
    while time.monotonic() < deadline:
        r = rng.random()
        if r < args.malformed:
            await one_malformed(target, rng.choice(args.malformed_kinds), rng, args, stats)
        else:
            kind = rng.choice(["completion", "chat"])
            stream = rng.random() < 0.5
            disconnect = stream and rng.random() < args.disconnects
            await one_well_formed(target, kind, stream, disconnect, rng, args, stats, model)


async def health_poller(target, deadline, args, stats):
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        try:
            raw = await exchange(target, http_request(target, "GET", "/health"),
                                 args.health_timeout)
            status, _, body = parse_response(raw)
            ms = (time.monotonic() - t0) * 1000
            stats.health_ms.append(ms)
            if status != 200:
                stats.health_fail.append(f"HTTP {status} at {t0 - stats.t0:.1f} s: {body[:80]!r}")
        except (OSError, ValueError, asyncio.TimeoutError) as e:
            stats.health_ms.append((time.monotonic() - t0) * 1000)
            stats.health_fail.append(f"{type(e).__name__} {e} at {t0 - stats.t0:.1f} s")
        await asyncio.sleep(max(0.0, args.health_interval - (time.monotonic() - t0)))


async def rss_sampler(pid, deadline, stats):
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
            stats.rss.append((time.monotonic() - stats.t0, kb))
        except (OSError, StopIteration):
            pass
        await asyncio.sleep(1.0)


async def slow_header_socket(target, deadline, stats, held):
    """Trickles 'GET /health ...' and then endless header bytes, one a second."""
    header = f"GET /health HTTP/1.1\r\nHost: {target.host}\r\nX-Slow: ".encode()
    while time.monotonic() < deadline:
        try:
            r, w = await asyncio.open_connection(target.host, target.port)
        except OSError:
            await asyncio.sleep(1.0)
            continue
        held[0] += 1
        stats.slow_held_max = max(stats.slow_held_max, held[0])
        try:
            i = 0
            while time.monotonic() < deadline:
                w.write(header[i:i + 1] if i < len(header) else b"a")
                await w.drain()
                i += 1
                try:  # any answer or the server closing ends this socket: open another
                    await asyncio.wait_for(r.read(1), 1.0)
                    break
                except asyncio.TimeoutError:
                    pass
        except OSError:
            pass
        finally:
            held[0] -= 1
            w.close()
        if time.monotonic() < deadline:
            stats.slow_reopened += 1


# ---- the server -------------------------------------------------------------------------

def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, need)) if hard != resource.RLIM_INFINITY else max(soft, need)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def start_server(args, log_path):
    """Starts ak serve with its output in log_path (a pipe nobody reads would fill and
    block it); returns the process and its URL."""
    cmd = [args.ak, "serve", args.model, "--host", "127.0.0.1", "--port", "0",
           "--max-concurrent", str(args.max_concurrent)] + args.serve_arg
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    for _ in range(600):
        with open(log_path) as f:
            m = re.search(r" on (http://\S+)", f.read())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    with open(log_path) as f:
        raise SystemExit(f"server_load: `{' '.join(cmd)}` did not start: {f.read()[-2000:]}")


async def get_model(target, timeout):
    try:
        raw = await exchange(target, http_request(target, "GET", "/v1/models"), timeout)
        status, _, body = parse_response(raw)
        data = json.loads(body).get("data") if status == 200 else None
        return data[0]["id"] if data else None
    except (OSError, ValueError, KeyError, IndexError, asyncio.TimeoutError):
        return None


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


async def run(args, url, pid):
    target = Target(url)
    stats = Stats()
    stats.t0 = time.monotonic()
    model = await get_model(target, args.request_timeout)
    deadline = stats.t0 + args.duration
    held = [0]
    tasks = [asyncio.create_task(health_poller(target, deadline, args, stats))]
    if pid:
        tasks.append(asyncio.create_task(rss_sampler(pid, deadline, stats)))
    tasks += [asyncio.create_task(slow_header_socket(target, deadline, stats, held))
              for _ in range(args.slow_headers)]
    if args.slow_headers:
        await asyncio.sleep(min(3.0, args.duration / 4))  # let the slow sockets connect first
    tasks += [asyncio.create_task(client(target, i, deadline, args, stats, model))
              for i in range(args.connections)]
    await asyncio.gather(*tasks)
    stats.elapsed = time.monotonic() - stats.t0
    return stats


def verdict(args, stats, server_alive):
    problems = []
    if stats.failures:
        kinds = {}
        for k, why in stats.failures:
            kinds.setdefault(k, []).append(why)
        for k, whys in sorted(kinds.items()):
            problems.append(f"{len(whys)} well-formed {k} request(s) failed, e.g. {whys[0]}")
    if stats.bad_malformed:
        kinds = {}
        for k, why in stats.bad_malformed:
            kinds.setdefault(k, []).append(why)
        for k, whys in sorted(kinds.items()):
            problems.append(f"{len(whys)} malformed {k} request(s) answered wrongly, e.g. {whys[0]}")
    ok_total = sum(n for (k, o), n in stats.counts.items() if o == "ok")
    if ok_total == 0:
        problems.append("no well-formed request completed at all")
    if stats.health_fail:
        problems.append(f"/health failed {len(stats.health_fail)} of {len(stats.health_ms)} "
                        f"polls, first: {stats.health_fail[0]}")
    if args.health_p99_ms and stats.health_ms and \
            percentile(stats.health_ms, 99) > args.health_p99_ms:
        problems.append(f"/health p99 {percentile(stats.health_ms, 99):.1f} ms > "
                        f"{args.health_p99_ms} ms")
    growth = rss_growth(stats, args.duration)
    if growth is not None and growth > args.max_rss_growth:
        problems.append(f"resident memory grew {100 * growth:.1f} % over the last "
                        f"{rss_window(args.duration):.0f} s (limit {100 * args.max_rss_growth:.0f} %)")
    if not server_alive:
        problems.append("the server process is gone at the end of the run")
    return problems


def rss_window(duration):
    return 60.0 if duration >= 120 else duration / 2


def rss_growth(stats, duration):
    """Growth over the window: the median of its last quarter of samples against the
    median of its first quarter (single samples move by a few % as connection threads
    come and go; a leak moves the whole level)."""
    if len(stats.rss) < 2:
        return None
    end = stats.rss[-1][0]
    window = [kb for t, kb in stats.rss if t >= end - rss_window(duration)]
    k = max(1, len(window) // 4)
    first, last = statistics.median(window[:k]), statistics.median(window[-k:])
    return (last - first) / first if first else None


def report(args, stats, problems):
    print(f"server_load: {args.connections} connections for {stats.elapsed:.0f} s, "
          f"{args.slow_headers} slow-header sockets (held at most {stats.slow_held_max}, "
          f"reopened {stats.slow_reopened} times after the server closed them)")
    for (kind, outcome), n in sorted(stats.counts.items()):
        print(f"  {kind:32s} {outcome:16s} {n:7d}")
    for label, lat in sorted(stats.latency.items()):
        print(f"  latency {label:24s} p50 {1000 * statistics.median(lat):8.1f} ms  "
              f"p99 {1000 * percentile(lat, 99):8.1f} ms")
    print(f"  /health: {len(stats.health_ms)} polls, p50 {percentile(stats.health_ms, 50):.1f} ms, "
          f"p99 {percentile(stats.health_ms, 99):.1f} ms, max "
          f"{max(stats.health_ms) if stats.health_ms else float('nan'):.1f} ms, "
          f"{len(stats.health_fail)} failed")
    if stats.rss:
        g = rss_growth(stats, args.duration)
        print(f"  VmRSS: start {stats.rss[0][1] / 1024:.1f} MiB, end {stats.rss[-1][1] / 1024:.1f} MiB, "
              f"max {max(kb for _, kb in stats.rss) / 1024:.1f} MiB; growth over the last "
              f"{rss_window(args.duration):.0f} s: {100 * g:.2f} %" if g is not None else "")
    if problems:
        print("server_load: FAIL")
        for p in problems:
            print(f"  - {p}")
    else:
        print("server_load: PASS (zero failed well-formed requests, malformed ones refused, "
              "/health answering, memory flat)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ak", default=os.environ.get("AK_BIN", "build/ak"), help="the ak binary")
    ap.add_argument("--model", help="start `ak serve MODEL` (else --url)")
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="extra argument of ak serve (repeatable, e.g. --serve-arg=--max-seqs=64)")
    ap.add_argument("--url", help="a running server instead (base URL, e.g. http://127.0.0.1:8080/v1)")
    ap.add_argument("--pid", type=int, help="with --url: the server's pid (memory samples)")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=120.0, help="seconds")
    ap.add_argument("--slow-headers", type=int, default=0, help="trickling sockets held open")
    ap.add_argument("--max-tokens", type=int, default=16, help="completions ask for 1..N tokens")
    ap.add_argument("--max-concurrent", type=int, default=4096,
                    help="ak serve --max-concurrent (the server answers 429 above it)")
    ap.add_argument("--max-body", type=int, default=1 << 20,
                    help="the server's body limit (oversized requests exceed it)")
    ap.add_argument("--malformed", type=float, default=0.15, help="fraction of malformed requests")
    ap.add_argument("--skip-malformed", action="append", default=[], choices=MALFORMED,
                    help="leave out a kind of malformed request (repeatable)")
    ap.add_argument("--disconnects", type=float, default=0.2,
                    help="fraction of streams abandoned after the first bytes")
    ap.add_argument("--request-timeout", type=float, default=120.0)
    ap.add_argument("--health-interval", type=float, default=0.25)
    ap.add_argument("--health-timeout", type=float, default=5.0)
    ap.add_argument("--health-p99-ms", type=float, default=0.0,
                    help="also require /health p99 below this (0: no latency criterion)")
    ap.add_argument("--max-rss-growth", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--server-log", help="ak serve's output (default /tmp/ak_server_load_PID.log)")
    args = ap.parse_args()
    if not args.model and not args.url:
        ap.error("give --model (the server is started) or --url")
    args.malformed_kinds = [k for k in MALFORMED if k not in args.skip_malformed]
    if not args.malformed_kinds:
        args.malformed = 0.0

    need = args.connections + args.slow_headers + 256
    have = raise_nofile(2 * need)  # the server started below inherits it
    if have < need:
        print(f"server_load: RLIMIT_NOFILE is {have}, {need} needed; raise the hard limit "
              "(ulimit -Hn) or use fewer --connections", file=sys.stderr)
        return 2
    proc = None
    if args.model:
        log_path = args.server_log or f"/tmp/ak_server_load_{os.getpid()}.log"
        proc, url = start_server(args, log_path)
        print(f"server_load: ak serve on {url} (pid {proc.pid}, output in {log_path})")
        pid = proc.pid
    else:
        url, pid = args.url, args.pid
    try:
        stats = asyncio.run(run(args, url, pid))
        alive = (proc.poll() is None) if proc else (pid is None or os.path.exists(f"/proc/{pid}"))
        problems = verdict(args, stats, alive)
        report(args, stats, problems)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"counts": {f"{k}:{o}": n for (k, o), n in stats.counts.items()},
                           "failures": stats.failures[:100],
                           "bad_malformed": stats.bad_malformed[:100],
                           "health_ms": {"n": len(stats.health_ms),
                                         "p50": percentile(stats.health_ms, 50),
                                         "p99": percentile(stats.health_ms, 99),
                                         "failed": len(stats.health_fail)},
                           "rss_kb": stats.rss, "problems": problems}, f, indent=1)
        return 1 if problems else 0
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main())
