"""One rank of the GossipOptimizer tests (tests/python/test_gossip.py starts it with
`ak launch -np N`). Usage: gossip_worker.py OUTDIR

Runs every case below in order on every rank and writes OUTDIR/gossip.<rank>.json
{case: "ok" | error}. Every rank can compute every other rank's parameters (they are a
function of (rank, step)), so each rank checks its own against a reference simulation of
all ranks in numpy: the mixing matrix of each step written out from the topology's
definition, not taken from the library.
"""
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import accelkit.torch as hvd

torch.set_num_threads(1)
CASES = []
LR = 0.1
SHAPES = [(37,), (5, 13), (40, 64), (3,)]  # (40, 64): rows like an embedding table


def case(fn):
    CASES.append(fn)
    return fn


# ---- the reference ---------------------------------------------------------------------------

def exponential_matrix(n, step):
    """Mixing matrix of the exponential graph: strides 2^k < n taken in turn; symmetric
    pairs i <-> i XOR 2^k when n is a power of two, else i averages with i - 2^k."""
    strides = [s for s in (1, 2, 4, 8, 16) if s < n]
    s = strides[step % len(strides)]
    w = np.zeros((n, n))
    for i in range(n):
        j = (i ^ s) if n & (n - 1) == 0 else (i - s) % n
        w[i, i] += 0.5
        w[i, j] += 0.5
    return w


