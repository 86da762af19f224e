"""SessionOptions, RunOptions and their enums as onnxruntime has them. What accelkit does
with each setting is said on it; a setting it cannot honour (a parallel executor, saving
the optimized graph, a config key it does not know) is refused when the session is
created or the run starts, by name — never dropped."""
import enum

from .capi.onnxruntime_pybind11_state import InvalidArgument, NotImplemented


class GraphOptimizationLevel(enum.IntEnum):
    """Which of the engine's graph passes run: DISABLE_ALL none, ENABLE_BASIC constant
    folding and the passes that keep standard operators (dead nodes, duplicates, Conv+BN
    ...), EXTENDED also the fusions (Conv+Add+activation, MatMul+bias, GELU, LayerNorm ...),
    LAYOUT / ALL also the blocked layouts."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """accelkit runs nodes one after another (each operator is parallel inside):
    ORT_PARALLEL is refused."""
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


# session config keys (add_session_config_entry) accelkit acts on: key -> accepted values
_SESSION_KEYS = {"session.load_model_format": ("ONNX",)}
# run config keys (add_run_config_entry): none
_RUN_KEYS = {}


def _check_severity(value, what):
    if not isinstance(value, int) or not 0 <= value <= 4:
        raise InvalidArgument(f"{what} {value!r} is not a severity level (0 verbose, 1 info, "
                              "2 warning, 3 error, 4 fatal)")


class _Slots:
    """Attributes restricted to the declared ones, as on onnxruntime's pybind classes."""
    __slots__ = ()

    def _entry(self, table, key, value, kind):
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgument(f"{kind} config entries are strings (got {key!r}: {value!r})")
        table[key] = value


# GraphOptimizationLevel -> the engine's AK_OPTIMIZE_* (include/accelkit/infer.h): none,
# basic (standard operators only), extended (the kit's fusions), all (and blocked layouts)
_ENGINE_LEVEL = {GraphOptimizationLevel.ORT_DISABLE_ALL: 0, GraphOptimizationLevel.ORT_ENABLE_BASIC: 2,
                 GraphOptimizationLevel.ORT_ENABLE_EXTENDED: 3, GraphOptimizationLevel.ORT_ENABLE_LAYOUT: 1,
                 GraphOptimizationLevel.ORT_ENABLE_ALL: 1}


