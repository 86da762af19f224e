"""horovod.common.exceptions on accelkit."""
from accelkit.torch.mpi_ops import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401


def get_version_mismatch_message(name, version, installed_version):
    return (f"Framework {name} installed with version {installed_version} but found version "
            f"{version}.")


class HorovodVersionMismatchError(ImportError):
    """Kept for imports; accelkit binds to the torch it runs with, so never raised."""

    def __init__(self, name, version, installed_version):
        super().__init__(get_version_mismatch_message(name, version, installed_version))
        self.name, self.version, self.installed_version = name, version, installed_version
