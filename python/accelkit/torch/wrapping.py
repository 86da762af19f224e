"""Wrapping a torch optimizer in an accelkit mixin (DistributedOptimizer, its Adasum
variant, LocalSGD) the way Horovod does: the wrapped object is an instance of the
original's class and shares its state; and the gradient hooks those wrappers hang on
each parameter."""
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


def hook_gradient_accumulators(params, make_hook):
    """Hangs make_hook(p) on the gradient accumulator of every parameter that requires a
    gradient: it runs once backward() has added to p.grad. Returns the accumulators, which
    the caller keeps (the hooks live as long as they do)."""
    accs = []
    for p in params:
        if p.requires_grad:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(make_hook(p))
            accs.append(acc)
    return accs


def count_backward_pass(delays, p):
    """One more backward pass reached p: True when it was the step's last one (delays[p],
    the passes still to come, reaches 0); Horovod's error when there was one too many."""
    if delays[p] <= 0:
        raise AssertionError(
            "Gradients were computed more than backward_passes_per_step times "
            "before call to step(). Increase backward_passes_per_step to "
            "accumulate gradients locally.")
    delays[p] -= 1
    return delays[p] == 0
