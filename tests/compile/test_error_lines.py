"""Errors name the model's lines: an operator the ONNX exporter cannot translate is
refused at compile time at the statement that calls it; a failure while running
(ONNX Runtime raising inside a sub-DNN, or a host operation) names the source
lines it came from, in-process and in the torch-free host, with the original
exception chained. Also the translations dycl installs for one export only."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent

HERE = "test_error_lines.py"


def _line_of(cls: type, text: str) -> int:
    lines, first = inspect.getsourcelines(cls)
    return first + next(i for i, line in enumerate(lines) if text in line)


class Histogram(nn.Module):
    def forward(self, x):
        h = x * 2
        counts = torch.histc(h, bins=4)
        return counts + 1


def test_an_operator_the_exporter_cannot_translate_is_refused_at_its_line():
    with pytest.raises(dycl.UnsupportedError) as caught:
        dycl.compile(Histogram().eval(), torch.randn(3, 5))
    message = str(caught.value)
    assert "the operator histc" in message
    assert f"{HERE}:{_line_of(Histogram, 'torch.histc')}" in message
    assert isinstance(caught.value.__cause__, torch.onnx.errors.OnnxExporterError)


class CountsFlag(nn.Module):
    """A Python bool added to a tensor (``h + has_bias``): the TorchScript tracer has no overload for it and
    fails with an internal assert; dycl refuses it at the statement, saying what to write."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, x):
        has_bias = isinstance(self.lin.bias, torch.Tensor)
        h = self.lin(x) + has_bias
        return h * 2 if h.sum() > 0 else h


def test_a_python_bool_in_tensor_arithmetic_is_refused_at_its_line():
    with pytest.raises(dycl.UnsupportedError) as caught:
        dycl.compile(CountsFlag().eval(), torch.randn(3, 5))
    message = str(caught.value)
    assert "the operator add" in message and "int(flag) or float(flag)" in message
    assert f"{HERE}:{_line_of(CountsFlag, 'self.lin(x) + has_bias')}" in message


class Gather(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, idx):
        h = self.lin(x)
        picked = torch.index_select(h, 0, idx)
        if picked.sum() > 0:
            return picked * 2
        return picked - 1


def _gather():
    model = Gather().eval()
    compiled = dycl.compile(model, (torch.randn(5, 4), torch.tensor([0, 2])), dynamic={"idx": {0: "n"}})
    return model, compiled


def test_a_sub_dnn_failing_at_run_time_names_the_lines_it_computes():
    model, compiled = _gather()
    assert_equivalent(model, compiled, [(torch.randn(5, 4), torch.tensor(i)) for i in ([1, 3], [4], [0, 0, 2])],
                      min_paths=1, atol=1e-6)
    with pytest.raises(RuntimeError) as caught:
        compiled(torch.randn(5, 4), torch.tensor([1, 9]))  # eager raises IndexError: index out of range
    message = str(caught.value)
    assert f"{HERE}:{_line_of(Gather, 'torch.index_select')}" in message
    assert "out of data bounds" in message  # what ONNX Runtime said
    assert caught.value.__cause__ is not None and "onnxruntime" in type(caught.value.__cause__).__module__


def test_the_torch_free_host_names_the_same_lines(tmp_path):
    _, compiled = _gather()
    artifact = compiled.save(tmp_path / "gather")
    script = (
        "import sys, importlib.util\n"
        "sys.modules['torch'] = None\n"
        "import numpy as np\n"
        f"spec = importlib.util.spec_from_file_location('host', {str(artifact / 'host.py')!r})\n"
        "host = importlib.util.module_from_spec(spec); spec.loader.exec_module(host)\n"
        f"model = host.load({str(artifact)!r})\n"
        "try:\n"
        "    model(np.zeros((5, 4), np.float32), np.array([1, 9]))\n"
        "except RuntimeError as error:\n"
        "    print('ERROR', error, '| CAUSE', type(error.__cause__).__name__)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"{HERE}:{_line_of(Gather, 'torch.index_select')}" in result.stdout
    assert "CAUSE" in result.stdout and "CAUSE NoneType" not in result.stdout


class Diff(nn.Module):
    def forward(self, position_ids, mask):
        first = position_ids[:, :1] - 1
        steps = torch.diff(position_ids, prepend=first, dim=-1)
        return (steps != 1).cumsum(-1), torch.diff(mask, dim=0)


def test_torch_diff_exports_and_the_translation_does_not_outlive_the_export():
    from torch.onnx._internal.torchscript_exporter import registration

    model = Diff().eval()
    compiled = dycl.compile(model, (torch.arange(6).view(2, 3), torch.rand(3, 4) > 0.5), dynamic="all")
    assert not registration.registry.is_registered_op("aten::diff", 17)
    generator = torch.Generator().manual_seed(0)
    inputs = [(torch.randint(0, 4, (b, s), generator=generator), torch.rand(b, 3, generator=generator) > 0.5)
              for b, s in ((2, 3), (1, 7), (4, 2), (3, 5))]
    assert_equivalent(model, compiled, inputs, min_paths=1)


def test_index_add_sums_rows_of_a_repeated_index_as_eager_does():
    class Combine(nn.Module):
        def forward(self, x, index, rows):
            out = torch.zeros_like(x)
            out.index_add_(0, index, rows)
            return out

    model = Combine().eval()
    compiled = dycl.compile(model, (torch.randn(5, 3), torch.tensor([0, 2]), torch.randn(2, 3)),
                            dynamic={"index": {0: "n"}, "rows": {0: "n"}})
    inputs = [(torch.randn(5, 3), torch.tensor(i), torch.randn(len(i), 3)) for i in ([1, 1, 1], [4, 0, 4], [2])]
    assert_equivalent(model, compiled, inputs, min_paths=1, atol=1e-6)


class Lookup(nn.Module):
    def forward(self, x):
        scales = [1.0, 2.0, 4.0]
        level = int(x.abs().sum().item())
        scale = scales[level]
        return x * scale


def test_a_host_operation_failing_keeps_its_exception_and_gains_the_line():
    model = Lookup().eval()
    compiled = dycl.compile(model, torch.full((1, 2), 0.2))
    for value in (0.2, 0.6, 1.2):
        x = torch.full((1, 2), value)
        assert torch.equal(compiled(x), model(x))
    with pytest.raises(IndexError) as caught:  # eager raises IndexError too
        compiled(torch.full((1, 2), 5.0))
    notes = " ".join(getattr(caught.value, "__notes__", []))
    assert f"{HERE}:{_line_of(Lookup, 'scales[level]')}" in notes
