"""Gradient compression, Horovod's Compression API plus accelkit's extensions.

Horovod compresses in Python (compress() casts before the allreduce, decompress() casts
back). accelkit does better for float32 tensors: the built-in compressors are recognised
and the runtime compresses on the wire instead (f16 with a shared power-of-two scale,
bf16, or deep gradient compression), accumulating in f32 inside fused buffers. Other
dtypes, and user-defined Compressor subclasses, go through compress()/decompress() as in
Horovod.
"""
import torch

from . import _ctypes_train as _ct


class Compressor:
    """Interface: compress(tensor) -> (tensor, ctx); decompress(tensor, ctx) -> tensor."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """No compression."""

    _ak_wire = _ct.AK_COMPRESS_NONE

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class _CastCompressor(Compressor):
    _dtype = None

    @classmethod
    def compress(cls, tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != cls._dtype:
            return tensor.type(cls._dtype), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.type(ctx)


class FP16Compressor(_CastCompressor):
    """float16 on the wire (float32 tensors: scaled so the sum cannot overflow, f32
    accumulation in the runtime)."""

    _dtype = torch.float16
    _ak_wire = _ct.AK_COMPRESS_FP16


class BF16Compressor(_CastCompressor):
    """accelkit extension: bfloat16 on the wire (float32 range, 8-bit mantissa)."""

    _dtype = torch.bfloat16
    _ak_wire = _ct.AK_COMPRESS_BF16


class DGCCompressor(NoneCompressor):
    """accelkit extension: deep gradient compression (Lin et al., 2018) of float32
    allreduces. Only the largest (1 - sparsity) share of each gradient (plus the residual
    kept from earlier steps) is sent as (index, value) pairs; momentum correction and
    clipping happen in the runtime. Use it with plain SGD (no momentum) when momentum > 0:
    the compressor applies the momentum. compress()/decompress() are NoneCompressor's
    identities (tensors of other dtypes are allreduced dense)."""

    _ak_wire = _ct.AK_COMPRESS_DGC

    def __init__(self, sparsity=0.999, momentum=0.9, nesterov=False, warmup_steps=0,
                 warmup_start_sparsity=0.75, clip_norm=0.0, sample_ratio=0.01):
        if not 0.0 <= sparsity < 1.0:
            raise ValueError(f"dgc sparsity must be in [0, 1): {sparsity}")
        if not 0.0 <= warmup_start_sparsity < 1.0:
            raise ValueError(f"dgc warmup_start_sparsity must be in [0, 1): {warmup_start_sparsity}")
        if not 0.0 < sample_ratio <= 1.0:
            raise ValueError(f"dgc sample_ratio must be in (0, 1]: {sample_ratio}")
        if momentum < 0 or warmup_steps < 0 or clip_norm < 0:
            raise ValueError("dgc momentum, warmup_steps and clip_norm must be >= 0")
        self._ak_dgc = _ct.DgcConfig(
            sparsity=float(sparsity), warmup_start_sparsity=float(warmup_start_sparsity),
            warmup_steps=int(warmup_steps), momentum=float(momentum), nesterov=int(bool(nesterov)),
            clip_norm=float(clip_norm), sample_ratio=float(sample_ratio))

    def __repr__(self):
        c = self._ak_dgc
        return (f"Compression.dgc(sparsity={c.sparsity:g}, momentum={c.momentum:g}, "
                f"nesterov={bool(c.nesterov)}, warmup_steps={c.warmup_steps}, "
                f"warmup_start_sparsity={c.warmup_start_sparsity:g}, clip_norm={c.clip_norm:g}, "
                f"sample_ratio={c.sample_ratio:g})")


class Compression:
    """Compression algorithms for allreduce and DistributedOptimizer."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor  # accelkit extension

    @staticmethod
    def dgc(sparsity=0.999, momentum=0.9, nesterov=False, warmup_steps=0,
            warmup_start_sparsity=0.75, clip_norm=0.0, sample_ratio=0.01):
        """accelkit extension: a deep gradient compression configuration."""
        return DGCCompressor(sparsity, momentum, nesterov, warmup_steps, warmup_start_sparsity,
                             clip_norm, sample_ratio)
