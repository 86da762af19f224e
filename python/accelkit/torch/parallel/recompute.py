"""Activation recompute of accelkit.torch.parallel, in the planner's four modes, and the
reference GPT-style decoder block that implements them (plain PyTorch; tensors are
[sequence, batch, hidden] as in the parallel layers).

    none       every activation saved for backward
    selective  the attention core (scores, softmax, probabilities x V) recomputed in
               backward: its s x s tensors per head are not kept
    full       the whole layer under torch.utils.checkpoint: only its input is kept
    hybrid:k   full on the first k layers of each pipeline stage, selective on the rest

    blocks = [GPTBlock(256, 8) for _ in range(4)]
    set_recompute(blocks, "hybrid:1")

Checkpointing uses torch's reentrant form (PyTorch 1.13's default), which needs the
checkpointed input to require grad: a block's input does (it comes from the embedding or
from a pipeline receive); the attention core's q, k, v do. See docs/parallel.md.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

MODES = ("none", "selective", "full")


def parse_recompute(mode):
    """"none" | "selective" | "full" | "hybrid:k" -> (base mode, k); refuses the rest."""
    if mode in MODES:
        return mode, 0
    if isinstance(mode, str) and mode.startswith("hybrid:"):
        try:
            k = int(mode[len("hybrid:"):])
        except ValueError:
            k = -1
        if k >= 0:
            return "hybrid", k
    raise ValueError(f"recompute mode {mode!r} is not one of none, selective, full, "
                     f"hybrid:K (K >= 0 layers per stage)")


def layer_modes(mode, num_layers):
    """The mode of each of a stage's num_layers layers under `mode`."""
    base, k = parse_recompute(mode)
    if base != "hybrid":
        return [base] * num_layers
    return ["full" if i < k else "selective" for i in range(num_layers)]


def set_recompute(blocks, mode):
    """Sets the recompute mode of a stage's blocks (GPTBlock or anything with a
    `recompute` attribute), hybrid:k counting from the stage's first block."""
    blocks = list(blocks)
    for block, m in zip(blocks, layer_modes(mode, len(blocks))):
        block.recompute = m


def attention_core(q, k, v):
    """Causal softmax(q kᵀ / √d) v over [batch, heads, s, d] tensors."""
    s = q.shape[-2]
    scores = q.matmul(k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1).matmul(v)


class GPTBlock(nn.Module):
    """A pre-norm decoder layer: x + attn(ln1(x)), then + mlp(ln2(·)); GELU MLP of 4x
    hidden; causal attention. recompute: "none", "selective" or "full" (the per-layer
    modes; set_recompute spreads hybrid:k over a stage)."""

    def __init__(self, hidden, heads, recompute="none"):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"GPTBlock: hidden {hidden} is not divisible by heads {heads}")
        self.heads, self.head_dim = heads, hidden // heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.recompute = recompute

    @property
    def recompute(self):
        return self._recompute

    @recompute.setter
    def recompute(self, mode):
        if mode not in MODES:
            raise ValueError(f"GPTBlock: recompute {mode!r} is not one of {', '.join(MODES)}"
                             f" (hybrid:k is a stage's choice: use set_recompute)")
        self._recompute = mode

    def _attention(self, x):
        s, b = x.shape[:2]
        qkv = self.qkv(x).view(s, b, self.heads, 3, self.head_dim)
        q, k, v = qkv.permute(3, 1, 2, 0, 4).unbind(0)  # each [b, heads, s, d]
        if self._recompute == "selective":
            ctx = checkpoint(attention_core, q, k, v)
        else:
            ctx = attention_core(q, k, v)
        return self.proj(ctx.permute(2, 0, 1, 3).reshape(s, b, -1))

    def _layer(self, x):
        x = x + self._attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def forward(self, x):
        if self._recompute == "full" and torch.is_grad_enabled():
            return checkpoint(self._layer, x)
        return self._layer(x)


class SavedTensorMeter:
    """Counts the bytes autograd saves for backward inside the `with` (unique storages,
    through torch.autograd.graph.saved_tensors_hooks): the activation memory a forward
    keeps alive until its backward. Parameters saved by reference count too."""

    def __init__(self):
        self.bytes = 0
        self._seen = set()

    def _pack(self, t):
        storage = t.storage()
        if storage.data_ptr() not in self._seen:
            self._seen.add(storage.data_ptr())
            self.bytes += storage.nbytes()
        return t

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)
        return False
