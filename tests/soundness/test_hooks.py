"""Issue 26 item 3: forward hooks and pre-hooks are part of the call they belong to.

Hooks on submodules that dycl keeps opaque are traced with the call (compiled);
hooks on a forward dycl inlines, and hooks that write Python state, are refused
by name."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class Backbone(nn.Module):
    """A feature extractor followed by an early exit, as such models are written."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(6, 8), nn.ReLU())
        self.body = nn.Linear(8, 8)
        self.exit = nn.Linear(8, 3)
        self.head = nn.Linear(8, 3)

    def forward(self, x, scale: float = 1.0):
        h = self.stem(x)
        if h.mean() > 0.3:
            return self.exit(h)
        return self.head(torch.tanh(self.body(h))) * scale


def _model() -> Backbone:
    torch.manual_seed(1)
    return Backbone().eval()


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(3, 6, generator=generator) * s + b for s in (0.3, 1.0) for b in (-1.0, 0.0, 1.5)
            for _ in range(2)]


def _check(model: nn.Module, tmp_path) -> int:
    compiled = dycl.compile(model, _inputs()[0])
    paths = assert_equivalent(model, compiled, _inputs(), atol=1e-5)
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, _inputs(), atol=1e-5)
    assert report["checked"] == len(_inputs()) and not report["problems"], report
    return paths


def _pre_scale(module, args):
    return (args[0] * 2.0,)


def _clip_output(module, args, kwargs, output):
    return output.clamp(-0.2, 0.2)


def test_hooks_on_opaque_submodules_are_compiled(tmp_path):
    model = _model()
    plain = model(_inputs()[3])
    model.body.register_forward_hook(lambda m, i, o: o + 100)
    model.stem.register_forward_pre_hook(_pre_scale)
    model.exit.register_forward_hook(_clip_output, with_kwargs=True, always_call=True)
    model.head.register_forward_hook(lambda m, i, o: None)  # returns None: the output stays
    assert not torch.allclose(model(_inputs()[3]), plain)  # the hooks matter
    assert _check(model, tmp_path) == 2


def test_a_pre_hook_on_a_nested_opaque_child_is_compiled(tmp_path):
    model = _model()
    model.stem[0].register_forward_pre_hook(functools.partial(lambda factor, m, args: (args[0] * factor,), -1.0))
    assert _check(model, tmp_path) == 2


def test_a_hook_storing_activations_is_refused_at_its_line():
    model = _model()
    features: dict[str, torch.Tensor] = {}

    def keep(module, args, output):
        features["body"] = output.detach()  # writes Python state

    model.body.register_forward_hook(keep)
    with pytest.raises(dycl.UnsupportedError, match=r"forward hook .*keep on submodule 'body'.*stores into an item") \
            as info:
        dycl.compile(model, _inputs()[0])
    assert info.value.location.path == __file__
    assert info.value.location.line == keep.__code__.co_firstlineno
    assert not features  # compiling ran nothing that the refusal hid


class Recorder:
    def __init__(self):
        self.outputs = []

    def __call__(self, module, args, output):
        self.outputs.append(output)


def _log(store, output):
    store.append(output.shape)


@pytest.mark.parametrize("hook", [Recorder(), lambda m, i, o: _log(_LOG, o)], ids=["callable", "helper"])
def test_hooks_reaching_state_writes_are_refused(hook):
    model = _model()
    model.exit.register_forward_hook(hook)
    with pytest.raises(dycl.UnsupportedError, match="submodule 'exit'"):
        dycl.compile(model, _inputs()[0])


_LOG: list = []


def test_hooks_on_the_model_are_compiled(tmp_path):
    model = _model()

    def add_bias(module, args, output):
        return output + 1

    model.register_forward_hook(add_bias)
    model.register_forward_pre_hook(lambda module, args: (args[0] - 0.5,))
    model.register_forward_hook(lambda module, args, kwargs, output: output * args[0].shape[1], with_kwargs=True)
    assert _check(model, tmp_path) == 2


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x, gain: float = 1.0):
        if x.sum() > 0:
            return self.fc(x) * gain
        return x


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = Gated()
        self.blocks = nn.ModuleList([Gated(), Gated()])
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        h = self.gate(x, gain=2.0) + 1  # inlined: Gated.forward branches on data
        for block in self.blocks:
            h = block(h)
        return self.out(h)


def _outer_inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(2, 6, generator=generator) * 2 + b for b in (-2.0, -0.5, 0.5, 2.0) for _ in range(3)]


