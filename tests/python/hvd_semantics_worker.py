"""One rank of the Horovod-semantics tests (tests/python/test_horovod_semantics.py starts
it). Usage: hvd_semantics_worker.py MODE OUTDIR

    ops     every case below, in order, on the ranks of `ak launch -np 2`; writes
            OUTDIR/ops.<rank>.json {case: "ok" | traceback}
    world   prints rank/size/local_rank/local_size as the runtime sees them (the launcher
            variables test starts the processes itself)
    stall   rank 1 stops after two allreduces; both ranks write the error they get to
            OUTDIR/stall.<rank>.txt with the seconds it took

Each case says which documented Horovod behaviour it checks. Every rank issues the same
collectives in the same order and checks results after them (as in hvd_worker.py), so a
failed check does not desynchronize the ranks.
"""
import json
import os
import sys
import time
import traceback

import torch
import torch.nn as nn

import horovod.torch as hvd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hvd_worker import close  # noqa: E402

torch.set_num_threads(1)
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def values(seed, rank, shape, dtype, low=-9, high=10):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return torch.randint(low, high, shape, generator=g).to(dtype)


INT_LIMITS = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int16: (-32768, 32767),
              torch.int32: (-2**31, 2**31 - 1), torch.int64: (-2**63, 2**63 - 1)}


def horovod_scaled(x, factor, dtype):
    """Horovod's scaling of an integer: the product in double, truncated toward zero."""
    if factor == 1.0:
        return x.to(torch.int64)
    lo, hi = INT_LIMITS[dtype]
    return torch.trunc(x.double() * factor).clamp(lo, hi).to(torch.int64)


def int_reference(xs, op, pre, post, dtype):
    n = len(xs)
    total = sum(horovod_scaled(x, pre, dtype) for x in xs)
    factor = post / n if op == hvd.Average else post
    return horovod_scaled(total, factor, dtype).to(dtype)


@case
def integer_prescale_postscale():
    """prescale_factor/postscale_factor on integer tensors: each input scaled in double and
    truncated, the sum likewise (Average is a postscale of 1/size), as Horovod does."""
    n, r = hvd.size(), hvd.rank()
    got, want = [], []
    for i, dtype in enumerate((torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)):
        low = 0 if dtype == torch.uint8 else -9
        for op, pre, post in ((hvd.Sum, 0.5, 3.0), (hvd.Average, 1.0, 1.0),
                              (hvd.Average, 2.5, 0.4)):
            x = values(i, r, (7,), dtype, low)
            got.append(hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post,
                                     name=f"iscale.{i}.{op}.{pre}"))
            want.append(int_reference([values(i, k, (7,), dtype, low) for k in range(n)],
                                      op, pre, post, dtype))
    rows = values(9, r, (4, 2), torch.int32)
    part = hvd.reducescatter(rows, op=hvd.Sum, prescale_factor=1.5, name="iscale.rs")
    full = int_reference([values(9, k, (4, 2), torch.int32) for k in range(n)], hvd.Sum, 1.5,
                         1.0, torch.int32)
    for k, (g, w) in enumerate(zip(got, want)):
        close(g, w, 0, f"integer scaling {k}")
    per = 4 // n
    close(part, full[r * per:(r + 1) * per], 0, "integer reducescatter prescale")


