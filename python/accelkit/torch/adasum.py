"""DistributedOptimizer(op=hvd.Adasum): Horovod's delta-based Adasum optimizer.

Each rank steps the wrapped optimizer on its own gradients (accumulated over
backward_passes_per_step backward passes, as torch accumulates .grad), takes the change
of every parameter (delta = new - old), Adasum-reduces the deltas over the ranks
(per-parameter dot products, ak_comm_allreduce_adasum) and sets every parameter to
old + reduced delta. So the optimizer's own scaling (learning rate, momentum, Adam's
normalisation) happens before the reduction, as in Horovod, and the learning rate is not
scaled by the number of ranks: Adasum of identical deltas is that delta, of orthogonal
ones their sum. Optimizer state (momentum buffers) stays local.

Overlap, as in Horovod: the moment backward() has produced a parameter's last gradient
of the step, a hook steps the wrapped optimizer on that parameter alone, leaves the
delta in the parameter and starts its Adasum allreduce (the runtime fuses the deltas that
arrive in one cycle, keeping per-parameter dot products); step() reduces the parameters
whose hook did not fire (no gradient, or gradients set by hand), waits, and adds each
reduced delta to the saved start. So gradient clipping between backward() and step()
comes too late to matter, as with Horovod's Adasum. Compression other than
Compression.none is refused (deltas go uncompressed)."""
from contextlib import contextmanager

import torch

from . import mpi_ops as _ops
from .wrapping import (count_backward_pass, count_original_step, hook_gradient_accumulators,
                       wrap_optimizer)


class _DistributedAdasumMixin:
    """Placed before the wrapped optimizer's class, like _DistributedMixin."""

    def _hvd_adasum_setup(self, names, backward_passes_per_step, process_set):
        if int(backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be >= 1")
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.process_set = process_set
        self._adasum_names = names  # param -> name, checked as Horovod checks them
        # every trainable parameter in the optimizer's order, with or without a gradient:
        # each rank must reduce the same names every step
        self._adasum_params = [p for g in self.param_groups for p in g["params"]
                               if p.requires_grad]
        self._adasum_delay = {p: self.backward_passes_per_step for p in self._adasum_params}
        self._adasum_start = {}    # param -> its value before this step's local update
        self._adasum_handles = {}  # param -> handle of its delta's allreduce
        self._adasum_rt = _ops._rt  # the runtime those handles belong to
        self._adasum_accs = hook_gradient_accumulators(self._adasum_params, self._adasum_hook)

    def _adasum_drop_stale(self):
        """After an elastic reset (shutdown, init) the old runtime's handles are gone."""
        if self._adasum_rt is not _ops._rt:
            self._adasum_rt = _ops._rt
            self._adasum_handles.clear()
            self.set_backward_passes_per_step(self.backward_passes_per_step)

    def _adasum_hook(self, p):
        def hook(*_):
            self._adasum_drop_stale()
            if count_backward_pass(self._adasum_delay, p):
                self._adasum_launch(p)
        return hook

    def _adasum_launch(self, p):
        """Steps the wrapped optimizer on p alone, leaves p's delta in p and starts its
        Adasum allreduce."""
        start = self._adasum_start.get(p)
        if start is None:
            start = self._adasum_start[p] = torch.empty_like(p, requires_grad=False)
        start.copy_(p.detach())
        stashed = [g["params"] for g in self.param_groups]
        try:
            for g in self.param_groups:
                g["params"] = [p] if any(p is q for q in g["params"]) else []
            super().step()
        finally:
            for g, params in zip(self.param_groups, stashed):
                g["params"] = params
        with torch.no_grad():
            p.sub_(start)
        self._adasum_handles[p] = _ops.allreduce_async_(
            p.data, name=f"adasum.delta.{self._adasum_names[p]}", op=_ops.Adasum,
            process_set=self.process_set)

    def synchronize(self):
        """Nothing to do before step(): the deltas exist only once the local update ran."""

    @contextmanager
    def skip_synchronize(self):
        yield

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = int(passes)
        self._adasum_delay = {p: self.backward_passes_per_step for p in self._adasum_params}

    def step(self, closure=None):
        count_original_step(self)
        loss = closure() if closure is not None else None
        self._adasum_drop_stale()
        for p in self._adasum_params:
            if p not in self._adasum_handles:
                self._adasum_launch(p)
        try:
            for p, handle in self._adasum_handles.items():
                _ops.synchronize(handle)
                with torch.no_grad():
                    p.add_(self._adasum_start[p])
        finally:
            self._adasum_handles.clear()
            for p in self._adasum_params:
                self._adasum_delay[p] = self.backward_passes_per_step
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
