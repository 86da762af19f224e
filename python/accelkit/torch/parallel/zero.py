"""ZeRO data parallelism (stages 0-3, no offload) on a torch.distributed process group.

    opt = ZeroOptimizer(model, torch.optim.Adam, stage=3, group=None, lr=1e-3)
    loss = loss_fn(model(x)); loss.backward(); opt.step(); opt.zero_grad()

stage 0  gradients all-reduced (averaged), every rank steps every parameter (plain DDP)
stage 1  + optimizer states sharded: the parameters live in one flat buffer split into
         equal shards; each rank steps its shard, then the buffer is all-gathered
stage 2  + gradients sharded: the flat gradient is reduce-scattered, each rank keeps only
         its shard's gradient (the full gradients exist only between backward and step)
stage 3  + parameters sharded, per module: each module owning parameters keeps 1/N of
         its flat parameters; a forward pre-hook all-gathers them (the next module's
         gather is prefetched asynchronously), the forward hook frees them, a hook on the
         module's output gradient gathers them again for its backward (prefetching the
         module before it), and once all its gradients exist they are reduce-scattered
         into the shard's gradient and the gathered copy is freed.

Freed parameters keep their tensors: the flat buffer's storage is resized to 0 and back,
so the views autograd saved (weight.t() of a Linear) see the gathered values again.
The inner optimizer (any torch.optim class, e.g. accelkit's fused ones) steps only the
shard parameters. memory_bytes() counts the bytes of parameters, gradients and optimizer
states this rank holds.
"""
import torch
import torch.distributed as dist
from torch import nn


def _world(group):
    return dist.get_world_size(group), dist.get_rank(group)


def _unique_bytes(tensors):
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        st = t.storage()
        key = st.data_ptr()
        if key in seen or st.size() == 0:
            continue
        seen.add(key)
        total += st.size() * st.element_size()
    return total


def _state_tensors(optimizer):
    for state in optimizer.state.values():
        for v in state.values():
            if torch.is_tensor(v):
                yield v


