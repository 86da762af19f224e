"""accelkit.onnxruntime against onnxruntime's Python API: small scripts in the style of
onnxruntime's Python documentation (load and run, model metadata, OrtValue, IOBinding
with engine-allocated and preallocated outputs, run_with_ort_values, SessionOptions,
RunOptions, profiling, loading from bytes, providers, errors), each written for
`import onnxruntime`, run here after rewriting only its import lines, on models built
with Debian's python3-onnx. Their outputs are checked against NumPy and, for three
models, against ONNX Runtime itself (npm onnxruntime-node, tests/infer/ort_run.js).
A missing onnx module or onnxruntime-node is a failure naming what to install."""
import os
import re
import shutil
import sys
import tempfile
import unittest
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as oh
    from onnx import numpy_helper as onh
except ImportError:
    sys.exit("FAIL: the python3 module onnx is missing (Debian python3-onnx; run scripts/setup)")

import accelkit.onnxruntime as akort  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "infer"))
from ort_case import OrtCase  # noqa: E402  (ONNX Runtime through tests/infer/ort_run.js)

RNG = np.random.default_rng(20261129)
W = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
CONV_W = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
CONV_B = RNG.standard_normal(4).astype(np.float32)


def save(model, path, ir=8):
    model.ir_version = ir
    onnx.checker.check_model(model)
    onnx.save(model, path)


def build_models(d):
    """mlp.onnx: Y = Relu(X @ W + B), X [batch, 3], with a domain, descriptions and
    metadata_props; conv.onnx: Conv (pads 1) + Relu + GlobalAveragePool on [N, 2, 5, 5];
    multi.onnx: three outputs (Softmax, ArgMax int64, a Reshape view of the input);
    scale.onnx: Y = X * S, S an initializer listed as an input (overridable)."""
    g = oh.make_graph(
        [oh.make_node("MatMul", ["X", "W"], ["XW"], name="matmul"),
         oh.make_node("Add", ["XW", "B"], ["XWB"], name="add"),
         oh.make_node("Relu", ["XWB"], ["Y"], name="relu")],
        "mlp_graph", [oh.make_tensor_value_info("X", TP.FLOAT, ["batch", 3])],
        [oh.make_tensor_value_info("Y", TP.FLOAT, ["batch", 4])],
        [onh.from_array(W, "W"), onh.from_array(B, "B")], doc_string="a small MLP graph")
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)], producer_name="ort-api-test",
                      producer_version="1.0", domain="ai.accelkit.test", model_version=7,
                      doc_string="Relu(X W + B)")
    oh.set_model_props(m, {"author": "accelkit", "purpose": "testing"})
    save(m, os.path.join(d, "mlp.onnx"))

    g = oh.make_graph(
        [oh.make_node("Conv", ["X", "CW", "CB"], ["C"], pads=[1, 1, 1, 1], name="conv"),
         oh.make_node("Relu", ["C"], ["R"], name="relu"),
         oh.make_node("GlobalAveragePool", ["R"], ["Y"], name="gap")],
        "conv_graph", [oh.make_tensor_value_info("X", TP.FLOAT, ["N", 2, 5, 5])],
        [oh.make_tensor_value_info("Y", TP.FLOAT, ["N", 4, 1, 1])],
        [onh.from_array(CONV_W, "CW"), onh.from_array(CONV_B, "CB")])
    save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)]), os.path.join(d, "conv.onnx"))

    g = oh.make_graph(
        [oh.make_node("Softmax", ["X"], ["P"], axis=-1),
         oh.make_node("ArgMax", ["X"], ["I"], axis=1, keepdims=0),
         oh.make_node("Reshape", ["X", "flat"], ["F"])],
        "multi_graph", [oh.make_tensor_value_info("X", TP.FLOAT, [2, 5])],
        [oh.make_tensor_value_info("P", TP.FLOAT, [2, 5]),
         oh.make_tensor_value_info("I", TP.INT64, [2]),
         oh.make_tensor_value_info("F", TP.FLOAT, [10])],
        [onh.from_array(np.array([10], np.int64), "flat")])
    save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)]), os.path.join(d, "multi.onnx"))

    g = oh.make_graph(
        [oh.make_node("Mul", ["X", "S"], ["Y"])], "scale_graph",
        [oh.make_tensor_value_info("X", TP.FLOAT, [2]), oh.make_tensor_value_info("S", TP.FLOAT, [2])],
        [oh.make_tensor_value_info("Y", TP.FLOAT, [2])],
        [onh.from_array(np.array([2, 3], np.float32), "S")])
    save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)]), os.path.join(d, "scale.onnx"))


