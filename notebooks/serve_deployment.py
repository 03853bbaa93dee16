"""A saved per-sample dycl artifact behind Ray Serve: concurrent single-sample
requests are gathered by ``@serve.batch`` into one batch, which the artifact's
torch-free host routes in sub-batches (``per_sample=True``).

Assumes: the artifact was compiled with ``per_sample=True`` and saved; every
request is one sample (each tensor input has a leading dim of 1). This module
and the replicas import only the standard library, numpy, Ray and the
artifact's ``host.py`` (numpy and onnxruntime) — never torch or dycl.

Guarantees: each request gets exactly what the host returns for that sample
alone (the per-sample host gives each sample of a batch what eager gives it
alone, and ``split`` undoes the host's join, below); a batch is at most
``max_batch_size`` requests, formed within ``batch_wait_timeout_s``. A request
whose tensor inputs are not one sample (a leading dim other than 1, or not an
array) is refused on its own before batching, since it would shift every other
sample's position; requests whose arrays differ in shape or dtype, or whose
other arguments differ, run in separate host calls (``signature``), so a bad
request fails alone and samples of different lengths are never concatenated.

The host joins per-sample outputs (its ``_join``): arrays are concatenated
along the leading dim, tuples and dicts joined position by position, and
anything else is a list with one entry per sample; ``split`` takes sample
``i`` back out by the same rule.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from ray import serve


def load_host(artifact: str | os.PathLike) -> Any:
    """The model of a saved artifact, built by its own ``host.py`` (which verifies
    the files against the manifest); the module is not put in ``sys.modules``."""
    spec = importlib.util.spec_from_file_location("dycl_served_host", Path(artifact) / "host.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load(os.fspath(artifact))


def tensor_positions(artifact: str | os.PathLike) -> tuple[int, ...]:
    """Positions of the tensor inputs in the artifact's manifest (a data file); refuses
    an artifact that was not compiled per sample (its host would not route a batch)."""
    manifest = json.loads((Path(artifact) / "manifest.json").read_text())
    if not manifest.get("per_sample"):
        raise ValueError(f"{artifact} was not compiled with per_sample=True: its host takes one sample per call, "
                         "so requests cannot be batched")
    return tuple(position for position, port in enumerate(manifest["inputs"]) if port["kind"] == "tensor")


def check_sample(request: tuple, tensors: Sequence[int]) -> None:
    """Refuse a request whose tensor inputs are not arrays holding one sample."""
    for position in tensors:
        if position >= len(request):
            continue  # an omitted argument: the host applies the default or refuses the call
        value = request[position]
        if not isinstance(value, np.ndarray) or value.ndim == 0 or value.shape[0] != 1:
            shape = list(value.shape) if isinstance(value, np.ndarray) else type(value).__name__
            raise ValueError(f"a request is one sample: tensor input {position} must be an array with a leading "
                             f"dim of 1, got {shape}")


def signature(request: tuple) -> tuple:
    """Requests with equal signatures can share a host call: the same number of
    arguments, arrays of the same trailing shapes and dtypes, other arguments equal
    (and of the same type: ``True`` is not ``1``)."""
    def key(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return ("array", value.shape[1:], value.dtype.str)
        try:
            hash(value)
        except TypeError:
            return ("alone", id(value))  # unhashable: its own call
        return ("value", type(value), value)

    return tuple(key(value) for value in request)


def stack(requests: Sequence[tuple]) -> tuple:
    """The positional arguments of one batch call: each request's tensor inputs
    concatenated along the leading dim; other arguments must agree (taken from the first)."""
    columns = zip(*requests)
    return tuple(np.concatenate(column) if isinstance(column[0], np.ndarray) else column[0] for column in columns)


def split(output: Any, index: int) -> Any:
    """Sample ``index``'s output within the host's joined batch ``output``."""
    if isinstance(output, np.ndarray):
        return output[index:index + 1]
    if isinstance(output, tuple):
        return tuple(split(item, index) for item in output)
    if isinstance(output, dict):
        return {key: split(value, index) for key, value in output.items()}
    if isinstance(output, list):
        return output[index]
    raise TypeError(f"a per-sample host returned {type(output).__name__}; expected arrays, tuples, dicts or lists")


@serve.deployment(max_ongoing_requests=256)
class PerSampleModel:
    """One replica: the host of ``artifact``, called once per group of gathered requests.

    ``await handle.remote(x)`` gives ``x``'s output; ``stats()`` gives the number of
    samples in every host call this replica made and whether torch or dycl was ever
    imported in it."""

    def __init__(self, artifact: str, max_batch_size: int = 32, batch_wait_timeout_s: float = 0.005) -> None:
        self.tensors = tensor_positions(artifact)
        self.model = load_host(artifact)
        self.batch_sizes: list[int] = []
        self.run_batch.set_max_batch_size(max_batch_size)
        self.run_batch.set_batch_wait_timeout_s(batch_wait_timeout_s)

    async def __call__(self, *sample: Any) -> Any:
        check_sample(sample, self.tensors)
        result = await self.run_batch(sample)
        if isinstance(result, Failed):
            raise result.error
        return result

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.005)
    async def run_batch(self, requests: list[tuple]) -> list[Any]:
        groups: dict[tuple, list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault(signature(request), []).append(index)
        results: list[Any] = [None] * len(requests)
        for indices in groups.values():
            self.batch_sizes.append(len(indices))
            try:
                # in a thread, so that the replica keeps gathering the next batch meanwhile
                # (onnxruntime releases the GIL while a sub-DNN runs)
                output = await asyncio.to_thread(self.model, *stack([requests[i] for i in indices]))
            except Exception as error:  # noqa: BLE001 - handed to exactly the requests of this call
                for i in indices:
                    results[i] = Failed(error)
                continue
            for position, i in enumerate(indices):
                results[i] = split(output, position)
        return results

    def stats(self) -> dict[str, Any]:
        imported = sorted(name for name in ("torch", "dycl") if sys.modules.get(name) is not None)
        return {"batch_sizes": list(self.batch_sizes), "imported": imported}


class Failed:
    """A host call's exception, carried to each request of that call (``serve.batch``
    delivers results, not exceptions, per request)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def start(artifact: str | os.PathLike, name: str = "per_sample", max_batch_size: int = 32,
          batch_wait_timeout_s: float = 0.005) -> serve.handle.DeploymentHandle:
    """Deploy ``artifact`` as the Serve application ``name`` (Ray and Serve must be
    started; without HTTP, see ``serve.start``) and return its handle."""
    app = PerSampleModel.bind(os.fspath(Path(artifact).resolve()), max_batch_size, batch_wait_timeout_s)
    return serve.run(app, name=name, route_prefix=None)


__all__ = ["PerSampleModel", "check_sample", "load_host", "signature", "split", "stack", "start",
           "tensor_positions"]
