#!/usr/bin/python3
"""SentencePiece Unigram tokenizers (GGUF `t5`, tokenizer.json `Unigram`) against their
references, on the 300 strings of tok_strings.json.

SentencePiece itself (Debian's python3-sentencepiece) trains three small Unigram models
at run time on half of the strings (so the other half meets unknown characters):
  t5       the nmt_nfkc normalizer (a real precompiled_charsmap), extra spaces removed,
           a space in front: what T5 / mT5 / ALBERT ship;
  ws       no normalization rules, spaces kept as they are;
  fallback as `ws`, with byte_fallback (unknown pieces spelled with <0xXX> tokens).
Each model is written as a GGUF vocabulary (tokenizer.ggml.model "t5", carried by a tiny
Llama model) and as a tokenizer.json the way Hugging Face's converter writes it
(Precompiled + Replace normalizers, Metaspace pre-tokenizer and decoder). The checks:
  GGUF ids and decoded text   = llama.cpp's libllama (tok_llamacpp.py)
  GGUF ids (t5)               = SentencePiece (llama.cpp's normalizer is SentencePiece's)
  tokenizer.json ids          = SentencePiece (every model; byte fallback included)
  tokenizer.json ids and text = transformers.js (`ws`: it has no Precompiled map and no
                                byte fallback)
  `ak convert` GGUF -> HF     = the GGUF's ids, through the written tokenizer.json
  `ak convert` HF -> GGUF     = llama.cpp's ids of the original GGUF, through libllama on
                                the written file; byte fallback and T5's chain without
                                its normalizers refused by name
A missing package, node or libllama is a failure naming what to install.

    usage: tok_unigram.py path/to/ak
"""
import base64
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "python"))
import tok_llamacpp  # noqa: E402
import tok_oracles  # noqa: E402
from accelkit import llm_files as lf  # noqa: E402
from tok_oracles import fail, report, run  # noqa: E402

MODELS = {
    "t5": dict(normalization_rule_name="nmt_nfkc", remove_extra_whitespaces=True),
    "ws": dict(normalization_rule_name="identity", remove_extra_whitespaces=False),
    "fallback": dict(normalization_rule_name="identity", remove_extra_whitespaces=False,
                     byte_fallback=True),
}
OPTIONAL_KEYS = {f"tokenizer.ggml.{k}" for k in (
    "add_space_prefix", "remove_extra_whitespaces", "add_bos_token", "add_eos_token",
    "bos_token_id", "eos_token_id", "unknown_token_id")}
# SentencePiece piece types → tokenizer.ggml.token_type
SP_TYPES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6}  # normal, unknown, control, user, unused, byte


def sentencepiece():
    try:
        import sentencepiece as spm
    except ImportError:
        fail("python3-sentencepiece is missing: run scripts/setup (apt-get install "
             "python3-sentencepiece)")
    return spm


# ---- reading a .model (protobuf) ---------------------------------------------------------

