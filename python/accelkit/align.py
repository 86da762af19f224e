"""The helper of `ak align` (src/cli/cmd_align.c runs it with $AK_BIN set): precision
alignment of one model between accelkit and a reference engine.

    python3 align.py MODEL [--ref auto|llamacpp|torch] [--prompt TEXT | --ids "1 2 3"]
                     [-n N] [--json] [--layers] [--kv f32|f16] [--dtype float64|float32]

accelkit's side runs through the `ak` binary ($AK_BIN, else `ak` on PATH): `ak logits`
(one prefill with every position's logits), `ak generate --temp 0 --ignore-eos
--print-ids` (greedy tokens through the serving engine; --kv f32, the default, adds
--kv-f32, as llama.cpp then gets an f32 cache too) and `ak align --layer-logits L` (the
logits after layer L). The reference is llama.cpp's libllama (accelkit.llamacpp) for
a GGUF file, or the PyTorch decoder of accelkit.align_torch for a Hugging Face folder.

Errors: per position, max |ak - ref| (abs) and that over max |ref| of the row (rel); top-1:
whether both engines' argmax agree; greedy: the first index where the two engines' n
greedy tokens differ, with both tokens' text; --layers (torch): the same errors of each
layer's logit lens (final norm and output matrix applied after layer L = 1 .. n_layers).

Runs as a script (imports its siblings by path, not the accelkit package, whose
__init__ loads libaccelkit) or as accelkit.align.
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__" and sys.path and sys.path[0] and \
        Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]  # run as a script: the package folder would shadow PyTorch with accelkit/torch

import numpy as np  # noqa: E402

DEFAULT_PROMPT = "The capital of France is Paris, and the capital of Italy is"


class AlignError(RuntimeError):
    """Something the alignment cannot go on without (missing engine, bad model)."""


def _sibling(name):
    """accelkit/<name>.py imported by path (once)."""
    key = f"accelkit_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


# ---- accelkit, through ak -------------------------------------------------------------------

def ak_bin():
    path = os.environ.get("AK_BIN") or shutil.which("ak")
    if not path:
        raise AlignError("no `ak` to run: set AK_BIN or put ak on PATH")
    return path


def ak(*args):
    r = subprocess.run([ak_bin(), *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise AlignError(f"ak {args[0]} failed: {(r.stderr or r.stdout).strip()[-1500:]}")
    return r.stdout


def ak_logits(model, ids, threads, layer=None):
    with tempfile.TemporaryDirectory(prefix="ak-align-") as d:
        out = Path(d) / "logits.npy"
        text = " ".join(map(str, ids))
        if layer is None:
            ak("logits", "-m", model, "--ids", text, "--out", out, "-t", threads)
        else:
            ak("align", model, "--layer-logits", layer, "--ids", text, "--out", out, "-t", threads)
        return np.load(out).astype(np.float64)


def ak_greedy(model, ids, n, threads, kv):
    kv_flag = ["--kv-f32"] if kv == "f32" else []
    out = ak("generate", "-m", model, "--ids", " ".join(map(str, ids)), "-n", n, "--temp", 0,
             "--ignore-eos", "--print-ids", *kv_flag, "-t", threads)
    rows = [ln.split() for ln in out.splitlines() if ln.strip()]
    rows = [r for r in rows if all(t.lstrip("-").isdigit() for t in r)]
    return [int(t) for t in rows[-1]] if rows else []


def ak_tokenize(model, text):
    return [int(t) for t in ak("tokenize", "-m", model, text).split()]


# ---- the references ---------------------------------------------------------------------------

class LlamaCppRef:
    """llama.cpp's libllama on a GGUF file."""

    name = "llama.cpp"

    def __init__(self, model, threads, kv):
        lc = _sibling("llamacpp")
        try:
            self.model = lc.Model(model)
        except lc.LlamaCppError as e:
            raise AlignError(str(e)) from e
        self.threads, self.kv = threads or 4, kv
        flash = False if kv == "f32" else None  # f16: llama.cpp's own choice (auto)
        self.describe = (f"llama.cpp (libllama), {kv} KV cache"
                         + (", no flash attention" if kv == "f32" else ", default attention"))
        self._ctx_args = dict(kv_type=kv, flash_attn=flash, threads=self.threads)

    def prompt_ids(self, model, text):
        """accelkit's ids of text, with BOS when the vocabulary asks for it (as llama.cpp
        adds it); llama.cpp's own ids are returned too, for the tokenization line."""
        theirs = self.model.tokenize(text, add_special=True, parse_special=True)
        ours = ak_tokenize(model, text)
        if self.model.add_bos and self.model.bos >= 0:
            ours = [self.model.bos] + ours
        return ours, theirs

    def _ctx(self, n_tokens):
        n_ctx = n_tokens + 8
        return self.model.context(n_ctx=n_ctx, n_batch=n_ctx, **self._ctx_args)

    def logits(self, ids):
        with self._ctx(len(ids)) as ctx:
            return ctx.logits(ids).astype(np.float64)

    def greedy(self, ids, n):
        if n == 0:
            return []
        with self._ctx(len(ids) + n) as ctx:
            return ctx.greedy(ids, n)

    def token_text(self, token):
        return self.model.token_to_piece(token).decode(errors="replace")


