"""Whether eager's own answer on an input is decided by float32 rounding.

Note: ties on derived inputs. The self-check's derived inputs lie far from the example (30
times its spread, shifted by 10 times it), where activations saturate: ``tanh`` gives 1.0 to
the last float32 bit for several elements, and a mean of ``+a`` and ``-a`` is zero up to its
summation order. A branch decided on such values (``argmax``, ``mean() < 0``) is a tie that
eager and a compiled runtime (other kernels, other summation orders) may break differently,
neither of them wrongly. Found by the fuzzer (seed 4242, programs 149 and 208): a
``SelfCheckError`` calling that "a dycl bug". Such an input tells nothing about the compiled
model: eager computed in float64 answers otherwise than eager in float32.

Assumes: ``model`` is an ``nn.Module`` whose floating parameters and buffers may be cast to
float64 on a deep copy, in the state eager's run started from (the self-check restores it
first); what its forward writes to the model stays in the copy.

Guarantees: ``decided_by_rounding`` is True only where the float64 run of a copy of the model
succeeds and its outputs, cast back to float32, differ from ``expected`` by ``difference``;
False where the model or its outputs hold float64 already, or the float64 run fails. The
caller's model and arguments are never touched.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

from dycl.model.example_copy import copy_tensors


def decided_by_rounding(model: Any, args: tuple, kwargs: dict[str, Any], expected: Any,
                        difference: Callable[[Any, Any], str | None]) -> bool:
    """Whether eager's float32 answer ``expected`` on ``model(*args, **kwargs)`` differs from its
    float64 answer (module note)."""
    if _holds_float64(expected):
        return False
    answer = float64_answer(model, args, kwargs)
    return answer is not None and difference(expected, answer) is not None


def float64_answer(model: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
    """``model(*args, **kwargs)`` computed in float64 on a copy, its outputs cast back to float32;
    None where the model or its arguments hold float64 already, or the float64 run fails."""
    if not isinstance(model, torch.nn.Module) or _holds_float64((args, kwargs)):
        return None
    if any(t.dtype == torch.float64 for t in (*model.parameters(), *model.buffers())):
        return None
    try:
        wide = copy.deepcopy(model).double()
        wide_args, wide_kwargs = tree_map(_widened, copy_tensors((args, kwargs)))
        with torch.no_grad():
            answer = wide(*wide_args, **wide_kwargs)
    except Exception:  # noqa: BLE001 - a model that does not run in float64 proves nothing either way
        return None
    return tree_map(_narrowed, answer)


def _holds_float64(value: Any) -> bool:
    return any(isinstance(leaf, torch.Tensor) and leaf.dtype == torch.float64 for leaf in tree_leaves(value))


def _widened(value: Any) -> Any:
    return value.double() if isinstance(value, torch.Tensor) and value.dtype == torch.float32 else value


def _narrowed(value: Any) -> Any:
    return value.float() if isinstance(value, torch.Tensor) and value.dtype == torch.float64 else value


__all__ = ["decided_by_rounding", "float64_answer"]
