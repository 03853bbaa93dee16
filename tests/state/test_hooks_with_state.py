"""Forward hooks and pre-hooks that write module state compile (issue 27): the hooks are written
out at each call of their module and inlined like its methods, so what they write is module state
threaded through the compiled model. Each test calls eager and compiled in sequence, from twins
made with ``copy.deepcopy`` before compiling, compares every output and the state after every
call, and runs the saved artifact (``dycl.load`` and the torch-free host) on the same sequence."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


# -- hooks, as people write them -------------------------------------------------------------------


def track_activation_stats(model: nn.Module, momentum: float = 0.9) -> None:
    """Running mean and peak of every Linear's output, kept on the layer (a monitoring helper)."""

    def update(module, inputs, output):
        batch_mean = output.detach().mean(dim=0)
        module.act_mean.mul_(momentum).add_(batch_mean, alpha=1 - momentum)
        module.act_peak = torch.maximum(module.act_peak, output.detach().abs().amax(dim=0))
        module.batches += 1

    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            layer.register_buffer("act_mean", torch.zeros(layer.out_features))
            layer.register_buffer("act_peak", torch.zeros(layer.out_features))
            layer.batches = 0
            layer.register_forward_hook(update)


def count_calls(module, args, output):
    module.num_calls += 1


class EarlyExitNet(nn.Module):
    """Two stages with a confidence exit between them: which layers run depends on the input."""

    def __init__(self, threshold: float = 0.6):
        super().__init__()
        self.threshold = threshold
        self.stem = nn.Linear(6, 16)
        self.exit1 = nn.Linear(16, 4)
        self.stage2 = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = F.relu(self.stem(x))
        early = self.exit1(h)
        if F.softmax(early, dim=-1).max() > self.threshold:
            return early
        return self.head(torch.tanh(self.stage2(h)))


class WarmupClassifier(nn.Module):
    """Reads the call counter that a hook keeps on its encoder: warm-up calls take another path."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(5, 8)
        self.encoder.num_calls = 0
        self.encoder.register_forward_hook(count_calls)
        self.classifier = nn.Linear(8, 3)

    def forward(self, x):
        h = self.encoder(x)
        if self.encoder.num_calls <= 2:
            return self.classifier(h.detach()) * 0.0
        if h.mean() > 0:
            return self.classifier(F.relu(h))
        return self.classifier(h)


class FeatureTap(nn.Module):
    """A hook that is a method of the model: it changes the output and keeps what it saw."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)
        self.taps = []
        self.register_buffer("clipped", torch.zeros((), dtype=torch.long))
        self.body.register_forward_pre_hook(self._normalise_input)
        self.body.register_forward_hook(self._clip_and_keep)

    def _normalise_input(self, module, args):
        (x,) = args
        return x / (x.norm(dim=-1, keepdim=True) + 1e-6)

    def _clip_and_keep(self, module, args, output):
        self.taps.append(output.detach())
        self.clipped += (output.abs() > 0.5).sum()
        return output.clamp(-0.5, 0.5)

    def forward(self, x):
        h = self.body(x)
        if h.sum() > 0:
            return self.out(h)
        return self.out(-h) * 2