class _Flat:
    """Parameters viewed into one flat buffer padded to a multiple of the world size."""

    def __init__(self, params, world, rank):
        dtypes = {p.dtype for p in params}
        if len(dtypes) != 1:
            raise ValueError(f"accelkit ZeroOptimizer: parameters of one flat buffer must "
                             f"share a dtype, got {sorted(map(str, dtypes))}")
        self.params = params
        total = sum(p.numel() for p in params)
        self.shard_numel = -(-total // world)
        self.full = torch.zeros(self.shard_numel * world, dtype=params[0].dtype)
        self.lo = rank * self.shard_numel
        off = 0
        for p in params:
            n = p.numel()
            self.full[off:off + n].copy_(p.detach().reshape(-1))
            p.data = self.full[off:off + n].view_as(p)
            off += n

    def flat_grad(self):
        """The parameters' gradients in one padded buffer (zeros for missing ones)."""
        g = torch.zeros_like(self.full)
        off = 0
        for p in self.params:
            if p.grad is not None:
                g[off:off + p.numel()].copy_(p.grad.reshape(-1))
            off += p.numel()
        return g


class _Unit:
    """Stage 3: one module's own parameters, sharded."""

    def __init__(self, module, params, world, rank, group):
        self.module, self.group, self.world = module, group, world
        self.flat = _Flat(params, world, rank)
        self.shard = nn.Parameter(self.flat.full[self.flat.lo:self.flat.lo +
                                                 self.flat.shard_numel].clone())
        self.pending = None        # an async all-gather in flight
        self.gathered = True
        self.grads_seen = 0
        self.grad_nodes = []       # AccumulateGrad nodes, kept alive for their hooks
        # (the caller takes them, then frees: a view of a freed tensor cannot be made)

    def gather(self, async_op=False):
        if self.gathered:
            if not async_op:
                self.wait()
            return
        full = self.flat.full
        full.storage().resize_(full.numel())
        work = dist.all_gather_into_tensor(full, self.shard.detach(), group=self.group,
                                           async_op=True)
        self.gathered, self.pending = True, work
        if not async_op:
            self.wait()

    def wait(self):
        if self.pending is not None:
            self.pending.wait()
            self.pending = None

    def free(self):
        self.wait()
        self.flat.full.storage().resize_(0)
        self.gathered = False

    def reduce_grads(self):
        """Reduce-scatters the module's gradients into the shard's (averaged over ranks),
        drops the full gradients and the gathered parameters."""
        g = self.flat.flat_grad()
        mine = torch.empty(self.flat.shard_numel, dtype=g.dtype)
        dist.reduce_scatter_tensor(mine, g, group=self.group)
        mine.div_(self.world)
        if self.shard.grad is None:
            self.shard.grad = mine
        else:
            self.shard.grad.add_(mine)
        for p in self.flat.params:
            p.grad = None
        self.grads_seen = 0
        self.free()


class ZeroOptimizer:
    """ZeRO stages 0-3 around `optimizer_class` (see the module's text). `params` is a
    module (required for stage 3, whose hooks live on its submodules) or an iterable of
    parameters; `group` the data-parallel process group (None: the default group); the
    remaining keyword arguments go to optimizer_class."""

    def __init__(self, params, optimizer_class, stage=1, group=None, **defaults):
        if stage not in (0, 1, 2, 3):
            raise ValueError(f"accelkit ZeroOptimizer: stage must be 0, 1, 2 or 3, got {stage}")
        self.stage, self.group = stage, group
        self.world, self.rank = _world(group)
        module = params if isinstance(params, nn.Module) else None
        plist = list(module.parameters() if module is not None else params)
        if any(isinstance(p, dict) for p in plist):
            raise ValueError("accelkit ZeroOptimizer: parameter groups (dicts) are not "
                             "supported; pass parameters or a module")
        self.params = [p for p in plist if p.requires_grad]
        if not self.params:
            raise ValueError("accelkit ZeroOptimizer: no parameter requires a gradient")
        if stage == 3:
            if module is None:
                raise ValueError("accelkit ZeroOptimizer: stage 3 needs the model (an "
                                 "nn.Module) to gather parameters per module; got a list "
                                 "of parameters")
            self._init_stage3(module)
            self.inner = optimizer_class([u.shard for u in self.units], **defaults)
        elif stage == 0:
            self.inner = optimizer_class(self.params, **defaults)
        else:
            self.flat = _Flat(self.params, self.world, self.rank)
            self.shard = nn.Parameter(self.flat.full[self.flat.lo:self.flat.lo +
                                                     self.flat.shard_numel])
            self.inner = optimizer_class([self.shard], **defaults)

    # ---- stage 3 hooks ----

    def _init_stage3(self, module):
        self.units, self.order, self._hooks = [], [], []
        for m in module.modules():
            own = [p for p in m.parameters(recurse=False) if p.requires_grad]
            if not own:
                continue
            unit = _Unit(m, own, self.world, self.rank, self.group)
            self.units.append(unit)
            self._hooks.append(m.register_forward_pre_hook(self._pre_forward(unit)))
            self._hooks.append(m.register_forward_hook(self._post_forward(unit)))
            for p in own:
                node = p.expand_as(p).grad_fn.next_functions[0][0]
                node.register_hook(self._grad_ready(unit))
                unit.grad_nodes.append(node)
            unit.free()

    def _neighbour(self, unit, step):
        if unit not in self.order:
            return None
        i = self.order.index(unit) + step
        return self.order[i] if 0 <= i < len(self.order) else None

    def _pre_forward(self, unit):
        def hook(module, inputs):
            if unit not in self.order:
                self.order.append(unit)  # forward order, learnt on the first step
            unit.gather()
            nxt = self._neighbour(unit, +1)
            if nxt is not None:
                nxt.gather(async_op=True)
        return hook

    def _post_forward(self, unit):
        def hook(module, inputs, output):
            outs = output if isinstance(output, (tuple, list)) else (output,)
            needs = [t for t in outs if torch.is_tensor(t) and t.requires_grad]
            if needs:
                fired = []

                def regather(grad):
                    if not fired:
                        fired.append(True)
                        unit.gather()
                        prev = self._neighbour(unit, -1)
                        if prev is not None:
                            prev.gather(async_op=True)
                    return grad
                for t in needs:
                    t.register_hook(regather)
            unit.free()
        return hook

    def _grad_ready(self, unit):
        def hook(grad_inputs, grad_outputs):
            unit.grads_seen += 1
            if unit.grads_seen == len(unit.flat.params):
                unit.reduce_grads()
        return hook

    # ---- the step ----

    def _average_all(self):
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, group=self.group)
        flat.div_(self.world)
        off = 0
        for p in self.params:
            n = p.numel()
            p.grad = flat[off:off + n].view_as(p).clone()
            off += n

    @torch.no_grad()
    def step(self):
        if self.stage == 0:
            self._average_all()
            self.inner.step()
            return
        if self.stage == 3:
            for unit in self.units:  # modules some of whose parameters got no gradient
                if unit.grads_seen:
                    unit.reduce_grads()
            for unit in self.units:
                # a prefetch late in backward (the module before the last one to run)
                # gathered the old values: drop them, and let no gather read a shard
                # while the optimizer writes it
                if unit.gathered:
                    unit.free()
            self.inner.step()
            return
        flat = self.flat
        g = flat.flat_grad()
        mine = g[flat.lo:flat.lo + flat.shard_numel]
        if self.stage == 1:
            dist.all_reduce(g, group=self.group)
            for p in self.params:  # DDP keeps averaged full gradients
                p.grad = None
            self.shard.grad = mine.div_(self.world)
            self._averaged_full = g
        else:
            mine = torch.empty(flat.shard_numel, dtype=g.dtype)
            dist.reduce_scatter_tensor(mine, g, group=self.group)
            for p in self.params:
                p.grad = None
            self.shard.grad = mine.div_(self.world)
            self._averaged_full = None
        self.inner.step()
        dist.all_gather_into_tensor(flat.full, self.shard.detach().clone(), group=self.group)

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None
        for t in self._shards():
            t.grad = None
        self._averaged_full = None

    def _shards(self):
        if self.stage == 3:
            return [u.shard for u in self.units]
        return [self.shard] if self.stage in (1, 2) else []

    # ---- accounting ----

    def memory_bytes(self):
        """Bytes this rank holds now: {"params", "grads", "optimizer"} (unique storages;
        freed stage-3 buffers count 0)."""
        if self.stage == 3:
            params = [u.flat.full for u in self.units] + [u.shard for u in self.units]
        elif self.stage == 0:
            params = self.params
        else:
            params = [self.flat.full]
        grads = [p.grad for p in self.params] + [t.grad for t in self._shards()]
        if self.stage == 1:
            grads.append(getattr(self, "_averaged_full", None))
        return {"params": _unique_bytes(params), "grads": _unique_bytes(grads),
                "optimizer": _unique_bytes(_state_tensors(self.inner))}

    @property
    def param_groups(self):
        """The inner optimizer's groups (over the shards): learning-rate schedulers set
        their "lr" here."""
        return self.inner.param_groups

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)
