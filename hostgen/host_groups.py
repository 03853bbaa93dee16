"""Group execution of a batched host (``GROUPED``, ``hostgen/emit_batched.py`` decides it).

A real module (linted, imported by tests) that ``hostgen.emit_batched`` copies into the host
before ``hostgen/host_router.py``. Where the emitter proved that ``_sample`` only moves its
tensors (assigns them, keeps them in lists, passes them to sub-DNNs, returns them) and reads
them only in its ``if`` tests, for their truth or with ``.item()`` (``hostgen.groupable``), the
router runs ``_sample`` once per *group* of samples instead of once per sample: the group's
generator sees ``Rows`` in place of each sample's array (the group's rows of one array, stacked
in the group's order), and a sub-DNN request carries those rows as they are, without a gather.

``Rows.item()`` gives ``Items``, each member's ``row.item()``, on which a test's arithmetic and
comparisons run member by member; the test's truth (``bool``, also of ``Rows``) is the group's
decision: where every member decides alike, the group goes on, which is what each sample would
do on its own; where they differ, the group keeps the members that decide as its first member
does, and the others start a group of their own, which replays ``_sample`` from the start on
the outputs recorded so far (no sub-DNN runs again) up to the split, and goes on from there.
So a group splits only where its members' decisions differ, and each sample's outputs are
those of ``_sample`` run on that sample alone (``_route_samples`` of ``hostgen/host_router.py``).
A split costs a replay of ``_sample`` up to it: where most samples take a path of their own,
the router routes per sample instead (``GROUP_WHEN``).

Assumes the emitter's proof (``GROUPED``): ``_sample`` is deterministic, calls nothing but
``.item()``, ``list.append`` and ``len``, and has no effect outside its frame; every sub-DNN
takes and returns arrays with a leading group dim.
"""

import inspect
import operator

import numpy as np

ORDER = {}  # dycl only
SAMPLE_INPUTS = []  # dycl only


class Rows:
    """What ``_sample`` sees in place of a sample's array: the rows of ``array`` (one per
    sample of ``members``, ascending) that belong to the members ``group`` has now."""

    __slots__ = ("array", "members", "group", "taken")

    def __init__(self, array, members, group):
        self.array, self.members, self.group, self.taken = array, members, group, None

    def current(self):
        """The group's members' rows, stacked in their order (taken once per split of the group)."""
        members = self.group.members
        if members is self.members or len(members) == len(self.members):
            return self.array
        taken = self.taken
        if taken is None or taken[0] is not members:
            taken = self.taken = members, self.array.take(self.members.searchsorted(members), axis=0)
        return taken[1]

    def __bool__(self):
        """Each member's ``bool(row)``, the group's decision (``_Group.decide``)."""
        rows = self.current()
        if len(rows) == 1 or rows[0].size != 1:
            return bool(rows[0])  # one member's own truth (or the error its bool(row) raises)
        return self.group.decide([bool(value) for value in rows.reshape(len(rows)).tolist()])

    def _refuse(self, *args, **kwargs):
        raise TypeError("per-sample host: a group's rows may only be moved, passed to a sub-DNN, tested "
                        "or read with .item() (hostgen/groupable.py proves the host does no more)")

    __eq__ = __ne__ = __array__ = _refuse
    __hash__ = None

    def item(self):
        """Each member's ``row.item()`` (``Items``: what the condition that reads it tests)."""
        rows = self.current()
        if len(rows) == 1 or rows[0].size != 1:
            return rows[0].item()  # one member's own value (or the error its .item() raises)
        flat = rows.reshape(len(rows), 1)
        return Items(flat[:, 0].tolist(), self.group.members, self.group)


