#!/usr/bin/python3
"""grammar_overhead.py: the cost of constrained decoding in `ak serve`.

Runs ROUNDS rounds; each round sends CONC concurrent completion requests twice, once
constrained by a JSON schema (response_format json_schema) and once unconstrained, in
alternating order (A B B A ...), and measures aggregate decode tokens/s = completion tokens
of the batch / its wall time. Prints the medians and the overhead
1 - constrained / unconstrained. The server runs with one model (default: the 134 M bench
model, bench/llm/make-bench-models) for the whole measurement.

usage: bench/llm/grammar_overhead.py [--model GGUF] [--ak build/ak] [--rounds 5]
       [--conc 16] [--max-tokens 128] [--threads N]
Run it under `flock /tmp/ak-cpu.lock` on a shared machine."""
import argparse
import concurrent.futures
import json
import os
import socket
import statistics
import subprocess
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A record with bounded strings and numbers: generation keeps going through strings,
# numbers, keys and arrays (every kind of mask) and always ends.
SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "year": {"type": "integer", "minimum": 1900, "maximum": 2100},
        "score": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
        "when": {"type": "string", "format": "date"},
        "notes": {"type": "string", "maxLength": 80},
    },
    "required": ["title", "year", "score", "tags", "when", "notes"],
    "additionalProperties": False,
}


def post(port, body):
    req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def batch(port, conc, max_tokens, constrained, seed):
    def one(i):
        body = {"prompt": "Describe a film as JSON:", "max_tokens": max_tokens, "temperature": 1.0,
                "seed": seed * 1000 + i}
        if constrained:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "film", "schema": SCHEMA}}
        else:
            body["ignore_eos"] = True
        return post(port, body)["usage"]["completion_tokens"]

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(conc) as pool:
        tokens = sum(pool.map(one, range(conc)))
    return tokens / (time.perf_counter() - t0), tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "llm-models", "llama-134m-f16.gguf"))
    ap.add_argument("--ak", default=os.path.join(ROOT, "build", "ak"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--conc", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([a.ak, "serve", a.model, "--port", str(port), "--max-seqs", str(a.conc),
                            "--max-concurrent", str(a.conc), "-t", str(a.threads)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        batch(port, a.conc, 8, False, 0)  # warm-up
        free, cons = [], []
        for r in range(a.rounds):
            order = [True, False] if r % 2 else [False, True]
            for constrained in order:
                tps, n = batch(port, a.conc, a.max_tokens, constrained, r)
                (cons if constrained else free).append(tps)
                print("round %d %-13s %7.1f tokens/s (%d tokens)" %
                      (r, "constrained" if constrained else "unconstrained", tps, n), flush=True)
        mf, mc = statistics.median(free), statistics.median(cons)
        print("median unconstrained %.1f tokens/s, constrained %.1f tokens/s, overhead %.1f %%" %
              (mf, mc, 100.0 * (1.0 - mc / mf)))
    finally:
        srv.terminate()
        srv.wait(30)


if __name__ == "__main__":
    main()
