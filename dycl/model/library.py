"""Models whose ``forward()`` is library code (Hugging Face, timm) or returns objects, compiled unmodified.

dycl looks into user code and treats installed libraries as opaque calls that
are traced into a sub-DNN (``rewriter.inline.is_user_code``). A top-level model
from a library is handled the same way: ``library_call`` generates a small
wrapper module whose ``forward`` takes the example's inputs as plain parameters,
calls the model exactly as the example did (literals written in, left-out
arguments left out) and returns the plain form of its output
(``dycl.model.outputs``), e.g.

    def forward(self, input_ids):
        out_0, out_1 = _tensor_leaves(self.model(input_ids))
        return {'logits': out_0, 'pooler_output': out_1}

A user model whose output holds objects the host cannot build (a namedtuple,
a ``ModelOutput``) is rewritten instead: ``object_output`` tells the rewriter to
flatten every ``return`` into tensor leaves and return the plain form.

The compiled model is called with the model's own signature: the
returned ``call`` description binds a call to the wrapper's inputs
(``dycl.model.signature``), and ``spec`` rebuilds the library's output objects.

Used only when the rewrite of the library's forward, specialized to the
example's call form, is straight-line (``decides_nothing``) but for argument
checks that raise and read no size (the traced call keeps the example's outcome
of such a check); otherwise the forward is compiled
like user code. Assumed, as for every library submodule
called from user code: the library's own submodules and helpers make no
data-dependent decision (they are traced).
"""

from __future__ import annotations

import functools
import inspect
import linecache
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
import torch
from torch.utils import _pytree as pytree

from dycl.export.size_numbers import has_size_calls, reads_size
from dycl.hostgen.manifest import CallForm
from dycl.model import outputs, records
from dycl.model.example_run import run_on_example
from dycl.rewriter import ReturnForm, RewrittenFunction
from dycl.rewriter.decorators import undecorate
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.forward import resolve_method, signature_of
from dycl.rewriter.inline import is_user_code
from dycl.rewriter.values import is_literal
from dycl.rewriter.walk import descendants

_P = inspect.Parameter


@dataclass(frozen=True)
class LibraryCall:
    """The wrapper to compile, its example (by parameter), the host's call description and the output spec."""

    wrapper: torch.nn.Module
    example: dict[str, Any]
    call: CallForm
    spec: pytree.TreeSpec


def decides_nothing(rewritten: RewrittenFunction) -> bool:
    """Whether the rewritten forward is straight-line code: every decision in it was
    static for this call form, so tracing the original makes no decision the rewrite
    would keep (``if``, conditional expression, ``and``/``or`` on values are decisions)."""
    if rewritten.higher_order:  # torch.cond/map: the TorchScript tracer cannot run the original
        return False
    module = rewritten.definition
    if has_size_calls(module, rewritten.globals):  # round(x.shape[0] / 2): exact only in rewritten code
        return False
    guards = {id(n) for node in descendants(module) if _is_guard(node) for n in descendants(node.test)}
    return not any(isinstance(node, (cst.If, cst.IfExp, cst.BooleanOperation)) and not _is_guard(node)
                   and id(node) not in guards for node in descendants(module))


def _is_guard(node: cst.CSTNode) -> bool:
    """``if <check>: raise ...`` with no ``else``: an argument check, not a decision about the output.
    A check that reads a size (``assert x.shape[0] > 2``) is a decision: on a symbolic dim the
    traced call would keep the example's outcome, the rewritten forward checks it per call."""
    return (isinstance(node, cst.If) and node.orelse is None and len(node.body.body) == 1
            and isinstance(node.body.body[0], cst.SimpleStatementLine)
            and all(isinstance(small, cst.Raise) for small in node.body.body[0].body)
            and not reads_size(node.test))


def is_library_model(model: torch.nn.Module, method: str = "forward") -> bool:
    return not is_user_code(inspect.unwrap(getattr(type(model), method)))


def wraps_forward(model: torch.nn.Module) -> bool:
    """Whether ``model``'s forward is a decorator's wrapper that may change its result
    (``rewriter.decorators``): rewriting the wrapped source would drop the wrapper."""
    try:
        undecorate(resolve_method(model).function)
    except UnsupportedError:
        return True
    return False


