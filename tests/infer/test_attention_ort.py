"""Attention in accelkit against real references.

(a) the com.microsoft MultiHeadAttention and Attention operators against ONNX Runtime
    (npm onnxruntime-node 1.30, tests/infer/ort_run.js) over shapes, the mask forms,
    attention_bias, past/present and causal attention, and their refusals by message;
(b) the attention fusion (src/infer/runtime/optimize_attention.c) on differently
    exported forms of scaled-dot-product attention, hand-built with onnx.helper and
    exported by torch.onnx at opsets 13, 14 and 17 (Where masks and past keys and values
    among them): each fused (the optimizer's notes count MultiHeadAttention nodes), equal
    to the unfused run within 1e-5 and to ONNX Runtime on the original within 1e-4, and
    the optimized graph written and reloaded runs the same; near misses are left alone;
(c) a small Hugging-Face-style BERT written here in plain PyTorch, exported with
    nn.LayerNorm at opset 17 and with a hand-written LayerNorm at opset 14: every
    layer's attention fused and every LayerNorm a LayerNormalization, outputs against
    ONNX Runtime within 1e-4.
Missing peers fail the test naming what to install.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python python3 -m unittest test_attention_ort
"""
import ctypes
import os
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import onnx  # noqa: E402  (Debian python3-onnx)
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as onh  # noqa: E402

from accelkit import inference as akinf  # noqa: E402
from accelkit.inference import InferenceSession  # noqa: E402
from ort_case import OrtCase  # noqa: E402

rng = np.random.default_rng(34)
F32 = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.int32): TP.INT32, np.dtype(np.int64): TP.INT64}


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def contrib_model(op, inputs, outputs, attrs, opset=17):
    """One com.microsoft node. inputs: [(name, array or None)] in order (None: omitted);
    outputs: [(name, shape or None)] (None: omitted)."""
    node = oh.make_node(op, [n if a is not None else "" for n, a in inputs],
                        [n if s is not None else "" for n, s in outputs], domain="com.microsoft",
                        **attrs)
    while node.output and node.output[-1] == "":
        node.output.pop()
    graph = oh.make_graph(
        [node], op.lower(),
        [oh.make_tensor_value_info(n, F32[a.dtype], a.shape) for n, a in inputs if a is not None],
        [oh.make_tensor_value_info(n, TP.FLOAT, s) for n, s in outputs if s is not None])
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset),
                                            oh.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def optimizations(native):
    """{what: times} the optimizer noted for an accelkit NativeSession."""
    fn = akinf.lib.ak_session_optimizations
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                   ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    count = ctypes.c_size_t()
    assert fn(native._s, 0, None, None, ctypes.byref(count)) == 0
    notes = {}
    for i in range(count.value):
        what, times = ctypes.c_char_p(), ctypes.c_size_t()
        assert fn(native._s, i, ctypes.byref(what), ctypes.byref(times), ctypes.byref(count)) == 0
        notes[what.value.decode()] = times.value
    return notes


def ak_run(path, feeds, optimize=True):
    """accelkit's outputs (in the model's order) and its optimizer notes."""
    sess = akinf.NativeSession(path, optimize=optimize)
    names = [o.name for o in onnx.load(path).graph.output]
    arrays = [np.require(a, requirements="C") for a in feeds.values()]
    return sess.run(list(feeds), arrays, names), optimizations(sess)


