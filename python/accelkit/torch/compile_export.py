"""One torch module exported in memory to ONNX and run by an accelkit session: the piece
accelkit.torch.compile puts where a module (or a submodule) runs on accelkit.

`export_part(module, args, dynamic)` traces the module with torch.onnx.export into a
BytesIO (opset 17, the newest torch 1.13's exporter writes), opens a NativeSession on the
bytes and checks the session against eager PyTorch on the example arguments, and again
with the dynamic dimensions changed, before anything runs on it. It raises Unsupported
with the reason when any step fails, so the partitioner can keep the module in PyTorch.
"""
import io
import warnings

import numpy as np
import torch

from ..inference import NativeSession
from .._lib import AccelkitError
from .compile_tree import Unsupported, clone, describe, flatten, unflatten

OPSET = 17  # torch 1.13's torch.onnx.export writes opsets 7..17
# the largest difference from eager the compile-time check accepts: TOL times the
# output's largest magnitude, at least TOL (1e-4 for outputs of magnitude up to 1). It is
# relative to the whole tensor, not to each element: float32 sums in another order differ
# by rounding in proportion to the terms' magnitude, which can be far larger than a
# small element's. A check that fails keeps the module in PyTorch.
TOL = 1e-4


def _export_bytes(module, args, in_names, out_names, dynamic_axes):
    """The module traced to ONNX bytes. A TracerWarning means the trace froze something
    the module computes in Python from tensor values (an `if` on a tensor, a size turned
    into a constant): the graph would be right for the example only, so it is refused."""
    buf = io.BytesIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.onnx.export(module, args, buf, opset_version=OPSET, input_names=in_names,
                              output_names=out_names, dynamic_axes=dynamic_axes,
                              do_constant_folding=True)
        except Exception as e:  # the exporter raises many types; all mean "cannot export"
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise Unsupported(f"torch.onnx.export failed: {first}") from None
    for w in caught:
        if issubclass(w.category, torch.jit.TracerWarning):
            text = str(w.message).strip().splitlines()[0].split(". ")[0]
            raise Unsupported(f"data-dependent Python code (TracerWarning: {text})")
    return buf.getvalue()


def grow_dynamic(leaves, dynamic):
    """The example leaves with every dynamic dimension doubled (the leaf followed by its
    mirror image along it), to check that the exported graph did not freeze the
    example's sizes."""
    grown = []
    for i, x in enumerate(leaves):
        for d in dynamic.get(i, ()):
            x = torch.cat([x, x.flip(d)], dim=d)
        grown.append(x)
    return grown


def _numpy(x):
    return np.ascontiguousarray(x.detach().cpu().numpy())


def _close(got, want, where):
    """None when got matches eager within TOL * max(1, max |eager|), else why not."""
    if got.shape != tuple(want.shape):
        return f"{where} has shape {list(got.shape)}, eager {list(want.shape)}"
    w = want.detach().numpy()
    if got.dtype != w.dtype:
        return f"{where} has dtype {got.dtype}, eager {w.dtype}"
    if not np.issubdtype(w.dtype, np.floating):
        return None if np.array_equal(got, w) else f"{where} differs from eager"
    if not w.size:
        return None
    if not np.array_equal(np.isnan(got), np.isnan(w)):
        return f"{where} has NaN where eager has none (or the reverse)"
    keep = ~np.isnan(w)
    g, v = got[keep].astype(np.float64), w[keep].astype(np.float64)
    diff = np.where(g == v, 0.0, np.abs(g - v))  # equal infinities differ by 0
    scale = max(1.0, float(np.max(np.abs(v[np.isfinite(v)]), initial=0.0)))
    worst = float(np.max(diff, initial=0.0))
    if not worst <= TOL * scale:  # an infinite difference fails too
        return (f"{where} differs from eager by up to {worst:.3g} (beyond {TOL:g} x "
                f"{scale:.3g}, its largest magnitude)")
    return None


