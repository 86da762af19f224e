"""Horovod compatibility package: `import horovod.torch as hvd` runs on accelkit.

Only the PyTorch front end exists (horovod.torch); TensorFlow, Keras, MXNet, Spark and Ray
are not provided. See docs/horovod-compat.md.
"""
# the Horovod API level this package follows, with accelkit's version as local label
__version__ = "0.28.1+accelkit"


def run(*args, **kwargs):
    """horovod.run (programmatic launcher) is not supported: use `ak launch` or the
    horovodrun script that wraps it."""
    raise NotImplementedError("horovod.run is not supported by accelkit: launch with "
                              "`horovodrun -np N python3 script.py` (= `ak launch`)")
