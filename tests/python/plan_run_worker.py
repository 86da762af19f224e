"""One rank of tests/python/test_plan_run.py: builds the reference decoder
(accelkit.torch.parallel.model) under each plan of its mode whose tp*pp*dp equals the
job's size, trains it a few steps with accelkit.torch.parallel.build, and checks every
step's loss against the single-process model's (computed on this rank) within 1e-4
relative. Modes: "quick" (a representative subset, make test) and "full" (every
tp x pp x dp in {1,2}^3 within 4 ranks x ZeRO 0-3 x recompute mode x SP, make
test-parallel-matrix).

    python3 plan_run_worker.py quick|full    (with torchrun's variables)
"""
import itertools
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rank_checks  # noqa: E402
from rank_checks import check  # noqa: E402

from accelkit.torch.parallel import Reference, build  # noqa: E402

STEPS = 10
TOL = 1e-4
SEQ, MBS, M = 8, 2, 2  # global batch = dp * MBS * M

# GPT-2 style (learned positions, LayerNorm, GELU, biases, tied embeddings) and Llama
# style (rope, RMSNorm, SwiGLU, grouped-query attention, untied).
MODELS = {
    "gpt": {"name": "tiny-gpt", "layers": 4, "hidden": 32, "heads": 4, "vocab": 64,
            "seq_len": SEQ, "tied_embeddings": True, "linear_bias": True},
    "llama": {"name": "tiny-llama", "layers": 4, "hidden": 32, "heads": 4, "kv_heads": 2,
              "ffn_hidden": 48, "vocab": 64, "seq_len": SEQ, "gated_ffn": True,
              "position": "rope", "norm": "rmsnorm"},
}

# quick: (model, tp, pp, dp, vp, sp, zero, recompute): each axis value at least once
QUICK = [
    ("gpt", 1, 1, 1, 1, False, 0, "none"),
    ("llama", 2, 1, 1, 1, True, 0, "selective"),
    ("gpt", 1, 2, 1, 2, False, 0, "hybrid:1"),
    ("llama", 1, 1, 2, 1, False, 2, "full"),
    ("gpt", 2, 2, 1, 1, True, 0, "full"),
    ("llama", 1, 2, 2, 1, False, 1, "hybrid:1"),
    ("gpt", 2, 1, 2, 1, True, 3, "selective"),
    ("llama", 2, 1, 2, 1, False, 3, "none"),
]


def full_matrix():
    out = []
    for tp, pp, dp in itertools.product((1, 2), repeat=3):
        if tp * pp * dp > 4:
            continue
        zeros = [0] if dp == 1 else ([0, 1] if pp > 1 else [0, 1, 2, 3])
        for model, zero, rc, sp in itertools.product(
                MODELS, zeros, ("none", "selective", "full", "hybrid:1"),
                (False, True) if tp > 1 else (False,)):
            vp = 2 if pp > 1 and rc == "hybrid:1" else 1  # interleaved on some
            out.append((model, tp, pp, dp, vp, sp, zero, rc))
    return out


def batch(dp, step):
    g = torch.Generator().manual_seed(1000 + step)
    b = dp * MBS * M
    ids = torch.randint(0, 64, (SEQ, b), generator=g)
    return ids, torch.randint(0, 64, (SEQ, b), generator=g)


_REFERENCE = {}


def reference_losses(model, dp):
    """The single-process model's losses on the same batches (Adam, same lr)."""
    key = (model, dp)
    if key not in _REFERENCE:
        ref = Reference(MODELS[model], seed=7)
        opt = torch.optim.Adam(ref.parameters(), lr=1e-3)
        losses = []
        for step in range(STEPS):
            opt.zero_grad()
            loss = ref(*batch(dp, step))
            loss.backward()
            ref.tie_grads()
            opt.step()
            losses.append(float(loss))
        _REFERENCE[key] = losses
    return _REFERENCE[key]


def run(configs):
    world = dist.get_world_size()
    mine = [c for c in configs if c[1] * c[2] * c[3] == world]
    check(bool(mine), f"no configuration for {world} ranks")
    for model, tp, pp, dp, vp, sp, zero, rc in mine:
        plan = {"tp": tp, "pp": pp, "dp": dp, "vp": vp, "mbs": MBS, "microbatches": M,
                "sequence_parallel": sp, "zero": zero, "offload": "none",
                "recompute": "hybrid" if rc.startswith("hybrid") else rc,
                "recompute_layers": int(rc.split(":")[1]) if ":" in rc else 0}
        what = f"{model} tp={tp} pp={pp} dp={dp} vp={vp} sp={sp} zero={zero} {rc}"
        t0 = time.perf_counter()
        trainer = build(MODELS[model], plan, seed=7, lr=1e-3)
        want = reference_losses(model, dp)
        worst = 0.0
        for step in range(STEPS):
            got = trainer.step(*batch(dp, step))
            err = abs(got - want[step]) / abs(want[step])
            worst = max(worst, err)
            check(err <= TOL, f"{what}: step {step} loss {got:.8f} != reference "
                              f"{want[step]:.8f} (relative {err:.2e})")
        if dist.get_rank() == 0:
            print(f"{what}: {STEPS} steps, worst relative loss error {worst:.2e} "
                  f"({time.perf_counter() - t0:.2f} s)", flush=True)


def refusals():
    """What the runtime does not implement is refused, naming it."""
    for plan, desc, needle in (
            ({"tp": 1, "pp": 1, "dp": 1, "mbs": 1, "offload": "optimizer"},
             MODELS["gpt"], "offload"),
            ({"tp": 1, "pp": 1, "dp": 1, "mbs": 1}, dict(MODELS["gpt"], dropout=True),
             "dropout"),
            ({"tp": 1, "pp": 1, "dp": 1, "mbs": 1}, dict(MODELS["gpt"], experts=8),
             "experts"),
            ({"tp": 1, "pp": 1, "dp": 1, "mbs": 1}, dict(MODELS["gpt"], colour=1),
             "colour")):
        try:
            build(desc, plan)
            check(False, f"{needle}: not refused")
        except ValueError as e:
            check(needle in str(e), f"{needle}: refused with {e}")


if __name__ == "__main__":
    rank_checks.run_modes("plan_run_worker.py", {
        "quick": lambda: (run(QUICK), refusals() if dist.get_world_size() == 1 else None),
        "full": lambda: run(full_matrix())})
