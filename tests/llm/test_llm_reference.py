"""Precision alignment of the LLM engine: the `ak` binary against the NumPy
reference (llama_ref.py) on random-weight models made by scripts/llm-make-model.

- Without the engine: the file formats round-trip, the reference agrees with an
  independent PyTorch formulation, and a GGUF file and a Hugging Face folder of the same
  weights give the same reference logits (the q/k permutation and RoPE layouts match).
- With AK_BIN (set by ctest): `ak logits` f32 max relative error ≤ 1e-4 per row,
  `ak generate --temp 0` gives the reference's 64 greedy ids, on GGUF and HF inputs;
  f16/bf16/q8_0/q4_0 errors are printed and held to loose bounds.

Run: AK_BIN=build/ak python3 -m unittest -v tests/llm/test_llm_reference.py
"""
import concurrent.futures
import copy
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import llama_ref as ref  # noqa: E402
from llama_ref import llm_files as lf  # noqa: E402

MAKE = ROOT / "scripts" / "llm-make-model"
AK_BIN = os.environ.get("AK_BIN")
# where the generator keeps the vocabularies `ak convert` made from the npm tokenizers:
# beside the ak it uses ($AK_BIN, else build/ak)
VOCAB_DIR = Path(AK_BIN or ROOT / "build" / "ak").resolve().parent / "llm-vocab"

LLAMA = "--arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 176 --seed 1"
QWEN2 = "--arch qwen2 --dim 96 --layers 3 --heads 4 --kv-heads 2 --ffn 256 --seed 2 --tied"
QUANT = "--arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 192 --seed 4"
# llama3 bands at wavelengths 16..64 so that positions < 100 feel the scaling
MODELS = {
    "llama": f"{LLAMA} --vocab gpt2",
    "qwen2": f"{QWEN2} --vocab gpt2",
    "llama3": f"{LLAMA} --vocab gpt2 --rope-scaling llama3:8:1:4:64 --ctx 4096",
    "linear": f"{LLAMA} --vocab gpt2 --rope-scaling linear:4 --rope-theta 500000",
    "spm": "--arch llama --dim 64 --layers 2 --heads 4 --kv-heads 4 --ffn 160 --seed 3",
}
# the architectures beyond Llama, each at the generator's default shape for it (a sliding
# window of 8 < the prompts; Gemma 3: six layers, so one is global; its global layers
# with linear RoPE scaling, which the sliding ones do not get)
ARCHS = ["mistral", "granite", "qwen3", "gemma2", "gemma3", "mixtral", "qwen2moe", "qwen3moe",
         "olmo2", "phi3", "starcoder2"]
MODELS.update({arch: f"--arch {arch} --vocab gpt2 --seed 5" for arch in ARCHS})
# seed 8: no greedy step of Gemma 3's within f32 rounding of a tie (seed 5 has one)
MODELS["gemma3"] = MODELS["gemma3"].replace("--seed 5", "--seed 8") + " --rope-scaling linear:4"
# Phi-3 with longrope: factors applied within the original 512 positions (llama.cpp's
# default context is 512, so it picks the short factors too), cos/sin × 1.29
MODELS["phi3"] += " --rope-scaling longrope:512 --ctx 32768"
HF_TWINS = ["llama", "qwen2", "llama3", "linear", *ARCHS]  # same weights, 2-shard HF folder
TORCH_TWINS = ["llama", "qwen2", "llama3", "linear"]  # what torch_logits formulates
# float64 rounding only; GGUF keeps llama3's frequency factors and Granite's scales as f32
TWIN_TOL = {"llama": 1e-10, "qwen2": 1e-10, "linear": 1e-10, "llama3": 1e-7,
            "mistral": 1e-10, "granite": 1e-7, "qwen3": 1e-10, "gemma2": 1e-10,
            "gemma3": 1e-10, "mixtral": 1e-10, "qwen2moe": 1e-10, "qwen3moe": 1e-10,
            "olmo2": 1e-10, "phi3": 1e-7, "starcoder2": 1e-10}
QTYPES = ["f32", "f16", "bf16", "q8_0", "q4_0"]

PROMPT_LOGITS = [int(t) for t in np.random.default_rng(7).integers(3, 30000, size=37)]
PROMPT_GEN = PROMPT_LOGITS[:21]

_tmp = None
PATHS = {}


