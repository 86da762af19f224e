"""llama.cpp as the oracle: the same GGUF file through accelkit (`ak logits`, `ak generate`,
libaccelkit's tokenizer) and through llama.cpp's libllama (python/accelkit/llamacpp.py,
node-llama-cpp's prebuilt libraries that scripts/setup installs). Models are random-weight
files of a small shape written by scripts/llm-make-model (deterministic seeds), kept in
<build>/llm-oracle/ beside $AK_BIN and made again only when their arguments change.

Cases (ARCHS x TYPES; see CASES): llama and qwen2 with every type, every other
architecture (mistral, qwen3, granite, gemma2, gemma3, mixtral, qwen2moe, qwen3moe, olmo2,
phi3, starcoder2) with f32 and q8_0 and llama.cpp's own q4_k_m of it (the whole cross
product would take minutes; `ak convert`, which writes the presets, converts llama and qwen2
only). Per case:
- the prompt's and 64 greedy tokens' logits (one prefill in each engine over the prompt
  followed by llama.cpp's 64 greedy tokens): worst row's max|ak - llama.cpp| / max|llama.cpp|
  within the case's bound (bounds(): TYPES[type].tol, widened for the archs of
  GELU_TABLE_FLOOR);
- top-1 agreement: accelkit's argmax at each generated position (teacher-forced on
  llama.cpp's tokens) equals llama.cpp's token in >= TYPES[type].agree of them;
- `ak generate --temp 0 --ignore-eos --kv-f32 -n 64` gives llama.cpp's 64 greedy tokens
  exactly when TYPES[type].exact; otherwise the first divergence is printed and must be a
  near-tie.
Also: files quantized by llama.cpp (llama_model_quantize of accelkit's f32 file) run in
accelkit with llama.cpp's logits, a GGUF written by `ak convert` runs in llama.cpp, and the
two vocabularies the models carry (llama2 SentencePiece, gpt2 byte-level BPE) give the same
ids in both engines on ~220 Unicode-heavy strings.

Both engines keep their KV cache in f32 (`ak logits` always does; `ak generate --kv-f32`),
and llama.cpp runs without flash attention (its CPU flash attention
rounds Q and K to f16; its default f16 cache alone costs ~2e-3 here): the oracle is then
llama.cpp's arithmetic of the weights, which is what a type's bound is about. llama.cpp
multiplies a matrix in the vector type of its weights: f16 weights with f16-rounded
activations, bf16 with bf16-rounded ones (8 bits of mantissa), q8_0/q4_0 with activations
quantized to q8_0 blocks and integer dot products. accelkit does the same for q8_0/q4_0
(errors of 1e-7 on most rows; a row where one activation sits on a rounding boundary
differs by up to ~1e-2) but multiplies f16/bf16 weights with f32 activations, so those
types differ by llama.cpp's activation rounding, carried through the layers. Measured worst
rows (prompt + 64 tokens) are printed by each case; the bounds leave ~3x room.

Greedy tokens: identical for the exact type (f32). For the others the first divergence
must be a near-tie — llama.cpp's logits of the two tokens within twice the type's bound of
each other — and the agreement rate holds. f16/bf16: llama.cpp's activation rounding, not
accelkit's, decides near-ties, so identical tokens are not to be had from these models.
q8_0/q4_0: identical on llama, qwen2 and llama.cpp's own files of them, but the `ak convert`
q8_0 model leaves them at token 55 (gap 2e-3), qwen2moe q8_0 at 21, qwen3moe q8_0 at 6: the two engines quantize an activation on a
rounding boundary differently now and then (accelkit: x·(1/(amax/127)), roundf, as ggml's
scalar reference; ggml's x86 code: x·(127/amax), round half to even), which moves that
row by up to ~1e-2. With the engine's default f16 KV cache (no --kv-f32) q8_0/q4_0 tokens
leave llama.cpp's at near-ties much sooner (qwen2 q8_0: token 2). A negative gap (qwen2
q4_k_m) means llama.cpp's own batched logits prefer accelkit's token: its one-token decode
steps and its batched pass of the same tokens round activations differently.

Adding a row:
- an architecture: one line in ARCHS, `"NAME": "EXTRA ARGS"` — NAME as
  `scripts/llm-make-model --arch` spells it, EXTRA ARGS anything beyond the common SHAPE
  (--tied, --vocab gpt2, a sliding window ...; the presets always get --vocab gpt2). It
  runs with CORE_TYPES and llama.cpp's LLAMACPP_ONLY files, or with every type of TYPES
  when in FULL_ARCHS. An arch of its own numerics in llama.cpp gets its allowance beside
  GELU_TABLE_FLOOR, with the measured figure.
- a type: one line in TYPES, `"NAME": Tol(tol, agree, exact, block)` — NAME as
  `scripts/llm-make-model --type` (and llama_model_quantize, accelkit.llamacpp.FTYPES)
  spell it; block 256 for the k-quants and IQ4_XS (the shape is then widened to whole
  super-blocks, MoE experts included), and PRESETS for the ones written by `ak convert`.
  Add it to QUANTIZED_BY_LLAMACPP too to check llama.cpp's own file of it.

Run: AK_BIN=build/ak python3 -m unittest -v tests/llm/test_llamacpp_oracle.py (ctest
llm/test_llamacpp_oracle). A missing llama.cpp is a failure naming scripts/setup.
"""
import collections
import concurrent.futures
import ctypes
import hashlib
import importlib.util
import os
import random
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MAKE = ROOT / "scripts" / "llm-make-model"
AK_BIN = os.environ.get("AK_BIN") or str(ROOT / "build" / "ak")
BUILD = Path(AK_BIN).resolve().parent
CACHE = BUILD / "llm-oracle"
AK_LIBRARY = os.environ.get("AK_LIBRARY") or str(BUILD / "libaccelkit.so")


