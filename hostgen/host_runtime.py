"""The fixed runtime of every generated host: the model class, argument binding, errors.

A real module (linted, imported by tests) that ``hostgen.emit`` copies into every ``host.py``
(``hostgen.copies``: without this docstring and the ``# dycl only`` lines). In the host it
follows the manifest, the artifact checks, the backend runtime and the tables the emitter
writes (``SUB_DNNS``, ``CALL``, ``STATE``, ``FORWARD_LINES``, ...); the emitted
``class Model(HostModel)`` with its ``_forward`` follows it. The ``# dycl only`` lines below
stand for those names where this module is imported by dycl's tests.

Assumes the emitted method named by ``HostModel._emitted`` is the one whose lines
``FORWARD_LINES`` (``hostgen.program``) describes (offsets from its ``def`` line); guarantees that
errors raised there name the model's line without reading the host's source text.
Loading an artifact is ``hostgen/host_loader.py``, copied after this module.
"""

import collections
import inspect
import threading

import numpy as np
from dycl.hostgen.manifest import InputShapeError, InputTypeError, PortStructureError, ShapeGuardError  # dycl only

# the emitter's tables (hostgen.emit), for dycl's tests  # dycl only
SUB_DNNS = {}  # dycl only
SOURCE_LINES = {}  # dycl only
PARAMETERS = []  # dycl only
SPECIALIZED = {}  # dycl only
CALL = {"parameters": [], "inputs": [], "fixed": [], "absent": [], "variadic": {}}  # dycl only
STATE = []  # dycl only
FORWARD_LINES = {}  # dycl only


class HostModel:
    """The compiled model: ``model(*inputs)`` takes and returns numpy arrays
    (and the Python values the original forward() returns). The host's ``Model`` adds the
    emitted method named ``_emitted``, which runs the model's control flow."""

    #: the emitted method whose lines ``FORWARD_LINES`` describes
    _emitted = "_forward"

    def __init__(self, executables, manifest, constants=None):
        self.manifest = manifest
        self.constants = constants or {}
        self._inputs = manifest.inputs
        self._input_plan = tuple(_input_plan(spec) for spec in manifest.inputs)
        self.state = {entry[0]: _stored_state(self.constants, *entry) for entry in STATE}
        self._state_lock = threading.Lock()
        self._call = {}
        self._variants = {}
        for index, variants in SUB_DNNS.items():
            self._variants[index] = {key: executables[name] for key, name in variants.items()}
            if len(variants) == 1:
                self._call[index] = next(iter(self._variants[index].values()))

    def _variant(self, index, key):
        try:
            return self._variants[index][key]
        except KeyError:
            raise ValueError(
                f"sub-DNN {index} was compiled for list lengths and ranks {sorted(self._variants[index])}, "
                f"got {key}"
            ) from None

    def __call__(self, *args, **kwargs):
        if not STATE:
            outputs = self._run(_bind(args, kwargs))
        else:
            with self._state_lock:  # a model that keeps state runs its calls one at a time
                outputs, self.state = self.call_with_state(self.state, *args, **kwargs)
        return _give_back(args, kwargs, outputs) if CALL.get("returned") else outputs

    def call_with_state(self, state, *args, **kwargs):
        """``(outputs, state after the call)`` of one call that starts from ``state`` (``STATE``'s
        parameter -> value); ``self.state`` is left as it is."""
        inputs = {name: _state_input(state, name, kind, literal) for name, _, kind, literal in STATE
                  if kind not in ("list", "assigned")}
        outputs, final = self._run(dict(_bind(args, kwargs), **inputs))
        final = [state[name] if kind == "assigned" and value is None else value  # not assigned by this call
                 for (name, _, kind, _), value in zip(STATE, final)]
        return outputs, {name: _state_after(kind, state[name], value, name) for (name, _, kind, _), value in
                         zip(STATE, final)}

    def _run(self, arguments):
        if not _inputs_fit(self._input_plan, arguments):  # then _check_input says why
            dims = {}
            for spec in self._inputs:
                _check_input(spec, arguments[spec.name], dims)
        try:
            returned = self._forward(**arguments)
        except ShapeGuardError:
            raise
        except Exception as error:
            code = getattr(type(self), self._emitted).__code__
            message = _ambiguous_condition(error, code) if isinstance(error, ValueError) else None
            if message is not None:
                raise ValueError(message) from None
            failed = _failed_line(error, code)
            if failed is None:
                raise
            if isinstance(error, PortStructureError):  # the caller's value, not the compiled code, is at fault
                error.add_note(f"(a value passed to the compiled code of {failed[1]})")
                raise
            index, where = failed
            if index is None:  # a host operation: the same exception, with the model's line added
                error.add_note(f"(raised by the host code of {where})")
                raise
            lines = ", ".join(SOURCE_LINES.get(index, [where]))
            first = (str(error).strip().splitlines() or [""])[0][:300]
            kind = type(error).__name__
            raise RuntimeError(f"the compiled code of {lines} failed ({kind}: {first})") from error
        returned, finals = split_written_inputs(returned, self.manifest)
        for name, final in zip(self.manifest.written_inputs, finals):
            write_back(arguments[name], final)  # forward() updates this input in place: so does the call
        return returned

