"""horovod.torch.elastic: not supported by accelkit (using any name raises
NotImplementedError with the reason)."""
from accelkit.torch.elastic import (  # noqa: F401
    ElasticSampler, ObjectState, State, TorchState, run)
