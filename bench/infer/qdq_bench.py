#!/usr/bin/python3
"""INT8 against float on a convolution stack: one ResNet-like stack of 3x3 and 1x1 layers
(input 1x64x56x56, ReLU after each) written twice with the same weights — float32, and in
QDQ form as ONNX Runtime's quantizer writes it (uint8 activations per tensor from a MinMax
calibration of the float net on the seeded input; int8 weights per output channel; int32
biases at x_scale·w_scale) — then timed alternately, each measurement under
flock /tmp/ak-cpu.lock: `ak bench` on the float file, `ak bench` on the QDQ file, ONNX
Runtime (bench/peers/ort_bench.js) on the QDQ file. Prints the median p50 of each.

    bench/infer/qdq_bench.py [build-dir] [rounds=3] [threads=2]"""
import json
import os
import statistics
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as onh

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYERS = [  # (out channels, kernel, stride)
    (64, 3, 1), (64, 3, 1), (128, 1, 1), (128, 3, 2), (128, 3, 1), (256, 1, 1), (256, 3, 2),
    (256, 3, 1)]


def conv_np(x, w, b, k, s):
    """float64 Conv (pads k//2) with ReLU, for the calibration"""
    C, H, W = x.shape
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p)))
    Ho, Wo = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    cols = np.empty((C * k * k, Ho * Wo))
    r = 0
    for c in range(C):
        for i in range(k):
            for j in range(k):
                cols[r] = xp[c, i:i + s * Ho:s, j:j + s * Wo:s].reshape(-1)
                r += 1
    y = w.reshape(w.shape[0], -1) @ cols + b[:, None]
    return np.maximum(y, 0).reshape(w.shape[0], Ho, Wo)


def build(out_dir):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (1, 64, 56, 56)).astype(np.float32)
    ws, bs, cin = [], [], 64
    for cout, k, _ in LAYERS:
        ws.append((rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32))
        bs.append((rng.standard_normal(cout) * 0.05).astype(np.float32))
        cin = cout
    # calibration: the range of every activation on the seeded input
    acts, h = [x[0].astype(np.float64)], x[0].astype(np.float64)
    for (cout, k, s), w, b in zip(LAYERS, ws, bs):
        h = conv_np(h, w.astype(np.float64), b.astype(np.float64), k, s)
        acts.append(h)
    def qparams(a):
        lo, hi = min(float(a.min()), 0.0), max(float(a.max()), 0.0)
        scale = np.float32((hi - lo) / 255.0)
        return scale, np.uint8(round(-lo / float(scale)))
    # float model
    fn, finit, name = [], [], "x"
    for i, ((cout, k, s), w, b) in enumerate(zip(LAYERS, ws, bs)):
        finit += [onh.from_array(w, "w%d" % i), onh.from_array(b, "b%d" % i)]
        fn.append(oh.make_node("Conv", [name, "w%d" % i, "b%d" % i], ["c%d" % i], pads=[k // 2] * 4,
                               strides=[s, s]))
        fn.append(oh.make_node("Relu", ["c%d" % i], ["r%d" % i]))
        name = "r%d" % i
    def save(nodes, inits, path, out):
        g = oh.make_graph(nodes, "stack", [oh.make_tensor_value_info("x", TP.FLOAT, x.shape)],
                          [oh.make_tensor_value_info(out, TP.FLOAT, None)], inits)
        m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)])
        m.ir_version = 7
        onnx.save(m, path)
    save(fn, finit, os.path.join(out_dir, "stack_fp32.onnx"), name)
    # QDQ model
    qn, qinit = [], []
    def q_dq(src, i):
        s, z = qparams(acts[i])
        qinit.extend([onh.from_array(np.array(s), "s%d" % i), onh.from_array(np.array(z), "z%d" % i)])
        qn.append(oh.make_node("QuantizeLinear", [src, "s%d" % i, "z%d" % i], ["q%d" % i]))
        qn.append(oh.make_node("DequantizeLinear", ["q%d" % i, "s%d" % i, "z%d" % i], ["dq%d" % i]))
        return "dq%d" % i, s
    name, xs = q_dq("x", 0)
    for i, ((cout, k, s), w, b) in enumerate(zip(LAYERS, ws, bs)):
        wmax = np.abs(w.reshape(cout, -1)).max(axis=1)
        wsc = (wmax / 127.0).astype(np.float32)
        wq = np.clip(np.rint(w / wsc[:, None, None, None]), -127, 127).astype(np.int8)
        bsc = (np.float32(xs) * wsc).astype(np.float32)
        bq = np.rint(b / bsc).astype(np.int32)
        qinit += [onh.from_array(wq, "wq%d" % i), onh.from_array(wsc, "ws%d" % i),
                  onh.from_array(np.zeros(cout, np.int8), "wz%d" % i),
                  onh.from_array(bq, "bq%d" % i), onh.from_array(bsc, "bs%d" % i)]
        qn.append(oh.make_node("DequantizeLinear", ["wq%d" % i, "ws%d" % i, "wz%d" % i], ["w%d" % i], axis=0))
        qn.append(oh.make_node("DequantizeLinear", ["bq%d" % i, "bs%d" % i], ["b%d" % i], axis=0))
        qn.append(oh.make_node("Conv", [name, "w%d" % i, "b%d" % i], ["c%d" % i], pads=[k // 2] * 4,
                               strides=[s, s]))
        qn.append(oh.make_node("Relu", ["c%d" % i], ["r%d" % i]))
        name, xs = q_dq("r%d" % i, i + 1)
    save(qn, qinit, os.path.join(out_dir, "stack_qdq.onnx"), name)


def p50(cmd, env=None):
    out = subprocess.run(["flock", "/tmp/ak-cpu.lock"] + cmd, stdout=subprocess.PIPE, text=True,
                         env=env, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1].replace(": ", ":"))["p50_ms"])


