"""The per-sample router of a batched host (``dycl.compile(..., per_sample=True)``).

A real module (linted, imported by tests) that ``hostgen.emit_batched`` copies into the host
after ``hostgen/host_runtime.py`` and the tables ``ORDER`` and ``SAMPLE_INPUTS``; the host's
``class Model(PerSampleModel, HostModel)`` adds ``_sample``, the generator that runs one
sample's control flow and yields ``(sub-DNN index, variant key, arguments)`` for each sub-DNN.

``_route`` starts one ``_sample`` per sample of the batch, gathers the pending requests of
the same sub-DNN (same variant; the argument shapes and dtypes checked alike once per group as
it is gathered, and the group split by them where they differ; for a sub-DNN in ``SIZED_BY_VALUES``
the same numbers passed, as its outputs' shapes may follow them), runs it once on the stacked
group, always serving the pending sub-DNN first in program order (``ORDER``), and hands each
sample its row back (``hostgen/emit_batched.py`` says why this shape). Every shortcut of the
gather gives the same arrays ``np.stack`` and indexing would.

``STRAIGHT`` names the one sub-DNN of a program that is nothing else (its inputs the per-sample
inputs, its output returned): the router then runs it on the whole batch without the generators,
as they would (each sample's row of the output, joined).

Assumes each compiled sub-DNN takes and returns a leading group dim, and every sample gives
each per-sample input a leading dim of 1.
"""

import inspect
import sys

import numpy as np
from dycl.hostgen.host_groups import _route_groups  # dycl only
from dycl.hostgen.host_runtime import PARAMETERS, _bind, _check_input  # dycl only

PER_SAMPLE = True  # dycl only
# the emitter's tables (hostgen.emit_batched), for dycl's tests  # dycl only
ORDER = {}  # dycl only
SAMPLE_INPUTS = []  # dycl only
STRAIGHT = None  # dycl only
GROUPED = False  # dycl only
SIZED_BY_VALUES = frozenset()  # dycl only

# a GROUPED host runs _sample once per group while its last batch had at most this many paths a sample:
# a group that splits replays _sample up to the split, which costs more than it saves where most
# samples take a path of their own (measured: tests/per_sample/test_per_sample_groups.py's docstring)
GROUP_WHEN = 0.5
COUNT_PATHS_EVERY = 4


class PerSampleModel:
    """The batched model's calls: ``_forward`` routes the batch through ``_sample``."""

    #: the emitted method whose lines ``FORWARD_LINES`` describes
    _emitted = "_sample"

    def _forward(self, *args, **kwargs):
        arguments = dict(zip(PARAMETERS, args))
        arguments.update(kwargs)
        return _route(self, arguments)

    def route(self, *args, **kwargs):
        """``(outputs, groups)``: what ``model(*args)`` returns, and ``(sub-DNN index,
        group size)`` for every sub-DNN run, in order (how the batch split)."""
        arguments = _bind(args, kwargs)
        dims = {}
        for spec in self._inputs:
            _check_input(spec, arguments[spec.name], dims)
        groups = []
        return _route(self, arguments, groups), groups


def _samples(arguments):
    """The batch size, checked: every per-sample input has the same leading dim."""
    count, first = None, None
    for name in SAMPLE_INPUTS:
        value = arguments[name]
        if not isinstance(value, np.ndarray) or value.ndim == 0:
            raise ValueError(f"per-sample model: input {name!r} must be an array whose leading dim is the "
                             f"batch of samples, got {type(value).__name__} {np.shape(value)}")
        if count is None:
            count, first = value.shape[0], name
        elif value.shape[0] != count:
            raise ValueError(f"per-sample model: input {name!r} has {value.shape[0]} samples (leading dim), "
                             f"expected {count} as {first!r} has")
    if count == 0:
        raise ValueError("per-sample model: the batch has no samples")
    return 1 if count is None else count


def _signature_of(value):
    """``(shape, dtype)``: samples whose arguments agree in these share a group (a dtype
    object, not its ``.str``: hashing it is cheaper than building the string)."""
    dtype = getattr(value, "dtype", None)  # an array or a numpy scalar: read, not converted
    if dtype is None:
        return np.shape(value), np.asarray(value).dtype
    return value.shape, dtype


# a row at least this large is worth proving a row of its source (about 2 us a row) to skip copying it
FAST_ROW_BYTES = 1 << 16


def _address(array):
    return array.__array_interface__["data"][0]


