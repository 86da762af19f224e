"""A unittest base for the Python tests that check accelkit against ONNX Runtime
(onnxruntime-node 1.30 from node_modules/, run by ort_run.js with .npy inputs and outputs):
setUpClass finds node and the package (a missing one is a failure naming scripts/setup) and
makes a temporary folder; save() writes a model there; ort() runs it in ONNX Runtime;
refused() checks that accelkit refuses one by name."""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import onnx  # Debian python3-onnx

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_MODULES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "node_modules")


class OrtCase(unittest.TestCase):
    TMP_PREFIX = "ak-ort-"

    @classmethod
    def setUpClass(cls):
        cls.node = shutil.which("node")
        if not cls.node:
            raise AssertionError("node (Node.js) not found: run scripts/setup")
        if not os.path.isdir(os.path.join(NODE_MODULES, "onnxruntime-node")):
            raise AssertionError("onnxruntime-node is not in node_modules/: run scripts/setup "
                                 "(npm onnxruntime-node@1.30.0)")
        cls.tmp = tempfile.mkdtemp(prefix=cls.TMP_PREFIX)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def save(self, m, name):
        path = os.path.join(self.tmp, name + ".onnx")
        onnx.save(m, path)
        return path

    def ort(self, path, feeds):
        """ONNX Runtime's outputs of the model at path for feeds {name: array}, in order."""
        inp, out = path + ".in", path + ".out"
        os.makedirs(inp, exist_ok=True)
        for k, v in feeds.items():
            np.save(os.path.join(inp, k + ".npy"), np.ascontiguousarray(v))
        env = dict(os.environ, NODE_PATH=NODE_MODULES)
        subprocess.run([self.node, os.path.join(HERE, "ort_run.js"), path, inp, out],
                       check=True, env=env, timeout=60)
        names = [o.name for o in onnx.load(path).graph.output]
        return [np.load(os.path.join(out, n + ".npy")) for n in names]

    def refused(self, m, name, feeds, words):
        """accelkit refuses the model (at session creation or its run) with a message that
        holds every one of words."""
        from accelkit.inference import InferenceSession  # the tests put python/ on the path
        path = self.save(m, name)
        with self.assertRaises(Exception) as cm:
            InferenceSession(path).run(None, feeds)
        for w in words:
            self.assertIn(w, str(cm.exception), name)
