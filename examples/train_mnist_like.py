"""Data-parallel training of a small CNN on synthetic MNIST-shaped data, written exactly as
a Horovod user writes it. Runs unchanged under Horovod or accelkit:

    build/ak launch -np 2 /usr/bin/python3 examples/train_mnist_like.py
    scripts/horovodrun -np 2 python3 examples/train_mnist_like.py --steps 100

Prints the loss averaged over the ranks and the throughput (samples/s over all ranks).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import horovod.torch as hvd


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=5)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=5)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):                                 # (B, 1, 28, 28)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))        # (B, 16, 12, 12)
        x = F.relu(F.max_pool2d(self.conv2(x), 2))        # (B, 32, 4, 4)
        x = F.relu(self.fc1(x.flatten(1)))                # (B, 128)
        return F.log_softmax(self.fc2(x), dim=1)          # (B, 10)


def synthetic_batches(batch_size, seed):
    """An endless stream of MNIST-shaped batches: the label decides a bright 7x7 patch,
    so the task is learnable."""
    g = torch.Generator().manual_seed(seed)
    while True:
        target = torch.randint(0, 10, (batch_size,), generator=g)
        data = torch.randn(batch_size, 1, 28, 28, generator=g) * 0.3
        for i, t in enumerate(target.tolist()):
            r, c = divmod(t, 4)
            data[i, 0, 2 + 7 * r:9 + 7 * r, 2 + 6 * c:9 + 6 * c] += 1.0
        yield data, target


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def main():
    parser = argparse.ArgumentParser(description="Horovod-style MNIST-like training")
    parser.add_argument("--steps", type=int, default=50, help="training steps")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size per rank")
    parser.add_argument("--lr", type=float, default=0.01, help="learning rate (x ranks)")
    parser.add_argument("--momentum", type=float, default=0.5)
    parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 compression")
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    model = Net()
    # scale the learning rate by the number of ranks (Horovod's recipe)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)

    batches = synthetic_batches(args.batch_size, seed=args.seed + hvd.rank())
    model.train()
    warmup = min(5, args.steps // 2)  # steps left out of the throughput
    timed_start = time.perf_counter()
    for step in range(1, args.steps + 1):
        data, target = next(batches)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if step == warmup:
            timed_start = time.perf_counter()
        if step % args.log_interval == 0 or step == args.steps:
            avg = metric_average(loss.item(), "avg_loss")
            if hvd.rank() == 0:
                print(f"step {step:5d}  loss {avg:.4f}", flush=True)
    elapsed = time.perf_counter() - timed_start
    if hvd.rank() == 0 and args.steps > warmup:
        rate = (args.steps - warmup) * args.batch_size * hvd.size() / elapsed
        print(f"ranks {hvd.size()}  batch {args.batch_size}/rank  {rate:.1f} samples/s", flush=True)


if __name__ == "__main__":
    main()