def _rows_in_order(values):
    """``(base, start, sliced)`` where the values are the consecutive rows ``base[start]``,
    ``base[start + 1]``, ... (or, ``sliced``, ``base[start:start + 1]``, ..., as the router
    slices the batch); else None. Proven from memory, not from ``id()``: the same owning
    array, its trailing shape, strides and dtype, and each value's data address exactly
    at its row, so the values are those rows and ``base[start:start + len(values)]`` is
    their stack."""
    first = values[0]
    base = first.base if type(first) is np.ndarray else None
    if type(base) is not np.ndarray or base.ndim == 0:
        return None
    for value in values:
        if type(value) is not np.ndarray or value.base is not base:
            return None
    sliced = base.ndim == first.ndim
    if sliced and first.shape[:1] != (1,) or not sliced and base.ndim != first.ndim + 1:
        return None
    shape, strides, step = first.shape, first.strides, base.strides[0]
    if (step <= 0 or first.dtype != base.dtype or shape[sliced:] != base.shape[1:]
            or strides[sliced:] != base.strides[1:]):
        return None
    origin = _address(base)
    start, rest = divmod(_address(first) - origin, step)
    if rest or start < 0 or start + len(values) > base.shape[0]:
        return None
    address = origin + start * step
    for value in values:  # the first row out of order ends the proof (then np.array copies as fast as indexing)
        if value.shape != shape or value.strides != strides or _address(value) != address:
            return None
        address += step
    return base, start, sliced


def _gather(values):
    """``np.stack(values)``: the group's argument at one position. Where the values are
    consecutive rows of one array, in order (a sub-DNN's output or the batch passed on
    whole), a view of those rows instead of a copy."""
    one = values[0]
    found = _rows_in_order(values) if type(one) is np.ndarray and one.nbytes >= FAST_ROW_BYTES else None
    if found is None:
        # the group's values have one shape and dtype (its key), so this is np.stack's array, built
        # in C instead of one expand_dims per value
        return np.array(values)
    base, start, sliced = found
    rows = base[start:start + len(values)]
    return rows[:, None] if sliced else rows


def _numbers_of(args):
    """The numbers among a request's arguments (a Python or numpy scalar, a 0-d array's value),
    None in place of anything else: what a sub-DNN in ``SIZED_BY_VALUES`` may size outputs by."""
    numbers = []
    for arg in args:
        if type(arg) is np.ndarray:
            numbers.append(arg.item() if arg.ndim == 0 else None)
        else:
            numbers.append(arg if isinstance(arg, (int, float, np.generic)) else None)
    return tuple(numbers)


def _alike(values):
    """Whether the values have one ``_signature_of`` (shape and dtype): what one group's argument needs."""
    first = values[0]
    if type(first) is np.ndarray:
        shape, dtype = first.shape, first.dtype
        for value in values:  # (a loop, not all() of a generator: this runs once per argument of every run)
            if (type(value) is not np.ndarray or value.shape != shape
                    or value.dtype is not dtype and value.dtype != dtype):
                break
        else:
            return True
    signature = _signature_of(first)
    return all(_signature_of(value) == signature for value in values)


def _arguments(members, width):
    """The group's arguments: each position's values gathered, once for positions whose
    values are the very same objects as an earlier position's (``residual = x``; passing
    ``(residual, x)`` then gathers one array, which both inputs read). None where a position's
    values differ in shape or dtype (``_alike``): the members are then grouped by those."""
    columns = list(zip(*[args for _, _, args in members])) if width else []  # one tuple of values per position
    gathered = []
    for position, values in enumerate(columns):
        for earlier in range(position):
            seen = columns[earlier]
            if values[0] is seen[0] and all(value is other for value, other in zip(values, seen)):
                gathered.append(gathered[earlier])
                break
        else:
            if not _alike(values):
                return None
            gathered.append(_gather(values))
    return gathered


def _rows(outputs, count):
    """Each of the ``count`` members' row of the group's outputs, as one tuple per member."""
    if not outputs:
        return [()] * count
    if all(type(output) is np.ndarray and output.shape[:1] == (count,) for output in outputs):
        return list(zip(*outputs))  # iterating an array gives output[row], at C speed
    return [tuple(output[row] for output in outputs) for row in range(count)]


def _route(model, arguments, record=None):
    """Run every sample of the batch through ``model._sample``; each sub-DNN runs once
    per group of samples that reach it with the same variant and argument shapes.
    ``record`` (a list) receives ``(sub-DNN index, group size)`` per run."""
    count = _samples(arguments)
    if count == 1 and record is None:
        return _join([_alone(model, arguments)])
    if STRAIGHT is not None and record is None:
        # one sub-DNN on the per-sample inputs, returned: what the generators would do, at once
        index, names = STRAIGHT
        (output,) = model._call[index](*[arguments[name][:, None] for name in names])
        return _joined_rows(output)
    if GROUPED and getattr(model, "_paths_a_sample", 0.0) <= GROUP_WHEN and sys.gettrace() is None:
        # _sample once per group of samples with the same decisions (hostgen/host_groups.py); not
        # under a tracer (dycl.harness.coverage, a debugger), which must see one frame per sample
        results, paths = _route_groups(model, arguments, count, record)
        model._paths_a_sample = paths / count
        return _join(results)
    return _route_samples(model, arguments, count, record)


