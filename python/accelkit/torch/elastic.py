"""Horovod elastic training (hvd.elastic) on accelkit: training that survives lost workers
and grows or shrinks with its hosts.

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, (x, y) in enumerate(loader):   # loader uses state.sampler
                step(x, y)
                state.sampler.record_batch(state.batch, batch_size)
                if state.batch % 10 == 0:
                    state.commit()            # save + ask whether the hosts changed
            state.sampler.set_epoch(state.epoch + 1)

    state = hvd.elastic.TorchState(model=model, optimizer=opt, sampler=sampler, epoch=0,
                                   batch=0)
    train(state)

How it maps onto the launcher: `ak launch --min-np N --max-np M --host-discovery-script S`
serves a rendezvous (include/accelkit/comm.h, docs/elastic.md); every hvd.init() joins the
next round it forms and takes its rank and size from it. run() loops over the wrapped
function: it syncs the state from rank 0, calls the function, and when a collective fails
(HorovodInternalError: a worker was lost) it rolls the state back to its last commit; when
commit() learns that the hosts changed (HostsUpdatedInterrupt) it keeps the state. Either
way it then resets the runtime (shutdown() + init(): the next round) and calls the state's
reset callbacks, and loops. A worker the launcher drops ends inside init() with status 0.

Differences from Horovod:
- Host changes are seen by polling: commit() (check_host_updates()) makes rank 0 ask the
  launcher, one round trip, and broadcasts the answer; there are no pushed notifications.
- Outside an elastic job (plain `ak launch -np N`, torchrun, ...) the world cannot re-form,
  so run() does not loop: a HorovodInternalError leaves the state at its last commit and is
  raised again with that reason; a HostsUpdatedInterrupt raised by the script propagates.
- After a reset that skips the sync (hosts only left), the ElasticSampler objects of a
  TorchState are still re-split over the new world (their processed indices are merged
  over the ranks), so no sample is lost or repeated; the ranks first agree, with one tiny
  allreduce, whether any of them needs the full sync (a worker that just started does).
- HOROVOD_ELASTIC_RESET_LIMIT is not read here: the launcher enforces --reset-limit.
- ElasticSampler needs hvd.init() first (as in Horovod): it splits the data over
  hvd.size() ranks, and silently giving every rank all the data would be worse.
- Every collective the states issue has a fixed name ("elastic.*"), so workers that just
  started and workers that were reset agree on names whatever else they ran before.
"""
import copy
import ctypes
import functools
import math
import warnings

import torch

from . import functions as _fn
from . import _ctypes_train as _ct
from . import mpi_ops as _ops
from ._ctypes_train import AK_ERR_INTERNAL, C
from .mpi_ops import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["State", "ObjectState", "TorchState", "ElasticSampler", "run"]


# ---- the launcher (ak_elastic_* in include/accelkit/comm.h) -----------------------------

def _elastic_status():
    """(enabled, round, removed) of this process; (0, -1, 0) when the library has no
    elastic support or the query fails: then the job is treated as not elastic."""
    vals = [ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(0)]
    try:
        fn = C.ak_elastic_status
    except (ImportError, AttributeError):
        return 0, -1, 0
    if fn(*(ctypes.pointer(v) for v in vals)) != 0:
        return 0, -1, 0
    return tuple(v.value for v in vals)


def _elastic_enabled():
    return bool(_elastic_status()[0])


def _ask_launcher():
    """(changed, removed_only) from the launcher (rank 0 only). A failed query counts as
    'no change': the other ranks wait for the answer, and a launcher that is really gone
    ends the job anyway."""
    changed, removed_only = ctypes.c_int(0), ctypes.c_int(0)
    status = C.ak_elastic_hosts_changed(ctypes.pointer(changed), ctypes.pointer(removed_only))
    if status != 0:
        warnings.warn("hvd.elastic: could not ask the launcher whether the hosts changed "
                      f"({_ct.status_name(status)}: {_ct.last_error()}); assuming they "
                      "did not")
        return 0, 0
    return changed.value, removed_only.value


# ---- states -----------------------------------------------------------------------------