def _varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def _fields(b):
    """(field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {wt}")
        yield num, wt, v


def read_model(path):
    """Pieces [(text, score, type)] and the normalizer spec of a SentencePiece model."""
    pieces, norm = [], {"charsmap": b"", "add_dummy_prefix": True,
                        "remove_extra_whitespaces": True, "escape_whitespaces": True}
    for num, _, v in _fields(Path(path).read_bytes()):
        if num == 1:  # ModelProto.pieces
            text, score, ty = "", 0.0, 1
            for n, _, x in _fields(v):
                if n == 1:
                    text = x.decode("utf-8")
                elif n == 2:
                    score = float(np.frombuffer(x, "<f4")[0])
                elif n == 3:
                    ty = x
            pieces.append((text, score, ty))
        elif num == 3:  # ModelProto.normalizer_spec
            for n, _, x in _fields(v):
                if n == 2:
                    norm["charsmap"] = bytes(x)
                elif n == 3:
                    norm["add_dummy_prefix"] = bool(x)
                elif n == 4:
                    norm["remove_extra_whitespaces"] = bool(x)
                elif n == 5:
                    norm["escape_whitespaces"] = bool(x)
    return pieces, norm


def train(spm, name, corpus, tmp):
    prefix = tmp / name
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(prefix), model_type="unigram", vocab_size=600,
        hard_vocab_limit=False, character_coverage=0.995, num_threads=1, seed_sentencepiece_size=20000,
        minloglevel=2, **MODELS[name])
    return prefix.with_suffix(".model")


# ---- writing the two forms -----------------------------------------------------------------

def write_gguf(pieces, norm, tmp, name, ak):
    unk = next(i for i, p in enumerate(pieces) if p[2] == 2)
    vocab = {"tokenizer.ggml.model": lf.string("t5"),
             "tokenizer.ggml.tokens": lf.strings(p[0] for p in pieces),
             "tokenizer.ggml.scores": lf.Value(lf.ARRAY, np.array([p[1] for p in pieces], np.float32), lf.FLOAT32),
             "tokenizer.ggml.token_type": lf.Value(lf.ARRAY, np.array([SP_TYPES[p[2]] for p in pieces], np.int32), lf.INT32),
             "tokenizer.ggml.add_space_prefix": lf.boolean(norm["add_dummy_prefix"]),
             "tokenizer.ggml.remove_extra_whitespaces": lf.boolean(norm["remove_extra_whitespaces"]),
             "tokenizer.ggml.unknown_token_id": lf.u32(unk),
             "tokenizer.ggml.bos_token_id": lf.u32(1),
             "tokenizer.ggml.eos_token_id": lf.u32(2),
             "tokenizer.ggml.add_bos_token": lf.boolean(False),
             "tokenizer.ggml.add_eos_token": lf.boolean(True)}
    if norm["charsmap"]:
        vocab["tokenizer.ggml.precompiled_charsmap"] = lf.Value(
            lf.ARRAY, np.frombuffer(norm["charsmap"], np.uint8), lf.UINT8)
    lf.write_gguf(tmp / f"{name}-vocab.gguf", vocab, [])
    out = tmp / f"{name}.gguf"
    run(["/usr/bin/python3", str(ROOT / "scripts" / "llm-make-model"), *tok_oracles.CARRIER,
         "--vocab-from", str(tmp / f"{name}-vocab.gguf"), "--ak", str(ak), "--out", str(out)],
        f"llm-make-model ({name})")
    return out


def write_tokenizer_json(pieces, norm, folder, byte_fallback, t5_chain=False):
    """As Hugging Face's converter (SpmConverter) writes a Unigram model; t5_chain: with
    the pre-tokenizer of Hugging Face's T5 files (WhitespaceSplit, then Metaspace)."""
    unk = next(i for i, p in enumerate(pieces) if p[2] == 2)
    normalizers = []
    if norm["charsmap"]:
        normalizers.append({"type": "Precompiled",
                            "precompiled_charsmap": base64.b64encode(norm["charsmap"]).decode()})
    if norm["remove_extra_whitespaces"]:
        normalizers.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
    scheme = "always" if norm["add_dummy_prefix"] else "never"
    # add_prefix_space: the older spelling of prepend_scheme, which transformers.js needs
    meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme,
            "add_prefix_space": scheme == "always", "split": True}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": i, "content": p[0], "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True}
                            for i, p in enumerate(pieces) if p[2] in (2, 3)],
           "normalizer": {"type": "Sequence", "normalizers": normalizers} if normalizers else None,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, meta]}
           if t5_chain else meta, "post_processor": None,
           "decoder": dict(meta),
           "model": {"type": "Unigram", "unk_id": unk, "byte_fallback": byte_fallback,
                     "vocab": [[p[0], p[1]] for p in pieces]}}
    cfg = {"unk_token": pieces[unk][0], "bos_token": "<s>", "eos_token": "</s>",
           "add_bos_token": False, "add_eos_token": False, "tokenizer_class": "T5Tokenizer"}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")


# ---- the checks ------------------------------------------------------------------------------

