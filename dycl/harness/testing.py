"""Checks that a rewritten or compiled model behaves like the original."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from dycl.harness.paths import model_source_files, record_path
from dycl.model.example_copy import copy_tensors
from dycl.model.records import fields_of, is_record
from dycl.rewriter.arguments import positional_arguments


def outputs_match(expected: Any, actual: Any, atol: float = 0.0, rtol: float = 0.0) -> str | None:
    """None if ``actual`` equals ``expected`` (tensors and floats within ``atol`` plus ``rtol`` times
    the expected magnitude, NaN equal to NaN where a tolerance is given; same structure, shapes and
    dtypes), else a description of the first difference."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"expected a tensor, got {type(actual).__name__}"
        if expected.shape != actual.shape or expected.dtype != actual.dtype:
            return f"expected {tuple(expected.shape)} {expected.dtype}, got {tuple(actual.shape)} {actual.dtype}"
        if atol == 0.0 and rtol == 0.0:
            same = torch.equal(expected, actual)
        else:
            same = torch.allclose(expected, actual, atol=atol, rtol=rtol, equal_nan=True)
        if same:
            return None
        return f"tensors differ (max abs diff {(expected.double() - actual.double()).abs().max().item():.3g})"
    if isinstance(expected, (tuple, list)):
        if type(expected) is not type(actual) or len(expected) != len(actual):
            return f"expected {type(expected).__name__} of {len(expected)}, got {actual!r:.80}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            problem = outputs_match(e, a, atol, rtol)
            if problem:
                return f"[{i}]: {problem}"
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or expected.keys() != actual.keys():
            return f"expected dict with keys {sorted(expected)}, got {actual!r:.80}"
        for key in expected:
            problem = outputs_match(expected[key], actual[key], atol, rtol)
            if problem:
                return f"[{key!r}]: {problem}"
        return None
    if type(expected) is not type(actual):
        return f"expected {expected!r}, got {actual!r}"
    if is_record(expected):  # a KV cache: compared by its fields (dycl.model.records)
        fields = {name: getattr(expected, name) for name in fields_of(expected)}
        return outputs_match(fields, {name: getattr(actual, name, None) for name in fields}, atol, rtol)
    if isinstance(expected, float) and (atol > 0.0 or rtol > 0.0):
        both_nan = math.isnan(expected) and math.isnan(actual)
        close = abs(expected - actual) <= atol + rtol * abs(expected) or expected == actual or both_nan
        return None if close else f"expected {expected!r}, got {actual!r}"
    if expected != actual:
        return f"expected {expected!r}, got {actual!r}"
    return None


def assert_equivalent(model: torch.nn.Module, candidate: Callable[..., Any], inputs: Iterable[Any],
                      min_paths: int = 2, atol: float = 0.0) -> int:
    """Run ``model`` and ``candidate`` on every input (a tensor, or a tuple of
    positional arguments); assert equal outputs and at least ``min_paths``
    distinct eager execution paths. Returns the number of distinct paths."""
    files = model_source_files(model)
    paths = set()
    count = 0
    for i, item in enumerate(inputs):
        args = positional_arguments(item)
        with torch.no_grad():  # each on its own copy: forward may update its inputs (a KV cache) in place
            expected, path = record_path(model, *copy_tensors(args), files=files)
            actual = candidate(*copy_tensors(args))
        paths.add(path)
        problem = outputs_match(expected, actual, atol)
        assert problem is None, f"input #{i}: {problem}"
        count += 1
    assert len(paths) >= min_paths, f"only {len(paths)} distinct path(s) over {count} inputs; need {min_paths}"
    return len(paths)
