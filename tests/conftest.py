"""Suite-wide settings: every HCFG pass checks the graph it returns (``DYCL_CHECK``,
``hcfg.passes``), so a pass that breaks an invariant fails the test that ran it
with the node and the invariant named, not as a wrong output further on.
``DYCL_CHECK=0 python -m pytest ...`` turns it off.

``compiled_zoo``: a zoo model compiled once per test process with the default options and
shared by the tests that ask for it. Only for tests that neither change the compiled
object (its host, its call table) nor the model: they get the same objects as other tests."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import pytest

os.environ.setdefault("DYCL_CHECK", "1")


class ZooCompiled(NamedTuple):
    """A zoo model (``models.<name>``), its example and what ``dycl.compile(model, example)`` gave."""

    module: ModuleType
    model: Any
    example: Any
    compiled: Any


@pytest.fixture(scope="session")
def compiled_zoo() -> Callable[[str], ZooCompiled]:
    """``compiled_zoo("models.sdn_vgg19")``: built and compiled on the first call, the same objects after."""
    import dycl

    cache: dict[str, ZooCompiled] = {}

    def get(name: str) -> ZooCompiled:
        if name not in cache:
            module = importlib.import_module(name)
            model, example = module.build()
            cache[name] = ZooCompiled(module, model, example, dycl.compile(model, example))
        return cache[name]

    return get
