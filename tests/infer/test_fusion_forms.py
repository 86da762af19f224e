#!/usr/bin/python3
"""The extended optimizer's fusions recognised by what the subgraph computes: for each
pattern (LayerNorm, RMSNorm, SkipLayerNorm, GELU erf and tanh, Gemm/MatMul + bias +
activation, Shape/Size subgraphs folded into constants) several differently written forms, built by hand with onnx.helper (opsets 13,
17 and 18) and exported by torch.onnx.export of small modules (torch 1.13, opsets 11, 13
and 17). For each model:

- the fused operator appears in the session's optimization notes (what `ak info
  --optimized` lists, read through ak_session_optimizations) — or, for the near misses
  (a wrong constant, an intermediate with a second reader, a wrong axis, Gemm alpha ≠ 1,
  the Shape of a symbolic dim), does NOT appear;
- the outputs equal the unoptimized session's (AK_OPTIMIZE_NONE) within 1e-5 and ONNX
  Runtime's (npm onnxruntime-node, tests/infer/ort_run.js) within 1e-4;
- the optimized graph saved as ONNX (what `ak optimize --level extended` writes) reloads
  and computes the same.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python test_fusion_forms.py

A missing onnx, torch, node or onnxruntime-node is a failure naming what to install."""
import ctypes
import io
import os
import sys
import unittest
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ort_case import OrtCase  # noqa: E402

try:
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as oh
    from onnx import numpy_helper as onh
except ImportError:
    sys.exit("FAIL: the python3 module onnx is missing (Debian python3-onnx; run scripts/setup)")
try:
    import torch
    import torch.nn as nn
except ImportError:
    sys.exit("FAIL: torch is missing for /usr/bin/python3 (run scripts/setup)")
from accelkit.inference import NativeSession  # noqa: E402

rng = np.random.default_rng(20261129)
H = 16
SQRT2, SQRT_2_PI = float(np.sqrt(2.0)), float(np.sqrt(2.0 / np.pi))
OPT_NONE, OPT_EXTENDED = 0, 3


def f32(*shape):
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


def N(op, ins, outs, **attrs):
    return oh.make_node(op, ins, outs, **attrs)


def C(name, value):
    """A Constant node (exporters put them in front of the chains)."""
    return N("Constant", [], [name], value=onh.from_array(np.asarray(value, np.float32), name))


def model(nodes, inputs, out_shape, inits, opset=17):
    graph = oh.make_graph(
        nodes, "fusion_forms",
        [oh.make_tensor_value_info(n, TP.FLOAT, a.shape) for n, a in inputs.items()],
        [oh.make_tensor_value_info("y", TP.FLOAT, out_shape)],
        [onh.from_array(np.asarray(a), n) for n, a in inits.items()])
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def mean(x, out, opset, axis=-1):
    """ReduceMean over one axis, keepdims: attribute before opset 18, input from 18."""
    if opset >= 18:
        return [N("Constant", [], [out + "_ax"],
                  value=onh.from_array(np.array([axis], np.int64), out + "_ax")),
                N("ReduceMean", [x, out + "_ax"], [out])]
    return [N("ReduceMean", [x], [out], axes=[axis])]


# ---- hand-written forms --------------------------------------------------------------------