class KernelsVsOrt(OrtCase):
    """(a) the two operators against ONNX Runtime."""

    def check(self, name, op, inputs, outputs, attrs, tol=1e-4, ort_inputs=None):
        """accelkit on the node against ONNX Runtime on it, or on the same node written
        with ort_inputs (a form ONNX Runtime's CPU provider lacks, e.g. packed QKV)."""
        m = contrib_model(op, inputs, outputs, attrs)
        path = self.save(m, name)
        feeds = {n: a for n, a in inputs if a is not None}
        if ort_inputs is None:
            want = self.ort(path, feeds)
        else:
            want = self.ort(self.save(contrib_model(op, ort_inputs, outputs, attrs), name + "_ort"),
                            {n: a for n, a in ort_inputs if a is not None})
        got = InferenceSession(path).run(None, feeds)
        self.assertEqual(len(got), len(want), name)
        for g, w in zip(got, want):
            self.assertEqual(g.shape, w.shape, name)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=name)

    def refused(self, name, op, inputs, outputs, attrs, message):
        path = self.save(contrib_model(op, inputs, outputs, attrs), name)
        feeds = {n: a for n, a in inputs if a is not None}
        with self.assertRaises(Exception) as cm:
            InferenceSession(path).run(None, feeds)
        self.assertIn(message, str(cm.exception), name)

    def mha(self, name, B, S, L, N, D, Dv=None, P=0, bias=False, mask=None, attn_bias=None,
            causal=0, scale=None, present=False, form="separate", tol=1e-4):
        Dv = Dv or D
        q = f32(B, S, N * D)
        k, v = f32(B, L, N * D), f32(B, L, N * Dv)
        sep = (q, k, v)  # the separate form ONNX Runtime runs for the packed ones
        if form == "packed_qkv":
            qkv = f32(B, S, N, 3, D)
            sep = tuple(qkv[:, :, :, i, :].reshape(B, S, N * D) for i in range(3))
            q, k, v = qkv, None, None
        elif form == "packed_kv":
            kv = f32(B, L, N, 2, D)
            sep = (q, kv[:, :, :, 0, :].reshape(B, L, N * D), kv[:, :, :, 1, :].reshape(B, L, N * D))
            k, v = kv, None
        elif form == "per_head":
            k, v = f32(B, N, L, D), f32(B, N, L, Dv)
            sep = (q, k.transpose(0, 2, 1, 3).reshape(B, L, N * D),
                   v.transpose(0, 2, 1, 3).reshape(B, L, N * Dv))
        rest = [("bias", f32(N * (2 * D + Dv)) if bias else None), ("mask", mask),
                ("ab", attn_bias),
                ("pk", f32(B, N, P, D) if P else None), ("pv", f32(B, N, P, Dv) if P else None)]
        inputs = [("q", q), ("k", k), ("v", v)] + rest
        ort_inputs = None if form == "separate" else [("q", sep[0]), ("k", sep[1]), ("v", sep[2])] + rest
        for ins in (inputs, ort_inputs or [("x", 0)]):
            while ins[-1][1] is None:
                ins.pop()
        T = P + L
        outputs = [("y", [B, S, N * Dv])]
        if present:
            outputs += [("prk", [B, N, T, D]), ("prv", [B, N, T, Dv])]
        attrs = {"num_heads": N, "unidirectional": causal}
        if scale:
            attrs["scale"] = scale
        self.check(name, "MultiHeadAttention", inputs, outputs, attrs, tol=tol, ort_inputs=ort_inputs)

    def test_mha_shapes(self):
        self.mha("mha_basic", 2, 5, 5, 2, 8)
        self.mha("mha_cross", 1, 3, 7, 4, 4, Dv=6, bias=True, scale=0.3)
        self.mha("mha_long", 1, 130, 130, 2, 16, bias=True)  # several row blocks
        self.mha("mha_packed_qkv", 2, 6, 6, 3, 4, form="packed_qkv")
        self.mha("mha_packed_kv", 2, 4, 9, 2, 8, form="packed_kv")
        self.mha("mha_per_head", 2, 4, 9, 2, 8, Dv=4, form="per_head")

    def test_mha_masks(self):
        B, S, N, D = 2, 4, 2, 8
        keys = np.array([[1, 1, 1, 0, 0, 1], [1, 1, 1, 1, 1, 1]], np.int32)
        self.mha("mha_mask_keys", B, S, 6, N, D, bias=True, mask=keys)
        self.mha("mha_mask_len", B, S, 6, N, D, mask=np.array([3, 6], np.int32))
        rows = (rng.uniform(size=(B, S, 6)) > 0.3).astype(np.int32)
        rows[:, :, 0] = 1
        self.mha("mha_mask_rows", B, S, 6, N, D, mask=rows)
        self.mha("mha_attn_bias", B, S, 6, N, D, attn_bias=f32(B, N, S, 6))
        self.mha("mha_attn_bias_b1", B, S, 6, N, D, attn_bias=f32(1, N, S, 6), mask=keys)
        self.mha("mha_attn_bias_h1", B, S, 6, N, D, attn_bias=f32(B, 1, S, 6))
        self.mha("mha_causal", B, 6, 6, N, D, causal=1)
        # a batch with every key masked, and causality on top of the key mask: ONNX
        # Runtime adds mask_filter_value to a masked key's score and gives a future key
        # the lowest float (other rules differ by ~1 here); a fully masked row's scores sit
        # near -10000, where a float's step is 1e-3, so both engines round them: 2e-3
        dead = np.array([[0, 0, 0, 0, 0, 0], [1, 1, 0, 1, 1, 1]], np.int32)
        self.mha("mha_mask_all", B, 6, 6, N, D, mask=dead, causal=1, tol=2e-3)
        self.mha("mha_mask_all_nocausal", B, 6, 6, N, D, mask=dead, tol=2e-3)

    def test_mha_past(self):
        self.mha("mha_past", 2, 3, 3, 2, 8, P=5, present=True, bias=True)
        self.mha("mha_past_causal", 1, 4, 4, 3, 4, P=2, present=True, causal=1)
        self.mha("mha_past_decode", 2, 1, 1, 2, 8, P=7, present=True,
                 mask=np.ones((2, 8), np.int32))
        self.mha("mha_past_packed_kv", 2, 2, 2, 2, 8, P=3, present=True, form="packed_kv")
        self.mha("mha_present_only", 2, 3, 3, 2, 8, present=True)

    def attention(self, name, B, S, inp, N, hidden, P=0, mask=None, causal=0, sizes=None,
                  attn_bias=None, bias=True, present=None, ort_mask=None, tol=1e-4):
        sizes = sizes or [hidden] * 3
        D = sizes[0] // N
        inputs = [("x", f32(B, S, inp)), ("w", f32(inp, sum(sizes), scale=0.3)),
                  ("b", f32(sum(sizes)) if bias else None), ("mask", mask),
                  ("past", f32(2, B, N, P, D) if P else None), ("ab", attn_bias)]
        ort_inputs = None
        if not bias or ort_mask is not None:  # forms ONNX Runtime 1.30's CPU kernel lacks
            ort_inputs = list(inputs)
            if not bias:  # it crashes without a bias: a zero bias
                ort_inputs[2] = ("b", np.zeros(sum(sizes), np.float32))
            if ort_mask is not None:  # the [B,1,M,M] mask: its rows as [B,S,T]
                ort_inputs[3] = ("mask", ort_mask)
        for ins in (inputs, ort_inputs or [("x", 0)]):
            while ins[-1][1] is None:
                ins.pop()
        outputs = [("y", [B, S, sizes[2]])]
        if P or present:
            outputs.append(("present", [2, B, N, P + S, D]))
        attrs = {"num_heads": N, "unidirectional": causal}
        if sizes != [hidden] * 3:
            attrs["qkv_hidden_sizes"] = sizes
        self.check(name, "Attention", inputs, outputs, attrs, tol=tol, ort_inputs=ort_inputs)

    def test_attention(self):
        B, S = 2, 5
        self.attention("att_basic", B, S, 12, 2, 8)
        self.attention("att_nobias", B, S, 12, 2, 8, bias=False)
        self.attention("att_sizes", B, S, 12, 2, 8, sizes=[8, 8, 12])
        self.attention("att_mask_raw", B, S, 12, 2, 8,
                       mask=np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32))
        self.attention("att_mask_len", B, S, 12, 2, 8, mask=np.array([2, 5], np.int32))
        self.attention("att_mask_end_start", B, S, 12, 2, 8,
                       mask=np.array([5, 4, 1, 0], np.int32))
        self.attention("att_mask_3d", B, S, 12, 2, 8,
                       mask=np.tril(np.ones((S, S), np.int32))[None].repeat(B, 0))
        sq = np.tril(np.ones((8, 8), np.int32))[None, None].repeat(B, 0)
        self.attention("att_mask_4d", B, S, 12, 2, 8, mask=sq,
                       ort_mask=np.ascontiguousarray(sq[:, 0, :S, :S]))
        self.attention("att_causal", B, S, 12, 2, 8, causal=1)
        self.attention("att_mask_all", B, S, 12, 2, 8, causal=1, tol=2e-3,  # as mha_mask_all
                       mask=np.array([[0, 0, 0, 0, 0], [0, 1, 1, 1, 1]], np.int32))
        self.attention("att_past", B, 2, 12, 2, 8, P=4, causal=1)
        self.attention("att_past_mask", B, 1, 12, 2, 8, P=4,
                       mask=np.array([[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]], np.int32))
        self.attention("att_attn_bias", B, S, 12, 2, 8, attn_bias=f32(1, 2, S, S))
        self.attention("att_present", B, S, 12, 2, 8, present=True)

    def test_refusals(self):
        x = f32(1, 2, 8)
        self.refused("ref_rotary", "Attention", [("x", x), ("w", f32(8, 24))],
                     [("y", [1, 2, 8])], {"num_heads": 2, "do_rotary": 1}, "do_rotary")
        self.refused("ref_share", "Attention", [("x", x), ("w", f32(8, 24))],
                     [("y", [1, 2, 8])], {"num_heads": 2, "past_present_share_buffer": 1},
                     "past_present_share_buffer")
        self.refused("ref_mask3b2", "MultiHeadAttention",
                     [("q", x), ("k", x), ("v", x), ("bias", None),
                      ("mask", np.array([2, 0, 2, 2, 0], np.int32))],
                     [("y", [1, 2, 8])], {"num_heads": 2}, "[3*batch+2]")
        self.refused("ref_qk", "MultiHeadAttention", [("q", x), ("k", x), ("v", x)],
                     [("y", [1, 2, 8]), ("pk", None), ("pv", None), ("qk", [1, 2, 2, 2])],
                     {"num_heads": 2}, "the qk output")
        self.refused("ref_packed_bias", "MultiHeadAttention",
                     [("q", f32(1, 2, 2, 3, 4)), ("k", None), ("v", None), ("bias", f32(24))],
                     [("y", [1, 2, 8])], {"num_heads": 2}, "bias with packed")


