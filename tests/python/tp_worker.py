"""One rank of the accelkit.torch.parallel tests (tests/python/test_parallel.py starts
them with torchrun's variables). Mode "tp": a 2-layer MLP and a GPT-style block
(vocab-parallel embedding, attention and MLP on column/row-parallel linears, vocab-parallel
loss) against the same model unpartitioned, with and without overlap and sequence
parallelism: loss, every gathered parameter gradient and the input gradient within 1e-5
relative; gather_output / input_is_parallel=False; the refusals. Mode "zero":
ZeroOptimizer stages 0-3 (Adam, SGD with momentum) for 10 steps against the
single-process model on the global batch (losses within 1e-5 relative), and the bytes of
parameters, gradients and optimizer states per rank (stage 3 <= 1.1 x stage 0 / N).
Mode "hybrid" (4 ranks): a TP MLP at tp=2 trained by ZeroOptimizer over dp=2, stages 0-3.
Exit status 0 = every check passed; each failure is printed.
"""
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import accelkit.torch.distributed  # noqa: F401
from accelkit.torch import parallel as tp
from accelkit.torch.parallel import ZeroOptimizer

from rank_checks import TOL, check, check_close, run_modes  # noqa: E402


def gather(t, group, dim):
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


# ---- 2-layer MLP -----------------------------------------------------------------------

def mlp_case(group, sp, overlap):
    torch.manual_seed(1)
    S, B, H = 8, 3, 16
    ref1, ref2 = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)
    x = torch.randn(S, B, H)
    target = torch.randn(S, B, H)
    xr = x.clone().requires_grad_()
    loss_ref = (ref2(F.gelu(ref1(xr))) * target).sum()
    loss_ref.backward()

    fc1 = tp.ColumnParallelLinear(H, 4 * H, group, sequence_parallel=sp, overlap=overlap,
                                  chunks=3).load_full(ref1.weight, ref1.bias)
    fc2 = tp.RowParallelLinear(4 * H, H, group, sequence_parallel=sp, overlap=overlap,
                               chunks=3).load_full(ref2.weight, ref2.bias)
    if sp:
        xs = tp._comm.split_dim0(x, group).requires_grad_()
        t = tp._comm.split_dim0(target, group)
    else:
        xs, t = x.clone().requires_grad_(), target
    y = fc2(F.gelu(fc1(xs)))
    loss = (y * t).sum()
    loss.backward()
    tp.allreduce_sequence_parallel_grads(nn.ModuleList([fc1, fc2]), group)
    total = loss.detach().clone()
    if sp:
        dist.all_reduce(total, group=group)
    name = f"mlp sp={sp} overlap={overlap}"
    check_close(f"{name} loss", total, loss_ref.detach())
    check_close(f"{name} fc1.weight grad", gather(fc1.weight.grad, group, 0), ref1.weight.grad)
    check_close(f"{name} fc1.bias grad", gather(fc1.bias.grad, group, 0), ref1.bias.grad)
    check_close(f"{name} fc2.weight grad", gather(fc2.weight.grad, group, 1), ref2.weight.grad)
    check_close(f"{name} fc2.bias grad", fc2.bias.grad, ref2.bias.grad)
    gx = gather(xs.grad, group, 0) if sp else xs.grad
    check_close(f"{name} input grad", gx, xr.grad)


def gather_output_case(group):
    """ColumnParallelLinear(gather_output=True) into RowParallelLinear(input_is_parallel=
    False): the whole hidden activation between them, split again by the row layer."""
    torch.manual_seed(7)
    S, B, H = 4, 2, 8
    ref1, ref2 = nn.Linear(H, 2 * H), nn.Linear(2 * H, H)
    x, target = torch.randn(S, B, H), torch.randn(S, B, H)
    xr = x.clone().requires_grad_()
    loss_ref = (ref2(torch.tanh(ref1(xr))) * target).sum()
    loss_ref.backward()
    fc1 = tp.ColumnParallelLinear(H, 2 * H, group, gather_output=True)
    fc2 = tp.RowParallelLinear(2 * H, H, group, input_is_parallel=False)
    fc1.load_full(ref1.weight, ref1.bias)
    fc2.load_full(ref2.weight, ref2.bias)
    xs = x.clone().requires_grad_()
    hidden = torch.tanh(fc1(xs))
    check(hidden.shape == (S, B, 2 * H), f"gather_output: shape {tuple(hidden.shape)}")
    loss = (fc2(hidden) * target).sum()
    loss.backward()
    check_close("gather_output loss", loss.detach(), loss_ref.detach())
    check_close("gather_output fc1.weight grad", gather(fc1.weight.grad, group, 0),
                ref1.weight.grad)
    check_close("gather_output fc2.weight grad", gather(fc2.weight.grad, group, 1),
                ref2.weight.grad)
    check_close("gather_output input grad", xs.grad, xr.grad)


