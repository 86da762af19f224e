"""accelkit.torch.compile: a torch.nn.Module whose forward runs on accelkit's ONNX engine.

    import accelkit.torch
    fast = accelkit.torch.compile(model, (x,))       # or accelkit.torch.optimize
    y = fast(x2)                                      # torch tensors in, torch tensors out
    print(fast.report())                              # what runs on accelkit, what in PyTorch

torch 1.13 has no dynamo, so the module is traced by torch.onnx.export into memory (opset
17) and run by a session (compile_export.py). When the whole module cannot run on accelkit
(the exporter fails, accelkit refuses an operator, the trace froze data-dependent Python
code, or the outputs differ from eager PyTorch), the module is PARTITIONED along its
module tree: its own forward code stays in PyTorch and each submodule is compiled the
same way, recursively, on the arguments it received in an eager run of the example; a
submodule that cannot run on accelkit and has no submodules of its own stays in PyTorch.

For inference only: the forward runs under torch.no_grad, refuses inputs that require
grad while grad mode is on, and the module cannot be put in training mode. Parameters
are a snapshot taken at compile time (the module is copied): after changing the
original's weights call .refresh() to export again.
"""
import collections
import copy
import sys
import types

import torch

from .compile_export import _close, export_part, grow_dynamic
from .compile_tree import Unsupported, clone, flatten, unflatten

# later calls of a submodule checked against eager (a cell called in a long loop would
# make compile slow; the dimensions that vary are checked doubled in any case)
MAX_CHECKED_CALLS = 8

Partition = collections.namedtuple("Partition", "name module runs_on reason")


def _as_args(example_inputs):
    return tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)


def _default_dynamic(args):
    """Dimension 0 (the batch) of every top-level tensor argument, by flat input index.
    (An argument that is not made of tensors makes the export fail with its name.)"""
    dynamic, index = {}, 0
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.dim() > 0:
                dynamic[index] = [0]
            index += 1
            continue
        try:
            index += len(flatten(a, "argument")[0])
        except Unsupported:
            break
    return dynamic


def _record_calls(root, runs):
    """Runs root eagerly on each argument tuple of runs, recording each submodule's
    positional call arguments (cloned): the examples submodules compile on. A run that
    fails in eager PyTorch (other than the first) records nothing."""
    calls = {}
    for k, args in enumerate(runs):
        this_run = {}

        def hook(mod, inputs):
            this_run.setdefault(id(mod), []).append(clone(inputs))

        handles = [m.register_forward_pre_hook(hook) for m in root.modules() if m is not root]
        try:
            with torch.no_grad():
                root(*clone(args))
        except Exception:  # noqa: BLE001  (only the example itself must run)
            if k == 0:
                raise
            continue
        finally:
            for h in handles:
                h.remove()
        for key, recorded in this_run.items():
            calls.setdefault(key, []).extend(recorded)
    return calls


def _varying_dims(call_list):
    """{flat input index: dimensions} that differ between the calls, plus dimension 0 of
    every tensor of rank > 0 (the batch follows the caller's)."""
    shapes = [[tuple(x.shape) for x in flatten(c, "argument")[0]] for c in call_list]
    dynamic = {}
    for i, shape in enumerate(shapes[0]):
        dims = {0} if shape else set()
        for other in shapes[1:]:
            if i < len(other) and len(other[i]) == len(shape):
                dims |= {d for d, (a, b) in enumerate(zip(shape, other[i])) if a != b}
        dynamic[i] = sorted(dims)
    return dynamic