def layernorm(opset=17, square="pow", inv="div", eps_first=False, gamma=True, beta=True,
              gamma_first=False, axis=-1, extra_reader=False):
    x = f32(2, 3, H)
    nodes = mean("x", "mu", opset, axis) + [N("Sub", ["x", "mu"], ["d"])]
    nodes += [C("two", 2.0), N("Pow", ["d", "two"], ["sq"])] if square == "pow" else \
        [N("Mul", ["d", "d"], ["sq"])]
    nodes += mean("sq", "var", opset, axis)
    nodes += [C("eps", 1e-5), N("Add", ["eps", "var"] if eps_first else ["var", "eps"], ["ve"])]
    if inv == "div":
        nodes += [N("Sqrt", ["ve"], ["sd"]), N("Div", ["d", "sd"], ["n"])]
    elif inv == "reciprocal":
        nodes += [N("Sqrt", ["ve"], ["sd"]), N("Reciprocal", ["sd"], ["r"]),
                  N("Mul", ["r", "d"], ["n"])]
    elif inv == "one_over":
        nodes += [N("Sqrt", ["ve"], ["sd"]), C("one", 1.0), N("Div", ["one", "sd"], ["r"]),
                  N("Mul", ["d", "r"], ["n"])]
    else:  # pow -0.5
        nodes += [C("mhalf", -0.5), N("Pow", ["ve", "mhalf"], ["r"]), N("Mul", ["d", "r"], ["n"])]
    last, inits = "n", {}
    if gamma:
        inits["g"] = f32(H) + 1.0
        nodes.append(N("Mul", ["g", last] if gamma_first else [last, "g"], ["ng"]))
        last = "ng"
    if beta:
        inits["b"] = f32(H)
        nodes.append(N("Add", ["b", last] if gamma_first else [last, "b"], ["nb"]))
        last = "nb"
    if extra_reader:  # the variance is also read elsewhere: not the pattern's alone
        nodes.append(N("Add", [last, "var"], ["y"]))
    else:
        nodes.append(N("Identity", [last], ["y"]))
    return model(nodes, {"x": x}, list(x.shape), inits, opset), {"x": x}


def rmsnorm(opset=17, square="pow", inv="div", gamma=True, gamma_first=True, eps=1e-6):
    x = f32(2, 3, H)
    nodes = [C("two", 2.0), N("Pow", ["x", "two"], ["sq"])] if square == "pow" else \
        [N("Mul", ["x", "x"], ["sq"])]
    nodes += mean("sq", "var", opset) + [C("eps", eps), N("Add", ["var", "eps"], ["ve"])]
    if inv == "div":
        nodes += [N("Sqrt", ["ve"], ["sd"]), N("Div", ["x", "sd"], ["n"])]
    else:  # LLaMA / T5: x * rsqrt(var + eps), exported as Reciprocal(Sqrt)
        nodes += [N("Sqrt", ["ve"], ["sd"]), N("Reciprocal", ["sd"], ["r"]),
                  N("Mul", ["x", "r"], ["n"])]
    inits = {}
    if gamma:
        inits["g"] = f32(H) + 1.0
        nodes.append(N("Mul", ["g", "n"] if gamma_first else ["n", "g"], ["y"]))
    else:
        nodes.append(N("Identity", ["n"], ["y"]))
    return model(nodes, {"x": x}, list(x.shape), inits, opset), {"x": x}


def gelu(form, opset=17, tanh=False, cube="pow", c_erf=1 / SQRT2, scale="div"):
    """form: how x, 0.5 and (1 + f) are associated: x_p_half, half_x_p, p_half_x."""
    x = f32(4, H) * 3
    if tanh:
        nodes = [C("three", 3.0), N("Pow", ["x", "three"], ["x3"])] if cube == "pow" else \
            [N("Mul", ["x", "x"], ["x2"]), N("Mul", ["x2", "x"], ["x3"])]
        nodes += [C("k", 0.044715), N("Mul", ["k", "x3"], ["kx3"]), N("Add", ["x", "kx3"], ["u"]),
                  C("c", SQRT_2_PI), N("Mul", ["u", "c"], ["t_in"]), N("Tanh", ["t_in"], ["f"])]
    elif scale == "div":
        nodes = [C("s2", 1 / c_erf), N("Div", ["x", "s2"], ["e_in"]), N("Erf", ["e_in"], ["f"])]
    else:
        nodes = [C("s2", c_erf), N("Mul", ["s2", "x"], ["e_in"]), N("Erf", ["e_in"], ["f"])]
    nodes += [C("one", 1.0), N("Add", ["one", "f"], ["p"]), C("half", 0.5)]
    if form == "x_p_half":
        nodes += [N("Mul", ["x", "p"], ["xp"]), N("Mul", ["xp", "half"], ["y"])]
    elif form == "half_x_p":
        nodes += [N("Mul", ["half", "x"], ["hx"]), N("Mul", ["hx", "p"], ["y"])]
    else:
        nodes += [N("Mul", ["p", "half"], ["ph"]), N("Mul", ["x", "ph"], ["y"])]
    return model(nodes, {"x": x}, list(x.shape), {}, opset), {"x": x}


