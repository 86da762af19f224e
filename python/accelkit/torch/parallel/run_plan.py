"""Runs one plan of `ak plan --json` and prints what was measured beside what the planner
predicted: step time (median of the timed steps; every step between barriers), memory per
rank, MFU. `ak train` starts it on every rank through `ak launch`:

    ak train --plan plan.json --model m.json --steps 5
    # = ak launch -np TP*PP*DP python3 -m accelkit.torch.parallel.run_plan --plan ...

Measured MFU uses the planner's own FLOP count: MFU_measured = MFU_predicted x
T_predicted / T_measured. Memory per rank: the model state this rank holds after a step
(parameters, gradients, optimizer state: ZeroOptimizer's accounting) and the process's peak
resident set size (which adds activations, buffers, torch itself). --json-out FILE appends
one JSON line per run (bench/train/plan_vs_measured.sh reads them).
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist

MIB = 1024.0 * 1024.0


def _args(argv):
    ap = argparse.ArgumentParser(prog="python3 -m accelkit.torch.parallel.run_plan",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--plan", required=True, help="ak plan --json output (or one plan)")
    ap.add_argument("--model", required=True, help="the planner's model JSON")
    ap.add_argument("--index", type=int, default=0, help="which plan of the list (0: best)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--no-overlap", action="store_true",
                    help="tensor-parallel collectives not overlapped with the GEMMs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out", help="append the result as one JSON line to this file")
    return ap.parse_args(argv)


def _timed_step(trainer, ids, targets):
    dist.barrier()
    t0 = time.perf_counter()
    loss = trainer.step(ids, targets)
    dist.barrier()
    return time.perf_counter() - t0, loss


def _gather_memory(trainer):
    """[[params, grads, optimizer, peak_rss] bytes] of every rank (on every rank)."""
    mem = trainer.memory_bytes()
    mine = torch.tensor([mem["params"], mem["grads"], mem["optimizer"], mem["peak_rss"]],
                        dtype=torch.float64)
    out = torch.empty(dist.get_world_size() * 4, dtype=torch.float64)
    dist.all_gather_into_tensor(out, mine)
    return out.view(-1, 4).tolist()


def _report(args, trainer, times, losses, memory):
    plan = trainer.plan
    pred = plan.fields
    t_meas = statistics.median(times)
    t_pred = pred.get("time_per_iter_s")
    print(f"plan {args.index}: {plan.describe()}  ({trainer.spec.name}, "
          f"{trainer.spec.num_params() / 1e6:.1f} M parameters, global batch "
          f"{plan.global_batch} x {trainer.spec.seq_len} tokens)")
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses)} steps")
    print(f"step time   measured {t_meas:8.3f} s (median of {len(times)}; min "
          f"{min(times):.3f}, max {max(times):.3f})")
    result = {"index": args.index, "plan": plan.describe(), "measured_s": t_meas,
              "times_s": times, "losses": losses, "memory_per_rank": memory}
    if t_pred:
        ratio = t_meas / t_pred
        print(f"            predicted {t_pred:8.3f} s   measured/predicted {ratio:.3f}")
        bd = pred.get("breakdown", {})
        print("  predicted breakdown: " + ", ".join(
            f"{k[:-2]} {v:.3f}" for k, v in bd.items() if v > 0) + " s")
        mfu_pred = pred.get("mfu", 0.0)
        mfu_meas = mfu_pred * t_pred / t_meas
        print(f"MFU         measured {mfu_meas * 100:7.2f} %  predicted {mfu_pred * 100:.2f} %")
        result.update(predicted_s=t_pred, ratio=ratio, mfu_measured=mfu_meas,
                      mfu_predicted=mfu_pred, breakdown=bd)
    mem_pred = pred.get("memory", {})
    print("memory per rank (MiB): rank  params  grads  optimizer  model-state  peak-RSS")
    for r, (p, g, o, rss) in enumerate(memory):
        print(f"  {r:>24}  {p / MIB:6.1f} {g / MIB:6.1f} {o / MIB:10.1f} "
              f"{(p + g + o) / MIB:12.1f} {rss / MIB:9.1f}")
    if mem_pred:
        state = (mem_pred.get("weights_bytes", 0) + mem_pred.get("gradients_bytes", 0) +
                 mem_pred.get("optimizer_bytes", 0))
        print(f"  predicted (most loaded): model state {state / MIB:.1f}, activations "
              f"{mem_pred.get('activations_bytes', 0) / MIB:.1f}, total "
              f"{pred.get('memory_bytes_per_device', 0) / MIB:.1f}")
        result["memory_predicted"] = mem_pred
    sys.stdout.flush()
    if args.json_out:
        with open(args.json_out, "a") as f:
            f.write(json.dumps(result) + "\n")


def main(argv=None):
    args = _args(argv)
    import accelkit.torch.distributed  # noqa: F401  (the "accelkit" backend)
    from .build import Plan, Trainer
    from .model import ModelSpec, load_json
    torch.set_num_threads(1)
    dist.init_process_group("accelkit")
    plan = Plan(load_json(args.plan), index=args.index)
    trainer = Trainer(load_json(args.model), plan, seed=args.seed,
                      overlap=not args.no_overlap)
    spec = ModelSpec(load_json(args.model))
    g = torch.Generator().manual_seed(args.seed)
    shape = (spec.seq_len, plan.global_batch)
    ids = torch.randint(0, spec.vocab, shape, generator=g)
    targets = torch.randint(0, spec.vocab, shape, generator=g)
    times, losses = [], []
    for k in range(args.warmup + args.steps):
        t, loss = _timed_step(trainer, ids, targets)
        losses.append(loss)
        if k >= args.warmup:
            times.append(t)
    memory = _gather_memory(trainer)
    if dist.get_rank() == 0:
        _report(args, trainer, times, losses, memory)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
