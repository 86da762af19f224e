"""The reference decoder of accelkit.torch.parallel: a GPT/Llama-style model in plain
PyTorch, described by the training planner's model JSON (`ak plan`, docs/planner.md:
layers, hidden, ffn_hidden, heads, kv_heads, vocab, seq_len, tied_embeddings, gated_ffn,
linear_bias, position learned|rope, norm layernorm|rmsnorm), built either whole (every
module an ordinary one: the single-process reference) or as one rank's part of a
tensor/sequence-parallel split (Megatron-LM's partitioning, with the layers of layers.py).

Tensors are [sequence, batch, hidden], as in the parallel layers. A model is a list of
"pieces" (embedding, decoder layers, head) so that pipeline stages can take runs of them
(build.py). What the model does not implement is refused with a ValueError naming it:
mixture-of-experts (experts > 1) and dropout (a run must equal the reference exactly).
"""
import json
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from . import _comm
from .layers import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding, \
    mark_sequence_parallel, vocab_parallel_cross_entropy
from .mappings import copy_to_tp, gather_from_sequence
from .recompute import attention_core

# The planner's keys (src/plan/describe.c): an unknown key is an error, as there.
_KEYS = {"name", "description", "source", "layers", "hidden", "ffn_hidden", "heads",
         "kv_heads", "vocab", "seq_len", "tied_embeddings", "gated_ffn", "linear_bias",
         "position", "norm", "dropout", "experts", "top_k"}
INIT_STD = 0.02


