"""The ONNX Runtime part of the generated host (copied into host.py verbatim)."""

RUNTIME = '''
import os
import re

import onnxruntime as ort

# Note: one intra-op thread pool for all sessions. A pool per session, each
# spinning, made a chain of 20 sessions 10x slower on 2 cores.
# DYCL_ORT_POOL=session, DYCL_ORT_CALL=iobinding and DYCL_ORT_LOAD=lazy switch the
# host's choices, one by one, for the ablation (benchmarks/ablation.py).
_THREADS = int(os.environ.get("DYCL_THREADS", "0")) or (os.cpu_count() or 1)
_CALL = os.environ.get("DYCL_ORT_CALL", "run")
_LOAD = os.environ.get("DYCL_ORT_LOAD", "eager")
_GLOBAL_POOL = getattr(ort, "_dycl_global_pool", None)
if _GLOBAL_POOL is None and os.environ.get("DYCL_ORT_POOL") == "session":
    _GLOBAL_POOL = ort._dycl_global_pool = False
if _GLOBAL_POOL is None:
    try:
        ort.capi._pybind_state.set_global_thread_pool_sizes(_THREADS, 1)
        _GLOBAL_POOL = True
    except Exception:  # another library created the runtime first, with per-session pools
        _GLOBAL_POOL = False
    ort._dycl_global_pool = _GLOBAL_POOL


def _session_options():
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if _GLOBAL_POOL:
        options.use_per_session_threads = False
    else:
        options.intra_op_num_threads = _THREADS
        options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class _Executable:
    """One compiled sub-DNN: its session, and the input names and dtypes resolved
    once; each call runs ``session.run`` on a feed dict. Not thread-safe.

    Note: IOBinding with outputs bound once (``_BoundExecutable``) was 11% slower
    over the zoo (``benchmarks/ablation.md``): binding each input and copying the
    outputs out costs more than the feed dict saves."""

    def __init__(self, data, entry):
        self.session = ort.InferenceSession(data, _session_options(), providers=["CPUExecutionProvider"])
        self.input_shapes = {i.name: i.shape for i in self.session.get_inputs()}  # the exporter drops unread inputs
        self.inputs = [(position, port["name"], np.dtype(port["dtype"]))
                       for position, port in enumerate(entry["inputs"]) if port["name"] in self.input_shapes]
        self.outputs = [port["name"] for port in entry["outputs"]]

    def __call__(self, *args):
        feeds = {name: np.ascontiguousarray(args[position], dtype=dtype) for position, name, dtype in self.inputs}
        return self.session.run(self.outputs, feeds)


class _BoundExecutable(_Executable):
    """IOBinding, outputs bound once (``DYCL_ORT_CALL=iobinding``). A bound output keeps
    the shape of its first run, so the binding is renewed only where an output's shape
    may have changed: when an input with a symbolic dim changed shape since the last
    call, or on every call where an output dim is not a function of the input dims."""

    def __init__(self, data, entry):
        super().__init__(data, entry)
        input_symbols = _symbols([dim for shape in self.input_shapes.values() for dim in shape])
        output_dims = [dim for port in self.session.get_outputs() for dim in port.shape if not isinstance(dim, int)]
        self.data_dependent = any(dim is None or not _symbols([dim]) <= input_symbols for dim in output_dims)
        self.symbolic_positions = tuple(
            position for position, name, _ in self.inputs
            if any(not isinstance(dim, int) for dim in self.input_shapes[name])) if output_dims else ()
        self.last_shapes = None
        self.binding = self.session.io_binding()
        self._bind_outputs()

    def _bind_outputs(self):
        self.binding.clear_binding_outputs()
        for name in self.outputs:
            self.binding.bind_output(name)

    def __call__(self, *args):
        binding = self.binding
        if self.symbolic_positions:
            shapes = tuple(np.shape(args[position]) for position in self.symbolic_positions)
            if self.data_dependent or shapes != self.last_shapes:
                self.last_shapes = shapes
                self._bind_outputs()
        elif self.data_dependent:
            self._bind_outputs()
        for position, name, dtype in self.inputs:
            binding.bind_cpu_input(name, np.ascontiguousarray(args[position], dtype=dtype))
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()


def _symbols(dims):
    """The identifiers in symbolic dims (``2*batch + 1`` -> {"batch"})."""
    return {word for dim in dims if isinstance(dim, str) for word in re.findall(r"[A-Za-z_]\\w*", dim)}


class _LazyExecutable:
    """Creates its session on the first call."""

    def __init__(self, data, entry):
        self.data, self.entry, self.executable = data, entry, None

    def __call__(self, *args):
        if self.executable is None:
            self.executable = _executable(self.data, self.entry)
        return self.executable(*args)


def _executable(data, entry):
    return (_BoundExecutable if _CALL == "iobinding" else _Executable)(data, entry)


def load_executable(data, entry):
    return (_LazyExecutable if _LOAD == "lazy" else _executable)(data, entry)
'''
