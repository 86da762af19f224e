"""A Horovod training step's collectives as a user's script has them, run by
python_package.sh through the installed horovodrun on 2 ranks: checks that horovod and
accelkit (and its library) come from the installed packages, then an allreduce and a
broadcast."""
import os
import sys

import torch
import horovod.torch as hvd
import accelkit

hvd.init()
venv = sys.prefix
for name, path in (("horovod", hvd.__file__), ("accelkit", accelkit.__file__),
                   ("libaccelkit", accelkit._lib.lib._name)):
    if not os.path.realpath(path).startswith(os.path.realpath(venv)):
        sys.exit(f"rank {hvd.rank()}: {name} from {path}, not from the venv {venv}")
size = hvd.size()
got = hvd.allreduce(torch.full((4,), float(hvd.rank() + 1)), op=hvd.Sum)
want = size * (size + 1) / 2
if not torch.equal(got, torch.full((4,), want)):
    sys.exit(f"rank {hvd.rank()}: allreduce gave {got.tolist()}, expected {want}")
weights = hvd.broadcast(torch.arange(3.0) * (hvd.rank() + 1), root_rank=0)
if not torch.equal(weights, torch.arange(3.0)):
    sys.exit(f"rank {hvd.rank()}: broadcast gave {weights.tolist()}")
print(f"rank {hvd.rank()}/{size}: allreduce and broadcast ok")