def gemm(act=None, trans_b=1, alpha=1.0, c_shape=(8,), opset=13):
    a = f32(4, H)
    b = f32(8, H) if trans_b else f32(H, 8)
    nodes = [N("Gemm", ["a", "B", "Cb"], ["z" if act else "y"], transB=trans_b, alpha=alpha)]
    if act == "LeakyRelu":
        nodes.append(N("LeakyRelu", ["z"], ["y"], alpha=0.2))
    elif act == "Clip":
        nodes += [C("lo", -0.3), C("hi", 0.4), N("Clip", ["z", "lo", "hi"], ["y"])]
    elif act:
        nodes.append(N(act, ["z"], ["y"]))
    return model(nodes, {"a": a}, [4, 8], {"B": b, "Cb": f32(*c_shape)}, opset), {"a": a}


def matmul_bias_first(act="Sigmoid"):
    a = f32(2, 3, H)
    nodes = [N("MatMul", ["a", "B"], ["m"]), N("Add", ["bias", "m"], ["z"]), N(act, ["z"], ["y"])]
    return model(nodes, {"a": a}, [2, 3, 8], {"B": f32(H, 8), "bias": f32(8)}), {"a": a}


def matmul_bias_tiles(act=None, opset=17):
    """Large enough for the blocked GEMM's full tiles (the bias added in the microkernel's
    registers), its ragged edges (37 rows, 70 columns) and two depth slices (K = 300)."""
    a = f32(1, 37, 300)
    nodes = [N("MatMul", ["a", "B"], ["m"]), N("Add", ["m", "bias"], ["z" if act else "y"])]
    if act:
        nodes.append(N(act, ["z"], ["y"]))
    return model(nodes, {"a": a}, [1, 37, 70], {"B": f32(300, 70), "bias": f32(70)},
                 opset), {"a": a}


def skip_ln(bias=True, sum_read=False, rms=False):
    """y = LN(a + b [+ bias]) with a, b computed (MatMuls of the input), written out."""
    x = f32(2, 3, H)
    nodes = [N("MatMul", ["x", "W1"], ["a"]), N("Relu", ["x"], ["b"])]
    inits = {"W1": f32(H, H), "g": f32(H) + 1.0, "beta": f32(H), "bias": f32(H)}
    if bias:
        nodes += [N("Add", ["a", "bias"], ["ab"]), N("Add", ["b", "ab"], ["s"])]
    else:
        nodes.append(N("Add", ["a", "b"], ["s"]))
    if rms:
        nodes += [N("Mul", ["s", "s"], ["sq"])] + mean("sq", "var", 17) + [
            C("eps", 1e-6), N("Add", ["var", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]),
            N("Div", ["s", "sd"], ["n"]), N("Mul", ["n", "g"], ["ln"])]
    else:
        nodes.append(N("LayerNormalization", ["s", "g", "beta"], ["ln"], epsilon=1e-5))
    if sum_read:  # the sum is read again (the next residual): output 3 of the fused node
        nodes += [N("Mul", ["s", "ln"], ["y"])]
    else:
        nodes.append(N("Identity", ["ln"], ["y"]))
    return model(nodes, {"x": x}, list(x.shape), inits), {"x": x}


