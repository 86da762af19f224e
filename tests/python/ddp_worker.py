"""One rank of tests/python/test_torch_distributed.py (started with torchrun's variables
RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Modes:

  collectives  every collective of backend "accelkit" against a local computation from
               all ranks' inputs (each rank can rebuild every other rank's input), per
               dtype and reduce op; subgroups, async work and futures, p2p with tags,
               non-contiguous tensors, refusals naming the op
  train BACKEND OUT [ddp|fsdp|fp16|dgc]  20 SGD steps of a small model wrapped in DDP
               (or FSDP), losses written to OUT (rank 0) as JSON
  timeout      rank 1 never joins an allreduce: rank 0 must fail naming it, in bounded time
Exit status 0 = every check passed; failures are printed and exit 1.
"""
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import accelkit.torch.distributed as akd

FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print(f"[rank {dist.get_rank()}] FAIL: {what}", flush=True)


def data(rank, dtype, n=7, salt=0):
    """Rank r's input: small integers (sums and products exact even in float16)."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    lo = 0 if dtype == torch.uint8 else -3
    v = torch.randint(lo, 4, (n,), generator=g)
    if dtype.is_floating_point:
        v = torch.where(v == 0, torch.ones_like(v), v)  # no zeros: AVG/PRODUCT stay exact
    return v.to(dtype)


def expected(op, stack, dtype):
    """The reduction of stack (world x n) computed locally in float64/int64."""
    wide = stack.to(torch.float64 if dtype.is_floating_point else torch.int64)
    if op == "SUM":
        r = wide.sum(0) if dtype != torch.bool else (wide.sum(0) > 0)
    elif op == "PRODUCT":
        r = wide.prod(0)
    elif op == "MIN":
        r = wide.min(0).values
    elif op == "MAX":
        r = wide.max(0).values
    elif op == "AVG":
        r = wide.mean(0)
    else:
        fold = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or,
                "BXOR": torch.bitwise_xor}[op]
        r = stack[0].clone()
        for row in stack[1:]:
            r = fold(r, row)
        return r
    return r.to(dtype)


def same(a, b, dtype):
    if dtype in (torch.float16, torch.bfloat16) or dtype.is_floating_point:
        return torch.allclose(a.double(), b.double(), rtol=1e-2, atol=1e-2)
    return torch.equal(a, b)


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]


def ops_for(dtype):
    ops = ["SUM", "PRODUCT", "MIN", "MAX"]
    if dtype.is_floating_point:
        ops.append("AVG")
    else:
        ops += ["BAND", "BOR", "BXOR"]
    return ops


def collectives():
    rank, n = dist.get_rank(), dist.get_world_size()
    for dtype in DTYPES:
        allin = torch.stack([data(r, dtype) for r in range(n)])
        mine = data(rank, dtype)
        for op in ops_for(dtype):
            t = mine.clone()
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            check(same(t, expected(op, allin, dtype), dtype), f"all_reduce {op} {dtype}: {t}")
        # reduce to root 1 (SUM and MAX)
        for op in ("SUM", "MAX"):
            t = mine.clone()
            dist.reduce(t, 1 % n, op=getattr(dist.ReduceOp, op))
            if rank == 1 % n:
                check(same(t, expected(op, allin, dtype), dtype), f"reduce {op} {dtype}")
        # broadcast from the last rank
        t = mine.clone()
        dist.broadcast(t, n - 1)
        check(torch.equal(t, allin[n - 1]), f"broadcast {dtype}")
        # all_gather, into one tensor
        outs = [torch.empty_like(mine) for _ in range(n)]
        dist.all_gather(outs, mine)
        check(all(torch.equal(outs[r], allin[r]) for r in range(n)), f"all_gather {dtype}")
        flat = torch.empty(n * mine.numel(), dtype=dtype)
        dist._all_gather_base(flat, mine)
        check(torch.equal(flat, allin.reshape(-1)), f"_all_gather_base {dtype}")
        # reduce_scatter: rank r gets the sum of every rank's block r
        blocks = torch.stack([data(r, dtype, n * 3, salt=5) for r in range(n)])
        mineb = data(rank, dtype, n * 3, salt=5)
        want = expected("SUM", blocks, dtype)[rank * 3:(rank + 1) * 3]
        out = torch.empty(3, dtype=dtype)
        dist.reduce_scatter(out, list(mineb.chunk(n)))
        check(same(out, want, dtype), f"reduce_scatter {dtype}")
        out = torch.empty(3, dtype=dtype)
        dist._reduce_scatter_base(out, mineb)
        check(same(out, want, dtype), f"_reduce_scatter_base {dtype}")
        # all_to_all_single, equal and uneven splits: rank r sends r+1+s rows to rank s
        x = data(rank, dtype, n * 2, salt=7).reshape(n * 2, 1)
        y = torch.empty_like(x)
        dist.all_to_all_single(y, x)
        want = torch.cat([data(r, dtype, n * 2, salt=7).reshape(n * 2, 1)[rank * 2:rank * 2 + 2]
                          for r in range(n)])
        check(torch.equal(y, want), f"all_to_all_single {dtype}")
        ins = [rank + 1 + s for s in range(n)]
        outs_n = [r + 1 + rank for r in range(n)]
        src = lambda r: data(r, dtype, sum(r + 1 + s for s in range(n)), salt=9)  # noqa: E731
        y = torch.empty(sum(outs_n), dtype=dtype)
        dist.all_to_all_single(y, src(rank), outs_n, ins)
        want = []
        for r in range(n):
            off = sum(r + 1 + s for s in range(rank))
            want.append(src(r)[off:off + r + 1 + rank])
        check(torch.equal(y, torch.cat(want)), f"all_to_all_single uneven {dtype}")
        # all_to_all of lists
        outs = [torch.empty(2, dtype=dtype) for _ in range(n)]
        dist.all_to_all(outs, list(data(rank, dtype, 2 * n, salt=11).chunk(n)))
        check(all(torch.equal(outs[r], data(r, dtype, 2 * n, salt=11)[2 * rank:2 * rank + 2])
                  for r in range(n)), f"all_to_all {dtype}")
        # gather / scatter at root 0
        outs = [torch.empty_like(mine) for _ in range(n)] if rank == 0 else None
        dist.gather(mine, outs, dst=0)
        if rank == 0:
            check(all(torch.equal(outs[r], allin[r]) for r in range(n)), f"gather {dtype}")
        out = torch.empty_like(mine)
        dist.scatter(out, [data(100 + r, dtype) for r in range(n)] if rank == 0 else None, src=0)
        check(torch.equal(out, data(100 + rank, dtype)), f"scatter {dtype}")
    # coalesced
    ts = [data(rank, torch.float32, 5, salt=s) for s in range(3)]
    dist.all_reduce_coalesced(ts)
    for s in range(3):
        want = expected("SUM", torch.stack([data(r, torch.float32, 5, salt=s) for r in range(n)]),
                        torch.float32)
        check(torch.equal(ts[s], want), f"all_reduce_coalesced tensor {s}")
    # non-contiguous (a transposed view): reduced through a copy and written back in place
    m = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    base = m.clone()
    dist.all_reduce(m)
    check(torch.equal(m, base * n) and not m.is_contiguous(), "all_reduce of a transposed view")
    # async: several in flight, futures chained, wait in reverse order
    works, futs, ts = [], [], []
    for i in range(4):
        t = torch.full((1000,), float(rank + i))
        w = dist.all_reduce(t, async_op=True)
        works.append(w)
        ts.append(t)
        futs.append(w.get_future().then(lambda f: f.value()[0].sum().item()))
    for w in reversed(works):
        check(w.wait() is True, "async wait returns True")
    for i in range(4):
        want = 1000.0 * sum(r + i for r in range(n))
        check(futs[i].wait() == want, f"async future {i}: {futs[i].wait()} != {want}")
        check(works[i].is_completed() and works[i].is_success(), f"async work {i} completed")
    # point to point with tags: each rank sends tag 1 then tag 2 to the next rank, which
    # receives tag 2 first
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    a, b = torch.full((3,), 10.0 * rank + 1), torch.full((5,), 10.0 * rank + 2)
    s1 = dist.isend(a, nxt, tag=1)
    s2 = dist.isend(b, nxt, tag=2)
    rb, ra = torch.empty(5), torch.empty(3)
    dist.recv(rb, prv, tag=2)
    dist.recv(ra, prv, tag=1)
    s1.wait(), s2.wait()
    check(torch.equal(ra, torch.full((3,), 10.0 * prv + 1)) and
          torch.equal(rb, torch.full((5,), 10.0 * prv + 2)), f"send/recv with tags: {ra} {rb}")
    dist.barrier()
    akd.monitored_barrier(timeout=datetime.timedelta(seconds=20), wait_all_ranks=True)
    # subgroups: even ranks, and a group of the last two ranks in reverse order
    evens = list(range(0, n, 2))
    g = dist.new_group(evens, backend="accelkit")
    t = torch.tensor([float(rank)])
    if rank in evens:
        dist.all_reduce(t, group=g)
        check(t.item() == float(sum(evens)), f"subgroup allreduce {t.item()}")
        check(dist.get_rank(g) == evens.index(rank), "subgroup rank")
        x = torch.tensor([float(rank)])
        dist.broadcast(x, src=evens[-1], group=g)  # src is a global rank
        check(x.item() == float(evens[-1]), "subgroup broadcast from a global rank")
    # refusals name the op
    for call, words in (
            (lambda: dist.all_reduce(torch.zeros(2).to_sparse()), ("allreduce", "sparse")),
            (lambda: dist.all_reduce(torch.zeros(2), op=dist.ReduceOp.BAND),
             ("allreduce", "BAND")),
            (lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int32), op=dist.ReduceOp.AVG),
             ("allreduce", "AVG")),
            (lambda: dist.all_reduce(torch.zeros(2), op=dist._make_nccl_premul_sum(2.0)),
             ("allreduce", "PREMUL_SUM")),
            (lambda: dist.recv(torch.zeros(2)), ("recv", "source"))):
        try:
            call()
            check(False, f"no error for {words}")
        except RuntimeError as e:
            check(all(w in str(e) for w in words), f"error {e!r} should name {words}")
    dist.barrier()


def train(backend, out, mode):
    import torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 1)).double()
    if mode == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        net = FSDP(model)
    elif mode == "zero":
        return train_sharded(model, out)
    else:
        net = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
        if mode in ("fp16", "dgc"):
            from accelkit.torch.distributed import hooks
            if mode == "fp16":
                net.register_comm_hook(None, hooks.fp16_compress_hook)
            else:
                net.register_comm_hook(hooks.DGCState(sparsity=0.9), hooks.dgc_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(7 + dist.get_rank())
    x = torch.randn(64, 16, generator=g, dtype=torch.float64)
    y = torch.sin(x.sum(1, keepdim=True))
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(losses, f)


def train_sharded(model, out):
    """What FSDP's (ZeRO-3 style) data parallelism does with the process group, written out:
    the flat gradient is reduce-scattered (reduce_scatter_tensor / _reduce_scatter_base),
    each rank updates its shard, the parameters are all-gathered back
    (all_gather_into_tensor / _all_gather_base)."""
    n, rank = dist.get_world_size(), dist.get_rank()
    gloo = dist.get_backend() == "gloo"
    params = list(model.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    pad = (-flat.numel()) % n
    shard_len = (flat.numel() + pad) // n
    g = torch.Generator().manual_seed(7 + rank)
    x = torch.randn(64, 16, generator=g, dtype=torch.float64)
    y = torch.sin(x.sum(1, keepdim=True))
    losses, velocity = [], torch.zeros(shard_len, dtype=flat.dtype)
    for _ in range(20):
        for p in params:
            p.grad = None
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in params] + [flat.new_zeros(pad)])
        gshard = torch.empty(shard_len, dtype=flat.dtype)
        if gloo:  # gloo of torch 1.13 has neither call: the same sums another way
            dist.all_reduce(grad)
            gshard.copy_(grad[rank * shard_len:(rank + 1) * shard_len])
        else:
            dist._reduce_scatter_base(gshard, grad)
        gshard /= n
        velocity.mul_(0.9).add_(gshard)
        full = torch.cat([p.detach().reshape(-1) for p in params] + [flat.new_zeros(pad)])
        mine = full[rank * shard_len:(rank + 1) * shard_len] - 0.05 * velocity
        if gloo:
            dist.all_gather(list(full.chunk(n)), mine.contiguous())
        else:
            dist._all_gather_base(full, mine.contiguous())
        off = 0
        with torch.no_grad():
            for p in params:
                p.copy_(full[off:off + p.numel()].view(p.shape))
                off += p.numel()
        losses.append(loss.item())
    if rank == 0:
        with open(out, "w") as f:
            json.dump(losses, f)


def timeout_case():
    rank = dist.get_rank()
    if rank == 1:
        time.sleep(12)  # never joins the allreduce below
        return
    t0 = time.time()
    try:
        dist.all_reduce(torch.ones(4))
        check(False, "all_reduce without rank 1 returned")
    except RuntimeError as e:
        took = time.time() - t0
        print(f"[rank 0] error after {took:.1f} s: {e}", flush=True)
        check("allreduce" in str(e), f"error should name allreduce: {e}")
        check(took < 10, f"error took {took:.1f} s (timeout 3 s)")


def exit_race_case():
    """Exits while the future of the last operation is still being completed (its callback
    keeps taking and releasing the GIL for 2 s, so it is running whenever the interpreter
    finalizes): the process must exit cleanly, not die in torch's C++ (std::terminate)."""
    def slow_callback(fut):
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            time.sleep(0.001)
    work = dist.barrier(async_op=True)
    work.get_future().then(slow_callback)
    work.wait()
    print(f"[rank {dist.get_rank()}] exiting", flush=True)
    sys.exit(1 if FAILURES else 0)


def main():
    mode = sys.argv[1]
    backend = sys.argv[2] if mode == "train" else "accelkit"
    timeout = datetime.timedelta(seconds=3 if mode == "timeout" else 60)
    dist.init_process_group(backend, timeout=timeout)
    if mode == "collectives":
        collectives()
    elif mode == "train":
        train(backend, sys.argv[3], sys.argv[4])
    elif mode == "exit_race":
        exit_race_case()
    elif mode == "timeout":
        timeout_case()
        print(f"[rank {dist.get_rank()}] done", flush=True)
        os._exit(1 if FAILURES else 0)  # the failed group cannot be torn down collectively
    else:
        sys.exit(f"ddp_worker.py: unknown mode {mode}")
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