class SessionOptions(_Slots):
    """onnxruntime.SessionOptions. Used by accelkit:
    - intra_op_num_threads: the engine's threads (0 = all cores, AK_NUM_THREADS);
    - graph_optimization_level (GraphOptimizationLevel);
    - enable_profiling / profile_file_prefix: InferenceSession.end_profiling writes a
      Chrome trace named PREFIX_DATE_TIME.json in the current folder;
    - log_severity_level / log_verbosity_level / logid: checked (0-4) and kept; the engine
      reports through exceptions and writes no per-session log;
    - inter_op_num_threads: kept; as in onnxruntime it is used by the parallel executor
      only, which accelkit does not have (execution_mode ORT_PARALLEL is refused).
    - optimized_model_filepath: the graph the session runs, written as an ONNX file at
      session creation (ak_session_save_optimized; levels above basic write the kit's
      fused operators in the ai.accelkit domain, which only accelkit loads).
    Refused at session creation, by name: execution_mode ORT_PARALLEL,
    enable_cpu_mem_arena / enable_mem_pattern / enable_mem_reuse set to False (accelkit
    always plans one arena), use_deterministic_compute, config keys other than
    session.load_model_format=ONNX, and the add_* calls for initializers, custom ops and
    free-dimension overrides."""
    __slots__ = ("intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level",
                 "optimized_model_filepath", "enable_profiling", "profile_file_prefix",
                 "log_severity_level", "log_verbosity_level", "logid", "execution_mode",
                 "execution_order", "enable_cpu_mem_arena", "enable_mem_pattern",
                 "enable_mem_reuse", "use_deterministic_compute", "_config")

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.optimized_model_filepath = ""
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self._config = {}

    def add_session_config_entry(self, key, value):
        self._entry(self._config, key, value, "session")

    def get_session_config_entry(self, key):
        if key not in self._config:
            raise RuntimeError(f"SessionOptions does not have configuration with key: {key}")
        return self._config[key]

    def _refuse(self, what):
        raise NotImplemented(f"SessionOptions.{what} is not implemented by accelkit")

    def add_initializer(self, name, ortvalue):
        self._refuse("add_initializer")

    def add_external_initializers(self, names, ortvalues):
        self._refuse("add_external_initializers")

    def register_custom_ops_library(self, path):
        self._refuse("register_custom_ops_library")

    def add_free_dimension_override_by_name(self, name, value):
        self._refuse("add_free_dimension_override_by_name")

    def add_free_dimension_override_by_denotation(self, name, value):
        self._refuse("add_free_dimension_override_by_denotation")

    def engine_settings(self):
        """(threads, fold_constants, optimize, profile) for the engine, after refusing what
        it cannot do."""
        if ExecutionMode(self.execution_mode) != ExecutionMode.ORT_SEQUENTIAL:
            raise NotImplemented("SessionOptions.execution_mode ORT_PARALLEL: accelkit runs "
                                 "nodes one at a time (operators are parallel inside); use "
                                 "ORT_SEQUENTIAL")
        for flag in ("enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse"):
            if not getattr(self, flag):
                raise NotImplemented(f"SessionOptions.{flag} = False: accelkit always plans "
                                     "activations into one reused arena")
        if self.use_deterministic_compute:
            raise NotImplemented("SessionOptions.use_deterministic_compute is not implemented "
                                 "by accelkit")
        if ExecutionOrder(self.execution_order) != ExecutionOrder.DEFAULT:
            raise NotImplemented(f"SessionOptions.execution_order {self.execution_order!r}: "
                                 "accelkit runs the graph in its topological order only")
        for key, value in self._config.items():
            if value not in _SESSION_KEYS.get(key, ()):
                raise NotImplemented(f"session config entry {key}={value!r} is not implemented "
                                     "by accelkit (it knows session.load_model_format=ONNX)")
        _check_severity(self.log_severity_level, "log_severity_level")
        for name in ("intra_op_num_threads", "inter_op_num_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"SessionOptions.{name} {value!r} must be an int >= 0")
        level = GraphOptimizationLevel(self.graph_optimization_level)
        fold = level >= GraphOptimizationLevel.ORT_ENABLE_BASIC
        return self.intra_op_num_threads, fold, _ENGINE_LEVEL[level], bool(self.enable_profiling)


class RunOptions(_Slots):
    """onnxruntime.RunOptions. log_severity_level / log_verbosity_level / logid / run_tag are
    checked and kept (the engine writes no per-run log); terminate=True makes the run raise
    before it starts (accelkit cannot stop a run already under way); run config entries
    are refused when the run starts (accelkit knows none);
    only_execute_path_to_fetches=True is refused (every node runs)."""
    __slots__ = ("log_severity_level", "log_verbosity_level", "logid", "run_tag", "terminate",
                 "only_execute_path_to_fetches", "_config")

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config = {}

    def add_run_config_entry(self, key, value):
        self._entry(self._config, key, value, "run")

    def get_run_config_entry(self, key):
        if key not in self._config:
            raise RuntimeError(f"RunOptions does not have configuration with key: {key}")
        return self._config[key]

    def check(self):
        """Raises for what the run cannot honour (called as a run starts)."""
        from .capi.onnxruntime_pybind11_state import Fail
        _check_severity(self.log_severity_level, "RunOptions.log_severity_level")
        if self.terminate:
            raise Fail("Exiting due to terminate flag being set to true.")
        if self.only_execute_path_to_fetches:
            raise NotImplemented("RunOptions.only_execute_path_to_fetches is not implemented "
                                 "by accelkit (every node runs)")
        for key, value in self._config.items():
            if value not in _RUN_KEYS.get(key, ()):
                raise NotImplemented(f"run config entry {key}={value!r} is not implemented by "
                                     "accelkit")
