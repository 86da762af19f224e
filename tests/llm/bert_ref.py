"""NumPy reference of the BERT-family encoders (GGUF `bert`, `nomic-bert`) and of the
embedding pooling, in float64: the oracle tests/llm/test_embeddings.py compares
`ak embed` with. Written from llama.cpp's graph (build_bert) and the BERT paper,
independently of the engine's C code:

    x = LN(tok_embd[ids] + token_types[0] (+ position_embd[0..n) for bert))
    per layer:  x = LN(x + Wo·softmax(q·kᵀ/√hd)·v (+ bo))     every token sees every token
                x = LN(x + FFN(x))   bert: down(gelu_tanh(up·x + b) ) + b
                                     nomic-bert: down(silu(gate·x) · up·x)
    nomic-bert: q, k from one fused matrix (q rows first), rotated by RoPE in NEOX halves.

    model = load("model.gguf"); embedding(model, ids)  # pooled as the GGUF says, L2-normed
    load("bert-folder")  # a Hugging Face BertModel folder (hidden_act "gelu": erf GELU)
"""
import math
from pathlib import Path

import numpy as np

from llama_ref import llm_files as lf  # python/accelkit/llm_files.py, loaded by path


class Encoder:
    def __init__(self, path):
        self.gelu = gelu_tanh  # llama.cpp's GELU for GGUF
        if Path(path).is_dir():
            self._load_hf(Path(path))
            return
        with lf.GGUFFile(path) as g:
            self.arch = g.get("general.architecture")
            a = self.arch
            self.dim = int(g.get(f"{a}.embedding_length"))
            self.n_layers = int(g.get(f"{a}.block_count"))
            self.n_heads = int(g.get(f"{a}.attention.head_count"))
            self.eps = float(g.get(f"{a}.attention.layer_norm_epsilon"))
            self.pooling = int(g.get(f"{a}.pooling_type", 0))
            self.theta = float(g.get(f"{a}.rope.freq_base", 10000.0))
            self.w = {n: g.tensor(n, np.float64) for n in g.tensors}

    def _load_hf(self, folder):
        """A BertModel folder: transformers' names mapped onto GGUF's, sentence-transformers'
        pooling, hidden_act "gelu" = the exact erf GELU."""
        import json
        cfg = json.loads((folder / "config.json").read_text())
        self.arch, self.theta = "bert", 10000.0
        self.dim, self.n_layers = cfg["hidden_size"], cfg["num_hidden_layers"]
        self.n_heads, self.eps = cfg["num_attention_heads"], cfg.get("layer_norm_eps", 1e-12)
        if cfg.get("hidden_act", "gelu") == "gelu":
            self.gelu = gelu_erf
        names = {}
        for gguf, hf in HF_NAMES:
            names[hf] = gguf
        self.w = {}
        for name, x in lf.read_hf_tensors(folder, np.float64).items():
            layer = None
            if name.startswith("encoder.layer."):
                _, _, layer, name = name.split(".", 3)
            for hf, gguf in names.items():
                if name.startswith(hf):
                    key = gguf + name[len(hf):]
                    self.w[f"blk.{layer}.{key}" if layer is not None else key] = x
        self.pooling = 0
        modules = folder / "modules.json"
        for mod in json.loads(modules.read_text()) if modules.exists() else []:
            if "Pooling" in mod["type"]:
                p = json.loads((folder / mod["path"] / "config.json").read_text())
                self.pooling = 1 if p.get("pooling_mode_mean_tokens") else \
                    2 if p.get("pooling_mode_cls_token") else 3 if p.get("pooling_mode_lasttoken") else 0


# transformers' BertModel names of GGUF's (the reference's own table)
HF_NAMES = [("token_embd_norm.", "embeddings.LayerNorm."),
            ("token_embd.", "embeddings.word_embeddings."),
            ("token_types.", "embeddings.token_type_embeddings."),
            ("position_embd.", "embeddings.position_embeddings."),
            ("attn_q.", "attention.self.query."), ("attn_k.", "attention.self.key."),
            ("attn_v.", "attention.self.value."),
            ("attn_output_norm.", "attention.output.LayerNorm."),
            ("attn_output.", "attention.output.dense."),
            ("ffn_up.", "intermediate.dense."), ("ffn_down.", "output.dense."),
            ("layer_output_norm.", "output.LayerNorm.")]


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def rope_neox(x, theta):
    """x [T, H, hd]: (x[i], x[i + hd/2]) rotated by position·theta^(-2i/hd)."""
    T, _, hd = x.shape
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :hd // 2], x[..., hd // 2:]
    return np.concatenate([a * c - b * s, a * s + b * c], -1)


def hidden(m, ids):
    """The last hidden states [T, dim]."""
    w, T, D, H = m.w, len(ids), m.dim, m.n_heads
    hd = D // H
    x = w["token_embd.weight"][ids] + w["token_types.weight"][0]
    if m.arch == "bert":
        x = x + w["position_embd.weight"][:T]
    x = layer_norm(x, w["token_embd_norm.weight"], w["token_embd_norm.bias"], m.eps)
    for i in range(m.n_layers):
        p = f"blk.{i}."
        if m.arch == "bert":
            q, k, v = (x @ w[p + n + ".weight"].T + w[p + n + ".bias"]
                       for n in ("attn_q", "attn_k", "attn_v"))
        else:
            qkv = x @ w[p + "attn_qkv.weight"].T
            q, k, v = qkv[:, :D], qkv[:, D:2 * D], qkv[:, 2 * D:]
        q, k, v = (t.reshape(T, H, hd) for t in (q, k, v))
        if m.arch == "nomic-bert":
            q, k = rope_neox(q, m.theta), rope_neox(k, m.theta)
        s = np.einsum("thd,uhd->htu", q, k) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        att = np.einsum("htu,uhd->thd", s, v).reshape(T, D)
        o = att @ w[p + "attn_output.weight"].T + w.get(p + "attn_output.bias", 0)
        x = layer_norm(x + o, w[p + "attn_output_norm.weight"], w[p + "attn_output_norm.bias"], m.eps)
        up = x @ w[p + "ffn_up.weight"].T
        if m.arch == "bert":
            h = m.gelu(up + w[p + "ffn_up.bias"])
            f = h @ w[p + "ffn_down.weight"].T + w[p + "ffn_down.bias"]
        else:
            g = x @ w[p + "ffn_gate.weight"].T
            f = (g / (1 + np.exp(-g)) * up) @ w[p + "ffn_down.weight"].T
        x = layer_norm(x + f, w[p + "layer_output_norm.weight"], w[p + "layer_output_norm.bias"], m.eps)
    return x


def pool(rows, pooling):
    """llama.cpp's pooling (0 none, 1 mean, 2 cls, 3 last), then L2 normalization of each
    vector (llama-server's /v1/embeddings)."""
    v = {0: rows, 1: rows.mean(0), 2: rows[0], 3: rows[-1]}[pooling]
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def load(path):
    return Encoder(path)


def embedding(m, ids):
    return pool(hidden(m, list(ids)), m.pooling)
