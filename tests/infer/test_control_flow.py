"""Control flow (If, Loop, Scan, SequenceMap), optional values and opsets 19-21, checked against real references.

Models are built here with onnx.helper (Debian's onnx 1.12 writes opset 21 / IR 10
files when its checker is not asked) and run in accelkit (the Python package) and in ONNX
Runtime (npm onnxruntime-node 1.30, tests/infer/ort_run.js); outputs must agree. A
torch.jit.script module with a data-dependent loop, exported by PyTorch's exporter, is
checked against PyTorch eager. Missing peers fail the test naming what to install.

    AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python python3 -m unittest test_control_flow
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



def vi(name, elem, shape):
    return oh.make_tensor_value_info(name, elem, shape)


def const(name, array):
    return oh.make_tensor(name, {np.dtype(np.float32): TP.FLOAT, np.dtype(np.int64): TP.INT64,
                                 np.dtype(np.bool_): TP.BOOL}[array.dtype],
                          array.shape, array.flatten().tolist())


def model(graph, opset, ir_version=8):
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = ir_version  # set by hand: onnx 1.12 knows IR 8 at most
    return m


# ---- models ---------------------------------------------------------------------------

def loop_capture_model():
    """A Loop whose body reads outer values by name: the graph input x, an activation W of
    the outer graph and an initializer; it stops on a computed condition before M trips
    and stacks a scan output."""
    body = oh.make_graph(
        [oh.make_node("Mul", ["y_in", "x"], ["t"]),
         oh.make_node("Add", ["t", "W"], ["y_out"]),
         oh.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
         oh.make_node("Less", ["s", "limit"], ["c_out"]),
         oh.make_node("Cast", ["i"], ["i_f"], to=TP.FLOAT),
         oh.make_node("Add", ["y_out", "i_f"], ["scan"])],
        "body",
        [vi("i", TP.INT64, []), vi("c_in", TP.BOOL, []), vi("y_in", TP.FLOAT, [3])],
        [vi("c_out", TP.BOOL, []), vi("y_out", TP.FLOAT, [3]), vi("scan", TP.FLOAT, [3])])
    g = oh.make_graph(
        [oh.make_node("Mul", ["x", "two"], ["W"]),
         oh.make_node("Loop", ["trips", "go", "y0"], ["y", "ys"], body=body)],
        "loop_capture",
        [vi("x", TP.FLOAT, [3]), vi("trips", TP.INT64, []), vi("y0", TP.FLOAT, [3])],
        [vi("y", TP.FLOAT, [3]), vi("ys", TP.FLOAT, [None, 3])],
        [const("two", np.array(2.0, np.float32)), const("limit", np.array(60.0, np.float32)),
         const("go", np.array(True))])
    return model(g, 13)


def if_in_loop_model():
    """An If inside a Loop body: the then branch reads A two graph levels up, the else
    branch reads the body's own i_f; the loop has no cond input (M only)."""
    then_g = oh.make_graph([oh.make_node("Add", ["acc_in", "A"], ["r"])], "then", [],
                           [vi("r", TP.FLOAT, [2, 2])])
    else_g = oh.make_graph([oh.make_node("Mul", ["acc_in", "i_f"], ["r2"])], "else", [],
                           [vi("r2", TP.FLOAT, [2, 2])])
    body = oh.make_graph(
        [oh.make_node("Mod", ["i", "two_i"], ["m"]),
         oh.make_node("Equal", ["m", "zero_i"], ["even"]),
         oh.make_node("Cast", ["i"], ["i_f"], to=TP.FLOAT),
         oh.make_node("If", ["even"], ["acc_out"], then_branch=then_g, else_branch=else_g),
         oh.make_node("Identity", ["c_in"], ["c_out"]),
         oh.make_node("Identity", ["acc_out"], ["seen"])],
        "body",
        [vi("i", TP.INT64, []), vi("c_in", TP.BOOL, []), vi("acc_in", TP.FLOAT, [2, 2])],
        [vi("c_out", TP.BOOL, []), vi("acc_out", TP.FLOAT, [2, 2]), vi("seen", TP.FLOAT, [2, 2])])
    g = oh.make_graph(
        [oh.make_node("Loop", ["trips", "", "acc0"], ["acc", "history"], body=body)],
        "if_in_loop",
        [vi("A", TP.FLOAT, [2, 2]), vi("acc0", TP.FLOAT, [2, 2]), vi("trips", TP.INT64, [])],
        [vi("acc", TP.FLOAT, [2, 2]), vi("history", TP.FLOAT, [None, 2, 2])],
        [const("two_i", np.array(2, np.int64)), const("zero_i", np.array(0, np.int64))])
    return model(g, 13)


