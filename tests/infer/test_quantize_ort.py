#!/usr/bin/python3
"""`ak quantize` end to end, against ONNX Runtime (npm onnxruntime-node, tests/infer/ort_run.js)
and the float model, on two small float32 models built here with onnx.helper (opset 17,
batch dimension symbolic):
- convnet: Conv 3x3 -> Relu -> MaxPool -> Conv 3x3 -> Relu -> Flatten -> Gemm (a 10-class
  classifier on 3x16x16 images);
- mlp: a transformer feed-forward block, MatMul -> Add -> Relu -> MatMul -> Add -> residual
  Add on [batch, 8, 64] tokens.
Static mode calibrates on 16 random samples (one sub-folder each, NAME.npy) and is checked on
64 other inputs (one batch):
  (a) the QDQ file passes onnx.checker;
  (b) ONNX Runtime (its graph optimizations on, as it runs by default) and accelkit agree within
      one quantization step of the output on >= 98 % of the elements (the classifier's
      logits are float, so the step is the last MatMul's output scale);
  (c) both against the float model: cosine >= 0.99, and the classifier's argmax agrees on
      >= 95 % of the 64 inputs;
  (d) accelkit fused every QDQ chain (`ak optimize --level extended` lists a QLinearConv or
      QLinearMatMul per quantized node);
also with --per-channel and --method percentile, and with weights read through Identity
nodes (as PyTorch's export shares equal initializers). Dynamic mode on the MLP: ONNX Runtime and
accelkit agree (1e-5 relative), cosine >= 0.99 against float; on the classifier, only its Gemm
is quantized. Refusals (e) name what is
refused: an unknown --op-types entry, an --exclude name no node has, a float16 model, an
already quantized model, static mode without samples.

    test_quantize_ort.py AK
A missing onnxruntime-node or onnx module is a failure naming what to install."""
import os
import re
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_case import OrtCase  # noqa: E402

import onnx  # noqa: E402  (Debian python3-onnx)
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as onh  # noqa: E402

AK = None
rng = np.random.default_rng(20261129)


def he(*shape):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 2 else shape[0]
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def model(nodes, x_shape, y_shape, inits, dtype=TP.FLOAT):
    g = oh.make_graph(nodes, "net", [oh.make_tensor_value_info("x", dtype, x_shape)],
                      [oh.make_tensor_value_info("y", dtype, y_shape)],
                      [onh.from_array(v, k) for k, v in inits.items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def convnet():
    inits = {"w1": he(8, 3, 3, 3), "b1": (rng.standard_normal(8) * 0.1).astype(np.float32),
             "w2": he(16, 8, 3, 3), "b2": (rng.standard_normal(16) * 0.1).astype(np.float32),
             "wf": he(10, 16 * 8 * 8), "bf": (rng.standard_normal(10) * 0.1).astype(np.float32)}
    nodes = [oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4, name="conv1"),
             oh.make_node("Relu", ["c1"], ["r1"]),
             oh.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             oh.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1] * 4, name="conv2"),
             oh.make_node("Relu", ["c2"], ["r2"]),
             oh.make_node("Flatten", ["r2"], ["f"]),
             oh.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1, name="fc")]
    return model(nodes, ["N", 3, 16, 16], ["N", 10], inits), (3, 16, 16)


def mlp():
    d, h = 64, 256
    inits = {"w1": he(d, h), "b1": (rng.standard_normal(h) * 0.1).astype(np.float32),
             "w2": he(h, d), "b2": (rng.standard_normal(d) * 0.1).astype(np.float32)}
    nodes = [oh.make_node("MatMul", ["x", "w1"], ["m1"], name="fc1"),
             oh.make_node("Add", ["m1", "b1"], ["a1"]),
             oh.make_node("Relu", ["a1"], ["r1"]),
             oh.make_node("MatMul", ["r1", "w2"], ["m2"], name="fc2"),
             oh.make_node("Add", ["m2", "b2"], ["a2"]),
             oh.make_node("Add", ["a2", "x"], ["y"])]
    return model(nodes, ["N", 8, d], ["N", 8, d], inits), (8, d)


