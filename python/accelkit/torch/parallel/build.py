"""accelkit.torch.parallel.build(model_json, plan_json): the reference decoder (model.py)
parallelized on this rank as a training plan of `ak plan --json` says: tensor parallelism
(tp, sequence_parallel), pipeline stages (pp, vp virtual stages per rank: 1F1B or
interleaved), data parallelism (dp) with a ZeRO stage, activation recompute, micro-batches.

    import torch.distributed as dist
    import accelkit.torch.distributed
    from accelkit.torch import parallel
    dist.init_process_group("accelkit")                 # tp*pp*dp ranks
    trainer = parallel.build("m.json", "plan.json")     # every rank, same arguments
    ids, targets = ...                                  # [seq_len, global batch] int64
    loss = trainer.step(ids, targets)                   # the batch's mean loss, every rank

Ranks are laid out as Megatron-LM does: tensor-parallel ranks adjacent, then data
parallel, then pipeline stages (rank = (stage * dp + replica) * tp + tp_rank). Every rank
builds the whole model from the same seed and keeps its part, so a run starts from the
weights of model.Reference(spec, seed). What the runtime does not implement is refused:
offload, a plan for another number of ranks.
"""
import resource

import torch
import torch.distributed as dist
from torch import nn

from . import _comm
from .layers import allreduce_sequence_parallel_grads
from .model import TP, DecoderLayer, Embedding, Head, ModelSpec, build_full, load_json, \
    loss_fn
from .pipeline import Pipeline, PipelineGroups, pipeline_groups
from .recompute import layer_modes
from .zero import ZeroOptimizer, _state_tensors, _unique_bytes

_PLAN_KEYS = ("tp", "pp", "dp", "vp", "mbs", "microbatches", "sequence_parallel",
              "recompute", "recompute_layers", "zero", "offload")


