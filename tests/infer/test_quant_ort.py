#!/usr/bin/python3
"""The INT8 operators against ONNX Runtime (npm onnxruntime-node, tests/infer/ort_run.js),
on small models built here with onnx.helper (Debian's python3-onnx, opset 17): every model
runs in `ak run` and in ONNX Runtime on the same seeded inputs, and every output is compared.

    test_quant_ort.py AK [--keep DIR]

Tolerances, per output:
- exact: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
  ConvInteger, QLinearMatMul and QLinearConv outputs, and the float output of a
  dynamically quantized MatMul as ONNX Runtime's quantizer writes it (DynamicQuantizeLinear
  -> MatMulInteger -> Cast -> Mul): both sides compute exact int32 sums and then the same
  float32 operations (x / scale rounded half to even, float(acc)·multiplier). The inputs
  include exact ties (x = (k + 1/2)·scale, scale a power of 2) and saturating values.
- 1e-6 relative (of the output's largest magnitude): MatMulIntegerToFloat, where ONNX
  Runtime may fuse the scale and bias into one multiply-add (one float32 rounding less).
- the QDQ convolution net (QuantizeLinear -> DequantizeLinear around Conv and MatMul, as
  ONNX Runtime's quantizer emits it): exact against ONNX Runtime with its graph
  optimizations on (both fuse the chains into QLinearConv / QLinearMatMul: exact integer
  sums, one rounding with the same float32 multiplier), and within one quantization step
  on at most 2 % of the elements against ONNX Runtime with them off (Conv in float
  between DequantizeLinear and QuantizeLinear): a float sum against an exact integer sum
  can land on the other side of a rounding boundary, never more than one step away.
- the QDQ residual add (DequantizeLinear, DequantizeLinear -> Add [-> Relu] ->
  QuantizeLinear, fused by accelkit into QLinearAdd): exact against ONNX Runtime with its
  optimizations off (the fusion computes the same float32 operations), within one step
  on at most 2 % of the elements against its own QLinearAdd (level all), which rescales
  by precomputed scale ratios.
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


def ort_modules():
    """node_modules holding onnxruntime-node: the checkout's (scripts/setup), else the one
    bench/infer/vs_peers.sh installs under .cache/peers/ortpeer."""
    for d in (os.path.join(ROOT, "node_modules"),
              os.path.join(ROOT, ".cache", "peers", "ortpeer", "node_modules")):
        if os.path.isdir(os.path.join(d, "onnxruntime-node")):
            return d
    sys.exit("FAIL: npm package onnxruntime-node is missing (run scripts/setup, which "
             "installs onnxruntime-node@1.30.0 into node_modules)")


NP_TO_TP = {np.float32: TP.FLOAT, np.uint8: TP.UINT8, np.int8: TP.INT8, np.int32: TP.INT32}


def make_model(nodes, inputs, outputs, inits, opset=17, ms=False):
    """inputs: {name: array} (graph inputs, fed), outputs: [name], inits: {name: array}."""
    graph = oh.make_graph(
        nodes, "quant_test",
        [oh.make_tensor_value_info(n, NP_TO_TP[a.dtype.type], a.shape) for n, a in inputs.items()],
        [onnx.ValueInfoProto(name=n) for n in outputs],
        [onh.from_array(np.asarray(a), n) for n, a in inits.items()])
    opsets = [oh.make_opsetid("", opset)] + ([oh.make_opsetid("com.microsoft", 1)] if ms else [])
    m = oh.make_model(graph, opset_imports=opsets)
    m.ir_version = 8
    return m


rng = np.random.default_rng(20261128)


def u8(*shape): return rng.integers(0, 256, shape, dtype=np.uint8)
def s8(*shape): return rng.integers(-128, 128, shape, dtype=np.int8)
def f32(*shape, lo=-1.0, hi=1.0): return rng.uniform(lo, hi, shape).astype(np.float32)
def scal(v, t=np.float32): return np.array(v, dtype=t)


# ---- the cases: (name, model, feeds, {output: tolerance}); tolerance "exact", ("rel", r)
# or ("step", scale) ----------------------------------------------------------------------

def case_quantize():
    x = f32(4, 37, lo=-40, hi=40)
    # exact ties at scale 0.5: (k + 1/2)·0.5, and saturating values
    x[0, :20] = (np.arange(-10, 10) + 0.5) * 0.5
    x[1, :4] = [1000, -1000, 3.75, -3.25]
    xa = f32(2, 3, 5, lo=-5, hi=5)
    xa[0, 0, :4] = [0.125, 0.375, -0.125, -0.375]  # ties at scale 0.25
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "s", "zu"], ["qu"]),
        oh.make_node("QuantizeLinear", ["x", "s", "zs"], ["qs"]),
        oh.make_node("QuantizeLinear", ["x", "s"], ["qdefault"]),
        oh.make_node("QuantizeLinear", ["xa", "sa", "za"], ["qa"], axis=1),
        oh.make_node("DequantizeLinear", ["qa", "sa", "za"], ["dqa"], axis=1),
        oh.make_node("DequantizeLinear", ["qs", "s", "zs"], ["dqs"]),
        oh.make_node("DequantizeLinear", ["i32", "s"], ["dqi32"]),
        oh.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["dqw"], axis=-1),
    ]
    inits = {"s": scal(0.5), "zu": scal(128, np.uint8), "zs": scal(-3, np.int8),
             "sa": np.array([0.25, 0.5, 0.125], np.float32), "za": np.array([1, -2, 0], np.int8),
             "sw": f32(5, lo=0.01, hi=0.1), "zw": u8(5)}
    feeds = {"x": x, "xa": xa, "i32": rng.integers(-2**20, 2**20, (3, 7), dtype=np.int32),
             "wq": u8(3, 4, 5)}
    outs = ["qu", "qs", "qdefault", "qa", "dqa", "dqs", "dqi32", "dqw"]
    return "quantize_dequantize", make_model(nodes, feeds, outs, inits), feeds, dict.fromkeys(outs, "exact")


def case_blocked():
    """Opset 21: blocked scales along an axis (a last, short block) and output_dtype."""
    x = f32(3, 10, lo=-6, hi=6)
    x[0, :4] = [0.25, -0.75, 1.25, -1.75]  # ties at the first block's scale 0.5
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "sb", "zb"], ["qb"], axis=1, block_size=4),
        oh.make_node("DequantizeLinear", ["qb", "sb", "zb"], ["dqb"], axis=1, block_size=4),
        oh.make_node("QuantizeLinear", ["x", "s"], ["qi8"], output_dtype=3),
    ]
    sb = f32(3, 3, lo=0.02, hi=0.2)
    sb[0, 0] = 0.5
    inits = {"sb": sb, "zb": s8(3, 3), "s": scal(0.05)}
    feeds = {"x": x}
    outs = ["qb", "dqb", "qi8"]
    m = make_model(nodes, feeds, outs, inits, opset=21)
    m.ir_version = 10
    return "blocked_opset21", m, feeds, dict.fromkeys(outs, "exact")


def case_dynamic():
    nodes = [oh.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"]),
             oh.make_node("DynamicQuantizeLinear", ["xp"], ["yp", "yps", "ypz"])]
    feeds = {"x": f32(6, 33, lo=-3, hi=7), "xp": f32(5, 8, lo=0.5, hi=2)}
    outs = ["y", "ys", "yz", "yp", "yps", "ypz"]
    return "dynamic_quantize", make_model(nodes, feeds, outs, {}), feeds, dict.fromkeys(outs, "exact")


def qlinearconv(name, x, w, attrs, wscale, wzp, bias=None, xzp=None, ytype=np.uint8):
    xzp = scal(100 if x.dtype == np.uint8 else -5, x.dtype) if xzp is None else xzp
    yzp = scal(120 if ytype == np.uint8 else 3, ytype)
    ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"] + (["b"] if bias is not None else [])
    inits = {"xs": scal(0.02), "xz": xzp, "w": w, "ws": wscale, "wz": wzp, "ys": scal(0.15),
             "yz": yzp}
    if bias is not None:
        inits["b"] = bias
    nodes = [oh.make_node("QLinearConv", ins, ["y"], **attrs)]
    return name, make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, {"y": "exact"}


def cases_qlinearconv():
    M = 6
    yield qlinearconv("qlinearconv_group_perchannel", u8(1, 4, 11, 9), s8(M, 2, 3, 3),
                      dict(group=2, pads=[1, 2, 0, 1], strides=[2, 1], dilations=[1, 2]),
                      f32(M, lo=0.002, hi=0.01), np.zeros(M, np.int8),
                      bias=rng.integers(-3000, 3000, M, dtype=np.int32))
    yield qlinearconv("qlinearconv_u8_weights_1x1", u8(2, 5, 7, 6), u8(7, 5, 1, 1), {},
                      scal(0.004), scal(130, np.uint8))
    yield qlinearconv("qlinearconv_s8_s8", s8(1, 3, 9, 9), s8(4, 3, 3, 3), dict(pads=[1, 1, 1, 1]),
                      scal(0.003), scal(0, np.int8), ytype=np.int8)
    yield qlinearconv("qlinearconv_1d_same_upper", u8(2, 3, 20), s8(4, 3, 5),
                      dict(strides=[3], auto_pad="SAME_UPPER"), f32(4, lo=0.002, hi=0.01),
                      np.zeros(4, np.int8), bias=rng.integers(-500, 500, 4, dtype=np.int32))
    yield qlinearconv("qlinearconv_depthwise", u8(1, 8, 10, 10), s8(8, 1, 3, 3),
                      dict(group=8, pads=[1, 1, 1, 1], strides=[2, 2]), scal(0.01),
                      scal(0, np.int8))
    # more than one chunk of pixels per image (the channel-major path packs about 256 KiB
    # of taps at a time), channels not a multiple of 4, and the per-pixel sum term of
    # uint8 weights with a zero point
    yield qlinearconv("qlinearconv_chunks", u8(1, 6, 50, 44), s8(10, 6, 3, 3),
                      dict(pads=[1, 1, 1, 1]), f32(10, lo=0.0002, hi=0.001),
                      np.zeros(10, np.int8), bias=rng.integers(-3000, 3000, 10, dtype=np.int32))
    yield qlinearconv("qlinearconv_chunks_u8w_stride2", u8(2, 7, 90, 70), u8(9, 7, 3, 3),
                      dict(pads=[1, 0, 1, 2], strides=[2, 2]), scal(0.0005),
                      scal(131, np.uint8))


def case_convinteger():
    nodes = [oh.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[0, 1, 2, 1],
                          strides=[1, 2], group=2)]
    inits = {"w": u8(4, 3, 3, 2), "xz": scal(9, np.uint8), "wz": scal(140, np.uint8)}
    feeds = {"x": u8(2, 6, 8, 7)}
    return "convinteger", make_model(nodes, feeds, ["y"], inits), feeds, {"y": "exact"}


def case_qlinearmatmul():
    nodes = [
        # u8 x s8 with per-column b scale, B constant, batched A
        oh.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y1"]),
        # u8 x u8 per tensor, B a graph input
        oh.make_node("QLinearMatMul", ["a2", "as", "az", "b2", "bs2", "bz2", "ys", "yz"], ["y2"]),
        # s8 x s8 -> s8
        oh.make_node("QLinearMatMul", ["a3", "as", "az3", "b3", "bs2", "bz3", "ys", "yz3"], ["y3"]),
    ]
    inits = {"as": scal(0.03), "az": scal(110, np.uint8), "b": s8(33, 19),
             "bs": f32(19, lo=0.001, hi=0.01), "bz": np.zeros(19, np.int8), "ys": scal(0.2),
             "yz": scal(128, np.uint8), "bs2": scal(0.004), "bz2": scal(120, np.uint8),
             "az3": scal(-4, np.int8), "bz3": scal(0, np.int8), "yz3": scal(-2, np.int8)}
    feeds = {"a": u8(2, 5, 33), "a2": u8(7, 40), "b2": u8(40, 17), "a3": s8(4, 21), "b3": s8(21, 9)}
    outs = ["y1", "y2", "y3"]
    return "qlinearmatmul", make_model(nodes, feeds, outs, inits), feeds, dict.fromkeys(outs, "exact")


def case_matmulinteger():
    nodes = [oh.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y1"]),
             oh.make_node("MatMulInteger", ["a2", "b2", "az2", "bz2"], ["y2"])]
    inits = {"b": s8(45, 70), "az": scal(7, np.uint8), "bz": s8(70), "az2": scal(200, np.uint8),
             "bz2": scal(3, np.uint8)}
    feeds = {"a": u8(3, 45), "a2": u8(2, 3, 8), "b2": u8(2, 8, 5)}
    return "matmulinteger", make_model(nodes, feeds, ["y1", "y2"], inits), feeds, \
        {"y1": "exact", "y2": "exact"}


def case_dynamic_matmul():
    """A MatMul as ONNX Runtime's dynamic quantizer rewrites it."""
    K, N = 64, 48
    nodes = [
        oh.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        oh.make_node("MatMulInteger", ["xq", "wq", "xz", "wz"], ["acc"]),
        oh.make_node("Mul", ["xs", "wscale"], ["scale"]),
        oh.make_node("Cast", ["acc"], ["accf"], to=TP.FLOAT),
        oh.make_node("Mul", ["accf", "scale"], ["mm"]),
        oh.make_node("Add", ["mm", "bias"], ["y"]),
    ]
    inits = {"wq": s8(K, N), "wz": scal(0, np.int8), "wscale": scal(0.0123),
             "bias": f32(N)}
    feeds = {"x": f32(2, 5, K, lo=-2, hi=3)}
    return "dynamic_matmul", make_model(nodes, feeds, ["y", "xq"], inits), feeds, \
        {"y": "exact", "xq": "exact"}