def cosine(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def ak(*args, ok=True):
    p = subprocess.run([AK] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    if ok and p.returncode != 0:
        raise AssertionError("ak %s failed (%d):\n%s" % (" ".join(args), p.returncode, p.stdout))
    return p


class QuantizeTest(OrtCase):
    TMP_PREFIX = "ak-quantize-"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.models = {"convnet": convnet(), "mlp": mlp()}
        cls.paths, cls.calib, cls.test_x, cls.ref = {}, {}, {}, {}
        for name, (m, shape) in cls.models.items():
            path = os.path.join(cls.tmp, name + ".onnx")
            onnx.save(m, path)
            cls.paths[name] = path
            cdir = os.path.join(cls.tmp, name + "_calib")
            for k in range(16):
                os.makedirs(os.path.join(cdir, "%02d" % k))
                np.save(os.path.join(cdir, "%02d" % k, "x.npy"),
                        rng.standard_normal((1,) + shape).astype(np.float32))
            cls.calib[name] = cdir
            cls.test_x[name] = rng.standard_normal((64,) + shape).astype(np.float32)
        for name in cls.models:
            cls.ref[name] = cls.run_ak(cls, cls.paths[name], cls.test_x[name], name + "_fp32")

    def run_ak(self, path, x, tag):
        d = os.path.join(self.tmp, tag)
        os.makedirs(os.path.join(d, "in"), exist_ok=True)
        np.save(os.path.join(d, "in", "x.npy"), x)
        ak("run", path, "--inputs", os.path.join(d, "in"), "-o", os.path.join(d, "out"), "-t", "2")
        return np.load(os.path.join(d, "out", "y.npy"))

    def quantize(self, name, tag, *flags):
        out = os.path.join(self.tmp, "%s_%s.onnx" % (name, tag))
        p = ak("quantize", self.paths[name], out, *flags)
        onnx.checker.check_model(onnx.load(out))  # (a)
        return out, p.stdout

    def fused(self, path):
        """QLinearConv + QLinearMatMul nodes accelkit's optimizer makes of the file."""
        opt = path + ".opt.onnx"
        ak("optimize", path, opt, "--level", "extended")
        ops = [n.op_type for n in onnx.load(opt).graph.node]
        return ops.count("QLinearConv") + ops.count("QLinearMatMul"), ops

    def output_step(self, path):
        """The scale of the QuantizeLinear nearest the output (the last quantized value)."""
        m = onnx.load(path)
        inits = {i.name: onh.to_array(i) for i in m.graph.initializer}
        scales = [float(inits[n.input[1]]) for n in m.graph.node if n.op_type == "QuantizeLinear"]
        return scales[-1]

    def check_static(self, name, tag, *flags):
        path, text = self.quantize(name, tag, "--calibrate", self.calib[name], *flags)
        want_nodes = {"convnet": 3, "mlp": 2}[name]
        self.assertIn("%d nodes quantized" % want_nodes, text)
        x = self.test_x[name]
        got = self.run_ak(path, x, "%s_%s_ak" % (name, tag))
        ort = self.ort(path, {"x": x})[0]
        step = self.output_step(path)
        # (b) the two engines: within one step of the output's quantization
        far = np.abs(got - ort) > step * 1.001
        self.assertLessEqual(far.mean(), 0.02, "%s %s: %.2f %% beyond one step %g" % (
            name, tag, 100 * far.mean(), step))
        # (c) both against float
        ref = self.ref[name]
        figures = []
        for engine, y in (("accelkit", got), ("onnxruntime", ort)):
            cos = cosine(y, ref)
            self.assertGreaterEqual(cos, 0.99, "%s %s %s: cosine %.5f" % (name, tag, engine, cos))
            figures.append("%s cos %.5f" % (engine, cos))
            if name == "convnet":
                agree = float((y.argmax(1) == ref.argmax(1)).mean())
                self.assertGreaterEqual(agree, 0.95, "%s %s %s: top-1 %.3f" % (name, tag, engine, agree))
                figures.append("top-1 %.3f" % agree)
        # (d) every chain fused
        count, ops = self.fused(path)
        self.assertEqual(count, want_nodes, "%s %s: fused %d of %d: %s" % (name, tag, count, want_nodes, ops))
        print("%s %s: %s; engines beyond one step %.2f %%" % (name, tag, ", ".join(figures),
                                                             100 * far.mean()), file=sys.stderr)

    def test_convnet_minmax(self):
        self.check_static("convnet", "minmax")

    def test_convnet_per_channel_percentile(self):
        self.check_static("convnet", "pc_pct", "--per-channel", "--method", "percentile")
        # the file has one weight scale per output channel, and the percentile ranges
        # are inside the MinMax ones, some strictly
        pct = {i.name: onh.to_array(i) for i in onnx.load(
            os.path.join(self.tmp, "convnet_pc_pct.onnx")).graph.initializer}
        mm = {i.name: onh.to_array(i) for i in onnx.load(self.quantize(
            "convnet", "mm_ref", "--calibrate", self.calib["convnet"])[0]).graph.initializer}
        self.assertEqual(pct["w1_scale"].shape, (8,))
        self.assertEqual(pct["w2_scale"].shape, (16,))
        acts = [n for n in mm if n.endswith("_scale") and n[0] in "xrpf" and mm[n].ndim == 0]
        self.assertGreaterEqual(len(acts), 4, acts)
        self.assertTrue(all(pct[n] <= mm[n] for n in acts), [(n, pct[n], mm[n]) for n in acts])
        self.assertTrue(any(pct[n] < mm[n] * 0.999 for n in acts), [(n, pct[n], mm[n]) for n in acts])

    def test_mlp_static(self):
        self.check_static("mlp", "minmax")

    def test_mlp_dynamic(self):
        for tag, flags in (("dyn", ()), ("dyn_pc", ("--per-channel",))):
            path, text = self.quantize("mlp", tag, "--dynamic", *flags)
            self.assertIn("2 nodes quantized (dynamic", text)
            ops = [n.op_type for n in onnx.load(path).graph.node]
            self.assertEqual(ops.count("MatMulInteger"), 2, ops)
            x = self.test_x["mlp"]
            got = self.run_ak(path, x, "mlp_%s_ak" % tag)
            ort = self.ort(path, {"x": x})[0]
            rel = float(np.abs(got - ort).max() / np.abs(ort).max())
            self.assertLess(rel, 1e-5, "mlp %s: accelkit vs onnxruntime %.3g" % (tag, rel))
            cos = cosine(got, self.ref["mlp"])
            self.assertGreaterEqual(cos, 0.99, "mlp %s: cosine %.5f" % (tag, cos))
            print("mlp %s: cos %.5f, engines max rel %.2g" % (tag, cos, rel), file=sys.stderr)

    def test_gemm_dynamic(self):
        """Dynamic mode leaves Conv in float and turns the classifier's Gemm (transB, bias)
        into MatMulInteger + Add."""
        path, text = self.quantize("convnet", "dyn", "--dynamic")
        self.assertIn("1 nodes quantized (dynamic", text)
        ops = [n.op_type for n in onnx.load(path).graph.node]
        self.assertEqual((ops.count("Conv"), ops.count("MatMulInteger"), ops.count("Gemm")), (2, 1, 0), ops)
        x = self.test_x["convnet"]
        got = self.run_ak(path, x, "convnet_dyn_ak")
        ort = self.ort(path, {"x": x})[0]
        self.assertLess(float(np.abs(got - ort).max() / np.abs(ort).max()), 1e-5)
        self.assertGreaterEqual(cosine(got, self.ref["convnet"]), 0.99)
        self.assertGreaterEqual(float((got.argmax(1) == self.ref["convnet"].argmax(1)).mean()), 0.95)

    def test_exclude_and_op_types(self):
        path, text = self.quantize("convnet", "noconv2", "--calibrate", self.calib["convnet"],
                                   "--exclude", "conv2", "--op-types", "Conv,Gemm")
        self.assertIn("2 nodes quantized", text)
        count, _ = self.fused(path)
        self.assertEqual(count, 2)

    def test_weight_through_identity(self):
        """PyTorch's export shares equal initializers through Identity nodes: a bias and a
        weight read that way are still constants, quantized and fused."""
        m, shape = convnet()
        for n in m.graph.node:
            if n.name == "conv1":
                n.input[2] = "b1_shared"
            if n.name == "fc":
                n.input[1] = "wf_shared"
        m.graph.node.insert(0, oh.make_node("Identity", ["b1"], ["b1_shared"]))
        m.graph.node.insert(0, oh.make_node("Identity", ["wf"], ["wf_shared"]))
        src = os.path.join(self.tmp, "identity.onnx")
        onnx.save(m, src)
        out = os.path.join(self.tmp, "identity_q.onnx")
        self.assertIn("3 nodes quantized", ak("quantize", src, out, "--calibrate",
                                              self.calib["convnet"]).stdout)
        q = onnx.load(out)
        onnx.checker.check_model(q)
        self.assertNotIn("Identity", [n.op_type for n in q.graph.node])
        self.assertEqual(self.fused(out)[0], 3)
        x = self.test_x["convnet"][:8]
        got = self.run_ak(out, x, "identity_ak")
        self.assertLess(np.abs(got - self.ort(out, {"x": x})[0]).max(), 1.001 * self.output_step(out))

    def refused(self, args, pattern):
        p = ak("quantize", *args, ok=False)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertRegex(p.stdout, pattern)

    def test_refusals(self):
        out = os.path.join(self.tmp, "refused.onnx")
        conv, calib = self.paths["convnet"], self.calib["convnet"]
        self.refused([conv, out, "--calibrate", calib, "--op-types", "Conv,Softmax"],
                     r"unknown op type 'Softmax'")
        self.refused([conv, out, "--calibrate", calib, "--exclude", "nosuch"],
                     r"no node named 'nosuch'")
        self.refused([conv, out], r"one of --calibrate DIR or --dynamic")
        q, _ = self.quantize("mlp", "twice", "--dynamic")
        self.refused([q, out, "--dynamic"], r"already quantized")
        m16 = model([oh.make_node("MatMul", ["x", "w"], ["y"])], [2, 4], [2, 4],
                    {"w": np.ones((4, 4), np.float16)}, dtype=TP.FLOAT16)
        p16 = os.path.join(self.tmp, "f16.onnx")
        onnx.save(m16, p16)
        self.refused([p16, out, "--dynamic"], r"float16: only float32 models")
        empty = os.path.join(self.tmp, "empty_calib")
        os.makedirs(empty, exist_ok=True)
        self.refused([conv, out, "--calibrate", empty], r"no tensor for input 'x'")
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_quantize_ort.py AK")
    AK = sys.argv.pop(1)
    unittest.main(verbosity=2)
