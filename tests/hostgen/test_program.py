"""``HostCodegen.program()``: the host's source with, built as it is emitted, what each line
of the emitted method is (``hostgen.program``). Checked against the emitted lines on
hand-built HCFGs, by the host's own error messages (which read the table, not the text),
and end to end: branch coverage driven by the program equals eager's decisions, in process,
from a saved host and per sample, on models with several paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from dycl.hcfg.annotate import annotate
from dycl.hcfg.levers import Levers
from dycl.hostgen.emit import HostCodegen, _expr
from dycl.hostgen.emit_batched import BatchedHostCodegen
from dycl.hostgen.program import HostProgram
from torch import nn

import dycl
from dycl.artifact import ArtifactError
from dycl.harness.coverage import HostCoverage, compiled_coverage, host_program
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch
from tests.hcfg.graphs import cond, diamond, graph, host, ret, sub
from tests.hostgen.test_emit import FAKE_RUNTIME, Recorder, host_model, single_calls

ATOL = 1e-5


def _exit_graph():
    return annotate(graph(
        ("x", "n"),
        sub(0, "a = x * 2", at=2),
        cond(0, "n > 3", then=(ret("a", at=4),), at=3),
        host("k = 10 // n", at=5),
        cond(1, "k > 2", then=(sub(1, "b = a + k", at=7),), orelse=(sub(2, "b = a - k", at=9),), at=6),
        ret("b", at=10)))


@pytest.mark.parametrize("make", [diamond, _exit_graph])
def test_the_line_map_says_what_each_emitted_line_is(make):
    hcfg = make()
    program = HostCodegen(hcfg, single_calls(hcfg), FAKE_RUNTIME).program()
    lines = program.source.splitlines()
    assert lines[program.first_line - 1].startswith("    def _forward(self, x, n):")
    assert [c.number for c in program.conditions] == list(range(len(hcfg.conditions)))
    for site, node in zip(program.conditions, hcfg.conditions):
        assert lines[site.line - 1].strip() == f"if {site.test}:  # {site.where}" and site.where.startswith("model.py:")
        assert site.test == _expr(node.test) and site.body_line == site.line + 1
    assert sorted(program.calls.values()) == [s.index for s in hcfg.sub_dnns]
    for line, index in program.calls.items():
        assert f"self._call[{index}](" in lines[line - 1]
    assert [r.value for r in program.returns] == [lines[r.line - 1].strip().split()[1] for r in program.returns]
    # the host holds the same table: a loaded host gives the same program
    namespace: dict = {"__name__": "host"}
    exec(compile(program.source, "host.py", "exec", dont_inherit=True), namespace)  # noqa: S102 - the host under test
    again = HostProgram.of_model(namespace["Model"], program.source)
    assert again == program and again.conditions == program.conditions and again.returns == program.returns


def test_the_hosts_errors_name_the_models_line_from_the_table():
    hcfg = _exit_graph()
    source = HostCodegen(hcfg, single_calls(hcfg), FAKE_RUNTIME).emit()
    recorder = Recorder()

    def broken(a, k):
        raise FloatingPointError("overflow in the compiled code")

    model = host_model(source, {"subdnn_0": recorder("0", lambda x: (x * 2,)),
                                "subdnn_1": recorder("1", lambda a, k: (a + k,)), "subdnn_2": broken})
    paths = {}
    for n in (1, 2, 4, 5):  # k = 10, 5: sub-DNN 1; n > 3: the exit
        recorder.path.clear()
        result = model(np.ones(2), n)
        paths[tuple(recorder.path)] = result
    assert set(paths) == {("0", "1"), ("0",)}
    with pytest.raises(ZeroDivisionError) as caught:  # a host operation: the same error, the model's line added
        model(np.ones(2), 0)
    assert "(raised by the host code of model.py:5)" in caught.value.__notes__
    with pytest.raises(RuntimeError, match=r"the compiled code of model\.py:9 failed \(FloatingPointError: overflow"):
        model(np.ones(2), -5)  # k = -2: the else branch's sub-DNN


class GatedBlocks(nn.Module):
    """A residual stack whose blocks are skipped by a learned gate and which stops early
    once the features settle, written the way one writes it without a compiler in mind."""

    def __init__(self, width: int = 8, depth: int = 3) -> None:
        super().__init__()
        self.inp = nn.Linear(4, width)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth))
        self.gates = nn.ModuleList(nn.Linear(width, 1) for _ in range(depth))
        self.out = nn.Linear(width, 3)

    def forward(self, x):
        h = F.relu(self.inp(x))
        used = 0
        for block, gate in zip(self.blocks, self.gates):
            if torch.sigmoid(gate(h)).mean() > 0.5:
                h = h + block(h)
                used += 1
            if h.abs().max() > 6.0:
                break
        return self.out(h), used


def _inputs(count: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(1, 4, generator=generator) * scale for scale in (0.3, 1.0, 4.0) for _ in range(count // 3)]


def test_coverage_from_the_program_counts_paths_in_process_and_in_the_saved_host(tmp_path):
    torch.manual_seed(1)
    model = GatedBlocks().eval()
    inputs = _inputs(30)
    compiled = dycl.compile(model, inputs[0])
    program = host_program(compiled)
    assert isinstance(program, HostProgram) and len(program.conditions) == len(compiled.graph.conditions)
    tally = compiled_coverage(compiled, [(x,) for x in inputs])
    assert len(tally.paths) >= 3  # several different paths through the gates and the break
    with torch.no_grad():
        for x in inputs:
            assert outputs_match(model(x), compiled(x), ATOL) is None
    artifact = compiled.save(tmp_path / "gated")
    loaded = dycl.load(artifact)
    assert HostProgram.of_model(type(loaded._host), loaded.host_source) == program
    saved = compiled_coverage(loaded, [(x,) for x in inputs])
    assert saved.paths == tally.paths
    assert [(r["true"], r["false"], r["where"]) for r in saved.conditions()] == \
        [(r["true"], r["false"], r["where"]) for r in tally.conditions()]
    checked = run_host_without_torch(artifact, model, inputs, ATOL)
    assert checked["checked"] == len(inputs) and not checked["problems"], checked["problems"]
    # the artifact's check still covers every part of the new host: a changed line table or runtime is refused
    host = (artifact / "host.py").read_text()
    for part, edited in (("FORWARD_LINES = {", "FORWARD_LINES = {0: ['host', None, 'x.py:1', '', 0}, "),
                         ("class HostModel:", "class HostModel:  # edited")):
        assert host.count(part) == 1
        (artifact / "host.py").write_text(host.replace(part, edited))
        with pytest.raises(ArtifactError, match="checksum mismatch for host.py"):
            dycl.load(artifact)
    (artifact / "host.py").write_text(host)
    assert outputs_match(model(inputs[0]), dycl.load(artifact)(inputs[0]), ATOL) is None


class Thresholds(nn.Module):
    """Per sample: an early exit for confident samples, then one of two heads."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(5, 6)
        self.exit = nn.Linear(6, 2)
        self.wide, self.narrow = nn.Linear(6, 2), nn.Linear(6, 2)

    def forward(self, x):
        h = torch.tanh(self.stem(x))
        logits = self.exit(h)
        if logits.softmax(-1).max() > 0.8:
            return logits
        if x.sum() > 0:
            return self.wide(h)
        return self.narrow(h)