class _Partitioner:
    """Compiles the largest pieces of a module tree that run on accelkit, replacing them in
    place (the tree is a private copy), and lists what runs where."""

    def __init__(self, calls, threads):
        self.calls, self.threads, self.partitions = calls, threads, []

    def place(self, module, name):
        """Compiles module's children (module itself stays in PyTorch)."""
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            part = self.try_module(child, full)
            if part is not None:
                setattr(module, child_name, part)

    def try_module(self, module, name):
        """An AccelkitPart for module, or None after placing its children."""
        kind = type(module).__name__
        call_list = self.calls.get(id(module))
        if not call_list:
            reason = "not called on the example inputs"
        else:
            try:
                shapes = {len(flatten(c, "argument")[0]) for c in call_list}
                if len(shapes) > 1:
                    raise Unsupported("called with different numbers of tensors")
                part = export_part(module, call_list[0], _varying_dims(call_list), self.threads,
                                   name)
                _check_calls(part, module, call_list[1:])
                self.partitions.append(Partition(name, kind, "accelkit", ""))
                return part
            except Unsupported as e:
                reason = str(e)
        children = list(module.named_children())
        self.partitions.append(Partition(name, kind, "pytorch",
                                         reason + ("; its submodules are placed below"
                                                   if children else "")))
        self.place(module, name)
        return None


def _check_calls(part, module, other_calls):
    """The later calls of a submodule (a shared head over several feature levels) must
    run on the session too, within tolerance of eager."""
    for k, args in enumerate(other_calls[:MAX_CHECKED_CALLS], start=2):
        with torch.no_grad():
            want, _ = flatten(module(*clone(args)), "output")
        try:
            got, _ = flatten(part(*args), "output")
        except Exception as e:  # noqa: BLE001  (any refusal keeps the module in PyTorch)
            raise Unsupported(f"call {k} of the example run fails on accelkit: {e}") from None
        for i, (g, w) in enumerate(zip(got, want)):
            why = _close(g.numpy(), w, f"output {i} of call {k}")
            if why:
                raise Unsupported(why)


def _check_composition(partitioned, args, want, name):
    """The partitioned module (eager glue around accelkit parts) against the eager one on
    the example: each part was checked alone, this checks how they are put together."""
    try:
        with torch.no_grad():
            got = partitioned(*clone(args))
        got_leaves, got_spec = flatten(got, "output")
        want_leaves, want_spec = flatten(want, "output")
    except Exception as e:  # noqa: BLE001  (reported with its type)
        raise RuntimeError(f"accelkit.torch.compile: {name} partitioned fails on the example "
                           f"inputs ({type(e).__name__}: {e})") from None
    if got_spec != want_spec:
        raise RuntimeError(f"accelkit.torch.compile: {name} partitioned returns another "
                           "structure than eager PyTorch")
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        why = _close(g.numpy(), w, f"output {k}")
        if why:
            raise RuntimeError(f"accelkit.torch.compile: {name} partitioned: {why}")