def I(name, values):
    return N("Constant", [], [name], value=onh.from_array(np.array(values, np.int64), name))


def shape_chain(form, batch_dim=2):
    """Shape subgraphs feeding a Reshape / Expand of x[B, 3, 16]: folded to constants when
    the dims they read are fixed (batch_dim a number), left to run when B is symbolic."""
    x = f32(2, 3, H)
    if form == "gather_concat":  # Reshape(x, [B, 3*16]) from Shape -> Gather -> Unsqueeze
        nodes = [N("Shape", ["x"], ["s"]), I("i0", 0), N("Gather", ["s", "i0"], ["b"]),
                 I("ax", [0]), N("Unsqueeze", ["b", "ax"], ["b1"]), I("rest", [-1]),
                 N("Concat", ["b1", "rest"], ["shape"], axis=0), N("Reshape", ["x", "shape"], ["y"])]
        out = [batch_dim, 3 * H]
    elif form == "slice_size":  # Shape -> Slice, Size -> Div: Reshape(x, [B*3*16/16, 16])
        nodes = [N("Shape", ["x"], ["s"]), I("st", [2]), I("en", [3]),
                 N("Slice", ["s", "st", "en"], ["last"]), N("Size", ["x"], ["n"]),
                 N("Unsqueeze", ["n", "ax"], ["n1"]), I("ax", [0]),
                 N("Div", ["n1", "last"], ["rows"]), N("Concat", ["rows", "last"], ["shape"], axis=0),
                 N("Reshape", ["x", "shape"], ["y"])]
        nodes = nodes[:5] + [nodes[6], nodes[5]] + nodes[7:]
        out = [batch_dim * 3, H]
    else:  # ConstantOfShape(Shape(x, start=1)) broadcast onto x
        nodes = [N("Shape", ["x"], ["s"], start=1),
                 N("ConstantOfShape", ["s"], ["c"], value=onh.from_array(np.array([0.5], np.float32))),
                 N("Mul", ["x", "c"], ["y"])]
        out = [batch_dim, 3, H]
    m = model(nodes, {"x": x}, out, {}, 15)
    if not isinstance(batch_dim, int):
        m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = batch_dim
        m.graph.output[0].type.tensor_type.shape.dim[0].dim_param = batch_dim
    return m, {"x": x}


# ---- torch-exported forms ------------------------------------------------------------------

class HandLayerNorm(nn.Module):  # BERT's original TF-style LayerNorm
    def __init__(self):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.rand(H) + 0.5), nn.Parameter(torch.rand(H))

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        return self.weight * ((x - u) / torch.sqrt(s + 1e-12)) + self.bias


class LlamaRMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(H) + 0.5)

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + 1e-6))


class HFLlamaRMSNorm(LlamaRMSNorm):  # transformers' LlamaRMSNorm: Cast nodes around it
    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + 1e-6)).to(dtype)


class FastGelu(nn.Module):  # transformers' gelu_fast spelling of the tanh form
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


class T5RMSNorm(LlamaRMSNorm):
    def forward(self, x):
        var = (x * x).mean(dim=2, keepdim=True)  # a positive last axis
        return self.weight * (x / torch.sqrt(var + 1e-6))


class NewGelu(nn.Module):  # GPT-2's
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(SQRT_2_PI * (x + 0.044715 * torch.pow(x, 3.0))))


class Block(nn.Module):  # Linear + GELU + residual + LayerNorm
    def __init__(self):
        super().__init__()
        self.fc, self.ln = nn.Linear(H, H), nn.LayerNorm(H)

    def forward(self, x):
        return self.ln(x + nn.functional.gelu(self.fc(x)))


def exported(module, opset, shape=(2, 3, H)):
    x = torch.rand(*shape) * 2 - 1
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (x,), buf, opset_version=opset, input_names=["x"],
                          output_names=["y"])
    return onnx.load_from_string(buf.getvalue()), {"x": x.numpy()}