def _load_llamacpp():
    """python/accelkit/llamacpp.py by path (the package's __init__ is not needed)."""
    spec = importlib.util.spec_from_file_location(
        "accelkit_llamacpp", ROOT / "python" / "accelkit" / "llamacpp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


llamacpp = _load_llamacpp()

Tol = collections.namedtuple("Tol", "tol agree exact block", defaults=(32,))

# the common small shape; block-256 types get dim 256 and ffn 512 (MoE experts 256)
SHAPE = "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 192"
# every architecture of scripts/llm-make-model; its defaults (ARCH_DEFAULTS) fill the rest
# (experts, soft-caps, gemma's window of 8). Mistral's window is wider than the prompt and
# its 64 tokens: llama.cpp loads a Mistral GGUF as arch `llama` and has no window there.
ARCHS = {
    "llama": "--seed 21 --vocab llama2",
    "qwen2": "--seed 22 --vocab gpt2 --tied",
    "mistral": "--seed 31 --vocab llama2 --sliding-window 512",
    "qwen3": "--seed 32 --vocab gpt2",
    "granite": "--seed 33 --vocab gpt2",
    "gemma2": "--seed 34 --vocab llama2 --layers 3",
    "gemma3": "--seed 35 --vocab llama2 --layers 6",
    "mixtral": "--seed 36 --vocab llama2",
    "qwen2moe": "--seed 37 --vocab gpt2",
    "qwen3moe": "--seed 38 --vocab gpt2",
    "olmo2": "--seed 39 --vocab gpt2",
    "phi3": "--seed 40 --vocab llama2",
    "starcoder2": "--seed 41 --vocab gpt2",
}
TYPES = {
    "f32": Tol(tol=1e-5, agree=1.0, exact=True),       # measured 1e-6
    "f16": Tol(tol=8e-3, agree=0.95, exact=False),     # 7e-4 .. 2.2e-3
    "bf16": Tol(tol=5e-2, agree=0.95, exact=False),    # 5e-3 .. 1.4e-2
    "q8_0": Tol(tol=4e-2, agree=0.97, exact=False),    # 4e-7 .. 1.2e-2 (see above)
    "q4_0": Tol(tol=4e-2, agree=0.9, exact=False),     # 4e-7 .. 7e-3
    # the presets (llama.cpp's per-tensor mixes, written by `ak convert`): both engines
    # quantize activations to q8_K blocks of 256 (one scale per 256 values where q8_0 has
    # one per 32), so an activation on a rounding boundary moves its row more; measured
    # worst rows (llama, qwen2; llama.cpp's q4_k_m of every arch) in the comments, bounds
    # ~3x the worst k-quant row (2.7e-2: qwen2 q3_k_m, q4_k_s)
    "q4_k_m": Tol(tol=8e-2, agree=0.9, exact=False, block=256),  # 3.6e-3 .. 2.0e-2
    "q5_k_m": Tol(tol=8e-2, agree=0.9, exact=False, block=256),  # 8.8e-3 .. 2.0e-2
    "q6_k": Tol(tol=8e-2, agree=0.9, exact=False, block=256),    # 4.3e-3 .. 1.2e-2
    "q3_k_m": Tol(tol=8e-2, agree=0.9, exact=False, block=256),  # 1.7e-2 .. 2.7e-2
    "q2_k": Tol(tol=8e-2, agree=0.9, exact=False, block=256),    # 4.8e-7 .. 1.8e-2
    "iq4_nl": Tol(tol=8e-2, agree=0.9, exact=False, block=256),  # 1.2e-2 .. 2.1e-2
    "iq4_xs": Tol(tol=8e-2, agree=0.9, exact=False, block=256),  # 5.0e-7 .. 1.4e-2
    "q3_k_s": Tol(tol=8e-2, agree=0.9, exact=False, block=256),  # 4.1e-7 .. 2.2e-2
    "q3_k_l": Tol(tol=8e-2, agree=0.9, exact=False, block=256),  # 1.7e-2 .. 2.4e-2
    "q4_k_s": Tol(tol=8e-2, agree=0.9, exact=False, block=256),  # 1.3e-2 .. 2.7e-2
    "q5_k_s": Tol(tol=8e-2, agree=0.9, exact=False, block=256),  # 1.3e-2 .. 2.2e-2
}
# architectures whose GELU llama.cpp computes through a table of f16 values (ggml's CPU
# GELU of f32 looks x up in a 64K-entry f16 table: each activation off by up to ~5e-4
# relative): a floor under every type's logit bound (3x the worst f32 row measured: gemma2
# 1.1e-3, gemma3 7.5e-4, starcoder2 3.9e-4 — accelkit's GELU is f32 and matches the NumPy
# reference to 1e-6), twice the quantized types' bounds (the table's noise moves more
# activations across q8 rounding boundaries: q8_0 measured 1.2e-2 .. 3.5e-2 where llama's
# is 5.9e-3, llama.cpp's q4_k_m 1.6e-2 .. 4.4e-2), and a lower top-1 agreement (q8_0
# measured 95-97% where llama and qwen2 give 100%). Greedy tokens stay identical for f32.
GELU_TABLE_FLOOR = {"gemma2": 4e-3, "gemma3": 4e-3, "starcoder2": 4e-3}
GELU_TABLE_AGREE = 0.9

# the cases: FULL_ARCHS with every type; the other architectures with CORE_TYPES from the
# generator (`ak convert`, which writes the presets, converts llama and qwen2 only), and
# q4_k_m as llama_model_quantize writes it (LLAMACPP_ONLY: llama.cpp's mix of accelkit's f32
# file of the block-256 shape). The whole cross product would take minutes.
FULL_ARCHS = ["llama", "qwen2"]
CORE_TYPES = ["f32", "q8_0"]
LLAMACPP_ONLY = ["q4_k_m"]
CASES = [(a, t) for a in ARCHS for t in TYPES if a in FULL_ARCHS or t in CORE_TYPES]
PRESETS = {"q4_k_m", "q5_k_m", "q6_k", "q3_k_m", "q2_k", "iq4_nl", "iq4_xs", "q3_k_s",
           "q3_k_l", "q4_k_s", "q5_k_s"}
# llama_model_quantize of each FULL_ARCHS model's f32 file: pure (one type for every matrix)
# for the plain types, llama.cpp's own mix for the presets; accelkit's logits on it are
# also compared with those on accelkit's own file of the type
QUANTIZED_BY_LLAMACPP = ["q8_0", "q4_0", "q4_k_m", "q6_k", "iq4_nl"]
N_GEN = 64
THREADS = 1
PROMPT = "The quick brown fox jumps over the lazy dog. Ünïcödé, 日本語, emoji 🦊 and code: x += 1"


def shape_for(arch, type_name):
    if TYPES[type_name].block != 256:
        return SHAPE
    experts = {"qwen2moe": " --expert-ffn 256 --shared-ffn 256",
               "qwen3moe": " --expert-ffn 256"}.get(arch, "")
    return "--dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512" + experts


def model_args(arch, type_name):
    """Generator arguments of a case; the presets are written by `ak convert` of an HF
    folder, which the generator does only with the gpt2 vocabulary."""
    extra = ARCHS[arch]
    if type_name in PRESETS:
        extra = extra.replace("--vocab llama2", "--vocab gpt2")
    return f"--arch {arch} {shape_for(arch, type_name)} {extra} --type {type_name}"


def bounds(arch, type_name):
    """The type's bounds, with GELU_TABLE_FLOOR's allowance for arch."""
    tol = TYPES[type_name]
    if arch not in GELU_TABLE_FLOOR:
        return tol
    return tol._replace(tol=max(2 * tol.tol, GELU_TABLE_FLOOR[arch]),
                        agree=min(tol.agree, GELU_TABLE_AGREE))


def f32_args(arch, type_name):
    """The f32 file of the same weights, shape and vocabulary as a case of type_name."""
    return model_args(arch, type_name).replace(f"--type {type_name}", "--type f32")


def llamacpp_types(arch):
    """The types llama_model_quantize writes of arch's f32 file in TestFiles."""
    return QUANTIZED_BY_LLAMACPP if arch in FULL_ARCHS else LLAMACPP_ONLY


def cached_model(args, stem, suffix=".gguf"):
    """The model of these generator arguments, made once into CACHE (named by a digest of
    the arguments and the generator, so a change of either makes it again)."""
    digest = hashlib.sha256((args + MAKE.read_text()).encode()).hexdigest()[:10]
    path = CACHE / f"{stem}-{digest}{suffix}"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        r = subprocess.run([sys.executable, str(MAKE), *args.split(), "--ak", AK_BIN,
                            "--out", str(tmp)], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"llm-make-model {args} failed:\n{r.stderr[-2000:]}")
        os.replace(tmp, path)
    return path


def ak(*args):
    r = subprocess.run([AK_BIN, *map(str, args)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"ak {' '.join(map(str, args))} failed ({r.returncode}):\n"
                             f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r.stdout


def ak_logits(path, ids):
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "logits.npy"
        ak("logits", "-m", path, "--ids", " ".join(map(str, ids)), "--out", out, "-t", THREADS)
        return np.load(out)


def ak_greedy(path, ids, n):
    out = ak("generate", "-m", path, "--ids", " ".join(map(str, ids)), "-n", n, "--temp", 0,
             "--ignore-eos", "--print-ids", "--kv-f32", "-t", THREADS)
    rows = [ln.split() for ln in out.splitlines() if ln.strip()]
    rows = [r for r in rows if all(t.lstrip("-").isdigit() for t in r)]
    if not rows:
        raise AssertionError(f"no line of ids in the output of ak generate:\n{out[-2000:]}")
    return [int(t) for t in rows[-1]]


def rel_error(ours, ref):
    """Worst row of max|ours - ref| / max|ref|."""
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(ours - ref).max(axis=-1) / np.abs(ref).max(axis=-1)))


def first_divergence(ours, theirs):
    """Index of the first differing token, or None."""
    return next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)


