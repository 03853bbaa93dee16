"""Library code that decides on a symbolic size in Python (``is_causal = q_len > 1``,
a chunked path for large batches) compiles: the graph keeps the example's outcome
and the host checks, on every call, the size condition under which that outcome
holds (``dycl.export.shape_guards``), refusing other sizes with the library's file:line.
Decisions on static dims need no check; decisions on values are rewritten, never guarded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from dycl.rewriter import user_code
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.compile.installed_library import attention
from tests.compile.installed_library.attention import SelfAttention, add_positions, normalised, rotate_half


@pytest.fixture(autouse=True)
def installed_library(monkeypatch):
    """dycl treats ``installed_library`` as an installed package: traced, not rewritten."""
    folder = str(Path(attention.__file__).parent)
    monkeypatch.setattr(user_code, "_LIBRARY_PATHS", (*user_code._LIBRARY_PATHS, folder))


def _line(text: str) -> str:
    lines = Path(attention.__file__).read_text().splitlines()
    return f"attention.py:{1 + next(i for i, line in enumerate(lines) if text in line)}"


class TinyDecoder(nn.Module):
    """User code around the library layer: an early exit on the data."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.attn = SelfAttention(16, heads=2)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        h = self.embed(x)
        if x.mean() > 0:  # the attention only for some inputs
            h = rotate_half(self.attn(h))  # rotate_half decides on a static dim only
        return self.head(h).softmax(-1)


def _inputs(shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) + shift
            for shape in shapes for shift in (-3.0, 3.0)]  # both exits at every size


def test_a_decision_on_the_symbolic_batch_is_checked_by_the_host(tmp_path):
    model = TinyDecoder().eval()
    compiled = dycl.compile(model, torch.randn(2, 5, 8))  # default: the batch is symbolic
    guards = [g for entry in compiled.manifest.sub_dnns.values() for g in entry.guards]
    assert [g.holds for g in guards] == ["(batch <= 4)"]
    assert guards[0].where.endswith(_line("if batch > self.chunk_above"))
    accepted = _inputs([(1, 5, 8), (2, 5, 8), (3, 5, 8), (4, 5, 8)])
    assert assert_equivalent(model, compiled, accepted, min_paths=2, atol=1e-5) == 2
    with pytest.raises(ValueError, match=r"valid for sizes where \(batch <= 4\) .*attention\.py:\d+.*got batch = 6"):
        compiled(torch.randn(6, 5, 8) + 3)
    compiled.save(tmp_path / "artifact")
    result = run_host_without_torch(tmp_path / "artifact", model, accepted, atol=1e-5)
    assert result["checked"] == len(accepted) and not result["problems"]
    with pytest.raises(ValueError, match=r"batch <= 4"):
        dycl.load(tmp_path / "artifact")((torch.randn(5, 5, 8) + 3).numpy())  # the path through the attention


def test_a_decision_on_a_symbolic_sequence_length_and_the_batch():
    model = TinyDecoder().eval()
    compiled = dycl.compile(model, torch.randn(2, 5, 8), dynamic={"x": {1: "seq"}})
    holds = sorted(g.holds for entry in compiled.manifest.sub_dnns.values() for g in entry.guards)
    assert holds == ["(batch <= 4)", "(seq > 1)"]
    accepted = _inputs([(1, 2, 8), (2, 9, 8), (4, 3, 8)], seed=1)
    assert assert_equivalent(model, compiled, accepted, min_paths=2, atol=1e-5) == 2
    with pytest.raises(ValueError, match=r"\(seq > 1\).*got seq = 1"):
        compiled(torch.randn(2, 1, 8) + 3)


def test_at_static_shapes_there_is_nothing_to_check():
    model = TinyDecoder().eval()
    compiled = dycl.compile(model, torch.randn(2, 5, 8), dynamic=False)
    assert not any(entry.guards for entry in compiled.manifest.sub_dnns.values())
    assert_equivalent(model, compiled, _inputs([(2, 5, 8)] * 3, seed=2), min_paths=2, atol=1e-5)