class Items:
    """One Python value per member of ``members`` (what ``.item()`` gave each): arithmetic and
    comparisons apply member by member; ``bool`` is the group's decision (``_Group.decide``)."""

    __slots__ = ("values", "members", "group")

    def __init__(self, values, members, group):
        self.values, self.members, self.group = values, members, group

    def now(self):
        """The values of the members the group has now (it may have split since)."""
        members = self.group.members
        if members is self.members or len(members) == len(self.members):
            return self.values
        return [self.values[position] for position in self.members.searchsorted(members).tolist()]

    def __bool__(self):
        return self.group.decide([bool(value) for value in self.now()])

    def apply(self, function, other=None, reflected=False):
        """``function`` of each member's value (and ``other``'s, or ``other``), as ``Items``."""
        mine = self.now()
        if function in _UNARY:
            return Items([function(a) for a in mine], self.group.members, self.group)
        theirs = other.now() if type(other) is Items else [other] * len(mine)
        pairs = zip(theirs, mine) if reflected else zip(mine, theirs)
        return Items([function(a, b) for a, b in pairs], self.group.members, self.group)

    __hash__ = None
    __eq__ = lambda self, other: self.apply(operator.eq, other)  # noqa: E731
    __ne__ = lambda self, other: self.apply(operator.ne, other)  # noqa: E731
    __lt__ = lambda self, other: self.apply(operator.lt, other)  # noqa: E731
    __le__ = lambda self, other: self.apply(operator.le, other)  # noqa: E731
    __gt__ = lambda self, other: self.apply(operator.gt, other)  # noqa: E731
    __ge__ = lambda self, other: self.apply(operator.ge, other)  # noqa: E731
    __add__ = lambda self, other: self.apply(operator.add, other)  # noqa: E731
    __radd__ = lambda self, other: self.apply(operator.add, other, True)  # noqa: E731
    __sub__ = lambda self, other: self.apply(operator.sub, other)  # noqa: E731
    __rsub__ = lambda self, other: self.apply(operator.sub, other, True)  # noqa: E731
    __mul__ = lambda self, other: self.apply(operator.mul, other)  # noqa: E731
    __rmul__ = lambda self, other: self.apply(operator.mul, other, True)  # noqa: E731
    __truediv__ = lambda self, other: self.apply(operator.truediv, other)  # noqa: E731
    __rtruediv__ = lambda self, other: self.apply(operator.truediv, other, True)  # noqa: E731
    __floordiv__ = lambda self, other: self.apply(operator.floordiv, other)  # noqa: E731
    __rfloordiv__ = lambda self, other: self.apply(operator.floordiv, other, True)  # noqa: E731
    __mod__ = lambda self, other: self.apply(operator.mod, other)  # noqa: E731
    __rmod__ = lambda self, other: self.apply(operator.mod, other, True)  # noqa: E731
    __pow__ = lambda self, other: self.apply(operator.pow, other)  # noqa: E731
    __rpow__ = lambda self, other: self.apply(operator.pow, other, True)  # noqa: E731
    __neg__ = lambda self: self.apply(operator.neg)  # noqa: E731
    __pos__ = lambda self: self.apply(operator.pos)  # noqa: E731
    __abs__ = lambda self: self.apply(operator.abs)  # noqa: E731
    __invert__ = lambda self: self.apply(operator.invert)  # noqa: E731


_UNARY = (operator.neg, operator.pos, operator.abs, operator.invert)


class _Group:
    """Samples (``members``, ascending) at the same point of ``_sample`` with the same
    decisions so far; ``history`` is what its generator was sent, ``spawned`` the members
    split off since the router last looked."""

    __slots__ = ("members", "generator", "history", "spawned")

    def __init__(self, members):
        self.members, self.generator, self.history, self.spawned = members, None, [], []

    def decide(self, decisions):
        """The first member's decision (a bool); the members that decide otherwise leave, as a group."""
        first = decisions[0]
        if all(decision is first for decision in decisions):
            return first
        members = self.members
        self.members = members[[position for position, decision in enumerate(decisions) if decision is first]]
        self.spawned.append(members[[position for position, decision in enumerate(decisions) if decision is not first]])
        return first


def _stacked(arg, group):
    """A request's argument for the group's members: their rows, or a value every member has."""
    if type(arg) is Rows:
        return arg.current()
    return np.array([arg] * len(group.members))  # what stacking each sample's own value gives