class Run:
    """llama.cpp's and accelkit's results for one GGUF file and prompt."""

    def __init__(self, path):
        with llamacpp.Model(path) as m:
            self.prompt = m.tokenize(PROMPT, add_special=True)
            n_ctx = len(self.prompt) + N_GEN + 8
            with m.context(n_ctx=n_ctx, n_batch=n_ctx, threads=THREADS, kv_type="f32",
                           flash_attn=False) as ctx:
                self.theirs_gen = ctx.greedy(self.prompt, N_GEN)
                self.full = self.prompt + self.theirs_gen
                self.theirs = ctx.logits(self.full)
            self.ours = ak_logits(path, self.full)
            self.ours_gen = ak_greedy(path, self.prompt, N_GEN)
            self.diverge_at = first_divergence(self.ours_gen, self.theirs_gen)
            self.divergence = "no divergence"
            if self.diverge_at is not None:
                i, a, b = self.diverge_at, self.ours_gen[self.diverge_at], self.theirs_gen[self.diverge_at]
                row = self.theirs[len(self.prompt) - 1 + i]
                # how far apart llama.cpp puts the two tokens, relative to its row's scale
                self.gap = float(row[b] - row[a]) / float(np.abs(row).max())
                self.divergence = (f"first divergence at token {i}: accelkit {a} "
                                   f"{m.token_to_piece(a)!r}, llama.cpp {b} "
                                   f"{m.token_to_piece(b)!r} (llama.cpp's gap {self.gap:.1e})")
        self.error = rel_error(self.ours, self.theirs)
        # accelkit's argmax where llama.cpp chose each generated token
        chosen = self.ours[len(self.prompt) - 1:-1].argmax(axis=1)
        self.agree = float(np.mean(chosen == np.array(self.theirs_gen)))

    def check(self, test, tol):
        """The type's bounds: logits, top-1 agreement, greedy tokens (see the docstring)."""
        test.assertLessEqual(self.error, tol.tol)
        test.assertGreaterEqual(self.agree, tol.agree)
        if tol.exact:
            test.assertEqual(self.ours_gen, self.theirs_gen, self.divergence)
        elif self.diverge_at is not None:
            test.assertLessEqual(self.gap, 2 * tol.tol, "not a near-tie: " + self.divergence)

    def report(self, name):
        print(f"\n  {name}: max rel logit error {self.error:.2e} over {len(self.full)} rows, "
              f"top-1 agreement {self.agree:.0%}, greedy {N_GEN}: {self.divergence}", end="")