def mlp_ref(x):
    return np.maximum(x @ W + B, 0)


# ---- the scripts, as written for onnxruntime --------------------------------------------
SCRIPTS = {}

SCRIPTS["load_and_run"] = '''
import numpy as np
import onnxruntime as ort

session = ort.InferenceSession("mlp.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
providers = session.get_providers()
input_name = session.get_inputs()[0].name
x = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
outputs = session.run(None, {input_name: x})
named = session.run([session.get_outputs()[0].name], {input_name: x})[0]
as_list = session.run(None, {input_name: [[0.5, -1.0, 2.0]]})[0]
'''

SCRIPTS["metadata"] = '''
import onnxruntime

sess = onnxruntime.InferenceSession("mlp.onnx", providers=["CPUExecutionProvider"])
inputs = [(i.name, i.shape, i.type) for i in sess.get_inputs()]
outputs = [(o.name, o.shape, o.type) for o in sess.get_outputs()]
meta = sess.get_modelmeta()
info = dict(producer=meta.producer_name, graph=meta.graph_name, domain=meta.domain,
            description=meta.description, version=meta.version,
            custom=meta.custom_metadata_map)
available = onnxruntime.get_available_providers()
device = onnxruntime.get_device()
version = onnxruntime.__version__
overridable = [i.name for i in onnxruntime.InferenceSession("scale.onnx").get_overridable_initializers()]
'''

SCRIPTS["ortvalue"] = '''
import numpy as np
import onnxruntime

X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [-1.0, 0.0, 1.0]], dtype=np.float32)
X_ortvalue = onnxruntime.OrtValue.ortvalue_from_numpy(X, "cpu", 0)
facts = (X_ortvalue.device_name(), X_ortvalue.shape(), X_ortvalue.data_type(),
         X_ortvalue.is_tensor(), np.array_equal(X_ortvalue.numpy(), X))
session = onnxruntime.InferenceSession("mlp.onnx", providers=["CPUExecutionProvider"])
results = session.run(["Y"], {"X": X_ortvalue})
ort_values = session.run_with_ort_values(["Y"], {"X": X_ortvalue})
from_ort_values = ort_values[0].numpy()
'''

SCRIPTS["iobinding_cpu"] = '''
import numpy as np
import onnxruntime

session = onnxruntime.InferenceSession("mlp.onnx", providers=["CPUExecutionProvider"])
X = np.ones((4, 3), dtype=np.float32)
io_binding = session.io_binding()
io_binding.bind_cpu_input("X", X)
io_binding.bind_output("Y")
session.run_with_iobinding(io_binding)
Y = io_binding.copy_outputs_to_cpu()[0]
Y_values = io_binding.get_outputs()
'''

SCRIPTS["iobinding_preallocated"] = '''
import numpy as np
import onnxruntime
from onnx import TensorProto

session = onnxruntime.InferenceSession("mlp.onnx", providers=["CPUExecutionProvider"])
X = np.array([[1.0, -2.0, 3.0], [0.5, 0.25, -4.0], [2.0, 2.0, 2.0]], dtype=np.float32)
X_ortvalue = onnxruntime.OrtValue.ortvalue_from_numpy(X, "cpu", 0)
Y_ortvalue = onnxruntime.OrtValue.ortvalue_from_shape_and_type([3, 4], np.float32, "cpu", 0)
io_binding = session.io_binding()
io_binding.bind_input(name="X", device_type=X_ortvalue.device_name(), device_id=0,
                      element_type=np.float32, shape=X_ortvalue.shape(),
                      buffer_ptr=X_ortvalue.data_ptr())
io_binding.bind_output(name="Y", device_type=Y_ortvalue.device_name(), device_id=0,
                       element_type=TensorProto.FLOAT, shape=Y_ortvalue.shape(),
                       buffer_ptr=Y_ortvalue.data_ptr())
session.run_with_iobinding(io_binding)
Y_from_value = Y_ortvalue.numpy()

# the same with OrtValues bound directly, and a NumPy buffer as the output
Y_numpy = np.empty((3, 4), dtype=np.float32)
io_binding = session.io_binding()
io_binding.bind_ortvalue_input("X", X_ortvalue)
io_binding.bind_output("Y", "cpu", 0, np.float32, Y_numpy.shape, Y_numpy.ctypes.data)
session.run_with_iobinding(io_binding)
bound_values = io_binding.get_outputs()
'''