class TorchRef:
    """The PyTorch Llama-family decoder on a Hugging Face folder."""

    name = "torch"

    def __init__(self, model, dtype):
        at = _sibling("align_torch")
        try:
            self.ref = at.TorchReference(model, dtype)
        except at.RefusedError as e:
            raise AlignError(f"--ref torch: {e}") from e
        self.describe = f"PyTorch reference ({dtype}, accelkit/align_torch.py)"
        self.vocab = _hf_vocab(model)
        self.folder = Path(model)

    def prompt_ids(self, model, text):
        ids = ak_tokenize(model, text)
        cfg_path = self.folder / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        bos = self.ref.cfg.get("bos_token_id")
        if cfg.get("add_bos_token") and isinstance(bos, int):
            ids = [bos] + ids
        return ids, None

    def logits(self, ids):
        return self.ref.run(ids)

    def layers(self, ids):
        return self.ref.run(ids, layers=True)[1]

    def greedy(self, ids, n):
        return self.ref.greedy(ids, n)

    def token_text(self, token):
        return self.vocab.get(token, f"<{token}>")


def _hf_vocab(folder):
    """id -> token text of the folder's tokenizer.json (as stored: byte-level tokens show
    their Ġ-style characters)."""
    path = Path(folder) / "tokenizer.json"
    if not path.exists():
        return {}
    tok = json.loads(path.read_text())
    vocab = {i: t for t, i in (tok.get("model", {}).get("vocab") or {}).items()} \
        if isinstance(tok.get("model", {}).get("vocab"), dict) else {}
    for added in tok.get("added_tokens", []):
        vocab[added["id"]] = added["content"]
    return vocab


# ---- the comparison ---------------------------------------------------------------------------

def row_errors(ours, ref):
    """Per row: max abs error, max abs error / max |ref|."""
    diff = np.abs(ours - ref).max(axis=1)
    return diff, diff / np.maximum(np.abs(ref).max(axis=1), 1e-30)


def compare(ours, ref):
    abs_err, rel_err = row_errors(ours, ref)
    top_ours, top_ref = ours.argmax(axis=1), ref.argmax(axis=1)
    return {"max_abs": float(abs_err.max()), "max_rel": float(rel_err.max()),
            "worst_position": int(rel_err.argmax()),
            "top1_agreement": float(np.mean(top_ours == top_ref)),
            "rows": [{"pos": i, "max_abs": float(a), "max_rel": float(r),
                      "top1_accelkit": int(to), "top1_reference": int(tr)}
                     for i, (a, r, to, tr) in enumerate(zip(abs_err, rel_err, top_ours, top_ref))]}


def divergence(ours, theirs, ref):
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return {"index": i, "accelkit": {"id": a, "text": ref.token_text(a)},
                    "reference": {"id": b, "text": ref.token_text(b)}}
    return None


