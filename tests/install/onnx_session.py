"""ONNX inference as a user's script has it, run by python_package.sh: a small model made
with the onnx package (MatMul + Add + Relu) through accelkit.InferenceSession against
NumPy. With `--without-onnx` (a library built with AK_WITH_ONNX=OFF) it checks instead
that InferenceSession refuses, naming the option."""
import os
import sys
import tempfile

import numpy as np

import accelkit

if "--without-onnx" in sys.argv:
    try:
        accelkit.InferenceSession
    except ImportError as e:
        if "AK_WITH_ONNX=OFF" not in str(e):
            sys.exit(f"InferenceSession refused without naming AK_WITH_ONNX: {e}")
        print(f"InferenceSession refused as expected: {e}")
        sys.exit(0)
    sys.exit("InferenceSession exists in a library built without the ONNX engine")

import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
w = rng.standard_normal((8, 4)).astype(np.float32)
b = rng.standard_normal(4).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["z"]),
     helper.make_node("Relu", ["z"], ["y"])],
    "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "mlp.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    sess = accelkit.InferenceSession(path, threads=1)
    x = rng.standard_normal((2, 8)).astype(np.float32)
    names = [i.name for i in sess.get_inputs()], [o.name for o in sess.get_outputs()]
    if names != (["x"], ["y"]):
        sys.exit(f"inputs/outputs {names}, expected (['x'], ['y'])")
    [y] = sess.run(None, {"x": x})
want = np.maximum(x @ w + b, 0)
if not np.allclose(y, want, atol=1e-5):
    sys.exit(f"InferenceSession gave {y}, NumPy {want}")
print("InferenceSession: MatMul+Add+Relu matches NumPy")
