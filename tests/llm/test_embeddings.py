"""Embeddings (`ak embed`, ak_llm_model_embed) against real references, on random-weight
GGUF files written by scripts/llm-make-model into <build>/llm-embed/:
- the NumPy encoder (tests/llm/bert_ref.py, float64): bert and nomic-bert, every pooling
  (none, mean, cls, last), f32 and f16 matrices — max |ak − ref| and cosine per vector;
- llama.cpp's libllama (python/accelkit/llamacpp.py: llama_set_embeddings,
  llama_get_embeddings_seq / _ith, the pooling from the GGUF; f32 KV, no flash attention)
  on the same files: the same token ids ([CLS] … [SEP] from the WordPiece tokenizer) and
  the same vectors within llama.cpp's own rounding (bert: its GELU goes through an f16
  table, measured 1.5e-4; nomic-bert and llama ~2e-7);
- a llama decoder with {arch}.pooling_type mean / last / cls, and without the key (accelkit
  pools the last token; llama.cpp returns every token's: its last row is compared);
- refusals: rank pooling and a causal encoder are refused naming the key;
- `ak serve`'s /v1/embeddings (an encoder, and a decoder beside generation): float and
  base64 give ak embed's vectors for every input form; bad fields are 400s naming them;
  an encoder refuses /v1/completions and /v1/chat/completions.
llama.cpp's vectors are L2-normalized here as llama-server does; accelkit's already are.
"""
import base64
import json
import os
import subprocess
import sys
import unittest
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "python" / "accelkit"))
import bert_ref  # noqa: E402
import llamacpp  # noqa: E402  (python/accelkit/llamacpp.py, needs numpy only)

AK = os.environ.get("AK_BIN", str(ROOT / "build" / "ak"))
WORK = Path(AK).resolve().parent / "llm-embed"
MAKE = ROOT / "scripts" / "llm-make-model"
TEXTS = ["Hello world", "the quick brown fox jumps over the lazy dog.",
         "Embedding models: cosine similarity of query and document vectors!", "a"]
POOLINGS = ["none", "mean", "cls", "last"]


def make(name, *args):
    out = WORK / name
    if not out.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(MAKE), *args, "--out", str(out)], check=True,
                       env={**os.environ, "AK_BIN": AK}, stdout=subprocess.DEVNULL)
    return out


def ak_embed(path, texts):
    r = subprocess.run([AK, "embed", "-m", str(path), *texts], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"ak embed {path} failed: {r.stderr}")
    return json.loads(r.stdout)


