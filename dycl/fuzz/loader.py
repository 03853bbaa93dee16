"""Write a program's source to real files and import it (dycl reads classes with ``inspect.getsource``).

A program with library functions gets a second module, written into the interpreter's
``site-packages`` (``sysconfig``'s purelib) so that dycl sees it as installed library
code, exactly as it would see a function of an installed package. That file is the
only thing the fuzzer writes outside its own directories; :func:`forget` deletes it.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import sysconfig
from pathlib import Path

import torch

from dycl.fuzz.program import Program, library_source, render_module

_COUNTER = itertools.count()
_LIBRARY_FILE = "__dycl_fuzz_library_file__"


def library_directory() -> Path:
    """Where library modules of generated programs are written: the installed packages' directory."""
    return Path(sysconfig.get_paths()["purelib"])


def library_module_name(stem: str) -> str:
    """The import name of the library module of the program written as ``stem`` (unique per process)."""
    return f"dycl_fuzzlib_{stem.lower()}_{os.getpid()}"


def write_program(program: Program, directory: Path, stem: str | None = None) -> Path:
    """Write ``program`` as ``directory/<stem>.py`` (default stem: the class name), and its library
    module (if it has one) into :func:`library_directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = stem or program.name
    path = directory / f"{stem}.py"
    library = library_module_name(stem) if program.library else None
    if library:
        (library_directory() / f"{library}.py").write_text(library_source(program))
    path.write_text(render_module(program, library))
    return path


def import_file(path: Path):
    """Import ``path`` as a fresh module (a new module name on every call); the library module
    written with it by :func:`write_program`, if any, is imported first under its own name."""
    library_path = library_directory() / f"{library_module_name(path.stem)}.py"
    library = None
    if library_path.is_file():
        try:
            library = _exec(library_module_name(path.stem), library_path)
        except BaseException:
            library_path.unlink(missing_ok=True)
            raise
    name = f"dycl_fuzz_{path.stem}_{next(_COUNTER)}"
    try:
        module = _exec(name, path)
    except BaseException:
        if library is not None:
            forget(library)
        raise
    if library is not None:
        setattr(module, _LIBRARY_FILE, library)
    return module


def _exec(name: str, path: Path):
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
    """Drop a module imported by :func:`import_file` from ``sys.modules``, with its library module
    (whose file is deleted)."""
    sys.modules.pop(module.__name__, None)
    library = getattr(module, _LIBRARY_FILE, None)
    if library is not None:
        forget(library)
    if module.__name__.startswith("dycl_fuzzlib_") and module.__file__:
        Path(module.__file__).unlink(missing_ok=True)


def build_model(module, program: Program) -> torch.nn.Module:
    """The program's model from its imported ``module``: weights from ``program.seed``, in eval mode
    unless the program is left in train mode."""
    torch.manual_seed(program.seed)
    model = getattr(module, program.name)()
    return model if program.train else model.eval()


def make_inputs(program: Program, count: int) -> list[torch.Tensor]:
    """``count`` inputs ``torch.randn(batch, width) * scale`` drawn from ``program.seed``, the batch
    sizes taken in turn from ``program.batch_sizes``."""
    generator = torch.Generator().manual_seed(program.seed)
    sizes = program.batch_sizes
    return [torch.randn(sizes[i % len(sizes)], program.width, generator=generator) * program.scale
            for i in range(count)]
