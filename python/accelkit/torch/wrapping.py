"""Wrapping a torch optimizer in an accelkit mixin (DistributedOptimizer, its Adasum
variant, LocalSGD) the way Horovod does: the wrapped object is an instance of the
original's class and shares its state."""
import weakref


def wrap_optimizer(optimizer, mixin):
    """A new object of a class made per wrap, (mixin, type(optimizer)), so that
    isinstance(obj, type(optimizer)) holds and super() in the mixin reaches the original
    methods. It shares the original's param_groups (LR schedulers attached to either keep
    working), state and defaults, but not methods patched onto the instance (an LR
    scheduler wraps optimizer.step): bound to the original, those would bypass the mixin."""
    cls = type(optimizer.__class__.__name__, (mixin, optimizer.__class__),
               {"__module__": optimizer.__class__.__module__})
    obj = cls.__new__(cls)
    obj.__dict__.update({k: v for k, v in optimizer.__dict__.items()
                         if k not in ("step", "zero_grad", "synchronize")})
    obj._wrapped_original = weakref.ref(optimizer)
    return obj


def count_original_step(obj):
    """Called by a wrapper's step(): an LR scheduler made before the wrap counts the
    original's steps (and warns that the scheduler stepped first if they stay at 0)."""
    original = obj._wrapped_original()
    if original is not None and "step" in original.__dict__ and "_step_count" in original.__dict__:
        original._step_count += 1