@case
def int16_and_bool_reductions():
    """int16 reduces with every op (sums wrap as int16 arithmetic does); bool reduces as a
    logical OR (Sum, Average, Max) or AND (Min, Product)."""
    n, r = hvd.size(), hvd.rank()
    assert n == 2, "written for 2 ranks (the reducescatter gives each one row)"
    ops = (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product)
    big = torch.tensor([30000, -30000, 7, -3], dtype=torch.int16)
    got16 = [hvd.allreduce(big + r, op=op, name=f"i16.{op}") for op in ops]
    inplace16 = big.clone() + r
    hvd.allreduce_(inplace16, op=hvd.Sum, name="i16.inplace")
    flags = torch.tensor([True, r == 0, False, True])
    gotb = [hvd.allreduce(flags, op=op, name=f"bool.{op}") for op in ops]
    grouped = hvd.grouped_allreduce([flags, big + r], op=hvd.Sum, name="mixed")
    part16 = hvd.reducescatter(torch.stack([big + r] * 2), op=hvd.Sum, name="i16.rs")
    s = torch.stack([(big + k).long() for k in range(n)])
    wrapped = s.sum(0).to(torch.int16)  # Horovod sums in int16: 30000 + 30001 wraps
    ref16 = {hvd.Sum: wrapped, hvd.Average: horovod_scaled(wrapped, 1.0 / n, torch.int16),
             hvd.Min: s.min(0).values, hvd.Max: s.max(0).values, hvd.Product: s.prod(0)}
    fl = torch.stack([torch.tensor([True, k == 0, False, True]) for k in range(n)])
    refb = {hvd.Sum: fl.any(0), hvd.Average: fl.any(0), hvd.Max: fl.any(0),
            hvd.Min: fl.all(0), hvd.Product: fl.all(0)}
    for op, g in zip(ops, got16):
        close(g, ref16[op].to(torch.int16), 0, f"int16 op {op}")
    close(inplace16, ref16[hvd.Sum].to(torch.int16), 0, "int16 in place")
    for op, g in zip(ops, gotb):
        close(g, refb[op], 0, f"bool op {op}")
    close(grouped[0], refb[hvd.Sum], 0, "bool in a group")
    close(grouped[1], ref16[hvd.Sum].to(torch.int16), 0, "int16 in a group")
    close(part16, ref16[hvd.Sum].to(torch.int16).unsqueeze(0), 0, "int16 reducescatter")
    try:
        hvd.allreduce(flags, prescale_factor=2.0, name="bool.scaled")
        raise AssertionError("a scaled bool allreduce did not raise")
    except ValueError as e:
        assert "bool" in str(e), str(e)


@case
def duplicate_names_raise_valueerror():
    """Two in-flight ops of one name: ValueError naming it (allreduce, allgather,
    broadcast). Rank 1 submits late, so rank 0's first op is certainly still in flight."""
    r = hvd.rank()
    errors = {}
    kinds = (("allreduce", lambda: hvd.allreduce_async(torch.ones(2), name="twin")),
             ("allgather", lambda: hvd.allgather_async(torch.ones(1, 2), name="twin")),
             ("broadcast", lambda: hvd.broadcast_async(torch.ones(2), 0, name="twin")))
    for kind, submit in kinds:
        if r != 0:
            time.sleep(0.3)
        h = submit()
        if r == 0:
            try:
                submit()
                errors[kind] = "no error"
            except ValueError as e:
                errors[kind] = e
        hvd.synchronize(h)
    after = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="twin.after")
    for kind, e in errors.items():
        assert not isinstance(e, str), f"{kind}: a duplicate name did not raise"
        assert f"'{kind}.twin'" in str(e) and "same name" in str(e), str(e)
        assert isinstance(e, hvd.HorovodInternalError), type(e)
    close(after, torch.full((1,), float(hvd.size())), 0, "after the duplicates")


