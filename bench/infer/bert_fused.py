#!/usr/bin/python3
"""BERT-base (12 layers, hidden 768, 12 heads, sequence 128, random weights; the plain
PyTorch model of tests/infer/bert_torch.py) exported to ONNX, then: what accelkit's
optimizer fused (MultiHeadAttention, LayerNormalization, MatMulBias ... per kind) and the
latency of accelkit with its optimizer (fused), accelkit without it (unfused) and ONNX
Runtime 1.30 (npm onnxruntime-node, bench/peers/ort_bench.js) on the same file, run
alternately A B C A B C for R rounds; prints each one's median of the rounds' p50s.
Measure on a quiet machine: run the whole script under `flock /tmp/ak-cpu.lock` (it takes
no lock itself, so its ONNX Runtime child does not wait on it).
  usage: bench/infer/bert_fused.py [--rounds 3] [--runs 10] [--threads 2]
                                   [--norm torch|tf] [--seq 128] [--keep DIR]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "infer"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from accelkit import inference as akinf  # noqa: E402


def notes_of(sess):
    import ctypes
    fn = akinf.lib.ak_session_optimizations
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                   ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    count = ctypes.c_size_t()
    fn(sess._s, 0, None, None, ctypes.byref(count))
    out = {}
    for i in range(count.value):
        what, times = ctypes.c_char_p(), ctypes.c_size_t()
        fn(sess._s, i, ctypes.byref(what), ctypes.byref(times), ctypes.byref(count))
        out[what.value.decode()] = times.value
    return out


def p50_accelkit(sess, feeds, names, runs):
    arrays = [np.require(a, requirements="C") for a in feeds.values()]
    for _ in range(3):
        sess.run(list(feeds), arrays, names)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(list(feeds), arrays, names)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def p50_ort(path, threads, runs):
    env = dict(os.environ, NODE_PATH=os.path.join(ROOT, "node_modules"))
    out = subprocess.run(["node", os.path.join(ROOT, "bench", "peers", "ort_bench.js"), path,
                          str(threads), str(runs)], stdout=subprocess.PIPE, text=True,
                         env=env, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["p50_ms"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--norm", default="torch", choices=["torch", "tf"])
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--keep", default=None)
    a = ap.parse_args()
    import torch
    import bert_torch
    torch.manual_seed(0)
    model = bert_torch.Bert(layers=12, hidden=768, heads=12, inter=3072, vocab=30522,
                            max_pos=512, norm=a.norm).eval()
    out_dir = a.keep or tempfile.mkdtemp(prefix="ak-bert-")
    path = os.path.join(out_dir, "bert_base_%s.onnx" % a.norm)
    feeds = bert_torch.export(model, path, 1, a.seq, 17 if a.norm == "torch" else 14,
                              vocab=30522)
    names = [o.name for o in onnx.load(path, load_external_data=False).graph.output]
    fused = akinf.NativeSession(path, threads=a.threads)
    plain = akinf.NativeSession(path, threads=a.threads, optimize=False)
    print("BERT-base, batch 1, sequence %d, %s LayerNorm, %d thread(s)" % (a.seq, a.norm, a.threads))
    print("fused by accelkit's optimizer:", ", ".join("%s %d" % kv for kv in notes_of(fused).items()))
    res = {"accelkit fused": [], "accelkit unfused": [], "onnxruntime": []}
    for _ in range(a.rounds):
        res["accelkit fused"].append(p50_accelkit(fused, feeds, names, a.runs))
        res["accelkit unfused"].append(p50_accelkit(plain, feeds, names, a.runs))
        res["onnxruntime"].append(p50_ort(path, a.threads, a.runs))
    med = {k: statistics.median(v) for k, v in res.items()}
    print("%d alternating rounds of %d runs, median of the rounds' p50 (ms):" % (a.rounds, a.runs))
    for k, v in res.items():
        print("  %-17s %9.2f   (%s)" % (k, med[k], " ".join("%.2f" % t for t in v)))
    print("  unfused / fused = %.3f, onnxruntime / fused = %.3f" % (
        med["accelkit unfused"] / med["accelkit fused"], med["onnxruntime"] / med["accelkit fused"]))


if __name__ == "__main__":
    main()
