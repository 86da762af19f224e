"""Nested call arguments and results of a torch module as flat tensor lists, for
accelkit.torch.compile: an ONNX graph takes and returns flat tensors, the module takes
and returns tensors nested in tuples, lists and dicts. `flatten` gives the leaves and a
spec of the nesting; `unflatten` rebuilds the same nesting around new leaves."""
import torch


class Unsupported(Exception):
    """Why a module (or its call) cannot run on accelkit; the partitioner then keeps it
    in PyTorch and says so in the report."""


def flatten(value, what):
    """(leaves, spec) of a tensor nested in tuples, lists and dicts. Any other leaf (None,
    a number, an ImageList) raises Unsupported naming `what` and the leaf's type: an ONNX
    graph carries tensors only, and a traced constant would be silently frozen."""
    leaves = []

    def walk(v, where):
        if isinstance(v, torch.Tensor):
            leaves.append(v)
            return ("tensor",)
        if isinstance(v, (tuple, list)):
            return (type(v), [walk(x, f"{where}[{i}]") for i, x in enumerate(v)])
        if isinstance(v, dict):
            keys = list(v.keys())
            return ("dict", type(v), keys, [walk(v[k], f"{where}[{k!r}]") for k in keys])
        raise Unsupported(f"{where} is a {type(v).__name__}, not a tensor (or tuple, list, "
                          "dict of tensors)")

    spec = walk(value, what)
    return leaves, spec


def unflatten(spec, leaves):
    """The nesting `spec` (from flatten) around `leaves`, in the same order."""
    it = iter(leaves)

    def build(s):
        if s[0] == "tensor":
            return next(it)
        if s[0] == "dict":
            _, kind, keys, subs = s
            return kind((k, build(sub)) for k, sub in zip(keys, subs))
        kind, subs = s
        items = [build(sub) for sub in subs]
        if kind in (tuple, list):
            return kind(items)
        return kind(*items)  # a namedtuple

    return build(spec)


def describe(spec):
    """The nesting as text for error messages: "(tensor, [tensor, tensor])"."""
    if spec[0] == "tensor":
        return "tensor"
    if spec[0] == "dict":
        return "{" + ", ".join(f"{k!r}: {describe(s)}" for k, s in zip(spec[2], spec[3])) + "}"
    inner = ", ".join(describe(s) for s in spec[1])
    return f"[{inner}]" if spec[0] is list else f"({inner})"


def clone(value):
    """A deep copy of the tensors in a nested value (recorded call arguments must not see
    a later in-place operation such as ReLU(inplace=True))."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        items = [clone(x) for x in value]
        if type(value) in (tuple, list):
            return type(value)(items)
        return type(value)(*items) if isinstance(value, tuple) else type(value)(items)
    if isinstance(value, dict):
        return type(value)((k, clone(v)) for k, v in value.items())
    return value
