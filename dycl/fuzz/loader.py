"""Write a program's source to a real file and import it (dycl reads classes with ``inspect.getsource``)."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import torch

from dycl.fuzz.program import Program, render_module

_COUNTER = itertools.count()


def write_program(program: Program, directory: Path, stem: str | None = None) -> Path:
    """Write ``program`` as ``directory/<stem>.py`` (default stem: the class name)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem or program.name}.py"
    path.write_text(render_module(program))
    return path


def import_file(path: Path):
    """Import ``path`` as a fresh module (a new module name on every call)."""
    name = f"dycl_fuzz_{path.stem}_{next(_COUNTER)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def forget(module) -> None:
    """Drop a module imported by :func:`import_file` from ``sys.modules``."""
    sys.modules.pop(module.__name__, None)


def build_model(module, program: Program) -> torch.nn.Module:
    """The program's model from its imported ``module``: weights from ``program.seed``, eval mode."""
    torch.manual_seed(program.seed)
    return getattr(module, program.name)().eval()


def make_inputs(program: Program, count: int) -> list[torch.Tensor]:
    """``count`` inputs ``torch.randn(1, width) * scale`` drawn from ``program.seed``."""
    generator = torch.Generator().manual_seed(program.seed)
    return [torch.randn(1, program.width, generator=generator) * program.scale for _ in range(count)]