class Router(nn.Module):
    """Routes each batch to one of two experts; lambdas keep the last output of each layer on it."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(4, 1)
        self.experts = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.gate.register_forward_hook(lambda m, i, o: setattr(m, "last_output", o.detach()))
        for expert in self.experts:
            expert.register_forward_hook(lambda m, i, o: m.__dict__.update(last_output=o.detach(), seen=True))

    def forward(self, x):
        if self.gate(x).mean() > 0:
            return self.experts[0](x)
        return self.experts[1](x) * 0.5


class ResidualLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        return x + torch.relu(self.fc(x)) * scale


class DepthAdaptive(nn.Module):
    """Stops at the first layer whose output is confident enough: deeper layers run less often."""

    def __init__(self, depth: int = 3):
        super().__init__()
        self.layers = nn.ModuleList([ResidualLayer() for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x, scale=0.9)
            if x.mean() > 0.5:
                return x
        return -x


def count_visits(module, args, kwargs, output):
    module.visits += 1
    module.last_scale = kwargs["scale"]


# -- the sequence check ------------------------------------------------------------------------------


def _state(model: nn.Module) -> dict:
    """Every buffer and parameter, and every number, tensor or list of tensors on every module."""
    found = {f"tensor {k}": v.detach().clone() for k, v in model.state_dict().items()}
    for name, module in model.named_modules():
        for key, value in vars(module).items():
            if isinstance(value, (bool, int, float)) and not key.startswith("_") and key != "training":
                found[f"{name}.{key}"] = value
            elif isinstance(value, torch.Tensor) and not key.startswith("_"):  # set by a hook, no buffer
                found[f"{name}.{key}"] = value.clone()
            elif isinstance(value, list) and all(isinstance(v, torch.Tensor) for v in value):
                found[f"{name}.{key}"] = [v.clone() for v in value]
    return found


def _run(model: nn.Module, twin: nn.Module, compiled, inputs: list) -> int:
    """Compiled and eager twin on ``inputs`` in order: outputs and state equal after every call; the
    number of distinct eager paths."""
    files, paths = model_source_files(twin), set()
    for step, x in enumerate(inputs):
        with torch.no_grad():
            expected, path = record_path(twin, x, files=files)
            actual = compiled(x)
        paths.add(path)
        assert outputs_match(expected, actual, ATOL) is None, f"call #{step}"
        problem = outputs_match(_state(twin), _state(model), ATOL)
        assert problem is None, f"after call #{step}: {problem}"
    return len(paths)


def _check_saved(tmp_path, compiled, fresh: nn.Module, inputs: list) -> None:
    """The saved artifact on ``inputs`` in order against ``fresh`` (the model as compiled): outputs, and
    the state ``dycl.load``'s host keeps; then the torch-free host on the same sequence."""
    compiled.save(tmp_path / "artifact")
    loaded, eager = dycl.load(tmp_path / "artifact"), copy.deepcopy(fresh)
    for step, x in enumerate(inputs):
        with torch.no_grad():
            assert outputs_match(eager(x), loaded(x), ATOL) is None, f"loaded, call #{step}"
    assert compiled._result.rewritten.state
    for state in compiled._result.rewritten.state:  # what the host keeps is what eager holds
        expected = functools.reduce(getattr, state.path.split("."), eager)
        kept = loaded._host.state[state.parameter]
        kept = [torch.as_tensor(v) for v in kept] if isinstance(kept, list) else (
            torch.as_tensor(kept) if isinstance(expected, torch.Tensor) else kept)
        assert outputs_match(expected, kept, ATOL) is None, state.path
    report = run_host_without_torch(tmp_path / "artifact", copy.deepcopy(fresh), inputs, ATOL)
    assert report["checked"] == len(inputs) and not report["problems"], report


def _inputs(seed: int, count: int, shape: tuple) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    scales = (0.2, 3.0, -2.0, 0.5, 4.0)
    return [torch.randn(*shape, generator=generator) * scales[i % len(scales)] for i in range(count)]


def _compiled(model: nn.Module, example: torch.Tensor, **options):
    twin, fresh = copy.deepcopy(model), copy.deepcopy(model)
    compiled = dycl.compile(model, example, **options)
    assert outputs_match(_state(fresh), _state(model), 0.0) is None  # compiling changed nothing
    return twin, fresh, compiled


# -- tests ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_activation_statistics_hooks_on_every_linear(tmp_path, backend):
    torch.manual_seed(0)
    model = EarlyExitNet().eval()
    track_activation_stats(model)
    twin, fresh, compiled = _compiled(model, torch.randn(1, 6), backend=backend)
    inputs = _inputs(1, 12, (1, 6))
    assert _run(model, twin, compiled, inputs) == 2  # the early exit and the second stage
    assert 0 < model.head.batches < model.stem.batches == len(inputs)  # only the path taken counts
    if backend == "onnxruntime":
        _check_saved(tmp_path, compiled, fresh, inputs)


def test_a_call_counter_hook_read_by_forward(tmp_path):
    torch.manual_seed(1)
    model = WarmupClassifier().eval()
    twin, fresh, compiled = _compiled(model, torch.randn(2, 5))
    inputs = _inputs(2, 10, (2, 5))
    assert _run(model, twin, compiled, inputs) == 3  # warm-up, relu, plain
    assert model.encoder.num_calls == 10
    _check_saved(tmp_path, compiled, fresh, inputs)