def setUpModule():
    """llama.cpp must be there (scripts/setup), and every model is made first, two
    generators at a time."""
    llamacpp.load_library()
    jobs = [(model_args(a, t), f"{a}-{t}") for a, t in CASES]
    jobs += [(f32_args(a, t), f"{a}-f32") for a in ARCHS for t in llamacpp_types(a)]
    jobs = list(dict.fromkeys(jobs))  # one job per file: two would share a temporary name
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(cached_model, *job) for job in jobs]:
            f.result()


# RoPE scalings read from the GGUF file (f32: exact bounds): YaRN with an original context
# shorter than the prompt + generated tokens, in both RoPE layouts (qwen2 rotates halves,
# llama adjacent pairs)
ROPE_VARIANTS = {"qwen2-yarn": ("qwen2", "--rope-scaling yarn:4:32"),
                 "llama-yarn": ("llama", "--rope-scaling yarn:2.5:48")}


class TestOracle(unittest.TestCase):
    def test_rope_scaling(self):
        for name, (arch, extra) in ROPE_VARIANTS.items():
            with self.subTest(variant=name):
                run = Run(cached_model(f"{model_args(arch, 'f32')} {extra}", f"{name}-f32"))
                run.report(f"{name} f32")
                run.check(self, bounds(arch, "f32"))

    def test_cases(self):
        for arch, type_name in CASES:
            with self.subTest(arch=arch, type=type_name):
                run = Run(cached_model(model_args(arch, type_name), f"{arch}-{type_name}"))
                run.report(f"{arch} {type_name}")
                run.check(self, bounds(arch, type_name))


