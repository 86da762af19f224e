"""DistributedOptimizer(op=hvd.Adasum): Horovod's delta-based Adasum optimizer.

Each rank steps the wrapped optimizer on its own gradients (accumulated over
backward_passes_per_step backward passes, as torch accumulates .grad), takes the change
of every parameter (delta = new - old), Adasum-reduces the deltas over the ranks in one
fused call (per-parameter dot products, ak_comm_allreduce_adasum) and sets every
parameter to old + reduced delta. So the optimizer's own scaling (learning rate,
momentum, Adam's normalisation) happens before the reduction, as in Horovod, and the
learning rate is not scaled by the number of ranks: Adasum of identical deltas is that
delta, of orthogonal ones their sum. Optimizer state (momentum buffers) stays local.
Compression other than Compression.none is refused (deltas go uncompressed)."""
from contextlib import contextmanager

import torch

from . import mpi_ops as _ops
from .wrapping import count_original_step, wrap_optimizer


class _DistributedAdasumMixin:
    """Placed before the wrapped optimizer's class, like _DistributedMixin."""

    def _hvd_adasum_setup(self, names, backward_passes_per_step, process_set):
        if int(backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be >= 1")
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.process_set = process_set
        self._adasum_names = names  # param -> name, checked as Horovod checks them

    def synchronize(self):
        """Nothing to wait for: the reduction happens inside step()."""

    @contextmanager
    def skip_synchronize(self):
        yield

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = int(passes)

    def _adasum_params(self):
        # every trainable parameter, in the optimizer's order, whether or not it has a
        # gradient this step: each rank must reduce the same names
        return [p for g in self.param_groups for p in g["params"] if p.requires_grad]

    def step(self, closure=None):
        count_original_step(self)
        params = self._adasum_params()
        start = [p.detach().clone() for p in params]
        loss = super().step(closure)
        with torch.no_grad():
            deltas = [(p.detach() - s).contiguous() for p, s in zip(params, start)]
            if deltas:  # one stable name: the runtime's response cache serves every step
                _ops.grouped_allreduce_(deltas, name="adasum.delta",
                                        op=_ops.Adasum, process_set=self.process_set)
            for p, s, d in zip(params, start, deltas):
                p.copy_(s + d)
        return loss


def make_adasum_optimizer(optimizer, names, compression, backward_passes_per_step,
                          gradient_predivide_factor, process_set):
    """The Adasum-wrapped optimizer (a new object sharing the original's state)."""
    from .compression import Compression
    if compression not in (None, Compression.none):
        raise ValueError("accelkit's DistributedOptimizer(op=Adasum) reduces the parameter "
                         "deltas uncompressed; use compression=hvd.Compression.none")
    if gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    obj = wrap_optimizer(optimizer, _DistributedAdasumMixin)
    obj._hvd_adasum_setup(names, backward_passes_per_step, process_set)
    return obj