def _per_member(value, group):
    """``value`` as each member of ``group`` has it: rows taken apart, containers rebuilt per member."""
    count = len(group.members)
    if type(value) is Rows:
        return list(value.current())
    if type(value) in (tuple, list):
        columns = [_per_member(item, group) for item in value]
        return [type(value)(column) for column in zip(*columns)] if columns else [type(value)()] * count
    if type(value) is dict:
        columns = {key: _per_member(item, group) for key, item in value.items()}
        return [{key: column[member] for key, column in columns.items()} for member in range(count)]
    return [value] * count


class _GroupRouter:
    """One batched call: the groups' generators, their pending requests, and the results."""

    def __init__(self, model, arguments, count, record):
        self.model, self.arguments, self.record = model, arguments, record
        self.results, self.pending, self.groups = [None] * count, {}, 0
        self.everyone = np.arange(count)
        self.inputs = {name: arguments[name][:, None] for name in SAMPLE_INPUTS}  # row s: value[s:s + 1]

    def start(self, members, history):
        """A group of ``members``: ``_sample`` from the start, replayed on ``history``."""
        group = _Group(members)
        self.groups += 1
        own = {name: Rows(self.inputs[name], self.everyone, group) if name in self.inputs else value
               for name, value in self.arguments.items()}
        generator = self.model._sample(**own)
        if not inspect.isgenerator(generator):  # a model with no sub-DNN
            self.finish(group, generator)
            return
        group.generator, value = generator, None
        for index, key, outputs in history:
            request = generator.send(value)
            if request[0] != index or request[1] != key or group.spawned:
                raise RuntimeError("per-sample model: the host did not repeat its requests (not deterministic)")
            value = tuple([Rows(array, members_, group) for array, members_ in outputs])
        group.history = list(history)
        self.advance(group, value)

    def advance(self, group, value):
        try:
            request = group.generator.send(value)
        except StopIteration as stop:
            request = None
            self.finish(group, stop.value)
        spawned, group.spawned = group.spawned, []
        for members in spawned:
            self.start(members, group.history)
        if request is not None:
            index, key, args = request
            stacked = [_stacked(arg, group) for arg in args]
            signature = tuple([(array.shape[1:], array.dtype) for array in stacked])
            self.pending.setdefault((ORDER[index], index, key, signature), []).append((group, stacked))

    def finish(self, group, value):
        for sample, own in zip(group.members.tolist(), _per_member(value, group)):
            self.results[sample] = own

    def serve(self, request, waiting):
        """Run the request's sub-DNN once on every waiting group's rows; each group goes on."""
        _, index, key, _ = request
        callee = self.model._call[index] if index in self.model._call else self.model._variant(index, key)
        sizes = [len(group.members) for group, _ in waiting]
        if len(waiting) == 1:
            outputs = callee(*waiting[0][1])
        else:
            outputs = callee(*[np.concatenate(column) for column in zip(*[args for _, args in waiting])])
        if self.record is not None:
            self.record.append((index, sum(sizes)))
        start = 0
        for (group, args), size in zip(waiting, sizes):
            if args:
                parts = [(output[start:start + size], group.members) for output in outputs]
            else:  # a sub-DNN without inputs gives every sample the same values: its one row
                parts = [(np.repeat(output[:1], size, axis=0), group.members) for output in outputs]
            start += size
            group.history.append((index, key, parts))
            self.advance(group, tuple([Rows(array, members, group) for array, members in parts]))


def _route_groups(model, arguments, count, record=None):
    """``_route`` for a ``GROUPED`` host: ``_sample`` once per group of samples. Returns each
    sample's outputs and the number of groups (each a distinct path through ``_sample``)."""
    router = _GroupRouter(model, arguments, count, record)
    router.start(router.everyone, [])
    pending = router.pending
    while pending:
        request = min(pending, key=lambda request: request[0])  # the first pending in program order
        router.serve(request, pending.pop(request))
    return router.results, router.groups