SCRIPTS["iobinding_multi"] = '''
import numpy as np
import onnxruntime

session = onnxruntime.InferenceSession("multi.onnx", providers=["CPUExecutionProvider"])
X = np.array([[1, 5, 2, 0, 3], [9, 1, 1, 1, 2]], dtype=np.float32)
P = np.empty((2, 5), np.float32)
F = np.empty(10, np.float32)
io_binding = session.io_binding()
io_binding.bind_cpu_input("X", X)
io_binding.bind_ortvalue_output("P", onnxruntime.OrtValue.ortvalue_from_numpy(P))
io_binding.bind_output("I")
io_binding.bind_output("F", "cpu", 0, np.float32, [10], F.ctypes.data)
session.run_with_iobinding(io_binding)
outs = io_binding.copy_outputs_to_cpu()
'''

SCRIPTS["session_options"] = '''
import numpy as np
import onnxruntime as rt

so = rt.SessionOptions()
so.intra_op_num_threads = 1
so.inter_op_num_threads = 1
so.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
so.log_severity_level = 3
so.add_session_config_entry("session.load_model_format", "ONNX")
entry = so.get_session_config_entry("session.load_model_format")
sess = rt.InferenceSession("conv.onnx", sess_options=so, providers=["CPUExecutionProvider"])
same_options = sess.get_session_options() is so
x = np.linspace(-1, 1, 2 * 2 * 5 * 5, dtype=np.float32).reshape(2, 2, 5, 5)
y_extended = sess.run(None, {"X": x})[0]
so_off = rt.SessionOptions()
so_off.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
y_disabled = rt.InferenceSession("conv.onnx", so_off).run(None, {"X": x})[0]
scale = rt.InferenceSession("scale.onnx", so_off)
overridden = scale.run(None, {"X": np.array([1, 1], np.float32),
                              "S": np.array([5, 7], np.float32)})[0]
default = scale.run(None, {"X": np.array([1, 1], np.float32)})[0]
'''

SCRIPTS["run_options"] = '''
import numpy as np
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import Fail

sess = ort.InferenceSession("mlp.onnx", providers=["CPUExecutionProvider"])
ro = ort.RunOptions()
ro.log_severity_level = 2
ro.run_tag = "batch-1"
ro.logid = "run"
y = sess.run(None, {"X": np.zeros((1, 3), np.float32)}, ro)[0]
ro.terminate = True
try:
    sess.run(None, {"X": np.zeros((1, 3), np.float32)}, ro)
    terminated = False
except Fail as e:
    terminated = "terminate" in str(e)
'''

SCRIPTS["profiling"] = '''
import json
import numpy as np
import onnxruntime as ort

options = ort.SessionOptions()
options.enable_profiling = True
options.profile_file_prefix = "mlp_profile"
sess = ort.InferenceSession("mlp.onnx", options, providers=["CPUExecutionProvider"])
for _ in range(3):
    sess.run(None, {"X": np.ones((2, 3), np.float32)})
prof_file = sess.end_profiling()
with open(prof_file) as f:
    events = json.load(f)
runs = [e for e in events if e["name"] == "model_run"]
node_ops = sorted({e["args"]["op_name"] for e in events if e["cat"] == "Node"})
not_profiling = ort.InferenceSession("mlp.onnx").end_profiling()
'''

SCRIPTS["from_bytes"] = '''
import numpy as np
import onnxruntime as ort

with open("mlp.onnx", "rb") as f:
    model_bytes = f.read()
sess = ort.InferenceSession(model_bytes, providers=["AccelkitExecutionProvider"])
providers = sess.get_providers()
provider_options = sess.get_provider_options()
y = sess.run(None, {"X": np.full((1, 3), 0.5, np.float32)})[0]
'''

