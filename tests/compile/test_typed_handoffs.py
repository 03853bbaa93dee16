"""The compiler's typed hand-offs (issue 30): ``Backend.compile`` returns a ``CompiledVariant``
for every backend, ``Compiled.variants`` holds one per variant (its graphs traced at other
sizes as a field), the call form is a ``CallForm`` that survives the manifest's JSON, one
``Levers`` decides the optimisations, and the execution mode's hooks are the only place
that knows about ``per_sample``. Each compile is also checked against eager on inputs
over several paths, in process and through the saved torch-free host."""

from __future__ import annotations

import json

import onnx
import pytest
import torch
import torch.nn.functional as F
from dycl.hcfg.levers import Levers
from dycl.hostgen.manifest import ArtifactError, CallForm
from torch import nn

import dycl
from dycl import compiler
from dycl.api import from_result
from dycl.backends import get_backend
from dycl.backends.base import CompiledVariant
from dycl.execution_mode import WHOLE_CALL
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import Call, run_host_without_torch
from dycl.per_sample.mode import PER_SAMPLE
from dycl.per_sample.testing import PerSampleEager
from dycl.progress import Progress
from tests.compile.test_shape_guards import Positions, _inputs, installed_library  # noqa: F401 - the fixture

ATOL = 1e-5


class EarlyExitMLP(nn.Module):
    """A classifier that stops after the first block when it is confident, as early-exit
    papers write it: one confidence test, two exits."""

    def __init__(self, threshold: float = 0.6) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(10, 32), nn.GELU())
        self.exit1 = nn.Linear(32, 4)
        self.deep = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32))
        self.exit2 = nn.Linear(32, 4)
        self.threshold = threshold

    def forward(self, x):
        prior = torch.full((4,), 0.25).log()  # the same every call: a constant the host keeps when optimised
        h = self.stem(x)
        early = self.exit1(h)
        if F.softmax(early, dim=-1).max() > self.threshold:
            return early + prior
        return self.exit2(self.deep(h) + h) + prior


def _samples(count: int, batch: int = 2, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, 10, generator=generator) * scale for scale in (0.1, 10.0) for _ in range(count // 2)]


def _stage_results(model: nn.Module, example, **options) -> compiler.Compiled:
    """The compiler's stages run up to *compile*: its ``Compiled``."""
    chosen = compiler.Options(**options)
    value = compiler.Job(model, example, chosen, get_backend(chosen.backend, **(chosen.backend_options or {})),
                         Progress("", 3, False))
    for name, stage in compiler.STAGES:
        value = stage(value)
        if name == "compile":
            return value
    raise AssertionError("no compile stage")


def _host_agrees(model: nn.Module, compiled, inputs: list, tmp_path) -> None:
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL)
    assert report["problems"] == [] and report["checked"] == len(inputs)


# -- CompiledVariant from each backend ---------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_every_variant_has_the_compiled_graph_its_backend_returned(backend, tmp_path):
    torch.manual_seed(0)
    model = EarlyExitMLP().eval()
    stage = _stage_results(model, torch.randn(2, 10), backend=backend)
    suffix = {"onnxruntime": ".onnx", "torch": ".txt"}[backend]
    assert set(stage.variants) == {v.name for v in stage.ported.variants} and len(stage.variants) >= 2
    for name, made in stage.variants.items():
        assert isinstance(made, CompiledVariant) and made.file.endswith(suffix) and made.guards == ()
        assert made.files == {made.file: made.data} and stage.files[made.file] == made.data
    if backend == "onnxruntime":  # an ONNX graph whose inputs are the variant's ports
        for variant in stage.ported.variants:
            graph = onnx.load_model_from_string(stage.variants[variant.name].data).graph
            assert [i.name for i in graph.input] == [p.name for p in variant.inputs]
    else:  # the torch backend's file is the sub-DNN's source, for reading
        for variant in stage.ported.variants:
            assert stage.variants[variant.name].data == stage.ported.modules[variant.name].source.encode()
    compiled = dycl.compile(model, torch.randn(2, 10), backend=backend)
    assert {e.file for e in compiled.manifest.sub_dnns.values()} == set(stage.files)
    inputs = _samples(12)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    if backend == "onnxruntime":  # the torch backend's artifact needs torch
        _host_agrees(model, compiled, inputs, tmp_path)