# ---- the cases: (name, (model, feeds), {fused op: count} or None, ops that must NOT appear) ----

LN, RMS = "LayerNormalization", "SimplifiedLayerNormalization"
SKIP, SKIP_RMS, MMB = "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "MatMulBias"
FOLDED = "nodes folded into constants"


def cases():
    c = [
        ("ln_pow_div_13", layernorm(13), {LN: 1}),
        ("ln_mul_reciprocal_17", layernorm(17, "mul", "reciprocal", eps_first=True,
                                           gamma_first=True), {LN: 1}),
        ("ln_opset18_one_over", layernorm(18, "mul", "one_over"), {LN: 1}),
        ("ln_pow_half_no_affine", layernorm(17, inv="pow", gamma=False, beta=False), {LN: 1}),
        ("ln_no_beta_opset18", layernorm(18, beta=False), {LN: 1}),
        ("ln_positive_axis", layernorm(17, axis=2), {LN: 1}),
        ("rms_pow_div", rmsnorm(17), {RMS: 1}),
        ("rms_mul_reciprocal_18", rmsnorm(18, "mul", "reciprocal", gamma_first=False), {RMS: 1}),
        ("rms_no_gamma", rmsnorm(13, gamma=False), {RMS: 1}),
        ("gelu_erf_x_p_half", gelu("x_p_half"), {"Gelu": 1}),
        ("gelu_erf_half_x_p_mul", gelu("half_x_p", scale="mul"), {"Gelu": 1}),
        ("gelu_erf_p_half_x", gelu("p_half_x", opset=13), {"Gelu": 1}),
        ("gelu_tanh_pow", gelu("half_x_p", tanh=True), {"Gelu": 1}),
        ("gelu_tanh_mul3", gelu("x_p_half", tanh=True, cube="mul"), {"Gelu": 1}),
        ("gelu_tanh_p_half_x", gelu("p_half_x", tanh=True, opset=13), {"Gelu": 1}),
        ("gemm_transb_relu", gemm("Relu"), {MMB: 1}),
        ("gemm_sigmoid_c1n", gemm("Sigmoid", trans_b=0, c_shape=(1, 8)), {MMB: 1}),
        ("gemm_leaky", gemm("LeakyRelu"), {MMB: 1}),
        ("gemm_clip", gemm("Clip", trans_b=0), {MMB: 1}),
        ("gemm_tanh_11", gemm("Tanh", opset=11), {MMB: 1}),
        ("matmul_bias_first_sigmoid", matmul_bias_first(), {MMB: 1}),
        ("matmul_bias_tiles", matmul_bias_tiles(), {MMB: 1}),
        ("matmul_bias_tiles_gelu_20", matmul_bias_tiles("Gelu", 20), {MMB: 1}),
        ("matmul_bias_tiles_relu", matmul_bias_tiles("Relu"), {MMB: 1}),
        ("skip_ln_bias", skip_ln(), {SKIP: 1}),
        ("skip_ln_sum_read", skip_ln(bias=False, sum_read=True), {SKIP: 1}),
        ("skip_rms", skip_ln(rms=True), {SKIP_RMS: 1}),
        ("skip_rms_sum_read", skip_ln(bias=False, sum_read=True, rms=True), {SKIP_RMS: 1}),
        # near misses: not the pattern, not fused
        ("miss_ln_axis1", layernorm(17, axis=1), None, [LN, RMS]),
        ("miss_ln_var_read_twice", layernorm(17, extra_reader=True), None, [LN, RMS]),
        ("miss_gelu_wrong_constant", gelu("x_p_half", c_erf=0.6), None, ["Gelu"]),
        ("miss_gelu_tanh_wrong_k", None, None, ["Gelu"]),
        ("miss_gemm_alpha", gemm("Relu", alpha=2.0), None, [MMB]),
        ("miss_gemm_c_full", gemm("Relu", c_shape=(4, 8)), None, [MMB]),
        # shape subgraphs folded (FOLDED: at least that many nodes besides Constant folded)
        ("shape_gather_concat", shape_chain("gather_concat"), {FOLDED: 4}),
        ("shape_slice_size", shape_chain("slice_size"), {FOLDED: 6}),
        ("shape_constant_of_shape", shape_chain("constant_of_shape"), {FOLDED: 2}),
        ("shape_symbolic_start1", shape_chain("constant_of_shape", "batch"), {FOLDED: 2}),
        ("miss_shape_symbolic_batch", shape_chain("gather_concat", "batch"), None, [FOLDED]),
    ]
    out = []
    for case in c:
        name, built, want = case[:3]
        if name == "miss_gelu_tanh_wrong_k":
            m, feeds = gelu("x_p_half", tanh=True)
            for n in m.graph.node:
                if n.output[0] == "k":
                    n.attribute[0].t.CopyFrom(onh.from_array(np.array(0.05, np.float32), "k"))
            built = (m, feeds)
        out.append((name, built, want, case[3] if len(case) > 3 else []))
    out += [
        ("torch_layernorm_11", exported(nn.LayerNorm(H), 11), {LN: 1}, []),
        ("torch_hand_layernorm_13", exported(HandLayerNorm(), 13), {LN: 1}, []),
        ("torch_llama_rms_13", exported(LlamaRMSNorm(), 13), {RMS: 1}, []),
        ("torch_t5_rms_17", exported(T5RMSNorm(), 17), {RMS: 1}, []),
        ("torch_hf_llama_rms_cast_13", exported(HFLlamaRMSNorm(), 13), {RMS: 1}, []),
        ("torch_gelu_fast_13", exported(FastGelu(), 13), {"Gelu": 1}, []),
        ("torch_gelu_erf_13", exported(nn.GELU(), 13), {"Gelu": 1}, []),
        ("torch_gelu_tanh_13", exported(nn.GELU(approximate="tanh"), 13), {"Gelu": 1}, []),
        ("torch_new_gelu_17", exported(NewGelu(), 17), {"Gelu": 1}, []),
        ("torch_linear_relu_gemm_13", exported(nn.Sequential(nn.Linear(H, 8), nn.ReLU()), 13,
                                               (4, H)), {MMB: 1}, []),
        ("torch_linear_tanh_gemm_11", exported(nn.Sequential(nn.Linear(H, 8), nn.Tanh()), 11,
                                               (4, H)), {MMB: 1}, []),
        ("torch_block_skip_ln_13", exported(Block(), 13), {SKIP: 1, MMB: 1}, []),
    ]
    return out


