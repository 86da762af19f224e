"""horovod.torch.mpi_ops on accelkit."""
from accelkit.torch.mpi_ops import *  # noqa: F401,F403
from accelkit.torch.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum, HorovodInternalError, ProcessSet,
    global_process_set, add_process_set, remove_process_set, init, shutdown, is_initialized,
    size, rank, local_size, local_rank, cross_size, cross_rank, is_homogeneous,
    mpi_threads_supported, mpi_enabled, mpi_built, gloo_enabled, gloo_built, nccl_built,
    ddl_built, ccl_built, cuda_built, rocm_built, start_timeline, stop_timeline,
    allreduce, allreduce_, allreduce_async, allreduce_async_, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    sparse_allreduce_async, allgather, allgather_async, grouped_allgather,
    grouped_allgather_async, broadcast, broadcast_, broadcast_async, broadcast_async_,
    alltoall, alltoall_async, reducescatter, reducescatter_async, grouped_reducescatter,
    grouped_reducescatter_async, poll, synchronize, join, barrier)