def test_method_hooks_that_change_the_input_and_output_and_keep_what_they_saw(tmp_path):
    torch.manual_seed(2)
    model = FeatureTap().eval()
    twin, fresh, compiled = _compiled(model, torch.randn(3, 4))
    inputs = _inputs(3, 8, (3, 4))
    assert _run(model, twin, compiled, inputs) == 2
    assert len(model.taps) == len(inputs) and model.clipped.item() > 0
    _check_saved(tmp_path, compiled, fresh, inputs)


def test_lambda_hooks_that_keep_the_last_output_on_their_layer(tmp_path):
    torch.manual_seed(3)
    model = Router().eval()
    twin, fresh, compiled = _compiled(model, torch.randn(2, 4))
    assert not hasattr(model.gate, "last_output")  # compiling ran no hook
    inputs = _inputs(4, 8, (2, 4))
    assert _run(model, twin, compiled, inputs) == 2  # one expert or the other
    assert all(hasattr(expert, "last_output") for expert in model.experts)
    _check_saved(tmp_path, compiled, fresh, inputs)


def test_a_read_of_an_attribute_a_hook_creates_is_refused_at_its_line():
    class ReadsBack(Router):
        def forward(self, x):
            y = self.experts[0](x)
            return y + self.experts[0].last_output  # MARK

    model = ReadsBack().eval()
    with pytest.raises(dycl.UnsupportedError, match="a read of experts.0.last_output, an attribute that forward"
                                                    r"\(\) or a hook creates") as info:
        dycl.compile(model, torch.randn(2, 4))
    assert info.value.location.line == ReadsBack.forward.__code__.co_firstlineno + 2


def test_a_dict_update_that_would_shadow_a_buffer_is_refused():
    model = EarlyExitNet().eval()
    model.head.register_buffer("last", torch.zeros(4))
    model.head.register_forward_hook(lambda m, i, o: m.__dict__.update(last=o.detach()))
    with pytest.raises(dycl.UnsupportedError, match="updates __dict__ with 'last', a parameter, buffer or submodule"):
        dycl.compile(model, torch.randn(1, 6))


def test_hooks_with_kwargs_registered_in_a_loop_count_the_depth_reached(tmp_path):
    torch.manual_seed(4)
    model = DepthAdaptive().eval()
    for layer in model.layers:
        layer.visits, layer.last_scale = 0, 0.0
        layer.register_forward_hook(count_visits, with_kwargs=True)
    twin, fresh, compiled = _compiled(model, torch.randn(2, 4))
    inputs = [x + 0.4 for x in _inputs(5, 10, (2, 4))]
    assert _run(model, twin, compiled, inputs) == 3  # stopped after the first, second layer, or not at all
    visits = [layer.visits for layer in model.layers]
    assert visits[0] == len(inputs) and visits[0] > visits[2] > 0
    _check_saved(tmp_path, compiled, fresh, inputs)


def test_a_hook_writing_a_dict_outside_the_model_is_refused_at_its_line():
    model = EarlyExitNet().eval()
    activations: dict[str, torch.Tensor] = {}

    def save_activation(module, args, output):
        activations["stage2"] = output.detach()

    model.stage2.register_forward_hook(save_activation)
    with pytest.raises(dycl.UnsupportedError, match="writes an item of 'activations', which is not "
                                                    "state of a module of the model") as info:
        dycl.compile(model, torch.randn(1, 6))
    assert info.value.location.line == save_activation.__code__.co_firstlineno
    assert not activations


def test_a_stateful_hook_inside_a_module_traced_as_one_graph_is_refused_at_the_call():
    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            h = self.layer(x)  # MARK
            if h.mean() > 0:
                return self.head(h)
            return -self.head(h)

    model = Encoder().eval()
    model.layer.linear1.num_calls = 0
    model.layer.linear1.register_forward_hook(count_calls)
    with pytest.raises(dycl.UnsupportedError, match=r"a call of self.layer, compiled as one graph, inside which "
                                                    r"submodule 'linear1' runs a hook that writes state") as info:
        dycl.compile(model, torch.randn(2, 3, 8))
    assert info.value.location.path == __file__
    assert model.layer.linear1.num_calls == 0
