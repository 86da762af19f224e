#!/usr/bin/python3
"""llama.cpp peer measurement, as llama-bench does it, on the llama.cpp shared libraries
that node-llama-cpp ships prebuilt (@node-llama-cpp/linux-x64, installed by
scripts/setup): prompt processing of N_PROMPT tokens in one llama_decode (pp) and
N_GEN single-token llama_decode calls with the last token's logits (tg), each from an
empty KV cache, median of REPS runs after one warm-up; with SEQS > 1 also batched decode
(bd): SEQS sequences advanced together, one token each per llama_decode (a batch from
llama_batch_init, every token with its logits), N_GEN steps after the step that feeds
every sequence its first token, in tokens/s over all sequences.

    llamacpp_bench.py MODEL.gguf THREADS [N_PROMPT=128] [N_GEN=64] [REPS=3] [SEQS=0]

Prints one JSON line {model, threads, n_prompt, n_gen, pp_tps, tg_tps, seqs, bd_tps}.

Why not node-llama-cpp's JavaScript API: on this 2-core machine its per-token round trip
through the event loop collides with llama.cpp's two compute threads; 2-thread decode
steps then take a median 8–12 ms instead of 5 (p90 30 ms), slower than 1 thread. Calling
libllama directly, as llama-bench does, has no such extra thread.

Only opaque use is made of llama.cpp's parameter structs (default parameters are passed
back unchanged; threads are set with llama_set_n_threads), so no header is needed; the
default context is 512 tokens with llama.cpp's default attention settings. Batched decode
needs a context for SEQS sequences: the first four fields of llama_context_params
(n_ctx, n_batch, n_ubatch, n_seq_max, all uint32) are set, after checking that the
defaults read there are the documented 512, 2048, 512, 1.
"""
import ctypes as C
import json
import os
import statistics
import sys
import time

PEER = os.environ.get("LLAMAPEER", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                "..", ".."))  # the checkout (scripts/setup)
BINS = os.path.join(PEER, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64")


class Params(C.Structure):
    """Room for llama_model_params / llama_context_params (both far smaller): returned and
    passed by value in memory, so a larger buffer is ABI-compatible for these calls."""
    _fields_ = [("words", C.c_uint64 * 128)]


class Batch(C.Structure):
    """struct llama_batch, as llama_batch_get_one and llama_batch_init return it."""
    _fields_ = [("n_tokens", C.c_int32), ("token", C.c_void_p), ("embd", C.c_void_p),
                ("pos", C.c_void_p), ("n_seq_id", C.c_void_p), ("seq_id", C.c_void_p),
                ("logits", C.c_void_p)]


LOG_FN = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)
_quiet = LOG_FN(lambda level, text, user: None)  # kept alive: llama.cpp holds the pointer


def load_llama():
    ggml = C.CDLL(os.path.join(BINS, "libggml.v0.5.0.so"), mode=C.RTLD_GLOBAL)
    lib = C.CDLL(os.path.join(BINS, "libllama.v0.5.0.so"))
    lib.llama_log_set(_quiet, None)
    ggml.ggml_backend_load_all_from_path(BINS.encode())  # the CPU variant for this machine
    lib.llama_backend_init()
    lib.llama_model_default_params.restype = Params
    lib.llama_context_default_params.restype = Params
    lib.llama_model_load_from_file.argtypes = [C.c_char_p, Params]
    lib.llama_model_load_from_file.restype = C.c_void_p
    lib.llama_init_from_model.argtypes = [C.c_void_p, Params]
    lib.llama_init_from_model.restype = C.c_void_p
    lib.llama_set_n_threads.argtypes = [C.c_void_p, C.c_int32, C.c_int32]
    lib.llama_batch_get_one.argtypes = [C.POINTER(C.c_int32), C.c_int32]
    lib.llama_batch_get_one.restype = Batch
    lib.llama_decode.argtypes = [C.c_void_p, Batch]
    lib.llama_get_memory.argtypes = [C.c_void_p]
    lib.llama_get_memory.restype = C.c_void_p
    lib.llama_memory_clear.argtypes = [C.c_void_p, C.c_bool]
    lib.llama_synchronize.argtypes = [C.c_void_p]
    lib.llama_batch_init.argtypes = [C.c_int32, C.c_int32, C.c_int32]
    lib.llama_batch_init.restype = Batch
    lib.llama_batch_free.argtypes = [Batch]
    lib.llama_free.argtypes = [C.c_void_p]
    lib.llama_model_free.argtypes = [C.c_void_p]
    return lib


def decode(lib, ctx, ids):
    arr = (C.c_int32 * len(ids))(*ids)
    if lib.llama_decode(ctx, lib.llama_batch_get_one(arr, len(ids))) != 0:
        raise RuntimeError("llama_decode failed")


def time_prompt(lib, ctx, ids):
    lib.llama_memory_clear(lib.llama_get_memory(ctx), True)
    t0 = time.perf_counter()
    decode(lib, ctx, ids)
    lib.llama_synchronize(ctx)
    return len(ids) / (time.perf_counter() - t0)


def time_decode(lib, ctx, n_gen):
    lib.llama_memory_clear(lib.llama_get_memory(ctx), True)
    decode(lib, ctx, [1])
    t0 = time.perf_counter()
    for i in range(n_gen):
        decode(lib, ctx, [3 + i])
    lib.llama_synchronize(ctx)
    return n_gen / (time.perf_counter() - t0)


