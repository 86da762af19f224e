"""horovod.common on accelkit (exceptions, util, process_sets)."""
