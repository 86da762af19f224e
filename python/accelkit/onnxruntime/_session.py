"""InferenceSession with onnxruntime's interface over accelkit's engine (NativeSession):
providers, options, metadata, onnxruntime's checks of a feed (and its error messages),
OrtValue and IOBinding runs, profiling."""
import datetime
import os
import time
import warnings

import numpy as np

from .._lib import AccelkitError
from ..inference import CODES, ORT_TYPE, NativeSession
from ._options import RunOptions, SessionOptions
from ._values import IOBinding, OrtValue
from .capi.onnxruntime_pybind11_state import (InvalidArgument, NoSuchFile, NotImplemented,
                                              from_accelkit)

# Both name accelkit's engine, which runs on the CPU; CPUExecutionProvider is listed so
# scripts that ask for it (or check it is present) run unchanged.
AVAILABLE_PROVIDERS = ["AccelkitExecutionProvider", "CPUExecutionProvider"]
# onnxruntime's other provider names: asked for, they are unavailable here, so (as
# onnxruntime does for a provider its build lacks) a warning is given and the session
# falls back to the CPU. Any other name is refused.
KNOWN_PROVIDERS = [
    "TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider",
    "ROCMExecutionProvider", "OpenVINOExecutionProvider", "DnnlExecutionProvider",
    "VitisAIExecutionProvider", "QNNExecutionProvider", "NnapiExecutionProvider",
    "VSINPUExecutionProvider", "JsExecutionProvider", "CoreMLExecutionProvider",
    "ArmNNExecutionProvider", "ACLExecutionProvider", "DmlExecutionProvider",
    "RknpuExecutionProvider", "WebNNExecutionProvider", "WebGpuExecutionProvider",
    "XnnpackExecutionProvider", "CANNExecutionProvider", "AzureExecutionProvider",
    "NvTensorRTRTXExecutionProvider"] + AVAILABLE_PROVIDERS


def _normalize_providers(providers, provider_options):
    """(names, options) as onnxruntime's check_and_normalize_provider_args has them, with
    unavailable known providers dropped after a warning and CPUExecutionProvider last."""
    if providers is None:
        return list(AVAILABLE_PROVIDERS), [{} for _ in AVAILABLE_PROVIDERS]
    if isinstance(providers, str) or not hasattr(providers, "__len__"):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if "
                             "both are given.")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if "
                             "'provider_options' is given.")
        pairs = list(zip(providers, provider_options))
    else:
        pairs = []
        for p in providers:
            if isinstance(p, str):
                pairs.append((p, {}))
            elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) \
                    and isinstance(p[1], dict):
                pairs.append(p)
            else:
                raise ValueError("'providers' values must be either strings or (string, dict) "
                                 "tuples.")
    chosen = {}
    for name, options in pairs:
        if not isinstance(options, dict):
            raise ValueError("'provider_options' values must be dicts.")
        if name not in KNOWN_PROVIDERS:
            raise ValueError(f"Unknown Provider Type: {name}")
        if name not in AVAILABLE_PROVIDERS:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(AVAILABLE_PROVIDERS)}'")
            continue
        if name in chosen:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.")
            continue
        if options:
            raise ValueError(f"{name}: unknown provider options {sorted(options)} (accelkit's "
                             "providers take none; threads come from "
                             "SessionOptions.intra_op_num_threads)")
        chosen[name] = {}
    chosen.setdefault("CPUExecutionProvider", {})  # onnxruntime always appends it
    return list(chosen), list(chosen.values())


class ModelMetadata:
    """What get_modelmeta() returns."""

    def __init__(self, md):
        self.producer_name = md["producer_name"]
        self.graph_name = md["graph_name"]
        self.domain = md["domain"]
        self.description = md["description"]
        self.graph_description = md["graph_description"]
        self.version = md["version"]
        self.custom_metadata_map = dict(md["custom_metadata_map"])

    def __repr__(self):
        return (f"ModelMetadata(producer_name={self.producer_name!r}, graph_name="
                f"{self.graph_name!r}, domain={self.domain!r}, version={self.version})")


