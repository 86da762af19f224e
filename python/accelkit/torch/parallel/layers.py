"""Tensor-parallel layers (Megatron-LM's partitioning) on an explicit process group:
ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding, vocab-parallel
cross-entropy, and the sequence-parallel helpers. Sequence tensors are
[sequence, batch, hidden].

Communication overlap (overlap=True, the default): the parallel linears' autograd
Functions split their GEMMs into `chunks` row blocks and start each block's collective
asynchronously before computing the next (see _comm.py); the weight-gradient GEMM runs
while the last blocks are reduced. overlap=False runs the same collectives synchronously,
one per layer, so the two can be compared.
"""
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from . import _comm
from .mappings import gather_from_tp, reduce_from_tp, \
    reduce_scatter_to_sequence, scatter_to_tp


class _Config:
    """What a parallel linear's autograd Function needs besides tensors."""

    def __init__(self, group, sequence_parallel, overlap, chunks):
        self.group = group
        self.sp = sequence_parallel
        self.chunks = chunks if overlap else 1
        self.overlap = overlap


def _weight_grad(g, x, has_bias):
    """(dL/dW, dL/db) of y = x W^T + b from the output gradient g."""
    g2 = g.reshape(-1, g.shape[-1])
    gw = g2.t().matmul(x.reshape(-1, x.shape[-1]))
    return gw, (g2.sum(0) if has_bias else None)


class _ColumnLinear(torch.autograd.Function):
    """y = x W_r^T + b_r. Forward under SP: all-gather x along the sequence (overlapping
    this rank's own rows). Backward: dL/dx all-reduced (reduce-scattered under SP)."""

    @staticmethod
    def forward(ctx, x, weight, bias, cfg):
        def mm(a):
            return F.linear(a, weight, bias)
        if cfg.sp:
            total, y = _comm.all_gather_matmul(x, mm, cfg.group, cfg.overlap)
        else:
            total, y = x, mm(x)
        ctx.cfg, ctx.has_bias = cfg, bias is not None
        ctx.save_for_backward(total, weight)
        return y

    @staticmethod
    def backward(ctx, g):
        total, weight = ctx.saved_tensors
        cfg = ctx.cfg
        g = g.contiguous()

        def wgrad():
            return _weight_grad(g, total, ctx.has_bias)
        if not ctx.needs_input_grad[0]:
            gw, gb = wgrad()
            return None, gw, gb, None
        pipeline = _comm.matmul_reduce_scatter if cfg.sp else _comm.matmul_all_reduce
        gx, (gw, gb) = pipeline(g, lambda a: a.matmul(weight), cfg.group, cfg.chunks,
                                between=wgrad)
        return gx, gw, gb, None


class _RowLinear(torch.autograd.Function):
    """y = reduce(x_r W_r^T) + b, reduce = all-reduce (reduce-scatter along the sequence
    under SP), chunked. Backward under SP: all-gather dL/dy (overlapping this rank's
    rows); otherwise no communication."""

    @staticmethod
    def forward(ctx, x, weight, bias, cfg):
        pipeline = _comm.matmul_reduce_scatter if cfg.sp else _comm.matmul_all_reduce
        y, _ = pipeline(x, lambda a: F.linear(a, weight), cfg.group, cfg.chunks)
        if bias is not None:
            y = y + bias
        ctx.cfg, ctx.has_bias = cfg, bias is not None
        ctx.save_for_backward(x, weight)
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        cfg = ctx.cfg
        g = g.contiguous()
        gb = g.reshape(-1, g.shape[-1]).sum(0) if ctx.has_bias else None
        if cfg.sp:
            total_g, gx = _comm.all_gather_matmul(g, lambda a: a.matmul(weight), cfg.group,
                                                  cfg.overlap)
        else:
            total_g, gx = g, g.matmul(weight)
        gw, _ = _weight_grad(total_g, x, False)
        return (gx if ctx.needs_input_grad[0] else None), gw, gb, None


def _check_divisible(what, n, group):
    tp = _comm.size(group)
    if n % tp:
        raise ValueError(f"accelkit.torch.parallel.{what}: {n} is not divisible by the "
                         f"tensor-parallel size {tp}")
    return n // tp


def _init_uniform(t, fan_in):
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    with torch.no_grad():
        t.uniform_(-bound, bound)


