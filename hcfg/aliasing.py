"""Refuse in-place updates of a tensor that another name also refers to.

dycl's dataflow (liveness, sub-DNN ports, host copies, dead-code removal) treats
every name as holding its own value. Python tensors alias: after ``y = h`` (or
``y = h.view(...)``, ``outs = [h]``), ``y += 1`` and ``y.add_(1)`` change what
``h`` holds as well, and a compiled model that tracks ``y`` alone silently
returns the old ``h``. The HCFG builder runs every statement on the example, so
it sees the real objects: ``check_inplace_aliasing`` raises ``UnsupportedError``
before such a statement runs.

Assumes ``state`` maps the rewritten function's names to their example values.
Guarantees: an augmented assignment to a name, a call of a public method ending
in ``_`` on a name (or on an element of a list or tuple it holds), or an item
assignment to a tensor, runs only when no other name (or list/tuple/dict element
of one) shares the updated tensor's storage. The other ways a write escapes the
dataflow are refused at their line: ``out=`` and an in-place call through a view
property (``x.T.mul_``) in compiled code, which exporters drop or cannot translate;
an item assignment into what a call or property of a tensor returns (the host's
numpy namesake may copy: ``x.flatten()[0] = 5``); and an in-place change of the
shape of a tensor the caller passed (``x.unsqueeze_(0)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import libcst as cst
import torch
from dycl.rewriter import UnsupportedError
from dycl.rewriter.errors import SourceLocation
from dycl.rewriter.walk import descendants

# the names a module is commonly imported as: ``F.relu_(x)`` updates ``x``, not ``F``
_MODULE_NAMES = frozenset({"torch", "F", "nn", "functional", "init"})


def updated_in_place(stmt: cst.CSTNode) -> list[str]:
    """Names ``stmt`` updates in place: ``name op= ...``, ``name.method_(...)`` (also
    ``name.data.method_(...)``, ``name["key"].method_(...)``), ``torch.fn_(name, ...)`` /
    ``F.fn_(name)``, ``f(name, ..., inplace=True)`` and ``f(..., out=name)``."""
    names = []
    for node in descendants(stmt):
        if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
            names.append(node.target.value)
        elif isinstance(node, cst.Call):
            names += _call_updates(node)
    return names


def _call_updates(call: cst.Call) -> list[str]:
    names = []
    first = call.args[0].value if call.args and call.args[0].keyword is None and not call.args[0].star else None
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "out" and isinstance(arg.value, cst.Name):
            names.append(arg.value.value)
        elif keyword == "inplace" and isinstance(arg.value, cst.Name) and arg.value.value == "True" and isinstance(
                first, cst.Name):
            names.append(first.value)
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
        root = func.value
        while isinstance(root, (cst.Attribute, cst.Subscript)):  # x.data.add_(1), batch["x"].mul_(2)
            root = root.value
        if isinstance(root, cst.Name) and root.value in _MODULE_NAMES:
            names += [first.value] if isinstance(first, cst.Name) else []
        elif isinstance(root, cst.Name):
            names.append(root.value)
    return names


def check_out_arguments(stmt: cst.CSTNode, location: Callable[[], SourceLocation | None]) -> None:
    """Raise ``UnsupportedError`` if ``stmt``, bound for a sub-DNN, passes ``out=``: no exporter
    translates a write into a given tensor (the TorchScript exporter fails inside its symbolic
    functions). A module's tensor slot written with ``out=`` was already made an assignment
    (``rewriter.state_locals``); what is left is the user's own tensor."""
    for node in descendants(stmt):
        if isinstance(node, cst.Call) and any(a.keyword is not None and a.keyword.value == "out" for a in node.args):
            call = cst.Module([]).code_for_node(node.func)
            raise UnsupportedError(
                f"`out=` in a call of {call}", location(),
                f"assign the result instead (`y = {call}(...)` without `out=`): the compiled graph computes new "
                "tensors and cannot write into one it is given")


#: tensor properties that return a view of the tensor
_VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag"})


def check_view_updates(stmt: cst.CSTNode, location: Callable[[], SourceLocation | None]) -> None:
    """Raise ``UnsupportedError`` if ``stmt``, bound for a sub-DNN, updates a tensor in place
    through a view property (``x.T.mul_(2)``): the exporter drops an update made through a view
    of a graph input, so the graph would return ``x`` unchanged."""
    for node in descendants(stmt):
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                and node.func.attr.value.endswith("_") and not node.func.attr.value.startswith("_")):
            continue
        receiver = node.func.value
        while isinstance(receiver, (cst.Attribute, cst.Subscript)):
            if isinstance(receiver, cst.Attribute) and receiver.attr.value in _VIEW_ATTRIBUTES:
                code = cst.Module([]).code_for_node(receiver)
                raise UnsupportedError(
                    f"an in-place update through `{code}`, a view", location(),
                    "compute a new tensor and assign it (`x = x.T.mul(2).T`), or update the tensor itself")
            receiver = receiver.value


