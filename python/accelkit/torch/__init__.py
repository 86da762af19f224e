"""accelkit.torch: Horovod's PyTorch API on accelkit's training runtime.

    import accelkit.torch as hvd        # or: import horovod.torch as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Run with `ak launch -np N python3 train.py` (or `horovodrun -np N ...`). CPU tensors only.
See docs/horovod-compat.md for the status of every Horovod symbol and variable.
"""
from .mpi_ops import (  # noqa: F401
    Adasum, Average, HorovodInternalError, HostsUpdatedInterrupt, Max, Min, Product,
    ProcessSet, Sum, add_process_set, allgather, allgather_async, allreduce, allreduce_,
    allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier, broadcast,
    broadcast_, broadcast_async, broadcast_async_, ccl_built, cross_rank, cross_size,
    cuda_built, ddl_built, gloo_built, gloo_enabled, global_process_set, grouped_allgather,
    grouped_allgather_async, grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
    grouped_allreduce_async_, grouped_reducescatter, grouped_reducescatter_async, init,
    is_homogeneous, is_initialized, join, local_rank, local_size, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, poll, rank, reducescatter, reducescatter_async,
    remove_process_set, rocm_built, shutdown, size, sparse_allreduce_async,
    start_timeline, stats, stop_timeline, synchronize)
from .compression import Compression, Compressor  # noqa: F401
from .functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters)
from .optim import FusedAdam, FusedAdamW, FusedLAMB, FusedSGD  # noqa: F401
from .optimizer import DistributedOptimizer  # noqa: F401
from .local_sgd import LocalSGD  # noqa: F401  (accelkit extension, not in horovod.torch)
from .gossip import GossipOptimizer  # noqa: F401  (accelkit extension, not in horovod.torch)
from .sync_batch_norm import SyncBatchNorm  # noqa: F401
from . import elastic  # noqa: F401


def gpu_available(ext_base_name=None, verbose=False):
    """accelkit runs collectives on the CPU: False."""
    return False


# accelkit.torch.compile (alias optimize): a module's forward on accelkit's ONNX engine
# (compile.py). Imported on first use: it needs a library built with the ONNX engine,
# which the Horovod API above does not.
# Importing the submodule sets this package's attribute `compile` to the submodule, so
# the function is put back over it.
def __getattr__(name):
    if name in ("compile", "optimize", "CompiledModule"):
        import importlib
        impl = importlib.import_module(__name__ + ".compile")
        globals().update(compile=impl.compile, optimize=impl.optimize,
                         CompiledModule=impl.CompiledModule)
        return globals()[name]
    raise AttributeError(f"module 'accelkit.torch' has no attribute {name!r}")