class Memory(ctypes.Structure):  # ak_session_memory
    _fields_ = [("arena_bytes", ctypes.c_size_t), ("naive_bytes", ctypes.c_size_t),
                ("workspace_bytes", ctypes.c_size_t), ("folded_bytes", ctypes.c_size_t),
                ("num_folded", ctypes.c_size_t), ("num_fused", ctypes.c_size_t),
                ("planned", ctypes.c_int)]


# the whole exported pattern is absorbed: the saved optimized graph's nodes, in order
WHOLE = {
    "torch_layernorm_11": [LN], "torch_hand_layernorm_13": [LN], "torch_llama_rms_13": [RMS],
    "torch_t5_rms_17": [RMS], "torch_hf_llama_rms_cast_13": ["Cast", RMS],
    "torch_gelu_erf_13": ["Gelu"], "torch_gelu_tanh_13": ["Gelu"], "torch_new_gelu_17": ["Gelu"],
    "torch_gelu_fast_13": ["Gelu"], "torch_linear_relu_gemm_13": [MMB],
    "torch_linear_tanh_gemm_11": [MMB], "torch_block_skip_ln_13": [MMB, SKIP],
    "skip_ln_bias": ["Relu", MMB, SKIP, "Identity"], "skip_ln_sum_read": ["MatMul", "Relu", SKIP, "Mul"],
}


