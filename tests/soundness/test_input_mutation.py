"""Inputs that forward() updates in place (issue 26, item 4): the compiled model updates the
caller's tensor (in-process), the caller's array (``run_numpy``, the saved torch-free host)
as eager updates it, and compiling leaves the example untouched."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


class Standardize(nn.Module):
    """Normalises its input in place before a gated head, as preprocessing code often does."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        x.sub_(x.mean(dim=1, keepdim=True)).div_(x.std(dim=1, keepdim=True) + 1e-5)
        if x[:, 0].mean() > 0:
            return self.head(x)
        return x[:, :3] * 2


class ClampScale(nn.Module):
    def forward(self, x):
        y = x.mul_(2).clamp_(-1.0, 1.0)
        if y.sum() > 0:
            return y + 1
        return -y


class ZeroNegatives(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        x[x < 0] = 0
        if x.mean() > 0.4:
            x += 1
            return self.fc(x)
        return x.sum(dim=1)


class InplaceActivations(nn.Module):
    def forward(self, x):
        torch.relu_(x)
        F.hardtanh(x, 0.0, 2.0, inplace=True)
        if x.sum() > 6:
            return x.mean()
        return x.max()


class UpdateOnOnePath(nn.Module):
    def forward(self, x, scale):
        if x.mean() > 0:
            x.mul_(scale)
        else:
            x.zero_()
        return x.sum(dim=0)


class Accumulate(nn.Module):
    """A caller-owned statistics buffer updated in place by the model."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x, running):
        h = self.fc(x)
        running.add_(h.detach().mean(dim=0))
        if h.mean() > 0:
            return torch.tanh(h)
        return h.relu()


class UpdateThenRebind(nn.Module):
    def forward(self, x):
        x.mul_(2)
        x = x + 1
        if x.sum() > 0:
            return x
        return -x


class ScaleThenRefine(nn.Module):
    """The input is scaled in place, then its name is given new values on one branch (and that
    new tensor is updated in place: not the caller's); dycl keeps the caller's tensor under its own
    name and gives the new values fresh ones (``dycl.in_process.input_renaming``)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)

    def forward(self, x):
        x.mul_(0.5)
        if x.mean() > 0:
            x = self.fc(x)
            x.add_(0.1)
        x = torch.tanh(x)
        if x.sum() > 0.5:
            return x * 2
        return x


class ClampAndFlag(nn.Module):
    """Returns a bare tuple (found by the fuzzer: the pair of outputs and updated inputs was
    printed without the tuple's parentheses, so the host returned three values)."""

    def forward(self, x):
        x.add_(0.25).clamp_(-2.0, 2.0)
        if x.mean() > 0.3:
            return x * 2, 1
        return x, 0


def _inputs(shape: tuple[int, ...], count: int = 12) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(shape, generator=generator) * (0.5 + i / 4) + (i - count / 2) / 4 for i in range(count)]


def _check_calls(model: nn.Module, compiled, inputs: list[tuple]) -> int:
    """Outputs and the arguments after the call agree with eager, in-process and through
    ``run_numpy``; returns the number of distinct eager paths."""
    files = model_source_files(model)
    paths = set()
    for i, args in enumerate(inputs):
        eager_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        compiled_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        arrays = tuple(a.numpy().copy() if isinstance(a, torch.Tensor) else a for a in args)
        with torch.no_grad():
            expected, path = record_path(model, *eager_args, files=files)
        paths.add(path)
        assert outputs_match(expected, compiled(*compiled_args), ATOL) is None, f"input {i}"
        assert outputs_match(eager_args, compiled_args, ATOL) is None, f"input {i}: the caller's tensors"
        compiled.run_numpy(*arrays)
        for eager_arg, array in zip(eager_args, arrays):
            if isinstance(array, np.ndarray):
                np.testing.assert_allclose(array, eager_arg.numpy(), atol=ATOL, err_msg=f"input {i}: array")
    return len(paths)


CASES = [
    (Standardize, lambda: [(t,) for t in _inputs((4, 6))], 2, ("x",)),
    (ClampScale, lambda: [(t,) for t in _inputs((3, 5))], 2, ("x",)),
    (ZeroNegatives, lambda: [(t,) for t in _inputs((4, 6))], 2, ("x",)),
    (InplaceActivations, lambda: [(t,) for t in _inputs((2, 5))], 2, ("x",)),
    (UpdateOnOnePath, lambda: [(t, 1.5) for t in _inputs((3, 4))], 2, ("x",)),
    (UpdateThenRebind, lambda: [(t,) for t in _inputs((2, 3))], 2, ("x",)),
    (ScaleThenRefine, lambda: [(t,) for t in _inputs((3, 5), 16)], 3, ("x",)),
    (ClampAndFlag, lambda: [(t,) for t in _inputs((2, 4))], 2, ("x",)),
    # `running` has no batch dim (its dim 0 is not x's in the example): batches of 2 to 5 rows
    (Accumulate, lambda: [(t[:2 + i % 4], torch.zeros(6)) for i, t in enumerate(_inputs((5, 6)))], 2,
     ("running",)),
]


@pytest.mark.parametrize("model_class, make_inputs, min_paths, written", CASES,
                         ids=[case[0].__name__ for case in CASES])
