"""Find, before any rewriting, the module state that the methods ``forward`` may reach write.

``prescan_state`` records those slots in ``ctx.state`` (``rewriter.state_table``) without
refusing anything, so that no pass folds a read of state even where it sees the read before
the write (an earlier statement, another method). The methods are found by name: each user
module's ``forward`` and, transitively, the methods named on the receiver or its submodules
(``self._update``, ``self.sub.step``) in the methods found so far.

Assumes: what is not reached this way is checked (compiled or refused) where the rewrite
reaches it (``rewriter.state_slots.collect_state_writes``). Guarantees: each function is
parsed once; a function Python's ``ast`` shows writes nothing that may be state (no
assignment to an attribute or item, no mutating call on ``self`` or a name bound from it,
no ``out=``/``inplace=``) is not looked at with libcst (cheap for the common forward).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types

import libcst as cst
import torch
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.state_slots import CollectStateWrites, owners_of, wrapper_layers
from dycl.rewriter.state_writes import (
    _CONTAINER_WRITES,
    _MODULE_WRITES,
    _SELF_CONVERSIONS,
    _STATE_ACCESSORS,
    _VIEWS,
    receiver_name,
)
from dycl.rewriter.walk import bound_names


def prescan_state(ctx: RewriteContext) -> None:
    """Record the slots that the methods forward() may reach write (nothing refused): for each
    module of the model, its ``forward`` and, transitively, the methods of its class named on
    the receiver (``self._update(x)``, ``self.step``) in the methods found so far."""
    from dycl.rewriter.inline import is_user_code  # noqa: PLC0415 - inline imports the passes, which import this

    user: dict[object, bool] = {}  # is_user_code reads the file system: once per class and function

    def is_user(obj: object) -> bool:
        if obj not in user:
            user[obj] = is_user_code(obj)
        return user[obj]

    pending = [(module, "forward") for module in ctx.model.modules() if is_user(type(module))]
    seen: set[tuple[int, object]] = set()
    scanned: dict[types.FunctionType, list[list[str]]] = {}  # parsed once, whatever the number of instances
    while pending:
        module, name = pending.pop()
        for function in _methods(module, name) if name not in module._modules else ():
            if (id(module), function) in seen or not is_user(function):
                continue
            seen.add((id(module), function))
            if function not in scanned:
                scanned[function] = _scan(ctx, function)
            for chain in scanned[function]:  # self.name, self.sub.name: maybe methods forward() reaches
                owner: object = module
                for part in chain[:-1]:
                    owner = getattr(owner, part, None)
                if isinstance(owner, torch.nn.Module):
                    pending.append((owner, chain[-1]))


def _methods(module: torch.nn.Module, name: str) -> list[types.FunctionType]:
    """The functions behind ``module.<name>`` (an instance attribute first, as Python looks it up):
    the method and, when decorated, each wrapper layer around it (a wrapper may write state too)."""
    member = vars(module).get(name)
    if member is None:
        try:
            member = inspect.getattr_static(type(module), name)
        except AttributeError:
            return []
    member = getattr(member, "__func__", member)
    member = getattr(member, "func", member)  # functools.partial
    layers = wrapper_layers(member) if callable(member) else []
    return [layer for layer in layers if isinstance(layer, types.FunctionType)]


def _scan(ctx: RewriteContext, function: types.FunctionType) -> list[list[str]]:
    """Record the slots ``function`` writes; the attribute chains it names on its receiver."""
    try:
        source = textwrap.dedent(inspect.getsource(function.__code__))  # not the function: a wrapper's own
        tree = next(s for s in ast.parse(source).body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    except Exception:  # noqa: BLE001 - a method whose source cannot be read is refused where it is reached
        return []
    params = tree.args.posonlyargs + tree.args.args
    if not params or not _is_method(function):
        return []
    receiver = params[0].arg
    if _may_write(tree, receiver):
        definition = next(s for s in cst.parse_module(source).body if isinstance(s, cst.FunctionDef))
        if receiver_name(function, definition) == receiver:
            owners = owners_of(ctx.model, function)
            locals_ = frozenset(bound_names(definition)) - {receiver}
            definition.visit(CollectStateWrites(ctx, receiver, locals_, owners, ctx.state, lenient=True))
    return [chain for node in ast.walk(tree) for chain in [_chain(node, receiver)] if chain]


def _is_method(function: types.FunctionType) -> bool:
    parts = function.__qualname__.split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def _chain(node: ast.AST, receiver: str) -> list[str] | None:
    """``["sub", "name"]`` for ``self.sub.name``, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return parts[::-1] if parts and isinstance(node, ast.Name) and node.id == receiver else None


def _may_write(tree: ast.AST, receiver: str) -> bool:
    """Whether ``tree`` may write state (an over-approximation of ``CollectStateWrites``)."""
    reached = {receiver}  # the receiver and the names bound to what may alias its state
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                value, targets = node.value, node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, (ast.For, ast.comprehension)):
                value, targets = node.iter, [node.target]
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                value, targets = node.context_expr, [node.optional_vars]
            else:
                continue
            if not _alias(value, reached):
                continue
            for name in (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
                if name not in reached:
                    reached.add(name)
                    changed = True
    return any(_writes(node, reached, receiver) for node in ast.walk(tree))


def _writes(node: ast.AST, reached: set[str], receiver: str) -> bool:
    if isinstance(node, (ast.Assign, ast.Delete)):
        return any(isinstance(n, (ast.Attribute, ast.Subscript)) for t in node.targets for n in ast.walk(t))
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return not isinstance(node.target, ast.Name) or node.target.id in reached
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    keywords = {k.arg: k.value for k in node.keywords}
    first = node.args[0] if node.args else None
    if name in ("setattr", "delattr") or ("out" in keywords and _alias(keywords["out"], reached)):
        return True
    if first is not None and _alias(first, reached) and (name.endswith("_") or "inplace" in keywords):
        return True
    if not isinstance(func, ast.Attribute) or not _alias(func.value, reached):
        return False
    bare = isinstance(func.value, ast.Name) and func.value.id == receiver
    return name.endswith("_") or name in _CONTAINER_WRITES or name in _MODULE_WRITES or (
        bare and name in _SELF_CONVERSIONS)


def _alias(node: ast.AST, reached: set[str]) -> bool:
    """Whether ``node`` may denote (part of) the state of a name in ``reached`` (as ``RejectStateWrites.state``)."""
    if isinstance(node, ast.Name):
        return node.id in reached
    if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        return _alias(node.value, reached)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "getattr":
            return bool(node.args) and _alias(node.args[0], reached)
        return isinstance(func, ast.Attribute) and func.attr in _VIEWS | _STATE_ACCESSORS and _alias(
            func.value, reached)
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(_alias(element, reached) for element in node.elts)
    if isinstance(node, ast.IfExp):
        return _alias(node.body, reached) or _alias(node.orelse, reached)
    if isinstance(node, ast.BoolOp):
        return any(_alias(value, reached) for value in node.values)
    return False

__all__ = ["prescan_state"]
