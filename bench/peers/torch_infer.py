"""ONNX inference peer harness: PyTorch eager (Debian python3-torch, the stock framework)
timing a torchvision model at batch 1, run by bench/infer/vs_peers.sh:

    /usr/bin/python3 torch_infer.py MODEL [THREADS=1]      (MODEL: resnet50, mobilenet_v2, ...)

Weights from torch.manual_seed(0) (bench/infer/export.py exports the same model to ONNX);
a 1×3×224×224 input; 3 untimed runs, then 20 timed ones under no_grad. Prints one JSON
line with the median (p50) latency in ms."""
import json
import sys
import time

import torch
import torchvision


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: torch_infer.py MODEL [THREADS]")
    name = sys.argv[1]
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    model = getattr(torchvision.models, name)().eval()
    x = torch.randn(1, 3, 224, 224)
    times = []
    with torch.no_grad():
        for _ in range(3):
            model(x)
        for _ in range(20):
            t0 = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t0)
    times.sort()
    print(json.dumps({"peer": f"pytorch {torch.__version__} eager", "model": name,
                      "threads": threads, "p50_ms": round(times[len(times) // 2] * 1e3, 3)}))


if __name__ == "__main__":
    main()