def ak_encode(akc, t, text, parse_special):
    raw = text.encode("utf-8")
    cap = 8 * len(raw) + 64
    import ctypes as C
    ids, n = (C.c_int32 * cap)(), C.c_size_t()
    flags = tok_oracles.TOK_PARSE_SPECIAL if parse_special else 0
    akc.check(akc.lib.ak_tokenizer_encode(t, raw, len(raw), flags, ids, cap, C.byref(n)), "encode")
    return list(ids[:n.value])


def plain(s):
    """Text where Hugging Face's pipeline and SentencePiece's own treat spaces alike:
    words separated by single spaces (SentencePiece also puts its space in front of text
    that starts with one, and drops trailing ones; Metaspace does neither)."""
    return s != "" and " ".join(s.split()) == s


def ties_ok(pieces, unk, got, want):
    """A different answer is accepted only where it is an equally good path: the same
    pieces joined, the same total score (SentencePiece adds float32 scores, llama.cpp and
    Hugging Face float64, so exact ties may break either way)."""
    unk_score = min(p[1] for p in pieces) - 10.0

    def score(ids):
        return sum(unk_score if i == unk else pieces[i][1] for i in ids)
    return ("".join(pieces[i][0] for i in got) == "".join(pieces[i][0] for i in want)
            and unk not in got + want and abs(score(got) - score(want)) < 1e-4)


def report_ties(name, what, strings, got, want, pieces):
    unk = next(i for i, p in enumerate(pieces) if p[2] == 2)
    tied = [i for i in range(len(strings)) if got[i] != want[i] and ties_ok(pieces, unk, got[i], want[i])]
    if tied:
        print(f"{name:13s} {what}: {len(tied)} strings differ only by breaking an exact tie "
              f"({json.dumps(strings[tied[0]], ensure_ascii=False)})")
    for i in tied:
        got[i] = want[i]
    return report(name, what, strings, got, want)


def check_model(spm, akc, ak, name, strings, strings_file, tmp):
    sp = spm.SentencePieceProcessor(model_file=str(train(spm, name, tmp / "corpus.txt", tmp)))
    pieces, norm = read_model(tmp / f"{name}.model")
    ok = True
    want_sp = [sp.encode(s) for s in strings]
    # GGUF
    gguf = write_gguf(pieces, norm, tmp, name, ak)
    g, t = akc.gguf_tokenizer(gguf)
    ids = [akc.encode(t, s) for s in strings]
    with tok_llamacpp.LlamaVocab(gguf) as v:
        want = [v.tokenize(s, add_special=False, parse_special=True) for s in strings]
        texts = [v.detokenize(i) for i in want]
    ok &= report(name, "GGUF ids vs llama.cpp", strings, ids, want)
    ok &= report(name, "GGUF decode vs llama.cpp", strings,
                 [akc.decode(t, i, tok_oracles.TOK_STRIP_SPACE) for i in ids], texts)
    if name == "t5":
        ok &= check_defaults(akc, gguf, tmp, strings)
        ok &= report_ties(name, "GGUF ids vs SentencePiece", strings,
                          [ak_encode(akc, t, s, False) for s in strings], want_sp, pieces)
    akc.lib.ak_tokenizer_free(t)
    akc.lib.ak_gguf_close(g)
    ok &= check_gguf_to_hf(akc, ak, name, gguf, strings, ids, tmp)
    # tokenizer.json
    folder = tmp / f"{name}-hf"
    write_tokenizer_json(pieces, norm, folder, name == "fallback")
    model, t = hf_model(akc, folder, name)
    ok &= check_hf_to_gguf(ak, name, folder.with_name(folder.name + "-model"), strings, want, tmp)
    sub = [i for i, s in enumerate(strings) if plain(s)]
    ok &= report_ties(name, "HF ids vs SentencePiece (plain)", [strings[i] for i in sub],
                      [ak_encode(akc, t, strings[i], False) for i in sub],
                      [want_sp[i] for i in sub], pieces)
    # SentencePiece renders the unknown token as " ⁇ "; the others as its text
    sub = [i for i in sub if sp.unk_id() not in want_sp[i]]
    ok &= report(name, "HF decode vs SentencePiece (plain)", [strings[i] for i in sub],
                 [akc.decode(t, want_sp[i], tok_oracles.TOK_STRIP_SPACE) for i in sub],
                 [sp.decode(want_sp[i]) for i in sub])
    if name == "ws":
        ok &= check_transformersjs(akc, name, t, folder, strings, strings_file)
    akc.lib.ak_llm_model_free(model)
    if name == "ws":  # the same vocabulary with T5's pre-tokenizer chain
        folder = tmp / f"{name}-t5chain"
        write_tokenizer_json(pieces, norm, folder, False, t5_chain=True)
        model, t = hf_model(akc, folder, name)
        ok &= check_transformersjs(akc, "ws+t5 chain", t, folder, strings, strings_file)
        ok &= check_hf_to_gguf(ak, "ws+t5 chain", folder.with_name(folder.name + "-model"),
                               strings, want, tmp)
        akc.lib.ak_llm_model_free(model)
    if name == "t5":  # T5's own chain has the GGUF form when the extra spaces go first
        folder = tmp / f"{name}-t5chain"
        write_tokenizer_json(pieces, norm, folder, False, t5_chain=True)
        model, t = hf_model(akc, folder, name)
        ok &= check_hf_to_gguf(ak, "t5+t5 chain", folder.with_name(folder.name + "-model"),
                               strings, want, tmp)
        akc.lib.ak_llm_model_free(model)
    return ok