def _bind(args, kwargs):
    """Bind a call as forward() binds it, then check that it has the example's form:
    the same parameters passed (the same number of ``*args``, the same ``**kwargs``
    keys), and compiled-in values passed equal or left out. Returns the inputs of
    ``_forward`` by name."""
    if _POSITIONAL is not None and not kwargs and len(args) == len(_POSITIONAL):  # bound as Signature.bind binds it
        given = dict(zip(_POSITIONAL, args))
    else:
        try:
            given = _SIGNATURE.bind(*args, **kwargs).arguments
        except TypeError as error:
            raise ValueError(f"{error}; the model takes forward{_SIGNATURE}") from None
    for name in CALL["absent"]:
        if name in given:
            raise ValueError(f"argument {name!r} was left at its default when the model was compiled, so its "
                             f"default is part of the compiled model; compile with an example that passes it")
    for name, expected in CALL["variadic"].items():
        got = given.get(name, () if isinstance(expected, int) else {})
        form = len(got) if isinstance(expected, int) else sorted(got)
        if form != (expected if isinstance(expected, int) else sorted(expected)):
            raise ValueError(f"{name!r}: the model was compiled for {expected!r} "
                             f"({'arguments' if isinstance(expected, int) else 'keys'}), got {form!r}")
    for name, key, value in CALL["fixed"]:
        if name not in given:
            continue
        got = given[name] if key is None else given[name][key]
        if got is not value and (isinstance(got, np.ndarray) or got != value):
            shown = f"array of shape {list(got.shape)}" if isinstance(got, np.ndarray) else repr(got)
            where = name if key is None else f"{name}[{key!r}]"
            raise ValueError(f"argument {where!r} was compiled as {value!r}, got {shown}")
    structured = {(name, key): _structure_leaves(given[name] if key is None else given[name][key], tree,
                                                 name if key is None else f"{name}[{key!r}]")
                  for name, key, tree in CALL.get("structures", ()) if name in given}
    arguments = dict(SPECIALIZED)
    for flat, name, key in CALL["inputs"]:
        if name not in given:
            raise ValueError(f"missing argument {name!r}: the model was compiled with it passed "
                             f"(forward{_SIGNATURE})")
        if isinstance(key, (list, tuple)):  # an array of an argument holding records: [its key, position]
            arguments[flat] = structured[name, key[0]][key[1]]
        else:
            arguments[flat] = given[name] if key is None else given[name][key]
    return arguments


def _give_back(args, kwargs, outputs):
    """``outputs`` where forward returns an argument it updated in place (a KV cache: ``CALL``'s
    ``returned``), as eager does: the caller's plain form given the state of the returned one,
    and itself in its place."""
    given = _SIGNATURE.bind(*args, **kwargs).arguments
    for name, key, path in CALL["returned"]:
        target = given[name] if key is None else given[name][key]
        _refill_in_place(target, _at(outputs, path))
        outputs = _put(outputs, path, target)
    return outputs


def _at(value, path):
    for step in path:
        value = value[step]
    return value


def _put(container, path, value):
    """``container`` with ``value`` at ``path`` (a tuple on the way is rebuilt)."""
    if not path:
        return value
    item = _put(container[path[0]], path[1:], value)
    if isinstance(container, tuple):
        return container[:path[0]] + (item,) + container[path[0] + 1:]
    container[path[0]] = item
    return container