@case
def grouped_autograd():
    """grouped_allreduce / grouped_allgather / grouped_reducescatter results carry grad_fn;
    gradients as Horovod defines them: the grouped allreduce of the gradients (same op and
    scale factors), the averaged gradient rows of this rank, the allgathered gradients."""
    n, r = hvd.size(), hvd.rank()
    w = lambda seed, k, shape: values(seed, k, shape, torch.float64).double() + 0.5
    xs = [torch.ones(3, dtype=torch.float64, requires_grad=True),
          torch.ones(2, 2, dtype=torch.float64, requires_grad=True)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum, prescale_factor=3.0, name="ga")
    fns = [o.grad_fn is not None for o in outs]
    sum(((o * w(40 + i, r, o.shape)).sum() for i, o in enumerate(outs))).backward()
    ys = [torch.ones(r + 1, 2, dtype=torch.float64, requires_grad=True),
          torch.ones(1, dtype=torch.float64, requires_grad=True)]
    gathered = hvd.grouped_allgather(ys, name="gg")
    fns += [g.grad_fn is not None for g in gathered]
    sum(((g * w(50 + i, r, g.shape)).sum() for i, g in enumerate(gathered))).backward()
    zs = [torch.ones(2 * n, 3, dtype=torch.float64, requires_grad=True)]
    parts = hvd.grouped_reducescatter(zs, op=hvd.Average, name="gr")
    fns += [p.grad_fn is not None for p in parts]
    (parts[0] * w(60, r, parts[0].shape)).sum().backward()
    assert all(fns), f"results without grad_fn: {fns}"
    for i, x in enumerate(xs):  # backward: Sum with prescale 3 of every rank's upstream
        close(x.grad, 3.0 * sum(w(40 + i, k, x.shape) for k in range(n)), 1e-12, f"ga {i}")
    # the mean of the upstream gradients, this rank's rows: rank k gave k + 1 rows of
    # ys[0] and one element of ys[1]
    rows = [k + 1 for k in range(n)]
    for i, (shape, start) in enumerate((((sum(rows), 2), sum(rows[:r])), ((n,), r))):
        mean = sum(w(50 + i, k, shape) for k in range(n)) / n
        close(ys[i].grad, mean.narrow(0, start, ys[i].shape[0]), 1e-12, f"gg {i}")
    ref = torch.cat([w(60, k, (2, 3)) for k in range(n)]) / n  # allgather, / n (Average)
    close(zs[0].grad, ref, 1e-12, "gr")


@case
def broadcast_in_process_sets():
    """Inside a process set root_rank is a global rank (as in Horovod); the gradient goes to
    that root; broadcast_object and broadcast_parameters too; a root outside the set is a
    clear error."""
    n, r = hvd.size(), hvd.rank()
    singles = [hvd.add_process_set([k]) for k in range(n)]
    last = n - 1
    everyone = hvd.add_process_set(list(range(n)))
    alone = hvd.broadcast(torch.full((3,), float(r)), root_rank=r, process_set=singles[r],
                          name="alone")
    from_last = hvd.broadcast(torch.full((2,), float(r)), root_rank=last,
                              process_set=everyone, name="from_last")
    t = torch.full((2,), float(r + 1), requires_grad=True)
    (hvd.broadcast(t, root_rank=r, process_set=singles[r], name="grad.alone") * 2).sum().backward()
    u = torch.full((2,), float(r + 1), requires_grad=True)
    out = hvd.broadcast(u, root_rank=last, process_set=everyone, name="grad.last")
    (out * (r + 1)).sum().backward()
    obj = hvd.broadcast_object({"from": r}, root_rank=r, process_set=singles[r])
    obj_last = hvd.broadcast_object({"from": r}, root_rank=last, process_set=everyone)
    lin = nn.Linear(2, 2)
    torch.nn.init.constant_(lin.weight, float(r))
    hvd.broadcast_parameters(lin.state_dict(), root_rank=last, process_set=everyone)
    try:
        hvd.broadcast(torch.ones(1), root_rank=(r + 1) % n, process_set=singles[r],
                      name="outside")
        outside = "no error"
    except ValueError as e:
        outside = str(e)
    for ps in singles + [everyone]:
        hvd.remove_process_set(ps)
    close(alone, torch.full((3,), float(r)), 0, "single-rank set, global root")
    close(from_last, torch.full((2,), float(last)), 0, "root = last global rank")
    close(t.grad, torch.full((2,), 2.0), 0, "gradient reaches the root of a one-rank set")
    mean = sum(k + 1 for k in range(n)) / n
    close(u.grad, torch.full((2,), mean if r == last else 0.0), 1e-6, "gradient to the root")
    assert obj == {"from": r} and obj_last == {"from": last}, (obj, obj_last)
    close(lin.weight.detach(), torch.full((2, 2), float(last)), 0, "broadcast_parameters")
    if n > 1:
        assert "not a member of process set" in outside, outside


