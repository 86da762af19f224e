"""llama.cpp as a reference engine: a ctypes binding of libllama (the prebuilt libraries
of node-llama-cpp that scripts/setup installs) for precision checks of accelkit's LLM
engine — load a GGUF file, tokenize and detokenize, the logits of every position of a
prompt, greedy generation (one sequence or several decoded together), the GBNF grammar
sampler (Grammar: allowed tokens, accept), and llama_model_quantize.

    from accelkit import llamacpp
    with llamacpp.Model("m.gguf") as m:
        ids = m.tokenize("Hello world")              # add_special=True: BOS if the vocab adds it
        with m.context(n_ctx=256) as ctx:
            logits = ctx.logits(ids)                 # numpy float32 [len(ids), n_vocab]
            tokens = ctx.greedy(ids, 64)             # 64 argmax tokens, own KV cache
    llamacpp.quantize("m-f32.gguf", "m-q8_0.gguf", "q8_0")

Where the libraries are: the `folder` argument of load_library(), else $AK_LLAMACPP_LIB (a
folder, or the libllama file itself), else this checkout's
node_modules/@node-llama-cpp/linux-x64/bins/linux-x64.

No header is needed at run time, but llama.cpp passes its parameter structs by value and
changes them between releases, so the fields used here are located from llama.h of the
release node-llama-cpp 3.22.1 ships (load_mode/lazy_mode in llama_model_params,
n_outputs_max_per_seq in llama_context_params) and each is CHECKED against the defaults the
library returns before it is written (check_layouts): a library of another layout is
refused with a message, never driven with a wrong offset. Structs are held in buffers
larger than the C ones: returned through a hidden pointer and passed by value in memory,
so the extra bytes are never read.

This module needs numpy and nothing of libaccelkit: `ak align` runs it by path.
"""
import ctypes as C
import glob
import os
import struct
from pathlib import Path

import numpy as np

DEFAULT_FOLDER = Path(__file__).resolve().parents[2] / "node_modules" / "@node-llama-cpp" / \
    "linux-x64" / "bins" / "linux-x64"

# llama_ftype of each type name (as `scripts/llm-make-model --type` and `ak convert --type`
# spell them), for llama_model_quantize
FTYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9,
          "q2_k": 10, "q3_k_s": 11, "q3_k_m": 12, "q3_k_l": 13, "q4_k_s": 14, "q4_k_m": 15,
          "q5_k_s": 16, "q5_k_m": 17, "q6_k": 18, "iq4_nl": 25, "iq4_xs": 30, "bf16": 32}
# ggml_type of the KV cache types offered (type_k / type_v)
KV_TYPES = {"f32": 0, "f16": 1}


class LlamaCppError(RuntimeError):
    """llama.cpp is missing, of an unexpected layout, or refused a call."""


class _Params(C.Structure):
    """Room for one of llama.cpp's parameter structs (each under 256 bytes)."""
    _fields_ = [("raw", C.c_uint8 * 1024)]

    def get(self, fmt, offset):
        return struct.unpack_from(fmt, bytes(self.raw), offset)[0]

    def put(self, fmt, offset, value):
        buf = bytearray(self.raw)
        struct.pack_into(fmt, buf, offset, value)
        C.memmove(self.raw, bytes(buf), len(buf))


class _Batch(C.Structure):
    """struct llama_batch (unchanged since llama.cpp replaced logits_all by per-token
    output flags)."""
    _fields_ = [("n_tokens", C.c_int32), ("token", C.POINTER(C.c_int32)),
                ("embd", C.c_void_p), ("pos", C.POINTER(C.c_int32)),
                ("n_seq_id", C.POINTER(C.c_int32)),
                ("seq_id", C.POINTER(C.POINTER(C.c_int32))), ("logits", C.POINTER(C.c_int8))]


assert C.sizeof(_Batch) == 56, "struct llama_batch is 56 bytes on x86-64"


class _TokenData(C.Structure):
    """struct llama_token_data."""
    _fields_ = [("id", C.c_int32), ("logit", C.c_float), ("p", C.c_float)]


class _TokenDataArray(C.Structure):
    """struct llama_token_data_array (a sampler's candidates)."""
    _fields_ = [("data", C.POINTER(_TokenData)), ("size", C.c_size_t),
                ("selected", C.c_int64), ("sorted", C.c_bool)]

