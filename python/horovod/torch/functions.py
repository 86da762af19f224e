"""horovod.torch.functions on accelkit."""
from accelkit.torch.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters)
