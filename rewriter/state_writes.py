"""Find writes to module state inside ``forward`` and the methods it calls.

``RejectStateWrites`` raises at the first write to module state with the user's
file:line; ``rewriter.state_slots`` subclasses it to record the writes dycl
compiles (threaded through the function, ``rewriter.state_threading``) and to
refuse the others. Syntactically, "module state" is any expression that may alias
something reachable from the receiver (``self``):

- ``self``-rooted attribute and item chains (``self.running``, ``self.d["k"]``),
  views of them (``self.buf.view(-1)``, ``.data``, ``.T``, ``.detach()``...),
  ``self.parameters()`` and friends, ``getattr(self, ...)``;
- local names bound to such an expression earlier in the method
  (``buf = self.running``; ``for p in self.parameters():``).

A write is an in-place tensor method (``add_``, ``copy_``, ``__iadd__``), a
mutating container method (``append``, ``update``, ``pop``...), a module
mutator (``train``, ``register_buffer``...), an in-place function
(``torch.relu_(s)``, ``F.relu(s, inplace=True)``, ``out=s``), ``setattr`` /
``delattr``, or an assignment, augmented assignment or ``del`` whose target is
such a chain. In-place operations on fresh local tensors (``x.relu_()``,
``x += 1``) are not writes to state.

``alias += v`` (``buf = self.running; buf += x``) is a write unless the alias
provably holds an immutable value (an ``int`` or ``str`` attribute of a model
instance whose class defines the method): later passes turn it into
``buf = buf + x``, so the compile-time state check would not see it either.

Not seen here (ambiguous syntax or aliases made by calls): ``s.add(v)`` /
``s.sort()`` on a container, a view returned by a helper. Those
are caught when compiling, by comparing the model's state before and after
tracing (``dycl.model.model_state``).
"""

from __future__ import annotations

import types

import libcst as cst
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.locations import COMPOUND
from dycl.rewriter.vocabulary import CONTAINER_MUTATORS, TENSOR_NAMESAKES

_VIEWS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose",
    "permute", "t", "narrow", "select", "expand", "expand_as", "detach", "as_strided", "unfold", "diagonal",
    "movedim", "moveaxis", "swapaxes", "swapdims", "contiguous", "to", "float", "double", "half", "bfloat16",
    "type", "type_as", "split", "chunk", "unbind", "tensor_split", "cpu", "cuda", "numpy", "values", "items",
    "get", "__getitem__", "real", "imag", "view_as_real",
})
_STATE_ACCESSORS = frozenset({
    "parameters", "buffers", "named_parameters", "named_buffers", "modules", "children", "named_modules",
    "named_children", "state_dict", "get_parameter", "get_buffer", "get_submodule",
})
# ``self.w.add(1)`` on a tensor attribute makes a new tensor (``vocabulary.TENSOR_NAMESAKES``)
_CONTAINER_WRITES = CONTAINER_MUTATORS - TENSOR_NAMESAKES
_MODULE_WRITES = frozenset({"train", "eval", "register_buffer", "register_parameter", "register_module",
                            "add_module", "apply", "load_state_dict", "zero_grad", "to_empty", "share_memory",
                            "requires_grad_", "share_memory_"})
# on the receiver itself these convert every parameter in place; on a tensor they return a new one
_SELF_CONVERSIONS = frozenset({"cpu", "cuda", "to", "half", "float", "double", "bfloat16", "type"})


_UNKNOWN = object()
_IMMUTABLE = (bool, int, float, complex, str, bytes, tuple, frozenset, type(None))


def _is_inplace_name(name: str) -> bool:
    if name.startswith("__i") and name.endswith("__"):
        return True  # __iadd__, __imul__, ...
    return name.endswith("_") and not name.endswith("__")


