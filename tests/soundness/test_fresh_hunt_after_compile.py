"""Fresh hunt, family 13: the model or the process changed after ``dycl.compile`` in ways that are
neither a weight, a global nor an attribute the user's code read: a submodule replaced
(``model.fc = nn.Linear(...)``, ``model.act = nn.GELU()``), a torch layer's setting rebound
(``norm.eps``, ``LeakyReLU.negative_slope``), a forward hook or pre-hook registered or removed
(on a module or globally), an instance ``forward`` patched on, and ``torch.set_default_dtype``.
Each made the in-process model silently disagree with eager; each is now refused on the next
call, by name. An equal setting rebound, or a hook registered and removed elsewhere, is no change."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn as nn
from torch.nn.modules.module import register_module_forward_hook

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from dycl.in_process.config_guard import StaleConfigError
from dycl.in_process.dtype_guard import StaleDefaultDtypeError
from dycl.in_process.globals_guard import StaleGlobalsError
from dycl.in_process.structure_guard import StaleStructureError
from tests.soundness.fresh_hunt import seeded


class MlpBlock(nn.Module):  # timm-style: linear, norm, activation, and a data-dependent residual gate
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.act = nn.LeakyReLU(0.1)

    def forward(self, x):
        y = self.act(self.norm(self.fc(x)))
        if y[..., 0].sum() > 0:
            return x + y
        return x - y


class PositionScale(nn.Module):  # positions made with the default dtype, as many embeddings do
    def forward(self, x):
        positions = torch.arange(0.0, x.shape[-1]) / x.shape[-1]
        if x.sum() > 0:
            return x * positions
        return x - torch.tensor(0.5) * positions


def _inputs(seed: int) -> list[torch.Tensor]:
    g = seeded(seed)
    return [torch.randn(2, 4, generator=g) * 2 + (i % 2 - 0.5) * 3 for i in range(50)]


def _compiled_agreeing(model: nn.Module, inputs: list[torch.Tensor], tmp_path) -> dycl.CompiledModel:
    model.eval()
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, inputs, atol=1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report["problems"][:3]
    return compiled


def _add_hook(model):
    model.fc.register_forward_hook(lambda module, args, output: output.relu())


def _add_pre_hook(model):
    model.register_forward_pre_hook(lambda module, args: (args[0] * 2,))


def _patch_forward(model):
    model.act.forward = lambda x: x * 100


CHANGES = {  # what changes, and the name the refusal must give
    "replace_submodule": (lambda model: setattr(model, "fc", nn.Linear(4, 4)), r"model\.fc\b"),
    "swap_activation": (lambda model: setattr(model, "act", nn.GELU()), r"model\.act\b"),
    "layer_epsilon": (lambda model: setattr(model.norm, "eps", 10.0), r"model\.norm\.eps"),
    "leaky_slope": (lambda model: setattr(model.act, "negative_slope", 0.5), r"model\.act\.negative_slope"),
    "forward_hook": (_add_hook, "forward hooks"),
    "pre_hook": (_add_pre_hook, "forward hooks"),
    "instance_forward": (_patch_forward, r"model\.act\.forward"),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_structure_change_after_compile_is_refused(name, tmp_path):
    change, where = CHANGES[name]
    torch.manual_seed(0)
    model = MlpBlock()
    inputs = _inputs(301)
    compiled = _compiled_agreeing(model, inputs, tmp_path)
    change(model)
    with torch.no_grad():
        assert any(not torch.allclose(model(x), _unguarded(compiled, x))
                   for x in inputs), "the change must matter to eager"
    with pytest.raises(StaleStructureError, match=where):
        compiled(inputs[1])


def _unguarded(compiled: dycl.CompiledModel, x: torch.Tensor) -> torch.Tensor:
    """What the compiled model computes, its guards aside: what it returned before they refused."""
    guard, compiled._call_guard = compiled._call_guard, None
    try:
        return compiled(x)
    finally:
        compiled._call_guard = guard


def test_hook_removed_after_compile_is_refused(tmp_path):
    torch.manual_seed(0)
    model = MlpBlock()
    handle = model.fc.register_forward_hook(lambda module, args, output: output.clamp(-0.5, 0.5))
    inputs = _inputs(302)
    compiled = _compiled_agreeing(model, inputs, tmp_path)
    handle.remove()
    with pytest.raises(StaleStructureError, match="forward hooks"):
        compiled(inputs[0])


def test_global_hook_after_compile_is_refused(tmp_path):
    torch.manual_seed(0)
    model = MlpBlock()
    inputs = _inputs(303)
    compiled = _compiled_agreeing(model, inputs, tmp_path)
    handle = register_module_forward_hook(lambda module, args, output: output * 2 if module is model.fc else None)
    try:
        with pytest.raises(StaleStructureError, match="forward hooks"):
            compiled(inputs[0])
    finally:
        handle.remove()
    assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5)  # removed again: the same hooks as then


def test_equal_setting_and_unrelated_hooks_are_no_change(tmp_path):
    torch.manual_seed(0)
    model = MlpBlock()
    inputs = _inputs(304)
    compiled = _compiled_agreeing(model, inputs, tmp_path)
    model.norm.eps = float("1e-5")  # another float object, the same value
    model.act.negative_slope = 0.1
    other = nn.Linear(4, 4)
    other.register_forward_hook(lambda module, args, output: output)  # a hook on another model
    model.step = 7  # bookkeeping on the user's own module
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2


def test_default_dtype_changed_after_compile_is_refused(tmp_path):
    model = PositionScale()
    inputs = _inputs(305)
    compiled = _compiled_agreeing(model, inputs, tmp_path)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with torch.no_grad():
            assert model(inputs[0]).dtype == torch.float64 and _unguarded(compiled, inputs[0]).dtype == torch.float32
        with pytest.raises(StaleDefaultDtypeError, match="float64.*float32"):
            compiled(inputs[0])
    finally:
        torch.set_default_dtype(previous)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2  # set back: agrees again


CHANNEL_MASK = torch.ones(4)  # a module-level tensor, as pruning scripts and fairseq-style masks keep them
DEFAULT_SCALE = torch.ones(4)


class MaskedGate(nn.Module):
    def forward(self, x):
        y = x * CHANNEL_MASK
        if y.sum() > 0:
            return y
        return -y


class ScaledByDefault(nn.Module):  # a tensor default, positional as in many ``forward(x, scale=...)``
    def forward(self, x, scale=DEFAULT_SCALE):
        y = x * scale
        if y.sum() > 0:
            return y
        return -y


class ScaledByKeyword(nn.Module):  # ... and keyword-only
    def forward(self, x, *, scale=DEFAULT_SCALE):
        y = x * scale
        if y.sum() > 0:
            return y
        return -y


def _prune_channel(model):
    CHANNEL_MASK[1] = 0.0


def _scale_default_in_place(model):
    DEFAULT_SCALE.mul_(3)


def _rebind_positional_default(model):
    type(model).forward.__defaults__ = (torch.full((4,), 3.0),)


def _rebind_keyword_default(model):
    type(model).forward.__kwdefaults__["scale"] = torch.full((4,), 3.0)


READS = {  # the model, what changes, and the name the refusal must give
    "global_tensor_in_place": (MaskedGate, _prune_channel, "CHANNEL_MASK"),
    "positional_default_in_place": (ScaledByDefault, _scale_default_in_place,
                                    r"ScaledByDefault\.forward\.__defaults__"),
    "positional_default_rebound": (ScaledByDefault, _rebind_positional_default,
                                   r"ScaledByDefault\.forward\.__defaults__"),
    "keyword_default_in_place": (ScaledByKeyword, _scale_default_in_place, "'scale' in the defaults of"),
    "keyword_default_rebound": (ScaledByKeyword, _rebind_keyword_default, "'scale' in the defaults of"),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_tensor_read_from_outside_changed_after_compile_is_refused(name, tmp_path):
    build, change, where = READS[name]
    model = build()
    saved = (CHANNEL_MASK.clone(), DEFAULT_SCALE.clone(), type(model).forward.__defaults__,
             dict(type(model).forward.__kwdefaults__ or {}))
    try:
        inputs = _inputs(306)
        compiled = _compiled_agreeing(model, inputs, tmp_path)
        change(model)
        with torch.no_grad():
            assert any(not torch.allclose(model(x), _unguarded(compiled, x)) for x in inputs)
        with pytest.raises(StaleGlobalsError, match=where):
            compiled(inputs[0])
    finally:
        CHANNEL_MASK.copy_(saved[0])
        DEFAULT_SCALE.copy_(saved[1])
        type(model).forward.__defaults__ = saved[2]
        if saved[3]:
            type(model).forward.__kwdefaults__ = saved[3]


@dataclasses.dataclass
class BlockConfig:  # a config object shared by the layers, as Hugging Face models share theirs
    threshold: float = 0.0
    scale: float = 2.0


class ScaledChild(nn.Module):  # branch-free: exported whole, so the exporter reads its settings
    def __init__(self, config: BlockConfig):
        super().__init__()
        self.config = config
        self.bias = 0.5

    def forward(self, x):
        return x * self.config.scale + self.bias


class ConfiguredModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = BlockConfig()
        self.child = ScaledChild(self.config)

    def forward(self, x):
        y = self.child(x)
        if y.mean() > self.config.threshold:
            return y
        return -y


def _set(path: str, value: float):
    def change(model):
        owner_path, _, name = path.rpartition(".")
        owner = model
        for part in owner_path.split("."):
            owner = getattr(owner, part)
        setattr(owner, name, value)
    return change


SETTINGS = {  # what changes, the error, and the name it must give
    "config_read_by_forward": (_set("config.threshold", 5.0), StaleConfigError, r"BlockConfig\.threshold"),
    "shared_config_read_by_exported_child": (_set("child.config.scale", 5.0), StaleStructureError,
                                             r"model\.child\.config\.scale"),
    "plain_setting_of_exported_child": (_set("child.bias", -3.0), StaleStructureError, r"model\.child\.bias"),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_setting_changed_after_compile_is_refused(name, tmp_path):
    change, error, where = SETTINGS[name]
    torch.manual_seed(0)
    model = ConfiguredModel()
    inputs = _inputs(307)
    compiled = _compiled_agreeing(model, inputs, tmp_path)
    change(model)
    with torch.no_grad():
        assert any(not torch.allclose(model(x), _unguarded(compiled, x)) for x in inputs)
    with pytest.raises(error, match=where):
        compiled(inputs[0])


class FastPathChild(nn.Module):  # the SDN idiom: the instance's forward set to another method in __init__
    def __init__(self):
        super().__init__()
        self.gain = 2.0
        self.forward = self.fast_forward

    def forward(self, x):
        return x

    def fast_forward(self, x):
        return x * self.gain


class WithFastPathChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = FastPathChild()

    def forward(self, x):
        y = self.child(x)
        if y.sum() > 0:
            return y
        return -y


def test_setting_read_by_an_instance_forward_changed_after_compile_is_refused(tmp_path):
    model = WithFastPathChild()
    inputs = _inputs(308)
    compiled = _compiled_agreeing(model, inputs, tmp_path)
    model.child.gain = 7.0
    with torch.no_grad():
        assert any(not torch.allclose(model(x), _unguarded(compiled, x)) for x in inputs)
    with pytest.raises(StaleStructureError, match=r"model\.child\.gain"):
        compiled(inputs[0])


PROJECTION = torch.arange(16.0).reshape(4, 4) / 10  # a module-level matrix, as fixed projections are kept


class ProjectedGate(nn.Module):
    def forward(self, x):
        y = x @ PROJECTION
        if y.sum() > 0:
            return y
        return -y


def test_global_tensor_given_another_view_of_its_memory_is_refused(tmp_path):
    # ``.data = .data.t()`` keeps the data pointer and the version counter: only the layout moves
    saved = PROJECTION.data
    model = ProjectedGate()
    try:
        inputs = _inputs(307)
        compiled = _compiled_agreeing(model, inputs, tmp_path)
        PROJECTION.data = PROJECTION.data.t()
        with torch.no_grad():
            assert any(not torch.allclose(model(x), _unguarded(compiled, x)) for x in inputs)
        with pytest.raises(StaleGlobalsError, match="PROJECTION"):
            compiled(inputs[0])
    finally:
        PROJECTION.data = saved
