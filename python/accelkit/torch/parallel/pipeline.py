"""Pipeline parallelism of accelkit.torch.parallel: a model split into stages, one stage
(or, interleaved, several model chunks) per rank of a pipeline group, trained by the 1F1B
schedule or its interleaved (virtual-stage) form over accelkit send/recv. See
docs/parallel.md, "Pipeline parallelism".

    groups = pipeline_groups([[0, 1, 2, 3]])         # every rank calls it, same arguments
    stage = split_sequential(model, 4)[groups.rank]  # this rank's nn.Module
    pipe = Pipeline([stage], groups, num_microbatches=8, loss_fn=F.mse_loss)
    loss = pipe.train_step(inputs, targets)  # on the last stage; None elsewhere
    optimizer.step()

Every micro-batch's loss is scaled by 1/num_microbatches, so the accumulated gradients are
those of the mean loss over the whole batch (what the unpartitioned model gets from
loss_fn on the batch, when loss_fn is a mean over the batch).
"""
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

# The header sent before every activation: [ndim, dtype code, dims..., 0-padding]. The
# receiver of an activation learns its shape from it; a gradient has the shape of the
# activation it belongs to, so it travels without one.
_HEADER = 10
_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
           torch.int32]


@dataclass
class PipelineGroups:
    """This rank's pipeline: its ranks (global, in stage order), its position, and two
    accelkit groups over the same ranks, one per direction. Each accelkit group runs its
    operations in order on its own thread, so a send of activations stuck behind the
    receiver never holds up the gradients going the other way."""
    ranks: list
    rank: int
    forward_group: object
    backward_group: object

    @property
    def size(self):
        return len(self.ranks)


def pipeline_groups(pipelines, backend="accelkit"):
    """Creates the groups of every pipeline (a list of global-rank lists, stage order;
    dist.new_group is collective, so every rank calls this with the same argument) and
    returns this rank's PipelineGroups (None if this rank is in no pipeline)."""
    me = dist.get_rank()
    seen = set()
    for ranks in pipelines:
        if seen & set(ranks):
            raise ValueError(f"pipeline_groups: rank(s) {sorted(seen & set(ranks))} are in "
                             f"more than one pipeline")
        seen |= set(ranks)
    mine = None
    for ranks in pipelines:
        ranks = [int(r) for r in ranks]
        fwd = dist.new_group(ranks, backend=backend)
        bwd = dist.new_group(ranks, backend=backend)
        if me in ranks:
            mine = PipelineGroups(ranks, ranks.index(me), fwd, bwd)
    return mine


def split_sequential(model, parts, boundaries=None):
    """Splits an nn.Sequential into `parts` nn.Sequential stages: at `boundaries` (the
    index of each stage's first layer after the first), or into runs of equal length
    (the first stages get the extra layers)."""
    layers = list(model.children())
    if boundaries is None:
        if parts > len(layers):
            raise ValueError(f"split_sequential: {len(layers)} layers cannot make {parts} "
                             f"stages")
        base, extra = divmod(len(layers), parts)
        boundaries, at = [], 0
        for p in range(parts - 1):
            at += base + (1 if p < extra else 0)
            boundaries.append(at)
    cuts = [0, *boundaries, len(layers)]
    if len(cuts) != parts + 1 or any(b <= a for a, b in zip(cuts, cuts[1:])):
        raise ValueError(f"split_sequential: boundaries {boundaries} do not cut "
                         f"{len(layers)} layers into {parts} non-empty stages")
    return [nn.Sequential(*layers[a:b]) for a, b in zip(cuts, cuts[1:])]


