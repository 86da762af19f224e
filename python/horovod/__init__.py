"""Horovod compatibility package: `import horovod.torch as hvd` runs on accelkit.

Only the PyTorch front end exists (horovod.torch); TensorFlow, Keras, MXNet, Spark and Ray
are not provided. See docs/horovod-compat.md.
"""
# the Horovod API level this package follows, with accelkit's version as local label
__version__ = "0.28.1+accelkit"

from horovod.runner import run  # noqa: E402,F401  (horovod.run: processes via ak launch)
