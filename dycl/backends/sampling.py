"""Refuse random sampling inside an exported sub-DNN.

Eager torch draws a fresh, independent sample per call from its global
generator. The exported graph's sampling ops do not: ONNX Runtime's CPU
``Dropout`` kernel seeds a new engine per call from a per-session counter, and
over 2,000 calls it never dropped element 0 (a branch that depends on it was
taken 10% of the time against eager's 29-53%); ``RandomNormal`` and friends are
no better specified, and TVM imports them from the same ONNX graph. No backend's
sampler is known to be faithful, so a sub-DNN that samples is refused, at the
user's line where the trace shows one, else at the graph's first statement.

The exported graph decides; an eager run finds the user's line:

- ``sampling_nodes`` finds the ONNX ops that draw (``RandomNormal``,
  ``RandomNormalLike``, ``RandomUniform``, ``RandomUniformLike``,
  ``Bernoulli``, ``Multinomial``, and ``Dropout`` with a ``training_mode``
  input that is not a constant false), also inside ``If``/``Loop`` bodies:
  whatever way they reached the graph.
- Where the graph samples, or the export failed, ``SamplingRecorder`` (a
  ``TorchFunctionMode``) runs the sub-DNN once more on its example and records
  every call of a sampling function (``torch.rand*``, ``randn*``,
  ``randint*``, ``randperm``, ``bernoulli``, ``multinomial``, ``normal``,
  ``poisson``, the in-place samplers ``uniform_``/``normal_``/
  ``exponential_``/``cauchy_``/``geometric_``/``log_normal_``/``random_``/
  ``bernoulli_``, and ``F.dropout``/``alpha_dropout``/``rrelu``/
  ``gumbel_softmax`` in training mode) with the innermost frame outside torch,
  mapped back to the user's file:line. A failed export that sampled is
  refused as sampling (``x.uniform_()`` has no ONNX translation).

Assumes: eval-mode modules (``nn.Dropout`` in eval) do not draw, as dycl
compiles inference; the torch backend, which runs the live modules, draws as
eager does and is not checked.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import onnx
import torch
from torch.overrides import TorchFunctionMode

from dycl.rewriter.errors import SourceLocation, UnsupportedError

_SAMPLERS = frozenset({
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "bernoulli", "multinomial",
    "normal", "poisson", "uniform_", "normal_", "exponential_", "cauchy_", "geometric_", "log_normal_", "random_",
    "bernoulli_", "native_dropout", "binomial", "_standard_gamma", "_sample_dirichlet",
})
#: samplers only when their ``training`` argument is true (position of it, default)
_TRAINING_SAMPLERS = {"dropout": (2, True), "alpha_dropout": (2, False), "feature_alpha_dropout": (2, False),
                      "dropout1d": (2, True), "dropout2d": (2, True), "dropout3d": (2, True),
                      "rrelu": (3, False), "gumbel_softmax": (-1, None)}
_RANDOM_OPS = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli",
                         "Multinomial"})
_TORCH_DIR = os.path.dirname(torch.__file__)
_BACKENDS_DIR = os.path.dirname(__file__)  # the exporter's own modes
_HINT = ("the compiled graph's sampling ops do not draw like torch (no backend's sampler is known to be faithful); "
         "draw the noise outside the model and pass it in as an input, or use eval-mode modules (nn.Dropout in "
         "eval draws nothing)")


@dataclass(frozen=True)
class Draw:
    """One sampling call seen while tracing: the function and the innermost frame outside torch."""

    name: str
    filename: str
    line: int


def _draws(func: object, args: tuple, kwargs: dict) -> bool:
    name = getattr(func, "__name__", "")
    if name in _SAMPLERS:
        return True
    if name not in _TRAINING_SAMPLERS:
        return False
    position, default = _TRAINING_SAMPLERS[name]
    if default is None:
        return True
    training = kwargs.get("training", kwargs.get("train", args[position] if len(args) > position else default))
    return bool(training)


class SamplingRecorder(TorchFunctionMode):
    """Records the sampling calls made while it is active (``draws``), and changes nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.draws: list[Draw] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _draws(func, args, kwargs):
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith((_TORCH_DIR, _BACKENDS_DIR)):
                frame = frame.f_back
            if frame is not None:
                self.draws.append(Draw(getattr(func, "__name__", "?"), frame.f_code.co_filename, frame.f_lineno))
        return func(*args, **kwargs)


def _constant_false(graph: onnx.GraphProto, name: str) -> bool:
    for node in graph.node:
        if node.op_type == "Constant" and name in node.output:
            value = onnx.numpy_helper.to_array(node.attribute[0].t)
            return value.size == 1 and not bool(value.reshape(-1)[0])
    for initializer in graph.initializer:
        if initializer.name == name:
            value = onnx.numpy_helper.to_array(initializer)
            return value.size == 1 and not bool(value.reshape(-1)[0])
    return False


def sampling_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The nodes of ``graph`` (and of its subgraphs) that draw random numbers."""
    for node in graph.node:
        if node.op_type in _RANDOM_OPS:
            yield node
        elif node.op_type == "Dropout" and len(node.input) > 2 and node.input[2] and not _constant_false(
                graph, node.input[2]):
            yield node
        for attribute in node.attribute:
            for subgraph in (*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs):
                yield from sampling_nodes(subgraph)


def refuse_sampling(graph: onnx.GraphProto | None, module, variant) -> None:
    """Raise ``UnsupportedError`` when the exported sub-DNN ``module`` samples: its
    ``graph`` has a sampling node, or (``graph`` None: the export failed) running it
    on the variant's example calls a sampler."""
    nodes = list(sampling_nodes(graph)) if graph is not None else []
    if graph is not None and not nodes:
        return
    recorder = SamplingRecorder()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]), recorder:  # the user's RNG stream is kept
            module(*[t.clone() if isinstance(t, torch.Tensor) else t for t in variant.examples[0]])
    except Exception:  # noqa: BLE001 - only looking for the line; the export's own error follows
        pass
    if recorder.draws:
        draw = recorder.draws[0]
        where = SourceLocation(draw.filename, draw.line)
        if draw.filename == module.filename:
            where = module.location_of(module.statement_at(draw.line)) or where
        raise UnsupportedError(f"random sampling ({draw.name}) in compiled code", where, _HINT)
    if nodes:
        first = module.variant.sub.statements[0]
        raise UnsupportedError(f"random sampling (ONNX {nodes[0].op_type}) in the graph that starts with this "
                               "statement", module.location_of(first), _HINT)
__all__ = ["Draw", "SamplingRecorder", "refuse_sampling", "sampling_nodes"]