def _make(args, out):
    cmd = [sys.executable, str(MAKE), *args.split(), "--out", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def setUpModule():
    """Builds every model once, two generator processes at a time; a generator that
    fails (no vocabulary, say) fails the module, with its message."""
    global _tmp
    _tmp = tempfile.TemporaryDirectory(prefix="ak-llm-ref-")
    d = Path(_tmp.name)
    jobs = {name: (args, d / f"{name}.gguf") for name, args in MODELS.items()}
    jobs.update({f"{n}-hf": (MODELS[n] + " --format hf --shards 2", d / f"{n}-hf")
                 for n in HF_TWINS})
    jobs.update({f"q-{t}": (f"{QUANT} --type {t}", d / f"q-{t}.gguf") for t in QTYPES})
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(_make, a, p) for a, p in jobs.values()]:
            f.result()
    PATHS.update({name: p for name, (_, p) in jobs.items()})


def tearDownModule():
    if _tmp is not None:
        _tmp.cleanup()


_models = {}


def model(name):
    if name not in _models:
        _models[name] = ref.load(PATHS[name])
    return _models[name]


# ---- an independent formulation in PyTorch (Hugging Face's layout and conventions) ------

def torch_logits(folder, ids):
    """Logits from the HF folder written the way transformers' Llama/Qwen2 modules
    compute them: rotate_half RoPE with cos/sin of cat(freqs, freqs), repeat_kv, an
    additive causal mask. Shares no code with llama_ref."""
    import torch
    cfg = json.loads((Path(folder) / "config.json").read_text())
    w = {k: torch.from_numpy(v) for k, v in lf.read_hf_tensors(folder, np.float64).items()}
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    hd, eps, T = D // H, cfg["rms_norm_eps"], len(ids)

    def norm(x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    inv_freq = 1.0 / cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    pos = torch.arange(T, dtype=torch.float64)
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type") == "linear":
        pos = pos / rs["factor"]
    elif rs.get("rope_type") == "llama3":
        inv_freq = _torch_llama3(inv_freq, rs)
    emb = torch.cat([torch.outer(pos, inv_freq)] * 2, dim=-1)
    cos, sin = emb.cos()[None], emb.sin()[None]  # [1, T, hd]

    def rotate_half(x):
        return torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], dim=-1)

    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."

        def proj(name, h):
            y = h @ w[p + f"self_attn.{name}_proj.weight"].T
            b = w.get(p + f"self_attn.{name}_proj.bias")
            return y if b is None else y + b

        h = norm(x, w[p + "input_layernorm.weight"])
        q = proj("q", h).view(T, H, hd).transpose(0, 1)
        k = proj("k", h).view(T, KV, hd).transpose(0, 1)
        v = proj("v", h).view(T, KV, hd).transpose(0, 1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        att = torch.softmax(q @ k.transpose(1, 2) / hd ** 0.5 + mask, dim=-1) @ v
        x = x + att.transpose(0, 1).reshape(T, D) @ w[p + "self_attn.o_proj.weight"].T
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        gate = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T)
        x = x + (gate * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    out = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return (norm(x, w["model.norm.weight"]) @ out.T).numpy()


def _torch_llama3(inv_freq, rs):
    """transformers' form: low frequencies divided by factor, a smooth blend between."""
    import math
    import torch
    orig = rs["original_max_position_embeddings"]
    lo, hi, factor = rs["low_freq_factor"], rs["high_freq_factor"], rs["factor"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > orig / lo, inv_freq / factor, inv_freq)
    smooth = (orig / wavelen - lo) / (hi - lo)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= orig / hi) & (wavelen <= orig / lo)
    return torch.where(medium, blended, scaled)


# ---- the file formats -----------------------------------------------------------------------