def if_shapes_model():
    """An If whose branches give outputs of different shapes."""
    then_g = oh.make_graph([oh.make_node("Mul", ["x", "x"], ["a"])], "then", [],
                           [vi("a", TP.FLOAT, [3])])
    else_g = oh.make_graph([oh.make_node("Reshape", ["six", "shape22"], ["b"])], "else", [],
                           [vi("b", TP.FLOAT, [3, 2])])
    g = oh.make_graph(
        [oh.make_node("Concat", ["x", "x"], ["six"], axis=0),
         oh.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)],
        "if_shapes", [vi("c", TP.BOOL, []), vi("x", TP.FLOAT, [3])],
        [vi("out", TP.FLOAT, None)], [const("shape22", np.array([3, 2], np.int64))])
    return model(g, 13)


def scan_axes_model():
    """Scan (opset 11) over axis 1 of X, read in reverse; one scan output stacked along
    axis 1 from the end, another along axis 0; the body captures k."""
    body = oh.make_graph(
        [oh.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         oh.make_node("Mul", ["s_out", "k"], ["o1"]),
         oh.make_node("Identity", ["x_t"], ["o2"])],
        "body", [vi("s_in", TP.FLOAT, [2]), vi("x_t", TP.FLOAT, [2])],
        [vi("s_out", TP.FLOAT, [2]), vi("o1", TP.FLOAT, [2]), vi("o2", TP.FLOAT, [2])])
    g = oh.make_graph(
        [oh.make_node("Scan", ["s0", "X"], ["s", "o1", "o2"], body=body, num_scan_inputs=1,
                      scan_input_axes=[1], scan_input_directions=[1],
                      scan_output_axes=[1, 0], scan_output_directions=[1, 0])],
        "scan_axes", [vi("s0", TP.FLOAT, [2]), vi("X", TP.FLOAT, [2, 5]), vi("k", TP.FLOAT, [2])],
        [vi("s", TP.FLOAT, [2]), vi("o1", TP.FLOAT, [2, 5]), vi("o2", TP.FLOAT, [5, 2])])
    return model(g, 11)


