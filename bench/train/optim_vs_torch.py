"""Fused optimizers: accelkit's ak_optim_step against torch.optim (foreach=False), one thread.

Times one optimizer step over one flat f32 parameter of --n elements (default 25 M) for
SGD with momentum, Adam and AdamW against torch.optim, and LAMB against the same formulas
in torch tensor ops (TorchLamb below: torch.optim has no LAMB), alternating torch and
accelkit step for step, --reps repetitions each after a warm-up, and prints the medians
with the ratio torch / accelkit. Then runs --check-steps steps of each optimizer from the
same start with fresh gradients every step and prints the largest difference of
parameters and states (relative to each buffer's largest magnitude) and how many
elements differ at all. Exits 1 when a difference exceeds 1e-5. The medians also go as
train.optim lines (torch as the peer) to $AK_BENCH_OUT/train.jsonl for `ak report`.

  flock /tmp/ak.lock env AK_LIBRARY=build/libaccelkit.so \\
      /usr/bin/python3 bench/train/optim_vs_torch.py [--n 25000000] [--reps 7]

AK_NUM_THREADS=1 and torch.set_num_threads(1) are set here before either library runs.
"""
import argparse
import ctypes
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ["AK_NUM_THREADS"] = "1"  # read once by ak_init: must precede the first call
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

AK_SGD, AK_ADAM, AK_ADAMW, AK_LAMB = 0, 1, 2, 3


class OptimConfig(ctypes.Structure):
    """Mirror of ak_optim_config in include/accelkit/train.h (same order)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int),
        ("lr", ctypes.c_double), ("weight_decay", ctypes.c_double),
        ("momentum", ctypes.c_double), ("dampening", ctypes.c_double),
        ("nesterov", ctypes.c_int),
        ("beta1", ctypes.c_double), ("beta2", ctypes.c_double), ("eps", ctypes.c_double),
        ("grad_scale", ctypes.c_double),
    ]


def load_library(path):
    root = Path(__file__).resolve().parents[2]
    for cand in (path, os.environ.get("AK_LIBRARY"), root / "build" / "libaccelkit.so"):
        if cand and Path(cand).exists():
            lib = ctypes.CDLL(str(cand))
            break
    else:
        sys.exit("optim_vs_torch: libaccelkit.so not found (build it, or set AK_LIBRARY)")
    lib.ak_optim_step.argtypes = [ctypes.POINTER(OptimConfig), ctypes.c_int64,
                                  ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_void_p, ctypes.c_size_t]
    lib.ak_optim_step.restype = ctypes.c_int
    lib.ak_last_error.restype = ctypes.c_char_p
    return lib, cand


# name, accelkit config, torch optimizer factory; "(ops)": the peer is TorchLamb below
def optimizers():
    def cfg(kind, lr, wd, **kw):
        c = OptimConfig(ctypes.sizeof(OptimConfig), kind, lr, wd, 0.0, 0.0, 0,
                        0.9, 0.999, 1e-8, 1.0)
        for k, v in kw.items():
            setattr(c, k, v)
        return c

    return [
        ("SGD momentum", cfg(AK_SGD, 0.01, 1e-4, momentum=0.9),
         lambda p: torch.optim.SGD([p], lr=0.01, momentum=0.9, weight_decay=1e-4,
                                   foreach=False)),
        ("Adam", cfg(AK_ADAM, 1e-3, 0.0),
         lambda p: torch.optim.Adam([p], lr=1e-3, foreach=False)),
        ("AdamW", cfg(AK_ADAMW, 1e-3, 0.01),
         lambda p: torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, foreach=False)),
        ("LAMB (ops)", cfg(AK_LAMB, 1e-3, 0.01, eps=1e-6),
         lambda p: TorchLamb(p, lr=1e-3, weight_decay=0.01, eps=1e-6)),
    ]


class AkState:
    """accelkit's side: parameter, gradient and the two state buffers."""

    def __init__(self, lib, cfg, param, grad):
        self.lib, self.cfg = lib, cfg
        self.p, self.g = param, grad
        self.s1, self.s2 = torch.zeros_like(param), torch.zeros_like(param)
        self.step_no = 0

    def step(self):
        self.step_no += 1
        st = self.lib.ak_optim_step(ctypes.byref(self.cfg), self.step_no, self.p.data_ptr(),
                                    self.g.data_ptr(), self.s1.data_ptr(), self.s2.data_ptr(),
                                    self.p.numel())
        if st != 0:
            raise RuntimeError("ak_optim_step: " + self.lib.ak_last_error().decode())


def torch_state(opt, p, name):
    st = opt.state[p]
    if name.startswith("SGD"):
        return [st["momentum_buffer"]]
    return [st["exp_avg"], st["exp_avg_sq"]]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def bench(lib, n, reps):
    gen = torch.Generator().manual_seed(0)
    param0 = torch.randn(n, generator=gen)
    grad = torch.randn(n, generator=gen) * 1e-2
    rows = []
    for name, cfg, make in optimizers():
        ak = AkState(lib, cfg, param0.clone(), grad)
        ak.step()  # warm-up: first touch of the state pages
        p = param0.clone()
        p.grad = grad
        opt = make(p)
        opt.step()
        ak_ms, t_ms = [], []
        for _ in range(reps):  # alternating, so drifts hit both alike
            t_ms.append(timed(opt.step))
            ak_ms.append(timed(ak.step))
        rows.append((name, statistics.median(ak_ms), statistics.median(t_ms)))
        del ak, opt, p
    return rows


