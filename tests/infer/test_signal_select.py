"""The signal operators (DFT-17/20, STFT, windows, MelWeightMatrix) and the selection
operators (NonMaxSuppression, Unique) on the forms the ONNX node tests leave out, checked
against ONNX Runtime (npm onnxruntime-node 1.30, tests/infer/ort_run.js): DFT-20's axis
input, dft_length padding and truncation, onesided, STFT with a complex signal and
onesided = 0, float64 windows, other mel parameters, NonMaxSuppression on random boxes in
both box formats, Unique along an axis unsorted. Refusals are checked by name. Models are
built with onnx.helper (Debian's onnx 1.12 writes opset 20 when its checker is not asked).

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python python3 -m unittest test_signal_select
"""
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

from accelkit.inference import InferenceSession  # noqa: E402
from ort_case import OrtCase  # noqa: E402

NP_TO_TP = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.float64): TP.DOUBLE,
            np.dtype(np.int64): TP.INT64, np.dtype(np.int32): TP.INT32}


def model(nodes, feeds, outputs, opset=17):
    """feeds: {name: example array} (graph inputs); outputs: names (types left to inference)."""
    g = oh.make_graph(nodes, "t",
                      [oh.make_tensor_value_info(n, NP_TO_TP[a.dtype], a.shape)
                       for n, a in feeds.items()],
                      [onnx.ValueInfoProto(name=n) for n in outputs])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8 if opset <= 18 else 9  # set by hand: onnx 1.12 knows IR 8 at most
    return m


