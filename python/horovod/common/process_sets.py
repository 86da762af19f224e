"""horovod.common.process_sets on accelkit."""
from accelkit.torch.mpi_ops import (  # noqa: F401
    ProcessSet, add_process_set, global_process_set, process_set_by_id, remove_process_set)
from accelkit.torch import mpi_ops as _ops


def process_sets():
    """Registered process sets, by id."""
    return [_ops._process_sets[i] for i in sorted(_ops._process_sets)]
