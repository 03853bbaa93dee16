"""Eager checks of the model zoo: determinism, interface, and path diversity."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest
import torch

from dycl.harness.paths import count_paths
from models import GENERATORS, ZOO

SEEDS = range(100)
MIN_PATHS = 3
MIN_LENGTHS = 3


@pytest.fixture(autouse=True, scope="module")
def single_thread() -> Any:
    """Run the zoo on one intra-op thread. The models are tiny and batch-1, so a second
    thread only adds synchronisation; on a loaded 2-core machine the spinning OpenMP
    workers made every forward up to 8x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


_built: dict[str, tuple[ModuleType, torch.nn.Module, Any]] = {}


def built(name: str) -> tuple[ModuleType, torch.nn.Module, Any]:
    """``(module, model, example_input)``, built once per test session."""
    if name not in _built:
        module = importlib.import_module(name)
        model, example = module.build()
        _built[name] = (module, model, example)
    return _built[name]


def call(model: torch.nn.Module, inputs: Any) -> Any:
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    with torch.no_grad():
        return model(*args)


def assert_same(a: Any, b: Any) -> None:
    """Exact structural and numerical equality of two model outputs."""
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:
        assert a == b


def assert_plain(output: Any) -> None:
    """Outputs are tensors, Python ints, or tuples of those."""
    if isinstance(output, tuple):
        for item in output:
            assert_plain(item)
    else:
        assert isinstance(output, torch.Tensor | int), type(output)


def test_zoo_lists_every_module() -> None:
    assert len(set(ZOO)) == len(ZOO)
    assert set(GENERATORS) <= set(ZOO)


@pytest.mark.parametrize("name", ZOO)
def test_interface(name: str) -> None:
    module, model, example = built(name)
    assert module.__doc__ and len(module.__doc__) > 200
    assert not model.training
    assert all(not m.training for m in model.modules())
    first = module.sample(0)
    assert_same(first, module.sample(0))
    assert not torch.equal(first, module.sample(1))
    assert type(first) is type(example)
    if isinstance(example, torch.Tensor):
        assert first.shape == example.shape and first.dtype == example.dtype
    assert_plain(call(model, example))


@pytest.mark.parametrize("name", ZOO)
def test_build_is_deterministic(name: str) -> None:
    module, model, example = built(name)
    again, example_again = module.build()
    assert_same(example, example_again)
    for inputs in (example, module.sample(1), module.sample(2)):
        assert_same(call(model, inputs), call(again, inputs))
    for (key, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), key


@pytest.mark.parametrize("name", ZOO)
def test_paths_and_outputs(name: str) -> None:
    module, model, _ = built(name)
    inputs = [module.sample(seed) for seed in SEEDS]
    results = [module.postprocess(call(model, x)) for x in inputs]
    if name in GENERATORS:
        for result in results:
            assert isinstance(result, tuple) and all(type(v) is int for v in result)
        lengths = {len(r) for r in results}
        print(f"{name}: {len(lengths)} distinct output lengths {sorted(lengths)}")
        assert len(lengths) >= MIN_LENGTHS
    else:
        assert all(type(r) is int for r in results)
    paths = count_paths(model, inputs)
    print(f"{name}: {paths} distinct paths over {len(inputs)} samples")
    assert paths >= MIN_PATHS