@case
def broadcast_optimizer_state_without_gradients():
    """A fresh optimizer over a parameter that needs no gradient: Horovod gives the others
    zero gradients and steps once to create the state, the one without keeps grad None,
    and the state is the root's everywhere."""
    r = hvd.rank()

    class NoGrad(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.tensor([1, 3]).int(), requires_grad=False)
            self.b = nn.Parameter(torch.rand(4) + r)

        def forward(self, x):
            return torch.index_select(self.b, 0, self.a.long()) * x

    model = NoGrad()
    opt = torch.optim.SGD(model.parameters(), lr=0.001, weight_decay=1e-6, momentum=0.9,
                          nesterov=True)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    params = opt.param_groups[0]["params"]
    grad_a = params[0].grad
    grad_b = params[1].grad.clone() if params[1].grad is not None else None
    bgrad = hvd.broadcast(grad_b, root_rank=0) if grad_b is not None else None
    buf = opt.state_dict()["state"].get(1, {}).get("momentum_buffer")
    buf = buf.clone() if buf is not None else None
    bbuf = hvd.broadcast(buf, root_rank=0, name="momentum") if buf is not None else None
    # a training step afterwards works
    opt.zero_grad()
    model(torch.ones(2)).sum().backward()
    opt.step()
    assert grad_a is None, "a parameter without requires_grad got a gradient"
    assert grad_b is not None, "the trainable parameter has no (zero) gradient"
    close(grad_b, bgrad, 0, "zero gradient")
    assert buf is not None, "no optimizer state was created"
    close(buf, bbuf, 0, "momentum buffer is the root's")


@case
def sparse_allreduce_async_handles():
    """sparse_allreduce_async returns what Horovod returns: a handle that is called for
    the result (and that synchronize() takes); in process sets Average divides by the set
    size."""
    n, r = hvd.size(), hvd.rank()
    singles = [hvd.add_process_set([k]) for k in range(n)]
    everyone = hvd.add_process_set(list(range(n)))
    idx = torch.tensor([[0, 2, 2 + r]])
    val = torch.tensor([1.0, 2.0, 3.0 * (r + 1)])
    sp = torch.sparse_coo_tensor(idx, val, (5,))
    h_world = hvd.sparse_allreduce_async(sp, name="sp.world", op=hvd.Sum)
    h_set = hvd.sparse_allreduce_async(sp, name="sp.set", op=hvd.Average, process_set=everyone)
    h_one = hvd.sparse_allreduce_async(sp, name="sp.one", op=hvd.Average,
                                       process_set=singles[r])
    h_sync = hvd.sparse_allreduce_async(sp, name="sp.sync", op=hvd.Sum)
    world, in_set, one = h_world(), h_set(), h_one()
    synced = hvd.synchronize(h_sync)
    for ps in singles + [everyone]:
        hvd.remove_process_set(ps)
    ref = sum(torch.sparse_coo_tensor(torch.tensor([[0, 2, 2 + k]]),
                                      torch.tensor([1.0, 2.0, 3.0 * (k + 1)]), (5,)).to_dense()
              for k in range(n))
    assert world.is_sparse and in_set.is_sparse
    close(world.to_dense(), ref, 0, "sparse sum, handle called")
    close(synced.to_dense(), ref, 0, "sparse sum, synchronize(handle)")
    close(in_set.to_dense(), ref / n, 1e-6, "sparse average in a process set")
    close(one.to_dense(), sp.to_dense(), 0, "sparse average in a one-rank set")


