#!/usr/bin/python3
"""`ak optimize` against ONNX Runtime (npm onnxruntime-node, tests/infer/ort_run.js), on
small models built here with onnx.helper (Debian's python3-onnx, opset 17):

- each model is optimized at --level basic, extended and layout;
- the basic file passes onnx.checker, uses standard operators only, and ONNX Runtime
  (its own optimizations off, so the file runs as written) gives outputs within 1e-5
  of what it gives on the original;
- accelkit (`ak run`) gives outputs within 1e-5 of the original on the three files;
- `ak info --optimized` lists what `ak optimize --level layout` does;
- what each pass should have done is checked in the file written and in the lines
  `ak optimize` prints: each basic pass sees at least three differently written forms
  of its pattern (BatchNormalization after Conv with and without bias and grouped;
  Mul, Div and Add, Sub by scalars and per-channel constants of either rank and operand
  order; dead single nodes, chains and multi-output nodes; duplicated nodes, chains
  and MatMuls; Identity, Transpose pairs and Reshape/Flatten chains).

    test_optimize_ort.py AK [--keep DIR]

A missing onnxruntime-node or onnx module is a failure naming what to install."""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as oh
    from onnx import numpy_helper as onh
except ImportError:
    sys.exit("FAIL: the python3 module onnx is missing (Debian python3-onnx; run scripts/setup)")

rng = np.random.default_rng(20261129)
TOL = 1e-5