# ---- (b) the fusion on differently exported forms -------------------------------------

def split_heads_torch(x, n, d):
    return x.view(x.shape[0], x.shape[1], n, d).permute(0, 2, 1, 3)


def torch_attention_module(style):
    """A self-attention block (projections, head split, SDPA, merge) in one of three
    exporter styles."""
    import math
    import torch

    class Block(torch.nn.Module):
        def __init__(self, hidden=32, heads=4):
            super().__init__()
            self.n, self.d = heads, hidden // heads
            self.q = torch.nn.Linear(hidden, hidden)
            self.k = torch.nn.Linear(hidden, hidden)
            self.v = torch.nn.Linear(hidden, hidden)

        def forward(self, x, mask):
            q = split_heads_torch(self.q(x), self.n, self.d)
            k = split_heads_torch(self.k(x), self.n, self.d)
            v = split_heads_torch(self.v(x), self.n, self.d)
            if style == "hf":  # Div by sqrt(d); HF's (1 - mask) * -10000 added after
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
                scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
            elif style == "masked_fill":  # scores.masked_fill(mask == 0, -inf): a Where
                scores = torch.matmul(q, k.transpose(-1, -2)) * (self.d ** -0.5)
                scores = scores.masked_fill(mask[:, None, None, :] == 0, float("-inf"))
            elif style == "torch2":  # d^-1/4 on q and on k; an additive mask added first
                s = self.d ** -0.25
                scores = mask + torch.matmul(q * s, k.transpose(-2, -1) * s)
            else:  # "qscale": 1/sqrt(d) on q only, no mask
                scores = torch.matmul(q * (1.0 / math.sqrt(self.d)), k.transpose(-2, -1))
            p = torch.softmax(scores, dim=-1)
            c = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()
            return c.view(c.shape[0], c.shape[1], self.n * self.d)

    torch.manual_seed(1)
    return Block().eval()


