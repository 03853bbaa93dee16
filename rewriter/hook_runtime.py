"""What ``nn.Module.__call__`` does around ``forward``, as two functions the rewritten code calls.

Where dycl inlines a submodule's ``forward`` (it branches on data), ``__call__`` no longer
runs, so ``rewriter.hooked_calls`` writes its hook calls out around the inlined body:
``args = run_pre_hooks(module, args)`` before and ``out = run_forward_hooks(module, args,
kwargs, out)`` after. Both follow ``torch.nn.Module._call_impl`` (global hooks first, then
the module's, in registration order; a pre-hook's non-None result replaces the arguments, a
1-tuple made of a single value; a forward hook's non-None result replaces the output;
``with_kwargs`` forward hooks also get the keyword arguments).

Guarantees: the rewriter never looks into these functions (``traced_as_library``): they are
traced into the sub-DNN like library code, so a hook that decides on data is caught by the
exporter's decision checks and refused with its line, never silently frozen.
Assumes: hooks are registered before ``dycl.compile`` and not changed afterwards; pre-hooks
with ``with_kwargs`` are refused before these run (``rewriter.hooked_calls``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.modules import module as _module


def run_pre_hooks(module: torch.nn.Module, args: tuple) -> tuple:
    """``args`` as ``module``'s forward pre-hooks (global ones first) leave them."""
    for hook in (*_module._global_forward_pre_hooks.values(), *module._forward_pre_hooks.values()):
        result = hook(module, args)
        if result is not None:
            args = result if isinstance(result, tuple) else (result,)
    return args


def run_forward_hooks(module: torch.nn.Module, args: tuple, kwargs: dict[str, Any], output: Any) -> Any:
    """``output`` as ``module``'s forward hooks (global ones first) leave it."""
    hooks = (*_module._global_forward_hooks.items(), *module._forward_hooks.items())
    for hook_id, hook in hooks:
        with_kwargs = (hook_id in module._forward_hooks_with_kwargs
                       or hook_id in _module._global_forward_hooks_with_kwargs)
        result = hook(module, args, kwargs, output) if with_kwargs else hook(module, args, output)
        if result is not None:
            output = result
    return output


run_pre_hooks.traced_as_library = True  # type: ignore[attr-defined]
run_forward_hooks.traced_as_library = True  # type: ignore[attr-defined]

__all__ = ["run_pre_hooks", "run_forward_hooks"]