class State:
    """The training state that run() keeps consistent across resets. Subclasses define
    save() (snapshot the committed state), restore() (go back to it) and sync() (make
    every rank's state rank 0's; a collective). bcast_object(obj) returns rank 0's obj
    on every rank; get_rank() this process's rank."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._get_rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions (no arguments) called, in order, after every reset of the world, e.g.
        to scale the learning rate with hvd.size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state, then raises HostsUpdatedInterrupt if the hosts changed; call it
        every few batches (each call costs a snapshot and a round trip to the launcher)."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """In an elastic job, raises HostsUpdatedInterrupt on every rank when the launcher's
        host set changed (skip_sync when hosts only left). A collective there; outside an
        elastic job it does nothing."""
        if not _elastic_enabled():
            return
        answer = _ask_launcher() if self._get_rank() == 0 else None
        changed, removed_only = self._bcast(answer, "hosts_changed")
        if changed:
            raise HostsUpdatedInterrupt(skip_sync=bool(removed_only))

    def _bcast(self, obj, what):
        # our broadcast_object gets a fixed name (see the module docstring); a user's
        # function is called as Horovod calls it, with the object only
        if self._bcast_object is _fn.broadcast_object:
            return _fn.broadcast_object(obj, 0, name=f"elastic.{what}")
        return self._bcast_object(obj)

    def reset(self):
        """Hook run by on_reset() before the callbacks (the world has just changed)."""

    def _sync_after_removal(self):
        """Run instead of sync() after a reset that skips the sync (hosts only left): what
        must still be agreed over the new world. A collective; nothing by default."""

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()


class ObjectState(State):
    """State made of picklable values, given as keyword arguments and read and written as
    attributes (state.epoch). save() snapshots (deep copies) the current values of those
    names; attributes added later are not part of the state."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = copy.deepcopy(kwargs)
        for name, value in kwargs.items():
            setattr(self, name, value)
        super().__init__(bcast_object, get_rank)

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name))
                             for name in self._saved_state}

    def restore(self):
        self._set_saved()

    def sync(self):
        """Every rank takes rank 0's saved values (uncommitted changes are dropped)."""
        if self._saved_state:
            self._saved_state = self._bcast(self._saved_state, "object_state")
            self._set_saved()

    def _set_saved(self):
        # copies, so that changing an attribute in place leaves the snapshot alone
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))


class _ModelHandler:
    def __init__(self, key, value):
        self.key, self.value = key, value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        _fn.broadcast_parameters(self.value.state_dict(), root_rank=0,
                                 prefix=f"elastic.{self.key}.")


class _OptimizerHandler(_ModelHandler):
    def restore(self):
        # a copy: load_state_dict may keep the tensors it is given and step them in place
        self.value.load_state_dict(copy.deepcopy(self._saved))

    def sync(self):
        _fn.broadcast_optimizer_state(self.value, root_rank=0)


class _SamplerHandler(_ModelHandler):
    def restore(self):
        self.value.load_state_dict(copy.deepcopy(self._saved))

    def sync(self):
        """Every rank's processed indices merged, then rank 0's state loaded everywhere:
        the sampler is re-split over the current world."""
        sampler = self.value
        gathered = _fn.allgather_object(set(sampler.processed_indices),
                                        name=f"elastic.{self.key}.processed")
        state = sampler.state_dict()
        state["processed_indices"] = set().union(*gathered)
        sampler.load_state_dict(_fn.broadcast_object(state, 0,
                                                     name=f"elastic.{self.key}.state"))


