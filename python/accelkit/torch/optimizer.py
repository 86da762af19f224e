"""hvd.DistributedOptimizer: wraps a torch optimizer so that gradients are averaged over the
ranks (Horovod semantics).

A hook on each parameter's gradient accumulator enqueues that gradient's allreduce the
moment backward() has produced it, so communication overlaps the rest of backward; step()
waits for all of them and then runs the wrapped optimizer. With an accelkit fused optimizer
(FusedSGD, FusedAdam, FusedAdamW, FusedLAMB) each allreduce also carries the parameter's
update, which the runtime's update thread applies as soon as the reduced gradient lands;
step() then only waits.
"""
import os
import warnings
from contextlib import contextmanager

import torch

from . import mpi_ops as _ops
from .adasum import _DistributedAdasumMixin, make_adasum_optimizer
from .compression import Compression
from .mpi_ops import Adasum, Average, global_process_set
from .optim import _FusedOptimizer
from .wrapping import (count_backward_pass, count_original_step, hook_gradient_accumulators,
                       wrap_optimizer)


def named_optimizer_parameters(optimizer, named_parameters):
    """(name, parameter) for every parameter of the optimizer: named_parameters (usually
    model.named_parameters()) restricted to the optimizer's parameters, or
    "noname.<group>.<index>" names when None. Names must be unique and every parameter of
    the optimizer named, as Horovod requires."""
    all_params = [p for g in optimizer.param_groups for p in g["params"]]
    if named_parameters is None:
        return [(f"noname.{i}.{j}", p) for i, g in enumerate(optimizer.param_groups)
                for j, p in enumerate(g["params"])]
    named = list(named_parameters)
    if any(not isinstance(x, tuple) or len(x) != 2 for x in named):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                         "usually produced by model.named_parameters().")
    names = [n for n, _ in named]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError("Parameter names in named_parameters must be unique. "
                         "Found duplicates: " + ", ".join(dups))
    named_ids = {id(p) for _, p in named}
    unnamed = [p for p in all_params if id(p) not in named_ids]
    if unnamed:
        raise ValueError("named_parameters was specified, but one or more model parameters "
                         "were not named. Python object ids: "
                         + ", ".join(str(id(p)) for p in unnamed))
    param_ids = {id(p) for p in all_params}
    return [(n, p) for n, p in named if id(p) in param_ids]