def _check_outer(model: nn.Module, tmp_path) -> int:
    inputs = _outer_inputs()
    compiled = dycl.compile(model, inputs[0])
    paths = assert_equivalent(model, compiled, inputs, atol=1e-5)
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, inputs, atol=1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report
    return paths


def test_hooks_on_inlined_submodules_are_compiled(tmp_path):
    torch.manual_seed(0)
    model = Outer().eval()
    model.gate.register_forward_pre_hook(lambda m, args: (args[0] + 1,))
    model.gate.register_forward_hook(lambda m, args, kwargs, out: out * kwargs["gain"], with_kwargs=True)
    model.blocks[0].register_forward_hook(lambda m, i, o: o - 3)
    model.blocks[1].register_forward_pre_hook(lambda m, args: args[0].flip(0))  # one value: made a 1-tuple
    model.blocks[1].register_forward_hook(lambda m, i, o: None)
    assert _check_outer(model, tmp_path) >= 4


def test_a_hook_that_decides_on_data_is_refused_at_its_line():
    torch.manual_seed(0)
    model = Outer().eval()

    def double_if_positive(module, args, output):
        if output.sum() > 0:  # a decision on data inside a hook
            return output * 2
        return None

    model.gate.register_forward_hook(double_if_positive)
    with pytest.raises(dycl.UnsupportedError) as info:
        dycl.compile(model, torch.randn(2, 6))
    assert info.value.location.line == double_if_positive.__code__.co_firstlineno + 1


def test_a_pre_hook_with_kwargs_on_an_inlined_submodule_is_refused_at_the_call():
    torch.manual_seed(0)
    model = Outer().eval()
    model.gate.register_forward_pre_hook(lambda m, args, kwargs: (args, kwargs), with_kwargs=True)
    with pytest.raises(dycl.UnsupportedError, match=r"forward pre-hook .*with_kwargs") as info:
        dycl.compile(model, torch.randn(2, 6))
    assert info.value.location.source_line().strip().startswith("h = self.gate(x, gain=2.0)")


def test_a_global_module_hook_is_compiled(tmp_path):
    torch.manual_seed(0)
    model = Outer().eval()
    handle = nn.modules.module.register_module_forward_hook(
        lambda m, i, o: o * 0.5 if isinstance(m, nn.Linear) else None)
    try:
        assert _check_outer(model, tmp_path) >= 4
    finally:
        handle.remove()


class Shift(nn.Module):
    """A block with a data-dependent branch, used inside a library container."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        if x.mean() > 0:
            return self.fc(x)
        return x - 1


def test_hooks_on_a_library_model_see_the_arguments_as_eager_does(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 6), Shift(), nn.Tanh()).eval()  # torch's own forward: library code
    model.register_forward_pre_hook(lambda m, args: (args[0] * 3,))  # args[0]: called positionally
    model.register_forward_hook(lambda m, args, out: out + args[0].mean())
    model[1].register_forward_hook(lambda m, args, out: out * 0.5)
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(2, 6, generator=generator) + b for b in (-1.0, 1.0) for _ in range(4)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, inputs, atol=1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report


class Summed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, *parts):
        h = self.fc(sum(parts))
        if h.mean() > 0:
            return h
        return -h


def test_a_hook_on_a_model_with_star_args_is_refused_by_name():
    torch.manual_seed(0)
    model = Summed().eval()

    def shift(module, args):
        return tuple(a + 1 for a in args)

    model.register_forward_pre_hook(shift)
    with pytest.raises(dycl.UnsupportedError, match=r"forward pre-hook .*shift, defined at .*test_hooks\.py:\d+ on "
                                                    r"the model \(Summed\).*\*args"):
        dycl.compile(model, (torch.randn(2, 6), torch.randn(2, 6)))


class ClampsItsInput(nn.Module):
    """Clamps its argument in place, then exits early on confident inputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        x.clamp_(-1.0, 1.0)
        x = torch.tanh(x) + x
        if x.abs().mean() > 1.2:
            return self.fc(x)
        return self.fc(x) * 0.5


def test_forward_updating_the_tensor_a_pre_hook_returned(tmp_path):
    """The pre-hook's result is a new tensor that only forward reads: forward's in-place update of
    it is not one of another name (fuzz seed 3031 program 953), and the caller's input is untouched."""
    torch.manual_seed(2)
    model = ClampsItsInput().eval()
    model.register_forward_pre_hook(lambda module, args: (args[0] * 2.0,))
    inputs = _inputs()
    originals = [x.clone() for x in inputs]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, atol=1e-5) == 2
    assert all(torch.equal(x, original) for x, original in zip(inputs, originals))
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, inputs, atol=1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report