class InferenceSession:
    """onnxruntime.InferenceSession over accelkit. Besides onnxruntime's keyword arguments,
    accelkit's own are accepted (they override sess_options): threads, profile,
    fold_constants, optimize."""

    _ACCELKIT_KWARGS = ("threads", "profile", "fold_constants", "optimize")

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 **kwargs):
        if isinstance(path_or_bytes, os.PathLike):
            path_or_bytes = os.fspath(path_or_bytes)
        if not isinstance(path_or_bytes, (str, bytes)):
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        unknown = [k for k in kwargs if k not in self._ACCELKIT_KWARGS + ("disabled_optimizers",)]
        if unknown:
            raise TypeError(f"InferenceSession got unexpected keyword arguments {unknown}")
        if kwargs.get("disabled_optimizers"):
            raise NotImplemented("disabled_optimizers: accelkit's passes are switched by "
                                 "graph_optimization_level only")
        if sess_options is not None and not isinstance(sess_options, SessionOptions):
            raise TypeError("sess_options must be an onnxruntime SessionOptions")
        self._model = path_or_bytes
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._kwargs = kwargs
        self._create(providers, provider_options)

    def _create(self, providers, provider_options):
        names, options = _normalize_providers(providers, provider_options)
        threads, fold, level, profile = self._sess_options.engine_settings()
        settings = {"threads": threads, "fold_constants": fold, "optimize": level,
                    "profile": profile}
        settings.update({k: v for k, v in self._kwargs.items() if k in self._ACCELKIT_KWARGS})
        where = "Load model from memory" if isinstance(self._model, bytes) else \
            f"Load model from {self._model}"
        if isinstance(self._model, str) and not os.path.exists(self._model):
            raise NoSuchFile(f"{where} failed:Load model {self._model} failed. File doesn't "
                             "exist")
        try:
            self._native = NativeSession(self._model, **settings)
        except AccelkitError as e:
            raise from_accelkit(e, f"{where} failed:") from None
        if self._sess_options.optimized_model_filepath:
            try:
                self._native.save_optimized(self._sess_options.optimized_model_filepath)
            except AccelkitError as e:
                raise from_accelkit(e, "Saving the optimized model failed:") from None
        self._providers, self._provider_options = names, dict(zip(names, options))
        self._profiling = bool(settings["profile"])
        self._profiling_start_ns = time.monotonic_ns()
        self._inputs = self._native.inputs
        self._by_name = {i.name: i for i in self._native.inputs + self._native.overridable}
        self._output_names = [o.name for o in self._native.outputs]

    # ---- what the model is
    def get_inputs(self):
        return list(self._native.inputs)

    def get_outputs(self):
        return list(self._native.outputs)

    def get_overridable_initializers(self):
        return list(self._native.overridable)

    def get_modelmeta(self):
        return ModelMetadata(self._native.metadata)

    def get_providers(self):
        return list(self._providers)

    def get_provider_options(self):
        return {k: dict(v) for k, v in self._provider_options.items()}

    def get_session_options(self):
        return self._sess_options

    def set_providers(self, providers=None, provider_options=None):
        """Re-creates the session with these providers (as onnxruntime does)."""
        self._create(providers, provider_options)

    def disable_fallback(self):
        """No-op: accelkit has no provider to fall back from at run time."""

    def enable_fallback(self):
        """No-op: accelkit has no provider to fall back from at run time."""

    # ---- running
    def run(self, output_names, input_feed, run_options=None):
        """Outputs (NumPy arrays) for output_names (None or [] = all) from input_feed
        {name: array, list, scalar or OrtValue}."""
        return self._run_arrays(output_names, input_feed, run_options, None)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        return [OrtValue(a) for a in self._run_arrays(output_names, input_dict_ort_values,
                                                      run_options, None)]

    def io_binding(self):
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        iobinding._run(run_options)

    def _run_arrays(self, output_names, input_feed, run_options, out_buffers):
        if run_options is not None:
            if not isinstance(run_options, RunOptions):
                raise TypeError("run_options must be an onnxruntime RunOptions")
            run_options.check()
        names = list(output_names) if output_names else list(self._output_names)
        for n in names:
            if n not in self._output_names:
                raise InvalidArgument(f"Invalid Output Name:{n}")
        if out_buffers is not None:
            out_buffers = [self._check_buffer(n, b) for n, b in zip(names, out_buffers)]
            if all(b is None for b in out_buffers):
                out_buffers = None
        feed_names, arrays = self._feeds(input_feed)
        try:
            return self._native.run(feed_names, arrays, names, out_buffers)
        except AccelkitError as e:
            raise from_accelkit(e) from None

    @staticmethod
    def _check_buffer(name, b):
        if b is None:
            return None
        if not b.flags["C_CONTIGUOUS"] or not b.flags["WRITEABLE"]:
            raise InvalidArgument(f"output '{name}': the bound buffer must be a writeable "
                                  "C-contiguous array")
        if b.dtype not in CODES:
            raise InvalidArgument(f"output '{name}': element type {b.dtype} is not supported")
        return b

    def _feeds(self, input_feed):
        """Checks the feed as onnxruntime does (names, missing inputs, types, ranks, fixed
        dims) and returns (names, C-contiguous arrays)."""
        if not isinstance(input_feed, dict):
            raise TypeError("input_feed must be a dict {input name: value}")
        missing = [i.name for i in self._inputs if i.name not in input_feed]
        if missing:
            raise ValueError(f"Required inputs ({missing}) are missing from input feed "
                             f"({list(input_feed)}).")
        names, arrays = [], []
        for name, value in input_feed.items():
            arg = self._by_name.get(name)
            if arg is None:
                raise InvalidArgument(f"Invalid input name: {name}")
            names.append(name)
            arrays.append(self._feed_array(arg, value))
        return names, arrays

    @staticmethod
    def _feed_array(arg, value):
        if isinstance(value, OrtValue):
            a = value._array
        elif isinstance(value, np.ndarray):
            a = value
        else:  # lists and scalars take the input's declared type, as onnxruntime does
            a = np.asarray(value, dtype=arg.dtype)
        if not arg.type.startswith("tensor("):
            raise NotImplemented(f"input '{arg.name}' is a {arg.type}: accelkit feeds tensors only")
        got = ORT_TYPE.get(CODES.get(a.dtype), f"tensor({a.dtype})")
        if a.dtype.kind in "US" or a.dtype == object:
            got = "tensor(string)"
        if got != arg.type and arg.type != "tensor(undefined)":
            raise InvalidArgument(f"Unexpected input data type. Actual: ({got}) , expected: "
                                  f"({arg.type})")
        if a.dtype not in CODES and got != "tensor(string)":
            raise NotImplemented(f"input '{arg.name}': {got} tensors are not supported by "
                                 "accelkit")
        if arg.shape is not None:
            if a.ndim != len(arg.shape):
                raise InvalidArgument(f"Invalid rank for input: {arg.name} Got: {a.ndim} "
                                      f"Expected: {len(arg.shape)} Please fix either the "
                                      "inputs/outputs or the model.")
            bad = [(i, a.shape[i], d) for i, d in enumerate(arg.shape)
                   if isinstance(d, int) and a.shape[i] != d]
            if bad:
                lines = "".join(f" index: {i} Got: {g} Expected: {d}\n" for i, g, d in bad)
                raise InvalidArgument(f"Got invalid dimensions for input: {arg.name} for the "
                                      f"following indices\n{lines} Please fix either the "
                                      "inputs/outputs or the model.")
        return np.require(a, requirements="C")

    # ---- profiling
    def end_profiling(self):
        """Writes the node timings recorded since the session was made (or the previous
        call) as a Chrome trace PREFIX_DATE_TIME.json in the current folder and returns its
        name; "" when profiling is off (SessionOptions.enable_profiling)."""
        if not self._profiling:
            return ""
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
        path = f"{self._sess_options.profile_file_prefix}_{stamp}.json"
        try:
            self._native.end_profiling(path)
        except AccelkitError as e:
            raise from_accelkit(e) from None
        return path

    def get_profiling_start_time_ns(self):
        return self._profiling_start_ns

