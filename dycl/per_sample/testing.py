"""Checks that a per-sample compiled model (``per_sample=True``) gives every sample
of a batch what eager PyTorch gives that sample alone.

The reference is eager run one sample at a time, its outputs joined by
``dycl.per_sample.join`` (torch code of its own, not the host's ``_join``).
Samples are single-sample inputs (a tensor or a tuple of tensors, each with a
leading dim of 1); a batch is their concatenation along that dim.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch
from dycl.per_sample.semantics import join


def _args(sample: Any) -> tuple:
    return sample if isinstance(sample, tuple) else (sample,)


def batch_of(samples: Sequence[Any]) -> tuple:
    """The positional arguments of one call with ``samples`` stacked along the leading dim."""
    columns = zip(*[_args(sample) for sample in samples])
    return tuple(torch.cat(column) if isinstance(column[0], torch.Tensor) else column[0] for column in columns)


def paths_of(model: torch.nn.Module, samples: Sequence[Any]) -> list[Any]:
    """The eager execution path of every sample (``dycl.harness.paths``)."""
    files = model_source_files(model)
    with torch.no_grad():
        return [record_path(model, *_args(sample), files=files)[1] for sample in samples]


class PerSampleEager(torch.nn.Module):
    """``model`` called one sample at a time on a batch, outputs joined: what a
    per-sample compiled model must return (also a reference for the torch-free host)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *batch: Any) -> Any:
        count = next(arg.shape[0] for arg in batch if isinstance(arg, torch.Tensor))
        with torch.no_grad():
            outputs = [self.model(*[arg[i:i + 1] if isinstance(arg, torch.Tensor) else arg for arg in batch])
                       for i in range(count)]
        return join(outputs)


def assert_per_sample(model: torch.nn.Module, compiled: Callable[..., Any], samples: Sequence[Any],
                      min_paths: int = 1, atol: float = 0.0, paths: Sequence[Any] | None = None) -> int:
    """Assert ``compiled(batch)`` equals per-sample eager on ``samples`` batched, and that the
    samples take at least ``min_paths`` distinct eager paths (``paths``: theirs, if known);
    returns that count."""
    count = len(set(paths_of(model, samples) if paths is None else paths))
    assert count >= min_paths, f"the batch takes {count} distinct path(s); need {min_paths}"
    batch = batch_of(samples)
    problem = outputs_match(PerSampleEager(model)(*batch), compiled(*batch), atol)
    assert problem is None, f"batch of {len(samples)}: {problem}"
    return count


def diverse(paths: Sequence[Any], size: int) -> list[int]:
    """``size`` indices into ``paths``: the first sample of each path first (as many
    paths as there are), then the others in order."""
    firsts = [i for i, path in enumerate(paths) if path not in paths[:i]][:size]
    return firsts + [i for i in range(len(paths)) if i not in firsts][:size - len(firsts)]


def one_path(paths: Sequence[Any], size: int) -> list[int]:
    """``size`` indices into ``paths`` that all have the most common path (repeated when fewer)."""
    common = max(set(paths), key=list(paths).count)
    same = [i for i, path in enumerate(paths) if path == common]
    return [same[i % len(same)] for i in range(size)]


def saved_host_report(artifact: Any, model: torch.nn.Module, samples: Sequence[Any], alone: Any,
                      atol: float = 0.0) -> dict:
    """The torch-free saved host's report (``dycl.harness.testing_host``) on two calls: a batch of 16
    of ``samples`` over as many paths as they take (``diverse``), and ``alone`` by itself."""
    paths = paths_of(model, samples)
    batches = [batch_of([samples[i] for i in diverse(paths, 16)])[0], alone]
    return run_host_without_torch(artifact, PerSampleEager(model), batches, atol=atol)


__all__ = ["PerSampleEager", "assert_per_sample", "batch_of", "diverse", "one_path", "paths_of",
           "saved_host_report"]