class ModelSpec:
    """A model description in the planner's JSON format, with the planner's defaults."""

    def __init__(self, desc):
        if isinstance(desc, ModelSpec):
            desc = desc.desc
        if isinstance(desc, str):
            desc = load_json(desc)
        if not isinstance(desc, dict):
            raise ValueError("model description: want a JSON object")
        unknown = sorted(set(desc) - _KEYS)
        if unknown:
            raise ValueError(f"model description: unknown key(s) {', '.join(unknown)}")
        self.desc = dict(desc)
        self.name = desc.get("name", "custom")
        for key in ("layers", "hidden", "heads", "vocab", "seq_len"):
            if key not in desc:
                raise ValueError(f"model {self.name}: '{key}' is required")
        self.layers, self.hidden = int(desc["layers"]), int(desc["hidden"])
        self.heads, self.vocab = int(desc["heads"]), int(desc["vocab"])
        self.seq_len = int(desc["seq_len"])
        self.ffn_hidden = int(desc.get("ffn_hidden", 4 * self.hidden))
        self.kv_heads = int(desc.get("kv_heads", self.heads))
        self.tied = bool(desc.get("tied_embeddings", False))
        self.gated = bool(desc.get("gated_ffn", False))
        self.bias = bool(desc.get("linear_bias", False))
        self.position = desc.get("position", "learned")
        self.norm = desc.get("norm", "layernorm")
        self._refuse(desc)

    def _refuse(self, desc):
        n = self.name
        if self.position not in ("learned", "rope"):
            raise ValueError(f"model {n}: position {self.position!r} is not learned or rope")
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ValueError(f"model {n}: norm {self.norm!r} is not layernorm or rmsnorm")
        if int(desc.get("experts", 0)) > 1:
            raise ValueError(f"model {n}: mixture-of-experts (experts > 1) is not "
                             f"implemented by accelkit.torch.parallel's model")
        if desc.get("dropout", False):
            raise ValueError(f"model {n}: dropout is not implemented by "
                             f"accelkit.torch.parallel's model (describe it with "
                             f"\"dropout\": false)")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"model {n}: heads must divide hidden and kv_heads divide heads")
        if self.position == "rope" and (self.hidden // self.heads) % 2:
            raise ValueError(f"model {n}: rope needs an even head dimension")

    @property
    def head_dim(self):
        return self.hidden // self.heads

    def num_params(self):
        """Parameters of the whole model (the planner's count: a tied output once)."""
        pieces = build_full(self, seed=0)
        total = sum(p.numel() for piece in pieces for p in piece.parameters())
        return total - (pieces[-1].weight.numel() if self.tied else 0)


def load_json(text_or_path):
    """A JSON object from a string holding JSON or a file path."""
    s = text_or_path.strip()
    if s.startswith("{"):
        return json.loads(s)
    with open(text_or_path) as f:
        return json.load(f)


class TP:
    """One rank's tensor-parallel setting: group None = no tensor parallelism (ordinary
    modules, the reference)."""

    def __init__(self, group=None, sequence_parallel=False, overlap=True, chunks=4):
        self.group = group
        self.size = _comm.size(group) if group is not None else 1
        self.rank = _comm.rank(group) if group is not None else 0
        self.sp = bool(sequence_parallel) and group is not None and self.size > 1
        self.overlap, self.chunks = overlap, chunks

    @property
    def parallel(self):
        return self.group is not None and self.size > 1


# ---- building blocks ------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _norm(spec, tp):
    norm = nn.LayerNorm(spec.hidden) if spec.norm == "layernorm" else RMSNorm(spec.hidden)
    return mark_sequence_parallel(norm) if tp.sp else norm


def _column(spec, tp, n_in, n_out):
    if not tp.parallel:
        return nn.Linear(n_in, n_out, bias=spec.bias)
    return ColumnParallelLinear(n_in, n_out, tp.group, bias=spec.bias,
                                sequence_parallel=tp.sp, overlap=tp.overlap, chunks=tp.chunks)


def _row(spec, tp, n_in, n_out):
    if not tp.parallel:
        return nn.Linear(n_in, n_out, bias=spec.bias)
    return RowParallelLinear(n_in, n_out, tp.group, bias=spec.bias, sequence_parallel=tp.sp,
                             overlap=tp.overlap, chunks=tp.chunks)


def _rope(x, base=10000.0):
    """Rotary position embedding of [b, heads, s, d] (rotate-half form)."""
    s, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = torch.arange(s, dtype=torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([angles.cos()] * 2, -1).to(x.dtype)
    sin = torch.cat([angles.sin()] * 2, -1).to(x.dtype)
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def _blocks(t, sizes, tp):
    """Rank tp.rank's rows of each block of t (rows stacked as `sizes`), concatenated:
    the full weight of a fused [q; k; v] or [gate; up] projection -> this rank's."""
    out, at = [], 0
    for n in sizes:
        w = n // tp.size
        out.append(t[at + tp.rank * w:at + (tp.rank + 1) * w])
        at += n
    return torch.cat(out, 0)


def _load_linear(dst, src, tp, row_sizes=None, split="column"):
    """Copies a full nn.Linear into this rank's (column/row-parallel or whole) linear."""
    with torch.no_grad():
        if not tp.parallel:
            dst.weight.copy_(src.weight)
            if dst.bias is not None:
                dst.bias.copy_(src.bias)
        elif split == "column":
            sizes = row_sizes or [src.weight.shape[0]]
            dst.weight.copy_(_blocks(src.weight, sizes, tp))
            if dst.bias is not None:
                dst.bias.copy_(_blocks(src.bias, sizes, tp))
        else:
            dst.load_full(src.weight, src.bias)


class Attention(nn.Module):
    """Causal self-attention with grouped-query heads; QKV one column-parallel linear
    (this rank's q, k and v heads), projection row-parallel."""

    def __init__(self, spec, tp):
        super().__init__()
        if spec.heads % tp.size or spec.kv_heads % tp.size:
            raise ValueError(f"model {spec.name}: tensor-parallel size {tp.size} must divide "
                             f"heads ({spec.heads}) and kv_heads ({spec.kv_heads})")
        self.spec, self.tp = spec, tp
        d = spec.head_dim
        self.sizes = [spec.heads * d, spec.kv_heads * d, spec.kv_heads * d]
        self.qkv = _column(spec, tp, spec.hidden, sum(self.sizes))
        self.proj = _row(spec, tp, spec.heads * d, spec.hidden)
        self.selective = False

    def load_from(self, full):
        _load_linear(self.qkv, full.qkv, self.tp, self.sizes)
        _load_linear(self.proj, full.proj, self.tp, split="row")

    def forward(self, x):
        spec, t = self.spec, self.tp.size
        s, b = x.shape[0], x.shape[1]
        qkv = self.qkv(x)
        s = qkv.shape[0]  # the whole sequence (sequence parallelism gathered it)
        nq, nkv, d = spec.heads // t, spec.kv_heads // t, spec.head_dim
        q, k, v = qkv.split([nq * d, nkv * d, nkv * d], -1)
        q = q.reshape(s, b, nq, d).permute(1, 2, 0, 3)
        k = k.reshape(s, b, nkv, d).permute(1, 2, 0, 3)
        v = v.reshape(s, b, nkv, d).permute(1, 2, 0, 3)
        if spec.position == "rope":
            q, k = _rope(q), _rope(k)
        if nkv != nq:
            k = k.repeat_interleave(nq // nkv, dim=1)
            v = v.repeat_interleave(nq // nkv, dim=1)
        if self.selective and torch.is_grad_enabled():
            ctx = checkpoint(attention_core, q, k, v)
        else:
            ctx = attention_core(q, k, v)
        return self.proj(ctx.permute(2, 0, 1, 3).reshape(s, b, nq * d))


class MLP(nn.Module):
    """FC1 column-parallel (gate and up of a gated FFN fused per rank), GELU or SwiGLU,
    FC2 row-parallel."""

    def __init__(self, spec, tp):
        super().__init__()
        if spec.ffn_hidden % tp.size:
            raise ValueError(f"model {spec.name}: tensor-parallel size {tp.size} must divide "
                             f"ffn_hidden ({spec.ffn_hidden})")
        self.spec, self.tp = spec, tp
        f = spec.ffn_hidden
        self.sizes = [f, f] if spec.gated else [f]
        self.fc1 = _column(spec, tp, spec.hidden, sum(self.sizes))
        self.fc2 = _row(spec, tp, f, spec.hidden)

    def load_from(self, full):
        _load_linear(self.fc1, full.fc1, self.tp, self.sizes)
        _load_linear(self.fc2, full.fc2, self.tp, split="row")

    def forward(self, x):
        h = self.fc1(x)
        if self.spec.gated:
            gate, up = h.chunk(2, -1)
            h = F.silu(gate) * up
        else:
            h = F.gelu(h)
        return self.fc2(h)


class DecoderLayer(nn.Module):
    """Pre-norm decoder layer. recompute: "none", "selective" (the attention core) or
    "full" (the layer under checkpoint, only its input kept)."""

    def __init__(self, spec, tp):
        super().__init__()
        self.ln1, self.attn = _norm(spec, tp), Attention(spec, tp)
        self.ln2, self.mlp = _norm(spec, tp), MLP(spec, tp)
        self.recompute = "none"

    @property
    def recompute(self):
        return self._recompute

    @recompute.setter
    def recompute(self, mode):
        if mode not in ("none", "selective", "full"):
            raise ValueError(f"DecoderLayer: recompute {mode!r} is not none, selective "
                             f"or full")
        self._recompute = mode
        self.attn.selective = mode == "selective"

    def load_from(self, full):
        self.ln1.load_state_dict(full.ln1.state_dict())
        self.ln2.load_state_dict(full.ln2.state_dict())
        self.attn.load_from(full.attn)
        self.mlp.load_from(full.mlp)

    def _layer(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))

    def forward(self, x):
        if self._recompute == "full" and torch.is_grad_enabled():
            return checkpoint(self._layer, x)
        return self._layer(x)


class Embedding(nn.Module):
    """Token embedding (vocabulary-parallel under TP) plus learned positions; ids [s, b]
    -> [s, b, h], or this rank's sequence shard [s/t, b, h] under SP."""

    def __init__(self, spec, tp):
        super().__init__()
        if spec.vocab % tp.size:
            raise ValueError(f"model {spec.name}: tensor-parallel size {tp.size} must divide "
                             f"vocab ({spec.vocab})")
        self.spec, self.tp = spec, tp
        if tp.parallel:
            self.tokens = VocabParallelEmbedding(spec.vocab, spec.hidden, tp.group,
                                                 sequence_parallel=tp.sp)
        else:
            self.tokens = nn.Embedding(spec.vocab, spec.hidden)
        self.positions = None
        if spec.position == "learned":
            self.positions = nn.Parameter(torch.zeros(spec.seq_len, spec.hidden))
            if tp.sp:
                self.positions.sequence_parallel = True

    def load_from(self, full):
        if self.tp.parallel:
            self.tokens.load_full(full.tokens.weight)
        else:
            self.tokens.load_state_dict(full.tokens.state_dict())
        if self.positions is not None:
            with torch.no_grad():
                self.positions.copy_(full.positions)

    def forward(self, ids):
        s = ids.shape[0]
        if s > self.spec.seq_len:
            raise ValueError(f"model {self.spec.name}: sequence of {s} tokens is longer "
                             f"than seq_len {self.spec.seq_len}")
        x = self.tokens(ids)
        if self.positions is not None:
            pos = self.positions[:s]
            if self.tp.sp:
                pos = _comm.split_dim0(pos, self.tp.group)
            x = x + pos.unsqueeze(1)
        return x


class Head(nn.Module):
    """Final norm and the output logits (vocabulary-split under TP: [s, b, V/t]). A tied
    model's head keeps its own copy of the embedding (as Megatron-LM's last stage does);
    build.py sums the two copies' gradients so that they stay equal."""

    def __init__(self, spec, tp):
        super().__init__()
        self.spec, self.tp = spec, tp
        self.norm = _norm(spec, tp)
        self.weight = nn.Parameter(torch.empty(spec.vocab // tp.size, spec.hidden))

    def load_from(self, full):
        self.norm.load_state_dict(full.norm.state_dict())
        n, r = self.weight.shape[0], self.tp.rank
        with torch.no_grad():
            self.weight.copy_(full.weight[r * n:(r + 1) * n])

    def forward(self, x):
        x = self.norm(x)
        if self.tp.sp:
            x = gather_from_sequence(x, self.tp.group)
        elif self.tp.parallel:
            x = copy_to_tp(x, self.tp.group)
        return F.linear(x, self.weight)


def loss_fn(tp):
    """Mean token cross-entropy of (vocabulary-split) logits [s, b, V/t] and targets."""
    def fn(logits, targets):
        if tp.parallel:
            return vocab_parallel_cross_entropy(logits, targets, tp.group).mean()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return fn


def make_pieces(spec, tp):
    """[Embedding, DecoderLayer x layers, Head] of one rank (randomly initialized)."""
    return [Embedding(spec, tp)] + [DecoderLayer(spec, tp) for _ in range(spec.layers)] + \
        [Head(spec, tp)]


def _init_full(pieces, spec):
    """GPT-2's initialization: normal(0.02) weights, the residual projections scaled by
    1/sqrt(2 layers), zero biases, unit norms; a tied head starts as the embedding."""
    with torch.no_grad():
        emb, head = pieces[0], pieces[-1]
        emb.tokens.weight.normal_(0, INIT_STD)
        if emb.positions is not None:
            emb.positions.normal_(0, INIT_STD / 2)
        for layer in pieces[1:-1]:
            for lin, std in ((layer.attn.qkv, INIT_STD), (layer.mlp.fc1, INIT_STD),
                             (layer.attn.proj, INIT_STD / math.sqrt(2 * spec.layers)),
                             (layer.mlp.fc2, INIT_STD / math.sqrt(2 * spec.layers))):
                lin.weight.normal_(0, std)
                if lin.bias is not None:
                    lin.bias.zero_()
        if spec.tied:
            head.weight.copy_(emb.tokens.weight)
        else:
            head.weight.normal_(0, INIT_STD)


def build_full(spec, seed=0):
    """The whole model as a list of ordinary-module pieces, initialized from `seed`."""
    spec = ModelSpec(spec)
    torch.manual_seed(seed)
    pieces = make_pieces(spec, TP())
    _init_full(pieces, spec)
    return pieces


class Reference(nn.Module):
    """The single-process model: ids [s, b] -> mean token loss against targets."""

    def __init__(self, spec, seed=0):
        super().__init__()
        self.spec = ModelSpec(spec)
        self.pieces = nn.ModuleList(build_full(self.spec, seed))
        self.loss = loss_fn(TP())

    def forward(self, ids, targets):
        x = ids
        for piece in self.pieces:
            x = piece(x)
        return self.loss(x, targets)

    def tie_grads(self):
        """A tied model: the embedding and head copies get the sum of their gradients."""
        if self.spec.tied:
            emb, head = self.pieces[0].tokens.weight, self.pieces[-1].weight
            total = emb.grad + head.grad
            emb.grad.copy_(total)
            head.grad.copy_(total)
