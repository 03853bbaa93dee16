"""Every model of the rewriter tests, compiled on each backend, equals eager —
in-process and (ONNX Runtime) through the saved host.py in a torch-free process.

The rewriter tests call ``check(model, inputs, min_paths)``; here ``check``
compiles instead of only rewriting, so the same models, inputs and path
counts are reused.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rewriter"))

import rewrite_checks  # noqa: E402
import test_calls  # noqa: E402
import test_exits  # noqa: E402
import test_golden  # noqa: E402, F401
import test_loops  # noqa: E402
import test_python_values  # noqa: E402
import test_static_lookups  # noqa: E402

MODULES = [test_loops, test_exits, test_static_lookups, test_calls, test_python_values]
CASES = [(module, name) for module in MODULES for name, function in sorted(vars(module).items())
         if name.startswith("test_") and callable(function) and "check(" in inspect.getsource(function)]
ATOL = 1e-4


def compiling_check(backend: str, tmp_path: Path):
    def check(model, inputs, min_paths: int = 2):
        checked = rewrite_checks.check(model, inputs, min_paths=min_paths)
        inputs = list(inputs)
        compiled = dycl.compile(model.eval(), inputs[0], backend=backend)
        paths = assert_equivalent(model, compiled, inputs, min_paths=min_paths, atol=ATOL)
        assert paths >= min_paths
        if backend == "onnxruntime":
            artifact = compiled.save(tmp_path / "artifact")
            report = run_host_without_torch(artifact, model, inputs, ATOL)
            assert report["checked"] == len(inputs) and report["problems"] == [], report
        return checked

    return check


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m.__name__}.{n}" for m, n in CASES])
def test_compiled_model_equals_eager(module, name, backend, monkeypatch, tmp_path):
    monkeypatch.setattr(module, "check", compiling_check(backend, tmp_path))
    getattr(module, name)()


def test_cases_cover_the_rewriter_suite():
    assert len(CASES) >= 45
