"""One worker of an elastic job for tests/python/test_elastic.py, written as Horovod's
elastic examples are: a TorchState with the model, the optimizer and the loop counters, a
train function under hvd.elastic.run that commits every batch.

    elastic_worker.py OUT_DIR SCENARIO [ARG [HOST]]

Every batch's data depend only on the batch number, split over the ranks of the world
it runs in, so the final parameters are known whatever the world did in between: each
world's allreduce averages the same global batch. Scenarios:
  kill ID       worker ID (AK_ELASTIC_ID) exits with status 7 at batch 5 (once)
  grow FILE [HOST]   rank 0 appends HOST (default "nodeb:1") to the discovery file FILE
                at batch 4
  shrink FILE   rank 0 rewrites FILE without "nodeb" at batch 4
  none          just trains
ELASTIC_BATCH_SLEEP=S waits S seconds after each commit (time for a replacement to come).
ELASTIC_FUSED=1 trains with accelkit's FusedSGD (update overlapped with communication)
instead of torch.optim.SGD. Each worker that finishes writes OUT_DIR/worker.ID.json: its last rank and size, the
sizes of the worlds it trained in, its parameters and its reset count.
"""
import json
import os
import sys
import time

import torch

import horovod.torch as hvd

BATCHES = 14
GLOBAL_BATCH = 12


def global_batch(b):
    g = torch.Generator().manual_seed(1000 + b)
    x = torch.randn(GLOBAL_BATCH, 6, generator=g)
    y = x.sum(dim=1, keepdim=True) * 0.5
    return x, y


def local_part(b):
    """This rank's rows of batch b: the global batch split evenly over the world."""
    x, y = global_batch(b)
    per = GLOBAL_BATCH // hvd.size()
    lo = hvd.rank() * per
    return x[lo:lo + per], y[lo:lo + per]


def scenario_hook(state, scenario, arg, out_dir, extra):
    wid = os.environ.get("AK_ELASTIC_ID", "?")
    if scenario == "kill" and wid == arg and state.batch == 5:
        os._exit(7)
    once = os.path.join(out_dir, "changed")
    if scenario in ("grow", "shrink") and hvd.rank() == 0 and state.batch == 4 \
            and not os.path.exists(once):
        open(once, "w").close()
        with open(arg) as f:
            lines = [ln for ln in f.read().split() if ln]
        lines = lines + [extra or "nodeb:1"] if scenario == "grow" else \
            [ln for ln in lines if not ln.startswith("nodeb")]
        with open(arg, "w") as f:
            f.write("\n".join(lines) + "\n")
        time.sleep(2.5)  # the launcher reads the script every second


def main():
    out_dir, scenario = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else ""
    extra = sys.argv[4] if len(sys.argv) > 4 else ""
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 1)
    # ELASTIC_FUSED=1: accelkit's FusedSGD, its updates overlapped with communication
    sgd = torch.optim.SGD
    if os.environ.get("ELASTIC_FUSED") == "1":
        import accelkit.torch
        sgd = accelkit.torch.FusedSGD
    opt = hvd.DistributedOptimizer(sgd(model.parameters(), lr=0.05, momentum=0.9),
                                   named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model=model, optimizer=opt, batch=0, sizes=[])
    resets = [0]  # this process's resets (state attributes are synced from rank 0)

    def on_reset():
        resets[0] += 1

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.batch < BATCHES:
            x, y = local_part(state.batch)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            state.sizes.append(hvd.size())
            state.batch += 1
            scenario_hook(state, scenario, arg, out_dir, extra)
            state.commit()
            time.sleep(float(os.environ.get("ELASTIC_BATCH_SLEEP", "0")))

    train(state)
    result = {"id": int(os.environ["AK_ELASTIC_ID"]), "rank": hvd.rank(), "size": hvd.size(),
              "sizes": state.sizes, "resets": resets[0], "batch": state.batch,
              "params": [p.detach().flatten().tolist() for p in model.parameters()]}
    with open(os.path.join(out_dir, f"worker.{result['id']}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
