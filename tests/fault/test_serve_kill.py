#!/usr/bin/env python3
"""`ak serve` killed (SIGKILL) in the middle of streamed and plain completions, then
restarted on the same port: every request in flight must look like an error to its
client (a connection error, or a stream that ends without a finish_reason and without
`data: [DONE]`), never like a shorter success; the restarted server answers new requests
completely (nothing but the in-flight requests is lost: the server keeps no other state).
A small random-weight model (scripts/llm-make-model), ignore_eos so no generation ends
early on its own.

usage: test_serve_kill.py AK   (run with /usr/bin/python3; stdlib only)"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(ak, model, port):
    proc = subprocess.Popen([ak, "serve", model, "--port", str(port), "--max-seqs", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = proc.stdout.readline().decode()
    if "ak serve:" not in line:
        proc.kill()
        raise SystemExit("FAIL: ak serve did not start: %r" % line)
    return proc


def stream_completion(port, body, started):
    """What a careful OpenAI client concludes from one streamed completion: "complete"
    (a finish_reason and then [DONE]) or "error: ..." (anything short of that)."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return "error: HTTP %d" % r.status
        finish, done, chunks = None, False, 0
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            event = json.loads(line[6:])
            if "error" in event:
                return "error: error event"
            chunks += 1
            if chunks == 3:
                started.set()
            finish = event["choices"][0].get("finish_reason") or finish
        if done and finish:
            return "complete"
        return "error: stream ended after %d chunks without %s" % (
            chunks, "[DONE]" if not done else "a finish_reason")
    except (OSError, http.client.HTTPException, ValueError) as e:
        return "error: %s" % type(e).__name__


def plain_completion(port, body):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", "/v1/completions", body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        js = json.loads(r.read())
        if r.status == 200 and js["choices"][0].get("finish_reason"):
            return "complete"
        return "error: HTTP %d" % r.status
    except (OSError, http.client.HTTPException, ValueError) as e:
        return "error: %s" % type(e).__name__


def main():
    ak = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="ak_serve_kill_")
    model = os.path.join(tmp, "m.gguf")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "llm-make-model"),
                    "--ak", ak, "--dim", "128", "--layers", "4", "--heads", "4", "--kv-heads",
                    "2", "--ffn", "256", "--ctx", "2048", "--seed", "7", "--out", model],
                   check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    body = {"prompt": "Once upon a time", "max_tokens": 1500, "ignore_eos": True,
            "temperature": 0}
    fails = 0
    server = start_server(ak, model, port)
    results, started = {}, threading.Event()

    def run(name, fn):
        results[name] = fn()

    threads = [threading.Thread(target=run, args=("stream%d" % i,
                                                  lambda: stream_completion(port, body, started)))
               for i in range(3)]
    threads.append(threading.Thread(target=run, args=("plain", lambda: plain_completion(port, body))))
    for t in threads:
        t.start()
    if not started.wait(60):
        print("FAIL: no stream got under way")
        fails += 1
    time.sleep(0.05)
    server.send_signal(signal.SIGKILL)
    server.wait()
    for t in threads:
        t.join(60)
    for name in sorted(results):
        ok = results[name].startswith("error")
        print("%s killed mid-request: %s%s" % (name, results[name], "" if ok else "  <- FAIL"))
        fails += not ok
    if len(results) != len(threads):
        print("FAIL: a client hung after the kill")
        fails += 1

    server = start_server(ak, model, port)  # the same port: clients retry where they were
    short = dict(body, max_tokens=20)
    after = [stream_completion(port, short, threading.Event()), plain_completion(port, short)]
    server.send_signal(signal.SIGTERM)
    server.wait(40)
    print("after the restart: stream %s, plain %s" % tuple(after))
    fails += sum(a != "complete" for a in after)
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
