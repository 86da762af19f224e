"""horovod.torch.elastic on accelkit: Horovod's elastic training API (run, State,
ObjectState, TorchState, ElasticSampler) from accelkit.torch.elastic. Launch the script
with `ak launch --min-np N --max-np M --host-discovery-script S`; see that module's
docstring for how it maps onto the launcher and what differs from Horovod."""
from accelkit.torch.elastic import (  # noqa: F401
    ElasticSampler, ObjectState, State, TorchState, run)