def hand_attention(variant="fused"):
    """onnx.helper SDPA over graph inputs q, k, v [2,5,16] (2 heads of 8): Kᵀ as two
    Transposes, Reshape shapes with 0 entries, the scale a Mul with the constant first,
    the mask Add'ed with the mask first, then a causal Where(keep, scores, -inf). Variants
    that must not fuse: softmax over axis 2, the scores also a graph output, the scale a
    graph input, a Where filling -1e9."""
    B, S, N, D = 2, 5, 2, 8
    nodes = [
        oh.make_node("Reshape", ["q", "split"], ["q4"]),
        oh.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        oh.make_node("Reshape", ["k", "split"], ["k4"]),
        oh.make_node("Transpose", ["k4"], ["kh"], perm=[0, 2, 1, 3]),
        oh.make_node("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2]),
        oh.make_node("Reshape", ["v", "split"], ["v4"]),
        oh.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        oh.make_node("MatMul", ["qh", "kt"], ["qk"]),
        oh.make_node("Mul", ["scale", "qk"], ["scores"]),
        oh.make_node("Add", ["mask", "scores"], ["added"]),
        # the near miss "where_finite": a Where filling -1e9, which adding to a score
        # does not reproduce; otherwise a Where filling -inf
        oh.make_node("Where", ["keep", "added", "fill"], ["masked"]),
        oh.make_node("Softmax", ["masked"], ["p"], axis=2 if variant == "axis2" else -1),
        oh.make_node("MatMul", ["p", "vh"], ["ctx"]),
        oh.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        oh.make_node("Reshape", ["ctx_t", "merge"], ["y"]),
    ]
    inits = [onh.from_array(np.array([0, 0, N, D], np.int64), "split"),
             onh.from_array(np.array([0, 0, -1], np.int64), "merge"),
             onh.from_array(np.array(-1e9 if variant == "where_finite" else -np.inf,
                                     np.float32), "fill")]
    feeds = {"q": f32(B, S, N * D), "k": f32(B, S, N * D), "v": f32(B, S, N * D),
             "mask": np.where(rng.uniform(size=(B, 1, 1, S)) > 0.3, 0, -10000).astype(np.float32),
             "keep": np.tril(np.ones((S, S), bool))}
    inputs = [oh.make_tensor_value_info(n, TP.BOOL if a.dtype == bool else TP.FLOAT, a.shape)
              for n, a in feeds.items()]
    if variant == "scale_input":
        feeds["scale"] = np.array(D ** -0.5, np.float32)
        inputs.append(oh.make_tensor_value_info("scale", TP.FLOAT, []))
    else:
        inits.append(onh.from_array(np.array(D ** -0.5, np.float32), "scale"))
    outputs = [oh.make_tensor_value_info("y", TP.FLOAT, [B, S, N * D])]
    if variant == "scores_read":
        outputs.append(oh.make_tensor_value_info("scores", TP.FLOAT, [B, N, S, S]))
    m = oh.make_model(oh.make_graph(nodes, "sdpa", inputs, outputs, inits),
                      opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    return m, feeds


class FusionForms(OrtCase):
    """(b) each form fused, equal to the unfused run and to ONNX Runtime."""

    def fused_equal(self, name, path, feeds, fused=1):
        got, notes = ak_run(path, feeds)
        plain, plain_notes = ak_run(path, feeds, optimize=False)
        self.assertEqual(notes.get("MultiHeadAttention", 0), fused, (name, notes))
        self.assertNotIn("MultiHeadAttention", plain_notes, name)
        want = self.ort(path, feeds)
        # the optimized graph written (ai.accelkit nodes) and reloaded runs the same
        saved = path + ".optimized.onnx"
        akinf.NativeSession(path).save_optimized(saved)
        again, _ = ak_run(saved, feeds)
        for g, p, w, a in zip(got, plain, want, again):
            np.testing.assert_allclose(g, p, rtol=1e-5, atol=1e-5, err_msg=name + " vs unfused")
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=name + " vs ORT")
            np.testing.assert_array_equal(g, a, err_msg=name + " reloaded")
        return notes

    def export(self, module, args, names, opset, name):
        import torch
        path = os.path.join(self.tmp, name + ".onnx")
        torch.onnx.export(module, args, path, opset_version=opset, input_names=names,
                          output_names=["y"])
        return path

    def test_torch_forms(self):
        import torch
        x = torch.randn(2, 6, 32)
        keys = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.float32)
        causal = torch.triu(torch.full((6, 6), -1e4), 1)[None, None].repeat(2, 1, 1, 1)
        for style, opset, mask in (("hf", 14, keys), ("torch2", 13, causal),
                                   ("qscale", 17, keys), ("masked_fill", 14, keys)):
            name = "torch_%s_%d" % (style, opset)
            path = self.export(torch_attention_module(style), (x, mask), ["x", "mask"], opset,
                               name)
            feeds = {"x": x.numpy(), "mask": mask.numpy()}
            if style == "qscale":  # the mask is unused: the exporter drops the input
                feeds.pop("mask")
            notes = self.fused_equal(name, path, feeds)
            self.assertEqual(notes.get("MatMulBias", 0), 3, (name, notes))

    def test_past_kv(self):
        """A decoder step: keys and values concatenated after a past on the sequence axis,
        the concatenations (present) also graph outputs."""
        import torch

        class Step(torch.nn.Module):
            def __init__(self, hidden=32, heads=4):
                super().__init__()
                self.n, self.d = heads, hidden // heads
                self.q, self.k, self.v = (torch.nn.Linear(hidden, hidden) for _ in range(3))

            def forward(self, x, past_k, past_v, bias):
                q = split_heads_torch(self.q(x), self.n, self.d)
                k = torch.cat([past_k, split_heads_torch(self.k(x), self.n, self.d)], dim=2)
                v = torch.cat([past_v, split_heads_torch(self.v(x), self.n, self.d)], dim=2)
                p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / self.d ** 0.5 + bias, -1)
                c = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()
                return c.view(c.shape[0], c.shape[1], self.n * self.d), k, v

        torch.manual_seed(2)
        B, S, P = 2, 3, 5
        args = (torch.randn(B, S, 32), torch.randn(B, 4, P, 8), torch.randn(B, 4, P, 8),
                torch.triu(torch.full((S, P + S), -1e4), P + 1)[None, None])
        path = os.path.join(self.tmp, "past.onnx")
        torch.onnx.export(Step().eval(), args, path, opset_version=17,
                          input_names=["x", "past_k", "past_v", "bias"],
                          output_names=["y", "present_k", "present_v"])
        self.fused_equal("past", path, {n: a.numpy() for n, a in
                                        zip(["x", "past_k", "past_v", "bias"], args)})

    def test_hand_form(self):
        m, feeds = hand_attention()
        self.fused_equal("hand", self.save(m, "hand"), feeds)

    def test_near_misses(self):
        for variant in ("axis2", "scores_read", "scale_input", "where_finite"):
            m, feeds = hand_attention(variant)
            self.fused_equal(variant, self.save(m, variant), feeds, fused=0)