class Plan:
    """The fields of one plan of `ak plan --json` (plan `index` of its "plans" list when
    given the whole output; the planner's prediction stays in .fields)."""

    def __init__(self, plan, index=0):
        if isinstance(plan, Plan):
            self.__dict__.update(plan.__dict__)
            return
        if isinstance(plan, str):
            plan = load_json(plan)
        top = plan
        if "plans" in plan:
            if len(plan["plans"]) <= index:
                raise ValueError(f"plan: the planner's output holds {len(plan['plans'])} "
                                 f"plan(s), no plan {index}")
            plan = plan["plans"][index]
        missing = [k for k in ("tp", "pp", "dp", "mbs") if k not in plan]
        if missing:
            raise ValueError(f"plan: missing field(s) {', '.join(missing)}")
        self.raw = top
        self.fields = plan
        self.tp, self.pp, self.dp = int(plan["tp"]), int(plan["pp"]), int(plan["dp"])
        self.vp, self.mbs = int(plan.get("vp", 1)), int(plan["mbs"])
        self.sp = bool(plan.get("sequence_parallel", False))
        self.zero = int(plan.get("zero", 0))
        rc = plan.get("recompute", "none")
        self.recompute = f"hybrid:{int(plan.get('recompute_layers', 0))}" \
            if rc == "hybrid" else rc
        gbs = top.get("global_batch")
        self.microbatches = int(plan.get("microbatches") or
                                (int(gbs) // (self.dp * self.mbs) if gbs else 1))
        self.global_batch = self.dp * self.mbs * self.microbatches
        offload = plan.get("offload", "none")
        if offload != "none":
            raise ValueError(f"plan: offload {offload!r} is not implemented by "
                             f"accelkit.torch.parallel (plan with --offload none)")
        for name, v in (("tp", self.tp), ("pp", self.pp), ("dp", self.dp), ("vp", self.vp),
                        ("mbs", self.mbs), ("microbatches", self.microbatches)):
            if v < 1:
                raise ValueError(f"plan: {name} must be >= 1, got {v}")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"plan: zero must be 0..3, got {self.zero}")
        if self.zero >= 2 and self.pp > 1:
            raise ValueError("plan: ZeRO-2/3 need pp = 1 (gradients are partitioned per "
                             "micro-batch)")
        if self.vp > 1 and self.pp == 1:
            raise ValueError("plan: virtual stages (vp > 1) need pp > 1")

    @property
    def world(self):
        return self.tp * self.pp * self.dp

    def describe(self):
        return (f"tp={self.tp} pp={self.pp} dp={self.dp} vp={self.vp} mbs={self.mbs} "
                f"m={self.microbatches} sp={'on' if self.sp else 'off'} "
                f"recompute={self.recompute} zero={self.zero}")


class _Groups:
    """This rank's coordinates and process groups (None where the size is 1)."""

    def __init__(self, plan):
        world, me = dist.get_world_size(), dist.get_rank()
        if world != plan.world:
            raise ValueError(f"plan: tp*pp*dp = {plan.world} ranks, but the job has {world}")
        tp, pp, dp = plan.tp, plan.pp, plan.dp
        self.tp_rank, self.dp_rank, self.stage = me % tp, (me // tp) % dp, me // (tp * dp)
        self.tp = self.dp = self.tied = None

        def rank(stage, replica, t):
            return (stage * dp + replica) * tp + t
        # dist.new_group is collective: every rank creates every group, in one order
        for s in range(pp):
            for d in range(dp):
                g = _new([rank(s, d, t) for t in range(tp)])
                if (s, d) == (self.stage, self.dp_rank):
                    self.tp = g
        for s in range(pp):
            for t in range(tp):
                g = _new([rank(s, d, t) for d in range(dp)])
                if (s, t) == (self.stage, self.tp_rank):
                    self.dp = g
        if pp > 1:
            self.pipe = pipeline_groups([[rank(s, d, t) for s in range(pp)]
                                         for d in range(dp) for t in range(tp)])
        else:
            self.pipe = PipelineGroups([me], 0, None, None)
        self.tied_pairs = [[rank(0, d, t), rank(pp - 1, d, t)]
                           for d in range(dp) for t in range(tp)] if pp > 1 else []


def _new(ranks):
    if len(ranks) == 1:
        return None
    return dist.new_group(ranks, backend="accelkit")


class Trainer:
    """One rank's part of the model under a plan, its pipeline and its optimizer."""

    def __init__(self, model_json, plan_json, seed=0, lr=1e-3, overlap=True, chunks=4,
                 optimizer_class=torch.optim.Adam):
        self.spec = ModelSpec(load_json(model_json) if isinstance(model_json, str)
                              else model_json)
        self.plan = plan = Plan(plan_json)
        spec = self.spec
        virtual = plan.pp * plan.vp
        if spec.layers % virtual:
            raise ValueError(f"plan: pp*vp = {virtual} must divide the model's "
                             f"{spec.layers} layers")
        if plan.sp and spec.seq_len % plan.tp:
            raise ValueError(f"plan: sequence parallelism needs tp ({plan.tp}) to divide "
                             f"seq_len ({spec.seq_len})")
        self.groups = g = _Groups(plan)
        self.tp = TP(g.tp, plan.sp, overlap, chunks)
        self.chunks = self._build_chunks(seed)
        self.local = nn.ModuleList(self.chunks)
        self._set_recompute()
        self.pipeline = Pipeline(self.chunks, g.pipe, plan.microbatches, loss_fn(self.tp),
                                 batch_dim=1)
        self._tied_group = self._make_tied_group()
        self._make_optimizer(optimizer_class, lr)

    # -- construction --

    def _build_chunks(self, seed):
        """This rank's chunks (virtual stage c*pp + stage for c < vp) as nn.Sequentials of
        pieces loaded from the whole model built from `seed` (then dropped)."""
        spec, plan, g = self.spec, self.plan, self.groups
        full = build_full(spec, seed)
        per = spec.layers // (plan.pp * plan.vp)
        last = plan.pp * plan.vp - 1
        chunks = []
        for c in range(plan.vp):
            v = c * plan.pp + g.stage
            idx = list(range(1 + v * per, 1 + (v + 1) * per))
            if v == 0:
                idx = [0] + idx
            if v == last:
                idx = idx + [spec.layers + 1]
            pieces = []
            for i in idx:
                piece = _make_piece(spec, self.tp, i)
                piece.load_from(full[i])
                pieces.append(piece)
            chunks.append(nn.Sequential(*pieces))
        return chunks

    def _layers(self):
        return [m for chunk in self.chunks for m in chunk if isinstance(m, DecoderLayer)]

    def _set_recompute(self):
        layers = self._layers()
        for layer, mode in zip(layers, layer_modes(self.plan.recompute, len(layers))):
            layer.recompute = mode

    def _make_tied_group(self):
        if not self.spec.tied or self.plan.pp == 1:
            return None
        mine = None
        for pair in self.groups.tied_pairs:
            grp = dist.new_group(pair, backend="accelkit")
            if dist.get_rank() in pair:
                mine = grp
        return mine

    def _make_optimizer(self, optimizer_class, lr):
        plan, g = self.plan, self.groups
        self.zero = plan.zero if plan.dp > 1 else 0
        if plan.dp > 1:
            self.optimizer = ZeroOptimizer(self.local, optimizer_class, stage=self.zero,
                                           group=g.dp, lr=lr)
        else:
            self.optimizer = optimizer_class(self.local.parameters(), lr=lr)
        if self.zero == 3 and self.tp.sp:
            self._sp_hooks()

    def _sp_hooks(self):
        """ZeRO-3 reduce-scatters gradients during backward, so a sequence-parallel
        parameter's partial gradient is summed over the TP group as it is produced."""
        def hook(grad):
            grad = grad.contiguous().clone()
            _comm.all_reduce(grad, self.tp.group)
            return grad
        for p in self.local.parameters():
            if getattr(p, "sequence_parallel", False):
                p.register_hook(hook)

    # -- the step --

    def _embedding_and_head(self):
        emb = head = None
        for chunk in self.chunks:
            for m in chunk:
                if isinstance(m, Embedding):
                    emb = m.tokens
                elif isinstance(m, Head):
                    head = m
        return emb, head

    def _tie(self):
        """Tied embeddings: both copies get the sum of the two gradients."""
        emb, head = self._embedding_and_head()
        if self.zero == 3:  # one unit each, same flat layout: sum the shards' gradients
            units = {id(u.module): u for u in self.optimizer.units}
            a, b = units[id(emb)].shard, units[id(head)].shard
            total = a.grad + b.grad
            a.grad, b.grad = total, total.clone()
            return
        if self._tied_group is not None:  # first and last stage on different ranks
            p = emb.weight if emb is not None else head.weight
            grad = p.grad.contiguous()
            dist.all_reduce(grad, group=self._tied_group)
            p.grad = grad
            return
        total = emb.weight.grad + head.weight.grad
        emb.weight.grad, head.weight.grad = total, total.clone()

    def _local_batch(self, t):
        b = self.plan.mbs * self.plan.microbatches
        if t.shape[1] != b * self.plan.dp:
            raise ValueError(f"Trainer.step: batch of {t.shape[1]} sequences, the plan's "
                             f"global batch is {b * self.plan.dp}")
        d = self.groups.dp_rank
        return t[:, d * b:(d + 1) * b].contiguous()

    def step(self, ids, targets):
        """One training step on the global batch (ids and targets [seq, batch] int64,
        the same on every rank); returns the batch's mean loss (a float, every rank)."""
        self.zero_grad()
        loss = self.pipeline.train_step(self._local_batch(ids), self._local_batch(targets))
        if self.tp.sp and self.zero < 3:
            allreduce_sequence_parallel_grads(self.local, self.tp.group)
        if self.spec.tied:
            self._tie()
        self.optimizer.step()
        return self._global_loss(loss)

    def zero_grad(self):
        if isinstance(self.optimizer, ZeroOptimizer):
            self.optimizer.zero_grad()
        for p in self.local.parameters():
            p.grad = None

    def _global_loss(self, loss):
        """The last stage's loss averaged over the replicas, on every rank (one
        all-reduce of the world)."""
        out = torch.zeros(1, dtype=torch.float64)
        if loss is not None and self.groups.tp_rank == 0:
            out[0] = float(loss) / self.plan.dp
        dist.all_reduce(out)
        return float(out[0])

    # -- accounting --

    def memory_bytes(self):
        """Bytes of model state this rank holds now ({"params", "grads", "optimizer"})
        and its peak resident set size ("peak_rss")."""
        if isinstance(self.optimizer, ZeroOptimizer):
            out = self.optimizer.memory_bytes()
        else:
            params = list(self.local.parameters())
            out = {"params": _unique_bytes(params),
                   "grads": _unique_bytes([p.grad for p in params]),
                   "optimizer": _unique_bytes(_state_tensors(self.optimizer))}
        out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return out

    def num_params(self):
        """Parameters this rank holds (before ZeRO-3 sharding)."""
        return sum(p.numel() for p in self.local.parameters())


def _make_piece(spec, tp, index):
    """Piece `index` of make_pieces (0 embedding, 1..layers decoder layers, then head)
    without building the others."""
    if index == 0:
        return Embedding(spec, tp)
    if index == spec.layers + 1:
        return Head(spec, tp)
    return DecoderLayer(spec, tp)


def build(model_json, plan_json, **kwargs):
    """A Trainer of the model (planner JSON: a path, a JSON string or a dict) under the
    plan (`ak plan --json` output or one of its plans). kwargs: seed, lr, overlap,
    chunks, optimizer_class."""
    return Trainer(model_json, plan_json, **kwargs)


__all__ = ["build", "Trainer", "Plan"]