def case_matmul_integer_to_float():
    nodes = [oh.make_node("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "bz", "bias"],
                          ["y"], domain="com.microsoft")]
    inits = {"b": s8(40, 24), "as": scal(0.05), "bs": f32(24, lo=0.001, hi=0.01),
             "az": scal(120, np.uint8), "bz": np.zeros(24, np.int8), "bias": f32(24)}
    feeds = {"a": u8(3, 40)}
    return "matmul_integer_to_float", make_model(nodes, feeds, ["y"], inits, ms=True), feeds, \
        {"y": ("rel", 1e-6)}


def case_qdq_net():
    """QuantizeLinear -> DequantizeLinear around two Conv and a MatMul, per-channel int8
    weights and int32 biases behind DequantizeLinear, as ONNX Runtime's quantizer emits."""
    s0, z0, s1, z1, s2, z2, s3, z3 = 0.02, 128, 0.05, 0, 0.04, 0, 0.1, 120
    c1, c2 = 8, 8
    w1s, w2s, w3s = f32(c1, lo=0.003, hi=0.01), f32(c2, lo=0.003, hi=0.01), scal(0.004)
    nodes, inits = [], {}

    def q(x, s, z, y):
        inits[y + "_s"], inits[y + "_z"] = scal(s), scal(z, np.uint8)
        nodes.append(oh.make_node("QuantizeLinear", [x, y + "_s", y + "_z"], [y]))
        nodes.append(oh.make_node("DequantizeLinear", [y, y + "_s", y + "_z"], [y + "_f"]))
        return y + "_f"

    def weight(name, w, ws, axis=0):
        inits[name + "_q"], inits[name + "_s"] = w, ws
        inits[name + "_z"] = np.zeros(ws.shape, np.int8)
        nodes.append(oh.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"],
                                  [name], axis=axis))
        return name

    def bias(name, b, scale):
        inits[name + "_q"], inits[name + "_s"] = b, scale.astype(np.float32)
        nodes.append(oh.make_node("DequantizeLinear", [name + "_q", name + "_s"], [name], axis=0))
        return name

    x = q("x", s0, z0, "xq")
    w1 = weight("w1", s8(c1, 3, 3, 3), w1s)
    b1 = bias("b1", rng.integers(-2000, 2000, c1, dtype=np.int32), np.float32(s0) * w1s)
    nodes.append(oh.make_node("Conv", [x, w1, b1], ["c1"], pads=[1, 1, 1, 1]))
    nodes.append(oh.make_node("Relu", ["c1"], ["r1"]))
    h = q("r1", s1, z1, "q1")
    w2 = weight("w2", s8(c2, c1 // 2, 3, 3), w2s)
    b2 = bias("b2", rng.integers(-2000, 2000, c2, dtype=np.int32), np.float32(s1) * w2s)
    nodes.append(oh.make_node("Conv", [h, w2, b2], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2],
                              group=2))
    nodes.append(oh.make_node("Relu", ["c2"], ["r2"]))
    h = q("r2", s2, z2, "q2")
    inits["shape"] = np.array([1, -1], np.int64)
    nodes.append(oh.make_node("Reshape", ["q2", "shape"], ["flatq"]))  # on the uint8 values
    nodes.append(oh.make_node("DequantizeLinear", ["flatq", "q2_s", "q2_z"], ["flat"]))
    w3 = weight("w3", s8(c2 * 9 * 8, 10), w3s)
    nodes.append(oh.make_node("MatMul", ["flat", w3], ["mm"]))
    y = q("mm", s3, z3, "q3")
    nodes.append(oh.make_node("Identity", [y], ["y"]))
    feeds = {"x": f32(1, 3, 17, 15, lo=-1, hi=1.5)}
    outs = ["q1", "q2", "q3", "y"]
    tol = {"q1": ("step", 1), "q2": ("step", 1), "q3": ("step", 1), "y": ("step", s3)}
    return "qdq_convnet", make_model(nodes, feeds, outs, inits), feeds, tol


def case_qdq_residual():
    """The QDQ residual add: DequantizeLinear of two quantized tensors -> Add [-> Relu] ->
    QuantizeLinear, as a ResNet block's shortcut is quantized; accelkit fuses each chain
    into one QLinearAdd. Uint8 and int8 operands mixed, a [1, C, 1, 1] operand broadcast,
    results uint8 and int8. The fusion computes the unfused float32 operations, so the
    results equal ONNX Runtime's unfused ones exactly; ONNX Runtime's own QLinearAdd
    (level all) rescales differently, within one step."""
    nodes, inits = [], {}

    def dq(x, s, z, name):
        inits[name + "_s"], inits[name + "_z"] = scal(s), z
        nodes.append(oh.make_node("DequantizeLinear", [x, name + "_s", name + "_z"], [name]))
        return name

    def q(x, s, z, y):
        inits[y + "_s"], inits[y + "_z"] = scal(s), z
        nodes.append(oh.make_node("QuantizeLinear", [x, y + "_s", y + "_z"], [y]))

    a = dq("a", 0.031, scal(131, np.uint8), "af")
    b = dq("b", 0.017, scal(-5, np.int8), "bf")
    nodes.append(oh.make_node("Add", [a, b], ["sum1"]))
    nodes.append(oh.make_node("Relu", ["sum1"], ["r1"]))
    q("r1", 0.04, scal(0, np.uint8), "y1")  # uint8 + int8 -> Relu -> uint8
    y1 = dq("y1", 0.04, scal(0, np.uint8), "y1f")
    c = dq("c", 0.05, scal(3, np.int8), "cf")  # [1, C, 1, 1], broadcast
    nodes.append(oh.make_node("Add", [y1, c], ["sum2"]))
    q("sum2", 0.03, scal(-2, np.int8), "y2")  # no Relu, int8 out
    # exact ties: 0.5 + k on the output's grid (scales powers of two)
    t = dq("t", 0.25, scal(0, np.uint8), "tf")
    u = dq("u", 0.125, scal(0, np.uint8), "uf")
    nodes.append(oh.make_node("Add", [t, u], ["sum3"]))
    q("sum3", 0.25, scal(128, np.uint8), "y3")
    feeds = {"a": u8(2, 6, 7, 9), "b": s8(2, 6, 7, 9), "c": s8(1, 6, 1, 1),
             "t": u8(3, 40), "u": u8(3, 40)}
    tol = {"y1": "exact", "y2": "exact", "y3": "exact"}
    return "qdq_residual", make_model(nodes, feeds, list(tol), inits), feeds, tol


def all_cases():
    yield case_quantize()
    yield case_dynamic()
    yield case_blocked()
    yield from cases_qlinearconv()
    yield case_convinteger()
    yield case_qlinearmatmul()
    yield case_matmulinteger()
    yield case_dynamic_matmul()
    yield case_matmul_integer_to_float()
    yield case_qdq_net()
    yield case_qdq_residual()


# ---- running and comparing ---------------------------------------------------------------

def save_inputs(d, feeds):
    os.makedirs(d, exist_ok=True)
    for n, a in feeds.items():
        np.save(os.path.join(d, n + ".npy"), a)


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       timeout=120)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stdout))


