"""Attention in accelkit against real references.

(a) the com.microsoft MultiHeadAttention and Attention operators against ONNX Runtime
    (npm onnxruntime-node 1.30, tests/infer/ort_run.js) over shapes, the mask forms,
    attention_bias, past/present and causal attention, and their refusals by message;
(b) the attention fusion (src/infer/runtime/optimize_attention.c) on differently
    exported forms of scaled-dot-product attention, hand-built with onnx.helper and
    exported by torch.onnx at opsets 13, 14 and 17: each fused (the optimizer's notes
    count MultiHeadAttention nodes), equal to the unfused run within 1e-5 and to ONNX
    Runtime on the original within 1e-4; near misses are left alone;
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


def optimizations(sess):
    """{what: times} the optimizer noted for an accelkit session."""
    lib = akinf.lib
    fn = lib.ak_session_optimizations
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                   ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    native = sess._native if hasattr(sess, "_native") else sess
    count = ctypes.c_size_t()
    assert fn(native._s, 0, None, None, ctypes.byref(count)) == 0
    notes = {}
    for i in range(count.value):
        what, times = ctypes.c_char_p(), ctypes.c_size_t()
        assert fn(native._s, i, ctypes.byref(what), ctypes.byref(times), ctypes.byref(count)) == 0
        notes[what.value.decode()] = times.value
    return notes


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
            causal=0, scale=None, present=False, form="separate"):
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
        self.check(name, "MultiHeadAttention", inputs, outputs, attrs, ort_inputs=ort_inputs)

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

    def test_mha_past(self):
        self.mha("mha_past", 2, 3, 3, 2, 8, P=5, present=True, bias=True)
        self.mha("mha_past_causal", 1, 4, 4, 3, 4, P=2, present=True, causal=1)
        self.mha("mha_past_decode", 2, 1, 1, 2, 8, P=7, present=True,
                 mask=np.ones((2, 8), np.int32))
        self.mha("mha_past_packed_kv", 2, 2, 2, 2, 8, P=3, present=True, form="packed_kv")
        self.mha("mha_present_only", 2, 3, 3, 2, 8, present=True)

    def attention(self, name, B, S, inp, N, hidden, P=0, mask=None, causal=0, sizes=None,
                  attn_bias=None, bias=True, present=None, ort_mask=None):
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
        self.check(name, "Attention", inputs, outputs, attrs, ort_inputs=ort_inputs)

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


if __name__ == "__main__":
    unittest.main()