class TestFiles(unittest.TestCase):
    def test_q8_0_block_by_hand(self):
        x = np.zeros(32, np.float32)
        x[:5] = [127, 2.5, -2.5, 0.5, -126.4]  # amax 127 → d = 1; ties round away from 0
        raw = lf.quantize_q8_0(x)
        self.assertEqual(len(raw), 34)
        self.assertEqual(np.frombuffer(raw[:2], "<f2")[0], 1.0)
        self.assertEqual(list(np.frombuffer(raw[2:7], np.int8)), [127, 3, -3, 1, -126])
        y = np.arange(32, dtype=np.float32) - 10.5  # amax 20.5 → d = 20.5/127
        q = np.frombuffer(lf.quantize_q8_0(y)[2:], np.int8)
        self.assertEqual((q[0], q[10], q[31]), (-65, -3, 127))  # -65.05, -3.10, 127
        back = lf.decode_tensor(lf.quantize_q8_0(y), lf.Q8_0, (32,))
        self.assertLess(np.abs(back - y).max(), 20.5 / 127 * 0.51)

    def test_q4_0_block_by_hand(self):
        x = np.linspace(-1.0, 3.0, 32, dtype=np.float32)  # max by magnitude: +3 → d = -3/8
        raw = lf.quantize_q4_0(x)
        self.assertEqual(len(raw), 18)
        self.assertEqual(np.frombuffer(raw[:2], "<f2")[0], np.float16(-0.375))
        qs = np.frombuffer(raw[2:], np.uint8)
        self.assertEqual(qs[0] & 15, 11)  # -1/-0.375 + 8.5 = 11.17 → 11
        self.assertEqual(qs[15] >> 4, 0)  # x[31] = 3 → 3/-0.375 + 8.5 = 0.5 → 0
        back = lf.decode_tensor(raw, lf.Q4_0, (32,))
        self.assertLess(np.abs(back - x).max(), 0.375 * 0.51 + 1e-6)
        # all zero: d = 0/−8 = −0.0 (as ggml computes it), every nibble 8
        self.assertEqual(lf.quantize_q4_0(np.zeros(32)), b"\x00\x80" + b"\x88" * 16)
        self.assertTrue(np.all(lf.decode_tensor(lf.quantize_q4_0(np.zeros(32)), lf.Q4_0,
                                                (32,)) == 0))

    def test_bf16_rounds_to_nearest_even(self):
        x = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf], dtype=np.float32)
        bits = lf.f32_to_bf16_bits(x)
        # 1 + 2^-8 is a tie → even (1.0); 1 + 3·2^-8 is a tie → even (1 + 2^-6)
        self.assertEqual(list(lf.bf16_bits_to_f32(bits)), [1.0, 1.0, 1.015625, -2.5, np.inf])
        self.assertTrue(np.isnan(lf.bf16_bits_to_f32(lf.f32_to_bf16_bits(np.float32("nan")))))

    def test_gguf_round_trip(self):
        rng = np.random.default_rng(0)
        x = rng.standard_normal((3, 64)).astype(np.float32)
        md = {"general.architecture": "llama", "a.u8": lf.Value(lf.UINT8, 200),
              "a.i64": lf.Value(lf.INT64, -5), "a.f64": lf.Value(lf.FLOAT64, 0.1),
              "a.flag": True, "a.list": lf.strings(["x", "", "\u2581é"]),
              "a.ints": lf.Value(lf.ARRAY, np.array([1, -2], np.int32), lf.INT32),
              "general.alignment": lf.u32(64)}
        tensors = [lf.GGUFTensorOut(f"t.{n}", lf.GGML_NAMES[n], x.shape,
                                    lf.encode_tensor(x, lf.GGML_NAMES[n])) for n in QTYPES]
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "t.gguf"
            lf.write_gguf(path, md, tensors)
            with lf.GGUFFile(path) as g:
                self.assertEqual((g.version, g.alignment), (3, 64))
                self.assertEqual(g.get("a.u8"), 200)
                self.assertEqual(g.get("a.i64"), -5)
                self.assertEqual(g.get("a.f64"), 0.1)
                self.assertIs(g.get("a.flag"), True)
                self.assertEqual(g.get("a.list"), ["x", "", "\u2581é"])
                self.assertEqual(list(g.get("a.ints")), [1, -2])
                tol = {"f32": 0, "f16": 1e-3, "bf16": 8e-3, "q8_0": 2e-2, "q4_0": 0.2}
                for n in QTYPES:
                    t = g.tensors[f"t.{n}"]
                    self.assertEqual(t.shape, (3, 64))
                    self.assertEqual(t.offset % 64, 0)
                    err = np.abs(g.tensor(f"t.{n}") - x).max() / np.abs(x).max()
                    self.assertLessEqual(err, tol[n], n)

    def test_gguf_reader_rejects_bad_files(self):
        x = np.ones((2, 32), np.float32)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "t.gguf"
            lf.write_gguf(path, {"k": 1}, [lf.GGUFTensorOut("w", lf.F32, x.shape,
                                                             lf.encode_tensor(x, lf.F32))])
            good = path.read_bytes()
            for bad in (good[:-1], b"GGUX" + good[4:], good[:60]):
                path.write_bytes(bad)
                with self.assertRaises(lf.FormatError):
                    lf.GGUFFile(path)

    def test_safetensors_round_trip_and_checks(self):
        x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "m.safetensors"
            lf.write_safetensors(path, [("a", "F32", x), ("b", "BF16", x), ("c", "F16", x)],
                                 {"format": "pt"})
            raw = path.read_bytes()
            self.assertEqual((8 + int.from_bytes(raw[:8], "little")) % 8, 0)
            with lf.SafetensorsFile(path) as st:
                self.assertEqual(st.metadata, {"format": "pt"})
                np.testing.assert_array_equal(st.tensor("a"), x)
                np.testing.assert_allclose(st.tensor("b"), x, rtol=8e-3)
                np.testing.assert_allclose(st.tensor("c"), x, rtol=1e-3)
            path.write_bytes(raw[:-1])
            with self.assertRaises(lf.FormatError):
                lf.SafetensorsFile(path)

    def test_converted_vocabularies(self):
        """The npm tokenizers as `ak convert` wrote them (made by setUpModule's models)."""
        gpt2 = lf.read_vocab(VOCAB_DIR / "gpt2.gguf")
        self.assertEqual(gpt2["tokenizer.ggml.model"].value, "gpt2")
        self.assertEqual(len(gpt2["tokenizer.ggml.tokens"].value), 50257)
        self.assertEqual(len(gpt2["tokenizer.ggml.merges"].value), 50000)
        self.assertEqual(gpt2["tokenizer.ggml.eos_token_id"].value, 50256)
        spm = lf.read_vocab(VOCAB_DIR / "llama2.gguf")
        self.assertEqual(spm["tokenizer.ggml.model"].value, "llama")
        self.assertEqual(len(spm["tokenizer.ggml.scores"].value), 32000)
        self.assertEqual(spm["tokenizer.ggml.tokens"].value[22557], "\u2581Hello")
        self.assertEqual(spm["tokenizer.ggml.bos_token_id"].value, 1)


