"""Tests of the accelkit Python package against the built libaccelkit (Debian python3)."""
import os
import subprocess
import sys
import unittest

import accelkit
from accelkit import _lib


class TestPackage(unittest.TestCase):
    def test_version_matches_library(self):
        self.assertEqual(accelkit.__version__, "0.1.0")
        self.assertEqual(accelkit.version(), accelkit.__version__)

    def test_sysinfo_fields(self):
        info = accelkit.sysinfo(peak_millis=30)
        self.assertGreaterEqual(info["cores"], 1)
        self.assertIn(info["active_isa"], ("generic", "avx2", "avx512"))
        self.assertGreater(info["fma_peak_gflops_per_core"], 0.5)
        self.assertGreater(info["memcpy_gbps"], 0.1)
        if "avx2" in info["features"] and "fma" in info["features"]:
            self.assertIn(info["best_isa"], ("avx2", "avx512"))

    def test_errors_raise_with_message(self):
        with self.assertRaises(accelkit.AccelkitError) as ctx:
            accelkit.check(_lib.ak_measure_fma_peak(-5, None))
        self.assertEqual(ctx.exception.status, 1)
        self.assertIn("invalid argument", str(ctx.exception))

    def test_bad_isa_is_an_error_not_a_crash(self):
        code = "import accelkit"
        env = dict(os.environ, AK_ISA="bogus")
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("AK_ISA", proc.stderr)


TESTDATA = "/usr/share/libonnx-testdata/data"


def _load_pb(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


@unittest.skipUnless(os.path.isdir(TESTDATA), "libonnx-testdata not installed")
class TestInferenceSession(unittest.TestCase):
    """ORT's interface on NumPy arrays, checked against the ONNX test data."""

    def run_test(self, name):
        import numpy as np
        d = f"{TESTDATA}/{name}"
        s = accelkit.InferenceSession(f"{d}/model.onnx", threads=2)
        feeds = {i.name: _load_pb(f"{d}/test_data_set_0/input_{k}.pb")
                 for k, i in enumerate(s.get_inputs())}
        outs = s.run(None, feeds)
        for k, got in enumerate(outs):
            want = _load_pb(f"{d}/test_data_set_0/output_{k}.pb")
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)
        return s, outs

    def test_conv_model(self):
        s, outs = self.run_test("pytorch-converted/test_Conv2d_groups")
        self.assertEqual(s.get_inputs()[0].type, "tensor(float)")
        self.assertEqual(len(s.get_inputs()[0].shape), 4)
        self.assertEqual(len(outs), 1)

    def test_named_outputs_and_int_types(self):
        s, _ = self.run_test("node/test_argmax_default_axis_example")
        out = s.get_outputs()[0].name
        [y] = s.run([out], {s.get_inputs()[0].name: _load_pb(
            f"{TESTDATA}/node/test_argmax_default_axis_example/test_data_set_0/input_0.pb")})
        self.assertEqual(str(y.dtype), "int64")

    def test_bad_feed_raises(self):
        import numpy as np
        s = accelkit.InferenceSession(f"{TESTDATA}/pytorch-converted/test_Conv2d_groups/model.onnx")
        with self.assertRaises(accelkit.AccelkitError) as ctx:
            s.run(None, {s.get_inputs()[0].name: np.zeros((1, 2), np.float32)})
        self.assertIn("rank", str(ctx.exception))

    def test_unsupported_operator_raises(self):
        with self.assertRaises(accelkit.AccelkitError) as ctx:
            accelkit.InferenceSession(f"{TESTDATA}/node/test_tfidfvectorizer_tf_only_bigrams_skip0/model.onnx")
        self.assertIn("unsupported operator TfIdfVectorizer", str(ctx.exception))


class TestConvShapes(unittest.TestCase):
    """One session over planes of 7x7, 14x14, 7x7, 14x14: Conv packs its weights for the
    path a shape takes (the implicit GEMM transposed on 7x7, as usual on 14x14, which the
    3x3 layer runs as Winograd) and must give the right result after every switch."""

    @staticmethod
    def model(path):
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        rng = np.random.default_rng(7)
        w1 = rng.standard_normal((37, 96, 1, 1), dtype=np.float32) * 0.1
        w2 = rng.standard_normal((24, 37, 3, 3), dtype=np.float32) * 0.1
        b1 = rng.standard_normal(37, dtype=np.float32)
        b2 = rng.standard_normal(24, dtype=np.float32)
        inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (w2, "w2"), (b1, "b1"), (b2, "b2"))]
        nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h"]),
                 helper.make_node("Relu", ["h"], ["r"]),
                 helper.make_node("Conv", ["r", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
        g = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 96, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24, "H", "W"])], inits)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
        return w1, b1, w2, b2

    @staticmethod
    def reference(x, w1, b1, w2, b2):
        import numpy as np
        h = np.maximum(np.einsum("oc,nchw->nohw", w1[:, :, 0, 0].astype(np.float64), x) + b1[None, :, None, None], 0)
        hp = np.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)))
        H, W = x.shape[2:]
        y = np.zeros((1, 24, H, W)) + b2[None, :, None, None]
        for ky in range(3):
            for kx in range(3):
                y += np.einsum("oc,nchw->nohw", w2[:, :, ky, kx].astype(np.float64), hp[:, :, ky:ky + H, kx:kx + W])
        return y

    def test_shapes_switch_paths(self):
        import tempfile
        import numpy as np
        with tempfile.TemporaryDirectory() as d:
            weights = self.model(f"{d}/convs.onnx")
            s = accelkit.InferenceSession(f"{d}/convs.onnx", threads=2)
            rng = np.random.default_rng(1)
            for hw in (7, 14, 7, 14):
                x = rng.standard_normal((1, 96, hw, hw), dtype=np.float32)
                [y] = s.run(None, {"x": x})
                np.testing.assert_allclose(y, self.reference(x.astype(np.float64), *weights), rtol=1e-4, atol=1e-4)