def test_a_graph_traced_at_another_size_is_a_field_of_its_variant(tmp_path):
    """The alternative graph (``dycl.export.alternatives``) hangs off its variant's
    ``CompiledVariant``; the manifest chains it by ``otherwise`` from that field."""
    torch.manual_seed(0)
    model = Positions().eval()
    stage = _stage_results(model, torch.randn(2, 5, 8))
    with_other = {name: made for name, made in stage.variants.items() if made.alternatives}
    assert len(with_other) == 1
    (name, made), = with_other.items()
    assert [g.holds for g in made.guards] == ["(batch != 1)"]
    (other,) = made.alternatives
    assert [g.holds for g in other.guards] == ["(batch == 1)"] and other.file != made.file
    assert made.files == {made.file: made.data, other.file: other.data}
    result = compiler.compile_model(model, torch.randn(2, 5, 8))
    entries = result.manifest.sub_dnns
    assert entries[entries[name].otherwise].file == other.file
    assert result.entry_modules[entries[name].otherwise] is result.modules[name]
    compiled = from_result(result)
    inputs = _inputs([(1, 5, 8), (2, 5, 8), (3, 5, 8)], seed=3)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    _host_agrees(model, compiled, inputs, tmp_path)


# -- CallForm ---------------------------------------------------------------------------------------------------