def compare(name, out, got, want, tol):
    if got.shape != want.shape or got.dtype != want.dtype:
        return "%s/%s: accelkit %s %s, ONNX Runtime %s %s" % (
            name, out, got.dtype, got.shape, want.dtype, want.shape)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    worst = float(diff.max()) if diff.size else 0.0
    if tol == "exact":
        if worst != 0 or not np.array_equal(got, want):
            i = np.unravel_index(int(diff.argmax()), diff.shape)
            return "%s/%s: not exact, at %s accelkit %s, ONNX Runtime %s (%d differ)" % (
                name, out, i, got[i], want[i], int((diff != 0).sum()))
        return None
    kind, t = tol
    if kind == "rel":
        bound = t * max(float(np.abs(want).max()), 1e-30)
        if worst > bound:
            return "%s/%s: max abs error %g beyond %g" % (name, out, worst, bound)
        return None
    # one quantization step, on at most 2 % of the elements
    steps = diff / t
    off = int((steps > 1e-6).sum())
    print("  %s/%s: %d of %d elements one step off (%.2f %%)" % (
        name, out, off, diff.size, 100.0 * off / max(diff.size, 1)))
    if float(steps.max()) > 1 + 1e-4:
        return "%s/%s: %g steps off (at most 1)" % (name, out, float(steps.max()))
    if off > 0.02 * diff.size:
        return "%s/%s: %d of %d elements off by a step (at most 2 %%)" % (name, out, off, diff.size)
    return None