# Field offsets (x86-64) in llama.h of this release, and what check_layouts expects there
# in the library's defaults.
MODEL_VOCAB_ONLY = 72    # after devices, buft overrides, 5 int32 (… load_mode, lazy_mode,
                         # main_gpu), tensor_split, progress callback + data, kv_overrides
MODEL_KV_OVERRIDES = 64
CTX_N_CTX, CTX_N_BATCH, CTX_N_UBATCH, CTX_N_SEQ_MAX = 0, 4, 8, 12
CTX_N_THREADS, CTX_N_THREADS_BATCH = 28, 32
CTX_FLASH_ATTN = 52      # enum llama_flash_attn_type: -1 auto, 0 disabled, 1 enabled
CTX_CB_EVAL = 88
CTX_TYPE_K, CTX_TYPE_V = 104, 108
QUANT_NTHREAD, QUANT_FTYPE, QUANT_PURE = 0, 4, 19
QUANT_OUTPUT_TYPE, QUANT_EMBD_TYPE = 8, 12

_LOG_FN = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)
_GGML_LOG_ERROR = 4


class _Library:
    """libllama and libggml, loaded once per process."""

    def __init__(self, folder):
        self.folder = folder
        self.errors = []  # llama.cpp's error log lines, for the messages of failures
        self._log = _LOG_FN(self._on_log)  # kept alive: llama.cpp holds the pointer
        try:
            ggml = C.CDLL(_find(folder, "libggml"), mode=C.RTLD_GLOBAL)
            self.lib = C.CDLL(_find(folder, "libllama"))
        except OSError as e:
            raise LlamaCppError(f"cannot load llama.cpp from {folder}: {e}") from e
        self.lib.llama_log_set(self._log, None)
        ggml.ggml_backend_load_all_from_path.argtypes = [C.c_char_p]
        ggml.ggml_backend_load_all_from_path(str(folder).encode())  # this CPU's variant
        self.lib.llama_backend_init()
        self._declare()
        check_layouts(self)

    def _on_log(self, level, text, _user):
        if level == _GGML_LOG_ERROR and text:
            self.errors.append(text.decode(errors="replace").rstrip())
            del self.errors[:-20]

    def last_errors(self):
        return "; ".join(self.errors[-3:]) or "no message from llama.cpp"

    def _declare(self):
        P, V, I32 = C.c_void_p, None, C.c_int32
        sig = {
            "llama_model_default_params": ([], _Params),
            "llama_context_default_params": ([], _Params),
            "llama_model_quantize_default_params": ([], _Params),
            "llama_model_load_from_file": ([C.c_char_p, _Params], P),
            "llama_model_free": ([P], V),
            "llama_model_get_vocab": ([P], P),
            "llama_vocab_n_tokens": ([P], I32),
            "llama_vocab_get_add_bos": ([P], C.c_bool),
            "llama_vocab_bos": ([P], I32),
            "llama_vocab_eos": ([P], I32),
            "llama_tokenize": ([P, C.c_char_p, I32, C.POINTER(I32), I32, C.c_bool, C.c_bool], I32),
            "llama_token_to_piece": ([P, I32, C.c_char_p, I32, I32, C.c_bool], I32),
            "llama_detokenize": ([P, C.POINTER(I32), I32, C.c_char_p, I32, C.c_bool, C.c_bool], I32),
            "llama_init_from_model": ([P, _Params], P),
            "llama_free": ([P], V),
            "llama_n_ctx": ([P], C.c_uint32),
            "llama_n_batch": ([P], C.c_uint32),
            "llama_n_seq_max": ([P], C.c_uint32),
            "llama_set_n_threads": ([P, I32, I32], V),
            "llama_batch_init": ([I32, I32, I32], _Batch),
            "llama_batch_free": ([_Batch], V),
            "llama_decode": ([P, _Batch], I32),
            "llama_get_logits_ith": ([P, I32], C.POINTER(C.c_float)),
            "llama_get_memory": ([P], P),
            "llama_memory_clear": ([P, C.c_bool], V),
            "llama_model_quantize": ([C.c_char_p, C.c_char_p, C.POINTER(_Params)], C.c_uint32),
            # embeddings
            "llama_set_embeddings": ([P, C.c_bool], V),
            "llama_pooling_type": ([P], C.c_int),
            "llama_get_embeddings_seq": ([P, I32], C.POINTER(C.c_float)),
            "llama_get_embeddings_ith": ([P, I32], C.POINTER(C.c_float)),
            "llama_model_n_embd": ([P], I32),
            # grammar-constrained sampling (the GBNF oracle)
            "llama_sampler_init_grammar": ([P, C.c_char_p, C.c_char_p], P),
            "llama_sampler_apply": ([P, C.POINTER(_TokenDataArray)], V),
            "llama_sampler_accept": ([P, I32], V),
            "llama_sampler_free": ([P], V),
        }
        for name, (args, res) in sig.items():
            fn = getattr(self.lib, name)
            fn.argtypes, fn.restype = args, res


