"""accelkit.torch.parallel: tensor and sequence parallelism (Megatron-LM's layers, with
the TP collectives overlapped with chunked GEMMs), ZeRO stages 1-3, pipeline parallelism
(1F1B and interleaved schedules) and activation recompute, on accelkit
torch.distributed process groups. See docs/parallel.md.

    import torch.distributed as dist
    import accelkit.torch.distributed                       # the "accelkit" backend
    from accelkit.torch import parallel as tp
    dist.init_process_group("accelkit")
    group = dist.new_group([0, 1], backend="accelkit")     # a tensor-parallel group
    fc1 = tp.ColumnParallelLinear(512, 2048, group)
    fc2 = tp.RowParallelLinear(2048, 512, group)
    trainer = tp.build("model.json", "plan.json")         # a whole model, as `ak plan` says
"""
import accelkit.torch.distributed  # noqa: F401  (registers the "accelkit" backend)

from .layers import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding, \
    allreduce_sequence_parallel_grads, mark_sequence_parallel, vocab_parallel_cross_entropy
from .mappings import copy_to_tp, gather_from_sequence, gather_from_tp, reduce_from_tp, \
    reduce_scatter_to_sequence, scatter_to_sequence, scatter_to_tp
from .zero import ZeroOptimizer
from .pipeline import Pipeline, PipelineGroups, pipeline_groups, split_sequential
from .recompute import GPTBlock, SavedTensorMeter, parse_recompute, set_recompute
from .model import ModelSpec, Reference
from .build import Plan, Trainer, build

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
           "vocab_parallel_cross_entropy", "mark_sequence_parallel",
           "allreduce_sequence_parallel_grads", "copy_to_tp", "reduce_from_tp",
           "scatter_to_tp", "gather_from_tp", "scatter_to_sequence", "gather_from_sequence",
           "reduce_scatter_to_sequence", "ZeroOptimizer",
           "Pipeline", "PipelineGroups", "pipeline_groups", "split_sequential",
           "GPTBlock", "SavedTensorMeter", "parse_recompute", "set_recompute",
           "ModelSpec", "Reference", "Plan", "Trainer", "build"]
