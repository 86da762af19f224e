"""Collective helpers of accelkit.torch.parallel: thin calls on a torch.distributed
process group (an accelkit group from dist.new_group, or any backend), plus the chunked
GEMM+collective pipelines that overlap tensor-parallel communication with compute.

Every helper takes the group explicitly; with a group of one rank the collectives are
skipped (a tp=1 layer is an ordinary layer).
"""
import torch
import torch.distributed as dist


def size(group):
    return dist.get_world_size(group)


def rank(group):
    return dist.get_rank(group)


def all_reduce(t, group, op=dist.ReduceOp.SUM, async_op=False):
    if size(group) == 1:
        return None
    return dist.all_reduce(t, op=op, group=group, async_op=async_op)


def all_gather_dim0(x, group, async_op=False):
    """x [n, ...] from every rank -> ([world*n, ...], work or None)."""
    n = size(group)
    x = x.contiguous()
    if n == 1:
        return x, None
    out = torch.empty((n * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype)
    work = dist.all_gather_into_tensor(out, x, group=group, async_op=async_op)
    return out, work


def reduce_scatter_dim0(x, group, async_op=False):
    """x [world*n, ...] summed over ranks, this rank keeps rows [rank*n, (rank+1)*n)."""
    n = size(group)
    x = x.contiguous()
    if n == 1:
        return x, None
    if x.shape[0] % n:
        raise ValueError(f"accelkit.torch.parallel: dim 0 ({x.shape[0]}) is not divisible "
                         f"by the tensor-parallel size {n}")
    out = torch.empty((x.shape[0] // n,) + tuple(x.shape[1:]), dtype=x.dtype)
    work = dist.reduce_scatter_tensor(out, x, group=group, async_op=async_op)
    return out, work


def all_gather_last(x, group):
    """Concatenates x along its last dimension over the ranks (rank order)."""
    n = size(group)
    if n == 1:
        return x
    moved = x.movedim(-1, 0).contiguous()
    gathered, _ = all_gather_dim0(moved, group)
    return gathered.movedim(0, -1).contiguous()


def split_last(x, group):
    """This rank's equal slice of x's last dimension."""
    n = size(group)
    if n == 1:
        return x
    if x.shape[-1] % n:
        raise ValueError(f"accelkit.torch.parallel: last dim ({x.shape[-1]}) is not "
                         f"divisible by the tensor-parallel size {n}")
    w = x.shape[-1] // n
    r = rank(group)
    return x[..., r * w:(r + 1) * w].contiguous()


def split_dim0(x, group):
    n = size(group)
    if n == 1:
        return x
    if x.shape[0] % n:
        raise ValueError(f"accelkit.torch.parallel: sequence length ({x.shape[0]}) is not "
                         f"divisible by the tensor-parallel size {n}")
    w = x.shape[0] // n
    r = rank(group)
    return x[r * w:(r + 1) * w].contiguous()


def _wait(works):
    for w in works:
        if w is not None:
            w.wait()


# ---- overlapped pipelines --------------------------------------------------------------
# Each one splits a GEMM (`mm`, a function of a row block) into `chunks` row blocks and
# launches the collective of block i asynchronously before computing block i+1. The
# accelkit backend runs a group's collectives in order on its own thread (ctypes drops the
# GIL; torch's GEMMs drop it too), so the wire and the cores work at the same time.
# `between` runs after the last launch and before the waits: the caller puts independent
# work there (the weight-gradient GEMM), which the last collective then overlaps.


def matmul_all_reduce(a, mm, group, chunks, between=None):
    """all_reduce(mm(a)) with a split along dim 0; returns (result, between's value)."""
    if size(group) == 1 or chunks <= 1:
        y = mm(a)
        all_reduce(y, group)
        return y, (between() if between else None)
    parts, works = [], []
    for block in torch.tensor_split(a, min(chunks, a.shape[0]), dim=0):
        y = mm(block).contiguous()
        works.append(all_reduce(y, group, async_op=True))
        parts.append(y)
    extra = between() if between else None
    _wait(works)
    return torch.cat(parts, dim=0), extra


def matmul_reduce_scatter(a, mm, group, chunks, between=None):
    """reduce_scatter_dim0(mm(a)): a is [world*n, ...]; this rank gets the n rows of its
    sequence shard. Chunk k takes rows k of every rank's shard (a strided slice), so each
    chunk's reduce-scatter hands this rank a contiguous piece of its own shard."""
    n = size(group)
    if n == 1 or chunks <= 1:
        out, _ = reduce_scatter_dim0(mm(a), group)
        return out, (between() if between else None)
    if a.shape[0] % n:
        raise ValueError(f"accelkit.torch.parallel: sequence length ({a.shape[0]}) is not "
                         f"divisible by the tensor-parallel size {n}")
    shard = a.shape[0] // n
    by_rank = a.view((n, shard) + tuple(a.shape[1:]))
    parts, works = [], []
    for block in torch.tensor_split(by_rank, min(chunks, shard), dim=1):
        y = mm(block).contiguous()  # [n, c, ...]: rank r's rows of this chunk at y[r]
        out, work = reduce_scatter_dim0(y.view((n * y.shape[1],) + tuple(y.shape[2:])),
                                        group, async_op=True)
        parts.append(out)
        works.append(work)
    extra = between() if between else None
    _wait(works)
    return torch.cat(parts, dim=0), extra


def all_gather_matmul(x, mm, group, overlap):
    """(all_gather_dim0(x), mm(all_gather_dim0(x))): with overlap, this rank's own rows
    are multiplied while the other ranks' rows are still on the wire."""
    n = size(group)
    if n == 1:
        return x, mm(x)
    if not overlap:
        total, _ = all_gather_dim0(x, group)
        return total, mm(total)
    total, work = all_gather_dim0(x, group, async_op=True)
    mine = mm(x)
    work.wait()
    s, r = x.shape[0], rank(group)
    pieces = []
    if r > 0:
        pieces.append(mm(total[:r * s]))
    pieces.append(mine)
    if r < n - 1:
        pieces.append(mm(total[(r + 1) * s:]))
    return total, torch.cat(pieces, dim=0)