def _code(node: cst.CSTNode) -> str:
    text = cst.Module([]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."


class RejectStateWrites(cst.CSTVisitor):
    """Raises ``UnsupportedError`` at the first write to module state.

    Assumes: statements carry location comments; ``receiver`` is the name of
    the method's ``self`` parameter (None for a plain function, whose arguments
    are the caller's business: writes through them are caught when compiling).
    """

    def __init__(self, ctx: RewriteContext, receiver: str | None, locals_: frozenset[str],
                 owner: object | None = None) -> None:
        super().__init__()
        self.ctx = ctx
        self.receiver = receiver
        self.locals = locals_
        self.owner = owner  # an instance of the method's class in the model, to read attributes from
        self.aliases: set[str] = set()
        self.origins: dict[str, cst.BaseExpression] = {}
        self.unbound: list[set[str]] = []  # per open block: aliases it rebound to fresh values
        self.statement: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, *COMPOUND)):
            self.statement.append(node)
        return super().on_visit(node)

    def on_leave(self, original: cst.CSTNode) -> None:
        if self.statement and self.statement[-1] is original:
            self.statement.pop()
        super().on_leave(original)

    # -- what may alias module state ----------------------------------------------------------------

    def state(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` may denote (part of) the receiver's state."""
        if isinstance(node, cst.Name):
            return node.value == self.receiver or node.value in self.aliases
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            return self.state(node.value)
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name) and func.value == "getattr" and node.args:
                return self.state(node.args[0].value)
            if isinstance(func, cst.Attribute) and self.state(func.value):
                bare = isinstance(func.value, cst.Name) and func.value.value == self.receiver
                return func.attr.value in (_STATE_ACCESSORS if bare else _VIEWS)
            return False
        if isinstance(node, (cst.Tuple, cst.List)):
            return any(self.state(e.value) for e in node.elements)
        if isinstance(node, cst.IfExp):
            return self.state(node.body) or self.state(node.orelse)
        if isinstance(node, cst.BooleanOperation):
            return self.state(node.left) or self.state(node.right)
        return False

    def _bind(self, target: cst.BaseExpression, aliasing: bool) -> None:
        names = [n.value for n in _target_names(target)]
        if aliasing:
            self.aliases.update(names)
        elif isinstance(target, cst.Name) and target.value in self.aliases:
            # rebound: no longer an alias in the rest of this block, but maybe after it
            self.aliases.discard(target.value)
            if self.unbound:
                self.unbound[-1].add(target.value)

    # Note: a block (an if/else branch, a loop body) may not run, or run again: names it
    # rebinds are aliases again after it, and a loop body starts from the state before the loop.
    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.unbound.append(set())

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.aliases.update(self.unbound.pop())

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.unbound.append(set())

    def leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.aliases.update(self.unbound.pop())

    def _refuse(self, what: cst.CSTNode, how: str = ""):
        raise self.ctx.error(f"a write to module state ({f'{how} ' if how else ''}{_code(what)}) inside forward()",
                             self.statement[-1] if self.statement else None,
                             "dycl compiles parameters, buffers and attributes as constants: compute the new "
                             "state in local variables and return it, or update it outside the compiled model")

    # -- writes ----------------------------------------------------------------------------------

    def _check_target(self, target: cst.BaseExpression, how: str) -> None:
        if isinstance(target, (cst.Attribute, cst.Subscript)) and self.state(target.value):
            self._refuse(target, how)
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._check_target(element.value, how)
        if isinstance(target, cst.StarredElement):
            self._check_target(target.value, how)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._check_target(target.target, "an assignment to")

    def leave_Assign(self, node: cst.Assign) -> None:
        aliasing = self.state(node.value)
        for target in node.targets:
            self._bind(target.target, aliasing)
            if aliasing and isinstance(target.target, cst.Name):
                self.origins[target.target.value] = node.value

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._check_target(node.target, "an assignment to")

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, self.state(node.value))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check_target(node.target, "an augmented assignment to")
        target = node.target
        if isinstance(target, cst.Name) and target.value in self.aliases:
            value = self._value_of(self.origins.get(target.value))
            if not isinstance(value, _IMMUTABLE):
                self._refuse(node, "an augmented assignment (in place for tensors and lists) to")

    def _value_of(self, node: cst.BaseExpression | None) -> object:
        """The value ``node`` (a chain from the receiver) has on ``owner``; ``_UNKNOWN`` if not provable."""
        if isinstance(node, cst.Name) and node.value == self.receiver and self.owner is not None:
            return self.owner
        if isinstance(node, cst.Attribute):
            base = self._value_of(node.value)
            return _UNKNOWN if base is _UNKNOWN else getattr(base, node.attr.value, _UNKNOWN)
        return _UNKNOWN

    def visit_Del(self, node: cst.Del) -> None:
        self._check_target(node.target, "del of")

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target, self.state(node.iter))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name, self.state(node.item))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        out = keywords.get("out")
        if out is not None and self.state(out):
            self._refuse(out, "out= into")
        if isinstance(func, cst.Name) and func.value in ("setattr", "delattr") and positional and self.state(
                positional[0]):
            self._refuse(node)
        if isinstance(func, cst.Attribute):
            name = func.attr.value
            if name in ("__setattr__", "__delattr__", "__setitem__", "__delitem__") and (
                    self.state(func.value) or positional and self.state(positional[0])):
                self._refuse(node)
            if self.state(func.value):
                bare = isinstance(func.value, cst.Name) and func.value.value == self.receiver
                # on self itself, a name ending in _ may be the user's own method
                if name in _MODULE_WRITES or (name in _SELF_CONVERSIONS if bare else (
                        _is_inplace_name(name) or name in _CONTAINER_WRITES)):
                    self._refuse(node)
                return
        root = func
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and root.value in self.locals:
            return  # a method of a local value (x.add_(self.bias)): writes x, not the state
        called = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        inplace_flag = keywords.get("inplace")
        first_is_state = bool(positional) and self.state(positional[0])
        if first_is_state and (_is_inplace_name(called) or isinstance(inplace_flag, cst.Name)
                               and inplace_flag.value == "True"):
            self._refuse(node)


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


def receiver_name(function: types.FunctionType, definition: cst.FunctionDef) -> str | None:
    """The ``self`` parameter's name when ``function`` is a method, else None."""
    params = definition.params.params
    if not params:
        return None
    parts = function.__qualname__.split(".")
    if len(parts) < 2 or parts[-2] == "<locals>":
        return None
    owner = function.__globals__.get(parts[0]) if len(parts) == 2 else None
    if owner is not None and isinstance(vars(owner).get(parts[-1]) if hasattr(owner, "__dict__") else None,
                                        staticmethod):
        return None
    return params[0].name.value
