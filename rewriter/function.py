"""The result of rewriting: readable source, and a way to run it eagerly."""

from __future__ import annotations

import functools
import inspect
import linecache
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.arguments import FlatInput
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.state_table import NOT_INPUTS
from dycl.rewriter.state_threading import ThreadedState


@dataclass(frozen=True)
class RewrittenFunction:
    """A loop-free, constant-folded rewrite of one method of one model.

    ``source`` is a module holding one ``def``; every statement ends with a
    ``# file.py:line`` comment naming the user's line it came from.
    ``globals`` maps each global name the source uses to its object.
    ``signature`` is the rewritten function's: ``self``, one parameter per
    input (``inputs`` says which argument of the original ``forward()`` each one
    is), then the ``specialized`` parameters whose values were folded in (calling
    with another value raises ``ValueError``). ``fixed``, ``absent`` and
    ``variadic`` describe the rest of the example's call form
    (``rewriter.arguments.FlatParameters``); ``original_signature`` is forward()'s.
    ``definition`` is the ``def`` as a libcst tree (``source`` is its text, and reads
    back as it); every statement in it is a distinct object, so analyses may key
    statements by identity.
    """

    name: str
    qualname: str
    source: str
    definition: cst.FunctionDef = field(compare=False, repr=False)
    globals: dict[str, Any]
    signature: inspect.Signature
    specialized: dict[str, Any]
    locations: LocationTable
    module_structure: tuple[tuple[str, str], ...]
    trace: list[tuple[str, str, str]] = field(default_factory=list, repr=False)
    inputs: tuple[FlatInput, ...] = ()
    fixed: tuple[tuple[str, int | str | None, Any], ...] = ()
    absent: tuple[str, ...] = ()
    variadic: dict[str, int | list[str]] = field(default_factory=dict)
    #: parameters whose value holds records, by name (``rewriter.arguments.FlatParameters``)
    structures: dict[str, Any] = field(default_factory=dict, compare=False)
    original_signature: inspect.Signature | None = None
    higher_order: bool = False  # the source called torch.cond/map: the original must never be traced
    #: module state threaded through the function (``rewriter.state_threading``): parameters after the
    #: inputs, and the function returns ``(output, (final state...))``
    state: tuple[ThreadedState, ...] = ()
    functions: tuple[Any, ...] = field(default=(), compare=False, repr=False)  # user functions read (globals guard)
    #: the modules' Python values constant propagation read (``rewriter.config_reads``: the config guard)
    config_reads: tuple[Any, ...] = field(default=(), compare=False, repr=False)

    def __str__(self) -> str:
        """The rewritten source (``print(dycl.rewrite(model))``)."""
        return self.source

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.source)}</pre>"

    @property
    def plain_source(self) -> str:
        """``source`` without the location comments."""
        return self.locations.strip(self.source)

    def compile(self):
        """The rewritten function as a Python function taking ``self`` first."""
        filename = f"<dycl-rewritten {self.qualname}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        namespace: dict[str, Any] = {"__builtins__": __builtins__, **self.globals}
        exec(compile(self.source, filename, "exec"), namespace)  # noqa: S102 - our generated code only
        return namespace[self.name]

    def bind(self, model: torch.nn.Module):
        """A callable with ``model.forward``'s arguments and return value that runs
        the rewritten function eagerly (under ``torch.no_grad()``)."""
        structure = _module_structure(model)
        if structure != self.module_structure:
            raise ValueError(f"{self.qualname} was rewritten for a model with a different module structure")
        function = self.compile()
        signature = self.signature

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(model, *args, **kwargs)
            for name, expected in self.specialized.items():
                if name in bound.arguments and bound.arguments[name] is not expected and (
                    bound.arguments[name] != expected
                ):
                    raise ValueError(
                        f"argument {name!r} was specialized to {expected!r} when the model was rewritten; "
                        f"got {bound.arguments[name]!r}")
            if not self.state:
                with torch.no_grad():
                    return function(model, *args, **kwargs)
            # module state in, its final value written back (rewriter.state_threading)
            current = {s.parameter: s.slot.read() for s in self.state if s.kind not in NOT_INPUTS}
            with torch.no_grad():
                output, final = function(model, *args, **current, **kwargs)
            for threaded, value in zip(self.state, final):
                threaded.slot.write(value)
            return output

        return call


def _module_structure(model: torch.nn.Module) -> tuple[tuple[str, str], ...]:
    return tuple((name, type(module).__qualname__) for name, module in model.named_modules())


module_structure = _module_structure


def distinct_statements(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``block`` where no statement object (compound, line or small statement) appears twice:
    a pass that copies a statement (an unrolled body, a shared callee) leaves one object in
    several places; each later occurrence becomes a copy."""
    seen: set[int] = set()

    def fresh(stmt: cst.BaseStatement) -> cst.BaseStatement:
        if isinstance(stmt, cst.SimpleStatementLine):
            ids = [id(stmt), *(id(small) for small in stmt.body)]
            if any(i in seen for i in ids):
                return fresh(stmt.deep_clone())
            seen.update(ids)
            return stmt
        if id(stmt) in seen:
            stmt = stmt.deep_clone()
        seen.add(id(stmt))
        if isinstance(stmt, cst.If):  # after the rewriter, the only compound statement (verify)
            body = fresh_block(stmt.body)
            orelse = stmt.orelse
            if isinstance(orelse, cst.Else):
                else_body = fresh_block(orelse.body)
                orelse = orelse if else_body is orelse.body else orelse.with_changes(body=else_body)
            elif isinstance(orelse, cst.If):
                orelse = fresh(orelse)
            if body is not stmt.body or orelse is not stmt.orelse:
                return stmt.with_changes(body=body, orelse=orelse)
        return stmt

    def fresh_block(block: cst.BaseSuite) -> cst.BaseSuite:
        statements = [fresh(s) for s in block.body]
        if all(a is b for a, b in zip(statements, block.body)):
            return block
        return block.with_changes(body=statements)

    return [fresh(stmt) for stmt in block]
