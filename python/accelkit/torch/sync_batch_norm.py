"""hvd.SyncBatchNorm: batch normalization whose batch statistics are computed over the
samples of every rank (one allreduce of sum, sum of squares and count in forward, one of
the two gradient sums in backward)."""
import torch
from torch.nn.modules.batchnorm import _BatchNorm

from . import mpi_ops as _ops


class _SyncBatchNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, process_set):
        dims = [0] + list(range(2, x.dim()))
        xd = x.detach()
        count = torch.tensor([float(xd.numel() // xd.shape[1])], dtype=torch.float64)
        stats = torch.cat([xd.sum(dims).double(), (xd.double() ** 2).sum(dims), count])
        stats = _ops.allreduce(stats, op=_ops.Sum, process_set=process_set)
        c = x.shape[1]
        n = stats[-1]
        mean = stats[:c] / n
        var = (stats[c:2 * c] / n - mean * mean).clamp_(min=0)
        if running_mean is not None:
            with torch.no_grad():
                unbiased = var * (n / (n - 1)) if n > 1 else var
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        shape = [1, c] + [1] * (x.dim() - 2)
        invstd = torch.rsqrt(var + eps).to(x.dtype)
        xhat = (x - mean.to(x.dtype).view(shape)) * invstd.view(shape)
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.n, ctx.shape, ctx.dims, ctx.process_set = n, shape, dims, process_set
        y = xhat
        if weight is not None:
            y = y * weight.view(shape) + bias.view(shape)
        return y

    @staticmethod
    def backward(ctx, dy):
        xhat, invstd, weight = ctx.saved_tensors
        shape, dims, n = ctx.shape, ctx.dims, ctx.n
        sum_dy = dy.sum(dims)
        sum_dy_xhat = (dy * xhat).sum(dims)
        g = _ops.allreduce(torch.cat([sum_dy, sum_dy_xhat]).double(), op=_ops.Sum,
                           process_set=ctx.process_set).to(dy.dtype)
        c = sum_dy.numel()
        mean_dy, mean_dy_xhat = g[:c] / n, g[c:] / n
        scale = invstd if weight is None else invstd * weight
        dx = scale.view(shape) * (dy - mean_dy.view(shape) - xhat * mean_dy_xhat.view(shape))
        dw = sum_dy_xhat if weight is not None else None
        db = sum_dy if weight is not None else None
        return dx, dw, db, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Applies synchronous batch normalization over the ranks of process_set (any input
    of 2 or more dimensions, channels in dim 1)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=_ops.global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, x):
        if x.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {x.dim()}D input)")

    def forward(self, x):
        self._check_input_dim(x)
        if not self.training or _ops.size() == 1:
            return super().forward(x)
        momentum = 0.0
        if self.track_running_stats:
            self.num_batches_tracked.add_(1)
            momentum = self.momentum if self.momentum is not None else \
                1.0 / float(self.num_batches_tracked)
        return _SyncBatchNormFn.apply(x, self.weight, self.bias,
                                      self.running_mean if self.track_running_stats else None,
                                      self.running_var if self.track_running_stats else None,
                                      self.eps, momentum, self.process_set)