# the fused operators accelkit's optimizer must make of these cases' chains, and the
# operators that must then be gone (read from AK_PROFILE's table of operator types)
FUSED = {"qdq_residual": (["QLinearAdd"], ["Add", "Relu", "DequantizeLinear"]),
         "dynamic_matmul": (["MatMulIntegerToFloat"], ["MatMulInteger", "Cast", "Mul", "Add"]),
         "qdq_convnet": (["QLinearConv", "QLinearMatMul"], ["Conv", "MatMul"])}


def check_fused(ak, name, path):
    if name not in FUSED:
        return None
    p = subprocess.run([ak, "bench", path, "-n", "1", "-w", "0", "--out", "none"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, AK_PROFILE="1"), timeout=120)
    ops = {line.split()[0] for line in p.stdout.splitlines()[1:] if line.strip()}
    want, gone = FUSED[name]
    missing = [op for op in want if op not in ops]
    left = [op for op in gone if op in ops]
    if p.returncode != 0 or missing or left:
        return "%s: fused operators missing %s, unfused left %s (exit %d)" % (
            name, missing, left, p.returncode)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ak")
    ap.add_argument("--keep", help="write the models and outputs here and keep them")
    args = ap.parse_args()
    modules = ort_modules()
    env = dict(os.environ, NODE_PATH=modules)
    runner = os.path.join(ROOT, "tests", "infer", "ort_run.js")
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="ak-quant-ort-")
    top = args.keep or tmp.name
    failures, n = [], 0
    for name, model, feeds, tols in all_cases():
        d = os.path.join(top, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        onnx.save(model, path)
        save_inputs(os.path.join(d, "in"), feeds)
        try:
            run([args.ak, "run", path, "--inputs", os.path.join(d, "in"), "-o",
                 os.path.join(d, "ak"), "-t", "2"])
            err = check_fused(args.ak, name, path)
            if err:
                failures.append(err)
            levels = (["disabled", "all"] if name in ("qdq_convnet", "dynamic_matmul", "qdq_residual")
                      else ["all"])
            for level in levels:
                od = os.path.join(d, "ort_" + level)
                run(["node", runner, path, os.path.join(d, "in"), od, level], env)
                for out, tol in tols.items():
                    got = np.load(os.path.join(d, "ak", out + ".npy"))
                    want = np.load(os.path.join(od, out + ".npy"))
                    # ONNX Runtime's fusions (level all): its DynamicQuantizeMatMul may fuse
                    # the scale and bias into one multiply-add; its QLinearConv and
                    # QLinearMatMul from the QDQ net are what accelkit's optimizer makes of it
                    # too (integer sums, one rounding), so those match exactly
                    if level == "all" and name == "dynamic_matmul" and tol == "exact" and out == "y":
                        tol = ("rel", 1e-6)
                    if level == "all" and name == "qdq_convnet":
                        tol = "exact"
                    if level == "all" and name == "qdq_residual":
                        tol = ("step", 1)
                    err = compare("%s[ort %s]" % (name, level), out, got, want, tol)
                    n += 1
                    if err:
                        failures.append(err)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
            failures.append("%s: %s" % (name, e))
    for f in failures:
        print("FAIL", f)
    print("%d comparisons, %d failed" % (n, len(failures)))
    if tmp:
        tmp.cleanup()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