class ValueDecision(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return normalised(self.lin(x))


def test_a_decision_on_values_in_library_code_is_rewritten_not_guarded(tmp_path):
    """No size condition keeps a decision on values: the library function is followed
    (``dycl.model.library_decisions``) and both of its outcomes agree with eager."""
    torch.manual_seed(0)
    model = ValueDecision().eval()
    generator = torch.Generator().manual_seed(3)
    inputs = [torch.randn(3, 4, generator=generator) * (0.05 if i % 2 else 3.0) for i in range(8)]
    with torch.no_grad():
        assert {bool(model.lin(x).norm() > 1) for x in inputs} == {True, False}  # both paths of normalised
    compiled = dycl.compile(model, inputs[0])
    assert not any(entry.guards for entry in compiled.manifest.sub_dnns.values())
    assert_equivalent(model, compiled, inputs, min_paths=1, atol=1e-5)  # the two paths lie in the library
    host = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
    assert host["checked"] == len(inputs) and not host["problems"], host


def test_per_sample_compiles_refuse_shape_guards():
    model = TinyDecoder().eval()
    with pytest.raises(dycl.UnsupportedError, match="per_sample=True with library code that decides on a symbolic"):
        dycl.compile(model, torch.randn(1, 5, 8), dynamic={"x": {1: "seq"}}, per_sample=True)


def test_guards_print_as_the_hosts_grammar_or_not_at_all():
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Max, PythonMod

    from dycl.export.shape_guards import python_condition

    s, t = sympy.symbols("s t", integer=True, positive=True)
    names = {s: "seq", t: "batch"}
    assert python_condition(sympy.Gt(s, 1), names) == "(seq > 1)"
    assert python_condition(sympy.Not(sympy.Gt(s, 1)), names) == "(seq <= 1)"
    assert python_condition(sympy.Eq(FloorDiv(s, 2) + PythonMod(t, 3), Max(s, t)), names) in (
        "(((seq // 2) + (batch % 3)) == max(seq, batch))", "(((batch % 3) + (seq // 2)) == max(seq, batch))")
    assert python_condition(sympy.Gt(s / 2, 1), names) is None  # true division is not in the grammar
    assert python_condition(sympy.Gt(sympy.Symbol("u"), 1), names) is None  # a size with no input


def test_guards_of_a_module_run_on_fake_tensors():
    from dycl.export.shape_guards import guards_of

    layer = SelfAttention(16, heads=2).eval()
    found = guards_of(layer, (torch.randn(2, 5, 16),), ["hidden"], {"hidden": {0: "batch", 1: "seq"}})
    assert sorted(g.holds for g in found) == ["(batch <= 4)", "(seq > 1)"]
    decided = {_full(_line("is_causal = q_len > 1 and")), _full(_line("if batch > self.chunk_above"))}
    assert {g.where for g in found} == decided
    assert guards_of(layer, (torch.randn(2, 5, 16),), ["hidden"], {}) == ()
    assert guards_of(normalised, (torch.randn(3, 4),), ["h"], {"h": {0: "batch"}}) is None  # reads values


def _full(line: str) -> str:
    return str(Path(attention.__file__).parent / line)


class Positions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(32, 8))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        h = add_positions(x, self.table)
        if h.sum() > 0:
            return self.head(h)
        return -h


def test_a_guard_that_excludes_a_batch_of_one_gets_a_graph_traced_at_one(tmp_path):
    model = Positions().eval()
    compiled = dycl.compile(model, torch.randn(2, 5, 8))
    entries = compiled.manifest.sub_dnns
    primary = [name for name, entry in entries.items() if entry.otherwise]
    assert len(primary) == 1 and [g.holds for g in entries[primary[0]].guards] == ["(batch != 1)"]
    assert [g.holds for g in entries[entries[primary[0]].otherwise].guards] == ["(batch == 1)"]
    inputs = _inputs([(1, 5, 8), (2, 5, 8), (3, 5, 8)], seed=3)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    compiled.save(tmp_path / "artifact")
    result = run_host_without_torch(tmp_path / "artifact", model, inputs, atol=1e-5)
    assert result["checked"] == len(inputs) and not result["problems"]


def test_a_manifest_whose_alternatives_go_round_in_a_cycle_is_refused():
    from dycl.hostgen.manifest import ArtifactError, Manifest

    compiled = dycl.compile(Positions().eval(), torch.randn(2, 5, 8))
    value = compiled.manifest.to_json()
    primary = next(name for name, entry in value["sub_dnns"].items() if "otherwise" in entry)
    value["sub_dnns"][value["sub_dnns"][primary]["otherwise"]]["otherwise"] = primary
    with pytest.raises(ArtifactError, match="without a cycle"):
        Manifest.from_json(value)
    value["sub_dnns"][primary]["otherwise"] = "nothing"
    with pytest.raises(ArtifactError, match="another sub_dnns entry"):
        Manifest.from_json(value)


def test_a_decision_on_a_batch_of_one_in_the_example_is_not_frozen(tmp_path):
    """Regression: traced at a batch of 1, torch's shape rules fix the batch to 1 in the fake
    run, so the library's ``batch != 1`` became a plain ``False`` that no guard kept, and the
    compiled model answered every larger batch without the library's ``expand`` path."""
    model = Positions().eval()
    compiled = dycl.compile(model, torch.randn(1, 5, 8))
    entries = compiled.manifest.sub_dnns
    chains = {tuple(g.holds for g in entry.guards) for entry in entries.values() if entry.guards}
    assert chains == {("(batch == 1)",), ("(batch != 1)",)}
    inputs = _inputs([(1, 5, 8), (2, 5, 8), (4, 5, 8)], seed=4)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    compiled.save(tmp_path / "artifact")
    result = run_host_without_torch(tmp_path / "artifact", model, inputs, atol=1e-5)
    assert result["checked"] == len(inputs) and not result["problems"]
