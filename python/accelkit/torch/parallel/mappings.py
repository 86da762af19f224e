"""Megatron-style conjugate communication operators as autograd Functions, on an explicit
tensor-parallel process group. Sequence tensors are [sequence, batch, hidden]: the
sequence-parallel operators work along dim 0, so every shard is contiguous.

    copy_to_tp            identity        | all-reduce        ("f")
    reduce_from_tp        all-reduce      | identity          ("g")
    scatter_to_tp         split last dim  | all-gather last dim
    gather_from_tp        all-gather last | split last dim
    scatter_to_sequence   split dim 0     | all-gather dim 0
    gather_from_sequence  all-gather dim0 | reduce-scatter dim 0
    reduce_scatter_to_sequence  reduce-scatter dim 0 | all-gather dim 0
"""
import torch

from . import _comm


class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous().clone()
        _comm.all_reduce(g, ctx.group)
        return g, None


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        y = x.contiguous().clone()
        _comm.all_reduce(y, group)
        return y

    @staticmethod
    def backward(ctx, g):
        return g, None


class _ScatterToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _comm.split_last(x, group)

    @staticmethod
    def backward(ctx, g):
        return _comm.all_gather_last(g.contiguous(), ctx.group), None


class _GatherFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _comm.all_gather_last(x.contiguous(), group)

    @staticmethod
    def backward(ctx, g):
        return _comm.split_last(g, ctx.group), None


class _ScatterToSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _comm.split_dim0(x, group)

    @staticmethod
    def backward(ctx, g):
        return _comm.all_gather_dim0(g, ctx.group)[0], None


class _GatherFromSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _comm.all_gather_dim0(x, group)[0]

    @staticmethod
    def backward(ctx, g):
        return _comm.reduce_scatter_dim0(g, ctx.group)[0], None


class _ReduceScatterToSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _comm.reduce_scatter_dim0(x, group)[0]

    @staticmethod
    def backward(ctx, g):
        return _comm.all_gather_dim0(g, ctx.group)[0], None


def copy_to_tp(x, group):
    return _CopyToTP.apply(x, group)


def reduce_from_tp(x, group):
    return _ReduceFromTP.apply(x, group)


def scatter_to_tp(x, group):
    return _ScatterToTP.apply(x, group)


def gather_from_tp(x, group):
    return _GatherFromTP.apply(x, group)


def scatter_to_sequence(x, group):
    return _ScatterToSequence.apply(x, group)


def gather_from_sequence(x, group):
    return _GatherFromSequence.apply(x, group)


def reduce_scatter_to_sequence(x, group):
    return _ReduceScatterToSequence.apply(x, group)