def _route_samples(model, arguments, count, record):
    """``_sample`` once per sample; a ``GROUPED`` host also counts the batch's paths, every
    ``COUNT_PATHS_EVERY`` calls (counting costs about 5% of the router's time)."""
    results = [None] * count
    calls = model._routed = getattr(model, "_routed", 0) + 1
    counting = GROUPED and calls % COUNT_PATHS_EVERY == 0
    trails = [0] * count if counting else None  # a hash of each sample's requests so far: its path
    pending = {}

    def advance(sample, generator, value):
        try:
            index, key, args = generator.send(value)
        except StopIteration as stop:
            results[sample] = stop.value
            return
        # (the arguments' shapes and dtypes are checked once a group, as it is gathered: _arguments)
        # a group of a sub-DNN sized by the values passed shares them (SIZED_BY_VALUES)
        numbers = _numbers_of(args) if index in SIZED_BY_VALUES else None
        pending.setdefault((ORDER[index], index, key, numbers, None), []).append((sample, generator, args))
        if trails is not None:  # (a collision only merges two paths' count)
            trails[sample] = (trails[sample] * 1000003 + index) & 0xFFFFFFFFFFFF

    for sample in range(count):
        own = {name: value[sample:sample + 1] if name in SAMPLE_INPUTS else value
               for name, value in arguments.items()}
        generator = model._sample(**own)
        if not inspect.isgenerator(generator):  # a model with no sub-DNN
            results[sample] = generator
            continue
        advance(sample, generator, None)
    while pending:
        group = min(pending, key=lambda group: group[0])  # the first pending in program order
        members = pending.pop(group)
        rank, index, key, numbers, _ = group
        width = len(members[0][2])
        arguments = _arguments(members, width)
        if arguments is None:  # arguments of other shapes or dtypes: a group for each (each then _alike)
            for member in members:
                signature = tuple(map(_signature_of, member[2]))
                pending.setdefault((rank, index, key, numbers, signature), []).append(member)
            continue
        callee = model._call[index] if index in model._call else model._variant(index, key)
        outputs = callee(*arguments)
        if record is not None:
            record.append((index, len(members)))
        if width:
            for (sample, generator, _), row in zip(members, _rows(outputs, len(members))):
                advance(sample, generator, row)
        else:  # a sub-DNN without inputs gives every sample the same values: its one row
            for sample, generator, _ in members:
                advance(sample, generator, tuple(output[0] for output in outputs))
    if trails is not None:
        model._paths_a_sample = len(set(trails)) / count
    return _join(results)


def _alone(model, arguments):
    """One sample: its requests served as they come (no grouping to do)."""
    generator = model._sample(**arguments)
    if not inspect.isgenerator(generator):
        return generator
    value = None
    while True:
        try:
            index, key, args = generator.send(value)
        except StopIteration as stop:
            return stop.value
        callee = model._call[index] if index in model._call else model._variant(index, key)
        # arg[None] is np.expand_dims(arg, 0) for an array, without its Python-level axis handling
        outputs = callee(*[arg[None] if type(arg) is np.ndarray else np.expand_dims(arg, 0) for arg in args])
        value = tuple([output[0] for output in outputs])


def _joined_rows(output):
    """``_join`` of the rows of ``output``, one group output (a row per sample), without splitting
    it where ``_join`` would concatenate the rows again: an array of one row or more whose second
    dim is 1 (each row then has a leading dim of 1, one shape and one dtype) is that array without
    its second dim (a view: 13 µs of splitting and copying less for sdn_mobilenet's batch of 32)."""
    if type(output) is np.ndarray and output.ndim >= 2 and output.shape[0] >= 1 and output.shape[1] == 1:
        return output.reshape(output.shape[:1] + output.shape[2:])
    return _join(list(output))


def _join(outputs):
    """The batch's output: tuples and dicts joined position by position; arrays whose
    leading dim is 1 and that have the same shape and dtype in every sample are
    concatenated along it (as torch.cat of the per-sample outputs); anything else
    (lists, Python values, arrays that differ in shape) is a list with one entry per sample."""
    first = outputs[0]
    if type(first) is tuple and all(type(o) is tuple and len(o) == len(first) for o in outputs):
        return tuple(_join([o[i] for o in outputs]) for i in range(len(first)))
    if isinstance(first, dict) and all(isinstance(o, dict) and list(o) == list(first) for o in outputs):
        return {key: _join([o[key] for o in outputs]) for key in first}
    if (isinstance(first, np.ndarray) and first.ndim >= 1 and first.shape[0] == 1
            and all(isinstance(o, np.ndarray) and o.shape == first.shape and o.dtype == first.dtype
                    for o in outputs)):
        return np.concatenate(outputs)
    return list(outputs)