def context_for_seqs(lib, model, seqs, n_gen):
    """A context holding `seqs` sequences of 1 + n_gen tokens each (its KV cells may be
    split evenly between the sequences, so n_ctx covers all of them)."""
    params = lib.llama_context_default_params()
    head = C.cast(C.pointer(params), C.POINTER(C.c_uint32))
    if [head[i] for i in range(4)] != [512, 2048, 512, 1]:
        raise RuntimeError("llama_context_params: unexpected layout (n_ctx, n_batch, "
                           f"n_ubatch, n_seq_max = {[head[i] for i in range(4)]})")
    per_seq = (1 + n_gen + 255) // 256 * 256
    head[0] = seqs * per_seq         # n_ctx
    head[1] = head[2] = max(seqs, 512)  # n_batch, n_ubatch
    head[3] = seqs                   # n_seq_max
    return lib.llama_init_from_model(model, params)


def time_batched(lib, ctx, seqs, n_gen):
    """Tokens/s of `seqs` sequences decoded together, one token each per llama_decode."""
    lib.llama_memory_clear(lib.llama_get_memory(ctx), True)
    batch = lib.llama_batch_init(seqs, 0, 1)
    token = C.cast(batch.token, C.POINTER(C.c_int32))
    pos = C.cast(batch.pos, C.POINTER(C.c_int32))
    n_seq_id = C.cast(batch.n_seq_id, C.POINTER(C.c_int32))
    seq_id = C.cast(batch.seq_id, C.POINTER(C.POINTER(C.c_int32)))
    logits = C.cast(batch.logits, C.POINTER(C.c_int8))
    batch.n_tokens = seqs
    t0 = 0.0
    for step in range(n_gen + 1):  # step 0 feeds the first tokens and is not timed
        if step == 1:
            t0 = time.perf_counter()
        for s in range(seqs):
            token[s], pos[s], n_seq_id[s], logits[s] = 3 + (s * 131 + step) % 997, step, 1, 1
            seq_id[s][0] = s
        if lib.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode of the batch failed")
    lib.llama_synchronize(ctx)
    secs = time.perf_counter() - t0
    lib.llama_batch_free(batch)
    return seqs * n_gen / secs


def logits_by_token(model_path, ids, threads=1):
    """llama.cpp's logits after each of `ids`, fed one token per llama_decode: a list of
    n_vocab-long float lists. For checking that llama.cpp reads the generated files as the
    reference does."""
    lib = load_llama()
    lib.llama_get_logits_ith.argtypes = [C.c_void_p, C.c_int32]
    lib.llama_get_logits_ith.restype = C.POINTER(C.c_float)
    lib.llama_model_get_vocab.argtypes = [C.c_void_p]
    lib.llama_model_get_vocab.restype = C.c_void_p
    lib.llama_vocab_n_tokens.argtypes = [C.c_void_p]
    model = lib.llama_model_load_from_file(model_path.encode(), lib.llama_model_default_params())
    if not model:
        raise RuntimeError(f"llama.cpp cannot load {model_path}")
    n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(model))
    ctx = lib.llama_init_from_model(model, lib.llama_context_default_params())
    lib.llama_set_n_threads(ctx, threads, threads)
    rows = []
    for t in ids:
        decode(lib, ctx, [t])
        rows.append(lib.llama_get_logits_ith(ctx, -1)[:n_vocab])
    lib.llama_free(ctx)
    lib.llama_model_free(model)
    return rows


def batched_median(lib, model, threads, seqs, n_gen, reps):
    """Median batched-decode tokens/s after one warm-up run; 0 when seqs < 2."""
    if seqs < 2:
        return 0.0
    ctx = context_for_seqs(lib, model, seqs, n_gen)
    if not ctx:
        raise RuntimeError(f"llama.cpp cannot make a context for {seqs} sequences")
    lib.llama_set_n_threads(ctx, threads, threads)
    runs = [time_batched(lib, ctx, seqs, n_gen) for _ in range(reps + 1)][1:]
    lib.llama_free(ctx)
    return statistics.median(runs)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: llamacpp_bench.py MODEL.gguf THREADS [N_PROMPT] [N_GEN] [REPS] [SEQS]")
    model_path, threads = sys.argv[1], int(sys.argv[2])
    given = [int(x) for x in sys.argv[3:7]]
    n_prompt, n_gen, reps, seqs = given + [128, 64, 3, 0][len(given):]
    lib = load_llama()
    model = lib.llama_model_load_from_file(model_path.encode(), lib.llama_model_default_params())
    if not model:
        sys.exit(f"llama.cpp cannot load {model_path}")
    ctx = lib.llama_init_from_model(model, lib.llama_context_default_params())
    lib.llama_set_n_threads(ctx, threads, threads)
    prompt = [3 + (i * 7919) % 997 for i in range(n_prompt)]  # fixed ids < 1000
    pp, tg = [], []
    for r in range(reps + 1):  # run 0 warms caches and faults the mapping in
        p = time_prompt(lib, ctx, prompt) if n_prompt else 0.0  # 0: pp left out
        g = time_decode(lib, ctx, n_gen)
        if r:
            pp.append(p)
            tg.append(g)
    print(json.dumps({"model": model_path, "threads": threads, "n_prompt": n_prompt,
                      "n_gen": n_gen, "pp_tps": statistics.median(pp),
                      "tg_tps": statistics.median(tg), "seqs": seqs,
                      "bd_tps": batched_median(lib, model, threads, seqs, n_gen, reps)}))
    lib.llama_free(ctx)
    lib.llama_model_free(model)


if __name__ == "__main__":
    main()