class Scorer(nn.Module):
    """A signature as people write them: positional, ``*extra``, a keyword-only flag with a
    default, ``**options``; the example fixes ``scale`` (a float) and ``mode`` (a string)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x, *extra, mode="sum", scale=1.0, **options):
        h = self.proj(x) * scale
        for e in extra:
            h = h + e
        if "bias" in options:
            h = h + options["bias"]
        if mode == "sum" and h.mean() > 0:
            return h.sum(-1)
        return h.amax(-1)


def _calls(count: int, seed: int = 0) -> list[Call]:
    generator = torch.Generator().manual_seed(seed)
    calls = []
    for index in range(count):
        shift = 2.0 if index % 2 else -2.0
        x, e, b = (torch.randn(3, 6, generator=generator) + shift for _ in range(3))
        calls.append(Call((x, e), {"scale": 0.5, "bias": b}))
    return calls


def test_the_call_form_survives_the_manifest_and_binds_every_call(tmp_path):
    torch.manual_seed(0)
    model = Scorer().eval()
    calls = _calls(10)
    compiled = dycl.compile(model, calls[0].args, kwargs=calls[0].kwargs)
    form = compiled.manifest.call
    assert isinstance(form, CallForm)
    assert form.parameters == (("x", "POSITIONAL_OR_KEYWORD", False), ("extra", "VAR_POSITIONAL", False),
                               ("mode", "KEYWORD_ONLY", True), ("scale", "KEYWORD_ONLY", True),
                               ("options", "VAR_KEYWORD", False))
    assert dict(form.variadic) == {"extra": 1, "options": ("bias",)} and ("scale", None, 0.5) in form.fixed
    assert CallForm.from_json(json.loads(json.dumps(form.to_json()))) == form
    assert compiled.manifest["call"] == form.to_json()
    paths = {bool((model.proj(c.args[0]) * 0.5 + c.args[1] + c.kwargs["bias"]).mean() > 0) for c in calls}
    assert len(paths) == 2
    for call in calls:
        with torch.no_grad():
            torch.testing.assert_close(compiled(*call.args, **call.kwargs), model(*call.args, **call.kwargs),
                                       atol=ATOL, rtol=0)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, calls, ATOL)
    assert report["problems"] == [] and report["checked"] == len(calls)


def test_a_call_form_round_trips_and_names_a_broken_field():
    form = CallForm.of([("x", "POSITIONAL_OR_KEYWORD", False), ("extra", "VAR_POSITIONAL", False),
                        ("options", "VAR_KEYWORD", False)],
                       [("x", "x", None), ("extra_0", "extra", 0), ("options_w", "options", "w")],
                       [("options", "k", 3)], ["mode"], {"extra": 1, "options": ["w", "k"]})
    assert CallForm.from_json(form.to_json()) == form
    assert form.to_host()["variadic"] == {"extra": 1, "options": ["w", "k"]}
    plain = CallForm.plain(("x", "k"), {"k": 2})
    assert CallForm.from_json(plain.to_json()) == plain and plain.inputs == (("x", "x", None),)
    odd = CallForm.plain(("x", "k"), {"k": {1, 2}})  # a value JSON cannot write: written as its repr
    assert odd.to_json()["fixed"] == [["k", None, "{1, 2}"]] and odd.to_host()["fixed"] == [["k", None, {1, 2}]]
    broken = {"parameters": [["x", "POSITIONAL", False]], "inputs": [], "fixed": [], "absent": [], "variadic": {}}
    with pytest.raises(ArtifactError, match=r"call.parameters\[0\]\[1\]: expected one of"):
        CallForm.from_json(broken)
    with pytest.raises(ArtifactError, match=r"call.inputs\[0\]: expected a list of 3 items"):
        CallForm.from_json({**broken, "parameters": [], "inputs": [["x", "x"]]})
    with pytest.raises(ArtifactError, match=r"call.variadic.extra: expected a non-negative integer"):
        CallForm.from_json({**broken, "parameters": [], "variadic": {"extra": -1}})


# -- one Levers; the execution mode ------------------------------------------------------------------------------

def test_one_levers_decides_the_optimisations(tmp_path):
    assert "optimize" not in {f for f in compiler.Options.__dataclass_fields__}
    assert Levers(optimize_graph=False).merge_into_producers is False  # switches that cannot disagree
    assert Levers.of(False) == Levers(optimize_graph=False, merge_into_producers=True)
    torch.manual_seed(0)
    model = EarlyExitMLP().eval()
    plain, optimised = (dycl.compile(model, torch.randn(2, 10), optimize=flag) for flag in (False, True))
    assert plain.stats["constants"] == 0 < optimised.stats["constants"]
    inputs = _samples(10, seed=1)
    for compiled in (plain, optimised):
        assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    _host_agrees(model, plain, inputs, tmp_path)


def test_the_default_mode_changes_nothing_and_the_per_sample_mode_groups_every_graph(tmp_path):
    declared = {"x": {0: "batch", 1: "n"}}
    assert WHOLE_CALL.declared_dims(declared) is declared and WHOLE_CALL.onnx_step(get_backend("onnxruntime")) is None
    assert PER_SAMPLE.declared_dims(declared) == {"x": {1: "n"}}
    torch.manual_seed(0)
    model = EarlyExitMLP().eval()
    stage = _stage_results(model, torch.randn(1, 10), per_sample=True)
    for variant in stage.ported.variants:  # the group model: one more leading (symbolic) dim on every input
        graph = onnx.load_model_from_string(stage.variants[variant.name].data).graph
        dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input]
        assert dims == [[dims[0][0], *p.shape] for p in variant.inputs] and isinstance(dims[0][0], str)
        # its thread choice is made at a group of 32 samples, where this MLP still costs too little for a pool
        assert stage.variants[variant.name].on_calling_thread
    compiled = dycl.compile(model, torch.randn(1, 10), per_sample=True)
    samples = [x[:1] for x in _samples(16, seed=2)]
    batch = torch.cat(samples)
    with torch.no_grad():
        expected = torch.cat([model(x) for x in samples])
        outcomes = {bool(F.softmax(model.exit1(model.stem(x)), -1).max() > model.threshold) for x in samples}
    assert len(outcomes) == 2
    torch.testing.assert_close(compiled(batch), expected, atol=ATOL, rtol=0)
    artifact = compiled.save(tmp_path / "artifact")
    torch.testing.assert_close(dycl.load(artifact)(batch), expected, atol=ATOL, rtol=0)
    report = run_host_without_torch(artifact, PerSampleEager(model), [batch], ATOL)
    assert report["problems"] == [] and report["checked"] == 1