# ---- GPT-style block -------------------------------------------------------------------

def attention(qkv, head_dim):
    """Causal self-attention over qkv [s, b, heads*3*head_dim] (q, k, v per head)."""
    s, b = qkv.shape[:2]
    heads = qkv.shape[2] // (3 * head_dim)
    q, k, v = qkv.view(s, b, heads, 3, head_dim).permute(3, 1, 2, 0, 4).unbind(0)
    scores = q.matmul(k.transpose(-1, -2)) / math.sqrt(head_dim)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    p = scores.masked_fill(mask, float("-inf")).softmax(-1)
    return p.matmul(v).permute(2, 0, 1, 3).reshape(s, b, heads * head_dim)


class RefGPT(nn.Module):
    def __init__(self, vocab, hidden, heads):
        super().__init__()
        self.head_dim = hidden // heads
        self.emb = nn.Embedding(vocab, hidden)
        self.ln1, self.ln2, self.lnf = (nn.LayerNorm(hidden) for _ in range(3))
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        with torch.no_grad():  # non-trivial norms
            for ln in (self.ln1, self.ln2, self.lnf):
                ln.weight.uniform_(0.5, 1.5)
                ln.bias.uniform_(-0.1, 0.1)

    def forward(self, ids, targets):
        x = self.emb(ids)
        x = x + self.proj(attention(self.qkv(self.ln1(x)), self.head_dim))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class TPGPT(nn.Module):
    def __init__(self, ref, group, sp, overlap):
        super().__init__()
        vocab, hidden = ref.emb.weight.shape
        kw = dict(sequence_parallel=sp, overlap=overlap, chunks=2)
        self.group, self.head_dim = group, ref.head_dim
        self.emb = tp.VocabParallelEmbedding(vocab, hidden, group, sequence_parallel=sp)
        self.emb.load_full(ref.emb.weight)
        self.ln1, self.ln2, self.lnf = (nn.LayerNorm(hidden) for _ in range(3))
        for mine, theirs in ((self.ln1, ref.ln1), (self.ln2, ref.ln2), (self.lnf, ref.lnf)):
            mine.load_state_dict(theirs.state_dict())
            if sp:
                tp.mark_sequence_parallel(mine)
        self.qkv = tp.ColumnParallelLinear(hidden, 3 * hidden, group, **kw)
        self.qkv.load_full(ref.qkv.weight, ref.qkv.bias)
        self.proj = tp.RowParallelLinear(hidden, hidden, group, **kw)
        self.proj.load_full(ref.proj.weight, ref.proj.bias)
        self.fc1 = tp.ColumnParallelLinear(hidden, 4 * hidden, group, **kw)
        self.fc1.load_full(ref.fc1.weight, ref.fc1.bias)
        self.fc2 = tp.RowParallelLinear(4 * hidden, hidden, group, **kw)
        self.fc2.load_full(ref.fc2.weight, ref.fc2.bias)
        self.head = tp.ColumnParallelLinear(hidden, vocab, group, bias=False, **kw)
        self.head.load_full(ref.head.weight)

    def forward(self, ids, targets):
        x = self.emb(ids)  # [s/tp, b, h] under SP, else [s, b, h]
        x = x + self.proj(attention(self.qkv(self.ln1(x)), self.head_dim))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        logits = self.head(self.lnf(x))  # [s, b, vocab/tp]
        return tp.vocab_parallel_cross_entropy(logits, targets, self.group).mean()


# how each parameter's gradient is gathered: dim, or None for replicated
SHARD_DIM = {"emb.weight": 0, "qkv.weight": 0, "qkv.bias": 0, "proj.weight": 1,
             "fc1.weight": 0, "fc1.bias": 0, "fc2.weight": 1, "head.weight": 0}


