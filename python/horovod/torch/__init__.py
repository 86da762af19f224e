"""horovod.torch on accelkit: every name comes from accelkit.torch."""
from accelkit.torch import *  # noqa: F401,F403
from accelkit.torch import (  # noqa: F401  (names a star import skips or scripts reach for)
    Adasum, Average, Compression, Compressor, DistributedOptimizer, FusedAdam, FusedAdamW,
    FusedLAMB, FusedSGD, HorovodInternalError, Max, Min, Product, ProcessSet, Sum,
    SyncBatchNorm, add_process_set, allgather, allgather_async, allgather_object, allreduce,
    allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier, broadcast,
    broadcast_, broadcast_async, broadcast_async_, broadcast_object, broadcast_optimizer_state,
    broadcast_parameters, ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
    gloo_built, gloo_enabled, global_process_set, gpu_available, grouped_allgather,
    grouped_allgather_async, grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
    grouped_allreduce_async_, grouped_reducescatter, grouped_reducescatter_async, init,
    is_homogeneous, is_initialized, join, local_rank, local_size, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, poll, rank, reducescatter, reducescatter_async,
    remove_process_set, rocm_built, shutdown, size, sparse_allreduce_async, start_timeline,
    stop_timeline, synchronize)
from . import elastic  # noqa: F401

# accelkit extensions stay out of Horovod's namespace (the star import brings them)
del LocalSGD, local_sgd  # noqa: F821
