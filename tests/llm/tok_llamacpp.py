"""llama.cpp (node-llama-cpp's prebuilt libllama, installed by scripts/setup) as the
tokenization oracle of GGUF vocabularies: load a GGUF and tokenize / detokenize strings
with llama_tokenize / llama_detokenize through ctypes (no headers: the parameter struct is
opaque room, as bench/llm/llamacpp_bench.py does).

    with LlamaVocab(path) as v:
        ids = v.tokenize("text", add_special=False, parse_special=True)
"""
import ctypes as C
import os

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BINS = os.path.join(ROOT, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64")


class _Params(C.Structure):
    """Room for llama_model_params (far smaller), returned and passed by value."""
    _fields_ = [("words", C.c_uint64 * 128)]


_LOG_FN = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)
_quiet = _LOG_FN(lambda level, text, user: None)  # kept alive: llama.cpp holds the pointer
_lib = None


def _find(prefix):
    if not os.path.isdir(BINS):
        raise FileNotFoundError(f"{BINS} is missing: run scripts/setup (it installs the npm "
                                "package @node-llama-cpp/linux-x64, llama.cpp's libllama)")
    for name in sorted(os.listdir(BINS)):
        if name.startswith(prefix) and ".so" in name:
            return os.path.join(BINS, name)
    raise FileNotFoundError(f"no {prefix}*.so in {BINS}")


def library():
    global _lib
    if _lib is not None:
        return _lib
    ggml = C.CDLL(_find("libggml."), mode=C.RTLD_GLOBAL)
    lib = C.CDLL(_find("libllama."))
    lib.llama_log_set(_quiet, None)
    ggml.ggml_backend_load_all_from_path(BINS.encode())
    lib.llama_backend_init()
    lib.llama_model_default_params.restype = _Params
    lib.llama_model_load_from_file.argtypes = [C.c_char_p, _Params]
    lib.llama_model_load_from_file.restype = C.c_void_p
    lib.llama_model_get_vocab.argtypes = [C.c_void_p]
    lib.llama_model_get_vocab.restype = C.c_void_p
    lib.llama_model_free.argtypes = [C.c_void_p]
    lib.llama_tokenize.argtypes = [C.c_void_p, C.c_char_p, C.c_int32, C.POINTER(C.c_int32),
                                   C.c_int32, C.c_bool, C.c_bool]
    lib.llama_tokenize.restype = C.c_int32
    lib.llama_detokenize.argtypes = [C.c_void_p, C.POINTER(C.c_int32), C.c_int32, C.c_char_p,
                                     C.c_int32, C.c_bool, C.c_bool]
    lib.llama_detokenize.restype = C.c_int32
    _lib = lib
    return lib


class LlamaVocab:
    """A GGUF loaded by llama.cpp (a tiny model carrying the vocabulary: its weights are
    loaded too, which costs little)."""

    def __init__(self, path):
        self.lib = library()
        self.model = self.lib.llama_model_load_from_file(str(path).encode(),
                                                         self.lib.llama_model_default_params())
        if not self.model:
            raise RuntimeError(f"llama.cpp cannot load {path}")
        self.vocab = self.lib.llama_model_get_vocab(self.model)

    def tokenize(self, text, add_special=False, parse_special=True):
        raw = text.encode("utf-8")
        cap = len(raw) + 16
        buf = (C.c_int32 * cap)()
        n = self.lib.llama_tokenize(self.vocab, raw, len(raw), buf, cap, add_special, parse_special)
        if n < 0:
            raise RuntimeError(f"llama_tokenize needs {-n} tokens")
        return list(buf[:n])

    def detokenize(self, ids, remove_special=False, unparse_special=True):
        arr = (C.c_int32 * max(len(ids), 1))(*ids)
        cap = 16 * len(ids) + 64
        buf = C.create_string_buffer(cap)
        n = self.lib.llama_detokenize(self.vocab, arr, len(ids), buf, cap, remove_special,
                                      unparse_special)
        if n < 0:
            raise RuntimeError(f"llama_detokenize needs {-n} bytes")
        return buf.raw[:n].decode("utf-8", errors="replace")

    def close(self):
        if self.model:
            self.lib.llama_model_free(self.model)
            self.model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
