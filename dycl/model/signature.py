"""How ``dycl.compile`` reads its example call, and how the host is told about it.

The example is ``forward()``'s arguments as the user passes them: positional ones
in ``example_input`` (a tensor or a tuple), keyword ones in ``kwargs``, as
``torch.export`` takes them. ``bind_example`` binds them to ``forward()``'s
signature; the rewriter then gives the rewritten function one parameter per
input of that call (``rewriter.arguments``), and ``flat_example`` lists the
example's values in that order. ``call_description`` (a ``hostgen.manifest.CallForm``) is what the host's
``_bind`` needs to bind a later call the same way and to refuse a call of
another form (a parameter passed that the example left out, another number of
``*args``, a compiled-in value changed) with a clear message.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from dycl.hostgen.manifest import CallForm
from dycl.rewriter import RewrittenFunction
from dycl.rewriter.arguments import positional_arguments
from dycl.rewriter.forward import resolve_method, signature_of
from dycl.rewriter.state_table import NOT_INPUTS


def example_arguments(example_input: Any) -> tuple:
    """``example_input`` as a tuple of positional arguments (None: no positional ones)."""
    if example_input is None:
        return ()
    return positional_arguments(example_input)


def bind_example(model: torch.nn.Module, example_input: Any, kwargs: dict[str, Any] | None = None,
                 method: str = "forward") -> dict[str, Any]:
    """The example's arguments by ``forward()`` parameter, as passed (defaults not applied)."""
    resolved = resolve_method(model, method)
    signature = signature_of(resolved, inspect.unwrap(resolved.function))
    try:
        bound = signature.bind(model, *example_arguments(example_input), **(kwargs or {}))
    except TypeError as error:
        shown = signature.replace(parameters=list(signature.parameters.values())[1:])
        raise TypeError(f"the example does not fit {type(model).__qualname__}.{method}{shown}: {error}") from None
    arguments = dict(bound.arguments)
    arguments.pop(next(iter(signature.parameters)))
    return arguments


def flat_example(rewritten: RewrittenFunction, passed: dict[str, Any]) -> tuple:
    """The example's value of every input of ``rewritten``, in its parameter order."""
    values = []
    leaves = {(name, key): structure.port_leaves(passed[name] if key is None else passed[name][key])
              for (name, key), structure in rewritten.structures.items()}
    for flat in rewritten.inputs:
        value = passed[flat.parameter]
        if isinstance(flat.key, tuple):  # an array of a value holding records: (its key, its position)
            values.append(leaves[flat.parameter, flat.key[0]][flat.key[1]])
            continue
        values.append(value if flat.key is None else value[flat.key])
    # then the module state threaded through the function, as it is now (rewriter.state_threading)
    values.extend(state.slot.read() for state in rewritten.state if state.kind not in NOT_INPUTS)
    return tuple(values)


def call_description(rewritten: RewrittenFunction, returned: tuple = ()) -> CallForm:
    """The host's call form (``CALL``, see its ``_bind``): forward()'s parameters, which of
    them (or which of their elements) are inputs, and what the example fixed; ``returned``: the
    arguments forward returns updated in place (``dycl.model.records.returned_arguments``)."""
    parameters = list(rewritten.original_signature.parameters.values())[1:]
    return CallForm.of([(p.name, p.kind.name, p.default is not inspect.Parameter.empty) for p in parameters],
                       [(flat.name, flat.parameter, flat.key) for flat in rewritten.inputs],
                       rewritten.fixed, rewritten.absent, rewritten.variadic,
                       [(name, key, structure.skeleton) for (name, key), structure in rewritten.structures.items()],
                       returned)


__all__ = ["bind_example", "call_description", "example_arguments", "flat_example"]