class _DistributedMixin:
    """Placed before the wrapped optimizer's class in a class made per wrap, so that
    isinstance(opt, type(original)) holds and super() reaches the original methods."""

    def _hvd_setup(self, named_parameters, compression, backward_passes_per_step, op,
                   gradient_predivide_factor, groups, sparse_as_dense, process_set, overlap):
        self._compression = compression
        self._hvd_op = op
        self._hvd_predivide = float(gradient_predivide_factor)
        self._sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._wire, _ = _ops._wire_compression(compression)

        all_params = [p for g in self.param_groups for p in g["params"]]
        self._parameter_names = {p: n for n, p in named_optimizer_parameters(self, named_parameters)}
        self._groups_key = None  # param -> its param group, rebuilt when the list changes

        self.backward_passes_per_step = int(backward_passes_per_step)
        if self.backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be >= 1")
        self._allreduce_delay = {p: self.backward_passes_per_step for p in all_params}
        self._handles = {}      # param or tuple of params (group) -> (handle, ctx)
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True

        # grouped allreduces: groups = int (split the parameters into that many groups) or
        # a list of lists of parameters
        self._p_to_group = {}
        self._group_ready = {}
        if groups is not None:
            if isinstance(groups, int):
                if groups < 0:
                    raise ValueError("groups must be >= 0")
                plist = [p for p in all_params if p.requires_grad]
                # exactly `groups` groups of sizes differing by at most one, as Horovod's
                # split_list (ceil-sized chunks gave fewer: 5 parameters in 4 groups made 3);
                # empty ones (more groups than parameters) are dropped
                d, rem = divmod(len(plist), groups) if groups else (0, 0)
                groups = [plist[i * d + min(i, rem):(i + 1) * d + min(i + 1, rem)]
                          for i in range(groups)]
                groups = [g for g in groups if g]
            else:
                groups = [list(g) for g in groups]
                ids = [id(p) for g in groups for p in g]
                if len(ids) != len(set(ids)):
                    raise ValueError("a parameter appears in more than one group")
                param_ids = {id(p) for p in all_params}
                if any(id(p) not in param_ids for g in groups for p in g):
                    raise ValueError("groups hold a tensor that is not a parameter of the optimizer")
            for g in groups:
                key = tuple(g)
                for p in g:
                    self._p_to_group[p] = key
                self._group_ready[key] = set()

        # overlap of the optimizer update with communication (fused optimizers only)
        fused = isinstance(self, _FusedOptimizer)
        if overlap and not fused:
            raise ValueError("overlap=True needs an accelkit fused optimizer (FusedSGD, FusedAdam, "
                             "FusedAdamW, FusedLAMB)")
        self._overlap = bool(fused and (overlap is None or overlap) and self._wire is not None)
        self._updated = {}      # param -> step count applied by the runtime this iteration
        self._ak_skip = None
        self._warned_sync = False

        self._handles_rt = _ops._rt  # the runtime the handles belong to (see _drop_stale)
        # an elastic job (HOROVOD_ELASTIC=1, set by an elastic ak launch) may grow from one
        # rank: its hooks must be there from the start, as in Horovod
        if _ops.size() > 1 or os.environ.get("HOROVOD_ELASTIC") == "1":
            self._register_hooks()

    # -- hooks ----------------------------------------------------------------------------

    def _register_hooks(self):
        params = [p for group in self.param_groups for p in group["params"]]
        self._requires_update.update(p for p in params if p.requires_grad)
        self._grad_accs = hook_gradient_accumulators(params, self._make_hook)

    def _drop_stale(self):
        """After an elastic reset (hvd.shutdown then hvd.init) the old runtime's handles
        are gone, and a failed step may have left some behind: the step's bookkeeping
        starts afresh with the new runtime."""
        if self._handles_rt is _ops._rt:
            return
        self._handles_rt = _ops._rt
        self._handles.clear()
        for ready in self._group_ready.values():
            ready.clear()
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._updated.clear()
        self._synchronized = False

    def _make_hook(self, p):
        def hook(*_):
            self._drop_stale()
            last = count_backward_pass(self._allreduce_delay, p)
            assert not p.grad.requires_grad
            if not last:
                self._handles[p] = (None, None)
                return
            key = self._p_to_group.get(p)
            if key is None:
                self._handles[p] = self._allreduce_grad_async(p)
                return
            ready = self._group_ready[key]
            ready.add(p)
            if len(ready) == len(key):
                self._handles[key] = self._grouped_allreduce_grad_async(key)
                ready.clear()
                for q in key:
                    self._handles.pop(q, None)
            else:
                self._handles[p] = (None, None)
        return hook

    # -- submission -------------------------------------------------------------------------

    def _scales(self):
        if self._hvd_op == Average:
            # the runtime divides by the set size for Average; the predivide factor is
            # split between before and after the reduction
            return 1.0 / self._hvd_predivide, self._hvd_predivide
        return 1.0, 1.0

    def _grad_of(self, p):
        if p.grad is None:
            # no gradient this step (an unused branch on this rank): others may have one
            p.grad = torch.zeros_like(p)
        elif p.grad.is_sparse:
            if not self._sparse_as_dense:
                raise ValueError(f"sparse gradient for {self._parameter_names.get(p)} in a "
                                 "group: pass sparse_as_dense=True to DistributedOptimizer")
            p.grad = p.grad.to_dense()
        return p.grad

    def _update_of(self, p):
        """The optimizer update the runtime runs after p's gradient is reduced, or None."""
        if not self._overlap:
            return None
        grad = p.grad
        if (p.dtype != torch.float32 or grad.dtype != torch.float32 or p.device.type != "cpu"
                or not p.data.is_contiguous() or not grad.is_contiguous()):
            return None
        group = self._param_group_of(p)
        s1, s2 = self._ak_state(p, group)
        step = int(self.state[p]["step"].item()) + 1
        self._updated[p] = step
        return (self._ak_config(group), p.data, s1, s2, step)

    def _param_group_of(self, p):
        # load_state_dict() replaces the list of groups, add_param_group() extends it
        key = (id(self.param_groups), len(self.param_groups))
        if key != self._groups_key:
            self._group_of_param = {q: g for g in self.param_groups for q in g["params"]}
            self._groups_key = key
        return self._group_of_param[p]

    def _allreduce_grad_async(self, p):
        name = self._parameter_names.get(p)
        if p.grad is not None and p.grad.is_sparse and not self._sparse_as_dense:
            h = _ops.sparse_allreduce_async(p.grad, name=f"grad.{name}", op=self._hvd_op,
                                            process_set=self.process_set)
            return h, _SPARSE
        grad = self._grad_of(p)
        pre, post = self._scales()
        if self._wire is None:  # a Python compressor: compress, reduce, decompress later
            tensor, ctx = self._compression.compress(grad)
            h = _ops._allreduce_async(tensor, True, name, self._hvd_op, pre, post,
                                      self.process_set)
            return h, ctx
        update = self._update_of(p)
        ps_id = _ops._ps_id(self.process_set)
        h = _ops._enqueue_allreduce([grad], [True], [f"allreduce.{name}"], self._hvd_op, pre,
                                    post, ps_id, self._wire, getattr(self._compression, "_ak_dgc", None),
                                    updates=[update], single=True)
        return h, None

    def _grouped_allreduce_grad_async(self, key):
        grads = [self._grad_of(p) for p in key]
        pre, post = self._scales()
        names = [f"allreduce.{self._parameter_names.get(p)}" for p in key]
        if self._wire is None:
            pairs = [self._compression.compress(g) for g in grads]
            h = _ops._grouped_allreduce_async([t for t, _ in pairs], True, None, self._hvd_op,
                                              pre, post, self.process_set, names=names)
            return h, [c for _, c in pairs]
        updates = [self._update_of(p) for p in key]
        h = _ops._grouped_allreduce_async(grads, True, None, self._hvd_op, pre, post,
                                          self.process_set, self._compression, names=names,
                                          updates=updates)
        return h, None

    # -- public ---------------------------------------------------------------------------

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting those not yet submitted, e.g.
        of parameters that got no gradient) and puts the averaged gradients in p.grad."""
        self._drop_stale()
        if self.process_set is not global_process_set and not self.process_set.included():
            self._synchronized = True
            return
        if self._overlap and self._requires_update and not self._in_step \
                and not self._warned_sync:
            warnings.warn("accelkit: with a fused optimizer the update is applied as soon as each "
                          "gradient is reduced, so changes to p.grad after synchronize() (e.g. "
                          "clipping) do not reach the update; pass overlap=False to "
                          "DistributedOptimizer for that")
            self._warned_sync = True
        covered = set()
        for key, (h, _) in self._handles.items():
            if h is not None:
                covered.update(key if isinstance(key, tuple) else (key,))
        todo = [p for p in self._requires_update if p not in covered]
        # parameters in the order the optimizer holds them: the same on every rank
        order = {p: i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        todo.sort(key=order.get)
        groups_done = set()
        for p in todo:
            key = self._p_to_group.get(p)
            if key is None:
                self._handles[p] = self._allreduce_grad_async(p)
            elif key not in groups_done:
                groups_done.add(key)
                self._group_ready[key].clear()
                for q in key:
                    self._handles.pop(q, None)
                self._handles[key] = self._grouped_allreduce_grad_async(key)
        handles = [(k, v) for k, v in self._handles.items() if v[0] is not None]
        self._handles.clear()
        error = None
        for key, (h, ctx) in handles:
            try:
                out = _ops.synchronize(h)
            except Exception as e:  # wait for the rest, then raise the first failure
                error = error or e
                continue
            params = key if isinstance(key, tuple) else (key,)
            outs = out if isinstance(key, tuple) else [out]
            ctxs = ctx if isinstance(key, tuple) and ctx is not None else [ctx] * len(params)
            for p, o, c in zip(params, outs, ctxs):
                self._allreduce_delay[p] = self.backward_passes_per_step
                if c is _SPARSE:
                    p.grad = o
                elif self._wire is None:
                    p.grad.set_(self._compression.decompress(o, c))
        for p in self._requires_update:
            self._allreduce_delay[p] = self.backward_passes_per_step
        for p, step in self._updated.items():
            self.state[p]["step"].fill_(step)
        if error is not None:
            self._updated.clear()
            raise error
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (after an explicit
        synchronize(), e.g. to clip gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        count_original_step(self)
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self._in_step = True
            try:
                self.synchronize()
            finally:
                self._in_step = False
        self._synchronized = False
        if self._overlap:
            # parameters the runtime already updated are skipped by the fused step
            self._ak_skip = set(self._updated)
            try:
                return super().step(closure)
            finally:
                self._ak_skip = None
                self._updated.clear()
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if any(h is not None for h, _ in self._handles.values()):
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super().zero_grad(*args, **kwargs)


_DistributedMixin._in_step = False
_SPARSE = object()  # ctx of a gradient reduced by sparse_allreduce_async


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set, overlap=None):
    """Wraps optimizer so that step() applies gradients averaged over the ranks.

    named_parameters: model.named_parameters() (names the allreduces; recommended).
    compression: Compression.none / .fp16, accelkit's .bf16 / .dgc(...), or a Compressor.
    backward_passes_per_step: backward() calls accumulated locally before each allreduce.
    op: Average (default), Sum, or Adasum: each rank steps the optimizer locally and the
        parameter deltas are Adasum-reduced (adasum.py; with one rank the plain optimizer,
        as in Horovod).
    gradient_predivide_factor: with Average, divide by this before the sum and by
        size/factor after it.
    groups: an int (that many groups) or a list of lists of parameters whose gradients are
        allreduced together once all of them are ready.
    overlap (accelkit): with a fused optimizer, apply each update on the runtime's update
        thread as soon as its gradient is reduced (default True for fused optimizers).
    """
    if op == Adasum:
        if not (_ops.is_initialized() and _ops.size() == 1):
            if isinstance(optimizer, (_DistributedMixin, _DistributedAdasumMixin)):
                raise ValueError("optimizer is already a DistributedOptimizer")
            names = {p: n for n, p in named_optimizer_parameters(optimizer, named_parameters)}
            return make_adasum_optimizer(optimizer, names, compression,
                                         backward_passes_per_step, gradient_predivide_factor,
                                         process_set)
        # one rank: nothing is reduced, and Horovod then builds the plain averaging
        # optimizer too (scripts that pick Adasum still run single-process)
        op = Average
    if op not in (Average, _ops.Sum):
        raise ValueError("DistributedOptimizer supports op=Average or op=Sum")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be "
                      "removed", DeprecationWarning, stacklevel=2)
        if groups is None:
            groups = num_groups
    if isinstance(optimizer, _DistributedMixin):
        raise ValueError("optimizer is already a DistributedOptimizer")
    if compression is None:
        compression = Compression.none
    obj = wrap_optimizer(optimizer, _DistributedMixin)
    obj._hvd_setup(named_parameters, compression, backward_passes_per_step, op,
                   gradient_predivide_factor, groups, sparse_as_dense, process_set, overlap)
    return obj