SCRIPTS["errors"] = '''
import numpy as np
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import (InvalidArgument, InvalidGraph,
                                                         InvalidProtobuf, NoSuchFile,
                                                         NotImplemented)

caught = {}
sess = ort.InferenceSession("mlp.onnx", providers=["CPUExecutionProvider"])
def attempt(key, exc, fn):
    try:
        fn()
    except exc as e:
        caught[key] = str(e)
attempt("rank", InvalidArgument, lambda: sess.run(None, {"X": np.zeros((2, 3, 1), np.float32)}))
attempt("dims", InvalidArgument, lambda: sess.run(None, {"X": np.zeros((2, 5), np.float32)}))
attempt("dtype", InvalidArgument, lambda: sess.run(None, {"X": np.zeros((2, 3), np.float64)}))
attempt("name", InvalidArgument, lambda: sess.run(None, {"X": np.zeros((1, 3), np.float32),
                                                          "Z": np.zeros(1, np.float32)}))
attempt("output", InvalidArgument, lambda: sess.run(["nope"], {"X": np.zeros((1, 3), np.float32)}))
attempt("missing", ValueError, lambda: sess.run(None, {}))
attempt("nofile", NoSuchFile, lambda: ort.InferenceSession("missing.onnx"))
attempt("protobuf", InvalidProtobuf, lambda: ort.InferenceSession(b"\\x0a\\xff\\xff"))
attempt("provider", ValueError, lambda: ort.InferenceSession("mlp.onnx", providers=["NoSuchExecutionProvider"]))
so = ort.SessionOptions()
so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
attempt("parallel", NotImplemented, lambda: ort.InferenceSession("mlp.onnx", so))
so = ort.SessionOptions()
so.add_session_config_entry("session.disable_prepacking", "1")
attempt("config", NotImplemented, lambda: ort.InferenceSession("mlp.onnx", so))
attempt("device", InvalidArgument, lambda: ort.OrtValue.ortvalue_from_numpy(np.zeros(2), "cuda", 0))
'''

# import lines an onnxruntime script may have -> accelkit's
IMPORTS = [(re.compile(r"^import onnxruntime as (\w+)$"), r"import accelkit.onnxruntime as \1"),
           (re.compile(r"^import onnxruntime$"), "import accelkit.onnxruntime as onnxruntime"),
           (re.compile(r"^from onnxruntime(\.[\w.]+)? import"), r"from accelkit.onnxruntime\1 import")]


def port(script):
    """The script with its onnxruntime imports pointed at accelkit, and nothing else."""
    out, changed = [], 0
    for line in script.splitlines():
        new = line
        for pattern, repl in IMPORTS:
            new = pattern.sub(repl, new)
        changed += new != line
        out.append(new)
    assert changed >= 1, "the script imports no onnxruntime"
    return "\n".join(out) + "\n"