class CompiledModule(torch.nn.Module):
    """What accelkit.torch.compile returns. forward(*args) takes the arguments the example
    had (same nesting, dtypes and ranks; dimensions declared dynamic may change) and
    returns what the eager module returns, as torch tensors. partitions: the list of
    Partition(name, module, runs_on, reason); report(): the same as a table."""

    def __init__(self, module, example_inputs, dynamic_axes=None, threads=0, partition=True):
        super().__init__()
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"accelkit.torch.compile: expected a torch.nn.Module, got "
                            f"{type(module).__name__}")
        # the source module is kept unregistered: refresh() re-exports its current weights
        self.__dict__["_source"] = module
        self._args = clone(_as_args(example_inputs))
        self._dynamic_axes, self._threads, self._partition = dynamic_axes, threads, partition
        self._build()

    def _build(self):
        snapshot = copy.deepcopy(self._source).eval()
        for p in snapshot.parameters():
            p.requires_grad_(False)
        dynamic = (self._dynamic_axes if self._dynamic_axes is not None
                   else _default_dynamic(self._args))
        dynamic = {int(k): sorted(v) for k, v in dynamic.items()}
        name = type(snapshot).__name__
        try:
            self.runner = export_part(snapshot, self._args, dynamic, self._threads)
            self.partitions = [Partition("", name, "accelkit", "the whole module")]
            return
        except Unsupported as e:
            if not self._partition:
                raise RuntimeError(f"accelkit.torch.compile: {name} cannot run whole on "
                                   f"accelkit: {e}") from None
            why = str(e)
        placed = self._partitioned(snapshot, dynamic)
        self.runner = snapshot
        self.partitions = [Partition("", name, "pytorch", "its forward code; the whole module "
                                     f"does not run on accelkit: {why}")] + placed

    def _partitioned(self, snapshot, dynamic):
        """Places snapshot's submodules (in place) and returns the Partition list."""
        # a second run with the root's dynamic dimensions doubled shows which dimensions
        # of each submodule's arguments follow them
        runs = [self._args]
        try:
            leaves, spec = flatten(self._args, "argument")
            if any(dynamic.values()):
                runs.append(unflatten(spec, grow_dynamic(leaves, dynamic)))
        except Unsupported:
            pass  # arguments that are not all tensors: the example run only
        partitioner = _Partitioner(_record_calls(snapshot, runs), self._threads)
        with torch.no_grad():
            want = snapshot(*clone(self._args))
        partitioner.place(snapshot, "")
        _check_composition(snapshot, self._args, want, type(snapshot).__name__)
        return partitioner.partitions

    def refresh(self):
        """Exports the source module again (after its weights changed)."""
        self._build()
        return self

    def train(self, mode=True):
        if mode:
            raise RuntimeError("accelkit.torch.compile: a compiled module is for inference "
                               "(its weights are a snapshot and no gradient flows through "
                               "accelkit); train the original module and call .refresh()")
        return super().train(False)

    def forward(self, *args):
        if torch.is_grad_enabled():
            leaves = _leaves_or_empty(args)
            for i, x in enumerate(leaves):
                if x.requires_grad:
                    raise RuntimeError(
                        f"accelkit.torch.compile: input {i} requires grad; a compiled module "
                        "runs inference only (no gradient flows through accelkit): call it "
                        "under torch.no_grad() or pass a detached tensor")
        with torch.no_grad():
            return self.runner(*args)

    @property
    def runs_whole_on_accelkit(self):
        return self.partitions[0].runs_on == "accelkit"

    def report(self):
        """A table: each module placed (dotted name, type), where it runs, why."""
        rows = [(p.name or "<root>", p.module, p.runs_on, p.reason) for p in self.partitions]
        width = max(len(f"{r[0]} ({r[1]})") for r in rows)
        lines = [f"{f'{n} ({m})':<{width}}  {where:<8}  {why}".rstrip()
                 for n, m, where, why in rows]
        on = sum(p.runs_on == "accelkit" for p in self.partitions)
        return (f"accelkit.torch.compile: {on} of {len(rows)} placed modules run on "
                "accelkit\n" + "\n".join(lines))


def _leaves_or_empty(args):
    try:
        return flatten(args, "arguments")[0]
    except Unsupported:
        return [a for a in args if isinstance(a, torch.Tensor)]


def compile(module, example_inputs, dynamic_axes=None, threads=0, partition=True):
    """A CompiledModule running module's forward on accelkit (see the module's doc).
    example_inputs: a tensor or a tuple of positional arguments (tensors, or tuples,
    lists, dicts of tensors). dynamic_axes: {flat input index: [dimensions]} that may
    change between calls (default: dimension 0 of each top-level tensor argument).
    threads: the sessions' intra-op threads (0: all cores). partition=False raises when
    the whole module cannot run on accelkit instead of partitioning it."""
    return CompiledModule(module, example_inputs, dynamic_axes, threads, partition)


optimize = compile


class _CallableModule(types.ModuleType):
    """This file is accelkit.torch's submodule `compile`, and importing a submodule sets
    the package's attribute of that name to the module, hiding the function
    accelkit.torch.compile (after `from accelkit.torch.compile import CompiledModule`,
    say). Calling the module calls the function, so both spellings keep working."""

    def __call__(self, *args, **kwargs):
        return compile(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
