"""NumPy reference of the Llama-family decoder (Llama, Mistral, Qwen2, Qwen3, Granite,
Gemma 2, Gemma 3), in float64: the oracle the precision-alignment test compares the engine
with. Each architecture's rules are written here from llama.cpp's (GGUF) and
transformers' (HF folders) definitions, independently of the engine's C code.

    model = load("model.gguf")          # or a Hugging Face folder
    logits(model, [1, 2, 3])            # [T, n_vocab] float64, one prefill
    greedy(model, [1, 2, 3], 64)        # 64 argmax ids (KV cache)

It reads the file as stored (python/accelkit/llm_files.py) and dequantizes to float64, so
f16/q8_0/q4_0 files are evaluated exactly as their stored values say. Layout rules:
- GGUF `llama`: q/k rows were permuted by the converter, RoPE rotates adjacent pairs
  (x[2i], x[2i+1]);
- GGUF `qwen2`, `qwen3`, `gemma2`, `gemma3` and every Hugging Face folder: RoPE rotates
  halves (x[i], x[i + hd/2]);
- HF Gemma stores RMSNorm weights as w − 1 (GGUF: w).
Nothing here reverses the permutation: GGUF and HF files of the same weights agreeing is
the test that the generator and the readers handle it.
"""
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np



def _load_llm_files():
    """python/accelkit/llm_files.py by path: importing the accelkit package would load
    libaccelkit, and putting python/accelkit on sys.path would shadow `torch`."""
    name = "accelkit_llm_files"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "python" / "accelkit" / "llm_files.py"
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


llm_files = _load_llm_files()