class TestFiles(unittest.TestCase):
    def test_quantized_by_llama_cpp_runs_in_accelkit(self):
        """llama_model_quantize of accelkit's f32 file: accelkit's logits on llama.cpp's file
        are llama.cpp's (the type's bound), and the same as on accelkit's own file of
        that type (the two quantizers agree)."""
        for arch in ARCHS:
            for type_name in llamacpp_types(arch):
                src = cached_model(f32_args(arch, type_name), f"{arch}-f32")
                with self.subTest(arch=arch, type=type_name), \
                        tempfile.TemporaryDirectory() as d:
                    dst = Path(d) / f"{arch}-{type_name}-llamacpp.gguf"
                    llamacpp.quantize(src, dst, type_name, threads=THREADS,
                                      pure=type_name not in PRESETS)
                    run = Run(dst)
                    run.report(f"{arch} {type_name} quantized by llama.cpp")
                    run.check(self, bounds(arch, type_name))
                    if (arch, type_name) not in CASES:
                        continue
                    own = cached_model(model_args(arch, type_name), f"{arch}-{type_name}")
                    same = rel_error(ak_logits(dst, run.full), ak_logits(own, run.full))
                    print(f"; accelkit on llama.cpp's vs its own {type_name} file {same:.1e}",
                          end="")
                    self.assertLessEqual(same, TYPES[type_name].tol)

    def test_ak_convert_output_runs_in_llama_cpp(self):
        """A GGUF written by accelkit's C converter (`ak convert` of a Hugging Face folder)."""
        folder = cached_model(f"--arch llama {SHAPE} --seed 23 --vocab gpt2 --format hf",
                              "llama-hf", suffix="")
        for type_name in ("f16", "q8_0"):
            with self.subTest(type=type_name), tempfile.TemporaryDirectory() as d:
                out = Path(d) / f"converted-{type_name}.gguf"
                ak("convert", folder, out, "--type", type_name)
                run = Run(out)
                run.report(f"ak convert --type {type_name}")
                run.check(self, TYPES[type_name])