def f32(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def make_model(nodes, inputs, outputs, inits):
    """inputs: {name: array} (fed), outputs: {name: shape}, inits: {name: array}."""
    graph = oh.make_graph(
        nodes, "optimize_test",
        [oh.make_tensor_value_info(n, TP.FLOAT, a.shape) for n, a in inputs.items()],
        [oh.make_tensor_value_info(n, TP.FLOAT, shape) for n, shape in outputs.items()],
        [onh.from_array(np.asarray(a), n) for n, a in inits.items()])
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def N(op, ins, outs, **attrs):
    return oh.make_node(op, ins, outs, **attrs)


# ---- the models: (name, model, feeds, {pass line: at least}, {op: count in basic file}) ----

def bn_params(prefix, m, inits):
    inits[prefix + "_s"] = f32(m, lo=0.5, hi=1.5)
    inits[prefix + "_b"] = f32(m)
    inits[prefix + "_m"] = f32(m)
    inits[prefix + "_v"] = f32(m, lo=0.2, hi=1.0)
    return [prefix + s for s in ("_s", "_b", "_m", "_v")]


def case_convnet():
    """Conv+BatchNormalization+Relu blocks, and Conv followed by Mul/Div/Add/Sub."""
    x = f32(1, 4, 9, 9)
    inits = {"w1": f32(8, 4, 3, 3), "b1": f32(8), "w2": f32(8, 8, 1, 1), "w3": f32(8, 2, 3, 3),
             "w4": f32(8, 8, 3, 3), "b4": f32(8), "w5": f32(8, 8, 1, 1), "w6": f32(8, 8, 1, 1),
             "b6": f32(8), "w7": f32(8, 8, 1, 1), "b7": f32(8),
             "half": np.array(0.5, np.float32), "ch4": f32(1, 8, 1, 1, lo=0.5, hi=2.0),
             "ch3": f32(8, 1, 1, lo=0.5, hi=2.0), "add3": f32(8, 1, 1), "sc": np.array(0.25, np.float32),
             "sub4": f32(1, 8, 1, 1)}
    nodes = [
        # form 1: Conv with bias -> BN -> Relu
        N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        N("BatchNormalization", ["c1"] + bn_params("bn1", 8, inits), ["n1"], epsilon=1e-3),
        N("Relu", ["n1"], ["r1"]),
        # a layout round trip exporters write around NHWC operators (Transpose pair, form 3)
        N("Transpose", ["r1"], ["r1_nhwc"], perm=[0, 2, 3, 1]),
        N("Transpose", ["r1_nhwc"], ["r1b"], perm=[0, 3, 1, 2]),
        # form 2: Conv without bias -> BN
        N("Conv", ["r1b", "w2"], ["c2"]),
        N("BatchNormalization", ["c2"] + bn_params("bn2", 8, inits), ["n2"]),
        # form 3: grouped Conv -> BN (second branch from x)
        N("Conv", ["x", "w3"], ["c3"], pads=[1, 1, 1, 1], group=2),
        N("BatchNormalization", ["c3"] + bn_params("bn3", 8, inits), ["n3"]),
        N("Add", ["n2", "n3"], ["s23"]),
        # Mul by a scalar, then Add of [8,1,1]
        N("Conv", ["s23", "w4", "b4"], ["c4"], pads=[1, 1, 1, 1]),
        N("Mul", ["c4", "half"], ["m4"]),
        N("Add", ["m4", "add3"], ["a4"]),
        # Mul with the constant first ([1,8,1,1]), then Sub of [1,8,1,1]
        N("Conv", ["a4", "w5"], ["c5"]),
        N("Mul", ["ch4", "c5"], ["m5"]),
        N("Sub", ["m5", "sub4"], ["a5"]),
        # Div by [8,1,1] on a Conv with bias, then Add of a scalar, constant first
        N("Conv", ["a5", "w6", "b6"], ["c6"]),
        N("Div", ["c6", "ch3"], ["d6"]),
        N("Add", ["sc", "d6"], ["a6"]),
        # a6 is a graph output and read on: the folded Conv writes it
        N("Conv", ["a6", "w7", "b7"], ["c7"]),
        N("Relu", ["c7"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, {"y": [1, 8, 9, 9], "a6": [1, 8, 9, 9]}, inits)
    expect = {"BatchNormalization folded into Conv": 3, "Mul/Div folded into Conv": 3,
              "Add/Sub folded into Conv": 3, "Transpose pair cancelled": 1}
    ops = {"Conv": 7, "BatchNormalization": 0, "Mul": 0, "Div": 0, "Sub": 0, "Add": 1,
           "Transpose": 0}
    return "convnet", model, {"x": x}, expect, ops


def case_mlp():
    """Gemm MLP with Identity nodes and Reshape/Flatten chains."""
    x = f32(4, 2, 8)
    inits = {"wa": f32(32, 16), "ba": f32(32), "wb": f32(10, 32), "bb": f32(10),
             "s1": np.array([4, 4, 4], np.int64), "s2": np.array([4, -1], np.int64),
             "s3": np.array([2, 2, 10], np.int64), "s4": np.array([4, 10], np.int64)}
    nodes = [
        N("Identity", ["x"], ["xi"]),
        N("Reshape", ["xi", "s1"], ["r1"]),              # form 1: Reshape -> Reshape (-1)
        N("Reshape", ["r1", "s2"], ["flat"]),
        N("Gemm", ["flat", "wa", "ba"], ["g1"], transB=1),
        N("Relu", ["g1"], ["h1"]),
        N("Identity", ["h1"], ["h1i0"]),                 # Identity forms 2 and 3: a chain
        N("Identity", ["h1i0"], ["h1i"]),
        N("Gemm", ["h1i", "wb", "bb"], ["g2"], transB=1, alpha=1.0, beta=1.0),
        N("Flatten", ["g2"], ["f2"], axis=1),            # form 2: Flatten -> Reshape
        N("Reshape", ["f2", "s3"], ["r3"]),
        N("Reshape", ["r3", "s4"], ["y"]),               # form 3: a chain of three
    ]
    model = make_model(nodes, {"x": x}, {"y": [4, 10]}, inits)
    expect = {"Identity removed": 3, "Reshape chain shortened": 3}
    ops = {"Identity": 0, "Flatten": 0, "Gemm": 2, "Reshape": 2}
    return "mlp_gemm", model, {"x": x}, expect, ops


def case_transformer():
    """A transformer-ish block: LayerNormalization-17 and a hand-written LayerNorm, MatMul +
    bias, erf-GELU, a residual, Transpose pairs that cancel."""
    x = f32(2, 5, 16)
    inits = {"g": f32(16, lo=0.5, hi=1.5), "be": f32(16), "w1": f32(16, 32), "bw1": f32(32),
             "w2": f32(32, 16), "bw2": f32(16), "sqrt2": np.array(np.sqrt(2.0), np.float32),
             "one_f": np.array(1.0, np.float32), "half_f": np.array(0.5, np.float32),
             "two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
             "g2": f32(16, lo=0.5, hi=1.5), "be2": f32(16)}
    nodes = [
        N("LayerNormalization", ["x", "g", "be"], ["ln"], axis=-1, epsilon=1e-5),
        N("MatMul", ["ln", "w1"], ["mm1"]), N("Add", ["mm1", "bw1"], ["h"]),
        N("Div", ["h", "sqrt2"], ["hd"]), N("Erf", ["hd"], ["he"]),
        N("Add", ["he", "one_f"], ["hp"]), N("Mul", ["h", "hp"], ["hm"]),
        N("Mul", ["hm", "half_f"], ["gelu"]),
        N("MatMul", ["gelu", "w2"], ["mm2"]), N("Add", ["mm2", "bw2"], ["o"]),
        N("Add", ["o", "x"], ["res"]),
        # Transpose pairs: [0,2,1] twice; [1,2,0] then [2,0,1]
        N("Transpose", ["res"], ["t1"], perm=[0, 2, 1]), N("Transpose", ["t1"], ["t2"], perm=[0, 2, 1]),
        N("Transpose", ["t2"], ["t3"], perm=[1, 2, 0]), N("Transpose", ["t3"], ["t4"], perm=[2, 0, 1]),
        # a LayerNorm written out
        N("ReduceMean", ["t4"], ["mu"], axes=[-1]), N("Sub", ["t4", "mu"], ["dd"]),
        N("Pow", ["dd", "two"], ["sq"]), N("ReduceMean", ["sq"], ["var"], axes=[-1]),
        N("Add", ["var", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]), N("Div", ["dd", "sd"], ["nd"]),
        N("Mul", ["nd", "g2"], ["ng"]), N("Add", ["ng", "be2"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, {"y": [2, 5, 16]}, inits)
    expect = {"Transpose pair cancelled": 2}
    ops = {"Transpose": 0, "LayerNormalization": 1, "Erf": 1}
    return "transformer_block", model, {"x": x}, expect, ops


def case_dead_and_duplicates():
    """Dead branches and duplicated nodes."""
    x, z = f32(3, 8), f32(3, 8)
    inits = {"w": f32(8, 8), "k": np.array([2], np.int64)}
    nodes = [
        N("Relu", ["x"], ["a"]), N("Relu", ["x"], ["a_dup"]),             # duplicate node
        N("Sigmoid", ["a"], ["sa"]), N("Sigmoid", ["a_dup"], ["sa_dup"]),  # duplicate chain
        N("MatMul", ["sa", "w"], ["p"]), N("MatMul", ["sa_dup", "w"], ["p_dup"]),  # duplicate MatMul
        N("Add", ["p", "p_dup"], ["s"]),
        N("Mul", ["s", "z"], ["y"]),
        N("Exp", ["x"], ["dead1"]),                                       # a dead node
        N("Neg", ["z"], ["dead2"]), N("Abs", ["dead2"], ["dead3"]),        # a dead chain
        N("TopK", ["z", "k"], ["dead_v", "dead_i"], axis=1),              # dead, two outputs
        N("LeakyRelu", ["x"], ["l1"], alpha=0.1), N("LeakyRelu", ["x"], ["l2"], alpha=0.2),  # not duplicates
        N("Sub", ["l1", "l2"], ["y2"]),
    ]
    model = make_model(nodes, {"x": x, "z": z}, {"y": [3, 8], "y2": [3, 8]}, inits)
    expect = {"duplicate node merged": 3, "dead node removed": 4}
    ops = {"Relu": 1, "Sigmoid": 1, "MatMul": 1, "Exp": 0, "Neg": 0, "Abs": 0, "TopK": 0,
           "LeakyRelu": 2}
    return "dead_and_duplicates", model, {"x": x, "z": z}, expect, ops


def all_cases():
    return [case_convnet(), case_mlp(), case_transformer(), case_dead_and_duplicates()]


# ---- running and comparing ---------------------------------------------------------------

def ort_modules():
    for d in (os.path.join(ROOT, "node_modules"),
              os.path.join(ROOT, ".cache", "peers", "ortpeer", "node_modules")):
        if os.path.isdir(os.path.join(d, "onnxruntime-node")):
            return d
    sys.exit("FAIL: npm package onnxruntime-node is missing (run scripts/setup, which "
             "installs onnxruntime-node@1.30.0 into node_modules)")


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       timeout=120)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stdout))
    return p.stdout


def outputs(d, names):
    return {n: np.load(os.path.join(d, n + ".npy")) for n in names}


def compare(what, got, want):
    errs = []
    for n, w in want.items():
        g = got[n]
        if g.shape != w.shape or g.dtype != w.dtype:
            errs.append("%s/%s: %s %s, want %s %s" % (what, n, g.dtype, g.shape, w.dtype, w.shape))
            continue
        worst = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max())
        bound = TOL * max(1.0, float(np.abs(w).max()))
        if not worst <= bound:
            errs.append("%s/%s: max abs difference %g beyond %g" % (what, n, worst, bound))
    return errs


def pass_counts(text):
    """'  BatchNormalization folded into Conv     3' lines of `ak optimize`."""
    counts = {}
    for line in text.splitlines()[1:]:
        parts = line.rsplit(None, 1)
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0].strip()] = int(parts[1])
    return counts