class Model:
    """Hyper-parameters (`hp`, a dict) and float64 weights: `embed` [V, D], `layers` (a
    dict per layer: attn_norm, wq [H·hd, D], wk, wv [KV·hd, D], wo [D, H·hd], optional
    bq/bk/bv, ffn_norm, w_gate/w_up [F, D], w_down [D, F]), `out_norm` [D], `output`
    [V, D] (the embedding when tied) and `inv_freq` [hd/2] (scaling applied)."""

    def __init__(self, hp, embed, layers, out_norm, output, freq_factors):
        for key, neutral in FEATURES.items():
            hp.setdefault(key, neutral)
        self.hp, self.embed, self.layers = hp, embed, layers
        self.out_norm, self.output = out_norm, output
        self.out_norm_b = None  # LayerNorm models: the final norm's bias
        hd = hp["head_dim"]
        inv = hp["rope_theta"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        if freq_factors is not None:
            inv = inv / freq_factors  # llama3: each frequency divided by its factor
        if hp["rope_scaling"] == "linear":
            inv = inv / hp["rope_factor"]  # positions / factor ≡ frequencies / factor
        self.inv_freq = inv
        # Gemma 3's sliding layers: their own base, unscaled
        self.inv_freq_local = None if not hp["rope_theta_local"] else \
            hp["rope_theta_local"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)

    def slides(self, i):
        """Layer i attends within the sliding window."""
        n, p = self.hp["sliding_window"], self.hp["swa_pattern"]
        return bool(n) and (p == 0 or i % p < p - 1)


# what each architecture adds to Llama, with the values that leave Llama unchanged
FEATURES = dict(embed_scale=1.0, residual_scale=1.0, attn_scale=None, logit_scale=1.0,
                attn_softcap=0.0, final_softcap=0.0, sliding_window=0, swa_pattern=0,
                rope_theta_local=0.0, ffn_gelu=False, post_norms=False, n_experts_used=0,
                norm_topk=False, rope_attn_factor=1.0, layer_norm=False)


# ---- loading -------------------------------------------------------------------------------

_GGUF_LAYER = {"attn_norm": "attn_norm.weight", "wq": "attn_q.weight", "wk": "attn_k.weight",
               "wv": "attn_v.weight", "wo": "attn_output.weight", "bq": "attn_q.bias",
               "bk": "attn_k.bias", "bv": "attn_v.bias", "ffn_norm": "ffn_norm.weight",
               "w_gate": "ffn_gate.weight", "w_up": "ffn_up.weight", "w_down": "ffn_down.weight",
               "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight",
               "attn_post_norm": "post_attention_norm.weight",
               "ffn_post_norm": "post_ffw_norm.weight",
               # experts: the router [E, D], gate/up [E, F, D], down [E, D, F]; the
               # shared expert and its gate row
               "router": "ffn_gate_inp.weight", "e_gate": "ffn_gate_exps.weight",
               "e_up": "ffn_up_exps.weight", "e_down": "ffn_down_exps.weight",
               "sh_gate_inp": "ffn_gate_inp_shexp.weight", "sh_gate": "ffn_gate_shexp.weight",
               "sh_up": "ffn_up_shexp.weight", "sh_down": "ffn_down_shexp.weight",
               # StarCoder2: LayerNorm biases, output and MLP biases
               "attn_norm_b": "attn_norm.bias", "ffn_norm_b": "ffn_norm.bias",
               "bo": "attn_output.bias", "b_up": "ffn_up.bias", "b_down": "ffn_down.bias"}
_HF_LAYER = {"attn_norm": "input_layernorm.weight", "wq": "self_attn.q_proj.weight",
             "wk": "self_attn.k_proj.weight", "wv": "self_attn.v_proj.weight",
             "wo": "self_attn.o_proj.weight", "bq": "self_attn.q_proj.bias",
             "bk": "self_attn.k_proj.bias", "bv": "self_attn.v_proj.bias",
             "ffn_norm": "post_attention_layernorm.weight", "w_gate": "mlp.gate_proj.weight",
             "w_up": "mlp.up_proj.weight", "w_down": "mlp.down_proj.weight",
             "q_norm": "self_attn.q_norm.weight", "k_norm": "self_attn.k_norm.weight",
             "router": "mlp.gate.weight", "sh_gate_inp": "mlp.shared_expert_gate.weight",
             "sh_gate": "mlp.shared_expert.gate_proj.weight",
             "sh_up": "mlp.shared_expert.up_proj.weight",
             "sh_down": "mlp.shared_expert.down_proj.weight"}
# Gemma: post_attention_layernorm normalizes the attention's output
_HF_GEMMA_LAYER = {**_HF_LAYER, "ffn_norm": "pre_feedforward_layernorm.weight",
                   "attn_post_norm": "post_attention_layernorm.weight",
                   "ffn_post_norm": "post_feedforward_layernorm.weight"}
GEMMA = ("gemma2", "gemma3")


def load(path):
    """A GGUF file or a Hugging Face folder."""
    return _load_hf(Path(path)) if Path(path).is_dir() else _load_gguf(path)


def _load_gguf(path):
    with llm_files.GGUFFile(path) as g:
        arch = g.get("general.architecture")
        a = lambda key, default=None: g.get(f"{arch}.{key}", default)  # noqa: E731
        n_heads = a("attention.head_count")
        dim = a("embedding_length")
        scaling = a("rope.scaling.type", "none")
        hp = dict(arch=arch, dim=dim, n_layers=a("block_count"), n_heads=n_heads,
                  n_kv_heads=a("attention.head_count_kv", n_heads),
                  head_dim=a("attention.key_length", dim // n_heads),
                  rope_theta=float(a("rope.freq_base", 10000.0)),
                  norm_eps=float(a("attention.layer_norm_rms_epsilon", 1e-5)),
                  rope_neox=arch in ("qwen2", "qwen3", "qwen2moe", "qwen3moe", "olmo2", "phi3",
                                     "starcoder2", *GEMMA),
                  rope_scaling=scaling,
                  rope_factor=float(a("rope.scaling.factor", 1.0)))
        _gguf_features(hp, a)
        t = lambda name: g.tensor(name, np.float64)  # noqa: E731
        layers = [{k: t(f"blk.{i}.{n}") for k, n in _GGUF_LAYER.items()
                   if f"blk.{i}.{n}" in g.tensors} for i in range(hp["n_layers"])]
        embed = t("token_embd.weight")
        output = t("output.weight") if "output.weight" in g.tensors else embed
        factors = t("rope_freqs.weight") if "rope_freqs.weight" in g.tensors else None
        if "rope_factors_short.weight" in g.tensors:  # phi3 longrope, within the original context
            factors = t("rope_factors_short.weight")
            hp["rope_attn_factor"] = a("rope.scaling.attn_factor", 1.0)
        if arch == "phi3":
            _unfuse(hp, layers, [t(f"blk.{i}.attn_qkv.weight") for i in range(hp["n_layers"])])
        hp["n_vocab"] = embed.shape[0]
        model = Model(hp, embed, layers, t("output_norm.weight"), output, factors)
        if "output_norm.bias" in g.tensors:
            model.out_norm_b = t("output_norm.bias")
        return model


def _unfuse(hp, layers, qkv):
    """Phi-3's fused matrices split into the usual ones: q, k, v rows of qkv[i]; the gate
    rows then the up rows of the layer's w_up (GGUF ffn_up / HF gate_up_proj)."""
    q, kv = hp["n_heads"] * hp["head_dim"], hp["n_kv_heads"] * hp["head_dim"]
    for layer, w in zip(layers, qkv):
        layer["wq"], layer["wk"], layer["wv"] = w[:q], w[q:q + kv], w[q + kv:]
        layer["w_gate"], layer["w_up"] = np.split(layer["w_up"], 2)


def _gguf_features(hp, a):
    """llama.cpp's per-architecture rules (llama-model.cpp) for what GGUF keys say."""
    arch = hp["arch"]
    if arch == "granite":
        hp.update(embed_scale=a("embedding_scale"), residual_scale=a("residual_scale"),
                  attn_scale=a("attention.scale"), logit_scale=1.0 / a("logit_scale"))
    hp["sliding_window"] = a("attention.sliding_window", 0)
    if arch in GEMMA:
        big = hp["n_layers"] == (46 if arch == "gemma2" else 62)  # the 27B shapes
        hp.update(embed_scale=math.sqrt(hp["dim"]), ffn_gelu=True, post_norms=True,
                  attn_scale=1 / math.sqrt(hp["dim"] / hp["n_heads"] if big else hp["head_dim"]),
                  swa_pattern=2 if arch == "gemma2" else 6)
    if arch == "gemma2":
        hp.update(attn_softcap=a("attn_logit_softcapping", 50.0),
                  final_softcap=a("final_logit_softcapping", 30.0))
    if arch == "gemma3":
        hp["rope_theta_local"] = 10000.0
    if arch == "starcoder2":
        hp.update(layer_norm=True, norm_eps=a("attention.layer_norm_epsilon"))
    if a("expert_count", 0):  # llama.cpp: Qwen2-MoE keeps the softmax weights as they are
        hp.update(n_experts_used=a("expert_used_count"), norm_topk=arch != "qwen2moe")


def _hf_experts(w, cfg, i):
    """A layer's experts stacked as [E, rows, cols] (HF keeps one matrix each)."""
    p = f"model.layers.{i}."
    if cfg["model_type"] == "mixtral":
        names = dict(e_gate="w1", e_up="w3", e_down="w2")
        return {k: np.stack([w[f"{p}block_sparse_moe.experts.{e}.{n}.weight"]
                             for e in range(cfg["num_local_experts"])]) for k, n in names.items()} | \
            {"router": w[f"{p}block_sparse_moe.gate.weight"]}
    names = dict(e_gate="gate_proj", e_up="up_proj", e_down="down_proj")
    return {k: np.stack([w[f"{p}mlp.experts.{e}.{n}.weight"] for e in range(cfg["num_experts"])])
            for k, n in names.items()}


def _hf_features(hp, cfg):
    """transformers' meaning of the config fields each architecture adds."""
    arch = hp["arch"]
    if arch == "granite":
        hp.update(embed_scale=cfg["embedding_multiplier"],
                  residual_scale=cfg["residual_multiplier"],
                  attn_scale=cfg["attention_multiplier"],
                  logit_scale=1.0 / cfg["logits_scaling"])
    if arch == "mistral":
        hp["sliding_window"] = cfg.get("sliding_window") or 0
    if arch in GEMMA:
        hp.update(embed_scale=math.sqrt(hp["dim"]), ffn_gelu=True, post_norms=True,
                  attn_scale=cfg.get("query_pre_attn_scalar", 256) ** -0.5,
                  attn_softcap=cfg.get("attn_logit_softcapping") or 0.0,
                  final_softcap=cfg.get("final_logit_softcapping") or 0.0,
                  sliding_window=cfg["sliding_window"],
                  swa_pattern=2 if arch == "gemma2" else cfg.get("sliding_window_pattern", 6))
    if arch == "gemma3":
        hp["rope_theta_local"] = float(cfg.get("rope_local_base_freq", 10000.0))
    if "num_experts_per_tok" in cfg:  # transformers: Mixtral always renormalizes
        hp.update(n_experts_used=cfg["num_experts_per_tok"],
                  norm_topk=arch == "mixtral" or bool(cfg.get("norm_topk_prob", False)))


def llama3_factors(scaling, theta, head_dim):
    """Llama 3.1's per-frequency divisors from a config's rope_scaling: wavelengths
    shorter than original_context/high_freq_factor keep their frequency, longer than
    original_context/low_freq_factor are divided by `factor`, and the band between
    interpolates smoothly in 1/factor."""
    factor = scaling.get("factor", 8.0)
    low, high = scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
    orig = scaling.get("original_max_position_embeddings", 8192)
    inv = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * math.pi / inv
    smooth = (orig / wavelen - low) / (high - low)
    mid = 1.0 / ((1 - smooth) / factor + smooth)
    return np.where(wavelen < orig / high, 1.0, np.where(wavelen > orig / low, factor, mid))


def _load_hf(folder):
    cfg = json.loads((folder / "config.json").read_text())
    w = llm_files.read_hf_tensors(folder, np.float64)
    n_heads = cfg["num_attention_heads"]
    dim = cfg["hidden_size"]
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "none"))
    theta = float(cfg.get("rope_theta", 10000.0))
    arch = {"gemma3_text": "gemma3", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe"}.get(
        cfg["model_type"], cfg["model_type"])
    hp = dict(arch=arch, dim=dim, n_layers=cfg["num_hidden_layers"],
              n_heads=n_heads, n_kv_heads=cfg.get("num_key_value_heads", n_heads),
              head_dim=cfg.get("head_dim", dim // n_heads), rope_theta=theta,
              norm_eps=float(cfg.get("rms_norm_eps", 1e-6)), rope_neox=True,
              rope_scaling="linear" if kind == "linear" else "none",
              rope_factor=float(scaling.get("factor", 1.0)))
    _hf_features(hp, cfg)
    factors = llama3_factors(scaling, theta, hp["head_dim"]) if kind == "llama3" else None
    names = _HF_GEMMA_LAYER if arch in (*GEMMA, "olmo2") else _HF_LAYER
    layers = [{k: w[f"model.layers.{i}.{n}"] for k, n in names.items()
               if f"model.layers.{i}.{n}" in w} for i in range(hp["n_layers"])]
    if arch == "starcoder2":
        hp.update(layer_norm=True, norm_eps=float(cfg.get("norm_epsilon", 1e-5)))
        for i, layer in enumerate(layers):
            p = f"model.layers.{i}."
            layer.update(attn_norm_b=w[p + "input_layernorm.bias"],
                         ffn_norm_b=w[p + "post_attention_layernorm.bias"],
                         bo=w[p + "self_attn.o_proj.bias"], w_up=w[p + "mlp.c_fc.weight"],
                         b_up=w[p + "mlp.c_fc.bias"], w_down=w[p + "mlp.c_proj.weight"],
                         b_down=w[p + "mlp.c_proj.bias"])
    if arch == "phi3":
        for i, layer in enumerate(layers):
            layer["w_up"] = w[f"model.layers.{i}.mlp.gate_up_proj.weight"]
        _unfuse(hp, layers, [w[f"model.layers.{i}.self_attn.qkv_proj.weight"]
                             for i in range(hp["n_layers"])])
        if kind in ("longrope", "su"):
            factors = np.asarray(scaling["short_factor"], np.float64)
            orig = cfg.get("original_max_position_embeddings", cfg["max_position_embeddings"])
            s = cfg["max_position_embeddings"] / orig
            hp["rope_attn_factor"] = scaling.get("attention_factor") or \
                (1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(orig)))
    if hp.get("n_experts_used"):
        for i, layer in enumerate(layers):
            layer.update(_hf_experts(w, cfg, i))
    if arch in GEMMA:  # x·(1 + w)
        w["model.norm.weight"] = w["model.norm.weight"] + 1.0
        for layer in layers:
            for k in layer:
                if k.endswith("norm"):
                    layer[k] = layer[k] + 1.0
    embed = w["model.embed_tokens.weight"]
    output = w.get("lm_head.weight", embed) if not cfg.get("tie_word_embeddings") else embed
    hp["n_vocab"] = embed.shape[0]
    model = Model(hp, embed, layers, w["model.norm.weight"], output, factors)
    model.out_norm_b = w.get("model.norm.bias")
    return model


