"""LLM model files in pure Python/NumPy: GGUF v3 and safetensors, both written and read.

Written from the format descriptions, for the test and benchmark tools of the LLM engine
(scripts/llm-make-model, tests/llm/llama_ref.py); it needs no compiled code, so importing
it does not load libaccelkit (import it as a plain module from python/accelkit/ when the
library is not built).

GGUF v3 (little-endian):
    "GGUF", uint32 version = 3, uint64 tensor count, uint64 metadata count,
    metadata: (string key, uint32 type, value)*, a string = uint64 length + bytes,
    an array = uint32 element type + uint64 count + elements,
    tensor infos: (string name, uint32 n_dims, uint64 dims[n_dims] innermost first,
                   uint32 ggml type, uint64 offset from the data section),
    padding to `general.alignment` (default 32), the data section (each tensor aligned).
safetensors:
    uint64 header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [b, e]},
    "__metadata__": {str: str}}, then the data; offsets are relative to the data start.

Quantized GGUF blocks (32 values each) follow ggml: q8_0 = f16 d + 32 int8 (x = d·q),
q4_0 = f16 d + 16 bytes, low nibbles the first 16 values and high nibbles the last 16
(x = d·(nibble − 8)). The quantizers use ggml's rounding rules so files match its output.
"""
import json
import mmap
import os
import struct
from pathlib import Path

import numpy as np

# ---- GGUF constants ------------------------------------------------------------------

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# metadata value types (numbers are the format's)
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, \
    FLOAT64 = range(13)
_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
           FLOAT32: "<f", BOOL: "<B", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
_SCALAR_NP = {UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4",
              INT32: "<i4", FLOAT32: "<f4", BOOL: "<u1", UINT64: "<u8", INT64: "<i8",
              FLOAT64: "<f8"}

# ggml tensor types handled here, with (values per block, bytes per block)
F32, F16, Q4_0, Q8_0, BF16 = 0, 1, 2, 8, 30
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS = 10, 11, 12, 13, 14, 15, 20, 23
GGML_BLOCK = {F32: (1, 4), F16: (1, 2), BF16: (1, 2), Q8_0: (32, 34), Q4_0: (32, 18),
              Q2_K: (256, 84), Q3_K: (256, 110), Q4_K: (256, 144), Q5_K: (256, 176),
              Q6_K: (256, 210), Q8_K: (256, 292), IQ4_NL: (32, 18), IQ4_XS: (256, 136)}
GGML_NAMES = {"f32": F32, "f16": F16, "bf16": BF16, "q8_0": Q8_0, "q4_0": Q4_0,
              "q2_K": Q2_K, "q3_K": Q3_K, "q4_K": Q4_K, "q5_K": Q5_K, "q6_K": Q6_K,
              "q8_K": Q8_K, "iq4_nl": IQ4_NL, "iq4_xs": IQ4_XS}
# the super-block types are read (dequantized) here, not written: the engine's
# ak_quantize_row writes them (bit for bit ggml's quantizers)
SUPER_BLOCK_TYPES = (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS)
IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89,
                       113], dtype=np.float32)
GGML_TYPE_NAME = {v: k for k, v in GGML_NAMES.items()}


class FormatError(ValueError):
    """A file that does not follow its format (the message says where)."""


class Value:
    """A typed GGUF metadata value. For arrays `elem_type` is the element type and
    `value` a list (strings) or a NumPy array (numbers)."""

    __slots__ = ("type", "value", "elem_type")

    def __init__(self, type_, value, elem_type=None):
        self.type, self.value, self.elem_type = type_, value, elem_type

    def __repr__(self):
        return f"Value({self.type}, {self.value!r:.60}, {self.elem_type})"


def u32(x):
    return Value(UINT32, int(x))


def f32(x):
    return Value(FLOAT32, float(x))


def string(s):
    return Value(STRING, s)


def boolean(b):
    return Value(BOOL, bool(b))


def strings(items):
    return Value(ARRAY, list(items), STRING)


def _as_value(v):
    """Plain Python values get the types llama.cpp's writer uses for them."""
    if isinstance(v, Value):
        return v
    if isinstance(v, bool):
        return boolean(v)
    if isinstance(v, int):
        return u32(v) if 0 <= v < 2**32 else Value(INT64, v)
    if isinstance(v, float):
        return f32(v)
    if isinstance(v, str):
        return string(v)
    raise TypeError(f"cannot store {type(v).__name__} as GGUF metadata without a type")