#: tensor properties whose numpy namesake is the same view
_SAME_ON_NUMPY = frozenset({"T"})


def check_item_write_target(small: cst.BaseSmallStatement, is_tensor: Callable[[cst.BaseExpression], bool],
                            location: Callable[[], SourceLocation | None]) -> None:
    """Raise ``UnsupportedError`` if the item assignment ``small`` (host work: the host writes
    the array it holds) writes into what a call or a property of a tensor returns
    (``x.view(-1)[0] = 5``, ``x.flatten()[0] = 5``, ``x.data[0] = 3``): the host holds a numpy
    array there, whose method of the same name may copy (``flatten``), mean something else
    (``view``) or not exist, so the write would miss the tensor eager writes."""
    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
        [small.target] if isinstance(small, cst.AugAssign) else [])
    for target in targets:
        node = target.value if isinstance(target, (cst.Subscript, cst.Attribute)) else None
        while isinstance(node, (cst.Subscript, cst.Attribute, cst.Call)):
            inner = node.func if isinstance(node, cst.Call) else node
            if isinstance(inner, cst.Attribute) and inner.attr.value not in _SAME_ON_NUMPY and is_tensor(inner.value):
                code = cst.Module([]).code_for_node(node)
                raise UnsupportedError(
                    f"an item assignment into `{code}`, computed from a tensor", location(),
                    "write into the tensor itself (`x[...] = v`), or build a new tensor (`torch.where`, "
                    "`index_put`) and assign it")
            node = inner.value if isinstance(inner, (cst.Attribute, cst.Subscript)) else None


def item_assigned(stmt: cst.CSTNode) -> set[str]:
    """Names whose items or attributes ``stmt`` assigns or deletes (``x[mask] = 0``)."""
    found = set()
    for node in descendants(stmt):
        targets = []
        if isinstance(node, cst.Assign):
            targets = [target.target for target in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.Del)):
            targets = [node.target]
        for target in targets:
            root = target
            while isinstance(root, (cst.Subscript, cst.Attribute)):
                root = root.value
            if root is not target and isinstance(root, cst.Name):
                found.add(root.value)
    return found


def tensor_versions(names: set[str], state: dict[str, Any]) -> dict[str, tuple[torch.Tensor, int]]:
    """``name -> (tensor, its _version)`` for the names in ``names`` that hold a tensor."""
    return {name: (state[name], state[name]._version) for name in names
            if isinstance(state.get(name), torch.Tensor)}


def check_seen_updates(stmt: cst.CSTNode, before: dict[str, tuple[torch.Tensor, int]], state: dict[str, Any],
                       location: Callable[[], SourceLocation | None]) -> None:
    """Raise ``UnsupportedError`` if ``stmt`` (just run on ``state``) changed a tensor it reads
    in place without saying so (a call of code dycl does not rewrite, such as a helper or a
    submodule applying ``nn.ReLU(inplace=True)`` to its argument): the dataflow, which knows
    the updates ``updated_in_place`` and ``item_assigned`` name, would lose it."""
    known = set(updated_in_place(stmt)) | item_assigned(stmt)
    for name, (tensor, version) in before.items():
        if name in known or state.get(name) is not tensor or tensor._version == version:
            continue
        raise UnsupportedError(
            f"a call that updates `{name}` in place inside code dycl does not rewrite", location(),
            f"make it return a new tensor and assign it (`{name} = f({name})`), or update `{name}` in this "
            f"function (`{name}.relu_()`), where dycl sees the update")


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        yield from (item for item in value if isinstance(item, torch.Tensor))
    elif isinstance(value, dict):
        yield from (item for item in value.values() if isinstance(item, torch.Tensor))


def _storage(tensor: torch.Tensor) -> int | None:
    return tensor.untyped_storage().data_ptr() if tensor.numel() else None


def written_tensor_names(stmt: cst.CSTNode, state: Mapping[str, Any]) -> list[str]:
    """The names whose tensors ``stmt`` writes: ``updated_in_place`` (a list or tuple too:
    ``parts[0].fill_(0)`` writes a tensor ``parts`` holds) and the names whose items a tensor
    assignment writes (``flat[0] = 0``; an item assignment to a list or dict replaces an element
    and writes no tensor)."""
    assigned = sorted(name for name in item_assigned(stmt) if isinstance(state.get(name), torch.Tensor))
    return list(dict.fromkeys(updated_in_place(stmt) + assigned))


