"""Random-weight BERT-family encoders (llama.cpp's `bert` and `nomic-bert`) as GGUF files,
for the embedding tests: a small real WordPiece vocabulary (BERT's special-token ids:
[PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103), weights drawn from a seed, written
with llama.cpp's key and tensor names (what its converter writes for BertModel and
NomicBertModel). scripts/llm-make-model --arch bert|nomic-bert calls write_encoder_gguf.

This module needs numpy and python/accelkit/llm_files.py only (loaded by path).
"""
import importlib.util
import sys
from pathlib import Path

import numpy as np


def _llm_files():
    name = "accelkit_llm_files"
    if name not in sys.modules:
        path = Path(__file__).resolve().parent / "llm_files.py"
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


lf = _llm_files()

ENCODER_ARCHS = ["bert", "nomic-bert"]
# llama.cpp's pooling enum, by the names --pooling takes
POOLING = {"none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}
ENCODER_DEFAULTS = {"dim": 32, "layers": 2, "heads": 4, "ffn": 64, "context": 64}

WORDS = ["the", "a", "an", "and", "of", "to", "in", "is", "it", "hello", "world", "embed",
         "##ding", "##ing", "##ed", "model", "text", "cat", "dog", "sat", "on", "mat",
         "quick", "brown", "fox", "jump", "##er", "over", "lazy", "search", "query",
         "document", "vector", "cos", "##ine", "similar", "##ity", "token", "##izer"]


def wordpiece_vocab():
    """BERT's layout (vocab.txt spelling): [PAD], [unused0..98], [UNK], [CLS], [SEP],
    [MASK], then single characters, their ## continuations and a few words and pieces."""
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789") + \
        list(".,!?;:'\"()-")
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + \
        ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars] + WORDS
    return list(dict.fromkeys(tokens))  # "a" is a character and a word: once


def gguf_token(tok):
    """llama.cpp's converter's spelling of a WordPiece token: word starts get U+2581 in
    front, continuations lose their ##, bracketed specials stay."""
    if tok.startswith("[") and tok.endswith("]"):
        return tok
    return tok[2:] if tok.startswith("##") else "\u2581" + tok


def random_encoder(arch, dim, layers, heads, ffn, context, n_vocab, seed):
    """{gguf tensor name: float32 array (NumPy order: [out, in] for matrices)}."""
    rng = np.random.default_rng(seed)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def vec(n, center=0.0, spread=0.1):
        return (center + spread * rng.standard_normal(n)).astype(np.float32)

    t = {"token_embd.weight": vec(n_vocab * dim, 0, 1).reshape(n_vocab, dim),
         "token_types.weight": vec(2 * dim, 0, 0.5).reshape(2, dim)}
    if arch == "bert":
        t["position_embd.weight"] = vec(context * dim, 0, 0.5).reshape(context, dim)
    t["token_embd_norm.weight"], t["token_embd_norm.bias"] = vec(dim, 1.0), vec(dim)
    for i in range(layers):
        p = f"blk.{i}."
        if arch == "bert":
            for n in ("attn_q", "attn_k", "attn_v"):
                t[p + n + ".weight"], t[p + n + ".bias"] = mat(dim, dim), vec(dim)
        else:
            t[p + "attn_qkv.weight"] = mat(3 * dim, dim)
        t[p + "attn_output.weight"] = mat(dim, dim)
        if arch == "bert":
            t[p + "attn_output.bias"] = vec(dim)
        t[p + "attn_output_norm.weight"], t[p + "attn_output_norm.bias"] = vec(dim, 1.0), vec(dim)
        t[p + "ffn_up.weight"] = mat(ffn, dim)
        if arch == "bert":
            t[p + "ffn_up.bias"] = vec(ffn)
        else:
            t[p + "ffn_gate.weight"] = mat(ffn, dim)
        t[p + "ffn_down.weight"] = mat(dim, ffn)
        if arch == "bert":
            t[p + "ffn_down.bias"] = vec(dim)
        t[p + "layer_output_norm.weight"], t[p + "layer_output_norm.bias"] = vec(dim, 1.0), vec(dim)
    return t


