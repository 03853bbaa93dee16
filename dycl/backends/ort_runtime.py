"""The ONNX Runtime part of the generated host: a real module, copied into host.py verbatim
(``hostgen.copies``: less this docstring and its ``# dycl only`` lines) and imported as it is
by the in-process backend.

Imports only the standard library, numpy and onnxruntime (never torch or dycl). Guarantees: loading changes no
process-wide ONNX Runtime state unless the caller opts in (``shared_pool=True``);
every executable is safe to call from many threads at once; a session specialized to sizes
(``_SpecializingExecutable``) runs only feeds of exactly those sizes.
"""

import os
import re
import threading

import numpy as np
import onnxruntime as ort

# Note: thread pools. By default each session gets its own intra-op pool of
# ``threads`` threads that do not spin (a pool per session, each spinning, made a
# chain of 20 sessions 10x slower on 2 cores). One pool shared by all sessions is
# faster still (benchmarks/ablation.md) but is process-wide ONNX Runtime state:
# once it exists, every session in the process must be created with
# use_per_session_threads=False. So it is only an opt-in: load(..., shared_pool=True)
# or DYCL_ORT_POOL=global. DYCL_ORT_CALL=iobinding and DYCL_ORT_LOAD=lazy switch the
# host's other choices, one by one, for the ablation (benchmarks/ablation.py), and
# DYCL_ORT_SPECIALIZE=off turns off sessions specialized to sizes (_SpecializingExecutable).
# A pool's threads spin only while a run lasts, and stop when it returns
# (session.force_spinning_stop), only for the sub-DNNs whose manifest entry says
# ``spin`` (a per-sample graph the compile timed as faster so: dycl/backends/spin_choice.py).
# DYCL_ORT_SPIN=run makes every session do so, DYCL_ORT_SPIN=off none (the ablation's
# switches; benchmarks/session_levers.md, benchmarks/batch_levers.py).


#: shape specialization (_SpecializingExecutable): sightings of a key before it gets its session,
#: specialized sessions kept per sub-DNN, and created per sub-DNN in all
ORT_SPECIALIZE_AFTER = 2
ORT_SPECIALIZED_SESSIONS = 4
ORT_SPECIALIZED_CREATIONS = 16
#: a model larger than this (bytes, weights included) is never specialized: each specialized session
#: holds its own copy of the weights, so a language model would hold up to five
ORT_SPECIALIZE_MAX_BYTES = 64 << 20


def runtime_options(threads=None, providers=None, session_options=None, shared_pool=None, specialize=None):
    """The settings every session of one loaded model is created with.

    ``threads``: intra-op threads per session (default ``$DYCL_THREADS`` or every
    CPU); ``providers``: ONNX Runtime execution providers (default CPU);
    ``session_options``: an ``onnxruntime.SessionOptions`` used as given (then
    ``threads`` must be None); ``shared_pool``: one global thread pool for all
    sessions in the process (see the note above; default ``$DYCL_ORT_POOL == "global"``);
    ``specialize``: sessions specialized to the sizes seen (``_SpecializingExecutable``; default
    on unless ``$DYCL_ORT_SPECIALIZE == "off"``; off where ``session_options`` is given)."""
    if specialize is None:
        specialize = os.environ.get("DYCL_ORT_SPECIALIZE", "on") != "off"
    if not isinstance(specialize, bool):
        raise ValueError(f"specialize must be True or False, got {specialize!r}")
    if shared_pool is None:
        shared_pool = os.environ.get("DYCL_ORT_POOL") == "global"
    if session_options is not None and threads is not None:
        raise ValueError("give threads= or session_options=, not both (session_options is used as given)")
    if threads is None:
        threads = int(os.environ.get("DYCL_THREADS", "0")) or (os.cpu_count() or 1)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    if shared_pool:
        try:
            ort.set_global_thread_pool_sizes(threads, 1)
        except Exception as error:  # the global pools exist already: share them as they are
            if "already been created" not in str(error):
                raise
    return {"threads": threads, "providers": list(providers or ["CPUExecutionProvider"]),
            "session_options": session_options, "shared_pool": bool(shared_pool),
            "specialize": specialize and session_options is None,
            "call": os.environ.get("DYCL_ORT_CALL", "run"), "load": os.environ.get("DYCL_ORT_LOAD", "eager"),
            "spin": os.environ.get("DYCL_ORT_SPIN", "chosen")}


