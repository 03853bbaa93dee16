"""The fresh patterns (``dycl.fuzz.patterns_fresh``): constructs dycl learned after issue 27, in the
grammar, each generated and taking several paths; and what their campaigns found, shrunk into
models (``fresh_models``) compiled in process and through the torch-free host, or refused by name."""

from __future__ import annotations

import copy
import inspect
from collections import Counter
from pathlib import Path

import pytest
import torch

import dycl
from dycl.fuzz.features import FRESH, KNOWN_BUGS, program_features
from dycl.fuzz.generator import generate
from dycl.fuzz.patterns_fresh import FreshPatterns
from dycl.fuzz.program import render_module
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import assert_equivalent, outputs_match
from dycl.harness.testing_host import run_host_without_torch

from . import fresh_models
from .find import draws_none, most_eager_paths

PROGRAMS = [generate(5, i) for i in range(200)]
ATOL = 1e-5


def test_without_them_the_programs_are_those_of_before():
    """A fifth random stream: a program that draws none of the fresh patterns, or is generated with
    them excluded, is the program the generator gave before they existed."""
    same = 0
    for index, program in enumerate(PROGRAMS[:60]):
        if draws_none(FreshPatterns, "fresh", index):
            assert render_module(program) == render_module(generate(5, index, exclude=frozenset(FRESH)))
            same += 1
    assert 10 <= same < 60
    assert set(FRESH) <= set(KNOWN_BUGS)


def test_every_fresh_pattern_is_generated():
    used = Counter(feature for program in PROGRAMS for feature in program_features(program))
    assert set(FRESH) == {"tensor-and-or", "decorated-forward", "state-hooks", "trace-read", "argmax-block",
                          "host-int-conditional", "input-mutation-read", "module-container-loop"}
    shares = {name: used[name] / len(PROGRAMS) for name in FRESH}
    assert all(0.03 <= share <= 0.4 for share in shares.values()), shares


def test_every_fresh_pattern_runs_eagerly_on_several_paths(tmp_path: Path):
    """For each pattern, the first programs using it run eagerly (none is discarded), and one of
    them takes at least 2 paths (so a compiler that freezes the example's path is caught)."""
    most = most_eager_paths(PROGRAMS, FRESH, tmp_path)
    assert all(paths >= 2 for paths in most.values()), most


def _inputs(count: int, width: int = 4) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(2, width, generator=generator) * scale for scale in (0.3, 3.0) for _ in range(count // 2)]


def _compiled_and_host(model: torch.nn.Module, inputs: list[torch.Tensor], tmp_path: Path, min_paths: int) -> int:
    compiled = dycl.compile(model, inputs[0])
    paths = assert_equivalent(model, compiled, inputs, min_paths=min_paths, atol=ATOL)
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
    return paths


def test_a_callees_fresh_names_never_shadow_its_globals(tmp_path: Path):
    """Before: ``UnboundLocalError: score`` — the lowered ``max(key=score)`` of a callee (forward
    behind a model hook, a helper method) bound ``score = score(t)`` (``rewriter.callees``)."""
    torch.manual_seed(0)
    model = fresh_models.KeyedByGlobal().eval()
    assert _compiled_and_host(model, _inputs(16), tmp_path, min_paths=2) == 2


def test_an_argument_updated_under_another_name_is_refused_at_the_update():
    """Before: a silent difference — the caller's tensor kept its value when the update ran in
    ONNX Runtime (``hcfg.aliasing.check_argument_aliasing``)."""
    model = fresh_models.AliasedArgument().eval()
    for example in (torch.ones(2, 4), -torch.ones(2, 4)):  # whichever branch the example takes
        with pytest.raises(dycl.UnsupportedError, match="the caller's argument `x` also refers to") as info:
            dycl.compile(model, example)
        lines, first = inspect.getsourcelines(fresh_models.AliasedArgument.forward)
        assert info.value.location.line == first + next(i for i, text in enumerate(lines) if "MARK" in text)


def test_an_argument_updated_under_its_own_name_is_written_back_on_every_path():
    """The form the refusal's hint proposes compiles: outputs and the caller's tensor after the call
    agree with eager on both branches."""
    model = fresh_models.UpdatedArgument().eval()
    inputs = _inputs(12)
    compiled = dycl.compile(model, inputs[0].clone())
    files, paths = model_source_files(model), set()
    for i, x in enumerate(inputs):
        eager_x, compiled_x = x.clone(), x.clone()
        with torch.no_grad():
            expected, path = record_path(model, eager_x, files=files)
            actual = compiled(compiled_x)
        paths.add(path)
        assert outputs_match(expected, actual, ATOL) is None, i
        assert outputs_match(eager_x, compiled_x, ATOL) is None, f"input #{i}: the argument after the call"
    assert len(paths) == 2


def test_a_class_based_decorator_of_forward_is_compiled_with_its_call(tmp_path: Path):
    """Before: ``TypeError: forward is rescaled, not a Python function``. Its ``__call__`` decides
    on data too: 2 x 2 outcomes."""
    torch.manual_seed(0)
    model = fresh_models.ClassDecoratedForward().eval()
    assert _compiled_and_host(model, _inputs(16), tmp_path, min_paths=3) >= 3


def test_a_forward_swapped_to_a_class_decorated_method_is_compiled_with_its_call(tmp_path: Path):
    torch.manual_seed(0)
    model = fresh_models.SwappedToClassDecorated().eval()
    assert _compiled_and_host(model, _inputs(16), tmp_path, min_paths=3) >= 3


def test_a_class_decorator_whose_get_does_not_bind_its_call_is_refused():
    """``__get__`` returning the wrapped function bound to the module: eager never runs ``__call__``,
    so compiling a call of the decorator object would double the output. Refused by name."""
    with pytest.raises(dycl.UnsupportedError, match=r"a bypassing object that looking it up on the module"):
        dycl.compile(fresh_models.BypassedDecorator().eval(), torch.randn(2, 4))


def test_a_class_decorated_forward_behind_a_state_writing_hook_and_in_a_submodule(tmp_path: Path):
    """The hook's counter, which forward reads, is threaded through every call; eager and the
    compiled model (in process and the torch-free host) start from the same state."""
    torch.manual_seed(0)
    original = fresh_models.HookedClassDecorated().eval()
    model, eager = copy.deepcopy(original), copy.deepcopy(original)
    inputs = _inputs(16)
    compiled = dycl.compile(model, inputs[0])
    files, paths = model_source_files(eager), set()
    for i, x in enumerate(inputs):
        with torch.no_grad():
            expected, path = record_path(eager, x.clone(), files=files)
            actual = compiled(x.clone())
        paths.add(path)
        assert outputs_match(expected, actual, ATOL) is None, i
    assert model.hits == eager.hits > 0 and len(paths) >= 3
    report = run_host_without_torch(compiled.save(tmp_path / "net"), copy.deepcopy(original), inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