def object_output(model: torch.nn.Module, passed: dict[str, Any],
                  run: Callable[[], Any] | None = None, positional: int | None = None) -> ReturnForm | None:
    """For a user model whose forward returns, on the example, objects other than
    tensors, tuples, lists and dicts (a namedtuple, a ``ModelOutput``): how its
    returns are rewritten to flat tensors and the plain form (``dycl.model.outputs``),
    with the ``TreeSpec`` that rebuilds the objects as ``spec`` attribute. Else None.
    ``run`` makes the example's output instead of calling the model (one that must not
    write the model's state: ``rewriter.state_threading``). ``positional``: how many of the
    example's arguments were positional (the others are passed by keyword, as the example
    passed them: a decorator's wrapper may read its ``kwargs``)."""
    _, leaves, spec = _example_output(model, passed, run, positional)
    output = pytree.tree_unflatten(leaves, spec)
    structure = records.structure_of(output, returned=True)
    if structure is not None:  # a KV cache among the outputs: returned in its plain form (dycl.model.records)
        structure = records.returned_arguments(output, structure, passed)
        return _ReturnForm(structure.port_leaves, structure.count, structure.plain_expression, structure)
    if outputs.is_plain(spec) or not all(isinstance(leaf, torch.Tensor | bool) for leaf in leaves):
        return None  # a Python number in the output is left to the host, which computes it per call
    # a bool among the leaves (a namedtuple's ``confident`` flag) may be computed from data: carried as a value
    flags = frozenset(i for i, leaf in enumerate(leaves) if isinstance(leaf, bool))
    return _ReturnForm(functools.partial(_flagged_leaves, flags), len(leaves),
                       functools.partial(_plain, spec, leaves), spec)


def _example_output(model: torch.nn.Module, passed: dict[str, Any],
                    run: Callable[[], Any] | None = None, positional: int | None = None
                    ) -> tuple[list[inspect.Parameter], list[Any], pytree.TreeSpec]:
    """forward()'s parameters (less ``self``) and the flat leaves and spec of its
    output when called as the example ``passed`` (arguments by parameter name)."""
    resolved = resolve_method(model)
    signature = signature_of(resolved, inspect.unwrap(resolved.function))
    parameters = list(signature.parameters.values())[1:]
    bound = inspect.BoundArguments(signature.replace(parameters=parameters), dict(passed))
    args, kwargs = bound.args, bound.kwargs
    if positional is not None and len(args) > positional and not any(p.kind is _P.VAR_POSITIONAL for p in parameters):
        named = [p.name for p in parameters if p.name in passed][positional:len(args)]
        args, kwargs = args[:positional], {**{name: passed[name] for name in named}, **kwargs}
    # a failure says "while running ... on the example"
    output = run_on_example(model, args, kwargs) if run is None else run()
    leaves, spec = outputs.flatten(output)
    return parameters, leaves, spec


@dataclass(frozen=True)
class _ReturnForm(ReturnForm):
    spec: pytree.TreeSpec = None


def _plain(spec: pytree.TreeSpec, leaves: list[Any], names: list[str]) -> str:
    """The plain form's source: a tensor leaf its name, a bool leaf ``bool(name)``."""
    return outputs.plain_expression(spec, [name if isinstance(leaf, torch.Tensor) else f"bool({name})"
                                           for leaf, name in zip(leaves, names)])


def _flagged_leaves(flags: frozenset[int], value: Any) -> tuple[torch.Tensor, ...]:
    """Every leaf of ``value`` as a tensor: a bool at a position in ``flags`` (a Python bool, or a
    one-element tensor where the model computed it) as a 0-d bool tensor."""
    leaves = pytree.tree_leaves(value)
    return tuple(_flag(leaf) if i in flags else leaf for i, leaf in enumerate(leaves))


def _flag(leaf: Any) -> torch.Tensor:
    if isinstance(leaf, torch.Tensor) and leaf.numel() == 1:
        return leaf.reshape(()).to(torch.bool)
    if isinstance(leaf, bool):
        return torch.tensor(leaf)
    raise ValueError(f"{leaf!r} where the model was compiled for a bool")


def _tensor_leaves(value: Any) -> tuple[torch.Tensor, ...]:
    return tuple(leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor))


def library_call(model: torch.nn.Module, passed: dict[str, Any]) -> LibraryCall | None:
    """The wrapper that calls ``model`` as the example ``passed`` (forward()'s
    arguments by parameter name) did; None when the output holds a Python number
    (traced as one graph it would be frozen; the rewritten forward computes it per call)."""
    parameters, leaves, spec = _example_output(model, passed)
    if not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
        return None  # a Python number may come from a shape that differs from call to call: never frozen
    form = _CallForm()
    arguments = [text for param in parameters for text in form.arguments(param, passed, parameters)]
    source = _wrapper_source([name for name, _, _ in form.flat], arguments, leaves, spec)
    return LibraryCall(_wrapper(model, source), form.inputs, form.description(parameters), spec)


