"""Measures the planner's CPU efficiency terms on this host, with every rank running at
once (so each gets its share of the cores, as in training), and writes them into a
cluster description from `ak sysinfo --cluster-json`:

    gemm_efficiency         fp32 torch GEMMs of the model's layer shapes (one micro-batch
                            of one sequence) / the rank's FMA peak (peak_tflops)
    elementwise_efficiency  a large torch add (3 x 4-byte values per element) / memory_bw_gbs
    kernel_overhead_us      a torch op on 16 values (dispatch cost per op)

    ak launch -np 4 python3 -m accelkit.torch.parallel.calibrate \\
        --cluster cluster.json --model m.json --out calibrated.json

Each figure is a rank's mean over one second of calls, all ranks at once, then the
median over ranks.
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist


SECONDS = 1.0  # per measurement: long enough that the ranks share the cores throughout


def _mean_time(fn):
    """Seconds per call of fn, called for SECONDS after every rank is ready: the mean,
    not the median (a rank descheduled for another rank's turn is what training sees)."""
    fn()
    dist.barrier()
    calls, t0 = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= SECONDS:
            return elapsed / calls


def _gemm_rate(spec):
    """FLOP/s of the forward GEMMs of one layer on one sequence (tp = 1)."""
    s, h, f = spec.seq_len, spec.hidden, spec.ffn_hidden
    qkv = h + 2 * spec.kv_heads * spec.head_dim
    shapes = [(s, h, qkv), (s, h, h), (s, h, f * (2 if spec.gated else 1)), (s, f, h)]
    mats = [(torch.randn(m, k), torch.randn(k, n)) for m, k, n in shapes]
    flops = sum(2.0 * m * k * n for m, k, n in shapes)
    t = _mean_time(lambda: [a.matmul(b) for a, b in mats])
    return flops / t


def _elementwise_rate():
    a, b = torch.randn(1 << 22), torch.randn(1 << 22)
    out = torch.empty_like(a)
    t = _mean_time(lambda: torch.add(a, b, out=out))
    return 3 * 4 * a.numel() / t


def _op_overhead():
    a, b = torch.randn(16), torch.randn(16)

    def many():
        for _ in range(200):
            torch.add(a, b)
    return _mean_time(many) / 200


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m accelkit.torch.parallel.calibrate",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", required=True, help="ak sysinfo --cluster-json output")
    ap.add_argument("--model", required=True, help="the planner's model JSON")
    ap.add_argument("--out", required=True, help="the calibrated cluster JSON")
    args = ap.parse_args(argv)
    import accelkit.torch.distributed  # noqa: F401
    from .model import ModelSpec, load_json
    torch.set_num_threads(1)
    dist.init_process_group("accelkit")
    cluster = load_json(args.cluster)
    spec = ModelSpec(load_json(args.model))
    dist.barrier()
    mine = torch.tensor([_gemm_rate(spec), _elementwise_rate(), _op_overhead()],
                        dtype=torch.float64)
    every = torch.empty(dist.get_world_size() * 3, dtype=torch.float64)
    dist.all_gather_into_tensor(every, mine)
    if dist.get_rank() == 0:
        rows = every.view(-1, 3).tolist()
        gemm, elem, overhead = (statistics.median(r[k] for r in rows) for k in range(3))
        cluster["gemm_efficiency"] = round(min(1.0, gemm / (cluster["peak_tflops"] * 1e12)), 4)
        cluster["elementwise_efficiency"] = round(
            min(1.0, elem / (cluster["memory_bw_gbs"] * 1e9)), 4)
        cluster["kernel_overhead_us"] = round(overhead * 1e6, 3)
        cluster["description"] = (cluster.get("description", "") + "; calibrated by "
                                  "accelkit.torch.parallel.calibrate on " + spec.name)
        with open(args.out, "w") as f:
            json.dump(cluster, f, indent=1)
        print(f"calibrated ({dist.get_world_size()} ranks at once): GEMM "
              f"{gemm / 1e9:.1f} GFLOP/s per rank = {cluster['gemm_efficiency']:.3f} of peak, "
              f"elementwise {elem / 1e9:.2f} GB/s = {cluster['elementwise_efficiency']:.3f} "
              f"of memory_bw, {cluster['kernel_overhead_us']:.1f} us per op -> {args.out}",
              flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