def session_options_for(options=None, spin=False):
    """The SessionOptions every session of a model loaded with ``options`` is created with;
    ``spin``: the manifest's choice for this sub-DNN (``SubDNNEntry.spin``), which
    ``DYCL_ORT_SPIN=run`` or ``off`` overrides."""
    options = options or runtime_options()
    if options["session_options"] is not None:
        return options["session_options"]
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if options["shared_pool"]:
        session_options.use_per_session_threads = False
    else:
        session_options.intra_op_num_threads = options["threads"]
        session_options.inter_op_num_threads = 1
    if options.get("spin") == "run" or (spin and options.get("spin") != "off"):  # spin only while a run lasts
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "1")
        session_options.add_session_config_entry("session.force_spinning_stop", "1")
    else:
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return session_options


def _session(data, options, threads=None, sizes=None, spin=False):
    """A session of ``data``; ``sizes``: {dim name: size} fixed by free-dimension overrides
    (only where ``options`` create their own SessionOptions); ``spin``: the entry's ``spin``."""
    session_options = session_options_for(options, spin)
    for name, size in (sizes or {}).items():
        session_options.add_free_dimension_override_by_name(name, size)
    if threads is not None and options["session_options"] is None and not options["shared_pool"]:
        # the manifest's cap for a graph too small for a pool (1: runs on the calling thread)
        session_options.intra_op_num_threads = min(threads, options["threads"])
    try:
        return ort.InferenceSession(data, session_options, providers=options["providers"])
    except Exception as error:
        # another component of the process opted in to ONNX Runtime's global pool
        if "global thread pool" not in str(error) or options["session_options"] is not None:
            raise
    session_options.use_per_session_threads = False
    return ort.InferenceSession(data, session_options, providers=options["providers"])


class _Executable:
    """One compiled sub-DNN: its session, and the input names and dtypes resolved
    once; each call runs the session on a feed dict (thread-safe).

    Note: the call path. ``InferenceSession.run`` is four Python frames over the runtime's
    binding (``session._sess.run``): a WebGPU graph-capture check, a missing-input check,
    an OrtValue ownership check, and a fallback to other providers when a GPU provider
    fails. On the CPU provider none of them can fire for a host that feeds numpy arrays
    for every input the session declares, so ``_runner`` calls the binding directly there
    (4-5 µs less per run, benchmarks/call_overhead.py) and the public ``run`` elsewhere
    (or where the binding is not where ONNX Runtime 1.31 keeps it).

    Note: IOBinding with outputs bound once (``_BoundExecutable``) was 11% slower
    over the zoo (``benchmarks/ablation.md``): binding each input and copying the
    outputs out costs more than the feed dict saves. Keeping values as ``OrtValue``s
    between sub-DNNs does not pay either (ONNX Runtime 1.31, sdn_mobilenet's sub-DNNs
    on their real inputs, 2026-11-27): ``run`` on numpy took 13.9 µs a run, the
    public ``run_with_ort_values`` 175 µs (it checks every OrtValue's session), and the
    binding under it 12.2 µs, a private API whose 1.7 µs would also need the host's
    conditions and shape guards to read OrtValues."""

    def __init__(self, session, entry):
        self.session = session
        self.input_shapes = {i.name: i.shape for i in self.session.get_inputs()}  # the exporter drops unread inputs
        self.inputs = [(position, port.name, np.dtype(port.dtype))
                       for position, port in enumerate(entry.inputs) if port.name in self.input_shapes]
        self.outputs = [port.name for port in entry.outputs]
        self._run = _runner(self.session, len(self.inputs) == len(self.input_shapes))

    def __call__(self, *args):
        feeds = {}
        for position, name, dtype in self.inputs:  # a loop, not a comprehension: no frame of its own
            # asarray, not ascontiguousarray: that one turns a 0-d scalar input into shape (1,)
            feeds[name] = np.asarray(args[position], dtype=dtype, order="C")
        return self._run(self.outputs, feeds, None)