def check_basic_file(name, path, ops):
    errs = []
    m = onnx.load(path)
    try:
        onnx.checker.check_model(m)
    except onnx.checker.ValidationError as e:
        errs.append("%s: onnx.checker refuses the basic file: %s" % (name, str(e).splitlines()[0]))
    domains = {n.domain for n in m.graph.node} - {"", "ai.onnx"}
    if domains:
        errs.append("%s: the basic file uses domains %s" % (name, sorted(domains)))
    have = {}
    for n in m.graph.node:
        have[n.op_type] = have.get(n.op_type, 0) + 1
    for op, want in ops.items():
        if have.get(op, 0) != want:
            errs.append("%s: %d %s nodes in the basic file, want %d (ops: %s)" % (
                name, have.get(op, 0), op, want, have))
    return errs


def check_case(ak, runner, env, top, case):
    name, model, feeds, expect, ops = case
    d = os.path.join(top, name)
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    for n, a in feeds.items():
        np.save(os.path.join(d, "in", n + ".npy"), a)
    orig = os.path.join(d, "model.onnx")
    onnx.save(model, orig)
    names = [o.name for o in model.graph.output]
    errs = []
    files = {}
    for level in ("basic", "extended", "layout"):
        files[level] = os.path.join(d, level + ".onnx")
        text = run([ak, "optimize", orig, files[level], "--level", level])
        if level == "layout":  # `ak info --optimized` lists what every level does
            info = run([ak, "info", orig, "--optimized"])
            listed = pass_counts(info[info.index("\noptimized "):])
            done = pass_counts(text)
            done.pop("nodes folded into constants", None)  # info prints it on its title line
            if listed != done:
                errs.append("%s: `ak info --optimized` lists %s, `ak optimize --level layout` %s"
                            % (name, listed, done))
        if level == "basic":
            counts = pass_counts(text)
            for what, least in expect.items():
                if counts.get(what, 0) < least:
                    errs.append("%s: `%s` applied %d times, want at least %d:\n%s" % (
                        name, what, counts.get(what, 0), least, text))
    errs += check_basic_file(name, files["basic"], ops)
    # ONNX Runtime as written (its own graph optimizations off) on original and basic
    ort = {}
    for tag, path in (("orig", orig), ("basic", files["basic"])):
        od = os.path.join(d, "ort_" + tag)
        run(["node", runner, path, os.path.join(d, "in"), od, "disabled"], env)
        ort[tag] = outputs(od, names)
    errs += compare(name + " [ONNX Runtime: basic file vs original]", ort["basic"], ort["orig"])
    # accelkit on all three
    ak_out = {}
    for tag, path in [("orig", orig)] + list(files.items()):
        od = os.path.join(d, "ak_" + tag)
        run([ak, "run", path, "--inputs", os.path.join(d, "in"), "-o", od, "-t", "2"])
        ak_out[tag] = outputs(od, names)
    errs += compare(name + " [accelkit: original vs ONNX Runtime]", ak_out["orig"], ort["orig"])
    for tag in files:
        errs += compare("%s [accelkit: %s file vs original]" % (name, tag), ak_out[tag], ak_out["orig"])
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ak")
    ap.add_argument("--keep", help="write the models and outputs here and keep them")
    args = ap.parse_args()
    env = dict(os.environ, NODE_PATH=ort_modules())
    runner = os.path.join(ROOT, "tests", "infer", "ort_run.js")
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="ak-optimize-ort-")
    top = args.keep or tmp.name
    failures = []
    cases = all_cases()
    for case in cases:
        try:
            errs = check_case(args.ak, runner, env, top, case)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            errs = ["%s: %s" % (case[0], e)]
        print("%-22s %s" % (case[0], "ok" if not errs else "FAIL"))
        failures += errs
    for f in failures:
        print("FAIL", f)
    print("%d models, %d failures" % (len(cases), len(failures)))
    if tmp:
        tmp.cleanup()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