@dataclass
class _CallForm:
    """How the wrapper calls the model, collected one parameter at a time: the
    wrapper's parameters (``flat``: ``[name, parameter, key]``, with their example
    values in ``inputs``), the literals written into the call (``fixed``), the
    parameters left out (``absent``) and what each variadic parameter received."""

    names: set[str] = field(default_factory=lambda: {"self"})
    inputs: dict[str, Any] = field(default_factory=dict)
    flat: list[list[Any]] = field(default_factory=list)
    fixed: list[list[Any]] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    variadic: dict[str, Any] = field(default_factory=dict)

    def arguments(self, param: inspect.Parameter, passed: dict[str, Any],
                  parameters: list[inspect.Parameter]) -> list[str]:
        """The call's argument texts for ``param`` (none when the example left it out)."""
        if param.name not in passed:
            self._left_out(param)
            return []
        value = passed[param.name]
        if param.kind is _P.VAR_POSITIONAL:
            self.variadic[param.name] = len(value)
            return [self.term(param.name, i, v) for i, v in enumerate(value)]
        if param.kind is _P.VAR_KEYWORD:
            self.variadic[param.name] = list(value)
            return [f"**{{{k!r}: {self.term(param.name, k, v)}}}" for k, v in value.items()]
        if param.kind is _P.POSITIONAL_ONLY or (param.kind is _P.POSITIONAL_OR_KEYWORD and any(
                p.kind is _P.VAR_POSITIONAL and passed.get(p.name) for p in parameters)):
            return [self.term(param.name, None, value)]
        return [f"{param.name}={self.term(param.name, None, value)}"]

    def _left_out(self, param: inspect.Parameter) -> None:
        if param.kind is _P.VAR_POSITIONAL:
            self.variadic[param.name] = 0
        elif param.kind is _P.VAR_KEYWORD:
            self.variadic[param.name] = []
        elif is_literal(param.default):
            self.fixed.append([param.name, None, param.default])
        else:
            self.absent.append(param.name)

    def term(self, parameter: str, key: Any, value: Any) -> str:
        """The text for ``value`` (``parameter``'s, or item ``key`` of it): a literal
        written in, a list or tuple of tensors item by item, else a new wrapper parameter."""
        if key is None and type(value) in (tuple, list) and value and all(
                isinstance(v, torch.Tensor) for v in value):
            self.variadic[parameter] = len(value)
            items = ", ".join(self.term(parameter, i, v) for i, v in enumerate(value))
            return f"[{items}]" if isinstance(value, list) else f"({items},)"
        if is_literal(value) and not isinstance(value, (list, dict)):
            self.fixed.append([parameter, key, value])
            return repr(value)
        base = parameter if key is None else f"{parameter}_{key}"
        name = base if base.isidentifier() else f"{parameter}_{len(self.flat)}"
        while name in self.names:
            name += "_"
        self.names.add(name)
        self.inputs[name] = value
        self.flat.append([name, parameter, key])
        return name

    def description(self, parameters: list[inspect.Parameter]) -> CallForm:
        """The host's call form (``dycl.model.signature``)."""
        return CallForm.of([(p.name, p.kind.name, p.default is not _P.empty) for p in parameters],
                           self.flat, self.fixed, self.absent, self.variadic)


def _wrapper_source(parameters: list[str], arguments: list[str], leaves: list[Any], spec: pytree.TreeSpec) -> str:
    count = sum(isinstance(leaf, torch.Tensor) for leaf in leaves)
    results = [f"out_{i}" for i in range(count)]
    position = iter(results)
    leaf_terms = [next(position) if isinstance(leaf, torch.Tensor) else repr(leaf) for leaf in leaves]
    targets = ", ".join(results) + ("," if count == 1 else "")
    call = f"self.model({', '.join(arguments)})"
    lines = [f"def forward(self, {', '.join(parameters)}):",
             f"    {targets} = _tensor_leaves({call})" if count else f"    {call}",
             f"    return {outputs.plain_expression(spec, leaf_terms)}"]
    return "\n".join(lines) + "\n"


def _wrapper(model: torch.nn.Module, source: str) -> torch.nn.Module:
    """A module whose forward is ``source`` (registered with linecache, so tracebacks
    and the rewriter can read it) and whose ``model`` is ``model``."""
    filename = f"<dycl: calling {type(model).__qualname__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict[str, Any] = {"_tensor_leaves": _tensor_leaves, "__name__": "dycl.model.library"}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our generated wrapper only
    wrapper_type = type(f"Calling{type(model).__name__}", (torch.nn.Module,), {"forward": namespace["forward"]})
    wrapper = wrapper_type()
    wrapper.model = model
    wrapper.train(model.training)
    return wrapper


__all__ = ["LibraryCall", "is_library_model", "library_call", "object_output", "wraps_forward"]
