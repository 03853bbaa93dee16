"""Predicates on how PyTorch runs forward(), folded to their value for a compiled model.

A compiled model's semantic is eager PyTorch under ``torch.no_grad()``, called normally: not
scripted, not traced, not under ``torch.compile`` or ``torch.export``. So the predicates that
ask about that have one answer for every call, and ``StaticEvaluator`` folds them like any
static call (``if torch.jit.is_scripting(): ...`` loses its dead branch):

- ``torch.jit.is_scripting()``, ``torch.jit.is_tracing()``, ``torch.compiler.is_compiling()``,
  ``torch.compiler.is_dynamo_compiling()``, ``torch.compiler.is_exporting()``,
  ``torch._dynamo.is_compiling()``, ``torch.onnx.is_in_onnx_export()``: False (what eager returns
  when the model is called normally; code the exporter runs as it is may not ask the tracing ones:
  ``dycl.export.tracer_state``).
- ``torch.is_grad_enabled()``: False. The compiled code computes no gradients, whatever the
  caller's grad mode: a model called under grad answers as eager does under ``torch.no_grad()``
  (which is how dycl runs eager on the example and in every comparison), never with the branch a
  training-time check (``if torch.is_grad_enabled(): checkpoint(...)``) takes.
- ``torch.is_inference_mode_enabled()``: False (``no_grad`` is not inference mode).

Assumes: the callables are torch's own, found by their module and qualified name (so nothing here
imports ``torch._dynamo``, which is slow to import). Guarantees: ``mode_predicate_value`` gives a
value only for one of them called with no arguments; None for anything else.
"""

from __future__ import annotations

from typing import Any

#: (``__module__``, ``__qualname__``) of each predicate -> its value for a compiled model
_FOLDED: dict[tuple[str, str], bool] = {
    ("torch._jit_internal", "is_scripting"): False,
    ("torch.jit._trace", "is_tracing"): False,
    ("torch.compiler", "is_compiling"): False,
    ("torch.compiler", "is_dynamo_compiling"): False,
    ("torch.compiler", "is_exporting"): False,
    ("torch.onnx", "is_in_onnx_export"): False,
    ("torch._dynamo.external_utils", "is_compiling"): False,
    ("torch", "is_grad_enabled"): False,
    ("torch", "is_inference_mode_enabled"): False,
}


def mode_predicate_value(func: Any, args: list[Any], kwargs: dict[str, Any]) -> bool | None:
    """The folded value of ``func(*args, **kwargs)`` where ``func`` is one of the predicates above
    called with no arguments; else None."""
    if args or kwargs:
        return None
    try:
        key = (getattr(func, "__module__", None), getattr(func, "__qualname__", None))
        return _FOLDED.get(key)
    except TypeError:  # an unhashable name: not one of torch's functions
        return None


__all__ = ["mode_predicate_value"]
