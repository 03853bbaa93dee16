"""forward() signatures as real models have them, called the way the example was,
and outputs as the framework returns them (``dycl.model.signature``, ``dycl.model.library``,
``dycl.model.outputs``): in-process and through the torch-free host."""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import Call, run_host_without_torch

ATOL = 1e-5
_OFFSET = torch.linspace(-1.0, 1.0, 4)

Prediction = namedtuple("Prediction", ["logits", "score"])


class Flexible(nn.Module):
    """Extra positional tensors, a keyword-only scale, an optional mask and options."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, *extra, scale=1.0, mask=None, **options):
        h = self.fc(x)
        if mask is not None:
            h = h * mask
        for e in extra:
            h = h + e
        if "bias" in options:
            h = h + options["bias"]
        if h.sum() > 0:
            return h * scale
        return -h


class WithDefaultTensor(nn.Module):
    def forward(self, x, offset=_OFFSET):
        if x.mean() > 0:
            return x + offset
        return x - offset


class KeywordOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, *, memory, steps: int = 2):
        h = self.fc(x)
        for _ in range(steps):
            if (h * memory).sum() > 0:
                h = h - memory
        return h


class NamedOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        logits = self.fc(x)
        if logits.max() > 0.5:
            return Prediction(logits, logits.softmax(-1).max())
        return Prediction(-logits, logits.sum())


def _tensors(count: int, *shapes: tuple[int, ...], seed: int = 0) -> list[list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [[torch.randn(*shape, generator=generator) for shape in shapes] for _ in range(count)]


def _agree(model: nn.Module, compiled, calls: list[Call]) -> int:
    """Assert equal outputs on every call; return the number of distinct eager paths."""
    files = model_source_files(model)
    paths = set()
    for i, call in enumerate(calls):
        with torch.no_grad():
            expected, path = record_path(model, *call.args, files=files, **call.kwargs)
        paths.add(path)
        problem = outputs_match(expected, compiled(*call.args, **call.kwargs), ATOL)
        assert problem is None, f"call #{i}: {problem}"
    return len(paths)


def _host_agrees(model: nn.Module, compiled, calls: list[Call], tmp_path) -> None:
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, calls, ATOL)
    assert report["problems"] == [] and report["checked"] == len(calls)


def test_star_args_keyword_only_optional_and_kwargs_bound_from_the_example(tmp_path):
    torch.manual_seed(0)
    model = Flexible().eval()
    calls = [Call((x, e), {"mask": (m > 0).float(), "bias": b, "scale": 0.5})
             for x, e, m, b in _tensors(16, (2, 4), (2, 4), (2, 4), (2, 4))]
    compiled = dycl.compile(model, calls[0].args, kwargs=calls[0].kwargs)
    assert _agree(model, compiled, calls) == 2
    _host_agrees(model, compiled, calls, tmp_path)
    assert [(name, key) for _, name, key in compiled.manifest["call"]["inputs"]] == [
        ("x", None), ("extra", 0), ("mask", None), ("options", "bias")]


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((1,), {}, "'extra': the model was compiled for 1 (arguments), got 2"),
    ((), {"bias": None, "other": 1}, "'options': the model was compiled for ['bias']"),
    ((), {"scale": 2.0}, "argument 'scale' was compiled as 0.5, got 2.0"),
    ((), {"mask": None}, "argument 'mask' was compiled as 0.5, got None"),
])
def test_another_call_form_is_refused(args, kwargs, message):
    model = Flexible().eval()
    x, e, b = torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4)
    compiled = dycl.compile(model, (x, e), kwargs={"bias": b, "scale": 0.5, "mask": 0.5})
    call_kwargs = {"bias": b, "scale": 0.5, "mask": 0.5, **kwargs}
    if call_kwargs["bias"] is None:
        call_kwargs["bias"] = b
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        compiled(x, e, *([e] * len(args)), **call_kwargs)


def test_left_out_optional_tensor_is_compiled_as_none_and_passing_it_is_refused():
    model = Flexible().eval()
    x = torch.randn(2, 4)
    compiled = dycl.compile(model, x)
    assert _agree(model, compiled, [Call((t,), {}) for (t,) in _tensors(12, (2, 4))]) == 2
    with pytest.raises(ValueError, match="argument 'mask' was compiled as None"):
        compiled(x, mask=torch.ones(2, 4))


def test_a_default_that_is_not_a_literal_is_a_constant_of_the_compiled_model(tmp_path):
    model = WithDefaultTensor().eval()
    calls = [Call((x,), {}) for (x,) in _tensors(12, (4,), seed=1)]
    compiled = dycl.compile(model, calls[0].args)
    assert _agree(model, compiled, calls) == 2
    _host_agrees(model, compiled, calls, tmp_path)
    with pytest.raises(ValueError, match="'offset' was left at its default"):
        compiled(calls[0].args[0], _OFFSET)


def test_keyword_only_parameters_and_examples_given_as_kwargs(tmp_path):
    torch.manual_seed(0)
    model = KeywordOnly().eval()
    calls = [Call((), {"x": x, "memory": m}) for x, m in _tensors(16, (2, 4), (2, 4), seed=2)]
    compiled = dycl.compile(model, kwargs=calls[0].kwargs)
    assert _agree(model, compiled, calls) >= 2
    assert _agree(model, compiled, [Call((c.kwargs["x"],), {"memory": c.kwargs["memory"]}) for c in calls]) >= 2
    _host_agrees(model, compiled, calls, tmp_path)


def test_a_namedtuple_output_is_rebuilt_in_process_and_a_tuple_in_the_host(tmp_path):
    torch.manual_seed(0)
    model = NamedOutput().eval()
    calls = [Call((x,), {}) for (x,) in _tensors(16, (1, 4), seed=3)]
    compiled = dycl.compile(model, calls[0].args)
    assert _agree(model, compiled, calls) == 2
    assert type(compiled(*calls[0].args)) is Prediction
    assert compiled.manifest["output"]["type"].endswith("Prediction")
    assert compiled.manifest["output"]["returned_as"] == "tuple"
    _host_agrees(model, compiled, calls, tmp_path)


class PopsOptions(nn.Module):
    """``**kwargs`` changed in place: lookups after the pop must see the change."""

    def forward(self, x, **options):
        bias = options.pop("bias", None)
        if "bias" in options:
            x = x * 100
        if bias is not None:
            x = x + bias
        if x.sum() > 0:
            return x
        return -x


def test_kwargs_changed_in_place_are_not_folded_to_the_example():
    model = PopsOptions().eval()
    calls = [Call((x,), {"bias": b}) for x, b in _tensors(12, (2, 4), (2, 4), seed=4)]
    try:
        compiled = dycl.compile(model, calls[0].args, kwargs=calls[0].kwargs)
    except dycl.UnsupportedError:
        return  # refusing is sound; folding "bias" in options to True would not be
    assert _agree(model, compiled, calls) == 2