class TestBinding(unittest.TestCase):
    def test_batched_greedy_is_each_sequence_alone(self):
        """accelkit.llamacpp's greedy_many (three sequences in one batch per step) gives
        each prompt its single-sequence tokens; detokenize is the pieces joined."""
        path = cached_model(model_args("llama", "f32"), "llama-f32")
        with llamacpp.Model(path) as m:
            prompts = [m.tokenize(t) for t in ("Hello world", PROMPT, "日本語 🦊")]
            with m.context(n_ctx=128, n_batch=128, kv_type="f32", flash_attn=False) as ctx:
                alone = [ctx.greedy(p, 12) for p in prompts]
            with m.context(n_ctx=3 * 128, n_batch=128, n_seq=3, kv_type="f32",
                           flash_attn=False) as ctx:
                self.assertEqual(ctx.greedy_many(prompts, 12), alone)
            # detokenize drops the space SentencePiece put in front of the first word
            pieces = b"".join(m.token_to_piece(t) for t in alone[0])
            self.assertEqual(m.detokenize(alone[0]).encode(), pieces.removeprefix(b" "))


# ---- tokenization of the vocabularies the models carry ------------------------------------

FRAGMENTS = [
    "Hello", " world", "  ", "\t", "\n", "\n\n", "   \n ", "123", "4567890", "3.14159", "-42",
    "naïve", "café", "Ünïcödé", "e\u0301", "a\u0308\u0304", "ﬁ", "Å", "ß", "İstanbul",
    "日本語", "中文字符", "한국어", "ひらがな", "カタカナ", "Ｆｕｌｌｗｉｄｔｈ",
    "🦊", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "∑x²", "→", "©®™", "\u200b", "\u00a0",
    "مرحبا", "שלום", "עברית ו-English", "नमस्ते", "ภาษาไทย", "Ελληνικά", "Привет", "ქართული",
    "def f(x):", "    return x**2", "if (a && b) { c++; }", "<div class=\"x\">", "</s>", "<s>",
    "<|endoftext|>", "'s", "'re", "don't", "I'm", "HTTP/1.1", "https://example.com/a?b=c",
    "snake_case_name", "CamelCaseName", "...", "!!!", "?!", "@user", "#tag", "$100", "50%",
]
BASE_STRINGS = ["", " ", "  ", "Hello world", " Hello World.", "\n \n", "a" * 50,
                "   leading", "trailing   ", "\u3000全角スペース"]