class ColumnParallelLinear(nn.Module):
    """A Linear whose output features are split over the group: this rank holds rows
    [r*out/tp, (r+1)*out/tp) of W and b. gather_output=True all-gathers the output's last
    dimension (otherwise the output stays split, for a RowParallelLinear to consume).
    sequence_parallel=True takes the input as this rank's sequence shard ([s/tp, b, in])
    and all-gathers it along the sequence."""

    def __init__(self, in_features, out_features, group, bias=True, gather_output=False,
                 sequence_parallel=False, overlap=True, chunks=4, dtype=None):
        super().__init__()
        if gather_output and sequence_parallel:
            raise ValueError("accelkit.torch.parallel.ColumnParallelLinear: gather_output "
                             "cannot be combined with sequence_parallel")
        self.group, self.in_features, self.out_features = group, in_features, out_features
        self.gather_output, self.sequence_parallel = gather_output, sequence_parallel
        self.overlap, self.chunks = overlap, chunks
        local = _check_divisible("ColumnParallelLinear", out_features, group)
        self.weight = nn.Parameter(torch.empty(local, in_features, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(local, dtype=dtype)) if bias else None
        _init_uniform(self.weight, in_features)

    def load_full(self, weight, bias=None):
        """Copies this rank's rows of a full [out, in] weight (and [out] bias)."""
        n, r = self.weight.shape[0], _comm.rank(self.group)
        with torch.no_grad():
            self.weight.copy_(weight[r * n:(r + 1) * n])
            if self.bias is not None and bias is not None:
                self.bias.copy_(bias[r * n:(r + 1) * n])
        return self

    def forward(self, x):
        cfg = _Config(self.group, self.sequence_parallel, self.overlap, self.chunks)
        y = _ColumnLinear.apply(x, self.weight, self.bias, cfg)
        return gather_from_tp(y, self.group) if self.gather_output else y


class RowParallelLinear(nn.Module):
    """A Linear whose input features are split over the group: this rank holds columns
    [r*in/tp, (r+1)*in/tp) of W; the bias is whole. input_is_parallel=False splits a whole
    input first. sequence_parallel=True reduce-scatters the output along the sequence
    (each rank gets [s/tp, b, out]); the bias is then marked `sequence_parallel` (its
    gradient is partial per rank: see allreduce_sequence_parallel_grads)."""

    def __init__(self, in_features, out_features, group, bias=True, input_is_parallel=True,
                 sequence_parallel=False, overlap=True, chunks=4, dtype=None):
        super().__init__()
        if sequence_parallel and not input_is_parallel:
            raise ValueError("accelkit.torch.parallel.RowParallelLinear: sequence_parallel "
                             "needs input_is_parallel=True")
        self.group, self.in_features, self.out_features = group, in_features, out_features
        self.input_is_parallel, self.sequence_parallel = input_is_parallel, sequence_parallel
        self.overlap, self.chunks = overlap, chunks
        local = _check_divisible("RowParallelLinear", in_features, group)
        self.weight = nn.Parameter(torch.empty(out_features, local, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(out_features, dtype=dtype)) if bias else None
        _init_uniform(self.weight, in_features)
        if self.bias is not None and sequence_parallel:
            self.bias.sequence_parallel = True

    def load_full(self, weight, bias=None):
        """Copies this rank's columns of a full [out, in] weight (and the whole bias)."""
        n, r = self.weight.shape[1], _comm.rank(self.group)
        with torch.no_grad():
            self.weight.copy_(weight[:, r * n:(r + 1) * n])
            if self.bias is not None and bias is not None:
                self.bias.copy_(bias)
        return self

    def forward(self, x):
        if not self.input_is_parallel:
            x = scatter_to_tp(x, self.group)
        cfg = _Config(self.group, self.sequence_parallel, self.overlap, self.chunks)
        return _RowLinear.apply(x, self.weight, self.bias, cfg)


class VocabParallelEmbedding(nn.Module):
    """An Embedding whose vocabulary is split over the group: this rank holds rows
    [r*V/tp, (r+1)*V/tp). Ids outside the range look up zeros; the partial embeddings are
    summed by an all-reduce, or reduce-scattered along the sequence under SP (input ids
    [s, b] -> output [s/tp, b, dim])."""

    def __init__(self, num_embeddings, embedding_dim, group, sequence_parallel=False,
                 dtype=None):
        super().__init__()
        self.group, self.num_embeddings = group, num_embeddings
        self.sequence_parallel = sequence_parallel
        local = _check_divisible("VocabParallelEmbedding", num_embeddings, group)
        self.vocab_start = _comm.rank(group) * local
        self.vocab_end = self.vocab_start + local
        self.weight = nn.Parameter(torch.empty(local, embedding_dim, dtype=dtype))
        with torch.no_grad():
            self.weight.normal_()

    def load_full(self, weight):
        with torch.no_grad():
            self.weight.copy_(weight[self.vocab_start:self.vocab_end])
        return self

    def forward(self, ids):
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_embeddings):
            raise ValueError(f"accelkit.torch.parallel.VocabParallelEmbedding: token ids "
                             f"must lie in [0, {self.num_embeddings}), got "
                             f"[{int(ids.min())}, {int(ids.max())}]")
        outside = (ids < self.vocab_start) | (ids >= self.vocab_end)
        local_ids = (ids - self.vocab_start).masked_fill(outside, 0)
        partial = F.embedding(local_ids, self.weight).masked_fill(outside.unsqueeze(-1), 0.0)
        if self.sequence_parallel:
            return reduce_scatter_to_sequence(partial, self.group)
        return reduce_from_tp(partial, self.group)


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """Per-token cross-entropy of logits split over the vocabulary, numerically stable:
    the global max comes from a MAX all-reduce, then the target logit and the sum of
    exponentials from one SUM all-reduce (stacked)."""

    @staticmethod
    def forward(ctx, logits, target, group):
        local_v = logits.shape[-1]
        lo = _comm.rank(group) * local_v
        gmax = logits.max(dim=-1)[0].contiguous()
        _comm.all_reduce(gmax, group, op=dist.ReduceOp.MAX)
        shifted = logits - gmax.unsqueeze(-1)
        outside = (target < lo) | (target >= lo + local_v)
        local_t = (target - lo).masked_fill(outside, 0)
        picked = shifted.gather(-1, local_t.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        exp = shifted.exp()
        sums = torch.stack([picked, exp.sum(dim=-1)]).contiguous()
        _comm.all_reduce(sums, group)
        picked, sum_exp = sums[0], sums[1]
        ctx.save_for_backward(exp.div_(sum_exp.unsqueeze(-1)), outside, local_t)
        return sum_exp.log() - picked

    @staticmethod
    def backward(ctx, g):
        softmax, outside, local_t = ctx.saved_tensors
        grad = softmax.clone()
        hit = (~outside).to(grad.dtype).unsqueeze(-1)
        grad.scatter_add_(-1, local_t.unsqueeze(-1), -hit)
        return grad.mul_(g.unsqueeze(-1)), None, None


def vocab_parallel_cross_entropy(logits, target, group):
    """Per-token losses (shape of target) of vocabulary-split logits [..., V/tp]."""
    if target.shape != logits.shape[:-1]:
        raise ValueError(f"accelkit.torch.parallel.vocab_parallel_cross_entropy: target "
                         f"shape {tuple(target.shape)} must be the logits' "
                         f"{tuple(logits.shape[:-1])}")
    return _VocabParallelCrossEntropy.apply(logits, target, group)


def mark_sequence_parallel(module):
    """Marks a module's parameters as living in a sequence-parallel region (a norm on the
    sequence shard): their gradients are partial sums per rank."""
    for p in module.parameters():
        p.sequence_parallel = True
    return module


def allreduce_sequence_parallel_grads(model, group):
    """Sums over the group the gradients of parameters marked sequence_parallel (norms on
    the sequence shard, row-parallel biases under SP), in one all-reduce. Call after
    backward, before the optimizer step."""
    grads = [p.grad for p in model.parameters()
             if getattr(p, "sequence_parallel", False) and p.grad is not None]
    if not grads or _comm.size(group) == 1:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    _comm.all_reduce(flat, group)
    off = 0
    for g in grads:
        g.copy_(flat[off:off + g.numel()].view_as(g))
        off += g.numel()


__all__ = ["ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
           "vocab_parallel_cross_entropy", "mark_sequence_parallel",
           "allreduce_sequence_parallel_grads"]