def _runner(session, feeds_every_input):
    """``run(output_names, feeds, run_options)`` of ``session``: its binding where nothing the public
    ``run`` checks can fire (see ``_Executable``'s note), else the public one."""
    try:
        binding = session._sess
        capture = binding.is_webgpu_graph_capture_enabled()
        direct = binding.run
    except AttributeError:  # another ONNX Runtime than the one this was written against
        return session.run
    if capture or not feeds_every_input or session.get_providers() != ["CPUExecutionProvider"]:
        return session.run
    return direct


class _SpecializingExecutable(_Executable):
    """A sub-DNN whose inputs have named symbolic dims (``batch``, ``seq``), run on a session
    specialized to their sizes where those sizes recur, else on the symbolic session.

    Note: shape specialization. ONNX Runtime can plan a graph whose input sizes are fixed
    (free-dimension overrides by name) better than a symbolic one: on the zoo, 0-6% less a run on
    the calling thread (ranet most) and up to 8% with a pool (benchmarks/session_levers.md). The
    policy: a call's key is the shapes of the inputs with named dims. A key gets its own session
    the ``ORT_SPECIALIZE_AFTER``-th time it is seen (so a size seen once, as the self-check's odd
    sizes are, costs no session), on the calling thread, which waits for the session to be
    created (a few ms a session: benchmarks/session_levers.md); at most
    ``ORT_SPECIALIZED_SESSIONS`` are kept (one used since the last eviction gets a second chance,
    ``_evicted``), and at most ``ORT_SPECIALIZED_CREATIONS`` are ever created, so a workload
    cycling over more sizes than are kept settles on the symbolic session instead of creating
    sessions forever. A key whose feeds give one name two sizes, or whose session cannot be
    created, stays on the symbolic session. ONNX Runtime itself refuses a feed whose dims differ
    from a session's fixed ones, so a session never runs sizes it was not made for. A hit costs
    a dict lookup and no lock (0.15 µs more than ``_Executable`` a run, benchmarks/session_levers.md);
    a miss takes the lock. Each specialized session holds its own copy of the weights, so a model
    over ``ORT_SPECIALIZE_MAX_BYTES`` is not specialized.

    Where the manifest gives the example's sizes (``SubDNNEntry.sizes``), the session for them is
    made at load instead (``_example_session``) and the symbolic one on the first call it does not
    take: the example's size runs the specialized graph from the first call, and no session is made
    inside a call at that size (blockdrop's first pass over 20 inputs took 85 ms against 34 ms for
    the static compile, its slowest call 19 ms: 59 sessions made mid-serving). The key is the shapes
    of all inputs, concatenated (an input without a named dim has one shape on every session)."""

    def __init__(self, session, entry, data, options, example=None):
        super().__init__(session, entry)
        self.data, self.options, self.threads, self.spin = data, options, entry.threads, bool(entry.spin)
        self.specialized = {}  # key -> [runner, used], oldest first; replaced, never changed in place (no lock to read)
        self.seen, self.refused, self.created = {}, set(), 0
        self.lock = threading.Lock()
        if example is None:  # ``session`` is the symbolic one
            self.named = _named_dims(session)  # [(input name, axis, dim name)]
            self.symbolic = [self._run, False]  # [runner, used]: the entry of every key not specialized
        else:  # ``session`` is specialized to the example's sizes; the symbolic one is made on the first miss
            self.named, self.symbolic = None, None
            self.specialized[example] = [self._run, False]
            self.created = 1

    def __call__(self, *args):
        feeds = {}
        key = ()
        for position, name, dtype in self.inputs:  # see _Executable.__call__
            array = feeds[name] = np.asarray(args[position], dtype=dtype, order="C")
            key += array.shape  # concatenated: a feed of another rank fails on every session alike
        entry = self.specialized.get(key)
        if entry is None:
            entry = self._miss(key, feeds)
        entry[1] = True  # used since the last eviction: a second chance
        return entry[0](self.outputs, feeds, None)

    def _miss(self, key, feeds):
        """The entry for a key without a specialized session: made now where the policy says so."""
        if self.symbolic is None:
            self._load_symbolic()
        if self.created >= ORT_SPECIALIZED_CREATIONS or key in self.refused:
            return self.symbolic
        with self.lock:
            entry = self.specialized.get(key)
            if entry is not None:  # another thread made it meanwhile
                return entry
            if self.created >= ORT_SPECIALIZED_CREATIONS:  # another thread spent the budget meanwhile
                return self.symbolic
            if len(self.seen) >= 64:
                self.seen.clear()
            self.seen[key] = self.seen.get(key, 0) + 1
            if self.seen[key] < ORT_SPECIALIZE_AFTER:
                return self.symbolic
            del self.seen[key]
            session = self._specialized_session(feeds)
            if session is None:
                self.refused = set() if len(self.refused) >= 64 else self.refused
                self.refused.add(key)
                return self.symbolic
            self.created += 1
            specialized = _evicted(self.specialized, ORT_SPECIALIZED_SESSIONS - 1)
            entry = specialized[key] = [_runner(session, len(self.inputs) == len(self.input_shapes)), False]
            self.specialized = specialized
            return entry

    def _load_symbolic(self):
        """The symbolic session, made on the first key the example's session does not take (once,
        whichever thread comes first; ``named`` is set before ``symbolic``, which readers test)."""
        with self.lock:
            if self.symbolic is None:
                session = _session(self.data, self.options, self.threads, spin=self.spin)
                self.named = _named_dims(session)
                self.symbolic = [_runner(session, len(self.inputs) == len(self.input_shapes)), False]

    def _specialized_session(self, feeds):
        """A session with every named dim fixed to its size in ``feeds``; None where the feeds give a
        name two sizes or the session cannot be created."""
        sizes = {}
        for name, axis, dim in self.named:
            shape = np.shape(feeds[name]) if name in feeds else ()
            if axis >= len(shape) or sizes.setdefault(dim, shape[axis]) != shape[axis]:
                return None
        try:
            return _session(self.data, self.options, self.threads, sizes, self.spin)
        except Exception:  # noqa: BLE001 - the symbolic session still runs it
            return None


