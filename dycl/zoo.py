"""Resolve a MODEL argument: a zoo module (``models.skipnet_rnn``) or ``pkg.mod:factory``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dycl.harness import default_postprocess
from dycl.model.validate import validate


@dataclass
class ModelSpec:
    name: str
    model: torch.nn.Module
    example: Any
    sample: Callable[[int], Any]
    postprocess: Callable[[Any], Any]


def resolve(spec: str) -> ModelSpec:
    """``models.x`` must define ``build()``, ``sample(seed)`` and ``postprocess``;
    ``pkg.mod:factory`` (or ``path/to/file.py:factory``) names a function returning
    ``(model, example_input)`` (inputs are then random tensors shaped like the example)."""
    module_name, _, factory_name = spec.partition(":")
    module = _import(module_name)
    factory = getattr(module, factory_name or "build", None)
    if not callable(factory):
        raise ValueError(f"{module_name!r} has no function {factory_name or 'build'!r} returning (model, example)")
    produced = factory()
    if not (isinstance(produced, tuple) and len(produced) == 2):
        raise ValueError(f"{module_name}.{factory_name or 'build'}() must return (model, example_input), got "
                         f"{type(produced).__name__}")
    model, example = produced
    validate(model, example)
    sample = getattr(module, "sample", None) if not factory_name else None
    postprocess = getattr(module, "postprocess", None) if not factory_name else None
    return ModelSpec(spec, model.eval(), example, sample or _like(example), postprocess or default_postprocess)


def _import(module_name: str) -> Any:
    """The module named ``module_name``, or the file it names (``nets/mine.py``)."""
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise ValueError(f"no such file: {module_name}")
        loaded = importlib.util.spec_from_file_location(f"dycl_user_{path.stem}", path)
        module = importlib.util.module_from_spec(loaded)
        sys.modules[loaded.name] = module  # dataclasses and pickling look their module up there
        loaded.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r}: {exc}{zoo_hint(exc)}") from None


def zoo_hint(exc: ImportError) -> str:
    """What to do when the zoo (``models``, not installed with dycl) cannot be imported; "" otherwise."""
    if getattr(exc, "name", None) != "models":
        return ""
    checkout = Path(__file__).resolve().parent.parent
    where = f" ({checkout})" if (checkout / "models" / "__init__.py").is_file() else ""
    return (f"; the zoo lives in the models/ folder of dycl's checkout{where} and is not installed: run from the "
            "checkout, or pass a file path such as path/to/net.py:build")


def _like(example: Any) -> Callable[[int], Any]:
    def sample(seed: int) -> Any:
        generator = torch.Generator().manual_seed(seed)

        def one(t: Any) -> Any:
            if not isinstance(t, torch.Tensor):
                return t
            if t.is_floating_point():
                return torch.randn(t.shape, generator=generator, dtype=t.dtype)
            high = int(t.max().item()) + 1 if t.numel() else 2
            return torch.randint(0, max(high, 2), t.shape, generator=generator, dtype=t.dtype)

        return tuple(one(t) for t in example) if isinstance(example, tuple) else one(example)

    return sample
