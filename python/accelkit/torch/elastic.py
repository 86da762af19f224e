"""Horovod elastic training (hvd.elastic) is not supported by accelkit: a lost rank fails
every pending operation with an error on the survivors instead (see
docs/horovod-compat.md). The names exist so that scripts import; using them raises."""

_WHY = ("accelkit does not support Horovod elastic training (hvd.elastic.*): ranks are "
        "fixed for the life of a job; a lost rank raises HorovodInternalError on the others. "
        "Restart the job from a checkpoint instead.")


def _unsupported(*args, **kwargs):
    raise NotImplementedError(_WHY)


class _Unsupported:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_WHY)


run = _unsupported


class State(_Unsupported):
    pass


class ObjectState(_Unsupported):
    pass


class TorchState(_Unsupported):
    pass


class ElasticSampler(_Unsupported):
    pass
