"""Fresh hunt, family 2: Python object protocols on modules (``@property`` from buffers,
``__getitem__``/``__getattr__`` overrides, stored ``functools.partial``, class constants,
``getattr(self, f"expert{i}")`` and ``ModuleDict`` keys from data, recursion on data)."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from tests.soundness.fresh_hunt import Case, at, check_case, seeded


def _randn(seed, shape=(1, 4), spread=4):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) * (0.3 + i % spread) for i in range(50)]
    return make


class TemperatureProperty(nn.Module):  # CLIP-style learned log-temperature read by a property
    def __init__(self):
        super().__init__()
        self.register_buffer("log_temp", torch.tensor(0.7))
        self.fc = nn.Linear(4, 3)

    @property
    def temperature(self):
        return self.log_temp.exp().clamp(max=100)

    def forward(self, x):
        logits = self.fc(x) * self.temperature
        if logits.max() > 2:
            return logits.softmax(-1)
        return logits


class IndexableStack(nn.Module):  # a container module with its own __getitem__/__len__
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def __getitem__(self, i):
        return self.blocks[i]

    def __len__(self):
        return len(self.blocks)

    def forward(self, x):
        i = int(x.sum() > 0) + int(x.mean() > 1)
        return self[i](x) + self[len(self) - 1](x)


class AliasGetattr(nn.Module):  # legacy attribute names forwarded by a __getattr__ override
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.decoder = nn.Linear(4, 2)

    def __getattr__(self, name):
        aliases = {"enc": "encoder", "dec": "decoder"}
        if name in aliases:
            return super().__getattr__(aliases[name])
        return super().__getattr__(name)

    def forward(self, x):
        h = self.enc(x)
        if h.norm() > 2:
            h = torch.tanh(h)
        return self.dec(h)


class PartialActivation(nn.Module):  # activation chosen in __init__, stored as a partial
    def __init__(self):
        super().__init__()
        self.act = functools.partial(F.leaky_relu, negative_slope=0.2)
        self.gate = functools.partial(torch.clamp, min=-1.0, max=1.0)

    def forward(self, x):
        y = self.act(x)
        if y.mean() > 0.3:
            return self.gate(y)
        return y


class ClassConstants(nn.Module):
    THRESHOLD = 0.25
    MODES = ("sum", "max")

    def __init__(self):
        super().__init__()
        self.mode = self.MODES[1]

    def forward(self, x):
        pooled = x.max(-1).values if self.mode == "max" else x.sum(-1)
        if pooled.mean() > type(self).THRESHOLD:
            return pooled * 2
        return pooled


class ExpertByArgmax(nn.Module):  # hard routing: getattr(self, f"expert{i}") with i = argmax
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(4, 3)
        for i in range(3):
            setattr(self, f"expert{i}", nn.Linear(4, 4))

    def forward(self, x):  # x: (1, 4)
        probs = self.router(x).softmax(-1)
        i = probs.argmax(-1).item()
        out = getattr(self, f"expert{i}")(x)
        if probs.max() < 0.5:  # unsure router: keep the residual
            out = out + x
        return out


class TaskHeadByName(nn.Module):  # ModuleDict keyed by a name looked up from a predicted id
    TASKS = ["cls", "reg", "seg"]

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({t: nn.Linear(4, 2) for t in self.TASKS})
        self.task_id = nn.Linear(4, 3)

    def forward(self, x):
        task = self.TASKS[int(self.task_id(x).argmax())]
        out = self.heads[task](x)
        if task == "reg":
            out = out.clamp(-1, 1)
        return out


class RecursiveRefine(nn.Module):  # recursion whose depth is decided by the data
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def refine(self, x, depth):
        if depth == 0 or x.norm() < 1.0:
            return x
        return self.refine(0.6 * x + 0.1 * torch.tanh(self.fc(x)), depth - 1)

    def forward(self, x):
        return self.refine(x, 3)


class StaticHelper(nn.Module):
    @staticmethod
    def _normalize(t, eps=1e-6):
        n = t.norm(dim=-1, keepdim=True)
        if (n < eps).any():
            return t
        return t / n

    @classmethod
    def _scale(cls, t):
        return t * cls.SCALE

    SCALE = 3.0

    def forward(self, x):
        return self._scale(self._normalize(x))


def _maybe_zero_inputs():
    g = seeded(201)
    return [torch.randn(2, 4, generator=g) * (i % 3) for i in range(50)]


class ConfidentProperty(nn.Module):  # a property over a value forward() stores on self
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.last_conf = 0.0

    @property
    def confident(self):
        return self.last_conf > 0.5

    def forward(self, x):
        probs = self.fc(x).softmax(-1)
        self.last_conf = probs.max().item()
        if self.confident:
            return probs
        return probs * 0


class ConfidentMethod(nn.Module):  # the same test as a method
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.last_conf = 0.0

    def is_confident(self):
        return self.last_conf > 0.5

    def forward(self, x):
        probs = self.fc(x).softmax(-1)
        self.last_conf = probs.max().item()
        if self.is_confident():
            return probs
        return probs * 0


class GetattrState(nn.Module):  # the same value read back with getattr by name
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.last_conf = 0.0

    def forward(self, x):
        probs = self.fc(x).softmax(-1)
        self.last_conf = probs.max().item()
        if self.last_conf > 0.5:
            return probs
        return probs * 0


class DictState(nn.Module):  # ... and through the instance __dict__
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.last_conf = 0.0

    def forward(self, x):
        probs = self.fc(x).softmax(-1)
        self.last_conf = probs.max().item()
        if self.__dict__["last_conf"] > 0.5:
            return probs
        return probs * 0


class ModeBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.mode = "slow"
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if self.mode == "fast":
            return x
        return self.fc(x)


class CrossModuleMode(nn.Module):  # the parent sets a string flag on a child from the data
    def __init__(self):
        super().__init__()
        self.block = ModeBlock()

    def forward(self, x):
        self.block.mode = "fast" if x.mean() > 0 else "slow"
        return self.block(x)


class DictOfCallables(nn.Module):  # activations by name in a plain dict on the module
    def __init__(self):
        super().__init__()
        self.acts = {"relu": torch.relu, "tanh": torch.tanh, "neg": lambda t: -t}

    def forward(self, x):
        name = "relu" if x.mean() > 0.5 else ("tanh" if x.mean() > -0.5 else "neg")
        return self.acts[name](x)


CASES = {
    "temperature_property": Case(TemperatureProperty, _randn(202), 2),
    "indexable_stack": Case(IndexableStack, _randn(203), 3,
                            refused=r"data-dependent Python value in code exported as one graph \(an index"),
    "alias_getattr": Case(AliasGetattr, _randn(204), 2),
    "partial_activation": Case(PartialActivation, _randn(205), 2),
    "class_constants": Case(ClassConstants, _randn(206, (2, 5)), 2),
    "expert_by_argmax": Case(ExpertByArgmax, _randn(207), 2, dynamic=False),  # all 3 experts picked
    "task_head_by_name": Case(TaskHeadByName, _randn(208), 2),  # all 3 heads picked
    "recursive_refine": Case(RecursiveRefine, _randn(209), 4),
    "static_helper": Case(StaticHelper, _maybe_zero_inputs, 2),
    "confident_property": Case(ConfidentProperty, _randn(210), 2,
                               refused=at(r"ConfidentProperty.confident \(a property.*may read module state",
                                          "if self.confident:")),
    "confident_method": Case(ConfidentMethod, _randn(211), 2),
    "getattr_state": Case(GetattrState, _randn(214), 2),
    "dict_state": Case(DictState, _randn(215), 2,
                       refused=at(r"DictState.__dict__ \(a property", 'if self.__dict__["last_conf"] > 0.5:')),
    "cross_module_mode": Case(CrossModuleMode, _randn(212), 2,
                              refused=at("write to module state", 'self.block.mode = "fast" if x.mean() > 0')),
    "dict_of_callables": Case(DictOfCallables, _randn(213, (4,)), 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_object_protocols(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths


class GetattrThreshold(nn.Module):  # a config value read by name
    def __init__(self):
        super().__init__()
        self.thr = 0.1

    def forward(self, x):
        if x.mean() > self.thr:
            return x * 2
        return x


def test_a_config_value_read_by_getattr_is_guarded_like_an_attribute(tmp_path):
    """``getattr(self, "thr")`` is folded like ``self.thr``; changing it after compiling must raise
    ``StaleConfigError``, not answer with the old threshold (it did, silently)."""
    case = Case(GetattrThreshold, _randn(216), 2)
    assert check_case(case, tmp_path) == 2
    model = GetattrThreshold().eval()
    compiled = dycl.compile(model, torch.randn(1, 4))
    model.thr = 5.0
    with pytest.raises(dycl.StaleConfigError, match="model.thr"):
        compiled(torch.ones(1, 4))
