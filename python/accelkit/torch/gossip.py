"""accelkit.torch.GossipOptimizer: decentralised (gossip) parameter averaging, an accelkit
extension (AIACC's gossip training; not in horovod.torch).

Every rank steps its own optimizer on its own gradients, then averages its parameters
with ONE peer instead of all ranks: x_i <- (x_i + x_peer) / 2. The peer changes every step
over a time-varying graph, so information still spreads to every rank within a few steps
(Lian et al. 2017, decentralised SGD; Assran et al. 2019, SGP):

  exponential  step t uses k = t mod log2(n): with a power-of-two world, rank i pairs with
               i XOR 2^k (which is i + 2^k or i - 2^k); otherwise rank i sends to
               (i + 2^k) mod n and averages with what (i - 2^k) mod n sent (a directed
               ring of stride 2^k, k over the strides below n).
  random       a random perfect matching per step, from a permutation seeded by (seed,
               step), so every rank draws the same pairs; with an odd world one rank per
               step has no partner and keeps its parameters.

Both mixing matrices are doubly stochastic, so the mean of the parameters over the ranks is
what allreduce-SGD would average. global_every=N adds an exact global average (an
allreduce) after every N-th step; overlap=True lets the exchange of step t run on the
runtime's thread while step t+1 computes, and applies the one-step-stale average as a
correction, x_{t+1} += (x_peer,t - x_t) / 2, as overlap-SGP does; overlap=s (an integer)
lets it run through s steps and applies it at step t+s (an s-step-stale average: a slow
exchange, such as one across hosts, then hides behind s steps of compute). The
corrections are antisymmetric between the two ends, so the mean is kept at any s.

Wire format. Ranks hold a common reference copy of the parameters (the last global
average, or the start). Only blocks (block_size elements) that differ from it travel, each
with its index; a block a peer did not send equals the reference there, so the average is
exact. Embedding tables whose rows few steps touch cost little. The exchange is one
alltoall of the training runtime (include/accelkit/train.h, AK_TRAIN_ALLTOALL with splits)
that sends rows to the peer only: nonblocking, no second communicator, but negotiated by
the runtime, so ranks still meet once per step (the coordinator's small message).

The parameters move into one flat float32 buffer (each parameter becomes a view of it);
CPU float32 parameters only. Start every rank from the same parameters
(hvd.broadcast_parameters); construction checks it.
"""
import math

import torch

from . import mpi_ops as _ops
from .mpi_ops import Average
from .optimizer import named_optimizer_parameters
from .wrapping import count_original_step, wrap_optimizer

TOPOLOGIES = ("exponential", "random")
_EXCHANGE_NAME = "gossip.exchange.{}"  # numbered: up to overlap + 1 in flight
_MAX_OVERLAP = 8
_GLOBAL_NAME = "gossip.global"


# ---- who talks to whom --------------------------------------------------------------------

def exponential_peers(rank, size, step):
    """(send_to, receive_from) for the exponential graph at `step`; (None, None) alone."""
    if size < 2:
        return None, None
    strides = [1 << k for k in range(max(1, math.ceil(math.log2(size)))) if (1 << k) < size]
    s = strides[step % len(strides)]
    if size & (size - 1) == 0:  # power of two: symmetric pairs
        peer = rank ^ s
        return peer, peer
    return (rank + s) % size, (rank - s) % size


def random_matching(size, step, seed):
    """The matching of `step`: a list of pairs (a, b), the same on every rank."""
    g = torch.Generator().manual_seed(int(seed) * 1_000_003 + int(step))
    perm = torch.randperm(size, generator=g).tolist()
    return [(perm[i], perm[i + 1]) for i in range(0, size - 1, 2)]


def random_peers(rank, size, step, seed):
    """(peer, peer) in the random matching of `step`; (None, None) when unpaired."""
    for a, b in random_matching(size, step, seed):
        if rank in (a, b):
            peer = b if rank == a else a
            return peer, peer
    return None, None