def main():
    build_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    threads = sys.argv[3] if len(sys.argv) > 3 else "2"
    out = os.path.join(build_dir, "models")
    os.makedirs(out, exist_ok=True)
    build(out)
    ak = os.path.join(build_dir, "ak")
    ortdir = os.environ.get("ORT_PEER_DIR", os.path.join(ROOT, ".cache", "peers", "ortpeer"))
    mods = os.path.join(ROOT, "node_modules")
    if not os.path.isdir(os.path.join(mods, "onnxruntime-node")):
        mods = os.path.join(ortdir, "node_modules")
    env = dict(os.environ, NODE_PATH=mods)
    fp32, qdq = os.path.join(out, "stack_fp32.onnx"), os.path.join(out, "stack_qdq.onnx")
    res = {"ak fp32": [], "ak qdq": [], "ort qdq": []}
    for _ in range(rounds):
        res["ak fp32"].append(p50([ak, "bench", fp32, "-t", threads, "-n", "50", "-w", "5", "--out", "none", "--json"]))
        res["ak qdq"].append(p50([ak, "bench", qdq, "-t", threads, "-n", "50", "-w", "5", "--out", "none", "--json"]))
        res["ort qdq"].append(p50(["node", os.path.join(ROOT, "bench", "peers", "ort_bench.js"), qdq,
                                   threads, "50"], env))
    med = {k: statistics.median(v) for k, v in res.items()}
    print("conv stack 1x64x56x56, %s thread(s), %d alternating rounds of 50 runs, median p50 ms"
          % (threads, rounds))
    for k, v in res.items():
        print("  %-8s %8.3f   (%s)" % (k, med[k], " ".join("%.3f" % t for t in v)))
    print("  ak qdq / ak fp32 = %.3f, ak qdq / ort qdq = %.3f" % (
        med["ak qdq"] / med["ak fp32"], med["ak qdq"] / med["ort qdq"]))


if __name__ == "__main__":
    main()
