"""horovod.torch.compression on accelkit."""
from accelkit.torch.compression import (  # noqa: F401
    BF16Compressor, Compression, Compressor, DGCCompressor, FP16Compressor, NoneCompressor)
