"""Classification of programs, the regression files, and the campaign with a broken compiler."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

import dycl
from dycl.fuzz.campaign import run_campaign
from dycl.fuzz.generator import KNOWN_BUGS, generate
from dycl.fuzz.loader import import_file
from dycl.fuzz.runner import INPUT_REASON, check_backend, check_program
from dycl.fuzz.state import ModelState

from .fakes import (
    changes_a_buffer,
    changes_a_buffer_then_refuses,
    crash_at_run,
    crashes,
    freezes_state,
    identity,
    refuses_train_mode,
    switches_to_eval,
    unsupported,
    wrong_on_while,
)
from .find import program_with


def test_ok_with_the_real_compiler(tmp_path: Path):
    program = generate(0, 1, exclude={"item-arith", "list-read", *KNOWN_BUGS})
    checked = check_program(program, tmp_path, ["torch", "onnxruntime"])
    assert [o.status for o in checked.outcomes] == ["ok", "ok"]
    assert checked.paths >= 1 and checked.file.is_file()


@pytest.mark.parametrize(("fake", "status", "phase"), [(unsupported, "unsupported", "compile"),
                                                        (crash_at_run, "error", "run")])
def test_classification(tmp_path: Path, fake, status, phase):
    checked = check_program(generate(0, 2), tmp_path, ["torch"], fake)
    assert checked.status == status and checked.outcomes[0].phase == phase


def test_campaign_with_a_broken_compiler_writes_failing_regressions(tmp_path: Path, monkeypatch):
    lines = []
    # seed 10: with issue 26's patterns drawn, seed 7's first 8 programs have only one while loop left
    summary = run_campaign(8, 10, ["torch"], tmp_path / "out", tmp_path / "regressions", compile_fn=wrong_on_while,
                           max_shrinks=1, echo=lines.append)
    assert summary.failed and summary.inconsistencies >= 2 and summary.errors == 0
    files = sorted((tmp_path / "regressions").glob("test_fuzz_*.py"))
    assert len(files) == 1  # only max_shrinks failures are shrunk and written
    ast.parse(files[0].read_text())
    module = import_file(files[0])
    test = next(getattr(module, name) for name in dir(module) if name.startswith("test_fuzz_"))
    test()  # the real compiler gets it right
    monkeypatch.setattr(dycl, "compile", wrong_on_while)
    with pytest.raises(AssertionError, match="tensors differ"):
        test()
    assert summary.line().startswith(f"fuzz: 8 programs, {summary.inconsistencies} inconsistencies, 0 compile errors")


def test_state_is_carried_between_calls_like_eager(tmp_path: Path):
    program = program_with(["buffer-update"])
    assert check_program(program, tmp_path, ["torch"], identity).status == "ok"
    frozen = check_program(program, tmp_path, ["torch"], freezes_state).outcomes[0]
    assert frozen.status == "inconsistent" and frozen.phase == "run" and frozen.failing[0] > 0, frozen


@pytest.mark.parametrize(("fake", "message"), [
    (changes_a_buffer, "^compiling changed the model: state_dict entry '(count|running)' changed"),
    (changes_a_buffer_then_refuses, r"^compiling \(UnsupportedError\) changed the model: state_dict entry"),
    (switches_to_eval, r"<model>\.training changed from True to False"),
])
def test_a_compiler_that_changes_the_model_is_flagged(tmp_path: Path, fake, message: str):
    features = ["buffer-update", "train-mode"] if fake is switches_to_eval else ["buffer-update"]
    outcome = check_program(program_with(features), tmp_path, ["torch"], fake).outcomes[0]
    assert outcome.status == "inconsistent" and outcome.phase == "compile", outcome
    assert re.search(message, outcome.detail), outcome.detail
    assert outcome.signature() == ("inconsistent", "torch", "changed the model")


def test_a_changed_plain_attribute_is_flagged():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    model.stats = {"calls": 0}
    before = ModelState.of(model)
    model.stats["calls"] += 1
    expected = "attribute <model>.stats changed from {'calls': 0} to {'calls': 1}"
    assert before.difference(ModelState.of(model)) == expected


def test_train_mode_may_be_refused_with_a_value_error(tmp_path: Path):
    trained = check_program(program_with(["train-mode"]), tmp_path, ["torch"], refuses_train_mode).outcomes[0]
    assert trained.status == "unsupported"
    other = check_program(program_with([], without=["train-mode"]), tmp_path, ["torch"], refuses_train_mode)
    assert other.status == "error" and other.outcomes[0].error_type == "ValueError"


def test_a_crash_while_compiling_is_an_error(tmp_path: Path):
    checked = check_program(program_with(["library"]), tmp_path, ["torch"], crashes)
    assert checked.status == "error" and checked.outcomes[0].phase == "compile"
    assert checked.outcomes[0].error_type == "RuntimeError"


class _Gated(torch.nn.Module):
    """Refines its features only where they look uncertain."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.abs().mean() > 0.5:
            h = torch.tanh(self.fc(h))
        return h


def _compiled_static(model, example, backend="torch"):
    return dycl.compile(model, example, backend=backend, dynamic=False)


def test_an_input_refused_by_its_sizes_is_a_refusal_not_a_crash():
    """A model compiled for the example's sizes only refuses another batch by the static dim it names
    (``InputShapeError``): the runner counts a refusal, after comparing the inputs before it."""
    torch.manual_seed(0)
    model = _Gated().eval()
    generator = torch.Generator().manual_seed(5)
    inputs = [torch.randn(2, 4, generator=generator) * scale for scale in (0.1, 0.3, 1.0, 3.0) for _ in range(3)]
    with torch.no_grad():
        expected = [model(x) for x in inputs]
    paths = {bool(model.fc(x).abs().mean() > 0.5) for x in inputs}
    assert len(paths) == 2  # both branches are compared before the refused input
    other = torch.randn(3, 4, generator=generator)
    with torch.no_grad():
        outcome = check_backend(model, inputs + [other], expected + [model(other)], "torch", _compiled_static)
    assert (outcome.status, outcome.phase, outcome.reason) == ("unsupported", "run", INPUT_REASON), outcome
    assert outcome.detail.startswith(f"input #{len(inputs)}: ") and "dimension 0 is static: 2" in outcome.detail
    assert check_backend(model, inputs, expected, "torch", _compiled_static).status == "ok"
    wrong = [e + 1 for e in expected[:2]] + expected[2:]  # a difference before the refusal stays a difference
    assert check_backend(model, inputs + [other], wrong + [model(other)], "torch", _compiled_static).status == (
        "inconsistent")