# ---- the generator and the reference ------------------------------------------------------

class TestReference(unittest.TestCase):
    def test_gguf_and_hf_twins_agree(self):
        """Permuted-q/k adjacent-pair GGUF llama == rotate-half HF (and qwen2 both NeoX)."""
        for name in HF_TWINS:
            err = ref.rel_error(ref.logits(model(name), PROMPT_LOGITS),
                                ref.logits(model(name + "-hf"), PROMPT_LOGITS))
            self.assertLess(err, TWIN_TOL[name], name)

    def test_reference_matches_torch(self):
        for name in TORCH_TWINS:
            ours = ref.logits(model(name), PROMPT_LOGITS)  # GGUF: the other layout
            theirs = torch_logits(PATHS[name + "-hf"], PROMPT_LOGITS)
            self.assertLess(ref.rel_error(ours, theirs), TWIN_TOL[name], name)

    def test_arch_features_change_the_logits(self):
        """Each architecture's additions, one at a time set to Llama's neutral value, move
        the logits clearly: an engine that ignored one could not pass the engine tests."""
        neutral = {"mistral": [{"sliding_window": 0}],
                   "granite": [{"embed_scale": 1.0}, {"residual_scale": 1.0},
                               {"attn_scale": None}, {"logit_scale": 1.0}],
                   "qwen3": [{"qk_norm": None}],
                   "gemma2": [{"attn_softcap": 0.0}, {"final_softcap": 0.0},
                              {"sliding_window": 0}, {"embed_scale": 1.0}],
                   "gemma3": [{"rope_theta_local": 0.0}, {"sliding_window": 0},
                              {"qk_norm": None}],
                   "mixtral": [{"norm_topk": False}, {"n_experts_used": 1}],
                   "qwen2moe": [{"norm_topk": True}, {"shared": None}],
                   "qwen3moe": [{"norm_topk": False}, {"qk_norm": None}],
                   "olmo2": [{"qk_norm": None}],
                   "phi3": [{"rope_attn_factor": 1.0}],
                   "starcoder2": [{"layer_norm": False}]}
        for arch, changes in neutral.items():
            for change in changes:
                with self.subTest(arch=arch, change=change):
                    m = model(arch)
                    plain = copy.copy(m)
                    plain.hp = dict(m.hp, **change)
                    drop = {"qk_norm": ("q_norm", "k_norm"),
                            "shared": ("sh_gate", "sh_up", "sh_down", "sh_gate_inp")}
                    for key, names in drop.items():
                        if key in change:
                            plain.layers = [{k: v for k, v in layer.items() if k not in names}
                                            for layer in plain.layers]
                    if "rope_theta_local" in change:
                        plain.inv_freq_local = None
                    err = ref.rel_error(ref.logits(m, PROMPT_LOGITS),
                                        ref.logits(plain, PROMPT_LOGITS))
                    self.assertGreater(err, 1e-2)

    def test_rope_scaling_changes_the_logits(self):
        """Ignoring the scaling must change the logits clearly, or the engine tests
        could not notice it being ignored."""
        for name in ("llama3", "linear", "llama3-hf", "linear-hf"):
            m = model(name)
            plain = copy.copy(m)
            hd = m.hp["head_dim"]
            plain.inv_freq = m.hp["rope_theta"] ** (-np.arange(0, hd, 2) / hd)
            self.assertFalse(np.allclose(plain.inv_freq, m.inv_freq), name)
            err = ref.rel_error(ref.logits(m, PROMPT_LOGITS), ref.logits(plain, PROMPT_LOGITS))
            self.assertGreater(err, 1e-2, name)

    def test_kv_cache_greedy_equals_recompute(self):
        m, ids = model("qwen2"), list(PROMPT_GEN)
        fast = ref.greedy(m, ids, 10)
        for _ in range(10):
            ids.append(int(np.argmax(ref.logits(m, ids)[-1])))
        self.assertEqual(fast, ids[len(PROMPT_GEN):])

    def test_models_are_not_degenerate(self):
        for name in ("llama", "qwen2", "spm", *ARCHS):
            lg = ref.logits(model(name), PROMPT_LOGITS)
            self.assertTrue(np.all((lg.std(axis=1) > 2) & (lg.std(axis=1) < 4)), name)
            top2 = np.sort(lg, axis=1)[:, -2:]
            gap = (top2[:, 1] - top2[:, 0]) / np.abs(top2[:, 1])
            self.assertGreater(np.median(gap), 1e-2, name)
            self.assertGreaterEqual(len(set(ref.greedy(model(name), PROMPT_GEN, 64))), 24, name)

    def test_generator_is_deterministic(self):
        with tempfile.TemporaryDirectory() as d:
            args = MODELS["spm"]
            _make(args, Path(d) / "a.gguf")
            _make(args.replace("--seed 3", "--seed 9"), Path(d) / "b.gguf")
            digest = lambda p: hashlib.sha256(Path(p).read_bytes()).hexdigest()  # noqa: E731
            self.assertEqual(digest(Path(d) / "a.gguf"), digest(PATHS["spm"]))
            self.assertNotEqual(digest(Path(d) / "b.gguf"), digest(PATHS["spm"]))

    def test_gguf_layout_is_llama_cpp_s(self):
        with lf.GGUFFile(PATHS["qwen2"]) as g:
            self.assertNotIn("output.weight", g.tensors)  # tied
            self.assertEqual(g.tensors["blk.0.attn_q.bias"].ggml_type, lf.F32)
            self.assertEqual(g.tensors["blk.2.ffn_down.weight"].shape, (96, 256))
            self.assertEqual(g.get("qwen2.attention.head_count_kv"), 2)
        with lf.GGUFFile(PATHS["llama3"]) as g:
            self.assertEqual(g.tensors["rope_freqs.weight"].shape, (8,))
        with lf.GGUFFile(PATHS["q-q4_0"]) as g:
            self.assertEqual(g.tensors["token_embd.weight"].ggml_type, lf.Q4_0)
            self.assertEqual(g.tensors["blk.0.attn_norm.weight"].ggml_type, lf.F32)
            self.assertEqual(g.get("general.file_type"), 2)


