"""accelkit's super-block weight types against ggml itself: quantized bytes of random rows
(accelkit's ak_quantize_row vs ggml_quantize_chunk without an importance matrix — what
llama.cpp's quantizer writes; for Q8_K, which it does not write, quantize_row_q8_K_ref)
must be identical, and dequantized floats (ak_dequantize_row vs ggml's to_float) identical bit
for bit, for many random rows of several scales, with zeros, ties and all-zero blocks.

Needs libggml-base.so of node-llama-cpp (scripts/setup installs it); its absence fails."""
import ctypes
import os
import random
import struct
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GGML_DIR = ROOT / "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"

# ggml type id (= ak_wtype), name, elements per block, bytes per block
TYPES = [(10, "q2_K", 256, 84), (11, "q3_K", 256, 110), (12, "q4_K", 256, 144),
         (13, "q5_K", 256, 176), (14, "q6_K", 256, 210), (15, "q8_K", 256, 292),
         (20, "iq4_nl", 32, 18), (23, "iq4_xs", 256, 136)]


class TypeTraits(ctypes.Structure):
    """The head of ggml's struct ggml_type_traits."""
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


CONVERT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def load():
    lib_path = os.environ.get("AK_LIBRARY")
    if not lib_path:
        raise AssertionError("AK_LIBRARY must name libaccelkit.so (ctest sets it)")
    ggml_path = GGML_DIR / "libggml-base.so"
    if not ggml_path.exists():
        raise AssertionError(f"{ggml_path} is missing: run scripts/setup (installs "
                             "@node-llama-cpp/linux-x64, llama.cpp's prebuilt libraries)")
    ak = ctypes.CDLL(lib_path)
    ggml = ctypes.CDLL(str(ggml_path))
    ggml.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    ggml.ggml_get_type_traits.argtypes = [ctypes.c_int]
    ggml.ggml_quantize_chunk.restype = ctypes.c_size_t
    ggml.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                         ctypes.c_void_p]
    ggml.quantize_row_q8_K_ref.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    ak.ak_quantize_row.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    ak.ak_dequantize_row.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return ak, ggml


def random_row(rng, n, kind):
    scale = rng.choice([1e-3, 0.05, 1.0, 37.0])
    if kind == 0:
        row = [rng.gauss(0, scale) for _ in range(n)]
    elif kind == 1:  # skewed: all positive, or outliers
        row = [abs(rng.gauss(0, scale)) + (scale * 20 if rng.random() < 0.01 else 0) for _ in range(n)]
    elif kind == 2:  # few distinct values: ties on the grids
        row = [scale * rng.randint(-8, 8) / 4 for _ in range(n)]
    else:  # zeros mixed in, one all-zero group of 32 and one zero block
        row = [rng.uniform(-scale, scale) if rng.random() < 0.7 else 0.0 for _ in range(n)]
        row[32:64] = [0.0] * 32
        if n >= 512:
            row[256:512] = [0.0] * 256
    return row


class KQuantAgainstGgml(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ak, cls.ggml = load()

    def check_type(self, type_id, name, blk, tsize):
        traits = self.ggml.ggml_get_type_traits(type_id).contents
        self.assertEqual(traits.type_name.decode(), name)
        self.assertEqual((traits.blck_size, traits.type_size), (blk, tsize))
        if type_id == 15:
            quantize = self.ggml.quantize_row_q8_K_ref
        else:
            def quantize(src, dst, n):
                self.ggml.ggml_quantize_chunk(type_id, src, dst, 0, 1, n, None)
        if traits.to_float:
            to_float = CONVERT(traits.to_float)
        else:  # Q8_K: not in the traits of this ggml build, but exported
            to_float = self.ggml.dequantize_row_q8_K
            to_float.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        rng = random.Random(type_id)
        rows, mismatched = 0, 0
        for it in range(60):
            n = 256 * rng.choice([1, 2, 4])
            row = random_row(rng, n, it % 4)
            src = (ctypes.c_float * n)(*row)
            nbytes = n // blk * tsize
            ours, theirs = (ctypes.c_uint8 * nbytes)(), (ctypes.c_uint8 * nbytes)()
            self.assertEqual(self.ak.ak_quantize_row(type_id, src, ours, n), 0)
            quantize(src, theirs, n)
            rows += 1
            if bytes(ours) != bytes(theirs):
                mismatched += 1
                first = next(i for i in range(nbytes) if ours[i] != theirs[i])
                self.fail(f"{name}: row {it} (n={n}, kind {it % 4}) quantized bytes differ "
                          f"from ggml's first at byte {first} (block {first // tsize}, "
                          f"offset {first % tsize}): ours {ours[first]} ggml {theirs[first]}")
            back_ours, back_ggml = (ctypes.c_float * n)(), (ctypes.c_float * n)()
            self.assertEqual(self.ak.ak_dequantize_row(type_id, ours, back_ours, n), 0)
            to_float(theirs, back_ggml, n)
            a = struct.pack(f"{n}f", *back_ours)
            b = struct.pack(f"{n}f", *back_ggml)
            if a != b:
                k = next(i for i in range(n) if a[4 * i:4 * i + 4] != b[4 * i:4 * i + 4])
                self.fail(f"{name}: row {it} dequantized value {k} differs: "
                          f"{back_ours[k]!r} vs ggml {back_ggml[k]!r}")
        self.assertEqual(mismatched, 0)

    def test_q4_k(self): self.check_type(*TYPES[2])
    def test_q6_k(self): self.check_type(*TYPES[4])
    def test_q5_k(self): self.check_type(*TYPES[3])
    def test_q8_k(self): self.check_type(*TYPES[5])
    def test_q3_k(self): self.check_type(*TYPES[1])
    def test_q2_k(self): self.check_type(*TYPES[0])
    def test_iq4_nl(self): self.check_type(*TYPES[6])
    def test_iq4_xs(self): self.check_type(*TYPES[7])


if __name__ == "__main__":
    unittest.main()
