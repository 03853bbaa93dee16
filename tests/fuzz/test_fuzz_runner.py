"""Classification of programs, the regression files, and the campaign with a broken compiler."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dycl
from dycl.fuzz.campaign import run_campaign
from dycl.fuzz.generator import generate
from dycl.fuzz.loader import import_file
from dycl.fuzz.runner import check_program

from .fakes import crash_at_run, unsupported, wrong_on_while


def test_ok_with_the_real_compiler(tmp_path: Path):
    checked = check_program(generate(0, 1, exclude={"item-arith", "list-read"}), tmp_path, ["torch", "onnxruntime"])
    assert [o.status for o in checked.outcomes] == ["ok", "ok"]
    assert checked.paths >= 1 and checked.file.is_file()


@pytest.mark.parametrize(("fake", "status", "phase"), [(unsupported, "unsupported", "compile"),
                                                        (crash_at_run, "error", "run")])
def test_classification(tmp_path: Path, fake, status, phase):
    checked = check_program(generate(0, 2), tmp_path, ["torch"], fake)
    assert checked.status == status and checked.outcomes[0].phase == phase


def test_campaign_with_a_broken_compiler_writes_failing_regressions(tmp_path: Path, monkeypatch):
    lines = []
    summary = run_campaign(8, 5, ["torch"], tmp_path / "out", tmp_path / "regressions", compile_fn=wrong_on_while,
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
