"""accelkit.torch.LocalSGD: local SGD, i.e. periodic model averaging (an accelkit
extension; Horovod has no equivalent, so it is not exported by horovod.torch).

Every rank steps its own optimizer on its own gradients with no communication at all, and
after every `period`-th step the parameters are averaged over the ranks of the process set
by one grouped allreduce (the runtime negotiates the group at once and fuses it into one
buffer). Communication falls by a factor of `period` against DistributedOptimizer; the
price is that ranks drift apart between averagings (Lin et al. 2020, "Don't use large
mini-batches, use local SGD"; Stich 2019).

Optimizer state (momentum buffers, Adam's moments) stays local by default, as in the
local-SGD papers and PyTorch's PostLocalSGDOptimizer: it is a per-rank running average of
that rank's own gradients and needs no agreement for the parameters to agree after
averaging. average_optimizer_state=True averages every floating-point per-parameter state
tensor of the parameter's shape too (momentum_buffer, exp_avg, exp_avg_sq) in the same
group; with period=1 and SGD with momentum this makes LocalSGD compute exactly what
synchronous gradient averaging computes (momentum is linear in the gradient).

Model buffers (BatchNorm running statistics) are not parameters; pass
named_buffers=model.named_buffers() to average their floating-point ones with the
parameters (integer ones, such as num_batches_tracked, stay local).
"""
import torch

from . import mpi_ops as _ops
from .mpi_ops import global_process_set
from .optimizer import named_optimizer_parameters
from .wrapping import count_original_step, wrap_optimizer


class _LocalSGDMixin:
    """Placed before the wrapped optimizer's class in a class made per wrap, so that
    isinstance(opt, type(original)) holds and super() reaches the original methods."""

    def _local_sgd_setup(self, named_parameters, period, process_set,
                         average_optimizer_state, named_buffers):
        period = int(period)
        if period < 1:
            raise ValueError(f"LocalSGD: period must be >= 1, not {period}")
        named = named_optimizer_parameters(self, named_parameters)
        ps_id = _ops._ps_id(process_set)
        _ops._check_included(ps_id)
        self._lsgd_named = named
        self._lsgd_buffers = _float_buffers(named_buffers)
        self._lsgd_set = process_set
        self._lsgd_set_size = _ops._set_size(ps_id)
        self.period = period
        self.average_optimizer_state = bool(average_optimizer_state)
        self.local_steps = 0  # steps since construction; averaging after each period-th

    def _local_sgd_tensors(self):
        """(tensor, runtime name) pairs averaged together, in the same order on every rank:
        the parameters in the optimizer's order, each followed by its state tensors."""
        out = []
        for name, p in self._lsgd_named:
            out.append((p.data, f"allreduce.localsgd.{name}"))
            if not self.average_optimizer_state:
                continue
            state = self.state.get(p, {})
            for key in sorted(k for k in state if isinstance(k, str)):
                v = state[key]
                if (key != "step" and torch.is_tensor(v) and v.is_floating_point()
                        and v.shape == p.shape):
                    out.append((v, f"allreduce.localsgd.{name}.{key}"))
        out.extend((b, f"allreduce.localsgd.buffer.{name}") for name, b in self._lsgd_buffers)
        return out

    def average_parameters(self):
        """Averages the parameters (and the optimizer state, when asked) over the process
        set now, in place. Collective: every rank of the set calls it at the same point.
        step() calls it after every period-th step; call it yourself at the end of
        training to finish on one model."""
        if self._lsgd_set_size <= 1:
            return
        pairs = self._local_sgd_tensors()
        if not pairs:
            return
        with torch.no_grad():
            h = _ops._grouped_allreduce_async([t for t, _ in pairs], True, None, _ops.Average,
                                              1.0, 1.0, self._lsgd_set,
                                              names=[n for _, n in pairs])
            _ops.synchronize(h)

    def state_dict(self):
        """The wrapped optimizer's state plus the step count, so that a checkpoint (or
        hvd.elastic's TorchState) resumes the averaging period where it was."""
        state = super().state_dict()
        state["local_sgd_steps"] = self.local_steps
        return state

    def load_state_dict(self, state_dict):
        steps = state_dict.get("local_sgd_steps")
        super().load_state_dict(state_dict)
        if steps is not None:
            self.local_steps = int(steps)

    def step(self, closure=None):
        count_original_step(self)
        loss = super().step(closure)
        self.local_steps += 1
        if self.local_steps % self.period == 0:
            self.average_parameters()
        return loss


def _float_buffers(named_buffers):
    """The floating-point (name, tensor) pairs of named_buffers, checked."""
    if named_buffers is None:
        return []
    out = []
    for item in named_buffers:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                and torch.is_tensor(item[1])):
            raise ValueError("LocalSGD: named_buffers must yield (name, tensor) pairs, as "
                             "model.named_buffers() does")
        if item[1].is_floating_point():
            out.append(item)
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise ValueError("LocalSGD: named_buffers has duplicate names")
    return out


def LocalSGD(optimizer, named_parameters=None, period=1, process_set=global_process_set,
             average_optimizer_state=False, named_buffers=None):
    """Wraps a torch optimizer for local SGD: step() updates this rank's parameters from
    its own gradients, and after every `period`-th step averages the parameters over the
    ranks of `process_set` with one grouped, fused allreduce.

    named_parameters: model.named_parameters() (names the allreduces; the same on every
        rank). Without it the parameters are named by their position in the optimizer.
    period: local steps between averagings (1: average after every step).
    average_optimizer_state: also average the optimizer's per-parameter float state
        (momentum, Adam's moments); off by default (see the module's notes).
    named_buffers: model.named_buffers(), to average the floating-point buffers (BatchNorm
        running mean and variance) with the parameters; None leaves them local.

    Start every rank from the same parameters (hvd.broadcast_parameters). Do not combine
    with DistributedOptimizer (that averages the gradients of every step already); for
    gradient accumulation call backward() several times before step(). The object is an
    instance of the wrapped optimizer's class; LR schedulers work as with
    DistributedOptimizer. accelkit extension: not part of horovod.torch.
    """
    from .optimizer import _DistributedMixin
    if isinstance(optimizer, (_DistributedMixin, _LocalSGDMixin)):
        raise ValueError("LocalSGD wraps a plain torch optimizer, not a DistributedOptimizer "
                         "or another LocalSGD")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"LocalSGD wraps a torch.optim.Optimizer, not {type(optimizer).__name__}")
    obj = wrap_optimizer(optimizer, _LocalSGDMixin)
    obj._local_sgd_setup(named_parameters, period, process_set, average_optimizer_state,
                         named_buffers)
    return obj