class SignalSelectTest(OrtCase):
    TMP_PREFIX = "ak-signal-"

    def check(self, m, name, feeds, exact=False, rtol=1e-5, atol=1e-5):
        path = self.save(m, name)
        got = InferenceSession(path).run(None, feeds)
        want = self.ort(path, feeds)
        self.assertEqual(len(got), len(want))
        for k, (g, w) in enumerate(zip(got, want)):
            msg = "%s output %d" % (name, k)
            self.assertEqual(g.shape, w.shape, msg)
            self.assertEqual(g.dtype, w.dtype, msg)
            if exact:
                np.testing.assert_array_equal(g, w, err_msg=msg)
            else:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=msg)

    def refused(self, m, name, words):
        path = self.save(m, name)
        with self.assertRaises(Exception) as cm:
            sess = InferenceSession(path)
            sess.run(None, {})
        for w in words:
            self.assertIn(w, str(cm.exception))

    # ---- signal ----------------------------------------------------------------------

    def test_dft20_axis_input_length_onesided(self):
        rng = np.random.RandomState(1)
        x = rng.uniform(-1, 1, (2, 12, 3, 1)).astype(np.float32)
        xc = rng.uniform(-1, 1, (3, 7, 2)).astype(np.float32)
        nodes = [
            # axis 1 as an input, zero-padded to 16, onesided
            oh.make_node("DFT", ["x", "n16", "ax1"], ["y_pad"], onesided=1),
            # default axis (-2), truncated to 9
            oh.make_node("DFT", ["x", "n9"], ["y_cut"]),
            # complex inverse along the default axis (-2 of [3, 7, 2]: length 7); inputs
            # named "" crash ONNX Runtime 1.30's DFT, so they are left out
            oh.make_node("DFT", ["xc"], ["y_inv"], inverse=1),
        ]
        inits = [oh.make_tensor("n16", TP.INT64, [], [16]), oh.make_tensor("n9", TP.INT64, [], [9]),
                 oh.make_tensor("ax1", TP.INT64, [], [1])]
        m = model(nodes, {"x": x, "xc": xc}, ["y_pad", "y_cut", "y_inv"], opset=20)
        m.graph.initializer.extend(inits)
        self.check(m, "dft20", {"x": x, "xc": xc})

    def test_dft17_length_and_onesided(self):
        rng = np.random.RandomState(2)
        x = rng.uniform(-1, 1, (1, 5, 11, 2)).astype(np.float32)
        xd = rng.uniform(-1, 1, (4, 10, 1)).astype(np.float64)
        nodes = [oh.make_node("DFT", ["x", "n6"], ["y"], axis=2),
                 oh.make_node("DFT", ["xd"], ["yd"], axis=1, onesided=1)]
        m = model(nodes, {"x": x, "xd": xd}, ["y", "yd"])
        m.graph.initializer.extend([oh.make_tensor("n6", TP.INT64, [], [6])])
        self.check(m, "dft17", {"x": x, "xd": xd})

    def test_stft_real_frame_length(self):
        rng = np.random.RandomState(3)
        xr = rng.uniform(-1, 1, (2, 40, 1)).astype(np.float32)
        w = np.hanning(10).astype(np.float32)
        nodes = [oh.make_node("STFT", ["xr", "step", "", "len"], ["y"]),
                 oh.make_node("STFT", ["xr", "step", "w"], ["y2"], onesided=0)]
        m = model(nodes, {"xr": xr, "w": w}, ["y", "y2"])
        m.graph.initializer.extend([oh.make_tensor("step", TP.INT64, [], [3]),
                                    oh.make_tensor("len", TP.INT64, [], [7])])
        self.check(m, "stft", {"xr": xr, "w": w})

    def test_stft_complex_against_numpy(self):
        """A complex signal: ONNX Runtime 1.30's STFT returns values unrelated to the
        frames' DFT for it, so numpy's FFT of each windowed frame is the reference."""
        rng = np.random.RandomState(7)
        x = rng.uniform(-1, 1, (2, 50, 2)).astype(np.float32)
        w = np.hanning(10).astype(np.float32)
        m = model([oh.make_node("STFT", ["x", "step", "w"], ["y"], onesided=0)],
                  {"x": x, "w": w}, ["y"])
        m.graph.initializer.extend([oh.make_tensor("step", TP.INT64, [], [3])])
        got = InferenceSession(self.save(m, "stft_complex")).run(None, {"x": x, "w": w})[0]
        xc = x[..., 0].astype(np.float64) + 1j * x[..., 1]
        want = np.stack([np.fft.fft(xc[:, f * 3:f * 3 + 10] * w, axis=1)
                         for f in range(1 + (50 - 10) // 3)], axis=1)
        self.assertEqual(got.shape, want.shape + (2,))
        np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], want, rtol=1e-5, atol=1e-5)

    def test_windows_float64(self):
        n = np.array(7, np.int64)
        nodes = [oh.make_node(op, ["n"], [op + str(p)], periodic=p, output_datatype=TP.DOUBLE)
                 for op in ("HannWindow", "HammingWindow", "BlackmanWindow") for p in (0, 1)]
        m = model(nodes, {"n": n}, [nd.output[0] for nd in nodes])
        # ONNX Runtime computes in float32 whatever the output type
        self.check(m, "windows", {"n": n}, rtol=1e-6, atol=1e-7)

    def test_mel_weight_matrix(self):
        feeds = {"bins": np.array(10, np.int64), "dft": np.array(64, np.int64),
                 "rate": np.array(16000, np.int64), "lo": np.array(100, np.float32),
                 "hi": np.array(7000, np.float32)}
        nodes = [oh.make_node("MelWeightMatrix", list(feeds), ["w"])]
        self.check(model(nodes, feeds, ["w"]), "mel", feeds)

    def test_dft_onesided_inverse_refused(self):
        x = np.zeros((1, 8, 2), np.float32)
        m = model([oh.make_node("DFT", ["x"], ["y"], onesided=1, inverse=1)], {"x": x}, ["y"])
        path = self.save(m, "dft_c2r")
        with self.assertRaises(Exception) as cm:
            InferenceSession(path).run(None, {"x": x})
        self.assertIn("onesided", str(cm.exception))

    # ---- selection -------------------------------------------------------------------

    def nms_feeds(self, rng, batches, classes, n, center):
        if center:
            boxes = np.concatenate([rng.uniform(0, 10, (batches, n, 2)),
                                    rng.uniform(0.5, 4, (batches, n, 2))], axis=2)
        else:  # corners in either order
            boxes = rng.uniform(0, 10, (batches, n, 4))
        scores = rng.uniform(0, 1, (batches, classes, n))
        scores[0, 0, :4] = 0.5  # ties: ascending box index first
        return boxes.astype(np.float32), scores.astype(np.float32)

    def test_nms_random_boxes(self):
        rng = np.random.RandomState(4)
        for center in (0, 1):
            boxes, scores = self.nms_feeds(rng, 2, 3, 40, center)
            nodes = [oh.make_node("NonMaxSuppression", ["b", "s", "k", "iou", "thr"], ["sel"],
                                  center_point_box=center),
                     oh.make_node("NonMaxSuppression", ["b", "s", "k", "iou"], ["sel_all"],
                                  center_point_box=center),
                     oh.make_node("NonMaxSuppression", ["b", "s"], ["sel_none"],
                                  center_point_box=center)]
            feeds = {"b": boxes, "s": scores}
            m = model(nodes, feeds, ["sel", "sel_all", "sel_none"], opset=11)
            m.graph.initializer.extend([
                oh.make_tensor("k", TP.INT64, [1], [7]), oh.make_tensor("iou", TP.FLOAT, [1], [0.3]),
                oh.make_tensor("thr", TP.FLOAT, [1], [0.35])])
            self.check(m, "nms%d" % center, feeds, exact=True)

    def test_nms_bad_box_format_refused(self):
        boxes, scores = self.nms_feeds(np.random.RandomState(5), 1, 1, 3, 0)
        m = model([oh.make_node("NonMaxSuppression", ["b", "s"], ["sel"], center_point_box=2)],
                  {"b": boxes, "s": scores}, ["sel"], opset=11)
        self.refused(m, "nms_bad", ["NonMaxSuppression", "center_point_box"])

    def test_unique_axis_unsorted_and_ints(self):
        rng = np.random.RandomState(6)
        x = rng.randint(0, 2, (3, 9, 2)).astype(np.float32)
        xi = rng.randint(-4, 4, (5, 6)).astype(np.int64)
        outs = ["y", "idx", "inv", "cnt"]
        nodes = [oh.make_node("Unique", ["x"], outs, axis=1, sorted=0),
                 oh.make_node("Unique", ["xi"], [o + "_i" for o in outs]),
                 oh.make_node("Unique", ["xi"], ["y_neg", "", "inv_neg"], axis=-2)]
        feeds = {"x": x, "xi": xi}
        m = model(nodes, feeds, outs + [o + "_i" for o in outs] + ["y_neg", "inv_neg"], opset=11)
        self.check(m, "unique", feeds, exact=True)


if __name__ == "__main__":
    unittest.main()