def _refill_in_place(target, source):
    """Give the plain record ``target`` the fields of ``source``; its records and lists of records
    stay the same objects where ``source`` has as many."""
    for name, new in source["fields"].items():
        old = target["fields"].get(name)
        pairs = list(zip(old, new)) if isinstance(old, list) and isinstance(new, list) and len(old) == len(new) \
            else [(old, new)]
        if all(_same_kind_of_object(a, b) for a, b in pairs):
            for a, b in pairs:
                _refill_in_place(a, b)
        else:
            target["fields"][name] = new


def _same_kind_of_object(old, new):
    return isinstance(old, dict) and isinstance(new, dict) and "record" in old and old.get("record") == new.get(
        "record") and isinstance(old.get("fields"), dict)


def _structure_leaves(value, tree, where):
    """The arrays of an argument that holds records (a KV cache), in order, after checking it
    against the compiled structure ``tree`` (``dycl.model.records``): a record is
    ``{"record": name, "fields": {...}}``, compiled-in values must be equal. ``ValueError``
    naming the place, what was expected and what was got."""
    if tree == "tensor":
        return [value] if isinstance(value, np.ndarray) else _structure_error(where, "an array", value)
    kind = tree[0]
    if kind == "static":
        if value is tree[1] or (type(value) is type(tree[1]) and value == tree[1]):
            return []
        return _structure_error(where, f"{tree[1]!r} (compiled in)", value)
    if kind == "record":
        fields = value.get("fields") if isinstance(value, dict) and value.get("record") == tree[1] else None
        if not isinstance(fields, dict) or sorted(value) != ["fields", "record"]:
            return _structure_error(where, f"a {tree[1]} record {{'record': {tree[1]!r}, 'fields': {{...}}}}", value)
        value, entries = fields, tree[2]
    elif not isinstance(value, dict if kind == "dict" else (list, tuple)):
        return _structure_error(where, f"a {kind}", value)
    else:
        entries = tree[1] if kind == "dict" else list(enumerate(tree[1]))
    keys = [key for key, _ in entries]
    got = list(value) if isinstance(value, dict) else list(range(len(value)))
    if sorted(map(repr, got)) != sorted(map(repr, keys)):
        shown = "items" if kind in ("list", "tuple") else "keys"
        return _structure_error(where, f"{shown} {keys}", value, f"{shown} {got}")
    return [leaf for key, child in entries for leaf in _structure_leaves(value[key], child, f"{where}[{key!r}]")]


def _structure_error(where, expected, value, got=None):
    if got is None:
        got = f"array of shape {list(value.shape)}" if isinstance(value, np.ndarray) else (
            f"a {type(value).__name__}" + (f" {value!r}" if isinstance(value, (str, bool, int, float)) else ""))
    raise ValueError(f"argument {where!r}: expected {expected}, got {got} (a structure of records, "
                     "as the compiled model returns it, is passed back the same way)")


def _stored_state(constants, name, path, kind, value):
    """The value of state ``name`` when the model was compiled (a ``STATE`` entry), from the constants."""
    if kind in ("dict", "set"):
        return dict(value) if kind == "dict" else set(value)
    if kind in ("prior", "assigned"):  # a list's items, passed in; an attribute the model creates: none yet
        return None
    if kind == "list":  # tensors stored as constants, numbers in the table (``value``: index -> number)
        prefix = name + "@state."
        items = {int(key[len(prefix):]): np.array(value, copy=True) for key, value in constants.items()
                 if key.startswith(prefix)}
        items.update({int(index): number for index, number in (value or {}).items()})
        return [items[index] for index in sorted(items)]
    value = constants[name + "@state"]
    return _state_value(kind, value if kind == "tensor" else value.item(), name)


def _state_input(state, name, kind, literal):
    """The argument of ``_forward`` for state ``name``. A list's items are no argument (the call
    appends to a fresh list); its ``prior`` slot gets them, from the list ``literal`` names unless
    ``state`` gives them (the in-process model passes the user's list there and no items in the list)."""
    if kind == "prior" and state.get(name) is None:
        return collections.deque(state[literal])
    return state[name]


def _state_after(kind, before, value, name):
    """State ``name`` after a call that returned ``value`` for it: a list gets the items the call
    appended, a ``prior`` slot (a list's items, passed in) stays unused."""
    if kind == "list":
        return before + [np.array(item, copy=True) if isinstance(item, np.ndarray) else item for item in value]
    return None if kind == "prior" else _state_value(kind, value, name)