def _find(folder, stem):
    """libNAME.so, else the versioned libNAME.v*.so node-llama-cpp ships."""
    for pattern in (f"{stem}.so", f"{stem}.v*.so", f"{stem}.so.*"):
        hits = sorted(glob.glob(os.path.join(folder, pattern)))
        if hits:
            return hits[0]
    raise LlamaCppError(f"no {stem}.so in {folder}")


def check_layouts(library):
    """The defaults at the offsets this module writes are what llama.h of this release
    says they are; anything else means another layout: refuse rather than guess."""
    lib = library.lib
    mp, cp, qp = (lib.llama_model_default_params(), lib.llama_context_default_params(),
                  lib.llama_model_quantize_default_params())
    bad = []
    # kv_overrides NULL, then vocab_only, check_tensors, use_extra_bufts (true), no_host,
    # no_alloc, load_mtp
    if mp.get("<Q", MODEL_KV_OVERRIDES) != 0 or \
            bytes(mp.raw[MODEL_VOCAB_ONLY:MODEL_VOCAB_ONLY + 6]) != b"\0\0\1\0\0\0":
        bad.append("llama_model_params: vocab_only not at offset 72")
    got = struct.unpack_from("<4I", bytes(cp.raw), 0)
    if got != (512, 2048, 512, 1):
        bad.append(f"llama_context_params: n_ctx/n_batch/n_ubatch/n_seq_max defaults {got}")
    if cp.get("<i", CTX_FLASH_ATTN) != -1 or cp.get("<Q", CTX_CB_EVAL) != 0 or \
            (cp.get("<i", CTX_TYPE_K), cp.get("<i", CTX_TYPE_V)) != (1, 1):
        bad.append("llama_context_params: flash_attn_type/type_k/type_v not where expected")
    if cp.get("<i", CTX_N_THREADS) <= 0 or cp.get("<i", CTX_N_THREADS_BATCH) <= 0:
        bad.append("llama_context_params: n_threads not at offset 28")
    # nthread 0, ftype Q8_0 (7), output/embedding types GGML_TYPE_COUNT, then
    # allow_requantize, quantize_output_tensor (true), only_copy, pure, keep_split
    if (qp.get("<i", QUANT_NTHREAD), qp.get("<i", QUANT_FTYPE)) != (0, 7) or \
            qp.get("<i", QUANT_OUTPUT_TYPE) < 30 or \
            bytes(qp.raw[16:21]) != b"\0\1\0\0\0":
        bad.append("llama_model_quantize_params: nthread/ftype/pure not where expected")
    if bad:
        raise LlamaCppError("this libllama's structs are not the layout accelkit.llamacpp "
                            "knows (node-llama-cpp 3.22.1, scripts/setup): " + "; ".join(bad))


_library = None


def library_folder(folder=None):
    """The folder the libraries are taken from (see the module's docstring)."""
    if folder is None:
        env = os.environ.get("AK_LLAMACPP_LIB")
        folder = (os.path.dirname(env) if env and os.path.isfile(env) else env) or DEFAULT_FOLDER
    return Path(folder)


def load_library(folder=None):
    """The process's llama.cpp (loaded on first use; a later folder must be the same)."""
    global _library
    folder = library_folder(folder)
    if _library is not None:
        if Path(_library.folder).resolve() != folder.resolve():
            raise LlamaCppError(f"llama.cpp is already loaded from {_library.folder}")
        return _library
    if not folder.is_dir() or not glob.glob(str(folder / "libllama*.so*")):
        raise LlamaCppError(
            f"llama.cpp's libllama is not in {folder}: set AK_LLAMACPP_LIB to the folder "
            "holding libllama*.so, or run scripts/setup in an accelkit checkout (it installs "
            "node-llama-cpp's prebuilt @node-llama-cpp/linux-x64 into its node_modules/)")
    _library = _Library(folder)
    return _library