@case
def join_while_others_allgather_and_broadcast():
    """A joined rank takes part in the others' allgathers (contributing no rows) and
    broadcasts; the runtime goes on afterwards."""
    n, r = hvd.size(), hvd.rank()
    got = {}
    if r == 0:
        got["allgather"] = hvd.allgather(torch.full((2, 1), 5.0), name="jg")
        got["broadcast"] = hvd.broadcast(torch.full((2,), 7.0), 0, name="jb")
        got["object"] = hvd.allgather_object({"r": r}, name="jo")
        got["bobject"] = hvd.broadcast_object("root says", 0, name="jbo")
    last = hvd.join()
    after = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="join.after")
    gathered = hvd.allgather(torch.tensor([r]), name="join.after.ag")
    if r == 0:
        close(got["allgather"], torch.full((2, 1), 5.0), 0, "allgather while others joined")
        close(got["broadcast"], torch.full((2,), 7.0), 0, "broadcast while others joined")
        assert got["object"] == [{"r": 0}], got["object"]
        assert got["bobject"] == "root says"
    assert last == 0 or n == 1, f"last joined rank {last}"
    close(after, torch.full((1,), float(n)), 0, "allreduce after join")
    close(gathered, torch.arange(n), 0, "allgather after join")


@case
def reducescatter_adasum_refused():
    """reducescatter (and its grouped form) with Adasum is refused, as in Horovod, with an
    error naming Adasum; the runtime goes on."""
    messages = []
    for fn in (lambda: hvd.reducescatter(torch.ones(4), op=hvd.Adasum),
               lambda: hvd.grouped_reducescatter([torch.ones(4)], op=hvd.Adasum)):
        try:
            fn()
            messages.append("no error")
        except RuntimeError as e:
            messages.append(str(e))
    after = hvd.reducescatter(torch.ones(2 * hvd.size()), op=hvd.Sum, name="rs.after")
    for m in messages:
        assert "Adasum" in m, m
    close(after, torch.full((2,), float(hvd.size())), 0, "reducescatter after the refusals")


def run_ops(outdir):
    hvd.init()
    rank = hvd.rank()
    results = {}
    only = set(filter(None, os.environ.get("HVD_ONLY", "").split(",")))
    for fn in CASES:
        if only and fn.__name__ not in only:
            continue
        try:
            fn()
            results[fn.__name__] = "ok"
        except Exception:
            results[fn.__name__] = traceback.format_exc(limit=6)
    with open(os.path.join(outdir, f"ops.{rank}.json"), "w") as f:
        json.dump(results, f, indent=1)
    hvd.shutdown()


def run_world():
    hvd.init()
    print(f"world rank={hvd.rank()} size={hvd.size()} local_rank={hvd.local_rank()} "
          f"local_size={hvd.local_size()}", flush=True)
    hvd.allreduce(torch.ones(1), name="world.check")
    hvd.shutdown()


def run_stall(outdir):
    """Rank 1 leaves the sequence after two steps (alive, busy elsewhere); then tries one
    more op. Each rank records the error it got and when."""
    hvd.init()
    r = hvd.rank()
    t0 = time.monotonic()
    text = "no error"
    try:
        for step in range(2 if r == 1 else 4):
            hvd.allreduce(torch.ones(2), name=f"step.{step}")
        if r == 1:
            time.sleep(float(os.environ["STALL_SLEEP"]))
            hvd.allreduce(torch.ones(2), name="late")
    except hvd.HorovodInternalError as e:
        text = f"{time.monotonic() - t0:.2f}s {e}"
    with open(os.path.join(outdir, f"stall.{r}.txt"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
    if mode == "ops":
        run_ops(out)
    elif mode == "world":
        run_world()
    elif mode == "stall":
        run_stall(out)
    else:
        raise SystemExit(f"unknown mode {mode}")