def rel_diff(a, b):
    """max |a - b| relative to the buffer's largest |b| (elementwise relative differences
    blow up where a parameter crosses zero), and the count of elements not bit-equal."""
    d = (a.double() - b.double()).abs().max()
    return float(d / b.double().abs().max().clamp_min(1e-30)), int((a != b).sum())


class TorchLamb:
    """LAMB in torch tensor ops (apex FusedLAMB's adam_w_mode formulas, the trust ratio
    always applied, no gradient clipping): the check's peer, since torch.optim has none."""

    def __init__(self, p, lr, weight_decay, betas=(0.9, 0.999), eps=1e-6):
        self.p, self.lr, self.wd, self.betas, self.eps = p, lr, weight_decay, betas, eps
        self.state = {p: {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}}
        self.t = 0

    @torch.no_grad()
    def step(self):
        self.t += 1
        p, g, (b1, b2) = self.p, self.p.grad, self.betas
        m, v = self.state[p]["exp_avg"], self.state[p]["exp_avg_sq"]
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        u = (m / (1 - b1 ** self.t)) / ((v / (1 - b2 ** self.t)).sqrt() + self.eps)
        u.add_(p, alpha=self.wd)
        pn, un = float(p.norm()), float(u.norm())
        ratio = pn / un if pn > 0 and un > 0 else 1.0
        p.add_(u, alpha=-self.lr * ratio)


def check(lib, n, steps):
    gen = torch.Generator().manual_seed(1)
    param0 = torch.randn(n, generator=gen)
    out = []
    for name, cfg, make in optimizers():
        grad = torch.empty(n)
        ak = AkState(lib, cfg, param0.clone(), grad)
        p = param0.clone()
        opt = make(p)
        for _ in range(steps):
            grad.copy_(torch.randn(n, generator=gen) * 1e-2)
            p.grad = grad.clone()
            opt.step()
            ak.step()
        pairs = [(ak.p, p)] + list(zip([ak.s1, ak.s2], torch_state(opt, p, name)))
        diffs = [rel_diff(a, b) for a, b in pairs]
        out.append((name, max(d[0] for d in diffs), sum(d[1] for d in diffs)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=25_000_000, help="parameters (default 25 M)")
    ap.add_argument("--reps", type=int, default=7, help="timed steps per optimizer (>= 7)")
    ap.add_argument("--check-steps", type=int, default=3, help="steps of the torch check")
    ap.add_argument("--check-n", type=int, default=1_000_003,
                    help="elements of the torch check (default 1 M + 3: a ragged tail)")
    ap.add_argument("--lib", help="path of libaccelkit.so (default: AK_LIBRARY, build/)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    lib, path = load_library(args.lib)

    print(f"optimizer step over {args.n / 1e6:g} M f32 parameters, one thread "
          f"(torch {torch.__version__} foreach=False, accelkit {path})")
    print(f"cpu: {cpu_name()}; {args.reps} alternating steps each after one warm-up, medians")
    print(f"{'optimizer':<14} {'accelkit ms':>12} {'torch ms':>10} {'ratio':>7} "
          f"{'accelkit GB/s':>14}")
    traffic = {"SGD momentum": 20, "Adam": 28, "AdamW": 28, "LAMB (ops)": 40}  # bytes/element
    timed = bench(lib, args.n, args.reps)
    for name, a, t in timed:
        gbs = traffic[name] * args.n / (a * 1e-3) / 1e9
        print(f"{name:<14} {a:12.1f} {t:10.1f} {t / a:6.2f}x {gbs:14.1f}")
    print("ratio = torch / accelkit; LAMB (ops): torch tensor ops (TorchLamb), not torch.optim")

    print(f"\nagreement with torch after {args.check_steps} steps over {args.check_n} elements "
          "(parameters and states)")
    print(f"{'optimizer':<14} {'max rel diff':>13} {'elements differing':>19}")
    worst = 0.0
    for name, rd, ndiff in check(lib, args.check_n, args.check_steps):
        worst = max(worst, rd)
        print(f"{name:<14} {rd:13.3g} {ndiff:19d}")
    record(path, args.n, timed, traffic)
    return 0 if worst < 1e-5 else 1


def record(lib_path, n, timed, traffic):
    """The medians as train.optim lines (docs/report.md), torch as the peer, to
    $AK_BENCH_OUT/train.jsonl (default bench-results/; "none": nothing)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from results import DEFAULT_OUT, Writer
    ak = os.environ.get("AK_BIN") or str(Path(lib_path).parent / "ak")
    w = Writer(os.environ.get("AK_BENCH_OUT", DEFAULT_OUT), "train", ak)
    for name, a, t in timed:
        params = {"optimizer": name, "params": n, "threads": 1}
        w.add("train.optim", params, {"step_ms": round(a, 2),
                                      "gbps": round(traffic[name] * n / (a * 1e-3) / 1e9, 1)})
        w.add("train.optim", params, {"step_ms": round(t, 2)}, peer="PyTorch",
              peer_version=f"{torch.__version__} foreach=False")


if __name__ == "__main__":
    sys.exit(main())