# ---- number formats ---------------------------------------------------------------------

def f32_to_bf16_bits(x):
    """float → bfloat16 bits (uint16), round to nearest even; NaN stays a quiet NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _round_half_away(v):
    """C roundf (halves away from zero), which ggml uses; NumPy rounds halves to even."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def quantize_q8_0(x):
    """[rows, K] floats → q8_0 blocks as bytes: d = amax/127, q = roundf(x/d)."""
    b = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    d = np.abs(b).max(axis=1) / np.float32(127)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    q = _round_half_away(b * inv[:, None]).astype(np.int8)
    out = np.empty((b.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).reshape(-1, 1).view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_q4_0(x):
    """[rows, K] floats → q4_0 blocks as bytes: d = m/−8 with m the signed value of largest
    magnitude, q = min(15, trunc(x/d + 8.5))."""
    b = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    m = b[np.arange(b.shape[0]), np.abs(b).argmax(axis=1)]
    d = m / np.float32(-8)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, np.trunc(b * inv[:, None] + np.float32(8.5))).astype(np.uint8)
    out = np.empty((b.shape[0], 18), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).reshape(-1, 1).view(np.uint8)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def encode_tensor(x, ggml_type):
    """A float array (NumPy layout, last axis contiguous) → the bytes of `ggml_type`."""
    x = np.asarray(x)
    if ggml_type in (Q8_0, Q4_0) and x.shape[-1] % 32:
        raise ValueError(f"a {GGML_TYPE_NAME[ggml_type]} row needs a multiple of 32 values, "
                         f"not {x.shape[-1]}")
    if ggml_type == F32:
        return np.ascontiguousarray(x, dtype="<f4").tobytes()
    if ggml_type == F16:
        return np.ascontiguousarray(x, dtype="<f2").tobytes()
    if ggml_type == BF16:
        return f32_to_bf16_bits(x).astype("<u2").tobytes()
    if ggml_type == Q8_0:
        return quantize_q8_0(x)
    if ggml_type == Q4_0:
        return quantize_q4_0(x)
    raise ValueError(f"unsupported ggml type {ggml_type}")