# ---- the engine -------------------------------------------------------------------------------

def ak(*args):
    r = subprocess.run([AK_BIN, *map(str, args)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"ak {' '.join(map(str, args))} failed ({r.returncode}):\n"
                             f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


def ak_logits(name, ids):
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "logits.npy"
        ak("logits", "-m", PATHS[name], "--ids", " ".join(map(str, ids)), "--out", out)
        return np.load(out)


def ak_greedy(name, ids, n):
    out = ak("generate", "-m", PATHS[name], "--ids", " ".join(map(str, ids)), "-n", n,
             "--temp", 0, "--ignore-eos", "--print-ids")
    lines = [ln.split() for ln in out.splitlines() if ln.strip()]
    ids_lines = [ln for ln in lines if all(t.lstrip("-").isdigit() for t in ln)]
    if not ids_lines:
        raise AssertionError(f"no line of ids in the output of ak generate:\n{out[-2000:]}")
    return [int(t) for t in ids_lines[-1]]


F32_MODELS = ["llama", "llama-hf", "qwen2", "qwen2-hf", "llama3", "llama3-hf", "linear",
              "linear-hf", "spm", "q-f32", *ARCHS, *[f"{a}-hf" for a in ARCHS]]


@unittest.skipUnless(AK_BIN, "AK_BIN is not set (ctest sets it to the ak binary)")
class TestEngine(unittest.TestCase):
    def test_f32_logits(self):
        for name in F32_MODELS:
            with self.subTest(model=name):
                ours = ak_logits(name, PROMPT_LOGITS)
                want = ref.logits(model(name), PROMPT_LOGITS)
                self.assertEqual(ours.shape, want.shape)
                self.assertEqual(ours.dtype, np.float32)
                err = ref.rel_error(ours, want)
                print(f"\n  {name}: f32 logits max rel error {err:.2e}", end="")
                self.assertLessEqual(err, 1e-4)

    def test_greedy_64(self):
        for name in F32_MODELS:
            with self.subTest(model=name):
                want = ref.greedy(model(name), PROMPT_GEN, 64)
                self.assertEqual(ak_greedy(name, PROMPT_GEN, 64), want)

    def test_quantized_errors(self):
        """Errors against the reference of the same file (the engine's arithmetic) and of
        the f32 file (what quantization costs); loose bounds, the figures are printed."""
        exact = ref.logits(model("q-f32"), PROMPT_LOGITS)
        # (same file, vs f32): Gaussian weights lose ~9 % each to q4_0, ~0.4 % to q8_0
        bounds = {"f16": (1e-2, 1e-2), "bf16": (1e-2, 5e-2), "q8_0": (5e-2, 0.1),
                  "q4_0": (0.2, 0.6)}
        for t, (bound, bound_f32) in bounds.items():
            with self.subTest(type=t):
                ours = ak_logits(f"q-{t}", PROMPT_LOGITS)
                same = ref.rel_error(ours, ref.logits(model(f"q-{t}"), PROMPT_LOGITS))
                vs_f32 = ref.rel_error(ours, exact)
                agree = np.mean(ours.argmax(axis=1) == exact.argmax(axis=1))
                print(f"\n  {t}: rel error vs reference of the file {same:.2e}, vs f32 "
                      f"{vs_f32:.2e}, argmax agreement with f32 {agree:.0%}", end="")
                self.assertLess(same, bound)
                self.assertLess(vs_f32, bound_f32)


# ---- llama.cpp reads the generated files the same way (peer installed by scripts/setup) --

LLAMACPP = ROOT / "bench" / "llm" / "llamacpp_bench.py"
LLAMAPEER_LIB = Path(os.environ.get("LLAMAPEER", ROOT)) / \
    "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so"


class TestLlamaCpp(unittest.TestCase):
    """Our GGUF files are llama.cpp's format: its logits agree with the reference. Bound:
    llama.cpp keeps the KV cache in f16 (≈ 5e-4 here), and its q8_0/q4_0 dot products
    quantize activations."""

    def test_llama_cpp_agrees_with_the_reference(self):
        spec = importlib.util.spec_from_file_location("llamacpp_bench", LLAMACPP)
        lcb = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(lcb)
        # Gemma: ggml's GELU goes through an f16 table (≈ 2e-3 here)
        bounds = {"llama": 5e-3, "qwen2": 5e-3, "llama3": 5e-3, "linear": 5e-3, "spm": 5e-3,
                  "q-f16": 5e-3, "q-q8_0": 5e-2, "q-q4_0": 5e-2, "granite": 5e-3,
                  "qwen3": 5e-3, "gemma2": 5e-3, "gemma3": 5e-3, "mistral": 5e-3,
                  "mixtral": 5e-3, "qwen2moe": 5e-3, "qwen3moe": 5e-3, "olmo2": 5e-3,
                  "phi3": 5e-3, "starcoder2": 5e-3}
        for name, bound in bounds.items():
            with self.subTest(model=name):
                theirs = np.array(lcb.logits_by_token(str(PATHS[name]), PROMPT_GEN))
                m = model(name)
                if name == "mistral":
                    # llama.cpp runs GGUF `llama` without a window (its converter drops
                    # Mistral's): it must match the reference without one
                    m = copy.copy(m)
                    m.hp = dict(m.hp, sliding_window=0)
                want = ref.logits(m, PROMPT_GEN)
                err = ref.rel_error(theirs, want)
                print(f"\n  {name}: llama.cpp vs reference {err:.2e}", end="")
                self.assertLess(err, bound)


# ---- refusals: what the engine does not implement is named, never run --------------------

def rewrite_gguf(src, dst, add=(), drop=()):
    """A copy of the GGUF src with metadata keys added (name → Value) or dropped."""
    with lf.GGUFFile(src) as g:
        md = {k: v for k, v in g.metadata.items() if k not in drop}
        md.update(dict(add))
        tensors = [lf.GGUFTensorOut(n, t.ggml_type, t.shape, bytes(g.raw(n)))
                   for n, t in g.tensors.items()]
    lf.write_gguf(dst, md, tensors)


@unittest.skipUnless(AK_BIN, "AK_BIN is not set (ctest sets it to the ak binary)")
class TestRefusals(unittest.TestCase):
    def refused(self, path, *words):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([AK_BIN, "logits", "-m", str(path), "--ids", "1 2", "--out",
                                str(Path(d) / "l.npy")], capture_output=True, text=True,
                               timeout=60)
        self.assertNotEqual(r.returncode, 0, path)
        for w in words:
            self.assertIn(w, r.stderr + r.stdout)

    def test_gguf_keys_and_architectures(self):
        cases = {  # (source model, keys added, words of the message)
            "softcap-on-qwen2": ("qwen2", {"qwen2.attn_logit_softcapping": lf.f32(50)},
                                 ["qwen2.attn_logit_softcapping"]),
            "sigmoid-gating": ("qwen3moe", {"qwen3moe.expert_gating_func": lf.u32(2)},
                               ["qwen3moe.expert_gating_func"]),
            "moe-without-count": ("llama", {"llama.expert_count": lf.u32(8)},
                                  ["llama.expert_used_count"]),
            "yarn": ("llama", {"llama.rope.scaling.type": "yarn"}, ["yarn"]),
            "window-on-qwen3": ("qwen3", {"qwen3.attention.sliding_window": lf.u32(8)},
                                ["qwen3.attention.sliding_window"]),
            "unknown-arch": ("llama", {"general.architecture": "mamba"}, ["mamba"]),
        }
        with tempfile.TemporaryDirectory() as d:
            for name, (src, add, words) in cases.items():
                with self.subTest(case=name):
                    out = Path(d) / f"{name}.gguf"
                    rewrite_gguf(PATHS[src], out, add)
                    self.refused(out, *words)

    def test_hf_fields(self):
        cases = [  # (source folder, config fields set, words of the message)
            ("mistral", {"logits_scaling": 2.0}, ["logits_scaling"]),  # Granite's, elsewhere
            ("qwen3", {"use_sliding_window": True}, ["use_sliding_window"]),
            ("llama", {"attn_logit_softcapping": 30.0}, ["attn_logit_softcapping"]),
            ("gemma2", {"hidden_activation": "gelu"}, ["gelu"]),
            ("gemma3", {"layer_types": ["sliding_attention"] * 6}, ["layer_types"]),
            ("llama", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, ["yarn"])]
        for src, add, words in cases:
            with self.subTest(case=src), tempfile.TemporaryDirectory() as d:
                folder = Path(d) / "m"
                shutil.copytree(PATHS[f"{src}-hf"], folder)
                cfg = json.loads((folder / "config.json").read_text())
                cfg.update(add)
                (folder / "config.json").write_text(json.dumps(cfg))
                self.refused(folder, *words)


if __name__ == "__main__":
    unittest.main()