def _state_value(kind, value, name):
    """A value of state ``name`` as the host keeps it: an array it owns, or a Python number."""
    if kind == "assigned":
        return np.array(value, copy=True) if isinstance(value, np.ndarray) else value
    if kind == "tensor" and isinstance(value, (np.ndarray, np.generic)):
        return np.array(value, copy=True)
    if kind == "dict" and isinstance(value, dict) and not any(isinstance(v, np.ndarray) for v in value.values()):
        return {key: v.item() if isinstance(v, np.generic) else v for key, v in value.items()}
    if kind != "tensor" and not isinstance(value, np.ndarray):
        return value.item() if isinstance(value, np.generic) else value
    raise TypeError(f"module state {name!r} was compiled as a {kind}, got {type(value).__name__}")


def _signature(parameters):
    kinds = {"POSITIONAL_ONLY": inspect.Parameter.POSITIONAL_ONLY, "VAR_POSITIONAL": inspect.Parameter.VAR_POSITIONAL,
             "KEYWORD_ONLY": inspect.Parameter.KEYWORD_ONLY, "VAR_KEYWORD": inspect.Parameter.VAR_KEYWORD}
    return inspect.Signature([
        inspect.Parameter(name, kinds.get(kind, inspect.Parameter.POSITIONAL_OR_KEYWORD),
                          default=None if has_default else inspect.Parameter.empty)
        for name, kind, has_default in parameters])


_SIGNATURE = _signature(CALL["parameters"])


def _positional(parameters):
    """The parameters' names where each may be passed by position (no ``*args``, keyword-only or
    ``**kwargs``), else None: a call with that many positional arguments and no keywords binds them in order."""
    if any(kind in ("VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD") for _, kind, _ in parameters):
        return None
    return tuple(name for name, _, _ in parameters)


_POSITIONAL = _positional(CALL["parameters"])


def _ambiguous_condition(error, code):
    """A clear message for numpy's "truth value of an array ... is ambiguous" raised
    by a condition of the emitted method ``code`` (a tensor condition over a batch), else None."""
    if "truth value of an array" not in str(error):
        return None
    frame, line = None, 0
    trace = error.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code is code:
            frame, line = trace.tb_frame, trace.tb_lineno
        trace = trace.tb_next
    if frame is None:
        return None
    kind, _, where, test, _ = _statement_at(line - code.co_firstlineno) or ("", None, "", "", 0)
    text = (f"if {test}:" if kind == "condition" else f"a {kind or 'bookkeeping'} statement") + (
        f"  # {where}" if where else "")
    value = frame.f_locals.get(test)
    shape = f" of shape {list(value.shape)}" if isinstance(value, np.ndarray) else ""
    return (f"the condition at {where or 'forward()'} is an array{shape} with more than one element, "
            f"so its truth value is ambiguous (eager PyTorch raises too). dycl takes one branch per call, not "
            f"one per sample: reduce the condition over the batch (.any(), .all()) or call with a batch of one "
            f"(host: `{text}`)")


def _statement_at(offset):
    """The ``FORWARD_LINES`` entry ``[kind, sub-DNN, where, text, extra lines]`` of the statement
    of the emitted method that spans line ``offset`` (from its ``def`` line), else None."""
    for first, entry in FORWARD_LINES.items():
        if first <= offset <= first + entry[4]:
            return entry
    return None


def _failed_line(error, code):
    """``(sub-DNN index or None, "file:line")`` of the line of the emitted method ``code``
    that raised ``error`` (``FORWARD_LINES`` names the model's line), else None. An error
    of the sub-DNN dispatch itself (``_variant``) is the host's, not the sub-DNN's."""
    frames = []
    trace = error.__traceback__
    while trace is not None:
        frames.append(trace)
        trace = trace.tb_next
    for position in range(len(frames) - 1, -1, -1):
        frame = frames[position]
        if frame.tb_frame.f_code is not code:
            continue
        entry = _statement_at(frame.tb_lineno - code.co_firstlineno)
        if entry is None or not entry[2]:
            return None
        kind, index, where, _, _ = entry
        inner = frames[position + 1].tb_frame.f_code.co_name if position + 1 < len(frames) else None
        return (None if kind != "call" or inner == "_variant" else index), where
    return None


#: the name of the batch dim dycl makes symbolic by default (``dycl.model.dynamic.BATCH``): an empty
#: batch is refused there (its graphs were traced at sizes >= 1, and reductions over no rows need not
#: agree with torch's: ``all()`` of nothing); a dim the user named in ``dynamic=`` may be 0
DEFAULT_BATCH = "batch"


