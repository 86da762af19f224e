"""A BERT-base encoder written here in PyTorch (12 layers, hidden 768, 12 heads, FFN 3072,
GELU, post-LayerNorm, vocabulary 30522): PyTorch eager latency at sequence 128, and its
export to ONNX so accelkit and ONNX Runtime time the same weights.
Run: /usr/bin/python3 bert.py [threads] [--seq 128] [--export out.onnx] [--opset 13]"""
import math
import sys
import time

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, h=768, heads=12, ffn=3072):
        super().__init__()
        self.heads, self.dh = heads, h // heads
        self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(h, eps=1e-12), nn.LayerNorm(h, eps=1e-12)
        self.up, self.down = nn.Linear(h, ffn), nn.Linear(ffn, h)

    def split(self, x):  # [b, s, h] -> [b, heads, s, dh]
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.dh).transpose(1, 2)

    def forward(self, x, bias):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh) + bias, dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(x.shape)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))


class Bert(nn.Module):
    def __init__(self, vocab=30522, h=768, layers=12, max_pos=512):
        super().__init__()
        self.word, self.pos, self.token_type = nn.Embedding(vocab, h), nn.Embedding(max_pos, h), nn.Embedding(2, h)
        self.ln = nn.LayerNorm(h, eps=1e-12)
        self.layers = nn.ModuleList(Layer(h) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.ln(self.word(input_ids) + self.pos(pos) + self.token_type(torch.zeros_like(input_ids)))
        bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x


def main():
    args = sys.argv[1:]
    threads = int(args[0]) if args and args[0].isdigit() else 1
    seq = int(args[args.index("--seq") + 1]) if "--seq" in args else 128
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    m = Bert().eval()
    ids = torch.randint(0, 30522, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    if "--export" in args:
        opset = int(args[args.index("--opset") + 1]) if "--opset" in args else 13
        torch.onnx.export(m, (ids, mask), args[args.index("--export") + 1], opset_version=opset,
                          input_names=["input_ids", "attention_mask"], output_names=["hidden"])
    with torch.no_grad():
        for _ in range(3):
            m(ids, mask)
        ts = []
        for _ in range(20):
            t = time.perf_counter()
            m(ids, mask)
            ts.append(time.perf_counter() - t)
    ts.sort()
    print(f'{{"peer": "pytorch {torch.__version__} eager", "model": "bert-base-{seq}", '
          f'"threads": {threads}, "p50_ms": {ts[10] * 1e3:.3f}}}')


if __name__ == "__main__":
    main()