class AccelkitPart(torch.nn.Module):
    """A module's forward on an accelkit session: the call's tensors (nested as at export)
    are checked (structure, dtype, rank, fixed dimensions), fed to the session, and its
    outputs returned as torch tensors in the nesting eager PyTorch returned."""

    def __init__(self, module, label, session, in_spec, in_meta, feed_names, out_spec,
                 out_names):
        super().__init__()
        # the module it replaces, unregistered: a parent's forward code may read its
        # attributes (out_channels, a weight), which __getattr__ then finds there
        self.__dict__["_module"] = module
        self._label = label  # "backbone (BackboneWithFPN)": named in every refusal
        self._session, self._in_spec, self._in_meta = session, in_spec, in_meta
        self._feed_names, self._out_spec, self._out_names = feed_names, out_spec, out_names

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            module = self.__dict__.get("_module")
            if module is None:
                raise
            return getattr(module, name)

    def _check(self, i, x):
        dtype, shape, dyn = self._in_meta[i]
        at = f"{self._label}: input {i}"
        if x.device.type != "cpu":
            raise ValueError(f"{at}: accelkit runs on the CPU; the tensor is on {x.device}")
        if x.dtype != dtype:
            raise TypeError(f"{at}: dtype {x.dtype}, compiled for {dtype}")
        if x.dim() != len(shape):
            raise ValueError(f"{at}: rank {x.dim()} (shape {list(x.shape)}), compiled for "
                             f"rank {len(shape)} (shape {list(shape)})")
        for d, (got, want) in enumerate(zip(x.shape, shape)):
            if d not in dyn and got != want:
                raise ValueError(f"{at}: dimension {d} is {got}, compiled for {want} "
                                 f"(dynamic dimensions: {sorted(dyn) or 'none'}; pass "
                                 "dynamic_axes to compile to make it dynamic)")

    def forward(self, *args):
        try:
            leaves, spec = flatten(args, "arguments")
        except Unsupported as e:
            raise TypeError(f"{self._label}: {e}") from None
        if spec != self._in_spec:
            raise TypeError(f"{self._label}: called with {describe(spec)}, compiled "
                            f"for {describe(self._in_spec)}")
        names, arrays = [], []
        for i, x in enumerate(leaves):
            self._check(i, x)
            if self._feed_names[i] is not None:  # the exporter drops unused inputs
                names.append(self._feed_names[i])
                arrays.append(_numpy(x))
        outs = self._session.run(names, arrays, self._out_names)
        return unflatten(self._out_spec, [torch.from_numpy(o) for o in outs])


def export_part(module, args, dynamic, threads=0, name=""):
    """An AccelkitPart running module(*args), checked against eager; raises Unsupported.
    dynamic: {flat input index: dimensions that may change}; name: the module's dotted
    name in the compiled tree ("" for the root), for error messages."""
    in_leaves, in_spec = flatten(args, "argument")
    if not in_leaves:
        raise Unsupported("takes no tensor")
    for i, x in enumerate(in_leaves):
        if x.device.type != "cpu":
            raise Unsupported(f"input {i} is on {x.device} (accelkit runs on the CPU)")
    with torch.no_grad():
        try:
            eager = module(*clone(args))
        except Exception as e:  # e.g. a call that passed keywords the hooks cannot see
            raise Unsupported(f"eager PyTorch fails on the recorded positional arguments "
                              f"({type(e).__name__}: {e})") from None
    out_leaves, out_spec = flatten(eager, "output")
    if not out_leaves:
        raise Unsupported("returns no tensor")
    in_names = [f"input_{i}" for i in range(len(in_leaves))]
    out_names = [f"output_{i}" for i in range(len(out_leaves))]
    axes = {in_names[i]: {d: f"in{i}_d{d}" for d in dims} for i, dims in dynamic.items() if dims}
    # every output dimension may follow the inputs' dynamic ones
    axes.update({n: {d: f"out{k}_d{d}" for d in range(o.dim())}
                 for k, (n, o) in enumerate(zip(out_names, out_leaves)) if o.dim()})
    data = _export_bytes(module, clone(args), in_names, out_names, axes)
    try:
        session = NativeSession(data, threads=threads)
    except AccelkitError as e:
        raise Unsupported(f"accelkit refused the exported graph: {e}") from None
    present = {a.name for a in session.inputs}
    feed = [n if n in present else None for n in in_names]
    if [a.name for a in session.outputs] != out_names:
        raise Unsupported(f"the exported graph has outputs {[a.name for a in session.outputs]}, "
                          f"expected {out_names}")
    meta = [(x.dtype, tuple(x.shape), frozenset(dynamic.get(i, ())))
            for i, x in enumerate(in_leaves)]
    kind = type(module).__name__
    label = f"accelkit-compiled {name} ({kind})" if name else f"accelkit-compiled {kind}"
    part = AccelkitPart(module, label, session, in_spec, meta, feed, out_spec, out_names)
    _verify(part, module, args, in_leaves, in_spec, out_leaves, dynamic)
    return part


def _verify(part, module, args, in_leaves, in_spec, eager_leaves, dynamic):
    """Raises Unsupported when the session's outputs differ from eager PyTorch on the
    example arguments, or on them with every dynamic dimension doubled."""
    trials = [("the example inputs", args, eager_leaves)]
    if any(dynamic.values()):
        grown = unflatten(in_spec, grow_dynamic(in_leaves, dynamic))
        with torch.no_grad():
            try:
                want, _ = flatten(module(*clone(grown)), "output")
            except Exception as e:
                raise Unsupported(f"eager PyTorch fails with the dynamic dimensions doubled "
                                  f"({type(e).__name__}: {e})") from None
        trials.append(("inputs with the dynamic dimensions doubled", grown, want))
    for what, call_args, want in trials:
        try:
            got, _ = flatten(part(*call_args), "output")
        except (AccelkitError, TypeError, ValueError) as e:
            raise Unsupported(f"accelkit failed on {what}: {e}") from None
        if len(got) != len(want):
            raise Unsupported(f"{len(got)} outputs on {what}, eager {len(want)}")
        for k, (g, w) in enumerate(zip(got, want)):
            why = _close(g.numpy(), w, f"output {k} on {what}")
            if why:
                raise Unsupported(why)