def align(args):
    model = args.model
    is_folder = os.path.isdir(model)
    kind = args.ref if args.ref != "auto" else ("torch" if is_folder else "llamacpp")
    if kind == "llamacpp" and is_folder:
        raise AlignError("llama.cpp reads GGUF files: `ak convert` the folder to one first, "
                         "or use --ref torch")
    if kind == "torch" and not is_folder:
        raise AlignError("--ref torch reads Hugging Face folders (config.json + safetensors); "
                         "for a GGUF file use --ref llamacpp")
    if args.layers and kind != "torch":
        raise AlignError("--layers needs --ref torch (llama.cpp gives no per-layer outputs here)")
    if not os.path.exists(model):
        raise AlignError(f"no model at {model}")
    ref = LlamaCppRef(model, args.threads, args.kv) if kind == "llamacpp" else TorchRef(model, args.dtype)
    result = {"model": model, "reference": ref.describe}
    if args.ids is not None:
        ids = [int(t) for t in args.ids.replace(",", " ").split()]
        ref_ids = None
    else:
        text = args.prompt if args.prompt is not None else DEFAULT_PROMPT
        ids, ref_ids = ref.prompt_ids(model, text)
        result["prompt"] = text
        if ref_ids is not None:
            result["tokenization_identical"] = ids == ref_ids
            if ids != ref_ids:
                result["reference_ids"] = ref_ids
    if not ids:
        raise AlignError("the prompt has no tokens")
    result["ids"] = ids
    ours, theirs = ak_logits(model, ids, args.threads), ref.logits(ids)
    if ours.shape != theirs.shape:
        raise AlignError(f"logits shapes differ: accelkit {ours.shape}, reference {theirs.shape}")
    result["logits"] = compare(ours, theirs)
    for row in result["logits"]["rows"]:
        row["token"] = ids[row["pos"]]
        row["text"] = ref.token_text(ids[row["pos"]])
        row["top1_accelkit_text"] = ref.token_text(row["top1_accelkit"])
        row["top1_reference_text"] = ref.token_text(row["top1_reference"])
    if args.n > 0:
        g_ours = ak_greedy(model, ids, args.n, args.threads, args.kv)
        g_ref = ref.greedy(ids, args.n)
        result["greedy"] = {"n": args.n, "accelkit": g_ours, "reference": g_ref,
                            "first_divergence": divergence(g_ours, g_ref, ref)}
    if args.layers:
        lens = ref.layers(ids)
        result["layers"] = []
        for layer, want in enumerate(lens, start=1):
            c = compare(ak_logits(model, ids, args.threads, layer=layer), want)
            del c["rows"]
            result["layers"].append({"layer": layer, **c})
    return result


def print_table(r):
    lg = r["logits"]
    print(f"model:     {r['model']}")
    print(f"reference: {r['reference']}")
    if "prompt" in r:
        print(f"prompt:    {r['prompt']!r}")
    print(f"ids:       {len(r['ids'])} tokens: {' '.join(map(str, r['ids']))}")
    if "tokenization_identical" in r:
        print("tokenization: " + ("identical" if r["tokenization_identical"] else
                                  "DIFFERS, reference ids " + " ".join(map(str, r["reference_ids"]))))
    print(f"\n{'pos':>4} {'token':<16} {'max abs':>10} {'max rel':>10}  top-1 accelkit / reference")
    for row in lg["rows"]:
        mark = "" if row["top1_accelkit"] == row["top1_reference"] else "   <- differs"
        print(f"{row['pos']:>4} {row['text']!r:<16.16} {row['max_abs']:>10.2e} "
              f"{row['max_rel']:>10.2e}  {row['top1_accelkit_text']!r} / "
              f"{row['top1_reference_text']!r}{mark}")
    print(f"\nfinal logits: max abs {lg['max_abs']:.3e}, max rel {lg['max_rel']:.3e} "
          f"(position {lg['worst_position']}); top-1 agreement "
          f"{lg['top1_agreement'] * len(lg['rows']):.0f}/{len(lg['rows'])} "
          f"({lg['top1_agreement']:.0%})")
    if "greedy" in r:
        g, d = r["greedy"], r["greedy"]["first_divergence"]
        if d is None:
            print(f"greedy {g['n']} tokens: identical")
        else:
            print(f"greedy {g['n']} tokens: first divergence at token {d['index']}: accelkit "
                  f"{d['accelkit']['id']} {d['accelkit']['text']!r}, reference "
                  f"{d['reference']['id']} {d['reference']['text']!r}")
    for layer in r.get("layers", []):
        print(f"after layer {layer['layer']:>3}: max abs {layer['max_abs']:.3e}, "
              f"max rel {layer['max_rel']:.3e}, top-1 agreement {layer['top1_agreement']:.0%}")


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="ak align", description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--ref", choices=["auto", "llamacpp", "torch"], default="auto")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--prompt", "-p")
    src.add_argument("--ids")
    ap.add_argument("-n", "--n-predict", dest="n", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--layers", action="store_true")
    ap.add_argument("--kv", choices=["f32", "f16"], default="f32")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--threads", "-t", type=int, default=0)
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        result = align(args)
    except AlignError as e:
        print(f"ak align: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
