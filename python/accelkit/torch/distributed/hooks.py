"""DDP communication hooks with accelkit's gradient compression, for
DistributedDataParallel.register_comm_hook(state, hook):

    from accelkit.torch.distributed import hooks
    ddp.register_comm_hook(None, hooks.fp16_compress_hook)      # default group
    ddp.register_comm_hook(hooks.DGCState(sparsity=0.999), hooks.dgc_hook)

fp16 / bf16: the bucket is divided by the world size (so the sum cannot overflow
float16), cast, allreduced on the wire type, cast back: half the bytes of float32, as
accelkit's Compression.fp16 / bf16 in the Horovod API. dgc: deep gradient compression
(Lin et al., 2018) as the Horovod API's Compression.dgc sends it: only the largest
(1 - sparsity) share of each bucket (plus what earlier steps left unsent, kept per bucket
as a residual) travels, as (index, value) pairs gathered from every rank. The hooks work
on any process group (state = the group, or None for the default group); with backend
"accelkit" they run on libaccelkit.
"""
import torch
import torch.distributed as dist


def _group(state):
    if state is None:
        return dist.distributed_c10d._get_default_group()
    return getattr(state, "process_group", None) or state


def _cast_hook(wire_dtype):
    def hook(state, bucket):
        group = _group(state)
        buf = bucket.buffer()
        wire = buf.div(group.size()).to(wire_dtype)
        fut = dist.all_reduce(wire, group=group, async_op=True).get_future()

        def decompress(f):
            buf.copy_(f.value()[0])
            return buf
        return fut.then(decompress)
    return hook


fp16_compress_hook = _cast_hook(torch.float16)
fp16_compress_hook.__name__ = "fp16_compress_hook"
fp16_compress_hook.__doc__ = "Allreduce DDP buckets as float16 (half the bytes of float32)."
bf16_compress_hook = _cast_hook(torch.bfloat16)
bf16_compress_hook.__name__ = "bf16_compress_hook"
bf16_compress_hook.__doc__ = "Allreduce DDP buckets as bfloat16 (float32's range, 8-bit mantissa)."


class DGCState:
    """State of dgc_hook: the group (None: default), the sparsity (share of each bucket
    NOT sent per step) and the residuals of the unsent values, per bucket."""

    def __init__(self, process_group=None, sparsity=0.999):
        if not 0.0 <= sparsity < 1.0:
            raise ValueError(f"dgc sparsity must be in [0, 1): {sparsity}")
        self.process_group = process_group
        self.sparsity = sparsity
        self.residuals = {}


def dgc_hook(state, bucket):
    """Deep gradient compression of a DDP bucket: top-k by magnitude with error feedback,
    allgathered as (index, value) pairs and summed into the averaged gradient."""
    if not isinstance(state, DGCState):
        raise TypeError("dgc_hook needs a DGCState as its state (register_comm_hook("
                        "hooks.DGCState(...), hooks.dgc_hook))")
    group = state.process_group or dist.distributed_c10d._get_default_group()
    buf = bucket.buffer()
    if not buf.dtype.is_floating_point:
        raise RuntimeError(f"accelkit dgc_hook: needs a floating-point bucket, got {buf.dtype}")
    n = group.size()
    acc = buf.float()
    residual = state.residuals.get(bucket.index())
    if residual is not None and residual.numel() == acc.numel():
        acc += residual
    k = max(1, int(acc.numel() * (1.0 - state.sparsity)))
    idx = acc.abs().topk(k, sorted=False).indices
    vals = acc[idx]
    acc[idx] = 0.0
    state.residuals[bucket.index()] = acc
    all_vals = torch.empty(n * k, dtype=torch.float32)
    all_idx = torch.empty(n * k, dtype=torch.int64)
    futs = [dist._all_gather_base(all_vals, vals, group=group, async_op=True).get_future(),
            dist._all_gather_base(all_idx, idx, group=group, async_op=True).get_future()]
    fut = torch.futures.collect_all(futs)

    def decompress(f):
        dense = torch.zeros(buf.numel(), dtype=torch.float32)
        dense.index_add_(0, all_idx, all_vals)
        buf.copy_(dense.div_(n))
        return buf
    return fut.then(decompress)
