"""accelkit training benchmark through the Horovod API: the same model, data, optimizer
and loop as ddp_train.py, written the way a Horovod user writes it.

Run one process per rank with accelkit's rank discovery (`ak launch`, netns-cluster,
torchrun variables, ...), PYTHONPATH=python and AK_LIBRARY=<build>/libaccelkit.so:

  build/ak launch -np 2 /usr/bin/python3 bench/train/hvd_train.py --model ctr --compression fp16

--compression none|fp16|bf16|dgc (dgc: deep gradient compression at --sparsity 0.999,
momentum correction inside DGC, so the local optimizer is SGD without momentum, as in
Lin et al. 2018). --fused: accelkit.torch.FusedSGD/FusedAdam, whose update runs on the
runtime's update thread as each gradient bucket lands. --gossip exponential|random:
accelkit.torch.GossipOptimizer in place of DistributedOptimizer (parameters averaged with
one peer per step; --gossip-global N: a global average after every N-th step;
--gossip-overlap S: each exchange overlaps the next S steps); the run ends with a global
average, and eval_loss (the mean loss over the rank's batches, averaged over ranks) is
measured after it, in every mode. Prints one JSON line from rank 0.
"""
import argparse
import time
import os
import sys

import torch

import horovod.torch as hvd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def compression_of(name, sparsity):
    if name == "none":
        return hvd.Compression.none
    if name == "fp16":
        return hvd.Compression.fp16
    if name == "bf16":
        return hvd.Compression.bf16
    # deep gradient compression is accelkit's extension of the Compression namespace
    dgc = hvd.Compression.dgc
    return dgc(sparsity=sparsity) if callable(dgc) else dgc


def eval_loss(model, batches, name):
    """The mean loss of the model over this rank's batches, averaged over the ranks."""
    crit = models.loss_fn(name)
    with torch.no_grad():
        mine = sum(crit(model(*x), y).item() for x, y in batches) / len(batches)
    return hvd.allreduce(torch.tensor([mine], dtype=torch.float64), op=hvd.Average,
                         name="bench.eval_loss").item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("ctr", "resnet18"), default="ctr")
    ap.add_argument("--batch", type=int, default=None, help="per rank (ctr 64, resnet18 32)")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    ap.add_argument("--compression", choices=("none", "fp16", "bf16", "dgc"), default="none")
    ap.add_argument("--sparsity", type=float, default=0.999, help="DGC final sparsity")
    ap.add_argument("--fused", action="store_true", help="accelkit.torch fused optimizer")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1)")
    ap.add_argument("--tag", default="", help="copied into the JSON line")
    ap.add_argument("--gossip", choices=("exponential", "random"), default=None,
                    help="GossipOptimizer with this topology instead of DistributedOptimizer")
    ap.add_argument("--gossip-global", type=int, default=0, help="global average every N")
    ap.add_argument("--gossip-overlap", type=int, default=0,
                    help="steps an exchange may stay in flight (0: none)")
    ap.add_argument("--gossip-block", type=int, default=64, help="GossipOptimizer block_size")
    a = ap.parse_args()
    batch = a.batch or (64 if a.model == "ctr" else 32)

    hvd.init()
    torch.set_num_threads(a.threads)
    model = models.build_model(a.model)
    momentum = 0.0 if a.compression == "dgc" else 0.9
    if a.fused:
        import accelkit.torch as akt
        if a.optimizer == "sgd":
            optimizer = akt.FusedSGD(model.parameters(), lr=0.01, momentum=momentum)
        else:
            optimizer = akt.FusedAdam(model.parameters(), lr=1e-3)
    else:
        optimizer = models.make_optimizer(a.optimizer, model.parameters(), momentum=momentum)

    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    if a.gossip:
        import accelkit.torch as akt
        optimizer = akt.GossipOptimizer(
            optimizer, named_parameters=model.named_parameters(), topology=a.gossip,
            global_every=a.gossip_global, overlap=a.gossip_overlap, block_size=a.gossip_block)
    else:
        optimizer = hvd.DistributedOptimizer(
            optimizer, named_parameters=model.named_parameters(),
            compression=compression_of(a.compression, a.sparsity), op=hvd.Average)

    batches = models.make_batches(a.model, batch, hvd.rank(), image_size=a.image_size)
    import accelkit.torch as akt
    def runtime_cost():
        """(wall clock, the runtime's own cost so far): CPU time of the background thread
        in state exchange and negotiation, plus fusion copies"""
        st = akt.stats()
        return time.perf_counter(), (st["negotiate_cpu_ns"] + st["fusion_copy_ns"]) / 1e9

    marks = [runtime_cost()]
    times, loss0, loss1, cpu = models.train_loop(model, optimizer, batches,
                                            models.loss_fn(a.model), a.warmup, a.steps,
                                            on_warm=lambda: marks.append(runtime_cost()))
    marks.append(runtime_cost())
    eval_local = eval_loss(model, batches, a.model)
    if a.gossip:
        optimizer.average_parameters()  # end on one model
    eval_final = eval_loss(model, batches, a.model)
    st = akt.stats()
    wall = marks[-1][0] - marks[0][0]
    overhead = (marks[-1][1] - marks[0][1]) / wall  # every step, first negotiations included
    warm, end = marks[1], marks[-1]  # after warm-up (the end again when no step ran)
    steady = (end[1] - warm[1]) / (end[0] - warm[0]) if end[0] > warm[0] else 0.0
    sums = hvd.allgather(torch.tensor([models.param_checksum(model)], dtype=torch.float64))
    in_sync = bool((sums == sums[0]).all())
    if hvd.rank() == 0:
        models.emit(models.summary(
            times, batch, hvd.size(), harness="accelkit", model=a.model,
            params=models.param_count(model), optimizer=a.optimizer,
            compression=a.compression, sparsity=a.sparsity if a.compression == "dgc" else None,
            fused=a.fused, momentum=momentum, loss_first=round(loss0, 5),
            loss_last=round(loss1, 5), params_in_sync=in_sync, tag=a.tag, **cpu,
            runtime_overhead_pct=round(100 * overhead, 3),
            steady_overhead_pct=round(100 * steady, 3), wall_s=round(wall, 3),
            negotiate_cpu_ms=round(st["negotiate_cpu_ns"] / 1e6, 1),
            fusion_copy_ms=round(st["fusion_copy_ns"] / 1e6, 1), cycles=st["cycles"],
            cache_hits=st["cache_hits"], negotiations=st["negotiations"],
            local_size=hvd.local_size(), gossip=a.gossip,
            gossip_global=a.gossip_global if a.gossip else None,
            gossip_overlap=a.gossip_overlap if a.gossip else None,
            eval_loss=round(eval_final, 5), eval_loss_before_average=round(eval_local, 5),
            step_ms_mean=round(1e3 * sum(times) / max(1, len(times)), 2)))
    hvd.shutdown()


if __name__ == "__main__":
    main()
