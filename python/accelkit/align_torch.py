"""A PyTorch reference of the Llama-family decoder for `ak align --ref torch`: reads a
Hugging Face folder (config.json + safetensors, sharded or not) and computes, in float64 or
float32, the logits of every position and the "logit lens" of every layer (the final norm
and output matrix applied to the hidden state after layer L, L = 1 .. n_layers), which is
what accelkit's per-layer output is compared with.

Written from the architecture's definition in Hugging Face's conventions (rotate-half RoPE
over the un-permuted q/k rows, repeat_kv for grouped-query attention, RMSNorm in the
compute type), independently of accelkit's C engine. Architectures and settings it does
not implement are refused by name, never approximated.
"""
import json
import math
from pathlib import Path

import numpy as np

SUPPORTED = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
             "MistralForCausalLM": "mistral"}


class RefusedError(ValueError):
    """The folder holds something this reference does not implement."""


def _import_torch():
    try:
        import torch
    except ImportError as e:
        raise RefusedError("--ref torch needs PyTorch (Debian's python3-torch; scripts/setup "
                           "installs it)") from e
    return torch


def read_config(folder):
    path = Path(folder) / "config.json"
    if not path.exists():
        raise RefusedError(f"{folder} is not a Hugging Face folder (no config.json)")
    cfg = json.loads(path.read_text())
    arch = (cfg.get("architectures") or ["?"])[0]
    if arch not in SUPPORTED:
        raise RefusedError(f"architecture {arch} is not implemented by the torch reference "
                           f"({', '.join(SUPPORTED)})")
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise RefusedError(f"hidden_act '{act}' is not implemented (silu)")
    if cfg.get("mlp_bias"):
        raise RefusedError("mlp_bias is not implemented")
    return cfg


class TorchReference:
    """The model of a Hugging Face folder, in `dtype` ("float64" or "float32")."""

    def __init__(self, folder, dtype="float64"):
        self.torch = torch = _import_torch()
        from_files = _llm_files()
        self.cfg = cfg = read_config(folder)
        self.dtype = {"float64": torch.float64, "float32": torch.float32}[dtype]
        np_type = np.float64 if dtype == "float64" else np.float32
        self.w = {k: torch.from_numpy(np.ascontiguousarray(v))
                  for k, v in from_files.read_hf_tensors(folder, np_type).items()}
        self.n_layers = cfg["num_hidden_layers"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv = cfg.get("num_key_value_heads", self.n_heads)
        self.dim = cfg["hidden_size"]
        self.head_dim = cfg.get("head_dim") or self.dim // self.n_heads
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
        self.inv_freq = self._inv_freq()
        self.pos_scale = 1.0
        rs = cfg.get("rope_scaling") or {}
        if rs.get("rope_type", rs.get("type")) == "linear":
            self.pos_scale = 1.0 / rs["factor"]
        lm = self.w.get("lm_head.weight")
        self.lm_head = lm if lm is not None else self.w["model.embed_tokens.weight"]

    def _inv_freq(self):
        torch, cfg, hd = self.torch, self.cfg, self.head_dim
        theta = cfg.get("rope_theta", 10000.0)
        inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        rs = cfg.get("rope_scaling") or {}
        kind = rs.get("rope_type", rs.get("type"))
        if kind in (None, "default", "linear"):
            return inv
        if kind != "llama3":
            raise RefusedError(f"rope_scaling '{kind}' is not implemented (linear, llama3)")
        orig = rs["original_max_position_embeddings"]
        lo, hi, factor = rs["low_freq_factor"], rs["high_freq_factor"], rs["factor"]
        wavelen = 2 * math.pi / inv
        smooth = (orig / wavelen - lo) / (hi - lo)
        mid = (1 - smooth) * inv / factor + smooth * inv
        out = torch.where(wavelen > orig / lo, inv / factor, inv)
        return torch.where((wavelen <= orig / lo) & (wavelen >= orig / hi), mid, out)

    def _norm(self, x, weight):
        var = x.pow(2).mean(-1, keepdim=True)
        return weight * (x * self.torch.rsqrt(var + self.eps))

    def _rope(self, x, cos, sin):
        half = self.head_dim // 2
        rotated = self.torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def _linear(self, x, prefix):
        y = x @ self.w[prefix + ".weight"].T
        bias = self.w.get(prefix + ".bias")
        return y if bias is None else y + bias

    def _attention(self, x, p, cos, sin, mask):
        T, H, KV, hd = x.shape[0], self.n_heads, self.n_kv, self.head_dim
        q = self._linear(x, p + "self_attn.q_proj").view(T, H, hd).transpose(0, 1)
        k = self._linear(x, p + "self_attn.k_proj").view(T, KV, hd).transpose(0, 1)
        v = self._linear(x, p + "self_attn.v_proj").view(T, KV, hd).transpose(0, 1)
        q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
        k, v = k.repeat_interleave(H // KV, dim=0), v.repeat_interleave(H // KV, dim=0)
        scores = q @ k.transpose(1, 2) / math.sqrt(hd) + mask
        out = self.torch.softmax(scores, dim=-1) @ v
        return self._linear(out.transpose(0, 1).reshape(T, H * hd), p + "self_attn.o_proj")

    def _mlp(self, x, p):
        gate = self._linear(x, p + "mlp.gate_proj")
        up = self._linear(x, p + "mlp.up_proj")
        return self._linear(self.torch.nn.functional.silu(gate) * up, p + "mlp.down_proj")

    def _mask(self, T):
        torch = self.torch
        i = torch.arange(T)
        allowed = i[None, :] <= i[:, None]
        if self.window:
            allowed &= i[:, None] - i[None, :] < self.window
        zero = torch.zeros((T, T), dtype=self.dtype)
        return zero.masked_fill(~allowed, float("-inf"))

    def run(self, ids, layers=False):
        """Logits [T, n_vocab] (numpy float64); with layers also the logit lens after
        every layer: a list of n_layers arrays (the last one is the logits)."""
        torch = self.torch
        with torch.no_grad():
            T = len(ids)
            pos = torch.arange(T, dtype=torch.float64) * self.pos_scale
            emb = torch.cat([torch.outer(pos, self.inv_freq)] * 2, dim=-1)
            cos, sin = emb.cos().to(self.dtype)[None], emb.sin().to(self.dtype)[None]
            mask = self._mask(T)
            x = self.w["model.embed_tokens.weight"][torch.tensor(ids)].to(self.dtype)
            lens = [] if layers else None
            for i in range(self.n_layers):
                p = f"model.layers.{i}."
                x = x + self._attention(self._norm(x, self.w[p + "input_layernorm.weight"]),
                                        p, cos, sin, mask)
                x = x + self._mlp(self._norm(x, self.w[p + "post_attention_layernorm.weight"]), p)
                if layers:
                    lens.append(self._logits(x))
            final = self._logits(x)
        return (final, lens) if layers else final

    def _logits(self, x):
        h = self._norm(x, self.w["model.norm.weight"])
        return (h @ self.lm_head.T).double().numpy()

    def greedy(self, ids, n):
        """n argmax tokens after ids (each step recomputes the whole sequence)."""
        seq, out = list(ids), []
        for _ in range(n):
            out.append(int(np.argmax(self.run(seq)[-1])))
            seq.append(out[-1])
        return out


def _llm_files():
    """llm_files.py beside this file, imported by path (the package's __init__ loads
    libaccelkit, which the reference does not need)."""
    import importlib.util
    import sys
    name = "accelkit_llm_files"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("llm_files.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
