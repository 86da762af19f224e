"""Data-parallel training of torchvision's ResNet-18 on synthetic ImageNet-shaped data,
written as a Horovod user writes it (the pattern of Horovod's pytorch_imagenet_resnet50
example: lr scaled by size, warm-up, broadcast of parameters and optimizer state,
metrics averaged with hvd.allreduce). Runs unchanged under Horovod or accelkit:

    build/ak launch -np 2 /usr/bin/python3 examples/train_resnet.py --steps 20
    scripts/horovodrun -np 2 python3 examples/train_resnet.py --image-size 64 --batch-size 16

--fused uses accelkit's FusedSGD (the update of each layer runs on the runtime's update
thread as soon as its gradient is reduced); the rest is plain Horovod.
"""
import argparse
import time

import torch
import torch.nn.functional as F
import torchvision

import horovod.torch as hvd


def main():
    parser = argparse.ArgumentParser(description="Horovod-style ResNet-18 training")
    parser.add_argument("--steps", type=int, default=20, help="training steps")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size per rank")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--base-lr", type=float, default=0.0125, help="lr per rank")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--wd", type=float, default=5e-5)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--fp16-allreduce", action="store_true")
    parser.add_argument("--batches-per-allreduce", type=int, default=1,
                        help="backward passes accumulated locally before each allreduce")
    parser.add_argument("--fused", action="store_true",
                        help="accelkit FusedSGD (update overlapped with communication)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads per rank")
    parser.add_argument("--log-interval", type=int, default=5)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    hvd.init()
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    else:  # share the host's cores between its ranks
        import os
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // hvd.local_size()))

    model = torchvision.models.resnet18(num_classes=args.num_classes)
    lr = args.base_lr * hvd.size() * args.batches_per_allreduce
    if args.fused:
        optimizer = hvd.FusedSGD(model.parameters(), lr=lr, momentum=args.momentum,
                                 weight_decay=args.wd)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=args.momentum,
                                    weight_decay=args.wd)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(), compression=compression,
        backward_passes_per_step=args.batches_per_allreduce)

    g = torch.Generator().manual_seed(args.seed + hvd.rank())
    shape = (args.batch_size, 3, args.image_size, args.image_size)
    data = torch.randn(shape, generator=g)
    target = torch.randint(0, args.num_classes, (args.batch_size,), generator=g)
    sub = args.batch_size // args.batches_per_allreduce

    model.train()
    warmup = min(3, args.steps // 2)  # steps left out of the throughput
    timed_start = time.perf_counter()
    for step in range(1, args.steps + 1):
        for group in optimizer.param_groups:  # linear warm-up, as Horovod's example
            group["lr"] = lr * min(1.0, step / max(1, args.warmup_steps))
        optimizer.zero_grad()
        for i in range(args.batches_per_allreduce):
            out = model(data[i * sub:(i + 1) * sub])
            loss = F.cross_entropy(out, target[i * sub:(i + 1) * sub])
            loss.div_(args.batches_per_allreduce).backward()
        optimizer.step()
        if step == warmup:
            timed_start = time.perf_counter()
        if step % args.log_interval == 0 or step == args.steps:
            avg = hvd.allreduce(loss.detach(), name="avg_loss").item()
            if hvd.rank() == 0:
                print(f"step {step:4d}  loss {avg * args.batches_per_allreduce:.4f}", flush=True)
    if hvd.rank() == 0 and args.steps > warmup:
        rate = ((args.steps - warmup) * args.batch_size * hvd.size()
                / (time.perf_counter() - timed_start))
        print(f"ranks {hvd.size()}  batch {args.batch_size}/rank  image {args.image_size}  "
              f"{rate:.1f} samples/s", flush=True)


if __name__ == "__main__":
    main()
