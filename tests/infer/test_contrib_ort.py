"""The com.microsoft contrib operators of ops/contrib (Gelu, BiasGelu, FastGelu, QuickGelu,
FusedMatMul, RotaryEmbedding, MatMulNBits) against ONNX Runtime (npm onnxruntime-node 1.30,
tests/infer/ort_run.js) on small models built with onnx.helper (Debian's onnx 1.12; domain
com.microsoft, its opset 1): several shapes and attribute combinations each, odd sizes,
broadcast batches, zero points present and absent, interleaved rotation or not. Outputs are
also checked against numpy formulas written here, alone for the types ONNX Runtime's CPU
provider does not register (float64 Gelu and FusedMatMul, float16 Gelu). Every refusal is
checked by the name of what is refused.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python python3 -m unittest test_contrib_ort
"""
import math
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

from accelkit.inference import InferenceSession  # noqa: E402
from ort_case import OrtCase  # noqa: E402

MS = "com.microsoft"
NP_TO_TP = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.float64): TP.DOUBLE,
            np.dtype(np.float16): TP.FLOAT16, np.dtype(np.int64): TP.INT64,
            np.dtype(np.uint8): TP.UINT8, np.dtype(np.int32): TP.INT32}


def model(nodes, feeds, outputs, inits=None):
    """feeds: {name: example array} (graph inputs); inits: {name: array} (initializers)."""
    g = oh.make_graph(nodes, "contrib",
                      [oh.make_tensor_value_info(n, NP_TO_TP[a.dtype], a.shape)
                       for n, a in feeds.items()],
                      [onnx.ValueInfoProto(name=n) for n in outputs],
                      [onh.from_array(a, n) for n, a in (inits or {}).items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def ms(op, ins, outs, **attrs):
    return oh.make_node(op, ins, outs, domain=MS, **attrs)


# ---- numpy formulas -------------------------------------------------------------------

def np_gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def np_fast_gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def np_quick_gelu(x, alpha):
    return x / (1.0 + np.exp(-alpha * x))


def np_fused_matmul(a, b, alpha=1.0, transA=0, transB=0, transBatchA=0, transBatchB=0):
    """The spec's FusedMatMul: the batch transposes move dim 0 behind the batch dims."""
    def view(x, trans_batch, trans):
        if trans_batch:
            x = np.moveaxis(x, 0, -2)
        if trans and x.ndim >= 2:
            x = np.swapaxes(x, -1, -2)
        return x
    return alpha * np.matmul(view(a, transBatchA, transA), view(b, transBatchB, transB))


def quantize_nbits(N, K, bits, block, zp_mode, rng):
    """Random blockwise-quantized (N, K) weight: (B, scales, zero_points input or None,
    q (N, k_blocks·block), zero points as floats (N, k_blocks)). zp_mode: None (the default
    2^(bits-1)), 'u8' (packed like B) or 'f32' (float zero points)."""
    kb = (K + block - 1) // block
    levels = (1 << bits) - 1
    q = rng.randint(0, levels + 1, (N, kb * block)).astype(np.uint8)
    scales = rng.uniform(0.01, 0.1, (N, kb)).astype(np.float32)
    if zp_mode == "u8":
        zp = rng.randint(0, levels + 1, (N, kb)).astype(np.uint8)
    elif zp_mode == "f32":
        zp = rng.uniform(0, levels, (N, kb)).astype(np.float32)
    else:
        zp = np.full((N, kb), 1 << (bits - 1), np.float32)
    per = 8 // bits
    packed = np.zeros((N, kb * block // per), np.uint8)
    for j in range(per):
        packed |= (q[:, j::per] << (j * bits)).astype(np.uint8)
    B = packed.reshape(N, kb, block * bits // 8)
    zp_in = None
    if zp_mode == "u8":
        row = (kb * bits + 7) // 8
        zpp = np.zeros((N, row * per), np.uint8)
        zpp[:, :kb] = zp
        zp_in = np.zeros((N, row), np.uint8)
        for j in range(per):
            zp_in |= (zpp[:, j::per] << (j * bits)).astype(np.uint8)
    elif zp_mode == "f32":
        zp_in = zp
    return B, scales, zp_in, q, zp.astype(np.float64)


def np_dequant(q, zp, scales, block, K):
    """(q - zero point)·scale per block, in float64, cut to K columns."""
    N, kb = scales.shape
    return ((q.astype(np.float64).reshape(N, kb, block) - zp[:, :, None])
            * scales.astype(np.float64)[:, :, None]).reshape(N, kb * block)[:, :K]


def np_rope(x, pos, cos, sin, interleaved, num_heads=0, rot_dim=0):
    """The spec's RotaryEmbedding on a 3-D (B, S, H·D) or 4-D (B, H, S, D) input."""
    x4 = x
    if x.ndim == 3:
        b, s, hidden = x.shape
        d = hidden // num_heads if num_heads else cos.shape[1] * 2
        x4 = x.reshape(b, s, hidden // d, d).transpose(0, 2, 1, 3)
    b, h, s, d = x4.shape
    rot = rot_dim or d
    half = rot // 2
    p = pos.reshape(1, -1)[0, 0] + np.arange(s)[None, :].repeat(b, 0) if pos.size == 1 else pos
    c = cos[p][:, None]  # (B, 1, S, half)
    sn = sin[p][:, None]
    y = x4.copy()
    if interleaved:
        a, bb = x4[..., 0:rot:2], x4[..., 1:rot:2]
        y[..., 0:rot:2] = a * c - bb * sn
        y[..., 1:rot:2] = bb * c + a * sn
    else:
        a, bb = x4[..., :half], x4[..., half:rot]
        y[..., :half] = a * c - bb * sn
        y[..., half:rot] = bb * c + a * sn
    if x.ndim == 3:
        y = y.transpose(0, 2, 1, 3).reshape(x.shape)
    return y


class ContribTest(OrtCase):
    TMP_PREFIX = "ak-contrib-"

    def ours(self, m, name, feeds):
        path = self.save(m, name)
        return path, InferenceSession(path).run(None, feeds)

    def check(self, m, name, feeds, rtol=1e-5, atol=1e-5):
        """accelkit against ONNX Runtime; returns accelkit's outputs."""
        path, got = self.ours(m, name, feeds)
        want = self.ort(path, feeds)
        self.assertEqual(len(got), len(want), name)
        for k, (g, w) in enumerate(zip(got, want)):
            msg = "%s output %d" % (name, k)
            self.assertEqual(g.shape, w.shape, msg)
            self.assertEqual(g.dtype, w.dtype, msg)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=msg)
        return got

    def check_batch(self, name, cases):
        """Many independent cases in one model (one ONNX Runtime process): each case is
        (nodes, feeds, initializers, [(output, numpy expectation, tolerance)])."""
        nodes, feeds, inits, expects = [], {}, {}, []
        for n, f, i, e in cases:
            nodes += n
            feeds.update(f)
            inits.update(i)
            expects += e
        m = model(nodes, feeds, [o for o, _, _ in expects], inits)
        path, got = self.ours(m, name, feeds)
        want_ort = self.ort(path, feeds)
        for (out, want, tol), g, w in zip(expects, got, want_ort):
            msg = "%s: %s" % (name, out)
            self.assertEqual(g.shape, w.shape, msg)
            self.assertEqual(g.dtype, w.dtype, msg)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=msg + " vs ORT")
            np.testing.assert_allclose(g.astype(np.float64), want, rtol=tol, atol=tol,
                                       err_msg=msg + " vs numpy")

    # ---- the GELU family ---------------------------------------------------------------

    def test_gelu_family(self):
        rng = np.random.RandomState(1)
        # odd sizes, a tensor large enough to split over threads, a scalar row
        for shape in [(2, 3, 5), (7,), (4, 2101), (1, 1)]:
            x = rng.uniform(-5, 5, shape).astype(np.float32)
            bias = rng.uniform(-1, 1, shape[-1:]).astype(np.float32)
            nodes = [ms("Gelu", ["x"], ["gelu"]),
                     ms("BiasGelu", ["x", "b"], ["bias_gelu"]),
                     ms("FastGelu", ["x"], ["fast"]),
                     ms("FastGelu", ["x", "b"], ["fast_bias"]),
                     ms("QuickGelu", ["x"], ["quick"]),
                     ms("QuickGelu", ["x"], ["quick_a"], alpha=-0.75)]
            outs = ["gelu", "bias_gelu", "fast", "fast_bias", "quick", "quick_a"]
            got = self.check(model(nodes, {"x": x}, outs, {"b": bias}), "gelu%d" % len(shape),
                             {"x": x}, rtol=1e-5, atol=2e-6)
            xd = x.astype(np.float64)
            want = [np_gelu(xd), np_gelu(xd + bias), np_fast_gelu(xd), np_fast_gelu(xd + bias),
                    np_quick_gelu(xd, 1.702), np_quick_gelu(xd, -0.75)]
            for g, w, n in zip(got, want, outs):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6, err_msg=n)

    def test_gelu_float64_and_float16(self):
        """Types ONNX Runtime's CPU provider leaves out: against the numpy formulas."""
        rng = np.random.RandomState(2)
        x = rng.uniform(-4, 4, (3, 9))
        bias = rng.uniform(-1, 1, (9,))
        for dt, tol in [(np.float64, 1e-12), (np.float16, 2e-3)]:
            xs, bs = x.astype(dt), bias.astype(dt)
            nodes = [ms("Gelu", ["x"], ["g"]), ms("BiasGelu", ["x", "b"], ["bg"]),
                     ms("FastGelu", ["x", "b"], ["fg"]), ms("QuickGelu", ["x"], ["qg"], alpha=1.5)]
            _, got = self.ours(model(nodes, {"x": xs}, ["g", "bg", "fg", "qg"], {"b": bs}),
                               "gelu_" + np.dtype(dt).name, {"x": xs})
            xd, bd = xs.astype(np.float64), bs.astype(np.float64)
            want = [np_gelu(xd), np_gelu(xd + bd), np_fast_gelu(xd + bd), np_quick_gelu(xd, 1.5)]
            for g, w in zip(got, want):
                self.assertEqual(g.dtype, np.dtype(dt))
                np.testing.assert_allclose(g.astype(np.float64), w, rtol=tol, atol=tol)

    def test_gelu_refusals(self):
        x = np.ones((2, 4), np.float32)
        self.refused(model([ms("BiasGelu", ["x", "b"], ["y"])], {"x": x}, ["y"],
                           {"b": np.ones((3,), np.float32)}), "biasgelu_bad", {"x": x}, ["bias"])
        xi = np.ones((2, 4), np.int32)
        self.refused(model([ms("Gelu", ["x"], ["y"])], {"x": xi}, ["y"]), "gelu_int",
                     {"x": xi}, ["int32"])

    # ---- FusedMatMul -------------------------------------------------------------------

    def test_fused_matmul(self):
        rng = np.random.RandomState(3)
        cases = [  # (A shape, B shape, attributes)
            ((3, 5), (5, 4), {}),
            ((3, 5), (5, 4), {"alpha": 0.125}),
            ((5, 3), (5, 4), {"transA": 1, "alpha": -2.0}),
            ((3, 5), (4, 5), {"transB": 1}),
            ((5, 3), (4, 5), {"transA": 1, "transB": 1, "alpha": 0.5}),
            ((2, 3, 7, 5), (5, 6), {"alpha": 0.3}),           # B shared: one folded GEMM
            ((2, 1, 7, 5), (3, 5, 6), {}),                    # broadcast batches
            ((2, 3, 5, 7), (1, 3, 6, 5), {"transA": 1, "transB": 1}),
            ((5,), (2, 5, 3), {}),                            # 1-D A
            ((2, 4, 5), (5,), {"alpha": 3.0}),                # 1-D B
            ((7, 2, 5), (2, 5, 3), {"transBatchA": 1}),       # A viewed (2, 7, 5)
            ((5, 2, 7), (1, 5, 3), {"transBatchA": 1, "transA": 1}),
            ((4, 2, 5), (5, 2, 6), {"transBatchA": 1, "transBatchB": 1, "alpha": 0.25}),
            ((2, 4, 5), (6, 2, 5), {"transBatchB": 1, "transB": 1}),
            ((3, 2, 2, 5), (1, 2, 5, 4), {"transBatchA": 1}),  # A viewed (2, 2, 3, 5)
            ((2, 33, 65), (2, 65, 70), {"alpha": 0.1}),       # past the small-product path
        ]
        # float16: widened, float32 GEMMs, rounded once
        cases += [((4, 2, 3), (2, 5, 3), {"transBatchA": 1, "transB": 1, "alpha": 0.5},
                   np.float16),
                  ((2, 3, 6, 5), (5, 7), {"alpha": 2.0}, np.float16)]
        batch = []
        for i, (sa, sb, attrs, *dt) in enumerate(cases):
            dtype = dt[0] if dt else np.float32
            a = rng.uniform(-1, 1, sa).astype(dtype)
            b = rng.uniform(-1, 1, sb).astype(dtype)
            want = np_fused_matmul(a.astype(np.float64), b.astype(np.float64), **attrs)
            tol = 2e-3 if dtype == np.float16 else 1e-5
            batch.append(([ms("FusedMatMul", ["a%d" % i, "b%d" % i], ["y%d" % i], **attrs)],
                          {"a%d" % i: a, "b%d" % i: b}, {}, [("y%d" % i, want, tol)]))
        self.check_batch("fmm", batch)

    def test_fused_matmul_float64(self):
        rng = np.random.RandomState(4)
        a = rng.uniform(-1, 1, (4, 2, 3))
        b = rng.uniform(-1, 1, (2, 5, 3))
        m = model([ms("FusedMatMul", ["a", "b"], ["y"], transBatchA=1, transB=1, alpha=0.5)],
                  {"a": a, "b": b}, ["y"])
        _, (y,) = self.ours(m, "fmm_f64", {"a": a, "b": b})
        want = 0.5 * np.matmul(a.transpose(1, 0, 2), b.transpose(0, 2, 1))
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)

    def test_fused_matmul_refusals(self):
        a = np.ones((5,), np.float32)
        b = np.ones((5, 3), np.float32)
        m = model([ms("FusedMatMul", ["a", "b"], ["y"], transA=1)], {"a": a, "b": b}, ["y"])
        self.refused(m, "fmm_1d_trans", {"a": a, "b": b}, ["transA", "1-D"])
        a3 = np.ones((2, 3, 5), np.float32)
        m = model([ms("FusedMatMul", ["a", "b"], ["y"], transBatchA=1)], {"a": a3, "b": b}, ["y"])
        self.refused(m, "fmm_tb_rank", {"a": a3, "b": b}, ["transBatchA", "rank"])
        a2 = np.ones((2, 5), np.float32)
        m = model([ms("FusedMatMul", ["a", "b"], ["y"])], {"a": a2, "b": np.ones((4, 3), np.float32)},
                  ["y"])
        self.refused(m, "fmm_inner", {"a": a2, "b": np.ones((4, 3), np.float32)}, ["inner"])

    # ---- RotaryEmbedding ---------------------------------------------------------------

    def rope_case(self, rng, name, x_shape, max_seq, half, attrs, offset=None,
                  dtype=np.float32):
        """One RotaryEmbedding node (inputs and output prefixed by name) for check_batch."""
        x = rng.uniform(-1, 1, x_shape).astype(dtype)
        batch = x_shape[0]
        seq = x_shape[1] if len(x_shape) == 3 else x_shape[2]
        if offset is None:
            pos = rng.randint(0, max_seq, (batch, seq)).astype(np.int64)
        else:
            pos = np.array([offset], np.int64)
        ang = rng.uniform(0, 6.3, (max_seq, half))
        cos, sin = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
        n = [name + s for s in ("x", "pos", "cos", "sin", "y")]
        node = ms("RotaryEmbedding", n[:4], [n[4]], **attrs)
        tol = 1e-3 if dtype == np.float16 else 1e-5  # float16: one rounding per value
        want = np_rope(x.astype(np.float64), pos, cos.astype(np.float64), sin.astype(np.float64),
                       attrs.get("interleaved", 0), attrs.get("num_heads", 0),
                       attrs.get("rotary_embedding_dim", 0))
        return [node], {n[0]: x, n[1]: pos}, {n[2]: cos, n[3]: sin}, [(n[4], want, tol)]

    def test_rotary_embedding(self):
        rng = np.random.RandomState(5)
        batch = []
        for il in (0, 1):
            # 3-D, head size from the caches (num_heads 0)
            batch.append(self.rope_case(rng, "r3_%d_" % il, (2, 5, 24), 16, 4,
                                        {"interleaved": il}))
            # 3-D with num_heads and a partial rotary dim (half of head 12 rotated)
            batch.append(self.rope_case(rng, "r3p_%d_" % il, (2, 3, 36), 10, 3,
                                        {"interleaved": il, "num_heads": 3,
                                         "rotary_embedding_dim": 6}))
            # 4-D (batch, heads, seq, head), position offset form
            batch.append(self.rope_case(rng, "r4_%d_" % il, (1, 3, 7, 10), 20, 5,
                                        {"interleaved": il}, offset=4))
            # 4-D with a partial rotary dim and explicit num_heads, odd sizes
            batch.append(self.rope_case(rng, "r4p_%d_" % il, (3, 2, 5, 14), 9, 4,
                                        {"interleaved": il, "num_heads": 2,
                                         "rotary_embedding_dim": 8}))
            batch.append(self.rope_case(rng, "rf16_%d_" % il, (2, 4, 12), 8, 3,
                                        {"interleaved": il, "num_heads": 2}, dtype=np.float16))
        self.check_batch("rope", batch)

    def test_rotary_refusals(self):
        x = np.ones((1, 2, 8), np.float32)
        pos = np.zeros((1, 2), np.int64)
        cs = {"cos": np.ones((4, 4), np.float32), "sin": np.zeros((4, 4), np.float32)}
        for attrs, words in [({"scale": 2.0}, ["scale"]),
                             ({"is_packed_batching": 1}, ["is_packed_batching"]),
                             ({"rotary_embedding_dim": 4}, ["rotary_embedding_dim", "num_heads"])]:
            m = model([ms("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], **attrs)],
                      {"x": x, "pos": pos}, ["y"], cs)
            self.refused(m, "rope_" + words[0], {"x": x, "pos": pos}, words)
        m = model([ms("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"])],
                  {"x": x, "pos": pos}, ["y"], cs)
        self.refused(m, "rope_pos", {"x": x, "pos": np.array([[0, 4]], np.int64)},
                     ["position_ids", "4"])

    # ---- MatMulNBits -------------------------------------------------------------------

    def nbits_case(self, rng, name, a_shape, N, bits, block, zp_mode, bias=False,
                   constant=True, dtype=np.float32):
        """One MatMulNBits node (names prefixed by name) for check_batch; dtype: A's type,
        which scales, float zero points and bias share; constant: weights as initializers
        (else fed)."""
        K = a_shape[-1]
        a = rng.uniform(-1, 1, a_shape).astype(dtype)
        B, scales, zp, q, zp_values = quantize_nbits(N, K, bits, block, zp_mode, rng)
        scales = scales.astype(dtype)
        if zp_mode == "f32":
            zp = zp.astype(dtype)
            zp_values = zp.astype(np.float64)
        want = a.astype(np.float64) @ np_dequant(q, zp_values, scales, block, K).T
        weights = {name + "B": B, name + "scales": scales}
        ins = [name + "a", name + "B", name + "scales"]
        if zp is not None:
            weights[name + "zp"] = zp
            ins.append(name + "zp")
        if bias:
            b = rng.uniform(-1, 1, (N,)).astype(dtype)
            weights[name + "bias"] = b
            ins += [""] * (5 - len(ins)) + [name + "bias"]
            want += b.astype(np.float64)
        feeds = {name + "a": a}
        if not constant:
            feeds.update(weights)
        node = ms("MatMulNBits", ins, [name + "y"], K=K, N=N, bits=bits, block_size=block)
        tol = 2e-3 if dtype != np.float32 else 1e-4  # float16: one rounding of the result
        return ([node], feeds, {} if not constant else weights, [(name + "y", want, tol)])

    def test_matmul_nbits(self):
        rng = np.random.RandomState(6)
        cases = [  # (A shape, N, block, zero points, bias)
            ((1, 64), 8, 32, None, False),      # GEMV path, default zero point 8
            ((3, 7, 64), 5, 16, "u8", False),   # batched rows, packed zero points, odd N
            ((2, 40), 6, 16, "u8", True),       # K not a multiple of the block: padded last
            ((9, 100), 3, 64, None, True),      # odd k_blocks (2): half-used zero-point byte
            ((5, 48), 7, 16, "u8", False),      # 3 blocks: an odd number of packed nibbles
            ((4, 128), 16, 128, "f32", False),  # float zero points
        ]
        batch = [self.nbits_case(rng, "n%d_" % i, sa, N, 4, block, zp, bias)
                 for i, (sa, N, block, zp, bias) in enumerate(cases)]
        # B, scales and zero points fed at run time: dequantized on each run
        batch.append(self.nbits_case(rng, "fed_", (3, 48), 5, 4, 16, "u8", True,
                                     constant=False))
        # float16 A, scales, zero points and bias
        batch.append(self.nbits_case(rng, "f16_", (3, 64), 6, 4, 32, "u8", True,
                                     dtype=np.float16))
        batch.append(self.nbits_case(rng, "f16z_", (2, 96), 5, 4, 32, "f32", False,
                                     constant=False, dtype=np.float16))
        # fed with K 4096: dequantized in two tiles of 32 rows, GEMV and SGEMM
        batch.append(self.nbits_case(rng, "t1_", (1, 4096), 40, 4, 128, "u8", True,
                                     constant=False))
        batch.append(self.nbits_case(rng, "t5_", (5, 4096), 40, 4, 32, None, False,
                                     constant=False))
        # bits 2 and 8
        for bits in (2, 8):
            for zp in (None, "u8"):
                batch.append(self.nbits_case(rng, "b%d%s_" % (bits, zp), (3, 80), 6, bits, 32,
                                             zp))
        self.check_batch("nbits", batch)

    def test_matmul_nbits_refusals(self):
        a = np.ones((2, 32), np.float32)
        B = np.zeros((4, 2, 8), np.uint8)
        sc = np.ones((4, 2), np.float32)
        base = {"K": 32, "N": 4, "block_size": 16}
        for attrs, words, ins, extra in [
                ({"bits": 3}, ["bits=3"], ["a", "B", "s"], {}),
                ({"weight_prepacked": 1}, ["weight_prepacked"], ["a", "B", "s"], {}),
                ({"block_size": 24}, ["block_size=24"], ["a", "B", "s"], {}),
                ({}, ["g_idx"], ["a", "B", "s", "", "g"], {"g": np.zeros((32,), np.int32)}),
                ({"K": 48}, ["B"], ["a", "B", "s"], {})]:
            at = dict(base, **attrs)
            m = model([ms("MatMulNBits", ins, ["y"], **at)], {"a": a}, ["y"],
                      dict({"B": B, "s": sc}, **extra))
            self.refused(m, "nbits_" + words[0], {"a": a}, words)
        a64 = a.astype(np.float64)
        m = model([ms("MatMulNBits", ["a", "B", "s"], ["y"], **base)], {"a": a64}, ["y"],
                  {"B": B, "s": sc})
        self.refused(m, "nbits_a64", {"a": a64}, ["float64"])


if __name__ == "__main__":
    unittest.main()
