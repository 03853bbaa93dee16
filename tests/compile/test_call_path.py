"""The per-call path of issue 29: inputs checked by a plan resolved once (refusing exactly what
``_check_input`` refuses), a positional call bound without ``Signature.bind``, sub-DNNs run
through ONNX Runtime's binding, and runtime outputs handed over without a copy, while
constants and inputs returned are still copied."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from dycl.hostgen import host_runtime
from dycl.hostgen.manifest import CallForm

import dycl
from dycl.harness.testing import assert_equivalent, outputs_match
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


class Gate(nn.Module):
    """A block that is skipped for easy inputs, an early exit, and a fallback that returns the
    input itself or a registered buffer: three ways an output can reach the caller."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Linear(8, 5)
        self.register_buffer("prior", torch.linspace(0, 1, 5).unsqueeze(0))

    def forward(self, x):
        if x.abs().mean() > 1.4:  # out of range: passed through untouched
            return x
        h = F.relu(self.stem(x))
        if h.mean() > 0.25:
            h = h + self.block(h)
        logits = self.head(h.mean((2, 3)))
        if logits.softmax(-1).max() < 0.21:
            return self.prior
        return logits


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(11)
    return [torch.randn(1, 3, 8, 8, generator=generator) * scale for scale in (0.2, 0.6, 1.0, 1.6, 2.2) * 8]


def _model() -> Gate:
    torch.manual_seed(2)
    return Gate().eval()


def test_outputs_agree_and_stay_the_callers_in_process_and_on_the_host(tmp_path):
    model, inputs = _model(), _inputs()
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=ATOL) >= 3
    for x in inputs:
        given = x.clone()
        first = compiled(x)
        second = compiled(x)
        assert first.data_ptr() != second.data_ptr() and first.data_ptr() != x.data_ptr()
        first.add_(100.0)  # an output the caller changes: the input, the buffer and the next call stay
        assert torch.equal(x, given)
        with torch.no_grad():
            assert outputs_match(model(x), second, atol=ATOL) is None
            assert outputs_match(model(x), compiled(x), atol=ATOL) is None
    compiled.save(tmp_path / "gate")
    loaded = dycl.load(tmp_path / "gate")
    assert assert_equivalent(model, loaded, inputs, min_paths=3, atol=ATOL) >= 3
    report = run_host_without_torch(tmp_path / "gate", model, inputs, ATOL)
    assert report["checked"] == len(inputs) and report["problems"] == []


def _random_spec(rng: random.Random, name: str) -> SimpleNamespace:
    dims = [rng.choice([1, 2, 3, "batch", "h", "2*h"]) for _ in range(rng.randint(0, 3))]
    return SimpleNamespace(name=name, dtype=rng.choice(["float32", "int64"]), shape=dims)


def _random_value(rng: random.Random, spec: SimpleNamespace):
    if rng.random() < 0.05:
        return 1.5  # not an array
    rank = len(spec.shape) + (rng.choice([-1, 1]) if rng.random() < 0.1 and spec.shape else 0)
    shape = [rng.choice([0, 1, 2, 3]) for _ in range(rank)]
    dtype = spec.dtype if rng.random() < 0.9 else rng.choice(["float64", "int32"])
    return np.zeros(shape, dtype=dtype)


def _refused(specs, arguments) -> bool:
    dims: dict = {}
    try:
        for spec in specs:
            host_runtime._check_input(spec, arguments[spec.name], dims)
    except (ValueError, TypeError):
        return True
    return False


def test_the_input_plan_accepts_exactly_what_check_input_accepts():
    rng = random.Random(29)
    outcomes = {True: 0, False: 0}
    for _ in range(3000):
        specs = [_random_spec(rng, name) for name in ("x", "y")[:rng.randint(1, 2)]]
        arguments = {spec.name: _random_value(rng, spec) for spec in specs}
        plan = tuple(host_runtime._input_plan(spec) for spec in specs)
        fits = host_runtime._inputs_fit(plan, arguments)
        assert fits is not _refused(specs, arguments), (specs, {k: np.shape(v) for k, v in arguments.items()})
        outcomes[fits] += 1
    assert min(outcomes.values()) >= 300, outcomes  # both answers, many times each


@pytest.mark.parametrize("names, kinds", [
    (("x", "n"), None),
    (("x", "mask"), ["POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"]),
    (("x", "extra"), ["POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL"]),
    (("x", "memory"), ["POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"]),
])
def test_a_positional_call_binds_as_the_signature_binds_it(monkeypatch, names, kinds):
    parameters = [[name, (kinds or ["POSITIONAL_OR_KEYWORD"] * len(names))[i], False] for i, name in enumerate(names)]
    call = dict(CallForm.plain(names, {}).to_host(), parameters=parameters)
    monkeypatch.setattr(host_runtime, "CALL", call)
    monkeypatch.setattr(host_runtime, "_SIGNATURE", host_runtime._signature(parameters))
    monkeypatch.setattr(host_runtime, "_POSITIONAL", host_runtime._positional(parameters))
    x, y = np.ones(2), np.zeros(3)
    for args, kwargs in [((x, y), {}), ((x,), {names[1]: y}), ((x, y, y), {}), ((x,), {})]:
        try:
            expected = host_runtime._SIGNATURE.bind(*args, **kwargs).arguments
        except TypeError:
            with pytest.raises(ValueError, match="the model takes forward"):
                host_runtime._bind(args, kwargs)
            continue
        if set(expected) != set(names):
            with pytest.raises(ValueError, match="missing argument"):
                host_runtime._bind(args, kwargs)
            continue
        bound = host_runtime._bind(args, kwargs)
        for name in names:  # the same arrays (a *args parameter: the same arrays in a tuple)
            got, want = bound[name], expected[name]
            assert got is want or (isinstance(want, tuple) and list(map(id, got)) == list(map(id, want)))
    variadic_or_keyword = kinds is not None and kinds[1] in ("VAR_POSITIONAL", "KEYWORD_ONLY")
    assert (host_runtime._POSITIONAL is None) == variadic_or_keyword


def test_sub_dnns_run_through_the_runtimes_binding_on_the_cpu():
    model, inputs = _model(), _inputs()
    compiled = dycl.compile(model, inputs[0])
    executables = [e for variants in compiled._host._variants.values() for e in variants.values()]
    assert executables and all(e._run == e.session._sess.run for e in executables)