def opset21_model():
    """IR 10, opset 21: operators whose versions 19-21 only add types (Reshape, Transpose,
    Flatten, Squeeze, Unsqueeze, Shape, Size, Cast, Identity, Loop) and those whose version
    19 added a mode accelkit implements (Pad 'wrap', Resize 'half_pixel_symmetric')."""
    body = oh.make_graph(
        [oh.make_node("Add", ["v_in", "v_in"], ["v_out"]),
         oh.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [vi("i", TP.INT64, []), vi("c_in", TP.BOOL, []), vi("v_in", TP.FLOAT, None)],
        [vi("c_out", TP.BOOL, []), vi("v_out", TP.FLOAT, None)])
    g = oh.make_graph(
        [oh.make_node("Pad", ["X", "pads"], ["p"], mode="wrap"),
         oh.make_node("AveragePool", ["p"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
         oh.make_node("Resize", ["a", "", "scales"], ["r"], mode="linear",
                      coordinate_transformation_mode="half_pixel_symmetric"),
         oh.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 3, 1]),
         oh.make_node("Flatten", ["t"], ["f"], axis=2),
         oh.make_node("Unsqueeze", ["f", "ax0"], ["u"]),
         oh.make_node("Squeeze", ["u", "ax0"], ["sq"]),
         oh.make_node("Reshape", ["sq", "flat"], ["rs"]),
         oh.make_node("Loop", ["three", "", "rs"], ["looped"], body=body),
         oh.make_node("Shape", ["sq"], ["sh"]),
         oh.make_node("Cast", ["sh"], ["shf"], to=TP.FLOAT),
         oh.make_node("Size", ["sq"], ["n"]),
         oh.make_node("Identity", ["shf"], ["shape_f"])],
        "opset21", [vi("X", TP.FLOAT, [1, 2, 4, 4])],
        [vi("looped", TP.FLOAT, None), vi("shape_f", TP.FLOAT, [2]), vi("n", TP.INT64, [])],
        [const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
         const("scales", np.array([1, 1, 2, 2], np.float32)),
         const("ax0", np.array([0], np.int64)), const("flat", np.array([-1], np.int64)),
         const("three", np.array(3, np.int64))])
    return model(g, 21, ir_version=10)


# ---- running --------------------------------------------------------------------------

def sequence_map_model():
    """SequenceMap over the rows of x: the body reads W, an activation of the outer graph,
    and b, an additional tensor input fed whole to every iteration; a second body output
    is each element's shape. Both sequences end as tensors (ConcatFromSequence)."""
    body = oh.make_graph(
        [oh.make_node("Mul", ["e", "W"], ["m"]),
         oh.make_node("Add", ["m", "b_in"], ["y"]),
         oh.make_node("Shape", ["y"], ["shape"])],
        "map_body", [vi("e", TP.FLOAT, [3]), vi("b_in", TP.FLOAT, [3])],
        [vi("y", TP.FLOAT, [3]), vi("shape", TP.INT64, [1])])
    g = oh.make_graph(
        [oh.make_node("Mul", ["w", "two"], ["W"]),
         oh.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
         oh.make_node("SequenceMap", ["rows", "b"], ["ys", "shapes"], body=body),
         oh.make_node("ConcatFromSequence", ["ys"], ["Y"], axis=0, new_axis=1),
         oh.make_node("ConcatFromSequence", ["shapes"], ["S"], axis=0)],
        "seqmap",
        [vi("x", TP.FLOAT, ["n", 3]), vi("w", TP.FLOAT, [3]), vi("b", TP.FLOAT, [3])],
        [vi("Y", TP.FLOAT, ["n", 3]), vi("S", TP.INT64, ["n"])],
        [const("two", np.array(2.0, np.float32))])
    return model(g, 17)


def optional_if_model():
    """An If whose branches return an optional (full: Optional(x + 1); empty: Optional
    with a type); OptionalHasElement picks a second If's branch, whose then branch takes
    the element out (OptionalGetElement of a value two graph levels up)."""
    opt_type = oh.make_optional_type_proto(oh.make_tensor_type_proto(TP.FLOAT, [3]))
    full = oh.make_graph([oh.make_node("Add", ["x", "one"], ["x1"]),
                          oh.make_node("Optional", ["x1"], ["o1"])], "full", [],
                         [oh.make_value_info("o1", opt_type)])
    empty = oh.make_graph([oh.make_node("Optional", [], ["o2"], type=opt_type.optional_type.elem_type)],
                          "empty", [], [oh.make_value_info("o2", opt_type)])
    take = oh.make_graph([oh.make_node("OptionalGetElement", ["opt"], ["r1"])], "take", [],
                         [vi("r1", TP.FLOAT, [3])])
    zero = oh.make_graph([oh.make_node("Mul", ["x", "nothing"], ["r2"])], "zero", [],
                         [vi("r2", TP.FLOAT, [3])])
    g = oh.make_graph(
        [oh.make_node("If", ["c"], ["opt"], then_branch=full, else_branch=empty),
         oh.make_node("OptionalHasElement", ["opt"], ["has"]),
         oh.make_node("If", ["has"], ["Y"], then_branch=take, else_branch=zero)],
        "optional_if", [vi("c", TP.BOOL, []), vi("x", TP.FLOAT, [3])],
        [vi("has", TP.BOOL, []), vi("Y", TP.FLOAT, [3])],
        [const("one", np.array(1.0, np.float32)), const("nothing", np.array(0.0, np.float32))])
    return model(g, 16)


class ControlFlowTest(OrtCase):
    TMP_PREFIX = "ak-ctrlflow-"

    def check(self, m, name, feeds_list):
        path = self.save(m, name)
        sess = InferenceSession(path)
        for feeds in feeds_list:
            got = sess.run(None, feeds)
            want = self.ort(path, feeds)
            self.assertEqual(len(got), len(want))
            for g, w in zip(got, want):
                self.assertEqual(g.shape, w.shape, name)
                np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-5, atol=1e-5,
                                           err_msg=name)
        return sess

    def test_loop_reads_outer_values(self):
        rng = np.random.RandomState(3)
        feeds = [{"x": rng.uniform(0.5, 1.5, 3).astype(np.float32),
                  "trips": np.array(t, np.int64),
                  "y0": rng.uniform(-1, 1, 3).astype(np.float32)} for t in (0, 1, 4, 50)]
        self.check(loop_capture_model(), "loop_capture", feeds)

    def test_if_inside_loop(self):
        rng = np.random.RandomState(4)
        feeds = [{"A": rng.uniform(-1, 1, (2, 2)).astype(np.float32),
                  "acc0": rng.uniform(-1, 1, (2, 2)).astype(np.float32),
                  "trips": np.array(t, np.int64)} for t in (1, 2, 7)]
        self.check(if_in_loop_model(), "if_in_loop", feeds)

    def test_if_branches_of_different_shapes(self):
        x = np.array([1.0, -2.0, 3.0], np.float32)
        self.check(if_shapes_model(), "if_shapes",
                   [{"c": np.array(True), "x": x}, {"c": np.array(False), "x": x},
                    {"c": np.array(True), "x": x}])

    def test_scan_axes_and_directions(self):
        rng = np.random.RandomState(5)
        feeds = [{"s0": rng.uniform(-1, 1, 2).astype(np.float32),
                  "X": rng.uniform(-1, 1, (2, 5)).astype(np.float32),
                  "k": rng.uniform(-1, 1, 2).astype(np.float32)}]
        self.check(scan_axes_model(), "scan_axes", feeds)

    def test_ir10_opset21(self):
        rng = np.random.RandomState(6)
        self.check(opset21_model(), "opset21",
                   [{"X": rng.uniform(-1, 1, (1, 2, 4, 4)).astype(np.float32)}])

    def test_changed_semantics_refused(self):
        """GroupNormalization-21 changed its scale/bias shapes; accelkit refuses it (by
        name), whichever of the two it is missing."""
        g = oh.make_graph(
            [oh.make_node("GroupNormalization", ["X", "s", "b"], ["Y"], num_groups=2)],
            "gn", [vi("X", TP.FLOAT, [1, 4, 2]), vi("s", TP.FLOAT, [4]), vi("b", TP.FLOAT, [4])],
            [vi("Y", TP.FLOAT, [1, 4, 2])])
        path = self.save(model(g, 21, ir_version=10), "gn21")
        with self.assertRaises(Exception) as cm:
            InferenceSession(path)
        self.assertIn("GroupNormalization", str(cm.exception))

    def test_sequence_map_reads_outer_values(self):
        rng = np.random.RandomState(7)
        feeds = [{"x": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
                  "w": rng.uniform(-1, 1, 3).astype(np.float32),
                  "b": rng.uniform(-1, 1, 3).astype(np.float32)} for n in (1, 4, 9)]
        self.check(sequence_map_model(), "seqmap", feeds)

    def test_optional_through_if(self):
        x = np.array([1.0, -2.0, 3.0], np.float32)
        self.check(optional_if_model(), "optional_if",
                   [{"c": np.array(True), "x": x}, {"c": np.array(False), "x": x},
                    {"c": np.array(True), "x": x}])

    def test_torch_script_loop(self):
        """torch.jit.script with a loop over the sequence and a data-dependent branch:
        PyTorch's exporter writes a Loop carrying a sequence, with an If inside."""
        import torch

        class Recurrent(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.randn(4, 4) * 0.5)

            def forward(self, x):
                h = torch.zeros(x.size(1), 4)
                outs = []
                for i in range(x.size(0)):
                    h = torch.tanh(h @ self.w + x[i])
                    if bool(h.sum() > 0):
                        h = h * 0.5
                    outs.append(h)
                return h, torch.stack(outs)

        torch.manual_seed(0)
        module = Recurrent().eval()
        path = os.path.join(self.tmp, "scripted.onnx")
        torch.onnx.export(torch.jit.script(module), (torch.randn(5, 3, 4),), path,
                          opset_version=15, input_names=["x"], output_names=["h", "all"],
                          dynamic_axes={"x": {0: "T"}})
        ops = [n.op_type for n in onnx.load(path).graph.node]
        self.assertIn("Loop", ops)
        sess = InferenceSession(path)
        for steps in (1, 6, 9):
            x = np.random.RandomState(steps).randn(steps, 3, 4).astype(np.float32)
            h, stacked = sess.run(None, {"x": x})
            with torch.no_grad():
                eh, eall = module(torch.from_numpy(x))
            np.testing.assert_allclose(h, eh.numpy(), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(stacked, eall.numpy(), rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
