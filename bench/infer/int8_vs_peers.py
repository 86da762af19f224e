#!/usr/bin/python3
"""INT8 inference: accelkit against ONNX Runtime 1.30 on the same quantized file, and
against accelkit's own float32, batch 1, at each thread count; with the accuracy of the
quantized model against the float one. Run by `bench/infer/vs_peers.sh --int8`.

    int8_vs_peers.py [--build DIR] [--rounds 3] [--threads 1,2] [--inputs 500] [MODEL ...]

Models (default: resnet50 bert):
- resnet50: torchvision's ResNet-50 with seeded random weights (no pretrained weights can
  be downloaded here; no labelled image set ships in Debian or npm) and random BatchNorm
  statistics. A random network's pooled features hardly vary between inputs, so its
  float32 predictions fall on very few classes (the line says how many) and top-1
  agreement then says little; a classifier fitted to spread them (a random projection of
  the standardized features) was tried and amplifies the quantization error far beyond
  what a trained network sees (cosine near 0), so it is not used. The logits cosine is
  the figure that carries over. Exported at opset 13, then `ak quantize
  --calibrate --per-channel` (static QDQ, MinMax) on 16 calibration images. The images
  are "ImageNet-like" only in their statistics: smooth random colour fields (14×14 noise
  upsampled to 224×224) normalized with ImageNet's mean and deviation. Accuracy: top-1
  agreement of the INT8 file with float32 on --inputs other such images (and how many
  distinct classes float32 predicted, so a degenerate model shows), logits cosine.
- bert: the BERT-base encoder of bench/infer/bert.py (sequence 128), `ak quantize
  --dynamic --per-channel` (DynamicQuantizeLinear + MatMulInteger). Accuracy: cosine of
  the final hidden states against float32 on 16 random token sequences.
Timing: rounds of (accelkit float32, accelkit INT8, ONNX Runtime INT8) alternating, 50 runs
after 5 warm-ups each (`ak bench`, bench/peers/ort_bench.js); medians of the p50s. Hold
the CPU lock around the whole run (flock /tmp/ak-cpu.lock) on a shared machine. Medians
also go to $AK_BENCH_OUT/infer.jsonl as infer.latency lines (the INT8 file as model
"NAME-int8", params.precision int8)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from results import Writer  # noqa: E402

ORT_VERSION = "1.30.0"


def ort_modules():
    """onnxruntime-node as vs_peers.sh installs it (or the checkout's)."""
    for d in (os.path.join(ROOT, ".cache", "peers", "ortpeer", "node_modules"),
              os.path.join(ROOT, "node_modules")):
        if os.path.isdir(os.path.join(d, "onnxruntime-node")):
            return d
    sys.exit("int8_vs_peers: onnxruntime-node is missing (bench/infer/vs_peers.sh installs it)")


def image_like(rng, n):
    """n smooth random colour fields [1, 3, 224, 224], ImageNet-normalized."""
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
    for _ in range(n):
        small = rng.uniform(0, 1, (1, 3, 14, 14)).astype(np.float32)
        yield ((np.kron(small, np.ones((1, 1, 16, 16), np.float32)) - mean) / std).astype(np.float32)


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit("int8_vs_peers: %s failed:\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p.stdout


# ---- models -------------------------------------------------------------------------------

def export_resnet50(path):
    import torch
    import torchvision
    sys.path.insert(0, os.path.join(ROOT, "tests", "infer"))
    from torch_init import randomize_batch_norms
    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval()
    randomize_batch_norms(model, 1)
    torch.onnx.export(model, (torch.zeros(1, 3, 224, 224),), path, opset_version=13,
                      input_names=["input"], output_names=["output"])


def export_bert(path):
    run(["/usr/bin/python3", os.path.join(ROOT, "bench", "infer", "bert.py"), "1", "--export", path])


def prepare(model, work, ak):
    """(float path, int8 path), written once into work/."""
    fp32, int8 = os.path.join(work, model + ".onnx"), os.path.join(work, model + "_int8.onnx")
    if os.path.exists(int8):
        return fp32, int8
    if model == "resnet50":
        export_resnet50(fp32)
        cal = os.path.join(work, "resnet50_calibration")
        for i, x in enumerate(image_like(np.random.default_rng(5), 16)):
            os.makedirs(os.path.join(cal, str(i)), exist_ok=True)
            np.save(os.path.join(cal, str(i), "input.npy"), x)
        quantize = ["--calibrate", cal, "--per-channel"]
    else:
        export_bert(fp32)
        quantize = ["--dynamic", "--per-channel"]
    print(run([ak, "quantize", fp32, int8] + quantize).strip())
    return fp32, int8


# ---- accuracy -----------------------------------------------------------------------------

def accuracy(model, fp32, int8, n_inputs):
    os.environ.setdefault("AK_LIBRARY", os.path.join(args.build, "libaccelkit.so"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import accelkit.onnxruntime as akort
    f, q = akort.InferenceSession(fp32), akort.InferenceSession(int8)
    rng = np.random.default_rng(11)
    if model == "resnet50":
        feeds = ({"input": x} for x in image_like(rng, n_inputs))
    else:
        n_inputs = 16
        feeds = ({"input_ids": rng.integers(0, 30522, (1, 128)).astype(np.int64),
                  "attention_mask": np.ones((1, 128), np.int64)} for _ in range(n_inputs))
    agree, classes, cosines = 0, set(), []
    for feed in feeds:
        a, b = f.run(None, feed)[0].ravel(), q.run(None, feed)[0].ravel()
        agree += int(a.argmax() == b.argmax())
        classes.add(int(a.argmax()))
        cosines.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
    out = {"inputs": n_inputs, "cosine_min": min(cosines), "cosine_median": statistics.median(cosines)}
    if model == "resnet50":
        out.update(top1_agreement=agree / n_inputs, float_classes=len(classes))
    return out


# ---- timing -------------------------------------------------------------------------------

def p50_ak(ak, path, threads):
    out = run([ak, "bench", path, "-t", str(threads), "-n", "50", "-w", "5", "--out", "none", "--json"])
    return json.loads(out)["p50_ms"]


def p50_ort(path, threads, modules):
    out = run(["node", os.path.join(ROOT, "bench", "peers", "ort_bench.js"), path, str(threads), "50"],
              env=dict(os.environ, NODE_PATH=modules))
    return json.loads(out)["p50_ms"]


def main():
    global args
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--inputs", type=int, default=500, help="ResNet-50 agreement inputs")
    ap.add_argument("models", nargs="*", default=["resnet50", "bert"])
    args = ap.parse_args()
    ak = os.path.join(args.build, "ak")
    modules = ort_modules()
    work = os.path.join(args.build, "models", "int8")
    os.makedirs(work, exist_ok=True)
    writer = Writer(os.environ.get("AK_BENCH_OUT", os.path.join(ROOT, "bench-results")), "infer", ak)
    threads = [int(t) for t in args.threads.split(",")]
    print("batch 1, %d alternating rounds of 50 runs after 5 warm-ups; median p50 ms" % args.rounds)
    print("%-9s %7s %10s %10s %10s %12s %9s" % ("model", "threads", "ak fp32", "ak int8",
                                                  "ort int8", "fp32/int8", "ak/ort"))
    for model in args.models:
        if model not in ("resnet50", "bert"):
            sys.exit("int8_vs_peers: model '%s' (resnet50 and bert are prepared here)" % model)
        fp32, int8 = prepare(model, work, ak)
        acc = accuracy(model, fp32, int8, args.inputs)
        for t in threads:
            runs = {"fp32": [], "int8": [], "ort": []}
            for _ in range(args.rounds):
                runs["fp32"].append(p50_ak(ak, fp32, t))
                runs["int8"].append(p50_ak(ak, int8, t))
                runs["ort"].append(p50_ort(int8, t, modules))
            med = {k: statistics.median(v) for k, v in runs.items()}
            print("%-9s %7d %10.2f %10.2f %10.2f %11.2fx %9.3f" % (
                model, t, med["fp32"], med["int8"], med["ort"], med["fp32"] / med["int8"],
                med["int8"] / med["ort"]))
            print("%-9s %7s rounds: %s" % ("", "", "  ".join(
                "%s %s" % (k, " ".join("%.2f" % v for v in vs)) for k, vs in runs.items())))
            # the INT8 file as a model of its own ("resnet50-int8"): the report's latency
            # plot has a category per model and a series per engine
            fp, q8 = ({"model": name, "threads": t, "batch": 1, "precision": prec}
                      for name, prec in ((model, "float32"), (model + "-int8", "int8")))
            writer.add("infer.latency", fp, {"p50_ms": med["fp32"]})
            writer.add("infer.latency", q8, {"p50_ms": med["int8"]})
            writer.add("infer.latency", q8, {"p50_ms": med["ort"]}, peer="ONNX Runtime",
                       peer_version=ORT_VERSION)
        print("%-9s accuracy of INT8 against float32: %s" % (model, json.dumps(acc)))


if __name__ == "__main__":
    main()