# `ak convert` of the two forms; what has no GGUF t5 form must be refused by name
HF_ONLY = {"fallback": "Unigram byte_fallback has no GGUF t5 form",
           "ws+t5 chain": "WhitespaceSplit then Metaspace equals the GGUF t5 form only after"}


def check_gguf_to_hf(akc, ak, name, gguf, strings, gguf_ids, tmp):
    """GGUF -> Hugging Face folder: its tokenizer.json gives the GGUF's ids. Except on a
    text of spaces only, when spaces are kept: llama.cpp puts the ▁ prefix before the first
    other character, so such a text gets none, and no Hugging Face normalizer can make the
    prefix depend on what follows (Prepend adds it to any non-empty text)."""
    out = tmp / f"{name}-converted-hf"
    run([str(ak), "convert", str(gguf), str(out)], f"ak convert {name} GGUF -> HF")
    model, t = akc.model_tokenizer(out)
    got = [akc.encode(t, s) for s in strings]
    # texts with a run of spaces only, between special tokens or alone
    spaces_only = [i for i, s in enumerate(strings) if name != "t5" and
                   any(p and not p.strip(" ") for p in re.split(r"</?s>|<unk>", s))]
    keep = [i for i in range(len(strings)) if i not in spaces_only]
    ok = report(name, "GGUF -> HF ids vs the GGUF's", [strings[i] for i in keep],
                [got[i] for i in keep], [gguf_ids[i] for i in keep])
    if spaces_only:  # they differ only by ▁ tokens added
        space = akc.encode(t, " ")[-1]
        same = [i for i in spaces_only if [x for x in got[i] if x != space] ==
                [x for x in gguf_ids[i] if x != space] and len(got[i]) > len(gguf_ids[i])]
        ok &= len(same) == len(spaces_only)
        print(f"{name:13s} {'GGUF -> HF, runs of spaces only':34s} {len(same)}/{len(spaces_only)} "
              "differ only by the ▁ prefix")
    akc.lib.ak_llm_model_free(model)
    return ok


