"""Measures tensor-parallel communication overlap: the same TP MLP stack, forward and
backward, with overlap on and off, alternating (off, on, off, on, ...) in one run; prints
the median step time of each and the speedup. Run one process per rank with torchrun's
variables, e.g. on the emulated 2 hosts x 2 ranks at 1 Gbit/s:

    flock /tmp/ak-cpu.lock scripts/netns-cluster -H 2 -G 2 --rate 1gbit -- \\
        env AK_LIBRARY=build/libaccelkit.so PYTHONPATH=python OMP_NUM_THREADS=1 \\
        /usr/bin/python3 -m accelkit.torch.parallel.bench --hidden 1024 --ffn 1024

The tensor-parallel group is every rank (so it crosses the hosts' links).
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from . import ColumnParallelLinear, RowParallelLinear


class _Stack(nn.Module):
    def __init__(self, layers, hidden, ffn, group, sp, chunks):
        super().__init__()
        kw = dict(sequence_parallel=sp, chunks=chunks)
        self.blocks = nn.ModuleList(
            nn.ModuleList([ColumnParallelLinear(hidden, ffn, group, **kw),
                           RowParallelLinear(ffn, hidden, group, **kw)])
            for _ in range(layers))

    def set_overlap(self, on):
        for m in self.modules():
            if isinstance(m, (ColumnParallelLinear, RowParallelLinear)):
                m.overlap = on

    def forward(self, x):
        for fc1, fc2 in self.blocks:
            x = x + fc2(F.gelu(fc1(x)))
        return x


def _step(model, x):
    dist.barrier()
    t0 = time.perf_counter()
    model(x).square().mean().backward()
    dist.barrier()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=512, help="sequence x batch")
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--sp", action="store_true", help="sequence parallelism")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    import accelkit.torch.distributed  # noqa: F401
    dist.init_process_group("accelkit")
    world = dist.get_world_size()
    group = dist.new_group(list(range(world)), backend="accelkit")
    torch.manual_seed(0)
    model = _Stack(args.layers, args.hidden, args.ffn, group, args.sp, args.chunks)
    tokens = args.tokens // world if args.sp else args.tokens
    x = torch.randn(tokens, 1, args.hidden, requires_grad=True)
    times = {False: [], True: []}
    for rep in range(args.reps + 1):  # the first pair warms up
        for on in (False, True):
            model.set_overlap(on)
            model.zero_grad()
            t = _step(model, x)
            if rep:
                times[on].append(t)
    if dist.get_rank() == 0:
        off, on = statistics.median(times[False]), statistics.median(times[True])
        print(f"tp={world} layers={args.layers} hidden={args.hidden} ffn={args.ffn} "
              f"tokens={args.tokens} sp={args.sp} chunks={args.chunks} reps={args.reps}: "
              f"overlap off {off * 1e3:.1f} ms, on {on * 1e3:.1f} ms (median), "
              f"speedup {off / on:.3f}x ({(off / on - 1) * 100:+.1f} %)", flush=True)
        print("off:", " ".join(f"{t * 1e3:.1f}" for t in times[False]))
        print("on: ", " ".join(f"{t * 1e3:.1f}" for t in times[True]))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