def check_inplace_aliasing(names: list[str], state: dict[str, Any], location: Callable[[], SourceLocation | None],
                           ignore: set[str] | frozenset[str] = frozenset(),
                           arguments: Mapping[str, Any] | None = None) -> None:
    """Raise ``UnsupportedError`` if one of ``names`` (``written_tensor_names`` of a statement)
    holds a tensor another name shares (a name holding a list or tuple: any of its tensors);
    ``location`` gives the statement's source line. Names in ``ignore`` (the HCFG builder's
    single-use temporaries, already read) do not count. ``arguments`` (parameter -> the caller's
    value) count as names held by the caller, whatever ``state`` binds them to now: see
    ``check_argument_aliasing``."""
    for name in names:
        value = state.get(name)
        for tensor in _written(value):
            _check_tensor(name, tensor, state, location, ignore, arguments or {})


def _written(value: Any) -> list[torch.Tensor]:
    """The tensors an in-place update rooted at a name holding ``value`` may write."""
    if isinstance(value, dict):  # batch["x"].mul_(2): a dict's entries are rebound by name, tracked elsewhere
        return []
    return [tensor for tensor in _tensors(value) if _storage(tensor) is not None]


def _check_tensor(name: str, value: torch.Tensor, state: dict[str, Any], location: Callable[[], SourceLocation | None],
                  ignore: set[str] | frozenset[str], arguments: Mapping[str, Any]) -> None:
    storage = _storage(value)
    check_argument_aliasing(name, value, state, arguments, location)
    for other, held in state.items():
        if other == name or other in ignore or other.startswith("__"):
            continue
        if any(_storage(tensor) == storage for tensor in _tensors(held)):
            raise UnsupportedError(
                f"an in-place update of `{name}`, whose tensor `{other}` also refers to", location(),
                f"write `{name} = {name} + ...` (a new tensor) instead of updating it in place, or keep "
                "the tensor under one name: dycl tracks each name's value on its own")


def argument_layouts(arguments: Mapping[str, Any]) -> dict[str, list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """``parameter -> [(shape, stride)]`` of the tensors the caller passed (see ``check_argument_layouts``)."""
    return {name: [(tuple(t.shape), t.stride()) for t in _tensors(value)] for name, value in arguments.items()}


def check_argument_layouts(before: Mapping[str, list[tuple[tuple[int, ...], tuple[int, ...]]]],
                           arguments: Mapping[str, Any], location: Callable[[], SourceLocation | None]) -> None:
    """Raise ``UnsupportedError`` if a statement just run changed the shape or strides of a tensor
    the caller passed (``x.unsqueeze_(0)``, ``x.t_()``, ``x.resize_(...)``): the compiled model
    takes and writes back its inputs at the shapes they were given, and its ports were laid out
    from the example's tensors, which the change would have altered under them."""
    after = argument_layouts(arguments)
    for name, layouts in before.items():
        if after.get(name) != layouts:
            raise UnsupportedError(
                f"an in-place change of the shape of the caller's argument `{name}`", location(),
                f"make a new view instead (`{name} = {name}.unsqueeze(0)` for `{name}.unsqueeze_(0)`): the "
                "compiled model does not change the shape of a tensor it is given")


def check_argument_aliasing(name: str, value: torch.Tensor, state: dict[str, Any], arguments: Mapping[str, Any],
                            location: Callable[[], SourceLocation | None]) -> None:
    """Raise ``UnsupportedError`` if ``value`` (``name``'s tensor, about to be updated in place)
    shares storage with a tensor the caller passed, unless ``name`` is that parameter and still
    holds the caller's tensor itself (``dycl.in_process.written_inputs`` writes that one back).
    The caller keeps its reference however the function rebinds the parameter: after
    ``inp = x; x = f(x)``, ``inp.add_(1)`` changes the caller's tensor, which no name tracks."""
    storage = _storage(value)
    for parameter, passed in arguments.items():
        if name == parameter and state.get(parameter) is passed:
            continue
        if any(_storage(tensor) == storage for tensor in _tensors(passed)):
            raise UnsupportedError(
                f"an in-place update of `{name}`, whose tensor the caller's argument `{parameter}` also refers to",
                location(),
                f"update `{parameter}` itself while the name still holds the argument (dycl writes that back to "
                f"the caller), or update a copy: `{name} = {name}.clone()` first")
