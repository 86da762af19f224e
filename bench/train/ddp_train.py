"""PyTorch DDP training benchmark: the peer of hvd_train.py, on gloo or on accelkit's
torch.distributed backend (--backend accelkit), optionally with a comm hook (--hook).

Started once per rank with the torchrun variables RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT (torchrun, or scripts/netns-cluster: when RANK is unset the
AK_* variables netns-cluster exports are used, and gloo is bound to the interface that
holds AK_COMM_BIND_ADDR). --local runs the same loop without any process group or DDP:
the compute-only baseline. Prints one JSON line from rank 0 (see models.summary).

  /usr/bin/python3 bench/train/ddp_train.py --model ctr --batch 64 --steps 10
"""
import argparse
import ctypes
import datetime
import os
import socket
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def torchrun_env_from_accelkit():
    """Fill the torchrun variables from netns-cluster's AK_* ones where they are unset."""
    for tv, av in (("RANK", "AK_RANK"), ("WORLD_SIZE", "AK_WORLD_SIZE"),
                   ("LOCAL_RANK", "AK_LOCAL_RANK"), ("LOCAL_WORLD_SIZE", "AK_LOCAL_SIZE"),
                   ("MASTER_ADDR", "AK_MASTER_ADDR"), ("MASTER_PORT", "AK_MASTER_PORT")):
        if not os.environ.get(tv) and os.environ.get(av):
            os.environ[tv] = os.environ[av]
    bind = os.environ.get("AK_COMM_BIND_ADDR")
    if bind and not os.environ.get("GLOO_SOCKET_IFNAME"):
        # gloo otherwise resolves the hostname, which does not name this namespace's link
        out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) > 3 and f[3].split("/")[0] == bind:
                os.environ["GLOO_SOCKET_IFNAME"] = f[1]
                break


def keep_heap():
    """What accelkit's AK_TRAIN_KEEP_HEAP does, by hand: glibc's malloc serves large blocks
    from the heap and keeps freed pages (the reference run that shows how much of
    accelkit's lead is this setting rather than communication)."""
    libc = ctypes.CDLL(None)
    m_trim_threshold, m_top_pad, m_mmap_max = -1, -2, -4  # <malloc.h>
    ok = (libc.mallopt(m_mmap_max, 0) and libc.mallopt(m_trim_threshold, 2**31 - 1)
          and libc.mallopt(m_top_pad, 64 << 20))
    if not ok:
        sys.exit("ddp_train.py: mallopt refused --keep-heap's settings")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("ctr", "resnet18"), default="ctr")
    ap.add_argument("--batch", type=int, default=None, help="per rank (ctr 64, resnet18 32)")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1)")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb (25)")
    ap.add_argument("--local", action="store_true", help="no DDP: compute-only baseline")
    ap.add_argument("--keep-heap", action="store_true",
                    help="set glibc's malloc as accelkit's AK_TRAIN_KEEP_HEAP does")
    ap.add_argument("--backend", choices=("gloo", "accelkit"), default="gloo",
                    help="torch.distributed backend (accelkit: accelkit.torch.distributed)")
    ap.add_argument("--hook", choices=("none", "fp16", "bf16", "dgc"), default="none",
                    help="DDP comm hook: accelkit.torch.distributed.hooks (any backend)")
    ap.add_argument("--sparsity", type=float, default=0.999, help="--hook dgc's sparsity")
    ap.add_argument("--tag", default="", help="copied into the JSON line")
    a = ap.parse_args()
    batch = a.batch or (64 if a.model == "ctr" else 32)
    torch.set_num_threads(a.threads)
    if a.keep_heap:
        keep_heap()

    torchrun_env_from_accelkit()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    model = models.build_model(a.model)
    nparams = models.param_count(model)
    if a.local:
        net, harness, world_eff = model, "local", 1
    else:
        import torch.distributed as dist
        if a.backend == "accelkit" or a.hook != "none":
            import accelkit.torch.distributed  # noqa: F401 - registers the backend
            from accelkit.torch.distributed import hooks
        dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=300))
        net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
        if a.hook == "dgc":
            net.register_comm_hook(hooks.DGCState(sparsity=a.sparsity), hooks.dgc_hook)
        elif a.hook != "none":
            net.register_comm_hook(None, getattr(hooks, f"{a.hook}_compress_hook"))
        harness, world_eff = "ddp", world
    opt = models.make_optimizer(a.optimizer, net.parameters())
    batches = models.make_batches(a.model, batch, rank, image_size=a.image_size)
    times, loss0, loss1, cpu = models.train_loop(net, opt, batches, models.loss_fn(a.model),
                                            a.warmup, a.steps)
    in_sync = None
    if not a.local:
        sums = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(sums, torch.tensor([models.param_checksum(model)], dtype=torch.float64))
        in_sync = all(s.item() == sums[0].item() for s in sums)
    if rank == 0:
        models.emit(models.summary(
            times, batch, world_eff, harness=harness, model=a.model, params=nparams,
            optimizer=a.optimizer, compression=a.hook, backend=a.backend, loss_first=round(loss0, 5),
            loss_last=round(loss1, 5), params_in_sync=in_sync, tag=a.tag, **cpu,
            bucket_mb=None if a.local else a.bucket_mb, host=socket.gethostname(),
            gloo_ifname=os.environ.get("GLOO_SOCKET_IFNAME")))
    if not a.local:
        del net, opt  # the DDP reducer must go before its process group
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