def check_hf_to_gguf(ak, name, hf_folder, strings, llamacpp_ids, tmp):
    """Hugging Face folder -> GGUF: llama.cpp on the result gives llama.cpp's ids of the
    original GGUF; or, for a pipeline with no GGUF form, the refusal names it."""
    out = tmp / f"{name.replace(' ', '_').replace('+', '_')}-converted.gguf"
    r = subprocess.run([str(ak), "convert", str(hf_folder), str(out)], capture_output=True, text=True)
    if name in HF_ONLY:
        good = r.returncode != 0 and HF_ONLY[name] in r.stderr and not out.exists()
        print(f"{name:13s} {'HF -> GGUF refused by name':34s} {'yes' if good else 'NO: ' + r.stderr.strip()}")
        return good
    if r.returncode != 0:
        print(f"FAIL {name}: ak convert HF -> GGUF: {r.stderr.strip()}")
        return False
    with tok_llamacpp.LlamaVocab(out) as v:
        got = [v.tokenize(s, add_special=False, parse_special=True) for s in strings]
    return report(name, "HF -> GGUF ids (llama.cpp)", strings, got, llamacpp_ids)


def check_defaults(akc, gguf, tmp, strings):
    """The same vocabulary without the optional keys (space prefix, extra spaces, BOS/EOS
    ids and flags, unknown id): llama.cpp's defaults must be accelkit's, BOS/EOS added."""
    with lf.GGUFFile(gguf) as g:
        md = {k: v for k, v in g.metadata.items() if k not in OPTIONAL_KEYS}
        tensors = [lf.GGUFTensorOut(n, t.ggml_type, t.shape, bytes(g.raw(n)))
                   for n, t in g.tensors.items()]
    bare = tmp / "t5-defaults.gguf"
    lf.write_gguf(bare, md, tensors)
    g, t = akc.gguf_tokenizer(bare)
    ids = [akc.encode(t, s, tok_oracles.TOK_ADD_SPECIAL) for s in strings]
    akc.lib.ak_tokenizer_free(t)
    akc.lib.ak_gguf_close(g)
    with tok_llamacpp.LlamaVocab(bare) as v:
        want = [v.tokenize(s, add_special=True, parse_special=True) for s in strings]
    return report("t5", "GGUF defaults, BOS/EOS vs llama.cpp", strings, ids, want)


def hf_model(akc, folder, name):
    """A tiny Hugging Face model folder carrying the tokenizer, loaded by accelkit."""
    out = folder.with_name(folder.name + "-model")
    run(["/usr/bin/python3", str(ROOT / "scripts" / "llm-make-model"), *tok_oracles.CARRIER,
         "--format", "hf", "--tokenizer-from", str(folder), "--out", str(out)],
        f"llm-make-model ({name}, hf)")
    return akc.model_tokenizer(out)


def check_transformersjs(akc, name, t, folder, strings, strings_file):
    ref = json.loads(run(["node", str(HERE / "tok_json_transformersjs.js"),
                          str(ROOT / "node_modules"), str(folder), str(strings_file)],
                         f"transformers.js on {name}"))
    ok = report(name, "HF ids vs transformers.js", strings,
                [akc.encode(t, s) for s in strings], [r["ids"] for r in ref])
    return ok & report(name, "HF decode vs transformers.js", strings,
                       [akc.decode(t, r["ids"], tok_oracles.TOK_STRIP_SPACE) for r in ref],
                       [r["text"] for r in ref])


def main():
    if len(sys.argv) != 2:
        fail("usage: tok_unigram.py path/to/ak")
    ak = Path(sys.argv[1])
    spm = sentencepiece()
    if subprocess.run(["node", "--version"], capture_output=True).returncode != 0:
        fail("node not found (scripts/setup installs nodejs)")
    strings_file = HERE / "tok_strings.json"
    strings = json.loads(strings_file.read_text(encoding="utf-8"))
    akc = tok_oracles.Accelkit(ak)
    ok = True
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        # half of the strings train (the rest meets unknown pieces); repeated so that
        # SentencePiece finds enough pieces
        corpus = [s.replace("\n", " ") for s in strings[::2] if s.strip()]
        (tmp / "corpus.txt").write_text("\n".join(corpus * 4) + "\n", encoding="utf-8")
        for name in MODELS:
            try:
                ok &= check_model(spm, akc, ak, name, strings, strings_file, tmp)
            except RuntimeError as e:
                print(f"FAIL {name}: {e}")
                ok = False
    print("PASS" if ok else "FAIL: token ids or texts differ from the references")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
