"""Dict displays of keyword arguments and of results read at static keys (``rewriter.dict_displays``):
the form of transformers' ``mask_kwargs = {"config": self.config, ...}`` spread into
``create_causal_mask(**mask_kwargs)``, a call dycl does not inline, and of
``causal_mask_mapping[self.config.layer_types[i]]``.

Each model agrees with eager on inputs taking several paths, in process and through the
torch-free host; a dict the rule cannot prove private is left as it was."""

from __future__ import annotations

import dataclasses
import math
import textwrap

import libcst as cst
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.rewriter.golden import after, golden

ATOL = 1e-5


@dataclasses.dataclass(frozen=True)
class BandConfig:
    width: int = 8
    window: int = 2
    kinds: tuple[str, ...] = ("full", "band", "full")
    thresholds: tuple[float, ...] = (0.0, 0.2, -0.2)


def causal_bias(config, hidden, mask=None, positions=None):
    """A mask builder in the style of a library's: keyword arguments, a config, optional tensors
    (this tiny one ignores the padding mask and the positions)."""
    n = hidden.shape[1]
    steps = torch.arange(n)
    allowed = steps[None, :] <= steps[:, None]
    return torch.zeros(n, n).masked_fill(~allowed, float("-inf"))


def banded_bias(config, hidden, mask=None, positions=None):
    n = hidden.shape[1]
    steps = torch.arange(n)
    distance = steps[:, None] - steps[None, :]
    allowed = (distance >= 0) & (distance < config.window)
    return torch.zeros(n, n).masked_fill(~allowed, float("-inf"))


class Attention(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.scale = 1 / math.sqrt(width)

    def forward(self, x, bias):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-1, -2) * self.scale + bias
        return x + self.out(scores.softmax(-1) @ v)


class BandedLM(nn.Module):
    """Gathers the mask builders' arguments in a dict, keeps the masks in a dict keyed by the
    layer kind, and skips a layer (halving the state instead) when the hidden state's mean is under its threshold."""

    def __init__(self, config: BandConfig = BandConfig()):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList(Attention(config.width) for _ in config.kinds)
        self.norm = nn.LayerNorm(config.width)

    def forward(self, x, positions=None):
        mask_args = {"config": self.config, "hidden": x, "mask": None, "positions": positions}
        masks = {"full": causal_bias(**mask_args), "band": banded_bias(**mask_args)}
        for i, layer in enumerate(self.layers):
            if x.mean() > self.config.thresholds[i]:
                x = layer(x, masks[self.config.kinds[i]])
            else:
                x = x * 0.5
        norm_args = {"weight": self.norm.weight, "bias": x.mean(dim=(0, 1)), "eps": 1e-5}
        return F.layer_norm(x, (self.config.width,), **norm_args)


def _inputs(count: int = 24) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(1 + i % 2, 5, 8, generator=generator) + (i % 5 - 2) * 0.2 for i in range(count)]


def test_golden_keyword_dicts_are_spread_and_result_dicts_read_by_key_become_variables():
    """A static entry (the config, ``None``, a parameter, a number) is written where it is read;
    ``x``, rebound by the layers after the display, is a variable bound where the display was;
    the masks (names nothing rebinds) are read as they are. The mask builders have no branch
    and are inlined with the spread keywords; ``F.layer_norm`` is a call dycl does not inline."""
    torch.manual_seed(0)
    assert after(BandedLM().eval(), "dict_displays") == golden("""
        mask_args_hidden = x
        hidden = mask_args_hidden
        n = hidden.shape[1]
        steps = torch.arange(n)
        allowed = steps[None, :] <= steps[:, None]
        out = torch.zeros(n, n).masked_fill(~allowed, -float('inf'))
        hidden_1 = mask_args_hidden
        n_1 = hidden_1.shape[1]
        steps_1 = torch.arange(n_1)
        distance = steps_1[:, None] - steps_1[None, :]
        allowed_1 = (distance >= 0) & (distance < 2)
        out_1 = torch.zeros(n_1, n_1).masked_fill(~allowed_1, -float('inf'))
        if x.mean() > 0.0:
            x = self.layers[0](x, out)
        else:
            x = x * 0.5
        if x.mean() > 0.2:
            x = self.layers[1](x, out_1)
        else:
            x = x * 0.5
        if x.mean() > -0.2:
            x = self.layers[2](x, out)
        else:
            x = x * 0.5
        norm_args_bias = x.mean(dim=(0, 1))
        return F.layer_norm(x, (8,), weight=self.norm.weight, bias=norm_args_bias, eps=1e-5)
    """)


def test_keyword_dicts_holding_the_config_and_tensors_compile_and_agree(tmp_path):
    """Before: refused (the display mixes the model's config with tensors the host would keep)."""
    torch.manual_seed(0)
    model = BandedLM().eval()
    compiled = dycl.compile(model, torch.randn(2, 5, 8))
    inputs = _inputs()
    paths = assert_equivalent(model, compiled, inputs, min_paths=3, atol=ATOL)
    assert paths >= 3, paths  # layers skipped in different combinations
    report = run_host_without_torch(compiled.save(tmp_path / "banded"), model, inputs, atol=ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def _scalarized(source: str) -> str:
    """``source`` (a function body) after the pass alone, run on a tiny model's forward."""
    from dycl.rewriter.dict_displays import DictDisplays

    body = list(cst.parse_module(textwrap.dedent(source)).body)

    class _Unit:  # the pass reads the context's namespace and the flow only for static entries
        class ctx:
            class namespace:
                @staticmethod
                def fresh(base: str) -> str:
                    return base

        class flow:
            @staticmethod
            def evaluate(node, env):
                return None

        env = None

    return cst.Module(body=DictDisplays(_Unit()).run(body)).code


def test_a_dict_that_escapes_is_written_through_or_read_before_it_is_left_as_it_was():
    """Each of these dicts is read otherwise than at a literal key or by ``**``: kept whole."""
    kept = [
        """
        d = {"a": x, "b": y}
        out = f(d)
        """,
        """
        d = {"a": x, "b": y}
        d["a"] = z
        out = d["a"] + d["b"]
        """,
        """
        d = {"a": x}
        out = d["c"]
        """,
        """
        d = {"a": x, "b": y}
        if t:
            d = {"a": y, "b": x}
        out = d["a"]
        """,
        """
        d = {"a": x}
        out = f(a=1, **d)
        """,
        """
        d = {"a": x, **other}
        out = d["a"]
        """,
        """
        d = {"a": x}
        e = {"b": d["a"], "d": d}
        out = e["b"]
        """,
    ]
    for source in kept:
        text = textwrap.dedent(source).lstrip()
        assert _scalarized(text).startswith(text.splitlines()[0]), text


def test_a_display_read_only_inside_its_branch_and_nested_displays_are_replaced():
    """``x`` is rebound after the display: its entry is a variable; ``y`` is not: read as it is."""
    assert _scalarized("""
        if t:
            d = {"a": x, "inner": {"b": y}}
            x = x + 1
            out = f(**d["inner"]) + d["a"]
        out = z
    """) == textwrap.dedent("""\
        if t:
            d_a = x
            x = x + 1
            out = f(b=y) + d_a
        out = z
    """)
