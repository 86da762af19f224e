"""Exports a model with Debian's PyTorch to ONNX together with a seeded input and
PyTorch's own output, so `ak compare` checks accelkit against PyTorch on the same weights.
Run: /usr/bin/python3 export.py resnet50|mobilenet_v2|resnet18|bert OUTDIR [--seq 128]
Writes OUTDIR/NAME.onnx, OUTDIR/NAME/inputs/<input>.npy, OUTDIR/NAME/reference/<output>.npy"""
import os
import sys

import numpy as np
import torch


def build(name, seq):
    torch.manual_seed(0)
    if name == "bert":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bert import Bert
        ids = torch.randint(0, 30522, (1, seq))
        return Bert().eval(), {"input_ids": ids, "attention_mask": torch.ones(1, seq, dtype=torch.int64)}
    import torchvision
    return getattr(torchvision.models, name)().eval(), {"input": torch.randn(1, 3, 224, 224)}


def main():
    name, out = sys.argv[1], sys.argv[2]
    seq = int(sys.argv[sys.argv.index("--seq") + 1]) if "--seq" in sys.argv else 128
    model, feeds = build(name, seq)
    os.makedirs(f"{out}/{name}/inputs", exist_ok=True)
    os.makedirs(f"{out}/{name}/reference", exist_ok=True)
    out_name = "hidden" if name == "bert" else "output"
    torch.onnx.export(model, tuple(feeds.values()), f"{out}/{name}.onnx", opset_version=13,
                      input_names=list(feeds), output_names=[out_name])
    with torch.no_grad():
        ref = model(*feeds.values())
    for k, v in feeds.items():
        np.save(f"{out}/{name}/inputs/{k}.npy", v.numpy())
    np.save(f"{out}/{name}/reference/{out_name}.npy", ref.numpy())
    print(f"{out}/{name}.onnx: inputs {list(feeds)}, reference {out_name} {tuple(ref.shape)}")


if __name__ == "__main__":
    main()