def random_matrix(n, step, seed):
    """The documented matching: randperm(n) from a generator seeded seed*1000003 + step,
    consecutive entries paired, an odd one out kept."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    perm = torch.randperm(n, generator=g).tolist()
    w = np.eye(n)
    for a, b in zip(perm[0::2], perm[1::2]):
        w[a, a] = w[b, b] = w[a, b] = w[b, a] = 0.5
    return w


def grads(rank, step):
    """This rank's gradients at `step`: dense for the small tensors, a few rows only for
    the embedding-like one (the others stay equal to the reference: not sent)."""
    g = torch.Generator().manual_seed(7919 * step + rank)
    out = []
    for shape in SHAPES:
        t = torch.randn(shape, generator=g)
        if len(shape) == 2 and shape[0] == 40:
            keep = torch.zeros(40, 1)
            keep[torch.randperm(40, generator=g)[:3]] = 1
            t = t * keep
        out.append(t)
    return out


def initial():
    g = torch.Generator().manual_seed(1)
    return [torch.randn(s, generator=g) for s in SHAPES]


def simulate(n, steps, matrix, overlap, global_every=0):
    """Every rank's parameters after `steps` steps of SGD(lr) + gossip, flattened: (n, P)
    float32. overlap s > 0: the average of step t is applied at step t + s as a correction,
    x += W_t x_t - x_t (x_t: the parameters when step t's exchange started)."""
    x = np.stack([np.concatenate([t.numpy().ravel() for t in initial()])] * n).astype(np.float32)
    pending = []
    for t in range(steps):
        for r in range(n):
            x[r] = x[r] - np.float32(LR) * np.concatenate([g.numpy().ravel() for g in grads(r, t)])
        if global_every and (t + 1) % global_every == 0:
            for w, sent in pending:
                x = x + (w.astype(np.float32) @ sent - sent)
            pending = []
            x[:] = x.astype(np.float64).mean(0).astype(np.float32)
            continue
        while len(pending) > max(0, overlap - 1):
            w, sent = pending.pop(0)
            x = x + (w.astype(np.float32) @ sent - sent)
        w = matrix(t)
        if overlap:
            pending.append((w, x.copy()))
        else:
            x = (w @ x.astype(np.float64)).astype(np.float32)
    return x


# ---- helpers -----------------------------------------------------------------------------------

def params():
    return [nn.Parameter(t.clone()) for t in initial()]


def run_steps(opt, ps, steps):
    for t in range(steps):
        for p, g in zip(ps, grads(hvd.rank(), t)):
            p.grad = g
        opt.step()


def check_against(ps, want, tol, what):
    got = np.concatenate([p.detach().numpy().ravel() for p in ps])
    err = float(np.abs(got.astype(np.float64) - want).max())
    if not err <= tol:
        raise AssertionError(f"{what}: max error {err:.3g} > {tol:g} against the reference")


def expect_error(exc, text, fn):
    try:
        fn()
    except exc as e:
        if text not in str(e):
            raise AssertionError(f"error {e!r} does not mention {text!r}")
        return
    raise AssertionError(f"no {exc.__name__} mentioning {text!r}")


# ---- cases -------------------------------------------------------------------------------------

@case
def arguments_refused_by_name():
    sgd = lambda: torch.optim.SGD(params(), lr=LR)  # noqa: E731
    expect_error(ValueError, "unknown topology 'ring'",
                 lambda: hvd.GossipOptimizer(sgd(), topology="ring"))
    expect_error(ValueError, "global_every", lambda: hvd.GossipOptimizer(sgd(), global_every=-1))
    expect_error(ValueError, "block_size must be a positive multiple of 16",
                 lambda: hvd.GossipOptimizer(sgd(), block_size=24))
    expect_error(ValueError, "overlap must be True, False or a number of steps",
                 lambda: hvd.GossipOptimizer(sgd(), overlap="yes"))
    expect_error(ValueError, "overlap", lambda: hvd.GossipOptimizer(sgd(), overlap=9))
    expect_error(ValueError, "seed", lambda: hvd.GossipOptimizer(sgd(), seed=1.5))
    d = nn.Parameter(torch.zeros(3, dtype=torch.float64))
    expect_error(ValueError, "parameter w is torch.float64",
                 lambda: hvd.GossipOptimizer(torch.optim.SGD([d], lr=LR),
                                             named_parameters=[("w", d)]))
    dist = hvd.DistributedOptimizer(sgd())
    expect_error(ValueError, "not a DistributedOptimizer", lambda: hvd.GossipOptimizer(dist))
    expect_error(TypeError, "torch.optim.Optimizer", lambda: hvd.GossipOptimizer(object()))
    # ranks that start apart are refused on every rank (the check is collective)
    apart = [nn.Parameter(torch.full((4,), float(hvd.rank())))]
    expect_error(ValueError, "differ between ranks",
                 lambda: hvd.GossipOptimizer(torch.optim.SGD(apart, lr=LR)))


def exactness(topology, overlap):
    n, steps = hvd.size(), 5
    matrix = ((lambda t: exponential_matrix(n, t)) if topology == "exponential"
              else (lambda t: random_matrix(n, t, 5)))
    ps = params()
    opt = hvd.GossipOptimizer(torch.optim.SGD(ps, lr=LR), topology=topology, overlap=overlap,
                              seed=5)
    run_steps(opt, ps, steps)
    want = simulate(n, steps, matrix, overlap)[hvd.rank()]
    check_against(ps, want, 2e-6, f"{topology}, overlap={overlap}, after {steps} steps")
    # the end: one exact global average (the pending exchange applied first)
    opt.average_parameters()
    # (the mixing matrices are doubly stochastic: the pending average keeps the mean)
    mean = simulate(n, steps, matrix, overlap).astype(np.float64).mean(0)
    check_against(ps, mean, 2e-6, f"{topology}, overlap={overlap}, global average")


@case
def exponential_matches_reference():
    exactness("exponential", 0)


@case
def random_matches_reference():
    exactness("random", 0)


@case
def exponential_overlap_matches_reference():
    exactness("exponential", 1)


@case
def random_overlap_matches_reference():
    exactness("random", 1)


@case
def exponential_two_step_overlap_matches_reference():
    exactness("exponential", 2)


@case
def global_every_averages_exactly():
    n, steps = hvd.size(), 5
    for overlap in (0, 1):  # the exchange in flight lands before the global average
        ps = params()
        opt = hvd.GossipOptimizer(torch.optim.SGD(ps, lr=LR), topology="exponential",
                                  global_every=2, overlap=overlap)
        run_steps(opt, ps, steps)
        want = simulate(n, steps, lambda t: exponential_matrix(n, t), overlap, global_every=2)
        check_against(ps, want[hvd.rank()], 2e-6, f"global_every=2, overlap={overlap}")


@case
def converges_like_allreduce_sgd():
    # The convergence task of the DGC test (tests/python/hvd_worker.py,
    # dgc_converges_like_dense): softmax regression, 50 features, 10 classes, labels drawn
    # from a teacher's softmax, 300 steps of SGD momentum 0.9 on each rank's own shard.
    # Allreduce-SGD (DistributedOptimizer) against gossip; every rank's own model must
    # reach a loss over all samples within 5 % of allreduce-SGD's.
    n, r = hvd.size(), hvd.rank()
    g = torch.Generator().manual_seed(2018)
    teacher = torch.randn(50, 10, generator=g) * 0.6
    x_all = torch.randn(1000 * n, 50, generator=g)
    y_all = torch.multinomial(F.softmax(x_all @ teacher, 1), 1, generator=g).squeeze(1)
    x_mine, y_mine = x_all[1000 * r:1000 * (r + 1)], y_all[1000 * r:1000 * (r + 1)]

    def train(tag, wrap):
        torch.manual_seed(0)
        model = nn.Linear(50, 10)
        opt = wrap(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                   [(f"gossipconv.{tag}.{k}", p) for k, p in model.named_parameters()])
        rows = torch.Generator().manual_seed(100 + r)
        for _ in range(300):
            i = torch.randint(0, 1000, (32,), generator=rows)
            opt.zero_grad()
            F.cross_entropy(model(x_mine[i]), y_mine[i]).backward()
            opt.step()
        with torch.no_grad():
            return F.cross_entropy(model(x_all), y_all).item()

    with torch.no_grad():
        torch.manual_seed(0)
        initial_loss = F.cross_entropy(nn.Linear(50, 10)(x_all), y_all).item()
    dense = train("dense", lambda o, named: hvd.DistributedOptimizer(o, named_parameters=named))
    losses = {}
    for topo, overlap in (("exponential", 0), ("random", 0), ("exponential", 1),
                          ("exponential", 2)):
        losses[f"{topo}{f' overlap {overlap}' if overlap else ''}"] = train(
            f"{topo}{overlap}", lambda o, named, t=topo, ov=overlap: hvd.GossipOptimizer(
                o, named_parameters=named, topology=t, overlap=ov))
    every = hvd.allgather_object(losses)
    summary = (f"loss from {initial_loss:.4f}: allreduce-SGD {dense:.4f}; gossip per rank "
               + "; ".join(f"{k} " + " ".join(f"{e[k]:.4f}" for e in every) for k in losses))
    if r == 0:
        print("gossip_converges:", summary, flush=True)
    assert dense < 0.5 * initial_loss, "the task was not learned: " + summary
    worst = max(v for e in every for v in e.values())
    assert worst <= 1.05 * dense, "gossip not within 5 % of allreduce-SGD: " + summary


def main(outdir):
    hvd.init()
    results = {}
    for fn in CASES:
        t0 = time.perf_counter()
        try:
            fn()
            results[fn.__name__] = "ok"
        except Exception:  # noqa: BLE001 - reported per case
            results[fn.__name__] = traceback.format_exc()
        if hvd.rank() == 0:
            print(f"{fn.__name__}: {time.perf_counter() - t0:.2f} s", flush=True)
    with open(os.path.join(outdir, f"gossip.{hvd.rank()}.json"), "w") as f:
        json.dump(results, f)
    hvd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