def write_encoder_gguf(path, arch, dim=32, layers=2, heads=4, ffn=64, context=64,
                       pooling="mean", wtype="f32", seed=0, rope_theta=1000.0, eps=1e-12):
    """A random encoder as llama.cpp's converter writes one. wtype: f32 or f16 (matrices;
    vectors stay f32, as the converter keeps them)."""
    if arch not in ENCODER_ARCHS:
        raise ValueError(f"arch '{arch}' is not one of {ENCODER_ARCHS}")
    tokens = [gguf_token(t) for t in wordpiece_vocab()]
    weights = random_encoder(arch, dim, layers, heads, ffn, context, len(tokens), seed)
    types = [3 if t.startswith("[") and not t.startswith("[unused") else 1 for t in tokens]
    meta = {"general.architecture": arch, "general.name": f"random-{arch}",
            f"{arch}.block_count": lf.u32(layers), f"{arch}.context_length": lf.u32(context),
            f"{arch}.embedding_length": lf.u32(dim),
            f"{arch}.feed_forward_length": lf.u32(ffn),
            f"{arch}.attention.head_count": lf.u32(heads),
            f"{arch}.attention.layer_norm_epsilon": lf.f32(eps),
            f"{arch}.attention.causal": lf.boolean(False),
            f"{arch}.pooling_type": lf.u32(POOLING[pooling])}
    if arch == "nomic-bert":
        meta[f"{arch}.rope.freq_base"] = lf.f32(rope_theta)
    meta.update({"general.file_type": lf.u32(0 if wtype == "f32" else 1),
                 "tokenizer.ggml.token_type_count": lf.u32(2),
                 "tokenizer.ggml.model": "bert", "tokenizer.ggml.pre": "default",
                 "tokenizer.ggml.tokens": lf.strings(tokens),
                 "tokenizer.ggml.token_type": lf.Value(lf.ARRAY, np.array(types, np.int32),
                                                       lf.INT32),
                 "tokenizer.ggml.unknown_token_id": lf.u32(100),
                 "tokenizer.ggml.seperator_token_id": lf.u32(102),
                 "tokenizer.ggml.padding_token_id": lf.u32(0),
                 "tokenizer.ggml.cls_token_id": lf.u32(101),
                 "tokenizer.ggml.mask_token_id": lf.u32(103)})
    out = []
    for name, x in weights.items():
        gtype = lf.GGML_NAMES[wtype] if x.ndim == 2 and name != "token_types.weight" else \
            lf.GGML_NAMES["f32"]
        out.append(lf.GGUFTensorOut(name, gtype, x.shape, lf.encode_tensor(x, gtype)))
    lf.write_gguf(path, meta, out)
    return weights


# ---- Hugging Face BertModel folders ---------------------------------------------------------

# GGUF name piece → transformers' BertModel name piece (layer tensors under encoder.layer.N.)
HF_NAMES = [("token_embd_norm.", "embeddings.LayerNorm."),
            ("token_embd.", "embeddings.word_embeddings."),
            ("token_types.", "embeddings.token_type_embeddings."),
            ("position_embd.", "embeddings.position_embeddings."),
            ("attn_q.", "attention.self.query."), ("attn_k.", "attention.self.key."),
            ("attn_v.", "attention.self.value."),
            ("attn_output_norm.", "attention.output.LayerNorm."),
            ("attn_output.", "attention.output.dense."),
            ("ffn_up.", "intermediate.dense."), ("ffn_down.", "output.dense."),
            ("layer_output_norm.", "output.LayerNorm.")]


def hf_name(gguf):
    layer = None
    if gguf.startswith("blk."):
        _, layer, gguf = gguf.split(".", 2)
    for g, h in HF_NAMES:
        if gguf.startswith(g):
            name = h + gguf[len(g):]
            return f"encoder.layer.{layer}.{name}" if layer is not None else name
    raise KeyError(gguf)


def _tokenizer_json(tokens):
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": tokens.index(t), "content": t, "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": False,
                              "special": True} for t in specials],
            "normalizer": {"type": "BertNormalizer", "clean_text": True,
                           "handle_chinese_chars": True, "strip_accents": None,
                           "lowercase": True},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}},
                                          {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                               "pair": [], "special_tokens": {}},
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
            "model": {"type": "WordPiece", "unk_token": "[UNK]",
                      "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                      "vocab": {t: i for i, t in enumerate(tokens)}}}


def write_encoder_hf(folder, dim=32, layers=2, heads=4, ffn=64, context=64, pooling="mean",
                     hidden_act="gelu", seed=0, eps=1e-12, dtype="F32"):
    """A random BertModel folder as sentence-transformers saves one: config.json,
    model.safetensors, tokenizer.json (WordPiece), modules.json and 1_Pooling/config.json
    (no pooling folder for pooling "none"). The same seed gives write_encoder_gguf's
    weights."""
    import json
    folder = Path(folder)
    (folder / "1_Pooling").mkdir(parents=True, exist_ok=True)
    tokens = wordpiece_vocab()
    weights = random_encoder("bert", dim, layers, heads, ffn, context, len(tokens), seed)
    lf.write_safetensors(folder / "model.safetensors",
                         [(hf_name(n), dtype, x) for n, x in weights.items()])
    config = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": dim,
              "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": ffn, "max_position_embeddings": context,
              "type_vocab_size": 2, "vocab_size": len(tokens), "layer_norm_eps": eps,
              "hidden_act": hidden_act, "position_embedding_type": "absolute",
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "tokenizer.json").write_text(json.dumps(_tokenizer_json(tokens)))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "cls_token": "[CLS]", "sep_token": "[SEP]",
         "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]",
         "tokenizer_class": "BertTokenizer"}))
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    if pooling != "none":
        modules.append({"idx": 1, "name": "1", "path": "1_Pooling",
                        "type": "sentence_transformers.models.Pooling"})
        modes = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token",
                 "last": "pooling_mode_lasttoken"}
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": dim,
             **{m: m == modes[pooling] for m in modes.values()}}))
    (folder / "modules.json").write_text(json.dumps(modules))
    return weights
