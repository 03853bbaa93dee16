"""Whether tensors still read their memory as they did: dtype, shape, strides, conjugate and negative bits.

``weight.data = weight.data.t()`` rebinds a weight to another view of the same memory (so do
``.view(2, 8)``, ``[:k]``, ``.view(torch.int32)`` and ``.conj()``): its data pointer stays where it
was and ``set_data`` keeps its version counter, so a guard of pointers and versions passes while
eager now reads the weight differently from the compiled model. ``layout(tensor)`` is what such a
rebinding changes; ``LayoutCheck.same()`` compares every tensor's with construction in one call.

Guarantees: ``same()`` is False whenever some tensor's ``layout`` differs from construction. It may
also be False when no ``layout`` changed (the native check below also compares ``requires_grad``
and the dispatch keys under the thread's current modes: autocast, functorch transforms; one is kept
per ``torch.inference_mode``): the caller then compares ``layout`` itself. Assumes: the caller keeps the tensors alive.

Where torch has it, the comparison is dynamo's C++ tensor check
(``torch._C._dynamo.guards.TensorGuards``: dispatch keys, dtype, device, ``requires_grad``, sizes and
strides read natively: about one more Python attribute read per tensor, a sixth of the Python
comparison, ``benchmarks/call_guard_layouts.md``); without it, or for tensors it cannot take (not
strided), one ``layout`` per tensor in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def layout(tensor: torch.Tensor) -> tuple:
    """How ``tensor`` reads its memory, besides where that memory is (``const_data_ptr``)."""
    strides = tensor.stride() if tensor.layout == torch.strided else tensor.layout
    return tensor.dtype, tensor.shape, strides, tensor.is_conj(), tensor.is_neg()


def _native_check(tensors: tuple[torch.Tensor, ...]) -> object | None:
    """Dynamo's C++ check of ``tensors`` as they are now, or None where torch has none that takes them."""
    if not tensors or any(tensor.layout != torch.strided for tensor in tensors):
        return None
    try:
        from torch._C._dynamo.guards import TensorGuards

        check = TensorGuards(*tensors, dynamic_dims_sizes=[list(tensor.shape) for tensor in tensors],
                             dynamic_dims_strides=[list(tensor.stride()) for tensor in tensors])
        return check if check.check(*tensors) else None
    except Exception:  # noqa: BLE001 - a torch without it or that refuses these tensors: the Python comparison
        return None


class LayoutCheck:
    """``same()``: whether every tensor of ``tensors`` has the ``layout`` it has now."""

    def __init__(self, tensors: Sequence[torch.Tensor]) -> None:
        # each tensor once: a module shared by two parents lists its weights twice, and the native
        # check refuses a tensor given twice (skipnet_rnn's shared gate: 176 µs a call in Python)
        self._tensors = tuple({id(tensor): tensor for tensor in tensors}.values())
        self._layouts = tuple(map(layout, self._tensors))
        # one native check per inference mode (it compares dispatch keys under the thread's modes), each
        # made once the layouts were found equal in that mode: a model called in both modes stays fast
        self._native_by_mode = {torch.is_inference_mode_enabled(): _native_check(self._tensors)}

    @property
    def native(self) -> object | None:
        """The native check of the current inference mode, None where there is none (yet)."""
        return self._native_by_mode.get(torch.is_inference_mode_enabled())

    def same(self) -> bool:
        """False if a tensor's layout changed (and possibly where only ``requires_grad`` or the modes did)."""
        mode = torch.is_inference_mode_enabled()
        native = self._native_by_mode.get(mode, _UNMADE)
        if native is None or native is _UNMADE:
            if tuple(map(layout, self._tensors)) != self._layouts:
                return False
            if native is _UNMADE:
                self._native_by_mode[mode] = _native_check(self._tensors)
            return True
        return native.check(*self._tensors)


_UNMADE = object()

__all__ = ["LayoutCheck", "layout"]