def gpt_case(group, sp, overlap):
    torch.manual_seed(2)
    vocab, hidden, heads, S, B = 64, 32, 4, 8, 2
    ref = RefGPT(vocab, hidden, heads)
    ids = torch.randint(0, vocab, (S, B))
    targets = torch.randint(0, vocab, (S, B))
    loss_ref = ref(ids, targets)
    loss_ref.backward()
    model = TPGPT(ref, group, sp, overlap)
    loss = model(ids, targets)
    loss.backward()
    tp.allreduce_sequence_parallel_grads(model, group)
    name = f"gpt sp={sp} overlap={overlap}"
    check_close(f"{name} loss", loss.detach(), loss_ref.detach())
    ref_params = dict(ref.named_parameters())
    for pname, p in model.named_parameters():
        dim = SHARD_DIM.get(pname)
        g = p.grad if dim is None else gather(p.grad, group, dim)
        check_close(f"{name} {pname} grad", g, ref_params[pname].grad)


def tp_mode():
    world = dist.get_world_size()
    group = dist.new_group(list(range(world)), backend="accelkit")
    for sp in (False, True):
        for overlap in (False, True):
            mlp_case(group, sp, overlap)
            gpt_case(group, sp, overlap)
    gather_output_case(group)
    # refusals name what is wrong
    for call, words in (
            (lambda: tp.ColumnParallelLinear(5, 7, group), ("ColumnParallelLinear", "7")),
            (lambda: tp.RowParallelLinear(8, 8, group, input_is_parallel=False,
                                          sequence_parallel=True), ("input_is_parallel",)),
            (lambda: tp.VocabParallelEmbedding(world * 4, 8, group)(torch.tensor([[world * 4]])),
             ("token ids",))):
        try:
            call()
            check(False, f"no error for {words}")
        except ValueError as e:
            check(all(w in str(e) for w in words), f"error {e!r} should name {words}")


# ---- ZeRO ------------------------------------------------------------------------------

def zero_model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 64), nn.LayerNorm(64),
                         nn.Tanh(), nn.Linear(64, 8))


def zero_batches(steps, world, per_rank):
    g = torch.Generator().manual_seed(4)
    return [(torch.randn(world * per_rank, 32, generator=g),
             torch.randn(world * per_rank, 8, generator=g)) for _ in range(steps)]


