"""ruff covers every line that ends up in ``host.py``: each part of a generated host is
either a copy of a real module that ruff checks (the host runtime, the router, the manifest,
the artifact checks, port structures, each backend's runtime) or the emitted ``Model`` with
its one method and the emitter's tables; no module holds host code in a string literal;
and the generated host itself passes ruff with the project's config, less the rules that
concatenating modules into one file breaks by construction."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from dycl.hostgen.copies import copied
from torch import nn

import dycl

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).with_name("ruff")
#: every module a host holds a copy of
COPIED = [ROOT / "hostgen" / name for name in
          ("manifest.py", "artifact_check.py", "host_runtime.py", "host_loader.py", "host_router.py",
           "host_groups.py", "port_trees.py")] + [
    ROOT / "dycl" / "backends" / "ort_runtime.py", ROOT / "dycl" / "backends" / "torch_runtime.py",
    ROOT / "dycl" / "backends" / "tvm" / "runtime.py"]
#: what one file made of several modules breaks by construction: imports after code (each copy
#: keeps its own), the same module imported by two copies, import blocks per copy, table lines
CONCATENATION = "E402,F811,I001,E501"


def _ruff(*arguments: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), "check", "--no-cache", "--config", str(ROOT / "ruff.toml"), *map(str, arguments)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_every_copied_module_is_a_real_file_that_ruff_checks():
    listed = _ruff("--show-files", ROOT).stdout
    for path in COPIED:
        assert str(path) in listed, f"{path} is outside ruff's include"
    checked = _ruff(*COPIED)
    assert checked.returncode == 0, checked.stdout


_OPENS_DEFINITION = re.compile(r"^\s*(?:def|class)\s+\w+\s*[(:]", re.MULTILINE)


def _strings_holding_code(path: Path) -> list[int]:
    """Lines of string literals in ``path`` (docstrings aside) that define a function or class:
    parsed as Python, or, for a template that does not parse (``{{`` of ``str.format``), by a
    line that opens a ``def`` or ``class``. Parts of f-strings are code generated per model
    (the emitted ``Model``, a dataclass's stand-in), not fixed runtime, and are not counted."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    generated = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                and id(node) not in generated):
            try:
                parsed = ast.parse(node.value)
            except SyntaxError:
                if _OPENS_DEFINITION.search(node.value):
                    found.append(node.lineno)
                continue
            if any(isinstance(inner, ast.FunctionDef | ast.ClassDef) for inner in ast.walk(parsed)):
                found.append(node.lineno)
    return found


def test_no_host_code_lives_in_a_string_literal(tmp_path):
    modules = sorted((ROOT / "hostgen").glob("*.py")) + sorted((ROOT / "dycl" / "backends").rglob("*.py"))
    holding = {str(path.relative_to(ROOT)): lines for path in modules if (lines := _strings_holding_code(path))}
    assert holding == {}
    probe = tmp_path / "probe.py"  # the check finds such a literal
    probe.write_text('"""Docs."""\n\nNOTE = "if x: pass"\nHOST = \'\'\'\ndef run():\n    pass\n\'\'\'\n'
                     'TEMPLATE = \'\'\'\nclass Model:\n    state = {{}}\n    {forward}\n\'\'\'\n')
    assert _strings_holding_code(probe) == [4, 8]


class TwoExits(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)
        self.c = nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.a(x))
        if h.mean() > 0.2:
            return self.b(h)
        return self.c(h * 2)


@pytest.mark.parametrize("per_sample", [False, True])
def test_the_generated_host_is_copies_the_model_class_and_tables_and_passes_ruff(per_sample, tmp_path):
    torch.manual_seed(0)
    model = TwoExits().eval()
    compiled = dycl.compile(model, torch.randn(1, 4), per_sample=per_sample)
    generator = torch.Generator().manual_seed(2)
    inputs = [torch.randn(1, 4, generator=generator) * s for s in (0.2, 3.0) for _ in range(6)]
    with torch.no_grad():
        assert len({bool(torch.relu(model.a(x)).mean() > 0.2) for x in inputs}) == 2  # both exits
        for x in inputs:
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=0)
    source = compiled.host_source
    defined = set()
    for path in COPIED:
        defined |= {node.name for node in ast.parse(copied(path)).body
                    if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    tree = ast.parse(source)
    generated = [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)
                 and node.name not in defined]
    assert [node.name for node in generated] == ["Model"]
    (method,) = [node.name for node in generated[0].body if isinstance(node, ast.FunctionDef)]
    assert method == ("_sample" if per_sample else "_forward")
    host = tmp_path / "host.py"
    host.write_text(source)
    checked = _ruff("--extend-ignore", CONCATENATION, host)
    assert checked.returncode == 0, checked.stdout
