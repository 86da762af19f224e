"""horovod.torch.optimizer on accelkit."""
from accelkit.torch.optimizer import DistributedOptimizer  # noqa: F401