def peers(topology, rank, size, step, seed=0):
    if topology == "exponential":
        return exponential_peers(rank, size, step)
    return random_peers(rank, size, step, seed)


# ---- the optimizer --------------------------------------------------------------------------

class _Exchange:
    """One step's exchange in flight: what was sent (the snapshot) and the handle."""

    def __init__(self, handle, sent_idx, packed):
        self.handle, self.sent_idx, self.packed = handle, sent_idx, packed


class _GossipMixin:
    """Placed before the wrapped optimizer's class (see wrapping.wrap_optimizer)."""

    def _gossip_setup(self, named_parameters, topology, global_every, overlap, seed,
                      block_size):
        self._gossip_check_args(topology, global_every, overlap, seed, block_size)
        named = named_optimizer_parameters(self, named_parameters)
        _check_params(named)
        self.topology, self.global_every = topology, int(global_every)
        self.overlap, self.seed, self.block_size = int(overlap), int(seed), int(block_size)
        self.gossip_steps = 0
        self._rank, self._size = _ops.rank(), _ops.size()
        self._pending = []  # exchanges in flight, oldest first
        self._flatten([p for _, p in named])
        self._check_same_start()

    @staticmethod
    def _gossip_check_args(topology, global_every, overlap, seed, block_size):
        if topology not in TOPOLOGIES:
            raise ValueError(f"GossipOptimizer: unknown topology {topology!r}; expected one "
                             f"of {', '.join(TOPOLOGIES)}")
        if isinstance(global_every, bool) or not isinstance(global_every, int) \
                or global_every < 0:
            raise ValueError("GossipOptimizer: global_every must be an integer >= 0, not "
                             f"{global_every!r}")
        if isinstance(block_size, bool) or not isinstance(block_size, int) \
                or block_size < 16 or block_size % 16:
            raise ValueError("GossipOptimizer: block_size must be a positive multiple of 16 "
                             f"(elements), not {block_size!r}")
        if not isinstance(overlap, int) or not 0 <= overlap <= _MAX_OVERLAP:
            raise ValueError("GossipOptimizer: overlap must be True, False or a number of "
                             f"steps from 0 to {_MAX_OVERLAP}, not {overlap!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"GossipOptimizer: seed must be an integer, not {seed!r}")

    def _flatten(self, params):
        """Moves the parameters into one flat buffer, each starting on a block boundary
        (so that a block never spans two parameters), and keeps the reference copy."""
        b = self.block_size
        offsets, total = [], 0
        for p in params:
            offsets.append(total)
            total += -(-p.numel() // b) * b
        total = max(total, b)
        flat = torch.zeros(total, dtype=torch.float32)
        with torch.no_grad():
            for p, off in zip(params, offsets):
                view = flat[off:off + p.numel()].view_as(p)
                view.copy_(p.data)
                p.data = view
        self._flat, self._ref = flat, flat.clone()
        self._nblocks = total // b

    def _check_same_start(self):
        """The reference copy must be the same on every rank: compares a digest."""
        if self._size < 2:
            return
        rows = self._blocks(self._flat).sum(1, dtype=torch.float64)
        weights = torch.arange(self._nblocks, dtype=torch.float64).remainder_(977).add_(1)
        d = torch.stack([rows.sum(), (rows * weights).sum()])  # position-weighted too
        lo = _ops.allreduce(d, op=_ops.Min, name="gossip.start.min")
        hi = _ops.allreduce(d, op=_ops.Max, name="gossip.start.max")
        if not torch.equal(lo, hi):
            raise ValueError("GossipOptimizer: the parameters differ between ranks; start "
                             "every rank from the same ones (hvd.broadcast_parameters("
                             "model.state_dict(), root_rank=0)) before wrapping")

    # -- the exchange --

    def _blocks(self, t):
        return t.view(self._nblocks, self.block_size)

    def _dirty_blocks(self):
        """Indices of the blocks whose bits differ from the reference. Compared as int64
        words (two floats each: a third of the time of a float compare), and the per-word
        flags read back 8 at a time as int64 before the per-block any()."""
        words = torch.ne(self._flat.view(torch.int64), self._ref.view(torch.int64))
        per_block = self.block_size // 16  # int64s of 8 flags per block
        return words.view(torch.int64).view(self._nblocks, per_block).any(1).nonzero().squeeze(1)

    def _start_exchange(self, step):
        """Sends the dirty blocks to this step's peer: one flat float32 message, the
        blocks then their int64 indices (bit for bit, as pairs of float32)."""
        send_to, _ = peers(self.topology, self._rank, self._size, step, self.seed)
        idx = (self._dirty_blocks() if send_to is not None
               else torch.zeros(0, dtype=torch.int64))
        m, b = idx.numel(), self.block_size
        packed = torch.empty(m * (b + 2), dtype=torch.float32)
        torch.index_select(self._blocks(self._flat), 0, idx, out=packed[:m * b].view(m, b))
        packed[m * b:] = idx.view(torch.float32)
        splits = [0] * self._size
        if send_to is not None:
            splits[send_to] = packed.numel()
        handle = _ops.alltoall_async(packed, splits,
                                     name=_EXCHANGE_NAME.format(step % (self.overlap + 1)))
        return _Exchange(handle, idx, packed)

    def _finish_exchange(self, ex, stale):
        """Waits for `ex` and averages: x <- (x + peer) / 2 (stale=False: x is what was
        sent), or x += (peer_sent - x_sent) / 2 (stale=True: x moved on since)."""
        out, _ = _ops.synchronize(ex.handle)
        b = self.block_size
        m_r = out.numel() // (b + 2)
        if out.numel() != m_r * (b + 2):
            raise RuntimeError(f"GossipOptimizer: a peer sent {out.numel()} values, not whole "
                               f"blocks of {b} (do all ranks use the same block_size?)")
        r_val = out[:m_r * b].view(m_r, b)
        r_idx = out[m_r * b:].view(torch.int64)
        if m_r == 0 and ex.sent_idx.numel() == 0:
            return
        if m_r and (int(r_idx.min()) < 0 or int(r_idx.max()) >= self._nblocks):
            raise RuntimeError("GossipOptimizer: a peer sent block indices out of range "
                               "(do all ranks wrap the same parameters?)")
        xv, rv = self._blocks(self._flat), self._blocks(self._ref)
        received = torch.zeros(self._nblocks, dtype=torch.bool)
        received[r_idx] = True
        mine_only = ex.sent_idx[~received[ex.sent_idx]]  # the peer's block: the reference
        sent = ex.packed[:ex.sent_idx.numel() * b].view(-1, b)
        if not stale:
            _average_into(xv, r_idx, r_val)
            _average_into(xv, mine_only, rv.index_select(0, mine_only))
            return
        # x += (peer - x_then) / 2 as four scatter-adds, none needing the other's order:
        # + peer/2 where the peer sent, + ref/2 where only we sent (the peer had the
        # reference), - sent/2 where we sent, - ref/2 where only the peer sent
        sent_mask = torch.zeros(self._nblocks, dtype=torch.bool)
        sent_mask[ex.sent_idx] = True
        peer_only = r_idx[~sent_mask[r_idx]]
        xv.index_put_((r_idx,), r_val.mul_(0.5), accumulate=True)
        xv.index_put_((ex.sent_idx,), sent.mul_(-0.5), accumulate=True)
        xv.index_put_((mine_only,), rv.index_select(0, mine_only).mul_(0.5), accumulate=True)
        xv.index_put_((peer_only,), rv.index_select(0, peer_only).mul_(-0.5), accumulate=True)

    def _finish_pending(self, keep=0):
        """Applies the exchanges in flight, oldest first, until `keep` remain."""
        while len(self._pending) > keep:
            self._finish_exchange(self._pending.pop(0), stale=True)

    def average_parameters(self):
        """Averages the parameters over all ranks now (an allreduce of their difference to
        the reference, whose all-zero blocks the runtime does not send) and makes the
        result the new reference. Collective: every rank calls it at the same step. step()
        calls it after every global_every-th step; call it at the end of training to
        finish on one model."""
        with torch.no_grad():
            self._finish_pending()
            if self._size > 1:
                delta = self._flat - self._ref
                _ops.allreduce_(delta, op=Average, name=_GLOBAL_NAME)
                self._flat.copy_(self._ref).add_(delta)
            self._ref.copy_(self._flat)

    def state_dict(self):
        state = super().state_dict()
        state["gossip_steps"] = self.gossip_steps
        return state

    def load_state_dict(self, state_dict):
        steps = state_dict.get("gossip_steps")
        super().load_state_dict(state_dict)
        if steps is not None:
            self.gossip_steps = int(steps)

    def step(self, closure=None):
        count_original_step(self)
        loss = super().step(closure)
        step, self.gossip_steps = self.gossip_steps, self.gossip_steps + 1
        if self._size < 2:
            return loss
        if self.global_every and self.gossip_steps % self.global_every == 0:
            self.average_parameters()
            return loss
        with torch.no_grad():
            self._finish_pending(keep=max(0, self.overlap - 1))
            ex = self._start_exchange(step)
            if self.overlap:
                self._pending.append(ex)
            else:
                self._finish_exchange(ex, stale=False)
        return loss


def _average_into(xv, idx, other):
    """xv[idx] = (xv[idx] + other) * 0.5, rows idx (unique) of xv."""
    if idx.numel():
        xv.index_copy_(0, idx, xv.index_select(0, idx).add_(other).mul_(0.5))


def _check_params(named):
    for name, p in named:
        if p.dtype != torch.float32 or p.device.type != "cpu" or p.is_sparse:
            raise ValueError(f"GossipOptimizer: parameter {name} is {p.dtype} on "
                             f"{p.device}{' (sparse)' if p.is_sparse else ''}; gossip "
                             "averages dense CPU float32 parameters only")
    if len({id(p) for _, p in named}) != len(named):
        raise ValueError("GossipOptimizer: a parameter appears twice in the optimizer")


def GossipOptimizer(optimizer, named_parameters=None, topology="exponential",
                    global_every=0, overlap=False, seed=0, block_size=64):
    """Wraps a torch optimizer for gossip training: step() updates this rank's parameters
    from its own gradients, then averages them with one peer of a time-varying graph.

    topology: "exponential" (peer i XOR 2^k, k cycling; a directed stride-2^k ring when
        the world is not a power of two) or "random" (a seeded random matching per step).
    global_every: N > 0 averages over all ranks (an allreduce) after every N-th step in
        place of that step's gossip; 0 never does.
    overlap: True (1): the exchange of step t runs while step t+1 computes, and its
        average is applied one step late, as a correction (overlap-SGP); an integer s up
        to 8: it may run through s steps and is applied at step t+s. Call
        average_parameters() (or keep global_every) to end on one model.
    seed: the random matching's seed (the same on every rank).
    block_size: elements per block of the difference-to-reference encoding, a multiple of
        16 (64 suits embedding rows of 64; larger: fewer indices, more unchanged values
        sent).
    named_parameters: model.named_parameters(), used for error messages.

    Call hvd.init() and hvd.broadcast_parameters first. Do not combine with
    DistributedOptimizer (that averages every gradient already). The parameters become
    views of one flat buffer. accelkit extension: not part of horovod.torch.
    """
    from .local_sgd import _LocalSGDMixin
    from .optimizer import _DistributedMixin
    if isinstance(optimizer, (_DistributedMixin, _LocalSGDMixin, _GossipMixin)):
        raise ValueError("GossipOptimizer wraps a plain torch optimizer, not a "
                         "DistributedOptimizer, LocalSGD or another GossipOptimizer")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("GossipOptimizer wraps a torch.optim.Optimizer, not "
                        f"{type(optimizer).__name__}")
    _GossipMixin._gossip_check_args(topology, global_every, overlap, seed, block_size)
    obj = wrap_optimizer(optimizer, _GossipMixin)
    obj._gossip_setup(named_parameters, topology, global_every, overlap, seed, block_size)
    return obj