def optimizations(sess):
    """{what: times} of ak_session_optimizations (what `ak info --optimized` prints), and
    FOLDED: the nodes folded at creation (its title line)."""
    lib = ctypes.CDLL(os.environ["AK_LIBRARY"])
    mem = Memory()
    lib.ak_session_get_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(Memory)]
    assert lib.ak_session_get_memory(sess._s, ctypes.byref(mem)) == 0
    fn = lib.ak_session_optimizations
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                   ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    count = ctypes.c_size_t()
    assert fn(sess._s, 0, None, None, ctypes.byref(count)) == 0
    out = {FOLDED: mem.num_folded} if mem.num_folded else {}
    for i in range(count.value):
        what, times = ctypes.c_char_p(), ctypes.c_size_t()
        assert fn(sess._s, i, ctypes.byref(what), ctypes.byref(times), None) == 0
        out[what.value.decode()] = times.value
    return out


class FusionForms(OrtCase):
    TMP_PREFIX = "ak-fusion-forms-"

    def test_forms(self):
        errors, fused_forms = [], 0
        for name, (m, feeds), want, forbidden in cases():
            path = self.save(m, name)
            outs = [o.name for o in m.graph.output]
            names, arrays = list(feeds), [np.ascontiguousarray(a) for a in feeds.values()]
            plain = NativeSession(path, optimize=OPT_NONE).run(names, arrays, outs)
            fused_sess = NativeSession(path, optimize=OPT_EXTENDED)
            got = fused_sess.run(names, arrays, outs)
            notes = optimizations(fused_sess)
            constants = sum(n.op_type == "Constant" for n in m.graph.node)
            notes[FOLDED] = notes.get(FOLDED, 0) - constants
            if notes[FOLDED] <= 0:
                del notes[FOLDED]
            for op, times in (want or {}).items():
                if notes.get(op, 0) < times:
                    errors.append("%s: %s not fused (notes %s)" % (name, op, notes))
            for op in forbidden:
                if op in notes:
                    errors.append("%s: a near miss fused into %s" % (name, op))
            fused_forms += bool(want)
            saved = path + ".extended.onnx"  # `ak optimize --level extended` writes it
            fused_sess.save_optimized(saved)
            again = NativeSession(saved, optimize=OPT_NONE).run(names, arrays, outs)
            ops = [n.op_type for n in onnx.load(saved).graph.node]
            if name in WHOLE and ops != WHOLE[name]:
                errors.append("%s: optimized graph %s, expected %s" % (name, ops, WHOLE[name]))
            for o, g, a in zip(outs, got, again):
                if a.shape != g.shape or not np.allclose(a, g, rtol=0, atol=1e-6):
                    errors.append("%s %s: the saved optimized graph computes otherwise" % (name, o))
            ref = self.ort(path, feeds)
            for o, p, g, r in zip(outs, plain, got, ref):
                if g.shape != p.shape or not np.allclose(g, p, rtol=0, atol=1e-5):
                    errors.append("%s %s: optimized differs from unoptimized by %g" %
                                  (name, o, np.abs(g - p).max() if g.shape == p.shape else -1))
                if g.shape != r.shape or not np.allclose(g, r, rtol=0, atol=1e-4):
                    errors.append("%s %s: differs from ONNX Runtime by %g" %
                                  (name, o, np.abs(g - r).max() if g.shape == r.shape else -1))
        self.maxDiff = None
        self.assertEqual(errors, [])
        self.assertGreaterEqual(fused_forms, 30)


if __name__ == "__main__":
    if "AK_LIBRARY" not in os.environ:
        sys.exit("FAIL: set AK_LIBRARY to libaccelkit.so (ctest does)")
    unittest.main(verbosity=2)