# ---- forward pass --------------------------------------------------------------------------

def rms_norm(x, w, eps):
    """x · rsqrt(mean(x²) + eps) · w over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    """(x − mean) / √(var + eps) · w + b over the last axis."""
    c = x - x.mean(axis=-1, keepdims=True)
    return c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + eps) * w + b


def rope(x, positions, inv_freq, neox, mscale=1.0):
    """Rotates each head of x [T, n, hd] by position·frequency: pairs (i, i + hd/2) when
    neox, else (2i, 2i+1); frequency i is inv_freq[i] in both layouts; cos and sin are
    multiplied by mscale (Phi-3 longrope's attention factor)."""
    ang = positions[:, None].astype(np.float64) * inv_freq[None, :]  # [T, hd/2]
    cos, sin = mscale * np.cos(ang)[:, None, :], mscale * np.sin(ang)[:, None, :]
    half = x.shape[-1] // 2
    a, b = (x[..., :half], x[..., half:]) if neox else (x[..., 0::2], x[..., 1::2])
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = np.empty_like(x)
    if neox:
        out[..., :half], out[..., half:] = ra, rb
    else:
        out[..., 0::2], out[..., 1::2] = ra, rb
    return out


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def moe(hp, layer, h):
    """Each token through its n_used best experts (softmax router, first index on ties),
    weighted by their probabilities (renormalized when norm_topk), plus the shared expert
    weighted by sigmoid(h·w)."""
    p = h @ layer["router"].T
    p = np.exp(p - p.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        top = np.argsort(-p[t], kind="stable")[:hp["n_experts_used"]]
        wts = p[t, top] / (p[t, top].sum() if hp["norm_topk"] else 1.0)
        for e, wt in zip(top, wts):
            y = silu(layer["e_gate"][e] @ h[t]) * (layer["e_up"][e] @ h[t])
            out[t] += wt * (layer["e_down"][e] @ y)
    if "sh_gate" in layer:
        y = (silu(h @ layer["sh_gate"].T) * (h @ layer["sh_up"].T)) @ layer["sh_down"].T
        gate = 1.0 / (1.0 + np.exp(-(h @ layer["sh_gate_inp"].reshape(-1))))
        out += gate[:, None] * y
    return out


def softcap(x, cap):
    return cap * np.tanh(x / cap) if cap else x


class Cache:
    """Keys and values of the positions seen so far, per layer ([T, KV, hd] each)."""

    def __init__(self, n_layers):
        self.k = [None] * n_layers
        self.v = [None] * n_layers
        self.n = 0

    def append(self, i, k, v):
        self.k[i] = k if self.k[i] is None else np.concatenate([self.k[i], k])
        self.v[i] = v if self.v[i] is None else np.concatenate([self.v[i], v])
        return self.k[i], self.v[i]


def _attention(m, layer, i, x, positions, cache):
    hp = m.hp
    H, KV, hd = hp["n_heads"], hp["n_kv_heads"], hp["head_dim"]
    T = x.shape[0]
    q, k, v = x @ layer["wq"].T, x @ layer["wk"].T, x @ layer["wv"].T
    if "bq" in layer:
        q, k, v = q + layer["bq"], k + layer["bk"], v + layer["bv"]
    if "q_norm" in layer and layer["q_norm"].size == H * hd and H > 1:  # OLMo-2: whole rows
        q, k = rms_norm(q, layer["q_norm"], hp["norm_eps"]), rms_norm(k, layer["k_norm"], hp["norm_eps"])
    q, k = q.reshape(T, H, hd), k.reshape(T, KV, hd)
    if "q_norm" in layer and layer["q_norm"].size == hd:  # each head normalized on its own
        q, k = rms_norm(q, layer["q_norm"], hp["norm_eps"]), rms_norm(k, layer["k_norm"], hp["norm_eps"])
    slides = m.slides(i)
    inv = m.inv_freq_local if slides and m.inv_freq_local is not None else m.inv_freq
    q = rope(q, positions, inv, hp["rope_neox"], hp["rope_attn_factor"])
    k = rope(k, positions, inv, hp["rope_neox"], hp["rope_attn_factor"])
    k_all, v_all = cache.append(i, k, v.reshape(T, KV, hd))  # [S, KV, hd]
    S = k_all.shape[0]
    group = H // KV  # query head h reads KV head h // group
    kh = np.repeat(k_all, group, axis=1).transpose(1, 2, 0)  # [H, hd, S]
    vh = np.repeat(v_all, group, axis=1).transpose(1, 0, 2)  # [H, S, hd]
    scale = hp["attn_scale"] if hp["attn_scale"] is not None else 1 / math.sqrt(hd)
    scores = softcap(np.matmul(q.transpose(1, 0, 2), kh) * scale, hp["attn_softcap"])  # [H, T, S]
    key_pos = np.arange(S)
    seen = key_pos[None, None, :] <= positions[None, :, None]
    if slides:  # the last sliding_window positions, the query's own included
        seen &= key_pos[None, None, :] > positions[None, :, None] - hp["sliding_window"]
    scores = np.where(seen, scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = scores / scores.sum(axis=-1, keepdims=True)
    out = np.matmul(p, vh).transpose(1, 0, 2).reshape(T, H * hd)
    out = out @ layer["wo"].T
    return out + layer["bo"] if "bo" in layer else out


def forward(m, ids, cache, last_only=False):
    """Runs the new tokens `ids` after the cache's positions; returns their logits
    [T, V] (or only the last row)."""
    hp = m.hp
    ids = np.asarray(ids, dtype=np.int64)
    positions = np.arange(cache.n, cache.n + len(ids))
    x = m.embed[ids] * hp["embed_scale"]
    act = gelu_tanh if hp["ffn_gelu"] else silu

    def residual(x, y, post_norm):
        if post_norm is not None:
            y = rms_norm(y, post_norm, hp["norm_eps"])
        return x + hp["residual_scale"] * y

    def norm(x, w, b):
        return layer_norm(x, w, b, hp["norm_eps"]) if hp["layer_norm"] else \
            rms_norm(x, w, hp["norm_eps"])

    for i, layer in enumerate(m.layers):
        h = norm(x, layer["attn_norm"], layer.get("attn_norm_b")) if "attn_norm" in layer else x
        x = residual(x, _attention(m, layer, i, h, positions, cache), layer.get("attn_post_norm"))
        h = norm(x, layer["ffn_norm"], layer.get("ffn_norm_b")) if "ffn_norm" in layer else x
        if "b_up" in layer:  # StarCoder2's plain MLP
            y = gelu_tanh(h @ layer["w_up"].T + layer["b_up"]) @ layer["w_down"].T + layer["b_down"]
        elif "router" in layer:
            y = moe(hp, layer, h)
        else:
            y = (act(h @ layer["w_gate"].T) * (h @ layer["w_up"].T)) @ layer["w_down"].T
        x = residual(x, y, layer.get("ffn_post_norm"))
    cache.n += len(ids)
    if last_only:
        x = x[-1:]
    out = norm(x, m.out_norm, m.out_norm_b) @ m.output.T * hp["logit_scale"]
    return softcap(out, hp["final_softcap"])


def logits(m, ids):
    """Logits of every position of one prefill: [T, n_vocab] float64."""
    return forward(m, ids, Cache(len(m.layers)))


def greedy(m, ids, n):
    """n greedily decoded ids after the prompt `ids` (first maximum on ties)."""
    cache = Cache(len(m.layers))
    row = forward(m, ids, cache, last_only=True)[0]
    out = []
    for _ in range(n):
        out.append(int(np.argmax(row)))
        if len(out) < n:
            row = forward(m, [out[-1]], cache, last_only=True)[0]
    return out


def rel_error(ours, ref):
    """Per row max|ours − ref| / max|ref|, the worst row."""
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(ours - ref).max(axis=-1) / np.abs(ref).max(axis=-1)))


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="reference logits / greedy ids of a model")
    ap.add_argument("model")
    ap.add_argument("--ids", required=True, help="space-separated prompt ids")
    ap.add_argument("-n", type=int, default=0, help="greedy tokens to print")
    ap.add_argument("--out", help="write the prefill logits here (.npy, float32)")
    args = ap.parse_args()
    model, prompt = load(args.model), [int(t) for t in args.ids.split()]
    if args.out:
        np.save(args.out, logits(model, prompt).astype(np.float32))
    if args.n:
        print(" ".join(map(str, greedy(model, prompt, args.n))))
