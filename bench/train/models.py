"""Models, synthetic data and the timed training loop shared by ddp_train.py and
hvd_train.py, so that both peers run exactly the same computation.

Models
  ctr       CTR-style model (DLRM-like): 8 embedding tables (703 000 rows x 64 in all,
            44.99 M parameters, dense gradients: nn.Embedding(sparse=False)), a bottom
            Linear(13 -> 64) for the dense features, and a top MLP
            576 -> 4096 -> 2048 -> 1 on [dense, 8 embeddings] (10.76 M). 55.75 M
            parameters in all: 223 MB of f32 gradient per step. Forward + backward is ~4.3 GFLOP at batch 64,
            so a step is ~0.1-0.3 s of compute on one core and 1 Gbit/s links dominate.
            Loss: BCE with logits on random 0/1 clicks.
  resnet18  torchvision.models.resnet18(weights=None), 1000 classes, 11.69 M parameters,
            3x224x224 images (--image-size). Loss: cross entropy.

Data: a few synthetic batches drawn once from a generator seeded with (seed, rank), then
cycled; generating them is not timed. Parameters are initialised from seed 0 on every rank
(and broadcast from rank 0 by either harness anyway).
"""
import json
import resource
import statistics
import time

import torch
import torch.nn as nn

CTR_TABLE_ROWS = (250_000, 150_000, 100_000, 100_000, 50_000, 30_000, 15_000, 8_000)
CTR_EMB_DIM = 64
CTR_DENSE = 13
CTR_HIDDEN = (4096, 2048)


class CTRModel(nn.Module):
    """Embedding tables + wide MLP. forward(dense (B, 13) f32, sparse (B, 8) int64) -> (B,)."""

    def __init__(self, rows=CTR_TABLE_ROWS, dim=CTR_EMB_DIM, dense=CTR_DENSE, hidden=CTR_HIDDEN):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(r, dim, sparse=False) for r in rows)
        self.bottom = nn.Sequential(nn.Linear(dense, dim), nn.ReLU())
        layers, width = [], dim * (len(rows) + 1)
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.top = nn.Sequential(*layers)
        for t in self.tables:
            nn.init.normal_(t.weight, std=0.01)

    def forward(self, dense, sparse):
        feats = [self.bottom(dense)] + [t(sparse[:, i]) for i, t in enumerate(self.tables)]
        return self.top(torch.cat(feats, dim=1)).squeeze(1)  # (B,)


def build_model(name):
    torch.manual_seed(0)
    if name == "ctr":
        return CTRModel()
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(weights=None, num_classes=1000)
    raise ValueError(f"unknown model {name!r}")


def param_count(model):
    return sum(p.numel() for p in model.parameters())


def make_batches(name, batch, rank, seed=1234, n=4, image_size=224):
    """n synthetic (inputs tuple, target) batches, the same for a given (seed, rank)."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    out = []
    for _ in range(n):
        if name == "ctr":
            dense = torch.randn(batch, CTR_DENSE, generator=g)
            sparse = torch.stack([torch.randint(0, r, (batch,), generator=g)
                                  for r in CTR_TABLE_ROWS], dim=1)  # (B, 8)
            clicks = torch.randint(0, 2, (batch,), generator=g).float()
            out.append(((dense, sparse), clicks))
        else:
            images = torch.randn(batch, 3, image_size, image_size, generator=g)
            labels = torch.randint(0, 1000, (batch,), generator=g)
            out.append(((images,), labels))
    return out


def loss_fn(name):
    return nn.BCEWithLogitsLoss() if name == "ctr" else nn.CrossEntropyLoss()


def make_optimizer(kind, params, lr=None, momentum=0.9):
    """The peers' optimizer: SGD with momentum 0.9 (lr 0.01) or Adam (lr 1e-3)."""
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.01 if lr is None else lr, momentum=momentum)
    if kind == "adam":
        return torch.optim.Adam(params, lr=1e-3 if lr is None else lr)
    raise ValueError(f"unknown optimizer {kind!r}")


def train_loop(model, optimizer, batches, criterion, warmup, steps, on_warm=None):
    """zero_grad, forward, loss, backward, step; each step timed on its own (wall clock).
    Returns (step seconds after warm-up, first loss, last loss, cpu) where cpu gives this
    process's CPU time per step after warm-up (all its threads: compute, communication) and
    the median wall time of each phase after warm-up (forward_ms: zero_grad, forward and
    loss; backward_ms: backward, with DDP's overlapped allreduces; step_ms: optimizer.step,
    with Horovod's wait for the allreduces still in flight).
    on_warm(), when given, is called once as the first step after warm-up begins."""
    model.train()
    times, losses, phases = [], [], {"forward_ms": [], "backward_ms": [], "step_ms": []}
    for i in range(warmup + steps):
        if i == warmup:
            ru0 = resource.getrusage(resource.RUSAGE_SELF)
            if on_warm:
                on_warm()
        inputs, target = batches[i % len(batches)]
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = criterion(model(*inputs), target)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        losses.append(loss.item())
        if i >= warmup:
            times.append(t3 - t0)
            for name, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2)):
                phases[name].append(dt * 1e3)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = {"cpu_user_ms_per_step": round((ru1.ru_utime - ru0.ru_utime) * 1e3 / max(1, steps), 1),
           "cpu_sys_ms_per_step": round((ru1.ru_stime - ru0.ru_stime) * 1e3 / max(1, steps), 1),
           "phases_ms": {k: round(statistics.median(v), 2) for k, v in phases.items() if v}}
    return times, losses[0], losses[-1], cpu


def param_checksum(model):
    """A float64 digest of the parameters: equal on every rank when they are in sync."""
    with torch.no_grad():
        return float(sum(p.double().sum() * (i + 1) for i, p in enumerate(model.parameters())))


def summary(times, batch, world, **extra):
    """The JSON line both harnesses print from rank 0 (samples/s over all ranks)."""
    ms = sorted(t * 1e3 for t in times)
    med = statistics.median(ms)
    rec = {
        "step_ms_median": round(med, 2),
        "step_ms_p10": round(ms[len(ms) // 10], 2),
        "step_ms_p90": round(ms[min(len(ms) - 1, (9 * len(ms)) // 10)], 2),
        "samples_per_s": round(batch * world / (med / 1e3), 2),
        "samples_per_s_per_rank": round(batch / (med / 1e3), 2),
        "batch": batch,
        "world": world,
        "steps": len(times),
        "step_ms_all": [round(t * 1e3, 1) for t in times],
        "torch_threads": torch.get_num_threads(),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    rec.update(extra)
    return rec


def emit(rec):
    print(json.dumps(rec, sort_keys=True), flush=True)