class TestBlockedLayout(unittest.TestCase):
    """MobileNetV2-like blocks exported by PyTorch (a stem, inverted residuals with and
    without the residual, strides 1 and 2, 24 / 72 / 40 channels: odd counts of 8-channel
    blocks, 15x15 and 8x8 planes): the layout pass runs the 1x1 and depthwise layers as
    NchwcConv on blocked values and the output must still match PyTorch."""

    @staticmethod
    def net():
        import torch
        from torch import nn

        def block(cin, mid, cout, stride):
            return nn.Sequential(nn.Conv2d(cin, mid, 1), nn.ReLU6(),
                                 nn.Conv2d(mid, mid, 3, stride, 1, groups=mid), nn.ReLU6(),
                                 nn.Conv2d(mid, cout, 1))

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU6())
                self.b1, self.b2, self.b3 = block(16, 48, 16, 1), block(16, 48, 24, 2), block(24, 72, 24, 1)
                self.head = nn.Sequential(nn.Conv2d(24, 40, 1), nn.ReLU6())

            def forward(self, x):
                x = self.stem(x)
                x = x + self.b1(x)
                x = self.b2(x)
                x = x + self.b3(x)
                return self.head(x).mean((2, 3))

        torch.manual_seed(3)
        return Net().eval()

    def test_blocked_chain_matches_pytorch(self):
        import tempfile
        import numpy as np
        import torch
        net = self.net()
        x = torch.randn(2, 3, 30, 30)
        with torch.no_grad():
            want = net(x).numpy()
        with tempfile.TemporaryDirectory() as d:
            path = f"{d}/mbv2_blocks.onnx"
            torch.onnx.export(net, x, path, input_names=["x"], output_names=["y"], opset_version=13)
            s = accelkit.InferenceSession(path, threads=2)
            [y] = s.run(None, {"x": x.numpy()})
            np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
            ak = os.path.join(os.path.dirname(os.environ["AK_LIBRARY"]), "ak")
            out = subprocess.run([ak, "bench", path, "-n", "2", "-w", "0", "--out", os.path.dirname(path)],
                                 capture_output=True, text=True,
                                 env=dict(os.environ, AK_PROFILE="1"), check=True).stdout
            # all 11 convolutions run blocked (the stem reads x plain, the head writes plain)
            self.assertRegex(out, r"NchwcConv\s+11\s")

    @staticmethod
    def resnet_net():
        """ResNet bottlenecks: a 7x7 stem with its MaxPool, 3x3 layers with and without
        stride 2, strided 1x1 downsamples, residual adds (Y written over the Z that dies
        there; in the last block the first add's Z is the second's too, so it must not
        be), 24-64 channels."""
        import torch
        from torch import nn

        class Bottleneck(nn.Module):
            def __init__(self, cin, mid, cout, stride):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(cin, mid, 1), nn.ReLU(),
                                          nn.Conv2d(mid, mid, 3, stride, 1), nn.ReLU(),
                                          nn.Conv2d(mid, cout, 1))
                self.down = nn.Conv2d(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

            def forward(self, x):
                return torch.relu(self.body(x) + self.down(x))

        class ResidualReadAgain(Bottleneck):
            def forward(self, x):
                y = torch.relu(self.body(x) + x)
                return torch.relu(self.body(y) + x)

        torch.manual_seed(5)
        return nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                             Bottleneck(16, 16, 32, 1), Bottleneck(32, 24, 64, 2),
                             Bottleneck(64, 24, 64, 1), ResidualReadAgain(64, 24, 64, 1),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten()).eval()

    def test_blocked_resnet_any_plane(self):
        """Every convolution and the MaxPool run blocked; with dynamic planes one session
        takes Winograd for the 3x3 layers on large planes and the direct tiles on small
        ones, and back, each time matching PyTorch (each shape twice: the second run goes
        through the memory plan made from the first)."""
        import tempfile
        import numpy as np
        import torch
        net = self.resnet_net()
        with tempfile.TemporaryDirectory() as d:
            path = f"{d}/resnet_blocks.onnx"
            torch.onnx.export(net, torch.randn(1, 3, 64, 64), path, input_names=["x"], output_names=["y"],
                              opset_version=13, dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}})
            s = accelkit.InferenceSession(path, threads=2)
            shapes = [(1, 3, 128, 128), (2, 3, 40, 36), (1, 3, 97, 61), (1, 3, 128, 128)]
            for shape in [s for s in shapes for _ in range(2)]:
                x = torch.randn(*shape)
                with torch.no_grad():
                    want = net(x).numpy()
                [y] = s.run(None, {"x": x.numpy()})
                np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5, err_msg=str(shape))
            ak = os.path.join(os.path.dirname(os.environ["AK_LIBRARY"]), "ak")
            out = subprocess.run([ak, "bench", path, "-n", "2", "-w", "0", "--out", os.path.dirname(path), "--dim", "h=128", "--dim", "w=128",
                                  "--dim", "n=1"], capture_output=True, text=True,
                                 env=dict(os.environ, AK_PROFILE="1"), check=True).stdout
            self.assertRegex(out, r"NchwcConv\s+18\s")  # all 18 convolutions
            self.assertRegex(out, r"NchwcMaxPool\s+1\s")


if __name__ == "__main__":
    unittest.main()
