#!/usr/bin/python3
"""Per-operator time of an ONNX model in accelkit (`AK_PROFILE=1 ak bench`) beside ONNX
Runtime's own profiler (bench/peers/ort_bench.js --profile), the two run alternately
A B A B, R rounds; prints each operator type's median ms per run in both engines and
writes the medians as infer.profile lines (docs/report.md) to $AK_BENCH_OUT/infer.jsonl,
which `ak report` draws beside each other. The two engines name fused operators their own
way (accelkit's NchwcConv, FusedConv; ORT's FusedConv, ReorderInput ...), so the rows are
the union of both engines' operator types, and the totals are the comparable figure.
Models come from bench/infer/export.py (as vs_peers.sh makes them) or any .onnx path.
  usage: bench/infer/profile_vs_ort.py [--build build] [--rounds 3] [--threads 2]
                                       [--runs 20] [model|file.onnx ...]
ONNX Runtime is onnxruntime-node 1.30 from node_modules/ (scripts/setup installs it)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from results import DEFAULT_OUT, Writer  # noqa: E402


def model_path(build, name):
    if name.endswith(".onnx"):
        return Path(name)
    path = build / "models" / f"{name}.onnx"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench/infer/export.py"), name,
                        str(build / "models")], check=True, stdout=subprocess.DEVNULL)
    return path


def accelkit_profile(ak, model, threads, runs):
    """{op type: ms per run} from the infer.profile lines of one `ak bench` run."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([ak, "bench", str(model), "-t", str(threads), "-n", str(runs), "-w", "5",
                        "--out", out, "--json"], check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, AK_PROFILE="1"))
        lines = [json.loads(x) for x in open(Path(out) / "infer.jsonl")]
    return {x["params"]["op"]: x["figures"]["ms"] for x in lines if x["benchmark"] == "infer.profile"}


def ort_profile(model, threads, runs):
    env = dict(os.environ, NODE_PATH=str(ROOT / "node_modules"))
    out = subprocess.run(["node", str(ROOT / "bench/peers/ort_bench.js"), str(model), str(threads),
                          str(runs), "--profile"], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)["profile_ms"]


def medians(rounds):
    ops = sorted({op for r in rounds for op in r})
    return {op: statistics.median(r.get(op, 0.0) for r in rounds) for op in ops}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("models", nargs="*", default=["resnet50", "mobilenet_v2"])
    a = ap.parse_args()
    build = Path(a.build).resolve()
    ak = str(build / "ak")
    ort_version = json.load(open(ROOT / "node_modules/onnxruntime-node/package.json"))["version"]
    w = Writer(os.environ.get("AK_BENCH_OUT", DEFAULT_OUT), "infer", ak)
    for name in a.models:
        model = model_path(build, name)
        ak_rounds, ort_rounds = [], []
        for _ in range(a.rounds):
            ak_rounds.append(accelkit_profile(ak, model, a.threads, a.runs))
            ort_rounds.append(ort_profile(model, a.threads, a.runs))
        ak_ms, ort_ms = medians(ak_rounds), medians(ort_rounds)
        label = model.stem
        print(f"{label}, {a.threads} thread(s), {a.rounds} alternating rounds of {a.runs} runs; "
              "median ms per run")
        print(f"{'op type':22} {'accelkit':>10} {'ORT':>10}")
        for op in sorted(set(ak_ms) | set(ort_ms), key=lambda o: -max(ak_ms.get(o, 0), ort_ms.get(o, 0))):
            print(f"{op:22} {ak_ms.get(op, 0):10.3f} {ort_ms.get(op, 0):10.3f}")
        print(f"{'total':22} {sum(ak_ms.values()):10.3f} {sum(ort_ms.values()):10.3f}\n")
        for engine, table in ((None, ak_ms), ("ONNX Runtime", ort_ms)):
            for op, ms in table.items():
                w.add("infer.profile", {"model": label, "threads": a.threads, "op": op},
                      {"ms": round(ms, 4)}, peer=engine, peer_version=ort_version if engine else None)


if __name__ == "__main__":
    main()
