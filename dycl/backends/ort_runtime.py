"""The ONNX Runtime part of the generated host (copied into host.py verbatim)."""

RUNTIME = '''
import os

import onnxruntime as ort

# Note: one intra-op thread pool for all sessions. A pool per session, each
# spinning, made a chain of 20 sessions 10x slower on 2 cores.
_THREADS = int(os.environ.get("DYCL_THREADS", "0")) or (os.cpu_count() or 1)
_GLOBAL_POOL = getattr(ort, "_dycl_global_pool", None)
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
    """One compiled sub-DNN: names, dtypes and the output binding are set up once
    (a fresh IOBinding per call costs 4x the call of a small sub-DNN); each call
    binds the inputs, runs, and copies the outputs out. Not thread-safe."""

    def __init__(self, data, entry):
        self.session = ort.InferenceSession(data, _session_options(), providers=["CPUExecutionProvider"])
        used = {i.name for i in self.session.get_inputs()}  # the exporter drops inputs nothing reads
        self.inputs = [(position, port["name"], np.dtype(port["dtype"]))
                       for position, port in enumerate(entry["inputs"]) if port["name"] in used]
        self.outputs = [port["name"] for port in entry["outputs"]]
        # an output bound once keeps its first shape: rebind when a dimension is symbolic
        # (an input's symbolic dim may reach an output even where propagation did not say so)
        self.rebind = any(isinstance(dim, str) for port in entry["inputs"] + entry["outputs"] for dim in port["shape"])
        self.binding = self.session.io_binding()
        self._bind_outputs()

    def _bind_outputs(self):
        for name in self.outputs:
            self.binding.bind_output(name)

    def __call__(self, *args):
        binding = self.binding
        if self.rebind:
            binding.clear_binding_outputs()
            self._bind_outputs()
        for position, name, dtype in self.inputs:
            binding.bind_cpu_input(name, np.ascontiguousarray(args[position], dtype=dtype))
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()


def load_executable(data, entry):
    return _Executable(data, entry)
'''