def _evicted(entries, keep):
    """A copy of ``entries`` (key -> [runner, used], oldest first) with at most ``keep`` left: an
    entry used since the last eviction gets a second chance (moved to the back, marked unused),
    the oldest unused one goes (CLOCK, an approximation of least recently used without a write
    to shared order on every hit)."""
    entries = dict(entries)
    while len(entries) > keep:
        key, entry = next(iter(entries.items()))
        del entries[key]
        if entry[1]:
            entry[1] = False
            entries[key] = entry
    return entries


def _named_dims(session):
    """``[(input name, axis, dim name)]``: the session's input dims that are named symbols
    (an expression or an unnamed dim cannot be overridden by name)."""
    return [(port.name, axis, dim) for port in session.get_inputs() for axis, dim in enumerate(port.shape)
            if isinstance(dim, str) and re.fullmatch(r"[A-Za-z_]\w*", dim)]


class _BoundExecutable(_Executable):
    """IOBinding, outputs bound once (``DYCL_ORT_CALL=iobinding``). A bound output keeps
    the shape of its first run, so the binding is renewed only where an output's shape
    may have changed: when an input with a symbolic dim changed shape since the last
    call, or on every call where an output dim is not a function of the input dims.
    A binding is mutable state, so each thread has its own."""

    def __init__(self, session, entry):
        super().__init__(session, entry)
        input_symbols = _symbols([dim for shape in self.input_shapes.values() for dim in shape])
        output_dims = [dim for port in self.session.get_outputs() for dim in port.shape if not isinstance(dim, int)]
        self.data_dependent = any(dim is None or not _symbols([dim]) <= input_symbols for dim in output_dims)
        self.symbolic_positions = tuple(
            position for position, name, _ in self.inputs
            if any(not isinstance(dim, int) for dim in self.input_shapes[name])) if output_dims else ()
        self.local = threading.local()

    def _state(self):
        state = getattr(self.local, "state", None)
        if state is None:
            state = self.local.state = [self.session.io_binding(), None]  # binding, shapes it was bound for
            self._bind_outputs(state[0])
        return state

    def _bind_outputs(self, binding):
        binding.clear_binding_outputs()
        for name in self.outputs:
            binding.bind_output(name)

    def __call__(self, *args):
        state = self._state()
        binding = state[0]
        if self.symbolic_positions:
            shapes = tuple(np.shape(args[position]) for position in self.symbolic_positions)
            if self.data_dependent or shapes != state[1]:
                state[1] = shapes
                self._bind_outputs(binding)
        elif self.data_dependent:
            self._bind_outputs(binding)
        for position, name, dtype in self.inputs:
            binding.bind_cpu_input(name, np.asarray(args[position], dtype=dtype, order="C"))
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()


