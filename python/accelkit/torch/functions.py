"""Helpers built on the collectives: parameters, optimizer state and Python objects from
one rank to all."""
import io
import pickle

import torch

from . import mpi_ops as _ops
from .mpi_ops import global_process_set

try:  # Horovod uses cloudpickle (lambdas, local classes); plain pickle otherwise
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - depends on the installation
    _pickler = pickle


def _is_root(root_rank, process_set):
    """Whether this process is root_rank: a world rank, inside a process set too (as in
    Horovod); a root outside the set is refused."""
    ps_id = _ops._ps_id(process_set)
    _ops._check_included(ps_id)
    _ops._set_root(ps_id, root_rank)
    return _ops.rank() == int(root_rank)


def broadcast_parameters(params, root_rank, prefix=None, process_set=global_process_set):
    """Overwrites the given tensors on every rank with root_rank's, in place. params: a
    state_dict (names sorted, as in Horovod), model.named_parameters(), or a list of
    tensors."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        try:
            items = [p if isinstance(p, tuple) else (None, p) for p in params]
        except TypeError:
            raise ValueError(f"invalid params of type: {type(params)}")
    handles = []
    for name, p in items:
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"broadcast_parameters: {name or 'an entry'} is a "
                             f"{type(p).__name__}, not a tensor")
        full = None if name is None else (f"{prefix}{name}" if prefix else name)
        handles.append(_ops.broadcast_async_(p, root_rank, full, process_set))
    error = None
    for h in handles:
        try:
            _ops.synchronize(h)
        except Exception as e:
            error = error or e
    if error is not None:
        raise error


class _TensorSlot:
    """Stands for the index-th tensor of the root's optimizer state in the skeleton."""

    def __init__(self, index, shape, dtype):
        self.index, self.shape, self.dtype = index, tuple(shape), dtype


def _strip(obj, found):
    if isinstance(obj, torch.Tensor):
        found.append(obj)
        return _TensorSlot(len(found) - 1, obj.shape, obj.dtype)
    if isinstance(obj, dict):
        return {k: _strip(v, found) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strip(v, found) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_strip(v, found) for v in obj)
    return obj


def _fill(obj, tensors):
    if isinstance(obj, _TensorSlot):
        return tensors[obj.index]
    if isinstance(obj, dict):
        return {k: _fill(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_fill(v, tensors) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_fill(v, tensors) for v in obj)
    return obj


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Makes every rank's optimizer state (per-parameter buffers and the param groups'
    options such as lr) equal to root_rank's.

    As in Horovod, an optimizer without state (a fresh one) first gets it: the parameters
    that require grad and have none get zero gradients (parameters without gradients keep
    None) and the wrapped torch optimizer steps once, locally. Then the structure goes out
    as one pickled object from the root and the tensors as in-place broadcasts; the root's
    state replaces every other rank's."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    is_root = _is_root(root_rank, process_set)
    if len(optimizer.state_dict()["state"]) == 0:
        _initialize_state(optimizer)
    state_dict = optimizer.state_dict()
    tensors = []
    skeleton = _strip(state_dict, tensors) if is_root else None
    skeleton = broadcast_object(skeleton, root_rank, name="optimizer_state.skeleton",
                                process_set=process_set)
    if not is_root:
        slots = []
        _collect_slots(skeleton, slots)
        slots.sort(key=lambda s: s.index)
        tensors = [torch.empty(s.shape, dtype=s.dtype) for s in slots]
    handles = [_ops.broadcast_async_(t, root_rank, f"optimizer_state.{i}", process_set)
               for i, t in enumerate(tensors)]
    for h in handles:
        _ops.synchronize(h)
    if not is_root:
        optimizer.load_state_dict(_fill(skeleton, tensors))


def _initialize_state(optimizer):
    """Horovod's state initialisation of a fresh optimizer: zero gradients for the
    parameters that require grad, then one step of the torch optimizer itself (for a
    DistributedOptimizer its wrapped class's step: no collective, ranks need not agree)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
                if isinstance(optimizer, torch.optim.SparseAdam):
                    p.grad = p.grad.to_sparse()
    from .optimizer import _DistributedMixin
    if isinstance(optimizer, _DistributedMixin):
        super(_DistributedMixin, optimizer).step()
    else:
        optimizer.step()


def _collect_slots(obj, out):
    if isinstance(obj, _TensorSlot):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _collect_slots(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _collect_slots(v, out)


def _dumps(obj):
    buf = io.BytesIO()
    _pickler.dump(obj, buf)
    return buf.getvalue()


def _loads(data):
    return pickle.loads(data)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's obj (any picklable object) on every rank; returns it (unpickled)."""
    if name is None:
        name = _ops._op_name("object", None, _ops._ps_id(process_set))
    if _is_root(root_rank, process_set):
        data = _dumps(obj)
        size = torch.tensor([len(data)], dtype=torch.int64)
        _ops.broadcast_(size, root_rank, f"{name}.sz", process_set)
        payload = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
            torch.empty(0, dtype=torch.uint8)
        _ops.broadcast_(payload, root_rank, f"{name}.t", process_set)
        return _loads(data)
    size = torch.zeros(1, dtype=torch.int64)
    _ops.broadcast_(size, root_rank, f"{name}.sz", process_set)
    payload = torch.empty(int(size[0]), dtype=torch.uint8)
    _ops.broadcast_(payload, root_rank, f"{name}.t", process_set)
    return _loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """The list of every rank's obj (any picklable object), in rank order."""
    if name is None:
        name = _ops._op_name("gather_object", None, _ops._ps_id(process_set))
    data = _dumps(obj)
    payload = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
        torch.empty(0, dtype=torch.uint8)
    sizes = _ops.allgather(torch.tensor([len(data)], dtype=torch.int64), f"{name}.sz",
                           process_set)
    gathered = _ops.allgather(payload, f"{name}.t", process_set).numpy().tobytes()
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(_loads(gathered[offset:offset + n]))
        offset += n
    return out
