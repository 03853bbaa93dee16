"""``dycl.compile(model, example, per_sample=True)``: a model written for one sample,
compiled to take a batch of samples and give each what eager gives it alone.

The example is one sample: every tensor input has a leading batch dim of 1. At
call time each tensor input's leading dim is the batch of samples; sample ``i``
sees ``x[i:i+1]``, exactly as if it were called alone. Each sub-DNN is compiled
for one sample and run over groups of samples (``dycl.per_sample.group_onnx``): the
nodes proven to keep samples apart (``dycl.per_sample.row_independence``) run once on the
whole group, the rest (statements that reduce over the whole tensor, and what
reads them) per sample in an ONNX ``Scan``; the host routes the samples
(``hostgen/emit_batched.py``): at each condition every sample goes its own way, and each
sub-DNN runs once per group of samples that reach it.

Outputs (``join``): tuples and dicts are joined position by position; a tensor
whose leading dim is 1 and whose shape and dtype are the same in every sample
is concatenated along it (what ``torch.cat`` of the per-sample outputs gives);
anything else (a list, a Python value, tensors whose shapes differ between
samples, e.g. token sequences of different lengths) is a Python list with one
entry per sample. Which of the two a position is can depend on the batch (a
batch whose sequences happen to have one length is concatenated).

Supported: the ONNX Runtime and TVM backends, in process and in the saved
torch-free host. TVM builds each sub-DNN's group model (its ONNX importer has no
``Scan``, so a sub-DNN with a statement that stays per sample is refused with an
``UnsupportedError``; and a group of samples has no example shape, so TVM's
example-shaped builds are skipped). Not yet: models whose outputs are framework
objects (``dycl.model.outputs``; refused).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from dycl.hostgen.manifest import Port
from dycl.per_sample.group_onnx import GROUP
from dycl.rewriter.errors import UnsupportedError

BACKENDS = ("onnxruntime", "tvm")


def check_request(backend: str, example_args: tuple, names: list[str]) -> None:
    """Refuse what per-sample compilation cannot do, before anything is compiled."""
    if backend not in BACKENDS:
        raise ValueError(f"per_sample=True is implemented for backend {' or '.join(map(repr, BACKENDS))}, "
                         f"not {backend!r}")
    for name, value in zip(names, example_args):
        if isinstance(value, torch.Tensor) and (value.dim() == 0 or value.shape[0] != 1):
            raise ValueError(f"per_sample=True compiles a model written for one sample: the example's input "
                             f"{name!r} must have a leading batch dim of 1, got shape {list(value.shape)}")


def check_outputs(output_spec: Any) -> None:
    if output_spec is not None:
        raise UnsupportedError("per_sample=True with a model that returns a framework output object "
                               "(its per-sample fields are not joined yet)", None)


def without_batch(declared: dict[str, dict[int, str]]) -> dict[str, dict[int, str]]:
    """The declared symbolic dims less the batch dim: every sub-DNN sees one sample
    (batch 1, compiled static); the batch of samples is the Scan's group dim."""
    kept = {name: {axis: dim for axis, dim in axes.items() if axis != 0} for name, axes in declared.items()}
    return {name: axes for name, axes in kept.items() if axes}


def sample_inputs(inputs: Sequence[Port]) -> tuple[Port, ...]:
    """The manifest's input table with the leading dim of every tensor input the batch of samples."""
    return tuple(dataclasses.replace(port, shape=(GROUP, *port.shape[1:])) if port.kind == "tensor" else port
                 for port in inputs)


def over_group(executable: Callable[..., Any]) -> Callable[..., list[np.ndarray]]:
    """A single-sample executable (numpy in, arrays out) called on a group: once per
    row, outputs stacked (for running the host on the example with eager sub-DNNs);
    without inputs, once (one row, as ``dycl.per_sample.group_onnx.group_model`` gives)."""
    def call(*args: Any) -> list[np.ndarray]:
        rows = [executable(*[arg[row] for arg in args]) for row in range(len(args[0]) if args else 1)]
        return [np.stack([np.asarray(out[position]) for out in rows]) for position in range(len(rows[0]))]

    return call


def join(outputs: list[Any]) -> Any:
    """The batch output of per-sample (torch) outputs, by the rule in the module
    docstring; what the compiled per-sample model returns for the same samples."""
    first = outputs[0]
    if type(first) is tuple and all(type(o) is tuple and len(o) == len(first) for o in outputs):
        return tuple(join([o[i] for o in outputs]) for i in range(len(first)))
    if isinstance(first, dict) and all(isinstance(o, dict) and list(o) == list(first) for o in outputs):
        return {key: join([o[key] for o in outputs]) for key in first}
    if (isinstance(first, torch.Tensor) and first.dim() >= 1 and first.shape[0] == 1
            and all(isinstance(o, torch.Tensor) and o.shape == first.shape and o.dtype == first.dtype
                    for o in outputs)):
        return torch.cat(outputs)
    return list(outputs)


__all__ = ["check_request", "check_outputs", "without_batch", "sample_inputs", "over_group", "join"]