def test_updated_inputs_are_updated_for_the_caller(tmp_path, model_class, make_inputs, min_paths, written):
    torch.manual_seed(0)
    model = model_class().eval()
    inputs = make_inputs()
    example = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in inputs[len(inputs) // 2])
    before = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in example)
    compiled = dycl.compile(model, example)
    # compiling ran forward on copies: the example is as it was
    assert outputs_match(before, example) is None
    assert compiled.manifest.written_inputs == written
    assert _check_calls(model, compiled, inputs) >= min_paths
    compiled.save(tmp_path / "net")
    loaded = dycl.load(tmp_path / "net")
    assert _check_calls(model, loaded, inputs) >= min_paths
    report = run_host_without_torch(tmp_path / "net", model, inputs, ATOL)
    assert report["checked"] == len(inputs) and report["problems"] == []


class AliasUpdate(nn.Module):
    def forward(self, x):
        y = x
        y.add_(1)  # MARK alias
        if y.mean() > 1:
            return y * 2
        return y


class UpdateThroughAView(nn.Module):
    """After ``x = x[:1]`` the name holds a view of the caller's tensor: updating it updates the
    caller's, which the renamed program (``x_1 = x[:1]``) cannot reproduce: refused."""

    def forward(self, x):
        x.mul_(0.5)
        x = x[:1]
        x.add_(1)  # MARK view
        if x.sum() > 0:
            return x * 2
        return x


class HelperUpdate(nn.Module):
    """The update happens in a method dycl calls as it is (no control flow: not inlined)."""

    def _squash(self, t):
        t.clamp_(-1, 1)
        return t * 0.5

    def forward(self, x):
        h = self._squash(x)  # MARK helper
        if h.sum() > 0:
            return h * 2
        return h - 1


class ActivationModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU(inplace=True)
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        h = self.fc(self.act(x))  # MARK module
        if h.sum() > 0:
            return h
        return -h


class NewEntry(nn.Module):
    def forward(self, batch):
        batch["scaled"] = batch["x"] * 2  # MARK entry
        if batch["scaled"].sum() > 0:
            return batch["scaled"]
        return batch["x"]


def _line(cls: type, mark: str) -> int:
    lines, first = inspect.getsourcelines(cls)
    return first + next(i for i, text in enumerate(lines) if f"# MARK {mark}" in text)


@pytest.mark.parametrize("model_class, mark", [(AliasUpdate, "alias"), (UpdateThroughAView, "view"),
                                               (HelperUpdate, "helper"), (ActivationModule, "module"),
                                               (NewEntry, "entry")])
def test_updates_dycl_cannot_reproduce_are_refused_at_their_line(model_class, mark):
    example = torch.randn(2, 3) * 3
    example = ({"x": example},) if model_class is NewEntry else example
    with pytest.raises(dycl.UnsupportedError) as raised:
        dycl.compile(model_class().eval(), example)
    assert raised.value.location.line == _line(model_class, mark)


class ScaleField(nn.Module):
    """A batch dict whose tensors the model updates in place."""

    def forward(self, batch):
        batch["x"].mul_(batch["scale"])
        if batch["x"].sum() > 0:
            return batch["x"] + 1
        return batch["x"].abs()


def test_a_tensor_inside_a_dict_input_is_updated_for_the_caller(tmp_path):
    model = ScaleField().eval()
    inputs = [{"x": t, "scale": torch.tensor(1.5)} for t in _inputs((2, 3))]
    example = {key: value.clone() for key, value in inputs[0].items()}
    compiled = dycl.compile(model, (example,))
    assert torch.equal(example["x"], inputs[0]["x"])
    assert compiled.manifest.written_inputs == ("batch",)
    compiled.save(tmp_path / "net")
    files = model_source_files(model)
    paths = set()
    for candidate in (compiled, dycl.load(tmp_path / "net")):
        for i, batch in enumerate(inputs):
            eager_batch = {key: value.clone() for key, value in batch.items()}
            compiled_batch = {key: value.clone() for key, value in batch.items()}
            with torch.no_grad():
                expected, path = record_path(model, eager_batch, files=files)
            paths.add(path)
            assert outputs_match(expected, candidate(compiled_batch), ATOL) is None, f"input {i}"
            assert outputs_match(eager_batch, compiled_batch, ATOL) is None, f"input {i}: the caller's dict"
    assert len(paths) >= 2
    report = run_host_without_torch(tmp_path / "net", model, [(batch,) for batch in inputs], ATOL)
    assert report["checked"] == len(inputs) and report["problems"] == []


def test_compiling_leaves_the_example_untouched():
    """The issue's report: compiling ran forward six times on the example, which came back all 6."""
    model = ClampScale().eval()
    example = torch.zeros(2, 3)
    dycl.compile(model, example)
    assert torch.equal(example, torch.zeros(2, 3))
    assert example._version == 0


class ResidualBlock(nn.Module):
    """torchvision's habit: ``out = self.relu(out)`` with ``nn.ReLU(inplace=True)``; the name
    gets the new value, so the in-place update inside the module is no update dycl loses."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 4)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.fc1(x))
        if out.mean() > 0.3:
            out = self.fc2(out)
            out = self.relu(out)
        return out + x


def test_an_inplace_module_on_a_name_it_rebinds_compiles(tmp_path):
    torch.manual_seed(1)
    model = ResidualBlock().eval()
    inputs = [(t,) for t in _inputs((3, 4))]
    compiled = dycl.compile(model, inputs[0])
    assert compiled.manifest.written_inputs == ()
    assert _check_calls(model, compiled, inputs) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report["checked"] == len(inputs) and report["problems"] == []