#: a Python number's part of a variant key by its type, as ``hcfg.variants.NUMBER_RANKS``
_NUMBER_RANKS = {float: -1, int: -2, bool: -3}


def _rank(value):
    """A variant key's part for an input whose rank or Python type differs between paths
    (``hcfg.variants``): the rank of an array, a negative code for a Python number by its type (what the
    trace saw as a number, not as a 0-d tensor: ``np.ndim`` gives both 0, and a 0-d tensor's graph given a
    number computes something else; an int's graph given a float truncates it)."""
    rank = _NUMBER_RANKS.get(type(value))
    return np.ndim(value) if rank is None else rank


def _input_plan(spec):
    """What ``_check_input`` checks of one input, resolved once: ``(name, dtype, rank, static dims as
    (axis, size), named symbolic dims as (axis, name))``."""
    static = tuple((axis, dim) for axis, dim in enumerate(spec.shape) if isinstance(dim, int))
    named = tuple((axis, dim) for axis, dim in enumerate(spec.shape) if isinstance(dim, str) and dim.isidentifier())
    return spec.name, np.dtype(spec.dtype), len(spec.shape), static, named


def _inputs_fit(plan, arguments):
    """Whether every input passes ``_check_input`` (False where any might not: it then says which)."""
    dims = {}
    for name, dtype, rank, static, named in plan:
        value = arguments[name]
        if not isinstance(value, np.ndarray) or value.dtype != dtype or value.ndim != rank:
            return False
        shape = value.shape
        for axis, size in static:
            if shape[axis] != size:
                return False
        for axis, dim in named:
            got = shape[axis]
            if dims.setdefault(dim, got) != got or (got == 0 and dim == DEFAULT_BATCH):
                return False
    return True


def _check_input(spec, value, dims):
    """Check dtype, rank and static dims of one input (``InputShapeError`` for a rank or size it
    was not compiled for), and that the default batch is not empty
    (``DEFAULT_BATCH``); ``dims`` collects the size of
    every symbolic dim seen so far, so that inputs sharing a dim name agree on it."""
    name = spec.name
    if not isinstance(value, np.ndarray):
        raise InputTypeError(name, type(value).__name__)
    if value.dtype != np.dtype(spec.dtype):
        raise ValueError(f"input {name!r}: expected dtype {spec.dtype}, got {value.dtype}")
    shape = spec.shape
    if value.ndim != len(shape):
        raise InputShapeError(f"input {name!r}: expected rank {len(shape)} (shape {_shape(shape)}), got rank "
                              f"{value.ndim} (shape {list(value.shape)})")
    for axis, (expected, got) in enumerate(zip(shape, value.shape)):
        if isinstance(expected, int):
            if expected != got:
                raise InputShapeError(f"input {name!r}: expected shape {_shape(shape)}, got {list(value.shape)} "
                                      f"(dimension {axis} is static: {expected})")
        elif expected.isidentifier():
            if got == 0 and expected == DEFAULT_BATCH:  # the batch dycl chose to make symbolic: traced at >= 1
                raise InputShapeError(f"input {name!r}: dimension {axis} ({expected!r}) is 0; the model was compiled "
                                      f"for batches of at least 1 (name the dim in dynamic= to compile empty ones too)")
            seen = dims.setdefault(expected, (name, axis, got))
            if seen[2] != got:
                raise InputShapeError(f"input {name!r}: dimension {axis} is {expected!r}, expected {seen[2]} as in "
                                      f"input {seen[0]!r} (dimension {seen[1]}), got {got}")


def _shape(shape):
    return "[" + ", ".join(str(dim) for dim in shape) + "]"


def split_written_inputs(returned, manifest):
    """``(what forward() returns, the final values of the inputs it updates in place)``:
    ``_forward`` returns both as a pair when ``manifest.written_inputs`` names any."""
    if not manifest.written_inputs:
        return returned, ()
    return returned


def write_back(given, final):
    """Copy ``final`` into the caller's array ``given`` (leaf by leaf in a dict, list or tuple)."""
    if isinstance(given, np.ndarray):
        if final is not given:
            np.copyto(given, final)
    elif isinstance(given, dict):
        for key, item in given.items():
            write_back(item, final[key])
    elif isinstance(given, (list, tuple)):
        for item, value in zip(given, final):
            write_back(item, value)
