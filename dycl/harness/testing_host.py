"""Run a saved artifact's ``host.py`` in a fresh Python process where importing
torch or dycl is impossible, and compare its outputs with expected ones."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import torch

from dycl.model.example_copy import copy_tensors
from dycl.model.records import host_form, is_record
from dycl.rewriter.arguments import positional_arguments

_SCRIPT = r'''
import importlib.util, json, pickle, sys
sys.modules["torch"] = None   # any import of torch or dycl now fails
sys.modules["dycl"] = None
import numpy as np

artifact, data = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("host", artifact + "/host.py")
host = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host)
model = host.load(artifact)
cases, atol = pickle.load(open(data, "rb"))

def differ(expected, actual):
    if isinstance(expected, np.ndarray):
        if not isinstance(actual, np.ndarray) or expected.shape != actual.shape or expected.dtype != actual.dtype:
            return f"expected array {expected.shape} {expected.dtype}, got {type(actual).__name__} " \
                   f"{getattr(actual, 'shape', '')} {getattr(actual, 'dtype', '')}"
        if expected.dtype.kind in "fc" and not np.allclose(expected, actual, atol=atol, rtol=0, equal_nan=True):
            return f"max abs diff {np.abs(expected - actual).max()}"
        if expected.dtype.kind not in "fc" and not np.array_equal(expected, actual):
            return "arrays differ"
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or list(expected) != list(actual):
            return f"expected dict with keys {list(expected)}, got {actual!r:.60}"
        for key in expected:
            problem = differ(expected[key], actual[key])
            if problem:
                return f"[{key!r}]: {problem}"
        return None
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, type(expected)) or len(expected) != len(actual):
            return f"expected {type(expected).__name__} of {len(expected)}, got {actual!r:.60}"
        for e, a in zip(expected, actual):
            problem = differ(e, a)
            if problem:
                return problem
        return None
    if type(expected) is not type(actual):
        return f"expected {expected!r}, got {actual!r}"
    if isinstance(expected, float) and abs(expected - actual) <= atol:
        return None
    return None if expected == actual else f"expected {expected!r}, got {actual!r}"

problems = []
for i, (args, kwargs, expected, arguments_after) in enumerate(cases):
    problem = differ(expected, model(*args, **kwargs))
    if problem:
        problems.append(f"input {i}: {problem}")
    problem = differ(arguments_after, (args, kwargs))  # an input forward() updates in place is updated
    if problem:
        problems.append(f"input {i}: the arguments after the call: {problem}")
torch_loaded = sys.modules.get("torch") is not None
print(json.dumps({"checked": len(cases), "problems": problems, "torch_loaded": torch_loaded}))
'''


class Call(NamedTuple):
    """An input given with keyword arguments: ``model(*args, **kwargs)``."""

    args: tuple
    kwargs: dict[str, Any]


def to_numpy(value: Any) -> Any:
    """``value`` as the torch-free host takes or returns it (a dict-like output, such
    as a ``ModelOutput``, as a plain dict)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy().copy()  # not a view: a model that changes its input in place
    if is_record(value):  # a KV cache: its plain form (dycl.model.records)
        return to_numpy(host_form(value))
    if isinstance(value, dict):
        return {k: to_numpy(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(to_numpy(v) for v in value)
    if isinstance(value, list):
        return [to_numpy(v) for v in value]
    return value


def run_host_without_torch(artifact: Path, model: torch.nn.Module, inputs: list[Any], atol: float,
                           env: dict[str, str] | None = None) -> dict:
    """Run ``artifact``'s host on ``inputs`` in a torch-free process (with ``env`` added
    to its environment); return ``{"checked": n, "problems": [...]}`` comparing with
    ``model``'s eager outputs, and the arguments after each call with eager's (an input
    that forward() updates in place). Eager runs on copies: ``inputs`` stay as they are."""
    cases = []
    with torch.no_grad():
        for item in inputs:
            args, kwargs = (item.args, item.kwargs) if isinstance(item, Call) else (
                positional_arguments(item), {})
            given = (tuple(to_numpy(a) for a in args), {k: to_numpy(v) for k, v in kwargs.items()})
            args, kwargs = copy_tensors((args, kwargs))  # eager may update them in place: the caller's stay
            expected = to_numpy(model(*args, **kwargs))
            cases.append((*given, expected, (tuple(to_numpy(a) for a in args),
                                             {k: to_numpy(v) for k, v in kwargs.items()})))
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "cases.pkl"
        data.write_bytes(pickle.dumps((cases, atol)))
        script = Path(scratch) / "run_host.py"
        script.write_text(_SCRIPT)
        completed = subprocess.run([sys.executable, str(script), str(artifact), str(data)], capture_output=True,
                                   text=True, timeout=600, env={**os.environ, **(env or {})})
    if completed.returncode != 0:
        raise AssertionError(f"host process failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


__all__ = ["Call", "run_host_without_torch", "to_numpy"]
