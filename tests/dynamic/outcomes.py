"""Comparing a compiled model with eager where some inputs make eager raise.

``assert_same_outcomes`` calls eager and each candidate (the in-process compiled
model, the loaded host) on every input: where eager raises, the candidate must
raise the same exception type (its message may differ); where eager returns, the
candidate must return the same values. A path is eager's executed lines for a
return, or the exception type and message for a raise; the number of distinct
paths is returned so a test can assert that its inputs exercised several.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch

from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match


def _candidate_outcome(candidate: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "value", candidate(*args)
    except Exception as error:  # noqa: BLE001 - the outcome being compared
        return "raise", error


def _raised_at(error: BaseException, files: Iterable[str]) -> tuple[str, int] | None:
    """The last line of the model's own files on ``error``'s traceback."""
    watched, line = set(files), None
    for frame, number in traceback.walk_tb(error.__traceback__):
        if frame.f_code.co_filename in watched:
            line = (frame.f_code.co_filename, number)
    return line


def assert_same_outcomes(model: torch.nn.Module, candidates: dict[str, Callable[..., Any]],
                         inputs: Iterable[tuple[Any, ...]], atol: float = 1e-5) -> int:
    """See the module note; returns the number of distinct eager paths."""
    files = model_source_files(model)
    paths: set[Any] = set()
    for index, args in enumerate(inputs):
        try:
            with torch.no_grad():
                expected, path = record_path(model, *args, files=files)
            kind: tuple[str, Any] = ("value", expected)
        except Exception as error:  # noqa: BLE001 - eager's own refusal is an outcome to reproduce
            kind, path = ("raise", error), (type(error).__name__, _raised_at(error, files))
        paths.add(path)
        for name, candidate in candidates.items():
            got = _candidate_outcome(candidate, args)
            where = f"input #{index} ({[tuple(a.shape) for a in args]}), {name}"
            if kind[0] == "raise":
                assert got[0] == "raise", f"{where}: eager raised {kind[1]!r}, got a value"
                assert type(got[1]) is type(kind[1]), f"{where}: eager raised {kind[1]!r}, got {got[1]!r}"
                continue
            assert got[0] == "value", f"{where}: eager returned, got {got[1]!r}"
            actual = got[1]
            if isinstance(actual, np.ndarray):
                actual = torch.from_numpy(np.ascontiguousarray(actual))
            problem = outputs_match(kind[1], actual, atol)
            assert problem is None, f"{where}: {problem}"
    return len(paths)
