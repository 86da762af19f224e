"""horovod.common.util on accelkit: the helpers scripts and libraries call."""
import os


def check_extension(ext_name, ext_env_var, pkg_path, *args):
    """Horovod checks that its compiled extension exists; accelkit's is libaccelkit."""
    import accelkit  # noqa: F401  (raises ImportError naming the library when missing)


def extension_available(ext_base_name, verbose=False):
    return ext_base_name in ("horovod.torch", "torch")


def gpu_available(ext_base_name, verbose=False):
    return False


def mpi_built(verbose=False):
    return False


def gloo_built(verbose=False):
    return False


def nccl_built(verbose=False):
    return False


def ddl_built(verbose=False):
    return False


def ccl_built(verbose=False):
    return False


def cuda_built(verbose=False):
    return False


def rocm_built(verbose=False):
    return False


def env(**kwargs):
    """Context manager setting environment variables (as Horovod's helper)."""
    from contextlib import contextmanager

    @contextmanager
    def _ctx():
        old = {k: os.environ.get(k) for k in kwargs}
        os.environ.update({k: str(v) for k, v in kwargs.items()})
        try:
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return _ctx()


def is_iterable(x):
    try:
        iter(x)
    except TypeError:
        return False
    return True


def split_list(lst, num_parts):
    """lst split into num_parts contiguous parts of near-equal length."""
    n, r = divmod(len(lst), num_parts)
    out, i = [], 0
    for k in range(num_parts):
        j = i + n + (1 if k < r else 0)
        out.append(lst[i:j])
        i = j
    return out