# ---- (c) BERT end to end --------------------------------------------------------------

class BertFused(OrtCase):
    """A small BERT (2 layers, hidden 64, 4 heads) exported with nn.LayerNorm at opset 17
    and with a hand-written LayerNorm at opset 14: every attention fused, every LayerNorm a
    LayerNormalization after optimizing, outputs against ONNX Runtime within 1e-4."""

    def check_bert(self, norm, opset):
        import torch
        import bert_torch
        torch.manual_seed(3)
        layers = 2
        model = bert_torch.Bert(layers=layers, hidden=64, heads=4, norm=norm).eval()
        path = os.path.join(self.tmp, "bert_%s_%d.onnx" % (norm, opset))
        feeds = bert_torch.export(model, path, 2, 16, opset)
        got, notes = ak_run(path, feeds)
        self.assertEqual(notes.get("MultiHeadAttention", 0), layers, (norm, notes))
        sess = akinf.NativeSession(path)
        saved = path + ".optimized.onnx"
        sess.save_optimized(saved)
        ops = [n.op_type for n in onnx.load(saved).graph.node]
        self.assertEqual(ops.count("MultiHeadAttention"), layers, (norm, ops))
        # every LayerNorm fused: the embeddings' alone, each residual one with its Add
        self.assertEqual(ops.count("LayerNormalization"), 1, (norm, ops))
        self.assertEqual(ops.count("SkipLayerNormalization"), 2 * layers, (norm, ops))
        self.assertNotIn("Softmax", ops, norm)
        want = self.ort(path, feeds)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=norm)

    def test_bert_torch_layernorm_opset17(self):
        self.check_bert("torch", 17)

    def test_bert_handwritten_layernorm_opset14(self):
        self.check_bert("tf", 14)


if __name__ == "__main__":
    unittest.main()
