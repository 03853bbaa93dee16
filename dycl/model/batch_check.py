"""Keep the batch static when the model cannot take another batch size.

dycl makes dim 0 symbolic by default (``dycl.model.dynamic``). A model written for one
sample (``if mask.item() == 0:``) compiles with a symbolic batch, then fails at batch
2 with a raw numpy error, in process and in the saved host whose README promises
that the batch may take any size. ``static_batch_if_needed`` runs eager PyTorch on
the example with its batch doubled (``dycl.model.example_run.batch_failure``); where eager
itself fails there but runs the example, the batch is compiled static at the
example's size with a ``SpecialisationWarning`` that names the failure and the two
fixes (``per_sample=True`` for batches of samples, ``dynamic=False`` to say it is
static). The compiled model then refuses other batch sizes by name, and the manifest
states the static size.

Why at compile time rather than at call time: the artifact's promise (its README and
manifest) is written at compile time, so that is where it must be kept; a refusal
naming the compiled size at call time follows from it. Cost: one extra eager call of
the model at twice the example's batch per compile (two when it fails).

Assumes the caller holds the model in the state compiling wants and restores it
afterwards (``dycl.model.model_state.preserved``), and calls this after the compile's front
end succeeded (``dycl.compiler.compile_front``: rewrite, build, optimize): the rewrite ran
``forward`` and refused any write to module state, so these runs write none either (and a
refusal of such a write keeps its own message). The caller then compiles from that front end
(``dycl.compiler.compile_from``) with ``dynamic=False`` where the batch must be static and as
asked otherwise: no stage before explore reads ``dynamic``, so every model is explored and
exported once and the model's reference and build runs are made once. (Checking before the
rewrite would be earlier still, but a run before the rewrite's refusal of a state write would
itself count as the write: restoring a tensor bumps its version counter, which is how
``preserved`` detects writes.) A small,
separate function so that the compile's self-check can call it too.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch

from dycl.model.dynamic import BATCH, DynamicSpec
from dycl.model.example_run import batch_failure
from dycl.rewriter.arguments import positional_arguments
from dycl.rewriter.errors import SpecialisationWarning


def static_batch_needed(model: torch.nn.Module, example_input: Any, kwargs: Mapping[str, Any] | None,
                        dynamic: DynamicSpec, per_sample: bool = False) -> bool:
    """Whether the batch dim, symbolic by default, must be compiled static: eager PyTorch fails
    at a larger batch (module docstring); if so, says why in a ``SpecialisationWarning``."""
    if per_sample or dynamic not in (True, BATCH):
        return False
    args = positional_arguments(example_input) if example_input is not None else ()
    tensors = [a for a in (*args, *(kwargs or {}).values()) if isinstance(a, torch.Tensor) and a.dim()]
    failure = batch_failure(model, args, kwargs) if tensors else None
    if failure is None:
        return False
    size = tensors[0].shape[0]
    warnings.warn(SpecialisationWarning(
        f"{type(model).__name__} runs at the example's batch size ({size}) but eager PyTorch fails at batch "
        f"{2 * size} ({failure}); dycl compiles the batch static at {size}, and the compiled model refuses other "
        "batch sizes. For batches of single samples compile with per_sample=True; dynamic=False says the batch "
        "is static and silences this warning."), stacklevel=3)
    return True


__all__ = ["static_batch_needed"]
