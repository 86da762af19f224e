#!/usr/bin/env python3
"""Benchmark results lines for the shell and Python harnesses of bench/ (the C side's
twin is src/cli/bench_results.c): each line one engine's figures for one parameter set,
in the envelope `ak report` reads (docs/report.md):

  {"schema": "accelkit.bench/1", "benchmark": "comm.allreduce", "machine": {...},
   "accelkit": {"version", "commit"}, "peer": null | {"name", "version"},
   "params": {...}, "figures": {...}, "timestamp": "2026-11-28T19:30:00Z"}

The machine and accelkit's version come from `ak sysinfo --json --quick`, once per
writer. From Python:
    w = Writer("bench-results", "llm", ak="build/ak")
    w.add("llm.decode", {"type": "q8_0", "threads": 1}, {"tokens_per_s": 42.0},
          peer="llama.cpp", peer_version="b5000")
From a shell script, one JSON object per stdin line, each {"params", "figures"} (and
"benchmark" where it differs from --benchmark):
    ... | bench/results.py --ak build/ak --out DIR --stem comm --benchmark comm.allreduce \\
          [--peer "Open MPI" --peer-version 4.1.4]
--out none writes nothing (as `ak bench --out none`)."""
import argparse
import datetime
import json
import os
import subprocess
import sys

SCHEMA = "accelkit.bench/1"
DEFAULT_OUT = "bench-results"


def machine_and_version(ak):
    """(machine, accelkit) of the envelope, from `ak sysinfo --json --quick`."""
    info = json.loads(subprocess.run([ak, "sysinfo", "--json", "--quick"], check=True,
                                     capture_output=True, text=True).stdout)
    machine = {"cpu": info["brand"] or "unknown", "cores": info["cores"],
               "isa": info["active_isa"],
               "fma_peak_gflops_per_core": info["fma_peak_gflops_per_core"],
               "memory_gbps": info["memcpy_gbps"]}
    return machine, {"version": info["version"], "commit": info.get("commit", "unknown")}


class Writer:
    """Appends results lines to OUT/STEM.jsonl (OUT "none": writes nothing)."""

    def __init__(self, out, stem, ak):
        self.path = None if out == "none" else os.path.join(out, stem + ".jsonl")
        if self.path:
            os.makedirs(out, exist_ok=True)
            self.machine, self.accelkit = machine_and_version(ak)

    def add(self, benchmark, params, figures, peer=None, peer_version=None):
        if not self.path:
            return
        line = {"schema": SCHEMA, "benchmark": benchmark, "machine": self.machine,
                "accelkit": self.accelkit,
                "peer": {"name": peer, "version": peer_version or "unknown"} if peer else None,
                "params": params, "figures": figures,
                "timestamp": datetime.datetime.now(datetime.timezone.utc)
                             .strftime("%Y-%m-%dT%H:%M:%SZ")}
        with open(self.path, "a") as f:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ak", required=True, help="the ak binary (machine and version)")
    ap.add_argument("--out", default=os.environ.get("AK_BENCH_OUT", DEFAULT_OUT))
    ap.add_argument("--stem", required=True, help="file name in OUT, without .jsonl")
    ap.add_argument("--benchmark", help="the lines' benchmark, unless a line names its own")
    ap.add_argument("--peer")
    ap.add_argument("--peer-version")
    a = ap.parse_args()
    w = Writer(a.out, a.stem, a.ak)
    for n, text in enumerate(sys.stdin, 1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
            params, figures = row["params"], row["figures"]
            benchmark = row.get("benchmark", a.benchmark)
            if not benchmark:
                raise KeyError("benchmark")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            sys.exit(f"results.py: stdin line {n}: want {{\"params\": {{}}, \"figures\": {{}}}}: {e}")
        w.add(benchmark, params, figures, a.peer, a.peer_version)
    if w.path:
        print(f"results: {w.path}", file=sys.stderr)


if __name__ == "__main__":
    main()
