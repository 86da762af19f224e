#!/usr/bin/python3
"""Writes the `ak report` test fixtures, tests/report/fixtures/{run-a,run-b}/*.jsonl:
results lines in the envelope of docs/report.md with figures taken from docs/results.md
(SGEMM in-process and stand-alone, ak_linear, the thread pool, allreduce over TCP and
shared memory, ONNX inference and its per-operator profile, LLM prefill/decode and
speculative decoding, the training runs against DDP with their breakdown and overhead, the
fused optimizers, a training timeline excerpt, the planner's validation against published runs) and from `ak plan
--json` for megatron-1t on A100s. run-b is a
second commit on the same machine with a few figures changed, for the comparison.
Run once by hand when the envelope changes: tests/report/make_fixtures.py"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent / "fixtures"
MACHINE = {"cpu": "AMD EPYC", "cores": 2, "isa": "avx512", "fma_peak_gflops_per_core": 117.8,
           "memory_gbps": 33.2}
STAMP = {"run-a": "2026-11-28T12:00:00Z", "run-b": "2026-11-28T18:00:00Z"}
COMMIT = {"run-a": "df1da79e42f3", "run-b": "5c0ffee12345"}
PEERS = {"OpenBLAS": "0.3.21", "BLIS": "0.9.0", "Open MPI": "4.1.4", "Gloo": "torch 1.13.0",
         "iperf3": "3.12", "ONNX Runtime": "1.30.0", "PyTorch": "1.13.0",
         "llama.cpp": "node-llama-cpp 3.22.1", "PyTorch DDP": "torch 1.13.0 gloo",
         "published": "Megatron-LM Table 1"}


def line(run, benchmark, params, figures, peer=None):
    return {"schema": "accelkit.bench/1", "benchmark": benchmark, "machine": MACHINE,
            "accelkit": {"version": "0.1.0", "commit": COMMIT[run]},
            "peer": {"name": peer, "version": PEERS[peer]} if peer else None,
            "params": params, "figures": figures, "timestamp": STAMP[run]}


def sgemm(run, scale):
    out = []
    rows1 = [((1024, 1024, 1024), 105.8, 99.3, 86.1), ((128, 768, 768), 104.3, 96.1, 64.6),
             ((128, 3072, 768), 89.2, 89.1, 43.7), ((196, 256, 2304), 102.1, 95.6, 95.1),
             ((49, 512, 4608), 90.0, 75.3, 64.1)]
    rows2 = [((1024, 1024, 1024), 181.2, 187.0, 177.6), ((128, 3072, 768), 166.7, 175.9, 86.6)]
    for threads, rows in ((1, rows1), (2, rows2)):
        for (m, n, k), ak, ob, bl in rows:
            for peer, g in ((None, round(ak * scale, 1)), ("OpenBLAS", ob), ("BLIS", bl)):
                fig = {"gflops": g, "pct_peak": round(100 * g / (117.8 * threads), 1)}
                if peer:
                    fig["max_rel_diff"] = 2.4e-7
                out.append(line(run, "kernels.sgemm", {"m": m, "n": n, "k": k, "threads": threads}, fig, peer))
    for name, gbps in (("f32 add a+b->c", 49.9), ("f32 axpy", 61.2), ("f16 sum", 32.0)):
        out.append(line(run, "kernels.reductions", {"kernel": name, "bytes": 16777216},
                        {"gbps": gbps, "memcpy_gbps": 33.2, "pct_memcpy": round(100 * gbps / 33.2, 1)}))
    # bench/kernels/vs_peers.sh, the stand-alone peer harness
    for peer, g in ((None, round(104.1 * scale, 1)), ("OpenBLAS", 99.0), ("BLIS", 85.7)):
        out.append(line(run, "kernels.sgemm", {"m": 1024, "n": 1024, "k": 1024, "threads": 1,
                                               "harness": "standalone"}, {"gflops": g}, peer))
    # ak bench linear: T = 1 against the read bandwidth, T = 16 against the FMA peak
    for t, us, gbps, gflops, pct in (("q8_0", 61.4, 27.2, 51.2, 88.1), ("q4_k_m", 39.0, 22.6, 80.6, 73.2)):
        out.append(line(run, "kernels.linear", {"type": t, "n": 2048, "k": 768, "tokens": 1, "threads": 1},
                        {"us": us, "gbps": gbps, "gflops": gflops, "pct_read_bw": pct}))
    for t, us, gflops, pct in (("q8_0", 410.2, 122.7, 104.2), ("q4_k_m", 520.9, 96.6, 82.0)):
        out.append(line(run, "kernels.linear", {"type": t, "n": 2048, "k": 768, "tokens": 16, "threads": 1},
                        {"us": us, "gbps": 4.1, "gflops": gflops, "pct_fma_peak": pct}))
    out.append(line(run, "core.pool", {"threads": 2},
                    {"wake_spinning_p50_us": 0.1, "wake_spinning_p99_us": 0.3, "wake_sleeping_p50_us": 812.4,
                     "wake_sleeping_p99_us": 4900.0, "empty_parallel_for_us": 0.15}))
    return out


def comm(run, scale):
    out = []
    # bytes -> (time_us, busbw) per engine, TCP loopback, 2 ranks
    tcp = {None: [(8, 6.89, 0.0012), (4096, 7.80, 0.525), (65536, 27.7, 2.37), (1048576, 331, 3.17),
                  (16777216, 6553, 2.56), (67108864, 25910, 2.59)],
           "Open MPI": [(8, 8.3, 0.001), (4096, 18.5, 0.221), (65536, 38.2, 1.72), (1048576, 259, 4.05),
                        (16777216, 10356, 1.62), (67108864, 61568, 1.09)],
           "Gloo": [(8, 779, 0.00001), (4096, 1542, 0.0027), (65536, 792, 0.083), (1048576, 1719, 0.61),
                    (16777216, 10824, 1.55), (67108864, 46282, 1.45)]}
    shm = {None: [(8, 0.17, 0.047), (4096, 0.85, 4.82), (65536, 9.8, 6.69), (1048576, 85, 12.3),
                  (16777216, 2333, 7.19), (67108864, 9987, 6.72)],
           "Open MPI": [(8, 0.30, 0.027), (4096, 1.2, 3.41), (65536, 18.6, 3.52), (1048576, 152, 6.9),
                        (16777216, 6684, 2.51), (67108864, 39946, 1.68)]}
    for transport, table in (("tcp", tcp), ("shm", shm)):
        for peer, rows in table.items():
            for b, t, bw in rows:
                if peer is None:
                    t, bw = round(t / scale, 2), round(bw * scale, 4)
                out.append(line(run, "comm.allreduce", {"bytes": b, "ranks": 2, "dtype": "f32", "op": "sum",
                                                        "transport": transport}, {"time_us": t, "busbw": bw}, peer))
    out.append(line(run, "comm.bound", {"transport": "tcp", "streams": 1}, {"gbps": 5.62}, "iperf3"))
    # bench/comm/coll_algos.sh: each algorithm forced and auto, time only, 4 ranks
    for algo, times in (("ring", (126, 157, 1052)), ("tree", (10.9, 55.2, 653)), ("auto", (9.5, 54.6, 766))):
        for b, t in zip((8, 65536, 1048576), times):
            out.append(line(run, "comm.broadcast", {"bytes": b, "ranks": 4, "dtype": "f32", "op": "sum",
                                                    "transport": "tcp", "algo": algo, "rounds": 9},
                            {"time_us": round(t / scale, 2)}))
    return out


def infer(run):
    out = []
    for model, ak, ort, pt in (("resnet50", 40.21, 40.76, 71.98), ("mobilenet_v2", 4.69, 5.20, 25.36),
                               ("bert", 141.67, 148.40, 576.70)):
        for peer, ms in ((None, ak), ("ONNX Runtime", ort), ("PyTorch", pt)):
            out.append(line(run, "infer.latency", {"model": model, "threads": 2, "batch": 1}, {"p50_ms": ms}, peer))
    if run == "run-a":  # one model on 1 thread too: the plot keeps it apart from 2 threads
        for peer, ms in ((None, 69.78), ("ONNX Runtime", 75.73)):
            out.append(line(run, "infer.latency", {"model": "resnet50", "threads": 1, "batch": 1}, {"p50_ms": ms}, peer))
    # AK_PROFILE=1 ak bench beside ORT's profiler (bench/infer/profile_vs_ort.py)
    for op, ak, ort in (("Conv", 29.8, 31.2), ("Add", 2.1, 2.6), ("Relu", 1.2, 0.9), ("MaxPool", 0.8, 0.7),
                        ("Gemm", 0.3, 0.3)):
        out.append(line(run, "infer.profile", {"model": "resnet50", "threads": 2, "op": op}, {"ms": ak}))
        out.append(line(run, "infer.profile", {"model": "resnet50", "threads": 2, "op": op}, {"ms": ort}, "ONNX Runtime"))
    return out


def llm(run):
    out = []
    # type, threads, llama.cpp pp/tg, accelkit pp/tg
    rows = [("q4_k_m", 1, 705, 255, 840, 273), ("q6_k", 1, 344, 162, 767, 203),
            ("q4_k_m", 2, 1348, 341, 984, 400), ("q6_k", 2, 678, 244, 1058, 353),
            ("q8_0", 1, 620, 212, 601.4, 230.5), ("f16", 1, 560, 118, 580.5, 131.4)]
    for t, thr, lpp, ltg, app, atg in rows:
        p = {"type": t, "threads": thr, "model": "llama-134m"}
        out.append(line(run, "llm.prefill", dict(p, tokens=128), {"tokens_per_s": app, "pct_fma_peak": round(app / (9.5 * thr), 1)}))
        out.append(line(run, "llm.prefill", dict(p, tokens=128), {"tokens_per_s": lpp}, "llama.cpp"))
        out.append(line(run, "llm.decode", dict(p, tokens=64), {"tokens_per_s": atg, "pct_bandwidth": round(atg / (4.1 * thr), 1)}))
        out.append(line(run, "llm.decode", dict(p, tokens=64), {"tokens_per_s": ltg}, "llama.cpp"))
    for c, ttft, itl in ((1, 21.4, 4.1), (4, 48.0, 7.9), (16, 161.5, 22.6)):
        out.append(line(run, "llm.server", {"concurrency": c, "model": "llama-134m-q8_0", "max_tokens": 32},
                        {"ttft_p50_ms": ttft, "ttft_p90_ms": round(ttft * 1.4, 1), "ttft_p99_ms": round(ttft * 2.1, 1),
                         "itl_p50_ms": itl, "itl_p90_ms": round(itl * 1.3, 1), "itl_p99_ms": round(itl * 1.9, 1),
                         "tokens_per_s": round(c * 1000 / itl, 1)}))
    out.append(line(run, "llm.speculative", {"model": "llama-134m-f16.gguf", "type": "f16",
                                             "draft": "llama-134m-draft-q4_0.gguf", "gamma": 4,
                                             "threads": 2, "tokens": 128},
                    {"tokens_per_s": 227.0, "plain_tokens_per_s": 137.6, "speedup": 1.65,
                     "drafts_proposed": 545, "drafts_accepted": 500}))
    return out


def train(run):
    out = []
    for case, ranks, ak_ms, ak_sps, ddp_ms, ddp_sps in (("ctr", 4, 905, 282.9, 3249, 78.8),
                                                       ("resnet", 4, 2350, 108.9, 2810, 91.1)):
        p = {"case": case, "ranks": ranks, "batch_per_rank": 64}
        out.append(line(run, "train.step", p, {"step_ms": ak_ms, "samples_per_s": ak_sps,
                        "breakdown": {"forward_ms": round(ak_ms * 0.22), "backward_ms": round(ak_ms * 0.41),
                                      "step_ms": round(ak_ms * 0.37)},
                        "runtime_overhead_pct": 0.8, "steady_overhead_pct": 0.37}))
        out.append(line(run, "train.step", p, {"step_ms": ddp_ms, "samples_per_s": ddp_sps,
                        "breakdown": {"forward_ms": round(ddp_ms * 0.1), "backward_ms": round(ddp_ms * 0.87),
                                      "step_ms": round(ddp_ms * 0.03)}}, "PyTorch DDP"))
    # bench/train/timeline_excerpt.py on a 2-rank CTR run's HOROVOD_TIMELINE (a sample of it)
    events = [('negotiate', 'allreduce.top.4.bias', 0.0, 1.879), ('communicate', 'allreduce.top.4.bias', 1.884, 0.003),
              ('fusion_copy_out', 'allreduce.top.4.weight', 1.887, 0.002), ('negotiate', 'allreduce.top.2.weight', 49.284, 3.624),
              ('negotiate', 'allreduce.tables.7.weight', 58.706, 13.544), ('fusion_copy_in', 'allreduce.top.0.bias', 72.256, 0.801),
              ('communicate', 'allreduce.tables.7.weight', 73.056, 4.426), ('wire', 'allreduce 68352 x f32 (rank 0/2)', 75.475, 1.975),
              ('communicate', 'allreduce.top.0.weight', 77.897, 3.961), ('negotiate', 'allreduce.bottom.0.weight', 86.934, 25.976),
              ('communicate', 'allreduce.tables.3.weight', 90.542, 8.317), ('wire', 'allreduce 32512 x f32 (rank 0/2)', 119.89, 1.108),
              ('fusion_copy_out', 'allreduce.bottom.0.bias', 146.739, 0.003)]
    for i, (lane, name, start, dur) in enumerate(events):
        out.append(line(run, "train.timeline", {"case": "ctr", "variant": "ak", "event": i, "lane": lane, "name": name},
                        {"start_ms": start, "dur_ms": dur}))
    for name, ak_ms, torch_ms in (("SGD momentum", 11.0, 70.1), ("Adam", 14.5, 132.7), ("AdamW", 17.2, 143.4),
                                  ("LAMB (ops)", 33.8, 338.3)):
        p = {"optimizer": name, "params": 25000000, "threads": 1}
        out.append(line(run, "train.optim", p, {"step_ms": ak_ms, "gbps": round(28 * 25e6 / (ak_ms * 1e-3) / 1e9, 1)}))
        out.append(line(run, "train.optim", p, {"step_ms": torch_ms}, "PyTorch"))
    return out


def plan(run):
    out = []
    plans = [("tp=8 pp=16 dp=24 vp=8 mbs=1 sp zero=1", 65.70, 0.6122, 70309370368, 0.901, 1.203),
             ("tp=8 pp=16 dp=24 vp=4 mbs=1 sp zero=1", 66.01, 0.6094, 73666451968, 1.802, 0.610),
             ("tp=8 pp=32 dp=12 vp=4 mbs=1 sp zero=1", 67.32, 0.5975, 52431929344, 2.112, 0.640)]
    for rank, (desc, t, mfu, mem, bubble, p2p) in enumerate(plans, 1):
        out.append(line(run, "plan.best", {"model": "megatron-1t", "cluster": "a100-80gb", "devices": 3072,
                                           "gbs": 3072, "rank": rank, "plan": desc},
                        {"time_per_iter_s": t, "mfu": mfu, "memory_bytes_per_device": mem,
                         "breakdown": {"gemm_s": 57.868, "attention_s": 0.749, "elementwise_s": 0.537,
                                       "tp_comm_s": 3.590, "pp_bubble_s": bubble, "pp_p2p_s": p2p,
                                       "dp_comm_s": 0.350, "zero_comm_s": 0.502, "optimizer_s": 0.006},
                         "memory": {"weights_bytes": 16070092800, "gradients_bytes": 16070092800,
                                    "optimizer_bytes": 4017523200, "activations_bytes": mem - 38305099776 + 2147483648,
                                    "buffers_bytes": 2147483648}}))
    return out


def validation(run):
    """bench/plan/validate_published.py's lines: Megatron-LM Table 1, predicted and published"""
    out = []
    for model, plan_, pred, pub in (("megatron-1.7b", "t=1 p=1 d=32 vp=1 mbs=16", 140.9, 137),
                                    ("megatron-76b", "t=8 p=4 d=32 vp=5 mbs=2", 152.7, 140),
                                    ("megatron-1t", "t=8 p=64 d=6 vp=2 mbs=1", 169.2, 163)):
        p = {"model": model, "plan": plan_, "source": "Megatron-LM Table 1", "metric": "TFLOP/s per GPU"}
        out.append(line(run, "plan.validation", p, {"value": pred, "ratio_to_published": round(pred / pub, 4)}))
        out.append(line(run, "plan.validation", p, {"value": pub}, "published"))
    return out


def write(run, name, lines):
    d = HERE / run
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"{name}.jsonl", "w") as f:
        for x in lines:
            f.write(json.dumps(x, separators=(",", ":")) + "\n")


write("run-a", "kernels", sgemm("run-a", 1.0))
write("run-a", "comm", comm("run-a", 1.0))
write("run-a", "infer", infer("run-a"))
write("run-a", "llm", llm("run-a"))
write("run-a", "train", train("run-a"))
write("run-a", "plan", plan("run-a") + validation("run-a"))
# run-b: a later commit, kernels and collectives only (its other sections are empty)
write("run-b", "kernels", sgemm("run-b", 1.08))
write("run-b", "comm", comm("run-b", 0.9))
