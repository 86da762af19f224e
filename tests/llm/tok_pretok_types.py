#!/usr/bin/python3
"""Every byte-level pre-tokenizer type of accelkit's table against llama.cpp's libllama.

The gpt2 npm tokenizer converted to GGUF (as tok_oracles.py does) is written again once per
`tokenizer.ggml.pre` name with only that key changed; accelkit and libllama then tokenize
the 300 strings of tok_strings.json with each file (special tokens in the text parsed, none
added; and "Hello" with BOS/EOS as the type asks). The ids must be the same. The types the
issue names (REQUIRED) must be known to this libllama; newer names it does not know yet are
listed as unchecked by it (they are still compiled and run by test_tokenizer.c).

    usage: tok_pretok_types.py path/to/ak
"""
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "python"))
import tok_llamacpp  # noqa: E402
import tok_oracles  # noqa: E402
from accelkit import llm_files as lf  # noqa: E402

REQUIRED = ["default", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder",
            "deepseek-v3", "falcon", "falcon3", "mpt", "starcoder", "refact", "command-r",
            "olmo", "dbrx", "smaug-bpe", "stablelm2", "poro-chat", "jais", "viking", "tekken",
            "chatglm-bpe", "bloom", "gpt3-finnish", "exaone", "minerva-7b", "gpt-4o",
            "codeshell", "smollm", "trillion", "bailingmoe", "seed-coder"]
OTHERS = ["llama3", "llama-v3", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
          "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "exaone4", "granite-docling",
          "falcon-h1", "pixtral", "midm-2.0", "lfm2", "glm4", "megrez", "deepseek-r1-qwen",
          "hunyuan", "hunyuan-dense", "kanana2", "llama4", "chameleon", "superbpe",
          "bailingmoe2", "llada-moe", "grok-2", "minimax-m2", "qwen35", "spark2_5", "youtu",
          "laguna", "exaone-moe", "minicpm5", "granite-embed-multi-97m", "ufakzeka",
          "solar-open", "kormo", "f2llmv2", "joyai-llm", "hy_v4", "talkie",
          "mellum2", "jina-v5-nano"]


def with_pre(base, name, out):
    with lf.GGUFFile(base) as g:
        md = dict(g.metadata)
        md["tokenizer.ggml.pre"] = lf.string(name)
        tensors = [lf.GGUFTensorOut(n, t.ggml_type, t.shape, bytes(g.raw(n)))
                   for n, t in g.tensors.items()]
    lf.write_gguf(out, md, tensors)


def main():
    if len(sys.argv) != 2:
        tok_oracles.fail("usage: tok_pretok_types.py path/to/ak")
    ak = Path(sys.argv[1])
    strings = tok_oracles.json.loads((HERE / "tok_strings.json").read_text(encoding="utf-8"))
    akc = tok_oracles.Accelkit(ak)
    pkg = tok_oracles.ROOT / "node_modules" / "@lenml" / "tokenizer-gpt2"
    ok, unknown = True, []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tok_oracles.run(["/usr/bin/python3", str(tok_oracles.ROOT / "scripts" / "llm-make-model"),
                         *tok_oracles.CARRIER, "--format", "hf", "--tokenizer-from",
                         str(pkg / "models"), "--out", str(tmp / "hf")], "llm-make-model (gpt2)")
        tok_oracles.run([str(ak), "convert", str(tmp / "hf"), str(tmp / "base.gguf")], "ak convert")
        for name in REQUIRED + OTHERS:
            path = tmp / f"pre-{name}.gguf"
            with_pre(tmp / "base.gguf", name, path)
            try:
                v = tok_llamacpp.LlamaVocab(path)
            except RuntimeError:
                if name in REQUIRED:
                    print(f"FAIL {name}: llama.cpp does not load a vocabulary with this pre")
                    ok = False
                else:
                    unknown.append(name)
                path.unlink()
                continue
            g, t = akc.gguf_tokenizer(path)
            with v:
                want = [v.tokenize(s, add_special=False, parse_special=True) for s in strings]
                want_bos = v.tokenize("Hello", add_special=True, parse_special=True)
            got = [akc.encode(t, s) for s in strings]
            got_bos = akc.encode(t, "Hello", tok_oracles.TOK_ADD_SPECIAL)
            ok &= tok_oracles.report(f"pre {name}", "GGUF ids vs llama.cpp", strings, got, want)
            if got_bos != want_bos:
                print(f"    with BOS/EOS: accelkit {got_bos}, llama.cpp {want_bos}")
                ok = False
            akc.lib.ak_tokenizer_free(t)
            akc.lib.ak_gguf_close(g)
            path.unlink()
    if unknown:
        print(f"not known to this libllama (checked by test_tokenizer.c only): {' '.join(unknown)}")
    print("PASS" if ok else "FAIL: token ids differ from llama.cpp's")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