def decode_tensor(raw, ggml_type, shape, dtype=np.float32):
    """Bytes of `ggml_type` → a float array of `shape` (NumPy order)."""
    n = int(np.prod(shape, dtype=np.int64))
    if ggml_type == F32:
        out = np.frombuffer(raw, dtype="<f4", count=n)
    elif ggml_type == F16:
        out = np.frombuffer(raw, dtype="<f2", count=n)
    elif ggml_type == BF16:
        out = bf16_bits_to_f32(np.frombuffer(raw, dtype="<u2", count=n))
    elif ggml_type in (Q8_0, Q4_0):
        out = _dequantize_blocks(raw, ggml_type, n // 32)
    elif ggml_type in SUPER_BLOCK_TYPES:
        out = _dequantize_super_blocks(raw, ggml_type, n // GGML_BLOCK[ggml_type][0])
    else:
        raise ValueError(f"unsupported ggml type {ggml_type}")
    return out.astype(dtype).reshape(shape)


def _dequantize_blocks(raw, ggml_type, n_blocks):
    size = GGML_BLOCK[ggml_type][1]
    blocks = np.frombuffer(raw, dtype=np.uint8, count=n_blocks * size).reshape(n_blocks, size)
    d = blocks[:, :2].copy().view("<f2").astype(np.float64)  # [n_blocks, 1]
    if ggml_type == Q8_0:
        q = blocks[:, 2:].view(np.int8).astype(np.float64)
    else:
        qs = blocks[:, 2:]
        q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float64) - 8
    return (d * q).reshape(-1)


def _f16(b):
    return b.copy().view("<f2").astype(np.float32)


def _scales_k4(s):
    """[nb, 12] packed 6-bit scales and mins of Q4_K/Q5_K → two [nb, 8] arrays."""
    s = s.astype(np.uint8)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    m = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc.astype(np.float32), m.astype(np.float32)


def _groups16(v):
    """[nb, 16] per-group values → [nb, 256] (group g covers values 16g..16g+15)."""
    return np.repeat(v, 16, axis=1)


def _two_bit(qs):
    """[nb, 64] bytes → [nb, 256] 2-bit fields: value 128h + 32s + l at bits 2s of
    qs[32h + l]."""
    out = np.empty((qs.shape[0], 256), np.uint8)
    for h in range(2):
        for sh in range(4):
            out[:, 128 * h + 32 * sh:128 * h + 32 * sh + 32] = (qs[:, 32 * h:32 * h + 32] >> (2 * sh)) & 3
    return out


def _nibbles(qs, groups):
    """[nb, 16·groups] bytes → [nb, 32·groups]: per 16 bytes the low nibbles, then the high."""
    parts = []
    for g in range(groups):
        b = qs[:, 16 * g:16 * g + 16]
        parts += [b & 15, b >> 4]
    return np.concatenate(parts, axis=1)


def _dequantize_super_blocks(raw, t, nb):
    """ggml's to_float of the super-block types (float32 arithmetic, ggml's order)."""
    size = GGML_BLOCK[t][1]
    b = np.frombuffer(raw, dtype=np.uint8, count=nb * size).reshape(nb, size)
    f = np.float32
    if t == Q8_K:
        d = b[:, 0:4].copy().view("<f4")
        return (d * b[:, 4:260].view(np.int8).astype(f)).reshape(-1)
    if t == IQ4_NL:
        d = _f16(b[:, 0:2])
        return (d * IQ4_VALUES[_nibbles(b[:, 2:18], 1)]).reshape(-1)
    if t == IQ4_XS:
        d = _f16(b[:, 0:2])
        sh = b[:, 2:4].copy().view("<u2").astype(np.int32)
        sl = b[:, 4:8].astype(np.int32)
        ls = np.stack([((sl[:, g // 2] >> (4 * (g % 2))) & 15) | (((sh[:, 0] >> (2 * g)) & 3) << 4)
                       for g in range(8)], axis=1)
        dl = d * (ls - 32).astype(f)
        return (np.repeat(dl, 32, axis=1) * IQ4_VALUES[_nibbles(b[:, 8:136], 8)]).reshape(-1)
    if t in (Q4_K, Q5_K):
        d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
        sc, m = _scales_k4(b[:, 4:16])
        qs = b[:, 48:176] if t == Q5_K else b[:, 16:144]
        q = np.concatenate([np.concatenate([qs[:, 32 * j:32 * j + 32] & 15, qs[:, 32 * j:32 * j + 32] >> 4], axis=1)
                            for j in range(4)], axis=1)
        if t == Q5_K:
            qh = b[:, 16:48]
            hi = np.concatenate([(qh >> g) & 1 for g in range(8)], axis=1)
            q = q | (hi << 4)
        dl, ml = np.repeat(d * sc, 32, axis=1), np.repeat(dmin * m, 32, axis=1)
        return (dl * q.astype(f) - ml).reshape(-1)
    if t == Q6_K:
        ql, qh, sc, d = b[:, 0:128], b[:, 128:192], b[:, 192:208].view(np.int8), _f16(b[:, 208:210])
        q = np.empty((nb, 256), np.int32)
        for h in range(2):
            for quarter in range(4):
                low = (ql[:, 64 * h + 32 * (quarter & 1):64 * h + 32 * (quarter & 1) + 32] >> (4 * (quarter >> 1))) & 15
                high = (qh[:, 32 * h:32 * h + 32] >> (2 * quarter)) & 3
                q[:, 128 * h + 32 * quarter:128 * h + 32 * quarter + 32] = (low | (high << 4)).astype(np.int32) - 32
        return (_groups16(d * sc.astype(f)) * q.astype(f)).reshape(-1)
    if t == Q3_K:
        hm, qs, s, d = b[:, 0:32], b[:, 32:96], b[:, 96:108].astype(np.int32), _f16(b[:, 108:110])
        lo = np.concatenate([s[:, j:j + 1] & 15 if j < 8 else s[:, j - 8:j - 7] >> 4 for j in range(16)], axis=1)
        hi = np.concatenate([(s[:, 8 + j % 4:9 + j % 4] >> (2 * (j // 4))) & 3 for j in range(16)], axis=1)
        sc = (lo | (hi << 4)) - 32
        high = np.concatenate([(hm >> s_) & 1 for s_ in range(8)], axis=1)
        q = _two_bit(qs).astype(np.int32) - np.where(high == 1, 0, 4)
        return (_groups16(d * sc.astype(f)) * q.astype(f)).reshape(-1)
    if t == Q2_K:
        sc, qs, d, dmin = b[:, 0:16], b[:, 16:80], _f16(b[:, 80:82]), _f16(b[:, 82:84])
        dl, ml = _groups16(d * (sc & 15).astype(f)), _groups16(dmin * (sc >> 4).astype(f))
        return (dl * _two_bit(qs).astype(f) - ml).reshape(-1)
    raise ValueError(f"unsupported ggml type {t}")


def tensor_bytes(ggml_type, shape):
    """Bytes of a tensor of `shape` (NumPy order); rows must be whole blocks."""
    per, size = GGML_BLOCK[ggml_type]
    n = int(np.prod(shape, dtype=np.int64))
    if shape and shape[-1] % per:
        raise ValueError(f"rows of {shape[-1]} values are not whole {per}-value blocks")
    return n // per * size


# ---- GGUF writer -------------------------------------------------------------------------

def _pack_string(s):
    b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _pack_value(v):
    if v.type == STRING:
        return _pack_string(v.value)
    if v.type == ARRAY:
        head = struct.pack("<IQ", v.elem_type, len(v.value))
        if v.elem_type == STRING:
            return head + b"".join(_pack_string(s) for s in v.value)
        if v.elem_type in (ARRAY,):
            raise ValueError("nested GGUF arrays are not written")
        return head + np.asarray(v.value).astype(_SCALAR_NP[v.elem_type]).tobytes()
    return struct.pack(_SCALAR[v.type], v.value)


def _align(n, alignment):
    return (n + alignment - 1) // alignment * alignment


class GGUFTensorOut:
    """A tensor to write: `shape` in NumPy order (outermost first), `data` its bytes."""

    __slots__ = ("name", "ggml_type", "shape", "data")

    def __init__(self, name, ggml_type, shape, data):
        if len(data) != tensor_bytes(ggml_type, shape):
            raise ValueError(f"tensor {name}: {len(data)} bytes for shape {shape}")
        self.name, self.ggml_type, self.shape, self.data = name, ggml_type, tuple(shape), data


def write_gguf(path, metadata, tensors):
    """Writes a GGUF v3 file. metadata: {key: Value or plain value} in file order;
    tensors: GGUFTensorOut list in file order. The alignment is metadata's
    general.alignment when present, else 32."""
    kv = {k: _as_value(v) for k, v in metadata.items()}
    alignment = int(kv["general.alignment"].value) if "general.alignment" in kv else 32
    head = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(kv))]
    for key, v in kv.items():
        head += [_pack_string(key), struct.pack("<I", v.type), _pack_value(v)]
    offset = 0
    for t in tensors:
        dims = t.shape[::-1] or (1,)  # GGUF lists the innermost dimension first
        head += [_pack_string(t.name), struct.pack("<I", len(dims)),
                 struct.pack(f"<{len(dims)}Q", *dims), struct.pack("<IQ", t.ggml_type, offset)]
        offset = _align(offset + len(t.data), alignment)
    header = b"".join(head)
    with open(path, "wb") as f:
        f.write(header + bytes(_align(len(header), alignment) - len(header)))
        for t in tensors:
            f.write(t.data)
            f.write(bytes(_align(len(t.data), alignment) - len(t.data)))


# ---- GGUF reader -------------------------------------------------------------------------

class _Cursor:
    """Bounds-checked little-endian reads over a buffer."""

    def __init__(self, buf, what):
        self.buf, self.pos, self.what = buf, 0, what

    def take(self, n):
        if n < 0 or n > len(self.buf) - self.pos:
            raise FormatError(f"{self.what}: truncated at byte {self.pos} (needs {n} more)")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def scalar(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return bytes(self.take(self.scalar("<Q"))).decode("utf-8", "surrogateescape")


class GGUFTensor:
    """One tensor of a GGUF file: `shape` in NumPy order, `offset` from the file start."""

    __slots__ = ("name", "ggml_type", "shape", "offset", "nbytes")

    def __init__(self, name, ggml_type, shape, offset, nbytes):
        self.name, self.ggml_type, self.shape = name, ggml_type, shape
        self.offset, self.nbytes = offset, nbytes


class GGUFFile:
    """A GGUF file mapped read-only and validated: `metadata` {key: Value},
    `tensors` {name: GGUFTensor}, tensor data read on demand with `tensor()`."""

    def __init__(self, path):
        self.path = str(path)
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._parse(self._map)  # slices of an mmap are small copies: no exports
        except FormatError:
            self.close()
            raise

    def close(self):
        """Unmaps now, or when the last array viewing the mapping is gone."""
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass
            self._map = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _parse(self, buf):
        c = _Cursor(buf, self.path)
        if bytes(c.take(4)) != GGUF_MAGIC:
            raise FormatError(f"{self.path}: not a GGUF file (bad magic)")
        self.version = c.scalar("<I")
        if self.version not in (2, 3):
            raise FormatError(f"{self.path}: GGUF version {self.version} (2 and 3 are read)")
        n_tensors, n_kv = c.scalar("<Q"), c.scalar("<Q")
        # every entry takes at least 8 bytes: a hostile count fails before any allocation
        if n_tensors > len(buf) // 8 or n_kv > len(buf) // 8:
            raise FormatError(f"{self.path}: counts {n_tensors}/{n_kv} exceed the file")
        self.metadata = {}
        for _ in range(n_kv):
            key = c.string()
            if key in self.metadata:
                raise FormatError(f"{self.path}: duplicate key {key[:64]!r}")
            self.metadata[key] = self._read_value(c, c.scalar("<I"), key)
        self.alignment = int(self.get("general.alignment", DEFAULT_ALIGNMENT))
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise FormatError(f"{self.path}: general.alignment {self.alignment} is not a power of 2")
        infos = [self._read_tensor_info(c) for _ in range(n_tensors)]
        self.data_offset = _align(c.pos, self.alignment)
        self.tensors = {}
        for name, ggml_type, shape, rel in infos:
            self._add_tensor(name, ggml_type, shape, rel, len(buf))

    def _read_value(self, c, type_, key):
        if type_ == STRING:
            return Value(STRING, c.string())
        if type_ == ARRAY:
            elem, count = c.scalar("<I"), c.scalar("<Q")
            if elem == STRING:
                if count > (len(c.buf) - c.pos) // 8:
                    raise FormatError(f"{self.path}: {key[:64]!r}: {count} strings exceed the file")
                return Value(ARRAY, [c.string() for _ in range(count)], STRING)
            if elem not in _SCALAR_NP:
                raise FormatError(f"{self.path}: {key[:64]!r}: array of type {elem}")
            size = np.dtype(_SCALAR_NP[elem]).itemsize
            raw = c.take(count * size)
            return Value(ARRAY, np.frombuffer(raw, dtype=_SCALAR_NP[elem]).copy(), elem)
        if type_ not in _SCALAR:
            raise FormatError(f"{self.path}: {key[:64]!r}: unknown value type {type_}")
        v = c.scalar(_SCALAR[type_])
        return Value(type_, bool(v) if type_ == BOOL else v)

    def _read_tensor_info(self, c):
        name = c.string()
        n_dims = c.scalar("<I")
        if not 1 <= n_dims <= 4:
            raise FormatError(f"{self.path}: tensor {name}: {n_dims} dimensions")
        dims = [c.scalar("<Q") for _ in range(n_dims)]
        ggml_type, rel = c.scalar("<I"), c.scalar("<Q")
        if ggml_type not in GGML_BLOCK:
            raise FormatError(f"{self.path}: tensor {name}: ggml type {ggml_type} not handled")
        if any(d == 0 or d > 2**40 for d in dims):
            raise FormatError(f"{self.path}: tensor {name}: bad dimensions {dims}")
        return name, ggml_type, tuple(int(d) for d in reversed(dims)), rel

    def _add_tensor(self, name, ggml_type, shape, rel, file_size):
        if name in self.tensors:
            raise FormatError(f"{self.path}: duplicate tensor {name}")
        if rel % self.alignment:
            raise FormatError(f"{self.path}: tensor {name}: offset {rel} is not aligned")
        try:
            nbytes = tensor_bytes(ggml_type, shape)
        except ValueError as e:
            raise FormatError(f"{self.path}: tensor {name}: {e}") from None
        start = self.data_offset + rel
        if start + nbytes > file_size:
            raise FormatError(f"{self.path}: tensor {name} ends past the end of the file")
        self.tensors[name] = GGUFTensor(name, ggml_type, shape, start, nbytes)

    def get(self, key, default=None):
        """A metadata value as plain Python/NumPy (arrays as list or ndarray)."""
        v = self.metadata.get(key)
        return default if v is None else v.value

    def raw(self, name):
        """The stored bytes of a tensor (a view into the mapping)."""
        t = self.tensors[name]
        return np.frombuffer(self._map, dtype=np.uint8, count=t.nbytes, offset=t.offset)

    def tensor(self, name, dtype=np.float32):
        """A tensor dequantized to `dtype`, shape in NumPy order."""
        t = self.tensors[name]
        return decode_tensor(self.raw(name), t.ggml_type, t.shape, dtype)


# ---- vocabulary GGUF files ----------------------------------------------------------------

def read_vocab(path):
    """The tokenizer.* metadata of a vocabulary (or model) GGUF as {key: Value}."""
    with GGUFFile(path) as g:
        return {k: v for k, v in g.metadata.items() if k.startswith("tokenizer.")}


# ---- safetensors ---------------------------------------------------------------------------

SAFETENSORS_DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
                      "F64": ("<f8", 8), "I32": ("<i4", 4), "I64": ("<i8", 8)}


def _safetensors_bytes(x, dtype):
    if dtype == "BF16":
        return f32_to_bf16_bits(x).astype("<u2").tobytes()
    return np.ascontiguousarray(x, dtype=SAFETENSORS_DTYPES[dtype][0]).tobytes()


def write_safetensors(path, tensors, metadata=None):
    """tensors: [(name, dtype "F32"/"F16"/"BF16"/..., array)] in file order. The header is
    padded with spaces to a multiple of 8 so the data starts aligned."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, dtype, x in tensors:
        blob = _safetensors_bytes(x, dtype)
        header[name] = {"dtype": dtype, "shape": list(np.shape(x)),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)


class SafetensorsFile:
    """A safetensors file mapped read-only and validated: `header` {name: entry},
    `metadata` the __metadata__ strings; `tensor(name)` gives floats."""

    def __init__(self, path):
        self.path = str(path)
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        if size < 8:
            raise FormatError(f"{self.path}: too short for a safetensors header")
        n = struct.unpack("<Q", self._map[:8])[0]
        if n > size - 8:
            raise FormatError(f"{self.path}: header length {n} exceeds the file")
        try:
            header = json.loads(bytes(self._map[8:8 + n]))
        except ValueError as e:
            raise FormatError(f"{self.path}: header is not JSON ({e})") from None
        self.metadata = header.pop("__metadata__", {}) or {}
        self.data_offset = 8 + n
        self.header = header
        for name, entry in header.items():
            self._check(name, entry, size - self.data_offset)

    def _check(self, name, e, data_size):
        if not isinstance(e, dict) or e.get("dtype") not in SAFETENSORS_DTYPES:
            raise FormatError(f"{self.path}: {name}: unsupported or missing dtype")
        shape, offs = e.get("shape"), e.get("data_offsets")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise FormatError(f"{self.path}: {name}: bad shape {shape}")
        if not (isinstance(offs, list) and len(offs) == 2 and 0 <= offs[0] <= offs[1] <= data_size):
            raise FormatError(f"{self.path}: {name}: bad data_offsets {offs}")
        want = int(np.prod(shape, dtype=np.int64)) * SAFETENSORS_DTYPES[e["dtype"]][1]
        if offs[1] - offs[0] != want:
            raise FormatError(f"{self.path}: {name}: {offs[1] - offs[0]} bytes for shape {shape}")

    def close(self):
        if isinstance(self._map, mmap.mmap):
            try:
                self._map.close()
            except BufferError:
                pass  # unmapped when the last array viewing it is gone

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def tensor(self, name, dtype=np.float32):
        e = self.header[name]
        b, end = e["data_offsets"]
        np_dtype = SAFETENSORS_DTYPES[e["dtype"]][0]
        x = np.frombuffer(self._map, dtype=np_dtype, offset=self.data_offset + b,
                          count=(end - b) // SAFETENSORS_DTYPES[e["dtype"]][1])
        if e["dtype"] == "BF16":
            x = bf16_bits_to_f32(x)
        return x.astype(dtype).reshape(e["shape"])


def read_hf_tensors(folder, dtype=np.float32):
    """All tensors of a Hugging Face folder (model.safetensors, or the shards listed by
    model.safetensors.index.json) as {name: array}."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        files = sorted(set(weight_map.values()))
    else:
        weight_map, files = None, ["model.safetensors"]
    out = {}
    for fname in files:
        with SafetensorsFile(folder / fname) as st:
            for name in st.header:
                if weight_map is not None and weight_map.get(name) != fname:
                    raise FormatError(f"{fname}: {name} is not mapped to this shard")
                out[name] = st.tensor(name, dtype)
    if weight_map is not None and set(weight_map) != set(out):
        raise FormatError(f"{index}: weight_map and the shards hold different tensors")
    return out
