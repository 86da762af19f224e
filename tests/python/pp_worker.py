"""One rank of the pipeline-parallel tests (tests/python/test_pipeline.py starts them with
torchrun's variables; every rank is one pipeline stage). Mode "pp": against the same model
unpartitioned on the whole batch (loss = mean over micro-batches): an MLP (nn.Sequential
cut by split_sequential) under 1F1B with 4 and 8 micro-batches and with fewer
micro-batches than stages, 2 SGD steps each; a GPT-style stack (embedding, GPTBlocks with
recompute hybrid:1, head, cross-entropy, activations [s, b, h] split along the batch);
the interleaved schedule with 2 chunks per rank. Checked: the loss (last stage) and every
parameter gradient of this rank's layers, each within 1e-5 relative; the refusals.
Mode "recompute" (1 rank): GPTBlock stacks under none / selective / full / hybrid:1:
losses and gradients equal to none's, and the bytes saved for backward ordered
full < hybrid:1 < selective < none.
Exit status 0 = every check passed; each failure is printed.
"""
import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import accelkit.torch.distributed  # noqa: F401
from accelkit.torch import parallel as tp

from rank_checks import check, check_close, run_modes  # noqa: E402


# ---- models ----------------------------------------------------------------------------

def mlp(layers, width=16):
    torch.manual_seed(3)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.Tanh()]
    return nn.Sequential(*mods)