def _handler_for(key, value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(key, value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(key, value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(key, value)
    return None


def _rank():
    return _ops.rank()


class TorchState(ObjectState):
    """ObjectState for PyTorch: any keyword value that is a torch.nn.Module, a
    torch.optim.Optimizer or an ElasticSampler is saved through its state_dict and synced
    with broadcast_parameters / broadcast_optimizer_state / a merge of the processed
    indices; every other value as in ObjectState. Assigning state.model = other_model
    makes the new object the one saved."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        values = dict(model=model, optimizer=optimizer, **kwargs)
        handlers = {}
        for key, value in values.items():
            handler = _handler_for(key, value)
            if handler is not None:
                handlers[key] = handler
        object.__setattr__(self, "_handlers", handlers)
        for key, handler in handlers.items():
            object.__setattr__(self, key, handler.value)
        plain = {k: v for k, v in values.items() if k not in handlers}
        super().__init__(bcast_object=_fn.broadcast_object, get_rank=_rank, **plain)

    def __setattr__(self, name, value):
        handler = self.__dict__.get("_handlers", {}).get(name)
        if handler is not None:
            handler.value = value
        super().__setattr__(name, value)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        # each handler saves what it synced, so that a failure before the next commit
        # rolls every rank back to the same state
        for handler in self._handlers.values():
            handler.sync()
            handler.save()
        super().sync()

    def _sync_after_removal(self):
        for handler in self._handlers.values():
            if isinstance(handler, _SamplerHandler):
                handler.sync()
                handler.save()


# ---- sampler ----------------------------------------------------------------------------

class ElasticSampler(torch.utils.data.Sampler):
    """Splits a dataset over the ranks, leaving out the indices already processed this
    epoch, so that training resumes mid-epoch after a reset without repeating or losing
    samples. Record what was trained with record_batch() / record_indices(); put the
    sampler in a TorchState, whose sync re-splits it for the new world.

    The order of an epoch is a permutation of the whole dataset seeded by seed + epoch
    (identity without shuffle); the indices not yet processed keep that order, are padded
    by repeating from the start to a multiple of the number of ranks, and rank r takes
    every size-th one from r. Needs hvd.init() first (ValueError otherwise)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch`: nothing processed yet, a new order."""
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Marks this rank's batch batch_idx (of batch_size samples) as processed."""
        self.record_indices(self.get_indices(batch_idx, batch_size))

    def record_indices(self, indices):
        self.processed_indices.update(int(i) for i in indices)

    def get_indices(self, batch_idx, batch_size):
        """This rank's dataset indices of batch batch_idx (shorter for the last batch)."""
        start = batch_idx * batch_size
        return self.indices[start:start + batch_size]

    def state_dict(self):
        return {"epoch": self.epoch, "processed_indices": set(self.processed_indices)}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self):
        """Re-splits the unprocessed indices over hvd.size() ranks."""
        if not _ops.is_initialized():
            raise ValueError("ElasticSampler needs hvd.init() first: it splits the dataset "
                             "over hvd.size() ranks")
        self.num_replicas, self.rank = _ops.size(), _ops.rank()
        order = self._epoch_order()
        self.remaining_indices = [i for i in order if i not in self.processed_indices]
        n = len(self.remaining_indices)
        self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        padded = (self.remaining_indices * math.ceil(self.total_size / n))[:self.total_size] \
            if n else []
        self.indices = padded[self.rank:self.total_size:self.num_replicas]

    def _epoch_order(self):
        n = len(self.dataset)
        if not self.shuffle:
            return list(range(n))
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return torch.randperm(n, generator=g).tolist()

    def __iter__(self):
        return iter(list(self.indices))

    def __len__(self):
        return self.num_samples


# ---- run --------------------------------------------------------------------------------

def _anyone_needs_sync(needs):
    """Whether any rank needs the full sync (one that just started always does)."""
    flag = torch.tensor([1 if needs else 0], dtype=torch.int32)
    return bool(_ops.allreduce(flag, op=_ops.Max, name="elastic.sync_needed").item())


def _sync(state, skip_sync):
    if _elastic_enabled():
        skip_sync = not _anyone_needs_sync(not skip_sync)
    if skip_sync:
        state._sync_after_removal()
    else:
        state.sync()


def _reset():
    """Leaves the current world and joins the launcher's next round."""
    _ops.shutdown()
    try:
        _ops.init()
    except HorovodInternalError:
        # the launcher took this worker out of the job: a normal end (init normally
        # exits by itself; this covers a runtime that only reports it)
        if _elastic_status()[2]:
            raise SystemExit(0)
        raise


def _not_elastic(error):
    return HorovodInternalError(
        f"{error} (hvd.elastic.run: this is not an elastic job, so the world cannot re-form "
        "without the lost rank; the state was rolled back to its last commit. Launch with "
        "`ak launch --min-np N --max-np M --host-discovery-script S` to survive lost "
        "workers)", getattr(error, "status", AK_ERR_INTERNAL))


def run(func):
    """Decorator: func(state, *args, **kwargs) runs until it returns (its value is
    returned), restarting after every change of the world as the module docstring says."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                _sync(state, skip_sync)
                return func(state, *args, **kwargs)
            except HorovodInternalError as e:
                state.restore()
                if not _elastic_enabled():
                    raise _not_elastic(e) from e
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                if not _elastic_enabled():
                    raise
                skip_sync = e.skip_sync
            _reset()
            state.on_reset()

    return wrapper
