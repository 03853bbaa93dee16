"""Globals read by host operations: defined in ``host.py`` (stdlib imports, copied
plain helpers, ``functools.partial``, torch's run-time checks) or refused at
compile time — never a ``NameError`` when the artifact runs."""

from __future__ import annotations

import functools
import math
import operator

import pytest
import torch
import torch.nn as nn
from dycl.hostgen.host_globals import check_host_names

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5
EPS = 1e-3


def _round_up(n, multiple):
    """A module-level helper of Python numbers, as real code has them."""
    return (n + multiple - 1) // multiple * multiple


def _scaled(n, factor=2):
    return math.sqrt(_round_up(n, 4)) * factor


_halved = functools.partial(operator.mul, 0.5)
_scale_by_three = functools.partial(_scaled, factor=3)


def _assert_no_nan(t):
    assert not torch.isnan(t).any()


class CountThenSqrt(nn.Module):
    """issue 18: ``n += 3`` after a data-dependent branch, then ``math.sqrt(n)``."""

    def forward(self, x):
        n = 1
        if x.sum() > 0:
            n += 3
        s = math.sqrt(n)
        return x * s


class Helpers(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        steps = 1
        if self.fc(x).mean() > 0:
            steps = 6
        torch._check(x.shape[-1] == 4)
        torch._check(steps > 0)
        width = _scaled(steps) + _scale_by_three(steps) + _halved(steps) + EPS
        return self.fc(x) * width


class ChecksATensor(nn.Module):
    def forward(self, x):
        y = x * 2
        if y.sum() > 0:
            y = y + 1
        torch._check_tensor_all(y.abs().sum() >= 0)
        return y


class NeedsTorchInTheHost(nn.Module):
    def forward(self, x):
        n = 1
        if x.sum() > 0:
            n = 2
        _assert_no_nan(x)
        return x * n


def _inputs(count: int = 12, width: int = 4) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(2, width, generator=generator) for _ in range(count)]


@pytest.mark.parametrize("cls", [CountThenSqrt, Helpers, ChecksATensor])
def test_host_globals_agree_in_process_and_without_torch(cls, tmp_path):
    torch.manual_seed(0)
    model = cls().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    check_host_names(compiled.host_source)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL)
    assert report["problems"] == [] and report["checked"] == len(inputs)


def test_imports_copies_and_checks_are_written_into_the_host():
    compiled = dycl.compile(Helpers().eval(), _inputs()[0])
    source = compiled.host_source
    assert "import math" in source
    assert "def _round_up(n, multiple):" in source and "def _scaled(n, factor=2):" in source
    assert "_functools.partial(_scale_by_three_func, factor=3)" in source
    assert "import mul as _halved_func" in source and source.count("def _scaled(") == 1
    assert "EPS = 0.001" in source
    assert "raise RuntimeError('torch._check(x.shape[-1] == 4) failed')" in source
    forward = source[source.index("def _forward"):].replace("'torch._check", "'")
    assert "torch." not in forward


def test_a_failing_torch_check_raises_in_the_host():
    compiled = dycl.compile(ChecksATensor().eval(), _inputs()[0])
    assert compiled(torch.ones(2, 4)) is not None
    with pytest.raises(RuntimeError, match="torch._check"):
        compiled(torch.full((2, 4), float("nan")))


def test_written_back_value_carries_its_own_line():
    compiled = dycl.compile(CountThenSqrt().eval(), _inputs()[0])
    lines = {line.split("#")[0].strip(): line.split("#")[1].strip() for line in compiled.host_source.splitlines()
             if line.strip().startswith("n = ")}
    first = CountThenSqrt.forward.__code__.co_firstlineno
    assert lines == {"n = 4": f"test_host_globals.py:{first + 3}", "n = 1": f"test_host_globals.py:{first + 1}"}


def test_a_helper_that_needs_torch_is_refused_at_compile_time():
    with pytest.raises(dycl.UnsupportedError) as caught:
        dycl.compile(NeedsTorchInTheHost().eval(), _inputs()[0])
    error = caught.value
    assert "_assert_no_nan" in error.construct and "without torch" in error.construct
    assert error.location is not None and error.location.path == __file__
    assert "_assert_no_nan(x)" in error.location.source_line()


def test_the_check_names_an_unbound_global():
    source = "import math\n\ndef f(n):\n    return math.sqrt(n) + missing(n)  # model.py:3\n"
    with pytest.raises(dycl.UnsupportedError, match="'missing'"):
        check_host_names(source)
    check_host_names(source.replace(" + missing(n)", ""))


def test_the_host_analysed_part_by_part_reads_and_binds_what_the_whole_does():
    """The globals of a host are found in its parts (the copied runtime's kept per text):
    the same names as in the whole source, and a part that reads an undefined name is refused."""
    from dycl.hostgen import host_globals
    from dycl.hostgen.program import HostProgram
    from dycl.rewriter.errors import UnsupportedError

    program = dycl.compile(Helpers().eval(), _inputs()[0])._result.program
    whole = HostProgram(program.source, program.line_map, program.function, program.first_line, program.last_line)
    assert len(program.parts) >= 8 and whole.segments == (program.source,)
    assert host_globals._module_bindings(program) == host_globals._module_bindings(whole)
    assert host_globals._global_reads(program) == host_globals._global_reads(whole)
    assert {"_round_up", "_scaled", "math", "EPS"} <= host_globals._module_bindings(program)
    extra = "\n\ndef _extra():\n    return undefined_name\n"
    broken = HostProgram(program.source + extra, {}, "", 0, parts=(*program.parts, extra))
    with pytest.raises(UnsupportedError, match="undefined_name"):
        check_host_names(broken)
    with pytest.raises(ValueError, match="parts"):
        HostProgram(program.source, {}, "", 0, parts=program.parts[1:])