def tokenizer_strings(n=220, seed=5):
    """Fixed pseudo-random joins of FRAGMENTS (whitespace runs, scripts and emoji meet at
    every kind of boundary), after a few plain ones."""
    rng = random.Random(seed)
    out = list(BASE_STRINGS)
    while len(out) < n:
        parts = rng.choices(FRAGMENTS, k=rng.randint(1, 6))
        seps = [rng.choice(["", " ", "", "  "]) for _ in parts]
        out.append("".join(s + p for s, p in zip(seps, parts)))
    return out


class AccelkitTokenizer:
    """libaccelkit's tokenizer of a vocabulary GGUF, through its C API (ctypes)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(AK_LIBRARY)
        self.lib.ak_last_error.restype = ctypes.c_char_p
        self.g, self.tok = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.lib.ak_gguf_open(str(path).encode(), ctypes.byref(self.g)))
        self._check(self.lib.ak_tokenizer_from_gguf(self.g, ctypes.byref(self.tok)))

    def _check(self, status):
        if status != 0:
            raise AssertionError(f"libaccelkit: {self.lib.ak_last_error().decode()}")

    def encode(self, text):
        raw = text.encode()
        cap = len(raw) + 3
        ids, n = (ctypes.c_int32 * cap)(), ctypes.c_size_t()
        self._check(self.lib.ak_tokenizer_encode(self.tok, raw, ctypes.c_size_t(len(raw)),
                                                 2, ids, ctypes.c_size_t(cap), ctypes.byref(n)))
        return list(ids[:n.value])  # flags 2: AK_TOK_PARSE_SPECIAL, no BOS

    def close(self):
        self.lib.ak_tokenizer_free(self.tok)
        self.lib.ak_gguf_close(self.g)


class TestTokenization(unittest.TestCase):
    def test_vocabularies_of_the_models(self):
        strings = tokenizer_strings()
        for vocab in ("llama2", "gpt2"):
            with self.subTest(vocab=vocab):
                path = BUILD / "llm-vocab" / f"{vocab}.gguf"  # made by llm-make-model --vocab
                ours = AccelkitTokenizer(path)
                try:
                    with llamacpp.Model(path, vocab_only=True) as m:
                        bad = [(s, ours.encode(s), m.tokenize(s, False, True)) for s in strings]
                        bad = [b for b in bad if b[1] != b[2]]
                finally:
                    ours.close()
                print(f"\n  {vocab}: {len(strings) - len(bad)}/{len(strings)} strings "
                      "tokenized identically", end="")
                self.assertEqual(bad[:3], [], f"{len(bad)} strings differ")


if __name__ == "__main__":
    unittest.main()