def test_per_sample_coverage_records_each_samples_decisions():
    torch.manual_seed(4)
    model = Thresholds().eval()
    generator = torch.Generator().manual_seed(5)
    samples = [torch.randn(1, 5, generator=generator) * scale for scale in (0.5, 3.0) for _ in range(12)]
    # routed: if-converted conditions (dycl.per_sample.predicate) are selections, not host conditions
    compiled = dycl.compile(model, samples[0], per_sample=True, optimize=Levers(predicate=False))
    program = host_program(compiled)
    assert program.function == "_sample" and len(program.conditions) == 2
    batch = torch.cat(samples)
    with torch.no_grad():
        assert outputs_match(torch.cat([model(x) for x in samples]), compiled(batch), ATOL) is None
        exits = [bool(model.exit(torch.tanh(model.stem(x))).softmax(-1).max() > 0.8) for x in samples]
        wide = [bool(x.sum() > 0) for x, left in zip(samples, exits) if not left]
    recorder = HostCoverage(compiled._host, program)
    tally = recorder.tally()
    tally.add(recorder.record(compiled, batch)[1])
    first, second = tally.conditions()
    assert (first["true"], first["false"]) == (sum(exits), len(samples) - sum(exits))
    assert (second["true"], second["false"]) == (sum(wide), len(wide) - sum(wide))
    assert 0 < sum(exits) < len(samples) and 0 < sum(wide) < len(wide)  # three paths among the samples


def test_a_per_sample_program_describes_its_sample_method():
    hcfg = diamond()
    codegen = BatchedHostCodegen(hcfg, single_calls(hcfg), FAKE_RUNTIME, sample_inputs=("x",))
    program = codegen.program()
    lines = program.source.splitlines()
    assert lines[program.first_line - 1].startswith("    def _sample(self, x, n):")
    assert "class Model(PerSampleModel, HostModel):" in program.source
    assert all(f"(yield ({index}, " in lines[line - 1] for line, index in program.calls.items())
    assert len(program.calls) == 3 and len(program.conditions) == 1