def zero_run(stage, batches, per_rank, optimizer, kwargs, ref_losses):
    """Trains a fresh model with ZeroOptimizer(stage); checks every step's global loss."""
    world, rank = dist.get_world_size(), dist.get_rank()
    model = zero_model()
    opt = ZeroOptimizer(model, optimizer, stage=stage, **kwargs)
    what = f"zero stage {stage} {optimizer.__name__}"
    for step, (x, y) in enumerate(batches):
        rows = slice(rank * per_rank, (rank + 1) * per_rank)
        loss = F.mse_loss(model(x[rows]), y[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        got = float(total) / world
        r = abs(got - ref_losses[step]) / abs(ref_losses[step])
        check(r <= TOL, f"{what} step {step}: loss {got} vs {ref_losses[step]} "
                        f"(relative {r:.3g})")
    if stage == 3:
        check(len(opt.order) == len(opt.units) == 4,
              f"stage 3: {len(opt.units)} modules, {len(opt.order)} in forward order")
        check(not any(u.gathered for u in opt.units),
              "stage 3: gathered parameters left after the step")
    return model, opt


def zero_mode():
    world, rank = dist.get_world_size(), dist.get_rank()
    steps, per_rank = 10, 4
    batches = zero_batches(steps, world, per_rank)
    # Adam is blind to a gradient's scale, SGD is not: both catch a wrong average
    for optimizer, kwargs in ((torch.optim.Adam, {"lr": 1e-2}),
                              (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9})):
        ref = zero_model()
        ref_opt = optimizer(ref.parameters(), **kwargs)
        ref_losses = []
        for x, y in batches:
            loss = F.mse_loss(ref(x), y)
            ref_opt.zero_grad()
            loss.backward()
            ref_opt.step()
            ref_losses.append(float(loss))
        memory = {}
        for stage in (0, 1, 2, 3):
            model, opt = zero_run(stage, batches, per_rank, optimizer, kwargs, ref_losses)
            memory[stage] = opt.memory_bytes()
            if stage < 3:  # the parameters themselves, after 10 steps
                for (name, p), q in zip(model.named_parameters(), ref.parameters()):
                    check_close(f"zero stage {stage} {optimizer.__name__} {name} after "
                                f"{steps} steps", p.detach(), q.detach())
        if optimizer is torch.optim.Adam:
            zero_memory_checks(memory, world, rank)
    try:
        ZeroOptimizer(list(zero_model().parameters()), torch.optim.Adam, stage=3)
        check(False, "stage 3 with a parameter list was accepted")
    except ValueError as e:
        check("nn.Module" in str(e), f"stage 3 refusal should ask for the module: {e}")


def zero_memory_checks(memory, world, rank):
    total = {s: sum(m.values()) for s, m in memory.items()}
    if rank == 0:
        for s in memory:
            print(f"ZERO-MEMORY world={world} stage={s} {memory[s]} total={total[s]}", flush=True)
    check(total[3] <= 1.1 * total[0] / world,
          f"stage 3 holds {total[3]} bytes, more than 1.1 x stage 0's {total[0]} / {world}")
    check(memory[1]["optimizer"] <= 1.1 * memory[0]["optimizer"] / world,
          f"stage 1 optimizer states {memory[1]['optimizer']} not 1/{world} of "
          f"{memory[0]['optimizer']}")
    check(memory[2]["grads"] <= 1.1 * memory[0]["grads"] / world,
          f"stage 2 gradients {memory[2]['grads']} not 1/{world} of {memory[0]['grads']}")

# ---- tensor parallelism x ZeRO data parallelism ---------------------------------------

def hybrid_mode():
    """4 ranks = tp 2 x dp 2: a TP MLP (overlap on) trained by ZeroOptimizer over the
    data-parallel group, stages 0-3, against the single-process MLP on the global batch."""
    world, rank = dist.get_world_size(), dist.get_rank()
    tp_size = 2
    dp_size = world // tp_size
    tp_groups = [dist.new_group(list(range(d * tp_size, (d + 1) * tp_size)))
                 for d in range(dp_size)]
    dp_groups = [dist.new_group(list(range(t, world, tp_size))) for t in range(tp_size)]
    tp_group, dp_group = tp_groups[rank // tp_size], dp_groups[rank % tp_size]
    dp_rank = rank // tp_size
    H, steps, per_rank = 16, 10, 4
    g = torch.Generator().manual_seed(5)
    batches = [(torch.randn(dp_size * per_rank, 2, H, generator=g),
                torch.randn(dp_size * per_rank, 2, H, generator=g)) for _ in range(steps)]

    def ref_model():
        torch.manual_seed(6)
        return nn.Linear(H, 4 * H), nn.Linear(4 * H, H)
    r1, r2 = ref_model()
    ref_opt = torch.optim.Adam(list(r1.parameters()) + list(r2.parameters()), lr=1e-2)
    ref_losses = []
    for x, y in batches:
        loss = F.mse_loss(r2(F.gelu(r1(x))), y)
        ref_opt.zero_grad()
        loss.backward()
        ref_opt.step()
        ref_losses.append(float(loss))
    for stage in (0, 1, 2, 3):
        f1, f2 = ref_model()
        model = nn.Sequential(tp.ColumnParallelLinear(H, 4 * H, tp_group, chunks=2),
                              nn.GELU(), tp.RowParallelLinear(4 * H, H, tp_group, chunks=2))
        model[0].load_full(f1.weight, f1.bias)
        model[2].load_full(f2.weight, f2.bias)
        opt = ZeroOptimizer(model, torch.optim.Adam, stage=stage, group=dp_group, lr=1e-2)
        for step, (x, y) in enumerate(batches):
            rows = slice(dp_rank * per_rank, (dp_rank + 1) * per_rank)
            loss = F.mse_loss(model(x[rows]), y[rows])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total = loss.detach().clone()
            dist.all_reduce(total, group=dp_group)
            got = float(total) / dp_size
            r = abs(got - ref_losses[step]) / abs(ref_losses[step])
            check(r <= TOL, f"tp2 x dp2 zero stage {stage} step {step}: loss {got} vs "
                            f"{ref_losses[step]} (relative {r:.3g})")


if __name__ == "__main__":
    run_modes("tp_worker.py", {"tp": tp_mode, "zero": zero_mode, "hybrid": hybrid_mode})