class Pipeline:
    """Runs micro-batches through this rank's model chunks.

    chunks: this rank's nn.Modules. One chunk: the 1F1B schedule, this rank is stage
    groups.rank. v > 1 chunks: the interleaved schedule; chunk c of rank r is virtual
    stage c * pp + r (so the model is cut into v * pp pieces, dealt round-robin), and
    num_microbatches must be a multiple of pp. Each chunk takes and returns one tensor;
    the first virtual stage gets the micro-batch of `inputs`, the last one's output goes
    to loss_fn(output, target micro-batch). batch_dim: the dimension of inputs, targets
    and the activations that is split into micro-batches."""

    def __init__(self, chunks, groups, num_microbatches, loss_fn, batch_dim=0):
        if isinstance(chunks, nn.Module):
            chunks = [chunks]
        if not chunks:
            raise ValueError("Pipeline: no model chunk on this rank")
        self.chunks = list(chunks)
        self.groups = groups
        self.pp, self.stage = groups.size, groups.rank
        self.v = len(self.chunks)
        self.m = int(num_microbatches)
        if self.m < 1:
            raise ValueError(f"Pipeline: num_microbatches must be >= 1, got {self.m}")
        if self.v > 1 and self.m % self.pp:
            raise ValueError(f"Pipeline: the interleaved schedule needs num_microbatches "
                             f"({self.m}) to be a multiple of the pipeline size ({self.pp})")
        self.loss_fn = loss_fn
        self.batch_dim = batch_dim
        self._pending = []

    # -- virtual stages --

    def _virtual(self, chunk):
        return chunk * self.pp + self.stage

    def _is_first(self, chunk):
        return self._virtual(chunk) == 0

    def _is_last(self, chunk):
        return self._virtual(chunk) == self.v * self.pp - 1

    def _peer(self, step):
        """The global rank holding the virtual stage `step` away from this one's (the
        last position's next is the first position, holding the next chunk)."""
        return self.groups.ranks[(self.stage + step) % self.pp]

    # -- point to point; a tag names the (chunk of the receiver, micro-batch) --

    def _tag(self, chunk, mb):
        return chunk * self.m + mb

    def _send_activation(self, y, chunk, mb):
        y = y.detach().contiguous()
        header = torch.zeros(_HEADER, dtype=torch.int64)
        if y.dtype not in _DTYPES or y.dim() > _HEADER - 2:
            raise ValueError(f"Pipeline: cannot send an activation of {y.dtype} with "
                             f"{y.dim()} dimensions")
        header[0], header[1] = y.dim(), _DTYPES.index(y.dtype)
        header[2:2 + y.dim()] = torch.tensor(y.shape, dtype=torch.int64)
        dst = self._peer(1)
        nxt = chunk + (1 if self.stage == self.pp - 1 else 0)
        tag = self._tag(nxt, mb)
        g = self.groups.forward_group
        self._pending.append(dist.isend(header, dst, group=g, tag=2 * tag))
        self._pending.append(dist.isend(y, dst, group=g, tag=2 * tag + 1))

    def _recv_activation(self, chunk, mb):
        src = self._peer(-1)
        tag = self._tag(chunk, mb)
        g = self.groups.forward_group
        header = torch.empty(_HEADER, dtype=torch.int64)
        dist.recv(header, src, group=g, tag=2 * tag)
        ndim, dtype = int(header[0]), _DTYPES[int(header[1])]
        x = torch.empty(header[2:2 + ndim].tolist(), dtype=dtype)
        dist.recv(x, src, group=g, tag=2 * tag + 1)
        return x.requires_grad_(x.is_floating_point())

    def _send_grad(self, grad, chunk, mb):
        dst = self._peer(-1)
        prev = chunk - (1 if self.stage == 0 else 0)
        self._pending.append(dist.isend(grad.contiguous(), dst,
                                        group=self.groups.backward_group,
                                        tag=self._tag(prev, mb)))

    def _recv_grad(self, like, chunk, mb):
        g = torch.empty_like(like)
        dist.recv(g, self._peer(1), group=self.groups.backward_group,
                  tag=self._tag(chunk, mb))
        return g

    # -- one forward and one backward of a micro-batch on a chunk --

    def _forward(self, chunk, mb, inputs, targets, state):
        if self._is_first(chunk):
            x = inputs[mb]
        else:
            x = self._recv_activation(chunk, mb)
        y = self.chunks[chunk](x)
        if self._is_last(chunk):
            loss = self.loss_fn(y, targets[mb]) / self.m
            state["loss"] = state["loss"] + loss.detach()
            state[(chunk, mb)] = (x, loss)
        else:
            self._send_activation(y, chunk, mb)
            state[(chunk, mb)] = (x, y)

    def _backward(self, chunk, mb, state):
        x, y = state.pop((chunk, mb))
        if self._is_last(chunk):
            torch.autograd.backward(y)
        else:
            torch.autograd.backward(y, self._recv_grad(y, chunk, mb))
        if not self._is_first(chunk):
            grad = x.grad if x.grad is not None else torch.zeros_like(x)
            self._send_grad(grad, chunk, mb)

    # -- schedules --

    def _order(self):
        """The (is_forward, chunk, micro-batch) steps of this rank, in order."""
        total = self.m * self.v
        if self.v == 1:
            warmup = min(self.pp - self.stage - 1, self.m)
        elif self.m == self.pp:  # every forward fits before the first backward
            warmup = total
        else:
            warmup = min((self.pp - self.stage - 1) * 2 + (self.v - 1) * self.pp, total)

        def which(k, forward):
            """The k-th forward (or backward) step's chunk and micro-batch: groups of pp
            micro-batches go through chunk 0, 1, ... (backward: last chunk first)."""
            in_group = k % (self.pp * self.v)
            chunk = in_group // self.pp
            if not forward:
                chunk = self.v - 1 - chunk
            return chunk, (k // (self.pp * self.v)) * self.pp + in_group % self.pp

        steps = [(True, *which(k, True)) for k in range(warmup)]
        for k in range(total - warmup):
            steps.append((True, *which(warmup + k, True)))
            steps.append((False, *which(k, False)))
        steps += [(False, *which(k, False)) for k in range(total - warmup, total)]
        return steps

    def _split(self, batch, name):
        if batch is None:
            raise ValueError(f"Pipeline: this rank runs the {name} stage and needs {name}")
        if batch.shape[self.batch_dim] % self.m:
            raise ValueError(f"Pipeline: the batch ({batch.shape[self.batch_dim]} along "
                             f"dim {self.batch_dim}) is not divisible into {self.m} "
                             f"micro-batches")
        return torch.chunk(batch, self.m, dim=self.batch_dim)

    def train_step(self, inputs=None, targets=None):
        """Forward and backward of every micro-batch; gradients accumulate into the
        chunks' parameters (zero them before, step the optimizer after). Returns the
        batch's loss (mean of the micro-batch losses) on the rank holding the last
        virtual stage, None on the others."""
        has_first = any(self._is_first(c) for c in range(self.v))
        has_last = any(self._is_last(c) for c in range(self.v))
        ins = self._split(inputs, "first") if has_first else None
        tgts = self._split(targets, "last") if has_last else None
        state = {"loss": torch.zeros(())}
        try:
            for forward, chunk, mb in self._order():
                if forward:
                    self._forward(chunk, mb, ins, tgts, state)
                else:
                    self._backward(chunk, mb, state)
        finally:
            for work in self._pending:
                work.wait()
            self._pending = []
        return state["loss"] if has_last else None
