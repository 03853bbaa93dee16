"""Golden snippets for ``rewriter.arguments``: forward()'s parameters bound to the
example's call form, and returns flattened to tensor leaves."""

from __future__ import annotations

import torch
import torch.nn as nn
from dycl.rewriter.arguments import ReturnForm

from dycl import rewriter
from tests.rewriter.golden import golden

_SCALE = torch.ones(3)


def rewritten(model: nn.Module, example: dict, returns: ReturnForm | None = None) -> str:
    result = rewriter.rewrite(model, example=example, returns=returns)
    return result.locations.strip(result.source).strip() + "\n"




class Options(nn.Module):
    def forward(self, x, *extra, scale=_SCALE, labels=None, **options):
        if labels is not None:
            self.last_labels = labels  # never runs for a call without labels
        h = x * scale
        for e in extra:
            h = h + e
        if "bias" in options:
            h = h + options.get("bias")
        return h


def test_parameters_become_inputs_displays_and_constants():
    x, e, b = torch.randn(3), torch.randn(3), torch.randn(3)
    assert rewritten(Options(), {"x": x, "extra": (e,), "options": {"bias": b}}) == golden("""
        def forward(self, x, extra_1, options_bias, labels=None):
            h = x * scale_default
            e = extra_1
            h = h + e
            h = h + options_bias
            return h
    """)


class TwoWays(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return {"y": x}
        return {"y": -x}


def test_returns_are_flattened_to_leaves_and_rebuilt_in_plain_form():
    form = ReturnForm(lambda value: tuple(value.values()), 1, lambda names: f"{{'y': {names[0]}}}")
    assert rewritten(TwoWays(), {"x": torch.randn(3)}, form) == golden("""
        def forward(self, x):
            if x.sum() > 0:
                out, = _dycl_leaves({"y": x})
                return {'y': out}
            out_1, = _dycl_leaves({"y": -x})
            return {'y': out_1}
    """)


class EitherInput(nn.Module):
    """transformers' input check (DeBERTa, BERT): an ``elif`` chain on which input was given,
    then the name rebound below it."""

    def forward(self, input_ids=None, inputs_embeds=None):
        if input_ids is not None and inputs_embeds is not None:
            raise ValueError("You cannot specify both input_ids and inputs_embeds at the same time")
        elif input_ids is not None:
            input_shape = input_ids.size()
        elif inputs_embeds is not None:
            input_shape = inputs_embeds.size()[:-1]
        else:
            raise ValueError("You have to specify either input_ids or inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = input_ids.float()
        return inputs_embeds.view(input_shape)


def test_an_elif_decided_by_the_call_form_keeps_only_its_branch():
    """The ``elif`` taken becomes the chain's only branch although ``inputs_embeds`` is
    rebound later (its test runs before that); the rebinding ``if`` after it is decided too."""
    assert rewritten(EitherInput(), {"input_ids": torch.ones(2, 3)}) == golden("""
        def forward(self, input_ids, inputs_embeds=None):
            input_shape = input_ids.size()
            inputs_embeds = input_ids.float()
            return inputs_embeds.view(input_shape)
    """)
    assert rewritten(EitherInput(), {"inputs_embeds": torch.ones(2, 3)}) == golden("""
        def forward(self, inputs_embeds, input_ids=None):
            input_shape = inputs_embeds.size()[:-1]
            return inputs_embeds.view(input_shape)
    """)
