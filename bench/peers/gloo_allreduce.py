"""Allreduce peer harness: Gloo through PyTorch's torch.distributed (Debian python3-torch),
a peer of `ak bench comm`, run by bench/comm/vs_peers.sh:

    /usr/bin/python3 gloo_allreduce.py [NPROCS=2] [MAX_BYTES=64 MiB]   ($PEER_PORT: the port)

NPROCS processes on 127.0.0.1 sum float32 tensors of 8 bytes to MAX_BYTES, doubling: one
untimed call, then 100 calls below 1 MiB, 10 below 16 MiB, 4 above. Rank 0 prints a header,
then per size: bytes, time_us (its mean), algbw and busbw = algbw · 2(n−1)/n in GB/s
(nccl-tests' definitions)."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def calls_for(nbytes):
    return 100 if nbytes < (1 << 20) else 10 if nbytes < (16 << 20) else 4


def worker(rank, nprocs, max_bytes):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("PEER_PORT", "29533")
    dist.init_process_group("gloo", rank=rank, world_size=nprocs)
    torch.set_num_threads(1)
    if rank == 0:
        print(f"{'bytes':>12} {'time_us':>12} {'algbw':>10} {'busbw':>10}")
    nbytes = 8
    while nbytes <= max_bytes:
        x = torch.ones(max(1, nbytes // 4))
        dist.all_reduce(x)
        dist.barrier()
        calls = calls_for(nbytes)
        t0 = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(x)
        seconds = (time.perf_counter() - t0) / calls
        if rank == 0:
            size = x.numel() * 4
            algbw = size / seconds / 1e9
            print(f"{size:12d} {seconds * 1e6:12.1f} {algbw:10.3f} "
                  f"{algbw * 2 * (nprocs - 1) / nprocs:10.3f}", flush=True)
        nbytes *= 2
    dist.destroy_process_group()


def main():
    nprocs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    max_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 64 << 20
    mp.spawn(worker, args=(nprocs, max_bytes), nprocs=nprocs)


if __name__ == "__main__":
    main()