def cosine(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def rows(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _encoder_files():
    import llm_encoder_files  # python/accelkit/llm_encoder_files.py
    return llm_encoder_files


def with_pooling(src, dst, pooling):
    """src with {arch}.pooling_type set (a decoder file has no such key by default)."""
    lf = bert_ref.lf
    with lf.GGUFFile(src) as g:
        meta = dict(g.metadata)
        arch = g.get("general.architecture")
        meta[f"{arch}.pooling_type"] = lf.u32(pooling)
        tensors = [lf.GGUFTensorOut(n, t.ggml_type, t.shape, bytes(g.raw(n)))
                   for n, t in g.tensors.items()]
        lf.write_gguf(dst, meta, tensors)
    return dst


class TestEncoderReference(unittest.TestCase):
    """ak embed == the NumPy encoder."""

    def check(self, arch, pooling, wtype):
        path = make(f"{arch}-{pooling}-{wtype}.gguf", "--arch", arch, "--pooling", pooling,
                    "--type", wtype, "--seed", "3")
        got = ak_embed(path, TEXTS)
        self.assertEqual(got["pooling"], POOLINGS.index(pooling))
        model = bert_ref.load(path)
        for d in got["data"]:
            ref = bert_ref.embedding(model, d["tokens"])
            ours = np.array(d["embedding"]).reshape(ref.shape)
            err, cos = float(np.abs(ours - ref).max()), cosine(ours, ref)
            print(f"{arch} {pooling} {wtype} text {d['index']}: max|ak-ref| {err:.2e} "
                  f"cos {cos:.8f}")
            self.assertLess(err, 1e-5)
            self.assertGreater(cos, 0.9999)

    def test_bert(self):
        for pooling in POOLINGS:
            self.check("bert", pooling, "f32")
        self.check("bert", "cls", "f16")

    def test_nomic_bert(self):
        for pooling in POOLINGS:
            self.check("nomic-bert", pooling, "f32")
        self.check("nomic-bert", "mean", "f16")

    def test_bert_hf(self):
        """Hugging Face BertModel folders: the exact (erf) GELU of hidden_act "gelu", every
        pooling from sentence-transformers' modules.json; with hidden_act gelu_new the
        folder is the GGUF file of the same seed (same ids, same vectors)."""
        enc = _encoder_files()
        for pooling in POOLINGS:
            folder = WORK / f"hf-bert-{pooling}"
            if not (folder / "config.json").exists():
                enc.write_encoder_hf(folder, pooling=pooling, seed=3)
            got = ak_embed(folder, TEXTS)
            self.assertEqual(got["pooling"], POOLINGS.index(pooling))
            model = bert_ref.load(folder)
            for d in got["data"]:
                ref = bert_ref.embedding(model, d["tokens"])
                ours = np.array(d["embedding"]).reshape(ref.shape)
                err = float(np.abs(ours - ref).max())
                print(f"HF bert {pooling} text {d['index']}: max|ak-ref| {err:.2e}")
                self.assertLess(err, 1e-5)
                self.assertGreater(cosine(ours, ref), 0.9999)
        folder = WORK / "hf-bert-tanh"
        if not (folder / "config.json").exists():
            enc.write_encoder_hf(folder, pooling="cls", seed=3, hidden_act="gelu_new")
        gguf = make("bert-cls-f32.gguf", "--arch", "bert", "--pooling", "cls", "--type", "f32",
                    "--seed", "3")
        a, b = ak_embed(folder, TEXTS), ak_embed(gguf, TEXTS)
        for x, y in zip(a["data"], b["data"]):
            self.assertEqual(x["tokens"], y["tokens"])
            self.assertLess(float(np.abs(np.array(x["embedding"]) - y["embedding"]).max()), 1e-6)
        # the erf GELU is not the tanh one: the comparison above can fail
        c = ak_embed(WORK / "hf-bert-cls", TEXTS[:1])["data"][0]["embedding"]
        self.assertGreater(float(np.abs(np.array(c) - b["data"][0]["embedding"]).max()), 1e-6)

    def test_reference_can_fail(self):
        """Another seed's model is far from this one's: the comparison discriminates."""
        a = make("bert-mean-f32.gguf", "--arch", "bert", "--pooling", "mean", "--seed", "3")
        b = make("bert-mean-seed4.gguf", "--arch", "bert", "--pooling", "mean", "--seed", "4")
        va = np.array(ak_embed(a, TEXTS[:1])["data"][0]["embedding"])
        ref_b = bert_ref.embedding(bert_ref.load(b), ak_embed(b, TEXTS[:1])["data"][0]["tokens"])
        self.assertGreater(float(np.abs(va - ref_b).max()), 1e-2)


class TestLlamaCpp(unittest.TestCase):
    """ak embed == libllama's embeddings of the same file (and the same token ids)."""

    def compare(self, path, texts, last_row_of_none=False, tol=1e-3):
        got = ak_embed(path, texts)
        with llamacpp.Model(path) as m, m.context(n_ctx=256, n_batch=256, kv_type="f32", flash_attn=False) as ctx:
            for d, text in zip(got["data"], texts):
                self.assertEqual(m.tokenize(text), d["tokens"], f"token ids of {text!r}")
                ref = rows(llamacpp.embed(ctx, d["tokens"]))
                if last_row_of_none:
                    ref = ref[-1]
                ours = np.array(d["embedding"]).reshape(ref.shape)
                err, cos = float(np.abs(ours - ref).max()), cosine(ours, ref)
                print(f"{path.name} text {d['index']}: max|ak-llama.cpp| {err:.2e} cos {cos:.8f}")
                self.assertLess(err, tol)
                self.assertGreater(cos, 0.9999)

    def test_encoders(self):
        for arch in ("bert", "nomic-bert"):
            for pooling in POOLINGS:
                # bert: llama.cpp's GELU goes through an f16 table (measured 1.5e-4)
                self.compare(make(f"{arch}-{pooling}-f32.gguf", "--arch", arch, "--pooling",
                                  pooling, "--type", "f32", "--seed", "3"), TEXTS,
                             tol=1e-3 if arch == "bert" else 1e-5)

    def test_separator_id(self):
        """[SEP] where tokenizer.ggml.seperator_token_id says (not BERT's 102): llama.cpp
        ends the sequence with it, so must accelkit."""
        src = make("bert-mean-f32.gguf", "--arch", "bert", "--pooling", "mean", "--seed", "3")
        lf = bert_ref.lf
        dst = WORK / "bert-sep3.gguf"
        with lf.GGUFFile(src) as g:
            meta = dict(g.metadata)
            tokens = list(g.get("tokenizer.ggml.tokens"))
            tokens[3], tokens[102] = tokens[102], tokens[3]
            types = np.array(g.get("tokenizer.ggml.token_type"))
            types[[3, 102]] = types[[102, 3]]
            meta["tokenizer.ggml.tokens"] = lf.strings(tokens)
            meta["tokenizer.ggml.token_type"] = lf.Value(lf.ARRAY, types.astype(np.int32), lf.INT32)
            meta["tokenizer.ggml.seperator_token_id"] = lf.u32(3)
            lf.write_gguf(dst, meta, [lf.GGUFTensorOut(n, t.ggml_type, t.shape, bytes(g.raw(n)))
                                      for n, t in g.tensors.items()])
        self.assertEqual(ak_embed(dst, ["hello"])["data"][0]["tokens"][-1], 3)
        self.compare(dst, TEXTS)

    def test_decoder_pooling(self):
        base = make("llama.gguf", "--arch", "llama", "--dim", "64", "--layers", "2",
                    "--heads", "4", "--kv-heads", "2", "--ffn", "128", "--ctx", "256")
        texts = TEXTS[:3]
        for pooling in (1, 2, 3):
            path = with_pooling(base, WORK / f"llama-pool{pooling}.gguf", pooling)
            self.compare(path, texts, tol=1e-4)
        # no pooling_type: accelkit pools the last token, llama.cpp gives every token's
        self.compare(base, texts, last_row_of_none=True, tol=1e-4)


class TestRefusals(unittest.TestCase):
    def refused(self, path, words):
        r = subprocess.run([AK, "embed", "-m", str(path), "x"], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        for w in words:
            self.assertIn(w, r.stderr)

    def test_rank_pooling(self):
        self.refused(make("bert-rank.gguf", "--arch", "bert", "--pooling", "rank"),
                     ["pooling_type", "rank"])

    def test_causal_encoder(self):
        src = make("bert-mean-f32.gguf", "--arch", "bert", "--pooling", "mean", "--seed", "3")
        lf = bert_ref.lf
        dst = WORK / "bert-causal.gguf"
        with lf.GGUFFile(src) as g:
            meta = dict(g.metadata)
            meta["bert.attention.causal"] = lf.boolean(True)
            lf.write_gguf(dst, meta, [lf.GGUFTensorOut(n, t.ggml_type, t.shape, bytes(g.raw(n)))
                                      for n, t in g.tensors.items()])
        self.refused(dst, ["bert.attention.causal"])

    def test_cased_wordpiece(self):
        """A BertNormalizer without lowercase (a cased model) is refused, naming it."""
        folder = WORK / "hf-bert-cased"
        if not (folder / "config.json").exists():
            _encoder_files().write_encoder_hf(folder, seed=3)
            tj = json.loads((folder / "tokenizer.json").read_text())
            tj["normalizer"]["lowercase"] = False
            (folder / "tokenizer.json").write_text(json.dumps(tj))
        self.refused(folder, ["BertNormalizer", "lowercase"])

    def test_encoder_does_not_generate(self):
        path = make("bert-mean-f32.gguf", "--arch", "bert", "--pooling", "mean", "--seed", "3")
        r = subprocess.run([AK, "generate", "-m", str(path), "-p", "hello", "-n", "4"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("embedding-only", r.stderr)


class Server:
    """`ak serve MODEL --port 0` for the length of a with-block."""

    def __init__(self, path):
        self.proc = subprocess.Popen([AK, "serve", str(path), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "http://" not in line:
            self.proc.kill()
            raise AssertionError(f"ak serve did not start: {line}{self.proc.stderr.read()}")
        self.base = line.split("on ")[-1].strip()  # http://127.0.0.1:PORT/v1

    def post(self, path, body):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.proc.stderr.close()


class TestServer(unittest.TestCase):
    """/v1/embeddings: the vectors of ak_llm_model_embed (`ak embed`), float and base64,
    every input form, and 400s naming the field."""

    def check_vectors(self, srv, path, texts):
        want = ak_embed(path, texts)
        ids = [d["tokens"] for d in want["data"]]
        want = [np.array(d["embedding"]) for d in want["data"]]
        for body in ({"input": texts if len(texts) > 1 else texts[0], "model": "m", "user": "u"},
                     {"input": ids}, {"input": ids, "encoding_format": "base64"}):
            code, r = srv.post("/embeddings", body)
            self.assertEqual(code, 200, r)
            self.assertEqual(r["usage"]["prompt_tokens"], sum(len(i) for i in ids))
            self.assertEqual([d["index"] for d in r["data"]], list(range(len(texts))))
            for d, w in zip(r["data"], want):
                e = d["embedding"]
                v = np.frombuffer(base64.b64decode(e), "<f4") if isinstance(e, str) else np.array(e)
                self.assertEqual(v.shape, w.shape)
                self.assertLess(float(np.abs(v - w).max()), 1e-7)
        code, r = srv.post("/embeddings", {"input": ids[0]})  # one flat array of ids
        self.assertEqual(code, 200, r)
        self.assertLess(float(np.abs(np.array(r["data"][0]["embedding"]) - want[0]).max()), 1e-7)

    def test_encoder(self):
        path = make("bert-mean-f32.gguf", "--arch", "bert", "--pooling", "mean", "--seed", "3")
        with Server(path) as srv:
            self.check_vectors(srv, path, TEXTS)
            self.check_vectors(srv, path, TEXTS[:1])
            dim = ak_embed(path, ["a"])["dim"]
            bad = [({"input": []}, "input"), ({"input": 3}, "input"), ({"input": [""]}, "input"),
                   ({"input": [[1, -2]]}, "input"), ({"input": [["a"]]}, "input"),
                   ({}, "input"), ({"input": "a", "encoding_format": "hex"}, "encoding_format"),
                   ({"input": "a", "dimensions": dim // 2}, "dimensions"),
                   ({"input": "a", "model": 5}, "model"),
                   ({"input": ["ok", "a " * 100]}, "input")]
            for body, param in bad:
                code, r = srv.post("/embeddings", body)
                self.assertEqual((code, r["error"]["param"]), (400, param), (body, r))
            code, r = srv.post("/embeddings", {"input": ["ok", "a " * 100]})
            self.assertIn("input[1]", r["error"]["message"])
            code, r = srv.post("/embeddings", {"input": "a", "dimensions": dim})
            self.assertEqual(code, 200, r)
            for path_, body in (("/completions", {"prompt": "a"}),
                                ("/chat/completions", {"messages": [{"role": "user", "content": "a"}]})):
                code, r = srv.post(path_, body)
                self.assertEqual(code, 400, r)
                self.assertIn("embedding model", r["error"]["message"])

    def test_decoder(self):
        base = make("llama.gguf", "--arch", "llama", "--dim", "64", "--layers", "2",
                    "--heads", "4", "--kv-heads", "2", "--ffn", "128", "--ctx", "256")
        path = with_pooling(base, WORK / "llama-pool1.gguf", 1)
        with Server(path) as srv:
            self.check_vectors(srv, path, TEXTS[:3])
            code, r = srv.post("/completions", {"prompt": "a", "max_tokens": 2})
            self.assertEqual(code, 200, r)  # a decoder still generates


if __name__ == "__main__":
    unittest.main()
