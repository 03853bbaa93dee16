"""Hooks on the model itself: compile ``model(...)``, not only ``model.forward``.

Calling the model runs its forward pre-hooks and forward hooks around ``forward``
(``nn.Module.__call__``), and so do the global module hooks. When the model has any,
``hooked_entry`` gives the rewriter a small generated method to compile instead of
``forward``: it has ``forward``'s parameters and calls the model as the example did,

    def forward(self, x, mask=_dycl_default_mask):
        return self(x, mask=mask)

(positional arguments positionally, keyword arguments by keyword, the ones the example
left out left out), so the hooks see the ``args`` and ``kwargs`` eager gives them. The
``Inline`` pass then writes the hooks out around the inlined ``forward``
(``rewriter.hooked_calls``), or keeps ``self(...)`` as a call that the exporter traces with
its hooks when ``forward`` does not branch on data.

Assumes: ``positional`` is how many of the example's arguments were positional. Guarantees:
without it (a direct ``rewriter.rewrite`` call), or with ``*args``/``**kwargs`` in forward's
signature, a model with hooks is refused by name (``rewriter.hooks.refuse_dropped_hooks``).
"""

from __future__ import annotations

import inspect
import linecache
from typing import Any

import torch
from dycl.rewriter.errors import SourceLocation
from dycl.rewriter.forward import ResolvedMethod
from dycl.rewriter.hooks import forward_hooks, refuse_dropped_hooks

_P = inspect.Parameter


def hooked_entry(model: torch.nn.Module, resolved: ResolvedMethod, signature: inspect.Signature,
                 example: dict[str, Any] | None, positional: int | None) -> ResolvedMethod:
    """``resolved`` when ``model`` has no hooks, else the generated method that calls the model."""
    if not forward_hooks(model):
        return resolved
    parameters = list(signature.parameters.values())[1:]
    if example is None or positional is None or any(p.kind in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD)
                                                    for p in parameters):
        code = getattr(resolved.function, "__code__", None)
        where = SourceLocation(code.co_filename, code.co_firstlineno) if code is not None else None
        refuse_dropped_hooks(model, f"the model ({type(model).__qualname__}), called with a form dycl cannot "
                                    "repeat (*args or **kwargs in forward, or no example)", where)
    namespace: dict[str, Any] = {"__name__": "dycl.rewriter.root_hooks"}
    header, arguments = [], []
    for index, parameter in enumerate(parameters):
        text = parameter.name
        if parameter.default is not _P.empty:
            namespace[f"_dycl_default_{parameter.name}"] = parameter.default
            text += f"=_dycl_default_{parameter.name}"
        if parameter.kind is _P.KEYWORD_ONLY and not any(h.startswith("*") for h in header):
            header.append("*")
        header.append(text)
        if parameter.name in example:
            arguments.append(parameter.name if index < positional else f"{parameter.name}={parameter.name}")
        if parameter.kind is _P.POSITIONAL_ONLY and (index + 1 == len(parameters)
                                                     or parameters[index + 1].kind is not _P.POSITIONAL_ONLY):
            header.append("/")
    source = f"def forward(self, {', '.join(header)}):\n    return self({', '.join(arguments)})\n"
    filename = f"<dycl: calling {type(model).__qualname__} with its hooks>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our generated method only
    return ResolvedMethod(namespace["forward"], model)


__all__ = ["hooked_entry"]