def _symbols(dims):
    """The identifiers in symbolic dims (``2*batch + 1`` -> {"batch"})."""
    return {word for dim in dims if isinstance(dim, str) for word in re.findall(r"[A-Za-z_]\w*", dim)}


class _LazyExecutable:
    """Creates its session on the first call (once, whichever thread calls first)."""

    def __init__(self, data, entry, options):
        self.data, self.entry, self.options, self.executable = data, entry, options, None
        self.lock = threading.Lock()

    def __call__(self, *args):
        if self.executable is None:
            with self.lock:
                if self.executable is None:
                    self.executable = _executable(self.data, self.entry, self.options)
        return self.executable(*args)


def _executable(data, entry, options):
    specialize = options["specialize"] and len(data) <= ORT_SPECIALIZE_MAX_BYTES and options["call"] != "iobinding"
    if specialize and entry.sizes:
        found = _example_session(data, entry, options)
        if found is not None:
            return _SpecializingExecutable(found[0], entry, data, options, example=found[1])
    session = _session(data, options, entry.threads, spin=bool(entry.spin))
    if options["call"] == "iobinding":
        return _BoundExecutable(session, entry)
    if specialize and _named_dims(session):
        return _SpecializingExecutable(session, entry, data, options)
    return _Executable(session, entry)


def _example_session(data, entry, options):
    """``(session, key)``: a session with the entry's named dims fixed to their sizes in the example
    (``entry.sizes``), and the ``_SpecializingExecutable`` key of the feeds it takes: every input's
    shape as the session declares it, concatenated. None where a declared dim is still not a number
    (a dim without a name, an expression) or the session cannot be created."""
    try:
        session = _session(data, options, entry.threads, dict(entry.sizes), bool(entry.spin))
    except Exception:  # noqa: BLE001 - the symbolic session still runs it
        return None
    declared = {port.name: port.shape for port in session.get_inputs()}
    key = ()
    for port in entry.inputs:
        shape = declared.get(port.name)
        if shape is not None:
            if not all(isinstance(dim, int) for dim in shape):
                return None
            key += tuple(shape)
    return session, key


def load_executable(data, entry, options=None):
    options = options or runtime_options()
    return (_LazyExecutable if options["load"] == "lazy" else _executable)(data, entry, options)
