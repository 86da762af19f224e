"""Fused optimizers: torch.optim.Optimizer subclasses whose step() runs accelkit's one-pass
kernel (ak_optim_step) per parameter. State tensors live in self.state under torch's names
(momentum_buffer, exp_avg, exp_avg_sq, step), so state_dict(), load_state_dict() and
hvd.broadcast_optimizer_state work as with torch.optim.

Wrapped by hvd.DistributedOptimizer, each gradient's allreduce carries its parameter's
update: the runtime's update thread applies it as soon as that gradient's bucket is
reduced, while later buckets still communicate; step() then only waits.

Parameters and gradients must be float32 CPU tensors.
"""
import ctypes

import torch
from torch.optim.optimizer import required

from . import _ctypes_train as _ct
from ._ctypes_train import C


def _check(status):
    if status != 0:
        from .mpi_ops import _error
        raise _error(status, "ak_optim_step: ")


class _FusedOptimizer(torch.optim.Optimizer):
    _kind = None
    _state_names = ()  # (state1, state2) names in self.state

    def _ak_config(self, group, grad_scale=1.0):
        """The ak_optim_config of a param group (read at every step: schedulers work)."""
        raise NotImplementedError

    def _ak_uses_state1(self, group):
        return True

    def _ak_state(self, p, group):
        """(state1, state2) tensors of p, created zero on first use; the step counter
        is state['step'] (a float tensor, as torch.optim keeps it)."""
        state = self.state[p]
        if "step" not in state:
            state["step"] = torch.tensor(0.0)
        bufs = []
        for i, name in enumerate(self._state_names):
            if name is None or (i == 0 and not self._ak_uses_state1(group)):
                bufs.append(None)
                continue
            buf = state.get(name)
            if buf is None:
                buf = torch.zeros_like(p, memory_format=torch.contiguous_format)
                state[name] = buf
            elif not buf.is_contiguous() or buf.dtype != torch.float32:
                buf = buf.to(torch.float32).contiguous()
                state[name] = buf
            bufs.append(buf)
        while len(bufs) < 2:
            bufs.append(None)
        return bufs[0], bufs[1]

    @staticmethod
    def _ak_check_param(p):
        if p.dtype != torch.float32 or p.device.type != "cpu":
            raise TypeError(f"accelkit fused optimizers need float32 CPU parameters, got "
                            f"{p.dtype} on {p.device}")
        if p.grad is not None and p.grad.is_sparse:
            raise TypeError("accelkit fused optimizers do not take sparse gradients")

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        skip = getattr(self, "_ak_skip", None) or ()
        for group in self.param_groups:
            cfg = self._ak_config(group)
            for p in group["params"]:
                if p.grad is None or p in skip:
                    continue
                self._ak_check_param(p)
                s1, s2 = self._ak_state(p, group)
                state = self.state[p]
                step = int(state["step"].item()) + 1
                param = p.data if p.data.is_contiguous() else p.data.contiguous()
                grad = p.grad.detach()
                if grad.dtype != torch.float32 or not grad.is_contiguous():
                    grad = grad.to(torch.float32).contiguous()
                _check(C.ak_optim_step(ctypes.byref(cfg), step, param.data_ptr(),
                                       grad.data_ptr(),
                                       s1.data_ptr() if s1 is not None else None,
                                       s2.data_ptr() if s2 is not None else None,
                                       p.numel()))
                if param is not p.data:
                    p.data.copy_(param)
                state["step"].fill_(step)
        return loss


class FusedSGD(_FusedOptimizer):
    """torch.optim.SGD's rule (momentum, dampening, Nesterov, weight decay) in one pass."""

    _kind = _ct.AK_OPTIM_SGD
    _state_names = ("momentum_buffer", None)

    def __init__(self, params, lr=required, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, maximize=False):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if maximize:
            raise ValueError("accelkit FusedSGD does not support maximize=True")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def _ak_uses_state1(self, group):
        return group["momentum"] != 0

    def _ak_config(self, group, grad_scale=1.0):
        return _ct.OptimConfig(kind=self._kind, lr=group["lr"], weight_decay=group["weight_decay"],
                               momentum=group["momentum"], dampening=group["dampening"],
                               nesterov=int(bool(group["nesterov"])), grad_scale=grad_scale)


class _AdamBase(_FusedOptimizer):
    _state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr, betas, eps, weight_decay, amsgrad=False, maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameters: {betas}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if amsgrad:
            raise ValueError(f"accelkit {type(self).__name__} does not support amsgrad=True")
        if maximize:
            raise ValueError(f"accelkit {type(self).__name__} does not support maximize=True")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    def _ak_config(self, group, grad_scale=1.0):
        b1, b2 = group["betas"]
        return _ct.OptimConfig(kind=self._kind, lr=group["lr"], weight_decay=group["weight_decay"],
                               beta1=b1, beta2=b2, eps=group["eps"], grad_scale=grad_scale)


class FusedAdam(_AdamBase):
    """torch.optim.Adam's rule (L2 weight decay added to the gradient)."""

    _kind = _ct.AK_OPTIM_ADAM

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)


class FusedAdamW(_AdamBase):
    """torch.optim.AdamW's rule (decoupled weight decay)."""

    _kind = _ct.AK_OPTIM_ADAMW

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)


class FusedLAMB(_AdamBase):
    """LAMB (You et al., 2019): the Adam direction (plus decoupled weight decay) scaled per
    parameter tensor by the trust ratio ||w|| / ||update||."""

    _kind = _ct.AK_OPTIM_LAMB

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
