"""horovod.torch.sync_batch_norm on accelkit."""
from accelkit.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