class Embed(nn.Module):
    def __init__(self, vocab, hidden, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(seq, hidden)

    def forward(self, ids):  # [s, b] -> [s, b, h]
        return self.tok(ids) + self.pos(torch.arange(ids.shape[0]))[:, None, :]


class Head(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.ln, self.out = nn.LayerNorm(hidden), nn.Linear(hidden, vocab, bias=False)

    def forward(self, x):
        return self.out(self.ln(x))


def gpt(layers, vocab=32, hidden=16, heads=4, seq=8):
    torch.manual_seed(5)
    return nn.Sequential(Embed(vocab, hidden, seq),
                         *[tp.GPTBlock(hidden, heads) for _ in range(layers)],
                         Head(vocab, hidden))


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---- a pipeline run against the unpartitioned model ------------------------------------

def pipeline_case(name, model, pieces, groups, m, make_batch, loss_fn, batch_dim,
                  chunks_per_rank=1, recompute=None, steps=2):
    """model: the whole model (nn.Sequential); pieces: its cut into pp * chunks_per_rank
    nn.Sequentials (virtual stage order). Trains both `steps` SGD steps on the same
    batches and compares this rank's gradients and the last stage's loss."""
    pp, me = groups.size, groups.rank
    ref = copy.deepcopy(model)
    mine = [pieces[c * pp + me] for c in range(chunks_per_rank)]
    if recompute:
        for piece in mine:
            tp.set_recompute([b for b in piece if isinstance(b, tp.GPTBlock)], recompute)
    ref_pieces = {id(p): r for p, r in zip(model, ref)}  # model layer -> reference layer
    pipe = tp.Pipeline(mine, groups, num_microbatches=m, loss_fn=loss_fn,
                       batch_dim=batch_dim)
    opt = torch.optim.SGD([p for c in mine for p in c.parameters()], lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(steps):
        x, y = make_batch(step)
        ref_opt.zero_grad()
        ref_loss = loss_fn(ref(x), y)
        ref_loss.backward()
        opt.zero_grad()
        loss = pipe.train_step(x, y)
        last = me == pp - 1
        check((loss is not None) == last, f"{name}: loss returned on rank {me}: "
                                          f"{loss is not None}")
        if last and loss is not None:
            check_close(f"{name} step {step} loss", loss, ref_loss.detach())
        for c, piece in enumerate(mine):
            for li, layer in enumerate(piece):
                twin = ref_pieces[id(layer)]
                for (pn, p), (_, rp) in zip(layer.named_parameters(),
                                            twin.named_parameters()):
                    check_close(f"{name} step {step} chunk {c} layer {li} {pn} grad",
                                p.grad, rp.grad)
        opt.step()
        ref_opt.step()


def mlp_batches(batch):
    def make(step):
        g = torch.Generator().manual_seed(100 + step)
        return torch.randn(batch, 16, generator=g), torch.randn(batch, 16, generator=g)
    return make


def gpt_batches(batch, vocab=32, seq=8):
    def make(step):
        g = torch.Generator().manual_seed(200 + step)
        return (torch.randint(vocab, (seq, batch), generator=g),
                torch.randint(vocab, (seq, batch), generator=g))
    return make


def pp_mode():
    world = dist.get_world_size()
    groups = tp.pipeline_groups([list(range(world))])
    check(groups.size == world and groups.rank == dist.get_rank(), "pipeline_groups")
    for m in (4, 8):
        model = mlp(2 * world)
        pipeline_case(f"mlp 1F1B m={m}", model, tp.split_sequential(model, world), groups,
                      m, mlp_batches(8), F.mse_loss, 0)
    few = world // 2 if world > 2 else 1  # fewer micro-batches than stages
    model = mlp(world)
    pipeline_case(f"mlp 1F1B m={few} < pp", model, tp.split_sequential(model, world),
                  groups, few, mlp_batches(4), F.mse_loss, 0)
    # GPT: embedding with the first block(s), the head with the last
    model = gpt(world)
    bounds = list(range(2, world + 1))  # stage i >= 1 starts at block i
    pipeline_case("gpt 1F1B m=4 hybrid:1", model,
                  tp.split_sequential(model, world, bounds), groups, 4, gpt_batches(4),
                  lm_loss, 1, recompute="hybrid:1")
    # interleaved: 2 chunks per rank, 2*pp virtual stages
    for m in (world, 2 * world):
        model = mlp(2 * world)
        pipeline_case(f"mlp interleaved v=2 m={m}", model,
                      tp.split_sequential(model, 2 * world), groups, m, mlp_batches(8),
                      F.mse_loss, 0, chunks_per_rank=2)
    model = gpt(2 * world - 1)
    pipeline_case(f"gpt interleaved v=2 m={2 * world} selective", model,
                  tp.split_sequential(model, 2 * world), groups, 2 * world,
                  gpt_batches(8), lm_loss, 1, chunks_per_rank=2,
                  recompute="selective")
    refusals(groups)


def refusals(groups):
    def refused(what, fn, needle):
        try:
            fn()
        except ValueError as e:
            check(needle in str(e), f"{what}: message {e!r} lacks {needle!r}")
            return
        check(False, f"{what}: not refused")
    pipe = tp.Pipeline([nn.Linear(4, 4)], groups, num_microbatches=3, loss_fn=F.mse_loss)
    refused("indivisible batch", lambda: pipe._split(torch.zeros(4, 4), "first"),
            "not divisible into 3")
    refused("interleaved m % pp", lambda: tp.Pipeline([nn.Linear(4, 4)] * 2, groups,
                                                      groups.size + 1, F.mse_loss),
            "multiple of the pipeline size")
    refused("split too many", lambda: tp.split_sequential(nn.Sequential(nn.Tanh()), 2),
            "cannot make 2 stages")
    refused("recompute mode", lambda: tp.parse_recompute("hybrid:x"), "hybrid:x")


# ---- recompute on one rank -------------------------------------------------------------

def recompute_mode():
    torch.manual_seed(11)
    layers, s, b, h = 4, 32, 2, 32
    base = nn.Sequential(*[tp.GPTBlock(h, 4) for _ in range(layers)])
    x = torch.randn(s, b, h)
    target = torch.randn(s, b, h)
    results = {}
    for mode in ("none", "selective", "hybrid:1", "full"):
        model = copy.deepcopy(base)
        tp.set_recompute(model, mode)
        xi = x.clone().requires_grad_()
        with tp.SavedTensorMeter() as meter:
            loss = F.mse_loss(model(xi), target)
        loss.backward()
        grads = [p.grad for p in model.parameters()] + [xi.grad]
        results[mode] = (loss.detach(), grads, meter.bytes)
        print(f"recompute {mode}: {meter.bytes} bytes saved for backward", flush=True)
    loss0, grads0, _ = results["none"]
    for mode, (loss, grads, _) in results.items():
        check_close(f"recompute {mode} loss", loss, loss0)
        for i, (g, g0) in enumerate(zip(grads, grads0)):
            check_close(f"recompute {mode} grad {i}", g, g0)
    saved = [results[m][2] for m in ("full", "hybrid:1", "selective", "none")]
    check(all(a < b for a, b in zip(saved, saved[1:])),
          f"saved bytes not ordered full < hybrid:1 < selective < none: {saved}")


if __name__ == "__main__":
    run_modes("pp_worker.py", {"pp": pp_mode, "recompute": recompute_mode})
