"""A Hugging-Face-style BERT written in plain PyTorch (embeddings, self-attention with the
(1 - mask) * -10000 attention mask, LayerNorm, erf GELU, pooler), for the attention fusion's
end-to-end test (test_attention_ort.py), bench/infer/bert_fused.py and the PyTorch front
end's test (tests/python/test_torch_compile.py). `norm` picks nn.LayerNorm
(LayerNormalization at opset 17) or a hand-written TF-style LayerNorm; `as_dict` returns
Hugging Face's output dict instead of a tuple."""
import math

import torch


class TFLayerNorm(torch.nn.Module):
    """LayerNorm written out: what older BERT ports export as ReduceMean/Sub/Pow/Sqrt/Div."""

    def __init__(self, hidden, eps=1e-12):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden))
        self.bias = torch.nn.Parameter(torch.zeros(hidden))
        self.eps = eps

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight * x + self.bias


def make_norm(kind, hidden):
    return torch.nn.LayerNorm(hidden, eps=1e-12) if kind == "torch" else TFLayerNorm(hidden)


class SelfAttention(torch.nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.n, self.d = heads, hidden // heads
        self.query = torch.nn.Linear(hidden, hidden)
        self.key = torch.nn.Linear(hidden, hidden)
        self.value = torch.nn.Linear(hidden, hidden)

    def split(self, x):
        return x.view(x.size(0), x.size(1), self.n, self.d).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + ext_mask
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size(0), ctx.size(1), self.n * self.d)


class Layer(torch.nn.Module):
    def __init__(self, hidden, heads, inter, norm):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.attn_out = torch.nn.Linear(hidden, hidden)
        self.attn_norm = make_norm(norm, hidden)
        self.inter = torch.nn.Linear(hidden, inter)
        self.out = torch.nn.Linear(inter, hidden)
        self.out_norm = make_norm(norm, hidden)

    def forward(self, x, ext_mask):
        x = self.attn_norm(x + self.attn_out(self.attention(x, ext_mask)))
        h = torch.nn.functional.gelu(self.inter(x))
        return self.out_norm(x + self.out(h))


class Bert(torch.nn.Module):
    def __init__(self, layers=2, hidden=64, heads=4, inter=None, vocab=100, max_pos=128,
                 norm="torch", as_dict=False):
        super().__init__()
        self.as_dict = as_dict
        self.words = torch.nn.Embedding(vocab, hidden)
        self.positions = torch.nn.Embedding(max_pos, hidden)
        self.token_types = torch.nn.Embedding(2, hidden)
        self.emb_norm = make_norm(norm, hidden)
        self.layers = torch.nn.ModuleList(
            [Layer(hidden, heads, inter or 4 * hidden, norm) for _ in range(layers)])
        self.pooler = torch.nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        # input_ids, attention_mask, token_type_ids: [batch, seq]
        pos = torch.arange(input_ids.size(1)).unsqueeze(0)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.words(input_ids) + self.positions(pos) + self.token_types(token_type_ids)
        x = self.emb_norm(x)  # [batch, seq, hidden]
        ext = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0  # [batch, 1, 1, seq]
        for layer in self.layers:
            x = layer(x, ext)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # [batch, hidden]
        if self.as_dict:
            return {"last_hidden_state": x, "pooler_output": pooled}
        return x, pooled


def export(model, path, batch, seq, opset, vocab=100):
    """Exports with fixed shapes; returns the feeds used (numpy)."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, seq - seq // 3:] = 0  # the first sequence padded
    torch.onnx.export(model, (ids, mask), path, opset_version=opset,
                      input_names=["input_ids", "attention_mask"],
                      output_names=["hidden", "pooled"])
    return {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
