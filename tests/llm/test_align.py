"""`ak align` end to end: real runs of the command on small random models (made by
scripts/llm-make-model into <build>/llm-oracle/, shared with test_llamacpp_oracle.py),
against llama.cpp (GGUF) and the PyTorch reference (Hugging Face folder), with asserts on
its JSON and its table; and its refusals.

Run: AK_BIN=build/ak python3 -m unittest -v tests/llm/test_align.py (ctest llm/test_align).
"""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import test_llamacpp_oracle as oracle  # noqa: E402  (AK_BIN, the model cache, ak())

AK = oracle.AK_BIN
GGUF_ARGS = f"--arch llama {oracle.SHAPE} --seed 31 --vocab llama2 --type f32"
HF_ARGS = "--arch qwen2 --dim 64 --layers 3 --heads 4 --kv-heads 2 --ffn 128 --seed 32 " \
          "--vocab gpt2 --format hf --shards 2"


def align(*args, check=True):
    r = subprocess.run([AK, "align", *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"ak align {' '.join(map(str, args))} failed ({r.returncode}):\n"
                             f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r


def setUpModule():
    global GGUF, HF
    GGUF = oracle.cached_model(GGUF_ARGS, "align-llama-f32")
    HF = oracle.cached_model(HF_ARGS, "align-qwen2-hf", suffix="")


class TestAlignLlamaCpp(unittest.TestCase):
    def test_f32_gguf_aligns_with_llama_cpp(self):
        r = json.loads(align(GGUF, "-n", 12, "--json", "-t", 1).stdout)
        self.assertIn("llama.cpp", r["reference"])
        self.assertTrue(r["tokenization_identical"])
        self.assertEqual(r["ids"][0], 1)  # the llama2 vocabulary adds BOS
        lg = r["logits"]
        self.assertEqual(len(lg["rows"]), len(r["ids"]))
        print(f"\n  f32 GGUF vs llama.cpp: max rel {lg['max_rel']:.1e}", end="")
        self.assertLess(lg["max_rel"], 1e-5)
        self.assertEqual(lg["top1_agreement"], 1.0)
        self.assertEqual(len(r["greedy"]["accelkit"]), 12)
        self.assertIsNone(r["greedy"]["first_divergence"])
        self.assertEqual(r["greedy"]["accelkit"], r["greedy"]["reference"])

    def test_llama_cpp_f16_cache_shows_in_the_error(self):
        """The tool measures: llama.cpp's f16 KV cache and flash attention (--kv f16) make
        the error visible, orders of magnitude above the f32 run's."""
        exact = json.loads(align(GGUF, "--ids", "1 450 4996 17354 1701", "-n", 0, "--json",
                                 "-t", 1).stdout)
        rounded = json.loads(align(GGUF, "--ids", "1 450 4996 17354 1701", "-n", 0,
                                   "--kv", "f16", "--json", "-t", 1).stdout)
        self.assertNotIn("greedy", exact)
        self.assertEqual(exact["ids"], [1, 450, 4996, 17354, 1701])
        print(f"\n  --kv f32 {exact['logits']['max_rel']:.1e}, --kv f16 "
              f"{rounded['logits']['max_rel']:.1e}", end="")
        self.assertGreater(rounded["logits"]["max_rel"], 10 * exact["logits"]["max_rel"])
        self.assertGreater(rounded["logits"]["max_rel"], 1e-5)

    def test_table(self):
        out = align(GGUF, "-p", "Hello world", "-n", 4, "-t", 1).stdout
        self.assertIn("reference: llama.cpp (libllama), f32 KV cache, no flash attention", out)
        self.assertIn("prompt:    'Hello world'", out)
        self.assertIn("tokenization: identical", out)
        self.assertRegex(out, r"final logits: max abs \S+, max rel \S+ \(position \d+\); "
                              r"top-1 agreement 3/3 \(100%\)")
        self.assertIn("greedy 4 tokens: identical", out)
        self.assertRegex(out, r"\n +0 '<s>' +\S+ +\S+  ")


class TestAlignTorch(unittest.TestCase):
    def test_hf_folder_per_layer(self):
        r = json.loads(align(HF, "--layers", "-n", 4, "--json", "-t", 1).stdout)
        self.assertIn("PyTorch", r["reference"])
        print(f"\n  HF f32 vs torch: max rel {r['logits']['max_rel']:.1e}", end="")
        self.assertLess(r["logits"]["max_rel"], 1e-5)
        self.assertIsNone(r["greedy"]["first_divergence"])
        self.assertEqual([x["layer"] for x in r["layers"]], [1, 2, 3])
        for layer in r["layers"]:
            self.assertLess(layer["max_rel"], 1e-5, layer)
        # the last lens is the model's own output
        self.assertAlmostEqual(r["layers"][-1]["max_abs"], r["logits"]["max_abs"], places=6)

    def test_layer_logits_mode(self):
        """--layer-logits L: the model's layer count gives `ak logits`; fewer layers give
        other logits."""
        ids = "5 6 7 8"
        with tempfile.TemporaryDirectory() as d:
            full, lens, plain = (Path(d) / n for n in ("full.npy", "lens.npy", "plain.npy"))
            align(HF, "--layer-logits", 3, "--ids", ids, "--out", full, "-t", 1)
            align(HF, "--layer-logits", 1, "--ids", ids, "--out", lens, "-t", 1)
            oracle.ak("logits", "-m", HF, "--ids", ids, "--out", plain, "-t", 1)
            np.testing.assert_array_equal(np.load(full), np.load(plain))
            self.assertGreater(np.abs(np.load(lens) - np.load(plain)).max(), 0.1)
            r = align(HF, "--layer-logits", 4, "--ids", ids, "--out", lens, check=False)
            self.assertEqual(r.returncode, 2)
            self.assertIn("layers 1..3", r.stderr)


class TestAlignRefuses(unittest.TestCase):
    def refused(self, args, text, env=None):
        r = subprocess.run([AK, "align", *map(str, args)], capture_output=True, text=True,
                           env=env)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(text, r.stderr)

    def test_refusals(self):
        self.refused([HF, "--ref", "llamacpp"], "llama.cpp reads GGUF files")
        self.refused([GGUF, "--ref", "torch"], "--ref torch reads Hugging Face folders")
        self.refused([GGUF, "--layers"], "--layers needs --ref torch")
        self.refused([GGUF, "--ref", "onnx"], "--ref")
        self.refused([GGUF, "--prompt", "a", "--ids", "1"], "exclude each other")
        self.refused([], "one MODEL expected")
        self.refused(["/nonexistent.gguf"], "no model at /nonexistent.gguf")
        import os
        env = dict(os.environ, AK_LLAMACPP_LIB="/nonexistent")
        self.refused([GGUF, "-n", 1], "scripts/setup", env=env)

    def test_help_lists_the_flags(self):
        out = subprocess.run([AK, "align", "--help"], capture_output=True, text=True).stdout
        for flag in ("--ref", "--prompt", "--ids", "-n", "--json", "--layers", "--kv", "--dtype",
                     "--threads", "--layer-logits", "--out"):
            self.assertRegex(out, rf"(^| ){flag}([ ,]|$)", flag)
        self.assertIn("usage: ak align MODEL [options]", out)


if __name__ == "__main__":
    unittest.main()