class TestOrtScripts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ak_ort_api_")
        build_models(cls.dir)
        cls.cwd = os.getcwd()
        os.chdir(cls.dir)

    @classmethod
    def tearDownClass(cls):
        os.chdir(cls.cwd)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def script(self, name):
        """Runs SCRIPTS[name] ported; returns its globals."""
        ported = port(SCRIPTS[name])
        diff = [(a, b) for a, b in zip(SCRIPTS[name].strip().splitlines(),
                                       ported.strip().splitlines()) if a != b]
        self.assertTrue(all("onnxruntime" in a and "import" in a for a, _ in diff), diff)
        scope = {"__name__": f"ort_script_{name}"}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(ported, f"<{name}>", "exec"), scope)
        scope["_warnings"] = [str(w.message) for w in caught]
        return scope

    def test_load_and_run(self):
        g = self.script("load_and_run")
        self.assertEqual(g["providers"], ["CPUExecutionProvider"])
        self.assertTrue(any("CUDAExecutionProvider" in w and "not in available provider names"
                            in w for w in g["_warnings"]), g["_warnings"])
        np.testing.assert_allclose(g["outputs"][0], mlp_ref(g["x"]), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(g["named"], g["outputs"][0])
        np.testing.assert_allclose(g["as_list"], mlp_ref(np.array([[0.5, -1, 2]], np.float32)),
                                   rtol=1e-6, atol=1e-6)

    def test_metadata(self):
        g = self.script("metadata")
        self.assertEqual(g["inputs"], [("X", ["batch", 3], "tensor(float)")])
        self.assertEqual(g["outputs"], [("Y", ["batch", 4], "tensor(float)")])
        self.assertEqual(g["info"], dict(producer="ort-api-test", graph="mlp_graph",
                                         domain="ai.accelkit.test", description="Relu(X W + B)",
                                         version=7,
                                         custom={"author": "accelkit", "purpose": "testing"}))
        self.assertEqual(g["available"], ["AccelkitExecutionProvider", "CPUExecutionProvider"])
        self.assertEqual(g["device"], "CPU")
        self.assertRegex(g["version"], r"^\d+\.\d+\.\d+$")
        self.assertEqual(g["overridable"], ["S"])

    def test_ortvalue(self):
        g = self.script("ortvalue")
        self.assertEqual(g["facts"], ("cpu", [3, 3], "tensor(float)", True, True))
        np.testing.assert_allclose(g["results"][0], mlp_ref(g["X"]), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(g["from_ort_values"], g["results"][0])

    def test_iobinding_engine_allocated(self):
        g = self.script("iobinding_cpu")
        np.testing.assert_allclose(g["Y"], mlp_ref(g["X"]), rtol=1e-6, atol=1e-6)
        self.assertEqual(g["Y_values"][0].shape(), [4, 4])
        np.testing.assert_array_equal(g["Y_values"][0].numpy(), g["Y"])

    def test_iobinding_preallocated(self):
        g = self.script("iobinding_preallocated")
        want = mlp_ref(g["X"])
        np.testing.assert_allclose(g["Y_from_value"], want, rtol=1e-6, atol=1e-6)
        # written straight into the caller's NumPy buffer
        np.testing.assert_allclose(g["Y_numpy"], want, rtol=1e-6, atol=1e-6)
        self.assertEqual(g["bound_values"][0].data_ptr(), g["Y_numpy"].ctypes.data)

    def test_iobinding_mixed_outputs(self):
        g = self.script("iobinding_multi")
        x = g["X"]
        e = np.exp(x - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(g["P"], e / e.sum(axis=1, keepdims=True), rtol=1e-6)
        np.testing.assert_array_equal(g["F"], x.reshape(10))  # a view of X: copied in
        p, i, f = g["outs"]
        np.testing.assert_array_equal(p, g["P"])
        self.assertEqual(i.dtype, np.int64)
        np.testing.assert_array_equal(i, [1, 0])
        np.testing.assert_array_equal(f, g["F"])

    def test_session_options(self):
        g = self.script("session_options")
        self.assertEqual(g["entry"], "ONNX")
        self.assertTrue(g["same_options"])
        np.testing.assert_allclose(g["y_extended"], g["y_disabled"], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(g["overridden"], [5, 7])
        np.testing.assert_array_equal(g["default"], [2, 3])

    def test_run_options(self):
        g = self.script("run_options")
        np.testing.assert_allclose(g["y"], mlp_ref(np.zeros((1, 3), np.float32)), atol=1e-7)
        self.assertTrue(g["terminated"])

    def test_profiling(self):
        g = self.script("profiling")
        self.assertTrue(g["prof_file"].startswith("mlp_profile_"))
        self.assertEqual(len(g["runs"]), 3)
        self.assertTrue(g["node_ops"], "no node events")
        for e in g["events"]:
            self.assertEqual(e["ph"], "X")
            self.assertGreaterEqual(e["dur"], 0)
        self.assertEqual(g["not_profiling"], "")

    def test_from_bytes(self):
        g = self.script("from_bytes")
        self.assertEqual(g["providers"], ["AccelkitExecutionProvider", "CPUExecutionProvider"])
        self.assertEqual(g["provider_options"], {"AccelkitExecutionProvider": {},
                                                 "CPUExecutionProvider": {}})
        np.testing.assert_allclose(g["y"], mlp_ref(np.full((1, 3), 0.5, np.float32)), atol=1e-6)

    def test_errors(self):
        c = self.script("errors")["caught"]
        self.assertEqual(set(c), {"rank", "dims", "dtype", "name", "output", "missing", "nofile",
                                  "protobuf", "provider", "parallel", "config",
                                  "device"})
        self.assertIn("Invalid rank for input: X Got: 3 Expected: 2", c["rank"])
        self.assertIn("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT", c["rank"])
        self.assertIn("index: 1 Got: 5 Expected: 3", c["dims"])
        self.assertIn("Actual: (tensor(double)) , expected: (tensor(float))", c["dtype"])
        self.assertIn("Invalid input name: Z", c["name"])
        self.assertIn("Invalid Output Name:nope", c["output"])
        self.assertIn("Required inputs (['X']) are missing", c["missing"])
        self.assertIn("NO_SUCHFILE", c["nofile"])
        self.assertIn("INVALID_PROTOBUF", c["protobuf"])
        self.assertIn("Unknown Provider Type: NoSuchExecutionProvider", c["provider"])
        self.assertIn("ORT_PARALLEL", c["parallel"])
        self.assertIn("session.disable_prepacking", c["config"])

    def test_unsupported_operator_is_not_implemented(self):
        g = oh.make_graph([oh.make_node("NoSuchOp", ["X"], ["Y"], domain="com.example")], "u",
                          [oh.make_tensor_value_info("X", TP.FLOAT, [4])],
                          [oh.make_tensor_value_info("Y", TP.FLOAT, [4])])
        m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13),
                                            oh.make_opsetid("com.example", 1)])
        m.ir_version = 8
        onnx.save(m, "unknown_op.onnx")
        with self.assertRaises(akort.NotImplemented) as cm:
            akort.InferenceSession("unknown_op.onnx")
        self.assertIn("NoSuchOp", str(cm.exception))
        self.assertIn("NOT_IMPLEMENTED", str(cm.exception))

    def test_threads_share_a_session(self):
        """onnxruntime lets threads call run on one session: each gets its own result."""
        import threading
        sess = akort.InferenceSession("conv.onnx")
        xs = [RNG.standard_normal((2, 2, 5, 5)).astype(np.float32) for _ in range(4)]
        want = [sess.run(None, {"X": x})[0] for x in xs]
        bad = []

        def worker(k):
            for _ in range(40):
                if not np.array_equal(sess.run(None, {"X": xs[k]})[0], want[k]):
                    bad.append(k)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(bad, [])

    def test_optimized_model_filepath(self):
        """SessionOptions.optimized_model_filepath writes the graph the session runs: at the
        basic level a standard ONNX file (onnx.checker), which reloads with equal outputs."""
        import onnx
        so = akort.SessionOptions()
        so.graph_optimization_level = akort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = "mlp-basic.onnx"
        first = akort.InferenceSession("mlp.onnx", so)
        onnx.checker.check_model(onnx.load("mlp-basic.onnx"))
        again = akort.InferenceSession("mlp-basic.onnx")
        x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_allclose(again.run(None, {"X": x})[0], first.run(None, {"X": x})[0],
                                   rtol=1e-6, atol=1e-6)

    def test_compatible_accelkit_entry(self):
        """accelkit.InferenceSession is the same class, with accelkit's keywords."""
        import accelkit
        s = accelkit.InferenceSession("mlp.onnx", threads=1, optimize=False)
        self.assertIsInstance(s, akort.InferenceSession)
        x = np.ones((2, 3), np.float32)
        np.testing.assert_allclose(s.run(None, {"X": x})[0], mlp_ref(x), rtol=1e-6, atol=1e-6)
        with self.assertRaises(TypeError):
            accelkit.InferenceSession("mlp.onnx", thread=1)


class TestAgainstOnnxRuntime(OrtCase):
    """The same models and inputs through accelkit.onnxruntime and ONNX Runtime 1.30."""

    TMP_PREFIX = "ak_ort_ref_"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        build_models(cls.tmp)

    def compare(self, name, feeds):
        path = os.path.join(self.tmp, name)
        got = akort.InferenceSession(path, providers=["AccelkitExecutionProvider"]).run(None, feeds)
        # the preallocated-output path must agree too
        sess = akort.InferenceSession(path)
        binding = sess.io_binding()
        for k, v in feeds.items():
            binding.bind_cpu_input(k, v)
        buffers = [np.empty(w.shape, w.dtype) for w in got]
        for o, buf in zip(sess.get_outputs(), buffers):
            binding.bind_ortvalue_output(o.name, akort.OrtValue.ortvalue_from_numpy(buf))
        sess.run_with_iobinding(binding)
        want = self.ort(path, feeds)
        self.assertEqual(len(got), len(want))
        for g, b, w in zip(got, buffers, want):
            self.assertEqual(g.shape, w.shape, name)
            self.assertEqual(g.dtype, w.dtype, name)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
            np.testing.assert_array_equal(b, g, err_msg=name)

    def test_models(self):
        self.compare("mlp.onnx", {"X": RNG.standard_normal((5, 3)).astype(np.float32)})
        self.compare("conv.onnx", {"X": RNG.standard_normal((3, 2, 5, 5)).astype(np.float32)})
        self.compare("multi.onnx", {"X": RNG.standard_normal((2, 5)).astype(np.float32)})


if __name__ == "__main__":
    unittest.main()