class Model:
    """A GGUF model loaded by llama.cpp (vocab_only: only its tokenizer)."""

    def __init__(self, path, vocab_only=False, folder=None):
        self._lib = load_library(folder)
        lib = self._lib.lib
        params = lib.llama_model_default_params()
        params.put("<B", MODEL_VOCAB_ONLY, 1 if vocab_only else 0)
        self.path = str(path)
        self._lib.errors.clear()
        self.handle = lib.llama_model_load_from_file(self.path.encode(), params)
        if not self.handle:
            raise LlamaCppError(f"llama.cpp cannot load {path}: {self._lib.last_errors()}")
        self.vocab = lib.llama_model_get_vocab(self.handle)
        self.n_vocab = lib.llama_vocab_n_tokens(self.vocab)
        self.add_bos = bool(lib.llama_vocab_get_add_bos(self.vocab))
        self.bos = lib.llama_vocab_bos(self.vocab)
        self.eos = lib.llama_vocab_eos(self.vocab)

    def close(self):
        if self.handle:
            self._lib.lib.llama_model_free(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids of text (str or UTF-8 bytes). add_special: BOS/EOS as the vocabulary
        asks; parse_special: control-token texts in the input become those tokens."""
        raw = text.encode() if isinstance(text, str) else bytes(text)
        cap = len(raw) + 8
        for _ in range(2):
            out = (C.c_int32 * cap)()
            n = self._lib.lib.llama_tokenize(self.vocab, raw, len(raw), out, cap,
                                             add_special, parse_special)
            if n >= 0:
                return list(out[:n])
            cap = -n
        raise LlamaCppError("llama_tokenize: the token count did not settle")

    def token_to_piece(self, token, special=True):
        """The bytes token stands for (special: control tokens as their text)."""
        cap = 32
        while True:
            buf = C.create_string_buffer(cap)
            n = self._lib.lib.llama_token_to_piece(self.vocab, int(token), buf, cap, 0, special)
            if n >= 0:
                return buf.raw[:n]
            cap = -n

    def detokenize(self, ids, remove_special=False, unparse_special=False):
        arr = (C.c_int32 * max(len(ids), 1))(*ids)
        cap = 16 * len(ids) + 16
        while True:
            buf = C.create_string_buffer(cap)
            n = self._lib.lib.llama_detokenize(self.vocab, arr, len(ids), buf, cap,
                                               remove_special, unparse_special)
            if n >= 0:
                return buf.raw[:n].decode(errors="replace")
            cap = -n

    def context(self, **kwargs):
        return Context(self, **kwargs)


class Context:
    """A llama.cpp context (KV cache) over a model. kv_type "f16" is llama.cpp's default;
    "f32" removes the cache's rounding; flash_attn None leaves llama.cpp's choice (auto)."""

    def __init__(self, model, n_ctx=512, n_batch=512, n_seq=1, threads=1, kv_type="f16",
                 flash_attn=None):
        if model.handle is None:
            raise LlamaCppError("the model is closed")
        if kv_type not in KV_TYPES:
            raise LlamaCppError(f"kv_type '{kv_type}' is not one of {sorted(KV_TYPES)}")
        self.model, self._lib = model, model._lib
        lib = self._lib.lib
        p = lib.llama_context_default_params()
        p.put("<I", CTX_N_CTX, n_ctx)
        p.put("<I", CTX_N_BATCH, n_batch)
        p.put("<I", CTX_N_UBATCH, n_batch)
        p.put("<I", CTX_N_SEQ_MAX, n_seq)
        p.put("<i", CTX_N_THREADS, threads)
        p.put("<i", CTX_N_THREADS_BATCH, threads)
        p.put("<i", CTX_TYPE_K, KV_TYPES[kv_type])
        p.put("<i", CTX_TYPE_V, KV_TYPES[kv_type])
        if flash_attn is not None:
            p.put("<i", CTX_FLASH_ATTN, 1 if flash_attn else 0)
        self._lib.errors.clear()
        self.handle = lib.llama_init_from_model(model.handle, p)
        if not self.handle:
            raise LlamaCppError(f"llama.cpp cannot make a context: {self._lib.last_errors()}")
        self.n_ctx, self.n_batch = lib.llama_n_ctx(self.handle), lib.llama_n_batch(self.handle)
        self.n_seq = lib.llama_n_seq_max(self.handle)

    def close(self):
        if self.handle:
            self._lib.lib.llama_free(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def clear(self):
        lib = self._lib.lib
        lib.llama_memory_clear(lib.llama_get_memory(self.handle), True)

    def _decode(self, tokens, want_logits):
        """One llama_decode of (token, pos, seq) triples; returns the logits rows of those
        flagged in want_logits, in order, as float32 arrays."""
        lib, n = self._lib.lib, len(tokens)
        batch = lib.llama_batch_init(n, 0, 1)
        try:
            for i, (tok, pos, seq) in enumerate(tokens):
                batch.token[i], batch.pos[i] = tok, pos
                batch.n_seq_id[i], batch.seq_id[i][0] = 1, seq
                batch.logits[i] = 1 if want_logits[i] else 0
            batch.n_tokens = n
            self._lib.errors.clear()
            rc = lib.llama_decode(self.handle, batch)
            if rc != 0:
                raise LlamaCppError(f"llama_decode returned {rc}: {self._lib.last_errors()}")
            rows, nv = [], self.model.n_vocab
            for i in range(n):
                if want_logits[i]:
                    ptr = lib.llama_get_logits_ith(self.handle, i)
                    rows.append(np.ctypeslib.as_array(ptr, (nv,)).copy())
            return rows
        finally:
            lib.llama_batch_free(batch)

    def _check_room(self, n_tokens):
        per_seq = self.n_ctx // max(self.n_seq, 1)
        if n_tokens > per_seq:
            raise LlamaCppError(f"{n_tokens} tokens do not fit the context ({per_seq} a sequence)")

    def logits(self, ids, seq=0):
        """Logits after each of ids (one prefill from an empty cache): float32 [n, n_vocab]."""
        self._check_room(len(ids))
        self.clear()
        rows = []
        for start in range(0, len(ids), self.n_batch):
            chunk = [(t, start + i, seq) for i, t in enumerate(ids[start:start + self.n_batch])]
            rows += self._decode(chunk, [True] * len(chunk))
        return np.stack(rows)

    def greedy(self, ids, n, with_logits=False):
        """n argmax tokens after the prompt ids (no stop at end of sequence); with
        with_logits also the logits each token was chosen from ([n, n_vocab])."""
        out, chosen_from = self.greedy_many([ids], n, with_logits=True)
        return (out[0], chosen_from[0]) if with_logits else out[0]

    def greedy_many(self, prompts, n, with_logits=False):
        """Greedy generation of n tokens for several prompts decoded together (sequence s
        of the cache holds prompt s; needs n_seq >= len(prompts))."""
        if len(prompts) > self.n_seq:
            raise LlamaCppError(f"{len(prompts)} prompts need a context with n_seq >= that")
        if any(not p for p in prompts):
            raise LlamaCppError("an empty prompt")
        self._check_room(max(len(p) for p in prompts) + n)
        self.clear()
        last = [None] * len(prompts)
        pending = [(t, i, s) for s, p in enumerate(prompts) for i, t in enumerate(p)]
        flags = [i == len(prompts[s]) - 1 for s, p in enumerate(prompts) for i in range(len(p))]
        for start in range(0, len(pending), self.n_batch):
            rows = self._decode(pending[start:start + self.n_batch], flags[start:start + self.n_batch])
            for (_, _, s), f in zip(pending[start:start + self.n_batch], flags[start:start + self.n_batch]):
                if f:
                    last[s] = rows.pop(0)
        outs = [[] for _ in prompts]
        seen = [[] for _ in prompts]
        for step in range(n):
            for s in range(len(prompts)):
                seen[s].append(last[s])
                outs[s].append(int(np.argmax(last[s])))
            if step + 1 < n:
                step_batch = [(outs[s][-1], len(prompts[s]) + step, s) for s in range(len(prompts))]
                last = self._decode(step_batch, [True] * len(prompts))
        return (outs, [np.stack(x) for x in seen]) if with_logits else outs


class Grammar:
    """llama.cpp's GBNF grammar sampler over a model's vocabulary: which tokens may come
    next (allowed()), and advancing by one of them (accept()). Accepting a token the grammar
    rejects makes llama.cpp throw through C, so accept() refuses it here first."""

    def __init__(self, model, gbnf, root="root"):
        self._model = model
        self._lib = model._lib
        self._lib.errors.clear()
        self.handle = self._lib.lib.llama_sampler_init_grammar(model.vocab, gbnf.encode(), root.encode())
        if not self.handle:
            raise LlamaCppError(f"llama.cpp refused the grammar: {self._lib.last_errors()}")
        # the candidates, as numpy records laid out like llama_token_data
        self._data = np.zeros(model.n_vocab, np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]))
        assert self._data.itemsize == C.sizeof(_TokenData)
        self._allowed = None

    def allowed(self):
        """The token ids the grammar accepts next, ascending."""
        d = self._data
        d["id"], d["logit"], d["p"] = np.arange(len(d)), 0.0, 0.0
        arr = _TokenDataArray(C.cast(d.ctypes.data, C.POINTER(_TokenData)), len(d), -1, False)
        self._lib.lib.llama_sampler_apply(self.handle, C.byref(arr))
        kept = d[:arr.size]
        self._allowed = set(kept["id"][np.isfinite(kept["logit"])].tolist())
        return sorted(self._allowed)

    def accept(self, token):
        if self._allowed is None or token not in self._allowed:
            raise LlamaCppError(f"token {token} is not one the grammar allows now")
        self._lib.lib.llama_sampler_accept(self.handle, int(token))
        self._allowed = None

    def close(self):
        if self.handle:
            self._lib.lib.llama_sampler_free(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def embed(ctx, ids):
    """Embeddings: the raw (not normalized) output of one sequence with the pooling the
    model's GGUF asks for — [n_embd] pooled, or [n, n_embd] per token under pooling none.
    The whole sequence goes in one llama_decode (an encoder needs it in one ubatch)."""
    lib = ctx._lib.lib
    ctx._check_room(len(ids))
    if len(ids) > ctx.n_batch:
        raise LlamaCppError(f"{len(ids)} tokens exceed the batch ({ctx.n_batch})")
    lib.llama_set_embeddings(ctx.handle, True)
    ctx.clear()
    n_embd = lib.llama_model_n_embd(ctx.model.handle)
    batch = lib.llama_batch_init(len(ids), 0, 1)
    try:
        for i, tok in enumerate(ids):
            batch.token[i], batch.pos[i] = tok, i
            batch.n_seq_id[i], batch.seq_id[i][0] = 1, 0
            batch.logits[i] = 1
        batch.n_tokens = len(ids)
        ctx._lib.errors.clear()
        rc = lib.llama_decode(ctx.handle, batch)
        if rc != 0:
            raise LlamaCppError(f"llama_decode returned {rc}: {ctx._lib.last_errors()}")
        if lib.llama_pooling_type(ctx.handle) == 0:
            rows = [np.ctypeslib.as_array(lib.llama_get_embeddings_ith(ctx.handle, i),
                                          (n_embd,)).copy() for i in range(len(ids))]
            return np.stack(rows)
        ptr = lib.llama_get_embeddings_seq(ctx.handle, 0)
        if not ptr:
            raise LlamaCppError("llama_get_embeddings_seq gave nothing")
        return np.ctypeslib.as_array(ptr, (n_embd,)).copy()
    finally:
        lib.llama_batch_free(batch)


def quantize(src, dst, type_name, threads=1, pure=True, folder=None):
    """llama_model_quantize of GGUF src into dst as type_name (a FTYPES key). pure: every
    matrix of that type (no k-quant mixture, output.weight included), as accelkit's
    `ak convert --type` writes a plain type; pure=False gives llama.cpp's usual mix of the
    *_M/*_S presets."""
    if type_name not in FTYPES:
        raise LlamaCppError(f"unknown type '{type_name}' (one of {', '.join(FTYPES)})")
    library = load_library(folder)
    lib = library.lib
    p = lib.llama_model_quantize_default_params()
    p.put("<i", QUANT_NTHREAD, threads)
    p.put("<i", QUANT_FTYPE, FTYPES[type_name])
    p.put("<B", QUANT_PURE, 1 if pure else 0)
    library.errors.clear()
    rc = lib.llama_model_quantize(str(src).encode(), str(dst).encode(), C.byref(p))
    if rc != 0:
        raise LlamaCppError(f"llama_model_quantize {src} -> {type_name} failed ({rc}): "
                            f"{library.last_errors()}")
